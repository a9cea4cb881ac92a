//! `strata bench cluster` (issue 3): object write and read ops/s and latency of the embedded
//! cluster at a given object size, concurrency and replica count, printed beside the same
//! workload on real Ceph (`rados bench`) and beside fio on the same disk (the limit), all
//! measured in one run.
//!
//! Rules, so the three rows mean the same thing:
//! - strata: R OSDs (one per host, files under the data directory, sparse but for their
//!   first `--osd-layout` bytes, written once before the phases as fio lays out its file;
//!   with zeros where fio writes data, which changed the store's figure in no measurement,
//!   fio's much: ARCHITECTURE.md), one pool of R
//!   replicas and `--pg-num` PGs, durable writes; C tokio tasks drive it through the `rados`
//!   traits. Write phase: fresh objects for `--seconds` (as `rados bench SECS write
//!   --no-cleanup`); read phase: random objects among those written for `--seconds` (as
//!   `rados bench SECS rand`). Each OSD keeps a data cache of small reads
//!   (`--data-cache-size`, `strata serve`'s 256 MiB by default), as Ceph's BlueStore caches
//!   what it reads: a line under the table says what share of the replica reads it served,
//!   so that the read rows against fio, which reads the disk only, are read right;
//!   `--data-cache-size 0` makes every strata read a device read.
//! - Ceph: `ceph-minicluster.sh` with R BlueStore OSDs on the same disk, a pool of the same
//!   size and PG count, then `rados bench SECS write -b SIZE -O SIZE -t C --no-cleanup` and
//!   `rados bench SECS rand -t C`. rados bench reports the mean latency only.
//! - fio: `--rw=randwrite` then `randread`, `--bs=SIZE --direct=1 --ioengine=libaio
//!   --iodepth=C` on one file in the data directory: what the disk does without any
//!   object layer. The disk here has a volatile write cache and fio does not flush, so its
//!   write row is the device's ceiling, not a durable peer (strata and Ceph acknowledge
//!   only after a flush). A second write row, `fio fdatasync/batch`, adds
//!   `--fdatasync=C`: an fdatasync after every C writes, the disk's limit for writes made
//!   durable in batches of the concurrency, as group commit does. Under the table, a line
//!   per strata write phase says how many replica writes shared each device flush (its
//!   group commit's batch, to compare with that row's C).
//! - Order: strata's phases, then fio's jobs, then Ceph. With `--rounds N` the first two
//!   alternate N times on the same files (each strata round writes fresh objects of its
//!   own and removes them after its read phase, as rados bench cleans up), so every strata figure has a fio figure of the same minutes beside it; the table
//!   keeps each system's median round and a line per size and operation gives every
//!   round's ratio. On this shared VM fio's random writes moved by up to 70% between runs
//!   minutes apart while strata's moved by 4%, so one pair of phases says little.
//!
//! Run (about 3 minutes with the defaults; 4 MiB phases write several GB per replica):
//! ```text
//! strata bench cluster [--replicas 3] [--concurrency 16] [--sizes 4K,4M] [--seconds 10]
//!                      [--dir /fast/disk] [--json rows.json] [--no-ceph] [--no-fio]
//!                      [--rounds 5]
//! ```
//! CI runs only `tests/bench_objects_cli.rs` (`--no-ceph --no-fio --ops 100`, under a
//! second): starting Ceph and writing gigabytes does not fit a test.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use cluster::{Cluster, ClusterConfig, ClusterOptions, HostConfig, OsdConfig, PoolConfig};
use rados::Rados;
use rand::{Rng, SeedableRng};

use super::ceph::{self, CephCluster};
use super::load::{self, Limit, Row};

/// Object write/read throughput and latency against Ceph (rados bench) and fio.
#[derive(clap::Args, Clone)]
pub struct Args {
    /// Object sizes (K, M suffixes), comma separated.
    #[arg(long, value_delimiter = ',', default_value = "4K,4M")]
    pub sizes: Vec<String>,
    /// Operations in flight (tasks for strata, -t for rados bench, --iodepth for fio).
    #[arg(long, default_value_t = 16)]
    pub concurrency: usize,
    /// Replicas per object (and OSDs, one per host).
    #[arg(long, default_value_t = 1)]
    pub replicas: u32,
    /// Seconds of each phase (write, read) for every system.
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Stop each strata phase after this many operations (smoke tests); peers still run
    /// for --seconds.
    #[arg(long)]
    pub ops: Option<u64>,
    /// PGs of the benchmark pool (same for strata and Ceph).
    #[arg(long, default_value_t = 64)]
    pub pg_num: u32,
    /// Size of each OSD's sparse file (strata and Ceph).
    #[arg(long, default_value = "32G")]
    pub osd_size: String,
    /// Size of fio's file (written once before the jobs).
    #[arg(long, default_value = "1G")]
    pub fio_size: String,
    /// Bytes at the start of each strata OSD file written with zeros before the phases, as
    /// fio writes its file once before its jobs: the store's first write into a hole of a
    /// sparse file fills the hole's 16 MiB chunk with zeros (see device/src/initialize.rs),
    /// which costs its small writes about a fifth of their rate. The store allocates from
    /// the start of its device, so this is the space the phases write first. 0 leaves the
    /// files sparse throughout, as `strata serve` creates them.
    #[arg(long, default_value = "4G")]
    pub osd_layout: String,
    /// Memory of each strata OSD's cache of small reads, as `data_cache_size` in
    /// cluster.toml (`strata serve`'s default, 256M; Ceph's BlueStore caches what it reads
    /// too). 0 makes every strata read a device read.
    #[arg(long, default_value = "256M")]
    pub data_cache_size: String,
    /// Parent of the run's temporary directory (removed at the end); the default, the
    /// current directory, puts strata, Ceph and fio on the disk you run from.
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    /// Rounds: strata's phases and fio's jobs run alternately this many times, fio right
    /// after strata in each round, so both meet the same moments of a shared disk (fio's
    /// random writes here moved by up to 70% between runs minutes apart). The table shows
    /// each system's median round; a line per size and operation lists every round's
    /// strata/fio. Ceph runs once, after the rounds.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// Seed of the read phase's object choice.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Skip the Ceph peer.
    #[arg(long)]
    pub no_ceph: bool,
    /// Skip the fio peer.
    #[arg(long)]
    pub no_fio: bool,
    /// Run strata as `strata serve --poll-while-busy` does: runtime workers off the CPU of
    /// the commit threads, one polling while operations are in flight (see
    /// `cluster::runtime`; faster small objects, slower large ones on few CPUs).
    #[arg(long)]
    pub poll_while_busy: bool,
    /// Also write the rows as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Benchmark an erasure-coded pool `K+M` (`4+2`) instead of a replicated one: K+M OSDs
    /// (one per host; `--replicas` is ignored), for strata and Ceph alike (Ceph's profile
    /// with `crush-failure-domain=osd` and `allow_ec_overwrites`).
    #[arg(long, value_parser = parse_erasure)]
    pub erasure: Option<(u32, u32)>,
}

/// `K+M`.
pub(super) fn parse_erasure(text: &str) -> Result<(u32, u32), String> {
    let (k, m) = text
        .split_once('+')
        .ok_or_else(|| format!("{text:?}: give K+M, as 4+2"))?;
    let number = |word: &str| {
        word.trim()
            .parse::<u32>()
            .map_err(|_| format!("{text:?}: {word:?} is not a number"))
    };
    Ok((number(k)?, number(m)?))
}

const CEPH: &str = "ceph (rados bench)";
const FIO: &str = "fio (disk limit)";
/// fio's random writes with an fdatasync after every `--concurrency` writes: the disk's
/// limit for writes that are durable when acknowledged in batches of that size, as strata's
/// and Ceph's are.
const FIO_SYNCED: &str = "fio fdatasync/batch";

pub fn run(mut args: Args) -> Result<ExitCode> {
    if let Some((k, m)) = args.erasure {
        args.replicas = k + m;
    }
    let load::Setup {
        sizes_bytes: sizes,
        temp,
        runtime,
        poll_while_busy,
    } = load::setup(
        "cluster",
        &args.sizes,
        args.concurrency,
        args.replicas,
        args.seconds,
        &args.dir,
        args.poll_while_busy,
    )?;
    args.poll_while_busy = poll_while_busy;
    // Refused before minutes of layout and peers, not when the cluster is created (which
    // parses it as cluster.toml's `data_cache_size`: 0 turns the cache off).
    if device::parse_size_bytes(&args.data_cache_size).is_none() {
        bail!(
            "--data-cache-size: {:?} is not a size like 64M or 0",
            args.data_cache_size
        );
    }
    let steal = load::StealMeter::start();
    let (rows, notes) = runtime.block_on(async {
        tokio::select! {
            rows = run_all(&args, &sizes, temp.path().to_path_buf()) => rows,
            _ = tokio::signal::ctrl_c() => bail!("interrupted"),
        }
    })?;
    let rounds = if args.rounds > 1 {
        let then_fio = if args.no_fio { "" } else { " then fio" };
        format!(
            ", {} rounds of strata{then_fio} (the median round of each system below)",
            args.rounds
        )
    } else {
        String::new()
    };
    println!(
        "\nobjects: concurrency {}, {}, {} s per phase{rounds}, strata's OSD files laid out for their first {} (--osd-layout); load average at the end {}; CPU stolen by the hypervisor during the run {}",
        args.concurrency,
        args.erasure.map_or_else(
            || format!("replicas {}", args.replicas),
            |(k, m)| format!("erasure-coded {k}+{m} on {} OSDs", k + m)
        ),
        args.seconds,
        args.osd_layout,
        load::load_average(),
        steal.percent()
    );
    load::print_table(
        &rows,
        &[
            ("strata/ceph", CEPH),
            ("strata/fio", FIO),
            ("/fio synced", FIO_SYNCED),
        ],
    );
    for note in &notes {
        println!("{note}");
    }
    if let Some(path) = &args.json {
        let settings = serde_json::json!({
            "bench": "cluster", "sizes_bytes": sizes, "concurrency": args.concurrency,
            "replicas": args.replicas, "seconds": args.seconds, "pg_num": args.pg_num,
            "rounds": args.rounds, "erasure": args.erasure.map(|(k, m)| format!("{k}+{m}")),
            "osd_layout_bytes": load::parse_size(&args.osd_layout)?,
        });
        load::write_json(path, settings, &rows)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The rows of every system (each system's median round), and notes for below the table:
/// strata's group commit per write phase and, with several rounds, every round's strata/fio.
async fn run_all(args: &Args, sizes: &[u64], dir: PathBuf) -> Result<(Vec<Row>, Vec<String>)> {
    let fio_file = if args.no_fio {
        eprintln!("== fio: skipped (--no-fio)");
        None
    } else if !ceph::on_path("fio") {
        eprintln!("== fio: not installed (apt-get install -y fio); skipped");
        None
    } else {
        Some(dir.join("fio.img"))
    };
    let strata_dir = dir.join("strata");
    eprintln!("== strata (embedded cluster)");
    let strata = Strata::open(args, &strata_dir).await?;
    if let Some(file) = &fio_file {
        eprintln!("== fio on the same disk");
        fio_lay_out(args, file)?;
    }
    let mut rounds: Vec<Vec<Row>> = Vec::new();
    let mut notes = Vec::new();
    for round in 0..args.rounds {
        if args.rounds > 1 {
            eprintln!("== round {} of {}", round + 1, args.rounds);
        }
        let (mut rows, round_notes) = strata.round(args, sizes, round).await?;
        if args.rounds > 1 {
            notes.extend(
                round_notes
                    .into_iter()
                    .map(|note| format!("round {}: {note}", round + 1)),
            );
        } else {
            notes.extend(round_notes);
        }
        if let Some(file) = &fio_file {
            rows.extend(fio(args, sizes, file)?);
        }
        rounds.push(rows);
    }
    strata.close(&strata_dir).await?;
    if let Some(file) = &fio_file {
        std::fs::remove_file(file).with_context(|| format!("removing {}", file.display()))?;
    }
    let mut rows = median_rounds(&rounds);
    if args.rounds > 1 {
        notes.extend(round_ratio_notes(&rounds, FIO));
    }
    if args.no_ceph {
        eprintln!("== Ceph: skipped (--no-ceph)");
    } else if let Some(install) =
        ceph::missing(&["ceph-mon", "ceph-mgr", "ceph-osd", "ceph", "rados"])
    {
        eprintln!("== Ceph: not installed ({install}); skipped");
    } else {
        eprintln!("== Ceph (ceph-minicluster.sh, rados bench)");
        let ceph_dir = dir.join("ceph");
        // Blocking: the script and rados bench are whole processes; nothing else runs now.
        let args = args.clone();
        let sizes = sizes.to_vec();
        rows.extend(
            tokio::task::spawn_blocking(move || rados_bench(&args, &sizes, &ceph_dir)).await??,
        );
    }
    Ok((rows, notes))
}

/// Per (system, size, operation), in the order first seen, the row of the median round by
/// ops/s (of an even count, the lower middle one): a round of a noisy neighbour moves a
/// median less than a mean.
pub(super) fn median_rounds(rounds: &[Vec<Row>]) -> Vec<Row> {
    let mut medians = Vec::new();
    let mut seen: Vec<(&str, u64, &str)> = Vec::new();
    for row in rounds.iter().flatten() {
        let key = (row.system.as_str(), row.size_bytes, row.op.as_str());
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        let mut same: Vec<&Row> = rounds
            .iter()
            .flatten()
            .filter(|r| (r.system.as_str(), r.size_bytes, r.op.as_str()) == key)
            .collect();
        same.sort_by(|a, b| a.ops_per_s().total_cmp(&b.ops_per_s()));
        medians.push(same[(same.len() - 1) / 2].clone());
    }
    medians
}

/// One line per (size, operation) of strata: its ops/s in every round and, where `peer` has
/// a row of the same round in every round, each round's strata/peer and their median.
pub(super) fn round_ratio_notes(rounds: &[Vec<Row>], peer: &str) -> Vec<String> {
    let mut notes = Vec::new();
    let Some(first) = rounds.first() else {
        return notes;
    };
    for row in first.iter().filter(|r| r.system == "strata") {
        let find = |round: &[Row], system: &str| {
            round
                .iter()
                .find(|r| r.system == system && r.size_bytes == row.size_bytes && r.op == row.op)
                .map(Row::ops_per_s)
        };
        let ours: Option<Vec<f64>> = rounds.iter().map(|round| find(round, "strata")).collect();
        let Some(ours) = ours else {
            continue;
        };
        let listed: Vec<String> = ours.iter().map(|ops| format!("{ops:.0}")).collect();
        let mut note = format!(
            "strata {} {} per round: {} ops/s",
            load::size_label(row.size_bytes),
            row.op,
            listed.join(", ")
        );
        let theirs: Option<Vec<f64>> = rounds
            .iter()
            .map(|round| find(round, peer).filter(|&ops| ops > 0.0))
            .collect();
        if let Some(theirs) = theirs {
            let mut ratios: Vec<f64> = ours.iter().zip(&theirs).map(|(o, t)| o / t).collect();
            let listed: Vec<String> = ours
                .iter()
                .zip(&theirs)
                .zip(&ratios)
                .map(|((o, t), ratio)| format!("{ratio:.2}x ({o:.0}/{t:.0})"))
                .collect();
            ratios.sort_by(f64::total_cmp);
            note.push_str(&format!(
                "; strata/{peer}: {}; median {:.2}x",
                listed.join(", "),
                ratios[(ratios.len() - 1) / 2]
            ));
        }
        notes.push(note);
    }
    notes
}

/// R hosts of one OSD each on sparse files of `osd_size`, durable, no periodic scrub, their
/// data caches of `data_cache_size` (the default when `None`), and (when `pool_pg_num` is
/// given) the benchmark pool.
pub(super) fn cluster_config(
    replicas: u32,
    osd_size: &str,
    data_cache_size: Option<&str>,
    pool_pg_num: Option<u32>,
) -> ClusterConfig {
    let mut config = ClusterConfig::empty();
    config.scrub_interval_s = 0;
    config.durable = true;
    for id in 0..replicas as i32 {
        let host = format!("host{id}");
        config.hosts.push(HostConfig { name: host.clone() });
        config.osds.push(OsdConfig {
            id,
            host,
            device: format!("file:osd.{id}.img:{osd_size}"),
            size: None,
            class: "ssd".into(),
            weight: Some(1.0),
            min_alloc_size: 4096,
            emulation: None,
            data_cache_size: data_cache_size.map(str::to_owned),
        });
    }
    if let Some(pg_num) = pool_pg_num {
        config.pools.push(PoolConfig {
            name: "bench".into(),
            size: replicas,
            min_size: None,
            pg_num,
            device_class: None,
            crush_rule: None,
            erasure: None,
        });
    }
    config
}

/// The longest a round's cleanup may take (it removes every object the round wrote).
const CLEANUP_SECONDS_MAX: f64 = 3600.0;

/// The embedded cluster of the strata rows, open across the rounds.
struct Strata {
    cluster: Arc<Cluster>,
    pool: Arc<dyn rados::IoCtx>,
}

impl Strata {
    /// Lays out the OSD files (`--osd-layout`) and creates the cluster and its pool.
    async fn open(args: &Args, dir: &std::path::Path) -> Result<Self> {
        let layout_bytes =
            load::parse_size(&args.osd_layout)?.min(load::parse_size(&args.osd_size)?);
        if layout_bytes > 0 {
            eprintln!(
                "  laying out the first {} of each OSD file (--osd-layout)",
                args.osd_layout
            );
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            for id in 0..args.replicas {
                let path = dir.join(format!("osd.{id}.img"));
                device::lay_out(&path, layout_bytes)
                    .with_context(|| format!("laying out {}", path.display()))?;
            }
        }
        let cluster = Arc::new(
            Cluster::create(
                dir,
                cluster_config(
                    args.replicas,
                    &args.osd_size,
                    Some(&args.data_cache_size),
                    args.erasure.is_none().then_some(args.pg_num),
                ),
                ClusterOptions {
                    poll_while_busy: args.poll_while_busy,
                    ..ClusterOptions::default()
                },
            )
            .await?,
        );
        if let Some((k, m)) = args.erasure {
            cluster.create_erasure_pool(
                "bench",
                &cluster::ec::ErasureProfile::new(k, m),
                args.pg_num,
            )?;
        }
        let rados: Arc<dyn Rados> = cluster.clone();
        let pool = rados.io_ctx("bench").await?;
        Ok(Self { cluster, pool })
    }

    /// One round's rows (a write and a read phase per size; round `round`'s objects are
    /// fresh ones of their own, removed after its read phase unless it is the last), and per
    /// write phase a note on its group commit (how many
    /// replica writes shared a device flush: the batch to compare with fio's `--fdatasync`
    /// row).
    async fn round(
        &self,
        args: &Args,
        sizes: &[u64],
        round: u32,
    ) -> Result<(Vec<Row>, Vec<String>)> {
        let limit = Limit {
            duration_s: args.seconds,
            ops_max: args.ops,
        };
        let mut rows = Vec::new();
        let mut notes = Vec::new();
        for &size_bytes in sizes {
            let label = load::size_label(size_bytes);
            let allocated_before = self.allocated_bytes().await;
            let commits_before = self.cluster.commit_stats();
            let device_writes_before = self.device_writes();
            let payload: Arc<Vec<u8>> = Arc::new(
                rand::rngs::StdRng::seed_from_u64(args.seed ^ size_bytes)
                    .sample_iter(rand::distributions::Standard)
                    .take(size_bytes as usize)
                    .collect(),
            );
            let writer = Arc::clone(&self.pool);
            let data = Arc::clone(&payload);
            let write = load::run_phase(
                &format!("strata {label} write"),
                args.concurrency,
                limit,
                move |_, number| {
                    let pool = Arc::clone(&writer);
                    let data = Arc::clone(&data);
                    async move {
                        pool.write_full(&object_name(size_bytes, round, number), &data)
                            .await?;
                        Ok(())
                    }
                },
            )
            .await?
            .row("strata", size_bytes, "write");
            notes.push(group_commit_note(
                &label,
                &commits_before,
                &self.cluster.commit_stats(),
                self.device_writes() - device_writes_before,
                args.concurrency,
            ));
            let written = write.ops;
            let allocated = self
                .allocated_bytes()
                .await
                .saturating_sub(allocated_before);
            notes.push(format!(
                "strata {label} write: {allocated} bytes allocated on the OSDs for {} bytes \
                 stored, {:.2}x ({})",
                written * size_bytes,
                allocated as f64 / (written * size_bytes).max(1) as f64,
                args.erasure.map_or_else(
                    || format!("replica {}", args.replicas),
                    |(k, m)| format!(
                        "erasure {k}+{m}, ideal {:.2}x",
                        f64::from(k + m) / f64::from(k)
                    )
                ),
            ));
            rows.push(write);
            if written == 0 {
                bail!("strata wrote no {label} object in {} s", args.seconds);
            }
            let reader = Arc::clone(&self.pool);
            let seed = args.seed;
            let cache_before = self.cluster.data_cache_stats();
            let read = load::run_phase(
                &format!("strata {label} read"),
                args.concurrency,
                limit,
                move |worker, number| {
                    let pool = Arc::clone(&reader);
                    // Random object among those written (rados bench rand), reproducible per op.
                    let object =
                        rand::rngs::StdRng::seed_from_u64(seed ^ (worker as u64) << 48 ^ number)
                            .gen_range(0..written);
                    async move {
                        let data = pool
                            .read_full(&object_name(size_bytes, round, object))
                            .await?;
                        if data.len() as u64 != size_bytes {
                            bail!("read {} bytes of a {size_bytes}-byte object", data.len());
                        }
                        Ok(())
                    }
                },
            )
            .await?
            .row("strata", size_bytes, "read");
            notes.push(data_cache_note(
                &label,
                &cache_before,
                &self.cluster.data_cache_stats(),
            ));
            rows.push(read);
            if round + 1 < args.rounds {
                // As rados bench's cleanup: the next round writes into the space these
                // objects held (the laid-out start of each OSD file, `--osd-layout`), not
                // further on, where the files are still sparse and small writes slower.
                let remover = Arc::clone(&self.pool);
                load::run_phase(
                    &format!("strata {label} cleanup"),
                    args.concurrency,
                    Limit {
                        duration_s: CLEANUP_SECONDS_MAX,
                        ops_max: Some(written),
                    },
                    move |_, number| {
                        let pool = Arc::clone(&remover);
                        async move {
                            pool.remove(&object_name(size_bytes, round, number)).await?;
                            Ok(())
                        }
                    },
                )
                .await?;
            }
        }
        Ok((rows, notes))
    }

    /// Device bytes allocated to the benchmark pool over all OSDs.
    async fn allocated_bytes(&self) -> u64 {
        let Ok(info) = self.cluster.pool_lookup("bench").await else {
            return 0;
        };
        if self.cluster.erasure_profile("bench").is_some() {
            return self.cluster.erasure_allocated_bytes(info.id);
        }
        match self.cluster.cluster_stats().await {
            Ok(stats) => stats
                .pools
                .iter()
                .find(|pool| pool.name == "bench")
                .map_or(0, |pool| pool.allocated_bytes),
            Err(_) => 0,
        }
    }

    /// Writes made by the OSDs' devices since they opened.
    fn device_writes(&self) -> u64 {
        self.cluster
            .osd_stats()
            .iter()
            .map(|osd| osd.device.write.ops)
            .sum()
    }

    /// Shuts the cluster down and removes its files, freeing the disk for Ceph.
    async fn close(self, dir: &std::path::Path) -> Result<()> {
        let Self { cluster, pool } = self;
        drop(pool);
        shutdown(cluster, dir).await
    }
}

/// How many replica writes of a write phase shared each device flush, and how many device
/// writes each flush covered (a batch's record and its data, adjacent extents joined: data
/// scattered over the device shows as more writes per flush).
fn group_commit_note(
    label: &str,
    before: &store::CommitStats,
    after: &store::CommitStats,
    device_writes: u64,
    concurrency: usize,
) -> String {
    let transactions = after.transactions.saturating_sub(before.transactions);
    let flushes = after.device_flushes.saturating_sub(before.device_flushes);
    if flushes == 0 {
        return format!("strata {label} write: {transactions} replica writes, no device flush");
    }
    format!(
        "strata {label} write: {:.1} replica writes and {:.1} device writes per device flush \
         (group commit); `{FIO_SYNCED}` flushes every {concurrency} writes; store stages per \
         replica write: {}",
        transactions as f64 / flushes as f64,
        device_writes as f64 / flushes as f64,
        after
            .stages
            .since(&before.stages)
            .per_transaction(transactions),
    )
}

/// How many of a read phase's reads the stores' data caches served from memory (as
/// BlueStore's buffered reads serve Ceph's): what separates strata's reads from the device's.
fn data_cache_note(
    label: &str,
    before: &store::DataCacheStats,
    after: &store::DataCacheStats,
) -> String {
    let hits = after.hits.saturating_sub(before.hits);
    let misses = after.misses.saturating_sub(before.misses);
    let reads = hits + misses;
    if reads == 0 {
        return format!("strata {label} read: the stores' data caches were not used");
    }
    format!(
        "strata {label} read: {:.1}% of the replica reads from the stores' data caches \
         ({hits} of {reads}; {:.0} MiB held at the end), the rest from the device",
        hits as f64 * 100.0 / reads as f64,
        after.bytes as f64 / (1 << 20) as f64,
    )
}

/// Shuts the embedded cluster down (flushing every store) and removes its files, freeing
/// the disk for the peers. Tasks of the benchmark that still hold the cluster (a closing
/// HTTP connection) get two seconds to let go.
pub(super) async fn shutdown(mut cluster: Arc<Cluster>, dir: &std::path::Path) -> Result<()> {
    for _ in 0..20 {
        match Arc::try_unwrap(cluster) {
            Ok(owned) => {
                owned.shutdown().await?;
                return std::fs::remove_dir_all(dir)
                    .with_context(|| format!("removing {}", dir.display()));
            }
            Err(shared) => cluster = shared,
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    eprintln!("warning: the strata cluster is still in use; removing its files without a shutdown");
    drop(cluster);
    std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))
}

fn object_name(size_bytes: u64, round: u32, number: u64) -> String {
    format!("bench_{size_bytes}_round{round}_object{number}")
}

/// Writes fio's file once: reads of never-written (fallocated) extents cost no I/O.
fn fio_lay_out(args: &Args, file: &std::path::Path) -> Result<()> {
    eprintln!("  fio: writing {} once", args.fio_size);
    let layout = super::peer_command("fio")
        .args([
            "--name=layout",
            "--rw=write",
            "--bs=1M",
            "--iodepth=4",
            "--direct=1",
        ])
        .args(["--ioengine=libaio", "--output-format=json"])
        .arg(format!("--filename={}", file.display()))
        .arg(format!("--size={}", args.fio_size))
        .output()
        .context("running fio")?;
    if !layout.status.success() {
        bail!(
            "fio failed: {}",
            String::from_utf8_lossy(&layout.stderr).trim()
        );
    }
    Ok(())
}

/// fio's rows of one round on `file` (laid out by `fio_lay_out`).
fn fio(args: &Args, sizes: &[u64], file: &std::path::Path) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for &size_bytes in sizes {
        for (rw, op, synced) in [
            ("randwrite", "write", false),
            ("randwrite", "write", true),
            ("randread", "read", false),
        ] {
            let sync = if synced {
                format!("--fdatasync={}", args.concurrency)
            } else {
                "--fdatasync=0".into()
            };
            eprintln!("  fio {} {rw} {sync}", load::size_label(size_bytes));
            let mut command = super::peer_command("fio");
            command
                .args([
                    "--name=bench",
                    "--output-format=json",
                    "--direct=1",
                    "--ioengine=libaio",
                    "--time_based=1",
                    "--ramp_time=1",
                ])
                .arg(format!("--filename={}", file.display()))
                .arg(format!("--size={}", args.fio_size))
                .arg(format!("--rw={rw}"))
                .arg(format!("--bs={size_bytes}"))
                .arg(format!("--iodepth={}", args.concurrency))
                .arg(format!("--runtime={}", args.seconds.ceil() as u64))
                .arg(sync);
            let report = super::fio_report(&mut command)?;
            let mut row = fio_row(&report, op, size_bytes, op)?;
            if synced {
                row.system = FIO_SYNCED.into();
            }
            rows.push(row);
        }
    }
    Ok(rows)
}

/// One side (`read`/`write`) of fio's JSON report as a row.
fn fio_row(report: &serde_json::Value, side: &str, size_bytes: u64, op: &str) -> Result<Row> {
    let job = &report["jobs"][0];
    let figures = &job[side];
    let ops = figures["total_ios"].as_u64().context("fio: no total_ios")?;
    let runtime_ms = figures["runtime"].as_f64().context("fio: no runtime")?;
    let percentile = |name: &str| {
        figures["clat_ns"]["percentile"][name]
            .as_f64()
            .map(|ns| ns / 1e6)
    };
    Ok(Row {
        system: FIO.into(),
        size_bytes,
        op: op.into(),
        ops,
        elapsed_s: runtime_ms / 1000.0,
        latency_ms_mean: figures["lat_ns"]["mean"].as_f64().unwrap_or(0.0) / 1e6,
        latency_ms_p50: percentile("50.000000"),
        latency_ms_p99: percentile("99.000000"),
    })
}

fn rados_bench(args: &Args, sizes: &[u64], dir: &std::path::Path) -> Result<Vec<Row>> {
    let cluster = CephCluster::start(dir, args.replicas, &args.osd_size, args.replicas)?;
    match args.erasure {
        Some((k, m)) => cluster.create_erasure_pool("bench", k, m, args.pg_num)?,
        None => cluster.create_pool("bench", args.replicas, args.pg_num)?,
    }
    cluster.print_pools();
    let seconds = args.seconds.ceil().max(1.0) as u64;
    let mut rows = Vec::new();
    for &size_bytes in sizes {
        let label = load::size_label(size_bytes);
        let run_name = format!("bench_{size_bytes}");
        let size = size_bytes.to_string();
        let concurrency = args.concurrency.to_string();
        let seconds = seconds.to_string();
        for (mode, op) in [("write", "write"), ("rand", "read")] {
            eprintln!("  rados bench {label} {mode}");
            let mut words = vec![
                "-p",
                "bench",
                "bench",
                &seconds,
                mode,
                "-t",
                &concurrency,
                "--run-name",
                &run_name,
            ];
            if mode == "write" {
                words.extend(["-b", &size, "-O", &size, "--no-cleanup"]);
            }
            let output = cluster.client("rados", &words)?;
            let summary = ceph::parse_rados_bench(&output)?;
            rows.push(Row {
                system: CEPH.into(),
                size_bytes,
                op: op.into(),
                ops: summary.ops,
                elapsed_s: summary.elapsed_s,
                latency_ms_mean: summary.latency_s_mean * 1000.0,
                latency_ms_p50: None,
                latency_ms_p99: None,
            });
        }
        // Free the space before the next size (rados bench cleanup of this run's objects).
        cluster.client(
            "rados",
            &["-p", "bench", "cleanup", "--run-name", &run_name],
        )?;
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fio_json_becomes_a_row() {
        let report = serde_json::json!({"jobs": [{"write": {
            "total_ios": 1000, "runtime": 2000,
            "lat_ns": {"mean": 1_500_000.0},
            "clat_ns": {"percentile": {"50.000000": 1_000_000.0, "99.000000": 4_000_000.0}}
        }}]});
        let row = fio_row(&report, "write", 4096, "write").unwrap();
        assert_eq!(row.ops, 1000);
        assert!((row.ops_per_s() - 500.0).abs() < 1e-9);
        assert_eq!(row.latency_ms_p99, Some(4.0));
        assert!(fio_row(&serde_json::json!({}), "write", 4096, "write").is_err());
    }

    fn row(system: &str, op: &str, ops: u64) -> Row {
        Row {
            system: system.into(),
            size_bytes: 4096,
            op: op.into(),
            ops,
            elapsed_s: 1.0,
            latency_ms_mean: 1.0,
            latency_ms_p50: None,
            latency_ms_p99: None,
        }
    }

    #[test]
    fn the_median_round_of_each_system_is_kept() {
        let rounds = vec![
            vec![row("strata", "write", 40), row(FIO, "write", 100)],
            vec![row("strata", "write", 50), row(FIO, "write", 60)],
            vec![row("strata", "write", 45), row(FIO, "write", 80)],
        ];
        let medians = median_rounds(&rounds);
        let ops: Vec<(&str, u64)> = medians.iter().map(|r| (r.system.as_str(), r.ops)).collect();
        assert_eq!(ops, [("strata", 45), (FIO, 80)]);
        // An even count keeps the lower middle round; one round is itself.
        let medians = median_rounds(&rounds[..2]);
        assert_eq!(medians[0].ops, 40);
        assert_eq!(medians[1].ops, 60);
        assert_eq!(median_rounds(&rounds[..1])[1].ops, 100);
        assert!(median_rounds(&[]).is_empty());
    }

    #[test]
    fn every_round_pairs_strata_with_the_peer_of_the_same_round() {
        let rounds = vec![
            vec![row("strata", "write", 40), row(FIO, "write", 100)],
            vec![row("strata", "write", 50), row(FIO, "write", 60)],
            vec![row("strata", "write", 45), row(FIO, "write", 80)],
        ];
        let notes = round_ratio_notes(&rounds, FIO);
        assert_eq!(
            notes,
            [format!(
                "strata 4K write per round: 40, 50, 45 ops/s; strata/{FIO}: 0.40x (40/100), \
                 0.83x (50/60), 0.56x (45/80); median 0.56x"
            )]
        );
        // A round without the peer (or a peer row of 0 ops/s) leaves the ratios out.
        let alone = ["strata 4K write per round: 40, 50, 45 ops/s"];
        let mut missing = rounds.clone();
        missing[1].pop();
        assert_eq!(round_ratio_notes(&missing, FIO), alone);
        let mut stalled = rounds;
        stalled[2][1].ops = 0;
        assert_eq!(round_ratio_notes(&stalled, FIO), alone);
    }
}
