//! `strata balance`: pg-upmap-items that bring every OSD within [floor, ceil] of its
//! weight-proportional PG target, per pool and in total, with the fewest shards moved away from
//! raw CRUSH. All logic lives in the `balancer` crate; this module reads the map, runs it and
//! writes tables, commands, JSON and SVG.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context as _;
use balancer::cluster::{from_osdmap, SkippedPool};
use balancer::{BalanceConfig, Distribution, PgId, Plan, Problem, UpmapChange};

/// Balance PGs over OSDs with pg-upmap-items and the least data movement.
///
/// Prints the distribution before and after, the shards moved (relative to raw CRUSH), and one
/// `ceph osd pg-upmap-items PGID FROM TO [FROM TO ...]` line per changed PG with its complete
/// list of pairs (`ceph osd rm-pg-upmap-items PGID` where a PG's items are dropped).
#[derive(clap::Args)]
pub struct Args {
    /// Binary osdmap (`ceph osd getmap -o MAP`).
    #[arg(value_name = "MAP")]
    pub map: PathBuf,
    /// Balance only these pools (id or name); repeatable. Default: all pools.
    #[arg(long = "pool", value_name = "ID")]
    pub pools: Vec<String>,
    /// What to balance: shard counts, or bytes (needs --pg-stats).
    #[arg(long, value_enum, default_value_t = Mode::Count)]
    pub mode: Mode,
    /// `ceph pg dump pgs --format json` output, for bytes mode and byte columns.
    #[arg(long, value_name = "FILE")]
    pub pg_stats: Option<PathBuf>,
    /// Change at most N shards' OSD in this run, counted from the current up sets (existing
    /// upmaps stay), like osdmaptool's --upmap-max. The best plan's PG changes are applied
    /// best first while each strictly improves the balance, so the result is never worse than
    /// the current state; run again to continue.
    #[arg(long, value_name = "N")]
    pub max_moves: Option<usize>,
    /// Stop where every OSD of every pool is within N shards of its target, as Ceph's
    /// `osdmaptool --upmap-deviation N` and the mgr balancer's `upmap_max_deviation` (bare
    /// `--deviation`: Ceph's default, 5), with the fewest shards moved that reach it; no total
    /// bounds. Without it: the tightest bounds ([floor, ceil] of each target), per pool and in
    /// total. A fraction is allowed. Not combined with --max-moves.
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "5")]
    pub deviation: Option<f64>,
    /// Write the ceph commands here instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub commands: Option<PathBuf>,
    /// Write a JSON report here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write an SVG chart of per-OSD deviation before and after.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Also print one line per OSD (after balancing).
    #[arg(long)]
    pub osds: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    Count,
    Bytes,
}

/// Read a binary osdmap and build the balancer's problem for the selected pools.
pub fn load(map: &Path, pools: &[String]) -> anyhow::Result<(Problem, Vec<SkippedPool>)> {
    let bytes = std::fs::read(map).with_context(|| format!("reading {}", map.display()))?;
    let osdmap = osdmap::OsdMap::decode(&bytes)
        .with_context(|| format!("decoding osdmap {}", map.display()))?;
    let mut ids = Vec::new();
    for pool in pools {
        let id = match pool.parse::<i64>() {
            Ok(id) => id,
            Err(_) => osdmap
                .pool_by_name(pool)
                .map(|p| p.id)
                .with_context(|| format!("no pool named {pool:?}"))?,
        };
        anyhow::ensure!(osdmap.pool(id).is_some(), "no pool {id}");
        ids.push(id);
    }
    Ok(from_osdmap(&osdmap, &ids))
}

/// Report skipped pools on stderr.
pub fn warn_skipped(skipped: &[SkippedPool]) {
    for pool in skipped {
        eprintln!("strata: skipping pool {}: {}", pool.id, pool.reason);
    }
}

/// Current up sets (raw CRUSH plus existing upmap items).
pub fn current_up(problem: &Problem) -> BTreeMap<PgId, Vec<i32>> {
    problem.pgs.iter().map(|pg| (pg.id, pg.up())).collect()
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let (problem, skipped) = load(&args.map, &args.pools)?;
    warn_skipped(&skipped);
    // PGs whose raw set the balancer cannot move safely stay as they are (and out of the
    // tables): the rest is balanced, and the operator learns which entries to fix.
    let (problem, aside) = balancer::set_aside(&problem);
    for pg in &aside {
        eprintln!("strata: leaving pg {} as it is: {}", pg.pg, pg.reason);
    }
    let sizes = match &args.pg_stats {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            Some(balancer::bytes::parse_pg_stats(&text)?)
        }
        None => None,
    };
    anyhow::ensure!(
        args.mode == Mode::Count || sizes.is_some(),
        "--mode bytes needs --pg-stats FILE"
    );
    let config = BalanceConfig {
        max_moves: args.max_moves,
        deviation: args.deviation,
    };
    let started = Instant::now();
    let mut plan = balancer::balance(&problem, &config)?;
    if let (Mode::Bytes, Some(sizes)) = (args.mode, &sizes) {
        plan = balancer::bytes::balance_bytes(&problem, &plan, sizes, args.max_moves);
    }
    let elapsed_s = started.elapsed().as_secs_f64();
    balancer::balance::check_plan(&problem, &plan)?;

    let before = Distribution::compute(&problem, &current_up(&problem), sizes.as_ref());
    let after = Distribution::compute(&problem, &plan.up, sizes.as_ref());
    print!("{}", report(&problem, &plan, &before, &after, elapsed_s));
    if args.osds {
        print!("{}", after.osd_text());
    }
    let commands: String = plan.changes.iter().map(|c| c.command() + "\n").collect();
    match &args.commands {
        Some(path) => std::fs::write(path, &commands)
            .with_context(|| format!("writing {}", path.display()))?,
        None => print!("{commands}"),
    }
    if let Some(path) = &args.svg {
        if let (Some(b), Some(a)) = (before.total(), after.total()) {
            let svg = balancer::svg::deviation_chart("PG shards per OSD minus target", b, a);
            std::fs::write(path, svg).with_context(|| format!("writing {}", path.display()))?;
        }
    }
    if let Some(path) = &args.json {
        let mut json = json_report(&plan, &before, &after, elapsed_s);
        json["set_aside"] = aside
            .iter()
            .map(|a| serde_json::json!({"pgid": a.pg.to_string(), "reason": a.reason}))
            .collect();
        std::fs::write(path, serde_json::to_string_pretty(&json)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The text report: tables, movement, unresolved OSDs.
pub fn report(
    problem: &Problem,
    plan: &Plan,
    before: &Distribution,
    after: &Distribution,
    elapsed_s: f64,
) -> String {
    let mut out = String::new();
    let shards: usize = problem.pgs.iter().map(|pg| pg.shard_count()).sum();
    let percent = |n: usize| 100.0 * n as f64 / shards.max(1) as f64;
    let _ = writeln!(
        out,
        "== before (current up sets)\n{}",
        before.summary_text()
    );
    let _ = writeln!(out, "== after\n{}", after.summary_text());
    let _ = writeln!(
        out,
        "shards moved vs raw CRUSH: before {} ({:.2}%), after {} ({:.2}%); shards changing OSD now: {}; PGs changed: {}",
        plan.moved_before,
        percent(plan.moved_before),
        plan.moved_after,
        percent(plan.moved_after),
        plan.shards_changed,
        plan.changes.len()
    );
    let _ = writeln!(
        out,
        "solve: {:.3} s, {} nodes, {} arcs, {} phases, {} augmenting paths{}",
        elapsed_s,
        plan.stats.nodes,
        plan.stats.arcs,
        plan.stats.phases,
        plan.stats.augmentations,
        if plan.stats.budget_exhausted {
            ", stopped by --max-moves"
        } else {
            ""
        }
    );
    if plan.violations.is_empty() {
        let _ = writeln!(
            out,
            "every OSD is within [floor, ceil] of its target, per pool and in total"
        );
    }
    // Every OSD left out by --max-moves has the same reason: one line, not one per OSD.
    let (limited, others): (Vec<_>, Vec<_>) = plan
        .violations
        .iter()
        .partition(|v| v.reason == balancer::ViolationReason::MoveLimit);
    if !limited.is_empty() {
        let mut osds: Vec<i32> = limited.iter().map(|v| v.osd).collect();
        osds.sort_unstable();
        osds.dedup();
        let list: Vec<String> = osds.iter().map(|o| format!("osd.{o}")).collect();
        let _ = writeln!(
            out,
            "unresolved: {} OSDs outside their bounds because --max-moves stopped the run (run again to continue): {}",
            osds.len(),
            list.join(" ")
        );
    }
    for v in others {
        let scope = v.pool.map_or("total".to_string(), |p| format!("pool {p}"));
        let _ = writeln!(
            out,
            "unresolved: osd.{} {scope}: {} shards, bounds [{}, {}]: {:?}",
            v.osd, v.count, v.bounds.low, v.bounds.high, v.reason
        );
    }
    out
}

fn summary_json(distribution: &Distribution) -> serde_json::Value {
    let tables: Vec<serde_json::Value> = distribution
        .tables
        .iter()
        .map(|t| {
            let s = &t.summary;
            serde_json::json!({
                "scope": match t.scope { balancer::Scope::Pool(p) => p.to_string(), balancer::Scope::Total => "total".into() },
                "osds": s.osds, "shards": s.shards, "min": s.min, "max": s.max, "mean": s.mean,
                "stdev": s.stdev, "max_deviation": s.max_deviation,
                "max_deviation_percent": s.max_deviation_percent, "gap_percent": s.gap_percent,
                "outside_bounds": s.outside_bounds,
                "per_osd": t.rows.iter().map(|r| serde_json::json!({"osd": r.osd, "count": r.count, "target": r.target, "bytes": r.bytes})).collect::<Vec<_>>(),
            })
        })
        .collect();
    serde_json::Value::Array(tables)
}

fn json_report(
    plan: &Plan,
    before: &Distribution,
    after: &Distribution,
    elapsed_s: f64,
) -> serde_json::Value {
    let changes: Vec<serde_json::Value> = plan
        .changes
        .iter()
        .map(|c| match c {
            UpmapChange::Set { pg, items } => {
                serde_json::json!({"pgid": pg.to_string(), "items": items})
            }
            UpmapChange::Remove { pg } => {
                serde_json::json!({"pgid": pg.to_string(), "remove": true})
            }
        })
        .collect();
    let violations: Vec<serde_json::Value> = plan
        .violations
        .iter()
        .map(|v| {
            serde_json::json!({"osd": v.osd, "pool": v.pool, "count": v.count,
                "low": v.bounds.low, "high": v.bounds.high, "reason": format!("{:?}", v.reason)})
        })
        .collect();
    serde_json::json!({
        "before": summary_json(before),
        "after": summary_json(after),
        "moved_before": plan.moved_before,
        "moved_after": plan.moved_after,
        "shards_changed": plan.shards_changed,
        "changes": changes,
        "violations": violations,
        "solve_seconds": elapsed_s,
    })
}
