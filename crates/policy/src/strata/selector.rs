//! `strata`'s selector: at the end of every epoch it folds the shadows' misses into decayed
//! scores and switches the live cache to the candidate with the fewest expected misses (with the
//! opt-in timing knobs `switch_cost`, `persist`, `dwell` and `reset`).

use super::{Candidate, Strata, MAIN, SMALL, STALE};

impl Strata {
    /// Makes `index` the leader. Following another policy, flash objects it does not hold become
    /// stale (evicted first); nothing is written or moved between media.
    pub(super) fn switch_to(&mut self, index: usize) {
        self.leader = index;
        match self.candidates[index] {
            Candidate::Shape {
                small,
                threshold,
                gate,
                split,
            } => {
                self.following = false;
                let current = self.small_target;
                self.set_shape(small, threshold, gate);
                self.splitting = self.config.split || split;
                if self.config.adopt && self.sample_rate >= 1.0 {
                    self.adopt_contents(index);
                }
                if self.config.split {
                    // Every shape adapts: the split goes on from where it is now.
                    self.small_target = current;
                } else if split {
                    // Start from the split the shadow has reached, then adapt on the live
                    // cache's own ghosts.
                    if let Some(share) = self.shadows[index].buffer_share() {
                        self.small_target = (self.config.capacity as f64 * share) as usize;
                    }
                }
            }
            Candidate::Follow(_) => {
                self.following = true;
                self.splitting = self.config.split;
                self.set_shape(self.config.follow_small, 1, false);
                self.scratch.clear();
                let shadow = &self.shadows[index];
                self.scratch.extend(
                    self.lists
                        .oldest_first(MAIN)
                        .filter(|&k| !shadow.contains(k)),
                );
                for i in 0..self.scratch.len() {
                    let k = self.scratch[i];
                    self.lists.remove(k);
                    self.lists.push_head(STALE, k);
                }
            }
        }
    }

    /// `adopt`: moves the live cache's contents toward those of the new leader's shadow (which
    /// sees every key): flash objects the shadow no longer holds become stale (evicted first),
    /// and buffer objects the shadow holds in main are written to flash now (cache writes,
    /// within the budget, reported with the request's promotions) instead of when they reach
    /// the buffer's tail. Nothing the live cache does not hold is fetched.
    fn adopt_contents(&mut self, index: usize) {
        let super::candidates::Shadow::Queues(shadow, _) = &self.shadows[index] else {
            return;
        };
        let mut stale = Vec::new();
        let mut promote = Vec::new();
        for (list, out, wanted) in [(MAIN, &mut stale, false), (SMALL, &mut promote, true)] {
            out.extend(self.lists.oldest_first(list).filter(|&k| {
                let in_main = shadow.lists.in_list(k, MAIN) || shadow.lists.in_list(k, STALE);
                let held = in_main || shadow.lists.in_list(k, SMALL);
                (wanted && in_main) || (!wanted && !held)
            }));
        }
        for k in stale {
            self.lists.remove(k);
            self.lists.push_head(STALE, k);
        }
        for k in promote {
            if !self.may_write() {
                break;
            }
            self.lists.remove(k);
            self.lists.push_head(MAIN, k);
            *self.frequency_mut(k) = 0;
            self.writes += 1;
            self.adopted.push(k);
        }
    }

    /// A change detector on the shadows' mean miss ratio per epoch (which the live cache's
    /// switches do not disturb): true when this epoch's ratio is further from its running level
    /// than `reset` x its running mean deviation (plus one point of noise floor).
    fn phase_changed(&mut self) -> bool {
        if self.config.reset <= 0.0 {
            return false;
        }
        let requests = self.epoch_len as f64 * self.sample_rate * self.shadows.len() as f64;
        let ratio = self.epoch_misses.iter().sum::<u64>() as f64 / requests.max(1.0);
        let deviation = (ratio - self.phase_level).abs();
        let changed =
            self.phase_epochs >= 2 && deviation > self.config.reset * self.phase_spread + 0.01;
        if self.phase_epochs == 0 {
            self.phase_level = ratio;
        } else {
            self.phase_spread = 0.75 * self.phase_spread + 0.25 * deviation;
            self.phase_level = 0.75 * self.phase_level + 0.25 * ratio;
        }
        self.phase_epochs += 1;
        changed
    }

    /// Counts the live cache's miss; at the end of an epoch folds the shadows' misses into
    /// decayed scores, learns how far the live cache trails the leader it follows, and adopts
    /// the candidate with the fewest expected misses.
    pub(super) fn end_request(&mut self, hit: bool) {
        if self.shadows.is_empty() {
            return;
        }
        self.live_misses += u64::from(!hit);
        if self.dram_only_now && self.config.scan_watch {
            self.watch_scan();
        }
        self.epoch_left -= 1;
        if self.epoch_left > 0 {
            return;
        }
        if !self.trials.is_empty() {
            self.epoch_left = self.epoch_len / 2;
            self.end_tick();
            return;
        }
        self.epoch_left = self.epoch_len;
        // Misses the live cache had beyond its leader's shadow: the price of following it.
        let excess = std::mem::take(&mut self.live_misses) as f64
            - self.epoch_misses[self.leader] as f64 / self.sample_rate;
        let penalty = &mut self.penalties[self.leader];
        *penalty = 0.5 * *penalty + 0.5 * excess;
        if self.phase_changed() {
            // The past epochs describe another phase: score on this epoch alone.
            self.scores.iter_mut().for_each(|score| *score = 0.0);
        }
        for (score, misses) in self.scores.iter_mut().zip(&mut self.epoch_misses) {
            *score = *score * self.config.decay + std::mem::take(misses) as f64;
        }
        // Scores sum decayed epochs (about 1 / (1 - decay) of them); penalties are per epoch.
        let weight = 1.0 / (1.0 - self.config.decay).max(0.01);
        let learn = self.config.learn;
        let expected = |i: usize| {
            self.scores[i]
                + if learn {
                    self.penalties[i].max(0.0) * weight
                } else {
                    0.0
                }
        };
        // Moving the split costs misses the shadows never pay: the objects of the shrinking
        // side leave before their time. Charge `switch_cost` misses per object of the capacity
        // that changes side, against one epoch's advantage (in the shadows' sampled units).
        let share = |i: usize| match self.candidates[i] {
            Candidate::Shape { small, .. } => small,
            Candidate::Follow(_) => self.config.follow_small,
        };
        let leader_share = share(self.leader);
        let moved_cost = |i: usize| {
            self.config.switch_cost
                * (share(i) - leader_share).abs()
                * self.config.capacity as f64
                * self.sample_rate
                / (1.0 - self.config.decay).max(0.01)
        };
        let best = (0..self.scores.len())
            .min_by(|&a, &b| {
                (expected(a) + moved_cost(a)).total_cmp(&(expected(b) + moved_cost(b)))
            })
            .unwrap_or(self.leader);
        if self.dwell_left > 0 {
            // The last switch's contents are still moving: let them settle first.
            self.dwell_left -= 1;
            return;
        }
        if expected(best) >= expected(self.leader) * (1.0 - self.config.switch_margin) {
            self.streak = 0;
            return;
        }
        // A change of leader must persist: the same challenger best `persist` epochs running.
        if best == self.challenger {
            self.streak += 1;
        } else {
            self.challenger = best;
            self.streak = 1;
        }
        if self.streak >= self.config.persist {
            self.streak = 0;
            self.dwell_left = self.config.dwell;
            self.switch_to(best);
        }
    }
}
