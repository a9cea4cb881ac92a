//! `strata gc [--grace-s S] [--dry-run]`: the S3 gateway's orphan collection.
//!
//! Overwrites and deletes free the data they replace themselves (guarded index commits make
//! that hold across gateways). What can still be left is the data of a PUT or part upload
//! whose gateway died before committing its index entry: data objects nothing refers to.
//! This pass lists them, and queues those older than the grace period for removal (after
//! the gateway's `gc_min_wait_s`), as radosgw's `rgw-orphan-list` plus removal does. Uploads
//! in progress record a write intent the pass respects; one older than the grace period is
//! fenced (its upload fails with 500 rather than commit data the pass collects), so
//! acknowledged data is never removed, and a grace shorter than
//! [`gateway::ORPHAN_GRACE_S_MIN`] takes `--force`.
//!
//! `strata gc --packs` runs one pass of the pack GC instead (`strata serve --packing on`):
//! packs whose logged dead share passed the threshold are rewritten without their dead
//! ranges, as the gateway's own GC loop does each period.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args as ClapArgs;

use super::AdminArgs;

/// Arguments of `strata gc`.
#[derive(ClapArgs, Debug)]
pub struct Args {
    #[command(flatten)]
    pub admin: AdminArgs,
    /// Treat uploads running longer than this as abandoned: their data is collected and, if
    /// they are in fact still running, they fail with 500 (nothing acknowledged is lost).
    /// Shorter than 600 s only with --force.
    #[arg(long, default_value_t = 3600)]
    pub grace_s: u64,
    /// Only list the orphans; remove nothing, fence nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Accept a --grace-s shorter than 600 s (uploads slower than it will fail).
    #[arg(long)]
    pub force: bool,
    /// Run one pass of the pack GC now instead (with `strata serve --packing on`): packs
    /// whose logged dead share passed --packing-gc-dead-percent are rewritten without their
    /// dead ranges; prints what it did and what the log still holds.
    #[arg(long, conflicts_with_all = ["grace_s", "dry_run", "force"])]
    pub packs: bool,
}

/// Runs one pass and prints what it found.
pub fn run(args: Args) -> Result<ExitCode> {
    let client = args.admin.client();
    if args.packs {
        let report: serde_json::Value = client.json("POST", "/api/gc/packs", b"")?;
        let status: serde_json::Value = client.json("GET", "/api/gc/packs", b"")?;
        println!(
            "packs rewritten {}, live bytes copied {}, dead bytes reclaimed {}, jobs failed {} \
             (resumed by the next pass), stale log entries removed {}; the log now holds {} dead \
             ranges ({} bytes) in {} packs, rewrites processing {}, failed {}",
            report["packs_rewritten"],
            report["bytes_copied"],
            report["bytes_reclaimed"],
            report["jobs_failed"],
            report["stale_entries_removed"],
            status["dead_ranges"],
            status["dead_bytes"],
            status["packs_with_dead"],
            status["jobs_processing"],
            status["jobs_failed"],
        );
        return Ok(ExitCode::SUCCESS);
    }
    let path = format!(
        "/api/gc?grace_s={}&dry_run={}&force={}",
        args.grace_s, args.dry_run, args.force
    );
    let report: serde_json::Value = client.json("POST", &path, b"")?;
    let orphans = report["orphans"].as_array().cloned().unwrap_or_default();
    println!(
        "data objects {}: referenced {}, awaiting GC {}, uploads in progress {}, \
         unreferenced but younger than {} s {}, orphans {} ({} bytes); \
         stale uploads fenced {}, orphans queued for removal {}, removed {}",
        report["data_objects"],
        report["referenced"],
        report["awaiting_gc"],
        report["in_flight"],
        args.grace_s,
        report["too_young"],
        orphans.len(),
        report["orphan_bytes"],
        report["intents_fenced"],
        report["queued"],
        report["removed"],
    );
    for name in &orphans {
        println!("  {}", name.as_str().unwrap_or("?"));
    }
    Ok(ExitCode::SUCCESS)
}
