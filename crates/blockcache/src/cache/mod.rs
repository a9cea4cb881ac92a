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

mod clean;
mod exported;
mod io;
mod metadata;

use clean::cleaner_loop;
use exported::tally;
use io::join_all;

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
}
