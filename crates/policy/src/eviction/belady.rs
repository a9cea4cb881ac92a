//! Belady's MIN, the offline optimum for object-count misses: evict the cached object whose next
//! request is furthest in the future. Needs [`Request::next_seq`], which the simulator precomputes.
//! Like libCacheSim it makes room before inserting, so the incoming object always enters.

use super::Eviction;
use crate::{Key, Request};
use std::collections::BinaryHeap;

const ABSENT: u64 = u64::MAX - 1;

/// Belady's offline optimum (max-heap on next request, lazily invalidated).
#[derive(Clone, Debug)]
pub struct Belady {
    next_seq: Vec<u64>,
    heap: BinaryHeap<(u64, Key)>,
    len: usize,
    capacity: usize,
}

impl Belady {
    /// An empty Belady cache of `capacity` objects.
    pub fn new(capacity: usize, key_space: usize) -> Self {
        assert!(capacity > 0, "capacity must be positive");
        Belady {
            next_seq: vec![ABSENT; key_space],
            heap: BinaryHeap::new(),
            len: 0,
            capacity,
        }
    }

    fn slot(&mut self, key: Key) -> &mut u64 {
        let index = key as usize;
        if index >= self.next_seq.len() {
            self.next_seq
                .resize((index + 1).next_power_of_two(), ABSENT);
        }
        &mut self.next_seq[index]
    }

    fn compact(&mut self) {
        let live = self
            .heap
            .drain()
            .filter(|&(next, key)| self.next_seq.get(key as usize) == Some(&next));
        self.heap = live.collect::<Vec<_>>().into();
    }
}

impl Eviction for Belady {
    fn contains(&self, key: Key) -> bool {
        self.next_seq
            .get(key as usize)
            .is_some_and(|&next| next != ABSENT)
    }
    fn on_hit(&mut self, request: &Request, _evicted: &mut Vec<Key>) {
        let next = request.next_seq.min(ABSENT - 1);
        *self.slot(request.key) = next;
        self.heap.push((next, request.key));
        if self.heap.len() > 4 * self.capacity + 1024 {
            self.compact();
        }
    }
    fn insert(&mut self, request: &Request, evicted: &mut Vec<Key>) {
        while self.len >= self.capacity {
            let Some((next, key)) = self.heap.pop() else {
                break;
            };
            if self.next_seq.get(key as usize) == Some(&next) {
                self.next_seq[key as usize] = ABSENT;
                self.len -= 1;
                evicted.push(key);
            }
        }
        let next = request.next_seq.min(ABSENT - 1);
        *self.slot(request.key) = next;
        self.heap.push((next, request.key));
        self.len += 1;
    }
    fn victim(&self) -> Option<Key> {
        None
    }
    fn remove(&mut self, key: Key) -> bool {
        if self.contains(key) {
            *self.slot(key) = ABSENT;
            self.len -= 1;
            true
        } else {
            false
        }
    }
    fn len(&self) -> usize {
        self.len
    }
    fn capacity(&self) -> usize {
        self.capacity
    }
    fn name(&self) -> String {
        "belady".into()
    }
}
