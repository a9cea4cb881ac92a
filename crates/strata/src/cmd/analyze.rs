//! `strata analyze`: per-OSD PG shard counts per pool and in total against weight-proportional
//! targets (seed 004's tables), for raw CRUSH and for the current up sets (with upmaps).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use balancer::Distribution;

use super::balance::{current_up, load, warn_skipped};

/// Per-OSD PG distribution of an osdmap against weight-proportional targets.
#[derive(clap::Args)]
pub struct Args {
    /// Binary osdmap (`ceph osd getmap -o MAP`).
    #[arg(value_name = "MAP")]
    pub map: PathBuf,
    /// Only these pools (id or name); repeatable. Default: all pools.
    #[arg(long = "pool", value_name = "ID")]
    pub pools: Vec<String>,
    /// Write an SVG chart of per-OSD deviation: raw CRUSH against the current up sets.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Also print one line per OSD.
    #[arg(long)]
    pub osds: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let (problem, skipped) = load(&args.map, &args.pools)?;
    warn_skipped(&skipped);
    let raw_up = problem
        .pgs
        .iter()
        .map(|pg| (pg.id, pg.raw.clone()))
        .collect();
    let raw = Distribution::compute(&problem, &raw_up, None);
    let current = Distribution::compute(&problem, &current_up(&problem), None);
    let upmapped = problem
        .pgs
        .iter()
        .filter(|pg| !pg.upmap_items.is_empty())
        .count();
    println!("== raw CRUSH\n{}", raw.summary_text());
    if upmapped > 0 {
        println!(
            "== current up sets ({upmapped} PGs with pg_upmap_items)\n{}",
            current.summary_text()
        );
    }
    if args.osds {
        print!("{}", current.osd_text());
    }
    if let Some(path) = &args.svg {
        if let (Some(before), Some(after)) = (raw.total(), current.total()) {
            let title = "PG shards per OSD minus target: raw CRUSH (top), current (bottom)";
            let svg = balancer::svg::deviation_chart(title, before, after);
            std::fs::write(path, svg).with_context(|| format!("writing {}", path.display()))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
