//! The gateway's state in the cluster: buckets, index entries, data pieces, uploads, GC.
//!
//! Everything S3-specific (headers, XML, auth) stays in [`crate::service`]; this module speaks
//! only records ([`crate::layout`]) and byte streams. Write intents and orphan collection
//! live in [`orphans`].

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::{Stream, StreamExt};
use md5::{Digest, Md5};
use rados::{IoCtx, PoolSpec, Rados, RadosError, WriteOp};
use rand::{Rng, SeedableRng};

use crate::error::{GatewayError, Result};
use crate::layout::{self, BucketRecord, ObjectEntry, Piece, Versioning};
use crate::versioning::{self, Found, KeyState, Plan, Version};
use crate::GatewayConfig;

mod gc;
mod orphans;

pub use gc::{gc_wait_s, GcBacklog};

pub(crate) use orphans::Intent;
pub use orphans::{OrphanReport, ORPHAN_GRACE_S_MIN};

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
}

#[derive(Default)]
struct Counters {
    pieces_removed: AtomicU64,
    gc_enqueued: AtomicU64,
    pieces_retired: AtomicU64,
    gc_reclaimed: AtomicU64,
    index_races: AtomicU64,
    orphans_removed: AtomicU64,
}

/// How many times one index update is decided again after losing a race before the request
/// fails with 503 (each retry means another gateway changed the same key meanwhile).
const INDEX_RACE_RETRIES: usize = 64;

/// Omap key -> stored bytes of the index entries a read-modify-write read.
type Stored = std::collections::BTreeMap<Vec<u8>, Vec<u8>>;

/// The error after [`INDEX_RACE_RETRIES`] lost races in a row (503, the client may retry).
/// The preconditions of a write (PutObject, CompleteMultipartUpload): `If-Match` with an
/// ETag (without quotes, or `*`) and `If-None-Match: *`, as S3 checks them.
#[derive(Clone, Debug, Default)]
pub struct WriteCondition {
    /// The current object's ETag must be this (`*`: any object must exist).
    pub if_match: Option<String>,
    /// No object may exist.
    pub if_none_match_any: bool,
}

impl WriteCondition {
    /// Checks the condition against the key's current object (`None`: none, or a delete
    /// marker): 412 when it fails, 404 for If-Match on a missing key (as S3 answers).
    pub fn check(&self, key: &str, current: Option<&ObjectEntry>) -> Result<()> {
        if self.if_none_match_any && current.is_some() {
            return Err(GatewayError::PreconditionFailed);
        }
        if let Some(wanted) = &self.if_match {
            match current {
                None => return Err(GatewayError::NoSuchKey(key.to_string())),
                Some(current) if wanted != "*" && *wanted != current.etag => {
                    return Err(GatewayError::PreconditionFailed)
                }
                Some(_) => {}
            }
        }
        Ok(())
    }
}

/// Whether two entries are the same version of an object (its metadata may differ).
fn same_version(a: &ObjectEntry, b: &ObjectEntry) -> bool {
    a.version_id == b.version_id
        && a.delete_marker == b.delete_marker
        && a.mtime_ns == b.mtime_ns
        && a.etag == b.etag
        && a.pieces == b.pieces
}

fn races_exhausted(what: &str) -> GatewayError {
    RadosError::CompareFailed(format!(
        "{what}: the index entry changed under {INDEX_RACE_RETRIES} attempts in a row"
    ))
    .into()
}

/// What [`Store::update_omap_value`] does with one omap value, and what it then returns.
pub(crate) enum OmapChange<T> {
    /// Nothing; return `T`.
    Keep(T),
    /// Store this (encoded) value, then free these pieces.
    Set(Vec<u8>, Vec<Piece>, T),
    /// Remove the value, then free these pieces.
    Remove(Vec<Piece>, T),
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
    clock: Clock,
    rng: Mutex<rand::rngs::StdRng>,
    /// Locks of index keys (taken by commits).
    locks: KeyLocks,
    /// Locks of multipart uploads, apart from `locks`: Complete holds its upload's lock while
    /// it commits, which takes a key's lock; in one table the two could be the same slot,
    /// and the Complete would wait for itself for ever.
    upload_locks: KeyLocks,
    counters: Counters,
    /// The write time of the newest version this process created (versions of one key must
    /// get strictly increasing times, which the wall clock alone does not promise).
    version_time_ns_last: AtomicU64,
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

impl Store {
    pub async fn open(rados: &dyn Rados, config: GatewayConfig, clock: Clock) -> Result<Self> {
        assert!(config.chunk_size_bytes > 0 && config.index_shards > 0);
        let meta = open_pool(rados, &config, &config.metadata_pool).await?;
        let index = open_pool(rados, &config, &config.index_pool).await?;
        let data = open_pool(rados, &config, &config.data_pool).await?;
        Ok(Self {
            config,
            meta,
            index,
            data,
            clock,
            rng: Mutex::new(rand::rngs::StdRng::from_entropy()),
            locks: KeyLocks::new(),
            upload_locks: KeyLocks::new(),
            counters: Counters::default(),
            version_time_ns_last: AtomicU64::new(0),
        })
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
        }
    }

    // ---- buckets -------------------------------------------------------------------------

    pub async fn bucket(&self, name: &str) -> Result<BucketRecord> {
        let key = name.as_bytes().to_vec();
        let found = match self
            .meta
            .omap_get_vals_by_keys(layout::BUCKETS_OBJECT, std::slice::from_ref(&key))
            .await
        {
            Ok(found) => found,
            Err(RadosError::NotFound(_)) => Default::default(),
            Err(error) => return Err(error.into()),
        };
        match found.get(&key) {
            Some(bytes) => layout::decode(bytes),
            None => Err(GatewayError::NoSuchBucket(name.to_string())),
        }
    }

    pub async fn buckets(&self) -> Result<Vec<BucketRecord>> {
        let mut out = Vec::new();
        let mut after: Option<Vec<u8>> = None;
        loop {
            let page = match self
                .meta
                .omap_get_vals(layout::BUCKETS_OBJECT, after.as_deref(), b"", 1000)
                .await
            {
                Ok(page) => page,
                Err(RadosError::NotFound(_)) => return Ok(out),
                Err(error) => return Err(error.into()),
            };
            for (key, value) in &page.entries {
                out.push(layout::decode(value)?);
                after = Some(key.clone());
            }
            if !page.more || page.entries.is_empty() {
                return Ok(out);
            }
        }
    }

    pub async fn create_bucket(
        &self,
        name: &str,
        owner: &str,
        acl: &str,
        grants: Vec<crate::acl::Grant>,
        location: &str,
    ) -> Result<BucketRecord> {
        let claim = layout::bucket_claim_object(name);
        match self.meta.create(&claim, true).await {
            Ok(()) => {}
            Err(RadosError::Exists(_)) => {
                return match self.bucket(name).await {
                    Ok(record) if record.owner == owner => {
                        Err(GatewayError::BucketAlreadyOwnedByYou)
                    }
                    _ => Err(GatewayError::BucketAlreadyExists),
                }
            }
            Err(error) => return Err(error.into()),
        }
        let record = BucketRecord {
            name: name.to_string(),
            id: self.new_tag(8),
            owner: owner.to_string(),
            created_ns: self.now_ns(),
            shards: self.config.index_shards,
            acl: acl.to_string(),
            location: location.to_string(),
            grants: Some(grants),
            public_access_block: None,
            cors: None,
            policy: None,
            versioning: None,
        };
        self.save_bucket(&record).await?;
        Ok(record)
    }

    pub async fn save_bucket(&self, record: &BucketRecord) -> Result<()> {
        self.meta
            .omap_set(
                layout::BUCKETS_OBJECT,
                vec![(record.name.as_bytes().to_vec(), layout::encode(record))],
            )
            .await?;
        Ok(())
    }

    /// Whether no index shard of the bucket holds an object.
    pub async fn bucket_has_no_objects(&self, record: &BucketRecord) -> Result<bool> {
        for shard in 0..record.shards {
            let oid = layout::index_shard_object(&record.id, shard);
            if self.shard_has_entries(&oid).await? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    pub async fn delete_bucket(&self, record: &BucketRecord) -> Result<()> {
        if !self.bucket_has_no_objects(record).await? {
            return Err(GatewayError::BucketNotEmpty);
        }
        if !self
            .omap_is_empty(&self.index, &layout::uploads_object(&record.id))
            .await?
        {
            return Err(GatewayError::BucketNotEmpty);
        }
        self.meta
            .omap_remove_keys(
                layout::BUCKETS_OBJECT,
                vec![record.name.as_bytes().to_vec()],
            )
            .await?;
        for shard in 0..record.shards {
            ignore_missing(
                self.index
                    .remove(&layout::index_shard_object(&record.id, shard))
                    .await,
            )?;
        }
        ignore_missing(self.index.remove(&layout::uploads_object(&record.id)).await)?;
        ignore_missing(
            self.meta
                .remove(&layout::bucket_claim_object(&record.name))
                .await,
        )?;
        Ok(())
    }

    /// Whether an index shard holds an entry or a version (write intents of uploads in
    /// progress do not count: their commits fail once the bucket's shards are gone).
    async fn shard_has_entries(&self, oid: &str) -> Result<bool> {
        let first = match self.index.omap_get_vals(oid, None, b"", 1).await {
            Ok(page) => page.entries.into_iter().next(),
            Err(RadosError::NotFound(_)) => return Ok(false),
            Err(error) => return Err(error.into()),
        };
        match first {
            None => Ok(false),
            Some((key, _)) if key.first() == Some(&layout::INTENT_NAMESPACE) => {
                let versions = [layout::VERSION_NAMESPACE];
                Ok(!self.omap_is_empty_with(oid, &versions).await?)
            }
            Some(_) => Ok(true),
        }
    }

    async fn omap_is_empty_with(&self, oid: &str, prefix: &[u8]) -> Result<bool> {
        match self.index.omap_get_vals(oid, None, prefix, 1).await {
            Ok(page) => Ok(page.entries.is_empty()),
            Err(RadosError::NotFound(_)) => Ok(true),
            Err(error) => Err(error.into()),
        }
    }

    async fn omap_is_empty(&self, io: &Arc<dyn IoCtx>, oid: &str) -> Result<bool> {
        match io.omap_get_vals(oid, None, b"", 1).await {
            Ok(page) => Ok(page.entries.is_empty()),
            Err(RadosError::NotFound(_)) => Ok(true),
            Err(error) => Err(error.into()),
        }
    }

    // ---- index entries ---------------------------------------------------------------------

    pub async fn entry_opt(&self, bucket: &BucketRecord, key: &str) -> Result<Option<ObjectEntry>> {
        self.index_entry(bucket, key, key.as_bytes().to_vec()).await
    }

    /// The entry stored under omap key `wanted` in `key`'s index shard (its plain entry or
    /// one of its versions); none when the shard or the omap key does not exist.
    async fn index_entry(
        &self,
        bucket: &BucketRecord,
        key: &str,
        wanted: Vec<u8>,
    ) -> Result<Option<ObjectEntry>> {
        let raw = self.index_value(bucket, key, wanted).await?;
        raw.map(|v| layout::decode(&v)).transpose()
    }

    /// The stored bytes under omap key `wanted` in `key`'s index shard.
    async fn index_value(
        &self,
        bucket: &BucketRecord,
        key: &str,
        wanted: Vec<u8>,
    ) -> Result<Option<Vec<u8>>> {
        let oid = layout::index_shard_object(&bucket.id, layout::shard_of(key, bucket.shards));
        let mut found = match self
            .index
            .omap_get_vals_by_keys(&oid, std::slice::from_ref(&wanted))
            .await
        {
            Ok(found) => found,
            Err(RadosError::NotFound(_)) => return Ok(None),
            Err(error) => return Err(error.into()),
        };
        Ok(found.remove(&wanted))
    }

    /// Read-modify-write of omap value `omap_key` of index-pool object `oid`, safe against
    /// other gateways: reads the stored bytes, lets `change` decide, and applies its change
    /// guarded by "the value still holds those bytes" ([`rados::Op::CompareOmap`]). A gateway
    /// that lost the race reads again and decides again, so the value it replaced (and whose
    /// pieces it frees) is always the one the index held: no overwrite or delete orphans
    /// another writer's data. Callers hold an in-process lock, which only spares this
    /// gateway's own writers the retries.
    /// With `intent`, the write also requires the intent to still be there and removes it
    /// (the commit of a write in progress, see [`orphans`]): when orphan collection fenced
    /// it, nothing is written and the error is [`GatewayError::UploadCollected`].
    pub(crate) async fn update_omap_value<T>(
        &self,
        oid: &str,
        omap_key: &[u8],
        intent: Option<&Intent>,
        mut change: impl FnMut(Option<&[u8]>) -> Result<OmapChange<T>>,
    ) -> Result<T> {
        if let Some(intent) = intent {
            assert_eq!(intent.oid, oid, "a write commits where its intent is");
        }
        for _ in 0..INDEX_RACE_RETRIES {
            let raw = match self
                .index
                .omap_get_vals_by_keys(oid, &[omap_key.to_vec()])
                .await
            {
                Ok(mut found) => found.remove(omap_key),
                Err(RadosError::NotFound(_)) => None,
                Err(error) => return Err(error.into()),
            };
            let guarded = WriteOp::new().compare_omap(omap_key.to_vec(), raw.clone());
            let guarded = match intent {
                Some(intent) => intent.guard(guarded),
                None => guarded,
            };
            let (op, freed, result) = match change(raw.as_deref())? {
                OmapChange::Keep(result) => return Ok(result),
                OmapChange::Set(value, freed, result) => (
                    guarded.omap_set(vec![(omap_key.to_vec(), value)]),
                    freed,
                    result,
                ),
                OmapChange::Remove(freed, result) => (
                    guarded.omap_remove_keys(vec![omap_key.to_vec()]),
                    freed,
                    result,
                ),
            };
            let op = match intent {
                Some(intent) => intent.consume(op),
                None => op,
            };
            match self.index.operate(oid, op).await {
                Ok(()) => {
                    self.retire_pieces(freed).await;
                    return Ok(result);
                }
                Err(RadosError::CompareFailed(_)) => {
                    self.check_intent(intent).await?;
                    self.counters.index_races.fetch_add(1, Ordering::Relaxed);
                }
                Err(error) => return Err(error.into()),
            }
        }
        Err(races_exhausted(&format!(
            "{oid} omap key {:?}",
            String::from_utf8_lossy(omap_key)
        )))
    }

    /// [`Store::update_omap_value`] of `key`'s plain index entry, under the key's lock.
    async fn update_plain<T>(
        &self,
        bucket: &BucketRecord,
        key: &str,
        intent: Option<&Intent>,
        mut change: impl FnMut(Option<ObjectEntry>) -> OmapChange<T>,
    ) -> Result<T> {
        let oid = layout::index_shard_object(&bucket.id, layout::shard_of(key, bucket.shards));
        let _guard = self.locks.lock(&bucket.id, key).await;
        self.update_omap_value(&oid, key.as_bytes(), intent, |raw| {
            let old = raw.map(layout::decode).transpose()?;
            Ok(change(old))
        })
        .await
    }

    /// Makes `entry` the object `key` (a new version of it in a bucket with versioning) and
    /// returns the object as stored, with its version id in a bucket with versioning. With
    /// `intent` (the write that stored the entry's data), the commit also ends the intent,
    /// and fails with [`GatewayError::UploadCollected`] if orphan collection fenced it.
    pub async fn commit(
        &self,
        bucket: &BucketRecord,
        key: &str,
        entry: ObjectEntry,
        intent: Option<&Intent>,
    ) -> Result<ObjectEntry> {
        self.commit_if(bucket, key, entry, &WriteCondition::default(), intent)
            .await
    }

    /// [`Store::commit`] if `condition` holds for the key's current object when the entry is
    /// written (checked under the key's lock, in the guarded write itself, so no other write
    /// slips between the check and the commit); else its error, with nothing written.
    pub async fn commit_if(
        &self,
        bucket: &BucketRecord,
        key: &str,
        entry: ObjectEntry,
        condition: &WriteCondition,
        intent: Option<&Intent>,
    ) -> Result<ObjectEntry> {
        let bucket = match bucket.versioning {
            Some(_) => bucket.clone(),
            None => match self
                .commit_unversioned(bucket, key, &entry, condition, intent)
                .await?
            {
                Unversioned::Done => return Ok(entry),
                Unversioned::BucketVersioned => self.bucket(&bucket.name).await?,
            },
        };
        let status = bucket.versioning.ok_or_else(|| {
            GatewayError::Corrupt(format!("{key}: a version in a bucket without versioning"))
        })?;
        self.commit_version(&bucket, key, entry, status, condition, intent)
            .await
    }

    /// One guarded omap set (the acknowledgement point), then the pieces of the version it
    /// replaced are removed. Writes nothing if the key turns out to have a version entry:
    /// versioning was enabled since the caller read the bucket, and the old pieces belong to
    /// a version.
    async fn commit_unversioned(
        &self,
        bucket: &BucketRecord,
        key: &str,
        entry: &ObjectEntry,
        condition: &WriteCondition,
        intent: Option<&Intent>,
    ) -> Result<Unversioned> {
        self.update_plain(bucket, key, intent, |old| match old {
            Some(old) if old.version_id.is_some() => {
                OmapChange::Keep(Ok(Unversioned::BucketVersioned))
            }
            old => {
                if let Err(refusal) = condition.check(key, old.as_ref()) {
                    return OmapChange::Keep(Err(refusal));
                }
                let keep: BTreeSet<&str> = entry.pieces.iter().map(|p| p.oid.as_str()).collect();
                let stale = old
                    .map(|old| old.pieces)
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|p| !keep.contains(p.oid.as_str()))
                    .collect();
                OmapChange::Set(layout::encode(entry), stale, Ok(Unversioned::Done))
            }
        })
        .await?
    }

    /// Removes object `key` of a bucket without versioning (done if it was not there);
    /// removes nothing if the key has a version entry (as [`Store::commit_unversioned`]).
    pub async fn delete(&self, bucket: &BucketRecord, key: &str) -> Result<Unversioned> {
        self.update_plain(bucket, key, None, |old| match old {
            None => OmapChange::Keep(Unversioned::Done),
            Some(old) if old.version_id.is_some() => OmapChange::Keep(Unversioned::BucketVersioned),
            Some(old) => OmapChange::Remove(old.pieces, Unversioned::Done),
        })
        .await
    }

    // ---- versions (see crate::versioning) ----------------------------------------------------

    /// A write time for a new version of a key whose newest version was written at
    /// `after_ns`: the clock, but strictly after that and after every version this process
    /// created before.
    fn version_time_ns(&self, after_ns: u64) -> u64 {
        let now = self.now_ns();
        let mut last = self.version_time_ns_last.load(Ordering::Relaxed);
        loop {
            let time = now.max(last + 1).max(after_ns + 1);
            match self.version_time_ns_last.compare_exchange(
                last,
                time,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return time,
                Err(current) => last = current,
            }
        }
    }

    /// Up to `max` version entries of `key`, newest first.
    async fn versions_of(
        &self,
        bucket: &BucketRecord,
        key: &str,
        max: usize,
    ) -> Result<Vec<Version>> {
        self.versions_stored(bucket, key, max, &mut Stored::new())
            .await
    }

    /// [`Store::versions_of`], also recording each entry's stored bytes in `stored`.
    async fn versions_stored(
        &self,
        bucket: &BucketRecord,
        key: &str,
        max: usize,
        stored: &mut Stored,
    ) -> Result<Vec<Version>> {
        let oid = layout::index_shard_object(&bucket.id, layout::shard_of(key, bucket.shards));
        let prefix = layout::versions_prefix(key);
        let mut out = Vec::new();
        let mut after: Option<Vec<u8>> = None;
        while out.len() < max {
            let want = (max - out.len()).min(1000);
            let page = match self
                .index
                .omap_get_vals(&oid, after.as_deref(), &prefix, want)
                .await
            {
                Ok(page) => page,
                Err(RadosError::NotFound(_)) => break,
                Err(error) => return Err(error.into()),
            };
            for (raw, value) in &page.entries {
                let (_, suffix) = layout::parse_version_key(raw)
                    .ok_or_else(|| GatewayError::Corrupt(format!("version key {raw:?}")))?;
                out.push(Version {
                    suffix,
                    entry: layout::decode(value)?,
                });
                stored.insert(raw.clone(), value.clone());
                after = Some(raw.clone());
            }
            if !page.more || page.entries.is_empty() {
                break;
            }
        }
        Ok(out)
    }

    /// The object of `key` (its plain entry or a version) that multipart upload `upload_id`
    /// completed into, if one did.
    pub async fn completed_by(
        &self,
        bucket: &BucketRecord,
        key: &str,
        upload_id: &str,
    ) -> Result<Option<ObjectEntry>> {
        let state = self.key_state(bucket, key, usize::MAX).await?;
        Ok(state
            .plain
            .into_iter()
            .chain(state.versions.into_iter().map(|version| version.entry))
            .find(|entry| entry.upload_id.as_deref() == Some(upload_id)))
    }

    /// The data objects the versions of `key` use (its plain entry and every version).
    pub async fn pieces_in_use(
        &self,
        bucket: &BucketRecord,
        key: &str,
    ) -> Result<BTreeSet<String>> {
        let state = self.key_state(bucket, key, usize::MAX).await?;
        Ok(state
            .plain
            .iter()
            .chain(state.versions.iter().map(|version| &version.entry))
            .flat_map(|entry| entry.pieces.iter().map(|piece| piece.oid.clone()))
            .collect())
    }

    /// The plain entry and up to `versions_max` version entries of `key`, read concurrently.
    pub async fn key_state(
        &self,
        bucket: &BucketRecord,
        key: &str,
        versions_max: usize,
    ) -> Result<KeyState> {
        Ok(self.key_state_stored(bucket, key, versions_max).await?.0)
    }

    /// [`Store::key_state`] with the stored bytes of every entry read (the guards of
    /// [`Store::carry_out`]).
    async fn key_state_stored(
        &self,
        bucket: &BucketRecord,
        key: &str,
        versions_max: usize,
    ) -> Result<(KeyState, Stored)> {
        let mut stored = Stored::new();
        let (plain_raw, versions) = futures::try_join!(
            self.index_value(bucket, key, key.as_bytes().to_vec()),
            self.versions_stored(bucket, key, versions_max, &mut stored)
        )?;
        let plain = plain_raw.as_deref().map(layout::decode).transpose()?;
        if let Some(raw) = plain_raw {
            stored.insert(key.as_bytes().to_vec(), raw);
        }
        Ok((KeyState { plain, versions }, stored))
    }

    /// Writes `plan` to the key's shard in one atomic omap change, then frees its pieces.
    /// Every omap key the plan sets or removes is guarded to still hold what was read into
    /// `stored` (absent if not there): `false` when another gateway changed one meanwhile
    /// (nothing was written; the caller reads and plans again).
    async fn carry_out(
        &self,
        bucket: &BucketRecord,
        key: &str,
        plan: Plan,
        stored: &Stored,
        intent: Option<&Intent>,
    ) -> Result<bool> {
        let oid = layout::index_shard_object(&bucket.id, layout::shard_of(key, bucket.shards));
        let touched: BTreeSet<&Vec<u8>> = plan
            .remove
            .iter()
            .chain(plan.set.iter().map(|(k, _)| k))
            .collect();
        let mut op = WriteOp::new();
        for omap_key in touched {
            op = op.compare_omap(omap_key.clone(), stored.get(omap_key).cloned());
        }
        if !plan.remove.is_empty() {
            op = op.omap_remove_keys(plan.remove);
        }
        if !plan.set.is_empty() {
            let set = plan
                .set
                .iter()
                .map(|(k, entry)| (k.clone(), layout::encode(entry)))
                .collect();
            op = op.omap_set(set);
        }
        if let Some(intent) = intent {
            assert_eq!(intent.oid, oid, "a write commits where its intent is");
            op = intent.consume(intent.guard(op));
        }
        match self.index.operate(&oid, op).await {
            Ok(()) => {
                self.retire_pieces(plan.freed).await;
                Ok(true)
            }
            Err(RadosError::CompareFailed(_)) => {
                self.check_intent(intent).await?;
                self.counters.index_races.fetch_add(1, Ordering::Relaxed);
                Ok(false)
            }
            Err(error) => Err(error.into()),
        }
    }

    /// `entry` as a new version of `key` (an object or a delete marker), as stored.
    async fn commit_version(
        &self,
        bucket: &BucketRecord,
        key: &str,
        mut entry: ObjectEntry,
        status: Versioning,
        condition: &WriteCondition,
        intent: Option<&Intent>,
    ) -> Result<ObjectEntry> {
        let _guard = self.locks.lock(&bucket.id, key).await;
        // Enabled needs only the newest version (for the ordering); Suspended must find the
        // null version wherever it is.
        let versions_max = match status {
            Versioning::Enabled => 1,
            Versioning::Suspended => usize::MAX,
        };
        for _ in 0..INDEX_RACE_RETRIES {
            let (state, stored) = self.key_state_stored(bucket, key, versions_max).await?;
            condition.check(key, state.current())?;
            entry.mtime_ns = self.version_time_ns(state.newest_mtime_ns());
            let suffix = layout::version_suffix(entry.mtime_ns, &self.new_tag(4));
            let (plan, written) =
                versioning::plan_write(key, &state, status, entry.clone(), &suffix);
            if self.carry_out(bucket, key, plan, &stored, intent).await? {
                return Ok(written);
            }
        }
        Err(races_exhausted(&format!("{}/{key}", bucket.name)))
    }

    /// A delete marker on top of `key` (bucket with versioning), as stored.
    pub async fn delete_marker(
        &self,
        bucket: &BucketRecord,
        key: &str,
        owner: &str,
    ) -> Result<ObjectEntry> {
        let status = bucket.versioning.ok_or_else(|| {
            GatewayError::Corrupt(format!("{key}: a version in a bucket without versioning"))
        })?;
        let marker = ObjectEntry {
            owner: owner.to_string(),
            delete_marker: true,
            ..ObjectEntry::default()
        };
        self.commit_version(
            bucket,
            key,
            marker,
            status,
            &WriteCondition::default(),
            None,
        )
        .await
    }

    /// Checks a version id from a request: `null` or one this gateway could have generated.
    pub fn check_version_id(version_id: &str) -> Result<()> {
        if version_id == versioning::NULL_VERSION_ID || layout::is_version_suffix(version_id) {
            Ok(())
        } else {
            Err(GatewayError::InvalidArgument(format!(
                "invalid version id {version_id:?}"
            )))
        }
    }

    /// The version `version_id` of `key` (`null` included), if it exists.
    pub async fn version(
        &self,
        bucket: &BucketRecord,
        key: &str,
        version_id: &str,
    ) -> Result<Option<ObjectEntry>> {
        Self::check_version_id(version_id)?;
        if version_id == versioning::NULL_VERSION_ID {
            let state = self.key_state(bucket, key, usize::MAX).await?;
            return Ok(state.find(version_id).and_then(|f| state.get(f)).cloned());
        }
        self.index_entry(bucket, key, layout::version_key(key, version_id))
            .await
    }

    /// The newest version of `key` if it is a delete marker (why a GET finds no object).
    pub async fn latest_delete_marker(
        &self,
        bucket: &BucketRecord,
        key: &str,
    ) -> Result<Option<ObjectEntry>> {
        let newest = self.versions_of(bucket, key, 1).await?;
        Ok(newest
            .into_iter()
            .next()
            .map(|v| v.entry)
            .filter(|e| e.delete_marker))
    }

    /// Removes version `version_id` of `key` for good, with its data; returns it, or `None`
    /// when there is no such version (removing it again is no error, as in S3).
    pub async fn remove_version(
        &self,
        bucket: &BucketRecord,
        key: &str,
        version_id: &str,
    ) -> Result<Option<ObjectEntry>> {
        Self::check_version_id(version_id)?;
        let _guard = self.locks.lock(&bucket.id, key).await;
        for _ in 0..INDEX_RACE_RETRIES {
            let (state, stored) = self.key_state_stored(bucket, key, usize::MAX).await?;
            let Some(found) = state.find(version_id) else {
                return Ok(None);
            };
            let removed = state.get(found).cloned();
            let plan = versioning::plan_remove(key, &state, found);
            if self.carry_out(bucket, key, plan, &stored, None).await? {
                return Ok(removed);
            }
        }
        Err(races_exhausted(&format!("{}/{key}", bucket.name)))
    }

    /// Replaces version `version_id` of `key` (the latest when `None`) by `entry`, the same
    /// version with other metadata (an ACL), provided it is still `read`, the version the
    /// caller read and checked: returns false when an overwrite or a delete replaced it since
    /// (writing the stale entry back would undo that acknowledged change), for the caller to
    /// read and check again.
    pub async fn update_version(
        &self,
        bucket: &BucketRecord,
        key: &str,
        version_id: Option<&str>,
        read: &ObjectEntry,
        entry: ObjectEntry,
    ) -> Result<bool> {
        /// What the unversioned update found.
        enum Plain {
            Done,
            Changed,
            BucketVersioned,
        }
        let null = version_id.is_none_or(|v| v == versioning::NULL_VERSION_ID);
        if bucket.versioning.is_none() && null {
            let outcome = self
                .update_plain(bucket, key, None, |old| match old {
                    Some(old) if old.version_id.is_some() => {
                        OmapChange::Keep(Plain::BucketVersioned)
                    }
                    Some(old) if same_version(&old, read) => {
                        OmapChange::Set(layout::encode(&entry), Vec::new(), Plain::Done)
                    }
                    _ => OmapChange::Keep(Plain::Changed),
                })
                .await?;
            match outcome {
                Plain::Done => return Ok(true),
                Plain::Changed => return Ok(false),
                Plain::BucketVersioned => {}
            }
        }
        let _guard = self.locks.lock(&bucket.id, key).await;
        for _ in 0..INDEX_RACE_RETRIES {
            let (state, stored) = self.key_state_stored(bucket, key, usize::MAX).await?;
            let found = match version_id {
                Some(v) => state.find(v),
                None => match &state.plain {
                    Some(plain) if plain.version_id.is_none() => Some(Found::Legacy),
                    Some(_) => Some(Found::Entry(0)),
                    None => None,
                },
            };
            // Gone or replaced since the caller read it: the caller reads and checks again.
            let Some(found) = found.filter(|&found| {
                state
                    .get(found)
                    .is_some_and(|current| same_version(current, read))
            }) else {
                return Ok(false);
            };
            let plan = versioning::plan_update(key, &state, found, entry.clone());
            if self.carry_out(bucket, key, plan, &stored, None).await? {
                return Ok(true);
            }
        }
        Err(races_exhausted(&format!("{}/{key}", bucket.name)))
    }

    // ---- data --------------------------------------------------------------------------------

    /// [`Store::write_body`] for a write announced by `intent`, then `check` on the body's md5
    /// (Content-MD5, `x-amz-checksum-*`); returns the pieces, size, md5 and what `check`
    /// returned. A body that fails to stream in, or that `check` refuses, ends the write
    /// ([`Store::abandon_write`]: its data and intent removed) and its error is returned.
    pub(crate) async fn write_checked<S, T>(
        &self,
        intent: &Intent,
        bucket_id: &str,
        tag: &str,
        key: &str,
        body: S,
        check: impl FnOnce(&[u8; 16]) -> Result<T>,
    ) -> Result<(Vec<Piece>, u64, [u8; 16], T)>
    where
        S: Stream<Item = Result<Bytes>> + Unpin,
    {
        let (pieces, size, md5) = match self.write_body(bucket_id, tag, key, body).await {
            Ok(written) => written,
            Err(error) => {
                self.abandon_write(intent, Vec::new()).await;
                return Err(error);
            }
        };
        match check(&md5) {
            Ok(checked) => Ok((pieces, size, md5, checked)),
            Err(error) => {
                self.abandon_write(intent, pieces).await;
                Err(error)
            }
        }
    }

    /// Stores a body as pieces of a new version; returns the pieces, size and hex md5.
    /// The head (piece 0) is written last, with `head_meta` in an xattr.
    pub async fn write_body<S>(
        &self,
        bucket_id: &str,
        tag: &str,
        key: &str,
        mut body: S,
    ) -> Result<(Vec<Piece>, u64, [u8; 16])>
    where
        S: Stream<Item = Result<Bytes>> + Unpin,
    {
        let chunk = self.config.chunk_size_bytes;
        let mut md5 = Md5::new();
        let mut head: Vec<u8> = Vec::new();
        let mut current: Vec<u8> = Vec::new();
        let mut pieces: Vec<Piece> = Vec::new();
        let mut size: u64 = 0;
        let mut written: Vec<String> = Vec::new();
        let result: Result<()> = async {
            while let Some(item) = body.next().await {
                let bytes = item?;
                md5.update(&bytes);
                size += bytes.len() as u64;
                let mut rest: &[u8] = &bytes;
                while !rest.is_empty() {
                    let target = if pieces.is_empty() && head.len() < chunk {
                        &mut head
                    } else {
                        &mut current
                    };
                    let take = (chunk - target.len()).min(rest.len());
                    target.extend_from_slice(&rest[..take]);
                    rest = &rest[take..];
                    if head.len() == chunk && pieces.is_empty() {
                        pieces.push(Piece {
                            oid: layout::piece_object(bucket_id, tag, key, 0),
                            size: chunk as u64,
                        });
                    }
                    if current.len() == chunk {
                        let oid = layout::piece_object(bucket_id, tag, key, pieces.len());
                        // The chunk moves into the op (no copy); the next one gets a buffer.
                        let full = std::mem::replace(&mut current, Vec::with_capacity(chunk));
                        self.data
                            .operate(&oid, WriteOp::new().write_full(full))
                            .await?;
                        written.push(oid.clone());
                        pieces.push(Piece {
                            oid,
                            size: chunk as u64,
                        });
                    }
                }
            }
            if !current.is_empty() {
                let oid = layout::piece_object(bucket_id, tag, key, pieces.len());
                let size = current.len() as u64;
                self.data
                    .operate(
                        &oid,
                        WriteOp::new().write_full(std::mem::take(&mut current)),
                    )
                    .await?;
                written.push(oid.clone());
                pieces.push(Piece { oid, size });
            }
            if !head.is_empty() {
                if pieces.is_empty() {
                    pieces.push(Piece {
                        oid: layout::piece_object(bucket_id, tag, key, 0),
                        size: head.len() as u64,
                    });
                }
                let op = WriteOp::new()
                    .write_full(std::mem::take(&mut head))
                    .set_xattr(layout::HEAD_META_XATTR, tag.as_bytes().to_vec());
                self.data.operate(&pieces[0].oid, op).await?;
            }
            Ok(())
        }
        .await;
        if let Err(error) = result {
            let orphans = written
                .into_iter()
                .map(|oid| Piece { oid, size: 0 })
                .collect();
            self.remove_pieces(orphans).await;
            return Err(error);
        }
        debug_assert_eq!(pieces.iter().map(|p| p.size).sum::<u64>(), size);
        Ok((pieces, size, md5.finalize().into()))
    }

    /// The bytes `[start, end)` of an object made of `pieces`, as a stream of piece reads.
    pub fn read_range(
        &self,
        pieces: &[Piece],
        start: u64,
        end: u64,
    ) -> impl Stream<Item = Result<Bytes>> + Send + 'static {
        let data = self.data.clone();
        futures::stream::iter(segments(pieces, start, end))
            .then(move |segment| read_segment(data.clone(), segment))
    }

    /// [`Self::read_range`] for an answer whose status is not sent yet (GET): the first
    /// piece's bytes are read, and every later piece the range needs is checked to be there
    /// and long enough, before it returns. A lost or short piece is then an error status
    /// (500) instead of a `200` whose body stops short, which a client only notices as a
    /// broken connection. An object of one piece costs nothing more than before (its read
    /// just happens first); the checks of the others run at once, each a `stat`.
    pub async fn read_range_checked(
        &self,
        pieces: &[Piece],
        start: u64,
        end: u64,
    ) -> Result<impl Stream<Item = Result<Bytes>> + Send + 'static> {
        let mut segments = segments(pieces, start, end).into_iter();
        let first = segments.next();
        let rest: Vec<Segment> = segments.collect();
        let checks = futures::future::join_all(rest.iter().map(|segment| async move {
            let size_bytes = self
                .data
                .stat(&segment.oid)
                .await
                .map_err(|error| piece_error(&segment.oid, error))?
                .size_bytes;
            if size_bytes < segment.from + segment.length {
                return Err(GatewayError::Corrupt(format!(
                    "data piece {} holds {size_bytes} bytes, the object needs {}",
                    segment.oid,
                    segment.from + segment.length
                )));
            }
            Ok(())
        }));
        let read_first = async {
            match first {
                Some(segment) => read_segment(self.data.clone(), segment).await.map(Some),
                None => Ok(None),
            }
        };
        let (first_bytes, checked) = futures::join!(read_first, checks);
        checked.into_iter().collect::<Result<Vec<()>>>()?;
        let data = self.data.clone();
        let first_bytes = futures::stream::iter(first_bytes?.map(Ok));
        Ok(first_bytes.chain(
            futures::stream::iter(rest).then(move |segment| read_segment(data.clone(), segment)),
        ))
    }

    /// Data a committed change replaced: queued for the GC, which removes it once
    /// `gc_min_wait_s` has passed, so reads that started on the old version finish (removed
    /// now when the wait is 0, or when it cannot be queued).
    pub async fn retire_pieces(&self, pieces: Vec<Piece>) {
        if pieces.is_empty() {
            return;
        }
        if self.config.gc_min_wait_s == 0 {
            return self.remove_pieces(pieces).await;
        }
        let now = self.now_ns().to_string().into_bytes();
        let entries = pieces
            .iter()
            .map(|piece| (piece.oid.clone().into_bytes(), now.clone()))
            .collect();
        match self.meta.omap_set(layout::GC_OBJECT, entries).await {
            Ok(()) => {
                self.counters
                    .pieces_retired
                    .fetch_add(pieces.len() as u64, Ordering::Relaxed);
            }
            Err(error) => {
                tracing::warn!(%error, "cannot queue replaced data for the GC; removing it now");
                self.remove_pieces(pieces).await;
            }
        }
    }

    /// Removes data pieces; a failed removal goes to the GC queue.
    pub async fn remove_pieces(&self, pieces: Vec<Piece>) {
        for piece in pieces {
            match self.data.remove(&piece.oid).await {
                Ok(()) | Err(RadosError::NotFound(_)) => {
                    self.counters.pieces_removed.fetch_add(1, Ordering::Relaxed);
                }
                Err(error) => {
                    tracing::warn!(oid = %piece.oid, %error, "removal failed; queued for GC");
                    let entry = (
                        piece.oid.into_bytes(),
                        self.now_ns().to_string().into_bytes(),
                    );
                    if self
                        .meta
                        .omap_set(layout::GC_OBJECT, vec![entry])
                        .await
                        .is_ok()
                    {
                        self.counters.gc_enqueued.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
    }

    /// One GC pass: removes the queued data objects that have waited `gc_min_wait_s`;
    /// returns how many were reclaimed.
    pub async fn reclaim(&self) -> Result<u64> {
        self.reclaim_after(self.config.gc_min_wait_s).await
    }

    /// One GC pass removing the queued data objects that have waited `wait_s` (see `gc`).
    pub async fn reclaim_after(&self, wait_s: u64) -> Result<u64> {
        let wait_ns = wait_s.saturating_mul(1_000_000_000);
        let now_ns = self.now_ns();
        let queue = self.omap_all(&self.meta, layout::GC_OBJECT).await?;
        let mut done = Vec::new();
        for (key, queued) in queue {
            let queued_ns: u64 = String::from_utf8_lossy(&queued).parse().unwrap_or(0);
            if queued_ns.saturating_add(wait_ns) > now_ns {
                continue; // a read may still be on it
            }
            let oid = String::from_utf8_lossy(&key).into_owned();
            match self.data.remove(&oid).await {
                Ok(()) | Err(RadosError::NotFound(_)) => done.push(key),
                Err(error) => tracing::warn!(%oid, %error, "GC removal failed; retrying later"),
            }
        }
        let reclaimed = done.len() as u64;
        for chunk in done.chunks(1000) {
            self.meta
                .omap_remove_keys(layout::GC_OBJECT, chunk.to_vec())
                .await?;
        }
        self.counters
            .gc_reclaimed
            .fetch_add(reclaimed, Ordering::Relaxed);
        Ok(reclaimed)
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

    /// Serialises changes of one multipart upload: its parts, its completion, its abort.
    pub async fn lock_upload(&self, upload_id: &str) -> tokio::sync::MutexGuard<'_, ()> {
        self.upload_locks.lock(upload_id, "").await
    }
}

/// What a change meant for a bucket without versioning did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unversioned {
    /// Done.
    Done,
    /// Nothing: the key has a version entry, so the bucket got versioning since the caller
    /// read it; the caller re-reads the bucket and makes the change as a versioned one.
    BucketVersioned,
}

/// `Ok(())` for a missing object.
pub(crate) fn ignore_missing(result: rados::Result<()>) -> Result<()> {
    match result {
        Ok(()) | Err(RadosError::NotFound(_)) => Ok(()),
        Err(error) => Err(error.into()),
    }
}

/// The part `[from, from + length)` of data object `oid` that a range read needs.
struct Segment {
    oid: String,
    from: u64,
    length: u64,
}

/// The segments of `pieces` (in order) that cover `[start, end)` of the object.
fn segments(pieces: &[Piece], start: u64, end: u64) -> Vec<Segment> {
    let mut segments = Vec::new();
    let mut offset = 0u64;
    for piece in pieces {
        let piece_end = offset + piece.size;
        if piece_end > start && offset < end {
            let from = start.max(offset) - offset;
            let to = end.min(piece_end) - offset;
            segments.push(Segment {
                oid: piece.oid.clone(),
                from,
                length: to - from,
            });
        }
        offset = piece_end;
    }
    segments
}

/// Reads one segment; fewer bytes than it needs (or none: the piece is gone) is corruption.
async fn read_segment(data: Arc<dyn IoCtx>, segment: Segment) -> Result<Bytes> {
    let Segment { oid, from, length } = segment;
    let bytes = data
        .read(&oid, from, length)
        .await
        .map_err(|error| piece_error(&oid, error))?;
    if bytes.len() as u64 != length {
        return Err(GatewayError::Corrupt(format!(
            "{oid}: read {} of {length} bytes",
            bytes.len()
        )));
    }
    Ok(Bytes::from(bytes))
}

/// A data piece an object's index entry names but the data pool does not have is corruption
/// (the index and the data disagree), not a missing key.
fn piece_error(oid: &str, error: RadosError) -> GatewayError {
    match error {
        RadosError::NotFound(_) => {
            GatewayError::Corrupt(format!("data piece {oid} of the object is missing"))
        }
        error => error.into(),
    }
}
