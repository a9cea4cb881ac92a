//! # store: the OSD's object store (BlueStore-like)
//!
//! Owns the objects of one OSD on one [`device::Device`]: an extent [`Allocator`] with a
//! configurable allocation unit (`min_alloc_size`), data checksummed with crc32c per
//! checksum block, and the metadata (object records, xattrs, omap) in a write-ahead log on the
//! device and an fjall (LSM) database in its own directory. The API is RADOS-shaped: objects named inside collections (PGs) with data, xattrs
//! and omap, changed by atomic [`Transaction`]s and read by [`Store`] methods.
//!
//! ## On-disk layout
//! - **Data device**: raw extents from offset 0, then the **write-ahead log**'s region, the
//!   device's last 1/16 (1 to 64 MiB; `wal.rs`): one checksummed record per group commit, the
//!   batch's key changes, block-aligned, rewritten from the region's start after each
//!   checkpoint. What is allocated is whatever the committed metadata references.
//! - **Metadata directory**: `db/`, an fjall database persisted only at checkpoints,
//!   keyspaces `super` (format, min_alloc_size, checksum block, data and log sizes, last log
//!   record applied), `objects` (`collection \0 name` -> onode: size, mtime, xattrs, extent
//!   map with one crc32c per checksum block) and `omap` (length-prefixed `collection, name` +
//!   key -> value). See `meta.rs` and the onode encoding in `onode.rs`.
//!
//! ## Commit protocol (copy-on-write, group commit)
//! 1. `apply` locks the transaction's objects (sharded locks, sorted order), applies its
//!    operations to copies of their onodes and writes new data to **freshly allocated**
//!    extents: a partial overwrite reads the old allocation unit, verifies it, merges and
//!    writes the unit elsewhere. No committed byte is overwritten in place, except by a
//!    deferred overwrite (below).
//!    A small transaction (at most `write_behind_bytes_max` data bytes) only allocates and
//!    checksums here and leaves its device writes to the committer (**write-behind**).
//!    A larger one writes its units here, straight from its payload (`Bytes`, shared with
//!    the other replicas' transactions, never copied): one device write per allocated
//!    piece, all of them at once; a payload in memory aligned for O_DIRECT
//!    ([`aligned_copy`]) goes to a file device without its bounce copy.
//! 2. The prepared transaction goes to a bounded queue. The committer's writer thread takes
//!    every queued transaction (a batch) and writes, all at once, the batch's write-behind
//!    data (neighbouring extents as one write) and all their metadata as **one log record**
//!    on the device (a file device submits them together through io_uring and the thread
//!    sleeps once until all are done); it then hands the batch to one of
//!    `flushes_in_flight_max` sync threads, which **flushes the device once** for it: the
//!    flush makes the batch's data and its record durable together. Many small writes share
//!    one flush, a small write costs no hop to the device's I/O threads, and the flushes of
//!    several batches run at once (a flush takes several times a write's latency here).
//! 3. In batch order, after its flush: the changes go into the database without a sync, the
//!    extents the batch stopped referencing go back to the allocator, the callers get `Ok`,
//!    and the object locks are released. A batch is acknowledged only once every earlier one
//!    is.
//!
//! A crash before step 2's flush may leave the record durable and the data not, or the other
//! way round (a disk's cache writes back in any order). Old metadata references only old
//! extents, so new extents are unreferenced and free at the next mount (the allocator is
//! rebuilt from the onodes); a torn record fails its checksum and ends the log. The mount
//! applies every record the database had not persisted, then checkpoints; the records whose
//! flush may not have completed (from the largest `flushed_before` a record carries: the
//! first record whose flush had not completed when it was written) have the data their batch
//! wrote checked against the digests (xxh3) the record carries, and the first that fails
//! ends the log: neither its batch nor any later one was acknowledged. (Not against the
//! onodes' crc32c: a lost write leaves old data in a reused extent, and old data can have
//! the new data's crc32c; see `wal`.) So a torn state is never visible and every acknowledged
//! transaction survives. A failed flush or commit poisons the store
//! ([`StoreError::Poisoned`]), and takes back the batch's record and with it every later
//! one; reopen it. A checkpoint (every batch in flight finished, database persisted, log
//! emptied) happens when the log passes half its region, before a record that would not
//! fit, and at `shutdown`.
//!
//! **Deferred overwrites** (`deferred_write_bytes_max`, 64 KiB by default; BlueStore's
//! deferred writes): a `Write` that is its object's only data change in the transaction and
//! lies inside one extent the object has is not copied: the onode keeps the extent with the
//! new blocks' crc32c, the data rides in the batch's log record, and after the batch's flush
//! (under the object's lock, before the answer) the committer writes it over the old blocks.
//! A mount writes the data of every record it keeps again, in log order, and never that of
//! a record it drops (whose batch never reached its flush, so never wrote in place). The
//! blocks are durable by the next flush; a checkpoint flushes the device before the
//! database takes their checksums for good and the log forgets them. An extent that such a
//! write touched is freed into a held list until that checkpoint, so a replay never writes
//! over another object's data. So random small overwrites leave an object in the extents it
//! was written in (a large read stays one device read per extent, and the onode does not
//! grow an extent per write), at the cost of a second device write per overwrite.
//!
//! **Defragmentation** (`Op::Defragment`, `defragment_runs_max`): copy-on-write scatters small
//! overwrites over the device, so a large read of an object written in 4 KiB pieces becomes a
//! device read per piece. A client read ([`Store::read`], not `read_device`) of a range held in
//! more than `defragment_runs_max` device runs queues, in the background, a transaction that
//! reads each hole-free part of the range again under the object's lock and writes it to fresh
//! contiguous extents: an ordinary copy-on-write write of unchanged content (mtime kept), so
//! its crash behaviour is every write's and no write can slip between its read and its rewrite.
//!
//! ## Onode cache
//! Committed onodes (and known absences) stay in memory, encoded (`cache.rs`, bounded by
//! `onode_cache_bytes`), so a small read is one hash lookup, a decode and one device read, and a
//! write does not search the database for an object its caller just looked at. Entries change
//! only under the object's lock shard: filled by lock holders from committed metadata, replaced
//! by the committer after the commit while the writers still hold their locks.
//!
//! ## Data cache
//! Blocks that small reads (at most [`DATA_CACHE_READ_BYTES_MAX`]) found valid stay in memory by
//! device offset (`buffer.rs`, bounded by `data_cache_bytes`), as BlueStore's buffered reads
//! keep them: a re-read small object costs no device read. A block changes only in a fresh
//! extent or by a deferred overwrite, which drops it from the cache before the object's lock
//! is released, and a committed batch drops the extents it frees from the cache before the
//! allocator may hand them out again. Deep scrub and recovery read the
//! device (`Store::read_device`).
//!
//! ## Invariants
//! - An allocated extent is referenced by exactly one onode (checked at mount: overlapping
//!   references are metadata corruption); the allocator never hands out an allocated extent
//!   and panics on a double free ([`Allocator::check_invariants`]).
//! - Freed extents return to the allocator only after the commit that frees them is durable
//!   and no deferred record in the log could be replayed over them.
//! - Bytes of an allocated unit beyond the object's size are zeros.
//! - Every byte read from the device is checked against its crc32c before it is returned or
//!   merged into a new write; a mismatch is [`StoreError::Checksum`], never wrong data.
//! - The data cache holds only checked blocks of allocated extents: a freed extent leaves it
//!   before the allocator can hand it out again.
//! - Reads see committed state only; a reader and the writers of an object exclude each other
//!   (shard lock), so extents are not freed under a reader and the onode cache is never stale.
//! - The store reads no clock: mtimes come with the transaction.
//!
//! ## Tests and figures
//! - `tests/model.rs`: random transactions (defragmentations too) against BTreeMap models,
//!   with remounts;
//!   `tests/faults.rs`: bit flips, EIO, torn writes, failed flush, power loss (unflushed blocks
//!   reverted, deferred replay), transactions dropped mid-flight; `tests/kill.rs`: a real
//!   writer process (`src/bin/store-crash-writer.rs`, which also defragments its objects)
//!   SIGKILLed 50 times (a process crash: the page cache survives it; power loss is what the
//!   faulty-device tests model);
//!   `tests/group_commit.rs`: concurrent transactions share a batch's one device flush and one
//!   log record ([`Store::commit_stats`] counts them), later batches flush beside earlier
//!   ones up to the limit, and a failed flush fails its batch and every later one only;
//!   `tests/defragment.rs`: a fragmented read leaves one run with content and mtime kept,
//!   holes stay holes, a power loss during a defragmentation loses nothing.
//! - `examples/bench_store.rs`: 4 KiB write_full/read ops/s at several queue depths beside fio;
//!   `examples/space_store.rs`: seed 002's data-hole rate and metadata bytes per object.

mod allocator;
mod buffer;
mod cache;
mod commit;
mod config;
mod error;
mod meta;
mod onode;
mod presence;
mod replay;
mod store;
mod types;
mod wal;
mod write;

pub use allocator::{Allocator, DeviceExtent};
pub use buffer::DATA_CACHE_READ_BYTES_MAX;
pub use bytes::Bytes;
pub use config::StoreConfig;
pub use error::{Result, StoreError};
pub use store::Store;
pub use types::{
    CollectionUsage, CommitStages, CommitStats, DataCacheStats, ObjectId, ObjectStat, Op, Statfs,
    Transaction, NAME_BYTES_MAX,
};
pub use write::{aligned_copy, OBJECT_BYTES_MAX};
