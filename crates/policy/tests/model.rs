//! Model tests: random request streams against simple reference models.

use policy::admission::{AdmitAll, Filtered};
use policy::eviction::{Belady, Fifo, Lru};
use policy::{Cache, Effects, Outcome, Request};
use proptest::prelude::*;

fn request(key: u32, seq: u64, next_seq: u64) -> Request {
    Request {
        key,
        seq,
        now_ms: seq,
        size_bytes: 1,
        object_bytes: 0,
        write: false,
        next_seq,
    }
}

fn next_seqs(keys: &[u32]) -> Vec<u64> {
    let mut next = vec![u64::MAX; keys.len()];
    let mut seen = std::collections::HashMap::new();
    for (i, &k) in keys.iter().enumerate().rev() {
        next[i] = seen.get(&k).copied().unwrap_or(u64::MAX);
        seen.insert(k, i as u64);
    }
    next
}

proptest! {
    #[test]
    fn lru_matches_a_vector_model(keys in prop::collection::vec(0u32..40, 1..400), capacity in 1usize..20) {
        let mut cache = Filtered::new(Lru::new(capacity, 0), AdmitAll);
        let mut model: Vec<u32> = Vec::new(); // most recent last
        let mut effects = Effects::default();
        for (seq, &key) in keys.iter().enumerate() {
            effects.clear();
            let outcome = cache.on_request(&request(key, seq as u64, u64::MAX), &mut effects);
            let hit = model.contains(&key);
            prop_assert_eq!(outcome.is_hit(), hit);
            model.retain(|&k| k != key);
            if !hit && model.len() >= capacity {
                let victim = model.remove(0);
                prop_assert_eq!(effects.evicted.clone(), vec![victim]);
            }
            model.push(key);
            prop_assert_eq!(cache.len(), model.len());
        }
    }

    #[test]
    fn fifo_matches_a_queue_model(keys in prop::collection::vec(0u32..40, 1..400), capacity in 1usize..20) {
        let mut cache = Filtered::new(Fifo::new(capacity, 0), AdmitAll);
        let mut model: std::collections::VecDeque<u32> = Default::default();
        let mut effects = Effects::default();
        for (seq, &key) in keys.iter().enumerate() {
            effects.clear();
            let outcome = cache.on_request(&request(key, seq as u64, u64::MAX), &mut effects);
            prop_assert_eq!(outcome.is_hit(), model.contains(&key));
            if !model.contains(&key) {
                if model.len() >= capacity {
                    model.pop_front();
                }
                model.push_back(key);
            }
        }
    }

    #[test]
    fn belady_never_misses_more_than_lru(keys in prop::collection::vec(0u32..60, 1..500), capacity in 1usize..25) {
        let next = next_seqs(&keys);
        let mut belady = Filtered::new(Belady::new(capacity, 0), AdmitAll);
        let mut lru = Filtered::new(Lru::new(capacity, 0), AdmitAll);
        let mut effects = Effects::default();
        let (mut belady_misses, mut lru_misses) = (0, 0);
        for (seq, &key) in keys.iter().enumerate() {
            effects.clear();
            belady_misses += (belady.on_request(&request(key, seq as u64, next[seq]), &mut effects) != Outcome::Hit) as u32;
            effects.clear();
            lru_misses += (lru.on_request(&request(key, seq as u64, next[seq]), &mut effects) != Outcome::Hit) as u32;
            prop_assert!(belady.len() <= capacity);
        }
        prop_assert!(belady_misses <= lru_misses);
    }
}
