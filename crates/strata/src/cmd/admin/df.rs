//! `strata df`: cluster space (stored, allocated, data-hole %, metadata) and pools.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args as ClapArgs;
use server::report::{PoolEntry, Usage};

use super::{human_bytes, AdminArgs};

/// Arguments of `strata df`.
#[derive(ClapArgs, Debug)]
pub struct Args {
    #[command(flatten)]
    pub admin: AdminArgs,
    /// Print the server's JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

#[derive(serde::Deserialize)]
struct Df {
    usage: Usage,
    pools: Vec<PoolEntry>,
    /// S3 data replaced or deleted, waiting for the gateway's GC (absent without S3).
    #[serde(default)]
    gc: Option<gateway::GcBacklog>,
    /// Dead ranges of S3 pack objects awaiting the pack GC (absent without S3).
    #[serde(default)]
    packs: Option<gateway::PackGcStatus>,
}

/// Prints space usage.
pub fn run(args: Args) -> Result<ExitCode> {
    let client = args.admin.client();
    if args.json {
        let body = client.call("GET", "/api/df", b"")?;
        println!("{}", String::from_utf8_lossy(&body));
        return Ok(ExitCode::SUCCESS);
    }
    let Df {
        usage,
        pools,
        gc,
        packs,
    } = client.json("GET", "/api/df", b"")?;
    println!("--- RAW STORAGE ---");
    println!(
        "{:>10} {:>10} {:>10} {:>10} {:>11} {:>10} {:>10}",
        "SIZE", "AVAIL", "STORED", "ALLOCATED", "DATA-HOLE%", "METADATA", "META-FILES"
    );
    println!(
        "{:>10} {:>10} {:>10} {:>10} {:>11.2} {:>10} {:>10}",
        human_bytes(usage.total_bytes),
        human_bytes(usage.free_bytes),
        human_bytes(usage.stored_bytes),
        human_bytes(usage.allocated_bytes),
        100.0 * usage.data_hole_fraction,
        human_bytes(usage.metadata_bytes),
        human_bytes(usage.metadata_file_bytes),
    );
    println!(
        "objects: {} ({} replicas)",
        usage.objects, usage.object_replicas
    );
    if let Some(gc) = gc {
        println!(
            "awaiting GC: {} ({} S3 data objects replaced or deleted; removed after \
             gc_min_wait_s, at once from nearfull on)",
            human_bytes(gc.bytes),
            gc.objects
        );
    }
    if let Some(packs) = packs {
        println!(
            "packs: {} dead in {} ranges of {} packs awaiting the pack GC; rewrites \
             processing {}, failed {}, complete {}",
            human_bytes(packs.dead_bytes),
            packs.dead_ranges,
            packs.packs_with_dead,
            packs.jobs_processing,
            packs.jobs_failed,
            packs.jobs_complete
        );
    }
    println!("--- POOLS ---");
    println!(
        "{:<24} {:>4} {:>4} {:>9} {:>9} {:>10} {:>10} {:>11} {:>10} {:>13} {:>11}",
        "POOL",
        "ID",
        "SIZE",
        "OBJECTS",
        "DEGRADED",
        "STORED",
        "ALLOCATED",
        "DATA-HOLE%",
        "METADATA",
        "QUOTA-OBJECTS",
        "QUOTA-BYTES"
    );
    for pool in pools {
        println!(
            "{:<24} {:>4} {:>4} {:>9} {:>9} {:>10} {:>10} {:>11.2} {:>10} {:>13} {:>11}",
            pool.name,
            pool.id,
            pool.size,
            pool.objects,
            pool.degraded_objects,
            human_bytes(pool.stored_bytes),
            human_bytes(pool.allocated_bytes),
            100.0 * pool.data_hole_fraction,
            human_bytes(pool.metadata_bytes),
            // As `ceph df detail`: N/A where the pool has no quota.
            match pool.quota_max_objects {
                0 => "N/A".to_string(),
                objects => objects.to_string(),
            },
            match pool.quota_max_bytes {
                0 => "N/A".to_string(),
                bytes => human_bytes(bytes),
            },
        );
    }
    Ok(ExitCode::SUCCESS)
}
