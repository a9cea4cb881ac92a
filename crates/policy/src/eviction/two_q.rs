//! 2Q (Johnson and Shasha, VLDB'94), full version: a FIFO `A1in` for first-time objects (25% of
//! the cache), a ghost FIFO `A1out` of ids evicted from it (50% of the cache), and an LRU `Am`
//! for objects requested again while in `A1out`.

use super::Eviction;
use crate::list::Lists;
use crate::{Key, Request};

const A1IN: u8 = 0;
const AM: u8 = 1;
const A1OUT: u8 = 2;

/// 2Q eviction.
#[derive(Clone, Debug)]
pub struct TwoQ {
    lists: Lists,
    capacity: usize,
    in_capacity: usize,
    out_capacity: usize,
}

impl TwoQ {
    /// An empty 2Q cache of `capacity` objects.
    pub fn new(capacity: usize, key_space: usize) -> Self {
        assert!(capacity > 0, "capacity must be positive");
        TwoQ {
            lists: Lists::new(3, key_space),
            capacity,
            in_capacity: (capacity / 4).max(1),
            out_capacity: (capacity / 2).max(1),
        }
    }

    fn reclaim(&mut self, evicted: &mut Vec<Key>) {
        if self.lists.len(A1IN) > self.in_capacity || self.lists.len(AM) == 0 {
            if let Some(key) = self.lists.pop_tail(A1IN) {
                self.lists.push_head(A1OUT, key);
                evicted.push(key);
                while self.lists.len(A1OUT) > self.out_capacity {
                    self.lists.pop_tail(A1OUT);
                }
            }
        } else {
            evicted.extend(self.lists.pop_tail(AM));
        }
    }
}

impl Eviction for TwoQ {
    fn contains(&self, key: Key) -> bool {
        matches!(self.lists.list_of(key), Some(A1IN) | Some(AM))
    }
    fn on_hit(&mut self, request: &Request, _evicted: &mut Vec<Key>) {
        if self.lists.in_list(request.key, AM) {
            self.lists.move_to_head(AM, request.key);
        }
    }
    fn insert(&mut self, request: &Request, evicted: &mut Vec<Key>) {
        let key = request.key;
        let ghost_hit = self.lists.in_list(key, A1OUT);
        if ghost_hit {
            self.lists.remove(key);
        }
        while self.len() >= self.capacity {
            self.reclaim(evicted);
        }
        self.lists.push_head(if ghost_hit { AM } else { A1IN }, key);
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
        self.lists.len(A1IN) + self.lists.len(AM)
    }
    fn capacity(&self) -> usize {
        self.capacity
    }
    fn name(&self) -> String {
        "2q".into()
    }
}
