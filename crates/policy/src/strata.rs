//! `strata`: our best combination for an SSD cache pool, built on seed 000's idea that a forecast
//! of an object's next access should decide whether it may be written to flash at all.
//!
//! - **Predictor:** each object's last inter-arrival gap, in requests. A missed object whose
//!   previous gap fits within `reach` x the cache's *eviction age* (how long objects survive in
//!   the main queue, a moving average) would have been hit had it been cached: it is admitted to
//!   the main queue.
//! - **Write budget:** other misses (first accesses, long gaps) may enter a small probationary
//!   FIFO only while admissions stay below `budget` x misses; otherwise they are not written.
//!   With the default 0.3 the cache writes less than a third of what admit-all LRU writes.
//! - **Eviction:** S3-FIFO's structure: the probationary FIFO (`small` share of the cache) moves
//!   objects hit while in it to main; main is a FIFO with 2-bit frequencies and reinsertion.
//!   Moving between queues is metadata only, not a flash write.

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
    eviction_age: f64,
    small_capacity: usize,
    admissions: u64,
    misses: u64,
}

impl Strata {
    /// An empty cache.
    pub fn new(config: StrataConfig, key_space: usize) -> Self {
        assert!(config.capacity > 0, "capacity must be positive");
        Strata {
            lists: Lists::new(2, key_space),
            frequency: vec![0; key_space],
            last_seq: vec![NEVER; key_space],
            inserted_seq: vec![0; key_space],
            // Until the first eviction, assume objects survive two requests per slot.
            eviction_age: config.capacity as f64 * 2.0,
            small_capacity: (config.capacity as f64 * config.small.clamp(0.0, 0.9)) as usize,
            admissions: 0,
            misses: 0,
            config,
        }
    }

    fn grow(&mut self, key: Key) {
        let index = key as usize;
        if index >= self.last_seq.len() {
            let size = (index + 1).next_power_of_two();
            self.frequency.resize(size, 0);
            self.last_seq.resize(size, NEVER);
            self.inserted_seq.resize(size, 0);
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
        if self.lists.list_of(key).is_some() {
            let frequency = &mut self.frequency[index];
            *frequency = (*frequency + 1).min(self.config.frequency_cap);
            return Outcome::Hit;
        }
        self.misses += 1;
        let gap = if last == NEVER {
            NEVER
        } else {
            request.seq - last
        };
        let predicted = gap != NEVER && gap as f64 <= self.config.reach * self.eviction_age;
        let queue = if predicted {
            MAIN
        } else if (self.admissions as f64) < self.config.budget * self.misses as f64
            && self.small_capacity > 0
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
            "strata(reach={},small={},budget={})",
            self.config.reach, self.config.small, self.config.budget
        )
    }
}
