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
//!                     [--json volume.json] [--data-cache-size 256M]
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
use report::{print_table, report_json, svg, Measured};

mod report;

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
    /// Memory for each embedded OSD's data cache (blocks of reads up to 64 KiB; K, M, G
    /// suffixes). Default: the store's (256M). The minicluster's BlueStore OSDs have
    /// `osd_memory_target` 896 MiB each, with cache autotuning.
    #[arg(long)]
    pub data_cache_size: Option<String>,
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

/// What this process sees of a job it serves, beside fio's figures: the volume's own time
/// per call (fio's latency minus it is the NBD hop and fio) and, on the embedded cluster,
/// where the stores' replica writes spent theirs.
struct Probe<'a> {
    device: &'a dyn Device,
    cluster: Option<&'a Cluster>,
}

struct Reading {
    device: device::DeviceStats,
    commits: Option<store::CommitStats>,
}

impl Probe<'_> {
    fn read(&self) -> Reading {
        Reading {
            device: self.device.stats(),
            commits: self.cluster.map(Cluster::commit_stats),
        }
    }

    /// One line on the job between `before` and now, or none when the job made no call.
    fn note(&self, job: &Job, before: &Reading) -> Option<String> {
        let now = self.read();
        let period = now.device.since(&before.device);
        let kind = if job.rw.contains("write") {
            device::OpKind::Write
        } else {
            device::OpKind::Read
        };
        let calls = period.op(kind);
        if calls.ops == 0 {
            return None;
        }
        let mut note = format!(
            "volume {}s: mean {:.0} µs, p50 {:.0}, p99 {:.0} (up to {} in flight)",
            if kind == device::OpKind::Write {
                "write"
            } else {
                "read"
            },
            calls.latency_us_mean(),
            calls.latency_us_p50(),
            calls.latency_us_p99(),
            period.queue_depth_max(),
        );
        if let (Some(after), Some(before)) = (&now.commits, &before.commits) {
            let transactions = after.transactions.saturating_sub(before.transactions);
            let flushes = after.device_flushes.saturating_sub(before.device_flushes);
            if kind == device::OpKind::Write && transactions > 0 {
                note.push_str(&format!(
                    "; {:.2} replica writes per volume write, {:.1} per device flush; store \
                     stages per replica write: {}",
                    transactions as f64 / calls.ops as f64,
                    transactions as f64 / flushes.max(1) as f64,
                    after
                        .stages
                        .since(&before.stages)
                        .per_transaction(transactions),
                ));
            }
        }
        Some(note)
    }

    /// On the embedded cluster: the volume's data objects' extents on their primaries, and
    /// the device-contiguous runs of them (a whole-object read costs one device read per run).
    async fn fragmentation(&self) -> Option<String> {
        let cluster = self.cluster?;
        let pool = cluster.io_ctx(POOL).await.ok()?;
        let objects: Vec<String> = pool
            .list_all()
            .await
            .ok()?
            .into_iter()
            .filter(|name| name.starts_with("rbd_data."))
            .collect();
        let (mut extents, mut runs, mut runs_max) = (0, 0, 0);
        for object in &objects {
            let placement = cluster.locate(POOL, object).ok()?;
            let collection = cluster.collection_of(POOL, object).ok()?;
            let osd = cluster.osd(placement.primary()?)?;
            let (object_extents, object_runs) =
                osd.store().extent_runs(&collection, object).await.ok()??;
            extents += object_extents;
            runs += object_runs;
            runs_max = runs_max.max(object_runs);
        }
        let count = objects.len().max(1) as f64;
        Some(format!(
            "{} data objects on their primaries: {:.1} extents, {:.1} device-contiguous runs per \
             object (most {runs_max})",
            objects.len(),
            extents as f64 / count,
            runs as f64 / count,
        ))
    }
}

/// Prefills the endpoint, then runs every job on it, on a blocking thread (fio is a child
/// process; this runtime keeps serving NBD meanwhile).
async fn drive(
    target: &str,
    endpoint: Endpoint<'_>,
    probe: Option<&Probe<'_>>,
    dir: &Path,
    args: &Args,
    jobs: &[Job],
) -> Result<Vec<Figures>> {
    eprintln!(
        "== {target}: writing the volume once ({})",
        args.volume_size
    );
    let mut out = Vec::new();
    let fragmentation = |when: &str| {
        if let Some(note) = probe
            .and_then(|probe| tokio::runtime::Handle::current().block_on(probe.fragmentation()))
        {
            eprintln!("     {when}: {note}");
        }
    };
    tokio::task::block_in_place(|| -> Result<()> {
        prefill(&endpoint, dir, &args.volume_size)?;
        fragmentation("after the prefill");
        for job in jobs {
            let before = probe.map(Probe::read);
            let figures = run_job(&endpoint, dir, args, job)?;
            eprintln!(
                "   {target} {:<16} {:>9.0} IOPS {:>8.1} MB/s  mean {:>8.0} µs  p99 {:>8.0} µs",
                job.name,
                figures.iops,
                figures.mb_per_s,
                figures.latency_us_mean,
                figures.latency_us_p99
            );
            if let (Some(probe), Some(before)) = (probe, &before) {
                if let Some(note) = probe.note(job, before) {
                    eprintln!("     {note}");
                }
            }
            // After reads too: a fragmented read makes the stores rewrite what it read.
            fragmentation(&format!("after {}", job.name));
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
    cluster: Option<&Cluster>,
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
    let probe = Probe {
        device: device.as_ref(),
        cluster,
    };
    let socket = dir.join(format!("{target}.sock"));
    let listener =
        NbdServer::bind_unix(&socket).with_context(|| format!("binding {}", socket.display()))?;
    let server =
        tokio::spawn(NbdServer::new(device.clone(), ExportConfig::default()).serve_unix(listener));
    let figures = drive(
        target,
        Endpoint::Nbd(&socket),
        Some(&probe),
        dir,
        args,
        jobs,
    )
    .await;
    server.abort();
    let _ = server.await;
    let _ = std::fs::remove_file(&socket);
    figures
}

/// The embedded cluster of `target`: `--replicas` hosts of one OSD each, pool `rbd`.
fn embedded_config(target: &str, args: &Args) -> Result<cluster::ClusterConfig> {
    let mut config = super::cluster::cluster_config(
        args.replicas,
        &args.osd_size,
        args.data_cache_size.as_deref(),
        None,
    );
    config.pools.push(cluster::PoolConfig {
        name: POOL.into(),
        size: args.replicas,
        min_size: None,
        pg_num: 32,
        device_class: None,
        crush_rule: None,
        erasure: None,
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
    let figures = on_volume(target, cluster.clone(), Some(&cluster), dir, args, jobs).await;
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
                    let figures = drive(
                        target,
                        Endpoint::Rbd {
                            conf: &cluster.conf,
                            image: CEPH_IMAGE,
                        },
                        None,
                        dir,
                        args,
                        jobs,
                    )
                    .await?;
                    print_ceph_caches(&cluster, replicas);
                    figures
                }
                _ => {
                    let rados = ceph_backend::CephRados::connect(ceph_backend::CephConfig {
                        conf_path: Some(cluster.conf.clone()),
                        ..ceph_backend::CephConfig::default()
                    })
                    .await
                    .context("connecting to the minicluster through librados")?;
                    on_volume(target, Arc::new(rados), None, dir, args, jobs).await?
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

/// Prints how much memory the minicluster's OSDs hold in BlueStore's caches (`ceph tell
/// osd.N dump_mempools`), the peer's side of the data-cache comparison; a failure to ask is
/// printed, not fatal.
fn print_ceph_caches(cluster: &CephCluster, osds: u32) {
    let mut data_bytes = 0u64;
    let mut onode_bytes = 0u64;
    let mut total_bytes = 0u64;
    for osd in 0..osds {
        let asked = cluster
            .ceph(&["tell", &format!("osd.{osd}"), "dump_mempools"])
            .and_then(|text| Ok(serde_json::from_str::<serde_json::Value>(&text)?));
        let value = match asked {
            Ok(value) => value,
            Err(error) => {
                eprintln!("     (could not read osd.{osd}'s mempools: {error:#})");
                return;
            }
        };
        let pools = &value["mempool"]["by_pool"];
        let bytes = |pool: &str| pools[pool]["bytes"].as_u64().unwrap_or(0);
        data_bytes += bytes("bluestore_cache_data");
        onode_bytes += bytes("bluestore_cache_onode") + bytes("bluestore_cache_meta");
        total_bytes += value["mempool"]["total"]["bytes"].as_u64().unwrap_or(0);
    }
    let mib = |bytes: u64| bytes as f64 / (1u64 << 20) as f64;
    eprintln!(
        "     Ceph's {osds} OSDs after the rbd jobs: BlueStore data cache {:.0} MiB, onode and \
         metadata caches {:.0} MiB, all mempools {:.0} MiB (osd_memory_target 896 MiB each)",
        mib(data_bytes),
        mib(onode_bytes),
        mib(total_bytes)
    );
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
        let report = report_json(&measured, &jobs, &args);
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
    fn odd_rounds_reverse_the_order() {
        let targets: Vec<String> = ["strata", "rbd", "hdd"].map(String::from).into();
        assert_eq!(round_order(&targets, 0), ["strata", "rbd", "hdd"]);
        assert_eq!(round_order(&targets, 1), ["hdd", "rbd", "strata"]);
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
