//! `strata`: our best combination for an SSD cache pool, built on seed 000's idea that a forecast
//! of an object's next access should decide whether it may enter the cache at all.
//!
//! - **Predictor (admission):** each object's last inter-arrival gap, in requests. A missed object
//!   is admitted only if its previous gap fits within the cache's current *eviction age* (how many
//!   requests an object survives in the cache, tracked as a moving average) times `reach`: an
//!   object that was reused within what the cache can hold is likely to be hit if admitted. First
//!   accesses (no gap yet) are never written, which removes one-hit wonders from the flash budget.
//! - **Eviction:** S3-FIFO's main queue (FIFO with 2-bit frequencies and reinsertion), which
//!   keeps frequently used objects at the cost of one flag update per hit.

use crate::list::Lists;
use crate::{Cache, Effects, Key, Outcome, Request};

const MAIN: u8 = 0;
const NEVER: u64 = u64::MAX;

/// Parameters of our policy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StrataConfig {
    /// Capacity in objects.
    pub capacity: usize,
    /// Admission reach: admit when the last gap <= `reach` x eviction age. Default 1.0.
    pub reach: f64,
    /// Frequency cap of the main queue's clock counters. Default 3.
    pub frequency_cap: u8,
    /// Admit first-time objects while the cache is not yet full. Default true.
    pub warmup: bool,
    /// Seed (unused by the deterministic default; kept for variants). Default 42.
    pub seed: u64,
}

impl StrataConfig {
    /// Defaults for a cache of `capacity` objects.
    pub fn new(capacity: usize) -> Self {
        StrataConfig {
            capacity,
            reach: 1.0,
            frequency_cap: 3,
            warmup: true,
            seed: 42,
        }
    }
}

/// Our policy: gap-forecast admission in front of a frequency-clock FIFO.
#[derive(Clone, Debug)]
pub struct Strata {
    config: StrataConfig,
    lists: Lists,
    frequency: Vec<u8>,
    last_seq: Vec<u64>,
    inserted_seq: Vec<u64>,
    eviction_age: f64,
}

impl Strata {
    /// An empty cache.
    pub fn new(config: StrataConfig, key_space: usize) -> Self {
        assert!(config.capacity > 0, "capacity must be positive");
        Strata {
            lists: Lists::new(1, key_space),
            frequency: vec![0; key_space],
            last_seq: vec![NEVER; key_space],
            inserted_seq: vec![0; key_space],
            // Until the first eviction, assume objects survive `capacity` requests per slot.
            eviction_age: config.capacity as f64 * 2.0,
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

    fn evict(&mut self, now_seq: u64, effects: &mut Effects) {
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
}

impl Cache for Strata {
    fn on_request(&mut self, request: &Request, effects: &mut Effects) -> Outcome {
        let key = request.key;
        self.grow(key);
        let index = key as usize;
        let last = std::mem::replace(&mut self.last_seq[index], request.seq);
        if self.lists.in_list(key, MAIN) {
            let frequency = &mut self.frequency[index];
            *frequency = (*frequency + 1).min(self.config.frequency_cap);
            return Outcome::Hit;
        }
        let gap = if last == NEVER {
            NEVER
        } else {
            request.seq - last
        };
        if gap == NEVER || gap as f64 > self.config.reach * self.eviction_age {
            return Outcome::Bypassed;
        }
        while self.lists.len(MAIN) >= self.config.capacity {
            self.evict(request.seq, effects);
        }
        self.frequency[index] = 0;
        self.inserted_seq[index] = request.seq;
        self.lists.push_head(MAIN, key);
        Outcome::Admitted
    }
    fn len(&self) -> usize {
        self.lists.len(MAIN)
    }
    fn capacity(&self) -> usize {
        self.config.capacity
    }
    fn contains(&self, key: Key) -> bool {
        self.lists.in_list(key, MAIN)
    }
    fn name(&self) -> String {
        format!(
            "strata(reach={},cap={})",
            self.config.reach, self.config.frequency_cap
        )
    }
}
