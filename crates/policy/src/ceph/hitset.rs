//! Ceph's hit sets (src/osd/HitSet.h): per-PG records of which objects were accessed during a
//! period, explicit (an exact set) or bloom. A set is archived when its period ends or when it is
//! full; the archive keeps the `hit_set_count` most recent sets.

use crate::sketch::Bloom;
use crate::Key;
use std::collections::{HashSet, VecDeque};

/// How a hit set records objects.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum HitSetKind {
    /// An exact hash set (Ceph's `explicit_hash`).
    Explicit,
    /// A bloom filter with this false-positive rate over the whole archive (Ceph's `bloom`,
    /// default 0.05; each set gets `fpp / hit_set_count`).
    Bloom {
        /// Target false-positive probability.
        fpp: f64,
    },
}

/// Bloom sets are sized from the previous set's unique inserts scaled to a full period, clamped
/// to Ceph's `osd_hit_set_min_size` / `osd_hit_set_max_size`.
const MIN_TARGET_SIZE: u64 = 1000;
const MAX_TARGET_SIZE: u64 = 100_000;

#[derive(Clone, Debug)]
pub(crate) enum HitSet {
    Explicit(HashSet<Key>),
    Bloom { bloom: Bloom, target_size: u64 },
}

impl HitSet {
    pub(crate) fn insert(&mut self, key: Key) {
        match self {
            HitSet::Explicit(set) => {
                set.insert(key);
            }
            HitSet::Bloom { bloom, .. } => {
                bloom.insert(key as u64);
            }
        }
    }
    pub(crate) fn contains(&self, key: Key) -> bool {
        match self {
            HitSet::Explicit(set) => set.contains(&key),
            HitSet::Bloom { bloom, .. } => bloom.contains(key as u64),
        }
    }
    fn is_full(&self) -> bool {
        match self {
            HitSet::Explicit(_) => false,
            HitSet::Bloom { bloom, target_size } => bloom.unique_inserts() >= *target_size,
        }
    }
    fn unique_inserts(&self) -> u64 {
        match self {
            HitSet::Explicit(set) => set.len() as u64,
            HitSet::Bloom { bloom, .. } => bloom.unique_inserts(),
        }
    }
}

/// The current set and the archive of one PG.
#[derive(Clone, Debug)]
pub(crate) struct HitSetHistory {
    kind: HitSetKind,
    count: usize,
    period_ms: u64,
    pub(crate) current: HitSet,
    start_ms: Option<u64>,
    /// Archived sets, newest at the back.
    pub(crate) archive: VecDeque<HitSet>,
}

impl HitSetHistory {
    pub(crate) fn new(kind: HitSetKind, count: usize, period_ms: u64, now_ms: u64) -> Self {
        let current = Self::create(kind, count, period_ms, None, 0);
        let _ = now_ms;
        HitSetHistory {
            kind,
            count,
            period_ms,
            current,
            start_ms: None,
            archive: VecDeque::new(),
        }
    }

    fn create(
        kind: HitSetKind,
        count: usize,
        period_ms: u64,
        previous: Option<&HitSet>,
        duration_ms: u64,
    ) -> HitSet {
        match kind {
            HitSetKind::Explicit => HitSet::Explicit(HashSet::new()),
            HitSetKind::Bloom { fpp } => {
                let mut fpp = fpp / count.max(1) as f64;
                if fpp <= 0.0 {
                    fpp = 0.01;
                }
                let target = previous.map_or(0, |set| {
                    (set.unique_inserts() as f64 * period_ms as f64 / duration_ms.max(1) as f64)
                        as u64
                });
                let target_size = target.clamp(MIN_TARGET_SIZE, MAX_TARGET_SIZE);
                HitSet::Bloom {
                    // Bounded by MAX_TARGET_SIZE: always dense.
                    bloom: Bloom::new(target_size as usize, fpp, 0x4854, usize::MAX),
                    target_size,
                }
            }
        }
    }

    /// Records an access; returns whether the object was already in the current set
    /// (Ceph's `in_hit_set`, computed before the insert).
    pub(crate) fn record(&mut self, key: Key, now_ms: u64) -> bool {
        let start_ms = *self.start_ms.get_or_insert(now_ms);
        let in_hit_set = self.current.contains(key);
        self.current.insert(key);
        if self.current.is_full() || start_ms + self.period_ms <= now_ms {
            self.persist(now_ms);
        }
        in_hit_set
    }

    /// Archives the current set and starts a new one (Ceph's `hit_set_persist`).
    fn persist(&mut self, now_ms: u64) {
        let duration = now_ms.saturating_sub(self.start_ms.unwrap_or(now_ms));
        let fresh = Self::create(
            self.kind,
            self.count,
            self.period_ms,
            Some(&self.current),
            duration,
        );
        let full = std::mem::replace(&mut self.current, fresh);
        self.start_ms = Some(now_ms);
        if self.count > 0 {
            self.archive.push_back(full);
            while self.archive.len() > self.count {
                self.archive.pop_front();
            }
        }
    }

    /// Archived sets, newest first.
    pub(crate) fn newest_first(&self) -> impl Iterator<Item = &HitSet> {
        self.archive.iter().rev()
    }
}
