//! `strata`: our best combination for an SSD cache pool, built on seed 000's idea that a forecast
//! of an object's next access should decide whether it may be written to flash at all.
//!
//! - **Predictor:** each object's last inter-arrival gap, in requests. A missed object whose
//!   previous gap fits within `reach` x the cache's *eviction age* (how long objects survive in
//!   the main queue, a moving average) would have been hit had it been cached: it is admitted to
//!   the main queue.
//! - **Write budget:** every admission must keep admissions below `budget` x the misses of a
//!   shadow LRU of the same size (ids only: what admit-all LRU would write); other misses (first accesses, long gaps) may enter a small probationary FIFO only while
//!   admissions stay below `budget` x `newcomer_share` x misses; otherwise they are not written.
//!   With the default 0.3 the cache writes at most 30% of what admit-all LRU writes.
//!   Within the budget, a small learned model picks *which* newcomers to write: dense ids are
//!   handed out in first-seen order, so each block of 64 ids is a cohort of objects that first
//!   appeared together; a newcomer is admitted only if its cohort (or the previous one, while
//!   its own is young) has seen its members reused at least `cohort` x as often as average.
//! - **Eviction:** S3-FIFO's structure: the probationary FIFO (`small` share of the cache) moves
//!   objects hit while in it to main; main is a FIFO with 2-bit frequencies and reinsertion.
//!   Moving between queues is metadata only, not a flash write.

use crate::eviction::{Eviction, Lru};
use crate::list::Lists;
use crate::{Cache, Effects, Key, Outcome, Request};

const SMALL: u8 = 0;
const MAIN: u8 = 1;
const NEVER: u64 = u64::MAX;

/// Parameters of our policy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StrataConfig {
    /// Capacity in objects.
    pub capacity: usize,
    /// Admission reach: admit to main when the last gap <= `reach` x eviction age. Default 1.0.
    pub reach: f64,
    /// Frequency cap of the main queue's clock counters. Default 3.
    pub frequency_cap: u8,
    /// Share of the cache for the probationary FIFO. Default 0.1.
    pub small: f64,
    /// Probationary admissions allowed while admissions < `budget` x misses. Default 0.3.
    pub budget: f64,
    /// Share of the budget newcomers may use (predicted objects may use all of it). Default 0.9.
    pub newcomer_share: f64,
    /// Probationary admission needs the object's cohort reuse rate >= `cohort` x the mean.
    /// 0 disables the cohort predictor. Default 0.5.
    pub cohort: f64,
    /// Seed (the policy is deterministic; kept for variants). Default 42.
    pub seed: u64,
}

impl StrataConfig {
    /// Defaults for a cache of `capacity` objects.
    pub fn new(capacity: usize) -> Self {
        StrataConfig {
            capacity,
            reach: 1.0,
            frequency_cap: 3,
            small: 0.1,
            budget: 0.3,
            cohort: 0.5,
            newcomer_share: 0.9,
            seed: 42,
        }
    }
}

/// Our policy: gap-forecast admission under a write budget, S3-FIFO-style queues.
#[derive(Clone, Debug)]
pub struct Strata {
    config: StrataConfig,
    lists: Lists,
    frequency: Vec<u8>,
    last_seq: Vec<u64>,
    inserted_seq: Vec<u64>,
    repeated: Vec<bool>,
    eviction_age: f64,
    small_capacity: usize,
    admissions: u64,
    shadow: Lru,
    shadow_misses: u64,
    shadow_evicted: Vec<Key>,
    cohort_members: Vec<u32>,
    cohort_reused: Vec<u32>,
    members_total: u64,
    reused_total: u64,
}

/// Objects per cohort: dense ids are handed out in first-seen order, so a cohort is a group of
/// objects that first appeared together (a file written together, a scan) and tends to share
/// a fate.
const COHORT_SHIFT: u32 = 6;

impl Strata {
    /// An empty cache.
    pub fn new(config: StrataConfig, key_space: usize) -> Self {
        assert!(config.capacity > 0, "capacity must be positive");
        Strata {
            lists: Lists::new(2, key_space),
            frequency: vec![0; key_space],
            last_seq: vec![NEVER; key_space],
            inserted_seq: vec![0; key_space],
            repeated: vec![false; key_space],
            // Until the first eviction, assume objects survive two requests per slot.
            eviction_age: config.capacity as f64 * 2.0,
            small_capacity: (config.capacity as f64 * config.small.clamp(0.0, 0.9)) as usize,
            admissions: 0,
            shadow: Lru::new(config.capacity, key_space),
            shadow_misses: 0,
            shadow_evicted: Vec::new(),
            cohort_members: Vec::new(),
            cohort_reused: Vec::new(),
            members_total: 0,
            reused_total: 0,
            config,
        }
    }

    /// True exactly once per object: on its second access.
    fn frequency_seen(&mut self, index: usize) -> bool {
        let first_repeat = !self.repeated[index];
        self.repeated[index] = true;
        first_repeat
    }

    fn grow(&mut self, key: Key) {
        let index = key as usize;
        if index >= self.last_seq.len() {
            let size = (index + 1).next_power_of_two();
            self.frequency.resize(size, 0);
            self.last_seq.resize(size, NEVER);
            self.inserted_seq.resize(size, 0);
            self.repeated.resize(size, false);
        }
    }

    /// Whether the cohort of `key` (or the one before it, while it is young) has reused its
    /// members at least as often as the average cohort.
    fn cohort_promising(&self, key: Key) -> bool {
        let cohort = (key >> COHORT_SHIFT) as usize;
        let score = |c: usize| {
            let members = self.cohort_members.get(c).copied().unwrap_or(0);
            (members >= 16).then(|| self.cohort_reused[c] as f64 / members as f64)
        };
        let own = score(cohort).or_else(|| cohort.checked_sub(1).and_then(score));
        let mean = self.reused_total as f64 / self.members_total.max(1) as f64;
        own.is_none_or(|s| s >= mean * self.config.cohort)
    }

    fn cohort_count(&mut self, key: Key, first: bool, reused: bool) {
        let cohort = (key >> COHORT_SHIFT) as usize;
        if cohort >= self.cohort_members.len() {
            self.cohort_members.resize(cohort + 1, 0);
            self.cohort_reused.resize(cohort + 1, 0);
        }
        if first {
            self.cohort_members[cohort] += 1;
            self.members_total += 1;
        }
        if reused {
            self.cohort_reused[cohort] += 1;
            self.reused_total += 1;
        }
    }

    fn len_all(&self) -> usize {
        self.lists.len(SMALL) + self.lists.len(MAIN)
    }

    fn evict_main(&mut self, now_seq: u64, effects: &mut Effects) {
        while let Some(key) = self.lists.pop_tail(MAIN) {
            let frequency = self.frequency[key as usize];
            if frequency > 0 {
                self.frequency[key as usize] = frequency - 1;
                self.lists.push_head(MAIN, key);
            } else {
                let age = now_seq.saturating_sub(self.inserted_seq[key as usize]) as f64;
                self.eviction_age += (age - self.eviction_age) / 64.0;
                effects.evicted.push(key);
                return;
            }
        }
    }

    fn evict_small(&mut self, now_seq: u64, effects: &mut Effects) {
        while let Some(key) = self.lists.pop_tail(SMALL) {
            if self.frequency[key as usize] > 0 {
                self.frequency[key as usize] = 0;
                self.inserted_seq[key as usize] = now_seq;
                self.lists.push_head(MAIN, key);
                if self.lists.len(MAIN) > self.config.capacity - self.lists.len(SMALL) {
                    self.evict_main(now_seq, effects);
                    return;
                }
            } else {
                effects.evicted.push(key);
                return;
            }
        }
    }

    fn make_room(&mut self, now_seq: u64, effects: &mut Effects) {
        while self.len_all() >= self.config.capacity {
            if self.lists.len(SMALL) > self.small_capacity || self.lists.len(MAIN) == 0 {
                self.evict_small(now_seq, effects);
            } else {
                self.evict_main(now_seq, effects);
            }
        }
    }
}

impl Cache for Strata {
    fn on_request(&mut self, request: &Request, effects: &mut Effects) -> Outcome {
        let key = request.key;
        self.grow(key);
        let index = key as usize;
        let last = std::mem::replace(&mut self.last_seq[index], request.seq);
        let gap = if last == NEVER {
            NEVER
        } else {
            request.seq - last
        };
        let predicted = gap != NEVER && gap as f64 <= self.config.reach * self.eviction_age;
        // The second access decides whether an object counts as reused for its cohort.
        let second = last != NEVER && self.frequency_seen(index);
        self.cohort_count(key, last == NEVER, second && predicted);
        self.shadow_evicted.clear();
        if self.shadow.contains(key) {
            self.shadow.on_hit(request, &mut self.shadow_evicted);
        } else {
            self.shadow.insert(request, &mut self.shadow_evicted);
            self.shadow_misses += 1;
        }
        if self.lists.list_of(key).is_some() {
            let frequency = &mut self.frequency[index];
            *frequency = (*frequency + 1).min(self.config.frequency_cap);
            return Outcome::Hit;
        }
        let spent = self.admissions as f64;
        let misses = self.shadow_misses as f64;
        let queue = if predicted && spent < self.config.budget * misses {
            MAIN
        } else if !predicted
            && spent < self.config.budget * self.config.newcomer_share * misses
            && self.small_capacity > 0
            && (self.config.cohort == 0.0 || self.cohort_promising(key))
        {
            SMALL
        } else {
            return Outcome::Bypassed;
        };
        self.make_room(request.seq, effects);
        self.admissions += 1;
        self.frequency[index] = 0;
        self.inserted_seq[index] = request.seq;
        self.lists.push_head(queue, key);
        Outcome::Admitted
    }
    fn len(&self) -> usize {
        self.len_all()
    }
    fn capacity(&self) -> usize {
        self.config.capacity
    }
    fn contains(&self, key: Key) -> bool {
        self.lists.list_of(key).is_some()
    }
    fn name(&self) -> String {
        format!(
            "strata(reach={},small={},budget={},cohort={})",
            self.config.reach, self.config.small, self.config.budget, self.config.cohort
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
        let (mut admissions, mut misses) = (0u64, 0u64);
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
                    admissions += 1;
                    misses += 1;
                }
                Outcome::Bypassed => misses += 1,
            }
            assert!(cache.len() <= 100);
        }
        assert!(
            admissions as f64 <= 0.31 * misses as f64,
            "{admissions} of {misses}"
        );
        // The 50 hot objects end up cached: at least 40% of requests hit.
        assert!(misses < 30_000, "{misses}");
    }
}
