//! The store handle: mount, reads, and the entry of writes (`apply`).

use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use device::Device;
use tokio::sync::{mpsc, oneshot, RwLock};

use crate::allocator::{Allocator, DeviceExtent};
use crate::buffer::DataCache;
use crate::cache::{Cached, OnodeCache};
use crate::commit::{self, CommitCounters, Pending};
use crate::config::StoreConfig;
use crate::error::{Result, StoreError};
use crate::meta::{self, Counters, Layout, Meta};
use crate::onode::Onode;
use crate::presence::Presence;
use crate::replay::replay;
use crate::types::{
    validate_collection, validate_names, CommitStats, DataCacheStats, ObjectStat, Statfs,
    Transaction,
};
use crate::wal::Wal;
use crate::write;

/// Lock shards: objects hash onto them; a writer holds its objects' shards exclusively from
/// preparation until its commit is durable, a reader holds them shared.
const LOCK_SHARDS: usize = 1024;

/// State shared by the handle, the committer and in-flight transactions.
pub(crate) struct Inner {
    pub device: Arc<dyn Device>,
    pub meta: Meta,
    pub layout: Layout,
    pub config: StoreConfig,
    pub allocator: Mutex<Allocator>,
    /// Freed extents that deferred overwrites in the log wrote: reused after the next
    /// checkpoint (see `commit`).
    pub held: Mutex<Vec<DeviceExtent>>,
    /// Device ranges (start -> end) written by deferred overwrites since the last checkpoint:
    /// a mount would write them again from the log.
    pub deferred_ranges: Mutex<std::collections::BTreeMap<u64, u64>>,
    /// The write-ahead log; the committer appends to it, a checkpoint or `shutdown` empties it.
    pub wal: Mutex<Wal>,
    pub counters: Mutex<Counters>,
    pub locks: Vec<Arc<RwLock<()>>>,
    /// Hashes objects onto `locks` (see [`Inner::shard`]).
    pub shard_hasher: foldhash::fast::RandomState,
    /// Committed onodes by lock shard (see `cache`).
    pub onodes: OnodeCache,
    /// Verified blocks of small reads, by device offset (see `buffer`).
    pub data_cache: DataCache,
    /// Which objects may exist (see `presence`): a "no" skips the database.
    pub presence: Presence,
    pub poisoned: AtomicBool,
    /// What [`Store::commit_stats`] reports.
    pub commit_counters: CommitCounters,
}

/// Background defragmentations in flight at most; a fragmented read beyond them starts none
/// (the next read of the range will).
const DEFRAGMENTATIONS_MAX: usize = 4;

impl Inner {
    pub fn allocator(&self) -> MutexGuard<'_, Allocator> {
        self.allocator.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn wal(&self) -> MutexGuard<'_, Wal> {
        self.wal.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn held(&self) -> MutexGuard<'_, Vec<DeviceExtent>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn deferred_ranges(&self) -> MutexGuard<'_, std::collections::BTreeMap<u64, u64>> {
        self.deferred_ranges
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    pub fn counters(&self) -> MutexGuard<'_, Counters> {
        self.counters.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The lock (and onode cache) shard of an object: foldhash with the store's own random
    /// seed, as cheap as the hash of a lookup and not predictable by whoever names objects.
    pub fn shard(&self, collection: &str, name: &str) -> usize {
        (self.shard_hasher.hash_one((collection, name)) % LOCK_SHARDS as u64) as usize
    }

    /// The committed onode of an object and the size of its record, if it exists: from the
    /// cache, else from the database (and then cached). The caller holds the object's lock
    /// shard, shared or exclusive: that is what keeps the cache exact (see `cache`).
    pub fn load_onode(&self, collection: &str, name: &str) -> Result<Cached> {
        self.lookup_onode(collection, name, true)
    }

    /// The committed state of an object, from the cache or else the database; with
    /// `fill_cache`, a state read from the database is cached.
    ///
    /// A writer passes `false`: its commit caches the object's new state anyway, so caching
    /// the old one first would only make the cache drop another entry for it (for a new
    /// object, an entry saying "absent"), an extra insertion with eviction per new object
    /// (3.4% of the CPU samples of `examples/bench_cluster.rs` writing new 4 KiB objects).
    pub fn lookup_onode(&self, collection: &str, name: &str, fill_cache: bool) -> Result<Cached> {
        let key = meta::object_key(collection, name);
        self.lookup_onode_at(self.shard(collection, name), &key, fill_cache)
    }

    /// [`Inner::lookup_onode`] of the object with database key `key` in lock shard `shard`.
    pub fn lookup_onode_at(&self, shard: usize, key: &[u8], fill_cache: bool) -> Result<Cached> {
        if let Some(cached) = self.onodes.get(shard, key)? {
            return Ok(cached);
        }
        let bytes = if self.presence.may_contain(key) {
            self.meta.object(key)?
        } else {
            None
        };
        let Some(bytes) = bytes else {
            if fill_cache {
                self.onodes.insert(shard, key.to_vec(), None);
            }
            return Ok(None);
        };
        let onode = Onode::decode(&bytes, self.layout.checksum_block_bytes)?;
        let record_bytes = (key.len() + bytes.len()) as u64;
        if fill_cache {
            self.onodes
                .insert(shard, key.to_vec(), Some(Arc::from(&bytes[..])));
        }
        Ok(Some((Arc::new(onode), record_bytes)))
    }

    fn check_writable(&self) -> Result<()> {
        if self.poisoned.load(Ordering::Acquire) {
            return Err(StoreError::Poisoned);
        }
        Ok(())
    }
}

/// A BlueStore-like object store on one device. See the crate documentation.
pub struct Store {
    inner: Arc<Inner>,
    queue: Option<mpsc::Sender<Pending>>,
    committer: Option<std::thread::JoinHandle<()>>,
    /// Background defragmentations started by reads and not answered (see
    /// [`StoreConfig::defragment_runs_max`]); at most `DEFRAGMENTATIONS_MAX`. Not in `Inner`:
    /// a finished one holds no reference to it.
    defragmenting: Arc<AtomicUsize>,
}

impl Store {
    /// Creates a new store on `device`, its metadata in a new database at `meta_path` (which
    /// must not exist). Needs a tokio runtime (the committer drives device flushes on it).
    pub async fn create(
        device: Arc<dyn Device>,
        meta_path: impl AsRef<Path>,
        config: StoreConfig,
    ) -> Result<Store> {
        let meta_path = meta_path.as_ref();
        config.validate(device.block_size_bytes())?;
        if meta_path.exists() {
            return Err(StoreError::InvalidArgument(format!(
                "{} exists; open it instead",
                meta_path.display()
            )));
        }
        // The metadata log takes the device's last blocks (`wal.rs`), whole allocation units
        // before it hold data.
        let log_bytes =
            crate::wal::region_bytes_for(device.size_bytes(), device.block_size_bytes());
        let data_bytes = device.size_bytes().saturating_sub(log_bytes)
            / config.min_alloc_size_bytes
            * config.min_alloc_size_bytes;
        if data_bytes == 0 {
            return Err(StoreError::InvalidArgument(format!(
                "a device of {} bytes leaves no room for data beside the {log_bytes}-byte metadata log",
                device.size_bytes()
            )));
        }
        let layout = Layout {
            min_alloc_size_bytes: config.min_alloc_size_bytes,
            checksum_block_bytes: config.checksum_block_bytes,
            device_size_bytes: data_bytes,
            log_bytes,
        };
        let meta =
            open_database(meta_path, &config, true).map_err(|e| database_error(meta_path, e))?;
        meta.initialize(layout)?;
        // A used device (an OSD recreated over its old file) keeps the old store's log
        // records: they count as applied, so the mount neither replays them nor reads their
        // claims as a damaged log.
        if let Some(last) =
            Wal::sequence_max_on(&device, layout.device_size_bytes, layout.log_bytes).await?
        {
            let mut batch = meta::MetaBatch::default();
            batch.insert(
                meta::Space::Super,
                meta::WAL_SEQUENCE_KEY.to_vec(),
                last.to_le_bytes().to_vec(),
            );
            batch.commit(&meta)?;
            meta.persist()?;
        }
        Self::mount(device, meta, config).await
    }

    /// Opens an existing store. The layout recorded at create wins over `config`'s.
    pub async fn open(
        device: Arc<dyn Device>,
        meta_path: impl AsRef<Path>,
        config: StoreConfig,
    ) -> Result<Store> {
        let meta_path = meta_path.as_ref();
        // A handle dropped without `shutdown` on a current-thread runtime cannot wait for its
        // threads, which close the file a moment later: give them that moment.
        let mut attempts = 0;
        let meta = loop {
            match open_database(meta_path, &config, false) {
                Err(meta::OpenError::Locked) if attempts < 100 => {
                    attempts += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
                other => break other.map_err(|e| database_error(meta_path, e))?,
            }
        };
        Self::mount(device, meta, config).await
    }

    async fn mount(device: Arc<dyn Device>, meta: Meta, mut config: StoreConfig) -> Result<Store> {
        let layout = meta.read_layout()?;
        config.min_alloc_size_bytes = layout.min_alloc_size_bytes;
        config.checksum_block_bytes = layout.checksum_block_bytes;
        config.validate(device.block_size_bytes())?;
        if device.size_bytes() < layout.device_size_bytes + layout.log_bytes {
            return Err(StoreError::InvalidArgument(format!(
                "device of {} bytes is smaller than the {} the store was created on",
                device.size_bytes(),
                layout.device_size_bytes + layout.log_bytes
            )));
        }
        let wal = replay(&device, &meta, &layout, config.salvage_damaged_log).await?;
        meta.upgrade_format()?;
        let scan = meta::scan(&meta, layout.checksum_block_bytes)?;
        let allocator = Allocator::from_allocated(
            layout.device_size_bytes,
            layout.min_alloc_size_bytes,
            scan.allocated,
        )
        .map_err(|extent| {
            StoreError::Metadata(format!(
                "extent {extent:?} is referenced twice or misplaced"
            ))
        })?;
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| StoreError::InvalidArgument("the store needs a tokio runtime".into()))?;
        let (sender, receiver) = mpsc::channel(config.queue_depth_max);
        let inner = Arc::new(Inner {
            device,
            meta,
            layout,
            allocator: Mutex::new(allocator),
            held: Mutex::new(Vec::new()),
            deferred_ranges: Mutex::new(std::collections::BTreeMap::new()),
            wal: Mutex::new(wal),
            counters: Mutex::new(scan.counters),
            locks: (0..LOCK_SHARDS)
                .map(|_| Arc::new(RwLock::new(())))
                .collect(),
            shard_hasher: foldhash::fast::RandomState::default(),
            onodes: OnodeCache::new(
                LOCK_SHARDS,
                config.onode_cache_bytes,
                layout.checksum_block_bytes,
            ),
            data_cache: DataCache::new(config.data_cache_bytes, layout.checksum_block_bytes),
            presence: Presence::with_hashes(&scan.object_hashes),
            poisoned: AtomicBool::new(false),
            commit_counters: CommitCounters::default(),
            config,
        });
        let committer = commit::spawn(Arc::clone(&inner), receiver, runtime)
            .map_err(|e| StoreError::metadata(format!("spawn committer: {e}")))?;
        Ok(Store {
            inner,
            queue: Some(sender),
            committer: Some(committer),
            defragmenting: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// Applies a transaction atomically and durably: when it returns `Ok`, every operation is
    /// on stable storage; after a crash either all of them are visible or none.
    ///
    /// Once called, the transaction runs to its end on a task of its own even if the returned
    /// future is dropped (a client that went away): a preparation abandoned during one of its
    /// device writes would give its fresh extents back while the write was still queued on
    /// the device's threads, and that write could land later in space another object had
    /// been given meanwhile.
    ///
    /// The caller waits for the committer's answer itself, not for that task: the task ends
    /// once the transaction is queued, and the answer wakes the caller directly (one wake-up
    /// per write instead of two, the second a hop through the task's end).
    pub async fn apply(&self, transaction: Transaction) -> Result<()> {
        self.inner.check_writable()?;
        let queue = self.queue.clone().ok_or(StoreError::Closed)?;
        submit(Arc::clone(&self.inner), queue, transaction).await
    }

    /// After a client read found `[start, end)` of an object in more than
    /// `defragment_runs_max` device runs: rewrites the range contiguously in the background
    /// (an [`crate::Op::Defragment`] transaction, which reads the range again under the
    /// object's lock). Nothing when the store cannot write or enough are in flight.
    fn defragment_later(&self, collection: &str, name: &str, start: u64, end: u64) {
        let Some(queue) = self.queue.clone() else {
            return;
        };
        if self.inner.check_writable().is_err()
            || self.defragmenting.fetch_add(1, Ordering::AcqRel) >= DEFRAGMENTATIONS_MAX
        {
            self.defragmenting.fetch_sub(1, Ordering::AcqRel);
            return;
        }
        let inner = Arc::clone(&self.inner);
        let counter = Arc::clone(&self.defragmenting);
        let id = crate::ObjectId::new(collection, name);
        // mtime 0: a defragmentation keeps the object's mtime.
        let mut transaction = Transaction::new(0);
        transaction.defragment(&id, start, end - start);
        tokio::spawn(async move {
            if let Err(error) = submit(inner, queue, transaction).await {
                tracing::debug!(%error, "background defragmentation failed");
            }
            counter.fetch_sub(1, Ordering::AcqRel);
        });
    }

    /// Reads up to `length_bytes` from `offset_bytes`; shorter at the end of the object, empty
    /// beyond it. Every byte is checked against its crc32c first: when read from the device,
    /// or, for a small read the data cache serves, when the cache took it.
    pub async fn read(
        &self,
        collection: &str,
        name: &str,
        offset_bytes: u64,
        length_bytes: u64,
    ) -> Result<Vec<u8>> {
        self.read_with(collection, name, offset_bytes, length_bytes, true)
            .await
    }

    /// [`Store::read`] from the device even where the data cache holds the blocks, and
    /// without filling it: for deep scrub and recovery, which must check or copy what the
    /// device holds.
    pub async fn read_device(
        &self,
        collection: &str,
        name: &str,
        offset_bytes: u64,
        length_bytes: u64,
    ) -> Result<Vec<u8>> {
        self.read_with(collection, name, offset_bytes, length_bytes, false)
            .await
    }

    async fn read_with(
        &self,
        collection: &str,
        name: &str,
        offset_bytes: u64,
        length_bytes: u64,
        use_cache: bool,
    ) -> Result<Vec<u8>> {
        validate_names(collection, name)?;
        let _guard = self.read_lock(collection, name).await;
        let (onode, _) = self
            .inner
            .load_onode(collection, name)?
            .ok_or_else(|| StoreError::not_found(collection, name))?;
        let end = offset_bytes
            .saturating_add(length_bytes)
            .min(onode.size_bytes);
        if offset_bytes >= end {
            return Ok(Vec::new());
        }
        let block = self.inner.layout.checksum_block_bytes;
        let aligned_start = offset_bytes / block * block;
        let aligned_end = end.div_ceil(block) * block;
        // A client read (not scrub or recovery) of a range scattered on the device.
        let runs_max = self.inner.config.defragment_runs_max;
        let fragmented = use_cache
            && runs_max > 0
            && write::device_run_count(&onode, aligned_start, aligned_end) > runs_max;
        let use_cache = use_cache && self.inner.data_cache.serves(aligned_end - aligned_start);
        let mut buffer = write::read_aligned(
            &self.inner,
            collection,
            name,
            &onode,
            aligned_start,
            aligned_end,
            use_cache,
        )
        .await?;
        let from = (offset_bytes - aligned_start) as usize;
        buffer.truncate(from + (end - offset_bytes) as usize);
        buffer.drain(..from);
        if fragmented {
            self.defragment_later(collection, name, aligned_start, aligned_end);
        }
        Ok(buffer)
    }

    async fn read_lock(
        &self,
        collection: &str,
        name: &str,
    ) -> tokio::sync::OwnedRwLockReadGuard<()> {
        let shard = self.inner.shard(collection, name);
        Arc::clone(&self.inner.locks[shard]).read_owned().await
    }

    async fn onode(&self, collection: &str, name: &str) -> Result<Arc<Onode>> {
        validate_names(collection, name)?;
        let _guard = self.read_lock(collection, name).await;
        Ok(self
            .inner
            .load_onode(collection, name)?
            .ok_or_else(|| StoreError::not_found(collection, name))?
            .0)
    }

    /// The committed onode of an object as text (size, xattrs, and per extent its logical
    /// offset, device offset, length and crc32c values), for crash tests and diagnostics;
    /// `None` if the object does not exist. Not a stable format.
    #[doc(hidden)]
    pub async fn describe_onode(&self, collection: &str, name: &str) -> Result<Option<String>> {
        validate_names(collection, name)?;
        let _guard = self.read_lock(collection, name).await;
        Ok(self
            .inner
            .load_onode(collection, name)?
            .map(|(onode, _)| format!("{onode:x?}")))
    }

    /// How fragmented an object's data is: its extents, and the runs of them that are
    /// contiguous on the device (what a read of the whole object costs in device reads);
    /// `None` if the object does not exist. For benchmarks and diagnostics.
    #[doc(hidden)]
    pub async fn extent_runs(
        &self,
        collection: &str,
        name: &str,
    ) -> Result<Option<(usize, usize)>> {
        validate_names(collection, name)?;
        let _guard = self.read_lock(collection, name).await;
        Ok(self.inner.load_onode(collection, name)?.map(|(onode, _)| {
            let mut runs = 0;
            let mut next = None;
            for (&logical, extent) in &onode.extents {
                if next != Some((logical, extent.device_offset_bytes)) {
                    runs += 1;
                }
                next = Some((
                    logical + extent.length_bytes,
                    extent.device_offset_bytes + extent.length_bytes,
                ));
            }
            (onode.extents.len(), runs)
        }))
    }

    /// Size, mtime and allocation of an object.
    pub async fn stat(&self, collection: &str, name: &str) -> Result<ObjectStat> {
        let onode = self.onode(collection, name).await?;
        Ok(ObjectStat {
            size_bytes: onode.size_bytes,
            mtime_ns: onode.mtime_ns,
            allocated_bytes: onode.allocated_bytes(),
        })
    }

    /// Whether an object exists.
    pub async fn exists(&self, collection: &str, name: &str) -> Result<bool> {
        validate_names(collection, name)?;
        let _guard = self.read_lock(collection, name).await;
        Ok(self.inner.load_onode(collection, name)?.is_some())
    }

    /// One extended attribute.
    pub async fn get_xattr(&self, collection: &str, name: &str, key: &str) -> Result<Vec<u8>> {
        let onode = self.onode(collection, name).await?;
        onode
            .xattrs
            .get(key)
            .cloned()
            .ok_or_else(|| StoreError::NotFound {
                collection: collection.to_owned(),
                name: name.to_owned(),
                what: Some(format!("xattr {key}")),
            })
    }

    /// All extended attributes.
    pub async fn get_xattrs(
        &self,
        collection: &str,
        name: &str,
    ) -> Result<BTreeMap<String, Vec<u8>>> {
        Ok(self.onode(collection, name).await?.xattrs.clone())
    }

    /// Up to `max` omap entries with keys after `after` (from the first key when `None`), in
    /// key order.
    pub async fn omap_get_range(
        &self,
        collection: &str,
        name: &str,
        after: Option<&[u8]>,
        max: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        validate_names(collection, name)?;
        let prefix = meta::omap_prefix(collection, name);
        let end = meta::prefix_end(&prefix);
        let start = after.map(|after| [prefix.as_slice(), after].concat());
        let _guard = self.read_lock(collection, name).await;
        if self.inner.load_onode(collection, name)?.is_none() {
            return Err(StoreError::not_found(collection, name));
        }
        let lower = match &start {
            Some(start) => Bound::Excluded(start.as_slice()),
            None => Bound::Included(prefix.as_slice()),
        };
        let mut entries = Vec::new();
        for entry in self
            .inner
            .meta
            .omap
            .range::<&[u8], _>((lower, Bound::Excluded(end.as_slice())))
        {
            if entries.len() >= max {
                break;
            }
            let (key, value) = entry.into_inner()?;
            entries.push((key[prefix.len()..].to_vec(), value.to_vec()));
        }
        Ok(entries)
    }

    /// The values of those of `keys` that are set.
    pub async fn omap_get_keys(
        &self,
        collection: &str,
        name: &str,
        keys: &[Vec<u8>],
    ) -> Result<BTreeMap<Vec<u8>, Vec<u8>>> {
        validate_names(collection, name)?;
        let prefix = meta::omap_prefix(collection, name);
        let _guard = self.read_lock(collection, name).await;
        if self.inner.load_onode(collection, name)?.is_none() {
            return Err(StoreError::not_found(collection, name));
        }
        let mut found = BTreeMap::new();
        for key in keys {
            let full = [prefix.as_slice(), key].concat();
            if let Some(value) = self.inner.meta.omap.get(&full)? {
                found.insert(key.clone(), value.to_vec());
            }
        }
        Ok(found)
    }

    /// Up to `max` object names of `collection` after `after` (from the first when `None`),
    /// sorted. Pass the last name returned to get the next page.
    pub async fn list(
        &self,
        collection: &str,
        after: Option<&str>,
        max: usize,
    ) -> Result<Vec<String>> {
        validate_collection(collection)?;
        let mut prefix = collection.as_bytes().to_vec();
        prefix.push(0);
        let end = meta::prefix_end(&prefix);
        let start = after.map(|after| meta::object_key(collection, after));
        let lower = match &start {
            Some(start) => Bound::Excluded(start.as_slice()),
            None => Bound::Included(prefix.as_slice()),
        };
        let mut names = Vec::new();
        for entry in self
            .inner
            .meta
            .objects
            .range::<&[u8], _>((lower, Bound::Excluded(end.as_slice())))
        {
            if names.len() >= max {
                break;
            }
            let key = entry.key()?;
            names.push(meta::split_object_key(&key)?.1);
        }
        Ok(names)
    }

    /// Collections holding at least one object, with their object counts.
    pub fn list_collections(&self) -> BTreeMap<String, u64> {
        self.inner
            .counters()
            .collections
            .iter()
            .map(|(name, usage)| (name.clone(), usage.objects))
            .collect()
    }

    /// The data region's capacity and its bytes not allocated (extents freed but not yet
    /// reusable count as allocated), and the allocation unit: one lock, unlike
    /// [`Store::statfs`], so the cluster can check fullness on every write.
    pub fn space_bytes(&self) -> (u64, u64, u64) {
        let allocator = self.inner.allocator();
        (
            allocator.capacity_bytes(),
            allocator.free_bytes(),
            self.inner.layout.min_alloc_size_bytes,
        )
    }

    /// Space and metadata accounting.
    /// Why this store's last mounts found its metadata log damaged after it was durable
    /// (see `StoreConfig::salvage_damaged_log`), if one did and nobody cleared it since: the
    /// store then lacks writes it acknowledged, and its owner must restore them (from other
    /// replicas) before serving from it.
    pub fn log_damage(&self) -> Result<Option<String>> {
        self.inner.meta.log_damage()
    }

    /// Forgets [`Store::log_damage`], durably (its owner restored what was lost, or recorded
    /// durably that it must).
    pub fn clear_log_damage(&self) -> Result<()> {
        let mut note = crate::meta::MetaBatch::default();
        note.remove(
            crate::meta::Space::Super,
            crate::meta::LOG_DAMAGE_KEY.to_vec(),
        );
        note.commit(&self.inner.meta)?;
        self.inner.meta.persist()
    }

    pub fn statfs(&self) -> Statfs {
        let counters = self.inner.counters().clone();
        let held_bytes: u64 = self.inner.held().iter().map(|e| e.length_bytes).sum();
        let (total_bytes, free_bytes) = {
            let allocator = self.inner.allocator();
            (
                allocator.capacity_bytes(),
                allocator.free_bytes() + held_bytes,
            )
        };
        Statfs {
            total_bytes,
            free_bytes,
            allocated_bytes: total_bytes - free_bytes,
            stored_bytes: counters.stored_bytes,
            objects: counters.objects(),
            onode_bytes: counters.onode_bytes,
            omap_bytes: counters.omap_bytes,
            metadata_file_bytes: self.inner.meta.disk_bytes() + self.inner.layout.log_bytes,
            min_alloc_size_bytes: self.inner.layout.min_alloc_size_bytes,
            collections: counters.collections,
        }
    }

    /// What the data cache served since mount, and what it holds (see
    /// [`crate::StoreConfig::data_cache_bytes`]).
    pub fn data_cache_stats(&self) -> DataCacheStats {
        self.inner.data_cache.stats()
    }

    /// How many syncs the commits since mount paid and how many transactions shared them.
    pub fn commit_stats(&self) -> CommitStats {
        self.inner.commit_counters.snapshot()
    }

    /// Whether an earlier failed flush or commit made the store refuse writes.
    pub fn is_poisoned(&self) -> bool {
        self.inner.poisoned.load(Ordering::Acquire)
    }

    /// The data device.
    pub fn device(&self) -> &Arc<dyn Device> {
        &self.inner.device
    }

    /// Waits until the background defragmentations that reads started are answered (see
    /// [`StoreConfig::defragment_runs_max`]): for tests that check the space accounting.
    #[doc(hidden)]
    pub async fn wait_for_defragmentation(&self) {
        while self.defragmenting.load(Ordering::Acquire) > 0 {
            tokio::task::yield_now().await;
        }
    }

    /// Checks that the allocator's free space is exactly what no onode references (a full scan;
    /// for tests and `fsck`-like checks). Wait for in-flight transactions first.
    pub fn check_consistency(&self) -> Result<()> {
        let scan = meta::scan(&self.inner.meta, self.inner.layout.checksum_block_bytes)?;
        let rebuilt = Allocator::from_allocated(
            self.inner.layout.device_size_bytes,
            self.inner.layout.min_alloc_size_bytes,
            scan.allocated,
        )
        .map_err(|extent| StoreError::Metadata(format!("extent {extent:?} referenced twice")))?;
        let held = self.inner.held().clone();
        let mut allocator = self.inner.allocator().clone();
        allocator.check_invariants();
        for extent in held {
            allocator.release(extent);
        }
        if !rebuilt.free_extents().eq(allocator.free_extents()) {
            return Err(StoreError::Metadata(format!(
                "allocator has {} free bytes, metadata says {}",
                allocator.free_bytes(),
                rebuilt.free_bytes()
            )));
        }
        drop(allocator);
        let counters = self.inner.counters().clone();
        if counters != scan.counters {
            return Err(StoreError::Metadata(format!(
                "counters {counters:?} differ from the scan {:?}",
                scan.counters
            )));
        }
        Ok(())
    }

    /// Waits for queued transactions, stops the committer and closes the metadata database.
    pub async fn shutdown(mut self) -> Result<()> {
        self.queue = None;
        if let Some(committer) = self.committer.take() {
            tokio::task::spawn_blocking(move || committer.join())
                .await
                .map_err(|e| StoreError::metadata(format!("join committer: {e}")))?
                .map_err(|_| StoreError::metadata("committer panicked"))?;
        }
        if self.is_poisoned() {
            return Err(StoreError::Poisoned);
        }
        // A checkpoint, so the next mount has nothing to replay.
        self.inner.device.flush().await?;
        self.inner.meta.persist()?;
        let inner = Arc::clone(&self.inner);
        let runtime = tokio::runtime::Handle::current();
        // The log's mutex is a std one: emptied on a thread that may block. Everything it
        // holds is in the persisted database now, so a log that cannot be emptied (a device
        // failing its writes) only costs the next mount a replay that skips every record.
        let emptied = tokio::task::spawn_blocking(move || inner.wal().reset_blocking(&runtime))
            .await
            .map_err(|e| StoreError::metadata(format!("empty the metadata log: {e}")))?;
        if let Err(error) = emptied {
            tracing::warn!(%error, "could not empty the metadata log at shutdown");
        }
        Ok(())
    }
}

impl Drop for Store {
    /// Without `shutdown`: closes the queue and waits for the committer where blocking is
    /// allowed (no runtime, or a multi-thread runtime), so the database file is closed when the
    /// handle is gone and can be reopened at once.
    fn drop(&mut self) {
        self.queue = None;
        let Some(committer) = self.committer.take() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Err(_) => {
                let _ = committer.join();
            }
            Ok(handle) => {
                if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread {
                    tokio::task::block_in_place(|| {
                        let _ = committer.join();
                    });
                }
            }
        }
    }
}

fn open_database(
    path: &Path,
    config: &StoreConfig,
    create: bool,
) -> std::result::Result<Meta, meta::OpenError> {
    Meta::open(path, config.metadata_cache_bytes as u64, create)
}

fn database_error(path: &Path, error: meta::OpenError) -> StoreError {
    StoreError::metadata(format!("{}: {error}", path.display()))
}

/// Prepares `transaction` on a task of its own and queues it for the committer; returns the
/// committer's answer (see [`Store::apply`]).
async fn submit(
    inner: Arc<Inner>,
    queue: mpsc::Sender<Pending>,
    transaction: Transaction,
) -> Result<()> {
    let (reply, answer) = oneshot::channel();
    let applied = std::time::Instant::now();
    tokio::spawn(async move {
        match write::prepare(&inner, transaction, applied).await {
            Ok(Some(mut pending)) => {
                pending.reply = Some(reply);
                pending.timing.queued = std::time::Instant::now();
                // A closed queue drops the transaction, and with it `reply`: `Closed`.
                let _ = queue.send(pending).await;
            }
            Ok(None) => {
                let _ = reply.send(Ok(()));
            }
            Err(error) => {
                let _ = reply.send(Err(error));
            }
        }
    });
    // No answer: the committer or the task ended without one (the store closed under
    // it, or a panic, which the log shows).
    answer.await.map_err(|_| StoreError::Closed)?
}
