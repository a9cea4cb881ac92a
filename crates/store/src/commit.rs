//! The committer: group commit of prepared transactions.
//!
//! A flusher thread takes whatever transactions are queued (up to `batch_transactions_max`),
//! makes the batch's write-behind writes and hands the batch to the committer thread, then
//! goes on with the next batch. The committer:
//! 1. appends all the batch's metadata changes (and the data of deferred writes) as one
//!    record to the write-ahead log, which lives on the same device (`wal.rs`);
//! 2. flushes the device once: the flush covers the batch's data, written before, and its
//!    record;
//! 3. applies the changes to the metadata database without a sync, batches in order;
//! 4. only then it returns the extents those transactions freed to the allocator, updates the
//!    counters, answers the callers and releases their object locks.
//!
//! A failure in 1 or 2 poisons the store: the batch's callers get the error, later writes get
//! `Poisoned`, because what reached the media is unknown.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, OwnedRwLockWriteGuard};

use crate::allocator::DeviceExtent;
use crate::cache::Cached;
use crate::error::{Result, StoreError};
use crate::meta::{self, Space, WAL_SEQUENCE_KEY};
use crate::store::Inner;
use crate::types::CommitStats;
use crate::wal::{self, DEVICE_FLUSHED};
use crate::write::Fresh;

/// One omap change, applied in order.
#[derive(Debug)]
pub(crate) enum OmapChange {
    Set(Vec<u8>, Vec<u8>),
    Remove(Vec<u8>),
}

/// The metadata change of one object.
pub(crate) struct ObjectUpdate {
    /// Its collection (for the per-collection accounting of omap bytes).
    pub collection: String,
    /// Key in `objects`.
    pub key: Vec<u8>,
    /// Prefix of its omap keys.
    pub omap_prefix: Vec<u8>,
    /// The new onode; `None` removes the object.
    pub onode: Option<Vec<u8>>,
    /// Remove every omap key first.
    pub omap_clear: bool,
    /// The object's lock shard and its state once committed, for the onode cache.
    pub shard: usize,
    pub cached: Cached,
    pub omap: Vec<OmapChange>,
}

/// Changes of the in-memory counters once a transaction is durable.
#[derive(Debug, Default)]
pub(crate) struct Deltas {
    pub stored_bytes: i64,
    pub onode_bytes: i64,
    pub collections: BTreeMap<String, UsageDelta>,
}

/// Change of one collection's [`crate::CollectionUsage`].
#[derive(Debug, Default)]
pub(crate) struct UsageDelta {
    pub objects: i64,
    pub stored_bytes: i64,
    pub allocated_bytes: i64,
    pub metadata_bytes: i64,
}

/// A prepared transaction waiting for its commit.
pub(crate) struct Pending {
    pub updates: Vec<ObjectUpdate>,
    /// Extents that committed onodes stop referencing: free once the commit is durable.
    pub freed: Vec<DeviceExtent>,
    /// Extents allocated for the new data: given back if the transaction never commits.
    pub fresh: Fresh,
    /// (device offset, data) of every extent it wrote, when it is small enough to defer;
    /// empty otherwise.
    pub deferred: Vec<(u64, Vec<u8>)>,
    /// (device offset, data) of the extents it left to the flusher to write (write-behind).
    pub writes: Vec<(u64, Vec<u8>)>,
    pub deltas: Deltas,
    /// The object locks, released after the answer.
    #[expect(
        dead_code,
        reason = "held, never read: dropped with the pending transaction"
    )]
    pub guards: Vec<OwnedRwLockWriteGuard<()>>,
    pub reply: Option<oneshot::Sender<Result<()>>>,
}

/// Starts the two commit stages; the returned thread (the flusher) ends when every sender of
/// `queue` is gone, the queue is drained and the committer has answered everything.
pub(crate) fn spawn(
    inner: Arc<Inner>,
    queue: mpsc::Receiver<Pending>,
    runtime: tokio::runtime::Handle,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    // A rendezvous: the writes of batch N + 1 overlap the commit of batch N, but the flusher
    // takes batch N + 2 only once the committer took N + 1. With a slot for one more batch,
    // three batches were in flight and each held fewer transactions: 3.4 per batch against
    // 4.7, and 220-260 µs of CPU per replicated 4 KiB write against 185-210
    // (`bench_cluster --replicas 3 --concurrency 16`, back-to-back runs), the commit's fixed
    // cost being most of a small batch's.
    let (stage, flushed) = std::sync::mpsc::sync_channel::<Flushed>(0);
    let committer = {
        let inner = Arc::clone(&inner);
        let runtime = runtime.clone();
        std::thread::Builder::new()
            .name("store-commit".into())
            .spawn(move || run_committer(&inner, flushed, &runtime))?
    };
    std::thread::Builder::new()
        .name("store-flush".into())
        .spawn(move || {
            run_flusher(&inner, queue, &runtime, stage);
            let _ = committer.join();
        })
}

/// A batch leaving stage 1.
struct Flushed {
    batch: Vec<Pending>,
    /// The store was poisoned before the batch: it is refused.
    refused: bool,
}

/// Stage 1: takes what is queued (a batch), makes its write-behind writes and hands it to
/// the committer.
fn run_flusher(
    inner: &Inner,
    mut queue: mpsc::Receiver<Pending>,
    runtime: &tokio::runtime::Handle,
    stage: std::sync::mpsc::SyncSender<Flushed>,
) {
    let batch_max = inner.config.batch_transactions_max;
    while let Some(first) = queue.blocking_recv() {
        let mut batch: Vec<Pending> = Vec::with_capacity(batch_max.min(64));
        batch.push(first);
        while batch.len() < batch_max {
            match queue.try_recv() {
                Ok(pending) => batch.push(pending),
                Err(_) => break,
            }
        }
        let refused = inner.poisoned.load(Ordering::Acquire);
        if !refused {
            write_behind(inner, runtime, &mut batch);
            if batch.is_empty() {
                continue;
            }
        }
        if stage.send(Flushed { batch, refused }).is_err() {
            return;
        }
    }
}

/// Adjacent write-behind extents are joined into one device write of at most this many bytes.
const RUN_BYTES_MAX: usize = 1 << 20;

/// Makes the device writes the batch's transactions left to the flusher (write-behind), on
/// this thread, extents that follow each other on the device as one write (the allocator
/// hands out neighbouring space to transactions prepared one after another). A transaction
/// whose data cannot be written is answered with the error and leaves the batch (dropping it
/// gives its fresh extents back and releases its locks); the others go on, as when `apply`
/// made its own writes.
fn write_behind(inner: &Inner, runtime: &tokio::runtime::Handle, batch: &mut Vec<Pending>) {
    // (device offset, transaction, write) of every extent to write, in device order.
    let mut pieces: Vec<(u64, usize, usize)> = Vec::new();
    for (transaction, pending) in batch.iter().enumerate() {
        for (write, (offset_bytes, _)) in pending.writes.iter().enumerate() {
            pieces.push((*offset_bytes, transaction, write));
        }
    }
    if pieces.is_empty() {
        return;
    }
    pieces.sort_unstable();
    let data = |&(_, transaction, write): &(u64, usize, usize)| -> &[u8] {
        &batch[transaction].writes[write].1
    };
    let mut failed: Vec<Option<StoreError>> = batch.iter().map(|_| None).collect();
    let mut start = 0;
    while start < pieces.len() {
        let mut end = start + 1;
        let mut run_bytes = data(&pieces[start]).len();
        while end < pieces.len()
            && pieces[end].0 == pieces[start].0 + run_bytes as u64
            && run_bytes + data(&pieces[end]).len() <= RUN_BYTES_MAX
        {
            run_bytes += data(&pieces[end]).len();
            end += 1;
        }
        let run = &pieces[start..end];
        let written = if let [single] = run {
            inner.device.write_blocking(single.0, data(single), runtime)
        } else {
            // Gathered straight into memory O_DIRECT takes, so a file device makes no
            // bounce copy of the run (a single piece it bounces: the same one copy).
            let parts: Vec<&[u8]> = run.iter().map(data).collect();
            let alignment = inner.device.block_size_bytes() as usize;
            let joined = device::AlignedBuffer::gathered(&parts, alignment);
            inner
                .device
                .write_blocking(run[0].0, joined.as_slice(), runtime)
        };
        if written.is_err() {
            // Which transactions failed: each of their extents on its own.
            for piece in run {
                if let Err(error) = inner.device.write_blocking(piece.0, data(piece), runtime) {
                    failed[piece.1] = Some(StoreError::from(error));
                }
            }
        }
        start = end;
    }
    if failed.iter().all(Option::is_none) {
        return;
    }
    let mut failed = failed.into_iter();
    batch.retain_mut(|pending| match failed.next().flatten() {
        None => true,
        Some(error) => {
            if let Some(reply) = pending.reply.take() {
                let _ = reply.send(Err(error));
            }
            false
        }
    });
}

/// Stage 2: commits each flushed batch's metadata, frees, counts and answers.
fn run_committer(
    inner: &Inner,
    flushed: std::sync::mpsc::Receiver<Flushed>,
    runtime: &tokio::runtime::Handle,
) {
    let mut state = CommitterState::default();
    for Flushed { mut batch, refused } in flushed {
        let result = if refused || inner.poisoned.load(Ordering::Acquire) {
            Err(StoreError::Poisoned)
        } else {
            commit_batch(inner, &mut batch, &mut state, runtime)
        };
        match &result {
            Ok(()) => inner
                .commit_counters
                .count_batch(batch.len(), inner.config.durable),
            Err(error) => poison(inner, error),
        }
        for mut pending in batch.drain(..) {
            // A failed batch may or may not have reached the media: the callers learn that
            // the store is poisoned (the cause is logged).
            let answer = result
                .as_ref()
                .map(|_| ())
                .map_err(|_| StoreError::Poisoned);
            if let Some(reply) = pending.reply.take() {
                let _ = reply.send(answer);
            }
        }
    }
}

/// What the committer carries from batch to batch.
#[derive(Default)]
struct CommitterState {
    /// Deferred writes in the log not yet covered by a device flush.
    records: u64,
    /// The encoded record, reused.
    buffer: Vec<u8>,
}

/// Times a batch's log record is written before a failure poisons the store.
const RECORD_WRITE_ATTEMPTS: u32 = 8;

/// Counters behind [`CommitStats`]; only the commit threads add to them.
#[derive(Default)]
pub(crate) struct CommitCounters {
    transactions: AtomicU64,
    batches: AtomicU64,
    pub device_flushes: AtomicU64,
    metadata_syncs: AtomicU64,
}

impl CommitCounters {
    fn count_batch(&self, transactions: usize, durable: bool) {
        self.transactions
            .fetch_add(transactions as u64, Ordering::Relaxed);
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.metadata_syncs
            .fetch_add(u64::from(durable), Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> CommitStats {
        CommitStats {
            transactions: self.transactions.load(Ordering::Relaxed),
            batches: self.batches.load(Ordering::Relaxed),
            device_flushes: self.device_flushes.load(Ordering::Relaxed),
            metadata_syncs: self.metadata_syncs.load(Ordering::Relaxed),
        }
    }
}

fn poison(inner: &Inner, error: &StoreError) {
    if !inner.poisoned.swap(true, Ordering::AcqRel) {
        tracing::error!(%error, "store flush or commit failed; the store is poisoned");
    }
}

/// Commits a flushed batch's metadata and, on success, frees what it freed and updates the
/// counters.
fn commit_batch(
    inner: &Inner,
    batch: &mut [Pending],
    state: &mut CommitterState,
    runtime: &tokio::runtime::Handle,
) -> Result<()> {
    let mut omap_delta = 0i64;
    let mut changes = meta::MetaBatch::default();
    for pending in batch.iter_mut() {
        for update in &mut pending.updates {
            let omap_before = omap_delta;
            match update.onode.take() {
                Some(bytes) => changes.insert(Space::Objects, update.key.clone(), bytes),
                None => changes.remove(Space::Objects, update.key.clone()),
            }
            omap_delta += stage_omap(inner, &mut changes, update)?;
            let delta = omap_delta - omap_before;
            if delta != 0 {
                pending
                    .deltas
                    .collections
                    .entry(update.collection.clone())
                    .or_default()
                    .metadata_bytes += delta;
            }
        }
    }
    let durable = inner.config.durable;
    let deferred: Vec<&(u64, Vec<u8>)> = if durable {
        batch.iter().flat_map(|p| p.deferred.iter()).collect()
    } else {
        Vec::new()
    };
    {
        let mut log = inner.wal();
        let sequence = log.next_sequence;
        changes.insert(
            Space::Super,
            WAL_SEQUENCE_KEY.to_vec(),
            sequence.to_le_bytes().to_vec(),
        );
        // Every earlier record's data is on the device: a replay needs to rewrite or check
        // nothing before this record.
        let encode = |buffer: &mut Vec<u8>, generation: u64, records: u64| {
            let flags = if records == 0 { DEVICE_FLUSHED } else { 0 };
            wal::encode_record(buffer, generation, sequence, flags, &changes, &deferred);
        };
        encode(&mut state.buffer, log.generation, state.records);
        if !log.fits(state.buffer.len()) {
            // Checkpoint first: every earlier batch is in the database, which is persisted,
            // and its data is on the device once flushed (the log's emptying flushes).
            inner.meta.persist()?;
            log.reset_blocking(runtime)?;
            state.records = 0;
            encode(&mut state.buffer, log.generation, state.records);
            if !log.fits(state.buffer.len()) {
                return Err(StoreError::metadata(format!(
                    "the batch's {}-byte metadata record exceeds the {}-byte metadata log",
                    state.buffer.len(),
                    log.region_bytes()
                )));
            }
        }
        let start_bytes = log.len_bytes();
        // A failed (or torn) record write is written again over itself: nothing after it
        // exists yet, and until the flush nothing of it counts. Only a device that keeps
        // failing poisons the store.
        let mut attempts = 0;
        while let Err(error) = log.append_blocking(&state.buffer, runtime) {
            attempts += 1;
            if attempts >= RECORD_WRITE_ATTEMPTS {
                return Err(error);
            }
            tracing::warn!(%error, attempts, "metadata log write failed; writing it again");
        }
        log.next_sequence += 1;
        if durable {
            // One flush: the batch's data (written before the record) and its record.
            if let Err(error) = inner.device.flush_blocking(runtime) {
                // The batch fails: take its record back, so that a mount does not make it
                // visible even if it and its data did reach the device.
                log.next_sequence -= 1;
                if let Err(cut) = log.truncate_blocking(start_bytes, runtime) {
                    tracing::error!(%cut, "could not take back the record of a failed batch");
                }
                return Err(error.into());
            }
            inner
                .commit_counters
                .device_flushes
                .fetch_add(1, Ordering::Relaxed);
            state.records = 0;
        } else {
            state.records += deferred.len() as u64;
        }
        // Only now, with the data and the record durable, do readers see the batch.
        changes.commit(&inner.meta)?;
        if state.records == 0 && log.len_bytes() > log.region_bytes() / 2 {
            inner.meta.persist()?;
            log.reset_blocking(runtime)?;
        }
    }
    // Committed; the writers still hold their object locks, so the cache may follow.
    for pending in batch.iter_mut() {
        for update in &mut pending.updates {
            let cached = update.cached.take();
            inner
                .onodes
                .insert(update.shard, std::mem::take(&mut update.key), cached);
        }
    }
    // Durable: the freed extents are referenced by no committed onode any more.
    {
        // Extents freed while deferred records exist stay held: a replay could write stale
        // data into them, so they are reused only once the records are retired.
        let mut held = inner.held();
        for pending in batch.iter_mut() {
            pending.fresh.armed = false;
            held.append(&mut pending.freed);
        }
        let mut allocator = inner.allocator();
        if state.records == 0 {
            for extent in held.drain(..) {
                allocator.release(extent);
            }
        }
        if cfg!(debug_assertions) {
            allocator.check_invariants();
        }
    }
    let mut counters = inner.counters();
    counters.omap_bytes = add(counters.omap_bytes, omap_delta);
    for pending in batch.iter() {
        let deltas = &pending.deltas;
        counters.stored_bytes = add(counters.stored_bytes, deltas.stored_bytes);
        counters.onode_bytes = add(counters.onode_bytes, deltas.onode_bytes);
        for (collection, delta) in &deltas.collections {
            let usage = counters.collections.entry(collection.clone()).or_default();
            usage.objects = add(usage.objects, delta.objects);
            usage.stored_bytes = add(usage.stored_bytes, delta.stored_bytes);
            usage.allocated_bytes = add(usage.allocated_bytes, delta.allocated_bytes);
            usage.metadata_bytes = add(usage.metadata_bytes, delta.metadata_bytes);
            if *usage == crate::CollectionUsage::default() {
                counters.collections.remove(collection);
            }
        }
    }
    Ok(())
}

/// Adds one object's omap changes to the batch and returns the change of omap bytes. The
/// object's lock is held, so what the database holds for it is what the batch changes.
fn stage_omap(inner: &Inner, changes: &mut meta::MetaBatch, update: &ObjectUpdate) -> Result<i64> {
    let mut delta = 0i64;
    if update.omap_clear {
        for entry in inner.meta.omap.prefix(&update.omap_prefix) {
            let (key, value) = entry.into_inner()?;
            delta -= (key.len() + value.len()) as i64;
            changes.remove(Space::Omap, key.to_vec());
        }
    }
    // The value a key holds before `change`: the batch's, else the database's (after a clear,
    // every key the database held is a removal in the batch).
    let old_bytes = |changes: &meta::MetaBatch, full: &[u8]| -> Result<Option<usize>> {
        Ok(match changes.pending(Space::Omap, full) {
            Some(value) => value.map(<[u8]>::len),
            None => inner.meta.omap.size_of(full)?.map(|bytes| bytes as usize),
        })
    };
    for change in &update.omap {
        let full = match change {
            OmapChange::Set(key, _) | OmapChange::Remove(key) => {
                [update.omap_prefix.as_slice(), key].concat()
            }
        };
        if let Some(old) = old_bytes(changes, &full)? {
            delta -= (full.len() + old) as i64;
        }
        match change {
            OmapChange::Set(_, value) => {
                delta += (full.len() + value.len()) as i64;
                changes.insert(Space::Omap, full, value.clone());
            }
            OmapChange::Remove(_) => changes.remove(Space::Omap, full),
        }
    }
    Ok(delta)
}

fn add(value: u64, delta: i64) -> u64 {
    let result = value as i64 + delta;
    debug_assert!(result >= 0, "counter below zero: {value} + {delta}");
    result.max(0) as u64
}
