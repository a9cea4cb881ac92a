//! `strata debug`: hidden helpers for tests. `crash-writer` opens (or creates) a small embedded
//! cluster and writes numbered objects, printing `ack N` once object N is durable, so a test
//! can SIGKILL it at any point and check every acknowledged object afterwards.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Args as ClapArgs, Subcommand};
use cluster::{Cluster, ClusterConfig, ClusterOptions, HostConfig, OsdConfig, PoolConfig};
use rados::Rados;

/// Arguments of `strata debug`.
#[derive(ClapArgs, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub command: DebugCommand,
}

/// Test helpers.
#[derive(Subcommand, Debug)]
pub enum DebugCommand {
    /// Verify objects VERIFY_FROM..VERIFY, then write numbered objects from START, printing `ack N`.
    CrashWriter {
        /// Data directory (a 3-host, 3-OSD cluster with pool "crash" is created if missing).
        #[arg(long)]
        data: PathBuf,
        /// Objects VERIFY_FROM..VERIFY must read back intact first (prints `verified VERIFY`).
        #[arg(long, default_value_t = 0)]
        verify: u64,
        /// First object to verify.
        #[arg(long, default_value_t = 0)]
        verify_from: u64,
        /// First object to write.
        #[arg(long, default_value_t = 0)]
        start: u64,
        /// Objects to write (then exit cleanly); unlimited when absent.
        #[arg(long)]
        count: Option<u64>,
    },
}

/// Runs `strata debug`.
pub fn run(args: Args) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    match args.command {
        DebugCommand::CrashWriter {
            data,
            verify,
            verify_from,
            start,
            count,
        } => runtime.block_on(crash_writer(data, verify_from..verify, start, count)),
    }
}

/// The crash writer's cluster: 3 hosts with one 64 MiB OSD each, pool "crash" of 3 replicas.
pub fn crash_config() -> ClusterConfig {
    let mut config = ClusterConfig::empty();
    config.scrub_interval_s = 0;
    for id in 0..3 {
        let host = format!("host{id}");
        config.hosts.push(HostConfig { name: host.clone() });
        config.osds.push(OsdConfig {
            id,
            host,
            device: format!("file:osd.{id}.img:64M"),
            size: None,
            class: "hdd".into(),
            weight: None,
            min_alloc_size: 4096,
            emulation: None,
            data_cache_size: None,
        });
    }
    config.pools.push(PoolConfig {
        name: "crash".into(),
        size: 3,
        min_size: None,
        pg_num: 8,
        device_class: None,
        crush_rule: None,
        erasure: None,
    });
    config
}

/// The bytes of object `n`: a length and content derived from `n` alone.
pub fn object_bytes(n: u64) -> Vec<u8> {
    let length = 1 + (n.wrapping_mul(7919) % 20_000) as usize;
    let mut state = n.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xdead_beef;
    (0..length)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

async fn crash_writer(
    data: PathBuf,
    verify: std::ops::Range<u64>,
    start: u64,
    count: Option<u64>,
) -> Result<ExitCode> {
    let cluster = Cluster::open_or_create(&data, crash_config(), ClusterOptions::default())
        .await
        .with_context(|| format!("opening {}", data.display()))?;
    let io = cluster.io_ctx("crash").await?;
    let mut out = std::io::stdout().lock();
    let verified = verify.end;
    for n in verify {
        let name = format!("obj-{n}");
        let read = io
            .read_full(&name)
            .await
            .with_context(|| format!("acknowledged object {name} is unreadable"))?;
        if read != object_bytes(n) {
            bail!(
                "acknowledged object {name} differs: {} bytes read, {} written",
                read.len(),
                object_bytes(n).len()
            );
        }
    }
    writeln!(out, "verified {verified}")?;
    out.flush()?;
    let end = count.map_or(u64::MAX, |count| start + count);
    for n in start..end {
        io.write_full(&format!("obj-{n}"), &object_bytes(n))
            .await
            .with_context(|| format!("writing obj-{n}"))?;
        writeln!(out, "ack {n}")?;
        out.flush()?;
    }
    drop(io);
    cluster.shutdown().await?;
    Ok(ExitCode::SUCCESS)
}
