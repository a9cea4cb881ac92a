//! `strata bench balance`: our balancer against `osdmaptool --upmap --upmap-deviation 1
//! --upmap-max 10000` on the same osdmap, both measured in this run. osdmaptool's commands are
//! read back and applied to the raw CRUSH sets to compute its final distribution and movement.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context as _;
use balancer::problem::{apply_upmap_items, moved_shards};
use balancer::{BalanceConfig, Distribution, PgId, Problem};

use crate::cmd::balance::{load, warn_skipped};

/// The seed's 60-OSD cluster (osdmaptool wants a file: written to a temporary one when no
/// map is given, so the command works outside the checkout).
const DEFAULT_MAP_NAME: &str = "om_c5x12_pool1_pg2048.bin";
const DEFAULT_MAP: &[u8] =
    include_bytes!("../../../../../fixtures/crush-vectors/osdmap/om_c5x12_pool1_pg2048.bin");

/// Balancer result and time against osdmaptool --upmap on the same osdmap.
#[derive(clap::Args)]
pub struct Args {
    /// Binary osdmaps (default: the seed's 60-OSD cluster).
    #[arg(value_name = "MAP")]
    pub maps: Vec<PathBuf>,
    /// osdmaptool binary.
    #[arg(long, default_value = "osdmaptool")]
    pub osdmaptool: PathBuf,
    /// Instead of maps, balance a generated cluster of OSDS OSDs (10 per host, weights 1-3)
    /// and PGS PGs x 3 replicas, e.g. `500x10000` (no peer: osdmaptool needs an osdmap).
    #[arg(long, value_name = "OSDSxPGS")]
    pub generate: Option<String>,
    /// Seed of the generated cluster.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Instead of maps, issue 38's figure: multi-pool maps built here with crushtool and
    /// osdmaptool (an EC pool as wide as the hosts, device classes of unequal size, a pool
    /// over one rack, a two-take rule), per pool and in total against osdmaptool; strata's
    /// upmaps must survive `osdmaptool --upmap-cleanup`.
    #[arg(long)]
    pub multi_pool: bool,
    /// crushtool binary (with --multi-pool).
    #[arg(long, default_value = "crushtool")]
    pub crushtool: PathBuf,
    /// With --multi-pool: osdmaptool's --upmap-deviation and strata's bounded mode at the
    /// same N (moves compared like for like), beside strata's tightest plan.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub deviation: u32,
    /// Write a chart of the multi-pool figure's max deviations to this SVG file.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

/// One balancer's figures on one map.
struct Row {
    who: &'static str,
    min: usize,
    max: usize,
    stdev: f64,
    max_deviation: f64,
    max_deviation_percent: f64,
    outside: usize,
    moved: usize,
    pgs_changed: usize,
    seconds: f64,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.multi_pool {
        let tools = super::balance_pools::Tools {
            osdmaptool: args.osdmaptool.clone(),
            crushtool: args.crushtool.clone(),
        };
        return super::balance_pools::run(&tools, args.svg.as_deref(), args.deviation);
    }
    if let Some(shape) = &args.generate {
        return run_generated(shape, args.seed);
    }
    let mut _default_map = None;
    let maps = if args.maps.is_empty() {
        let dir = tempfile::tempdir().context("creating a temporary directory")?;
        let path = dir.path().join(DEFAULT_MAP_NAME);
        std::fs::write(&path, DEFAULT_MAP)
            .with_context(|| format!("writing {}", path.display()))?;
        _default_map = Some(dir);
        vec![path]
    } else {
        args.maps.clone()
    };
    println!(
        "{:<40} {:<11} {:>9} {:>6} {:>8} {:>9} {:>8} {:>7} {:>6} {:>8}",
        "map",
        "balancer",
        "min-max",
        "stdev",
        "max dev",
        "max dev%",
        "outside",
        "moved",
        "PGs",
        "time s"
    );
    for map in &maps {
        let (problem, skipped) = load(map, &[])?;
        warn_skipped(&skipped);
        let name = map
            .file_name()
            .map_or_else(|| map.display().to_string(), |n| n.to_string_lossy().into());
        let rows = [
            raw_row(&problem),
            peer_row(&problem, map, &args.osdmaptool)?,
            our_row(&problem)?,
        ];
        for row in rows {
            println!(
                "{:<40} {:<11} {:>9} {:>6.2} {:>8.2} {:>9.2} {:>8} {:>7} {:>6} {:>8.3}",
                name,
                row.who,
                format!("{}-{}", row.min, row.max),
                row.stdev,
                row.max_deviation,
                row.max_deviation_percent,
                row.outside,
                row.moved,
                row.pgs_changed,
                row.seconds
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn row(who: &'static str, problem: &Problem, up: &BTreeMap<PgId, Vec<i32>>, seconds: f64) -> Row {
    let distribution = Distribution::compute(problem, up, None);
    let summary = distribution.total().map(|t| t.summary).unwrap_or_default();
    let outside: usize = distribution
        .tables
        .iter()
        .map(|t| t.summary.outside_bounds)
        .sum();
    let mut moved = 0;
    let mut pgs_changed = 0;
    for pg in &problem.pgs {
        let set = up.get(&pg.id).unwrap_or(&pg.raw);
        moved += moved_shards(&pg.raw, set);
        pgs_changed += usize::from(set != &pg.raw);
    }
    Row {
        who,
        min: summary.min,
        max: summary.max,
        stdev: summary.stdev,
        max_deviation: summary.max_deviation,
        max_deviation_percent: summary.max_deviation_percent,
        outside,
        moved,
        pgs_changed,
        seconds,
    }
}

fn raw_row(problem: &Problem) -> Row {
    let up = problem
        .pgs
        .iter()
        .map(|pg| (pg.id, pg.raw.clone()))
        .collect();
    row("raw CRUSH", problem, &up, 0.0)
}

fn our_row(problem: &Problem) -> anyhow::Result<Row> {
    let started = Instant::now();
    let plan = balancer::balance(problem, &BalanceConfig::default())?;
    let seconds = started.elapsed().as_secs_f64();
    balancer::balance::check_plan(problem, &plan)?;
    Ok(row("strata", problem, &plan.up, seconds))
}

fn peer_row(problem: &Problem, map: &Path, osdmaptool: &Path) -> anyhow::Result<Row> {
    let out = std::env::temp_dir().join(format!("strata-bench-upmap-{}.txt", std::process::id()));
    let started = Instant::now();
    let status = super::peer_command(osdmaptool)
        .arg(map)
        .arg("--upmap")
        .arg(&out)
        .args(["--upmap-deviation", "1", "--upmap-max", "10000"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .with_context(|| format!("running {}", osdmaptool.display()))?;
    let seconds = started.elapsed().as_secs_f64();
    anyhow::ensure!(status.success(), "osdmaptool failed: {status}");
    let text =
        std::fs::read_to_string(&out).with_context(|| format!("reading {}", out.display()))?;
    let _ = std::fs::remove_file(&out);
    let mut items: BTreeMap<PgId, Vec<(i32, i32)>> = problem
        .pgs
        .iter()
        .map(|pg| (pg.id, pg.upmap_items.clone()))
        .collect();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["ceph", "osd", "pg-upmap-items", pgid, pairs @ ..] => {
                let pg: PgId = pgid.parse()?;
                let numbers: Vec<i32> =
                    pairs.iter().map(|w| w.parse()).collect::<Result<_, _>>()?;
                let list = numbers.chunks_exact(2).map(|c| (c[0], c[1])).collect();
                items.insert(pg, list);
            }
            ["ceph", "osd", "rm-pg-upmap-items", pgid] => {
                items.insert(pgid.parse()?, Vec::new());
            }
            _ => {}
        }
    }
    let up = problem
        .pgs
        .iter()
        .map(|pg| {
            let list = items.get(&pg.id).map_or(&[][..], Vec::as_slice);
            (pg.id, apply_upmap_items(&pg.raw, list))
        })
        .collect();
    Ok(row("osdmaptool", problem, &up, seconds))
}

/// Balance a generated cluster and print the figures (ours only).
fn run_generated(shape: &str, seed: u64) -> anyhow::Result<ExitCode> {
    let (osds, pgs) = shape
        .split_once('x')
        .and_then(|(o, p)| Some((o.parse::<usize>().ok()?, p.parse::<u32>().ok()?)))
        .context("--generate wants OSDSxPGS, e.g. 500x10000")?;
    let spec = balancer::generate::ClusterSpec {
        racks: 1,
        hosts_per_rack: osds.div_ceil(10),
        osds_per_host: 10.min(osds),
        weight_spread: 2.0,
        pools: vec![balancer::generate::PoolSpec {
            pg_count: pgs,
            size: 3,
            rack_limit: None,
            class: None,
        }],
        seed,
    };
    let started = Instant::now();
    let problem = balancer::generate::generate(&spec);
    let generate_s = started.elapsed().as_secs_f64();
    let raw = raw_row(&problem);
    let ours = our_row(&problem)?;
    println!(
        "generated {} OSDs, {} PGs x 3 in {generate_s:.2} s",
        problem.osds.len(),
        problem.pgs.len()
    );
    println!(
        "{:<11} {:>9} {:>6} {:>8} {:>9} {:>8} {:>7} {:>6} {:>8}",
        "balancer", "min-max", "stdev", "max dev", "max dev%", "outside", "moved", "PGs", "time s"
    );
    for row in [raw, ours] {
        println!(
            "{:<11} {:>9} {:>6.2} {:>8.2} {:>9.2} {:>8} {:>7} {:>6} {:>8.3}",
            row.who,
            format!("{}-{}", row.min, row.max),
            row.stdev,
            row.max_deviation,
            row.max_deviation_percent,
            row.outside,
            row.moved,
            row.pgs_changed,
            row.seconds
        );
    }
    Ok(ExitCode::SUCCESS)
}
