//! Replaying each request where the live cache's choices are scored: the budget LRU, every
//! shadow and every trial's replica.

use super::{Strata, MAIN, STALE};
use crate::eviction::Eviction;
use crate::{Key, Request};

impl Strata {
    /// Replays the request in the budget LRU (what admit-all LRU would write).
    pub(super) fn observe_budget(&mut self, request: &Request) {
        self.scratch.clear();
        if self.lru.contains(request.key) {
            self.lru.on_hit(request, &mut self.scratch);
        } else {
            self.lru.insert(request, &mut self.scratch);
            self.lru_misses += 1;
        }
    }

    /// Counts the request for the gate, replays it in the budget LRU and every shadow.
    pub(super) fn observe(&mut self, request: &Request) {
        self.count(request.key);
        if self.config.budget.is_finite() {
            self.observe_budget(request);
        }
        if self.shadows.is_empty() {
            return;
        }
        self.leader_hit = false;
        if self.sample_rate < 1.0
            && (crate::mix64(u64::from(request.key)) >> 32) >= self.sample_below
        {
            return;
        }
        let allowance = if self.config.shadow_budget && self.config.budget.is_finite() {
            self.config.budget * self.lru_misses as f64 * self.sample_rate
        } else {
            f64::INFINITY
        };
        for (index, (shadow, misses)) in self
            .shadows
            .iter_mut()
            .zip(&mut self.epoch_misses)
            .enumerate()
        {
            shadow.allow_writes(allowance);
            self.scratch.clear();
            let hit = shadow.replay(request, &mut self.scratch);
            *misses += u64::from(!hit);
            if index == self.leader {
                self.leader_hit = hit;
                if self.following {
                    // Flash objects the leader let go leave first.
                    for &key in &self.scratch {
                        if self.lists.in_list(key, MAIN) {
                            self.lists.remove(key);
                            self.lists.push_head(STALE, key);
                        }
                    }
                }
            }
        }
        self.trial_hits.clear();
        for trial in &mut self.trials {
            let hit = trial.replay(request);
            self.trial_hits.push(hit);
        }
        if self.config.trials_z > 0.0 {
            self.count_differences();
        }
        if self.config.trials_converge && self.sample_rate >= 1.0 {
            self.converge(request.key);
        }
    }

    /// `trials_converge`: whether the followed trial's replica holds `key` in main after this
    /// request (its replica has just replayed it).
    pub(super) fn converge(&mut self, key: Key) {
        self.replica_main_hit = self.trials.get(self.trial).is_some_and(|trial| {
            self.trial_hits.get(self.trial).copied().unwrap_or(false)
                && trial.replica.lists.in_list(key, MAIN)
        });
    }

    /// `trials_z`: counts, per pair of trials, whether their replicas differed on this request.
    pub(super) fn count_differences(&mut self) {
        let n = self.trial_hits.len();
        self.differed.resize(n * n, 0);
        for a in 0..n {
            for b in 0..n {
                self.differed[a * n + b] += u64::from(self.trial_hits[a] != self.trial_hits[b]);
            }
        }
    }
}
