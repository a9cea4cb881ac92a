//! # cluster: the embedded strata cluster
//!
//! Owns a whole RADOS-like cluster inside one process: OSDs (each a [`store::Store`] on one
//! [`device::Device`]), grouped in hosts, placed by a Ceph-compatible CRUSH map
//! ([`crush::text::MapBuilder`]) and Ceph's PG mapping ([`osdmap::OsdMap`]: object -> PG ->
//! up set with `pg_upmap` and `pg_upmap_items`, `pg_temp` -> acting set), replicated pools, recovery and
//! backfill, deep scrub and statistics. It implements the [`rados`] traits, so everything
//! above (gateway, tiering, volumes) runs on it as it would on Ceph.
//!
//! ## Files (under the data directory)
//! `cluster.toml` (the [`ClusterConfig`]), `state.json` (epoch, OSD states, pools, upmaps,
//! pg_temp, CRUSH ids, the hosts and OSDs placement was computed from; [`state`]), per OSD
//! `osd.N.meta` (its store's metadata) and its device (e.g. `osd.N.img`, a sparse file), and
//! `scrub_errors` (what the last scrub left wrong, for `status` after a restart).
//! Directories are `0700` and files `0600`, tightened when found looser ([`private`]).
//! `state.json` is written last at creation (after every
//! store exists), while a `creating` marker says a create is under way: see [`Cluster::create`].
//!
//! ## Write path ([`IoCtx::operate`](rados::IoCtx::operate))
//! 1. object name -> PG with Ceph's hashing (rjenkins, `ceph_stable_mod`); PG -> up set (CRUSH
//!    and upmap items, minus down OSDs) -> acting set (`pg_temp` while recovery fills new
//!    members, else the up set); the first acting OSD is the primary.
//! 2. The PG's lock is taken shared and the object's lock exclusively: writes to one object are
//!    serialized, so every replica applies them in one order, while writes to different objects
//!    of a PG overlap their durable commits (Ceph pipelines a PG's ops the same way; without
//!    it a PG's write rate is one per commit latency, which capped an S3 bucket index shard).
//!    Recovery, backfill and scrub take the PG's lock exclusively.
//! 3. Fewer acting OSDs than the pool's `min_size`: [`rados::RadosError::Degraded`]. A
//!    write that adds data or an object to a full pool, or whose space would take an acting
//!    OSD past `full_ratio`: [`rados::RadosError::NoSpace`] (see [`full`]; the space is
//!    reserved on every replica until they applied it).
//! 4. Guards (exists, exclusive create, compare xattr) and appends are evaluated against the
//!    primary's copy; the steps become one store transaction, stamped with a new object
//!    version (cluster-wide, monotonic, kept in the `_strata.v` xattr).
//! 5. The primary applies the transaction to every acting replica in parallel and acknowledges
//!    once every one of them committed durably. A replica out of space fails the write
//!    (`NoSpace`) and the replicas that committed are rolled back from it: a full OSD never
//!    lowers a write's redundancy. When some fail otherwise:
//!    - the primary and at least `min_size` replicas committed: the write succeeds and the PG
//!      is queued for repair (recovery scrubs it and rewrites the failed copies);
//!    - at least `min_size` replicas but not the primary committed: the new version is copied
//!      from a replica onto the primary at once (still under the object's lock), and the write
//!      succeeds; if that copy fails too, the error names the OSDs that hold the write and
//!      says it is queued for repair, which keeps the version most replicas hold (so, like a
//!      timeout, the write may still take effect: read back before retrying an append);
//!    - fewer than `min_size` committed: the error is returned (the PG queued for repair when
//!      some did commit: scrub keeps a copy some replica holds, the majority's among them,
//!      on a tie the primary's).
//!
//! ## Read path
//! Reads go to the primary. On a checksum or device error the other acting replicas are tried
//! in turn; the first good copy is returned and written over the bad copies (under the object's
//! lock). When every replica fails its checksum the read fails with
//! [`rados::RadosError::Checksum`]: never wrong data.
//!
//! ## Failures and recovery
//! `mark_down` / `mark_out` / `mark_up` / `mark_in`, reweights, device class changes
//! ([`membership`], which also rewrites `cluster.toml`) and upmap changes bump the epoch. For every
//! PG whose new up set contains OSDs not known to hold its latest data, the old holders become
//! its `pg_temp` (acting set) and keep serving; a background task ([`recovery`]) copies objects
//! whose version differs to the new members, removes objects they should not have, clears the
//! `pg_temp`, and deletes copies from OSDs no longer in the set. Reads and writes continue
//! while at least `min_size` acting replicas are up. Down OSDs are never read or written.
//!
//! ## Peering, damaged logs, unfound objects ([`peering`])
//! After a start every PG peers before it serves: its acting replicas get the newest version
//! any of them holds of each object. An OSD whose store found its metadata log damaged leaves
//! its PGs' acting sets until recovery refilled it. An object no holder can read is unfound:
//! recovery goes on with the rest of its PG, and [`Cluster::mark_unfound_lost`] resolves it.
//!
//! ## Scrub
//! [`Cluster::scrub`] (and a periodic task) compares replicas of every object of a PG (data
//! crc, xattrs, omap, version), reports inconsistencies and repairs them from the majority of
//! the replicas that hold the object (ties: the primary); a replica without the object has no
//! vote against one that has it (no PG log tells a deletion from a loss; see [`scrub`]).
//!
//! ## Erasure-coded pools ([`ec`])
//! A pool with an erasure-code profile keeps `k + m` shards per object, one per position of
//! its PG's up set (an erasure CRUSH rule, no `pg_temp`); its [`rados::IoCtx`] is
//! [`ec::EcPoolHandle`]. The replicated machinery above (peering, pg_temp, replica scrub)
//! leaves such pools alone; recovery and scrub hand their PGs to `ec::repair`.
//!
//! ## Known limits
//! - An OSD whose store is poisoned (a failed flush or commit) is not marked down by the
//!   cluster: writes for which it is primary fail (step 5) until an operator marks it down.
//! - No PG log: an OSD that returns is compared object by object (version xattrs) with the
//!   acting primary, a start compares every PG's acting replicas the same way, and recovery
//!   and peering hold the PG's lock for the whole PG.
//! - `mem:` devices do not survive a restart (their metadata file does): use files for
//!   clusters that are reopened.
//!
//! ## Invariants
//! - Every acting replica of a PG holds the same objects with the same versions, except
//!   transiently while a write to that object is in flight or after a reported replica failure (queued for repair).
//! - State changes are persisted before they take effect; ids (OSDs, CRUSH buckets, rules,
//!   pools) are stable across restarts.
//! - Nothing in the data path reads a clock except through [`ClusterOptions::clock_ns`].

pub mod config;
pub mod ec;
mod error;
pub mod full;
mod io;
mod membership;
pub mod osd;
mod peering;
mod poll;
mod pool_settings;
mod private;
pub mod recovery;
pub mod runtime;
pub mod scrub;
pub mod state;
pub mod stats;
mod util;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use device::Device;
use osdmap::{OsdMap, PgId};
use rados::{PoolInfo, PoolSpec, RadosError};

pub use config::{ClusterConfig, HostConfig, OsdConfig, PoolConfig};
pub use error::{store_to_rados, ClusterError, Result};
pub use io::PoolHandle;
pub use osd::Osd;
pub use peering::{PgInfo, UnfoundObject, UnfoundResolution};
pub use pool_settings::{PoolSettings, POOL_KEYS};
pub use recovery::RecoveryProgress;
pub use scrub::{Inconsistency, ScrubReport};
pub use stats::{AccessCounts, ObjectAccess, OsdStats, StatsPeriod};

use crate::state::ClusterState;

/// Wraps an OSD's device when the cluster opens it (tests put a `FaultyDevice` here).
pub type DeviceWrapper = Arc<dyn Fn(i32, Arc<dyn Device>) -> Arc<dyn Device> + Send + Sync>;

/// The wall clock in ns since the Unix epoch, injected.
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// Run-time options that are not configuration: injected clock, device wrappers, background
/// tasks.
#[derive(Clone)]
pub struct ClusterOptions {
    /// Wraps every OSD device as it is opened. Default none.
    pub device_wrapper: Option<DeviceWrapper>,
    /// Source of mtimes. Default: the system clock.
    pub clock_ns: Clock,
    /// Run recovery and periodic scrub in background tasks. Default true; tests that want to
    /// step recovery themselves turn it off and call [`Cluster::recover`].
    pub background: bool,
    /// Keep one runtime worker polling while client operations are in flight, instead of
    /// parking it (see the `poll` module). Default false; [`runtime::serving_runtime`] says
    /// when to turn it on.
    pub poll_while_busy: bool,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        Self {
            device_wrapper: None,
            clock_ns: Arc::new(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as u64)
            }),
            background: true,
            poll_while_busy: false,
        }
    }
}

/// The persisted state; its presence is what makes a directory a cluster.
const STATE_FILE: &str = "state.json";
const CONFIG_FILE: &str = "cluster.toml";

/// Present while [`Cluster::create`] runs (see there).
const CREATING_MARKER: &str = "creating";

/// The `osd.N.meta` files (store metadata) in a data directory.
fn osd_metadata_files(data_dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(data_dir).map_err(|e| ClusterError::io(data_dir, e))?;
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| ClusterError::io(data_dir, e))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("osd.") && name.ends_with(".meta") {
            found.push(entry.path());
        }
    }
    found.sort();
    Ok(found)
}

/// Writes a small file and makes it and its directory entry durable.
fn write_durably(path: &Path, contents: &[u8]) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(device::PRIVATE_FILE_MODE)
            .open(path)?;
        file.write_all(contents)?;
        file.sync_all()
    };
    write().map_err(|e| ClusterError::io(path, e))?;
    path.parent().map_or(Ok(()), sync_directory)
}

fn sync_directory(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|directory| directory.sync_all())
        .map_err(|e| ClusterError::io(dir, e))
}

fn remove_path(path: &Path) -> Result<()> {
    let removed = if path.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    };
    match removed {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
            Err(ClusterError::io(path, error))
        }
        _ => Ok(()),
    }
}

/// Number of PG lock shards (PGs hash onto them; two PGs may share one).
const PG_LOCK_SHARDS: usize = 1024;

/// Number of object lock shards (objects hash onto them; two objects may share one).
const OBJECT_LOCK_SHARDS: usize = 4096;

/// One PG's new `pg_upmap_items` (`None` or empty: removed), for
/// [`Cluster::set_pg_upmap_items_many`].
pub type UpmapItemsChange = (PgId, Option<Vec<(i32, i32)>>);

/// Where a PG lives now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The PG.
    pub pg: PgId,
    /// CRUSH + upmap, minus down OSDs.
    pub up: Vec<i32>,
    /// OSDs holding the latest data that are up (`pg_temp` while recovering, else `up`).
    pub acting: Vec<i32>,
}

impl Placement {
    /// The primary (first acting OSD), if any.
    pub fn primary(&self) -> Option<i32> {
        self.acting.first().copied()
    }
}

/// An edit of `cluster.toml`'s hosts or OSDs ([`Inner::change_map_with`]).
pub(crate) type ConfigEdit<'a> = dyn Fn(&mut ClusterConfig) -> Result<()> + 'a;

pub(crate) struct Inner {
    data_dir: PathBuf,
    /// `cluster.toml` as it is now: replaced by online topology changes ([`membership`]).
    config: RwLock<Arc<ClusterConfig>>,
    /// `config` with every OSD weighted: what placement is built from ([`weighed`]).
    placed: RwLock<Arc<ClusterConfig>>,
    /// Pools that may not be deleted, with who uses them ([`Cluster::protect_pool`]).
    protected_pools: Mutex<BTreeMap<String, String>>,
    options: ClusterOptions,
    osds: BTreeMap<i32, Osd>,
    /// Device errors of each OSD since its last success (see
    /// `ClusterConfig::osd_device_errors_max`).
    device_errors: BTreeMap<i32, AtomicU32>,
    state: Mutex<ClusterState>,
    map: RwLock<Arc<OsdMap>>,
    /// Placements computed from one map (see `Inner::placement_cached`).
    placements: Mutex<PlacementCache>,
    /// Client writes and single-object repairs hold their PG shared (plus their object's
    /// lock); recovery, backfill and scrub hold it exclusively. So writes to different
    /// objects of one PG overlap their durable commits (as Ceph pipelines a PG's ops), while
    /// whole-PG work still sees no write in flight.
    pg_locks: Vec<tokio::sync::RwLock<()>>,
    /// Serializes writes to one object (and its repair), so its read-modify-write plan and
    /// version stamp are never interleaved with another write to it.
    object_locks: Vec<tokio::sync::Mutex<()>>,
    next_version: AtomicU64,
    /// Mirror of the state's `version_reserved` (read without the state lock).
    version_reserved: AtomicU64,
    closed: AtomicBool,
    /// PGs whose replicas may differ (a replica failed a write or a repair); recovery scrubs
    /// and repairs them.
    dirty_pgs: Mutex<BTreeSet<PgId>>,
    recovery: recovery::RecoveryProgress,
    recovery_wakeup: tokio::sync::Notify,
    /// PGs yet to peer after the start, and unfound objects ([`peering`]).
    peering: peering::Peering,
    stats: stats::Stats,
    /// Counts client operations in flight for the polling task, when it runs.
    poller: Option<Arc<poll::Poller>>,
}

/// The embedded cluster. Implements [`rados::Rados`].
pub struct Cluster {
    inner: Arc<Inner>,
    tasks: Tasks,
}

impl Cluster {
    /// Creates a cluster in `data_dir` (created if missing; must not hold a cluster yet):
    /// writes `cluster.toml`, creates every OSD's device and store and the configured pools.
    ///
    /// Crash-safe: a `creating` marker is made durable first and `state.json`, the file that
    /// makes the directory a cluster, is written last (atomically), then the marker goes. A
    /// directory left with the marker and no `state.json` by an interrupted create never
    /// acknowledged a write: [`Cluster::open`] refuses it with
    /// [`ClusterError::IncompleteCreate`], and `create` (or [`Cluster::open_or_create`])
    /// discards its OSD metadata files and creates the cluster again.
    pub async fn create(
        data_dir: impl AsRef<Path>,
        config: ClusterConfig,
        options: ClusterOptions,
    ) -> Result<Cluster> {
        let data_dir = data_dir.as_ref().to_path_buf();
        config.validate()?;
        if data_dir.exists() && !data_dir.is_dir() {
            return Err(ClusterError::Config(format!(
                "data directory {}: exists and is not a directory",
                data_dir.display()
            )));
        }
        private::create_directory(&data_dir)?;
        private::tighten(&data_dir, Some(&config), true)?;
        let state_path = data_dir.join(STATE_FILE);
        if state_path.exists() {
            return Err(ClusterError::Config(format!(
                "{} already holds a cluster; open it",
                data_dir.display()
            )));
        }
        let marker = data_dir.join(CREATING_MARKER);
        let leftovers = osd_metadata_files(&data_dir)?;
        if marker.exists() {
            tracing::warn!(dir = %data_dir.display(), "completing an interrupted cluster create");
            for path in &leftovers {
                remove_path(path)?;
            }
        } else if let Some(path) = leftovers.first() {
            return Err(ClusterError::Config(format!(
                "{} holds OSD metadata ({}) but no {STATE_FILE}: not a cluster this build \
                 created; refusing to overwrite it",
                data_dir.display(),
                path.display()
            )));
        }
        write_durably(
            &marker,
            b"cluster creation in progress; see Cluster::create\n",
        )?;
        write_durably(&data_dir.join(CONFIG_FILE), config.to_toml().as_bytes())?;
        let placed = weighed(&config, &data_dir, |_| true)?;
        let mut state = ClusterState::initial(&placed);
        for pool in &config.pools {
            if let Some(profile) = config.erasure_profile(pool)? {
                ec::add_pool(&mut state, &pool.name, &profile, pool.pg_num);
                continue;
            }
            let class = config.pool_class(pool)?;
            add_pool(
                &mut state,
                &pool.name,
                pool.size,
                pool.effective_min_size(),
                pool.pg_num,
                class,
            );
        }
        state.build_map(&placed)?;
        // `start` creates the stores, then writes state.json: the point of no return.
        let cluster =
            Self::start(data_dir.clone(), config, placed, state, options, Fresh::All).await?;
        remove_path(&marker)?;
        sync_directory(&data_dir)?;
        // The stores' own files (the LSM's), created under the process's umask.
        private::tighten(&data_dir, None, false)?;
        Ok(cluster)
    }

    /// Opens the cluster in `data_dir` where it stopped.
    pub async fn open(data_dir: impl AsRef<Path>, options: ClusterOptions) -> Result<Cluster> {
        let data_dir = data_dir.as_ref().to_path_buf();
        let state_path = data_dir.join(STATE_FILE);
        let marker = data_dir.join(CREATING_MARKER);
        if !state_path.exists() {
            if marker.exists() {
                return Err(ClusterError::IncompleteCreate {
                    dir: data_dir.display().to_string(),
                });
            }
            return Err(ClusterError::State(format!(
                "{} holds no cluster (no {STATE_FILE}); create one first",
                data_dir.display()
            )));
        }
        if marker.exists() {
            // The create finished (state.json is written last) but stopped before this.
            remove_path(&marker)?;
        }
        let config = ClusterConfig::load(&data_dir.join(CONFIG_FILE))?;
        private::tighten(&data_dir, Some(&config), true)?;
        // OSDs without a store: added to the file, or whose store was removed to start them
        // empty. Their stores are created, and they hold nothing until recovery fills them.
        let fresh: BTreeSet<i32> = config
            .osds
            .iter()
            .map(|osd| osd.id)
            .filter(|&id| !osd::meta_path(&data_dir, id).exists())
            .collect();
        let placed = weighed(&config, &data_dir, |id| fresh.contains(&id))?;
        let state = adopt_config(ClusterState::load(&state_path)?, &placed, &fresh)?;
        let cluster = Self::start(
            data_dir.clone(),
            config,
            placed,
            state,
            options,
            Fresh::Only(fresh),
        )
        .await?;
        private::tighten(&data_dir, None, false)?;
        Ok(cluster)
    }

    /// Opens the cluster in `data_dir`, creating it with `config` if there is none.
    pub async fn open_or_create(
        data_dir: impl AsRef<Path>,
        config: ClusterConfig,
        options: ClusterOptions,
    ) -> Result<Cluster> {
        if data_dir.as_ref().join(STATE_FILE).exists() {
            Self::open(data_dir, options).await
        } else {
            Self::create(data_dir, config, options).await
        }
    }

    async fn start(
        data_dir: PathBuf,
        config: ClusterConfig,
        placed: ClusterConfig,
        mut state: ClusterState,
        options: ClusterOptions,
        fresh: Fresh,
    ) -> Result<Cluster> {
        let mut map = state.build_map(&placed)?;
        let mut osds = BTreeMap::new();
        for osd in &config.osds {
            let create = match &fresh {
                Fresh::All => true,
                Fresh::Only(ids) => ids.contains(&osd.id),
            };
            if create && matches!(fresh, Fresh::Only(_)) {
                tracing::warn!(
                    osd = osd.id,
                    "creating an empty store; recovery will fill it"
                );
            }
            let opened = Osd::open(
                osd,
                &data_dir,
                config.durable,
                options.device_wrapper.as_ref(),
                create,
            )
            .await?;
            osds.insert(osd.id, opened);
        }
        // Stores that lost acknowledged writes to a damaged log leave their PGs' acting sets
        // (persisted below, before their notes are cleared); recovery refills them.
        let damaged: BTreeMap<i32, String> = osds
            .iter()
            .filter_map(|(&id, osd): (&i32, &Osd)| {
                osd.store().log_damage().ok().flatten().map(|why| (id, why))
            })
            .collect();
        if !damaged.is_empty() {
            let ids: BTreeSet<i32> = damaged.keys().copied().collect();
            let pgs = peering::exclude_damaged(&mut state, &map, &ids);
            for (id, why) in &damaged {
                tracing::error!(
                    osd = id,
                    pgs,
                    "{why}: osd.{id} serves none of its PGs until recovery has refilled them from their other replicas"
                );
            }
            map = state.build_map(&placed)?;
        }
        // Versions handed out before a crash lie below the reservation; start above it. Saved
        // after the stores exist: on create, this write is what completes the cluster.
        let next_version = state.version_reserved;
        state.version_reserved = next_version + state::VERSION_LEASE;
        state.save(&data_dir.join(STATE_FILE))?;
        for id in damaged.keys() {
            if let Some(osd) = osds.get(id) {
                osd.store()
                    .clear_log_damage()
                    .map_err(|source| ClusterError::Store { osd: *id, source })?;
            }
        }
        let reserved = state.version_reserved;
        let device_errors = osds.keys().map(|&id| (id, AtomicU32::new(0))).collect();
        let scrub_errors = scrub::recorded_errors(&data_dir);
        // A cluster that stopped may have stopped in the middle of writes: its PGs peer
        // before they serve. A new one has nothing to peer.
        let peering = match fresh {
            Fresh::All => peering::Peering::default(),
            Fresh::Only(_) => peering::Peering::all_of(&map),
        };
        let map = Arc::new(map);
        let poller = options
            .poll_while_busy
            .then(|| Arc::new(poll::Poller::default()));
        let stats = stats::Stats::new(config.access_objects_max, (options.clock_ns)());
        stats.set_scrub_errors(scrub_errors);
        let inner = Arc::new(Inner {
            stats,
            data_dir,
            config: RwLock::new(Arc::new(config)),
            placed: RwLock::new(Arc::new(placed)),
            protected_pools: Mutex::new(BTreeMap::new()),
            options,
            osds,
            device_errors,
            state: Mutex::new(state),
            placements: Mutex::new(PlacementCache {
                map: Arc::clone(&map),
                entries: HashMap::new(),
            }),
            map: RwLock::new(map),
            pg_locks: (0..PG_LOCK_SHARDS)
                .map(|_| tokio::sync::RwLock::new(()))
                .collect(),
            object_locks: (0..OBJECT_LOCK_SHARDS)
                .map(|_| tokio::sync::Mutex::new(()))
                .collect(),
            next_version: AtomicU64::new(next_version.max(1)),
            version_reserved: AtomicU64::new(reserved),
            closed: AtomicBool::new(false),
            dirty_pgs: Mutex::new(BTreeSet::new()),
            recovery: recovery::RecoveryProgress::default(),
            recovery_wakeup: tokio::sync::Notify::new(),
            peering,
            poller,
        });
        // The full level of every OSD, known before the first write (see `full`).
        inner.full_state();
        let mut tasks = Vec::new();
        if let Some(poller) = &inner.poller {
            tasks.push(tokio::spawn(Arc::clone(poller).run()));
        }
        if inner.options.background {
            tasks.push(tokio::spawn(recovery::run(Arc::clone(&inner))));
            if inner.config().scrub_interval_s > 0 {
                tasks.push(tokio::spawn(scrub::run(Arc::clone(&inner))));
            }
            inner.recovery_wakeup.notify_one();
        }
        Ok(Cluster {
            inner,
            tasks: Tasks(tasks),
        })
    }

    /// Stops background tasks and shuts every store down (queued commits complete).
    pub async fn shutdown(mut self) -> Result<()> {
        // Pool handles hold the cluster weakly: they fail with `Shutdown` from now on.
        self.inner.closed.store(true, Ordering::Release);
        for task in self.tasks.0.drain(..) {
            task.abort();
            let _ = task.await;
        }
        // Operations in flight hold the cluster for their duration; wait for them.
        let mut shared = self.inner;
        let inner = loop {
            match Arc::try_unwrap(shared) {
                Ok(inner) => break inner,
                Err(again) => {
                    shared = again;
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                }
            }
        };
        let mut first_error = None;
        for (_, osd) in inner.osds {
            if let Err(error) = osd.shutdown().await {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// The configuration, as `cluster.toml` holds it now (online changes replace it).
    pub fn config(&self) -> Arc<ClusterConfig> {
        self.inner.config()
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.inner.data_dir
    }

    /// The current map epoch.
    pub fn epoch(&self) -> u64 {
        self.inner.lock_state().epoch
    }

    /// A copy of the persisted state.
    pub fn state(&self) -> ClusterState {
        self.inner.lock_state().clone()
    }

    /// The current OSD map (CRUSH, pools, states, upmaps, pg_temp).
    pub fn osd_map(&self) -> Arc<OsdMap> {
        self.inner.map()
    }

    /// An OSD, to inspect its store in tests and tools.
    pub fn osd(&self, id: i32) -> Option<&Osd> {
        self.inner.osds.get(&id)
    }

    /// The group commit of every OSD's store, summed (benchmarks report writes per flush).
    pub fn commit_stats(&self) -> store::CommitStats {
        self.inner
            .osds
            .values()
            .map(|osd| osd.store().commit_stats())
            .sum()
    }

    /// The data cache of every OSD's store, summed (benchmarks report the reads it served).
    pub fn data_cache_stats(&self) -> store::DataCacheStats {
        self.inner
            .osds
            .values()
            .map(|osd| osd.store().data_cache_stats())
            .sum()
    }

    /// Where an object of `pool` lives now.
    pub fn locate(&self, pool: &str, object: &str) -> Result<Placement> {
        let info = self.inner.pool_info(pool)?;
        let map = self.inner.map();
        let pg = map
            .object_to_pg(info.id, object)
            .map_err(|e| RadosError::NotFound(e.to_string()))?;
        Ok(placement(&map, pg))
    }

    /// The PG collection name of an object (`1.1f`), as stores name it.
    pub fn collection_of(&self, pool: &str, object: &str) -> Result<String> {
        Ok(util::collection_name(self.locate(pool, object)?.pg))
    }

    /// Marks an OSD down: it serves nothing; its PGs continue on the other replicas.
    pub fn mark_down(&self, osd: i32) -> Result<u64> {
        self.set_osd(osd, |state| state.up = false)
    }

    /// Marks an OSD up: recovery brings its copies up to date before it serves them.
    pub fn mark_up(&self, osd: i32) -> Result<u64> {
        self.set_osd(osd, |state| state.up = true)
    }

    /// Marks an OSD out: CRUSH moves its PGs elsewhere; recovery copies the data.
    pub fn mark_out(&self, osd: i32) -> Result<u64> {
        self.set_osd(osd, |state| state.is_in = false)
    }

    /// Marks an OSD in: CRUSH places PGs on it again; recovery moves the data back.
    /// Its override weight goes back to 1.0 ([`Cluster::reweight`]), as Ceph's `osd in`.
    pub fn mark_in(&self, osd: i32) -> Result<u64> {
        self.set_osd(osd, |state| {
            state.is_in = true;
            state.weight = osdmap::map::WEIGHT_IN;
        })
    }

    /// Sets (or clears with an empty list) the `pg_upmap_items` of a PG, as
    /// `ceph osd pg-upmap-items` does. Every target must be an OSD of the cluster.
    pub fn set_pg_upmap_items(&self, pg: PgId, items: Vec<(i32, i32)>) -> Result<u64> {
        for &(from, to) in &items {
            if !self.inner.osds.contains_key(&from) || !self.inner.osds.contains_key(&to) {
                return Err(RadosError::InvalidArgument(format!(
                    "upmap item {from}->{to}: no such OSD"
                ))
                .into());
            }
        }
        self.inner.change_map(|state| {
            if !state.pools.contains_key(&pg.pool) {
                return Err(RadosError::NotFound(format!("pool {}", pg.pool)).into());
            }
            state.set_pg_upmap_items(pg, Some(items));
            Ok(())
        })
    }

    /// Applies several PGs' `pg_upmap_items` changes (`None` or an empty list clears a PG's)
    /// in one map change, so a balancer's period costs one epoch and recovery sees every move
    /// at once; returns the new epoch. Nothing changes when one of them is refused.
    pub fn set_pg_upmap_items_many(&self, changes: Vec<UpmapItemsChange>) -> Result<u64> {
        for &(from, to) in changes.iter().flat_map(|(_, items)| items.iter().flatten()) {
            if !self.inner.osds.contains_key(&from) || !self.inner.osds.contains_key(&to) {
                return Err(RadosError::InvalidArgument(format!(
                    "upmap item {from}->{to}: no such OSD"
                ))
                .into());
            }
        }
        self.inner.change_map(|state| {
            for (pg, items) in changes {
                if !state.pools.contains_key(&pg.pool) {
                    return Err(RadosError::NotFound(format!("pool {}", pg.pool)).into());
                }
                state.set_pg_upmap_items(pg, items);
            }
            Ok(())
        })
    }

    /// Sets (`Some`) or clears (`None`) several PGs' full `pg_upmap` in one map change, as
    /// `ceph osd pg-upmap` / `rm-pg-upmap` do; returns the new epoch. A new set must have the
    /// pool's size in distinct OSDs of the cluster; nothing changes when one is refused.
    pub fn set_pg_upmap_many(&self, changes: Vec<(PgId, Option<Vec<i32>>)>) -> Result<u64> {
        for (pg, osds) in &changes {
            let Some(osds) = osds else { continue };
            let distinct: BTreeSet<i32> = osds.iter().copied().collect();
            if distinct.len() != osds.len() || osds.iter().any(|o| !self.inner.osds.contains_key(o))
            {
                return Err(RadosError::InvalidArgument(format!(
                    "pg_upmap {pg:?} {osds:?}: repeated or unknown OSD"
                ))
                .into());
            }
        }
        self.inner.change_map(|state| {
            for (pg, osds) in changes {
                let pool = state
                    .pools
                    .get(&pg.pool)
                    .ok_or_else(|| RadosError::NotFound(format!("pool {}", pg.pool)))?;
                if osds.as_ref().is_some_and(|o| o.len() != pool.size as usize) {
                    return Err(RadosError::InvalidArgument(format!(
                        "pg_upmap of pool {}: {} OSDs for size {}",
                        pg.pool,
                        osds.as_ref().map_or(0, Vec::len),
                        pool.size
                    ))
                    .into());
                }
                state.set_pg_upmap(pg, osds);
            }
            Ok(())
        })
    }

    fn set_osd(&self, osd: i32, change: impl FnOnce(&mut state::OsdState)) -> Result<u64> {
        self.inner.change_map(|state| {
            let entry = state
                .osds
                .get_mut(&osd)
                .ok_or_else(|| RadosError::NotFound(format!("osd.{osd}")))?;
            change(entry);
            Ok(())
        })
    }

    /// Runs recovery passes until every PG is clean (or `passes_max` passes were made);
    /// returns whether the cluster is clean.
    pub async fn recover(&self, passes_max: usize) -> Result<bool> {
        for _ in 0..passes_max {
            if recovery::recover_once(&self.inner).await? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Objects no replica can provide (Ceph's `OBJECT_UNFOUND`), found by recovery or scrub.
    pub fn unfound_objects(&self) -> Vec<UnfoundObject> {
        let unfound = self.inner.peering.lock_unfound();
        unfound
            .iter()
            .flat_map(|(pg, objects)| {
                objects.iter().map(|(object, version)| UnfoundObject {
                    pg: util::collection_name(*pg),
                    object: object.clone(),
                    version: *version,
                })
            })
            .collect()
    }

    /// Every PG: sets, state, unfound objects (`strata pg ls`).
    pub fn pg_list(&self) -> Vec<PgInfo> {
        peering::pg_list(&self.inner)
    }

    /// Resolves the unfound objects of PG `pg` (`1.1f`), as `ceph pg PGID
    /// mark_unfound_lost`; returns how many were resolved.
    pub async fn mark_unfound_lost(&self, pg: &str, how: UnfoundResolution) -> Result<u64> {
        let id = util::parse_collection(pg)
            .filter(|id| {
                self.inner
                    .map()
                    .pool(id.pool)
                    .is_some_and(|pool| id.seed < pool.pg_num)
            })
            .ok_or_else(|| RadosError::NotFound(format!("pg {pg:?}")))?;
        peering::mark_unfound_lost(&self.inner, id, how).await
    }

    /// PGs that have yet to peer since the start (they peer in the background, or when a
    /// client first touches them).
    pub fn pgs_peering(&self) -> usize {
        self.inner.peering.pending_pgs().len()
    }

    /// Every OSD's and pool's full level (nearfull, backfillfull, full), read from the
    /// stores now (see [`full`]).
    pub fn full_state(&self) -> full::FullState {
        self.inner.full_state()
    }

    /// The PGs whose backfill waits because a new member is past `backfillfull_ratio`.
    pub fn backfill_toofull(&self) -> Vec<PgId> {
        self.inner.recovery.backfill_toofull()
    }

    /// Recovery counters.
    pub fn recovery_progress(&self) -> recovery::RecoverySnapshot {
        self.inner.recovery.snapshot()
    }

    /// Deep-scrubs every PG of `pool` (all pools with `None`), repairing what it finds when
    /// `repair` is set.
    pub async fn scrub(&self, pool: Option<&str>, repair: bool) -> Result<ScrubReport> {
        let report = scrub::scrub(&self.inner, pool, repair).await?;
        scrub::record_errors(&self.inner, &report);
        Ok(report)
    }

    /// Bad copies the last [`Cluster::scrub`] left unrepaired plus the objects it found lost
    /// (0 until a scrub finds some; what `strata status` reports as scrub errors).
    pub fn scrub_errors(&self) -> u64 {
        self.inner.stats.scrub_errors()
    }

    /// Per-OSD statistics (cumulative since open; diff two snapshots for a period).
    pub fn osd_stats(&self) -> Vec<OsdStats> {
        stats::osd_stats(&self.inner)
    }

    /// Per-object access counts since the last call (a period), and resets them.
    pub fn take_access_counts(&self) -> AccessCounts {
        self.inner.stats.take_access_counts()
    }

    /// Replica reads that failed (checksum or device error) since open, whether or not
    /// another replica served the request.
    pub fn replica_read_errors(&self) -> u64 {
        self.inner.stats.replica_read_errors()
    }

    /// Ends a statistics period: per-OSD load since the previous call (since open for the
    /// first) and per-object access counts of the period, whose table it empties. The caller
    /// sets the rhythm (the server calls it every `stats_period_s`); the result is also kept
    /// for [`Cluster::last_stats_period`].
    pub fn take_stats_period(&self) -> Arc<stats::StatsPeriod> {
        stats::take_period(&self.inner)
    }

    /// Refuses deleting pool `name` from now on, naming `user` (what keeps data there) in the
    /// error: the server protects the S3 gateway's pools while it serves S3, since deleting
    /// the index pool turned every key into NoSuchKey and every data object into an orphan.
    pub fn protect_pool(&self, name: &str, user: &str) {
        self.inner
            .protected_pools
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_string(), user.to_string());
    }

    /// The last period [`Cluster::take_stats_period`] ended, if any.
    pub fn last_stats_period(&self) -> Option<Arc<stats::StatsPeriod>> {
        stats::last_period(&self.inner)
    }

    /// A pool handle (the concrete type behind [`rados::Rados::io_ctx`]).
    pub fn pool(&self, name: &str) -> Result<PoolHandle> {
        let info = self.inner.pool_info(name)?;
        Ok(PoolHandle::new(Arc::clone(&self.inner), info))
    }
}

/// Background tasks, aborted when the cluster handle goes away.
struct Tasks(Vec<tokio::task::JoinHandle<()>>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// Adds a pool to the state (parameters already validated).
fn add_pool(
    state: &mut ClusterState,
    name: &str,
    size: u32,
    min_size: u32,
    pg_num: u32,
    class: Option<String>,
) -> PoolInfo {
    let rule = class
        .as_deref()
        .map_or_else(|| config::RULE_ANY.to_string(), config::class_rule_name);
    let id = state.next_pool_id;
    state.next_pool_id += 1;
    state.pools.insert(
        id,
        state::PoolState {
            id,
            name: name.to_string(),
            size,
            min_size,
            pg_num,
            rule: rule.clone(),
            erasure: None,
            quota_max_bytes: 0,
            quota_max_objects: 0,
        },
    );
    PoolInfo {
        id,
        name: name.to_string(),
        size,
        min_size,
        pg_num,
        crush_rule: rule,
        device_class: class,
        erasure_coded: false,
    }
}

/// Which OSD stores [`Cluster::start`] creates.
enum Fresh {
    /// Every one (a new cluster).
    All,
    /// These (OSDs added to an existing cluster or started empty).
    Only(BTreeSet<i32>),
}

/// Keeps a PG on the OSDs that hold its data when a change moves it: sets its `pg_temp` in
/// `next` to its acting set in `old_map` unless that set already covers its up set in
/// `new_map` (a map of `next` without the pg_temp this sets), and clears it otherwise.
/// `empty` OSDs (stores created just now) hold nothing, whatever `old_map` says.
fn hold_moved_pg(
    old_map: &OsdMap,
    new_map: &OsdMap,
    pg: PgId,
    empty: &BTreeSet<i32>,
    next: &mut ClusterState,
) {
    let old = placement(old_map, pg);
    let holding: Vec<i32> = old
        .acting
        .iter()
        .copied()
        .filter(|osd| !empty.contains(osd))
        .collect();
    let holders: Vec<i32> = if holding.is_empty() {
        old_map
            .pg_temp()
            .get(&pg)
            .cloned()
            .unwrap_or_else(|| old_map.pg_to_raw_upmap(pg))
            .into_iter()
            .filter(|osd| !empty.contains(osd))
            .collect()
    } else {
        holding.clone()
    };
    // The up set the PG would have without any pg_temp.
    let up = new_map.pg_to_up_acting(pg).up;
    let covered = !up.is_empty() && up.iter().all(|osd| holding.contains(osd));
    let temp = if covered {
        settled_pg_temp(new_map, pg, &up, &holding)
    } else {
        (!holders.is_empty()).then_some(holders)
    };
    next.set_pg_temp(pg, temp);
}

/// The `pg_temp` a PG keeps once its up set holds its data: none when CRUSH found a full up
/// set; else, as Ceph's `choose_acting` does, the up set followed by other up OSDs of
/// `holders` (OSDs holding the data) up to the pool's size. Without it, a PG whose rule finds
/// fewer OSDs than the pool's size (a host's only OSD of a class out, an extreme weight)
/// would drop the copies that are not in its up set, and its redundancy with them.
pub(crate) fn settled_pg_temp(
    map: &OsdMap,
    pg: PgId,
    up: &[i32],
    holders: &[i32],
) -> Option<Vec<i32>> {
    let size = map.pool(pg.pool)?.size as usize;
    let mut acting = up.to_vec();
    for &osd in holders {
        if acting.len() >= size {
            break;
        }
        if map.is_up(osd) && !acting.contains(&osd) {
            acting.push(osd);
        }
    }
    (acting.len() > up.len()).then_some(acting)
}

/// Whether a PG's placement needs no recovery: its up set holds the data and its `pg_temp`
/// (if any) is the one [`settled_pg_temp`] keeps.
pub(crate) fn is_settled(map: &OsdMap, pg: PgId) -> bool {
    let place = placement(map, pg);
    place.up.iter().all(|osd| place.acting.contains(osd))
        && map.pg_temp().get(&pg) == settled_pg_temp(map, pg, &place.up, &place.acting).as_ref()
}

/// `config` with a weight for every OSD that has none: its device's size in TiB (Ceph's
/// convention), the device's real size ([`osd::device_size_bytes`]; `creating(id)`: the
/// OSD's store is about to be created). The size written in the config used to decide, so an
/// OSD whose spec gave none weighed 1 TiB whatever its file held. Fails for an existing
/// store whose configured size differs from its device's.
fn weighed(
    config: &ClusterConfig,
    data_dir: &Path,
    creating: impl Fn(i32) -> bool,
) -> Result<ClusterConfig> {
    let mut placed = config.clone();
    for osd in &mut placed.osds {
        let size = osd::device_size_bytes(osd, data_dir, creating(osd.id))?;
        if osd.weight.is_none() {
            osd.weight = size.map(|bytes| bytes as f64 / (1u64 << 40) as f64);
        }
    }
    Ok(placed)
}

/// Brings a state read from `state.json` in line with `cluster.toml` as it is now. When the
/// file's hosts or OSDs changed since placement was last computed (an OSD added, a weight,
/// class or host edited), the PGs that move keep their old holders as `pg_temp`, in a new
/// epoch, so that reads find their data and recovery copies it before anything is removed.
/// An OSD may leave the file only once it is out and no recovery needs it. The `fresh` OSDs
/// (stores about to be created) hold nothing: their PGs keep the other holders likewise.
fn adopt_config(
    mut state: ClusterState,
    config: &ClusterConfig,
    fresh: &BTreeSet<i32>,
) -> Result<ClusterState> {
    let now = state::Topology::of(config);
    let before = state.topology.clone().unwrap_or_else(|| now.clone());
    if before == now && fresh.is_empty() {
        state.reconcile(config);
        state.topology = Some(now);
        return Ok(state);
    }
    for osd in before.osds.iter().filter(|osd| !now.has_osd(osd.id)) {
        let id = osd.id;
        let is_in = state.osds.get(&id).is_some_and(|osd| osd.is_in);
        let needed = state.pg_temp.iter().any(|entry| entry.value.contains(&id));
        if is_in || needed {
            let why = if is_in {
                "it is still in"
            } else {
                "recovery still reads from it"
            };
            return Err(ClusterError::Config(format!(
                "osd.{id} was removed from cluster.toml, but {why}: put it back, mark it out \
                 (`strata osd out {id}`), wait until `strata status` reports no recovery \
                 pending, then remove it"
            )));
        }
    }
    let old_map = state.clone().build_map(&before.apply_to(config))?;
    let mut next = state.clone();
    next.reconcile(config);
    next.topology = Some(now);
    next.epoch += 1;
    let new_map = next.clone().build_map(config)?;
    for pool in old_map
        .pools()
        .values()
        .filter(|pool| pool.can_shift_osds())
    {
        for pg in pool.pgs() {
            hold_moved_pg(&old_map, &new_map, pg, fresh, &mut next);
        }
    }
    Ok(next)
}

/// The placement of a PG in a map: up set, and acting set (`pg_temp` members that are up,
/// or the up set). Unlike Ceph's mapping, a `pg_temp` whose members are all down leaves the
/// acting set empty (the data is unavailable) rather than falling back to the up set.
pub fn placement(map: &OsdMap, pg: PgId) -> Placement {
    let mapping = map.pg_to_up_acting(pg);
    let acting = match map.pg_temp().get(&pg) {
        Some(temp) => temp.iter().copied().filter(|&osd| map.is_up(osd)).collect(),
        None => mapping.up.clone(),
    };
    Placement {
        pg,
        up: mapping.up,
        acting,
    }
}

/// The placements of the PGs clients used, all computed from `map`: CRUSH and upmaps cost
/// 3.5% of the CPU of a cluster writing 4 KiB objects when computed per operation, as a
/// librados client does. Ceph's OSDs cache the same (`OSDMapMapping`).
struct PlacementCache {
    map: Arc<OsdMap>,
    entries: HashMap<PgId, Placement>,
}

impl Inner {
    /// `placement(map, pg)`, remembered for the newest map seen. Entries only ever come from
    /// the map they are kept with (checked by pointer), so a map replaced while a caller
    /// still holds the old one is never mixed with it; an older map is computed uncached.
    pub(crate) fn placement_cached(&self, map: &Arc<OsdMap>, pg: PgId) -> Placement {
        let mut cache = self.placements.lock().unwrap_or_else(|e| e.into_inner());
        if !Arc::ptr_eq(&cache.map, map) {
            if map.epoch() < cache.map.epoch() {
                drop(cache);
                return placement(map, pg);
            }
            cache.map = Arc::clone(map);
            cache.entries.clear();
        }
        cache
            .entries
            .entry(pg)
            .or_insert_with(|| placement(map, pg))
            .clone()
    }

    /// Takes `failed` OSDs out of a PG's acting set (a `pg_temp` of the others, computed
    /// from the map as it is when the change is made) after they failed a write the others
    /// committed. Recovery copies the PG to them, since they stay in its up set.
    pub(crate) fn exclude_from_acting(&self, pg: PgId, failed: &[i32]) -> Result<()> {
        // Nothing to take out (an earlier failure already did), or nobody left to serve: no
        // new epoch to persist.
        let current = placement(&self.map(), pg).acting;
        let remaining = current.iter().filter(|osd| !failed.contains(osd)).count();
        if remaining == 0 || remaining == current.len() {
            return Ok(());
        }
        self.change_map(|state| {
            let place = placement(&self.map(), pg);
            let acting: Vec<i32> = place
                .acting
                .iter()
                .copied()
                .filter(|osd| !failed.contains(osd))
                .collect();
            if !acting.is_empty() && acting != place.acting {
                state.set_pg_temp(pg, Some(acting));
            }
            Ok(())
        })?;
        Ok(())
    }

    /// Counts an OSD's device failures: a success clears its count; `osd_device_errors_max`
    /// failures in a row, or one failed flush (a poisoned store cannot know what reached its
    /// media), mark it down and out, as Ceph does when an OSD's disk fails, so CRUSH places
    /// its PGs elsewhere and recovery re-replicates them. Not-found and checksum errors are
    /// about one object, not the device, and do not count.
    pub(crate) fn note_osd_result<T>(
        &self,
        osd: i32,
        result: &std::result::Result<T, store::StoreError>,
    ) {
        let Some(count) = self.device_errors.get(&osd) else {
            return;
        };
        let error = match result {
            Ok(_) => {
                count.store(0, Ordering::Relaxed);
                return;
            }
            Err(error) => error,
        };
        let poisoned = matches!(error, store::StoreError::Poisoned);
        if !poisoned
            && !matches!(
                error,
                store::StoreError::Device(_) | store::StoreError::Metadata(_)
            )
        {
            return;
        }
        let errors = count.fetch_add(1, Ordering::Relaxed) + 1;
        let limit = self.config().osd_device_errors_max;
        if limit == 0 || (!poisoned && errors < limit) {
            return;
        }
        count.store(0, Ordering::Relaxed);
        let already = self
            .lock_state()
            .osds
            .get(&osd)
            .is_none_or(|state| !state.up && !state.is_in);
        if already {
            return;
        }
        match self.change_map(|state| {
            if let Some(entry) = state.osds.get_mut(&osd) {
                entry.up = false;
                entry.is_in = false;
            }
            Ok(())
        }) {
            Ok(epoch) => tracing::error!(
                osd,
                errors,
                %error,
                epoch,
                "OSD device failing: marked down and out; recovery re-replicates its PGs"
            ),
            Err(change) => {
                tracing::error!(osd, %error, %change, "could not mark a failing OSD down")
            }
        }
    }

    fn lock_state(&self) -> std::sync::MutexGuard<'_, ClusterState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `cluster.toml` as it is now.
    pub(crate) fn config(&self) -> Arc<ClusterConfig> {
        Arc::clone(&self.config.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// The config placement is built from (every OSD weighted).
    fn placed(&self) -> Arc<ClusterConfig> {
        Arc::clone(&self.placed.read().unwrap_or_else(|e| e.into_inner()))
    }

    fn map(&self) -> Arc<OsdMap> {
        Arc::clone(&self.map.read().unwrap_or_else(|e| e.into_inner()))
    }

    fn check_open(&self) -> rados::Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(RadosError::Shutdown);
        }
        Ok(())
    }

    fn pg_lock(&self, pg: PgId) -> &tokio::sync::RwLock<()> {
        let key = (pg.pool as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ u64::from(pg.seed);
        let shard = (key.wrapping_mul(0xff51_afd7_ed55_8ccd) >> 32) as usize % PG_LOCK_SHARDS;
        &self.pg_locks[shard]
    }

    /// The lock serializing writes to `object` of pool `pool` (FNV-1a of the name, mixed
    /// with the pool id).
    fn object_lock(&self, pool: i64, object: &str) -> &tokio::sync::Mutex<()> {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325 ^ (pool as u64);
        for byte in object.bytes() {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
        let shard = (hash.wrapping_mul(0xff51_afd7_ed55_8ccd) >> 32) as usize % OBJECT_LOCK_SHARDS;
        &self.object_locks[shard]
    }

    fn pool_info(&self, name: &str) -> rados::Result<PoolInfo> {
        let state = self.lock_state();
        let pool = state
            .pool_by_name(name)
            .ok_or_else(|| RadosError::NotFound(format!("pool {name:?}")))?;
        let class = state
            .rules
            .iter()
            .find(|rule| rule.name == pool.rule)
            .and_then(|rule| rule.class.clone());
        Ok(PoolInfo {
            id: pool.id,
            name: pool.name.clone(),
            size: pool.size,
            min_size: pool.min_size,
            pg_num: pool.pg_num,
            crush_rule: pool.rule.clone(),
            device_class: class,
            erasure_coded: pool.erasure.is_some(),
        })
    }

    /// A new object version, reserving (and persisting) more when the lease runs out.
    fn new_version(&self) -> rados::Result<u64> {
        let version = self.next_version.fetch_add(1, Ordering::AcqRel);
        if version < self.version_reserved.load(Ordering::Acquire) {
            return Ok(version);
        }
        let mut state = self.lock_state();
        if version >= state.version_reserved {
            state.version_reserved = version + state::VERSION_LEASE;
            state
                .save(&self.data_dir.join(STATE_FILE))
                .map_err(RadosError::from)?;
            self.version_reserved
                .store(state.version_reserved, Ordering::Release);
        }
        Ok(version)
    }

    /// Applies a state change: new epoch, `pg_temp` for PGs whose new up set holds OSDs
    /// without their latest data, persisted, then published. Returns the new epoch.
    fn change_map(&self, mutate: impl FnOnce(&mut ClusterState) -> Result<()>) -> Result<u64> {
        self.change_map_with(None, |state, _| mutate(state))
    }

    /// [`Inner::change_map`], and when `edit` is given, a change of `cluster.toml`'s hosts or
    /// OSDs too: `edit` is applied to the config and to the placed config (under the state
    /// lock, so two changes never lose one another), the state's rules and topology follow
    /// it, `cluster.toml` is replaced atomically before `state.json` (a crash between the two
    /// is what an edit of the file before a restart is: the start adopts it), and both
    /// configs are swapped in before the new map is published. `mutate` sees the new
    /// placed config.
    pub(crate) fn change_map_with(
        &self,
        edit: Option<&ConfigEdit<'_>>,
        mutate: impl FnOnce(&mut ClusterState, &ClusterConfig) -> Result<()>,
    ) -> Result<u64> {
        let mut state = self.lock_state();
        let old_map = self.map();
        let mut configs = None;
        let placed = match edit {
            None => self.placed(),
            Some(edit) => {
                let mut config = (*self.config()).clone();
                let mut placed = (*self.placed()).clone();
                edit(&mut config)?;
                edit(&mut placed)?;
                config.validate()?;
                let placed = Arc::new(placed);
                configs = Some((Arc::new(config), Arc::clone(&placed)));
                placed
            }
        };
        let mut next = state.clone();
        if configs.is_some() {
            next.reconcile(&placed);
            next.topology = Some(state::Topology::of(&placed));
        }
        mutate(&mut next, &placed)?;
        next.epoch += 1;
        let mut probe = next.clone();
        let probe_map = probe.build_map(&placed)?;
        let mut ec_moved = Vec::new();
        for pool in old_map.pools().values() {
            if !next.pools.contains_key(&pool.id) {
                continue;
            }
            if !pool.can_shift_osds() {
                // Erasure-coded: shards keep their positions, no pg_temp; a PG whose up set
                // changes is queued for recovery, which rebuilds the shards it lacks.
                ec_moved.extend(pool.pgs().filter(|&pg| {
                    old_map.pg_to_up_acting(pg).up != probe_map.pg_to_up_acting(pg).up
                }));
                continue;
            }
            for pg in pool.pgs() {
                if state.pg_temp_of(pg) != next.pg_temp_of(pg) {
                    continue; // the change set this PG's pg_temp itself (recovery cleared it)
                }
                hold_moved_pg(&old_map, &probe_map, pg, &BTreeSet::new(), &mut next);
            }
        }
        let map = next.build_map(&placed)?;
        if let Some((config, _)) = &configs {
            membership::replace_file(
                &self.data_dir.join(CONFIG_FILE),
                config.to_toml().as_bytes(),
            )?;
        }
        next.save(&self.data_dir.join(STATE_FILE))?;
        let epoch = next.epoch;
        *state = next;
        if let Some((config, placed)) = configs {
            *self.config.write().unwrap_or_else(|e| e.into_inner()) = config;
            *self.placed.write().unwrap_or_else(|e| e.into_inner()) = placed;
        }
        *self.map.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(map);
        drop(state);
        self.lock_dirty().extend(ec_moved);
        self.recovery_wakeup.notify_one();
        Ok(epoch)
    }

    fn create_pool(&self, spec: PoolSpec) -> rados::Result<PoolInfo> {
        let pool = PoolConfig {
            name: spec.name.clone(),
            size: spec.size,
            min_size: spec.min_size,
            pg_num: spec.pg_num,
            device_class: spec.device_class.clone(),
            crush_rule: spec.crush_rule.clone(),
            erasure: None,
        };
        let config = self.config();
        config.validate_pool(&pool)?;
        let class = config.pool_class(&pool)?;
        let mut info = None;
        self.change_map(|state| {
            if state.pool_by_name(&spec.name).is_some() {
                return Err(RadosError::Exists(format!("pool {:?}", spec.name)).into());
            }
            info = Some(add_pool(
                state,
                &spec.name,
                spec.size,
                pool.effective_min_size(),
                spec.pg_num,
                class,
            ));
            Ok(())
        })?;
        info.ok_or_else(|| RadosError::Io("pool creation lost".into()))
    }

    fn delete_pool(&self, name: &str) -> rados::Result<()> {
        let protected = self
            .protected_pools
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(user) = protected.get(name) {
            return Err(RadosError::InvalidArgument(format!(
                "pool {name:?} is in use by {user}: deleting it would lose what {user} keeps \
                 there; refused (as Ceph's nodelete flag does)"
            )));
        }
        drop(protected);
        self.change_map(|state| {
            let id = state
                .pool_by_name(name)
                .map(|pool| pool.id)
                .ok_or_else(|| RadosError::NotFound(format!("pool {name:?}")))?;
            state.pools.remove(&id);
            state.pg_temp.retain(|entry| entry.pool != id);
            state.pg_upmap_items.retain(|entry| entry.pool != id);
            state.pg_upmap.retain(|entry| entry.pool != id);
            Ok(())
        })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cached placement of every PG equals the one computed from the current map, after
    /// each map change (down, out, in), and an older map is never mixed into the cache.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cached_placements_follow_the_map() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = ClusterConfig::empty();
        config.scrub_interval_s = 0;
        for host in 0..3 {
            let name = format!("host{host}");
            config.hosts.push(HostConfig { name: name.clone() });
            for slot in 0..2 {
                config.osds.push(OsdConfig {
                    id: host * 2 + slot,
                    host: name.clone(),
                    device: "mem:16M".into(),
                    size: None,
                    class: "ssd".into(),
                    weight: Some(1.0),
                    min_alloc_size: 4096,
                    emulation: None,
                    data_cache_size: None,
                });
            }
        }
        config.pools.push(PoolConfig {
            name: "data".into(),
            size: 2,
            min_size: Some(1),
            pg_num: 32,
            device_class: None,
            crush_rule: None,
            erasure: None,
        });
        let options = ClusterOptions {
            background: false,
            ..ClusterOptions::default()
        };
        let cluster = Cluster::create(dir.path(), config, options).await.unwrap();
        let inner = &cluster.inner;
        let pool = inner.pool_info("data").unwrap().id;
        let check = |when: &str| {
            let map = inner.map();
            for seed in 0..32 {
                let pg = PgId::new(pool, seed);
                assert_eq!(
                    inner.placement_cached(&map, pg),
                    placement(&map, pg),
                    "{when}: pg {pg}"
                );
            }
            map
        };
        let first = check("fresh");
        cluster.mark_down(0).unwrap();
        let down = check("osd.0 down");
        assert_ne!(
            (0..32)
                .map(|seed| placement(&first, PgId::new(pool, seed)).acting)
                .collect::<Vec<_>>(),
            (0..32)
                .map(|seed| placement(&down, PgId::new(pool, seed)).acting)
                .collect::<Vec<_>>(),
            "marking an OSD down changes some placement"
        );
        // A caller still holding the first map gets that map's placements, uncached.
        for seed in 0..32 {
            let pg = PgId::new(pool, seed);
            assert_eq!(inner.placement_cached(&first, pg), placement(&first, pg));
        }
        check("after a lookup with an older map");
        cluster.mark_out(0).unwrap();
        check("osd.0 out");
        cluster.mark_in(0).unwrap();
        check("osd.0 in");
    }
}
