//! The onode cache: committed onodes (and known-absent objects) in memory, so a 4 KiB read is
//! one hash lookup and one device read, and a write does not look its object up in the
//! metadata database twice (the cluster's guard check, then the store's preparation).
//!
//! ## Why it is never stale
//! The cache has one shard per object lock shard (`store::LOCK_SHARDS`), and a shard changes
//! only under that lock:
//! - a reader (shared lock) fills a missing entry from the database: every committed change to
//!   the object was made by a writer holding the exclusive lock, so what the reader loads is
//!   the latest committed state;
//! - the committer replaces the entries of a batch's objects after the database commit, while
//!   their writers still hold their exclusive locks (they are released after the answer).
//!
//! A transaction abandoned before its commit never touches the cache.
//!
//! ## What an entry holds, and the bound
//! The *encoded* onode (the bytes the database holds), decoded on every hit. A decoded onode
//! of a 4 KiB object took about 1.3 KiB of memory (two `BTreeMap`s, whose leaf nodes are
//! allocated whole), its encoding about 100 bytes; decoding it costs about a microsecond,
//! against the tens of microseconds of CPU a database lookup took (fjall's memtable, filters
//! and block decoding: reading back 300,000 fresh 4 KiB objects at 16 in flight cost 37 µs
//! of CPU per read with 65,536 objects cached, 20 with all of them). So the bound is in
//! bytes (`StoreConfig::onode_cache_bytes`): each shard holds at most its share and drops
//! its oldest entries (first in, first out) to take a new object. The drop is O(1): taking
//! "any" entry of a `HashMap` instead (`keys().next()`) scans the table from its start past
//! the slots earlier drops emptied, and held 2.5% of the CPU of a cluster writing 300,000
//! new 4 KiB objects.
//!
//! The maps hash with foldhash, seeded per process, not std's SipHash: keys are object names
//! that clients choose, so the seed stays random, but SipHash over them was 2.8% of the CPU
//! of that same benchmark.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use crate::error::Result;
use crate::onode::Onode;

/// What the cache knows of one object: `None` = it does not exist; else its onode and the
/// size in bytes of its metadata record (key + encoded onode).
pub(crate) type Cached = Option<(Arc<Onode>, u64)>;

/// Bytes an entry costs beyond its key (held twice: map and order) and encoded onode: the
/// map's slot, the order's slot and the allocations' headers, roughly.
const ENTRY_OVERHEAD_BYTES: usize = 128;

/// One shard: every key of `entries` is in `order` exactly once, oldest first.
#[derive(Default)]
struct Shard {
    /// `None`: known absent; else the encoded onode.
    entries: HashMap<Vec<u8>, Option<Arc<[u8]>>, foldhash::fast::RandomState>,
    order: VecDeque<Vec<u8>>,
    /// Sum of the entries' [`entry_bytes`].
    bytes: usize,
}

fn entry_bytes(key: &[u8], encoded: &Option<Arc<[u8]>>) -> usize {
    2 * key.len() + encoded.as_ref().map_or(0, |bytes| bytes.len()) + ENTRY_OVERHEAD_BYTES
}

pub(crate) struct OnodeCache {
    shards: Vec<Mutex<Shard>>,
    bytes_per_shard_max: usize,
    /// To decode onodes (the store's layout).
    checksum_block_bytes: u64,
}

impl OnodeCache {
    /// A cache of at most about `bytes_max` bytes (0: disabled) over `shards` shards, of the
    /// onodes of a store with checksum blocks of `checksum_block_bytes`.
    pub fn new(shards: usize, bytes_max: usize, checksum_block_bytes: u64) -> Self {
        Self {
            shards: (0..shards).map(|_| Mutex::new(Shard::default())).collect(),
            bytes_per_shard_max: bytes_max / shards.max(1),
            checksum_block_bytes,
        }
    }

    fn shard(&self, shard: usize) -> std::sync::MutexGuard<'_, Shard> {
        self.shards[shard % self.shards.len()]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// The cached state of the object with `key` in lock shard `shard`, if cached.
    pub fn get(&self, shard: usize, key: &[u8]) -> Result<Option<Cached>> {
        if self.bytes_per_shard_max == 0 {
            return Ok(None);
        }
        let Some(entry) = self.shard(shard).entries.get(key).cloned() else {
            return Ok(None);
        };
        // Decoded outside the shard's mutex.
        Ok(Some(match entry {
            None => None,
            Some(encoded) => {
                let onode = Onode::decode(&encoded, self.checksum_block_bytes)?;
                Some((Arc::new(onode), (key.len() + encoded.len()) as u64))
            }
        }))
    }

    /// Records the committed state of an object: its encoded onode, or `None` if it does not
    /// exist. The caller holds its lock shard (shared when filling from the database,
    /// exclusive when a commit changed it).
    pub fn insert(&self, shard: usize, key: Vec<u8>, encoded: Option<Arc<[u8]>>) {
        if self.bytes_per_shard_max == 0 {
            return;
        }
        let added_bytes = entry_bytes(&key, &encoded);
        let mut evicted = Vec::new();
        {
            let mut shard = self.shard(shard);
            if let Some(entry) = shard.entries.get_mut(&key) {
                let old_bytes = entry_bytes(&key, entry);
                *entry = encoded;
                shard.bytes = shard.bytes + added_bytes - old_bytes;
                return;
            }
            while shard.bytes + added_bytes > self.bytes_per_shard_max {
                let Some(oldest) = shard.order.pop_front() else {
                    break;
                };
                if let Some(entry) = shard.entries.remove(&oldest) {
                    shard.bytes -= entry_bytes(&oldest, &entry);
                    evicted.push(entry);
                }
            }
            shard.order.push_back(key.clone());
            shard.entries.insert(key, encoded);
            shard.bytes += added_bytes;
            debug_assert_eq!(shard.entries.len(), shard.order.len());
        }
        // Freed outside the shard's mutex.
        drop(evicted);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(size_bytes: u64) -> Arc<[u8]> {
        let onode = Onode {
            size_bytes,
            ..Onode::default()
        };
        Arc::from(onode.encode())
    }

    #[test]
    fn bounded_in_bytes_oldest_first_and_replaced() {
        let entry = entry_bytes(&[0], &None);
        // Two shards of room for two absent entries each.
        let cache = OnodeCache::new(2, 4 * entry, 4096);
        for index in 0..10u8 {
            cache.insert(0, vec![index], None);
        }
        {
            let shard = cache.shard(0);
            assert_eq!(shard.entries.len(), 2, "the shard's share of the bytes");
            assert_eq!(shard.bytes, 2 * entry);
        }
        assert_eq!(
            cache.get(0, &[9]).unwrap(),
            Some(None),
            "the newest entry stays"
        );
        assert_eq!(
            cache.get(0, &[0]).unwrap(),
            None,
            "the oldest entry went first"
        );
        cache.insert(1, b"a".to_vec(), Some(encoded(7)));
        let cached = cache
            .get(1, b"a")
            .unwrap()
            .expect("cached")
            .expect("exists");
        assert_eq!(cached.0.size_bytes, 7);
        assert_eq!(cached.1, 1 + encoded(7).len() as u64, "key + encoded onode");
        cache.insert(1, b"a".to_vec(), None);
        assert_eq!(cache.get(1, b"a").unwrap(), Some(None));
        assert_eq!(
            cache.shard(1).bytes,
            entry_bytes(b"a", &None),
            "replaced, not added"
        );
    }

    #[test]
    fn an_entry_larger_than_a_shard_empties_it_and_stays_alone() {
        let cache = OnodeCache::new(1, entry_bytes(&[0], &None), 4096);
        cache.insert(0, vec![0], None);
        cache.insert(0, vec![1], Some(encoded(1)));
        let shard = cache.shard(0);
        assert_eq!(shard.entries.len(), 1);
        assert!(shard.entries.contains_key(&vec![1u8]));
    }

    #[test]
    fn disabled_cache_holds_nothing() {
        let cache = OnodeCache::new(4, 0, 4096);
        cache.insert(0, b"a".to_vec(), None);
        assert_eq!(cache.get(0, b"a").unwrap(), None);
    }
}
