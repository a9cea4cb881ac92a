//! Object write and read rates of the embedded cluster, as `rados bench` measures a Ceph pool,
//! with fio on the same filesystem in the same run as the limit.
//!
//! ```text
//! cargo run -p cluster --release --example bench_cluster -- \
//!     [--replicas 1,3] [--concurrency 16,64] [--objects 20000] [--size 4K] [--seconds 10] \
//!     [--dir /var/tmp] [--device-size 2G] [--profile nvme] [--no-durable] [--no-fio] [--poll-while-busy]
//! ```
//!
//! For every replica count a fresh cluster (one OSD per host, `--replicas` hosts, every device
//! a file under a temporary directory in `--dir`) is created; for every concurrency, `--objects`
//! fresh objects of `--size` are written with `write_full` (at most `--seconds`), then read back
//! in a shuffled order. Each row gives ops/s, p50/p99 latency and the process CPU time per op
//! (user + system, all threads: the machine has few cores, so CPU per op is the figure that
//! survives a loaded machine). Under a write row, the group commit's batches, the first OSD's
//! device latencies, and per thread group the milliseconds per second it ran and waited
//! runnable for a CPU, beside each CPU's busy share (a write crosses runtime workers, the
//! store's committer and its sync threads; time spent waiting for a CPU another thread holds
//! shows in neither CPU per op nor the device's latencies). After the cluster rows of a replica count, fio does 4 KiB random
//! writes and reads at each depth on a file in the same directory: the disk's limit for that
//! run (after, not between, so fio's write-back does not slow the cluster's next phase).
//!
//! The device files are written in full first (as fio lays out its file): a sparse file would
//! make every first write allocate filesystem blocks, which fio's peer never pays. `--sparse`
//! leaves them sparse, as `strata serve` creates them (the store then fills 16 MiB chunks with
//! zeros ahead of its writes: 23-29k replica-1 4 KiB writes/s against 34k laid out, alternating
//! runs on 2026-11-25). `--dir` must not be tmpfs (O_DIRECT falls back to the page cache there).

/// The allocator `strata` itself runs with (see its `main.rs`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use cluster::{Cluster, ClusterConfig, ClusterOptions, HostConfig, OsdConfig, PoolConfig};
use rados::IoCtx;

struct Args {
    replicas: Vec<u32>,
    concurrency: Vec<usize>,
    objects: u64,
    size_bytes: usize,
    seconds: f64,
    dir: std::path::PathBuf,
    device_size_bytes: u64,
    profile: Option<String>,
    durable: bool,
    fio: bool,
    /// Leave the device files sparse (the store fills chunks with zeros ahead of its writes).
    sparse: bool,
    /// `cluster::runtime::serving_runtime`'s layout for small operations, as `strata serve
    /// --poll-while-busy`; then whether it applied.
    poll_while_busy: bool,
}

const USAGE: &str = "bench_cluster [--replicas 1,3] [--concurrency 16,64] [--objects N] \
[--size 4K] [--seconds S] [--dir PATH] [--device-size 2G] \
[--profile nvme|ssd-sata|hdd-10k|hdd-7200] [--no-durable] [--no-fio] [--sparse] \
[--poll-while-busy]";

fn parse_list<T: std::str::FromStr>(text: &str) -> Result<Vec<T>>
where
    T::Err: std::error::Error + Send + Sync + 'static,
{
    text.split(',')
        .map(|word| word.trim().parse::<T>().map_err(anyhow::Error::from))
        .collect()
}

fn parse_args() -> Result<Args> {
    let mut args = Args {
        replicas: vec![1, 3],
        concurrency: vec![16, 64],
        objects: 20_000,
        size_bytes: 4096,
        seconds: 10.0,
        dir: "/var/tmp".into(),
        device_size_bytes: 2 << 30,
        profile: None,
        durable: true,
        fio: true,
        sparse: false,
        poll_while_busy: false,
    };
    let mut words = std::env::args().skip(1);
    while let Some(word) = words.next() {
        let mut value = || {
            words
                .next()
                .with_context(|| format!("{word} needs a value"))
        };
        match word.as_str() {
            "--replicas" => args.replicas = parse_list(&value()?)?,
            "--concurrency" => args.concurrency = parse_list(&value()?)?,
            "--objects" => args.objects = value()?.parse()?,
            "--size" => {
                let text = value()?;
                args.size_bytes = device::parse_size_bytes(&text)
                    .with_context(|| format!("size {text:?}"))?
                    as usize;
            }
            "--seconds" => args.seconds = value()?.parse()?,
            "--dir" => args.dir = value()?.into(),
            "--device-size" => {
                let text = value()?;
                args.device_size_bytes = device::parse_size_bytes(&text)
                    .with_context(|| format!("device size {text:?}"))?;
            }
            "--profile" => args.profile = Some(value()?),
            "--no-durable" => args.durable = false,
            "--no-fio" => args.fio = false,
            "--sparse" => args.sparse = true,
            "--poll-while-busy" => args.poll_while_busy = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => bail!("unknown argument {other}\n{USAGE}"),
        }
    }
    if args.replicas.contains(&0) || args.concurrency.contains(&0) || args.size_bytes == 0 {
        bail!("--replicas, --concurrency and --size must be > 0");
    }
    Ok(args)
}

fn config(args: &Args, replicas: u32) -> ClusterConfig {
    let mut config = ClusterConfig::empty();
    config.scrub_interval_s = 0;
    config.durable = args.durable;
    for id in 0..replicas as i32 {
        let host = format!("host{id}");
        config.hosts.push(HostConfig { name: host.clone() });
        config.osds.push(OsdConfig {
            id,
            host,
            device: format!("file:osd.{id}.img"),
            size: None,
            class: "ssd".into(),
            weight: Some(1.0),
            min_alloc_size: 4096,
            emulation: args.profile.clone(),
            data_cache_size: None,
        });
    }
    config.pools.push(PoolConfig {
        name: "bench".into(),
        size: replicas,
        min_size: None,
        pg_num: 64,
        device_class: None,
        crush_rule: None,
        erasure: None,
    });
    config
}

/// Process CPU time (user + system, every thread) so far, from `/proc/self/stat` (fields 14
/// and 15, in USER_HZ ticks: 100 per second on Linux).
fn cpu_time() -> Duration {
    let Ok(text) = std::fs::read_to_string("/proc/self/stat") else {
        return Duration::ZERO;
    };
    // The command name (field 2) may hold spaces; count fields after its closing parenthesis.
    let Some(rest) = text.rfind(')').map(|at| &text[at + 1..]) else {
        return Duration::ZERO;
    };
    let fields: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|word| word.parse().ok())
        .collect();
    Duration::from_millis(fields.iter().sum::<u64>() * 10)
}

/// Nanoseconds each group of this process's threads (named as `comm` without a trailing
/// `-N`) has spent running and waiting runnable for a CPU, from `/proc/self/task/*/schedstat`.
/// Why: on a machine of few CPUs a write's path crosses several threads (runtime workers, the
/// store's committer and sync threads), and the time one waits for a CPU another holds is
/// invisible in CPU per op and in the device's latencies.
fn thread_times() -> std::collections::BTreeMap<String, (u64, u64)> {
    let mut groups = std::collections::BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return groups;
    };
    for task in tasks.flatten() {
        let path = task.path();
        let (Ok(comm), Ok(stat)) = (
            std::fs::read_to_string(path.join("comm")),
            std::fs::read_to_string(path.join("schedstat")),
        ) else {
            continue;
        };
        let comm = comm.trim();
        let group = match comm.rsplit_once('-') {
            Some((stem, number)) if number.chars().all(|c| c.is_ascii_digit()) => stem,
            _ => comm,
        };
        let mut fields = stat
            .split_whitespace()
            .map(|word| word.parse::<u64>().unwrap_or(0));
        let (running, waiting) = (fields.next().unwrap_or(0), fields.next().unwrap_or(0));
        let entry: &mut (u64, u64) = groups.entry(group.to_string()).or_default();
        entry.0 += running;
        entry.1 += waiting;
    }
    groups
}

/// Each CPU's (busy, total) ticks so far from `/proc/stat` (busy: all but idle and iowait).
fn cpu_ticks() -> Vec<(u64, u64)> {
    let Ok(text) = std::fs::read_to_string("/proc/stat") else {
        return Vec::new();
    };
    text.lines()
        .filter(|line| line.starts_with("cpu") && !line.starts_with("cpu "))
        .map(|line| {
            let ticks: Vec<u64> = line
                .split_whitespace()
                .skip(1)
                .map(|word| word.parse().unwrap_or(0))
                .collect();
            let total: u64 = ticks.iter().sum();
            let idle = ticks.get(3).copied().unwrap_or(0) + ticks.get(4).copied().unwrap_or(0);
            (total - idle, total)
        })
        .collect()
}

/// Where a phase's time went across threads and CPUs: per thread group, milliseconds per
/// second running and waiting for a CPU; per CPU, the share busy.
fn threads_row(
    before: &std::collections::BTreeMap<String, (u64, u64)>,
    cpus_before: &[(u64, u64)],
    elapsed: Duration,
) -> String {
    let seconds = elapsed.as_secs_f64().max(1e-9);
    let mut groups: Vec<(String, f64, f64)> = thread_times()
        .into_iter()
        .map(|(name, (running, waiting))| {
            let (running_before, waiting_before) = before.get(&name).copied().unwrap_or((0, 0));
            let per_second = |now: u64, then: u64| now.saturating_sub(then) as f64 / 1e6 / seconds;
            let running = per_second(running, running_before);
            let waiting = per_second(waiting, waiting_before);
            (name, running, waiting)
        })
        .filter(|(_, running, waiting)| running + waiting >= 1.0)
        .collect();
    groups.sort_by(|a, b| b.1.total_cmp(&a.1));
    let threads: Vec<String> = groups
        .iter()
        .map(|(name, running, waiting)| format!("{name} {running:.0}/{waiting:.0}"))
        .collect();
    let cpus: Vec<String> = cpu_ticks()
        .iter()
        .zip(cpus_before)
        .enumerate()
        .map(|(cpu, ((busy, total), (busy_before, total_before)))| {
            let share = busy.saturating_sub(*busy_before) as f64
                / total.saturating_sub(*total_before).max(1) as f64;
            format!("cpu{cpu} {:.0}%", share * 100.0)
        })
        .collect();
    format!(
        "  threads, ms/s running/waiting for a CPU: {}; CPUs busy: {}",
        threads.join(", "),
        cpus.join(", ")
    )
}

/// Latencies and times of one phase.
struct Phase {
    latencies_us: Vec<u64>,
    elapsed: Duration,
    cpu: Duration,
}

impl Phase {
    fn row(&mut self, label: &str, concurrency: usize) -> String {
        self.latencies_us.sort_unstable();
        let ops = self.latencies_us.len();
        let percentile = |p: f64| {
            let index = ((ops as f64 * p) as usize).min(ops.saturating_sub(1));
            self.latencies_us.get(index).copied().unwrap_or(0) as f64 / 1000.0
        };
        format!(
            "{label:<26} {concurrency:>4} {:>10.0} {:>9.2} {:>9.2} {:>8.2} {:>9.1} {:>8}",
            ops as f64 / self.elapsed.as_secs_f64(),
            percentile(0.5),
            percentile(0.99),
            self.cpu.as_secs_f64(),
            self.cpu.as_secs_f64() * 1e6 / ops.max(1) as f64,
            ops,
        )
    }
}

/// Runs `concurrency` workers doing `op(index)` for indexes below `count`, for at most
/// `seconds`.
async fn phase<F, Fut>(concurrency: usize, seconds: f64, count: u64, op: F) -> Result<Phase>
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = rados::Result<()>> + Send,
{
    let op = Arc::new(op);
    let next = Arc::new(AtomicU64::new(0));
    let cpu_before = cpu_time();
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
                if index >= count {
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
        cpu: cpu_time().saturating_sub(cpu_before),
    })
}

/// fio's IOPS for 4 KiB random I/O at `depth` (libaio, O_DIRECT) on a 1 GiB file in `dir`.
fn fio(dir: &Path, depth: usize, seconds: f64, rw: &str) -> Option<f64> {
    let output = Command::new("fio")
        .args([
            "--name=peer",
            &format!("--filename={}", dir.join("fio.img").display()),
            "--size=1G",
            "--bs=4k",
            &format!("--rw={rw}"),
            &format!("--iodepth={depth}"),
            "--ioengine=libaio",
            "--direct=1",
            &format!("--runtime={}", seconds.ceil().max(1.0) as u64),
            "--time_based",
            "--output-format=terse",
            "--terse-version=3",
        ])
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    // Terse v3: field 8 is read IOPS, field 49 write IOPS (1-based).
    let text = String::from_utf8_lossy(&output.stdout);
    let fields: Vec<&str> = text.lines().last()?.split(';').collect();
    let read: f64 = fields.get(7)?.parse().ok()?;
    let write: f64 = fields.get(48)?.parse().ok()?;
    Some(read + write)
}

fn fio_row(args: &Args, dir: &Path, label: &str, depth: usize, rw: &str) {
    if !args.fio {
        return;
    }
    match fio(dir, depth, args.seconds.min(5.0), rw) {
        Some(iops) => println!("{label:<26} {depth:>4} {iops:>10.0}"),
        None => println!("{label:<26} {depth:>4} (fio unavailable or failed)"),
    }
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "?".into())
}

/// Where a phase's time went on osd.0's device: its writes' and flushes' latencies.
fn device_row(stats: &device::DeviceStats) -> String {
    format!(
        "  osd.0 device: {} writes p50/p99 {:.0}/{:.0} µs, {} flushes p50/p99 {:.0}/{:.0} µs, \
         queue depth max {}",
        stats.write.ops,
        stats.write.latency_us_p50(),
        stats.write.latency_us_p99(),
        stats.flush.ops,
        stats.flush.latency_us_p50(),
        stats.flush.latency_us_p99(),
        stats.queue_depth_at_arrival.max(),
    )
}

/// How the replica writes of a phase shared their syncs.
fn commit_row(before: store::CommitStats, after: store::CommitStats) -> String {
    let transactions = (after.transactions - before.transactions).max(1) as f64;
    let batches = (after.batches - before.batches).max(1) as f64;
    format!(
        "  group commit: {:.1} replica writes per batch; per replica write {:.3} device \
         flushes + {:.3} metadata syncs\n  store stages per replica write: {}",
        transactions / batches,
        (after.device_flushes - before.device_flushes) as f64 / transactions,
        (after.metadata_syncs - before.metadata_syncs) as f64 / transactions,
        after
            .stages
            .since(&before.stages)
            .per_transaction(after.transactions - before.transactions),
    )
}

async fn bench_replicas(args: &Args, replicas: u32) -> Result<()> {
    let temp = tempfile::tempdir_in(&args.dir)
        .with_context(|| format!("temporary directory in {}", args.dir.display()))?;
    let dir = temp.path();
    for id in 0..replicas {
        let path = dir.join(format!("osd.{id}.img"));
        if args.sparse {
            std::fs::File::create(&path)
                .and_then(|file| file.set_len(args.device_size_bytes))
                .with_context(|| path.display().to_string())?;
        } else {
            device::lay_out(&path, args.device_size_bytes)
                .with_context(|| path.display().to_string())?;
        }
    }
    let options = ClusterOptions {
        background: false,
        poll_while_busy: args.poll_while_busy,
        ..ClusterOptions::default()
    };
    let cluster = Cluster::create(dir, config(args, replicas), options).await?;
    let pool = cluster.pool("bench")?;
    println!(
        "\n{replicas} replica(s), {} B objects, devices {} under {}{}; load {}",
        args.size_bytes,
        args.profile.as_deref().unwrap_or("plain files"),
        dir.display(),
        if args.durable { "" } else { ", NOT durable" },
        load()
    );
    println!(
        "{:<26} {:>4} {:>10} {:>9} {:>9} {:>8} {:>9} {:>8}",
        "workload", "conc", "ops/s", "p50 ms", "p99 ms", "cpu s", "cpu µs/op", "ops"
    );
    let payload = Arc::new(vec![0x5au8; args.size_bytes]);
    for (round, &concurrency) in args.concurrency.iter().enumerate() {
        let commits_before = cluster.commit_stats();
        let device_before = cluster.osd(0).map(|osd| osd.device().stats());
        let (threads_before, cpus_before) = (thread_times(), cpu_ticks());
        let writer = pool.clone();
        let data = Arc::clone(&payload);
        let mut write = phase(concurrency, args.seconds, args.objects, move |index| {
            let pool = writer.clone();
            let data = Arc::clone(&data);
            async move {
                pool.write_full(&format!("obj-{round}-{index}"), &data)
                    .await
            }
        })
        .await?;
        println!(
            "{}",
            write.row(&format!("cluster write r{replicas}"), concurrency)
        );
        let threads = threads_row(&threads_before, &cpus_before, write.elapsed);
        println!("{}", commit_row(commits_before, cluster.commit_stats()));
        println!("{threads}");
        if let (Some(before), Some(osd)) = (device_before, cluster.osd(0)) {
            println!("{}", device_row(&osd.device().stats().since(&before)));
        }
        let written = write.latencies_us.len() as u64;
        let reader = pool.clone();
        let size_bytes = args.size_bytes;
        let cache_before = cluster.data_cache_stats();
        let mut read = phase(concurrency, args.seconds, written, move |index| {
            let pool = reader.clone();
            // A scattered order, unrelated to the order of writing.
            let object = index.wrapping_mul(0x9e37_79b1) % written.max(1);
            async move {
                let data = pool.read_full(&format!("obj-{round}-{object}")).await?;
                if data.len() != size_bytes {
                    return Err(rados::RadosError::Io(format!(
                        "read {} bytes, wrote {size_bytes}",
                        data.len()
                    )));
                }
                Ok(())
            }
        })
        .await?;
        println!(
            "{}",
            read.row(&format!("cluster read r{replicas}"), concurrency)
        );
        let cache = cluster.data_cache_stats();
        println!(
            "  data cache: {} of {} replica reads from memory (each object is read about once)",
            cache.hits - cache_before.hits,
            cache.hits + cache.misses - cache_before.hits - cache_before.misses,
        );
    }
    // fio after every cluster phase of this replica count: its writes (GBs at high depth)
    // leave the disk flushing for a while, which would slow the cluster phase after it.
    for &concurrency in &args.concurrency {
        fio_row(args, dir, "fio randwrite", concurrency, "randwrite");
        fio_row(args, dir, "fio randread", concurrency, "randread");
    }
    drop(pool);
    cluster.shutdown().await?;
    println!("load after: {}", load());
    Ok(())
}

fn main() -> Result<()> {
    let mut args = parse_args()?;
    // The runtime `strata serve` uses on this directory's device.
    let serving = cluster::runtime::serving_runtime(&args.dir, args.poll_while_busy)?;
    args.poll_while_busy = serving.poll_while_busy();
    if let Some(cpus) = &serving.worker_cpus {
        println!("runtime: workers on CPUs {cpus:?}, polling while busy");
    }
    let runtime = serving.runtime;
    runtime.block_on(async {
        for &replicas in &args.replicas {
            bench_replicas(&args, replicas).await?;
        }
        Ok(())
    })
}
