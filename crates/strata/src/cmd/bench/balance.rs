//! `strata bench balance`: our balancer against `osdmaptool --upmap --upmap-deviation 1
//! --upmap-max 10000` on the same osdmap, both measured in this run. osdmaptool's commands are
//! read back and applied to the raw CRUSH sets to compute its final distribution and movement.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use anyhow::Context as _;
use balancer::problem::{apply_upmap_items, moved_shards};
use balancer::{BalanceConfig, Distribution, PgId, Problem};

use crate::cmd::balance::{load, warn_skipped};

const DEFAULT_MAP: &str = "fixtures/crush-vectors/osdmap/om_c5x12_pool1_pg2048.bin";

/// Balancer result and time against osdmaptool --upmap on the same osdmap.
#[derive(clap::Args)]
pub struct Args {
    /// Binary osdmaps (default: the seed's 60-OSD cluster).
    #[arg(value_name = "MAP")]
    pub maps: Vec<PathBuf>,
    /// osdmaptool binary.
    #[arg(long, default_value = "osdmaptool")]
    pub osdmaptool: PathBuf,
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
    let maps = if args.maps.is_empty() {
        vec![PathBuf::from(DEFAULT_MAP)]
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
    let status = Command::new(osdmaptool)
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
