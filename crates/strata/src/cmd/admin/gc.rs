//! `strata gc [--grace-s S] [--dry-run]`: the S3 gateway's orphan collection.
//!
//! Overwrites and deletes free the data they replace themselves (guarded index commits make
//! that hold across gateways). What can still be left is the data of a PUT or part upload
//! whose gateway died before committing its index entry: data objects nothing refers to.
//! This pass lists them, and removes those older than the grace period, as radosgw's
//! `rgw-orphan-list` plus removal does. Younger ones may be uploads still in progress.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args as ClapArgs;

use super::AdminArgs;

/// Arguments of `strata gc`.
#[derive(ClapArgs, Debug)]
pub struct Args {
    #[command(flatten)]
    pub admin: AdminArgs,
    /// Leave unreferenced data objects younger than this alone (an upload may still be
    /// writing them).
    #[arg(long, default_value_t = 3600)]
    pub grace_s: u64,
    /// Only list the orphans; remove nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// Runs one pass and prints what it found.
pub fn run(args: Args) -> Result<ExitCode> {
    let client = args.admin.client();
    let path = format!("/api/gc?grace_s={}&dry_run={}", args.grace_s, args.dry_run);
    let report: serde_json::Value = client.json("POST", &path, b"")?;
    let orphans = report["orphans"].as_array().cloned().unwrap_or_default();
    println!(
        "data objects {}, referenced {}, unreferenced but younger than {} s {}, orphans {} ({} bytes), removed {}",
        report["data_objects"],
        report["referenced"],
        args.grace_s,
        report["too_young"],
        orphans.len(),
        report["orphan_bytes"],
        report["removed"],
    );
    for name in &orphans {
        println!("  {}", name.as_str().unwrap_or("?"));
    }
    Ok(ExitCode::SUCCESS)
}
