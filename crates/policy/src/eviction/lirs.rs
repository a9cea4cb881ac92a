//! LIRS (Jiang and Zhang, SIGMETRICS 2002): an object's *inter-reference recency* (how many
//! other objects were requested between its last two requests) decides whether it is an LIR
//! object (kept) or an HIR object (a short FIFO-like queue Q evicts those).
//!
//! Stack S holds, newest first, the LIR objects and the HIR objects (resident or not) requested
//! more recently than the oldest LIR object; Q holds the resident HIR objects. A request for an
//! HIR object that S still remembers had a short reuse distance: it becomes LIR and the oldest
//! LIR object is demoted to Q. Pruning keeps an LIR object at S's bottom.
//!
//! Parameters and corner cases follow libCacheSim's `LIRS` so that the validation against its
//! reference table compares like with like:
//! - Q (the resident HIR objects) holds max(1, 1% of the capacity), the LIR set the rest.
//! - S is bounded at twice the capacity by forgetting the non-resident HIR objects that became
//!   non-resident longest ago (list `NONRESIDENT`).
//! - A hit on a resident HIR object that S no longer holds (it is only in Q) still demotes S's
//!   oldest LIR object when the LIR set is full; the object stays HIR, so the LIR set has a free
//!   slot that the next new object takes.
//! - While the LIR set is not full, every new object becomes LIR.

use super::Eviction;
use crate::list::Lists;
use crate::{Key, Request};

/// The one list of each [`Lists`] below.
const LIST: u8 = 0;
/// Flag bits per key.
const LIR: u8 = 1;
const RESIDENT: u8 = 2;

/// Low Inter-reference Recency Set.
#[derive(Clone, Debug)]
pub struct Lirs {
    /// Stack S (head = most recent).
    stack: Lists,
    /// Q: resident HIR objects (head = most recent, tail = next victim).
    queue: Lists,
    /// Non-resident HIR objects still in S, in the order they left the cache.
    nonresident: Lists,
    flags: Vec<u8>,
    lir_count: usize,
    lir_limit: usize,
    hir_limit: usize,
    capacity: usize,
}

impl Lirs {
    /// An empty LIRS cache of `capacity` objects; `key_space` presizes the per-key arrays.
    pub fn new(capacity: usize, key_space: usize) -> Self {
        assert!(capacity > 0, "capacity must be positive");
        let hir_limit = ((capacity as f64 * 0.01) as usize).max(1);
        Lirs {
            stack: Lists::new(1, key_space),
            queue: Lists::new(1, key_space),
            nonresident: Lists::new(1, key_space),
            flags: vec![0; key_space],
            lir_count: 0,
            lir_limit: capacity.saturating_sub(hir_limit),
            hir_limit,
            capacity,
        }
    }

    #[inline]
    fn flags(&self, key: Key) -> u8 {
        self.flags.get(key as usize).copied().unwrap_or(0)
    }

    #[inline]
    fn set_flags(&mut self, key: Key, flags: u8) {
        let index = key as usize;
        if index >= self.flags.len() {
            self.flags.resize((index + 1).next_power_of_two(), 0);
        }
        self.flags[index] = flags;
    }

    fn hir_count(&self) -> usize {
        self.queue.len(LIST)
    }

    /// Evicts Q's oldest resident HIR object; S remembers it as non-resident if it holds it.
    fn evict_hir(&mut self, evicted: &mut Vec<Key>) {
        let Some(key) = self.queue.pop_tail(LIST) else {
            return;
        };
        evicted.push(key);
        if self.stack.in_list(key, LIST) {
            self.set_flags(key, 0);
            self.nonresident.push_head(LIST, key);
        } else {
            self.set_flags(key, 0);
        }
    }

    /// Demotes S's bottom LIR object to Q (evicting from Q first while it is full), then prunes.
    fn demote_lir(&mut self, evicted: &mut Vec<Key>) {
        let Some(key) = self.stack.pop_tail(LIST) else {
            return;
        };
        debug_assert!(self.flags(key) & LIR != 0, "S's bottom {key} is not LIR");
        self.lir_count -= 1;
        while self.hir_count() + 1 > self.hir_limit {
            self.evict_hir(evicted);
        }
        self.queue.push_head(LIST, key);
        self.set_flags(key, RESIDENT);
        self.prune();
    }

    /// Removes HIR objects from S's bottom until an LIR object is there (the last entry stays).
    fn prune(&mut self) {
        while self.stack.len(LIST) > 1 {
            let Some(key) = self.stack.tail(LIST) else {
                return;
            };
            let flags = self.flags(key);
            if flags & LIR != 0 {
                return;
            }
            self.stack.remove(key);
            if flags & RESIDENT == 0 {
                self.nonresident.remove(key);
                self.set_flags(key, 0);
            }
        }
    }

    /// Keeps S within twice the capacity by forgetting the oldest non-resident HIR objects.
    fn limit_stack(&mut self) {
        while self.stack.len(LIST) > 2 * self.capacity {
            let Some(key) = self.nonresident.pop_tail(LIST) else {
                return;
            };
            self.stack.remove(key);
            self.set_flags(key, 0);
        }
    }

    /// Makes room in the LIR set for one object (demoting S's bottom LIR objects).
    fn make_lir_room(&mut self, evicted: &mut Vec<Key>) {
        while self.lir_count + 1 > self.lir_limit && self.lir_count > 0 {
            self.demote_lir(evicted);
        }
    }

    fn touch(&mut self, key: Key) {
        if self.stack.in_list(key, LIST) {
            self.stack.move_to_head(LIST, key);
        }
        if self.queue.in_list(key, LIST) {
            self.queue.move_to_head(LIST, key);
        }
    }
}

impl Eviction for Lirs {
    fn contains(&self, key: Key) -> bool {
        self.flags(key) & (LIR | RESIDENT) != 0
    }

    fn on_hit(&mut self, request: &Request, evicted: &mut Vec<Key>) {
        let key = request.key;
        self.touch(key);
        let flags = self.flags(key);
        if flags & LIR != 0 {
            self.prune();
        } else if self.stack.in_list(key, LIST) {
            // A resident HIR object S remembers: its reuse distance is short, it becomes LIR.
            self.queue.remove(key);
            self.make_lir_room(evicted);
            self.set_flags(key, LIR | RESIDENT);
            self.lir_count += 1;
        } else {
            // A resident HIR object only in Q: it stays HIR (libCacheSim demotes S's bottom LIR
            // object all the same). With a Q of one object the demotion would evict the object
            // being hit (libCacheSim then serves it from nowhere): it steps aside instead, and Q
            // holds two objects until the next insertion (the LIR set has one fewer).
            let aside = self.hir_limit == 1;
            if aside {
                self.queue.remove(key);
            }
            self.make_lir_room(evicted);
            if aside {
                self.queue.push_head(LIST, key);
            }
            self.stack.push_head(LIST, key);
            self.set_flags(key, RESIDENT);
        }
        self.limit_stack();
    }

    fn insert(&mut self, request: &Request, evicted: &mut Vec<Key>) {
        let key = request.key;
        debug_assert!(!self.contains(key));
        if self.stack.in_list(key, LIST) {
            // A non-resident HIR object S remembers: it comes back as LIR.
            self.stack.move_to_head(LIST, key);
            self.nonresident.remove(key);
            self.make_lir_room(evicted);
            // Still full (only while warming up): as libCacheSim, empty Q below its limit and
            // demote one more LIR object.
            while self.len() + 1 > self.capacity && self.len() > 0 {
                while self.hir_count() >= self.hir_limit && self.hir_count() > 0 {
                    self.evict_hir(evicted);
                }
                if self.lir_count == 0 {
                    break;
                }
                self.demote_lir(evicted);
            }
            self.set_flags(key, LIR | RESIDENT);
            self.lir_count += 1;
        } else if self.lir_count < self.lir_limit {
            // Only after a hit stepped aside (a Q of one object) can Q be over its limit here.
            while self.len() + 1 > self.capacity && self.hir_count() > 0 {
                self.evict_hir(evicted);
            }
            self.stack.push_head(LIST, key);
            self.set_flags(key, LIR | RESIDENT);
            self.lir_count += 1;
        } else {
            while self.hir_count() + 1 > self.hir_limit {
                self.evict_hir(evicted);
            }
            self.stack.push_head(LIST, key);
            self.queue.push_head(LIST, key);
            self.set_flags(key, RESIDENT);
        }
        self.limit_stack();
    }

    fn victim(&self) -> Option<Key> {
        (self.len() >= self.capacity)
            .then(|| self.queue.tail(LIST))
            .flatten()
    }

    fn remove(&mut self, key: Key) -> bool {
        let flags = self.flags(key);
        if flags & (LIR | RESIDENT) == 0 {
            return false;
        }
        self.queue.remove(key);
        self.stack.remove(key);
        self.set_flags(key, 0);
        if flags & LIR != 0 {
            self.lir_count -= 1;
            self.prune();
        }
        true
    }

    fn len(&self) -> usize {
        self.lir_count + self.hir_count()
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    fn name(&self) -> String {
        "lirs".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(key: Key) -> Request {
        Request {
            key,
            size_bytes: 1,
            ..Request::default()
        }
    }

    /// Replays `keys`; returns the hits.
    fn replay(cache: &mut Lirs, keys: &[Key]) -> Vec<bool> {
        let mut evicted = Vec::new();
        keys.iter()
            .map(|&key| {
                let hit = cache.contains(key);
                if hit {
                    cache.on_hit(&request(key), &mut evicted);
                } else {
                    cache.insert(&request(key), &mut evicted);
                }
                assert!(cache.len() <= cache.capacity());
                hit
            })
            .collect()
    }

    /// The paper's point: a loop slightly larger than the cache makes LRU miss every request,
    /// while LIRS keeps most of the loop as LIR objects and hits them.
    #[test]
    fn a_loop_larger_than_the_cache_hits_where_lru_misses() {
        let keys: Vec<Key> = (0..20).flat_map(|_| 0..120).collect();
        let mut cache = Lirs::new(100, 200);
        let hits = replay(&mut cache, &keys).iter().filter(|&&h| h).count();
        assert!(hits > 20 * 90, "{hits}");
    }

    /// A one-time scan does not flush the LIR set: only Q's 1% turns over.
    #[test]
    fn a_scan_leaves_the_lir_set_in_place() {
        let mut cache = Lirs::new(100, 10_000);
        let hot: Vec<Key> = (0..99).flat_map(|_| 0..99).collect();
        replay(&mut cache, &hot);
        let scan: Vec<Key> = (1_000..5_000).collect();
        replay(&mut cache, &scan);
        assert!((0..99).all(|key| cache.contains(key)));
    }

    /// Eviction reports every key that leaves, and `contains` agrees with the evictions.
    #[test]
    fn evicted_keys_are_no_longer_cached() {
        let mut cache = Lirs::new(8, 64);
        let mut evicted = Vec::new();
        let mut held = std::collections::BTreeSet::new();
        for i in 0..5_000u64 {
            let key = (crate::mix64(i) % 40) as Key;
            evicted.clear();
            if cache.contains(key) {
                cache.on_hit(&request(key), &mut evicted);
            } else {
                cache.insert(&request(key), &mut evicted);
                held.insert(key);
            }
            for gone in &evicted {
                assert!(held.remove(gone), "{gone} evicted twice");
            }
            assert_eq!(held.len(), cache.len());
            assert!(held.iter().all(|&k| cache.contains(k)));
        }
    }
}
