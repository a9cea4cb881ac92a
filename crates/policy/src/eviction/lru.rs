//! Least recently used.

use super::Eviction;
use crate::list::Lists;
use crate::{Key, Request};

const QUEUE: u8 = 0;

/// LRU: a hit moves the object to the head; the tail is evicted.
#[derive(Clone, Debug)]
pub struct Lru {
    lists: Lists,
    capacity: usize,
}

impl Lru {
    /// An empty LRU holding at most `capacity` objects; `key_space` presizes the per-key arrays.
    pub fn new(capacity: usize, key_space: usize) -> Self {
        assert!(capacity > 0, "capacity must be positive");
        Lru {
            lists: Lists::new(1, key_space),
            capacity,
        }
    }

    /// Holds at most `capacity` objects from now on; a smaller capacity evicts at the next
    /// insertion.
    pub fn set_capacity(&mut self, capacity: usize) {
        assert!(capacity > 0, "capacity must be positive");
        self.capacity = capacity;
    }
}

impl Eviction for Lru {
    fn contains(&self, key: Key) -> bool {
        self.lists.in_list(key, QUEUE)
    }
    fn on_hit(&mut self, request: &Request, _evicted: &mut Vec<Key>) {
        self.lists.move_to_head(QUEUE, request.key);
    }
    fn insert(&mut self, request: &Request, evicted: &mut Vec<Key>) {
        while self.lists.len(QUEUE) >= self.capacity {
            evicted.extend(self.lists.pop_tail(QUEUE));
        }
        self.lists.push_head(QUEUE, request.key);
    }
    fn victim(&self) -> Option<Key> {
        (self.lists.len(QUEUE) >= self.capacity)
            .then(|| self.lists.tail(QUEUE))
            .flatten()
    }
    fn remove(&mut self, key: Key) -> bool {
        self.lists.remove(key).is_some()
    }
    fn len(&self) -> usize {
        self.lists.len(QUEUE)
    }
    fn capacity(&self) -> usize {
        self.capacity
    }
    fn name(&self) -> String {
        "lru".into()
    }
}
