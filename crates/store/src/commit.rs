//! The committer: group commit of prepared transactions, in two stages on threads of their
//! own, each batch moving through them in order:
//! 1. the writer takes whatever transactions are queued (up to `batch_transactions_max`, a
//!    batch) and seals it (`seal`): it encodes all the batch's metadata changes (and the
//!    data of deferred writes) as one record of the write-ahead log, which lives on the same
//!    device (`wal.rs`), and writes that record and the batch's write-behind data (adjacent
//!    extents as one write) at once (`Device::write_many_blocking`: on a file device, one
//!    io_uring submission and one sleep until all are done);
//! 2. one of `flushes_in_flight_max` sync threads (`finish`) flushes the device once, which
//!    makes the batch's data and its record durable; then, in batch order, it applies the
//!    changes to the metadata database without a sync, returns the extents the batch freed
//!    to the allocator, updates the counters, answers the callers and releases their object
//!    locks.
//!
//! These threads run on the CPU that takes the device's completion interrupts when there is
//! one such CPU (`StoreConfig::pin_to_interrupt_cpu`): they spend their time waiting for it.
//!
//! Why the record beside the data: the two writes need not be ordered (a mount checks the
//! data of every record whose flush may not have completed), and one after the other they
//! were two write latencies of a batch's path (`examples/bench_cluster.rs --replicas 1`,
//! alternating: 27.3k and 29.9k writes/s against 23.3k and 27.3k with a flusher thread
//! writing the data before a committer thread wrote the record).
//!
//! Why several flushes at once: a flush here takes 100-1000 µs, a 4 KiB write 50-100. With
//! one flush at a time the committer waited for each, so a batch was all the writes that
//! arrived during a record write, a flush and an apply, and throughput was a batch per
//! cycle (`examples/bench_cluster.rs --replicas 1`: 6.8 writes per batch, 17.7k writes/s
//! with fio's random writes at 60-83k). Overlapping flushes is what fio's own durable jobs
//! do (8 jobs each writing and fdatasyncing 4 KiB: 33.6k/s, one job: 0.8-2.6k/s).
//!
//! Why the writer waits for its batch's writes before it takes the next batch: the writes
//! queued meanwhile make that next batch. Handing the writes to the sync threads, so the
//! writer only sealed, halved the batches (8.2 writes instead of 16-17 at 64 in flight),
//! doubled the flushes and lost throughput (`examples/bench_cluster.rs --replicas 1
//! --concurrency 64`, alternating, 2026-11-27: 31.2k, 30.9k and 32.9k writes/s against
//! 33.5k, 33.4k and 36.4k). Nor did 1 or 2 flushes in flight instead of 4, or other
//! placements of these threads, change the figure beyond the run-to-run spread (26-50k).
//! Nor did removing the hand-offs between these threads: one thread doing every batch's
//! writes, flush and answers on its own io_uring measured the same at 64 in flight and
//! slower at 256 (ARCHITECTURE.md, "Several batches flush at once").
//!
//! Where a write's time goes is counted per stage (`CommitStages`, in `CommitStats`). At 64
//! in flight on the development VM (2026-11-27, about 37k replica-1 writes/s), per write:
//! prepare 55-70 µs, queue 250-300, write 400-500, flush 430-540, order 55-105, apply
//! 130-220, answer 30-80. The write and flush stages hold the device's own write and flush
//! (p50 about 280 and 310-380 µs in the same runs); apply (the metadata database's memtable,
//! the onode cache) is the largest part that runs in batch order. Neither yielding the
//! writer's CPU to the sync thread right after the hand-off nor a smaller memtable (2 or
//! 4 MiB instead of 16) moved these stages or the throughput beyond the run-to-run spread.
//!
//! Order is what keeps this correct:
//! - a batch's flush starts after its data and its record were written, so when it
//!   completes they are durable, and so is every earlier record (written before it);
//! - batches are applied and answered in order, so a batch is acknowledged only when every
//!   earlier one is durable too (a mount reads the log up to its first invalid record);
//! - a record carries `flushed_before`, the first sequence whose flush had not completed when
//!   it was written: a mount checks the data of the records from the largest such value on
//!   only (and writes the deferred overwrites of every record it keeps again). A batch's flush moves it past the batch before the
//!   batch frees any extent or answers, so a record that reuses a freed extent, or changes an
//!   object the batch changed, always says that the batch was flushed: a mount never checks
//!   a record whose data was legitimately overwritten since (when the value moved after the
//!   answer, a record sealed in between could omit it);
//! - deferred overwrites are made after their batch's flush, before its answer, so a record
//!   a mount drops never made one, and a later transaction on the object (whose record says
//!   the batch was flushed) never has its checked data overwritten by one;
//! - a checkpoint (database persisted, log emptied) first waits for every batch in flight,
//!   and flushes the device if deferred overwrites were made since the last one.
//!
//! A failure to write a record, flush or commit poisons the store: the batch's callers get
//! the error, later writes get `Poisoned`, because what reached the media is unknown.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use tokio::sync::{mpsc, oneshot, OwnedRwLockWriteGuard};

use crate::allocator::DeviceExtent;
use crate::error::{Result, StoreError};
use crate::meta::{self, Space, WAL_SEQUENCE_KEY};
use crate::store::Inner;
use crate::types::{CommitStages, CommitStats};
use crate::wal;
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
    /// Prefix of its omap keys; empty when the update neither clears nor changes them.
    pub omap_prefix: Vec<u8>,
    /// The new onode; `None` removes the object.
    pub onode: Option<Vec<u8>>,
    /// Remove every omap key first.
    pub omap_clear: bool,
    /// The object's lock shard, for the onode cache (which takes `onode` once committed).
    pub shard: usize,
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
    /// (device offset, data) of the extents it left to the writer stage (write-behind).
    pub writes: Vec<(u64, bytes::Bytes)>,
    /// Digests of the ranges it wrote and still references, for its record (see `wal`).
    pub digests: Vec<wal::DataDigest>,
    pub deltas: Deltas,
    /// The object locks, released after the answer.
    #[expect(
        dead_code,
        reason = "held, never read: dropped with the pending transaction"
    )]
    pub guards: Vec<OwnedRwLockWriteGuard<()>>,
    pub reply: Option<oneshot::Sender<Result<()>>>,
    pub timing: Timing,
}

/// When a transaction entered each stage of its path (see [`CommitStages`]); the sync thread
/// that answers it adds the differences to the store's counters.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timing {
    pub applied: Instant,
    pub queued: Instant,
    pub taken: Instant,
    pub written: Instant,
}

impl Timing {
    /// Every stage starting at `at` (the later ones are set as the transaction moves on).
    pub fn starting(at: Instant) -> Timing {
        Timing {
            applied: at,
            queued: at,
            taken: at,
            written: at,
        }
    }
}

/// Starts the commit stages; the returned thread (the writer) ends when every sender of
/// `queue` is gone, the queue is drained and every batch has been answered.
pub(crate) fn spawn(
    inner: Arc<Inner>,
    queue: mpsc::Receiver<Pending>,
    runtime: tokio::runtime::Handle,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    // Sealed batches wait for a free sync thread in a queue of `SEALED_QUEUED_MAX`, so at most
    // `flushes_in_flight_max` flushes run at once and the writer stops sealing once the queue
    // is full too (the transactions queued meanwhile make the next batch).
    let (to_sync, sealed) = std::sync::mpsc::sync_channel::<Sealed>(SEALED_QUEUED_MAX);
    let sealed = Arc::new(Mutex::new(sealed));
    let pipeline = Arc::new(Pipeline::default());
    let cpu = pipeline_cpu(&inner);
    let mut threads = Vec::with_capacity(inner.config.flushes_in_flight_max + 1);
    for index in 0..inner.config.flushes_in_flight_max {
        let inner = Arc::clone(&inner);
        let sealed = Arc::clone(&sealed);
        let pipeline = Arc::clone(&pipeline);
        let runtime = runtime.clone();
        threads.push(
            std::thread::Builder::new()
                .name(format!("store-sync-{index}"))
                .spawn(move || {
                    pin(cpu);
                    run_syncer(&inner, &sealed, &pipeline, &runtime)
                })?,
        );
    }
    std::thread::Builder::new()
        .name("store-commit".into())
        .spawn(move || {
            pin(cpu);
            run_writer(&inner, queue, to_sync, &pipeline, &runtime);
            for thread in threads {
                let _ = thread.join();
            }
        })
}

/// The CPU for the commit pipeline's threads (see `StoreConfig::pin_to_interrupt_cpu`): the
/// one that takes every completion interrupt of the device, if the process may also run on
/// others (pinned to its only CPU, nothing changes; pinned elsewhere, the mask is left alone).
fn pipeline_cpu(inner: &Inner) -> Option<usize> {
    if !inner.config.pin_to_interrupt_cpu {
        return None;
    }
    let cpus = inner.device.interrupt_cpus()?;
    let [cpu] = cpus.as_slice() else {
        return None;
    };
    // The process's mask, not this thread's: a store opened from a runtime worker kept off
    // this CPU (`cluster::runtime`) still pins its pipeline here.
    let allowed = device::affinity::process_allowed_cpus().ok()?;
    if allowed.len() < 2 || !allowed.contains(cpu) {
        return None;
    }
    tracing::info!(
        device = inner.device.name(),
        cpu,
        "commit threads run on the CPU that takes the device's interrupts"
    );
    Some(*cpu)
}

/// Pins the calling thread to `cpu`, if given; a refusal only costs speed, so it is logged.
fn pin(cpu: Option<usize>) {
    if let Some(cpu) = cpu {
        if let Err(error) = device::affinity::pin_current_thread(cpu) {
            tracing::warn!(%error, cpu, "could not pin a commit thread to its CPU");
        }
    }
}

/// Sealed batches waiting for a sync thread at most. With none (a rendezvous) the writer,
/// the stage that limits throughput, waited for a sync thread to wake for every batch:
/// `examples/bench_cluster.rs --replicas 1`, alternating, 30.9k, 28.7k and 31.1k writes/s
/// with 2 against 28.4k, 27.3k and 29.4k with none.
const SEALED_QUEUED_MAX: usize = 2;

/// A batch whose data and record are written, on its way to its flush (stage 2).
struct Sealed {
    batch: Vec<Pending>,
    /// Its place in the pipeline: batches finish in ticket order.
    ticket: u64,
    /// Its record's sequence and where the record starts in the log (to take it back).
    sequence: u64,
    record_start_bytes: u64,
    /// The metadata changes, applied once the batch is durable.
    changes: meta::MetaBatch,
    omap_delta: i64,
}

type DeviceResult = std::result::Result<(), device::DeviceError>;

/// Adjacent write-behind extents are joined into one device write of at most this many bytes.
const RUN_BYTES_MAX: usize = 1 << 20;

/// Writes a batch's log record and the data its transactions left to the writer
/// (write-behind) at once (`Device::write_many_blocking`: one submission, one sleep), extents
/// that follow each other on the device as one write (the allocator hands out neighbouring
/// space to transactions prepared one after another). Returns the record's outcome and, per
/// transaction, the error that kept its data from the device, if any (empty if none did).
fn write_batch(
    inner: &Inner,
    runtime: &tokio::runtime::Handle,
    batch: &[Pending],
    record: &wal::PlacedRecord,
) -> (DeviceResult, Vec<Option<StoreError>>) {
    // (device offset, transaction, write) of every extent to write, in device order.
    let mut pieces: Vec<(u64, usize, usize)> = Vec::new();
    for (transaction, pending) in batch.iter().enumerate() {
        for (write, (offset_bytes, _)) in pending.writes.iter().enumerate() {
            pieces.push((*offset_bytes, transaction, write));
        }
    }
    pieces.sort_unstable();
    let data = |&(_, transaction, write): &(u64, usize, usize)| -> &[u8] {
        &batch[transaction].writes[write].1
    };
    // Runs of adjacent pieces: (first piece, end piece, joined buffer if more than one).
    let mut runs: Vec<(usize, usize, Option<device::AlignedBuffer>)> = Vec::new();
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
        // Gathered straight into memory O_DIRECT takes, so a file device makes no bounce
        // copy of the run (a single piece it bounces: the same one copy).
        let joined = (end - start > 1).then(|| {
            let parts: Vec<&[u8]> = pieces[start..end].iter().map(data).collect();
            device::AlignedBuffer::gathered(&parts, inner.device.block_size_bytes() as usize)
        });
        runs.push((start, end, joined));
        start = end;
    }
    let mut writes: Vec<(u64, &[u8])> = Vec::with_capacity(runs.len() + 1);
    writes.push((record.offset_bytes, record.buffer.as_slice()));
    for (start, _, joined) in &runs {
        let bytes = joined
            .as_ref()
            .map_or_else(|| data(&pieces[*start]), device::AlignedBuffer::as_slice);
        writes.push((pieces[*start].0, bytes));
    }
    let mut results = inner.device.write_many_blocking(&writes, runtime);
    // A write the device gave no outcome for (a broken implementation) counts as failed.
    results.resize_with(writes.len(), || {
        Err(device::DeviceError::io(
            "batch write",
            std::io::Error::other("the device reported no outcome"),
        ))
    });
    let mut results = results.into_iter();
    let record_result = results.next().unwrap_or(Ok(()));
    let mut failed: Vec<Option<StoreError>> = batch.iter().map(|_| None).collect();
    let mut any_failed = false;
    for ((start, end, _), written) in runs.iter().zip(results) {
        if written.is_err() {
            // Which transactions failed: each of their extents on its own.
            for piece in &pieces[*start..*end] {
                if let Err(error) = inner.device.write_blocking(piece.0, data(piece), runtime) {
                    failed[piece.1] = Some(StoreError::from(error));
                    any_failed = true;
                }
            }
        }
    }
    if !any_failed {
        failed.clear();
    }
    (record_result, failed)
}

/// The order of stage 3: which ticket finishes next, and what is known flushed.
#[derive(Default)]
struct Pipeline {
    state: Mutex<PipelineState>,
    changed: Condvar,
}

#[derive(Default)]
struct PipelineState {
    /// Tickets finished (answered): the next ticket to finish.
    finished: u64,
    /// Every record before this sequence, and its data, is on the device.
    flushed_before: u64,
}

impl Pipeline {
    fn lock(&self) -> MutexGuard<'_, PipelineState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until every ticket before `ticket` has finished.
    fn wait_for_turn(&self, ticket: u64) {
        let mut state = self.lock();
        while state.finished < ticket {
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Ends the current ticket's turn.
    fn finish_turn(&self) {
        self.lock().finished += 1;
        self.changed.notify_all();
    }

    fn flushed_before(&self) -> u64 {
        self.lock().flushed_before
    }

    fn set_flushed_before(&self, sequence: u64) {
        let mut state = self.lock();
        state.flushed_before = state.flushed_before.max(sequence);
    }
}

/// Stage 1: takes whatever transactions are queued (a batch), seals it (writes its data and
/// its record) and hands it to a sync thread.
fn run_writer(
    inner: &Inner,
    mut queue: mpsc::Receiver<Pending>,
    to_sync: std::sync::mpsc::SyncSender<Sealed>,
    pipeline: &Pipeline,
    runtime: &tokio::runtime::Handle,
) {
    let batch_max = inner.config.batch_transactions_max;
    let mut state = CommitterState::default();
    while let Some(first) = queue.blocking_recv() {
        let mut batch: Vec<Pending> = Vec::with_capacity(batch_max.min(64));
        batch.push(first);
        while batch.len() < batch_max {
            match queue.try_recv() {
                Ok(pending) => batch.push(pending),
                Err(_) => break,
            }
        }
        let taken = Instant::now();
        for pending in &mut batch {
            pending.timing.taken = taken;
        }
        if inner.poisoned.load(Ordering::Acquire) {
            answer(batch, &Err(StoreError::Poisoned));
            continue;
        }
        match seal(inner, &mut batch, &mut state, pipeline, runtime) {
            Ok(None) => {}
            Ok(Some(mut sealed)) => {
                let written = Instant::now();
                for pending in &mut sealed.batch {
                    pending.timing.written = written;
                }
                state.sent += 1;
                if let Err(returned) = to_sync.send(sealed) {
                    // The sync threads are gone (they never return early): refuse it.
                    answer(returned.0.batch, &Err(StoreError::Poisoned));
                }
            }
            Err(error) => {
                poison(inner, &error);
                answer(batch, &Err(error));
            }
        }
    }
}

/// Stage 2: flushes the device for a sealed batch, then, in turn, applies, frees, counts and
/// answers.
fn run_syncer(
    inner: &Inner,
    sealed: &Mutex<std::sync::mpsc::Receiver<Sealed>>,
    pipeline: &Pipeline,
    runtime: &tokio::runtime::Handle,
) {
    let durable = inner.config.durable;
    loop {
        // The receiver's lock is held only while waiting for a batch, never while flushing.
        let next = sealed.lock().unwrap_or_else(|e| e.into_inner()).recv();
        let Ok(mut sealed) = next else {
            return;
        };
        let flushed = if durable {
            inner.device.flush_blocking(runtime)
        } else {
            Ok(())
        };
        let flush_end = Instant::now();
        pipeline.wait_for_turn(sealed.ticket);
        let turn_start = Instant::now();
        if durable && flushed.is_ok() {
            // Every earlier batch is finished, so this flush made every record up to this
            // one durable. Said before the batch frees extents or is answered: a record
            // sealed after either (one reusing an extent this batch freed, or the next
            // transaction on one of its objects) must carry it, or a mount could check this
            // batch's data after it was legitimately overwritten (see `wal`, `replay`).
            pipeline.set_flushed_before(sealed.sequence + 1);
        }
        let result = finish(inner, &mut sealed, flushed, runtime);
        let applied_end = Instant::now();
        // The stages up to the answer, summed over the batch (the answer's own time is added
        // once it is known).
        let mut stages = CommitStages::default();
        for pending in &sealed.batch {
            let timing = &pending.timing;
            let nanos =
                |from: Instant, to: Instant| to.saturating_duration_since(from).as_nanos() as u64;
            stages.prepare_ns += nanos(timing.applied, timing.queued);
            stages.queued_ns += nanos(timing.queued, timing.taken);
            stages.written_ns += nanos(timing.taken, timing.written);
            stages.flushed_ns += nanos(timing.written, flush_end);
            stages.ordered_ns += nanos(flush_end, turn_start);
            stages.applied_ns += nanos(turn_start, applied_end);
        }
        let transactions = sealed.batch.len() as u64;
        // Counted before the answer, so a caller that has its answer sees its transaction
        // counted; the answer's own time follows it.
        match &result {
            Ok(()) => inner
                .commit_counters
                .count_batch(transactions, durable, &stages),
            Err(error) => poison(inner, error),
        }
        answer(std::mem::take(&mut sealed.batch), &result);
        if result.is_ok() {
            inner.commit_counters.count_stages(&CommitStages {
                answered_ns: applied_end.elapsed().as_nanos() as u64 * transactions,
                ..CommitStages::default()
            });
        }
        pipeline.finish_turn();
    }
}

/// Answers every transaction of a batch and drops it (which releases its object locks and,
/// if it failed, gives its fresh extents back). A failed batch may or may not have reached
/// the media: its callers learn that the store is poisoned (the cause is logged).
fn answer(batch: Vec<Pending>, result: &Result<()>) {
    for mut pending in batch {
        let answer = result
            .as_ref()
            .map(|_| ())
            .map_err(|_| StoreError::Poisoned);
        if let Some(reply) = pending.reply.take() {
            let _ = reply.send(answer);
        }
    }
}

/// What the committer carries from batch to batch.
#[derive(Default)]
struct CommitterState {
    /// The encoded record, reused.
    buffer: Vec<u8>,
    /// Tickets handed to the sync threads.
    sent: u64,
}

impl CommitterState {
    /// Waits until every batch handed to the sync threads has finished.
    fn drain(&self, pipeline: &Pipeline) {
        pipeline.wait_for_turn(self.sent);
    }
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
    /// [`CommitStages`], in path order (`CommitStages::nanos`).
    stages_ns: [AtomicU64; 7],
}

impl CommitCounters {
    fn count_batch(&self, transactions: u64, durable: bool, stages: &CommitStages) {
        self.transactions.fetch_add(transactions, Ordering::Relaxed);
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.metadata_syncs
            .fetch_add(u64::from(durable), Ordering::Relaxed);
        self.count_stages(stages);
    }

    /// Adds to the stage times (a batch's answer time, after [`CommitCounters::count_batch`]
    /// counted the rest).
    fn count_stages(&self, stages: &CommitStages) {
        for (counter, nanos) in self.stages_ns.iter().zip(stages.nanos()) {
            counter.fetch_add(nanos, Ordering::Relaxed);
        }
    }

    pub fn snapshot(&self) -> CommitStats {
        CommitStats {
            transactions: self.transactions.load(Ordering::Relaxed),
            batches: self.batches.load(Ordering::Relaxed),
            device_flushes: self.device_flushes.load(Ordering::Relaxed),
            metadata_syncs: self.metadata_syncs.load(Ordering::Relaxed),
            stages: CommitStages::from_nanos(std::array::from_fn(|stage| {
                self.stages_ns[stage].load(Ordering::Relaxed)
            })),
        }
    }
}

fn poison(inner: &Inner, error: &StoreError) {
    if !inner.poisoned.swap(true, Ordering::AcqRel) {
        tracing::error!(%error, "store flush or commit failed; the store is poisoned");
    }
}

/// Checkpoint: waits for every batch in flight, persists the database (which then holds
/// every record's changes) and empties the log (which flushes the device).
fn checkpoint(
    inner: &Inner,
    state: &mut CommitterState,
    pipeline: &Pipeline,
    runtime: &tokio::runtime::Handle,
) -> Result<()> {
    state.drain(pipeline);
    if inner.poisoned.load(Ordering::Acquire) {
        return Err(StoreError::Poisoned);
    }
    let deferred = !inner.deferred_ranges().is_empty();
    if deferred {
        // The deferred overwrites made since the last checkpoint are durable only through the
        // log until the device is flushed: before the database takes their checksums for good
        // and the log forgets them.
        inner.device.flush_blocking(runtime)?;
    }
    inner.meta.persist()?;
    let mut log = inner.wal();
    log.reset_blocking(runtime)?;
    pipeline.set_flushed_before(log.next_sequence);
    drop(log);
    if deferred {
        // No record can be replayed over the extents held for it any more.
        let mut deferred = inner.deferred_ranges();
        let mut held = inner.held();
        let mut allocator = inner.allocator();
        for extent in held.drain(..) {
            allocator.release(extent);
        }
        deferred.clear();
    }
    Ok(())
}

/// A batch's metadata changes, ready for its record.
struct Staged {
    changes: meta::MetaBatch,
    /// Change of omap bytes, in total and per (transaction, collection) where not zero.
    omap_delta: i64,
    omap_deltas: Vec<(usize, String, i64)>,
}

/// Stages the metadata changes of a batch whose record gets `sequence` (the transactions'
/// onodes and omap changes, and the log sequence the database will have applied).
fn stage(inner: &Inner, batch: &[Pending], sequence: u64) -> Result<Staged> {
    let mut staged = Staged {
        changes: meta::MetaBatch::default(),
        omap_delta: 0,
        omap_deltas: Vec::new(),
    };
    for (index, pending) in batch.iter().enumerate() {
        for update in &pending.updates {
            match &update.onode {
                Some(bytes) => {
                    // Before the database can hold the key (see `presence`).
                    inner.presence.insert(&update.key);
                    staged
                        .changes
                        .insert(Space::Objects, update.key.clone(), bytes.clone())
                }
                None => staged.changes.remove(Space::Objects, update.key.clone()),
            }
            let delta = stage_omap(inner, &mut staged.changes, update)?;
            staged.omap_delta += delta;
            if delta != 0 {
                staged
                    .omap_deltas
                    .push((index, update.collection.clone(), delta));
            }
        }
    }
    staged.changes.insert(
        Space::Super,
        WAL_SEQUENCE_KEY.to_vec(),
        sequence.to_le_bytes().to_vec(),
    );
    Ok(staged)
}

/// Writes a batch's data and its log record, at once (`write_batch`). Neither needs the
/// other first, since a mount checks the data of every record whose flush may not have
/// completed.
/// A transaction whose data cannot be written is answered with the error and leaves the
/// batch (dropping it gives its fresh extents back and releases its locks), and the record
/// is written again over itself without it: nothing after it exists yet. `None`: every
/// transaction failed.
fn seal(
    inner: &Inner,
    batch: &mut Vec<Pending>,
    state: &mut CommitterState,
    pipeline: &Pipeline,
    runtime: &tokio::runtime::Handle,
) -> Result<Option<Sealed>> {
    let durable = inner.config.durable;
    let half_full = {
        let log = inner.wal();
        log.len_bytes() > log.region_bytes() / 2
    };
    if half_full {
        checkpoint(inner, state, pipeline, runtime)?;
    }
    let mut log = inner.wal();
    // Under the log's lock: a sync thread whose flush failed poisons the store before it
    // takes the lock to cut the log back, so no record is appended after that cut.
    if inner.poisoned.load(Ordering::Acquire) {
        return Err(StoreError::Poisoned);
    }
    let sequence = log.next_sequence;
    let mut staged = stage(inner, batch, sequence)?;
    let encode = |buffer: &mut Vec<u8>, generation: u64, staged: &Staged, batch: &[Pending]| {
        let deferred: Vec<&(u64, Vec<u8>)> = if durable {
            batch.iter().flat_map(|p| p.deferred.iter()).collect()
        } else {
            Vec::new()
        };
        let digests: Vec<&wal::DataDigest> = batch.iter().flat_map(|p| p.digests.iter()).collect();
        let flushed_before = pipeline.flushed_before();
        wal::encode_record(
            buffer,
            generation,
            sequence,
            flushed_before,
            &staged.changes,
            &deferred,
            &digests,
        );
    };
    encode(&mut state.buffer, log.generation, &staged, batch);
    if !log.fits(state.buffer.len()) {
        drop(log);
        checkpoint(inner, state, pipeline, runtime)?;
        log = inner.wal();
        encode(&mut state.buffer, log.generation, &staged, batch);
        if !log.fits(state.buffer.len()) {
            return Err(StoreError::metadata(format!(
                "the batch's {}-byte metadata record exceeds the {}-byte metadata log",
                state.buffer.len(),
                log.region_bytes()
            )));
        }
    }
    let record_start_bytes = log.len_bytes();
    let mut placed = log.place(&state.buffer)?;
    let (first, failed) = write_batch(inner, runtime, batch, &placed);
    // `None`: the record must be written (again).
    let mut written = Some(first);
    if !failed.is_empty() {
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
        if batch.is_empty() {
            // The record stays unreferenced behind the end: the next batch's goes over it.
            return Ok(None);
        }
        staged = stage(inner, batch, sequence)?;
        encode(&mut state.buffer, log.generation, &staged, batch);
        placed = log.place(&state.buffer)?;
        written = None;
    }
    // A failed (or torn) record write is written again over itself: nothing after it exists
    // yet, and until the flush nothing of it counts. Only a device that keeps failing
    // poisons the store.
    let mut attempts = 0;
    loop {
        match written.take() {
            Some(Ok(())) => break,
            Some(Err(error)) => {
                attempts += 1;
                if attempts >= RECORD_WRITE_ATTEMPTS {
                    return Err(error.into());
                }
                tracing::warn!(%error, attempts, "metadata log write failed; writing it again");
            }
            None => {}
        }
        written = Some(inner.device.write_blocking(
            placed.offset_bytes,
            placed.buffer.as_slice(),
            runtime,
        ));
    }
    log.advance(&placed);
    log.next_sequence += 1;
    drop(log);
    for (index, collection, delta) in staged.omap_deltas.drain(..) {
        batch[index]
            .deltas
            .collections
            .entry(collection)
            .or_default()
            .metadata_bytes += delta;
    }
    Ok(Some(Sealed {
        batch: std::mem::take(batch),
        ticket: state.sent,
        sequence,
        record_start_bytes,
        changes: staged.changes,
        omap_delta: staged.omap_delta,
    }))
}

/// Stage 2 of a sealed batch, in its turn, after its flush (`flushed`): on success makes the
/// batch visible (database, onode cache), frees what it freed and updates the counters; a
/// failed flush takes the batch's record back.
fn finish(
    inner: &Inner,
    sealed: &mut Sealed,
    flushed: std::result::Result<(), device::DeviceError>,
    runtime: &tokio::runtime::Handle,
) -> Result<()> {
    if let Err(error) = flushed {
        let error = StoreError::from(error);
        // Poisoned first: the committer appends nothing once it sees that under the log's
        // lock. The batch fails; its record is taken back, so that a mount does not make it
        // visible even if it and its data did reach the device (later records, after it,
        // are then unreachable: their batches are answered `Poisoned`).
        poison(inner, &error);
        let mut log = inner.wal();
        log.next_sequence = sealed.sequence;
        if let Err(cut) = log.truncate_blocking(sealed.record_start_bytes, runtime) {
            tracing::error!(%cut, "could not take back the record of a failed batch");
        }
        return Err(error);
    }
    if inner.poisoned.load(Ordering::Acquire) {
        // An earlier batch failed: its record, and so this one, was taken back.
        return Err(StoreError::Poisoned);
    }
    if inner.config.durable {
        inner
            .commit_counters
            .device_flushes
            .fetch_add(1, Ordering::Relaxed);
    }
    // Only now, with the data and the record durable, do readers see the batch.
    std::mem::take(&mut sealed.changes).commit(&inner.meta)?;
    let batch = &mut sealed.batch;
    // Committed; the writers still hold their object locks, so the cache may follow.
    for pending in batch.iter_mut() {
        for update in &mut pending.updates {
            let encoded = update.onode.take().map(Arc::<[u8]>::from);
            inner
                .onodes
                .insert(update.shard, std::mem::take(&mut update.key), encoded);
        }
    }
    // The deferred overwrites, now that their record is durable, before the writers' locks
    // go (no reader sees the new checksums over the old blocks).
    write_deferred(inner, batch, runtime)?;
    // Durable: the freed extents are referenced by no committed onode any more.
    {
        // An extent that a deferred overwrite in the log wrote stays held until the next
        // checkpoint: a mount writes that record's data again, so the extent must not hold
        // another object's data by then.
        // Deferred writes are at most this long, so one that overlaps an extent starts at
        // most this far before it.
        let deferred_bytes_max = inner.config.deferred_write_bytes_max;
        let deferred = inner.deferred_ranges();
        let mut held = inner.held();
        let mut allocator = inner.allocator();
        for pending in batch.iter_mut() {
            pending.fresh.armed = false;
            for extent in pending.freed.drain(..) {
                // Before the allocator may hand it out again (see `buffer`).
                inner.data_cache.invalidate(&extent);
                let end = extent.offset_bytes + extent.length_bytes;
                let overlaps = !deferred.is_empty()
                    && deferred
                        .range(extent.offset_bytes.saturating_sub(deferred_bytes_max)..end)
                        .any(|(_, &deferred_end)| deferred_end > extent.offset_bytes);
                if overlaps {
                    held.push(extent);
                } else {
                    allocator.release(extent);
                }
            }
        }
        drop(deferred);
        if cfg!(debug_assertions) {
            allocator.check_invariants();
        }
    }
    let mut counters = inner.counters();
    counters.omap_bytes = add(counters.omap_bytes, sealed.omap_delta);
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

/// Writes the deferred overwrites of a finished batch over their blocks (one submission), drops
/// those blocks from the data cache and remembers their ranges until the next checkpoint. A
/// failed write fails the batch and poisons the store: the log holds the data, and a mount
/// writes it again.
fn write_deferred(
    inner: &Inner,
    batch: &[Pending],
    runtime: &tokio::runtime::Handle,
) -> Result<()> {
    let writes: Vec<(u64, &[u8])> = batch
        .iter()
        .flat_map(|pending| pending.deferred.iter())
        .map(|(offset_bytes, data)| (*offset_bytes, data.as_slice()))
        .collect();
    if writes.is_empty() {
        return Ok(());
    }
    for result in inner.device.write_many_blocking(&writes, runtime) {
        result?;
    }
    let mut deferred = inner.deferred_ranges();
    for (offset_bytes, data) in writes {
        let extent = DeviceExtent {
            offset_bytes,
            length_bytes: data.len() as u64,
        };
        inner.data_cache.invalidate(&extent);
        let end = offset_bytes + extent.length_bytes;
        let known = deferred.entry(offset_bytes).or_insert(end);
        *known = (*known).max(end);
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
