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
}

/// Runs one pass and prints what it found.
pub fn run(args: Args) -> Result<ExitCode> {
    let client = args.admin.client();
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
