//! `strata status`: health, epoch, OSDs, pools, PG states, space and recovery, as `ceph -s`.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args as ClapArgs;
use server::report::Status;

use super::{human_bytes, AdminArgs};

/// Arguments of `strata status`.
#[derive(ClapArgs, Debug)]
pub struct Args {
    #[command(flatten)]
    pub admin: AdminArgs,
    /// Print the server's JSON instead of a summary.
    #[arg(long)]
    pub json: bool,
}

/// Prints the cluster status.
pub fn run(args: Args) -> Result<ExitCode> {
    let client = args.admin.client();
    if args.json {
        let body = client.call("GET", "/status", b"")?;
        println!("{}", String::from_utf8_lossy(&body));
        return Ok(ExitCode::SUCCESS);
    }
    let status: Status = client.json("GET", "/status", b"")?;
    println!("  cluster:");
    println!("    health: {}", status.health);
    for check in &status.checks {
        println!("            {check}");
    }
    println!("    epoch:  {}", status.epoch);
    let up = status.osds.iter().filter(|o| o.up).count();
    let is_in = status.osds.iter().filter(|o| o.is_in).count();
    println!("  services:");
    println!("    osd: {} osds: {up} up, {is_in} in", status.osds.len());
    println!("  data:");
    println!(
        "    pools:   {} pools, {} pgs",
        status.pools.len(),
        status.pgs.total
    );
    println!("    objects: {} objects", status.usage.objects);
    println!(
        "    usage:   {} stored, {} allocated, {} / {} avail",
        human_bytes(status.usage.stored_bytes),
        human_bytes(status.usage.allocated_bytes),
        human_bytes(status.usage.free_bytes),
        human_bytes(status.usage.total_bytes)
    );
    println!("    pgs:");
    for (state, count) in &status.pgs.states {
        println!("             {count} {state}");
    }
    if let Some(balancer) = &status.balancer {
        let last = balancer
            .last_period
            .as_ref()
            .map(|l| format!(", last period {}: {}", l.outcome, l.detail))
            .unwrap_or_default();
        println!(
            "    balancer: {}, mode {}{last}",
            if balancer.settings.active {
                "on"
            } else {
                "off"
            },
            format!("{:?}", balancer.settings.mode).to_lowercase()
        );
    }
    if status.recovery.pgs_pending > 0 {
        println!("  progress:");
        println!(
            "    recovery: {} pgs pending, {} objects ({}) copied",
            status.recovery.pgs_pending,
            status.recovery.objects_copied,
            human_bytes(status.recovery.bytes_copied)
        );
    }
    Ok(ExitCode::SUCCESS)
}
