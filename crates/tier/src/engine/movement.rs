//! Moving data between the pools: promotion (an object's metadata and the blocks an op needs,
//! or the whole object at Ceph's granularity), flush (the dirty blocks, or the whole cached
//! object, and metadata, guarded by the base object's generation) and eviction.
//! The `_locked` ones and the installs run with the object's lock held by the caller; the
//! background flush and promotion take it themselves, only around their cache-side steps.

use std::collections::BTreeMap;

use rados::{Bytes, Comparison, RadosError, WriteOp};

use super::data::blocks_of;
use super::Tier;
use crate::config::CacheMode;
use crate::error::{Result, TierError};
use crate::state::{
    decode_u64, encode_u64, ObjectState, GENERATION_XATTR, RESERVED_PREFIX, STATE_XATTR,
    VERSION_XATTR,
};
use crate::stats::Counters;

/// What a promotion read from the base pool, to be written to the cache.
pub(crate) struct FetchedObject {
    op: WriteOp,
    state: ObjectState,
    bytes: u64,
    /// The base object's version when it was read.
    base_version: u64,
}

/// A flush read under the object's lock, to be written to the base pool.
pub(crate) struct PreparedFlush {
    op: WriteOp,
    snapshot: ObjectState,
    expected: u64,
    generation: u64,
    written: u64,
}

/// What a flush reads of the base pool before it takes the object's lock (an HDD read under
/// load can take over 100 ms, and client ops on the object would wait for it).
pub(crate) struct Prefetched {
    /// The base object's generation (`None`: no base object).
    generation: Option<u64>,
    /// The base object's user xattrs, read when the copy's metadata is dirty.
    base_xattrs: Option<BTreeMap<String, Vec<u8>>>,
}

pub(crate) enum Prepared {
    Clean,
    Whiteout(ObjectState),
    Write(PreparedFlush),
}

/// Marks an object's background flush in flight until dropped.
struct FlushingMark<'a> {
    tier: &'a Tier,
    name: &'a str,
}

impl Drop for FlushingMark<'_> {
    fn drop(&mut self) {
        self.tier
            .flushing
            .lock()
            .expect("flushing lock")
            .remove(self.name);
    }
}

/// Unlocked flushes an eviction tries before it leaves an object that keeps being written.
const EVICT_FLUSH_ATTEMPTS: usize = 3;

/// Runs of consecutive blocks, as (first, end) pairs.
pub(crate) fn runs(blocks: impl IntoIterator<Item = u64>) -> Vec<(u64, u64)> {
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for block in blocks {
        match runs.last_mut() {
            Some((_, end)) if *end == block => *end += 1,
            _ => runs.push((block, block + 1)),
        }
    }
    runs
}

async fn all_omap(io: &dyn rados::IoCtx, name: &str) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut entries = Vec::new();
    let mut after: Option<Vec<u8>> = None;
    loop {
        let page = io.omap_get_vals(name, after.as_deref(), b"", 1000).await?;
        let more = page.more;
        if let Some((key, _)) = page.entries.last() {
            after = Some(key.clone());
        }
        let empty = page.entries.is_empty();
        entries.extend(page.entries);
        if !more || empty {
            return Ok(entries);
        }
    }
}

fn user_xattrs(all: BTreeMap<String, Vec<u8>>) -> BTreeMap<String, Vec<u8>> {
    all.into_iter()
        .filter(|(name, _)| !name.starts_with(RESERVED_PREFIX))
        .collect()
}

impl Tier {
    /// Copies the base object's metadata (size, xattrs, omap, generation) and the blocks of
    /// its data that `range` (offset, length; clamped to the object) touches into the cache.
    /// `None` when the base pool has no such object.
    pub(crate) async fn promote_object(
        &self,
        name: &str,
        range: (u64, u64),
    ) -> Result<Option<ObjectState>> {
        match self.fetch_object(name, range).await? {
            Some(fetched) => self.install_object(name, fetched).await.map(Some),
            None => Ok(None),
        }
    }

    /// Reads what a promotion of the object writes to the cache (no lock needed: an install
    /// under the lock checks that the base object did not change meanwhile).
    pub(crate) async fn fetch_object(
        &self,
        name: &str,
        range: (u64, u64),
    ) -> Result<Option<FetchedObject>> {
        let stat = match self.base.stat(name).await {
            Ok(stat) => stat,
            Err(RadosError::NotFound(_)) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let all_xattrs = self.base.get_xattrs(name).await?;
        let generation = all_xattrs
            .get(GENERATION_XATTR)
            .map(|v| decode_u64(v))
            .unwrap_or(0);
        let version_base = all_xattrs
            .get(VERSION_XATTR)
            .map(|v| decode_u64(v))
            .unwrap_or(0);
        let xattrs = user_xattrs(all_xattrs);
        // An erasure-coded base keeps no omap (NotSupported, whatever the object): none to copy.
        let omap = match all_omap(self.base.as_ref(), name).await {
            Err(TierError::Rados(RadosError::NotSupported(_))) => Vec::new(),
            other => other?,
        };
        let settings = self.settings();
        let mut state = ObjectState {
            exists: true,
            size_bytes: stat.size_bytes,
            mtime_ns: stat.mtime_ns,
            version: stat.version + version_base,
            block_bytes: settings.tier_block_bytes,
            base_exists: true,
            base_generation: generation,
            base_valid_bytes: stat.size_bytes,
            ..Default::default()
        };
        let mut op = WriteOp::new().create(false);
        for (key, value) in xattrs {
            op = op.set_xattr(key, value);
        }
        if !omap.is_empty() {
            op = op.omap_set(omap);
        }
        // Ceph's granularity copies the whole base object whatever the op touches.
        let (offset, length) = if settings.promotes_whole_objects() {
            (0, state.size_bytes)
        } else {
            range
        };
        let end = offset.saturating_add(length).min(state.size_bytes);
        let blocks = blocks_of(state.block_bytes, offset, end.saturating_sub(offset));
        let (op, bytes) = self.add_blocks(name, &mut state, &blocks, op).await?;
        let op = op.set_xattr(STATE_XATTR, state.encode());
        Ok(Some(FetchedObject {
            op,
            state,
            bytes,
            base_version: stat.version,
        }))
    }

    /// Writes a fetched object into the cache. Call with the object's lock held.
    pub(crate) async fn install_object(
        &self,
        name: &str,
        fetched: FetchedObject,
    ) -> Result<ObjectState> {
        self.cache.operate(name, fetched.op).await?;
        Counters::bump(&self.counters.promotions);
        Counters::add(&self.counters.promoted_bytes, fetched.bytes);
        self.note_promoted_bytes(fetched.state.present.count() * fetched.state.block_bytes);
        self.set_cached_state(name, Some(fetched.state.clone()));
        Ok(fetched.state)
    }

    /// A background promotion: reads the base pool without the object's lock (so client ops
    /// on it do not wait for the HDDs), then installs under the lock only if nothing changed
    /// meanwhile: the object still uncached and the base object at the version read, or,
    /// for blocks of a cached object, its base generation, shape and missing blocks the same.
    pub(crate) async fn promote_in_background(&self, name: &str, range: (u64, u64)) -> Result<()> {
        match self.cached_state(name) {
            None => {
                let Some(fetched) = self.fetch_object(name, range).await? else {
                    return Ok(());
                };
                let _guard = self.lock_for_background(name).await;
                if !self.may_promote() || self.cached_state(name).is_some() {
                    return Ok(());
                }
                match self.base.stat(name).await {
                    Ok(stat) if stat.version == fetched.base_version => {}
                    Ok(_) | Err(RadosError::NotFound(_)) => return Ok(()),
                    Err(e) => return Err(e.into()),
                }
                self.install_object(name, fetched).await.map(|_| ())
            }
            Some(snapshot) => {
                let end = range.0.saturating_add(range.1).min(snapshot.size_bytes);
                if range.0 >= end || self.over_byte_target() {
                    return Ok(());
                }
                let blocks = blocks_of(snapshot.block_bytes, range.0, end - range.0);
                let mut fetched = snapshot.clone();
                let (op, bytes) = self
                    .add_blocks(name, &mut fetched, &blocks, WriteOp::new())
                    .await?;
                if bytes == 0 && fetched.present == snapshot.present {
                    return Ok(());
                }
                let _guard = self.lock_for_background(name).await;
                if !self.may_promote() {
                    return Ok(());
                }
                let Some(current) = self.cached_state(name) else {
                    return Ok(());
                };
                let added: Vec<u64> = fetched
                    .present
                    .iter()
                    .filter(|b| !snapshot.present.contains(*b))
                    .collect();
                let unchanged = current.exists == snapshot.exists
                    && current.size_bytes == snapshot.size_bytes
                    && current.base_exists == snapshot.base_exists
                    && current.base_generation == snapshot.base_generation
                    && current.base_valid_bytes == snapshot.base_valid_bytes
                    && added.iter().all(|b| !current.present.contains(*b));
                if !unchanged {
                    return Ok(());
                }
                let mut next = current;
                for (first, end) in runs(added.iter().copied()) {
                    next.present.insert_range(first, end);
                }
                let op = op.set_xattr(STATE_XATTR, next.encode());
                self.cache.operate(name, op).await?;
                Counters::bump(&self.counters.promotions);
                Counters::add(&self.counters.promoted_bytes, bytes);
                self.note_promoted_bytes(added.len() as u64 * next.block_bytes);
                self.set_cached_state(name, Some(next));
                Ok(())
            }
        }
    }

    /// Whether background promotions may run now (not emptying, not proxying).
    fn may_promote(&self) -> bool {
        let emptying = self.queues.lock().expect("queue lock").flush_evict_all;
        !emptying && !matches!(self.mode(), CacheMode::None | CacheMode::Proxy)
    }

    /// Adds to `op` the writes of those of `blocks` the cache lacks and the base pool has,
    /// marking them present; returns the bytes read.
    async fn add_blocks(
        &self,
        name: &str,
        state: &mut ObjectState,
        blocks: &[u64],
        mut op: WriteOp,
    ) -> Result<(WriteOp, u64)> {
        let block_bytes = state.block_bytes;
        let wanted: Vec<u64> = blocks
            .iter()
            .copied()
            .filter(|b| !state.present.contains(*b) && b * block_bytes < state.size_bytes)
            .collect();
        let mut bytes_read = 0;
        for (first, end) in runs(wanted.iter().copied()) {
            let start = first * block_bytes;
            let stop = (end * block_bytes).min(state.size_bytes);
            let base_stop = stop.min(state.base_valid_bytes);
            if state.base_exists && base_stop > start {
                let data = self.base.read(name, start, base_stop - start).await?;
                bytes_read += data.len() as u64;
                let mut data = data;
                // The block ends in zeros where the base object is shorter than the range.
                data.resize((stop - start) as usize, 0);
                op = op.write(start, Bytes::from(data));
            } else if stop > start {
                op = op.write(start, Bytes::from(vec![0u8; (stop - start) as usize]));
            }
            state.present.insert_range(first, end);
        }
        Ok((op, bytes_read))
    }

    /// Makes `blocks` of a cached object present in the cache (one atomic write with the state).
    pub(crate) async fn promote_blocks(
        &self,
        name: &str,
        state: &mut ObjectState,
        blocks: &[u64],
    ) -> Result<()> {
        let missing: Vec<u64> = blocks
            .iter()
            .copied()
            .filter(|b| !state.present.contains(*b) && b * state.block_bytes < state.size_bytes)
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        if self.over_byte_target() {
            return Err(TierError::OverTarget {
                object: name.to_string(),
            });
        }
        let mut next = state.clone();
        let (op, bytes) = self
            .add_blocks(name, &mut next, &missing, WriteOp::new())
            .await?;
        let op = op.set_xattr(STATE_XATTR, next.encode());
        self.cache.operate(name, op).await?;
        Counters::bump(&self.counters.promotions);
        Counters::add(&self.counters.promoted_bytes, bytes);
        self.note_promoted_bytes(missing.len() as u64 * state.block_bytes);
        *state = next;
        self.set_cached_state(name, Some(state.clone()));
        Ok(())
    }

    /// Writes a dirty object back to the base pool, all of it under the object's lock held by
    /// the caller. A whiteout removes the base object and leaves the cache. Returns the bytes
    /// written. Refused ([`TierError::FlushInFlight`]) while a background flush of the object
    /// is in flight.
    pub(crate) async fn flush_locked(&self, name: &str) -> Result<u64> {
        if self.is_flushing(name) {
            return Err(TierError::FlushInFlight {
                object: name.to_string(),
            });
        }
        match self.prepare_flush(name, None).await? {
            Prepared::Clean => Ok(0),
            Prepared::Whiteout(state) => self.flush_whiteout(name, state).await,
            Prepared::Write(flush) => {
                let result = self.base.operate(name, flush.op.clone()).await;
                self.finish_flush(name, flush, result).await
            }
        }
    }

    /// Flushes an object without holding its lock while the base pool is written: the lock is
    /// held to read what to write (from the cache, fast) and to record the result, not for
    /// the slow write to the base pool, so client ops on the object do not wait for it.
    /// Writes that land meanwhile keep the object dirty (their blocks are flushed next time).
    /// The base object's generation, and its xattrs when the copy's metadata is dirty, are
    /// read before the lock is taken too (an HDD read under load can take over 100 ms); they
    /// are read again under the lock only when the generation does not fit the copy's (a flush
    /// landed meanwhile), and the write is guarded by the generation either way.
    pub async fn flush(&self, name: &str) -> Result<u64> {
        let Some(state) = self.cached_state(name).filter(|s| s.is_dirty() && s.exists) else {
            // Nothing to read ahead: a clean object or a whiteout is decided under the lock.
            return self.flush_prefetched(name, None).await;
        };
        let generation = self.base_generation(name).await?;
        let base_xattrs = if state.meta_dirty {
            Some(self.base_user_xattrs(name).await?)
        } else {
            None
        };
        self.flush_prefetched(
            name,
            Some(Prefetched {
                generation,
                base_xattrs,
            }),
        )
        .await
    }

    async fn base_user_xattrs(&self, name: &str) -> Result<BTreeMap<String, Vec<u8>>> {
        match self.base.get_xattrs(name).await {
            Ok(xattrs) => Ok(user_xattrs(xattrs)),
            Err(RadosError::NotFound(_)) => Ok(BTreeMap::new()),
            Err(e) => Err(e.into()),
        }
    }

    async fn flush_prefetched(&self, name: &str, found: Option<Prefetched>) -> Result<u64> {
        let prepared = {
            let _guard = self.lock_for_background(name).await;
            if self.is_flushing(name) {
                return Ok(0);
            }
            match self.prepare_flush(name, found).await? {
                Prepared::Clean => return Ok(0),
                Prepared::Whiteout(state) => return self.flush_whiteout(name, state).await,
                Prepared::Write(flush) => {
                    self.flushing
                        .lock()
                        .expect("flushing lock")
                        .insert(name.to_string());
                    flush
                }
            }
        };
        let mark = FlushingMark { tier: self, name };
        let result = self.base.operate(name, prepared.op.clone()).await;
        let _guard = self.lock_for_background(name).await;
        drop(mark);
        self.finish_flush(name, prepared, result).await
    }

    fn is_flushing(&self, name: &str) -> bool {
        self.flushing.lock().expect("flushing lock").contains(name)
    }

    async fn flush_whiteout(&self, name: &str, state: ObjectState) -> Result<u64> {
        if state.base_exists {
            match self.base.remove(name).await {
                Ok(()) | Err(RadosError::NotFound(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        match self.cache.remove(name).await {
            Ok(()) | Err(RadosError::NotFound(_)) => {}
            Err(e) => return Err(e.into()),
        }
        self.set_cached_state(name, None);
        self.policy_forget(name);
        Counters::bump(&self.counters.flushes);
        Counters::bump(&self.counters.evictions);
        Ok(0)
    }

    /// The generation the base object has now (`None`: no base object).
    async fn base_generation(&self, name: &str) -> Result<Option<u64>> {
        Ok(match self.base.get_xattr(name, GENERATION_XATTR).await {
            Ok(bytes) => Some(decode_u64(&bytes)),
            Err(RadosError::NotFound(_)) => match self.base.stat(name).await {
                Ok(_) => Some(0),
                Err(RadosError::NotFound(_)) => None,
                Err(e) => return Err(e.into()),
            },
            Err(e) => return Err(e.into()),
        })
    }

    /// What a flush of the object would write, read under its lock; `prefetched` is what was
    /// read of the base object before the lock was taken: its generation, used when it fits
    /// the copy's, and its xattrs, used when the generation is the copy's own (no flush landed
    /// since they were read, so they are the base object's now).
    async fn prepare_flush(&self, name: &str, prefetched: Option<Prefetched>) -> Result<Prepared> {
        let Some(state) = self.cached_state(name) else {
            return Ok(Prepared::Clean);
        };
        if !state.is_dirty() {
            return Ok(Prepared::Clean);
        }
        if !state.exists {
            return Ok(Prepared::Whiteout(state));
        }
        // The generation the base object has now: the copy's own, or one more when a flush of
        // this copy landed and the process stopped before it recorded it.
        let expected = state.base_generation;
        let fits = |found: Option<u64>| match (state.base_exists, found) {
            (true, Some(g)) => g == expected || g == expected + 1,
            (false, Some(g)) => g == expected + 1,
            (false, None) => true,
            (true, None) => false,
        };
        let (prefetched_generation, prefetched_xattrs) = match prefetched {
            Some(Prefetched {
                generation,
                base_xattrs,
            }) => (Some(generation), base_xattrs),
            None => (None, None),
        };
        let found = match prefetched_generation {
            Some(found) if fits(found) => found,
            _ => self.base_generation(name).await?,
        };
        let xattrs_current =
            state.base_exists && prefetched_generation == Some(found) && found == Some(expected);
        let mut op = WriteOp::new();
        let generation = match (state.base_exists, found) {
            (true, Some(g)) if g == expected || g == expected + 1 => {
                if g == 0 {
                    // No generation yet: the guard is that none was set meanwhile.
                    op = op.compare_xattr(GENERATION_XATTR, Comparison::Equal, Vec::<u8>::new());
                } else {
                    op = op.compare_xattr(GENERATION_XATTR, Comparison::Equal, encode_u64(g));
                }
                g
            }
            (false, Some(g)) if g == expected + 1 => {
                op = op.compare_xattr(GENERATION_XATTR, Comparison::Equal, encode_u64(g));
                g
            }
            (false, None) => {
                op = op.create(true);
                0
            }
            (_, found) => {
                Counters::bump(&self.counters.flush_conflicts);
                return Err(TierError::FlushConflict {
                    object: name.to_string(),
                    expected,
                    found: found.unwrap_or(0),
                });
            }
        };
        let mut written = 0;
        if state.base_valid_bytes < state.size_bytes || state.shape_dirty {
            op = op.truncate(state.base_valid_bytes.min(state.size_bytes));
        }
        let block_bytes = state.block_bytes;
        // Ceph's granularity writes the whole cached object back (clean blocks hold the base
        // object's bytes), strata's only the dirty blocks.
        let flushed: Vec<u64> = if self.settings().promotes_whole_objects() {
            let mut blocks = state.present.clone();
            for block in state.dirty.iter() {
                blocks.insert(block);
            }
            blocks.iter().collect()
        } else {
            state.dirty.iter().collect()
        };
        for (first, end) in runs(flushed) {
            let start = first * block_bytes;
            let stop = (end * block_bytes).min(state.size_bytes);
            if stop <= start {
                continue;
            }
            let mut data = self.cache.read(name, start, stop - start).await?;
            data.resize((stop - start) as usize, 0);
            written += data.len() as u64;
            op = op.write(start, Bytes::from(data));
        }
        op = op.truncate(state.size_bytes);
        if state.meta_dirty {
            let cache_xattrs = user_xattrs(self.cache.get_xattrs(name).await?);
            let base_xattrs = match prefetched_xattrs {
                Some(xattrs) if xattrs_current => xattrs,
                _ => self.base_user_xattrs(name).await?,
            };
            for stale in base_xattrs
                .keys()
                .filter(|k| !cache_xattrs.contains_key(*k))
            {
                op = op.remove_xattr(stale.clone());
            }
            for (key, value) in cache_xattrs {
                op = op.set_xattr(key, value);
            }
            let omap = all_omap(self.cache.as_ref(), name).await?;
            if self.base_keeps_omap() {
                op = op.omap_clear();
                if !omap.is_empty() {
                    op = op.omap_set(omap);
                }
            } else if !omap.is_empty() {
                return Err(RadosError::NotSupported(format!(
                    "{name} has omap, which the base pool {:?} cannot keep (erasure-coded): it \
                     stays dirty in the cache; remove its omap to let it flush",
                    self.base.pool().name
                ))
                .into());
            }
        }
        let op = op
            .set_xattr(GENERATION_XATTR, encode_u64(generation + 1))
            .set_xattr(VERSION_XATTR, encode_u64(state.version));
        Ok(Prepared::Write(PreparedFlush {
            op,
            snapshot: state,
            expected,
            generation,
            written,
        }))
    }

    /// Records a flush's result under the object's lock: clean when nothing changed since it
    /// was prepared, else the new base generation with the object still dirty.
    async fn finish_flush(
        &self,
        name: &str,
        flush: PreparedFlush,
        result: rados::Result<()>,
    ) -> Result<u64> {
        let PreparedFlush {
            snapshot,
            expected,
            generation,
            written,
            ..
        } = flush;
        match result {
            Ok(()) => {}
            Err(RadosError::CompareFailed(_)) | Err(RadosError::Exists(_)) => {
                Counters::bump(&self.counters.flush_conflicts);
                return Err(TierError::FlushConflict {
                    object: name.to_string(),
                    expected,
                    found: generation,
                });
            }
            Err(e) => return Err(e.into()),
        }
        let Some(current) = self.cached_state(name) else {
            return Ok(written);
        };
        let unchanged = current.version == snapshot.version
            && current.exists == snapshot.exists
            && current.size_bytes == snapshot.size_bytes
            && current.dirty == snapshot.dirty
            && current.meta_dirty == snapshot.meta_dirty
            && current.shape_dirty == snapshot.shape_dirty
            && current.base_valid_bytes == snapshot.base_valid_bytes;
        let mut next = current;
        next.base_exists = true;
        next.base_generation = generation + 1;
        if unchanged {
            next.dirty.clear();
            next.meta_dirty = false;
            next.shape_dirty = false;
            next.base_valid_bytes = next.size_bytes;
        }
        self.cache
            .operate(name, WriteOp::new().set_xattr(STATE_XATTR, next.encode()))
            .await?;
        self.set_cached_state(name, Some(next));
        Counters::bump(&self.counters.flushes);
        Counters::add(&self.counters.flushed_bytes, written);
        Ok(written)
    }

    /// Flushes (if dirty) and removes an object from the cache.
    pub(crate) async fn evict_locked(&self, name: &str) -> Result<()> {
        if self.cached_state(name).is_none() {
            return Ok(());
        }
        self.flush_locked(name).await?;
        if self.cached_state(name).is_none() {
            return Ok(());
        }
        match self.cache.remove(name).await {
            Ok(()) | Err(RadosError::NotFound(_)) => {}
            Err(e) => return Err(e.into()),
        }
        self.set_cached_state(name, None);
        Counters::bump(&self.counters.evictions);
        Ok(())
    }

    /// Flushes and evicts an object, taking its lock. A dirty object is flushed first without
    /// holding its lock over the base pool's write ([`Tier::flush`]); one written again
    /// meanwhile is flushed again the same way (never under the lock, so no client op waits
    /// for the HDDs), and left for a later pass (`Busy`) if it keeps being written.
    pub async fn evict(&self, name: &str) -> Result<()> {
        for _ in 0..EVICT_FLUSH_ATTEMPTS {
            if self.is_flushing(name) {
                return Err(TierError::Busy(format!(
                    "{name}: a flush of this object is in flight"
                )));
            }
            if self.cached_state(name).is_some_and(|s| s.is_dirty()) {
                self.flush(name).await?;
            }
            let _guard = self.lock_for_background(name).await;
            if self.cached_state(name).is_some_and(|s| s.is_dirty()) && !self.is_flushing(name) {
                // Written while it was flushed: flush again, unlocked.
                continue;
            }
            self.evict_locked(name).await?;
            self.policy_forget(name);
            return Ok(());
        }
        Err(TierError::Busy(format!(
            "{name}: written during each of {EVICT_FLUSH_ATTEMPTS} flushes ahead of its eviction; \
             left for a later pass"
        )))
    }
}
