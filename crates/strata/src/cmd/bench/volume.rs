//! `strata bench volume` (issue 36): block volumes driven by fio, beside RBD on a real Ceph
//! cluster, in one run.
//!
//! Targets (`--targets`, in this order in even rounds and reversed in odd ones; Ceph's targets
//! share one minicluster per round, so they run back to back):
//! - `strata`: a volume on the embedded cluster (`--replicas` hosts of one OSD on sparse files
//!   under the run's directory, durable writes, pool size `--replicas`), served over NBD by this
//!   process; fio's `nbd` engine.
//! - `rbd`: an RBD image (`rbd create --image-feature layering`) of the same size on
//!   `ceph-minicluster.sh` with `--replicas` BlueStore OSDs on the same disk, pool size
//!   `--replicas`; fio's `rbd` engine (librbd in fio's process).
//! - `strata-ceph`: a strata volume on that same Ceph pool through librados, served over NBD by
//!   this process; fio's `nbd` engine. Against `rbd` it measures strata's volume layer plus the
//!   NBD hop on the same OSDs.
//! - Seed 001 at cluster level, each an embedded cluster like `strata` with other OSD devices:
//!   `hdd` (emulated 10k-rpm HDDs), `nvme` (emulated NVMe) and `cached` (those HDDs behind
//!   write-back block caches on emulated NVMe).
//!
//! Every volume is written once in full (1 MiB sequential) before the jobs, so reads find data
//! everywhere (a missing object reads as zeros without touching a disk, on both systems).
//! Jobs are `RW-BLOCK-DEPTH` (`randread-4k-16`): fio `--rw`, `--bs`, `--iodepth`, time based,
//! random offsets drawn with replacement.
//!
//! Run (about 6 minutes with the defaults):
//! ```text
//! strata bench volume [--targets strata,rbd,strata-ceph] [--replicas 3] [--volume-size 2G]
//!                     [--runtime-s 8] [--rounds 1] [--dir /fast/disk] [--svg volume.svg]
//! ```

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use cluster::{Cluster, ClusterOptions};
use device::Device;
use nbd::{ExportConfig, NbdServer};
use rados::Rados;
use serde_json::Value;
use volume::{OpenMode, Volumes, VolumesConfig};

use super::ceph::CephCluster;
use super::load;

/// Block volume IOPS, latency and MB/s against RBD on real Ceph.
#[derive(clap::Args, Clone)]
pub struct Args {
    /// Targets, comma separated: strata, rbd, strata-ceph, hdd, nvme, cached.
    #[arg(long, value_delimiter = ',', default_value = "strata,rbd,strata-ceph")]
    pub targets: Vec<String>,
    /// Jobs, comma separated, as RW-BLOCK-DEPTH (fio's --rw, --bs, --iodepth).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "randread-4k-1,randread-4k-16,randread-4k-32,randwrite-4k-1,randwrite-4k-16,randwrite-4k-32,read-1m-4,write-1m-4"
    )]
    pub jobs: Vec<String>,
    /// Replicas of every pool (and OSDs, one per host), for strata and Ceph.
    #[arg(long, default_value_t = 3)]
    pub replicas: u32,
    /// Size of each volume and RBD image (K, M, G suffixes).
    #[arg(long, default_value = "2G")]
    pub volume_size: String,
    /// Size of each OSD's sparse file (strata and Ceph).
    #[arg(long, default_value = "16G")]
    pub osd_size: String,
    /// Seconds of each job.
    #[arg(long, default_value_t = 8.0)]
    pub runtime_s: f64,
    /// Rounds; the table reports each figure's median over them.
    #[arg(long, default_value_t = 1)]
    pub rounds: u32,
    /// Parent of the run's temporary directory (removed at the end).
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    /// Also draw the 4 KiB IOPS and the MB/s of every target as an SVG bar chart here.
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Also write every round's figures as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

const TARGETS: [&str; 6] = ["strata", "rbd", "strata-ceph", "hdd", "nvme", "cached"];
const POOL: &str = "rbd";
const CEPH_IMAGE: &str = "bench-rbd";
const VOLUME: &str = "bench";

/// One fio job.
#[derive(Clone, Debug)]
struct Job {
    name: String,
    rw: String,
    block: String,
    iodepth: u32,
}

impl Job {
    fn parse(text: &str) -> Result<Self> {
        let parts: Vec<&str> = text.split('-').collect();
        let [rw, block, iodepth] = parts[..] else {
            bail!("job {text:?}: expected RW-BLOCK-DEPTH, e.g. randread-4k-16");
        };
        if !["read", "write", "randread", "randwrite", "randrw", "rw"].contains(&rw) {
            bail!("job {text:?}: unknown rw {rw:?} (read, write, randread, randwrite, randrw, rw)");
        }
        load::parse_size(block).with_context(|| format!("job {text:?}: block size"))?;
        let iodepth: u32 = iodepth
            .parse()
            .ok()
            .filter(|depth| (1..=256).contains(depth))
            .with_context(|| format!("job {text:?}: depth must be 1..=256"))?;
        Ok(Self {
            name: text.to_string(),
            rw: rw.to_string(),
            block: block.to_string(),
            iodepth,
        })
    }

    fn random(&self) -> bool {
        self.rw.starts_with("rand")
    }
}

/// What one job measured.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
struct Figures {
    iops: f64,
    mb_per_s: f64,
    latency_us_mean: f64,
    latency_us_p99: f64,
}

/// How fio reaches a target.
enum Endpoint<'a> {
    Nbd(&'a Path),
    Rbd { conf: &'a Path, image: &'a str },
}

fn fio(endpoint: &Endpoint, dir: &Path, extra: &[String]) -> Result<Value> {
    let mut command = super::peer_command("fio");
    command
        .current_dir(dir)
        .args(["--name=job", "--output-format=json", "--direct=1"]);
    match endpoint {
        Endpoint::Nbd(socket) => {
            command
                .arg("--ioengine=nbd")
                .arg(format!("--uri=nbd+unix:///?socket={}", socket.display()));
        }
        Endpoint::Rbd { conf, image } => {
            command
                .env("CEPH_CONF", conf)
                .args(["--ioengine=rbd", "--clientname=admin"])
                .arg(format!("--pool={POOL}"))
                .arg(format!("--rbdname={image}"));
        }
    }
    super::fio_report(command.args(extra))
}

fn figures(report: &Value) -> Figures {
    let job = &report["jobs"][0];
    let mut out = Figures::default();
    let mut weighted = 0.0;
    for side in ["read", "write"] {
        let iops = job[side]["iops"].as_f64().unwrap_or(0.0);
        out.iops += iops;
        out.mb_per_s += job[side]["bw_bytes"].as_f64().unwrap_or(0.0) / 1e6;
        weighted += iops * job[side]["clat_ns"]["mean"].as_f64().unwrap_or(0.0) / 1000.0;
        let p99 = job[side]["clat_ns"]["percentile"]["99.000000"]
            .as_f64()
            .unwrap_or(0.0)
            / 1000.0;
        out.latency_us_p99 = out.latency_us_p99.max(p99);
    }
    out.latency_us_mean = if out.iops > 0.0 {
        weighted / out.iops
    } else {
        0.0
    };
    out
}

/// Writes the whole volume once, 1 MiB at a time.
fn prefill(endpoint: &Endpoint, dir: &Path, size: &str) -> Result<()> {
    fio(
        endpoint,
        dir,
        &[
            "--rw=write".into(),
            "--bs=1M".into(),
            "--iodepth=8".into(),
            format!("--size={size}"),
        ],
    )
    .map(|_| ())
}

fn run_job(endpoint: &Endpoint, dir: &Path, args: &Args, job: &Job) -> Result<Figures> {
    let mut extra = vec![
        format!("--rw={}", job.rw),
        format!("--bs={}", job.block),
        format!("--iodepth={}", job.iodepth),
        format!("--size={}", args.volume_size),
        "--time_based=1".into(),
        format!("--runtime={}", args.runtime_s),
        "--ramp_time=1".into(),
    ];
    if job.random() {
        extra.push("--norandommap".into());
        extra.push("--randrepeat=0".into());
    }
    Ok(figures(&fio(endpoint, dir, &extra)?))
}

/// Prefills the endpoint, then runs every job on it, on a blocking thread (fio is a child
/// process; this runtime keeps serving NBD meanwhile).
async fn drive(
    target: &str,
    endpoint: Endpoint<'_>,
    dir: &Path,
    args: &Args,
    jobs: &[Job],
) -> Result<Vec<Figures>> {
    eprintln!(
        "== {target}: writing the volume once ({})",
        args.volume_size
    );
    let mut out = Vec::new();
    tokio::task::block_in_place(|| -> Result<()> {
        prefill(&endpoint, dir, &args.volume_size)?;
        for job in jobs {
            let figures = run_job(&endpoint, dir, args, job)?;
            eprintln!(
                "   {target} {:<16} {:>9.0} IOPS {:>8.1} MB/s  mean {:>8.0} µs  p99 {:>8.0} µs",
                job.name,
                figures.iops,
                figures.mb_per_s,
                figures.latency_us_mean,
                figures.latency_us_p99
            );
            out.push(figures);
        }
        Ok(())
    })?;
    Ok(out)
}

/// A strata volume on `rados` served over NBD by this process while the jobs run.
async fn on_volume(
    target: &str,
    rados: Arc<dyn Rados>,
    dir: &Path,
    args: &Args,
    jobs: &[Job],
) -> Result<Vec<Figures>> {
    let size_bytes = load::parse_size(&args.volume_size)?;
    let io_ctx = rados.io_ctx(POOL).await?;
    let volumes = Volumes::new(io_ctx, VolumesConfig::default());
    volumes
        .create(VOLUME, size_bytes, 22)
        .await
        .context("creating the volume")?;
    let volume = volumes
        .open(VOLUME, OpenMode::ReadWrite)
        .await
        .context("opening the volume")?;
    let device: Arc<dyn Device> = Arc::new(volume);
    let socket = dir.join(format!("{target}.sock"));
    let listener =
        NbdServer::bind_unix(&socket).with_context(|| format!("binding {}", socket.display()))?;
    let server = tokio::spawn(NbdServer::new(device, ExportConfig::default()).serve_unix(listener));
    let figures = drive(target, Endpoint::Nbd(&socket), dir, args, jobs).await;
    server.abort();
    let _ = server.await;
    let _ = std::fs::remove_file(&socket);
    figures
}

/// The embedded cluster of `target`: `--replicas` hosts of one OSD each, pool `rbd`.
fn embedded_config(target: &str, args: &Args) -> Result<cluster::ClusterConfig> {
    let mut config = super::cluster::cluster_config(args.replicas, &args.osd_size, None, None);
    config.pools.push(cluster::PoolConfig {
        name: POOL.into(),
        size: args.replicas,
        min_size: None,
        pg_num: 32,
        device_class: None,
        crush_rule: None,
    });
    for osd in &mut config.osds {
        let id = osd.id;
        let size = &args.osd_size;
        osd.device = match target {
            "strata" => continue,
            "hdd" => format!("hdd-10k@file:osd.{id}.img:{size}"),
            "nvme" => format!("nvme@file:osd.{id}.img:{size}"),
            // The HDD behind a write-back cache on NVMe as large as the HDD (a sparse file):
            // every block the jobs touch stays cached, seed 001's 100% hit case.
            "cached" => format!(
                "cache:mode=wb,cleaning=alru,line=4K:nvme@file:osd.{id}.cache:{size}|hdd-10k@file:osd.{id}.img:{size}"
            ),
            other => bail!("{other}: not an embedded target"),
        };
        if target != "nvme" {
            osd.class = "hdd".into();
        }
    }
    Ok(config)
}

async fn on_embedded(target: &str, dir: &Path, args: &Args, jobs: &[Job]) -> Result<Vec<Figures>> {
    let cluster_dir = dir.join(target);
    let config = embedded_config(target, args)?;
    let cluster = Arc::new(Cluster::create(&cluster_dir, config, ClusterOptions::default()).await?);
    let figures = on_volume(target, cluster.clone(), dir, args, jobs).await;
    super::cluster::shutdown(cluster, &cluster_dir).await?;
    figures
}

/// The Ceph targets of one round, in `order`, on one minicluster.
async fn on_ceph(
    order: &[&str],
    dir: &Path,
    args: &Args,
    jobs: &[Job],
) -> Result<Vec<(String, Vec<Figures>)>> {
    let ceph_dir = dir.join("ceph");
    let (replicas, osd_size) = (args.replicas, args.osd_size.clone());
    let cluster = {
        let ceph_dir = ceph_dir.clone();
        tokio::task::spawn_blocking(move || -> Result<CephCluster> {
            eprintln!("== ceph: starting {replicas} OSDs");
            let cluster = CephCluster::start(&ceph_dir, replicas, &osd_size, replicas)?;
            cluster.create_pool(POOL, replicas, 32)?;
            cluster.ceph(&[
                "osd",
                "pool",
                "application",
                "enable",
                POOL,
                "rbd",
                "--yes-i-really-mean-it",
            ])?;
            Ok(cluster)
        })
        .await??
    };
    let result = async {
        let mut out = Vec::new();
        for target in order {
            let figures = match *target {
                "rbd" => {
                    rbd(
                        &cluster,
                        &[
                            "create",
                            "--size",
                            &args.volume_size,
                            "--image-feature",
                            "layering",
                            &format!("{POOL}/{CEPH_IMAGE}"),
                        ],
                    )?;
                    drive(
                        target,
                        Endpoint::Rbd {
                            conf: &cluster.conf,
                            image: CEPH_IMAGE,
                        },
                        dir,
                        args,
                        jobs,
                    )
                    .await?
                }
                _ => {
                    let rados = ceph_backend::CephRados::connect(ceph_backend::CephConfig {
                        conf_path: Some(cluster.conf.clone()),
                        ..ceph_backend::CephConfig::default()
                    })
                    .await
                    .context("connecting to the minicluster through librados")?;
                    on_volume(target, Arc::new(rados), dir, args, jobs).await?
                }
            };
            out.push((target.to_string(), figures));
        }
        Ok(out)
    }
    .await;
    tokio::task::spawn_blocking(move || drop(cluster)).await?;
    result
}

/// Runs the `rbd` CLI on the minicluster.
fn rbd(cluster: &CephCluster, rbd_args: &[&str]) -> Result<()> {
    let output = super::peer_command("rbd")
        .arg("-c")
        .arg(&cluster.conf)
        .args(rbd_args)
        .output()
        .context("running rbd (apt-get install ceph-common)")?;
    if !output.status.success() {
        bail!(
            "rbd {}: {}",
            rbd_args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

/// One target's figures: `rounds[round][job]`.
#[derive(serde::Serialize)]
struct Measured {
    target: String,
    rounds: Vec<Vec<Figures>>,
}

impl Measured {
    fn median(&self, job: usize, value: impl Fn(&Figures) -> f64) -> f64 {
        let mut values: Vec<f64> = self.rounds.iter().map(|round| value(&round[job])).collect();
        values.sort_by(f64::total_cmp);
        match values.len() {
            0 => f64::NAN,
            n if n % 2 == 1 => values[n / 2],
            n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
        }
    }

    /// The lowest and highest of one figure over the rounds.
    fn spread(&self, job: usize, value: impl Fn(&Figures) -> f64) -> (f64, f64) {
        self.rounds
            .iter()
            .fold((f64::INFINITY, 0.0_f64), |(low, high), round| {
                (low.min(value(&round[job])), high.max(value(&round[job])))
            })
    }
}

/// The figure a job's cell shows: IOPS for random jobs, MB/s for sequential ones.
fn headline(job: &Job) -> fn(&Figures) -> f64 {
    if job.random() {
        |f| f.iops
    } else {
        |f| f.mb_per_s
    }
}

/// The order of the targets in `round`: as given in even rounds, reversed in odd ones, so no
/// target always runs first (on a cold page cache) or last (after the others warmed the disk).
fn round_order(targets: &[String], round: u32) -> Vec<&str> {
    let mut order: Vec<&str> = targets.iter().map(String::as_str).collect();
    if round % 2 == 1 {
        order.reverse();
    }
    order
}

async fn run_rounds(args: &Args, jobs: &[Job], dir: &Path) -> Result<Vec<Measured>> {
    let mut measured: Vec<Measured> = args
        .targets
        .iter()
        .map(|target| Measured {
            target: target.clone(),
            rounds: Vec::new(),
        })
        .collect();
    for round in 0..args.rounds {
        eprintln!("== round {} of {}", round + 1, args.rounds);
        let order = round_order(&args.targets, round);
        let round_dir = dir.join(format!("round{round}"));
        std::fs::create_dir_all(&round_dir)?;
        // The Ceph targets share one minicluster per round, so they run back to back: where
        // the first of them falls in this round's order.
        let mut ceph_done = false;
        for target in &order {
            if matches!(*target, "rbd" | "strata-ceph") {
                if ceph_done {
                    continue;
                }
                ceph_done = true;
                let ceph_order: Vec<&str> = order
                    .iter()
                    .copied()
                    .filter(|target| matches!(*target, "rbd" | "strata-ceph"))
                    .collect();
                for (target, figures) in on_ceph(&ceph_order, &round_dir, args, jobs).await? {
                    record(&mut measured, &target, figures);
                }
                continue;
            }
            let figures = on_embedded(target, &round_dir, args, jobs).await?;
            record(&mut measured, target, figures);
        }
        let _ = std::fs::remove_dir_all(&round_dir);
    }
    Ok(measured)
}

fn record(measured: &mut [Measured], target: &str, figures: Vec<Figures>) {
    if let Some(entry) = measured.iter_mut().find(|entry| entry.target == target) {
        entry.rounds.push(figures);
    }
}

/// The ratios the issue asks for, as (label, numerator target, denominator target).
const RATIOS: [(&str, &str, &str); 4] = [
    ("strata/rbd", "strata", "rbd"),
    ("strata-ceph/rbd", "strata-ceph", "rbd"),
    ("cached/nvme", "cached", "nvme"),
    ("cached/hdd", "cached", "hdd"),
];

fn print_table(measured: &[Measured], jobs: &[Job], args: &Args) {
    println!(
        "\nvolume: {} replicas, {} volumes, {} s per job, {} round(s) (median; IOPS range over rounds in brackets); load average at the end {}",
        args.replicas,
        args.volume_size,
        args.runtime_s,
        args.rounds,
        load::load_average()
    );
    let mut header = format!("{:<16}", "job");
    for entry in measured {
        header.push_str(&format!(" | {:>30}", entry.target));
    }
    let ratios: Vec<_> = RATIOS
        .iter()
        .filter(|(_, a, b)| {
            measured.iter().any(|m| m.target == *a) && measured.iter().any(|m| m.target == *b)
        })
        .collect();
    for (label, _, _) in &ratios {
        header.push_str(&format!(" | {label:>15}"));
    }
    println!("{header}");
    println!("{}", "-".repeat(header.chars().count()));
    for (index, job) in jobs.iter().enumerate() {
        let mut line = format!("{:<16}", job.name);
        let value = headline(job);
        for entry in measured {
            let median = entry.median(index, value);
            let p99 = entry.median(index, |f| f.latency_us_p99);
            let (low, high) = entry.spread(index, value);
            let cell = if job.random() {
                format!("{median:.0} IOPS p99 {p99:.0}µs")
            } else {
                format!("{median:.0} MB/s p99 {p99:.0}µs")
            };
            let cell = if args.rounds > 1 {
                format!("{cell} [{low:.0}-{high:.0}]")
            } else {
                cell
            };
            line.push_str(&format!(" | {cell:>30}"));
        }
        for (_, a, b) in &ratios {
            let ratio = ratio_median(measured, a, b, index, value);
            line.push_str(&format!(" | {ratio:>14.2}x"));
        }
        println!("{line}");
    }
    if args.rounds > 1 {
        println!("\nper round (IOPS for random jobs, MB/s for sequential ones; ratios of the same round):");
        for (index, job) in jobs.iter().enumerate() {
            for (label, a, b) in &ratios {
                let per_round = round_ratios(measured, a, b, index, headline(job));
                let listed: Vec<String> = per_round
                    .iter()
                    .map(|(ours, theirs)| format!("{:.2}x ({ours:.0}/{theirs:.0})", ours / theirs))
                    .collect();
                println!("  {:<16} {label:<16} {}", job.name, listed.join(", "));
            }
        }
    }
}

/// `(a, b)` of one job's figure in every round both targets ran.
fn round_ratios(
    measured: &[Measured],
    a: &str,
    b: &str,
    job: usize,
    value: fn(&Figures) -> f64,
) -> Vec<(f64, f64)> {
    let rounds = |target: &str| {
        measured
            .iter()
            .find(|m| m.target == target)
            .map(|m| m.rounds.iter().map(|round| value(&round[job])).collect())
            .unwrap_or_else(Vec::new)
    };
    rounds(a).into_iter().zip(rounds(b)).collect()
}

/// The median over rounds of the ratio `a / b` within each round (both ran on the same
/// machine state), NaN when either target did not run.
fn ratio_median(
    measured: &[Measured],
    a: &str,
    b: &str,
    job: usize,
    value: fn(&Figures) -> f64,
) -> f64 {
    let mut ratios: Vec<f64> = round_ratios(measured, a, b, job, value)
        .iter()
        .map(|(ours, theirs)| ours / theirs)
        .collect();
    ratios.sort_by(f64::total_cmp);
    match ratios.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => ratios[n / 2],
        n => (ratios[n / 2 - 1] + ratios[n / 2]) / 2.0,
    }
}

const COLORS: [&str; 6] = [
    "#1f77b4", "#d62728", "#ff7f0e", "#7f7f7f", "#2ca02c", "#9467bd",
];

/// Grouped bars, one group per job and one bar per target, on a log scale (HDDs and NVMe
/// differ a hundredfold): IOPS for random jobs, MB/s for sequential ones.
fn svg(measured: &[Measured], jobs: &[Job]) -> String {
    use std::fmt::Write;
    let (width, height, margin, legend) = (900.0, 460.0, 60.0, 120.0);
    let values: Vec<Vec<f64>> = measured
        .iter()
        .map(|entry| {
            (0..jobs.len())
                .map(|index| entry.median(index, headline(&jobs[index])))
                .collect()
        })
        .collect();
    let top = values
        .iter()
        .flatten()
        .copied()
        .filter(|v| v.is_finite())
        .fold(1.0_f64, f64::max);
    let log_top = top.log10().ceil().max(1.0);
    let plot_height = height - 2.0 * margin;
    let y = |value: f64| {
        let value = value.max(1.0);
        height - margin - value.log10() / log_top * plot_height
    };
    let group = (width - margin - legend) / jobs.len().max(1) as f64;
    let bar = group * 0.8 / measured.len().max(1) as f64;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11"><rect width="100%" height="100%" fill="white"/>"#
    );
    let _ = writeln!(
        out,
        r#"<text x="{margin}" y="20" font-size="14">strata bench volume: IOPS (random jobs) and MB/s (sequential), log scale; medians, whiskers span the rounds</text>"#
    );
    for decade in 0..=log_top as i32 {
        let value = 10f64.powi(decade);
        let _ = writeln!(
            out,
            r##"<line x1="{margin}" y1="{y:.1}" x2="{x2}" y2="{y:.1}" stroke="#ddd"/><text x="5" y="{ty:.1}">{value}</text>"##,
            y = y(value),
            x2 = width - legend,
            ty = y(value) + 4.0
        );
    }
    for (index, job) in jobs.iter().enumerate() {
        let left = margin + index as f64 * group + group * 0.1;
        for (target, row) in values.iter().enumerate() {
            let value = row[index];
            if !value.is_finite() {
                continue;
            }
            let x = left + target as f64 * bar;
            let top = y(value);
            let _ = writeln!(
                out,
                r#"<rect x="{x:.1}" y="{top:.1}" width="{w:.1}" height="{h:.1}" fill="{color}"><title>{value:.0}</title></rect>"#,
                w = bar * 0.95,
                h = height - margin - top,
                color = COLORS[target % COLORS.len()]
            );
            // The range over the rounds, as a whisker.
            let (low, high) = measured[target].spread(index, headline(job));
            if measured[target].rounds.len() > 1 && low.is_finite() {
                let _ = writeln!(
                    out,
                    r#"<line x1="{cx:.1}" y1="{y1:.1}" x2="{cx:.1}" y2="{y2:.1}" stroke="black"/>"#,
                    cx = x + bar * 0.475,
                    y1 = y(low),
                    y2 = y(high)
                );
            }
        }
        let _ = writeln!(
            out,
            r#"<text x="{x:.1}" y="{ty:.1}" text-anchor="middle" font-size="9">{name}</text>"#,
            x = left + group * 0.4,
            ty = height - margin + 14.0,
            name = job.name
        );
    }
    for (target, entry) in measured.iter().enumerate() {
        let ly = margin + target as f64 * 18.0;
        let _ = writeln!(
            out,
            r#"<rect x="{x}" y="{ly}" width="12" height="12" fill="{color}"/><text x="{tx}" y="{ty}">{name}</text>"#,
            x = width - legend + 10.0,
            tx = width - legend + 28.0,
            ty = ly + 10.0,
            color = COLORS[target % COLORS.len()],
            name = entry.target
        );
    }
    out.push_str("</svg>\n");
    out
}

pub fn run(args: Args) -> Result<ExitCode> {
    for target in &args.targets {
        if !TARGETS.contains(&target.as_str()) {
            bail!("unknown target {target:?} (known: {})", TARGETS.join(", "));
        }
    }
    if args.rounds == 0 || !(args.runtime_s > 0.0 && args.runtime_s <= 3600.0) {
        bail!("--rounds must be > 0 and --runtime-s in (0, 3600]");
    }
    if args
        .targets
        .iter()
        .any(|t| matches!(t.as_str(), "rbd" | "strata-ceph"))
    {
        if let Some(install) = super::ceph::missing(&["ceph-mon", "ceph-mgr", "ceph-osd", "ceph"]) {
            bail!("the Ceph targets need Ceph: {install}");
        }
    }
    let jobs = args
        .jobs
        .iter()
        .map(|job| Job::parse(job))
        .collect::<Result<Vec<_>>>()?;
    let load::Setup { temp, runtime, .. } = load::setup(
        "volume",
        std::slice::from_ref(&args.volume_size),
        1,
        args.replicas,
        args.runtime_s,
        &args.dir,
        false,
    )?;
    let measured = runtime.block_on(async {
        tokio::select! {
            measured = run_rounds(&args, &jobs, temp.path()) => measured,
            _ = tokio::signal::ctrl_c() => bail!("interrupted"),
        }
    })?;
    print_table(&measured, &jobs, &args);
    if let Some(path) = &args.svg {
        std::fs::write(path, svg(&measured, &jobs))
            .with_context(|| format!("writing {}", path.display()))?;
        println!("plot: {}", path.display());
    }
    if let Some(path) = &args.json {
        let medians: Vec<Value> = measured
            .iter()
            .map(|entry| {
                let per_job: Vec<Value> = (0..jobs.len())
                    .map(|index| {
                        serde_json::json!({
                            "job": jobs[index].name,
                            "iops": entry.median(index, |f| f.iops),
                            "mb_per_s": entry.median(index, |f| f.mb_per_s),
                            "latency_us_mean": entry.median(index, |f| f.latency_us_mean),
                            "latency_us_p99": entry.median(index, |f| f.latency_us_p99),
                        })
                    })
                    .collect();
                serde_json::json!({"target": entry.target, "jobs": per_job})
            })
            .collect();
        let report = serde_json::json!({
            "bench": "volume", "replicas": args.replicas, "volume_size": args.volume_size,
            "runtime_s": args.runtime_s, "rounds": args.rounds, "jobs": args.jobs,
            "load_average": load::load_average(), "medians": medians, "targets": measured,
        });
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_parse_and_bad_ones_are_named() {
        let job = Job::parse("randread-4k-16").unwrap();
        assert_eq!(
            (job.rw.as_str(), job.block.as_str(), job.iodepth),
            ("randread", "4k", 16)
        );
        assert!(job.random());
        assert!(!Job::parse("write-1m-4").unwrap().random());
        for bad in [
            "randread-4k",
            "scan-4k-1",
            "read-4x-1",
            "read-4k-0",
            "read-4k-999",
        ] {
            let error = Job::parse(bad).unwrap_err().to_string();
            assert!(error.contains(bad), "{error}");
        }
    }

    #[test]
    fn odd_rounds_reverse_the_order_and_ratios_pair_rounds() {
        let targets: Vec<String> = ["strata", "rbd", "hdd"].map(String::from).into();
        assert_eq!(round_order(&targets, 0), ["strata", "rbd", "hdd"]);
        assert_eq!(round_order(&targets, 1), ["hdd", "rbd", "strata"]);
        let figures = |iops: f64| Figures {
            iops,
            ..Figures::default()
        };
        let measured = [
            Measured {
                target: "strata".into(),
                rounds: vec![
                    vec![figures(30.0)],
                    vec![figures(10.0)],
                    vec![figures(90.0)],
                ],
            },
            Measured {
                target: "rbd".into(),
                rounds: vec![
                    vec![figures(10.0)],
                    vec![figures(10.0)],
                    vec![figures(10.0)],
                ],
            },
        ];
        // Ratios 3, 1 and 9 within rounds: their median is 3, and the spread is 10-90.
        assert_eq!(ratio_median(&measured, "strata", "rbd", 0, |f| f.iops), 3.0);
        assert_eq!(measured[0].spread(0, |f| f.iops), (10.0, 90.0));
        assert!(ratio_median(&measured, "strata", "nvme", 0, |f| f.iops).is_nan());
    }

    #[test]
    fn fio_figures_sum_both_sides_and_take_the_worse_p99() {
        let report = serde_json::json!({"jobs": [{
            "read": {"iops": 100.0, "bw_bytes": 409600.0,
                     "clat_ns": {"mean": 2000.0, "percentile": {"99.000000": 5000.0}}},
            "write": {"iops": 300.0, "bw_bytes": 1228800.0,
                      "clat_ns": {"mean": 6000.0, "percentile": {"99.000000": 9000.0}}}
        }]});
        let f = figures(&report);
        assert_eq!(f.iops, 400.0);
        assert!((f.mb_per_s - 1.6384).abs() < 1e-9);
        assert_eq!(f.latency_us_mean, 5.0);
        assert_eq!(f.latency_us_p99, 9.0);
    }
}
