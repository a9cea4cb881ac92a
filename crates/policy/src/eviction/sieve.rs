//! SIEVE (Zhang et al., NSDI'24): a FIFO queue with one visited bit and a hand that sweeps from
//! the oldest object toward the newest, clearing bits, and evicts the first unvisited object.

use super::Eviction;
use crate::list::{Lists, NIL};
use crate::{Key, Request};

const QUEUE: u8 = 0;

/// SIEVE eviction.
#[derive(Clone, Debug)]
pub struct Sieve {
    lists: Lists,
    visited: Vec<bool>,
    hand: Key,
    capacity: usize,
}

impl Sieve {
    /// An empty SIEVE cache of `capacity` objects.
    pub fn new(capacity: usize, key_space: usize) -> Self {
        assert!(capacity > 0, "capacity must be positive");
        Sieve {
            lists: Lists::new(1, key_space),
            visited: vec![false; key_space],
            hand: NIL,
            capacity,
        }
    }

    fn evict_one(&mut self) -> Option<Key> {
        let mut key = if self.hand == NIL {
            self.lists.tail(QUEUE)?
        } else {
            self.hand
        };
        while self.visited[key as usize] {
            self.visited[key as usize] = false;
            key = match self.lists.newer(key) {
                NIL => self.lists.tail(QUEUE)?,
                newer => newer,
            };
        }
        self.hand = self.lists.newer(key);
        self.lists.remove(key);
        Some(key)
    }
}

impl Eviction for Sieve {
    fn contains(&self, key: Key) -> bool {
        self.lists.in_list(key, QUEUE)
    }
    fn on_hit(&mut self, request: &Request, _evicted: &mut Vec<Key>) {
        self.visited[request.key as usize] = true;
    }
    fn insert(&mut self, request: &Request, evicted: &mut Vec<Key>) {
        while self.lists.len(QUEUE) >= self.capacity {
            evicted.extend(self.evict_one());
        }
        let index = request.key as usize;
        if index >= self.visited.len() {
            self.visited.resize((index + 1).next_power_of_two(), false);
        }
        self.visited[index] = false;
        self.lists.push_head(QUEUE, request.key);
    }
    fn victim(&self) -> Option<Key> {
        None
    }
    fn remove(&mut self, key: Key) -> bool {
        if self.hand == key {
            self.hand = self.lists.newer(key);
        }
        self.lists.remove(key).is_some()
    }
    fn len(&self) -> usize {
        self.lists.len(QUEUE)
    }
    fn capacity(&self) -> usize {
        self.capacity
    }
    fn name(&self) -> String {
        "sieve".into()
    }
}
