//! Selector trials (`trials`): the shadows score fixed shapes, but the live cache is not a fixed
//! shape: after a switch its contents follow the old shape for a while, so a selector that
//! switches often pays misses no shadow shows (P12 5/10%, where the best fixed shape chosen in
//! hindsight wins and the default selector loses). A trial is one selector setting (epoch
//! length, decay) that reads the same shadows' misses and runs its choices on a *replica*: an
//! id-only, non-adaptive copy of the live queues at the shadows' (sampled) capacity, whose shape
//! it switches as the live cache would. The replica's misses therefore include the cost of that
//! selector's switching. The live cache takes the shape chosen by the trial whose replica had
//! the fewest decayed misses (`trials_decay`), and changes trial only for a lead of
//! `trials_margin` (the replicas are sampled above 16,384 objects, so small leads are noise).
//! The first trial is the default selector, followed from the start and kept on ties, so a
//! trace on which the trials agree runs exactly as without them.
//!
//! By default the only other trial is the selector that never switches: the live cache stops
//! adapting (and returns to the initial shape, S3-FIFO's 10% / threshold 2) when, summed since
//! the start, switching has cost the default selector's replica 3% more misses than never
//! switching. It met P12 1% and narrowed P12 5% and 10%; no other cell of the scorecard moved.
//! A replica costs about one shadow; the two cost about 20% of the speed on P12 and
//! cloudPhysicsIO 10%.
//!
//! The LRU trial (`lru_trial`, default on) is the default selector again, on a replica whose
//! buffer is LRU-ordered and reading the LRU-ordered shadows (the second half of the shadows'
//! misses); changing between it and a FIFO-buffer trial needs only `lru_trial_margin` (0.5%;
//! `lru_trial_margin_sampled`, 1%, where the replicas are sampled).
//!
//! The live cache also changes trial on a *paired test* (`trials_z`, default on since session
//! `policy-s9`): when the best replica leads the followed one by more than `trials_z` x the
//! square root of the requests on which the two replicas differed (at least `trials_z_min`
//! of them), whatever the margins say; with it a fourth trial runs by default, the
//! never-switching one on an LRU-ordered replica (`lru_trial=3`).
//!
//! `fixed_trial` (opt-in) adds one more choice without a replica: the shape whose shadow has
//! missed least so far (a shadow *is* a replica that never switches, of its own shape). It
//! narrowed P12 5% and MSR 1% but met no further cell, and with smaller margins lost P12 1%.

use super::{Candidate, Strata, StrataConfig};
use crate::{Cache, Effects, Key, Request};

/// Selector settings the trials can run: (ticks per epoch, decay per epoch); a tick is half the
/// live epoch, and 0 ticks means a selector that never switches (the initial shape throughout).
/// The first is the default selector (`epoch` = 2 x capacity, `decay` = 0.5) and always runs;
/// the others run when their bit of [`StrataConfig::trials`] is set. By default only the second
/// does: it asks whether switching has paid at all on this trace so far. The rest (slower
/// memories: 0.9, and scores summed since the start, which tend to the best fixed shape in
/// hindsight; shorter and longer epochs) are opt-in (see `crates/sim/RESULTS.md`).
/// The shape index a scan trial follows (see `StrataConfig::scan_trial`): no candidate, the
/// whole capacity as a DRAM buffer.
pub(super) const SCAN: usize = usize::MAX;

pub(super) const TRIALS: &[(u32, f64)] = &[
    (2, 0.5),
    (0, 0.0),
    (2, 0.9),
    (2, 1.0),
    (1, std::f64::consts::FRAC_1_SQRT_2),
    (4, 0.5),
    (1, 0.5),
    (4, 0.9),
];

/// One selector setting and the replica cache it steers.
#[derive(Clone, Debug)]
pub(super) struct Trial {
    pub(super) ticks_per_epoch: u32,
    ticks_left: u32,
    decay: f64,
    /// Per candidate: misses of this trial's current epoch, and the decayed scores.
    epoch_misses: Vec<u64>,
    scores: Vec<f64>,
    /// The candidate this trial follows.
    pub(super) leader: usize,
    pub(super) replica: Box<Strata>,
    /// Whether the replica's buffer is LRU-ordered (`lru_trial`).
    pub(super) lru: bool,
    effects: Effects,
    /// The replica's misses in the current tick, and their decayed sum over ticks.
    pub(super) tick_misses: u64,
    pub(super) score: f64,
}

impl Trial {
    pub(super) fn new(
        (ticks_per_epoch, decay): (u32, f64),
        lru: bool,
        leader: usize,
        capacity: usize,
        key_space: usize,
        live: &StrataConfig,
        candidates: usize,
    ) -> Trial {
        let mut config =
            StrataConfig::fixed_shape(live, capacity, live.small, live.threshold, live.gate);
        config.lru_buffer = lru;
        config.dram_only = live.dram_only;
        if lru && live.lru_frequency_cap != 0 {
            config.main_frequency_cap = live.lru_frequency_cap;
        }
        if ticks_per_epoch == 0 && live.never_frequency_cap != 0 {
            config.main_frequency_cap = live.never_frequency_cap;
        }
        let mut replica = Strata::new(config, key_space);
        // A replica that switches must be able to take the gated shape: it keeps a sketch when
        // the live cache does.
        if ticks_per_epoch > 0 && live.gate_shapes && replica.sketch.is_none() {
            replica.sketch = Some(super::Frequencies::new(
                super::sketch_period(&config),
                key_space,
            ));
            replica.sketch_left = super::sketch_period(&config);
        }
        Trial {
            ticks_per_epoch,
            ticks_left: ticks_per_epoch,
            decay,
            epoch_misses: vec![0; candidates],
            scores: vec![0.0; candidates],
            leader,
            replica: Box::new(replica),
            lru,
            effects: Effects::default(),
            tick_misses: 0,
            score: 0.0,
        }
    }

    /// Replays a (sampled) request in the replica.
    pub(super) fn replay(&mut self, request: &Request) -> bool {
        self.effects.clear();
        let hit = self.replica.on_request(request, &mut self.effects).is_hit();
        self.tick_misses += u64::from(!hit);
        hit
    }

    /// Ends a tick: adds the shadows' misses of the tick, and at the end of this trial's epoch
    /// rescores the candidates and switches the replica as the default selector would.
    fn end_tick(&mut self, tick_misses: &[u64], candidates: &[Candidate], meta_decay: f64) {
        self.score = self.score * meta_decay + std::mem::take(&mut self.tick_misses) as f64;
        for (sum, &misses) in self.epoch_misses.iter_mut().zip(tick_misses) {
            *sum += misses;
        }
        if self.ticks_per_epoch == 0 {
            // Never switches: the initial shape throughout.
            return;
        }
        self.ticks_left -= 1;
        if self.ticks_left > 0 {
            return;
        }
        self.ticks_left = self.ticks_per_epoch;
        for (score, misses) in self.scores.iter_mut().zip(&mut self.epoch_misses) {
            *score = *score * self.decay + std::mem::take(misses) as f64;
        }
        let best = (0..self.scores.len())
            .min_by(|&a, &b| self.scores[a].total_cmp(&self.scores[b]))
            .unwrap_or(self.leader);
        if self.scores[best] < self.scores[self.leader] {
            self.leader = best;
            if let Candidate::Shape {
                small,
                threshold,
                gate,
                ..
            } = candidates[best]
            {
                self.replica.set_shape(small, threshold, gate);
            }
        }
    }
}

impl Strata {
    /// Whether the selector trials run: only over our plain shapes (a replica cannot follow
    /// another policy or adapt its split), and only with the selector's own timing rules off
    /// (`learn`, `margin`, `switch_cost`, `persist`, `dwell`, `reset`), which the trials'
    /// replicas do not copy.
    pub(super) fn trials_apply(config: &StrataConfig, candidates: &[Candidate]) -> bool {
        config.trials != 0
            && config.adapt
            && !candidates.is_empty()
            && !config.learn
            && config.switch_margin == 0.0
            && config.switch_cost == 0.0
            && config.persist <= 1
            && config.dwell == 0
            && config.reset == 0.0
            && candidates
                .iter()
                .all(|c| matches!(c, Candidate::Shape { split: false, .. }))
    }

    /// End of a tick (half an epoch) with trials: every trial takes the tick's shadow misses,
    /// and the live cache takes the shape of the trial whose replica missed least (the current
    /// one on ties).
    pub(super) fn end_tick(&mut self) {
        let n = self.candidates.len();
        for trial in &mut self.trials {
            let misses = if trial.lru && self.epoch_misses.len() >= 2 * n {
                &self.epoch_misses[n..2 * n]
            } else {
                &self.epoch_misses[..n]
            };
            trial.end_tick(misses, &self.candidates, self.config.trials_decay);
        }
        let decay = self.config.trials_decay;
        for (score, &misses) in self.fixed_scores.iter_mut().zip(&self.epoch_misses) {
            *score = *score * decay + misses as f64;
        }
        self.epoch_misses.iter_mut().for_each(|m| *m = 0);
        // (score, shape, LRU-ordered buffer, main's frequency cap) of each trial, then of the
        // best fixed shape so far (`fixed_trial`).
        let mut options: Vec<(f64, usize, bool, u8)> = self
            .trials
            .iter()
            .map(|t| (t.score, t.leader, t.lru, t.replica.frequency_cap))
            .collect();
        if let Some(best_fixed) = (0..self.fixed_scores.len())
            .min_by(|&a, &b| self.fixed_scores[a].total_cmp(&self.fixed_scores[b]))
        {
            let cap = self.config.main_frequency_cap;
            options.push((self.fixed_scores[best_fixed], best_fixed, false, cap));
        }
        let current = self.trial.min(options.len() - 1);
        let best = (0..options.len())
            .min_by(|&a, &b| options[a].0.total_cmp(&options[b].0))
            .unwrap_or(current);
        let margin = if options[current].1 == SCAN && self.config.scan_leave_margin >= 0.0 {
            self.config.scan_leave_margin
        } else if options[best].1 == SCAN || options[current].1 == SCAN {
            self.config.scan_trial_margin
        } else if options[best].2 == options[current].2 {
            self.config.trials_margin
        } else if self.sample_rate < 1.0 {
            self.config.lru_trial_margin_sampled
        } else {
            self.config.lru_trial_margin
        };
        let before = self.trial;
        if options[best].0 < options[current].0 * (1.0 - margin)
            || self.significant_lead(current, best, options[current].0 - options[best].0)
        {
            self.trial = best;
        }
        let (_, leader, lru, cap) = options[self.trial];
        self.take_trial(leader, lru, cap);
        if self.trial != before
            && self.config.trials_adopt
            && self.sample_rate >= 1.0
            && self.trial < self.trials.len()
            && leader != SCAN
            && !self.config.scan_adopt
        {
            self.adopt_replica(self.trial);
        }
    }

    /// `trials_z`: whether trial `best`'s replica leads trial `current`'s by more than
    /// `trials_z` x the square root of the requests on which the two differed (and they
    /// differed on at least `trials_z_min`): neither may be a scan trial, or the best fixed
    /// shape (`fixed_trial`, which has no replica).
    fn significant_lead(&self, current: usize, best: usize, lead: f64) -> bool {
        let n = self.trials.len();
        if self.config.trials_z <= 0.0
            || (self.sample_rate < 1.0 && !self.config.trials_z_sampled)
            || current >= n
            || best >= n
            || self.trials[current].leader == SCAN
            || self.trials[best].leader == SCAN
        {
            return false;
        }
        let differed = self.differed.get(current * n + best).copied().unwrap_or(0);
        differed >= self.config.trials_z_min
            && lead > self.config.trials_z * (differed as f64).sqrt()
    }

    /// `scan_watch`: while the live cache follows a scan trial, every request, it leaves for
    /// the trial whose replica has missed least so far as soon as that one leads by
    /// `scan_leave_margin` (0 when unset), not only at the end of a tick: a scan trial that
    /// falls behind costs misses on every request until it is left.
    pub(super) fn watch_scan(&mut self) {
        let running = |t: &Trial| t.score + t.tick_misses as f64;
        let scan = running(&self.trials[self.trial]);
        let Some(best) = (0..self.trials.len())
            .filter(|&i| self.trials[i].leader != SCAN)
            .min_by(|&a, &b| running(&self.trials[a]).total_cmp(&running(&self.trials[b])))
        else {
            return;
        };
        let margin = self.config.scan_leave_margin.max(0.0);
        if running(&self.trials[best]) < scan * (1.0 - margin) {
            self.trial = best;
            let trial = &self.trials[best];
            let (leader, lru, cap) = (trial.leader, trial.lru, trial.replica.frequency_cap);
            self.take_trial(leader, lru, cap);
        }
    }

    /// The live cache takes the shape, buffer order and frequency cap of the trial it now
    /// follows (`self.trial`, or the best fixed shape when that is past the trials).
    fn take_trial(&mut self, leader: usize, lru: bool, cap: u8) {
        self.lru_now = self.config.lru_buffer || lru;
        self.frequency_cap = cap;
        if leader == SCAN {
            if !self.dram_only_now {
                self.dram_only_now = true;
                self.set_shape(1.0, self.threshold, false);
            }
        } else if std::mem::replace(&mut self.dram_only_now, self.config.dram_only) {
            self.switch_to(leader);
            // The trial may still run the initial shape, which need not be a candidate: take
            // its replica's shape.
            if self.trial < self.trials.len() {
                self.take_replica_shape(self.trial);
                if self.config.scan_adopt && self.sample_rate >= 1.0 {
                    self.adopt_replica(self.trial);
                }
            }
        } else if self.config.trials_shape
            && self.sample_rate >= 1.0
            && self.trial < self.trials.len()
        {
            if leader != self.leader {
                self.switch_to(leader);
            }
            self.take_replica_shape(self.trial);
        } else if leader != self.leader {
            self.switch_to(leader);
        }
    }

    /// The live cache takes the shape (buffer share, threshold, gate) trial `index`'s replica
    /// runs, which is not a candidate while the replica keeps an initial shape outside
    /// [`super::CANDIDATES`] (the tiny caches' 70% buffer); the exact buffer target when the
    /// replica has the live capacity.
    fn take_replica_shape(&mut self, index: usize) {
        let replica = &self.trials[index].replica;
        let (share, threshold, gate) = (
            replica.small_target as f64 / replica.config.capacity as f64,
            replica.threshold,
            replica.gate,
        );
        let same = replica.config.capacity == self.config.capacity;
        let exact = same.then_some(replica.small_target);
        self.set_shape(share, threshold, gate);
        if let Some(target) = exact {
            self.small_target = target;
        }
    }
}

impl Strata {
    /// `scan_adopt`: on leaving a scan trial (the whole cache a DRAM buffer), the live cache
    /// holds every object in its buffer in LRU or FIFO order, far from any flash shape; left to
    /// drift, it pays misses no replica shows. Where the replicas see every key, the live cache
    /// takes the placement of trial `index`'s replica for the objects it holds: those the
    /// replica holds in main are written to flash now (cache writes, within the budget), those
    /// it holds in its buffer stay in the buffer, in the replica's order, and the rest are
    /// dropped; the ghost (ids of requests the live cache has seen) becomes the replica's.
    /// Nothing the live cache does not hold is fetched.
    pub(super) fn adopt_replica(&mut self, index: usize) {
        use super::{GHOST, MAIN, SMALL, STALE};
        let replica = &self.trials[index].replica;
        let walk = |list: u8| -> Vec<(Key, u8)> {
            replica
                .lists
                .oldest_first(list)
                .map(|k| (k, replica.frequency.get(k as usize).copied().unwrap_or(0)))
                .collect()
        };
        let (main, small, ghost) = (walk(MAIN), walk(SMALL), walk(GHOST));
        // Flash objects the replica does not hold in main are evicted first.
        let stale: Vec<Key> = self
            .lists
            .oldest_first(MAIN)
            .filter(|&k| !replica.lists.in_list(k, MAIN))
            .collect();
        // Buffer objects the replica holds nowhere are dropped.
        let dropped: Vec<Key> = self
            .lists
            .oldest_first(SMALL)
            .filter(|&k| !replica.lists.in_list(k, MAIN) && !replica.lists.in_list(k, SMALL))
            .collect();
        for k in stale {
            self.lists.remove(k);
            self.lists.push_head(STALE, k);
        }
        for &k in &dropped {
            self.lists.remove(k);
        }
        self.dropped.extend(dropped);
        for (k, frequency) in main {
            match self.lists.list_of(k) {
                Some(MAIN) => {}
                Some(SMALL) if self.may_write() => {
                    self.writes += 1;
                    self.adopted.push(k);
                }
                _ => continue,
            }
            self.lists.remove(k);
            self.lists.push_head(MAIN, k);
            *self.frequency_mut(k) = frequency;
        }
        for (k, frequency) in small {
            if self.lists.in_list(k, SMALL) {
                self.lists.remove(k);
                self.lists.push_head(SMALL, k);
                *self.frequency_mut(k) = frequency;
            }
        }
        while self.lists.pop_tail(GHOST).is_some() {}
        for (k, _) in ghost {
            if self.lists.list_of(k).is_none() {
                self.lists.push_head(GHOST, k);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{MAIN, SMALL};
    use super::*;
    use crate::{mix64, Outcome};

    fn request(seq: usize, key: Key) -> Request {
        Request {
            key,
            seq: seq as u64,
            ..Request::default()
        }
    }

    /// Per request: the outcome and the shape the live cache follows.
    fn run(cache: &mut Strata, keys: &[Key]) -> Vec<(Outcome, usize)> {
        let mut effects = Effects::default();
        keys.iter()
            .enumerate()
            .map(|(seq, &key)| {
                effects.clear();
                let outcome = cache.on_request(&request(seq, key), &mut effects);
                assert!(cache.len() <= cache.capacity());
                (outcome, cache.leader)
            })
            .collect()
    }

    fn skewed(requests: u64, keys: u64, salt: u64) -> Vec<Key> {
        (0..requests)
            .map(|i| (mix64(i ^ salt) % keys).min(mix64(i ^ (salt + 1)) % keys) as Key)
            .collect()
    }

    #[test]
    fn converging_changes_nothing_while_the_live_cache_runs_as_its_replica() {
        // With the default selector as the only trial and no write budget, the live cache is
        // its replica request for request, so the replica never holds in main what the live
        // cache misses: `trials_converge` must not move one outcome, however often the shape
        // changes.
        let mut keys = skewed(30_000, 600, 3);
        keys.extend(skewed(30_000, 300, 11).iter().map(|k| k + 1_000));
        let outcomes = |converge: bool| {
            let mut config = StrataConfig::new(200);
            config.trials = 1;
            config.lru_trial = 0;
            config.budget = f64::INFINITY;
            config.epoch_min = 100;
            config.trials_converge = converge;
            run(&mut Strata::new(config, 0), &keys)
        };
        let without = outcomes(false);
        let switches = without.windows(2).filter(|w| w[0].1 != w[1].1).count();
        assert!(switches >= 2, "the trace must change shape: {switches}");
        assert_eq!(outcomes(true), without);
    }

    #[test]
    fn converging_writes_into_main_what_the_followed_replica_holds_there() {
        // The live cache loses an object its replica holds in main (as after a change of
        // trial, when their contents differ): with `trials_converge` the next request for it
        // writes it straight into main; without, it enters the buffer as any miss.
        let keys = skewed(20_000, 400, 5);
        let after_a_loss = |converge: bool| {
            let mut config = StrataConfig::new(100);
            config.epoch_min = 100;
            config.budget = f64::INFINITY;
            config.trials_converge = converge;
            let mut cache = Strata::new(config, 0);
            run(&mut cache, &keys);
            let replica = &cache.trials[cache.trial].replica;
            let key = replica
                .lists
                .oldest_first(MAIN)
                .find(|&k| cache.lists.in_list(k, MAIN))
                .expect("the live cache and its replica share main objects");
            cache.lists.remove(key);
            let mut effects = Effects::default();
            let outcome = cache.on_request(&request(keys.len(), key), &mut effects);
            (
                outcome,
                cache.lists.in_list(key, MAIN),
                cache.lists.in_list(key, SMALL),
            )
        };
        assert_eq!(after_a_loss(true), (Outcome::Admitted, true, false));
        assert_eq!(after_a_loss(false), (Outcome::Buffered, false, true));
    }

    #[test]
    fn a_tiny_cache_following_the_never_switching_trial_runs_its_replica_s_shape() {
        // The never-switching trial of a tiny cache keeps the initial 70% buffer, which is no
        // candidate: its selector names the first candidate (1% / threshold 1). A live cache
        // that changes to it from another shape runs, with `trials_shape`, the replica's 70%
        // buffer; without, the named candidate's.
        let followed = |shape: bool| {
            let mut config = StrataConfig::new(50);
            config.lru_trial = 0;
            config.trials_shape = shape;
            let mut cache = Strata::new(config, 0);
            assert_eq!(cache.trials.len(), 2);
            // The default selector has moved to another candidate, and the live cache with it.
            let other = cache.candidates.len() - 1;
            cache.trials[0].leader = other;
            cache.switch_to(other);
            cache.trials[0].score = 1000.0;
            cache.trials[1].score = 900.0;
            cache.end_tick();
            assert_eq!(cache.trial, 1);
            let replica = &cache.trials[1].replica;
            assert_eq!(
                replica.small_target,
                (50.0 * cache.config.tiny_small) as usize
            );
            (
                (cache.small_target, cache.threshold),
                (replica.small_target, replica.threshold),
            )
        };
        let (live, replica) = followed(true);
        assert_eq!(live, replica);
        let (live, replica) = followed(false);
        assert!(live.0 < replica.0, "{live:?} vs {replica:?}");
    }

    #[test]
    fn where_sampled_the_paired_test_runs_only_if_asked() {
        // A sampled cache (the shadows and replicas see half the keys): the never-switching
        // replica leads by 2% of the followed one's misses, within the 3% margin, and by more
        // than 1.5 x the square root of the requests on which the two differed. The paired
        // test makes the live cache change trial only with `trials_z_sampled`.
        let end_tick_with = |sampled: bool| {
            let mut config = StrataConfig::new(100);
            config.lru_trial = 0;
            config.sample_objects = 50;
            config.trials_z_sampled = sampled;
            let mut cache = Strata::new(config, 0);
            assert!(cache.sample_rate < 1.0);
            assert_eq!(cache.trials.len(), 2);
            let differed = 100;
            cache.differed = vec![0, differed, differed, 0];
            cache.trials[0].score = 1000.0;
            cache.trials[1].score = 980.0;
            assert!(20.0 > cache.config.trials_z * (differed as f64).sqrt());
            cache.end_tick();
            cache.trial
        };
        assert_eq!(end_tick_with(true), 1);
        assert_eq!(end_tick_with(false), 0);
    }
}
