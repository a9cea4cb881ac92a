//! ARC (Megiddo and Modha, FAST'03): recency list T1 and frequency list T2 with ghost lists B1
//! and B2 that steer the target size `p` of T1. Evictions happen only when the cache is full, as in
//! libCacheSim.

use super::Eviction;
use crate::list::Lists;
use crate::{Key, Request};

const T1: u8 = 0;
const T2: u8 = 1;
const B1: u8 = 2;
const B2: u8 = 3;

/// Adaptive replacement cache.
#[derive(Clone, Debug)]
pub struct Arc {
    lists: Lists,
    target_t1: f64,
    capacity: usize,
}

impl Arc {
    /// An empty ARC cache of `capacity` objects.
    pub fn new(capacity: usize, key_space: usize) -> Self {
        assert!(capacity > 0, "capacity must be positive");
        Arc {
            lists: Lists::new(4, key_space),
            target_t1: 0.0,
            capacity,
        }
    }

    fn cached(&self) -> usize {
        self.lists.len(T1) + self.lists.len(T2)
    }

    /// REPLACE of the paper: demote the tail of T1 or T2 to its ghost list.
    fn replace(&mut self, hit_in_b2: bool, evicted: &mut Vec<Key>) {
        let t1 = self.lists.len(T1);
        let take_t1 = (t1 > 0
            && ((t1 as f64) > self.target_t1 || ((t1 as f64) == self.target_t1 && hit_in_b2)))
            || self.lists.len(T2) == 0;
        let (from, to) = if take_t1 { (T1, B1) } else { (T2, B2) };
        if let Some(key) = self.lists.pop_tail(from) {
            self.lists.push_head(to, key);
            evicted.push(key);
        }
    }
}

impl Eviction for Arc {
    fn contains(&self, key: Key) -> bool {
        matches!(self.lists.list_of(key), Some(T1) | Some(T2))
    }
    fn on_hit(&mut self, request: &Request, _evicted: &mut Vec<Key>) {
        self.lists.move_to_head(T2, request.key);
    }
    fn insert(&mut self, request: &Request, evicted: &mut Vec<Key>) {
        let key = request.key;
        let ghost = self.lists.list_of(key);
        match ghost {
            Some(B1) => {
                let ratio = self.lists.len(B2) as f64 / self.lists.len(B1) as f64;
                self.target_t1 = (self.target_t1 + ratio.max(1.0)).min(self.capacity as f64);
                self.lists.remove(key);
            }
            Some(B2) => {
                let ratio = self.lists.len(B1) as f64 / self.lists.len(B2) as f64;
                self.target_t1 = (self.target_t1 - ratio.max(1.0)).max(0.0);
                self.lists.remove(key);
            }
            _ => {}
        }
        let ghost_hit = matches!(ghost, Some(B1) | Some(B2));
        if self.cached() >= self.capacity {
            if ghost_hit {
                self.replace(ghost == Some(B2), evicted);
            } else if self.lists.len(T1) + self.lists.len(B1) + 1 > self.capacity {
                if self.lists.len(B1) > 0 {
                    self.lists.pop_tail(B1);
                    self.replace(false, evicted);
                } else {
                    evicted.extend(self.lists.pop_tail(T1));
                }
            } else {
                let total = self.cached() + self.lists.len(B1) + self.lists.len(B2);
                if total >= 2 * self.capacity && self.lists.len(B2) > 0 {
                    self.lists.pop_tail(B2);
                }
                self.replace(false, evicted);
            }
        }
        self.lists.push_head(if ghost_hit { T2 } else { T1 }, key);
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
        self.cached()
    }
    fn capacity(&self) -> usize {
        self.capacity
    }
    fn name(&self) -> String {
        "arc".into()
    }
}
