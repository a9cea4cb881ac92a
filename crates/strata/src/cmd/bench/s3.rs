//! `strata bench s3` (issue 6): PUT and GET ops/s and latency of the S3 gateway over the real
//! HTTP path, beside radosgw on a real Ceph cluster, with the same client, object sizes,
//! concurrency and replica count, in one run.
//!
//! Rules, so the rows mean the same thing:
//! - strata: the embedded cluster (R hosts of one OSD on sparse files under the data
//!   directory, durable writes) and the gateway (`gateway::serve`, SigV4 on, pools of R
//!   replicas and the gateway's default PG count) on a loopback port, in this process.
//! - radosgw: `ceph-minicluster.sh` with R BlueStore OSDs on the same disk, pool size R, the
//!   monitor's default PG count set to the gateway's, then radosgw (beast) and a user made
//!   with `radosgw-admin`.
//! - Both: C tasks, each with its own keep-alive connection and the same SigV4 client
//!   ([`super::s3_client`]); one warm-up PUT+GET (radosgw creates its data pool on the first
//!   PUT); then a PUT phase of fresh keys for `--seconds` and a GET phase of random keys among
//!   those written for `--seconds`, per size. The client shares the two cores with the
//!   server in both cases (in this process for strata, beside radosgw for Ceph).
//!
//! Run (about 2 minutes with the defaults):
//! ```text
//! strata bench s3 [--replicas 3] [--concurrency 16] [--sizes 4K,4M] [--seconds 10]
//!                 [--dir /fast/disk] [--json rows.json] [--no-radosgw]
//! ```
//! CI runs only `tests/bench_objects_cli.rs` (`--no-radosgw --ops 100`, under a second).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use cluster::{Cluster, ClusterOptions};
use rados::Rados;
use rand::{Rng, SeedableRng};
use tokio::sync::Mutex;

use super::ceph::{self, CephCluster};
use super::load::{self, Limit, Row};
use super::s3_client::{sha256_hex, Credentials, S3Connection};

/// S3 PUT/GET throughput and latency against radosgw.
#[derive(clap::Args, Clone)]
pub struct Args {
    /// Object sizes (K, M suffixes), comma separated.
    #[arg(long, value_delimiter = ',', default_value = "4K,4M")]
    pub sizes: Vec<String>,
    /// Concurrent clients (one connection each).
    #[arg(long, default_value_t = 16)]
    pub concurrency: usize,
    /// Replicas of every pool (and OSDs, one per host).
    #[arg(long, default_value_t = 1)]
    pub replicas: u32,
    /// Seconds of each phase (PUT, GET) for both servers.
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Stop each strata phase after this many requests (smoke tests); radosgw still runs
    /// for --seconds.
    #[arg(long)]
    pub ops: Option<u64>,
    /// Size of each OSD's sparse file (strata and Ceph).
    #[arg(long, default_value = "32G")]
    pub osd_size: String,
    /// Parent of the run's temporary directory (removed at the end).
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    /// Seed of the GET phase's key choice and of the payloads.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Skip the radosgw peer.
    #[arg(long)]
    pub no_radosgw: bool,
    /// Run strata as `strata serve --poll-while-busy` does: runtime workers off the CPU of
    /// the commit threads, one polling while operations are in flight (see
    /// `cluster::runtime`; faster small objects, slower large ones on few CPUs).
    #[arg(long)]
    pub poll_while_busy: bool,
    /// What strata's gateway runs on: `embedded` (its own cluster of --replicas OSDs) or
    /// `ceph` (the same Ceph cluster and replica count radosgw runs on, through librados, so
    /// both gateways stand on the same OSDs and only the gateways differ).
    #[arg(long, value_enum, default_value = "embedded")]
    pub backend: super::super::serve::BackendKind,
    /// With `--backend ceph`: rounds of strata then radosgw, alternating on the one cluster;
    /// the table shows each row's median round, and a note per size and operation lists every
    /// round and the spread.
    #[arg(long, default_value_t = 1)]
    pub rounds: u32,
    /// Also write the rows as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Small-object packing in strata's gateway (`strata serve --packing`), with its
    /// default limits; strata's rows are named `strata+pack` when on.
    #[arg(long, value_enum, default_value = "off")]
    pub packing: super::super::serve::OnOff,
    /// With --packing on: how long a group waits for more members, in microseconds
    /// (`strata serve --packing-group-wait-us`; default the gateway's).
    #[arg(long)]
    pub packing_group_wait_us: Option<u64>,
    /// With --packing on: objects per pack at most (default the gateway's).
    #[arg(long)]
    pub packing_group_count: Option<usize>,
    /// With --packing on: how a group closes (`strata serve --packing-close`).
    #[arg(long, value_enum, default_value = "adaptive")]
    pub packing_close: super::super::serve::PackingClose,
}

const RADOSGW: &str = "radosgw";
const BUCKET: &str = "bench";
/// Fixed keys of the radosgw benchmark user (the cluster lives only for the run).
const RADOSGW_ACCESS_KEY: &str = "STRATABENCHACCESS001";
const RADOSGW_SECRET_KEY: &str = "strataBenchSecretKey0000000000000000000001";

pub fn run(mut args: Args) -> Result<ExitCode> {
    let load::Setup {
        sizes_bytes: sizes,
        temp,
        runtime,
        poll_while_busy,
    } = load::setup(
        "s3",
        &args.sizes,
        args.concurrency,
        args.replicas,
        args.seconds,
        &args.dir,
        args.poll_while_busy,
    )?;
    args.poll_while_busy = poll_while_busy;
    let steal = load::StealMeter::start();
    let (rows, notes) = runtime.block_on(async {
        tokio::select! {
            rows = run_all(&args, &sizes, temp.path()) => rows,
            _ = tokio::signal::ctrl_c() => bail!("interrupted"),
        }
    })?;
    println!(
        "\nS3: concurrency {}, replicas {}, {} s per phase; load average at the end {}; CPU stolen by the hypervisor during the run {}",
        args.concurrency,
        args.replicas,
        args.seconds,
        load::load_average(),
        steal.percent()
    );
    load::print_table(&rows, &[("strata/rgw", RADOSGW)]);
    for note in &notes {
        println!("{note}");
    }
    if let Some(path) = &args.json {
        let settings = serde_json::json!({
            "bench": "s3", "sizes_bytes": sizes, "concurrency": args.concurrency,
            "replicas": args.replicas, "seconds": args.seconds,
            "packing": args.packing == super::super::serve::OnOff::On,
        });
        load::write_json(path, settings, &rows)?;
    }
    Ok(ExitCode::SUCCESS)
}

async fn run_all(args: &Args, sizes: &[u64], dir: &Path) -> Result<(Vec<Row>, Vec<String>)> {
    let gateway_config = gateway::GatewayConfig {
        pool_size: args.replicas,
        packing: gateway::PackingConfig {
            enabled: args.packing == super::super::serve::OnOff::On,
            group_wait_us: args
                .packing_group_wait_us
                .unwrap_or(gateway::PackingConfig::default().group_wait_us),
            group_count_max: args
                .packing_group_count
                .unwrap_or(gateway::PackingConfig::default().group_count_max),
            adaptive_close: args.packing_close == super::super::serve::PackingClose::Adaptive,
            ..gateway::PackingConfig::default()
        },
        ..gateway::GatewayConfig::default()
    };
    let mut rows = Vec::new();
    if args.rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    if args.rounds > 1 && args.backend != super::super::serve::BackendKind::Ceph {
        bail!("--rounds alternates strata and radosgw on one Ceph: it needs --backend ceph");
    }
    if args.backend == super::super::serve::BackendKind::Ceph {
        if let Some(install) = ceph::missing(&["ceph-mon", "ceph-mgr", "ceph-osd", "ceph"]) {
            bail!("--backend ceph needs a Ceph to start: {install} is not installed");
        }
        eprintln!("== Ceph (ceph-minicluster.sh): strata's gateway on librados, then radosgw");
        return on_ceph(args, sizes, &dir.join("ceph"), &gateway_config).await;
    }
    eprintln!("== strata (embedded cluster + S3 gateway over HTTP)");
    rows.extend(strata(args, sizes, &dir.join("strata"), &gateway_config).await?);
    if args.no_radosgw {
        eprintln!("== radosgw: skipped (--no-radosgw)");
    } else if let Some(install) = ceph::missing(&[
        "ceph-mon",
        "ceph-mgr",
        "ceph-osd",
        "ceph",
        "radosgw",
        "radosgw-admin",
    ]) {
        eprintln!("== radosgw: not installed ({install}); skipped");
    } else {
        eprintln!("== radosgw (ceph-minicluster.sh)");
        rows.extend(radosgw(args, sizes, &dir.join("ceph"), gateway_config.pool_pg_num).await?);
    }
    Ok((rows, Vec::new()))
}

async fn strata(
    args: &Args,
    sizes: &[u64],
    dir: &Path,
    gateway_config: &gateway::GatewayConfig,
) -> Result<Vec<Row>> {
    let config = super::cluster::cluster_config(args.replicas, &args.osd_size, None, None);
    let options = ClusterOptions {
        poll_while_busy: args.poll_while_busy,
        ..ClusterOptions::default()
    };
    let cluster = Arc::new(Cluster::create(dir, config, options).await?);
    let (server, credentials) =
        serve_gateway(Arc::new(server::WeakCluster::new(&cluster)), gateway_config).await?;
    let name = match args.packing {
        super::super::serve::OnOff::On => "strata+pack",
        super::super::serve::OnOff::Off => "strata",
    };
    let rows = drive(
        name,
        args,
        sizes,
        server.local_addr,
        credentials,
        BUCKET,
        None,
    )
    .await;
    let stats = server.gateway.stats();
    if stats.packs_written > 0 {
        eprintln!(
            "strata packing: {} objects in {} packs ({:.1} per pack); groups closed on \
             count {}, bytes {}, idle {}, wait {}",
            stats.objects_packed,
            stats.packs_written,
            stats.objects_packed as f64 / stats.packs_written as f64,
            stats.packs_closed_count,
            stats.packs_closed_bytes,
            stats.packs_closed_idle,
            stats.packs_closed_wait
        );
    }
    eprintln!("strata PUT stages: {}", stage_times(&stats));
    server.shutdown().await;
    super::cluster::shutdown(cluster, dir).await?;
    rows.map(|(rows, _)| rows)
}

/// The mean time of each stage of a PUT (write intent, data write or wait in a group and
/// pack write, index commit), from the gateway's counters.
pub fn stage_times(stats: &gateway::GatewayStats) -> String {
    let mean_ms = |total_ns: u64, count: u64| total_ns as f64 / count.max(1) as f64 / 1e6;
    let mut out = format!(
        "intent {:.2} ms ({}), ",
        mean_ms(stats.intent_write_ns, stats.intents_written),
        stats.intents_written
    );
    if stats.objects_packed > 0 {
        out += &format!(
            "wait in group {:.2} ms ({}), pack write {:.2} ms ({}), ",
            mean_ms(stats.pack_member_wait_ns, stats.objects_packed),
            stats.objects_packed,
            mean_ms(stats.pack_write_ns, stats.packs_written),
            stats.packs_written
        );
    }
    if stats.data_writes > 0 {
        out += &format!(
            "data write {:.2} ms ({}), ",
            mean_ms(stats.data_write_ns, stats.data_writes),
            stats.data_writes
        );
    }
    out + &format!(
        "commit {:.2} ms ({}); index writes {} carrying {} index updates",
        mean_ms(stats.commit_ns, stats.commits),
        stats.commits,
        stats.index_writes,
        stats.index_ops
    )
}

/// strata's gateway on `rados` (loopback, a free port) and its benchmark user's keys.
pub(super) async fn serve_gateway(
    rados: Arc<dyn Rados>,
    gateway_config: &gateway::GatewayConfig,
) -> Result<(gateway::Server, Credentials)> {
    let server = gateway::serve(
        rados,
        "127.0.0.1:0".parse().context("loopback address")?,
        gateway_config.clone(),
    )
    .await?;
    let user = server
        .gateway
        .users()
        .create("bench", "bench", "", None)
        .await?;
    let credentials = Credentials {
        access_key: user.access_key,
        secret_key: user.secret_key,
        region: gateway_config.region.clone(),
    };
    Ok((server, credentials))
}

/// strata's gateway on a Ceph cluster through librados and radosgw on the same cluster and
/// replica count (unless --no-radosgw), in --rounds alternating rounds (a bucket per round
/// and system), with each phase's time split (see [`Split`]).
async fn on_ceph(
    args: &Args,
    sizes: &[u64],
    dir: &Path,
    gateway_config: &gateway::GatewayConfig,
) -> Result<(Vec<Row>, Vec<String>)> {
    let (cluster, port) = start_ceph(args, dir, gateway_config.pool_pg_num).await?;
    let cluster = Arc::new(cluster);
    let rados = ceph_backend::CephRados::connect(ceph_backend::CephConfig {
        conf_path: Some(cluster.conf.clone()),
        ..ceph_backend::CephConfig::default()
    })
    .await
    .context("connecting to the minicluster through librados")?;
    let (server, credentials) = serve_gateway(Arc::new(rados), gateway_config).await?;
    let mut rounds: Vec<Vec<Row>> = Vec::new();
    let mut splits = Vec::new();
    for round in 0..args.rounds {
        if args.rounds > 1 {
            eprintln!("== round {} of {}", round + 1, args.rounds);
        }
        let bucket = format!("{BUCKET}-{round}");
        let probe = Probe {
            cluster: Arc::clone(&cluster),
            osds: args.replicas,
        };
        let (mut rows, split) = drive(
            "strata",
            args,
            sizes,
            server.local_addr,
            credentials.clone(),
            &bucket,
            Some(&probe),
        )
        .await?;
        splits.extend(split);
        if !args.no_radosgw {
            let (theirs, split) = drive(
                RADOSGW,
                args,
                sizes,
                ([127, 0, 0, 1], port).into(),
                radosgw_credentials(),
                &bucket,
                Some(&probe),
            )
            .await?;
            rows.extend(theirs);
            splits.extend(split);
        }
        rounds.push(rows);
    }
    server.shutdown().await;
    if args.no_radosgw {
        eprintln!("== radosgw: skipped (--no-radosgw)");
    }
    cluster.print_pools();
    tokio::task::spawn_blocking(move || drop(cluster)).await?;
    let mut notes = Vec::new();
    if args.rounds > 1 {
        notes.push(format!(
            "{} alternating rounds (strata, radosgw, strata, ...): each row above is its median round",
            args.rounds
        ));
        notes.extend(super::cluster::round_ratio_notes(&rounds, RADOSGW));
    }
    notes.push(
        "time per request (each phase's means; librados: aio submit to completion, summed over \
         a request's RADOS ops; OSD: the primaries' op_latency from `ceph daemon osd.N perf \
         dump`, per client op):"
            .into(),
    );
    notes.extend(splits);
    Ok((super::cluster::median_rounds(&rounds), notes))
}

/// What a phase's time split reads from: the cluster's OSDs (perf counters through their
/// admin sockets) and this process's librados counters.
struct Probe {
    cluster: Arc<CephCluster>,
    osds: u32,
}

/// The counters a split compares before and after a phase.
struct Snapshot {
    librados: ceph_backend::OpTimes,
    /// Client ops at the primaries and their summed `op_latency`, seconds.
    osd_ops: u64,
    osd_latency_s: f64,
    osd_writes: u64,
    osd_reads: u64,
}

impl Probe {
    async fn snapshot(&self) -> Result<Snapshot> {
        let cluster = Arc::clone(&self.cluster);
        let osds = self.osds;
        let librados = ceph_backend::op_times();
        tokio::task::spawn_blocking(move || -> Result<Snapshot> {
            let mut snapshot = Snapshot {
                librados,
                osd_ops: 0,
                osd_latency_s: 0.0,
                osd_writes: 0,
                osd_reads: 0,
            };
            for osd in 0..osds {
                let name = format!("osd.{osd}");
                let dump: serde_json::Value =
                    serde_json::from_str(&cluster.ceph(&["daemon", &name, "perf", "dump"])?)
                        .with_context(|| format!("{name} perf dump"))?;
                let counters = &dump["osd"];
                let count = |field: &str| counters[field].as_u64().unwrap_or(0);
                snapshot.osd_ops += count("op");
                snapshot.osd_writes += count("op_w") + count("op_rw");
                snapshot.osd_reads += count("op_r");
                snapshot.osd_latency_s += counters["op_latency"]["sum"].as_f64().unwrap_or(0.0);
            }
            Ok(snapshot)
        })
        .await?
    }
}

/// One phase's time per request: at the client, in librados (strata only), in the OSDs.
fn split(label: &str, row: &Row, before: &Snapshot, after: &Snapshot, librados: bool) -> String {
    let requests = row.ops.max(1) as f64;
    let osd_ops = after.osd_ops.saturating_sub(before.osd_ops);
    let osd_ms = (after.osd_latency_s - before.osd_latency_s) * 1000.0;
    let mut line = format!(
        "  {label}: {:.2} ms at the client; OSDs: {:.2} client ops per request ({:.2} writes, {:.2} reads), {:.2} ms each, {:.2} ms per request",
        row.latency_ms_mean,
        osd_ops as f64 / requests,
        after.osd_writes.saturating_sub(before.osd_writes) as f64 / requests,
        after.osd_reads.saturating_sub(before.osd_reads) as f64 / requests,
        if osd_ops > 0 { osd_ms / osd_ops as f64 } else { 0.0 },
        osd_ms / requests,
    );
    if librados {
        let ops = after.librados.since(&before.librados);
        let librados_ms = (ops.write_us + ops.read_us) as f64 / 1000.0 / requests;
        line.push_str(&format!(
            "; librados: {:.2} ops per request ({:.2} writes, {:.2} reads), {librados_ms:.2} ms per request; the gateway's own: {:.2} ms",
            (ops.writes + ops.reads) as f64 / requests,
            ops.writes as f64 / requests,
            ops.reads as f64 / requests,
            row.latency_ms_mean - librados_ms,
        ));
    }
    line
}

fn radosgw_credentials() -> Credentials {
    Credentials {
        access_key: RADOSGW_ACCESS_KEY.into(),
        secret_key: RADOSGW_SECRET_KEY.into(),
        region: "us-east-1".into(),
    }
}

/// Starts the minicluster of --replicas OSDs with radosgw and its benchmark user.
async fn start_ceph(args: &Args, dir: &Path, pg_num: u32) -> Result<(CephCluster, u16)> {
    let (replicas, osd_size, dir_owned) = (args.replicas, args.osd_size.clone(), dir.to_path_buf());
    // The script blocks for ~10-20 s: keep it off the runtime's workers.
    let cluster = tokio::task::spawn_blocking(move || -> Result<(CephCluster, u16)> {
        let cluster = CephCluster::start(&dir_owned, replicas, &osd_size, replicas)?;
        for option in ["osd_pool_default_pg_num", "osd_pool_default_pgp_num"] {
            cluster.set_monitor_option(option, &pg_num.to_string())?;
        }
        let port = cluster.start_radosgw()?;
        cluster.client(
            "radosgw-admin",
            &[
                "user",
                "create",
                "--uid",
                "bench",
                "--display-name",
                "bench",
                "--access-key",
                RADOSGW_ACCESS_KEY,
                "--secret",
                RADOSGW_SECRET_KEY,
            ],
        )?;
        Ok((cluster, port))
    })
    .await??;
    Ok(cluster)
}

/// radosgw's rows, on the port `start_ceph` gave.
async fn drive_radosgw(args: &Args, sizes: &[u64], port: u16) -> Result<Vec<Row>> {
    let address: SocketAddr = ([127, 0, 0, 1], port).into();
    let (rows, _) = drive(
        RADOSGW,
        args,
        sizes,
        address,
        radosgw_credentials(),
        BUCKET,
        None,
    )
    .await?;
    Ok(rows)
}

async fn radosgw(args: &Args, sizes: &[u64], dir: &Path, pg_num: u32) -> Result<Vec<Row>> {
    let (cluster, port) = start_ceph(args, dir, pg_num).await?;
    let rows = drive_radosgw(args, sizes, port).await;
    // Say what radosgw ran on: the pools it created, their replicas and PGs.
    cluster.print_pools();
    tokio::task::spawn_blocking(move || drop(cluster)).await?;
    rows
}

/// Connects C clients to `address`, creates `bucket`, warms up, and runs the PUT and GET
/// phases of every size; with a probe, also each phase's time split.
async fn drive(
    system: &str,
    args: &Args,
    sizes: &[u64],
    address: SocketAddr,
    credentials: Credentials,
    bucket: &str,
    probe: Option<&Probe>,
) -> Result<(Vec<Row>, Vec<String>)> {
    let bucket_name: Arc<str> = Arc::from(bucket);
    let mut splits = Vec::new();
    let credentials = Arc::new(credentials);
    let mut connections = Vec::with_capacity(args.concurrency);
    for _ in 0..args.concurrency {
        connections.push(Mutex::new(
            S3Connection::connect(address, Arc::clone(&credentials)).await?,
        ));
    }
    let connections = Arc::new(connections);
    {
        let mut first = connections[0].lock().await;
        first.create_bucket(bucket).await?;
        let warm = Bytes::from_static(b"warm-up");
        first
            .put(bucket, "warm-up", warm.clone(), &sha256_hex(&warm))
            .await?;
        first.get(bucket, "warm-up").await?;
    }
    let limit = Limit {
        duration_s: args.seconds,
        ops_max: args.ops,
    };
    let mut rows = Vec::new();
    for &size_bytes in sizes {
        let label = load::size_label(size_bytes);
        let payload: Vec<u8> = rand::rngs::StdRng::seed_from_u64(args.seed ^ size_bytes)
            .sample_iter(rand::distributions::Standard)
            .take(size_bytes as usize)
            .collect();
        let payload_sha256 = Arc::new(sha256_hex(&payload));
        let payload = Bytes::from(payload);
        let writers = Arc::clone(&connections);
        let put_bucket = Arc::clone(&bucket_name);
        let before = match probe {
            Some(probe) => Some(probe.snapshot().await?),
            None => None,
        };
        let put = load::run_phase(
            &format!("{system} {label} PUT"),
            args.concurrency,
            limit,
            move |worker, number| {
                let connections = Arc::clone(&writers);
                let body = payload.clone();
                let hash = Arc::clone(&payload_sha256);
                let bucket = Arc::clone(&put_bucket);
                async move {
                    let mut connection = connections[worker].lock().await;
                    connection
                        .put(&bucket, &key(size_bytes, number), body, &hash)
                        .await
                }
            },
        )
        .await?
        .row(system, size_bytes, "PUT");
        if let (Some(probe), Some(before)) = (probe, &before) {
            let after = probe.snapshot().await?;
            let label = format!("{system} {label} PUT");
            splits.push(split(&label, &put, before, &after, system == "strata"));
        }
        let written = put.ops;
        rows.push(put);
        if written == 0 {
            bail!("{system} stored no {label} object in {} s", args.seconds);
        }
        let readers = Arc::clone(&connections);
        let get_bucket = Arc::clone(&bucket_name);
        let seed = args.seed;
        let before = match probe {
            Some(probe) => Some(probe.snapshot().await?),
            None => None,
        };
        let get = load::run_phase(
            &format!("{system} {label} GET"),
            args.concurrency,
            limit,
            move |worker, number| {
                let connections = Arc::clone(&readers);
                let object =
                    rand::rngs::StdRng::seed_from_u64(seed ^ (worker as u64) << 48 ^ number)
                        .gen_range(0..written);
                let bucket = Arc::clone(&get_bucket);
                async move {
                    let mut connection = connections[worker].lock().await;
                    let body = connection.get(&bucket, &key(size_bytes, object)).await?;
                    if body.len() as u64 != size_bytes {
                        bail!(
                            "GET returned {} bytes of a {size_bytes}-byte object",
                            body.len()
                        );
                    }
                    Ok(())
                }
            },
        )
        .await?
        .row(system, size_bytes, "GET");
        if let (Some(probe), Some(before)) = (probe, &before) {
            let after = probe.snapshot().await?;
            let label = format!("{system} {label} GET");
            splits.push(split(&label, &get, before, &after, system == "strata"));
        }
        rows.push(get);
    }
    Ok((rows, splits))
}

fn key(size_bytes: u64, number: u64) -> String {
    format!("obj-{size_bytes}-{number}")
}
