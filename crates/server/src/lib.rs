//! # server: `strata serve` as a library
//!
//! Owns the process that serves a cluster: it opens (or creates) the embedded
//! [`cluster::Cluster`] under a data directory, or connects to a Ceph cluster through librados
//! ([`BackendChoice`]; both behind [`backend::Backend`]), starts the admin HTTP endpoint ([`admin`]:
//! `/status`, `/metrics`, the small JSON API the `strata` CLI talks to and the dashboard at
//! `/` ([`dashboard`])) and the S3 gateway
//! ([`gateway::serve`]) and the NBD export of every volume of every pool ([`volumes`]: export
//! `pool/volume` on a unix socket, `<data-dir>/nbd.sock` by default, and optionally TCP), and
//! shuts them down in order so every store is flushed. The binary only parses arguments and
//! waits for a signal.
//!
//! ## Invariants
//! - Exactly one strong handle on the cluster exists, inside [`Running`]; the admin API and
//!   the gateway hold it weakly ([`WeakCluster`]), so shutdown can always take the cluster
//!   back and call [`cluster::Cluster::shutdown`] (requests after that fail with
//!   `Shutdown`, never touch a closed store).
//! - Client mistakes on the admin API are 4xx with a JSON body naming the problem; 5xx only
//!   for failures of the cluster itself ([`error`]).

pub mod admin;
pub mod backend;
pub mod balancer;
pub mod dashboard;
pub mod error;
mod handlers;
pub mod master_key;
pub mod metrics;
pub mod rates;
pub mod report;
pub mod sizing;
pub mod striped;
pub mod tier_api;
pub mod token;
mod volume_api;
pub mod volumes;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use backend::embedded::EmbeddedBackend;
use backend::Backend;
use cluster::{Cluster, ClusterConfig, ClusterOptions};

pub use backend::embedded::WeakCluster;
pub use error::{Result, ServerError};

/// Default admin endpoint.
pub const ADMIN_ADDR_DEFAULT: &str = "127.0.0.1:9860";
/// Default S3 endpoint.
pub const S3_ADDR_DEFAULT: &str = "127.0.0.1:9000";

/// How to serve.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// Data directory holding the cluster (created on first run). Default `./strata-data`.
    pub data_dir: PathBuf,
    /// Cluster configuration to create the cluster with on first run. Default: the cluster
    /// crate's default cluster (3 hosts x (1 ssd + 2 hdd) sparse 1 GiB file OSDs). Ignored
    /// (with a warning if it differs) when the data directory already holds a cluster.
    pub cluster_config: Option<ClusterConfig>,
    /// Admin HTTP endpoint. Default 127.0.0.1:9860; port 0 picks a free port.
    pub admin_addr: SocketAddr,
    /// S3 endpoint; `None` serves no S3. Default 127.0.0.1:9000.
    pub s3_addr: Option<SocketAddr>,
    /// The gateway's settings (pools, auth). Default: [`gateway::GatewayConfig::default`]
    /// with 3-way (or as many hosts as there are, fewer) replicated pools. Without
    /// `secret_keys`, the data directory's `s3-master.key` ([`master_key`]) seals S3 secrets.
    pub gateway: gateway::GatewayConfig,
    /// An erasure-code profile (`k=4,m=2[,failure-domain=host]...`) for the gateway's data
    /// pool: created erasure-coded with it when missing (its metadata and index pools stay
    /// replicated), refused when it exists replicated. `None` (the default): the data pool is
    /// whatever exists, else replicated as the others. Embedded backend only.
    pub s3_data_erasure: Option<String>,
    /// Largest object body the admin API accepts, in bytes. Default 64 MiB.
    pub object_bytes_max: usize,
    /// `cluster::ClusterOptions::poll_while_busy`: set it from
    /// `cluster::runtime::serving_runtime`. Default false.
    pub poll_while_busy: bool,
    /// The storage to serve. Default [`BackendChoice::Embedded`].
    pub backend: BackendChoice,
    /// The unix socket exporting every volume over NBD (export name `pool/volume`), removed
    /// on shutdown; `None` serves none. Default `<data_dir>/nbd.sock`.
    pub nbd_socket: Option<PathBuf>,
    /// The TCP endpoint exporting the volumes over NBD; `None` (the default) serves none.
    pub nbd_tcp_addr: Option<SocketAddr>,
    /// How volumes are opened (lease duration, requests in flight). Default
    /// [`volume::VolumesConfig::default`] with the lease holder [`volumes::holder_for`] the
    /// data directory, so a server restarted after a crash takes its volumes' leases over
    /// at once instead of waiting for them to expire.
    pub volumes: volume::VolumesConfig,
}

/// Which storage `strata serve` runs on.
#[derive(Clone, Debug, Default)]
pub enum BackendChoice {
    /// The embedded cluster in the data directory (created on first run).
    #[default]
    Embedded,
    /// A Ceph cluster through librados; the data directory then holds only the admin token
    /// and the server's own keys.
    Ceph(ceph_backend::CephConfig),
}

/// The NBD socket's file name in the data directory.
pub const NBD_SOCKET_FILE: &str = "nbd.sock";

/// The largest object body the admin API accepts by default (`strata put`'s limit).
pub const OBJECT_BYTES_MAX: usize = 64 << 20;

impl ServeConfig {
    /// Defaults for `data_dir`.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        let data_dir = data_dir.into();
        Self {
            nbd_socket: Some(data_dir.join(NBD_SOCKET_FILE)),
            nbd_tcp_addr: None,
            volumes: volume::VolumesConfig::default(),
            data_dir,
            cluster_config: None,
            admin_addr: SocketAddr::from(([127, 0, 0, 1], 9860)),
            s3_addr: Some(SocketAddr::from(([127, 0, 0, 1], 9000))),
            gateway: gateway::GatewayConfig::default(),
            s3_data_erasure: None,
            object_bytes_max: OBJECT_BYTES_MAX,
            poll_while_busy: false,
            backend: BackendChoice::Embedded,
        }
    }
}

/// A serving process: cluster, admin endpoint, S3 endpoint.
pub struct Running {
    /// Where the admin API listens.
    pub admin_addr: SocketAddr,
    /// Where S3 listens, if served.
    pub s3_addr: Option<SocketAddr>,
    /// Whether the cluster was created by this run (else reopened).
    pub created: bool,
    /// The unix socket exporting the volumes over NBD, if served.
    pub nbd_socket: Option<PathBuf>,
    /// Where NBD listens on TCP, if it does.
    pub nbd_tcp_addr: Option<SocketAddr>,
    /// The volumes, as NBD exports and for the admin API.
    volumes: Arc<volumes::VolumeExports>,
    /// The NBD accept loops.
    nbd_tasks: Vec<tokio::task::JoinHandle<()>>,
    /// The storage served: the object API and its control plane.
    backend: Arc<dyn Backend>,
    /// The embedded cluster's only strong handle, when that is the backend: shutdown takes it
    /// back and flushes every store.
    cluster: Option<Arc<Cluster>>,
    admin: admin::AdminServer,
    s3: Option<gateway::Server>,
    /// Ends a statistics period every `stats_period_s` ([`end_stats_periods`]).
    stats_periods: Option<tokio::task::JoinHandle<()>>,
    /// The cache tiers: the object API of the gateway, the volumes and the admin API.
    tiers: Arc<tier::TieredRados>,
    /// The backend's background workers (the balancer).
    workers: Vec<worker::WorkerHandle>,
}

/// Opens or creates the cluster (or connects to Ceph) and starts both endpoints.
pub async fn start(config: ServeConfig) -> Result<Running> {
    let (backend, cluster, created) = match &config.backend {
        BackendChoice::Embedded => {
            let (cluster, created) = open_embedded(&config).await?;
            let cluster = Arc::new(cluster);
            let backend: Arc<dyn Backend> = Arc::new(EmbeddedBackend::new(&cluster)?);
            (backend, Some(cluster), created)
        }
        BackendChoice::Ceph(ceph) => {
            tracing::info!(conf = ?ceph.conf_path, "connecting to Ceph");
            std::fs::create_dir_all(&config.data_dir).map_err(|error| {
                ServerError::Backend(format!(
                    "creating the data directory {}: {error}",
                    config.data_dir.display()
                ))
            })?;
            let backend = backend::ceph::CephBackend::connect(ceph.clone()).await?;
            let backend: Arc<dyn Backend> = Arc::new(backend);
            (backend, None, false)
        }
    };
    // The object API every layer uses goes through the cache tiers' overlays.
    let tiers = match tier::TieredRados::open(
        backend.rados(),
        Arc::new(worker::SystemClock::new()),
        tier::system_wall_clock(),
    )
    .await
    {
        Ok(tiers) => tiers,
        Err(error) => {
            let _ = backend.shutdown().await;
            if let Some(cluster) = cluster {
                close_cluster(cluster).await;
            }
            return Err(error.into());
        }
    };
    let objects: Arc<dyn rados::Rados> = tiers.clone();
    let mut volumes_config = config.volumes.clone();
    volumes_config
        .holder
        .get_or_insert_with(|| volumes::holder_for(&config.data_dir));
    let exports = Arc::new(volumes::VolumeExports::new(objects.clone(), volumes_config));
    let started = match start_endpoints(&config, &backend, objects).await {
        Ok((admin, s3)) => match start_nbd(&config, &exports).await {
            Ok(nbd) => Ok((admin, s3, nbd)),
            Err(error) => {
                admin.shutdown().await;
                if let Some(s3) = s3 {
                    s3.shutdown().await;
                }
                Err(error)
            }
        },
        Err(error) => Err(error),
    };
    match started {
        Ok((admin, s3, (nbd_socket, nbd_tcp_addr, nbd_tasks))) => {
            admin.set_volumes(exports.clone());
            admin.set_tiers(tiers.clone());
            let period_s = backend.stats_period_s();
            let stats_periods = (period_s > 0).then(|| {
                tokio::spawn(end_stats_periods(
                    Arc::downgrade(&backend),
                    Duration::from_secs(period_s),
                ))
            });
            let workers = backend
                .workers()
                .into_iter()
                .map(|(name, step)| {
                    worker::Worker::spawn(name, 1000, Arc::new(worker::UnixClock), step)
                })
                .collect();
            Ok(Running {
                workers,
                stats_periods,
                admin_addr: admin.local_addr,
                s3_addr: s3.as_ref().map(|s| s.local_addr),
                created,
                nbd_socket,
                nbd_tcp_addr,
                volumes: exports,
                nbd_tasks,
                backend,
                cluster,
                admin,
                s3,
                tiers,
            })
        }
        Err(error) => {
            tiers.shutdown().await;
            drop(tiers);
            let _ = backend.shutdown().await;
            if let Some(cluster) = cluster {
                close_cluster(cluster).await;
            }
            Err(error)
        }
    }
}

/// Opens the embedded cluster of the data directory, creating it on first run; whether it
/// was created.
async fn open_embedded(config: &ServeConfig) -> Result<(Cluster, bool)> {
    let created = !config.data_dir.join("state.json").exists();
    let cluster_config = config
        .cluster_config
        .clone()
        .unwrap_or_else(ClusterConfig::default_cluster);
    let options = ClusterOptions {
        poll_while_busy: config.poll_while_busy,
        ..ClusterOptions::default()
    };
    let cluster = if created {
        tracing::info!(data_dir = %config.data_dir.display(), "creating cluster");
        Cluster::create(&config.data_dir, cluster_config, options).await?
    } else {
        tracing::info!(data_dir = %config.data_dir.display(), "opening cluster");
        let cluster = Cluster::open(&config.data_dir, options).await?;
        if let Some(given) = &config.cluster_config {
            if *given != *cluster.config() {
                tracing::warn!(
                    "the data directory already holds a cluster; its cluster.toml wins over --config"
                );
            }
        }
        cluster
    };
    Ok((cluster, created))
}

/// Starts the admin endpoint, then the S3 gateway on `backend`; on failure stops what it
/// started (the caller closes the backend).
async fn start_endpoints(
    config: &ServeConfig,
    backend: &Arc<dyn Backend>,
    objects: Arc<dyn rados::Rados>,
) -> Result<(admin::AdminServer, Option<gateway::Server>)> {
    let token = token::load_or_create(&config.data_dir)?;
    let admin = admin::AdminServer::start(
        config.admin_addr,
        Arc::clone(backend),
        config.object_bytes_max,
        token,
    )
    .await?;
    let Some(addr) = config.s3_addr else {
        return Ok((admin, None));
    };
    let mut gateway_config = config.gateway.clone();
    if gateway_config.secret_keys.is_none() {
        match master_key::load_or_create(&config.data_dir) {
            Ok(key) => gateway_config.secret_keys = Some(gateway::SecretKeyring::new(key)),
            Err(error) => {
                admin.shutdown().await;
                return Err(error);
            }
        }
    }
    let domains = match backend.gateway_pool_size().await {
        Ok(domains) => domains,
        Err(error) => {
            admin.shutdown().await;
            return Err(error);
        }
    };
    gateway_config.pool_size = gateway_config.pool_size.max(domains);
    if let Some(profile) = &config.s3_data_erasure {
        if let Err(error) = erasure_data_pool(backend.as_ref(), &gateway_config, profile).await {
            admin.shutdown().await;
            return Err(error);
        }
    }
    let pools = [
        gateway_config.metadata_pool.clone(),
        gateway_config.index_pool.clone(),
        gateway_config.data_pool.clone(),
    ];
    match gateway::serve(objects, addr, gateway_config).await {
        Ok(server) => {
            let user = "the S3 gateway (serve without S3, --no-s3, to delete it)";
            for pool in &pools {
                backend.protect_pool(pool, user);
            }
            admin.set_gateway(server.gateway.clone());
            admin.set_requests(Arc::clone(&server.requests));
            Ok((admin, Some(server)))
        }
        Err(error) => {
            admin.shutdown().await;
            Err(ServerError::Gateway(error.to_string()))
        }
    }
}

/// Creates the gateway's data pool erasure-coded with `profile` when it is missing; refuses
/// one that exists replicated (its objects would stay there).
async fn erasure_data_pool(
    backend: &dyn Backend,
    gateway_config: &gateway::GatewayConfig,
    profile: &str,
) -> Result<()> {
    let name = &gateway_config.data_pool;
    let pools = backend.pools().await?;
    match pools.iter().find(|pool| pool.name == *name) {
        Some(pool) => match &pool.erasure {
            Some(existing) => {
                if existing != profile {
                    tracing::warn!(
                        pool = %name, %existing, given = %profile,
                        "the S3 data pool exists erasure-coded with another profile; keeping it"
                    );
                }
                Ok(())
            }
            None => Err(ServerError::Backend(format!(
                "the S3 data pool {name:?} exists and is replicated; an erasure-coded data pool \
                 ({profile}) must be created before any data is written (serve without the \
                 erasure setting, or with another data pool)"
            ))),
        },
        None => {
            let info = backend
                .erasure_pool_create(name, profile, gateway_config.pool_pg_num)
                .await?;
            tracing::info!(pool = %info.name, %profile, "created the S3 data pool erasure-coded");
            Ok(())
        }
    }
}

/// What [`start_nbd`] started: the socket, the TCP address, the accept loops.
type NbdEndpoints = (
    Option<PathBuf>,
    Option<SocketAddr>,
    Vec<tokio::task::JoinHandle<()>>,
);

/// Binds the NBD socket and TCP endpoint and serves the volumes on them.
async fn start_nbd(
    config: &ServeConfig,
    exports: &Arc<volumes::VolumeExports>,
) -> Result<NbdEndpoints> {
    let server = nbd::NbdServer::with_source(exports.clone());
    let mut tasks = Vec::new();
    if let Some(path) = &config.nbd_socket {
        let listener = nbd::NbdServer::bind_unix(path).map_err(|error| {
            ServerError::Backend(format!(
                "binding the NBD socket {}: {error}",
                path.display()
            ))
        })?;
        let server = server.clone();
        tasks.push(tokio::spawn(async move {
            if let Err(error) = server.serve_unix(listener).await {
                tracing::warn!(%error, "NBD unix socket stopped accepting");
            }
        }));
        tracing::info!(socket = %path.display(), "serving volumes over NBD");
    }
    let mut tcp_addr = None;
    if let Some(addr) = config.nbd_tcp_addr {
        let listener = match tokio::net::TcpListener::bind(addr).await {
            Ok(listener) => listener,
            Err(source) => {
                stop_nbd(tasks, config.nbd_socket.as_deref()).await;
                return Err(ServerError::Bind { addr, source });
            }
        };
        let local = listener
            .local_addr()
            .map_err(|source| ServerError::Bind { addr, source })?;
        tcp_addr = Some(local);
        tasks.push(tokio::spawn(async move {
            if let Err(error) = server.serve_tcp(listener).await {
                tracing::warn!(%error, "NBD TCP endpoint stopped accepting");
            }
        }));
        tracing::info!(addr = %local, "serving volumes over NBD (TCP)");
    }
    Ok((config.nbd_socket.clone(), tcp_addr, tasks))
}

/// Stops accepting NBD connections and removes the socket file.
async fn stop_nbd(tasks: Vec<tokio::task::JoinHandle<()>>, socket: Option<&std::path::Path>) {
    for task in tasks {
        task.abort();
        let _ = task.await;
    }
    if let Some(path) = socket {
        if let Err(error) = std::fs::remove_file(path) {
            tracing::warn!(socket = %path.display(), %error, "removing the NBD socket failed");
        }
    }
}

impl Running {
    /// The volumes served (NBD exports, the admin API's volume calls).
    pub fn volumes(&self) -> &Arc<volumes::VolumeExports> {
        &self.volumes
    }

    /// The embedded cluster being served; `None` on another backend.
    pub fn cluster(&self) -> Option<&Cluster> {
        self.cluster.as_deref()
    }

    /// The backend being served.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// The S3 gateway (users), if served.
    pub fn gateway(&self) -> Option<&gateway::Gateway> {
        self.s3.as_ref().map(|s| &s.gateway)
    }

    /// Stops accepting requests, waits briefly for requests in flight, then shuts the cluster
    /// down (every store flushed).
    pub async fn shutdown(self) -> Result<()> {
        for worker in self.workers {
            worker.stop().await;
        }
        if let Some(task) = self.stats_periods {
            task.abort();
            let _ = task.await;
        }
        stop_nbd(self.nbd_tasks, self.nbd_socket.as_deref()).await;
        self.volumes.close_all().await;
        self.admin.shutdown().await;
        if let Some(s3) = self.s3 {
            s3.shutdown().await;
        }
        drop(self.volumes);
        self.tiers.quiesce().await;
        self.tiers.shutdown().await;
        drop(self.tiers);
        self.backend.shutdown().await?;
        if let Some(cluster) = self.cluster {
            let cluster = take_back(cluster, Duration::from_secs(10)).await?;
            cluster.shutdown().await?;
            tracing::info!("cluster shut down cleanly");
        }
        Ok(())
    }
}

/// Ends a statistics period of the cluster every `period` (its `stats_period_s`): the admin
/// API (`/api/stats`) and `/metrics` report the last one, and each end empties the
/// per-object access table, so its bound applies per period. Holds the cluster only for the
/// call, and stops when it is gone.
async fn end_stats_periods(backend: std::sync::Weak<dyn Backend>, period: Duration) {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(backend) = backend.upgrade() else {
            return;
        };
        backend.end_stats_period();
    }
}

/// Waits until no request holds the cluster any more (they hold it only while they run).
async fn take_back(mut shared: Arc<Cluster>, wait: Duration) -> Result<Cluster> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        match Arc::try_unwrap(shared) {
            Ok(cluster) => return Ok(cluster),
            Err(again) if tokio::time::Instant::now() < deadline => {
                shared = again;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Err(_) => {
                return Err(ServerError::Shutdown(
                    "requests still hold the cluster after 10 s".into(),
                ))
            }
        }
    }
}

async fn close_cluster(cluster: Arc<Cluster>) {
    match take_back(cluster, Duration::from_secs(10)).await {
        Ok(cluster) => {
            if let Err(error) = cluster.shutdown().await {
                tracing::warn!(%error, "cluster shutdown failed");
            }
        }
        Err(error) => tracing::warn!(%error, "cluster not shut down"),
    }
}
