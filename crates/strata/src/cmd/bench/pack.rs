//! `strata bench pack` (issue 39, seed 002's space figures): what small-object packing does to
//! the space the cluster spends, with packing off as the peer in the same run.
//!
//! Each configuration gets its own embedded cluster (R hosts of one OSD, durable) and an S3
//! gateway over HTTP in this process; C clients PUT N objects of one size; the pools' space
//! then comes from the same statistics `strata df` shows:
//! - **holes**: allocated device bytes over all replicas minus stored bytes x replicas, in
//!   the data pool (the allocation unit's padding), per object size, packing off and on;
//! - **metadata**: onode and omap bytes of the data and index pools at 4 KiB, packing off and
//!   on at each group count (the members per pack reached are printed, with how many groups
//!   closed on their count, their bytes or their wait: groups form from the PUTs in flight
//!   together for one primary OSD, so they are capped by concurrency over the OSDs);
//! - **GC**: half of the packed 4 KiB objects deleted, then one GC pass (the pack GC and the
//!   removal of the packs it retired, as the gateway's own loop does each period, with no
//!   wait), timing GETs of the other half while it runs: the share of the deleted bytes
//!   given back, and GET latency before and during the pass.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use cluster::{Cluster, ClusterOptions};

use super::load;
use super::s3_client::{sha256_hex, S3Connection};

/// Space spent on small objects, packing off against on.
#[derive(clap::Args, Clone)]
pub struct Args {
    /// Objects PUT per configuration.
    #[arg(long, default_value_t = 20_000)]
    pub objects: u64,
    /// Object sizes of the hole figure (K, M suffixes), comma separated (the seed's).
    #[arg(long, value_delimiter = ',', default_value = "5K,66K,210K")]
    pub sizes: Vec<String>,
    /// Objects per pack (group_count_max) of the metadata figure, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "2,5,20,50,100")]
    pub group_counts: Vec<usize>,
    /// Concurrent clients (one connection each).
    #[arg(long, default_value_t = 64)]
    pub concurrency: usize,
    /// Replicas of every pool (and hosts of one OSD each).
    #[arg(long, default_value_t = 3)]
    pub replicas: u32,
    /// Objects below this size are packed (the hole figure's sizes must be below it).
    #[arg(long, default_value = "256K")]
    pub object_max: String,
    /// The longest a group waits for more members, in microseconds.
    #[arg(long, default_value_t = gateway::PackingConfig::default().group_wait_us)]
    pub group_wait_us: u64,
    /// Group waits of the sweep (5 KiB objects, packing on, one configuration each; none:
    /// no sweep), in microseconds, comma separated.
    #[arg(long, value_delimiter = ',')]
    pub sweep_waits_us: Vec<u64>,
    /// Objects per pack (group_count_max) of the sweep, comma separated: every wait is
    /// run with each.
    #[arg(long, value_delimiter = ',', default_value = "32")]
    pub sweep_counts: Vec<usize>,
    /// Only the sweep (no hole, metadata or GC figures).
    #[arg(long)]
    pub sweep_only: bool,
    /// Size of each OSD's sparse file (only what is written takes disk space: 20,000
    /// objects of 210 KiB are 4.2 GB per replica).
    #[arg(long, default_value = "12G")]
    pub osd_size: String,
    /// Parent of the run's temporary directory (removed at the end).
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
}

const BUCKET: &str = "pack";

/// One GC pass running: its report, the old packs the GC queue gave back (none with the
/// bench's wait of 0: the pass removes them itself, `old_packs_removed`) and how long it took.
type GcPass = tokio::task::JoinHandle<Result<(gateway::PackGcReport, u64, Duration)>>;

/// What one configuration left in the pools.
#[derive(Clone, Copy, Debug, Default)]
struct Space {
    stored_bytes: u64,
    allocated_bytes: u64,
    hole_bytes: u64,
    metadata_bytes: u64,
    packs_written: u64,
    objects_packed: u64,
    /// Packs written because their group reached its count, its bytes, or its wait.
    closed_count: u64,
    closed_bytes: u64,
    closed_idle: u64,
    closed_wait: u64,
    /// The PUTs: ops/s over the whole load, p50 and p99 latency.
    put_ops_per_s: f64,
    put_p50_ms: f64,
    put_p99_ms: f64,
}

pub fn run(args: Args) -> Result<ExitCode> {
    if args.objects < 2 || args.concurrency == 0 || args.replicas == 0 {
        bail!("--objects must be at least 2, --concurrency and --replicas at least 1");
    }
    let sizes: Vec<u64> = args
        .sizes
        .iter()
        .map(|s| load::parse_size(s))
        .collect::<Result<_>>()?;
    let object_max = load::parse_size(&args.object_max)?;
    if let Some(size) = sizes.iter().find(|&&s| s >= object_max) {
        bail!("size {size} is not below --object-max {object_max}: it would not be packed");
    }
    std::fs::create_dir_all(&args.dir)?;
    let temp = tempfile::Builder::new()
        .prefix("strata-bench-pack-")
        .tempdir_in(&args.dir)?;
    let runtime = tokio::runtime::Runtime::new()?;
    eprintln!(
        "strata bench pack: {} objects per configuration, concurrency {}, replicas {} (load {})",
        args.objects,
        args.concurrency,
        args.replicas,
        load::load_average()
    );
    runtime.block_on(async {
        if !args.sweep_waits_us.is_empty() {
            sweep(&args, temp.path(), object_max).await?;
        }
        if args.sweep_only {
            return Ok(());
        }
        println!("\nData holes (data pool: allocated minus stored x replicas)");
        println!(
            "{:>8} {:>8} {:>14} {:>14} {:>14} {:>8} {:>12} {:>20}",
            "size",
            "packing",
            "stored B",
            "allocated B",
            "hole B",
            "hole %",
            "objs/pack",
            "closed count/B/idle/wait"
        );
        for &size in &sizes {
            let mut off_hole = 0;
            for packing in [None, Some(32)] {
                let wait_us = args.group_wait_us;
                let space =
                    configuration(&args, temp.path(), size, packing, wait_us, object_max).await?;
                print_space(size, packing, &space);
                match packing {
                    None => off_hole = space.hole_bytes,
                    Some(_) => println!(
                        "{:>8} hole bytes with packing: {:.1}% fewer",
                        "",
                        100.0 * (1.0 - space.hole_bytes as f64 / off_hole.max(1) as f64)
                    ),
                }
            }
        }
        println!("\nMetadata (onodes and omap of the data and index pools, all replicas), 4 KiB");
        println!(
            "{:>8} {:>14} {:>12} {:>14} {:>20}",
            "groups", "metadata B", "objs/pack", "vs off", "closed count/B/idle/wait"
        );
        let wait_us = args.group_wait_us;
        let off = configuration(&args, temp.path(), 4096, None, wait_us, object_max).await?;
        println!(
            "{:>8} {:>14} {:>12} {:>14}",
            "off", off.metadata_bytes, "-", "-"
        );
        for &count in &args.group_counts {
            let space =
                configuration(&args, temp.path(), 4096, Some(count), wait_us, object_max).await?;
            println!(
                "{:>8} {:>14} {:>12.1} {:>13.1}% {:>20}",
                count,
                space.metadata_bytes,
                members_per_pack(&space),
                100.0 * (space.metadata_bytes as f64 / off.metadata_bytes.max(1) as f64 - 1.0),
                closed_by(&space)
            );
        }
        garbage_collection(&args, temp.path(), object_max).await
    })?;
    println!("\nload average at the end {}", load::load_average());
    Ok(ExitCode::SUCCESS)
}

/// How many groups closed full (count), full (bytes), with nobody else coming (idle) and on
/// their wait.
fn closed_by(space: &Space) -> String {
    format!(
        "{}/{}/{}/{}",
        space.closed_count, space.closed_bytes, space.closed_idle, space.closed_wait
    )
}

fn members_per_pack(space: &Space) -> f64 {
    space.objects_packed as f64 / space.packs_written.max(1) as f64
}

fn print_space(size: u64, packing: Option<usize>, space: &Space) {
    let hole_percent = 100.0 * space.hole_bytes as f64 / space.allocated_bytes.max(1) as f64;
    println!(
        "{:>8} {:>8} {:>14} {:>14} {:>14} {:>7.1}% {:>12} {:>20}",
        size,
        if packing.is_some() { "on" } else { "off" },
        space.stored_bytes,
        space.allocated_bytes,
        space.hole_bytes,
        hole_percent,
        if packing.is_some() {
            format!("{:.1}", members_per_pack(space))
        } else {
            "-".into()
        },
        if packing.is_some() {
            closed_by(space)
        } else {
            "-".into()
        }
    );
}

fn gateway_config(
    args: &Args,
    packing: Option<usize>,
    wait_us: u64,
    object_max: u64,
) -> gateway::GatewayConfig {
    gateway::GatewayConfig {
        pool_size: args.replicas,
        gc_min_wait_s: 0,
        gc_period_s: 3600,
        packing: gateway::PackingConfig {
            enabled: packing.is_some(),
            object_size_max_bytes: object_max,
            group_count_max: packing.unwrap_or(32),
            group_wait_us: wait_us,
            ..gateway::PackingConfig::default()
        },
        ..gateway::GatewayConfig::default()
    }
}

/// A fresh cluster and gateway; `objects` PUTs of `size`; the data and index pools' space.
async fn configuration(
    args: &Args,
    parent: &Path,
    size: u64,
    packing: Option<usize>,
    wait_us: u64,
    object_max: u64,
) -> Result<Space> {
    let dir = parent.join("cluster");
    let config = super::cluster::cluster_config(args.replicas, &args.osd_size, None, None);
    let cluster = Arc::new(Cluster::create(&dir, config, ClusterOptions::default()).await?);
    let gateway_config = gateway_config(args, packing, wait_us, object_max);
    let (server, credentials) = super::s3::serve_gateway(
        Arc::new(server::WeakCluster::new(&cluster)),
        &gateway_config,
    )
    .await?;
    let credentials = Arc::new(credentials);
    let puts = put_all(server.local_addr, &credentials, args, size).await?;
    let space = Space {
        put_ops_per_s: puts.0,
        put_p50_ms: puts.1,
        put_p99_ms: puts.2,
        ..space_of(&cluster, &server, &gateway_config).await?
    };
    server.shutdown().await;
    super::cluster::shutdown(cluster, &dir).await?;
    Ok(space)
}

fn key_of(index: u64) -> String {
    format!("obj-{index:08}")
}

/// PUTs objects 0..args.objects of `size` bytes from `args.concurrency` connections:
/// (ops/s, p50 ms, p99 ms).
async fn put_all(
    address: std::net::SocketAddr,
    credentials: &Arc<super::s3_client::Credentials>,
    args: &Args,
    size: u64,
) -> Result<(f64, f64, f64)> {
    let mut first = S3Connection::connect(address, credentials.clone()).await?;
    first.create_bucket(BUCKET).await?;
    let body = Bytes::from(vec![0x5au8; size as usize]);
    let sha = Arc::new(sha256_hex(&body));
    let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let progress = indicatif::ProgressBar::new(args.objects);
    let mut tasks = tokio::task::JoinSet::new();
    let started = Instant::now();
    for _ in 0..args.concurrency {
        let (credentials, body, sha, next, progress) = (
            credentials.clone(),
            body.clone(),
            sha.clone(),
            next.clone(),
            progress.clone(),
        );
        let objects = args.objects;
        tasks.spawn(async move {
            let mut connection = S3Connection::connect(address, credentials).await?;
            let mut latencies_ms = Vec::new();
            loop {
                let index = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if index >= objects {
                    return anyhow::Ok(latencies_ms);
                }
                let put_started = Instant::now();
                connection
                    .put(BUCKET, &key_of(index), body.clone(), &sha)
                    .await?;
                latencies_ms.push(put_started.elapsed().as_secs_f64() * 1e3);
                progress.inc(1);
            }
        });
    }
    let mut all = Vec::new();
    while let Some(done) = tasks.join_next().await {
        all.extend(done.context("a client task")??);
    }
    let took = started.elapsed().as_secs_f64();
    progress.finish_and_clear();
    let (p50, p99) = percentiles(all);
    Ok((args.objects as f64 / took.max(1e-9), p50, p99))
}

/// p50 and p99 of `latencies` (0 when empty).
fn percentiles(mut latencies: Vec<f64>) -> (f64, f64) {
    if latencies.is_empty() {
        return (0.0, 0.0);
    }
    latencies.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
    (at(0.5), at(0.99))
}

/// The group-wait sweep: 5 KiB objects, packing off once, then on at each wait and count
/// target; objects per pack, holes and the PUTs' rate and latency per setting.
async fn sweep(args: &Args, parent: &Path, object_max: u64) -> Result<()> {
    let size = 5120;
    println!(
        "\nGroup wait sweep, 5 KiB objects (PUT ops/s over the whole load of {} objects)",
        args.objects
    );
    println!(
        "{:>8} {:>6} {:>10} {:>14} {:>8} {:>10} {:>9} {:>9} {:>20}",
        "wait us",
        "count",
        "objs/pack",
        "hole B",
        "fewer",
        "PUT ops/s",
        "p50 ms",
        "p99 ms",
        "closed count/B/idle/wait"
    );
    let off = configuration(args, parent, size, None, 0, object_max).await?;
    println!(
        "{:>8} {:>6} {:>10} {:>14} {:>8} {:>10.0} {:>9.2} {:>9.2} {:>20}",
        "off",
        "-",
        "-",
        off.hole_bytes,
        "-",
        off.put_ops_per_s,
        off.put_p50_ms,
        off.put_p99_ms,
        "-"
    );
    for &wait_us in &args.sweep_waits_us {
        for &count in &args.sweep_counts {
            let on = configuration(args, parent, size, Some(count), wait_us, object_max).await?;
            println!(
                "{:>8} {:>6} {:>10.1} {:>14} {:>7.1}% {:>10.0} {:>9.2} {:>9.2} {:>20}",
                wait_us,
                count,
                members_per_pack(&on),
                on.hole_bytes,
                100.0 * (1.0 - on.hole_bytes as f64 / off.hole_bytes.max(1) as f64),
                on.put_ops_per_s,
                on.put_p50_ms,
                on.put_p99_ms,
                closed_by(&on)
            );
        }
    }
    Ok(())
}

/// The data and index pools' space, as `strata df` reports it.
async fn space_of(
    cluster: &Cluster,
    server: &gateway::Server,
    config: &gateway::GatewayConfig,
) -> Result<Space> {
    let pools = server::report::pools(cluster).await?;
    let pool = |name: &str| {
        pools
            .iter()
            .find(|p| p.name == name)
            .with_context(|| format!("pool {name} not found"))
    };
    let data = pool(&config.data_pool)?;
    let index = pool(&config.index_pool)?;
    let stats = server.gateway.stats();
    Ok(Space {
        stored_bytes: data.stored_bytes,
        allocated_bytes: data.allocated_bytes,
        hole_bytes: data
            .allocated_bytes
            .saturating_sub(data.stored_bytes * u64::from(data.size)),
        metadata_bytes: data.metadata_bytes + index.metadata_bytes,
        packs_written: stats.packs_written,
        objects_packed: stats.objects_packed,
        closed_count: stats.packs_closed_count,
        closed_bytes: stats.packs_closed_bytes,
        closed_idle: stats.packs_closed_idle,
        closed_wait: stats.packs_closed_wait,
        ..Space::default()
    })
}

/// Half of the packed 4 KiB objects deleted, then one GC pass while GETs of the other half
/// are timed.
async fn garbage_collection(args: &Args, parent: &Path, object_max: u64) -> Result<()> {
    let size = 4096u64;
    let dir = parent.join("cluster");
    let config = super::cluster::cluster_config(args.replicas, &args.osd_size, None, None);
    let cluster = Arc::new(Cluster::create(&dir, config, ClusterOptions::default()).await?);
    let gateway_config = gateway_config(args, Some(32), args.group_wait_us, object_max);
    let (server, credentials) = super::s3::serve_gateway(
        Arc::new(server::WeakCluster::new(&cluster)),
        &gateway_config,
    )
    .await?;
    let credentials = Arc::new(credentials);
    put_all(server.local_addr, &credentials, args, size).await?;
    let before = space_of(&cluster, &server, &gateway_config).await?;
    let mut connection = S3Connection::connect(server.local_addr, credentials.clone()).await?;
    let empty_sha = sha256_hex(b"");
    let mut deleted = 0u64;
    for index in (0..args.objects).step_by(2) {
        let path = format!("/{BUCKET}/{}", key_of(index));
        let (status, text) = connection
            .request("DELETE", &path, Bytes::new(), &empty_sha)
            .await?;
        if status != 204 {
            bail!(
                "DELETE {path}: {status}: {}",
                String::from_utf8_lossy(&text)
            );
        }
        deleted += 1;
    }
    let idle = time_gets(
        server.local_addr,
        &credentials,
        args,
        Duration::from_secs(3),
        None,
    )
    .await?;
    let gateway = server.gateway.clone();
    let pass = tokio::spawn(async move {
        let started = Instant::now();
        let report = gateway.pack_gc().await?;
        let removed = gateway.reclaim_after(0).await?;
        anyhow::Ok((report, removed, started.elapsed()))
    });
    let during = time_gets(
        server.local_addr,
        &credentials,
        args,
        Duration::from_secs(60),
        Some(&pass),
    )
    .await?;
    let (report, removed, took) = pass.await.context("the GC pass")??;
    let after = space_of(&cluster, &server, &gateway_config).await?;
    let deleted_bytes = deleted * size * u64::from(args.replicas);
    let given_back = before.allocated_bytes.saturating_sub(after.allocated_bytes);
    println!(
        "\nGC: {} packed 4 KiB objects, {} deleted ({} bytes over {} replicas); one pass took {:.2} s: \
         {} packs rewritten, {} live bytes copied, {} old packs removed ({} queued)",
        args.objects,
        deleted,
        deleted_bytes,
        args.replicas,
        took.as_secs_f64(),
        report.packs_rewritten,
        report.bytes_copied,
        report.old_packs_removed + removed,
        report.old_packs_queued.saturating_sub(removed)
    );
    println!(
        "    data pool allocated {} -> {} bytes: {:.1}% of the deleted bytes given back",
        before.allocated_bytes,
        after.allocated_bytes,
        100.0 * given_back as f64 / deleted_bytes.max(1) as f64
    );
    println!(
        "    GETs of the other half: before the pass p50 {:.2} ms p99 {:.2} ms ({} GETs); during it p50 {:.2} ms p99 {:.2} ms ({} GETs)",
        idle.0, idle.1, idle.2, during.0, during.1, during.2
    );
    server.shutdown().await;
    super::cluster::shutdown(cluster, &dir).await
}

/// GETs of the odd (kept) objects from `args.concurrency` connections for `limit`, or until
/// `until` finishes: (p50 ms, p99 ms, count). Every GET must succeed.
async fn time_gets(
    address: std::net::SocketAddr,
    credentials: &Arc<super::s3_client::Credentials>,
    args: &Args,
    limit: Duration,
    until: Option<&GcPass>,
) -> Result<(f64, f64, usize)> {
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..args.concurrency as u64 {
        let (credentials, stop) = (credentials.clone(), stop.clone());
        let objects = args.objects;
        tasks.spawn(async move {
            let mut connection = S3Connection::connect(address, credentials).await?;
            let mut latencies_ms = Vec::new();
            let mut index = 1 + 2 * task;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if index >= objects {
                    index = 1 + 2 * (index % 97);
                }
                let started = Instant::now();
                connection.get(BUCKET, &key_of(index)).await?;
                latencies_ms.push(started.elapsed().as_secs_f64() * 1e3);
                index += 2 * 101;
            }
            anyhow::Ok(latencies_ms)
        });
    }
    let started = Instant::now();
    while started.elapsed() < limit && until.is_none_or(|pass| !pass.is_finished()) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut all = Vec::new();
    while let Some(done) = tasks.join_next().await {
        all.extend(done.context("a GET task")??);
    }
    if all.is_empty() {
        return Ok((0.0, 0.0, 0));
    }
    all.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| all[((all.len() - 1) as f64 * q) as usize];
    Ok((at(0.5), at(0.99), all.len()))
}
