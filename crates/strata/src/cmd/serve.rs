//! `strata serve`: the embedded cluster with its admin endpoint, the S3 gateway and the NBD
//! export of every volume, until
//! SIGINT or SIGTERM. The orchestration lives in the `server` crate; this parses arguments,
//! sets up logging (RUST_LOG) and waits for a signal.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args as ClapArgs;

/// Arguments of `strata serve`.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Data directory; created with the default cluster (3 hosts x (1 ssd + 2 hdd) OSDs on
    /// sparse files, sized by --osd-size) on first run, reopened afterwards.
    #[arg(long, env = "STRATA_DATA", default_value = "./strata-data")]
    pub data: PathBuf,
    /// Cluster configuration (TOML) to create the cluster with on first run, instead of the
    /// default cluster. Ignored once the data directory holds a cluster.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Size of each OSD file of the default cluster, created on first run (sparse: space is
    /// taken as data is written): `auto` (the default) shares half the free space of the
    /// data directory's filesystem out over the 9 OSDs, in whole GiB, at least 1G and at
    /// most 64G each; or a size such as `4G`. Ignored with --config or once the data
    /// directory holds a cluster.
    #[arg(long, default_value = "auto", value_name = "SIZE|auto")]
    pub osd_size: String,
    /// Admin HTTP endpoint (/status, /metrics, the API the CLI uses); port 0 picks one.
    #[arg(long, env = "STRATA_ADMIN", default_value = server::ADMIN_ADDR_DEFAULT)]
    pub admin: SocketAddr,
    /// S3 endpoint; port 0 picks one.
    #[arg(long, default_value = server::S3_ADDR_DEFAULT)]
    pub s3: SocketAddr,
    /// Serve no S3.
    #[arg(long)]
    pub no_s3: bool,
    /// Serve S3 without authentication (everyone is one user with full rights; testing only).
    /// Signed requests (the aws CLI, boto3) are served with their signatures ignored; a body
    /// sent aws-chunked (`x-amz-content-sha256: STREAMING-...`) is refused with 400.
    /// With authentication (the default) S3 requests need a user's keys: create users with
    /// `strata user create --uid NAME` (printed on the first start of a data directory).
    #[arg(long)]
    pub s3_no_auth: bool,
    /// Lay the runtime out for small objects: its workers off the CPU that runs the stores'
    /// commit threads (when one CPU takes the disk's interrupts), one of them polling instead
    /// of sleeping while operations are in flight. On 2 CPUs: 4 KiB writes and reads 10-40%
    /// faster, 4 MiB S3 objects about half as fast (one worker's CPU), and a busy server
    /// spends a CPU polling.
    #[arg(long)]
    pub poll_while_busy: bool,
    /// File holding the S3 master key (64 hex digits) that seals users' secret keys at rest.
    /// Default: the data directory's `s3-master.key`, created (mode 0600) on first start;
    /// `STRATA_S3_MASTER_KEY=HEX` gives the key itself instead.
    #[arg(long, value_name = "PATH")]
    pub s3_master_key_file: Option<PathBuf>,
    /// A master key that sealed secrets before a rotation: secrets it opens are resealed with
    /// the current key at start, after which it may be dropped. Repeatable.
    #[arg(long, value_name = "PATH")]
    pub s3_previous_master_key_file: Vec<PathBuf>,
    /// The storage to serve: `embedded` (the cluster in --data, created on first run) or
    /// `ceph` (a Ceph cluster through librados, found as the `ceph` tool finds it: --ceph-conf,
    /// else $CEPH_CONF, else /etc/ceph/ceph.conf; needs librados2 installed). On Ceph, --data
    /// holds only the admin token and the server's keys; users, buckets and objects live in
    /// the cluster, so several `strata serve` pointed at one Ceph serve the same buckets.
    #[arg(long, value_enum, default_value = "embedded")]
    pub backend: BackendKind,
    /// ceph.conf of the Ceph cluster (with --backend ceph).
    #[arg(long, env = "CEPH_CONF")]
    pub ceph_conf: Option<PathBuf>,
    /// Ceph client id, without `client.` (with --backend ceph). Default: admin.
    #[arg(long)]
    pub ceph_id: Option<String>,
    /// Keyring of that client (with --backend ceph). Default: the one ceph.conf names.
    #[arg(long)]
    pub keyring: Option<PathBuf>,
    /// Seconds a Ceph operation may wait for an unavailable PG before it fails (with
    /// --backend ceph): S3 then answers 503 instead of hanging.
    #[arg(long, default_value_t = 30)]
    pub ceph_op_timeout_s: u64,
    /// Unix socket exporting every volume over NBD, export name `POOL/VOLUME` (`nbdinfo
    /// --list 'nbd+unix:///?socket=SOCK'`, `qemu-img info 'nbd+unix:///rbd/vm1?socket=SOCK'`).
    /// Default: `nbd.sock` in --data; removed on shutdown.
    #[arg(long, value_name = "PATH")]
    pub nbd_socket: Option<PathBuf>,
    /// Serve no NBD socket.
    #[arg(long)]
    pub no_nbd_socket: bool,
    /// Also export the volumes over NBD on this TCP port (0 picks one), on --nbd-bind.
    /// Anyone who can connect may read and write every volume: bind to trusted networks only.
    #[arg(long, value_name = "PORT")]
    pub nbd_port: Option<u16>,
    /// Address the NBD TCP port listens on.
    #[arg(long, default_value = "127.0.0.1", value_name = "ADDR")]
    pub nbd_bind: std::net::IpAddr,
    /// Put the S3 gateway's object data on an erasure-coded pool with this profile
    /// (`k=4,m=2[,failure-domain=host][,device-class=hdd][,stripe-unit=4K]`), created at the
    /// first start; bucket indexes and users stay on replicated pools. Packing needs omap in
    /// the data pool and is refused with it.
    #[arg(long, value_name = "PROFILE")]
    pub s3_data_erasure: Option<String>,
    /// File holding the master key of SSE-S3 (64 hexadecimal digits, e.g. from `openssl rand
    /// -hex 32`): it wraps the data key of every object written with
    /// `x-amz-server-side-encryption: AES256` or to a bucket with default encryption. Without
    /// it such writes are refused (501); lose it and those objects cannot be read.
    #[arg(long, env = "STRATA_SSE_MASTER_KEY_FILE", value_name = "PATH")]
    pub sse_master_key_file: Option<PathBuf>,
    /// Accept SSE-C (customer-provided keys) over plain HTTP, which is all the gateway speaks:
    /// the keys then cross the network in the clear. Refused otherwise, as S3 and radosgw
    /// (`rgw_crypt_require_ssl`) refuse them. For tests, or behind a TLS proxy on the host.
    #[arg(long)]
    pub sse_c_allow_insecure: bool,
    /// The length of a lifecycle day in seconds, for tests (radosgw's `rgw_lc_debug_interval`):
    /// bucket lifecycle rules count their Days in these, and the lifecycle worker runs a
    /// pass ten times per such day (at least every second). Default: a real day.
    #[arg(long, value_name = "N", default_value_t = 86_400)]
    pub lc_debug_interval_s: u64,
    /// Small-object packing in the S3 gateway: PUTs smaller than --packing-object-max to
    /// buckets without versioning that arrive together for one placement group are written
    /// as one pack object; deletes log ranges that the pack GC reclaims (see BENCHMARKS.md).
    #[arg(long, value_enum, default_value = "off")]
    pub packing: OnOff,
    /// Objects smaller than this many bytes are packed.
    #[arg(long, default_value_t = gateway::PackingConfig::default().object_size_max_bytes)]
    pub packing_object_max_bytes: u64,
    /// A group closes at this many objects.
    #[arg(long, default_value_t = gateway::PackingConfig::default().group_count_max)]
    pub packing_group_count_max: usize,
    /// A group closes at this many bytes.
    #[arg(long, default_value_t = gateway::PackingConfig::default().group_bytes_max)]
    pub packing_group_bytes_max: u64,
    /// A group closes this many microseconds after an object joined it at the latest.
    #[arg(long, default_value_t = gateway::PackingConfig::default().group_wait_us)]
    pub packing_group_wait_us: u64,
    /// How a group closes: `adaptive`, as soon as no other PUT for its OSD is on its way
    /// (count, bytes and wait only bound it), or `wait`, on count, bytes and wait alone.
    #[arg(long, value_enum, default_value = "adaptive")]
    pub packing_close: PackingClose,
    /// With --packing-close adaptive: microseconds a group nobody else is coming to stays
    /// open after its last member joined.
    #[arg(long, default_value_t = gateway::PackingConfig::default().group_linger_us)]
    pub packing_group_linger_us: u64,
    /// The pack GC rewrites a pack once this percentage of it is dead.
    #[arg(long, default_value_t = gateway::PackingConfig::default().gc_dead_percent_min)]
    pub packing_gc_dead_percent: u64,
}

/// How a pack group closes (`gateway::PackingConfig::adaptive_close`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PackingClose {
    Adaptive,
    Wait,
}

/// A feature switch on the command line.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnOff {
    On,
    Off,
}

impl Args {
    /// The gateway's packing settings these flags give.
    pub fn packing_config(&self) -> gateway::PackingConfig {
        gateway::PackingConfig {
            enabled: self.packing == OnOff::On,
            object_size_max_bytes: self.packing_object_max_bytes,
            group_count_max: self.packing_group_count_max,
            group_bytes_max: self.packing_group_bytes_max,
            group_wait_us: self.packing_group_wait_us,
            adaptive_close: self.packing_close == PackingClose::Adaptive,
            group_linger_us: self.packing_group_linger_us,
            gc_dead_percent_min: self.packing_gc_dead_percent,
        }
    }
}

/// The storage `strata serve` runs on.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendKind {
    /// The embedded cluster in the data directory.
    Embedded,
    /// A Ceph cluster through librados.
    Ceph,
}

/// Serves until a signal.
pub fn run(args: Args) -> Result<ExitCode> {
    init_logging();
    let mut config = server::ServeConfig::new(&args.data);
    config.admin_addr = args.admin;
    config.s3_addr = (!args.no_s3).then_some(args.s3);
    config.gateway.auth = !args.s3_no_auth;
    config.gateway.packing = args.packing_config();
    config.s3_data_erasure = args.s3_data_erasure.clone();
    if let Some(path) = &args.nbd_socket {
        config.nbd_socket = Some(path.clone());
    }
    if args.no_nbd_socket {
        config.nbd_socket = None;
    }
    config.nbd_tcp_addr = args
        .nbd_port
        .map(|port| SocketAddr::new(args.nbd_bind, port));
    if args.backend == BackendKind::Ceph {
        if args.config.is_some() {
            anyhow::bail!(
                "--config describes an embedded cluster; it has no meaning with --backend ceph"
            );
        }
        config.backend = server::BackendChoice::Ceph(ceph_backend::CephConfig {
            conf_path: args.ceph_conf.clone(),
            client_id: args.ceph_id.clone(),
            keyring: args.keyring.clone(),
            op_timeout_s: args.ceph_op_timeout_s,
            ..ceph_backend::CephConfig::default()
        });
    }
    if let Some(path) = &args.config {
        config.cluster_config = Some(
            cluster::ClusterConfig::load(path)
                .with_context(|| format!("loading {}", path.display()))?,
        );
    } else if args.backend == BackendKind::Embedded && !args.data.join("state.json").exists() {
        let size_bytes = osd_size_bytes(&args.osd_size, &args.data)?;
        config.cluster_config = Some(server::sizing::default_cluster_sized(size_bytes));
    }
    config.gateway.secret_keys = keyring(&args)?;
    config.gateway.sse_c_allow_insecure = args.sse_c_allow_insecure;
    config.gateway.lifecycle_day_s = args.lc_debug_interval_s.max(1);
    if let Some(path) = &args.sse_master_key_file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the SSE master key file {}", path.display()))?;
        let key = gateway::encryption::SecretKey::from_hex(&text)
            .with_context(|| format!("the SSE master key file {}", path.display()))?;
        config.gateway.sse_master_key = Some(key);
    }
    let serving = cluster::runtime::serving_runtime(&args.data, args.poll_while_busy)
        .context("starting the async runtime")?;
    config.poll_while_busy = serving.poll_while_busy();
    if let Some(cpus) = &serving.worker_cpus {
        tracing::info!(
            ?cpus,
            "runtime workers run off the commit CPU and poll while operations are in flight"
        );
    }
    serving.runtime.block_on(serve(config))?;
    Ok(ExitCode::SUCCESS)
}

/// `--osd-size`: a size, or `auto` from the free space of the filesystem that will hold the
/// data directory (its nearest existing ancestor), said on stderr.
fn osd_size_bytes(choice: &str, data: &std::path::Path) -> Result<u64> {
    if choice != "auto" {
        return device::parse_size_bytes(choice)
            .filter(|&bytes| bytes > 0)
            .ok_or_else(|| {
                anyhow::anyhow!("--osd-size: {choice:?} is not a size like 4G or auto")
            });
    }
    let osds = cluster::ClusterConfig::default_cluster().osds.len();
    let absolute = std::path::absolute(data).unwrap_or_else(|_| data.to_path_buf());
    let existing = absolute
        .ancestors()
        .find(|dir| dir.exists())
        .unwrap_or(std::path::Path::new("/"));
    let stat = rustix::fs::statvfs(existing)
        .with_context(|| format!("measuring the free space of {}", existing.display()))?;
    let free_bytes = stat.f_bavail.saturating_mul(stat.f_frsize);
    let size_bytes = server::sizing::default_osd_size_bytes(free_bytes, osds);
    eprintln!(
        "strata: {osds} OSD files of {} each (sparse; --osd-size auto: half of the {} free on \
         {}, at most 64G each; --osd-size SIZE chooses)",
        server::sizing::spec_size(size_bytes),
        crate::cmd::admin::human_bytes(free_bytes),
        existing.display()
    );
    Ok(size_bytes)
}

async fn serve(config: server::ServeConfig) -> Result<()> {
    let data_dir = config.data_dir.clone();
    let config_auth = config.gateway.auth;
    let running = server::start(config)
        .await
        .with_context(|| format!("serving {}", data_dir.display()))?;
    match running.cluster() {
        Some(cluster) => println!(
            "strata: {} cluster in {} ({} osds, {} hosts, epoch {})",
            if running.created { "created" } else { "opened" },
            data_dir.display(),
            cluster.config().osds.len(),
            cluster.config().hosts.len(),
            cluster.epoch()
        ),
        None => println!(
            "strata: serving the {} backend (admin token in {})",
            running.backend().kind(),
            data_dir.display()
        ),
    }
    println!(
        "strata: admin  http://{}  (token in {}; strata status --admin {0} --data {})",
        running.admin_addr,
        server::token::token_path(&data_dir).display(),
        data_dir.display()
    );
    match running.s3_addr {
        Some(addr) if running.created && config_auth => {
            println!("strata: s3     http://{addr}");
            println!(
                "strata: s3 needs a user: strata user create --uid NAME --admin {} --data {} \
                 (prints its access and secret keys)",
                running.admin_addr,
                data_dir.display()
            );
        }
        Some(addr) => println!("strata: s3     http://{addr}"),
        None => println!("strata: s3     not served"),
    }
    match &running.nbd_socket {
        Some(path) => println!(
            "strata: nbd    {}  (every volume, export POOL/VOLUME: nbdinfo --list 'nbd+unix:///?socket={0}')",
            path.display()
        ),
        None => println!("strata: nbd    no unix socket"),
    }
    if let Some(addr) = running.nbd_tcp_addr {
        println!("strata: nbd    nbd://{addr}/POOL/VOLUME");
    }
    println!("strata: ready; Ctrl-C or SIGTERM stops");
    wait_for_signal().await?;
    println!("strata: stopping");
    running.shutdown().await.context("shutting down")?;
    println!("strata: stopped");
    Ok(())
}

/// The S3 master keys the options and the environment give; `None`: the server's default
/// (the data directory's `s3-master.key`).
fn keyring(args: &Args) -> Result<Option<gateway::SecretKeyring>> {
    let from_environment = std::env::var(server::master_key::MASTER_KEY_ENV).ok();
    let current = match (&args.s3_master_key_file, from_environment) {
        (Some(path), _) => server::master_key::read(path)?,
        (None, Some(text)) => gateway::MasterKey::from_hex(&text)
            .with_context(|| format!("${}", server::master_key::MASTER_KEY_ENV))?,
        (None, None) if !args.s3_previous_master_key_file.is_empty() => {
            device::create_private_directory(&args.data)
                .with_context(|| format!("creating {}", args.data.display()))?;
            server::master_key::load_or_create(&args.data)?
        }
        (None, None) => return Ok(None),
    };
    let previous = args
        .s3_previous_master_key_file
        .iter()
        .map(|path| server::master_key::read(path))
        .collect::<server::Result<Vec<_>>>()?;
    Ok(Some(gateway::SecretKeyring { current, previous }))
}

async fn wait_for_signal() -> Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut terminate = signal(SignalKind::terminate()).context("installing SIGTERM handler")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("installing SIGINT handler")?;
    tokio::select! {
        _ = terminate.recv() => tracing::info!("SIGTERM"),
        _ = interrupt.recv() => tracing::info!("SIGINT"),
    }
    Ok(())
}

/// What `serve` logs without RUST_LOG. s3s logs every refused request at ERROR, twice for
/// some, so any client could flood the log: the gateway logs refusals itself (debug; server
/// errors at warn, rate-limited) and s3s is heard with RUST_LOG only.
const DEFAULT_LOG_FILTER: &str = "info,fjall=warn,lsm_tree=warn,s3s=off";

fn init_logging() {
    // The metadata database (fjall, lsm_tree) logs every keyspace it recovers at info: 80
    // lines for the default cluster's start. Its warnings and errors still show.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER));
    // Colours only on a terminal: a log redirected to a file gets plain text, not escapes.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
}
