//! S3-FIFO (Yang et al., SOSP'23): a small FIFO (10%) filters one-hit wonders, a main FIFO with
//! 2-bit frequencies and reinsertion keeps the rest, and a ghost FIFO of ids (90% of the cache)
//! sends objects evicted from the small queue straight to main when requested again.
//! Defaults follow libCacheSim: an object moves from small to main after 2 hits there.

use super::Eviction;
use crate::list::Lists;
use crate::{Key, Request};

const SMALL: u8 = 0;
const MAIN: u8 = 1;
const GHOST: u8 = 2;

/// S3-FIFO parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct S3FifoConfig {
    /// Small queue size as a fraction of the cache. Default 0.10.
    pub small_ratio: f64,
    /// Ghost queue size (ids only) as a fraction of the cache. Default 0.90.
    pub ghost_ratio: f64,
    /// Hits in the small queue needed to move to main instead of the ghost. Default 2.
    pub move_to_main_threshold: u8,
}

impl Default for S3FifoConfig {
    fn default() -> Self {
        S3FifoConfig {
            small_ratio: 0.10,
            ghost_ratio: 0.90,
            move_to_main_threshold: 2,
        }
    }
}

/// S3-FIFO eviction.
#[derive(Clone, Debug)]
pub struct S3Fifo {
    lists: Lists,
    frequency: Vec<u8>,
    capacity: usize,
    main_capacity: usize,
    ghost_capacity: usize,
    config: S3FifoConfig,
}

impl S3Fifo {
    /// An empty S3-FIFO cache of `capacity` objects.
    pub fn new(capacity: usize, key_space: usize, config: S3FifoConfig) -> Self {
        assert!(capacity > 0, "capacity must be positive");
        let small_capacity = (capacity as f64 * config.small_ratio) as usize;
        S3Fifo {
            lists: Lists::new(3, key_space),
            frequency: vec![0; key_space],
            capacity,
            main_capacity: capacity - small_capacity,
            ghost_capacity: (capacity as f64 * config.ghost_ratio) as usize,
            config,
        }
    }

    fn frequency_mut(&mut self, key: Key) -> &mut u8 {
        let index = key as usize;
        if index >= self.frequency.len() {
            self.frequency.resize((index + 1).next_power_of_two(), 0);
        }
        &mut self.frequency[index]
    }

    fn evict_small(&mut self, evicted: &mut Vec<Key>) {
        while let Some(key) = self.lists.pop_tail(SMALL) {
            if *self.frequency_mut(key) >= self.config.move_to_main_threshold {
                *self.frequency_mut(key) = 0;
                self.lists.push_head(MAIN, key);
            } else {
                if self.ghost_capacity > 0 {
                    self.lists.push_head(GHOST, key);
                    while self.lists.len(GHOST) > self.ghost_capacity {
                        self.lists.pop_tail(GHOST);
                    }
                }
                evicted.push(key);
                return;
            }
        }
    }

    fn evict_main(&mut self, evicted: &mut Vec<Key>) {
        while let Some(key) = self.lists.pop_tail(MAIN) {
            let frequency = *self.frequency_mut(key);
            if frequency >= 1 {
                *self.frequency_mut(key) = frequency.min(3) - 1;
                self.lists.push_head(MAIN, key);
            } else {
                evicted.push(key);
                return;
            }
        }
    }

    fn evict(&mut self, evicted: &mut Vec<Key>) {
        if self.lists.len(MAIN) > self.main_capacity || self.lists.len(SMALL) == 0 {
            self.evict_main(evicted);
        } else {
            self.evict_small(evicted);
        }
    }
}

impl Eviction for S3Fifo {
    fn contains(&self, key: Key) -> bool {
        matches!(self.lists.list_of(key), Some(SMALL) | Some(MAIN))
    }
    fn on_hit(&mut self, request: &Request, _evicted: &mut Vec<Key>) {
        let frequency = self.frequency_mut(request.key);
        *frequency = frequency.saturating_add(1);
    }
    fn insert(&mut self, request: &Request, evicted: &mut Vec<Key>) {
        let key = request.key;
        let ghost_hit = self.lists.in_list(key, GHOST);
        if ghost_hit {
            self.lists.remove(key);
        }
        while self.len() >= self.capacity {
            self.evict(evicted);
        }
        *self.frequency_mut(key) = 0;
        self.lists
            .push_head(if ghost_hit { MAIN } else { SMALL }, key);
    }
    fn victim(&self) -> Option<Key> {
        None
    }
    fn remove(&mut self, key: Key) -> bool {
        if self.contains(key) {
            self.lists.remove(key);
            true
        } else {
            false
        }
    }
    fn len(&self) -> usize {
        self.lists.len(SMALL) + self.lists.len(MAIN)
    }
    fn capacity(&self) -> usize {
        self.capacity
    }
    fn name(&self) -> String {
        "s3fifo".into()
    }
}
