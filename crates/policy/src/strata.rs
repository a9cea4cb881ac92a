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
//! **Adaptivity (online, from past requests only).** id-only shadow caches, one per
//! [`CANDIDATES`] entry, replay every request. Every `epoch` requests their misses are folded
//! into exponentially decayed scores and the real cache adopts the candidate with the fewest
//! recent misses. The default candidates are our own shapes (buffer share 1-40%, promotion
//! threshold 1 or 2, i.e. S3-FIFOs): adopting one changes the buffer's target share and the
//! threshold, and the queues drift to the new shape through normal evictions (no object is moved
//! or rewritten because of a switch). The 40% buffer with threshold 1 is the recency candidate:
//! it keeps objects re-requested within 0.4 x capacity insertions without a flash write.
//!
//! **Opt-in mechanisms, measured and not adopted** (knobs in [`StrataConfig`]; figures in
//! `crates/sim/RESULTS.md`):
//! - `follow`: shadows of LRU, ARC, FIFO, SIEVE (and with `follow_frequency` 2Q, W-TinyLFU),
//!   followed by membership: the live cache promotes from the buffer only what the leader holds,
//!   admits straight to flash what the leader hit, and evicts first the flash objects the leader
//!   dropped (`STALE`). It cannot copy an admit-all policy's first re-reference after the buffer
//!   without writing every object, so it trails its leader; on the tuning traces it lost cells.
//! - `learn`: adds to each candidate's score the misses the live cache had beyond that
//!   candidate's shadow while it led, so a candidate the live cache cannot copy loses its lead.
//! - `unhit`: shapes with threshold 0 (every buffer exit written to flash, within the budget).
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
use crate::eviction::{Arc, Eviction, Fifo, Lru, S3Fifo, S3FifoConfig, Sieve, TwoQ, WTinyLfu};
use crate::list::Lists;
use crate::{Cache, Effects, Key, Outcome, Request};

const SMALL: u8 = 0;
const MAIN: u8 = 1;
const GHOST: u8 = 2;
/// Flash objects the leading shadow no longer holds: evicted before anything in `MAIN`.
const STALE: u8 = 3;

/// A policy a shadow cache runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Candidate {
    /// Our own queues with this buffer share and promotion threshold (an S3-FIFO shape): the live
    /// cache copies the shape exactly.
    Shape {
        /// Buffer share of the capacity.
        small: f64,
        /// Hits in the buffer needed to be promoted.
        threshold: u8,
    },
    /// Another policy, followed by membership: the live cache promotes and keeps what it holds.
    Follow(Foreign),
}

/// The other policies a shadow can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Foreign {
    /// Admit-all LRU.
    Lru,
    /// ARC.
    Arc,
    /// 2Q.
    TwoQ,
    /// W-TinyLFU (1% window).
    WTinyLfu,
    /// SIEVE.
    Sieve,
    /// FIFO.
    Fifo,
}

/// Candidate shapes the shadows try: our queues at several (buffer share, threshold), then the
/// recency- and frequency-style policies followed by membership.
pub const CANDIDATES: &[Candidate] = &[
    Candidate::Shape {
        small: 0.01,
        threshold: 1,
    },
    Candidate::Shape {
        small: 0.05,
        threshold: 1,
    },
    Candidate::Shape {
        small: 0.10,
        threshold: 1,
    },
    Candidate::Shape {
        small: 0.25,
        threshold: 1,
    },
    Candidate::Shape {
        small: 0.40,
        threshold: 1,
    },
    Candidate::Shape {
        small: 0.01,
        threshold: 2,
    },
    Candidate::Shape {
        small: 0.05,
        threshold: 2,
    },
    Candidate::Shape {
        small: 0.10,
        threshold: 2,
    },
    Candidate::Shape {
        small: 0.25,
        threshold: 2,
    },
    Candidate::Shape {
        small: 0.40,
        threshold: 2,
    },
    Candidate::Shape {
        small: 0.01,
        threshold: 0,
    },
    Candidate::Shape {
        small: 0.10,
        threshold: 0,
    },
    Candidate::Shape {
        small: 0.25,
        threshold: 0,
    },
    Candidate::Follow(Foreign::Lru),
    Candidate::Follow(Foreign::Arc),
    Candidate::Follow(Foreign::TwoQ),
    Candidate::Follow(Foreign::WTinyLfu),
    Candidate::Follow(Foreign::Sieve),
    Candidate::Follow(Foreign::Fifo),
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
    /// Also shadow the other policies ([`Candidate::Follow`]), not only our shapes. Default false.
    pub follow: bool,
    /// Also follow the frequency-style others (W-TinyLFU, 2Q), not only the recency-style ones
    /// (LRU, ARC, FIFO, SIEVE). Default false.
    pub follow_frequency: bool,
    /// Also try shapes that write every object leaving the buffer to flash (threshold 0, as
    /// CLOCK does), within the write budget. Default false.
    pub admit_unhit: bool,
    /// Buffer share while following another policy. Default 0.25.
    pub follow_small: f64,
    /// A challenger must have fewer decayed misses than the leader by this share to take over
    /// (hysteresis: a switch costs misses while the contents move). Default 0.
    pub switch_margin: f64,
    /// Requests per scoring epoch, as a multiple of the capacity (at least `epoch_min`).
    /// Default 2.
    pub epoch: f64,
    /// Shadow caches hold at most this many objects: above it they see only a hash-sampled
    /// share of the keys (capacity x share = this), as SHARDS does, so their cost stops growing
    /// with the cache. 0 = never sample. Not applied while `follow` is on. Default 16,384.
    pub sample_objects: usize,
    /// Fewest requests per scoring epoch. Default 1,000.
    pub epoch_min: u64,
    /// Add to each candidate's score the misses the live cache had beyond that candidate's
    /// shadow while it led (learned, decayed). Default false.
    pub learn: bool,
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
            follow: false,
            follow_frequency: false,
            admit_unhit: false,
            follow_small: 0.25,
            switch_margin: 0.0,
            epoch: 2.0,
            epoch_min: 1000,
            sample_objects: 16_384,
            learn: false,
            decay: 0.5,
            budget: 0.33,
        }
    }
}

/// One shadow cache (ids only).
#[derive(Clone, Debug)]
enum Shadow {
    S3Fifo(S3Fifo),
    Lru(Lru),
    Arc(Arc),
    TwoQ(TwoQ),
    WTinyLfu(WTinyLfu),
    Sieve(Sieve),
    Fifo(Fifo),
}

impl Shadow {
    fn new(candidate: Candidate, capacity: usize, key_space: usize, ghost: f64) -> Shadow {
        match candidate {
            Candidate::Shape { small, threshold } => Shadow::S3Fifo(S3Fifo::new(
                capacity,
                key_space,
                S3FifoConfig {
                    small_ratio: small,
                    ghost_ratio: ghost,
                    move_to_main_threshold: threshold,
                },
            )),
            Candidate::Follow(Foreign::Lru) => Shadow::Lru(Lru::new(capacity, key_space)),
            Candidate::Follow(Foreign::Arc) => Shadow::Arc(Arc::new(capacity, key_space)),
            Candidate::Follow(Foreign::TwoQ) => Shadow::TwoQ(TwoQ::new(capacity, key_space)),
            Candidate::Follow(Foreign::WTinyLfu) => {
                Shadow::WTinyLfu(WTinyLfu::new(capacity, key_space, Default::default()))
            }
            Candidate::Follow(Foreign::Sieve) => Shadow::Sieve(Sieve::new(capacity, key_space)),
            Candidate::Follow(Foreign::Fifo) => Shadow::Fifo(Fifo::new(capacity, key_space)),
        }
    }

    fn eviction(&mut self) -> &mut dyn Eviction {
        match self {
            Shadow::S3Fifo(e) => e,
            Shadow::Lru(e) => e,
            Shadow::Arc(e) => e,
            Shadow::TwoQ(e) => e,
            Shadow::WTinyLfu(e) => e,
            Shadow::Sieve(e) => e,
            Shadow::Fifo(e) => e,
        }
    }

    fn contains(&self, key: Key) -> bool {
        match self {
            Shadow::S3Fifo(e) => e.contains(key),
            Shadow::Lru(e) => e.contains(key),
            Shadow::Arc(e) => e.contains(key),
            Shadow::TwoQ(e) => e.contains(key),
            Shadow::WTinyLfu(e) => e.contains(key),
            Shadow::Sieve(e) => e.contains(key),
            Shadow::Fifo(e) => e.contains(key),
        }
    }

    /// Replays one request; returns whether it hit. Evicted keys go to `evicted`.
    fn replay(&mut self, request: &Request, evicted: &mut Vec<Key>) -> bool {
        let eviction = self.eviction();
        if eviction.contains(request.key) {
            eviction.on_hit(request, evicted);
            true
        } else {
            eviction.insert(request, evicted);
            false
        }
    }
}

/// Our policy: DRAM probation buffer, flash main queue, shape chosen online by shadows.
#[derive(Clone, Debug)]
pub struct Strata {
    config: StrataConfig,
    candidates: Vec<Candidate>,
    lists: Lists,
    frequency: Vec<u8>,
    small_target: usize,
    threshold: u8,
    ghost_capacity: usize,
    writes: u64,
    lru: Lru,
    lru_misses: u64,
    scratch: Vec<Key>,
    shadows: Vec<Shadow>,
    epoch_misses: Vec<u64>,
    scores: Vec<f64>,
    /// Per candidate: decayed misses per epoch the live cache had beyond that candidate's shadow
    /// while following it (0 until it has led).
    penalties: Vec<f64>,
    live_misses: u64,
    /// Share of the key space the shadows see (1 = every key).
    sample_rate: f64,
    /// A key is sampled when the top 32 bits of its hash are below this.
    sample_below: u64,
    leader: usize,
    /// Whether the leader is another policy followed by membership.
    following: bool,
    /// Whether the leading shadow held the current request's key before it.
    leader_hit: bool,
    epoch_len: u64,
    epoch_left: u64,
}

impl Strata {
    /// An empty cache.
    pub fn new(config: StrataConfig, key_space: usize) -> Self {
        assert!(config.capacity > 0, "capacity must be positive");
        let capacity = config.capacity;
        let candidates: Vec<Candidate> = if config.adapt {
            CANDIDATES
                .iter()
                .copied()
                .filter(|c| match c {
                    Candidate::Shape { threshold: 0, .. } => config.admit_unhit,
                    Candidate::Shape { .. } => true,
                    Candidate::Follow(Foreign::WTinyLfu | Foreign::TwoQ) => {
                        config.follow && config.follow_frequency
                    }
                    Candidate::Follow(_) => config.follow,
                })
                .collect()
        } else {
            Vec::new()
        };
        // SHARDS-style spatial sampling: shadows see only the keys whose hash falls below the
        // rate, at the capacity scaled by it. Following needs every key's membership: no sampling.
        let sample_rate = if config.follow || config.sample_objects == 0 {
            1.0
        } else {
            (config.sample_objects as f64 / capacity as f64).min(1.0)
        };
        let shadow_capacity = ((capacity as f64 * sample_rate).round() as usize).max(1);
        let shadows: Vec<Shadow> = candidates
            .iter()
            .map(|&c| Shadow::new(c, shadow_capacity, key_space, config.ghost))
            .collect();
        let leader = candidates
            .iter()
            .position(|&c| {
                c == Candidate::Shape {
                    small: config.small,
                    threshold: config.threshold,
                }
            })
            .unwrap_or(0);
        let epoch_len = ((capacity as f64 * config.epoch) as u64).max(config.epoch_min.max(1));
        let mut strata = Strata {
            lists: Lists::new(4, key_space),
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
            penalties: vec![0.0; shadows.len()],
            live_misses: 0,
            sample_rate,
            sample_below: (sample_rate * (1u64 << 32) as f64) as u64,
            candidates,
            shadows,
            leader,
            following: false,
            leader_hit: false,
            epoch_len,
            epoch_left: epoch_len,
            config,
        };
        strata.set_shape(config.small, config.threshold);
        strata
    }

    /// The candidate the live cache follows now.
    pub fn leader(&self) -> Option<Candidate> {
        self.candidates.get(self.leader).copied()
    }

    fn set_shape(&mut self, small: f64, threshold: u8) {
        self.small_target = (self.config.capacity as f64 * small.clamp(0.0, 0.9)) as usize;
        self.threshold = threshold;
    }

    /// Makes `index` the leader. Following another policy, flash objects it does not hold become
    /// stale (evicted first); nothing is written or moved between media.
    fn switch_to(&mut self, index: usize) {
        self.leader = index;
        match self.candidates[index] {
            Candidate::Shape { small, threshold } => {
                self.following = false;
                self.set_shape(small, threshold);
            }
            Candidate::Follow(_) => {
                self.following = true;
                self.set_shape(self.config.follow_small, 1);
                self.scratch.clear();
                let mut key = self.lists.tail(MAIN);
                while let Some(k) = key {
                    if !self.shadows[index].contains(k) {
                        self.scratch.push(k);
                    }
                    let newer = self.lists.newer(k);
                    key = (newer != crate::list::NIL).then_some(newer);
                }
                for i in 0..self.scratch.len() {
                    let k = self.scratch[i];
                    self.lists.remove(k);
                    self.lists.push_head(STALE, k);
                }
            }
        }
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

    /// Whether an object leaving the buffer is written to flash.
    fn promotes(&self, key: Key, frequency: u8) -> bool {
        let wanted = if self.following {
            frequency >= 1 && self.shadows[self.leader].contains(key)
        } else {
            frequency >= self.threshold
        };
        wanted && self.may_write()
    }

    fn evict_small(&mut self, effects: &mut Effects) {
        while let Some(key) = self.lists.pop_tail(SMALL) {
            let frequency = *self.frequency_mut(key);
            if self.promotes(key, frequency) {
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
        if let Some(key) = self.lists.pop_tail(STALE) {
            effects.evicted.push(key);
            return;
        }
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

    fn len_flash(&self) -> usize {
        self.lists.len(MAIN) + self.lists.len(STALE)
    }

    fn len_all(&self) -> usize {
        self.lists.len(SMALL) + self.len_flash()
    }

    fn make_room(&mut self, effects: &mut Effects) {
        while self.len_all() >= self.config.capacity {
            let main_capacity = self.config.capacity - self.small_target;
            if self.len_flash() > main_capacity || self.lists.len(SMALL) == 0 {
                self.evict_main(effects);
            } else {
                self.evict_small(effects);
            }
        }
    }

    /// Replays the request in the budget LRU and every shadow; at the end of an epoch, adopts
    /// the candidate with the fewest decayed misses.
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
        self.leader_hit = false;
        if self.sample_rate < 1.0
            && (crate::mix64(u64::from(request.key)) >> 32) >= self.sample_below
        {
            return;
        }
        for (index, (shadow, misses)) in self
            .shadows
            .iter_mut()
            .zip(&mut self.epoch_misses)
            .enumerate()
        {
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
    }

    /// Counts the live cache's miss; at the end of an epoch folds the shadows' misses into
    /// decayed scores, learns how far the live cache trails the leader it follows, and adopts
    /// the candidate with the fewest expected misses.
    fn end_request(&mut self, hit: bool) {
        if self.shadows.is_empty() {
            return;
        }
        self.live_misses += u64::from(!hit);
        self.epoch_left -= 1;
        if self.epoch_left > 0 {
            return;
        }
        self.epoch_left = self.epoch_len;
        // Misses the live cache had beyond its leader's shadow: the price of following it.
        let excess = std::mem::take(&mut self.live_misses) as f64
            - self.epoch_misses[self.leader] as f64 / self.sample_rate;
        let penalty = &mut self.penalties[self.leader];
        *penalty = 0.5 * *penalty + 0.5 * excess;
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
        let best = (0..self.scores.len())
            .min_by(|&a, &b| expected(a).total_cmp(&expected(b)))
            .unwrap_or(self.leader);
        if expected(best) < expected(self.leader) * (1.0 - self.config.switch_margin) {
            self.switch_to(best);
        }
    }
}

impl Strata {
    /// The live cache's part of a request.
    fn serve(&mut self, request: &Request, effects: &mut Effects) -> Outcome {
        let key = request.key;
        match self.lists.list_of(key) {
            Some(SMALL) | Some(MAIN) => {
                let frequency = self.frequency_mut(key);
                *frequency = frequency.saturating_add(1);
                return Outcome::Hit;
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
        let ghost_hit = self.lists.list_of(key) == Some(GHOST);
        if ghost_hit {
            self.lists.remove(key);
        }
        self.make_room(effects);
        *self.frequency_mut(key) = 0;
        let direct = ghost_hit || (self.following && self.leader_hit);
        if direct && self.may_write() {
            self.writes += 1;
            self.lists.push_head(MAIN, key);
            Outcome::Admitted
        } else {
            self.lists.push_head(SMALL, key);
            Outcome::Bypassed
        }
    }
}

impl Cache for Strata {
    fn on_request(&mut self, request: &Request, effects: &mut Effects) -> Outcome {
        self.observe(request);
        let outcome = self.serve(request, effects);
        self.end_request(outcome.is_hit());
        outcome
    }
    fn len(&self) -> usize {
        self.len_all()
    }
    fn capacity(&self) -> usize {
        self.config.capacity
    }
    fn contains(&self, key: Key) -> bool {
        matches!(
            self.lists.list_of(key),
            Some(SMALL) | Some(MAIN) | Some(STALE)
        )
    }
    fn name(&self) -> String {
        format!(
            "strata(small={},threshold={},adapt={},follow={},budget={})",
            self.config.small,
            self.config.threshold,
            self.config.adapt,
            self.config.follow,
            self.config.budget
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

    /// Keys requested twice, the second time after `gap` new keys: a pure recency pattern.
    fn requests_twice(keys: u32, gap: u32) -> Vec<Key> {
        let mut out = Vec::with_capacity(2 * keys as usize);
        for key in 0..keys {
            out.push(key);
            if key >= gap {
                out.push(key - gap);
            }
        }
        out
    }

    fn misses_and_writes(cache: &mut dyn Cache, keys: &[Key]) -> (u64, u64) {
        let mut effects = Effects::default();
        let (mut misses, mut writes) = (0u64, 0u64);
        for (seq, &key) in keys.iter().enumerate() {
            effects.clear();
            let request = Request {
                key,
                seq: seq as u64,
                ..Request::default()
            };
            match cache.on_request(&request, &mut effects) {
                Outcome::Hit => {}
                Outcome::Admitted => {
                    misses += 1;
                    writes += 1;
                }
                Outcome::Bypassed => misses += 1,
            }
            writes += effects.promoted.len() as u64;
            assert!(cache.len() <= cache.capacity());
        }
        (misses, writes)
    }

    #[test]
    fn on_a_trace_with_recency_the_selector_grows_the_buffer() {
        // Half the requests go to 900 hot keys (a frequency component for main), half to keys
        // requested twice, 150 new keys apart (a recency component). S3-FIFO's 10% probation
        // (100 objects) misses every second request of the latter; a buffer of 250 or more
        // catches it, at the price of some hot keys.
        let capacity = 1000;
        let recency = requests_twice(100_000, 150);
        let keys: Vec<Key> = recency
            .iter()
            .enumerate()
            .flat_map(|(i, &k)| [(mix64(i as u64) % 900) as Key, 1000 + k])
            .collect();
        let mut strata = Strata::new(StrataConfig::new(capacity), 0);
        let (misses, writes) = misses_and_writes(&mut strata, &keys);
        assert!(
            matches!(
                strata.leader(),
                Some(Candidate::Shape { small, .. }) if small >= 0.25
            ),
            "{:?}",
            strata.leader()
        );
        let mut s3 = crate::admission::Filtered::new(
            S3Fifo::new(capacity, 0, S3FifoConfig::default()),
            crate::admission::AdmitAll,
        );
        let (s3_misses, _) = misses_and_writes(&mut s3, &keys);
        let mut lru =
            crate::admission::Filtered::new(Lru::new(capacity, 0), crate::admission::AdmitAll);
        let (lru_misses, lru_writes) = misses_and_writes(&mut lru, &keys);
        eprintln!("strata {misses} ({writes} writes), S3-FIFO {s3_misses}, LRU {lru_misses}");
        assert!(
            misses * 10 < s3_misses * 9,
            "{misses} vs S3-FIFO {s3_misses}"
        );
        assert!(misses < lru_misses, "{misses} vs LRU {lru_misses}");
        assert!(writes * 3 <= lru_writes, "{writes} vs LRU {lru_writes}");
    }

    #[test]
    fn sampled_shadows_choose_as_the_full_ones() {
        // The recency trace above with shadows of 250 objects seeing a quarter of the keys.
        let capacity = 1000;
        let keys: Vec<Key> = requests_twice(100_000, 150)
            .iter()
            .enumerate()
            .flat_map(|(i, &k)| [(mix64(i as u64) % 900) as Key, 1000 + k])
            .collect();
        let mut full = Strata::new(StrataConfig::new(capacity), 0);
        let (full_misses, _) = misses_and_writes(&mut full, &keys);
        let mut config = StrataConfig::new(capacity);
        config.sample_objects = 250;
        let mut sampled = Strata::new(config, 0);
        let (misses, _) = misses_and_writes(&mut sampled, &keys);
        assert!(
            matches!(sampled.leader(), Some(Candidate::Shape { small, .. }) if small >= 0.25),
            "{:?}",
            sampled.leader()
        );
        assert!(
            misses * 100 <= full_misses * 102,
            "{misses} vs {full_misses}"
        );
    }

    #[test]
    fn following_other_policies_keeps_capacity_and_write_budget() {
        let capacity = 200;
        let mut config = StrataConfig::new(capacity);
        config.follow = true;
        config.follow_frequency = true;
        config.learn = true;
        let mut strata = Strata::new(config, 0);
        // Phases: a scan-resistant hot set, then a recency pattern, then the hot set again.
        let mut keys: Vec<Key> = (0..60_000u64)
            .map(|i| {
                if i % 2 == 0 {
                    (mix64(i) % 150) as Key
                } else {
                    10_000 + i as Key
                }
            })
            .collect();
        keys.extend(requests_twice(30_000, 150).iter().map(|k| k + 200_000));
        keys.extend((0..60_000u64).map(|i| (mix64(i ^ 9) % 150) as Key));
        let (misses, writes) = misses_and_writes(&mut strata, &keys);
        let mut lru =
            crate::admission::Filtered::new(Lru::new(capacity, 0), crate::admission::AdmitAll);
        let (lru_misses, lru_writes) = misses_and_writes(&mut lru, &keys);
        assert!(
            writes * 3 <= lru_writes,
            "{writes} writes vs LRU {lru_writes}"
        );
        assert!(misses < lru_misses, "{misses} vs LRU {lru_misses}");
    }
}
