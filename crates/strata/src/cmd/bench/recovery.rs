//! `strata bench recovery`: the time to rebuild one OSD's shards of an erasure-coded pool,
//! against the disk's bandwidth measured by fio on the same disk in the same run (issue 45).
//!
//! The cluster: `k + m + 1` hosts of one OSD each (sparse files in `--dir`), an erasure-coded
//! pool `k+m` (failure domain host), `--data` bytes of `--object-size` objects written with
//! `--concurrency` writes in flight. Then one OSD (`osd.0`) is marked down and out: CRUSH's
//! `indep` rule gives each of its positions to the spare host, and recovery
//! (`Cluster::recover_erasure`, every PG of the pool, what the background recovery does) rebuilds
//! those shards there, reading `k` shards for each. The figure is the time of that recovery,
//! the shard bytes it wrote (the growth of the other OSDs' allocated bytes) and their rate, beside
//! fio's sequential 1 MiB direct writes and reads (`--iodepth 4`) of a file on the same disk
//! just after. Recovery writes the rebuilt bytes once and reads `k` times as much: both rates
//! are in the table.
//!
//! ```text
//! strata bench recovery [--erasure 4+2] [--data 2G] [--object-size 4M] [--osd-size 4G]
//!                       [--pg-num 32] [--concurrency 16] [--dir PATH] [--no-fio]
//! ```

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use cluster::{Cluster, ClusterOptions};
use rados::Rados;

use super::load;

/// Recovery time of one OSD's shards against the disk's bandwidth.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The pool's profile `K+M`.
    #[arg(long, default_value = "4+2", value_parser = super::cluster::parse_erasure)]
    pub erasure: (u32, u32),
    /// Bytes of objects written before the OSD fails.
    #[arg(long, default_value = "2G")]
    pub data: String,
    /// Size of each object.
    #[arg(long, default_value = "4M")]
    pub object_size: String,
    /// Size of each OSD's sparse file.
    #[arg(long, default_value = "4G")]
    pub osd_size: String,
    /// Placement groups of the pool.
    #[arg(long, default_value_t = 32)]
    pub pg_num: u32,
    /// Writes in flight while the data is written.
    #[arg(long, default_value_t = 16)]
    pub concurrency: usize,
    /// Directory of the OSD files and fio's file (a temporary directory is made in it).
    #[arg(long, default_value = ".")]
    pub dir: std::path::PathBuf,
    /// Size of fio's file.
    #[arg(long, default_value = "1G")]
    pub fio_size: String,
    /// Skip fio.
    #[arg(long)]
    pub no_fio: bool,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let (k, m) = args.erasure;
    let data_bytes = load::parse_size(&args.data)?;
    let object_bytes = load::parse_size(&args.object_size)?;
    if object_bytes == 0 || data_bytes < object_bytes || args.concurrency == 0 {
        bail!("--data must hold at least one --object-size object; --concurrency > 0");
    }
    let setup = load::setup(
        "recovery",
        std::slice::from_ref(&args.object_size),
        args.concurrency,
        k + m + 1,
        1.0,
        &args.dir,
        false,
    )?;
    let dir = setup.temp.path().to_path_buf();
    let load_start = load::load_average();
    let figures = setup
        .runtime
        .block_on(recover(&args, &dir, data_bytes, object_bytes))?;
    let fio = if args.no_fio {
        None
    } else {
        Some(fio_sequential(&dir.join("fio.img"), &args.fio_size)?)
    };
    let load_end = load::load_average();
    print_table(&args, &figures, fio, &load_start, &load_end);
    Ok(ExitCode::SUCCESS)
}

struct Figures {
    objects: u64,
    write_seconds: f64,
    recovery_seconds: f64,
    rebuilt_bytes: u64,
    whole: bool,
}

/// Device bytes allocated on every OSD but osd.0 (the one that fails).
fn allocated_bytes_but_osd0(cluster: &Cluster) -> u64 {
    cluster
        .osd_stats()
        .iter()
        .filter(|osd| osd.id != 0)
        .map(|osd| osd.statfs.allocated_bytes)
        .sum()
}

async fn recover(
    args: &Args,
    dir: &std::path::Path,
    data_bytes: u64,
    object_bytes: u64,
) -> Result<Figures> {
    let (k, m) = args.erasure;
    let config = super::cluster::cluster_config(k + m + 1, &args.osd_size, None, None);
    let cluster = Arc::new(
        Cluster::create(
            dir,
            config,
            ClusterOptions {
                background: false,
                ..ClusterOptions::default()
            },
        )
        .await?,
    );
    cluster.create_erasure_pool(
        "bench",
        &cluster::ec::ErasureProfile::new(k, m),
        args.pg_num,
    )?;
    let rados: Arc<dyn Rados> = cluster.clone();
    let pool = rados.io_ctx("bench").await?;
    let objects = data_bytes / object_bytes;
    let payload = Bytes::from(
        (0..object_bytes)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect::<Vec<u8>>(),
    );
    eprintln!(
        "  writing {objects} objects of {} ({} in flight)",
        args.object_size, args.concurrency
    );
    let started = Instant::now();
    let mut writes: tokio::task::JoinSet<rados::Result<()>> = tokio::task::JoinSet::new();
    for number in 0..objects {
        if writes.len() >= args.concurrency {
            if let Some(written) = writes.join_next().await {
                written?.context("writing the objects")?;
            }
        }
        let pool = pool.clone();
        let payload = payload.clone();
        writes.spawn(async move {
            pool.operate(
                &format!("recovery_object{number}"),
                rados::WriteOp::new().write_full(payload),
            )
            .await
        });
    }
    while let Some(written) = writes.join_next().await {
        written?.context("writing the objects")?;
    }
    let write_seconds = started.elapsed().as_secs_f64();
    let before = allocated_bytes_but_osd0(&cluster);
    eprintln!("  osd.0 down and out; recovering");
    cluster.mark_down(0)?;
    cluster.mark_out(0)?;
    let started = Instant::now();
    let whole = cluster.recover_erasure().await?;
    let recovery_seconds = started.elapsed().as_secs_f64();
    // The shards rebuilt: what the other OSDs (the spare, mostly) gained.
    let rebuilt_bytes = allocated_bytes_but_osd0(&cluster).saturating_sub(before);
    // Every object still reads back whole.
    for number in (0..objects).step_by((objects / 16).max(1) as usize) {
        let read = pool
            .read_full(&format!("recovery_object{number}"))
            .await
            .context("reading back")?;
        if read != payload {
            bail!("object {number} read back different after the recovery");
        }
    }
    drop(pool);
    drop(rados);
    super::cluster::shutdown(cluster, dir).await?;
    Ok(Figures {
        objects,
        write_seconds,
        recovery_seconds,
        rebuilt_bytes,
        whole,
    })
}

/// fio's sequential 1 MiB direct write then read of `file` (MB/s each).
fn fio_sequential(file: &std::path::Path, size: &str) -> Result<(f64, f64)> {
    let mut rates = Vec::new();
    for rw in ["write", "read"] {
        eprintln!("  fio sequential {rw} of {size}");
        let report = super::fio_report(
            super::peer_command("fio")
                .args([
                    "--name=bandwidth",
                    "--output-format=json",
                    "--direct=1",
                    "--ioengine=libaio",
                    "--bs=1M",
                    "--iodepth=4",
                ])
                .arg(format!("--rw={rw}"))
                .arg(format!("--filename={}", file.display()))
                .arg(format!("--size={size}")),
        )?;
        let bytes_per_second = report["jobs"][0][rw]["bw_bytes"]
            .as_f64()
            .context("fio reported no bandwidth")?;
        rates.push(bytes_per_second / 1e6);
    }
    let _ = std::fs::remove_file(file);
    Ok((rates[0], rates[1]))
}

fn print_table(
    args: &Args,
    figures: &Figures,
    fio: Option<(f64, f64)>,
    load_start: &str,
    load_end: &str,
) {
    let (k, m) = args.erasure;
    let megabytes = figures.rebuilt_bytes as f64 / 1e6;
    let write_rate = megabytes / figures.recovery_seconds;
    let read_rate = write_rate * f64::from(k);
    println!(
        "recovery of one OSD's shards, erasure {k}+{m} on {} OSDs, {} objects of {} \
         ({} written in {:.1} s); load {load_start} at the start, {load_end} at the end",
        k + m + 1,
        figures.objects,
        args.object_size,
        args.data,
        figures.write_seconds
    );
    println!();
    println!("| what | seconds | MB | write MB/s | read MB/s |");
    println!("|---|---:|---:|---:|---:|");
    println!(
        "| strata recovery (osd.0 down and out{}) | {:.1} | {megabytes:.0} | {write_rate:.1} | {read_rate:.1} |",
        if figures.whole { "" } else { ", NOT whole" },
        figures.recovery_seconds
    );
    if let Some((write, read)) = fio {
        println!(
            "| fio sequential 1M direct, iodepth 4 ({}) | | | {write:.1} | {read:.1} |",
            args.fio_size
        );
        println!();
        println!(
            "recovery wrote at {:.0}% of fio's sequential write rate and read at {:.0}% of its read rate",
            100.0 * write_rate / write,
            100.0 * read_rate / read
        );
    }
}
