//! The data cache: verified blocks of small reads kept in memory by device offset, so reading
//! a recently read small object again is a hash lookup and a copy instead of a device read.
//! BlueStore does the same (`bluestore_default_buffered_read`, on by default): Ceph's OSDs
//! serve re-read small objects from memory, and so must a store compared with them.
//!
//! ## Why it is never stale
//! A block on the device changes only inside a freshly allocated extent (the store is
//! copy-on-write), and an extent is allocated again only after it was freed. Every extent a
//! committed batch frees is dropped from the cache before it goes back to the allocator
//! (`commit`), so no entry outlives the data it copies. An entry is inserted by a reader that
//! holds its object's lock shared, reading the extents of the committed onode; those extents
//! are freed only by a writer's commit, under that lock held exclusively, so after the insert.
//!
//! ## What it holds
//! Only reads of at most [`DATA_CACHE_READ_BYTES_MAX`] bytes fill it (a large object streamed
//! once would push out the small ones that are read again), and only with data that passed
//! its checksums. Deep scrub and recovery read the device, never the cache
//! (`Store::read_device`): what they check or copy is what the device holds. The bound is in
//! bytes (`StoreConfig::data_cache_bytes`), per shard; eviction is CLOCK (a block read again
//! since it was last passed gets another round), O(1) per insertion.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::allocator::DeviceExtent;
use crate::types::DataCacheStats;

/// Reads of more bytes than this neither fill the cache nor look in it.
pub const DATA_CACHE_READ_BYTES_MAX: u64 = 64 * 1024;

/// Independent shards (each block's by its offset), so concurrent readers rarely meet.
const SHARDS: usize = 16;

/// Bytes an entry costs beyond its data: the map's slot, the order's slot and the allocation's
/// header, roughly.
const ENTRY_OVERHEAD_BYTES: usize = 64;

struct Entry {
    data: Box<[u8]>,
    /// Read since the clock hand last passed it.
    referenced: bool,
}

#[derive(Default)]
struct Shard {
    entries: HashMap<u64, Entry, foldhash::fast::RandomState>,
    /// The clock: offsets in insertion order. An offset invalidated stays here until the
    /// hand reaches it (or a compaction), so it may be here for an entry inserted again.
    order: VecDeque<u64>,
    /// Sum of the entries' data bytes plus [`ENTRY_OVERHEAD_BYTES`] each.
    bytes: usize,
}

impl Shard {
    /// Drops the block at `offset`, if held (its offset may stay in the clock).
    fn remove(&mut self, offset: u64) {
        if let Some(entry) = self.entries.remove(&offset) {
            self.bytes -= entry.data.len() + ENTRY_OVERHEAD_BYTES;
        }
    }

    /// Drops entries until `needed` more bytes fit under `bytes_max`.
    fn make_room(&mut self, needed: usize, bytes_max: usize) {
        while self.bytes + needed > bytes_max {
            let Some(offset) = self.order.pop_front() else {
                return;
            };
            let Some(entry) = self.entries.get_mut(&offset) else {
                continue;
            };
            if entry.referenced {
                entry.referenced = false;
                self.order.push_back(offset);
            } else {
                self.remove(offset);
            }
        }
    }
}

pub(crate) struct DataCache {
    shards: Vec<Mutex<Shard>>,
    bytes_per_shard_max: usize,
    block_bytes: u64,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl DataCache {
    /// A cache of at most about `bytes_max` bytes (0: disabled) of blocks of `block_bytes`.
    pub fn new(bytes_max: usize, block_bytes: u64) -> DataCache {
        DataCache {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            bytes_per_shard_max: bytes_max / SHARDS,
            block_bytes,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// Whether a read of `length_bytes` uses the cache.
    pub fn serves(&self, length_bytes: u64) -> bool {
        self.bytes_per_shard_max > 0 && length_bytes <= DATA_CACHE_READ_BYTES_MAX
    }

    fn shard(&self, device_offset_bytes: u64) -> MutexGuard<'_, Shard> {
        self.lock((device_offset_bytes / self.block_bytes) as usize % SHARDS)
    }

    fn lock(&self, index: usize) -> MutexGuard<'_, Shard> {
        self.shards[index]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Fills `buffer`, whole blocks from `device_offset_bytes` on, from the cache if it holds
    /// every one of them; `false` (a miss, `buffer` partly filled) otherwise.
    pub fn read(&self, device_offset_bytes: u64, buffer: &mut [u8]) -> bool {
        let block = self.block_bytes as usize;
        debug_assert!(buffer.len().is_multiple_of(block));
        for (index, chunk) in buffer.chunks_mut(block).enumerate() {
            let offset = device_offset_bytes + (index * block) as u64;
            let mut shard = self.shard(offset);
            let Some(entry) = shard.entries.get_mut(&offset) else {
                self.misses.fetch_add(1, Ordering::Relaxed);
                return false;
            };
            entry.referenced = true;
            chunk.copy_from_slice(&entry.data);
        }
        self.hits.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Keeps the verified blocks of `data`, read from `device_offset_bytes`.
    pub fn insert(&self, device_offset_bytes: u64, data: &[u8]) {
        let block = self.block_bytes as usize;
        debug_assert!(data.len().is_multiple_of(block));
        for (index, chunk) in data.chunks(block).enumerate() {
            let offset = device_offset_bytes + (index * block) as u64;
            let mut shard = self.shard(offset);
            if shard.entries.contains_key(&offset) {
                // A concurrent reader of the same block put it there: the same bytes.
                continue;
            }
            let entry_bytes = chunk.len() + ENTRY_OVERHEAD_BYTES;
            if entry_bytes > self.bytes_per_shard_max {
                return;
            }
            shard.make_room(entry_bytes, self.bytes_per_shard_max);
            shard.entries.insert(
                offset,
                Entry {
                    data: chunk.into(),
                    referenced: false,
                },
            );
            shard.order.push_back(offset);
            shard.bytes += entry_bytes;
            // Invalidated offsets left in the clock: bounded to about the entries again.
            if shard.order.len() > 2 * shard.entries.len() + 1024 {
                let Shard { entries, order, .. } = &mut *shard;
                order.retain(|offset| entries.contains_key(offset));
            }
        }
    }

    /// Drops every block of `extent` (freed: it may be allocated and written again).
    pub fn invalidate(&self, extent: &DeviceExtent) {
        if self.bytes_per_shard_max == 0 {
            return;
        }
        let first = extent.offset_bytes / self.block_bytes;
        let end = (extent.offset_bytes + extent.length_bytes).div_ceil(self.block_bytes);
        if end - first < SHARDS as u64 {
            // A small extent (a 4 KiB overwrite frees one block): only its blocks' shards.
            for block in first..end {
                let offset = block * self.block_bytes;
                self.shard(offset).remove(offset);
            }
            return;
        }
        // Shard by shard, so each lock is taken once per extent.
        for index in 0..SHARDS {
            let mut shard = self.lock(index);
            if shard.entries.is_empty() {
                continue;
            }
            // The first block at or after `first` that falls in this shard.
            let shards = SHARDS as u64;
            let start = first + (index as u64 + shards - first % shards) % shards;
            for block in (start..end).step_by(SHARDS) {
                shard.remove(block * self.block_bytes);
            }
        }
    }

    pub fn stats(&self) -> DataCacheStats {
        let (mut blocks, mut bytes) = (0u64, 0u64);
        for index in 0..SHARDS {
            let shard = self.lock(index);
            blocks += shard.entries.len() as u64;
            bytes += shard.bytes as u64;
        }
        DataCacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            blocks,
            bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BLOCK: u64 = 4096;

    fn block(seed: u8) -> Vec<u8> {
        vec![seed; BLOCK as usize]
    }

    #[test]
    fn a_read_hits_only_when_every_block_is_held() {
        let cache = DataCache::new(1 << 20, BLOCK);
        let mut two = [block(1), block(2)].concat();
        cache.insert(8 * BLOCK, &two);
        let mut buffer = vec![0u8; 2 * BLOCK as usize];
        assert!(cache.read(8 * BLOCK, &mut buffer));
        assert_eq!(buffer, two);
        // One block more than held: a miss.
        two.extend(block(3));
        let mut three = vec![0u8; 3 * BLOCK as usize];
        assert!(!cache.read(8 * BLOCK, &mut three));
        let stats = cache.stats();
        assert_eq!((stats.hits, stats.misses, stats.blocks), (1, 1, 2));
    }

    #[test]
    fn a_freed_extent_leaves_no_block_behind_and_others_stay() {
        let cache = DataCache::new(1 << 20, BLOCK);
        for index in 0..40u64 {
            cache.insert(index * BLOCK, &block(index as u8));
        }
        // Blocks 3..=36: every shard loses some, and blocks on either side stay.
        cache.invalidate(&DeviceExtent {
            offset_bytes: 3 * BLOCK,
            length_bytes: 34 * BLOCK,
        });
        let mut buffer = vec![0u8; BLOCK as usize];
        for index in 0..40u64 {
            let held = cache.read(index * BLOCK, &mut buffer);
            assert_eq!(held, !(3..37).contains(&index), "block {index}");
            if held {
                assert_eq!(buffer, block(index as u8));
            }
        }
        let stats = cache.stats();
        assert_eq!(stats.blocks, 6);
        assert_eq!(
            stats.bytes,
            6 * (BLOCK + ENTRY_OVERHEAD_BYTES as u64),
            "bytes follow the entries"
        );
        // A small extent (fewer blocks than shards) takes its own path: blocks 1 and 2 only.
        cache.invalidate(&DeviceExtent {
            offset_bytes: BLOCK,
            length_bytes: 2 * BLOCK,
        });
        for index in [0u64, 37, 38, 39] {
            assert!(
                cache.read(index * BLOCK, &mut buffer),
                "block {index} stays"
            );
        }
        for index in [1u64, 2] {
            assert!(
                !cache.read(index * BLOCK, &mut buffer),
                "block {index} dropped"
            );
        }
        assert_eq!(cache.stats().blocks, 4);
    }

    #[test]
    fn the_bound_holds_and_a_block_read_again_outlives_one_that_was_not() {
        // Room for 4 blocks per shard; every block below lands in shard 0.
        let per_shard = 4 * (BLOCK as usize + ENTRY_OVERHEAD_BYTES);
        let cache = DataCache::new(per_shard * SHARDS, BLOCK);
        let offset = |index: u64| index * SHARDS as u64 * BLOCK;
        for index in 0..4 {
            cache.insert(offset(index), &block(index as u8));
        }
        let mut buffer = vec![0u8; BLOCK as usize];
        assert!(cache.read(offset(0), &mut buffer), "block 0 read again");
        cache.insert(offset(4), &block(4));
        assert!(
            cache.read(offset(0), &mut buffer),
            "kept: read since inserted"
        );
        assert!(
            !cache.read(offset(1), &mut buffer),
            "the oldest unread one went"
        );
        let stats = cache.stats();
        assert_eq!(stats.blocks, 4);
        assert!(stats.bytes as usize <= per_shard);
    }

    #[test]
    fn disabled_or_large_reads_do_not_use_it() {
        assert!(!DataCache::new(0, BLOCK).serves(BLOCK));
        let cache = DataCache::new(1 << 20, BLOCK);
        assert!(cache.serves(DATA_CACHE_READ_BYTES_MAX));
        assert!(!cache.serves(DATA_CACHE_READ_BYTES_MAX + BLOCK));
        // Invalidating in a disabled cache is a no-op, not a panic.
        DataCache::new(0, BLOCK).invalidate(&DeviceExtent {
            offset_bytes: 0,
            length_bytes: 1 << 30,
        });
    }
}
