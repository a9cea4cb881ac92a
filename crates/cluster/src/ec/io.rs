//! [`EcPoolHandle`]: the [`rados::IoCtx`] of an erasure-coded pool.
//!
//! Every call locks the object (writes and reads alike: a read may roll a torn write back),
//! resolves its shards ([`Target::resolve`]) and then works on stripes. A write computes the
//! stripes its steps touch, reads them (decoding if a data shard is missing), applies the
//! steps there, re-encodes them and writes each shard's chunks in one store transaction
//! stamped with the new version and carrying the undo record of what it replaced.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};

use async_trait::async_trait;
use osdmap::PgId;
use rados::{
    validate_object_name, validate_xattr_name, IoCtx, ListCursor, ListPage, ObjectStat, OmapPage,
    Op, PoolInfo, RadosError, Result, WriteOp,
};
use store::{ObjectId, Transaction};

use crate::ec::object::{shard_collection, ObjectState, Target};
use crate::ec::shard::{Undo, SIZE_XATTR, UNDO_XATTR};
use crate::ec::ErasureProfile;
use crate::osd::VERSION_XATTR;
use crate::util::join_all;
use crate::Inner;

/// A handle on one erasure-coded pool. Holds the cluster weakly, as [`crate::PoolHandle`].
#[derive(Clone)]
pub struct EcPoolHandle {
    inner: Weak<Inner>,
    info: PoolInfo,
    profile: ErasureProfile,
}

/// What the data steps of one op do to the object, worked out before reading anything.
#[derive(Debug, Default)]
struct Extent {
    /// The data is replaced from scratch (a `WriteFull` or `Remove`); steps before the last
    /// such one do not matter for the data.
    fresh: bool,
    /// Index of the first step that matters for the data.
    first_step: usize,
    /// Logical bytes the steps write or zero (stripe boundaries not applied).
    touched: Option<(u64, u64)>,
    /// Smallest size the object passes through (truncations), when below its old size.
    shrunk_to: Option<u64>,
    /// Size after the op.
    size_bytes: u64,
    /// Exists after the op.
    exists: bool,
}

fn widen(range: &mut Option<(u64, u64)>, start: u64, end: u64) {
    *range = Some(match *range {
        Some((a, b)) => (a.min(start), b.max(end)),
        None => (start, end),
    });
}

/// Follows the sizes through the steps of `op` (see [`Extent`]).
fn extent_of(ops: &[Op], existed: bool, old_size: u64) -> Result<Extent> {
    let mut extent = Extent {
        size_bytes: old_size,
        exists: existed,
        ..Extent::default()
    };
    let overflow = || RadosError::InvalidArgument("write beyond 2^64".into());
    for (index, step) in ops.iter().enumerate() {
        let size = extent.size_bytes;
        match step {
            Op::WriteFull(data) => {
                extent = Extent {
                    fresh: true,
                    first_step: index,
                    touched: None,
                    shrunk_to: None,
                    size_bytes: data.len() as u64,
                    exists: true,
                };
                if !data.is_empty() {
                    widen(&mut extent.touched, 0, data.len() as u64);
                }
            }
            Op::Remove => {
                extent = Extent {
                    fresh: true,
                    first_step: index + 1,
                    size_bytes: 0,
                    exists: false,
                    ..Extent::default()
                };
            }
            Op::Write { offset_bytes, data } => {
                let end = offset_bytes
                    .checked_add(data.len() as u64)
                    .ok_or_else(overflow)?;
                if !data.is_empty() {
                    widen(&mut extent.touched, *offset_bytes, end);
                }
                extent.size_bytes = size.max(end);
                extent.exists = true;
            }
            Op::Append(data) => {
                let end = size.checked_add(data.len() as u64).ok_or_else(overflow)?;
                if !data.is_empty() {
                    widen(&mut extent.touched, size, end);
                }
                extent.size_bytes = end;
                extent.exists = true;
            }
            Op::Truncate { size_bytes } if extent.exists => {
                if *size_bytes < size {
                    widen(&mut extent.touched, *size_bytes, size);
                    extent.shrunk_to =
                        Some(extent.shrunk_to.map_or(*size_bytes, |s| s.min(*size_bytes)));
                }
                extent.size_bytes = *size_bytes;
            }
            Op::Zero {
                offset_bytes,
                length_bytes,
            } if extent.exists && *length_bytes > 0 && *offset_bytes < size => {
                let end = offset_bytes.saturating_add(*length_bytes);
                widen(&mut extent.touched, *offset_bytes, end.min(size));
                if end >= size {
                    extent.shrunk_to = Some(
                        extent
                            .shrunk_to
                            .map_or(*offset_bytes, |s| s.min(*offset_bytes)),
                    );
                    extent.size_bytes = *offset_bytes;
                }
            }
            Op::Create { .. } | Op::SetXattr { .. } => extent.exists = true,
            _ => {}
        }
    }
    Ok(extent)
}

/// Applies the data steps of `ops` to `window`, the logical bytes from `base` (zeros beyond
/// the object's size), following the size from `size`.
fn apply_steps(ops: &[Op], window: &mut [u8], base: u64, mut size: u64, mut exists: bool) {
    let zero_from = |window: &mut [u8], from: u64| {
        let start = from.saturating_sub(base).min(window.len() as u64) as usize;
        window[start..].fill(0);
    };
    for step in ops {
        match step {
            Op::Write { offset_bytes, data } => {
                if !data.is_empty() {
                    let start = (offset_bytes - base) as usize;
                    window[start..start + data.len()].copy_from_slice(data);
                }
                size = size.max(offset_bytes + data.len() as u64);
                exists = true;
            }
            Op::WriteFull(data) => {
                zero_from(window, 0);
                window[..data.len()].copy_from_slice(data);
                size = data.len() as u64;
                exists = true;
            }
            Op::Append(data) => {
                if !data.is_empty() {
                    let start = (size - base) as usize;
                    window[start..start + data.len()].copy_from_slice(data);
                }
                size += data.len() as u64;
                exists = true;
            }
            Op::Truncate { size_bytes } if exists => {
                if *size_bytes < size {
                    zero_from(window, *size_bytes);
                }
                size = *size_bytes;
            }
            Op::Zero {
                offset_bytes,
                length_bytes,
            } if exists && *length_bytes > 0 && *offset_bytes < size => {
                let end = offset_bytes.saturating_add(*length_bytes);
                if end >= size {
                    zero_from(window, *offset_bytes);
                    size = *offset_bytes;
                } else {
                    let start = (offset_bytes - base) as usize;
                    window[start..(end - base) as usize].fill(0);
                }
            }
            Op::Create { .. } | Op::SetXattr { .. } => exists = true,
            Op::Remove => {
                zero_from(window, 0);
                size = 0;
                exists = false;
            }
            _ => {}
        }
    }
}

impl EcPoolHandle {
    pub(crate) fn new(inner: &Arc<Inner>, info: PoolInfo, profile: ErasureProfile) -> Self {
        Self {
            inner: Arc::downgrade(inner),
            info,
            profile,
        }
    }

    /// The pool's profile.
    pub fn profile(&self) -> &ErasureProfile {
        &self.profile
    }

    fn inner(&self) -> Result<Arc<Inner>> {
        let inner = self.inner.upgrade().ok_or(RadosError::Shutdown)?;
        inner.check_open()?;
        Ok(inner)
    }

    fn pg_of(&self, inner: &Inner, object: &str) -> Result<PgId> {
        validate_object_name(object)?;
        inner
            .map()
            .object_to_pg(self.info.id, object)
            .map_err(|_| RadosError::NotFound(format!("pool {:?} was deleted", self.info.name)))
    }

    fn no_omap(&self) -> RadosError {
        RadosError::NotSupported(format!(
            "pool {:?} is erasure-coded ({}): omap is not supported there (EOPNOTSUPP, as on \
             Ceph); keep omap on a replicated pool",
            self.info.name, self.profile
        ))
    }

    fn missing(&self, object: &str) -> RadosError {
        RadosError::NotFound(format!("{}/{object}", self.info.name))
    }

    /// Runs `work` on the object's resolved state under its PG (shared) and object locks.
    async fn with_object<T>(
        &self,
        object: &str,
        work: impl AsyncFnOnce(&Target<'_>, Option<ObjectState>, Vec<usize>) -> Result<T>,
    ) -> Result<T> {
        let inner = self.inner()?;
        let _busy = crate::poll::Poller::busy(&inner.poller);
        let pg = self.pg_of(&inner, object)?;
        let _pg_guard = inner.pg_lock(pg).read().await;
        let _object_guard = inner.object_lock(self.info.id, object).lock().await;
        let map = inner.map();
        let target = Target::of(&inner, &map, pg, &self.profile);
        let (state, good) = target.resolve(object).await?;
        work(&target, state, good).await
    }

    async fn operate_resolved(
        &self,
        target: &Target<'_>,
        object: &str,
        state: Option<ObjectState>,
        good: Vec<usize>,
        op: WriteOp,
    ) -> Result<()> {
        let inner = target.inner;
        // Guards, and what the steps do to xattrs.
        let existed = state.is_some();
        let old = state.unwrap_or_default();
        let mut xattrs = old.xattrs.clone();
        let mut exists = existed;
        for step in op.ops() {
            match step {
                Op::AssertExists if !existed => return Err(self.missing(object)),
                Op::CompareXattr {
                    name,
                    comparison,
                    value,
                } => {
                    validate_xattr_name(name)?;
                    if !existed {
                        return Err(self.missing(object));
                    }
                    let stored = old.xattrs.get(name).map_or(&[][..], Vec::as_slice);
                    if !comparison.holds(stored, value) {
                        return Err(RadosError::CompareFailed(format!(
                            "xattr {name:?} of {}/{object}",
                            self.info.name
                        )));
                    }
                }
                Op::CompareOmap { .. } | Op::OmapSet(_) | Op::OmapRemoveKeys(_) | Op::OmapClear => {
                    return Err(self.no_omap())
                }
                _ => {}
            }
        }
        for step in op.ops() {
            match step {
                Op::Create { exclusive } => {
                    if *exclusive && exists {
                        return Err(RadosError::Exists(format!("{}/{object}", self.info.name)));
                    }
                    exists = true;
                }
                Op::Remove => {
                    if !exists {
                        return Err(self.missing(object));
                    }
                    exists = false;
                    xattrs.clear();
                }
                Op::SetXattr { name, value } => {
                    validate_xattr_name(name)?;
                    xattrs.insert(name.clone(), value.clone());
                    exists = true;
                }
                Op::RemoveXattr { name } => {
                    validate_xattr_name(name)?;
                    if !exists {
                        return Err(self.missing(object));
                    }
                    xattrs.remove(name);
                }
                Op::WriteFull(_) | Op::Write { .. } | Op::Append(_) => exists = true,
                _ => {}
            }
        }
        if op.is_empty() || (!existed && !exists) {
            return Ok(());
        }
        let extent = extent_of(op.ops(), existed, old.size_bytes)?;
        let available = good.len();
        if (available as u32) < self.profile.min_size() {
            return Err(RadosError::Degraded {
                pg: format!("{}.{:x}", target.pg.pool, target.pg.seed),
                available: available as u32,
                min_size: self.profile.min_size(),
            });
        }
        let version = inner.new_version()?;
        let mtime_ns = (inner.options.clock_ns)();
        let width = self.profile.stripe_width_bytes();
        let unit = self.profile.stripe_unit_bytes;
        let old_shard_bytes = if existed {
            target.shard_bytes(old.size_bytes)
        } else {
            0
        };
        let new_shard_bytes = target.shard_bytes(extent.size_bytes);
        let fresh = extent.fresh || !existed;

        // The rows to re-encode: the touched ones that survive the op.
        let rows_after = extent.size_bytes.div_ceil(width);
        let (first_row, end_row) = match extent.touched {
            Some((start, end)) => (start / width, end.div_ceil(width).min(rows_after)),
            None => (0, 0),
        };
        let (first_row, end_row) = if fresh {
            (0, end_row.max(first_row).min(rows_after))
        } else {
            (first_row, end_row)
        };
        let end_row = end_row.max(first_row);
        let old_rows = if existed {
            old.size_bytes.div_ceil(width)
        } else {
            0
        };

        // The shard bytes this write changes, which the undo record keeps: from the first
        // rewritten row (or where a truncation cut) to the old end when it shrank, else to
        // the last rewritten row.
        let shrink_row = extent.shrunk_to.map(|size| size / width);
        let undo_first = match shrink_row {
            Some(row) => row.min(first_row),
            None => first_row,
        };
        let undo_end = if fresh || shrink_row.is_some() {
            old_rows
        } else {
            end_row.min(old_rows)
        };
        let undo_first = if fresh { 0 } else { undo_first.min(undo_end) };

        // Old data: what the window starts from, and what the undo records keep.
        let read_first = undo_first.min(first_row);
        let read_end = old_rows.min(undo_end.max(end_row));
        let old_bytes = if existed && read_end > read_first {
            target
                .read_rows(object, &good, read_first, read_end)
                .await?
        } else {
            Vec::new()
        };
        let old_shards = if existed && undo_end > undo_first {
            let start = ((undo_first - read_first) * width) as usize;
            let end = ((undo_end - read_first) * width) as usize;
            Some(target.codec.encode(&old_bytes[start..end]))
        } else {
            None
        };

        // The window: rows [first_row, end_row) after the steps.
        let mut window = vec![0u8; ((end_row - first_row) * width) as usize];
        if !fresh {
            let from = first_row.max(read_first);
            let to = end_row.min(read_end);
            if to > from {
                let src = ((from - read_first) * width) as usize;
                let dst = ((from - first_row) * width) as usize;
                let length = ((to - from) * width) as usize;
                window[dst..dst + length].copy_from_slice(&old_bytes[src..src + length]);
            }
        }
        let steps = &op.ops()[extent.first_step.min(op.ops().len())..];
        let (base_size, base_exists) = if extent.fresh {
            (0, false)
        } else {
            (old.size_bytes, existed)
        };
        // The steps run on rows [first_row, touched end): bytes they write beyond the rows
        // that survive the op (a write, then a truncation) are dropped after.
        let touched_rows = extent.touched.map_or(0, |(_, end)| end.div_ceil(width));
        let base = first_row * width;
        let mut scratch = window;
        scratch.resize(
            (touched_rows.max(end_row) - first_row) as usize * width as usize,
            0,
        );
        apply_steps(steps, &mut scratch, base, base_size, base_exists);
        scratch.truncate(((end_row - first_row) * width) as usize);
        let shards = target.codec.encode(&scratch);

        let mut writes = Vec::with_capacity(good.len());
        for &position in &good {
            let id = ObjectId::new(shard_collection(target.pg, position), object);
            let mut transaction = Transaction::new(mtime_ns);
            let mut bytes = 0;
            if !extent.exists {
                transaction.remove(&id);
            } else {
                if fresh {
                    transaction.write_full(&id, shards[position].clone());
                    bytes += shards[position].len() as u64;
                } else {
                    if let Some(size) = extent.shrunk_to {
                        transaction.truncate(&id, target.shard_bytes(size).min(old_shard_bytes));
                    }
                    if !shards[position].is_empty() {
                        transaction.write(&id, first_row * unit, shards[position].clone());
                        bytes += shards[position].len() as u64;
                    }
                }
                if new_shard_bytes != end_row * unit || !fresh {
                    transaction.truncate(&id, new_shard_bytes);
                }
                for key in old.xattrs.keys().filter(|key| !xattrs.contains_key(*key)) {
                    transaction.remove_xattr(&id, key.clone());
                }
                for (key, value) in &xattrs {
                    transaction.set_xattr(&id, key.clone(), value.clone());
                }
                transaction.set_xattr(&id, VERSION_XATTR, version.to_le_bytes().to_vec());
                transaction.set_xattr(&id, SIZE_XATTR, extent.size_bytes.to_le_bytes().to_vec());
                if existed {
                    let undo = Undo {
                        prev_version: old.version,
                        prev_size_bytes: old.size_bytes,
                        prev_shard_bytes: old_shard_bytes,
                        offset_bytes: undo_first * unit,
                        bytes: old_shards
                            .as_ref()
                            .map(|shards| shards[position].clone())
                            .unwrap_or_default(),
                        xattrs: old.xattrs.clone(),
                    };
                    transaction.set_xattr(&id, UNDO_XATTR, undo.encode());
                } else {
                    transaction.remove_xattr(&id, UNDO_XATTR);
                }
            }
            writes.push((position, transaction, bytes));
        }
        let results = join_all(
            writes
                .into_iter()
                .map(|(position, transaction, bytes)| async move {
                    let osd = target
                        .osd(position)
                        .ok_or_else(|| RadosError::Io("OSD went down".into()))?;
                    let result = osd.apply(transaction, bytes).await;
                    inner.note_osd_result(osd.id, &result);
                    result.map_err(|error| crate::error::store_to_rados(osd.id, &error))
                })
                .collect(),
        )
        .await;
        let committed = results.iter().filter(|result| result.is_ok()).count();
        if committed == results.len() {
            let bytes = op
                .ops()
                .iter()
                .map(|step| match step {
                    Op::WriteFull(data) | Op::Append(data) | Op::Write { data, .. } => {
                        data.len() as u64
                    }
                    _ => 0,
                })
                .sum();
            inner
                .stats
                .record_access(self.info.id, object, false, bytes);
            return Ok(());
        }
        inner.mark_dirty(target.pg);
        let first_error = results.into_iter().find_map(Result::err);
        if committed as u32 >= self.profile.min_size() {
            // The failed shards are stale: the next access or recovery rebuilds them.
            return Ok(());
        }
        Err(first_error.unwrap_or_else(|| RadosError::Io("shard write failed".into())))
    }
}

#[async_trait]
impl IoCtx for EcPoolHandle {
    fn pool(&self) -> &PoolInfo {
        &self.info
    }

    async fn operate(&self, object: &str, op: WriteOp) -> Result<()> {
        self.with_object(object, async |target, state, good| {
            self.operate_resolved(target, object, state, good, op).await
        })
        .await
    }

    async fn read(&self, object: &str, offset_bytes: u64, length_bytes: u64) -> Result<Vec<u8>> {
        self.with_object(object, async |target, state, good| {
            let state = state.ok_or_else(|| self.missing(object))?;
            let end = offset_bytes
                .saturating_add(length_bytes)
                .min(state.size_bytes);
            if length_bytes == 0 || offset_bytes >= end {
                return Ok(Vec::new());
            }
            let width = self.profile.stripe_width_bytes();
            let first_row = offset_bytes / width;
            let end_row = end.div_ceil(width);
            let rows = target.read_rows(object, &good, first_row, end_row).await?;
            let start = (offset_bytes - first_row * width) as usize;
            let data = rows[start..start + (end - offset_bytes) as usize].to_vec();
            target
                .inner
                .stats
                .record_access(self.info.id, object, true, data.len() as u64);
            Ok(data)
        })
        .await
    }

    async fn stat(&self, object: &str) -> Result<ObjectStat> {
        self.with_object(object, async |_, state, _| {
            let state = state.ok_or_else(|| self.missing(object))?;
            Ok(ObjectStat {
                size_bytes: state.size_bytes,
                mtime_ns: state.mtime_ns,
                version: state.version,
            })
        })
        .await
    }

    async fn get_xattr(&self, object: &str, name: &str) -> Result<Vec<u8>> {
        validate_xattr_name(name)?;
        let xattrs = self.get_xattrs(object).await?;
        xattrs.get(name).cloned().ok_or_else(|| {
            RadosError::NotFound(format!("xattr {name:?} of {}/{object}", self.info.name))
        })
    }

    async fn get_xattrs(&self, object: &str) -> Result<BTreeMap<String, Vec<u8>>> {
        self.with_object(object, async |_, state, _| {
            Ok(state.ok_or_else(|| self.missing(object))?.xattrs)
        })
        .await
    }

    async fn omap_get_vals(
        &self,
        _object: &str,
        _start_after: Option<&[u8]>,
        _prefix: &[u8],
        _max: usize,
    ) -> Result<OmapPage> {
        Err(self.no_omap())
    }

    async fn omap_get_vals_by_keys(
        &self,
        _object: &str,
        _keys: &[Vec<u8>],
    ) -> Result<BTreeMap<Vec<u8>, Vec<u8>>> {
        Err(self.no_omap())
    }

    async fn list(&self, cursor: &ListCursor, max: usize) -> Result<ListPage> {
        let inner = self.inner()?;
        let map = inner.map();
        let pool = map
            .pool(self.info.id)
            .ok_or_else(|| RadosError::NotFound(format!("pool {:?}", self.info.name)))?;
        let (mut seed, mut after) = parse_cursor(cursor)?;
        let mut objects: Vec<String> = Vec::new();
        while seed < pool.pg_num {
            let pg = PgId::new(self.info.id, seed);
            let target = Target::of(&inner, &map, pg, &self.profile);
            let names = list_pg(&target, after.as_deref()).await?;
            for name in names {
                if objects.len() == max {
                    let last = objects.last().cloned().unwrap_or_default();
                    return Ok(ListPage {
                        objects,
                        next: Some(ListCursor(format!("{seed:08x}/{last}"))),
                    });
                }
                objects.push(name);
            }
            seed += 1;
            after = None;
        }
        Ok(ListPage {
            objects,
            next: None,
        })
    }
}

/// The objects of a PG after `after`, by name: those `k` available shards hold, or that the
/// unavailable positions could make `k` (a torn create's leftovers are not listed).
pub(crate) async fn list_pg(target: &Target<'_>, after: Option<&str>) -> Result<Vec<String>> {
    let lists = join_all(
        (0..target.positions.len())
            .map(|position| async move {
                let osd = target.osd(position)?;
                osd.list_all(&shard_collection(target.pg, position))
                    .await
                    .ok()
            })
            .collect(),
    )
    .await;
    let unavailable = lists.iter().filter(|list| list.is_none()).count();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for name in lists.into_iter().flatten().flatten() {
        if after.is_none_or(|after| name.as_str() > after) {
            *counts.entry(name).or_default() += 1;
        }
    }
    let k = target.codec.k();
    Ok(counts
        .into_iter()
        .filter(|(_, count)| count + unavailable >= k)
        .map(|(name, _)| name)
        .collect())
}

fn parse_cursor(cursor: &ListCursor) -> Result<(u32, Option<String>)> {
    if cursor.0.is_empty() {
        return Ok((0, None));
    }
    let bad = || RadosError::InvalidArgument(format!("list cursor {:?}", cursor.0));
    let (seed, after) = cursor.0.split_once('/').ok_or_else(bad)?;
    let seed = u32::from_str_radix(seed, 16).map_err(|_| bad())?;
    Ok((seed, (!after.is_empty()).then(|| after.to_string())))
}
