//! The tier's counters, as `ceph osd pool stats` shows a cache pool's (promote, flush and evict
//! rates; dirty objects; hit ratio).

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

/// Counters of one tier since it was opened.
#[derive(Debug, Default)]
pub struct Counters {
    pub(crate) reads: AtomicU64,
    pub(crate) writes: AtomicU64,
    pub(crate) hits: AtomicU64,
    pub(crate) misses: AtomicU64,
    pub(crate) proxied: AtomicU64,
    pub(crate) promotions: AtomicU64,
    pub(crate) promoted_bytes: AtomicU64,
    pub(crate) promotions_throttled: AtomicU64,
    pub(crate) flushes: AtomicU64,
    pub(crate) flushed_bytes: AtomicU64,
    pub(crate) flush_conflicts: AtomicU64,
    pub(crate) evictions: AtomicU64,
    pub(crate) writes_around_full: AtomicU64,
    pub(crate) cache_refusals_full: AtomicU64,
    pub(crate) agent_waits: AtomicU64,
    pub(crate) agent_wait_us_max: AtomicU64,
    pub(crate) agent_waits_over_100ms: AtomicU64,
}

impl Counters {
    pub(crate) fn add(counter: &AtomicU64, value: u64) {
        counter.fetch_add(value, Ordering::Relaxed);
    }

    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// A snapshot of a tier's counters and gauges.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct TierStats {
    /// The cache pool.
    pub cache_pool: String,
    /// The base pool.
    pub base_pool: String,
    /// Cache mode.
    pub mode: String,
    /// Admission family.
    pub admission: String,
    /// Client ops that read.
    pub reads: u64,
    /// Client ops that wrote.
    pub writes: u64,
    /// Ops served by the cache without reading the base pool.
    pub hits: u64,
    /// Ops on objects the cache did not hold.
    pub misses: u64,
    /// Ops sent to the base pool as they were.
    pub proxied: u64,
    /// Promotions (an object, or blocks of a cached one, copied into the cache).
    pub promotions: u64,
    /// Bytes promoted.
    pub promoted_bytes: u64,
    /// Promotions skipped because too many were running.
    pub promotions_throttled: u64,
    /// Flushes (a dirty object written back).
    pub flushes: u64,
    /// Bytes flushed.
    pub flushed_bytes: u64,
    /// Flushes refused because the base object changed behind the tier.
    pub flush_conflicts: u64,
    /// Objects evicted.
    pub evictions: u64,
    /// Writes sent around a full cache to the base pool.
    pub writes_around_full: u64,
    /// Writes the cache pool refused for space (its OSDs at their full ratio); the op then
    /// went to the base pool.
    #[serde(default)]
    pub cache_refusals_full: u64,
    /// Client ops that waited for an object held by background work (agent, promotion).
    pub agent_waits: u64,
    /// The longest of those waits, in µs.
    pub agent_wait_us_max: u64,
    /// Those waits longer than 100 ms.
    pub agent_waits_over_100ms: u64,
    /// Objects in the cache now (whiteouts included).
    pub objects: u64,
    /// Dirty objects now.
    pub dirty_objects: u64,
    /// Bytes of present blocks now.
    pub cached_bytes: u64,
    /// The admission policy's capacity in objects.
    pub capacity_objects: u64,
}

impl TierStats {
    /// Hits over hits and misses (0 with no requests).
    pub fn hit_ratio(&self) -> f64 {
        let total = self.hits + self.misses;
        if total == 0 {
            0.0
        } else {
            self.hits as f64 / total as f64
        }
    }

    pub(crate) fn fill(&mut self, counters: &Counters) {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        self.reads = load(&counters.reads);
        self.writes = load(&counters.writes);
        self.hits = load(&counters.hits);
        self.misses = load(&counters.misses);
        self.proxied = load(&counters.proxied);
        self.promotions = load(&counters.promotions);
        self.promoted_bytes = load(&counters.promoted_bytes);
        self.promotions_throttled = load(&counters.promotions_throttled);
        self.flushes = load(&counters.flushes);
        self.flushed_bytes = load(&counters.flushed_bytes);
        self.flush_conflicts = load(&counters.flush_conflicts);
        self.evictions = load(&counters.evictions);
        self.writes_around_full = load(&counters.writes_around_full);
        self.cache_refusals_full = load(&counters.cache_refusals_full);
        self.agent_waits = load(&counters.agent_waits);
        self.agent_wait_us_max = load(&counters.agent_wait_us_max);
        self.agent_waits_over_100ms = load(&counters.agent_waits_over_100ms);
    }
}
