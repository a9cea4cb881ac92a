//! # store: the OSD's object store (BlueStore-like)
//!
//! Owns the objects of one OSD on one [`device::Device`]: an extent [`Allocator`] with a
//! configurable allocation unit (`min_alloc_size`), data checksummed with crc32c per
//! checksum block, and the metadata (object records, xattrs, omap) in a redb database in its
//! own file. The API is RADOS-shaped: objects named inside collections (PGs) with data, xattrs
//! and omap, changed by atomic [`Transaction`]s and read by [`Store`] methods.
//!
//! ## On-disk layout
//! - **Data device**: raw extents, nothing else; no superblock, no journal. What is allocated
//!   is whatever the committed metadata references.
//! - **Metadata file** (redb, ACID, checksummed pages, fsync'd commits), tables:
//!   `super` (format, min_alloc_size, checksum block, device size), `objects`
//!   (`collection \0 name` -> onode: size, mtime, xattrs, extent map with one crc32c per
//!   checksum block) and `omap` (length-prefixed `collection, name` + key -> value).
//!   See [`meta`](crate) and the onode encoding in `onode.rs`.
//!
//! ## Commit protocol (copy-on-write, group commit)
//! 1. `apply` locks the transaction's objects (sharded locks, sorted order), applies its
//!    operations to copies of their onodes and writes new data to **freshly allocated**
//!    extents: a partial overwrite reads the old allocation unit, verifies it, merges and
//!    writes the unit elsewhere. No committed byte is overwritten in place.
//! 2. The prepared transaction goes to a bounded queue. The committer thread takes every
//!    queued transaction (a batch), **flushes the device once**, then writes all their
//!    metadata in **one redb commit** (fsync): many small writes share two syncs.
//! 3. After that commit, the extents the batch stopped referencing go back to the allocator,
//!    the callers get `Ok`, and the object locks are released.
//!
//! A crash before step 2's commit leaves the old metadata, which references only old extents,
//! intact; the new extents are unreferenced and free at the next mount (the allocator is
//! rebuilt from the onodes). A crash after it finds the data durable (flushed before). So a
//! torn state is never visible and every acknowledged transaction survives. A failed flush
//! or commit poisons the store ([`StoreError::Poisoned`]); reopen it.
//!
//! **Deferred writes**: not used. BlueStore puts small overwrites into the KV commit to avoid
//! a second sync on HDDs; with group commit a batch already pays one device flush plus one
//! metadata fsync however many transactions it holds, and copy-on-write never needs the
//! in-place overwrite that deferral protects, so the simpler path is kept.
//!
//! ## Invariants
//! - An allocated extent is referenced by exactly one onode (checked at mount: overlapping
//!   references are metadata corruption); the allocator never hands out an allocated extent
//!   and panics on a double free ([`Allocator::check_invariants`]).
//! - Freed extents return to the allocator only after the commit that frees them is durable.
//! - Bytes of an allocated unit beyond the object's size are zeros.
//! - Every byte read from the device is checked against its crc32c before it is returned or
//!   merged into a new write; a mismatch is [`StoreError::Checksum`], never wrong data.
//! - Reads see committed state only; a reader and the writers of an object exclude each other
//!   (shard lock), so extents are not freed under a reader.
//! - The store reads no clock: mtimes come with the transaction.

mod allocator;
mod commit;
mod config;
mod error;
mod meta;
mod onode;
mod store;
mod types;
mod write;

pub use allocator::{Allocator, DeviceExtent};
pub use config::StoreConfig;
pub use error::{Result, StoreError};
pub use store::Store;
pub use types::{ObjectId, ObjectStat, Op, Statfs, Transaction, NAME_BYTES_MAX};
pub use write::OBJECT_BYTES_MAX;
