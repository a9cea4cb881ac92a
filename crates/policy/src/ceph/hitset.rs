//! Ceph's hit sets (src/osd/HitSet.h): per-PG records of which objects were accessed during a
//! period, explicit (an exact set) or bloom. A set is archived when its period ends or when it is
//! full; the archive keeps the `hit_set_count` most recent sets.
//!
//! Fullness, as Ceph 16.2 has it: `PrimaryLogPG::do_op` inserts the object of every op into the
//! current set and calls `hit_set_persist` once `HitSet::is_full()`; a bloom set's `is_full` is
//! `bloom_filter::is_full`, `insert_count_ >= target_element_count_`, where `insert_count_` grows
//! on every insert, repeats included (src/common/bloom_filter.hpp). So a bloom set is archived
//! after `target_size` accesses to its PG (at least `osd_hit_set_min_size` = 1000), however few
//! objects they touch. The next set's `target_size` comes from the previous set's
//! `approx_unique_insert_count` scaled to a whole period (`PrimaryLogPG::hit_set_create`), so
//! sizing uses the unique estimate and fullness the count of all inserts. An explicit set is
//! never full (`ExplicitHashHitSet::is_full` is false).

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
    Bloom {
        bloom: Bloom,
        target_size: u64,
        /// Every insert, repeats included (Ceph's `insert_count_`).
        inserts: u64,
    },
}

impl HitSet {
    pub(crate) fn insert(&mut self, key: Key) {
        match self {
            HitSet::Explicit(set) => {
                set.insert(key);
            }
            HitSet::Bloom { bloom, inserts, .. } => {
                bloom.insert(key as u64);
                *inserts += 1;
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
            HitSet::Bloom {
                target_size,
                inserts,
                ..
            } => *inserts >= *target_size,
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
                    inserts: 0,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A bloom set counts every insert, as Ceph's `insert_count_`: 1000 accesses to 10 objects
    /// fill a set of the minimum size 1000 long before its 4 h period ends. Counting only new
    /// keys, no set ever filled with few objects per PG.
    #[test]
    fn a_bloom_set_is_full_after_target_size_accesses_repeats_included() {
        let period_ms = 4 * 3_600_000;
        let mut history = HitSetHistory::new(HitSetKind::Bloom { fpp: 0.05 }, 12, period_ms, 0);
        for access in 0..999u64 {
            history.record((access % 10) as Key, access * 1000);
        }
        assert!(history.archive.is_empty());
        history.record(3, 999_000);
        assert_eq!(history.archive.len(), 1, "archived at the 1000th access");
        // The next set is sized from the unique estimate (10 keys over 999 s, scaled to 4 h:
        // 144), clamped to the minimum 1000, so it too fills after 1000 accesses.
        match &history.current {
            HitSet::Bloom { target_size, .. } => assert_eq!(*target_size, MIN_TARGET_SIZE),
            HitSet::Explicit(_) => panic!("bloom expected"),
        }
        for access in 0..1000u64 {
            history.record((access % 10) as Key, 1_000_000 + access * 1000);
        }
        assert_eq!(history.archive.len(), 2);
        assert!(history.newest_first().all(|set| set.contains(3)));
    }

    /// Explicit sets are never full: only the period archives them.
    #[test]
    fn an_explicit_set_rotates_only_with_its_period() {
        let mut history = HitSetHistory::new(HitSetKind::Explicit, 4, 10_000, 0);
        for access in 0..5000u64 {
            history.record((access % 3) as Key, access);
        }
        assert!(history.archive.is_empty());
        history.record(1, 10_000);
        assert_eq!(history.archive.len(), 1);
    }
}
