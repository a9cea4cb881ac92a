//! The gateway's state in the cluster: buckets, index entries, data pieces, uploads, GC.
//!
//! Everything S3-specific (headers, XML, auth) stays in [`crate::service`]; this module speaks
//! only records ([`crate::layout`]) and byte streams. One file per role: [`buckets`] (bucket
//! records), [`index`] (a key's plain index entry and the guarded read-modify-write of an
//! omap value), [`index_batch`] (index writes to one shard combined into one write),
//! [`versions`] (a key's versions, planned by [`crate::versioning`]), [`data`]
//! (data pieces: a body written, extents of it read), [`gc`] (replaced data and the GC
//! queue), [`orphans`] (write intents and orphan collection), [`pack`] (small PUTs grouped
//! into pack objects), [`pack_gc`] (dead pack ranges logged, packs rewritten) and
//! [`packed_entry`] (the short index entry of a packed object).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rados::{IoCtx, PoolSpec, Rados, RadosError};
use rand::{Rng, SeedableRng};

use crate::cache::RecordCache;
use crate::error::{GatewayError, Result};
use crate::layout::{self, BucketRecord, ObjectEntry};
use crate::GatewayConfig;

mod buckets;
#[cfg(test)]
mod copies_tests;
mod data;
mod gc;
mod index;
mod index_batch;
mod orphans;
mod pack;
mod pack_close;
mod pack_gc;
#[cfg(test)]
mod pack_tests;
pub(crate) mod packed_entry;
mod versions;

pub use data::Body;
pub use gc::{gc_wait_s, GcBacklog};
pub use index::{DeleteCondition, WriteCondition};
pub(crate) use index::{OmapChange, Unversioned};

pub(crate) use orphans::Intent;
pub use orphans::{OrphanReport, ORPHAN_GRACE_S_MIN};
pub use pack::placement_group;
pub use pack_gc::{PackGcReport, PackGcStatus};

/// Counters of one gateway process (observable; tests read them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GatewayStats {
    /// Data objects removed because an overwrite, delete or abort made them unreachable.
    pub pieces_removed: u64,
    /// Data objects whose removal failed and went to the GC queue.
    pub gc_enqueued: u64,
    /// Data objects an overwrite or delete replaced, queued to be removed after
    /// `gc_min_wait_s`.
    pub pieces_retired: u64,
    /// Data objects the GC pass removed from the queue.
    pub gc_reclaimed: u64,
    /// Index commits that lost a race with another gateway (the entry changed between the
    /// read and the guarded write) and were decided again.
    pub index_races: u64,
    /// Unreferenced data objects orphan collection removed or queued for removal.
    pub orphans_removed: u64,
    /// Pack objects written (small-object packing).
    pub packs_written: u64,
    /// Objects written into packs.
    pub objects_packed: u64,
    /// Dead pack ranges logged (deletes and overwrites of packed objects).
    pub pack_ranges_logged: u64,
    /// Packs the pack GC rewrote.
    pub packs_rewritten: u64,
    /// Dead bytes of the packs the pack GC rewrote.
    pub pack_bytes_reclaimed: u64,
    /// Packs written because their group reached `group_count_max` objects.
    pub packs_closed_count: u64,
    /// Packs written because their group reached `group_bytes_max` bytes.
    pub packs_closed_bytes: u64,
    /// Packs written because no other PUT was on its way to their group
    /// (`adaptive_close`).
    pub packs_closed_idle: u64,
    /// Packs written because their group reached `group_wait_us`.
    pub packs_closed_wait: u64,
    /// The time packed objects spent in their group before it closed, summed, in ns.
    pub pack_member_wait_ns: u64,
    /// The time pack writes took, summed, in ns.
    pub pack_write_ns: u64,
    /// Write intents recorded (PUTs, copies, parts) and the time they took, summed, in ns.
    pub intents_written: u64,
    pub intent_write_ns: u64,
    /// Unpacked data writes of PUTs and the time they took, summed, in ns.
    pub data_writes: u64,
    pub data_write_ns: u64,
    /// Index commits of unversioned writes and the time they took, summed, in ns.
    pub commits: u64,
    pub commit_ns: u64,
    /// Index writes asked for (write intents and commits) and the writes that carried them
    /// (several in one write when they queued for one index shard together; see
    /// `index_batch`).
    pub index_ops: u64,
    pub index_writes: u64,
}

#[derive(Default)]
struct Counters {
    pieces_removed: AtomicU64,
    gc_enqueued: AtomicU64,
    pieces_retired: AtomicU64,
    gc_reclaimed: AtomicU64,
    index_races: AtomicU64,
    orphans_removed: AtomicU64,
    intents_written: AtomicU64,
    intent_write_ns: AtomicU64,
    data_writes: AtomicU64,
    data_write_ns: AtomicU64,
    commits: AtomicU64,
    commit_ns: AtomicU64,
}

/// How many times one index update is decided again after losing a race before the request
/// fails with 503 (each retry means another gateway changed the same key meanwhile).
const INDEX_RACE_RETRIES: usize = 64;

/// Omap key -> stored bytes of the index entries a read-modify-write read.
type Stored = std::collections::BTreeMap<Vec<u8>, Vec<u8>>;

/// Whether two entries are the same version of an object (its metadata may differ).
fn same_version(a: &ObjectEntry, b: &ObjectEntry) -> bool {
    a.version_id == b.version_id
        && a.delete_marker == b.delete_marker
        && a.mtime_ns == b.mtime_ns
        && a.etag == b.etag
        && a.pieces == b.pieces
}

/// The error after [`INDEX_RACE_RETRIES`] lost races in a row (503, the client may retry).
fn races_exhausted(what: &str) -> GatewayError {
    RadosError::CompareFailed(format!(
        "{what}: the index entry changed under {INDEX_RACE_RETRIES} attempts in a row"
    ))
    .into()
}

/// Clock in ns since the Unix epoch (injected so tests can pin time).
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// Wall-clock [`Clock`].
pub fn system_clock() -> Clock {
    Arc::new(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    })
}

/// Serialises read-modify-write of one index entry inside this process.
struct KeyLocks {
    slots: Vec<tokio::sync::Mutex<()>>,
}

impl KeyLocks {
    const SLOTS: usize = 256;

    fn new() -> Self {
        Self {
            slots: (0..Self::SLOTS)
                .map(|_| tokio::sync::Mutex::new(()))
                .collect(),
        }
    }

    async fn lock(&self, scope: &str, key: &str) -> tokio::sync::MutexGuard<'_, ()> {
        let slot = layout::shard_of(&format!("{scope}\0{key}"), Self::SLOTS as u32) as usize;
        self.slots[slot].lock().await
    }
}

/// The cluster-side half of the gateway.
pub(crate) struct Store {
    pub config: GatewayConfig,
    pub meta: Arc<dyn IoCtx>,
    pub index: Arc<dyn IoCtx>,
    pub data: Arc<dyn IoCtx>,
    /// The cluster, asked for the data pool's acting sets (packs group by primary OSD; by
    /// placement group without it).
    placement_source: Option<Arc<dyn Rados>>,
    clock: Clock,
    rng: Mutex<rand::rngs::StdRng>,
    /// Locks of index keys (taken by commits).
    locks: KeyLocks,
    /// Locks of multipart uploads, apart from `locks`: Complete holds its upload's lock while
    /// it commits, which takes a key's lock; in one table the two could be the same slot,
    /// and the Complete would wait for itself for ever.
    upload_locks: KeyLocks,
    counters: Counters,
    /// Copies of bucket records read a moment ago (see [`Store::bucket_cached`]).
    bucket_copies: RecordCache<BucketRecord>,
    /// The write time of the newest version this process created (versions of one key must
    /// get strictly increasing times, which the wall clock alone does not promise).
    version_time_ns_last: AtomicU64,
    /// Open groups of small PUTs ([`pack`]).
    packer: Arc<pack::Packer>,
    /// The write-combining queues of the index pool's objects (write intents and commits).
    index_batcher: Arc<index_batch::IndexBatcher>,
}

/// Opens pool `name`, creating it with the gateway's defaults when missing.
pub(crate) async fn open_pool(
    rados: &dyn Rados,
    config: &GatewayConfig,
    name: &str,
) -> Result<Arc<dyn IoCtx>> {
    match rados.io_ctx(name).await {
        Ok(io) => return Ok(io),
        Err(RadosError::NotFound(_)) => {}
        Err(error) => return Err(error.into()),
    }
    // min_size is Ceph's default, size - size/2 (2 of 3): a write is acknowledged only with
    // a majority of its copies. It was pinned to 1, which acknowledged S3 writes held by a
    // single OSD while two were down.
    let spec = PoolSpec::new(name)
        .with_size(config.pool_size)
        .with_pg_num(config.pool_pg_num);
    match rados.pool_create(spec).await {
        Ok(_) | Err(RadosError::Exists(_)) => Ok(rados.io_ctx(name).await?),
        Err(error) => Err(error.into()),
    }
}

/// Whether `io`'s pool keeps omap: an erasure-coded pool refuses omap writes
/// (`NotSupported`, as Ceph's EOPNOTSUPP). The pool says what it is: a read cannot tell
/// (Ceph answers omap reads on an erasure-coded pool, with nothing).
async fn pool_has_omap(io: &Arc<dyn IoCtx>) -> Result<bool> {
    Ok(!io.pool().erasure_coded)
}

/// The metadata and index pools keep everything in omap, so they must be replicated; the
/// data pool may be erasure-coded (the cheap pool under S3 data, as radosgw's), but then
/// packing, which logs its members in the pack object's omap, is refused.
async fn check_omap_pools(
    config: &GatewayConfig,
    meta: &Arc<dyn IoCtx>,
    index: &Arc<dyn IoCtx>,
    data: &Arc<dyn IoCtx>,
) -> Result<()> {
    for (role, io) in [("metadata", meta), ("index", index)] {
        if !pool_has_omap(io).await? {
            return Err(RadosError::NotSupported(format!(
                "the gateway's {role} pool {:?} keeps no omap (erasure-coded?): it must be a \
                 replicated pool; only the data pool may be erasure-coded",
                io.pool().name
            ))
            .into());
        }
    }
    if config.packing.enabled && !pool_has_omap(data).await? {
        return Err(RadosError::NotSupported(format!(
            "the gateway's data pool {:?} keeps no omap (erasure-coded), and packing logs the \
             members of a pack in its omap: serve it without packing, or put the data on a \
             replicated pool",
            data.pool().name
        ))
        .into());
    }
    Ok(())
}

impl Store {
    pub async fn open(rados: &dyn Rados, config: GatewayConfig, clock: Clock) -> Result<Self> {
        assert!(config.chunk_size_bytes > 0 && config.index_shards > 0);
        let meta = open_pool(rados, &config, &config.metadata_pool).await?;
        let index = open_pool(rados, &config, &config.index_pool).await?;
        let data = open_pool(rados, &config, &config.data_pool).await?;
        check_omap_pools(&config, &meta, &index, &data).await?;
        let bucket_copies = RecordCache::new(
            config.metadata_cache_ms.saturating_mul(1_000_000),
            clock.clone(),
        );
        Ok(Self {
            config,
            meta,
            data,
            placement_source: None,
            clock,
            rng: Mutex::new(rand::rngs::StdRng::from_entropy()),
            locks: KeyLocks::new(),
            upload_locks: KeyLocks::new(),
            counters: Counters::default(),
            bucket_copies,
            version_time_ns_last: AtomicU64::new(0),
            packer: Arc::new(pack::Packer::default()),
            index_batcher: Arc::new(index_batch::IndexBatcher::new(index_batch::BATCH_OPS_MAX)),
            index,
        })
    }

    /// The store, asking `rados` for the data pool's acting sets so that packs group by
    /// primary OSD ([`pack`]).
    pub fn with_placement_source(self, rados: Arc<dyn Rados>) -> Self {
        Self {
            placement_source: Some(rados),
            ..self
        }
    }

    pub fn now_ns(&self) -> u64 {
        (self.clock)()
    }

    /// A fresh random hex tag of `bytes` random bytes.
    pub fn new_tag(&self, bytes: usize) -> String {
        let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
        (0..bytes)
            .map(|_| format!("{:02x}", rng.gen::<u8>()))
            .collect()
    }

    pub fn stats(&self) -> GatewayStats {
        GatewayStats {
            pieces_removed: self.counters.pieces_removed.load(Ordering::Relaxed),
            gc_enqueued: self.counters.gc_enqueued.load(Ordering::Relaxed),
            pieces_retired: self.counters.pieces_retired.load(Ordering::Relaxed),
            gc_reclaimed: self.counters.gc_reclaimed.load(Ordering::Relaxed),
            index_races: self.counters.index_races.load(Ordering::Relaxed),
            orphans_removed: self.counters.orphans_removed.load(Ordering::Relaxed),
            packs_written: self.packer.counters.packs_written.load(Ordering::Relaxed),
            objects_packed: self.packer.counters.objects_packed.load(Ordering::Relaxed),
            pack_ranges_logged: self.packer.counters.ranges_logged.load(Ordering::Relaxed),
            packs_rewritten: self.packer.counters.packs_rewritten.load(Ordering::Relaxed),
            pack_bytes_reclaimed: self.packer.counters.bytes_reclaimed.load(Ordering::Relaxed),
            packs_closed_count: self.packer.counters.closed_count.load(Ordering::Relaxed),
            packs_closed_bytes: self.packer.counters.closed_bytes.load(Ordering::Relaxed),
            packs_closed_idle: self.packer.counters.closed_idle.load(Ordering::Relaxed),
            packs_closed_wait: self.packer.counters.closed_wait.load(Ordering::Relaxed),
            pack_member_wait_ns: self.packer.counters.member_wait_ns.load(Ordering::Relaxed),
            pack_write_ns: self.packer.counters.pack_write_ns.load(Ordering::Relaxed),
            intents_written: self.counters.intents_written.load(Ordering::Relaxed),
            intent_write_ns: self.counters.intent_write_ns.load(Ordering::Relaxed),
            data_writes: self.counters.data_writes.load(Ordering::Relaxed),
            data_write_ns: self.counters.data_write_ns.load(Ordering::Relaxed),
            commits: self.counters.commits.load(Ordering::Relaxed),
            commit_ns: self.counters.commit_ns.load(Ordering::Relaxed),
            index_ops: self.index_batcher.counters.ops.load(Ordering::Relaxed),
            index_writes: self.index_batcher.counters.writes.load(Ordering::Relaxed),
        }
    }

    /// Every omap entry of `oid` in `io` (none when the object does not exist).
    async fn omap_all(&self, io: &Arc<dyn IoCtx>, oid: &str) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        loop {
            let after = out.last().map(|(k, _)| k.clone());
            let page = match io.omap_get_vals(oid, after.as_deref(), b"", 1000).await {
                Ok(page) => page,
                Err(RadosError::NotFound(_)) => return Ok(out),
                Err(error) => return Err(error.into()),
            };
            let done = !page.more || page.entries.is_empty();
            out.extend(page.entries);
            if done {
                return Ok(out);
            }
        }
    }

    /// Applies `op` to index-pool object `oid`, combined with other writes queued for it
    /// ([`index_batch`]).
    async fn index_operate(&self, oid: &str, op: rados::WriteOp) -> rados::Result<()> {
        self.index_batcher.operate(&self.index, oid, op).await
    }

    /// Serialises changes of one multipart upload: its parts, its completion, its abort.
    pub async fn lock_upload(&self, upload_id: &str) -> tokio::sync::MutexGuard<'_, ()> {
        self.upload_locks.lock(upload_id, "").await
    }
}

/// Runs `work`, adding one to `count` and the time it took to `total_ns` (the stage timings
/// of [`GatewayStats`]; tokio's clock, which tests may pause).
async fn timed<F: std::future::Future>(
    count: &AtomicU64,
    total_ns: &AtomicU64,
    work: F,
) -> F::Output {
    let started = tokio::time::Instant::now();
    let output = work.await;
    count.fetch_add(1, Ordering::Relaxed);
    total_ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
    output
}

/// `Ok(())` for a missing object.
pub(crate) fn ignore_missing(result: rados::Result<()>) -> Result<()> {
    match result {
        Ok(()) | Err(RadosError::NotFound(_)) => Ok(()),
        Err(error) => Err(error.into()),
    }
}
