//! `max_moves`: at most N shards change OSD in one run, counted from the current up sets
//! (existing upmaps included), as Ceph's `osdmaptool --upmap-max` limits one run's changes.
//!
//! The flow computes the best plan without a limit; this module then applies its per-PG
//! changes one at a time, the one that brings the most OSDs closest to their bounds first, and
//! only while a change strictly lowers the distance outside the bounds (the pool's first, then
//! the total, as the flow ranks them). So a limited run never leaves a pool or the cluster
//! worse than it found them, never drops an
//! existing upmap for nothing, and a later run continues from where this one stopped.

use std::collections::BTreeMap;

use crate::problem::{OsdId, PgId, PoolId, Problem, ITEM_NONE};
use crate::targets::{Bounds, Targets};

/// Shard counts per (pool, OSD) and per OSD, with the bounds' penalty of each.
struct Counts<'a> {
    targets: &'a Targets,
    per_pool: BTreeMap<(PoolId, OsdId), usize>,
    total: BTreeMap<OsdId, usize>,
}

/// The pool distance's weight against the total's in a change's score: a change moves a few
/// shards, so its total-distance change stays far below this, and a pool never pays for the
/// total.
const POOL_FIRST: u64 = 1 << 24;

impl Counts<'_> {
    fn penalty_of(&self, pool: PoolId, osd: OsdId, pool_delta: i64) -> u64 {
        let count = |c: usize| (c as i64 + pool_delta).max(0) as usize;
        let in_pool = self.per_pool.get(&(pool, osd)).copied().unwrap_or(0);
        let in_total = self.total.get(&osd).copied().unwrap_or(0);
        Bounds::of_target(self.targets.pool_target(pool, osd)).penalty(count(in_pool)) * POOL_FIRST
            + Bounds::of_target(self.targets.total_target(osd)).penalty(count(in_total))
    }

    /// Change of the total penalty if one shard of `pool` moves from `from` to `to`.
    fn move_delta(&self, pool: PoolId, from: OsdId, to: OsdId) -> i64 {
        let before = self.penalty_of(pool, from, 0) + self.penalty_of(pool, to, 0);
        let after = self.penalty_of(pool, from, -1) + self.penalty_of(pool, to, 1);
        after as i64 - before as i64
    }

    fn apply(&mut self, pool: PoolId, from: OsdId, to: OsdId) {
        for (osd, delta) in [(from, -1_i64), (to, 1)] {
            for count in [
                self.per_pool.entry((pool, osd)).or_default(),
                self.total.entry(osd).or_default(),
            ] {
                *count = (*count as i64 + delta).max(0) as usize;
            }
        }
    }

    /// Penalty change of replacing `current` by `new` (shard by shard, in place), applied to
    /// a copy-free running state: moves are applied, measured and undone.
    fn change_delta(&mut self, pool: PoolId, current: &[OsdId], new: &[OsdId]) -> i64 {
        let moves = shard_moves(current, new);
        let mut delta = 0;
        for &(from, to) in &moves {
            delta += self.move_delta(pool, from, to);
            self.apply(pool, from, to);
        }
        for &(from, to) in moves.iter().rev() {
            self.apply(pool, to, from);
        }
        delta
    }
}

/// The (from, to) OSD pairs of the positions where `new` differs from `current`.
fn shard_moves(current: &[OsdId], new: &[OsdId]) -> Vec<(OsdId, OsdId)> {
    current
        .iter()
        .zip(new)
        .filter(|(c, n)| c != n && **c != ITEM_NONE && **n != ITEM_NONE)
        .map(|(&c, &n)| (c, n))
        .collect()
}

/// Limit the change from the current up sets to `best` to at most `max_moves` shards. Returns
/// the up sets to use and whether some change of `best` was left out.
pub(crate) fn limit_moves(
    problem: &Problem,
    targets: &Targets,
    best: &BTreeMap<PgId, Vec<OsdId>>,
    max_moves: usize,
) -> (BTreeMap<PgId, Vec<OsdId>>, bool) {
    let mut counts = Counts {
        targets,
        per_pool: BTreeMap::new(),
        total: BTreeMap::new(),
    };
    let mut up: BTreeMap<PgId, Vec<OsdId>> = BTreeMap::new();
    for pg in &problem.pgs {
        let current = pg.up();
        for &osd in current.iter().filter(|&&o| o != ITEM_NONE) {
            *counts.per_pool.entry((pg.id.pool, osd)).or_default() += 1;
            *counts.total.entry(osd).or_default() += 1;
        }
        up.insert(pg.id, current);
    }
    // Changes not yet applied: (pg, new up set, shards it changes).
    let mut pending: Vec<(PgId, &Vec<OsdId>, usize)> = best
        .iter()
        .filter_map(|(id, new)| {
            let current = up.get(id)?;
            let shards = shard_moves(current, new).len();
            (shards > 0).then_some((*id, new, shards))
        })
        .collect();
    let mut budget = max_moves;
    loop {
        // Best improvement per shard first; ties by PG id, so runs are reproducible.
        let mut scored: Vec<(i64, usize)> = Vec::new();
        for (index, &(id, new, shards)) in pending.iter().enumerate() {
            if shards > budget {
                continue;
            }
            let Some(current) = up.get(&id) else { continue };
            let current = current.clone();
            let delta = counts.change_delta(id.pool, &current, new);
            if delta < 0 {
                scored.push((delta * 1_000 / shards as i64, index));
            }
        }
        if scored.is_empty() {
            break;
        }
        scored.sort_unstable();
        let mut applied = Vec::new();
        for &(_, index) in &scored {
            let (id, new, shards) = pending[index];
            let Some(current) = up.get(&id).cloned() else {
                continue;
            };
            // Earlier changes of this pass may have taken the gain away: measure again.
            if shards > budget || counts.change_delta(id.pool, &current, new) >= 0 {
                continue;
            }
            for (from, to) in shard_moves(&current, new) {
                counts.apply(id.pool, from, to);
            }
            up.insert(id, new.clone());
            budget -= shards;
            applied.push(index);
        }
        if applied.is_empty() {
            break;
        }
        applied.sort_unstable();
        for index in applied.into_iter().rev() {
            pending.swap_remove(index);
        }
    }
    (up, !pending.is_empty())
}
