//! `strata scrub [POOL] [--repair]`: deep scrub comparing replicas.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args as ClapArgs;

use super::client::segment;
use super::AdminArgs;

/// Arguments of `strata scrub`.
#[derive(ClapArgs, Debug)]
pub struct Args {
    #[command(flatten)]
    pub admin: AdminArgs,
    /// Scrub only this pool. Default: every pool.
    pub pool: Option<String>,
    /// Repair bad copies from the majority of the replicas that hold the object.
    #[arg(long)]
    pub repair: bool,
}

/// Scrubs; exits 1 when inconsistencies remain.
pub fn run(args: Args) -> Result<ExitCode> {
    let client = args.admin.client();
    let mut path = format!("/api/scrub?repair={}", args.repair);
    if let Some(pool) = &args.pool {
        path.push_str(&format!("&pool={}", segment(pool)));
    }
    let report: serde_json::Value = client.json("POST", &path, b"")?;
    println!(
        "scrubbed {} pgs, {} objects: {}",
        report["pgs"],
        report["objects"],
        if report["clean"].as_bool() == Some(true) {
            "clean"
        } else {
            "INCONSISTENT"
        }
    );
    let mut unrepaired = false;
    for item in report["inconsistencies"].as_array().into_iter().flatten() {
        let repaired = item["repaired"].as_bool() == Some(true);
        unrepaired |= !repaired;
        println!(
            "  pg {} object {} osd.{}: {}{}",
            item["pg"].as_str().unwrap_or("?"),
            item["object"].as_str().unwrap_or("?"),
            item["osd"],
            item["kind"].as_str().unwrap_or("?"),
            if repaired { " (repaired)" } else { "" }
        );
    }
    for lost in report["lost"].as_array().into_iter().flatten() {
        unrepaired = true;
        println!("  lost: {}", lost.as_str().unwrap_or("?"));
    }
    Ok(if unrepaired {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
