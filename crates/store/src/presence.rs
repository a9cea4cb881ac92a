//! Which objects may exist: a Bloom filter over the key of every object the metadata database
//! may hold, so that the lookup of an object that does not exist (every write of a new object,
//! the common case of `rados bench` and of S3 PUTs of new keys) is answered without reading
//! the database.
//!
//! Why: with the onode cache missing (a new object is in no cache), that lookup was an LSM
//! read, mostly a walk of fjall's memtable skiplist, 13% of the runtime threads' CPU samples of
//! `examples/bench_cluster.rs --replicas 1 --concurrency 64` (4 KiB objects, all new).
//!
//! What keeps it exact: a "no" must never be wrong, or a write would take an existing object
//! for a new one. So every key is added before it reaches the database: at mount, the scan
//! that rebuilds the allocator adds every key the database holds (after the log's replay),
//! and the committer adds a batch's keys when it stages them, before its record is written and
//! long before the database takes them. Lookups hold the object's lock shard, which a writer
//! holds from preparation until after its commit, so a lookup never races the insertion of
//! its own key, and the lock's release and acquisition order the bits' writes before the
//! lookup's reads. Removed objects stay in (a stale "maybe" only costs the database read it
//! would have cost anyway); a mount rebuilds the filter from the live keys.
//!
//! Layout: a blocked Bloom filter (every key's bits in one 64-byte block: one cache line
//! per layer per lookup) of 10 bits per key with 7 bits set, about a 1% false-positive
//! rate. When a layer has taken its capacity, a new layer of twice the capacity of all
//! before it is added (a scalable Bloom filter), so lookups check a few layers at most and
//! keys never move.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// Filter bits per key of a layer's capacity.
const BITS_PER_KEY: u64 = 10;
/// Bits set per key, all in one block.
const PROBES: u64 = 7;
/// Words of a block: 8 x 64 bits, one cache line.
const BLOCK_WORDS: usize = 8;
/// Keys the first layer holds at least (1.25 MiB).
pub(crate) const CAPACITY_MIN_KEYS: u64 = 1 << 20;

/// The filter; shared by the committer (insertions) and the transactions (lookups).
pub(crate) struct Presence {
    layers: RwLock<Vec<Arc<Layer>>>,
}

struct Layer {
    words: Box<[AtomicU64]>,
    blocks: u64,
    capacity_keys: u64,
    /// Keys that set at least one bit (a key already present sets none and is not counted).
    inserted_keys: AtomicU64,
}

impl Layer {
    fn new(capacity_keys: u64) -> Layer {
        let blocks = (capacity_keys * BITS_PER_KEY).div_ceil(64 * BLOCK_WORDS as u64);
        Layer {
            words: (0..blocks as usize * BLOCK_WORDS)
                .map(|_| AtomicU64::new(0))
                .collect(),
            blocks,
            capacity_keys,
            inserted_keys: AtomicU64::new(0),
        }
    }

    /// (word index, bit mask) of a key's `PROBES` bits.
    fn bits(&self, hash: u64) -> impl Iterator<Item = (usize, u64)> {
        // The high half picks the block (multiply-shift onto 0..blocks), the low half seeds
        // the bits inside it.
        let block = ((u128::from(hash >> 32) * u128::from(self.blocks)) >> 32) as usize;
        let mut state = hash | 1;
        (0..PROBES).map(move |_| {
            state = state.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let bit = (state >> 55) as usize; // 0..512
            (block * BLOCK_WORDS + bit / 64, 1u64 << (bit % 64))
        })
    }

    fn contains(&self, hash: u64) -> bool {
        self.bits(hash)
            .all(|(word, mask)| self.words[word].load(Ordering::Relaxed) & mask != 0)
    }

    /// Sets a key's bits; whether any was clear.
    fn insert(&self, hash: u64) -> bool {
        let mut changed = false;
        for (word, mask) in self.bits(hash) {
            changed |= self.words[word].fetch_or(mask, Ordering::Relaxed) & mask == 0;
        }
        if changed {
            self.inserted_keys.fetch_add(1, Ordering::Relaxed);
        }
        changed
    }

    fn is_full(&self) -> bool {
        self.inserted_keys.load(Ordering::Relaxed) >= self.capacity_keys
    }
}

/// The hash the filter keeps of a key (what a mount's scan collects).
pub(crate) fn key_hash(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(key)
}

impl Presence {
    /// An empty filter sized for `expected_keys` (at least [`CAPACITY_MIN_KEYS`]).
    pub fn new(expected_keys: u64) -> Presence {
        Presence::sized(expected_keys.max(CAPACITY_MIN_KEYS))
    }

    /// An empty filter whose first layer holds `capacity_keys`.
    fn sized(capacity_keys: u64) -> Presence {
        Presence {
            layers: RwLock::new(vec![Arc::new(Layer::new(capacity_keys.max(1)))]),
        }
    }

    /// A filter holding the keys of `hashes` ([`key_hash`]), with room for as many again.
    pub fn with_hashes(hashes: &[u64]) -> Presence {
        let presence = Presence::new(hashes.len() as u64 * 2);
        for &hash in hashes {
            presence.insert_hash(hash);
        }
        presence
    }

    /// Adds a key: from now on `may_contain` says yes for it.
    pub fn insert(&self, key: &[u8]) {
        self.insert_hash(key_hash(key));
    }

    fn insert_hash(&self, hash: u64) {
        let newest = {
            let layers = self.layers.read().unwrap_or_else(|e| e.into_inner());
            if layers
                .iter()
                .rev()
                .skip(1)
                .any(|layer| layer.contains(hash))
            {
                return; // Already in an older, full layer.
            }
            Arc::clone(layers.last().expect("a filter has a layer"))
        };
        if newest.insert(hash) && newest.is_full() {
            let mut layers = self.layers.write().unwrap_or_else(|e| e.into_inner());
            if Arc::ptr_eq(layers.last().expect("a filter has a layer"), &newest) {
                let total: u64 = layers.iter().map(|layer| layer.capacity_keys).sum();
                layers.push(Arc::new(Layer::new(total * 2)));
            }
        }
    }

    /// False only if the key was never inserted.
    pub fn may_contain(&self, key: &[u8]) -> bool {
        let hash = key_hash(key);
        let layers = self.layers.read().unwrap_or_else(|e| e.into_inner());
        layers.iter().any(|layer| layer.contains(hash))
    }

    /// Layers and bytes of the filter (for tests and accounting).
    #[cfg(test)]
    fn shape(&self) -> (usize, usize) {
        let layers = self.layers.read().unwrap_or_else(|e| e.into_inner());
        let bytes = layers.iter().map(|layer| layer.words.len() * 8).sum();
        (layers.len(), bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(index: u64) -> Vec<u8> {
        format!("1.2a_head\0obj-{index}").into_bytes()
    }

    #[test]
    fn an_empty_filter_contains_nothing_and_an_inserted_key_is_contained() {
        let presence = Presence::new(0);
        assert!(!presence.may_contain(b"a"), "empty filter");
        presence.insert(b"a");
        assert!(presence.may_contain(b"a"), "after insert");
        assert_eq!(presence.shape().0, 1, "one layer");
    }

    /// Keys of the test filters' first layer.
    const CAPACITY: u64 = 20_000;

    #[test]
    fn false_positives_stay_near_one_percent_at_capacity() {
        let presence = Presence::sized(CAPACITY);
        for index in 0..CAPACITY - 1 {
            presence.insert(&key(index));
        }
        assert_eq!(presence.shape().0, 1, "still one layer below capacity");
        let probes = 100_000u64;
        let positives = (0..probes)
            .filter(|index| presence.may_contain(&key(CAPACITY + index)))
            .count() as f64;
        let rate = positives / probes as f64;
        // 10 bits per key and 7 probes in 512-bit blocks: about 1%.
        assert!(rate < 0.02, "false-positive rate {rate}");
        assert!(rate > 0.0, "a Bloom filter at capacity has some: {rate}");
    }

    #[test]
    fn a_full_layer_grows_the_filter_and_keeps_every_key() {
        let presence = Presence::sized(CAPACITY);
        let keys = CAPACITY * 3;
        for index in 0..keys {
            presence.insert(&key(index));
        }
        let (layers, bytes) = presence.shape();
        assert_eq!(layers, 2, "a first layer, then one of twice its capacity");
        assert_eq!(
            bytes as u64,
            (CAPACITY * BITS_PER_KEY).div_ceil(512) * 64
                + (2 * CAPACITY * BITS_PER_KEY).div_ceil(512) * 64,
            "layers of 1 and 2 x CAPACITY keys at 10 bits"
        );
        let missing = (0..keys)
            .filter(|index| !presence.may_contain(&key(*index)))
            .count();
        assert_eq!(missing, 0, "a key inserted is never denied");
    }

    #[test]
    fn with_hashes_sizes_for_twice_the_keys_given() {
        let keys: Vec<Vec<u8>> = (0..10).map(key).collect();
        let hashes: Vec<u64> = keys.iter().map(|k| key_hash(k)).collect();
        let presence = Presence::with_hashes(&hashes);
        assert_eq!(
            presence.shape().1 as u64,
            CAPACITY_MIN_KEYS * BITS_PER_KEY / 8,
            "the minimum size"
        );
        assert!(keys.iter().all(|k| presence.may_contain(k)), "all present");
    }

    proptest! {
        #[test]
        fn no_inserted_key_is_ever_denied(
            keys in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..300),
        ) {
            let presence = Presence::sized(64);
            for key in &keys {
                presence.insert(key);
            }
            for key in &keys {
                prop_assert!(presence.may_contain(key), "denied {key:?}");
            }
        }
    }
}
