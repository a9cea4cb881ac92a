//! Object listing with cursors that resume exactly, over librados' `nobjects` listing.
//!
//! Ceph lists a pool in `hobject_t`'s bitwise order: by the name's hash with its bits reversed
//! (which walks the PGs in bit-reversed order, each in hash order), then by name. The C API has
//! no way to turn a position into a string, so the cursor handed out is the last name
//! returned: the next page seeks to that name's hash (`rados_nobjects_list_seek`, which starts
//! at the first object of that hash in its PG) and skips what sorts up to the name, computed
//! here (`ceph_str_hash_rjenkins`), so a page resumes right after it even if that object was
//! removed meanwhile. An object created behind the cursor during a listing may be missed, as
//! in Ceph.

use std::ffi::{c_char, CStr};

use rados::{ListCursor, ListPage, RadosError, Result};

use crate::error::{from_errno, strerror};
use crate::ffi::{Api, ListCtxT};
use crate::ioctx::IoctxHandle;

/// Where an object sorts in a listing.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct ListPosition {
    /// The name's hash with its bits reversed (`hobject_t::get_bitwise_key`).
    pub reversed_hash: u32,
    /// The name.
    pub name: String,
}

impl ListPosition {
    /// The position of object `name`.
    pub(crate) fn of(name: &str) -> Self {
        Self {
            reversed_hash: osdmap::pg::str_hash_rjenkins(name.as_bytes()).reverse_bits(),
            name: name.to_string(),
        }
    }

    /// The hash to seek to.
    fn hash(&self) -> u32 {
        self.reversed_hash.reverse_bits()
    }
}

/// A `rados_list_ctx_t`, closed when dropped.
struct ListContext<'a> {
    api: &'a Api,
    raw: ListCtxT,
}

impl Drop for ListContext<'_> {
    fn drop(&mut self) {
        // SAFETY: the context was opened by rados_nobjects_list_open and is closed once.
        unsafe { (self.api.rados_nobjects_list_close)(self.raw) };
    }
}

/// One page of up to `max` names after `cursor` (blocking: librados' listing is synchronous).
pub(crate) fn list(
    api: &Api,
    ioctx: &IoctxHandle,
    cursor: &ListCursor,
    max: usize,
) -> Result<ListPage> {
    if max == 0 {
        return Ok(ListPage {
            objects: Vec::new(),
            next: Some(cursor.clone()),
        });
    }
    let resume = (!cursor.0.is_empty()).then(|| ListPosition::of(&cursor.0));
    let mut raw: ListCtxT = std::ptr::null_mut();
    // SAFETY: the ioctx is alive (borrowed); `raw` is a valid out slot.
    let result = unsafe { (api.rados_nobjects_list_open)(ioctx.raw, &mut raw) };
    if result < 0 {
        return Err(from_errno(
            -result,
            "pool",
            &format!("list: {}", strerror(-result)),
        ));
    }
    let context = ListContext { api, raw };
    if let Some(resume) = &resume {
        // SAFETY: the context is open.
        unsafe { (api.rados_nobjects_list_seek)(context.raw, resume.hash()) };
    }
    let mut objects = Vec::new();
    loop {
        let mut entry: *const c_char = std::ptr::null();
        // SAFETY: the context is open; key and namespace are not asked for (NULL).
        let result = unsafe {
            (api.rados_nobjects_list_next)(
                context.raw,
                &mut entry,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        if result == -libc::ENOENT {
            return Ok(ListPage {
                objects,
                next: None,
            });
        }
        if result < 0 {
            return Err(from_errno(
                -result,
                "pool",
                &format!("list: {}", strerror(-result)),
            ));
        }
        if entry.is_null() {
            return Err(RadosError::Io("listing returned no name".into()));
        }
        // SAFETY: librados returns a NUL-terminated name valid until the next call.
        let name = unsafe { CStr::from_ptr(entry) }
            .to_string_lossy()
            .into_owned();
        if let Some(resume) = &resume {
            let position = ListPosition::of(&name);
            // Listing order is position order: this skips only what sorts up to the cursor.
            if position <= *resume {
                continue;
            }
        }
        objects.push(name);
        if objects.len() >= max {
            let next = objects.last().cloned().map(ListCursor);
            return Ok(ListPage { objects, next });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_follow_the_reversed_hash_then_the_name() {
        let a = ListPosition::of("a");
        let hash = osdmap::pg::str_hash_rjenkins(b"a");
        assert_eq!(a.reversed_hash, hash.reverse_bits());
        assert_eq!(a.hash(), hash);
        assert_eq!(a, ListPosition::of("a"));
    }
}
