//! `strata stats [--top N]`: the last completed statistics period of a running server (every
//! `stats_period_s` of its cluster config): per-OSD load of that period and the most accessed
//! objects, as `ceph osd perf` and the hit sets a cache tier keeps.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args as ClapArgs;
use server::report::PeriodReport;

use super::{human_bytes, AdminArgs};

/// Arguments of `strata stats`.
#[derive(ClapArgs, Debug)]
pub struct Args {
    #[command(flatten)]
    pub admin: AdminArgs,
    /// How many of the most accessed objects to list.
    #[arg(long, default_value_t = 20)]
    pub top: usize,
    /// Print the server's JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// Prints the last period.
pub fn run(args: Args) -> Result<ExitCode> {
    let client = args.admin.client();
    let path = format!("/api/stats?top={}", args.top);
    if args.json {
        let body = client.call("GET", &path, b"")?;
        println!("{}", String::from_utf8_lossy(&body));
        return Ok(ExitCode::SUCCESS);
    }
    let report: PeriodReport = client.json("GET", &path, b"")?;
    let Some(period) = report.period else {
        if report.stats_period_s == 0 {
            println!("statistics periods are off (stats_period_s = 0 in cluster.toml)");
        } else {
            println!(
                "no statistics period has ended yet (one every {} s)",
                report.stats_period_s
            );
        }
        return Ok(ExitCode::SUCCESS);
    };
    let length_s = period.end_ns.saturating_sub(period.start_ns) as f64 / 1e9;
    println!(
        "period of {length_s:.1} s (stats_period_s {})",
        report.stats_period_s
    );
    println!(
        "{:<4} {:>8} {:>8} {:>10} {:>10} {:>6} {:>4} {:>6} {:>9} {:>9} {:>9} {:>9}",
        "OSD",
        "RD_OPS",
        "WR_OPS",
        "RD",
        "WR",
        "BUSY%",
        "QD",
        "QD_MAX",
        "RD_P50us",
        "RD_P99us",
        "WR_P50us",
        "WR_P99us"
    );
    for osd in &period.osds {
        println!(
            "{:<4} {:>8} {:>8} {:>10} {:>10} {:>6.1} {:>4} {:>6} {:>9.0} {:>9.0} {:>9.0} {:>9.0}",
            osd.id,
            osd.read_ops,
            osd.write_ops,
            human_bytes(osd.read_bytes),
            human_bytes(osd.write_bytes),
            100.0 * osd.busy_fraction,
            osd.queue_depth,
            osd.queue_depth_max,
            osd.read_latency_us_p50,
            osd.read_latency_us_p99,
            osd.write_latency_us_p50,
            osd.write_latency_us_p99,
        );
    }
    println!(
        "objects accessed: {} tracked, {} reads and {} writes untracked (beyond access_objects_max)",
        period.objects_tracked, period.untracked_reads, period.untracked_writes
    );
    if !period.objects.is_empty() {
        println!(
            "{:<16} {:>8} {:>8} {:>10} {:>10}  OBJECT",
            "POOL", "READS", "WRITES", "RD", "WR"
        );
        for object in &period.objects {
            println!(
                "{:<16} {:>8} {:>8} {:>10} {:>10}  {}",
                object.pool,
                object.reads,
                object.writes,
                human_bytes(object.read_bytes),
                human_bytes(object.write_bytes),
                object.object.escape_debug()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
