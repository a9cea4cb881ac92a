//! `strata status`: health, epoch, OSDs, pools, PG states, space, recovery and the client I/O
//! and recovery rates of the last seconds, as `ceph -s`.

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
    for entry in &status.tiers {
        let (config, stats) = (&entry.config, &entry.stats);
        println!(
            "    tier: {} over {}, {}{}, admission {}, {} objects ({}) of {} target, {} dirty, hit ratio {:.3}",
            config.cache_pool,
            config.base_pool,
            config.mode.name(),
            if config.overlay { ", overlay" } else { ", no overlay" },
            config.settings.tier_admission.name(),
            stats.objects,
            human_bytes(stats.cached_bytes),
            stats.capacity_objects,
            stats.dirty_objects,
            stats.hit_ratio()
        );
    }
    if let Some(io) = &status.io {
        print!("{}", io_lines(io, status.recovery.pgs_pending > 0));
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

/// Bytes per second as `ceph -s` writes them (`12 MiB/s`, `0 B/s`).
fn per_second(bytes_per_s: f64) -> String {
    format!("{}/s", human_bytes(bytes_per_s.round() as u64))
}

/// The `io:` section: client reads and writes at the OSDs (writes counted on each
/// replica), S3 requests, and recovery while PGs recover (or copies were made).
fn io_lines(io: &server::rates::Rates, recovering: bool) -> String {
    let mut out = String::from("  io:\n");
    out.push_str(&format!(
        "    client:   {} rd, {} wr, {:.0} op/s rd, {:.0} op/s wr (at the OSDs; writes on each replica)\n",
        per_second(io.read_bytes_per_s),
        per_second(io.write_bytes_per_s),
        io.read_ops_per_s,
        io.write_ops_per_s
    ));
    if io.s3_requests_per_s > 0.0 || io.s3_server_errors_per_s > 0.0 {
        out.push_str(&format!(
            "    s3:       {:.1} req/s, {:.1} ms mean, {:.1} 5xx/s\n",
            io.s3_requests_per_s, io.s3_latency_ms_mean, io.s3_server_errors_per_s
        ));
    }
    if recovering || io.recovery_objects_per_s > 0.0 {
        out.push_str(&format!(
            "    recovery: {}, {:.0} objects/s\n",
            per_second(io.recovery_bytes_per_s),
            io.recovery_objects_per_s
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_reads_as_ceph_s() {
        let io = server::rates::Rates {
            read_bytes_per_s: 2.0 * 1024.0 * 1024.0,
            write_ops_per_s: 12.0,
            recovery_objects_per_s: 3.0,
            recovery_bytes_per_s: 1024.0,
            ..Default::default()
        };
        let text = io_lines(&io, false);
        assert!(
            text.contains("client:   2.0 MiB/s rd, 0 B/s wr, 0 op/s rd, 12 op/s wr"),
            "{text}"
        );
        assert!(text.contains("recovery: 1.0 KiB/s, 3 objects/s"), "{text}");
        assert!(!text.contains("s3:"), "{text}");
    }
}
