//! The live cache's queues: the buffer and main FIFOs, the ghosts, the write budget, the
//! frequency gate and the adaptive split, and how one request is served on them.

use super::config::sketch_period;
use super::{Strata, GHOST, MAIN, MAIN_GHOST, SMALL, STALE};
use crate::{Effects, Key, Outcome, Request};

impl Strata {
    pub(super) fn set_shape(&mut self, small: f64, threshold: u8, gate: bool) {
        let largest = if self.dram_only_now { 1.0 } else { 0.9 };
        self.small_target = (self.config.capacity as f64 * small.clamp(0.0, largest)) as usize;
        self.threshold = threshold;
        self.gate = gate && self.sketch.is_some();
    }

    pub(super) fn frequency_mut(&mut self, key: Key) -> &mut u8 {
        let index = key as usize;
        if index >= self.frequency.len() {
            self.frequency.resize((index + 1).next_power_of_two(), 0);
        }
        &mut self.frequency[index]
    }

    pub(super) fn may_write(&self) -> bool {
        // The allowance is unlimited unless an owner sets it (a shadow's, `shadow_budget`; the
        // miniature-simulation selector's, `Cache::allow_writes`).
        (self.writes as f64) < self.write_allowance
            && (self.config.budget.is_infinite()
                || (self.writes as f64) < self.config.budget * self.lru_misses as f64)
    }

    /// The frequency gate: whether an object leaving the buffer unpromoted is written to flash
    /// anyway because the sketch has seen it more often than main's next victim (at least
    /// twice), as W-TinyLFU admits from its window. Catches objects re-requested at intervals
    /// longer than the ghost remembers.
    pub(super) fn gate_admits(&self, key: Key) -> bool {
        let Some(sketch) = self.sketch.as_ref().filter(|_| self.gate) else {
            return false;
        };
        let victim = self
            .lists
            .tail(MAIN)
            .map_or(1, |v| sketch.estimate(v).max(1));
        sketch.estimate(key) > victim && self.may_write()
    }

    /// Counts the request in the gate's sketch, halving every counter every
    /// [`sketch_period`] requests so that old popularity fades.
    pub(super) fn count(&mut self, key: Key) {
        if let Some(sketch) = &mut self.sketch {
            sketch.add(key);
            self.sketch_left -= 1;
            if self.sketch_left == 0 {
                self.sketch_left = sketch_period(&self.config);
                sketch.decay();
            }
        }
    }

    pub(super) fn push_ghost(&mut self, key: Key) {
        if self.ghost_capacity > 0 {
            self.lists.push_head(GHOST, key);
            while self.lists.len(GHOST) > self.ghost_capacity {
                self.lists.pop_tail(GHOST);
            }
        }
    }

    /// Whether an object leaving the buffer is written to flash.
    pub(super) fn promotes(&self, key: Key, frequency: u8) -> bool {
        if self.dram_only_now {
            return false;
        }
        let wanted = if self.following {
            frequency >= 1 && self.shadows[self.leader].contains(key)
        } else {
            frequency >= self.threshold
        };
        wanted && self.may_write()
    }

    pub(super) fn evict_small(&mut self, effects: &mut Effects) {
        while let Some(key) = self.lists.pop_tail(SMALL) {
            let frequency = *self.frequency_mut(key);
            if self.promotes(key, frequency) || self.gate_admits(key) {
                *self.frequency_mut(key) = 0;
                self.lists.push_head(MAIN, key);
                self.writes += 1;
                effects.promoted.push(key);
            } else {
                self.push_ghost(key);
                effects.evicted.push(key);
                return;
            }
        }
    }

    pub(super) fn evict_main(&mut self, effects: &mut Effects) {
        if let Some(key) = self.lists.pop_tail(STALE) {
            effects.evicted.push(key);
            return;
        }
        while let Some(key) = self.lists.pop_tail(MAIN) {
            let frequency = *self.frequency_mut(key);
            if frequency >= 1 {
                *self.frequency_mut(key) = frequency.min(self.frequency_cap.max(1)) - 1;
                self.lists.push_head(MAIN, key);
            } else {
                if self.main_ghost && self.ghost_capacity > 0 {
                    self.lists.push_head(MAIN_GHOST, key);
                    while self.lists.len(MAIN_GHOST) > self.ghost_capacity {
                        self.lists.pop_tail(MAIN_GHOST);
                    }
                }
                effects.evicted.push(key);
                return;
            }
        }
    }

    /// ARC's adaptation of its recency target, on our two ghosts: a hit in the buffer's ghost
    /// says a larger buffer would have hit, a hit in main's ghost that a larger main would have;
    /// the step is the ratio of the other ghost's length to this one's (at least one object), so
    /// the rarer signal moves the split as much as the common one.
    pub(super) fn adapt_split(&mut self, grow: bool) {
        let capacity = self.config.capacity as f64;
        let lowest = (capacity * self.config.split_min) as usize;
        let highest = ((capacity * self.config.split_max) as usize).max(lowest);
        let (buffer_ghost, main_ghost) = (
            self.lists.len(GHOST).max(1),
            self.lists.len(MAIN_GHOST).max(1),
        );
        self.small_target = if grow {
            (self.small_target + (main_ghost / buffer_ghost).max(1)).min(highest)
        } else {
            self.small_target
                .saturating_sub((buffer_ghost / main_ghost).max(1))
                .max(lowest)
        };
    }

    pub(super) fn len_flash(&self) -> usize {
        self.lists.len(MAIN) + self.lists.len(STALE)
    }

    pub(super) fn len_all(&self) -> usize {
        self.lists.len(SMALL) + self.len_flash()
    }

    pub(super) fn make_room(&mut self, effects: &mut Effects) {
        while self.len_all() >= self.config.capacity {
            let main_capacity = self.config.capacity - self.small_target;
            if self.len_flash() > main_capacity || self.lists.len(SMALL) == 0 {
                self.evict_main(effects);
            } else {
                self.evict_small(effects);
            }
        }
    }

    /// The live cache's part of a request.
    pub(super) fn serve(&mut self, request: &Request, effects: &mut Effects) -> Outcome {
        let key = request.key;
        match self.lists.list_of(key) {
            Some(list @ (SMALL | MAIN)) => {
                if self.lru_now
                    && (self.dram_only_now
                        || (self.small_target as f64)
                            < self.config.lru_below * self.config.capacity as f64)
                    && list == SMALL
                {
                    self.lists.move_to_head(SMALL, key);
                }
                let frequency = self.frequency_mut(key);
                *frequency = frequency.saturating_add(1);
                return if list == SMALL {
                    Outcome::BufferHit
                } else {
                    Outcome::Hit
                };
            }
            Some(STALE) => {
                self.lists.remove(key);
                self.lists.push_head(MAIN, key);
                let frequency = self.frequency_mut(key);
                *frequency = frequency.saturating_add(1);
                return Outcome::Hit;
            }
            _ => {}
        }
        let list = self.lists.list_of(key);
        let ghost_hit = list == Some(GHOST);
        let main_ghost_hit = list == Some(MAIN_GHOST);
        if ghost_hit || main_ghost_hit {
            self.lists.remove(key);
            if self.splitting {
                self.adapt_split(ghost_hit);
            }
        }
        self.make_room(effects);
        *self.frequency_mut(key) = 0;
        let direct = ghost_hit
            || (main_ghost_hit && self.splitting && self.config.main_ghost_admit)
            || (self.following && self.leader_hit)
            || std::mem::take(&mut self.replica_main_hit);
        if direct && !self.dram_only_now && self.may_write() {
            self.writes += 1;
            self.lists.push_head(MAIN, key);
            Outcome::Admitted
        } else {
            self.lists.push_head(SMALL, key);
            Outcome::Buffered
        }
    }
}
