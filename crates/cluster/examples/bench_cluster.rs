//! Object write and read throughput and latency of the embedded cluster, as `rados bench`
//! measures a Ceph pool: 4 KiB and 4 MiB objects, a given concurrency and replica count.
//!
//! ```text
//! cargo run -p cluster --release --example bench_cluster -- \
//!     [--replicas 3] [--concurrency 16] [--seconds 5] [--dir PATH] [--profile nvme] [--no-durable]
//! ```
//!
//! The cluster has one OSD per host on a sparse file under `--dir` (a temporary directory by
//! default), `--replicas` hosts (at least 1), every device optionally emulated (`--profile`).
//! Each size gets a write phase (`--seconds`, fresh objects, 4 MiB objects cycle over a bounded
//! set to bound disk use), then a read phase over the objects written.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use cluster::{Cluster, ClusterConfig, ClusterOptions, HostConfig, OsdConfig, PoolConfig};
use rados::IoCtx;

struct Args {
    replicas: u32,
    concurrency: usize,
    seconds: f64,
    dir: Option<std::path::PathBuf>,
    profile: Option<String>,
    durable: bool,
}

fn parse_args() -> Result<Args> {
    let mut args = Args {
        replicas: 3,
        concurrency: 16,
        seconds: 5.0,
        dir: None,
        profile: None,
        durable: true,
    };
    let mut words = std::env::args().skip(1);
    while let Some(word) = words.next() {
        let mut value = || {
            words
                .next()
                .with_context(|| format!("{word} needs a value"))
        };
        match word.as_str() {
            "--replicas" => args.replicas = value()?.parse()?,
            "--concurrency" => args.concurrency = value()?.parse()?,
            "--seconds" => args.seconds = value()?.parse()?,
            "--dir" => args.dir = Some(value()?.into()),
            "--profile" => args.profile = Some(value()?),
            "--no-durable" => args.durable = false,
            "-h" | "--help" => {
                println!("bench_cluster [--replicas N] [--concurrency N] [--seconds S] [--dir PATH] [--profile nvme|ssd-sata|hdd-10k|hdd-7200] [--no-durable]");
                std::process::exit(0);
            }
            other => bail!("unknown argument {other}"),
        }
    }
    if args.replicas == 0 || args.concurrency == 0 {
        bail!("--replicas and --concurrency must be > 0");
    }
    Ok(args)
}

fn config(args: &Args) -> ClusterConfig {
    let mut config = ClusterConfig::empty();
    config.scrub_interval_s = 0;
    config.durable = args.durable;
    for id in 0..args.replicas as i32 {
        let host = format!("host{id}");
        config.hosts.push(HostConfig { name: host.clone() });
        config.osds.push(OsdConfig {
            id,
            host,
            device: format!("file:osd.{id}.img:16G"),
            size: None,
            class: "ssd".into(),
            weight: Some(1.0),
            min_alloc_size: 4096,
            emulation: args.profile.clone(),
        });
    }
    config.pools.push(PoolConfig {
        name: "bench".into(),
        size: args.replicas,
        min_size: None,
        pg_num: 64,
        device_class: None,
        crush_rule: None,
    });
    config
}

/// Latencies (µs) and count of one phase.
struct Phase {
    latencies_us: Vec<u64>,
    elapsed: Duration,
}

impl Phase {
    fn row(&mut self, size_bytes: usize, op: &str) -> String {
        self.latencies_us.sort_unstable();
        let ops = self.latencies_us.len();
        let percentile = |p: f64| {
            let index = ((ops as f64 * p) as usize).min(ops.saturating_sub(1));
            self.latencies_us.get(index).copied().unwrap_or(0) as f64 / 1000.0
        };
        let seconds = self.elapsed.as_secs_f64();
        format!(
            "{:>7} {:>6} {:>10.0} {:>10.1} {:>10.2} {:>10.2} {:>10.2} {:>8}",
            if size_bytes >= 1 << 20 {
                format!("{}M", size_bytes >> 20)
            } else {
                format!("{}K", size_bytes >> 10)
            },
            op,
            ops as f64 / seconds,
            (ops * size_bytes) as f64 / seconds / (1 << 20) as f64,
            self.latencies_us.iter().sum::<u64>() as f64 / ops.max(1) as f64 / 1000.0,
            percentile(0.5),
            percentile(0.99),
            ops,
        )
    }
}

/// Runs `concurrency` workers doing `op(index)` until `seconds` pass (or `limit` ops).
async fn phase<F, Fut>(concurrency: usize, seconds: f64, limit: u64, op: F) -> Result<Phase>
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = rados::Result<()>> + Send,
{
    let op = Arc::new(op);
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(seconds);
    let mut workers = Vec::new();
    for _ in 0..concurrency {
        let op = Arc::clone(&op);
        let next = Arc::clone(&next);
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            while Instant::now() < deadline {
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= limit {
                    break;
                }
                let begun = Instant::now();
                op(index).await?;
                latencies.push(begun.elapsed().as_micros() as u64);
            }
            Ok::<_, rados::RadosError>(latencies)
        }));
    }
    let mut latencies_us = Vec::new();
    for worker in workers {
        latencies_us.extend(worker.await??);
    }
    Ok(Phase {
        latencies_us,
        elapsed: started.elapsed(),
    })
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = parse_args()?;
    let temp = tempfile::tempdir()?;
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| temp.path().to_path_buf());
    let options = ClusterOptions {
        background: false,
        ..ClusterOptions::default()
    };
    let cluster = Cluster::create(&dir, config(&args), options).await?;
    let pool = cluster.pool("bench")?;
    println!(
        "embedded cluster: {} replicas, concurrency {}, {} s per phase, devices {} under {}{}",
        args.replicas,
        args.concurrency,
        args.seconds,
        args.profile.as_deref().unwrap_or("plain files"),
        dir.display(),
        if args.durable { "" } else { ", NOT durable" }
    );
    println!(
        "{:>7} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8}",
        "size", "op", "ops/s", "MiB/s", "lat ms", "p50 ms", "p99 ms", "ops"
    );
    for size_bytes in [4usize << 10, 4 << 20] {
        let data = Arc::new(vec![0x5au8; size_bytes]);
        // Bound the data written: 4 MiB objects cycle over 256 names (1 GiB per replica).
        let names = if size_bytes >= 1 << 20 { 256 } else { u64::MAX };
        let writer = pool.clone();
        let payload = Arc::clone(&data);
        let mut write = phase(args.concurrency, args.seconds, u64::MAX, move |index| {
            let pool = writer.clone();
            let payload = Arc::clone(&payload);
            async move {
                pool.write_full(&format!("obj-{size_bytes}-{}", index % names), &payload)
                    .await
            }
        })
        .await?;
        println!("{}", write.row(size_bytes, "write"));
        let written = (write.latencies_us.len() as u64).min(names);
        let reader = pool.clone();
        let mut read = phase(args.concurrency, args.seconds, u64::MAX, move |index| {
            let pool = reader.clone();
            async move {
                let data = pool
                    .read_full(&format!("obj-{size_bytes}-{}", index % written.max(1)))
                    .await?;
                assert_eq!(data.len(), size_bytes);
                Ok(())
            }
        })
        .await?;
        println!("{}", read.row(size_bytes, "read"));
    }
    for stats in cluster.osd_stats() {
        println!(
            "osd.{} device: {} | object ops: {} reads, {} writes",
            stats.id, stats.device, stats.ops.read.ops, stats.ops.write.ops
        );
    }
    drop(pool);
    cluster.shutdown().await?;
    Ok(())
}
