//! The executor: a [`Device`] that serves requests through the cache, the background cleaner,
//! start/load/stop and metadata persistence.
//!
//! ## Concurrency
//! Requests lock *stripes* (async RwLocks; a stripe covers [`STRIPE_LINES`] neighbouring core
//! lines, and stripes repeat every [`STRIPES`] of those runs) for their whole duration: reads
//! shared, writes exclusive, always in ascending stripe order. So a fill can never overwrite a
//! newer write, and a write never lands in a line a reader is reading. A free stripe is taken
//! without yielding, so requests reach the devices in the order they arrived.
//! Metadata (map, lines, lists) lives under one sync mutex held only for bookkeeping, never
//! across I/O. A request pins the lines it uses; eviction and the cleaner skip pinned lines.
//!
//! ## Durability of write-back data
//! A write-back write is acknowledged when its data is on the cache device *and* the entry of
//! its line (mapping + dirty bit) is in the line's metadata block. For a line newly mapped to
//! a core line the data is written first and the metadata after (an entry never claims data
//! that is not there); a line already mapped that turns dirty has its entry written after the
//! data too; a dirty line rewritten in place needs no metadata write at all. Metadata block
//! writes are group-committed: a writer whose generation was already written by someone else
//! skips its own. A line whose dirty entry may be on disk is never reused before a clean
//! entry for it is written and the cache device flushed (the cleaner keeps it pinned until
//! then), so recovery never copies another core line's data. After a crash only dirty entries
//! are trusted; after a clean stop every entry is.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use device::{check_request, Device, DeviceError, DeviceKind, DeviceStats, OpKind, StatsRecorder};
use tokio::sync::{Notify, RwLock};
use tokio::task::JoinHandle;

use crate::config::{CacheConfig, CacheMode};
use crate::error::CacheError;
use crate::ioclass::IoClasses;
use crate::layout::{
    self, Layout, Superblock, BLOCK_BYTES, ENTRIES_PER_BLOCK, FLAG_DIRTY, FLAG_VALID,
};
use crate::policy::cleaning::{self, CleaningDecision, CleaningOrder};
use crate::policy::mode::{read_action, write_action, LineState, ReadAction, WriteAction};
use crate::state::{State, DIRTY_LIST, UNMAPPED};
use crate::stats::{add, CacheStats, Counters};

/// Number of request stripes.
pub const STRIPES: u64 = 4096;
/// Neighbouring core lines one stripe covers.
///
/// Why runs and not single lines: with one line per stripe, stripes repeated every 16 MiB of
/// 4 KiB lines, so a pass-through write stuck in an HDD core's queue (an NCQ-like scheduler
/// serves an out-of-order request only after it has been passed over many times) held the
/// exclusive stripes of the write 16 MiB further on in the same stream, which then reached
/// the core late and out of order, and so on every 16 MiB: measured 289 non-sequential core
/// writes of 3,867 against 68 for the HDD alone, 182.5 against 191.0 MB/s. Runs of 16 lines
/// repeat every 256 MiB (4 GiB of 64 KiB lines), and a 512 KiB request takes 8 locks, not
/// 128. Two random lines still share a stripe with the same odds (1 in [`STRIPES`]).
pub const STRIPE_LINES: u64 = 16;
/// Metadata blocks read or written per I/O at load and stop.
const METADATA_CHUNK_BLOCKS: u64 = 256;
/// Lines per round when flushing on demand (16 MiB of 4 KiB lines: long sequential core
/// writes; measured 7.7 s -> 6.2 s for 512 MiB of dirty lines over an emulated HDD, against
/// 1,024 lines).
const FLUSH_ROUND_LINES: u32 = 4096;

/// How to treat an existing cache on the cache device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartMode {
    /// Create a new cache; fail if one is there.
    Create,
    /// Load the cache that is there (warm after a clean stop; dirty lines recovered and
    /// flushed after a crash).
    Load,
    /// Create a new cache, discarding whatever is there.
    Force,
}

/// A cached device: a cache [`Device`] in front of a core [`Device`], itself a [`Device`].
pub struct BlockCache {
    inner: Arc<Inner>,
    cleaner: Mutex<Option<JoinHandle<()>>>,
}

struct Inner {
    cache: Arc<dyn Device>,
    core: Arc<dyn Device>,
    layout: Layout,
    block_bytes: u64,
    /// Core lines wholly inside the core device (only those are cached).
    core_lines: u64,
    state: Mutex<State>,
    stripes: Vec<RwLock<()>>,
    metadata_locks: Vec<tokio::sync::Mutex<()>>,
    metadata_written: Vec<AtomicU64>,
    counters: Counters,
    recorder: StatsRecorder,
    epoch: Instant,
    wake: Notify,
    stopping: AtomicBool,
    /// Set by [`BlockCache::stop`] before it writes its final state: client I/O is refused
    /// from then on, so nothing changes the mapping behind a superblock marked clean.
    closed: AtomicBool,
    /// Client operations (the [`Device`] calls) running; `stop` waits for none.
    client_ops: AtomicU64,
    /// The mode a loaded superblock recorded.
    recorded_mode: Option<CacheMode>,
    /// On-demand flushes running: the background cleaner stands aside meanwhile, so its
    /// rounds (oldest-first under alru: scattered addresses) do not break the flush's
    /// address-ordered stream into seeks on an HDD core.
    flushes_running: AtomicU64,
    /// A client write went to the core since the last client flush took this flag: only
    /// then does a flush reach the core. The core holds no other acknowledged data (the
    /// cleaner flushes the core itself before it marks lines clean), and a flush on an HDD
    /// core waits behind the cleaner's queued writes: in write-back, every flush of an OSD's
    /// commit would pay them.
    core_unflushed: AtomicBool,
    /// What the cores are, in order (see [`BlockCache::start_labelled`]).
    core_labels: Vec<String>,
}

/// Stripe guards held for a request: one without an allocation, or several. Never read:
/// they are held for their `Drop`, which releases the locks.
#[allow(dead_code)]
enum Held<G> {
    One(G),
    Many(Vec<G>),
}

/// One line of a read plan.
#[derive(Clone, Copy, Debug)]
struct ReadPart {
    core_line: u64,
    action: ReadAction,
    line: Option<u32>,
}

/// One line of a write plan.
#[derive(Clone, Copy, Debug)]
struct WritePart {
    core_line: u64,
    action: WriteAction,
    line: Option<u32>,
    /// The line was allocated for this write (its data is not there yet).
    fresh: bool,
}

/// A contiguous piece of I/O: device offset, offset in the request buffer, length.
#[derive(Clone, Copy, Debug)]
struct Segment {
    device_bytes: u64,
    buffer_bytes: usize,
    length_bytes: usize,
}

/// Runs device operations concurrently; the first error wins (all are awaited).
async fn join_all<F>(futures: Vec<F>) -> Result<(), DeviceError>
where
    F: std::future::Future<Output = Result<(), DeviceError>>,
{
    if futures.len() <= 1 {
        for future in futures {
            future.await?;
        }
        return Ok(());
    }
    let mut slots: Vec<Option<std::pin::Pin<Box<F>>>> =
        futures.into_iter().map(|f| Some(Box::pin(f))).collect();
    let mut outcome = Ok(());
    std::future::poll_fn(|context| {
        let mut pending = false;
        for slot in slots.iter_mut() {
            if let Some(future) = slot {
                match future.as_mut().poll(context) {
                    std::task::Poll::Ready(result) => {
                        if let (Err(error), true) = (result, outcome.is_ok()) {
                            outcome = Err(error);
                        }
                        *slot = None;
                    }
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    outcome
}

fn push_segment(segments: &mut Vec<Segment>, next: Segment) {
    if let Some(last) = segments.last_mut() {
        if last.device_bytes + last.length_bytes as u64 == next.device_bytes
            && last.buffer_bytes + last.length_bytes == next.buffer_bytes
        {
            last.length_bytes += next.length_bytes;
            return;
        }
    }
    segments.push(next);
}

impl BlockCache {
    /// Starts a cache of `cache` over `core` (spawns the cleaner on the current runtime).
    pub async fn start(
        cache: Arc<dyn Device>,
        core: Arc<dyn Device>,
        config: CacheConfig,
        classes: IoClasses,
        start: StartMode,
    ) -> Result<Arc<BlockCache>, CacheError> {
        Self::start_labelled(cache, core, config, classes, start, Vec::new()).await
    }

    /// [`BlockCache::start`], recording what the cores are (`core_labels`, in order, e.g.
    /// their paths) in the superblock. A later load with labels must give the same ones in
    /// the same order: with several cores laid end to end ([`crate::CoreSet`]), another order
    /// would hand one core's cached (and dirty) lines to another. Open-CAS likewise matches
    /// cores by their recorded device ids on load.
    pub async fn start_labelled(
        cache: Arc<dyn Device>,
        core: Arc<dyn Device>,
        mut config: CacheConfig,
        classes: IoClasses,
        start: StartMode,
        core_labels: Vec<String>,
    ) -> Result<Arc<BlockCache>, CacheError> {
        config.validate()?;
        if !layout::core_labels_fit(&core_labels) {
            return Err(CacheError::InvalidConfig(format!(
                "the core names take more than the superblock's {} bytes",
                layout::CORE_LABELS_BYTES_MAX
            )));
        }
        if !BLOCK_BYTES.is_multiple_of(cache.block_size_bytes()) {
            return Err(CacheError::InvalidConfig(format!(
                "cache block size {} does not divide 4 KiB",
                cache.block_size_bytes()
            )));
        }
        let mut first = vec![0u8; BLOCK_BYTES as usize];
        cache.read_at(0, &mut first).await?;
        let existing = match Superblock::decode(&first) {
            Ok(found) => found,
            Err(error) if start != StartMode::Force => return Err(error),
            Err(_) => None,
        };
        let loaded = match (start, existing) {
            (StartMode::Create, Some(_)) => return Err(CacheError::Exists),
            (StartMode::Load, None) => return Err(CacheError::NoCache("no superblock".into())),
            (StartMode::Load, Some(superblock)) => Some(superblock),
            _ => None,
        };
        let layout = match &loaded {
            Some(superblock) => {
                if superblock.layout.end_bytes() > cache.size_bytes() {
                    return Err(CacheError::Corrupt(
                        "layout larger than the cache device".into(),
                    ));
                }
                if superblock.core_size_bytes != core.size_bytes() {
                    return Err(CacheError::Corrupt(format!(
                        "cache was made for a core of {} bytes, this core has {}",
                        superblock.core_size_bytes,
                        core.size_bytes()
                    )));
                }
                if !superblock.core_labels.is_empty()
                    && !core_labels.is_empty()
                    && superblock.core_labels != core_labels
                {
                    return Err(CacheError::InvalidConfig(format!(
                        "cache was made for cores {:?} in that order, not {:?}: give the same \
                         cores in the same order to load it",
                        superblock.core_labels, core_labels
                    )));
                }
                config.line_size_bytes = superblock.layout.line_size_bytes;
                superblock.layout
            }
            None => Layout::plan(cache.size_bytes(), config.line_size_bytes)?,
        };
        let block_bytes = cache.block_size_bytes().max(core.block_size_bytes());
        if !layout.line_size_bytes.is_multiple_of(block_bytes) {
            return Err(CacheError::InvalidConfig(format!(
                "line size {} is not a multiple of the device block size {block_bytes}",
                layout.line_size_bytes
            )));
        }
        let state = State::new(&layout, config, classes);
        let blocks = layout.metadata_blocks as usize;
        let inner = Arc::new(Inner {
            core_lines: core.size_bytes() / layout.line_size_bytes,
            recorder: StatsRecorder::new(
                format!("cache({} over {})", cache.name(), core.name()),
                DeviceKind::Other("blockcache"),
            ),
            cache,
            core,
            layout,
            block_bytes,
            state: Mutex::new(state),
            stripes: (0..STRIPES).map(|_| RwLock::new(())).collect(),
            metadata_locks: (0..blocks).map(|_| tokio::sync::Mutex::new(())).collect(),
            metadata_written: (0..blocks).map(|_| AtomicU64::new(0)).collect(),
            counters: Counters::default(),
            epoch: Instant::now(),
            wake: Notify::new(),
            stopping: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            client_ops: AtomicU64::new(0),
            recorded_mode: loaded.as_ref().map(|superblock| superblock.mode),
            flushes_running: AtomicU64::new(0),
            core_unflushed: AtomicBool::new(true),
            core_labels: match &loaded {
                // A load without labels keeps the recorded ones.
                Some(superblock) if core_labels.is_empty() => superblock.core_labels.clone(),
                _ => core_labels,
            },
        });
        let recovered_dirty = match loaded {
            Some(superblock) if superblock.clean_shutdown => {
                inner.load_metadata(true).await?;
                0
            }
            Some(_) => inner.load_metadata(false).await?,
            None => {
                inner.write_all_metadata().await?;
                0
            }
        };
        inner.write_superblock(false).await?;
        let cleaner = tokio::spawn(cleaner_loop(Arc::clone(&inner)));
        let cache = Arc::new(BlockCache {
            inner,
            cleaner: Mutex::new(Some(cleaner)),
        });
        if recovered_dirty > 0 {
            tracing::info!(
                recovered_dirty,
                "dirty shutdown: flushing recovered dirty lines"
            );
            cache.flush_dirty().await?;
        }
        Ok(cache)
    }

    /// Stops cleanly: stops the cleaner, flushes dirty lines (when the config says so), writes
    /// every metadata block and marks the superblock clean. Call after the last request.
    pub async fn stop(&self) -> Result<(), CacheError> {
        // No client I/O from here on; what is running ends first.
        self.inner.closed.store(true, Ordering::SeqCst);
        while self.inner.client_ops.load(Ordering::SeqCst) > 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        self.inner.stopping.store(true, Ordering::SeqCst);
        self.inner.wake.notify_one();
        let handle = self
            .cleaner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(handle) = handle {
            let _ = handle.await;
        }
        if self.inner.lock().config.flush_on_stop {
            self.flush_dirty().await?;
        }
        self.inner.write_all_metadata().await?;
        self.inner.core.flush().await?;
        self.inner.write_superblock(true).await?;
        Ok(())
    }

    /// Stops background work and writes nothing, as a crash would (for tests; the devices
    /// keep whatever reached them).
    pub fn abandon(&self) {
        self.inner.stopping.store(true, Ordering::SeqCst);
        if let Some(handle) = self
            .cleaner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            handle.abort();
        }
    }

    /// Flushes every dirty line to the core (casadm --flush-cache).
    pub async fn flush_dirty(&self) -> Result<(), CacheError> {
        /// Counts a running flush for as long as it lives (also when it fails or is dropped).
        struct Running<'a>(&'a AtomicU64);
        impl Drop for Running<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        self.inner.flushes_running.fetch_add(1, Ordering::SeqCst);
        let _running = Running(&self.inner.flushes_running);
        let mut idle_rounds = 0u32;
        while self.inner.lock().dirty_lines() > 0 {
            let flushed = self
                .inner
                .clean_round(FLUSH_ROUND_LINES, 0, CleaningOrder::CoreAddress)
                .await?;
            if flushed == 0 {
                idle_rounds += 1;
                assert!(idle_rounds < 100_000, "dirty lines stay pinned forever");
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        Ok(())
    }

    /// Switches the cache mode; leaving a write-back mode with `flush` cleans every dirty
    /// line first, without it dirty lines stay and are cleaned by the policy (as Open-CAS).
    pub async fn set_mode(&self, mode: CacheMode, flush: bool) -> Result<(), CacheError> {
        let leaving_write_back = {
            let mut state = self.inner.lock();
            let leaving = state.config.mode.writes_back() && !mode.writes_back();
            state.config.mode = mode;
            leaving
        };
        if leaving_write_back && flush {
            self.flush_dirty().await?;
        }
        Ok(())
    }

    /// Changes the run-time configuration (line size cannot change).
    pub fn set_config(&self, change: impl FnOnce(&mut CacheConfig)) -> Result<(), CacheError> {
        let mut state = self.inner.lock();
        let mut config = state.config.clone();
        change(&mut config);
        config.validate()?;
        if config.line_size_bytes != state.config.line_size_bytes {
            return Err(CacheError::InvalidConfig(
                "line size is fixed at creation".into(),
            ));
        }
        state.config = config;
        drop(state);
        self.inner.wake.notify_one();
        Ok(())
    }

    /// Replaces the I/O classes (lines keep the class index they were cached under).
    pub fn set_io_classes(&self, classes: IoClasses) {
        self.inner.lock().classes = classes;
    }

    /// The mode the superblock recorded when the cache was loaded (`None` for a new one);
    /// a load that names no mode resumes in it, as Open-CAS does.
    pub fn recorded_mode(&self) -> Option<CacheMode> {
        self.inner.recorded_mode
    }

    /// The current configuration.
    pub fn config(&self) -> CacheConfig {
        self.inner.lock().config.clone()
    }

    /// The on-disk layout.
    pub fn layout(&self) -> Layout {
        self.inner.layout
    }

    /// A statistics snapshot.
    pub fn cache_stats(&self) -> CacheStats {
        let state = self.inner.lock();
        let lines = state.lines.len() as u64;
        let free = state.free_lines();
        let dirty = state.dirty_lines();
        let mut stats = CacheStats {
            mode: state.config.mode.name().into(),
            cleaning: match state.config.cleaning {
                crate::CleaningConfig::Alru { .. } => "alru",
                crate::CleaningConfig::Acp { .. } => "acp",
                crate::CleaningConfig::Nop => "nop",
            }
            .into(),
            line_size_bytes: self.inner.layout.line_size_bytes,
            lines,
            occupied_lines: lines - free,
            free_lines: free,
            dirty_lines: dirty,
            clean_lines: lines - free - dirty,
            ..CacheStats::default()
        };
        drop(state);
        self.inner.counters.fill(&mut stats);
        stats
    }

    /// Checks the metadata invariants (tests).
    pub fn check_invariants(&self) {
        self.inner.lock().check_invariants();
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// The stripe of core line `core_line`.
    fn stripe_of(core_line: u64) -> usize {
        (core_line / STRIPE_LINES % STRIPES) as usize
    }

    /// The stripes of core lines `first..=last`, each once, ascending.
    fn stripe_indices(first: u64, last: u64) -> Vec<usize> {
        let (first_run, last_run) = (first / STRIPE_LINES, last / STRIPE_LINES);
        let count = (last_run - first_run + 1).min(STRIPES);
        let mut indices: Vec<usize> = (first_run..first_run + count)
            .map(|run| (run % STRIPES) as usize)
            .collect();
        indices.sort_unstable();
        indices
    }

    /// Read lock on stripe `index`: taken at once when it is free, awaited only when held.
    ///
    /// Why not always `read().await`: tokio charges every acquisition, even an uncontended
    /// one, to the task's cooperative budget (128 per poll), and a 512 KiB request, which took
    /// 128 stripes when a stripe was one 4 KiB line, spent it all and yielded halfway. The NBD server runs a
    /// connection's requests as futures of one task, so the requests decoded after it took
    /// their locks first and reached the core first: a sequential pass-through stream
    /// arrived at an HDD core out of order and paid seeks and rotations the HDD alone never
    /// paid (tests/core_order.rs). `try_read` costs no budget and keeps arrival order.
    async fn read_stripe(&self, index: usize) -> tokio::sync::RwLockReadGuard<'_, ()> {
        match self.stripes[index].try_read() {
            Ok(guard) => guard,
            Err(_) => self.stripes[index].read().await,
        }
    }

    /// Write lock on stripe `index`: at once when free, else awaited (see [`Self::read_stripe`]).
    async fn write_stripe(&self, index: usize) -> tokio::sync::RwLockWriteGuard<'_, ()> {
        match self.stripes[index].try_write() {
            Ok(guard) => guard,
            Err(_) => self.stripes[index].write().await,
        }
    }

    /// Read locks on the stripes of core lines `first..=last` (ascending order: no deadlock).
    async fn read_stripes(
        &self,
        first: u64,
        last: u64,
    ) -> Held<tokio::sync::RwLockReadGuard<'_, ()>> {
        if Self::stripe_of(first) == Self::stripe_of(last) && last - first < STRIPE_LINES {
            // The common case (a request inside one stripe) allocates nothing.
            return Held::One(self.read_stripe(Self::stripe_of(first)).await);
        }
        let mut guards = Vec::new();
        for index in Self::stripe_indices(first, last) {
            guards.push(self.read_stripe(index).await);
        }
        Held::Many(guards)
    }

    /// Write locks on the stripes of core lines `first..=last` (ascending order).
    async fn write_stripes(
        &self,
        first: u64,
        last: u64,
    ) -> Held<tokio::sync::RwLockWriteGuard<'_, ()>> {
        if Self::stripe_of(first) == Self::stripe_of(last) && last - first < STRIPE_LINES {
            return Held::One(self.write_stripe(Self::stripe_of(first)).await);
        }
        let mut guards = Vec::new();
        for index in Self::stripe_indices(first, last) {
            guards.push(self.write_stripe(index).await);
        }
        Held::Many(guards)
    }

    /// Whether the request bypasses the cache, and its class; records the request.
    fn classify(&self, state: &mut State, offset: u64, length: u64, write: bool) -> (bool, usize) {
        state.last_io_ms = self.now_ms();
        let class = state.classes.classify(length);
        let not_cached = state
            .classes
            .classes()
            .get(class)
            .is_none_or(|c| c.allocation <= 0.0);
        let cutoff = state.config.seq_cutoff;
        let full = state.free_lines() == 0;
        let verdict = state.cutoff.check(&cutoff, offset, length, write, full);
        (verdict.cut_off || not_cached, class)
    }

    fn count(&self, write: bool, bypass: bool, hits: usize, lines: usize) {
        let c = &self.counters;
        let counter = match (write, bypass) {
            (false, true) => &c.read_pass_through,
            (true, true) => &c.write_pass_through,
            (false, false) if hits == lines => &c.read_hits,
            (false, false) if hits == 0 => &c.read_full_misses,
            (false, false) => &c.read_partial_misses,
            (true, false) if hits == lines => &c.write_hits,
            (true, false) if hits == 0 => &c.write_full_misses,
            (true, false) => &c.write_partial_misses,
        };
        add(counter, 1);
    }

    async fn read(&self, offset: u64, buffer: &mut [u8]) -> Result<(), DeviceError> {
        let length = buffer.len() as u64;
        if length == 0 {
            return Ok(());
        }
        let line_bytes = self.layout.line_size_bytes;
        let (first, last) = (offset / line_bytes, (offset + length - 1) / line_bytes);
        let _guards = self.read_stripes(first, last).await;
        let plan = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let (bypass, class) = self.classify(&mut state, offset, length, false);
            let mode = state.config.mode;
            let promotion = state.config.promotion;
            let occupancy = state.occupancy_percent();
            let mut plan = Vec::with_capacity((last - first + 1) as usize);
            let mut hits = 0;
            for core_line in first..=last {
                let (line_state, line) = state.lookup(core_line);
                hits += usize::from(line_state != LineState::Miss);
                let promote = line_state == LineState::Miss
                    && !bypass
                    && core_line < self.core_lines
                    && !state.is_mapped(core_line)
                    && state.promotion.promote(&promotion, core_line, occupancy);
                let mut part = ReadPart {
                    core_line,
                    action: read_action(mode, line_state, bypass, promote),
                    line,
                };
                match (part.action, line) {
                    (ReadAction::Cache, Some(line)) => {
                        state.pin(line);
                        state.touch_clean(line);
                    }
                    (ReadAction::CoreAndPromote, _) => match state.allocate(core_line, class) {
                        Some(line) => part.line = Some(line),
                        None => part.action = ReadAction::Core,
                    },
                    _ => part.line = None,
                }
                plan.push(part);
            }
            self.count(false, bypass || mode == CacheMode::Pt, hits, plan.len());
            plan
        };
        let result = self.read_planned(offset, buffer, &plan).await;
        let mut state = self.lock();
        for part in &plan {
            let Some(line) = part.line else { continue };
            state.unpin(line);
            state.free_if_invalid(line);
            if part.action == ReadAction::CoreAndPromote {
                if result.is_ok() {
                    state.mark_clean_valid(line);
                } else {
                    state.unmap(line);
                }
            }
        }
        result
    }

    async fn read_planned(
        &self,
        offset: u64,
        buffer: &mut [u8],
        plan: &[ReadPart],
    ) -> Result<(), DeviceError> {
        let line_bytes = self.layout.line_size_bytes;
        let length = buffer.len() as u64;
        let end = offset + length;
        if plan.iter().any(|p| p.action != ReadAction::Cache) {
            let promoting = plan.iter().any(|p| p.action == ReadAction::CoreAndPromote);
            let (span_start, span_end) = match (plan.first(), plan.last(), promoting) {
                (Some(a), Some(b), true) => (
                    a.core_line * line_bytes,
                    ((b.core_line + 1) * line_bytes).min(self.core.size_bytes()),
                ),
                _ => (offset, end),
            };
            let mut owned = Vec::new();
            let span: &[u8] = if span_start == offset && span_end == end {
                self.core_read(offset, buffer).await?;
                buffer
            } else {
                owned.resize((span_end - span_start) as usize, 0u8);
                self.core_read(span_start, &mut owned).await?;
                let skip = (offset - span_start) as usize;
                buffer.copy_from_slice(&owned[skip..skip + buffer.len()]);
                &owned
            };
            let mut fills = Vec::new();
            for part in plan
                .iter()
                .filter(|p| p.action == ReadAction::CoreAndPromote)
            {
                let Some(line) = part.line else { continue };
                let at = (part.core_line * line_bytes - span_start) as usize;
                push_segment(
                    &mut fills,
                    Segment {
                        device_bytes: self.layout.line_offset(line),
                        buffer_bytes: at,
                        length_bytes: line_bytes as usize,
                    },
                );
            }
            let writes = fills.iter().map(|fill| {
                let data = &span[fill.buffer_bytes..fill.buffer_bytes + fill.length_bytes];
                self.cache_write(fill.device_bytes, data)
            });
            join_all(writes.collect()).await?;
        }
        if let [ReadPart {
            core_line,
            action: ReadAction::Cache,
            line: Some(line),
        }] = plan
        {
            // A hit inside one line (the common case): one cache read, no bookkeeping vectors.
            let line_start = core_line * line_bytes;
            let device_bytes = self.layout.line_offset(*line) + (offset - line_start);
            return self.cache_read(device_bytes, buffer).await;
        }
        let mut segments = Vec::new();
        for part in plan.iter().filter(|p| p.action == ReadAction::Cache) {
            let Some(line) = part.line else { continue };
            let line_start = part.core_line * line_bytes;
            let start = offset.max(line_start);
            let stop = end.min(line_start + line_bytes);
            push_segment(
                &mut segments,
                Segment {
                    device_bytes: self.layout.line_offset(line) + (start - line_start),
                    buffer_bytes: (start - offset) as usize,
                    length_bytes: (stop - start) as usize,
                },
            );
        }
        // Segments come in buffer order and never overlap: carve the buffer into them.
        let mut reads = Vec::with_capacity(segments.len());
        let mut rest: &mut [u8] = buffer;
        let mut consumed = 0;
        for segment in &segments {
            let (_, tail) = rest.split_at_mut(segment.buffer_bytes - consumed);
            let (target, tail) = tail.split_at_mut(segment.length_bytes);
            reads.push(self.cache_read(segment.device_bytes, target));
            rest = tail;
            consumed = segment.buffer_bytes + segment.length_bytes;
        }
        join_all(reads).await
    }

    async fn write(&self, offset: u64, data: &[u8]) -> Result<(), DeviceError> {
        let length = data.len() as u64;
        if length == 0 {
            return Ok(());
        }
        let line_bytes = self.layout.line_size_bytes;
        let (first, last) = (offset / line_bytes, (offset + length - 1) / line_bytes);
        let _guards = self.write_stripes(first, last).await;
        let now_ms = self.now_ms();
        let plan = {
            let mut state = self.lock();
            let (bypass, class) = self.classify(&mut state, offset, length, true);
            let mode = state.config.mode;
            let promotion = state.config.promotion;
            let occupancy = state.occupancy_percent();
            let mut plan = Vec::with_capacity((last - first + 1) as usize);
            let mut hits = 0;
            for core_line in first..=last {
                let (line_state, line) = state.lookup(core_line);
                hits += usize::from(line_state != LineState::Miss);
                let covered = offset <= core_line * line_bytes
                    && (core_line + 1) * line_bytes <= offset + length;
                let promote = line_state == LineState::Miss
                    && !bypass
                    && covered
                    && core_line < self.core_lines
                    && !state.is_mapped(core_line)
                    && state.promotion.promote(&promotion, core_line, occupancy);
                let mut part = WritePart {
                    core_line,
                    action: write_action(mode, line_state, bypass, promote),
                    line,
                    fresh: false,
                };
                match (part.action, line) {
                    (WriteAction::Core, _) => part.line = None,
                    (WriteAction::CacheDirty, Some(line)) => {
                        state.pin(line);
                        state.mark_dirty(line, now_ms);
                    }
                    (WriteAction::CacheAndCore | WriteAction::CoreAndInvalidate, Some(line)) => {
                        state.pin(line);
                        if state.lines[line as usize].dirty {
                            // A dirty line stays dirty (and its entry with it).
                            state.mark_dirty(line, now_ms);
                        }
                    }
                    (WriteAction::CacheDirty | WriteAction::CacheAndCore, None) => {
                        match state.allocate(core_line, class) {
                            Some(line) => {
                                part.line = Some(line);
                                part.fresh = true;
                            }
                            None => part.action = WriteAction::Core,
                        }
                    }
                    (WriteAction::CoreAndInvalidate, None) => part.action = WriteAction::Core,
                }
                plan.push(part);
            }
            self.count(true, bypass || mode == CacheMode::Pt, hits, plan.len());
            plan
        };
        let result = self.write_planned(offset, data, &plan).await;
        let mut persist: BTreeMap<u64, u64> = BTreeMap::new();
        {
            let mut state = self.lock();
            for part in &plan {
                let Some(line) = part.line else { continue };
                state.unpin(line);
                let meta = state.lines[line as usize];
                match part.action {
                    WriteAction::CacheDirty if part.fresh => {
                        if result.is_ok() {
                            state.mark_dirty(line, now_ms);
                        } else {
                            state.unmap(line);
                            continue;
                        }
                    }
                    WriteAction::CacheAndCore if part.fresh => {
                        if result.is_ok() {
                            state.mark_clean_valid(line);
                        } else {
                            state.unmap(line);
                        }
                        continue;
                    }
                    WriteAction::CoreAndInvalidate if !meta.dirty => {
                        // Pinned by the cleaner (waiting for its entry to be durable): mark it
                        // invalid now; whoever unpins it last frees it.
                        state.invalidate(line);
                        continue;
                    }
                    WriteAction::CacheAndCore if !meta.dirty => {
                        state.touch_clean(line);
                        continue;
                    }
                    _ => {}
                }
                let meta = state.lines[line as usize];
                if meta.dirty {
                    let block = u64::from(line) / ENTRIES_PER_BLOCK;
                    let need = persist.entry(block).or_insert(0);
                    *need = (*need).max(meta.metadata_gen);
                }
            }
        }
        result?;
        for (block, need) in persist {
            self.persist_metadata(block, need).await?;
        }
        Ok(())
    }

    async fn write_planned(
        &self,
        offset: u64,
        data: &[u8],
        plan: &[WritePart],
    ) -> Result<(), DeviceError> {
        let line_bytes = self.layout.line_size_bytes;
        let end = offset + data.len() as u64;
        let to_core = plan.iter().any(|p| {
            matches!(
                p.action,
                WriteAction::Core | WriteAction::CacheAndCore | WriteAction::CoreAndInvalidate
            )
        });
        let mut segments = Vec::new();
        for part in plan {
            let (Some(line), WriteAction::CacheDirty | WriteAction::CacheAndCore) =
                (part.line, part.action)
            else {
                continue;
            };
            let line_start = part.core_line * line_bytes;
            let start = offset.max(line_start);
            let stop = end.min(line_start + line_bytes);
            push_segment(
                &mut segments,
                Segment {
                    device_bytes: self.layout.line_offset(line) + (start - line_start),
                    buffer_bytes: (start - offset) as usize,
                    length_bytes: (stop - start) as usize,
                },
            );
        }
        let core = async {
            if to_core {
                self.core_write(offset, data).await
            } else {
                Ok(())
            }
        };
        let cache = join_all(
            segments
                .iter()
                .map(|segment| {
                    let source =
                        &data[segment.buffer_bytes..segment.buffer_bytes + segment.length_bytes];
                    self.cache_write(segment.device_bytes, source)
                })
                .collect(),
        );
        let (core, cache) = tokio::join!(core, cache);
        core.and(cache)
    }

    async fn discard(&self, offset: u64, length: u64) -> Result<(), DeviceError> {
        if length == 0 {
            return Ok(());
        }
        let line_bytes = self.layout.line_size_bytes;
        let (first, last) = (offset / line_bytes, (offset + length - 1) / line_bytes);
        let _guards = self.write_stripes(first, last).await;
        {
            let mut state = self.lock();
            for core_line in first..=last {
                let covered = offset <= core_line * line_bytes
                    && (core_line + 1) * line_bytes <= offset + length;
                if let (LineState::Clean, Some(line), true) = (
                    state.lookup(core_line).0,
                    state.lookup(core_line).1,
                    covered,
                ) {
                    if state.lines[line as usize].pins == 0 {
                        state.unmap(line);
                    }
                }
            }
        }
        // Dirty lines keep their data: discard is a hint, and dropping a dirty entry would
        // need a metadata write before the core discard.
        self.core.discard(offset, length).await
    }

    async fn core_read(&self, offset: u64, buffer: &mut [u8]) -> Result<(), DeviceError> {
        let result = self.core.read_at(offset, buffer).await;
        let counters = &self.counters;
        tally(
            result,
            &counters.core_read_bytes,
            &counters.core_errors,
            buffer.len(),
        )
    }

    async fn core_write(&self, offset: u64, data: &[u8]) -> Result<(), DeviceError> {
        let result = self.core.write_at(offset, data).await;
        // Set once the write is over (also when it failed: its blocks may have changed), so
        // a flush that starts after it sees the flag.
        self.core_unflushed.store(true, Ordering::SeqCst);
        let counters = &self.counters;
        tally(
            result,
            &counters.core_write_bytes,
            &counters.core_errors,
            data.len(),
        )
    }

    async fn cache_read(&self, offset: u64, buffer: &mut [u8]) -> Result<(), DeviceError> {
        let result = self.cache.read_at(offset, buffer).await;
        let counters = &self.counters;
        tally(
            result,
            &counters.cache_read_bytes,
            &counters.cache_errors,
            buffer.len(),
        )
    }

    async fn cache_write(&self, offset: u64, data: &[u8]) -> Result<(), DeviceError> {
        let result = self.cache.write_at(offset, data).await;
        let counters = &self.counters;
        tally(
            result,
            &counters.cache_write_bytes,
            &counters.cache_errors,
            data.len(),
        )
    }

    /// Makes sure metadata block `block` on disk is at least generation `need`.
    async fn persist_metadata(&self, block: u64, need: u64) -> Result<(), DeviceError> {
        let written = &self.metadata_written[block as usize];
        if written.load(Ordering::Acquire) >= need {
            return Ok(());
        }
        let _turn = self.metadata_locks[block as usize].lock().await;
        if written.load(Ordering::Acquire) >= need {
            return Ok(()); // group commit: someone wrote a newer snapshot meanwhile
        }
        let (generation, bytes) = {
            let state = self.lock();
            let generation = state.metadata_gen[block as usize];
            (
                generation,
                layout::encode_metadata(block, &state.metadata_entries(block)),
            )
        };
        self.cache
            .write_at(self.layout.metadata_offset(block), &bytes)
            .await
            .inspect_err(|_| add(&self.counters.cache_errors, 1))?;
        written.fetch_max(generation, Ordering::AcqRel);
        Ok(())
    }

    /// Writes every metadata block from memory (create, stop) and flushes the cache device.
    async fn write_all_metadata(&self) -> Result<(), DeviceError> {
        let blocks = self.layout.metadata_blocks;
        let mut block = 0;
        while block < blocks {
            let count = METADATA_CHUNK_BLOCKS.min(blocks - block);
            let (bytes, generations) = {
                let state = self.lock();
                let mut bytes = Vec::with_capacity((count * BLOCK_BYTES) as usize);
                let mut generations = Vec::new();
                for b in block..block + count {
                    bytes
                        .extend_from_slice(&layout::encode_metadata(b, &state.metadata_entries(b)));
                    generations.push(state.metadata_gen[b as usize]);
                }
                (bytes, generations)
            };
            self.cache
                .write_at(self.layout.metadata_offset(block), &bytes)
                .await?;
            for (offset, generation) in generations.into_iter().enumerate() {
                self.metadata_written[block as usize + offset]
                    .fetch_max(generation, Ordering::AcqRel);
            }
            block += count;
        }
        self.cache.flush().await
    }

    /// Loads entries from disk: all of them after a clean stop, only dirty ones after a crash.
    /// Returns the number of dirty lines recovered.
    async fn load_metadata(&self, clean_shutdown: bool) -> Result<u64, CacheError> {
        let blocks = self.layout.metadata_blocks;
        let mut dirty = 0;
        let mut block = 0;
        while block < blocks {
            let count = METADATA_CHUNK_BLOCKS.min(blocks - block);
            let mut bytes = vec![0u8; (count * BLOCK_BYTES) as usize];
            self.cache
                .read_at(self.layout.metadata_offset(block), &mut bytes)
                .await?;
            let mut state = self.lock();
            for (index, chunk) in bytes.chunks_exact(BLOCK_BYTES as usize).enumerate() {
                let b = block + index as u64;
                let Some(entries) = layout::decode_metadata(b, chunk)? else {
                    continue;
                };
                for (slot, entry) in entries.into_iter().enumerate() {
                    let line = b * ENTRIES_PER_BLOCK + slot as u64;
                    if line >= self.layout.lines
                        || entry.flags & FLAG_VALID == 0
                        || entry.core_line == UNMAPPED
                    {
                        continue;
                    }
                    let is_dirty = entry.flags & FLAG_DIRTY != 0;
                    if !clean_shutdown && !is_dirty {
                        continue;
                    }
                    if entry.core_line >= self.core_lines || state.is_mapped(entry.core_line) {
                        return Err(CacheError::Corrupt(format!(
                            "line {line} maps core line {} twice or beyond the core",
                            entry.core_line
                        )));
                    }
                    state.restore(line as u32, entry);
                    dirty += u64::from(is_dirty);
                }
            }
            block += count;
        }
        // The disk may still hold stale clean entries: rewrite everything from memory.
        self.write_all_metadata().await?;
        Ok(dirty)
    }

    async fn write_superblock(&self, clean_shutdown: bool) -> Result<(), DeviceError> {
        let superblock = Superblock {
            clean_shutdown,
            mode: self.lock().config.mode,
            layout: self.layout,
            core_size_bytes: self.core.size_bytes(),
            core_labels: self.core_labels.clone(),
        };
        self.cache.flush().await?;
        self.cache.write_at(0, &superblock.encode()).await?;
        self.cache.flush().await
    }

    /// Flushes up to `lines_max` dirty lines not written for `min_age_ms`, taken in `order`.
    /// Returns how many were flushed.
    async fn clean_round(
        &self,
        lines_max: u32,
        min_age_ms: u64,
        order: CleaningOrder,
    ) -> Result<u32, DeviceError> {
        let now_ms = self.now_ms();
        let mut picked: Vec<(u32, u64, u32)> = {
            let mut state = self.lock();
            let lines: Vec<u32> = match order {
                CleaningOrder::OldestWrite => {
                    let candidates = state
                        .lists
                        .iter(DIRTY_LIST)
                        .filter(|&line| state.lines[line as usize].pins == 0)
                        .map(|line| (line, state.lines[line as usize].written_ms));
                    cleaning::pick_stale(candidates, now_ms, min_age_ms, lines_max)
                }
                CleaningOrder::CoreAddress => {
                    let view = &*state;
                    let line_of = |core_line: u64| view.map[&core_line];
                    let core_lines = cleaning::pick_by_address(
                        &view.dirty_core_lines,
                        view.cleaning_cursor,
                        lines_max,
                        |core_line| {
                            let meta = &view.lines[line_of(core_line) as usize];
                            meta.pins > 0 || now_ms.saturating_sub(meta.written_ms) < min_age_ms
                        },
                    );
                    let lines: Vec<u32> = core_lines.iter().map(|&c| line_of(c)).collect();
                    if let Some(&last) = core_lines.last() {
                        state.cleaning_cursor = last + 1;
                    }
                    lines
                }
            };
            lines
                .into_iter()
                .map(|line| {
                    state.pin(line);
                    let meta = state.lines[line as usize];
                    (line, meta.core_line, meta.write_seq)
                })
                .collect()
        };
        if picked.is_empty() {
            return Ok(0);
        }
        picked.sort_by_key(|&(_, core_line, _)| core_line);
        let result = self.clean_lines(&picked).await;
        let mut persist: BTreeMap<u64, u64> = BTreeMap::new();
        let mut cleaned = 0;
        {
            let mut state = self.lock();
            for &(line, core_line, write_seq) in &picked {
                let meta = state.lines[line as usize];
                if result.is_ok()
                    && meta.core_line == core_line
                    && meta.write_seq == write_seq
                    && meta.dirty
                {
                    state.mark_clean_valid(line);
                    let block = u64::from(line) / ENTRIES_PER_BLOCK;
                    let need = persist.entry(block).or_insert(0);
                    *need = (*need).max(state.lines[line as usize].metadata_gen);
                    cleaned += 1;
                }
            }
        }
        // Keep the lines pinned until their clean entries are durable (see the module doc).
        // Blocks have their own locks: write them all at once.
        let persisted = async {
            join_all(
                persist
                    .iter()
                    .map(|(&block, &need)| self.persist_metadata(block, need))
                    .collect(),
            )
            .await?;
            self.cache.flush().await
        }
        .await;
        {
            let mut state = self.lock();
            for &(line, _, _) in &picked {
                state.unpin(line);
                state.free_if_invalid(line);
            }
        }
        result?;
        persisted?;
        add(&self.counters.cleaned_lines, cleaned);
        Ok(cleaned as u32)
    }

    /// Copies `picked` lines (sorted by core line) to the core and flushes it: the cache
    /// reads run at once (each under its stripe's read lock, so never a half-written line),
    /// and runs of neighbouring core lines go to the core as one write each.
    async fn clean_lines(&self, picked: &[(u32, u64, u32)]) -> Result<(), DeviceError> {
        let line_bytes = self.layout.line_size_bytes as usize;
        let mut data = vec![0u8; picked.len() * line_bytes];
        let reads = picked
            .iter()
            .zip(data.chunks_exact_mut(line_bytes))
            .map(|(&(line, core_line, _), target)| async move {
                let _guard = self.stripes[Self::stripe_of(core_line)].read().await;
                self.cache_read(self.layout.line_offset(line), target).await
            })
            .collect();
        join_all(reads).await?;
        // Runs of consecutive core lines: (first index in `picked`, line count).
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for (index, &(_, core_line, _)) in picked.iter().enumerate() {
            match runs.last_mut() {
                Some((first, count)) if picked[*first].1 + *count as u64 == core_line => {
                    *count += 1
                }
                _ => runs.push((index, 1)),
            }
        }
        // Write to the core with some parallelism so the disk can reorder (elevator / NCQ).
        let mut writes = tokio::task::JoinSet::new();
        let data = Arc::new(data);
        for (first, count) in runs {
            let core = Arc::clone(&self.core);
            let data = Arc::clone(&data);
            let offset_bytes = picked[first].1 * line_bytes as u64;
            writes.spawn(async move {
                let source = &data[first * line_bytes..(first + count) * line_bytes];
                core.write_at(offset_bytes, source)
                    .await
                    .map(|()| source.len() as u64)
            });
        }
        let mut outcome = Ok(());
        while let Some(joined) = writes.join_next().await {
            match joined {
                Ok(Ok(bytes)) => add(&self.counters.core_write_bytes, bytes),
                Ok(Err(error)) => {
                    add(&self.counters.core_errors, 1);
                    outcome = Err(error);
                }
                Err(join) => {
                    outcome = Err(DeviceError::Injected {
                        what: format!("clean task: {join}"),
                    })
                }
            }
        }
        outcome?;
        self.core.flush().await
    }
}

async fn cleaner_loop(inner: Arc<Inner>) {
    while !inner.stopping.load(Ordering::SeqCst) {
        let (config, last_io_ms, dirty) = {
            let state = inner.lock();
            (state.config.cleaning, state.last_io_ms, state.dirty_lines())
        };
        let decision = if inner.flushes_running.load(Ordering::SeqCst) > 0 {
            CleaningDecision::Sleep {
                ms: cleaning::wake_up_ms(&config),
            }
        } else {
            cleaning::decide(&config, inner.now_ms(), last_io_ms, dirty)
        };
        let pause_ms = match decision {
            CleaningDecision::Sleep { ms } => ms,
            CleaningDecision::Clean {
                lines,
                min_age_ms,
                order,
            } => match inner.clean_round(lines, min_age_ms, order).await {
                Ok(flushed) => cleaning::pause_after_round_ms(&config, flushed, lines),
                Err(error) => {
                    tracing::warn!(%error, "cleaning failed; retrying later");
                    1_000
                }
            },
        };
        if pause_ms == 0 {
            tokio::task::yield_now().await;
        } else {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(pause_ms)) => {}
                _ = inner.wake.notified() => {}
            }
        }
    }
}

/// A client operation in progress (counted in `client_ops`, also when its future is dropped).
struct ClientOp<'a>(&'a AtomicU64);

impl Drop for ClientOp<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Inner {
    /// Admits a client operation, unless the cache is stopped.
    fn admit(&self) -> Result<ClientOp<'_>, DeviceError> {
        // Counted before the check, so `stop` sees either this operation or its refusal.
        self.client_ops.fetch_add(1, Ordering::SeqCst);
        let op = ClientOp(&self.client_ops);
        if self.closed.load(Ordering::SeqCst) {
            return Err(DeviceError::io(
                "the cache is stopped",
                std::io::Error::from_raw_os_error(108), // ESHUTDOWN
            ));
        }
        Ok(op)
    }
}

#[async_trait]
impl Device for BlockCache {
    async fn read_at(&self, offset_bytes: u64, buffer: &mut [u8]) -> Result<(), DeviceError> {
        let inner = &self.inner;
        let _op = inner.admit()?;
        let guard = inner.recorder.begin(OpKind::Read);
        let length = buffer.len() as u64;
        let result = match check_request(
            offset_bytes,
            length,
            inner.core.size_bytes(),
            inner.block_bytes,
        ) {
            Ok(()) => inner.read(offset_bytes, buffer).await,
            Err(error) => Err(error),
        };
        spend_budget().await;
        if result.is_ok() {
            add(&inner.counters.exported_read_bytes, length);
        }
        guard.finish(length, result)
    }

    async fn write_at(&self, offset_bytes: u64, data: &[u8]) -> Result<(), DeviceError> {
        let inner = &self.inner;
        let _op = inner.admit()?;
        let guard = inner.recorder.begin(OpKind::Write);
        let length = data.len() as u64;
        let result = match check_request(
            offset_bytes,
            length,
            inner.core.size_bytes(),
            inner.block_bytes,
        ) {
            Ok(()) => inner.write(offset_bytes, data).await,
            Err(error) => Err(error),
        };
        spend_budget().await;
        if result.is_ok() {
            add(&inner.counters.exported_write_bytes, length);
        }
        guard.finish(length, result)
    }

    async fn flush(&self) -> Result<(), DeviceError> {
        let _op = self.inner.admit()?;
        let inner = &self.inner;
        let guard = inner.recorder.begin(OpKind::Flush);
        let core = async {
            if !inner.core_unflushed.swap(false, Ordering::SeqCst) {
                return Ok(());
            }
            let result = inner.core.flush().await;
            if result.is_err() {
                // Still owed: the next flush tries again.
                inner.core_unflushed.store(true, Ordering::SeqCst);
            }
            result
        };
        let (cache, core) = tokio::join!(inner.cache.flush(), core);
        guard.finish(0, cache.and(core))
    }

    async fn discard(&self, offset_bytes: u64, length_bytes: u64) -> Result<(), DeviceError> {
        let inner = &self.inner;
        let _op = inner.admit()?;
        let guard = inner.recorder.begin(OpKind::Discard);
        let result = match check_request(
            offset_bytes,
            length_bytes,
            inner.core.size_bytes(),
            inner.block_bytes,
        ) {
            Ok(()) => inner.discard(offset_bytes, length_bytes).await,
            Err(error) => Err(error),
        };
        guard.finish(length_bytes, result)
    }

    fn size_bytes(&self) -> u64 {
        self.inner.core.size_bytes()
    }

    fn block_size_bytes(&self) -> u64 {
        self.inner.block_bytes
    }

    fn name(&self) -> &str {
        self.inner.recorder.name()
    }

    fn kind(&self) -> DeviceKind {
        DeviceKind::Other("blockcache")
    }

    fn stats(&self) -> DeviceStats {
        self.inner.recorder.snapshot()
    }
}

/// Spends one unit of the task's cooperative budget, yielding when it is spent, once a
/// request is done.
///
/// Why: stripes are taken without touching the budget (see `Inner::read_stripe`), so over
/// devices that answer at once (memory) a request might never yield, and a task looping over
/// requests would hold its worker thread, and the timers it drives, for ever. Spent after the
/// request, not before, so the yield never reorders requests on their way to the devices.
async fn spend_budget() {
    tokio::task::coop::consume_budget().await;
}

/// Counts one device call's outcome: its bytes on success, one error otherwise.
fn tally(
    result: Result<(), DeviceError>,
    bytes: &AtomicU64,
    errors: &AtomicU64,
    length_bytes: usize,
) -> Result<(), DeviceError> {
    match &result {
        Ok(()) => add(bytes, length_bytes as u64),
        Err(_) => add(errors, 1),
    }
    result
}
