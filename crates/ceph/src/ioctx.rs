//! [`CephIoCtx`]: the `rados::IoCtx` of one Ceph pool, every operation through librados aio.

use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, c_uchar, CStr, CString};
use std::sync::Arc;

use async_trait::async_trait;
use rados::{
    IoCtx, ListCursor, ListPage, ObjectStat, OmapPage, PoolInfo, RadosError, Result, WriteOp,
};

use crate::cluster::ClusterHandle;
use crate::completion::{finish, start, Completed, OpHandle};
use crate::error::{from_errno, strerror};
use crate::ffi::{self, Api, IoctxT, OmapIterT, TimeT, XattrsIterT};
use crate::write_op::OnMissing;
use crate::{listing, omap_key, write_op};

/// Most omap entries one OSD request returns (`osd_max_omap_entries_per_request`'s default);
/// longer pages take several requests.
const OMAP_ENTRIES_PER_REQUEST_MAX: usize = 1024;

/// First guess of an object's size when reading "to the end": a larger object takes a second
/// read sized from the first one's stat.
const READ_GUESS_BYTES: usize = 4 << 20;

/// How often an operation whose xattr guards met a missing object is replayed when the object
/// keeps appearing and disappearing meanwhile.
const MISSING_REPLAYS_MAX: usize = 8;

/// A `rados_ioctx_t`, destroyed when the last user (handle or in-flight operation) lets go.
pub(crate) struct IoctxHandle {
    pub(crate) raw: IoctxT,
    _cluster: Arc<ClusterHandle>,
}

// SAFETY: librados' IoCtx may be used from several threads at once for aio operations and
// listing; it is destroyed once, by the last owner.
unsafe impl Send for IoctxHandle {}
// SAFETY: as above.
unsafe impl Sync for IoctxHandle {}

impl Drop for IoctxHandle {
    fn drop(&mut self) {
        let api = self._cluster.api;
        // SAFETY: no operation is in flight on it (each holds an Arc of this handle).
        unsafe { (api.rados_ioctx_destroy)(self.raw) };
    }
}

impl IoctxHandle {
    /// Opens pool `name`.
    pub(crate) fn open(cluster: Arc<ClusterHandle>, name: &str) -> Result<Self> {
        let api = cluster.api;
        let pool = CString::new(name)
            .map_err(|_| RadosError::InvalidArgument(format!("pool name {name:?} holds NUL")))?;
        let mut raw: IoctxT = std::ptr::null_mut();
        // SAFETY: the cluster handle is connected and alive; `raw` is a valid out slot.
        let result = unsafe { (api.rados_ioctx_create)(cluster.raw, pool.as_ptr(), &mut raw) };
        if result < 0 {
            return Err(from_errno(
                -result,
                name,
                &format!("open pool {name}: {}", strerror(-result)),
            ));
        }
        Ok(Self {
            raw,
            _cluster: cluster,
        })
    }
}

/// The objects of one Ceph pool.
pub struct CephIoCtx {
    api: &'static Api,
    handle: Arc<IoctxHandle>,
    pool: PoolInfo,
}

/// What a read operation fills in; boxed so its addresses stay put until completion.
#[derive(Default)]
struct ReadSlots {
    size_bytes: u64,
    mtime_s: TimeT,
    stat_result: c_int,
    buffer: Vec<u8>,
    bytes_read: usize,
    read_result: c_int,
    omap: OmapIterSlot,
    omap_more: c_uchar,
    omap_result: c_int,
    xattrs: XattrsIterSlot,
    xattrs_result: c_int,
}

/// An omap iterator librados may hand back, ended when dropped.
struct OmapIterSlot(OmapIterT);
/// An xattr iterator librados may hand back, ended when dropped.
struct XattrsIterSlot(XattrsIterT);

impl Default for OmapIterSlot {
    fn default() -> Self {
        Self(std::ptr::null_mut())
    }
}
impl Default for XattrsIterSlot {
    fn default() -> Self {
        Self(std::ptr::null_mut())
    }
}

// SAFETY: the iterators are plain heap objects owned by this slot alone.
unsafe impl Send for OmapIterSlot {}
// SAFETY: as above.
unsafe impl Send for XattrsIterSlot {}

impl Drop for OmapIterSlot {
    fn drop(&mut self) {
        if let (false, Ok(api)) = (self.0.is_null(), crate::ffi::api()) {
            // SAFETY: a non-null iterator came from a completed read op and is ended once.
            unsafe { (api.rados_omap_get_end)(self.0) };
        }
    }
}
impl Drop for XattrsIterSlot {
    fn drop(&mut self) {
        if let (false, Ok(api)) = (self.0.is_null(), crate::ffi::api()) {
            // SAFETY: as above, for an xattr iterator.
            unsafe { (api.rados_getxattrs_end)(self.0) };
        }
    }
}

impl CephIoCtx {
    pub(crate) fn new(api: &'static Api, handle: IoctxHandle, pool: PoolInfo) -> Self {
        Self {
            api,
            handle: Arc::new(handle),
            pool,
        }
    }

    /// Runs a read operation set up by `setup` on `object`.
    async fn read_op(
        &self,
        object: &str,
        what: &str,
        slots: Box<ReadSlots>,
        setup: impl FnOnce(&Api, crate::ffi::ReadOpT, &mut ReadSlots) -> Result<()>,
    ) -> Result<Completed<Box<ReadSlots>>> {
        let oid = object_id(object)?;
        let api = self.api;
        let pending = {
            let mut slots = slots;
            // SAFETY: creates a fresh read op, released by OpHandle's Drop.
            let raw = unsafe { (api.rados_create_read_op)() };
            if raw.is_null() {
                return Err(RadosError::Io("rados_create_read_op returned NULL".into()));
            }
            let handle = OpHandle::Read(raw);
            setup(api, raw, slots.as_mut())?;
            let ioctx = self.handle.raw;
            start(api, self.handle.clone(), handle, slots, |completion| {
                // SAFETY: the op, ioctx and completion are alive; librados copies the oid.
                unsafe { (api.rados_aio_read_op_operate)(raw, ioctx, completion, oid.as_ptr(), 0) }
            })
            .map_err(|result| self.error(-result, object, what))?
        };
        let completed = finish(pending)
            .await
            .map_err(|result| self.error(-result, object, what))?;
        if completed.return_value < 0 {
            return Err(self.error(-completed.return_value, object, what));
        }
        Ok(completed)
    }

    /// Builds and submits the write operation of `plan`; librados' return value.
    async fn submit_write(
        &self,
        object: &str,
        oid: &CStr,
        plan: &write_op::Plan<'_>,
    ) -> Result<i32> {
        let api = self.api;
        let pending = {
            let (handle, raw, slots) = write_op::build(api, plan)?;
            let ioctx = self.handle.raw;
            start(api, self.handle.clone(), handle, slots, |completion| {
                // SAFETY: the op, ioctx and completion are alive; librados copies the oid; a
                // NULL mtime means "now". FULL_TRY: a full pool answers ENOSPC, not a parked op.
                unsafe {
                    (api.rados_aio_write_op_operate)(
                        raw,
                        ioctx,
                        completion,
                        oid.as_ptr(),
                        std::ptr::null_mut(),
                        ffi::OPERATION_FULL_TRY,
                    )
                }
            })
            .map_err(|result| self.error(-result, object, "operate"))?
        };
        let completed = finish(pending)
            .await
            .map_err(|result| self.error(-result, object, "operate"))?;
        Ok(completed.return_value)
    }

    fn error(&self, errno: i32, object: &str, what: &str) -> RadosError {
        from_errno(
            errno,
            object,
            &format!("{what} {}/{object}: {}", self.pool.name, strerror(errno)),
        )
    }

    /// One `omap_get_vals2` request (keys as stored).
    async fn omap_page(
        &self,
        object: &str,
        start_after: &[u8],
        prefix: &[u8],
        max: usize,
    ) -> Result<(Vec<(Vec<u8>, Vec<u8>)>, bool)> {
        // Stored keys never hold NUL (omap_key), so these C strings are the whole keys.
        let start_after = CString::new(start_after)
            .map_err(|_| RadosError::InvalidArgument("omap key holds NUL after escaping".into()))?;
        let prefix = CString::new(prefix).map_err(|_| {
            RadosError::InvalidArgument("omap prefix holds NUL after escaping".into())
        })?;
        let completed = self
            .read_op(
                object,
                "omap_get_vals",
                Box::default(),
                |api, raw, slots| {
                    // SAFETY: the op is being built; the strings are copied by librados; the out
                    // slots live in the boxed `slots`, kept until completion.
                    unsafe {
                        (api.rados_read_op_omap_get_vals2)(
                            raw,
                            start_after.as_ptr(),
                            prefix.as_ptr(),
                            max as u64,
                            &mut slots.omap.0,
                            &mut slots.omap_more,
                            &mut slots.omap_result,
                        )
                    };
                    Ok(())
                },
            )
            .await?;
        let slots = completed.state;
        if slots.omap_result < 0 {
            return Err(self.error(-slots.omap_result, object, "omap_get_vals"));
        }
        Ok((drain_omap(self.api, &slots.omap)?, slots.omap_more != 0))
    }
}

/// An object name as librados takes it, checked against the contract's rules.
fn object_id(object: &str) -> Result<CString> {
    rados::validate_object_name(object)?;
    CString::new(object).map_err(|_| RadosError::InvalidArgument("object name holds NUL".into()))
}

/// Every entry of a completed omap iterator (keys as stored).
fn drain_omap(api: &Api, iter: &OmapIterSlot) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut entries = Vec::new();
    if iter.0.is_null() {
        return Ok(entries);
    }
    loop {
        let mut key: *mut c_char = std::ptr::null_mut();
        let mut value: *mut c_char = std::ptr::null_mut();
        let (mut key_length, mut value_length) = (0usize, 0usize);
        // SAFETY: the iterator is alive until its slot drops; the out slots are valid.
        let result = unsafe {
            (api.rados_omap_get_next2)(
                iter.0,
                &mut key,
                &mut value,
                &mut key_length,
                &mut value_length,
            )
        };
        if result < 0 {
            return Err(RadosError::Io(format!(
                "omap iterator: {}",
                strerror(-result)
            )));
        }
        if key.is_null() {
            return Ok(entries);
        }
        // SAFETY: librados gives `key_length`/`value_length` bytes at these pointers, valid
        // until the next call on the iterator.
        let (key, value) = unsafe {
            (
                std::slice::from_raw_parts(key.cast::<u8>(), key_length).to_vec(),
                if value.is_null() {
                    Vec::new()
                } else {
                    std::slice::from_raw_parts(value.cast::<u8>(), value_length).to_vec()
                },
            )
        };
        entries.push((key, value));
    }
}

fn is_empty_zero(step: &rados::Op) -> bool {
    matches!(
        step,
        rados::Op::Zero {
            length_bytes: 0,
            ..
        }
    )
}

#[async_trait]
impl IoCtx for CephIoCtx {
    fn pool(&self) -> &PoolInfo {
        &self.pool
    }

    async fn operate(&self, object: &str, op: WriteOp) -> Result<()> {
        let oid = object_id(object)?;
        // A zero of no bytes changes nothing (the contract), and Ceph's OSD asserts on one:
        // a `zero(offset, 0)` sent to it crashed the OSD holding the PG.
        let op = if op.ops().iter().any(is_empty_zero) {
            op.into_ops()
                .into_iter()
                .filter(|step| !is_empty_zero(step))
                .fold(WriteOp::new(), WriteOp::push)
        } else {
            op
        };
        if op.is_empty() {
            return Ok(());
        }
        let plan = write_op::plan(&op)?;
        for _ in 0..MISSING_REPLAYS_MAX {
            let result = self.submit_write(object, &oid, &plan).await?;
            // A passing cmpxattr makes the result 1.
            if result >= 0 {
                return Ok(());
            }
            if -result != libc::ENOENT {
                return Err(self.error(-result, object, "operate"));
            }
            match plan.on_missing {
                OnMissing::Fail => return Err(self.error(-result, object, "operate")),
                OnMissing::DecideGuards => return write_op::guards_hold_on_missing(&op),
                OnMissing::DecideGuardsThenFail => {
                    write_op::guards_hold_on_missing(&op)?;
                    return Err(self.error(-result, object, "operate"));
                }
                OnMissing::Replay => {
                    write_op::guards_hold_on_missing(&op)?;
                    let on_missing = write_op::plan_on_missing(&op);
                    match self.submit_write(object, &oid, &on_missing).await? {
                        result if result >= 0 => return Ok(()),
                        // Created meanwhile: decide again against what is there now.
                        result if -result == libc::EEXIST => continue,
                        result => return Err(self.error(-result, object, "operate")),
                    }
                }
            }
        }
        Err(RadosError::CompareFailed(format!(
            "{object} was created and removed concurrently {MISSING_REPLAYS_MAX} times while \
             its guards were checked"
        )))
    }

    async fn read(&self, object: &str, offset_bytes: u64, length_bytes: u64) -> Result<Vec<u8>> {
        if length_bytes == 0 {
            // librados reads a length of 0 as "to the end": only check that the object exists.
            self.stat(object).await?;
            return Ok(Vec::new());
        }
        let mut guess = usize::try_from(length_bytes)
            .unwrap_or(usize::MAX)
            .min(READ_GUESS_BYTES);
        loop {
            // A buffer as long as the request needs no size: what the read returns is all
            // there is (a block volume's reads, one sub-op each, as librbd sends them).
            let whole = guess as u64 == length_bytes;
            let slots = Box::new(ReadSlots {
                buffer: vec![0; guess],
                ..ReadSlots::default()
            });
            let completed = self
                .read_op(object, "read", slots, |api, raw, slots| {
                    // SAFETY: the op is being built; the out slots and the buffer live in the
                    // boxed `slots` until completion, and the buffer holds `guess` bytes.
                    unsafe {
                        if !whole {
                            (api.rados_read_op_stat)(
                                raw,
                                &mut slots.size_bytes,
                                &mut slots.mtime_s,
                                &mut slots.stat_result,
                            );
                        }
                        (api.rados_read_op_read)(
                            raw,
                            offset_bytes,
                            guess,
                            slots.buffer.as_mut_ptr().cast(),
                            &mut slots.bytes_read,
                            &mut slots.read_result,
                        );
                    }
                    Ok(())
                })
                .await?;
            let mut slots = completed.state;
            if slots.read_result < 0 {
                return Err(self.error(-slots.read_result, object, "read"));
            }
            if whole {
                let bytes_read = slots.bytes_read.min(slots.buffer.len());
                slots.buffer.truncate(bytes_read);
                return Ok(std::mem::take(&mut slots.buffer));
            }
            // The stat and the read saw the same state: if the object holds more than the
            // guess let through, read again with the size it had.
            let wanted = slots
                .size_bytes
                .saturating_sub(offset_bytes)
                .min(length_bytes);
            let wanted = usize::try_from(wanted).map_err(|_| {
                RadosError::InvalidArgument(format!("read of {wanted} bytes is too large"))
            })?;
            if slots.bytes_read < wanted && slots.bytes_read == guess {
                guess = wanted;
                continue;
            }
            let bytes_read = slots.bytes_read.min(slots.buffer.len());
            slots.buffer.truncate(bytes_read);
            return Ok(std::mem::take(&mut slots.buffer));
        }
    }

    async fn stat(&self, object: &str) -> Result<ObjectStat> {
        let completed = self
            .read_op(object, "stat", Box::default(), |api, raw, slots| {
                // SAFETY: the op is being built; the out slots live until completion.
                unsafe {
                    (api.rados_read_op_stat)(
                        raw,
                        &mut slots.size_bytes,
                        &mut slots.mtime_s,
                        &mut slots.stat_result,
                    )
                };
                Ok(())
            })
            .await?;
        let slots = &completed.state;
        if slots.stat_result < 0 {
            return Err(self.error(-slots.stat_result, object, "stat"));
        }
        Ok(ObjectStat {
            size_bytes: slots.size_bytes,
            // Pacific's stat has whole seconds only (no rados_read_op_stat2).
            mtime_ns: u64::try_from(slots.mtime_s).unwrap_or(0) * 1_000_000_000,
            version: completed.version,
        })
    }

    async fn get_xattr(&self, object: &str, name: &str) -> Result<Vec<u8>> {
        rados::validate_xattr_name(name)?;
        let mut xattrs = self.get_xattrs(object).await?;
        xattrs
            .remove(name)
            .ok_or_else(|| RadosError::NotFound(format!("xattr {name} of {object}")))
    }

    async fn get_xattrs(&self, object: &str) -> Result<BTreeMap<String, Vec<u8>>> {
        let completed = self
            .read_op(object, "getxattrs", Box::default(), |api, raw, slots| {
                // SAFETY: the op is being built; the out slots live until completion.
                unsafe {
                    (api.rados_read_op_getxattrs)(
                        raw,
                        &mut slots.xattrs.0,
                        &mut slots.xattrs_result,
                    )
                };
                Ok(())
            })
            .await?;
        let slots = completed.state;
        if slots.xattrs_result < 0 {
            return Err(self.error(-slots.xattrs_result, object, "getxattrs"));
        }
        let mut xattrs = BTreeMap::new();
        if slots.xattrs.0.is_null() {
            return Ok(xattrs);
        }
        loop {
            let mut name: *const c_char = std::ptr::null();
            let mut value: *const c_char = std::ptr::null();
            let mut length = 0usize;
            // SAFETY: the iterator is alive until `slots` drops; the out slots are valid.
            let result = unsafe {
                (self.api.rados_getxattrs_next)(slots.xattrs.0, &mut name, &mut value, &mut length)
            };
            if result < 0 {
                return Err(self.error(-result, object, "getxattrs"));
            }
            if name.is_null() {
                break;
            }
            // SAFETY: librados gives a NUL-terminated name and `length` value bytes, valid
            // until the next call on the iterator.
            let (name, value) = unsafe {
                (
                    CStr::from_ptr(name).to_string_lossy().into_owned(),
                    if value.is_null() {
                        Vec::new()
                    } else {
                        std::slice::from_raw_parts(value.cast::<u8>(), length).to_vec()
                    },
                )
            };
            if !name.starts_with(rados::RESERVED_XATTR_PREFIX) {
                xattrs.insert(name, value);
            }
        }
        Ok(xattrs)
    }

    async fn omap_get_vals(
        &self,
        object: &str,
        start_after: Option<&[u8]>,
        prefix: &[u8],
        max: usize,
    ) -> Result<OmapPage> {
        object_id(object)?;
        let prefix = omap_key::escape(prefix);
        let mut after = start_after.map(omap_key::escape).unwrap_or_default();
        let mut entries: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        loop {
            let wanted = (max - entries.len()).min(OMAP_ENTRIES_PER_REQUEST_MAX);
            let (page, more) = self.omap_page(object, &after, &prefix, wanted).await?;
            if let Some((last, _)) = page.last() {
                after = last.clone();
            }
            let empty = page.is_empty();
            entries.extend(page);
            if !more || entries.len() >= max || empty {
                let more = more || entries.len() > max;
                let entries = entries
                    .into_iter()
                    .map(|(key, value)| (omap_key::unescape(&key), value))
                    .collect();
                return Ok(OmapPage { entries, more });
            }
        }
    }

    async fn omap_get_vals_by_keys(
        &self,
        object: &str,
        keys: &[Vec<u8>],
    ) -> Result<BTreeMap<Vec<u8>, Vec<u8>>> {
        let stored: Vec<Vec<u8>> = keys.iter().map(|key| omap_key::escape(&key[..])).collect();
        let completed = self
            .read_op(
                object,
                "omap_get_vals_by_keys",
                Box::default(),
                |api, raw, slots| {
                    let pointers: Vec<*const c_char> =
                        stored.iter().map(|key| key.as_ptr().cast()).collect();
                    let lengths: Vec<usize> = stored.iter().map(Vec::len).collect();
                    // SAFETY: the op is being built; librados copies the keys before returning;
                    // the out slots live until completion.
                    unsafe {
                        (api.rados_read_op_omap_get_vals_by_keys2)(
                            raw,
                            pointers.as_ptr(),
                            stored.len(),
                            lengths.as_ptr(),
                            &mut slots.omap.0,
                            &mut slots.omap_result,
                        )
                    };
                    Ok(())
                },
            )
            .await?;
        let slots = completed.state;
        if slots.omap_result < 0 {
            return Err(self.error(-slots.omap_result, object, "omap_get_vals_by_keys"));
        }
        Ok(drain_omap(self.api, &slots.omap)?
            .into_iter()
            .map(|(key, value)| (omap_key::unescape(&key), value))
            .collect())
    }

    async fn list(&self, cursor: &ListCursor, max: usize) -> Result<ListPage> {
        let handle = self.handle.clone();
        let api = self.api;
        let cursor = cursor.clone();
        let pool = self.pool.name.clone();
        tokio::task::spawn_blocking(move || listing::list(api, &handle, &cursor, max))
            .await
            .map_err(|error| RadosError::Io(format!("listing pool {pool}: {error}")))?
    }
}
