//! `strata`: our best combination for an SSD cache pool: a DRAM probation buffer in front of a
//! flash main queue, whose shape is tuned online by shadow caches that replay the trace's own
//! past requests.
//!
//! **Structure (S3-FIFO's queues, split across media).**
//! - *Probation buffer* (DRAM, part of the cache capacity): every missed object enters it; it is
//!   a FIFO, and an object hit `threshold` times while in it is *promoted* to main when it
//!   reaches the tail. Objects that leave it unpromoted were never written to flash.
//! - *Main* (flash): a FIFO with 2-bit frequencies and reinsertion (CLOCK-like). An object
//!   requested again soon after leaving the buffer unpromoted (it is in the ghost) is written
//!   straight into main.
//! - *Ghost* (DRAM, ids only, `ghost` x capacity entries).
//!
//! **Adaptivity (online, from past requests only).** `shadows` id-only S3-FIFO caches of the
//! same total capacity, one per candidate (buffer share, promotion threshold), replay every
//! request. Every `epoch` requests their misses are folded into exponentially decayed scores
//! and the real cache adopts the candidate with the fewest recent misses: the buffer's target
//! share and the threshold change, and the queues drift to the new shape through normal
//! evictions (no object is moved or rewritten because of a switch).
//!
//! **Write budget.** A shadow admit-all LRU of the same size counts what LRU would write (its
//! misses). A promotion or ghost admission is a flash write and happens only while the writes so
//! far stay below `budget` x that count; otherwise the object leaves the buffer for the ghost.
//!
//! **Accounting (what counts as cache and as a write).**
//! - Capacity: buffer + main <= `capacity` objects at every step. The DRAM buffer holds data and
//!   is counted inside the capacity, not on top of it: at 10% the buffer is 10% of the objects
//!   the cache may hold, and main gets the rest.
//! - Cache writes: objects written into main (flash): ghost admissions (reported as
//!   [`Outcome::Admitted`]) and promotions from the buffer (reported in [`Effects::promoted`]).
//!   Entering the buffer is a miss served by the backing pool ([`Outcome::Bypassed`]) plus a
//!   DRAM copy; a write request there is written through to the backing pool.
//! - DRAM metadata (ids, not counted as capacity, as for every other policy here, whose ghost
//!   lists and sketches are not counted either): per object in the key space 10 bytes for the
//!   queues and frequency; per shadow candidate the same again, plus one shadow LRU.
use crate::eviction::{Eviction, Lru, S3Fifo, S3FifoConfig};
use crate::list::Lists;
use crate::{Cache, Effects, Key, Outcome, Request};

const SMALL: u8 = 0;
const MAIN: u8 = 1;
const GHOST: u8 = 2;

/// Candidate shapes the shadows try: (buffer share, promotion threshold).
pub const CANDIDATES: &[(f64, u8)] = &[
    (0.01, 1),
    (0.05, 1),
    (0.10, 1),
    (0.25, 1),
    (0.01, 2),
    (0.05, 2),
    (0.10, 2),
    (0.25, 2),
    (0.40, 2),
];

/// Parameters of our policy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StrataConfig {
    /// Capacity in objects (DRAM buffer + flash main).
    pub capacity: usize,
    /// Initial buffer share of the capacity (fixed when `adapt` is off). Default 0.1.
    pub small: f64,
    /// Initial promotion threshold: hits in the buffer needed to be promoted. Default 2.
    pub threshold: u8,
    /// Ghost entries as a share of the capacity. Default 0.9.
    pub ghost: f64,
    /// Follow the best shadow candidate online. Default true.
    pub adapt: bool,
    /// Requests per scoring epoch, as a multiple of the capacity (at least 1,000). Default 2.
    pub epoch: f64,
    /// Decay of older epochs' misses per epoch. Default 0.5.
    pub decay: f64,
    /// Flash writes allowed, as a share of a shadow admit-all LRU's misses. Default 0.33.
    pub budget: f64,
}

impl StrataConfig {
    /// Defaults for a cache of `capacity` objects.
    pub fn new(capacity: usize) -> Self {
        StrataConfig {
            capacity,
            small: 0.1,
            threshold: 2,
            ghost: 0.9,
            adapt: true,
            epoch: 2.0,
            decay: 0.5,
            budget: 0.33,
        }
    }
}

/// Our policy: DRAM probation buffer, flash main queue, shape chosen online by shadows.
#[derive(Clone, Debug)]
pub struct Strata {
    config: StrataConfig,
    lists: Lists,
    frequency: Vec<u8>,
    small_target: usize,
    threshold: u8,
    ghost_capacity: usize,
    writes: u64,
    lru: Lru,
    lru_misses: u64,
    scratch: Vec<Key>,
    shadows: Vec<S3Fifo>,
    epoch_misses: Vec<u64>,
    scores: Vec<f64>,
    leader: usize,
    epoch_len: u64,
    epoch_left: u64,
}

impl Strata {
    /// An empty cache.
    pub fn new(config: StrataConfig, key_space: usize) -> Self {
        assert!(config.capacity > 0, "capacity must be positive");
        let capacity = config.capacity;
        let shadows: Vec<S3Fifo> = if config.adapt {
            CANDIDATES
                .iter()
                .map(|&(small, threshold)| {
                    S3Fifo::new(
                        capacity,
                        key_space,
                        S3FifoConfig {
                            small_ratio: small,
                            ghost_ratio: config.ghost,
                            move_to_main_threshold: threshold,
                        },
                    )
                })
                .collect()
        } else {
            Vec::new()
        };
        let leader = CANDIDATES
            .iter()
            .position(|&(s, t)| s == config.small && t == config.threshold)
            .unwrap_or(0);
        let epoch_len = ((capacity as f64 * config.epoch) as u64).max(1000);
        let mut strata = Strata {
            lists: Lists::new(3, key_space),
            frequency: vec![0; key_space],
            small_target: 0,
            threshold: config.threshold,
            ghost_capacity: (capacity as f64 * config.ghost) as usize,
            writes: 0,
            lru: Lru::new(capacity, key_space),
            lru_misses: 0,
            scratch: Vec::new(),
            epoch_misses: vec![0; shadows.len()],
            scores: vec![0.0; shadows.len()],
            shadows,
            leader,
            epoch_len,
            epoch_left: epoch_len,
            config,
        };
        strata.set_shape(config.small, config.threshold);
        strata
    }

    fn set_shape(&mut self, small: f64, threshold: u8) {
        self.small_target = (self.config.capacity as f64 * small.clamp(0.0, 0.9)) as usize;
        self.threshold = threshold;
    }

    fn frequency_mut(&mut self, key: Key) -> &mut u8 {
        let index = key as usize;
        if index >= self.frequency.len() {
            self.frequency.resize((index + 1).next_power_of_two(), 0);
        }
        &mut self.frequency[index]
    }

    fn may_write(&self) -> bool {
        (self.writes as f64) < self.config.budget * self.lru_misses as f64
    }

    fn push_ghost(&mut self, key: Key) {
        if self.ghost_capacity > 0 {
            self.lists.push_head(GHOST, key);
            while self.lists.len(GHOST) > self.ghost_capacity {
                self.lists.pop_tail(GHOST);
            }
        }
    }

    fn evict_small(&mut self, effects: &mut Effects) {
        while let Some(key) = self.lists.pop_tail(SMALL) {
            if *self.frequency_mut(key) >= self.threshold && self.may_write() {
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

    fn evict_main(&mut self, effects: &mut Effects) {
        while let Some(key) = self.lists.pop_tail(MAIN) {
            let frequency = *self.frequency_mut(key);
            if frequency >= 1 {
                *self.frequency_mut(key) = frequency.min(3) - 1;
                self.lists.push_head(MAIN, key);
            } else {
                effects.evicted.push(key);
                return;
            }
        }
    }

    fn len_all(&self) -> usize {
        self.lists.len(SMALL) + self.lists.len(MAIN)
    }

    fn make_room(&mut self, effects: &mut Effects) {
        while self.len_all() >= self.config.capacity {
            let main_capacity = self.config.capacity - self.small_target;
            if self.lists.len(MAIN) > main_capacity || self.lists.len(SMALL) == 0 {
                self.evict_main(effects);
            } else {
                self.evict_small(effects);
            }
        }
    }

    fn observe(&mut self, request: &Request) {
        self.scratch.clear();
        if self.lru.contains(request.key) {
            self.lru.on_hit(request, &mut self.scratch);
        } else {
            self.lru.insert(request, &mut self.scratch);
            self.lru_misses += 1;
        }
        if self.shadows.is_empty() {
            return;
        }
        for (shadow, misses) in self.shadows.iter_mut().zip(&mut self.epoch_misses) {
            self.scratch.clear();
            if shadow.contains(request.key) {
                shadow.on_hit(request, &mut self.scratch);
            } else {
                shadow.insert(request, &mut self.scratch);
                *misses += 1;
            }
        }
        self.epoch_left -= 1;
        if self.epoch_left == 0 {
            self.epoch_left = self.epoch_len;
            for (score, misses) in self.scores.iter_mut().zip(&mut self.epoch_misses) {
                *score = *score * self.config.decay + std::mem::take(misses) as f64;
            }
            let best = (0..self.scores.len())
                .min_by(|&a, &b| self.scores[a].total_cmp(&self.scores[b]))
                .unwrap_or(self.leader);
            if self.scores[best] < self.scores[self.leader] {
                self.leader = best;
                let (small, threshold) = CANDIDATES[best];
                self.set_shape(small, threshold);
            }
        }
    }
}

impl Cache for Strata {
    fn on_request(&mut self, request: &Request, effects: &mut Effects) -> Outcome {
        let key = request.key;
        self.observe(request);
        if matches!(self.lists.list_of(key), Some(SMALL) | Some(MAIN)) {
            let frequency = self.frequency_mut(key);
            *frequency = frequency.saturating_add(1);
            return Outcome::Hit;
        }
        let ghost_hit = self.lists.list_of(key) == Some(GHOST);
        if ghost_hit {
            self.lists.remove(key);
        }
        self.make_room(effects);
        *self.frequency_mut(key) = 0;
        if ghost_hit && self.may_write() {
            self.writes += 1;
            self.lists.push_head(MAIN, key);
            Outcome::Admitted
        } else {
            self.lists.push_head(SMALL, key);
            Outcome::Bypassed
        }
    }
    fn len(&self) -> usize {
        self.len_all()
    }
    fn capacity(&self) -> usize {
        self.config.capacity
    }
    fn contains(&self, key: Key) -> bool {
        matches!(self.lists.list_of(key), Some(SMALL) | Some(MAIN))
    }
    fn name(&self) -> String {
        format!(
            "strata(small={},threshold={},adapt={},budget={})",
            self.config.small, self.config.threshold, self.config.adapt, self.config.budget
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mix64;

    #[test]
    fn one_hit_wonders_stay_within_the_write_budget() {
        let mut cache = Strata::new(StrataConfig::new(100), 0);
        let mut effects = Effects::default();
        let (mut writes, mut misses) = (0u64, 0u64);
        for seq in 0..50_000u64 {
            effects.clear();
            // Half the requests go to 50 hot objects, half to never-repeated keys.
            let key = if seq % 2 == 0 {
                (mix64(seq) % 50) as Key
            } else {
                1000 + seq as Key
            };
            let request = Request {
                key,
                seq,
                now_ms: seq,
                size_bytes: 1,
                write: false,
                next_seq: u64::MAX,
            };
            match cache.on_request(&request, &mut effects) {
                Outcome::Hit => {}
                Outcome::Admitted => {
                    writes += 1;
                    misses += 1;
                }
                Outcome::Bypassed => misses += 1,
            }
            writes += effects.promoted.len() as u64;
            assert!(cache.len() <= 100);
        }
        assert!(
            writes as f64 <= 0.34 * misses as f64,
            "{writes} of {misses}"
        );
        // The 50 hot objects end up cached: at least 40% of requests hit.
        assert!(misses < 30_000, "{misses}");
    }

    #[test]
    fn fixed_shape_without_budget_is_s3fifo() {
        let capacity = 64;
        let mut config = StrataConfig::new(capacity);
        config.adapt = false;
        config.budget = f64::INFINITY;
        let mut cache = Strata::new(config, 0);
        let mut s3 = S3Fifo::new(capacity, 0, S3FifoConfig::default());
        let (mut effects, mut evicted) = (Effects::default(), Vec::new());
        for seq in 0..100_000u64 {
            effects.clear();
            let key = (mix64(seq) % 1000).min(mix64(seq ^ 7) % 1000) as Key;
            let request = Request {
                key,
                seq,
                ..Request::default()
            };
            let hit = cache.on_request(&request, &mut effects).is_hit();
            assert_eq!(hit, s3.contains(key), "request {seq}");
            evicted.clear();
            if hit {
                s3.on_hit(&request, &mut evicted);
            } else {
                s3.insert(&request, &mut evicted);
            }
        }
    }
}
