//! W-TinyLFU (Einziger et al., TOS'17) as libCacheSim builds it: a 1% LRU window, a main SLRU
//! (probation 20%, protected 80%) and a counting bloom filter (halved every 32 x main-size main
//! hits). A window victim enters main only if its estimated frequency beats main's victim.

use super::Eviction;
use crate::list::Lists;
use crate::sketch::CountingBloom;
use crate::{Key, Request};

const WINDOW: u8 = 0;
const PROBATION: u8 = 1;
const PROTECTED: u8 = 2;

/// W-TinyLFU parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WTinyLfuConfig {
    /// Window LRU size as a fraction of the cache. Default 0.01.
    pub window_ratio: f64,
    /// Probation share of the main SLRU. Default 0.2.
    pub probation_ratio: f64,
}

impl Default for WTinyLfuConfig {
    fn default() -> Self {
        WTinyLfuConfig {
            window_ratio: 0.01,
            probation_ratio: 0.2,
        }
    }
}

/// W-TinyLFU eviction.
#[derive(Clone, Debug)]
pub struct WTinyLfu {
    lists: Lists,
    sketch: CountingBloom,
    capacity: usize,
    main_capacity: usize,
    probation_capacity: usize,
    protected_capacity: usize,
    main_hits: usize,
    decay_interval: usize,
}

impl WTinyLfu {
    /// An empty W-TinyLFU cache of `capacity` objects.
    pub fn new(capacity: usize, key_space: usize, config: WTinyLfuConfig) -> Self {
        assert!(capacity > 0, "capacity must be positive");
        let window = (capacity as f64 * config.window_ratio) as usize;
        let main_capacity = capacity - window;
        WTinyLfu {
            lists: Lists::new(3, key_space),
            sketch: CountingBloom::new(main_capacity.max(1), 0.001, key_space),
            capacity,
            main_capacity,
            probation_capacity: (main_capacity as f64 * config.probation_ratio) as usize,
            protected_capacity: (main_capacity as f64 * (1.0 - config.probation_ratio)) as usize,
            main_hits: 0,
            decay_interval: 32 * main_capacity.max(1),
        }
    }

    fn main_len(&self) -> usize {
        self.lists.len(PROBATION) + self.lists.len(PROTECTED)
    }

    /// SLRU victim: the tail of the first non-empty segment.
    fn main_victim(&self) -> Option<Key> {
        self.lists
            .tail(PROBATION)
            .or_else(|| self.lists.tail(PROTECTED))
    }

    fn main_evict(&mut self, evicted: &mut Vec<Key>) {
        if let Some(key) = self.main_victim() {
            self.lists.remove(key);
            evicted.push(key);
        }
    }

    /// SLRU insert: the first segment with room, else evict and use probation.
    fn main_insert(&mut self, key: Key, evicted: &mut Vec<Key>) {
        if self.lists.len(PROBATION) < self.probation_capacity {
            self.lists.push_head(PROBATION, key);
        } else if self.lists.len(PROTECTED) < self.protected_capacity {
            self.lists.push_head(PROTECTED, key);
        } else {
            while self.main_len() >= self.main_capacity {
                self.main_evict(evicted);
            }
            self.lists.push_head(PROBATION, key);
        }
    }

    fn evict(&mut self, evicted: &mut Vec<Key>) {
        loop {
            let Some(candidate) = self.lists.tail(WINDOW) else {
                self.main_evict(evicted);
                return;
            };
            let done = if self.main_len() < self.main_capacity {
                self.lists.remove(candidate);
                self.main_insert(candidate, evicted);
                false
            } else {
                let victim = self.main_victim();
                let victim_count = victim.map_or(0, |v| self.sketch.estimate(v as u64));
                if self.sketch.estimate(candidate as u64) > victim_count {
                    self.main_evict(evicted);
                    self.lists.remove(candidate);
                    self.main_insert(candidate, evicted);
                    false
                } else {
                    self.lists.remove(candidate);
                    evicted.push(candidate);
                    true
                }
            };
            self.sketch.add(candidate as u64);
            if done {
                return;
            }
        }
    }
}

impl Eviction for WTinyLfu {
    fn contains(&self, key: Key) -> bool {
        self.lists.list_of(key).is_some()
    }
    fn on_hit(&mut self, request: &Request, evicted: &mut Vec<Key>) {
        let key = request.key;
        match self.lists.list_of(key) {
            Some(WINDOW) => {
                self.lists.move_to_head(WINDOW, key);
                return;
            }
            Some(PROTECTED) => self.lists.move_to_head(PROTECTED, key),
            Some(_) => {
                self.lists.move_to_head(PROTECTED, key);
                while self.lists.len(PROTECTED) > self.protected_capacity {
                    if let Some(cooled) = self.lists.pop_tail(PROTECTED) {
                        self.lists.push_head(PROBATION, cooled);
                    }
                    while self.lists.len(PROBATION) > self.probation_capacity {
                        self.main_evict(evicted);
                    }
                }
            }
            None => return,
        }
        self.sketch.add(key as u64);
        self.main_hits += 1;
        if self.main_hits >= self.decay_interval {
            self.main_hits = 0;
            self.sketch.decay();
        }
    }
    fn insert(&mut self, request: &Request, evicted: &mut Vec<Key>) {
        while self.len() >= self.capacity {
            self.evict(evicted);
        }
        self.lists.push_head(WINDOW, request.key);
        self.sketch.add(request.key as u64);
    }
    fn victim(&self) -> Option<Key> {
        None
    }
    fn remove(&mut self, key: Key) -> bool {
        self.lists.remove(key).is_some()
    }
    fn len(&self) -> usize {
        self.lists.len(WINDOW) + self.main_len()
    }
    fn capacity(&self) -> usize {
        self.capacity
    }
    fn name(&self) -> String {
        "wtinylfu".into()
    }
}
