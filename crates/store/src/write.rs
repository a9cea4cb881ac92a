//! Transaction preparation: copy-on-write data placement and onode updates.
//!
//! A transaction's new data goes to freshly allocated extents (whole allocation units; a
//! partially written unit is read, checked, merged and rewritten elsewhere), so nothing that a
//! committed onode references is overwritten before the commit that stops referencing it. The
//! result is a [`Pending`] for the committer: the new onodes, omap changes, the extents to free
//! once the commit is durable, and the object locks, held until then.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use tokio::sync::OwnedRwLockWriteGuard;

use crate::allocator::DeviceExtent;
use crate::commit::{Deltas, ObjectUpdate, OmapChange, Pending, Timing};
use crate::error::{Result, StoreError};
use crate::meta;
use crate::onode::{first_bad_block, Extent, Onode};
use crate::store::Inner;
use crate::types::{ObjectId, Op, Transaction};
use crate::wal::{self, DataDigest};

/// Objects of a transaction from which its preparation finds them through a map rather than
/// a scan.
const INDEXED_OBJECTS_MIN: usize = 16;

/// Largest object offset the store accepts (1 TiB).
pub const OBJECT_BYTES_MAX: u64 = 1 << 40;

/// Whole units of a write that ends inside a unit, from which the write places them from the
/// caller's buffer as they are and copies only its partial last unit (into a padded unit of
/// its own extent); a smaller write is copied into one padded buffer (one extent).
const SPLIT_WRITE_BYTES_MIN: usize = 64 * 1024;

/// An object being changed by a transaction.
struct Work {
    /// Its key in the metadata database.
    key: Vec<u8>,
    /// Its lock shard.
    shard: usize,
    onode: Option<Onode>,
    existed: bool,
    old_stored_bytes: u64,
    old_allocated_bytes: u64,
    old_record_bytes: u64,
    omap_clear: bool,
    omap: Vec<OmapChange>,
    touched: bool,
}

/// Device extents allocated by a transaction that has not committed; given back to the
/// allocator if the transaction is abandoned (error, cancellation, poisoned store).
pub(crate) struct Fresh {
    pub inner: Arc<Inner>,
    pub extents: Vec<DeviceExtent>,
    pub armed: bool,
}

impl Drop for Fresh {
    fn drop(&mut self) {
        if self.armed && !self.extents.is_empty() {
            let mut allocator = self.inner.allocator();
            for extent in self.extents.drain(..) {
                allocator.release(extent);
            }
        }
    }
}

fn check_range(offset_bytes: u64, length_bytes: u64) -> Result<()> {
    match offset_bytes.checked_add(length_bytes) {
        Some(end) if end <= OBJECT_BYTES_MAX => Ok(()),
        _ => Err(StoreError::InvalidArgument(format!(
            "range {offset_bytes}+{length_bytes} beyond the object size limit {OBJECT_BYTES_MAX}"
        ))),
    }
}

fn validate(transaction: &Transaction) -> Result<()> {
    for (id, op) in &transaction.ops {
        id.validate()?;
        match op {
            Op::Write { offset_bytes, data } => check_range(*offset_bytes, data.len() as u64)?,
            Op::WriteFull { data } => check_range(0, data.len() as u64)?,
            Op::Truncate { size_bytes } => check_range(*size_bytes, 0)?,
            Op::Zero {
                offset_bytes,
                length_bytes,
            }
            | Op::Defragment {
                offset_bytes,
                length_bytes,
            } => check_range(*offset_bytes, *length_bytes)?,
            Op::SetXattr { key, .. } | Op::RemoveXattr { key } if key.len() > u16::MAX as usize => {
                return Err(StoreError::InvalidArgument("xattr name too long".into()));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Locks the transaction's objects, applies its operations to their onodes (writing new data
/// to fresh extents), and returns what the committer must make durable (the caller gives it
/// its `reply`); `None` for an empty transaction. `applied`: when the caller asked for it
/// (the start of its stage timings).
pub(crate) async fn prepare(
    inner: &Arc<Inner>,
    transaction: Transaction,
    applied: Instant,
) -> Result<Option<Pending>> {
    validate(&transaction)?;
    if transaction.ops.is_empty() {
        return Ok(None);
    }
    // Each object's lock shard, hashed once (the locks, the cache and the commit use it).
    let op_shards: Vec<usize> = transaction
        .ops
        .iter()
        .map(|(id, _)| inner.shard(&id.collection, &id.name))
        .collect();
    let mut shards = op_shards.clone();
    shards.sort_unstable();
    shards.dedup();
    let mut guards: Vec<OwnedRwLockWriteGuard<()>> = Vec::with_capacity(shards.len());
    for shard in shards {
        guards.push(Arc::clone(&inner.locks[shard]).write_owned().await);
    }
    let mut fresh = Fresh {
        inner: Arc::clone(inner),
        extents: Vec::new(),
        armed: true,
    };
    let mut freed: Vec<DeviceExtent> = Vec::new();
    // The objects, and beside them (so a `Context` can borrow an id while its work changes)
    // their ids. Most transactions change one object: they are found by a scan until there
    // are `INDEXED_OBJECTS_MIN`, then through a map.
    let mut works: Vec<Work> = Vec::new();
    let mut ids: Vec<ObjectId> = Vec::new();
    let mut index: Option<HashMap<ObjectId, usize>> = None;
    let mut deferred =
        (inner.config.durable && inner.config.deferred_write_bytes_max > 0).then(|| Deferred {
            budget_bytes: inner.config.deferred_write_bytes_max,
            records: Vec::new(),
        });
    // A write may be deferred (made in place after the commit) only if it is its object's
    // only data change in the transaction: an earlier or later one would read the object's
    // old blocks from the device while the onode already holds the new blocks' checksums.
    let deferrable: Vec<bool> = if deferred.is_some() {
        let mut data_ops: HashMap<&ObjectId, usize> = HashMap::new();
        for (id, op) in &transaction.ops {
            if op.changes_data() {
                *data_ops.entry(id).or_default() += 1;
            }
        }
        transaction
            .ops
            .iter()
            .map(|(id, op)| matches!(op, Op::Write { .. }) && data_ops.get(id) == Some(&1))
            .collect()
    } else {
        vec![false; transaction.ops.len()]
    };
    let mut behind = Behind {
        budget_bytes: inner.config.write_behind_bytes_max,
        writes: Vec::new(),
    };
    let mut written = Vec::new();
    for (((id, op), shard), deferrable) in
        transaction.ops.into_iter().zip(op_shards).zip(deferrable)
    {
        let found = match &index {
            Some(index) => index.get(&id).copied(),
            None => ids.iter().position(|known| *known == id),
        };
        let slot = match found {
            Some(slot) => slot,
            None => {
                let key = meta::object_key(&id.collection, &id.name);
                // Not cached here: the commit caches the new state.
                let loaded = inner.lookup_onode_at(shard, &key, false)?;
                let (onode, record) = match loaded {
                    Some((onode, record)) => (Some(Arc::unwrap_or_clone(onode)), record),
                    None => (None, 0),
                };
                works.push(Work {
                    existed: onode.is_some(),
                    old_stored_bytes: onode.as_ref().map_or(0, Onode::stored_bytes),
                    old_allocated_bytes: onode.as_ref().map_or(0, Onode::allocated_bytes),
                    old_record_bytes: record,
                    onode,
                    key,
                    shard,
                    omap_clear: false,
                    omap: Vec::new(),
                    touched: false,
                });
                let slot = works.len() - 1;
                match &mut index {
                    Some(index) => {
                        index.insert(id.clone(), slot);
                    }
                    None if works.len() >= INDEXED_OBJECTS_MIN => {
                        let mut map: HashMap<ObjectId, usize> =
                            ids.iter().cloned().zip(0..).collect();
                        map.insert(id.clone(), slot);
                        index = Some(map);
                    }
                    None => {}
                }
                ids.push(id);
                slot
            }
        };
        let work = &mut works[slot];
        // A defragmentation changes neither content nor mtime: it touches the object only
        // if it rewrote something.
        let defragment = matches!(op, Op::Defragment { .. });
        let touched_before = work.touched;
        work.touched = true;
        let mut context = Context {
            inner,
            id: &ids[slot],
            fresh: &mut fresh,
            freed: &mut freed,
            deferred: &mut deferred,
            deferrable,
            behind: &mut behind,
            written: &mut written,
        };
        let wrote = apply_op(&mut context, work, op).await?;
        if defragment {
            work.touched = touched_before || wrote;
        } else if let Some(onode) = work.onode.as_mut() {
            onode.mtime_ns = transaction.mtime_ns;
        }
    }
    if works.iter().all(|work| !work.touched) {
        // Only defragmentations that found nothing to do.
        return Ok(None);
    }
    let mut deltas = Deltas::default();
    let mut updates = Vec::with_capacity(works.len());
    for (work, id) in works.into_iter().zip(ids).filter(|(w, _)| w.touched) {
        let key = work.key;
        let encoded = work.onode.as_ref().map(|onode| {
            let bytes = onode.encode();
            debug_assert_eq!(
                Onode::decode(&bytes, inner.layout.checksum_block_bytes)
                    .ok()
                    .as_ref(),
                Some(onode)
            );
            bytes
        });
        let new_stored = work.onode.as_ref().map_or(0, Onode::stored_bytes);
        deltas.stored_bytes += new_stored as i64 - work.old_stored_bytes as i64;
        let new_record = encoded.as_ref().map_or(0, |b| (key.len() + b.len()) as u64);
        deltas.onode_bytes += new_record as i64 - work.old_record_bytes as i64;
        let exists = work.onode.is_some();
        let new_allocated = work.onode.as_ref().map_or(0, Onode::allocated_bytes);
        let usage = deltas.collections.entry(id.collection.clone()).or_default();
        usage.objects += i64::from(exists) - i64::from(work.existed);
        usage.stored_bytes += new_stored as i64 - work.old_stored_bytes as i64;
        usage.allocated_bytes += new_allocated as i64 - work.old_allocated_bytes as i64;
        usage.metadata_bytes += new_record as i64 - work.old_record_bytes as i64;
        // The omap prefix only where the commit reads it (a clear or omap changes).
        let omap_prefix = if work.omap_clear || !work.omap.is_empty() {
            meta::omap_prefix(&id.collection, &id.name)
        } else {
            Vec::new()
        };
        updates.push(ObjectUpdate {
            collection: id.collection,
            omap_prefix,
            key,
            onode: encoded,
            omap_clear: work.omap_clear,
            omap: work.omap,
            shard: work.shard,
        });
    }
    let digests = digests(&written, &freed, inner.layout.checksum_block_bytes);
    Ok(Some(Pending {
        updates,
        freed,
        fresh,
        deferred: deferred.map(|d| d.records).unwrap_or_default(),
        writes: behind.writes,
        digests,
        deltas,
        guards,
        reply: None,
        timing: Timing::starting(applied),
    }))
}

/// The digests of what a transaction wrote and still references: the blocks of `written`
/// (device offset, per-block hashes) outside `freed`, each run of consecutive blocks as one
/// digest.
fn digests(
    written: &[(u64, Vec<u64>)],
    freed: &[DeviceExtent],
    block_bytes: u64,
) -> Vec<DataDigest> {
    let freed: std::collections::BTreeMap<u64, u64> = freed
        .iter()
        .map(|extent| {
            (
                extent.offset_bytes,
                extent.offset_bytes + extent.length_bytes,
            )
        })
        .collect();
    let is_freed = |offset: u64| {
        freed
            .range(..=offset)
            .next_back()
            .is_some_and(|(_, &end)| offset < end)
    };
    let mut digests = Vec::with_capacity(written.len());
    for (start, hashes) in written {
        let mut run_start: Option<usize> = None;
        for index in 0..=hashes.len() {
            let kept = index < hashes.len() && !is_freed(start + index as u64 * block_bytes);
            match (kept, run_start) {
                (true, None) => run_start = Some(index),
                (false, Some(first)) => {
                    digests.push(DataDigest {
                        offset_bytes: start + first as u64 * block_bytes,
                        length_bytes: (index - first) as u64 * block_bytes,
                        hash: wal::combine(hashes[first..index].iter().copied()),
                    });
                    run_start = None;
                }
                _ => {}
            }
        }
    }
    digests
}

struct Context<'a> {
    inner: &'a Arc<Inner>,
    id: &'a ObjectId,
    fresh: &'a mut Fresh,
    freed: &'a mut Vec<DeviceExtent>,
    /// The transaction's deferred overwrites so far, while it is small enough to defer.
    deferred: &'a mut Option<Deferred>,
    /// Whether the current operation may be deferred (see `prepare`).
    deferrable: bool,
    /// Device writes left to the committer's writer.
    behind: &'a mut Behind,
    /// (device offset, per-block hashes) of every extent written (see `digests`).
    written: &'a mut Vec<(u64, Vec<u64>)>,
}

/// The device writes of a small transaction, made by the committer's writer before its batch's flush.
struct Behind {
    budget_bytes: u64,
    /// (device offset, data), not yet on the device (slices of the transaction's buffers).
    writes: Vec<(u64, Bytes)>,
}

/// Reads `[start, end)` of an object being changed: the writes this transaction left to the
/// writer are made first, so a unit it wrote earlier reads back as written.
async fn read_for_write(
    context: &mut Context<'_>,
    onode: &Onode,
    start: u64,
    end: u64,
) -> Result<Vec<u8>> {
    for (offset_bytes, data) in context.behind.writes.drain(..) {
        context.inner.device.write_at(offset_bytes, &data).await?;
    }
    read_aligned(
        context.inner,
        &context.id.collection,
        &context.id.name,
        onode,
        start,
        end,
        // Not the data cache: the onode may reference this transaction's fresh extents,
        // whose blocks must not be cached before they are committed.
        false,
    )
    .await
}

/// A small transaction's overwrites in place: (device offset, data), written after its
/// batch's flush, with a copy in its log record (see `StoreConfig::deferred_write_bytes_max`).
struct Deferred {
    budget_bytes: u64,
    records: Vec<(u64, Vec<u8>)>,
}

/// Applies one operation to an object; returns whether it wrote data to the device.
async fn apply_op(context: &mut Context<'_>, work: &mut Work, op: Op) -> Result<bool> {
    let block = context.inner.layout.checksum_block_bytes;
    match op {
        Op::Create { exclusive } => {
            if work.onode.is_some() && exclusive {
                return Err(StoreError::Exists {
                    collection: context.id.collection.clone(),
                    name: context.id.name.clone(),
                });
            }
            work.onode.get_or_insert_with(Onode::default);
            Ok(false)
        }
        Op::Remove => {
            let Some(mut onode) = work.onode.take() else {
                return Err(StoreError::not_found(
                    &context.id.collection,
                    &context.id.name,
                ));
            };
            context.freed.extend(onode.unmap(0, u64::MAX / 2, block));
            work.omap_clear = true;
            work.omap.clear();
            Ok(false)
        }
        Op::WriteFull { data } => {
            let onode = work.onode.get_or_insert_with(Onode::default);
            context.freed.extend(onode.unmap(0, u64::MAX / 2, block));
            onode.size_bytes = 0;
            let length = data.len() as u64;
            write_range(context, onode, 0, data).await?;
            onode.size_bytes = length;
            Ok(length > 0)
        }
        Op::Write { offset_bytes, data } => {
            let onode = work.onode.get_or_insert_with(Onode::default);
            let written = !data.is_empty();
            write_range(context, onode, offset_bytes, data).await?;
            Ok(written)
        }
        Op::Truncate { size_bytes } => {
            let onode = work.onode.get_or_insert_with(Onode::default);
            truncate(context, onode, size_bytes).await
        }
        Op::Zero {
            offset_bytes,
            length_bytes,
        } => {
            let onode = work.onode.get_or_insert_with(Onode::default);
            zero(context, onode, offset_bytes, length_bytes).await
        }
        Op::Defragment {
            offset_bytes,
            length_bytes,
        } => match work.onode.as_mut() {
            Some(onode) => defragment(context, onode, offset_bytes, length_bytes).await,
            None => Ok(false),
        },
        Op::SetXattr { key, value } => {
            work.onode
                .get_or_insert_with(Onode::default)
                .xattrs
                .insert(key, value);
            Ok(false)
        }
        Op::RemoveXattr { key } => {
            work.onode
                .get_or_insert_with(Onode::default)
                .xattrs
                .remove(&key);
            Ok(false)
        }
        Op::OmapSet { entries } => {
            work.onode.get_or_insert_with(Onode::default);
            work.omap
                .extend(entries.into_iter().map(|(k, v)| OmapChange::Set(k, v)));
            Ok(false)
        }
        Op::OmapRemove { keys } => {
            work.onode.get_or_insert_with(Onode::default);
            work.omap.extend(keys.into_iter().map(OmapChange::Remove));
            Ok(false)
        }
        Op::OmapClear => {
            work.onode.get_or_insert_with(Onode::default);
            work.omap_clear = true;
            work.omap.clear();
            Ok(false)
        }
    }
}

/// Writes `data` at `offset` copy-on-write: the allocation units it touches are rebuilt in a
/// buffer (old bytes of partially covered units are read and verified first) and written to
/// fresh extents; the old extents are unmapped and queued to be freed after the commit.
/// A write that starts on a unit and needs no old bytes after its end (it ends on a unit, or
/// at or beyond the object's last unit) is written from `data` itself: its whole units are
/// slices of the caller's buffer (no copy), and only a partial last unit is copied into a
/// unit padded with zeros (every aligned write, every `write_full`).
async fn write_range(
    context: &mut Context<'_>,
    onode: &mut Onode,
    offset: u64,
    data: Bytes,
) -> Result<()> {
    if data.is_empty() {
        return Ok(());
    }
    let unit = context.inner.layout.min_alloc_size_bytes;
    let end = offset + data.len() as u64;
    let start_unit = offset / unit * unit;
    let end_unit = end.div_ceil(unit) * unit;
    let last_unit = end_unit - unit;
    let tail_needed = end < end_unit && (last_unit > start_unit || offset == start_unit);
    let tail_old = tail_needed && last_unit < onode.size_bytes;
    if offset == start_unit && !tail_old {
        let whole = (data.len() as u64 / unit * unit) as usize;
        let padded = |from: usize| {
            let mut tail = Vec::with_capacity((end_unit - start_unit) as usize - from);
            tail.extend_from_slice(&data[from..]);
            tail.resize(tail.capacity(), 0);
            Bytes::from(tail)
        };
        if whole == data.len() {
            place(context, onode, start_unit, data).await?;
        } else if whole < SPLIT_WRITE_BYTES_MIN {
            // Small: one padded copy, one extent.
            place(context, onode, start_unit, padded(0)).await?;
        } else {
            // Large: the whole units as they are, the partial last one padded.
            let tail = padded(whole);
            place(context, onode, start_unit, data.slice(..whole)).await?;
            place(context, onode, start_unit + whole as u64, tail).await?;
        }
        onode.size_bytes = onode.size_bytes.max(end);
        return Ok(());
    }
    let mut buffer = vec![0u8; (end_unit - start_unit) as usize];
    if offset > start_unit && start_unit < onode.size_bytes {
        let old = read_for_write(context, onode, start_unit, start_unit + unit).await?;
        buffer[..unit as usize].copy_from_slice(&old);
    }
    if tail_old {
        let old = read_for_write(context, onode, last_unit, end_unit).await?;
        let at = (last_unit - start_unit) as usize;
        buffer[at..].copy_from_slice(&old);
    }
    let at = (offset - start_unit) as usize;
    buffer[at..at + data.len()].copy_from_slice(&data);
    place(context, onode, start_unit, Bytes::from(buffer)).await?;
    onode.size_bytes = onode.size_bytes.max(end);
    Ok(())
}

/// Writes `buffer` (whole units) to fresh extents and maps it at `logical` in the onode, in
/// place of whatever was mapped there. A small transaction's pieces are left to the
/// committer (slices of `buffer`, not copies); a large one's go to the device here, every
/// piece at once, each as one write of its whole length (see [`write_piece`]).
async fn place(
    context: &mut Context<'_>,
    onode: &mut Onode,
    logical: u64,
    buffer: Bytes,
) -> Result<()> {
    let length = buffer.len() as u64;
    let block = context.inner.layout.checksum_block_bytes;
    let buffer = match defer(context, onode, logical, buffer) {
        None => return Ok(()),
        Some(buffer) => buffer,
    };
    let pieces = {
        let mut allocator = context.inner.allocator();
        let free_bytes = allocator.free_bytes();
        let pieces = allocator.allocate(length).ok_or(StoreError::NoSpace {
            requested_bytes: length,
            free_bytes,
        })?;
        for piece in &pieces {
            // The other side of the allocator's promise: what it hands out is not free.
            assert!(
                !allocator.overlaps_free(*piece),
                "allocator handed out free space {piece:?}"
            );
        }
        context.fresh.extents.extend_from_slice(&pieces);
        pieces
    };
    let mut at = 0u64;
    let mut placed = Vec::with_capacity(pieces.len());
    let mut direct = Vec::new();
    for piece in pieces {
        let slice = buffer.slice(at as usize..(at + piece.length_bytes) as usize);
        // One pass over the data for both: the crc32c each read checks, the hash the record's
        // digest is built from.
        let (crcs, hashes): (Vec<u32>, Vec<u64>) = slice
            .chunks(block as usize)
            .map(|chunk| (crc32c::crc32c(chunk), wal::block_hash(chunk)))
            .unzip();
        context.written.push((piece.offset_bytes, hashes));
        let behind = &mut *context.behind;
        if behind.budget_bytes >= piece.length_bytes {
            behind.budget_bytes -= piece.length_bytes;
            behind.writes.push((piece.offset_bytes, slice));
        } else {
            direct.push(write_piece(context.inner, piece.offset_bytes, slice));
        }
        placed.push((
            logical + at,
            Extent {
                device_offset_bytes: piece.offset_bytes,
                length_bytes: piece.length_bytes,
                crcs,
            },
        ));
        at += piece.length_bytes;
    }
    for result in futures_util::future::join_all(direct).await {
        result?;
    }
    context
        .freed
        .extend(onode.unmap(logical, logical + length, block));
    onode.extents.extend(placed);
    Ok(())
}

/// One piece of a large write, to the device as one write of its whole length. A piece in
/// memory aligned for O_DIRECT (see [`aligned_copy`]) is written from that memory on a
/// blocking thread, a reference to the shared buffer moved there, so the device makes no
/// bounce copy; any other piece goes through the device's one copy into aligned memory.
async fn write_piece(inner: &Inner, offset_bytes: u64, data: Bytes) -> Result<()> {
    let alignment = inner.device.block_size_bytes() as usize;
    if !is_aligned(&data, alignment) {
        inner.device.write_at(offset_bytes, &data).await?;
        return Ok(());
    }
    let device = Arc::clone(&inner.device);
    let runtime = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || device.write_blocking(offset_bytes, &data, &runtime))
        .await
        .map_err(|error| {
            device::DeviceError::io("write task", std::io::Error::other(error.to_string()))
        })??;
    Ok(())
}

/// Whether `data` starts at a multiple of `alignment` in memory.
fn is_aligned(data: &[u8], alignment: usize) -> bool {
    alignment > 0 && (data.as_ptr() as usize).is_multiple_of(alignment)
}

/// `data` copied once into memory that starts at a multiple of `alignment` (a power of two),
/// as a [`Bytes`] (no copy when it is already there): what a caller holding a large payload
/// for several stores does once, so that none of their devices copies it again for O_DIRECT.
pub fn aligned_copy(data: &Bytes, alignment: usize) -> Bytes {
    if is_aligned(data, alignment) || data.is_empty() {
        return data.clone();
    }
    let mut storage: Vec<u8> = Vec::with_capacity(data.len() + alignment);
    let start = storage.as_ptr().align_offset(alignment);
    // Within the capacity, so the heap block (and with it the alignment) never moves.
    storage.resize(start, 0);
    storage.extend_from_slice(data);
    Bytes::from(storage).slice(start..)
}

/// Defers the write of `buffer` (whole units at `logical`) if it may be (see
/// `StoreConfig::deferred_write_bytes_max`): the range lies inside one extent of the object,
/// whose checksums are updated here and whose blocks the committer overwrites after the
/// batch's flush. Gives the buffer back when it must be written copy-on-write.
fn defer(
    context: &mut Context<'_>,
    onode: &mut Onode,
    logical: u64,
    buffer: Bytes,
) -> Option<Bytes> {
    let length = buffer.len() as u64;
    if !context.deferrable {
        return Some(buffer);
    }
    let Some(deferred) = context.deferred.as_mut() else {
        return Some(buffer);
    };
    if deferred.budget_bytes < length {
        // Beyond what is left to defer: this write copies; the deferred ones already taken
        // (other objects') stay, their onodes hold the new checksums.
        return Some(buffer);
    }
    let block = context.inner.layout.checksum_block_bytes;
    let Some((&start, extent)) = onode.extents.range_mut(..=logical).next_back() else {
        return Some(buffer);
    };
    if start + extent.length_bytes < logical + length {
        return Some(buffer);
    }
    let first = ((logical - start) / block) as usize;
    for (index, chunk) in buffer.chunks(block as usize).enumerate() {
        extent.crcs[first + index] = crc32c::crc32c(chunk);
    }
    deferred.budget_bytes -= length;
    deferred.records.push((
        extent.device_offset_bytes + (logical - start),
        buffer.to_vec(),
    ));
    None
}

/// Sets the size. Shrinking unmaps whole units beyond it and rewrites a partial last unit with
/// zeros past the end (so bytes beyond the size are always zero on the device).
async fn truncate(context: &mut Context<'_>, onode: &mut Onode, size: u64) -> Result<bool> {
    let unit = context.inner.layout.min_alloc_size_bytes;
    let block = context.inner.layout.checksum_block_bytes;
    let mut wrote = false;
    if size < onode.size_bytes {
        let partial_unit = size / unit * unit;
        if !size.is_multiple_of(unit)
            && !onode
                .overlapping(partial_unit, partial_unit + unit)
                .is_empty()
        {
            let mut old = read_for_write(context, onode, partial_unit, partial_unit + unit).await?;
            old[(size - partial_unit) as usize..].fill(0);
            place(context, onode, partial_unit, Bytes::from(old)).await?;
            wrote = true;
        }
        context
            .freed
            .extend(onode.unmap(size.div_ceil(unit) * unit, u64::MAX / 2, block));
    }
    onode.size_bytes = size;
    Ok(wrote)
}

/// Zeroes `[offset, offset + length)`: whole units become holes, partial ones are rewritten.
async fn zero(
    context: &mut Context<'_>,
    onode: &mut Onode,
    offset: u64,
    length: u64,
) -> Result<bool> {
    if length == 0 {
        return Ok(false);
    }
    let unit = context.inner.layout.min_alloc_size_bytes;
    let block = context.inner.layout.checksum_block_bytes;
    let end = offset + length;
    let size = onode.size_bytes;
    let inner_start = offset.div_ceil(unit) * unit;
    let inner_end = end / unit * unit;
    let mut wrote = false;
    let rewrite = |from: u64, to: u64| -> Option<(u64, u64)> {
        // Only mapped bytes below the size can be non-zero.
        let to = to.min(size);
        (from < to
            && !onode
                .overlapping(from / unit * unit, to.div_ceil(unit) * unit)
                .is_empty())
        .then_some((from, to))
    };
    let mut partial = Vec::new();
    if inner_start >= inner_end {
        partial.extend(rewrite(offset, end));
    } else {
        partial.extend(rewrite(offset, inner_start));
        partial.extend(rewrite(inner_end, end));
    }
    if inner_start < inner_end {
        context
            .freed
            .extend(onode.unmap(inner_start, inner_end, block));
    }
    for (from, to) in partial {
        write_range(
            context,
            onode,
            from,
            Bytes::from(vec![0u8; (to - from) as usize]),
        )
        .await?;
        wrote = true;
    }
    onode.size_bytes = onode.size_bytes.max(end);
    Ok(wrote)
}

/// Rewrites each hole-free part of `[offset, offset + length)` (widened to allocation units,
/// clipped to the object's last unit) that the device holds in more than one run to fresh
/// extents, with the data read back under the object's lock: the content does not change.
/// Returns whether it rewrote anything.
async fn defragment(
    context: &mut Context<'_>,
    onode: &mut Onode,
    offset: u64,
    length: u64,
) -> Result<bool> {
    let unit = context.inner.layout.min_alloc_size_bytes;
    let start = offset / unit * unit;
    let end = (offset + length)
        .min(onode.size_bytes)
        .div_ceil(unit)
        .saturating_mul(unit);
    if start >= end {
        return Ok(false);
    }
    // (from, to, device runs) of each part mapped without a hole. Extents begin and end on
    // allocation units (every write places whole units), so the parts do too.
    let mut parts: Vec<(u64, u64, usize)> = Vec::new();
    for run in device_runs(onode, start, end) {
        match parts.last_mut() {
            Some(part) if part.1 == run.from => {
                part.1 = run.to;
                part.2 += 1;
            }
            _ => parts.push((run.from, run.to, 1)),
        }
    }
    let mut wrote = false;
    for (from, to, runs) in parts {
        if runs < 2 {
            continue;
        }
        let data = read_for_write(context, onode, from, to).await?;
        place(context, onode, from, Bytes::from(data)).await?;
        wrote = true;
    }
    Ok(wrote)
}

/// The number of device reads a read of `[start, end)` (multiples of the checksum block)
/// makes: its runs of extents contiguous in the object and on the device.
pub(crate) fn device_run_count(onode: &Onode, start: u64, end: u64) -> usize {
    device_runs(onode, start, end).len()
}

/// Reads `[start, end)` of an object (multiples of the checksum block) into a buffer: holes
/// read as zeros, every mapped checksum block is verified before it is returned. With
/// `use_cache` (a committed onode, its object's lock held), blocks come from the data cache
/// where it holds them all, and blocks read from the device go into it.
///
/// Extents that follow each other both in the object and on the device are read as one
/// device read, and the device reads of one call run concurrently: an object overwritten in
/// small pieces (copy-on-write scatters them) is read in about one device latency instead of
/// one per extent.
pub(crate) async fn read_aligned(
    inner: &Inner,
    collection: &str,
    name: &str,
    onode: &Onode,
    start: u64,
    end: u64,
    use_cache: bool,
) -> Result<Vec<u8>> {
    let block = inner.layout.checksum_block_bytes;
    debug_assert!(start.is_multiple_of(block) && end.is_multiple_of(block));
    let mut buffer = vec![0u8; (end - start) as usize];
    let runs = device_runs(onode, start, end);
    {
        // Split the buffer into each run's slice (runs are in logical order and disjoint).
        let mut reads = Vec::with_capacity(runs.len());
        let mut rest: &mut [u8] = &mut buffer;
        let mut consumed = start;
        for run in runs {
            let (_, tail) = std::mem::take(&mut rest).split_at_mut((run.from - consumed) as usize);
            let (slice, tail) = tail.split_at_mut((run.to - run.from) as usize);
            rest = tail;
            consumed = run.to;
            reads.push(read_run(inner, collection, name, run, slice, use_cache));
        }
        if reads.len() == 1 {
            reads.pop().expect("one read").await?;
        } else {
            futures_util::future::join_all(reads)
                .await
                .into_iter()
                .collect::<Result<Vec<()>>>()?;
        }
    }
    Ok(buffer)
}

/// Extents read with one device read: `[from, to)` of the object, from `device_from` on.
struct Run<'a> {
    from: u64,
    to: u64,
    device_from: u64,
    /// Each extent's part: (logical start of the part, its extent's logical start, extent).
    parts: Vec<(u64, u64, &'a Extent)>,
}

/// The extents overlapping `[start, end)`, clipped to it, merged into runs where the next
/// extent starts in the object and on the device where the previous one ends.
fn device_runs(onode: &Onode, start: u64, end: u64) -> Vec<Run<'_>> {
    let mut runs: Vec<Run<'_>> = Vec::new();
    for (logical, extent) in onode.overlapping(start, end) {
        let from = logical.max(start);
        let to = (logical + extent.length_bytes).min(end);
        let device_from = extent.device_offset_bytes + (from - logical);
        match runs.last_mut() {
            Some(run) if run.to == from && run.device_from + (run.to - run.from) == device_from => {
                run.to = to;
                run.parts.push((from, logical, extent));
            }
            _ => runs.push(Run {
                from,
                to,
                device_from,
                parts: vec![(from, logical, extent)],
            }),
        }
    }
    runs
}

/// Fills `slice` with `run`: from the data cache if it holds every block, else from the
/// device, verifying every extent's blocks (and then caching them with `use_cache`).
async fn read_run(
    inner: &Inner,
    collection: &str,
    name: &str,
    run: Run<'_>,
    slice: &mut [u8],
    use_cache: bool,
) -> Result<()> {
    if use_cache && inner.data_cache.read(run.device_from, slice) {
        return Ok(());
    }
    inner.device.read_at(run.device_from, slice).await?;
    let block = inner.layout.checksum_block_bytes;
    for (index, &(from, logical, extent)) in run.parts.iter().enumerate() {
        let to = run
            .parts
            .get(index + 1)
            .map_or(run.to, |&(next_from, _, _)| next_from);
        let part = &slice[(from - run.from) as usize..(to - run.from) as usize];
        let device_from = run.device_from + (from - run.from);
        let first_crc = ((from - logical) / block) as usize;
        let crcs = extent.crcs.get(first_crc..).unwrap_or(&[]);
        if let Some((index, expected, found)) = first_bad_block(part, crcs, block) {
            let offset_in_part = index as u64 * block;
            return Err(StoreError::Checksum {
                collection: collection.to_owned(),
                name: name.to_owned(),
                offset_bytes: from + offset_in_part,
                device_offset_bytes: device_from + offset_in_part,
                expected,
                found,
            });
        }
    }
    if use_cache {
        inner.data_cache.insert(run.device_from, slice);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Extents that follow each other in the object and on the device make one run; a jump
    /// on the device or a hole in the object starts another; the ends are clipped.
    #[test]
    fn device_runs_merge_only_contiguous_extents() {
        let extent = |device_offset_bytes: u64, length_bytes: u64| Extent {
            device_offset_bytes,
            length_bytes,
            crcs: vec![0; (length_bytes / 4096) as usize],
        };
        let mut onode = Onode::default();
        onode.extents.insert(0, extent(1 << 20, 8192));
        onode.extents.insert(8192, extent((1 << 20) + 8192, 4096)); // contiguous
        onode.extents.insert(12288, extent(5 << 20, 4096)); // elsewhere on the device
        onode.extents.insert(20480, extent((5 << 20) + 8192, 4096)); // after a hole
        let runs = device_runs(&onode, 4096, 24576);
        let found: Vec<(u64, u64, u64, usize)> = runs
            .iter()
            .map(|run| (run.from, run.to, run.device_from, run.parts.len()))
            .collect();
        assert_eq!(
            found,
            vec![
                (4096, 12288, (1 << 20) + 4096, 2),
                (12288, 16384, 5 << 20, 1),
                (20480, 24576, (5 << 20) + 8192, 1),
            ]
        );
    }

    /// Blocks a transaction wrote and freed again itself get no digest (the extent may be
    /// reused before a mount checks the record); the others get one per run of blocks.
    #[test]
    fn digests_skip_freed_blocks_and_split_runs() {
        let block = 4096u64;
        let hashes: Vec<u64> = (1..=4).collect();
        let written = vec![(0u64, hashes.clone()), (1 << 20, vec![9])];
        let freed = vec![
            DeviceExtent {
                offset_bytes: block,
                length_bytes: block,
            },
            // Not written by the transaction (an old extent): no effect.
            DeviceExtent {
                offset_bytes: 8 << 20,
                length_bytes: block,
            },
        ];
        let found = digests(&written, &freed, block);
        let expected = vec![
            DataDigest {
                offset_bytes: 0,
                length_bytes: block,
                hash: wal::combine(hashes[..1].iter().copied()),
            },
            DataDigest {
                offset_bytes: 2 * block,
                length_bytes: 2 * block,
                hash: wal::combine(hashes[2..].iter().copied()),
            },
            DataDigest {
                offset_bytes: 1 << 20,
                length_bytes: block,
                hash: wal::combine([9]),
            },
        ];
        assert_eq!(found, expected);
        let data = vec![5u8; 3 * block as usize];
        assert_eq!(
            wal::digest(&data, block as usize),
            wal::combine(data.chunks(block as usize).map(wal::block_hash)),
            "a mount's digest of a range is the combination of its blocks' hashes"
        );
        assert_eq!(digests(&written, &[], block).len(), 2, "whole extents");
    }
}
