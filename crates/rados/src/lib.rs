//! # rados: the object API everything above the backend talks to
//!
//! Owns the RADOS-shaped boundary of strata as traits and types: a cluster handle
//! ([`Rados`]: pools and cluster statistics) and a pool handle ([`IoCtx`]: objects with data,
//! xattrs and omap, listing, and compound atomic operations [`WriteOp`]). The S3 gateway (bucket
//! index in omap), cache tiering and block volumes are written against these traits; the
//! embedded cluster (crate `cluster`) implements them today and a librados-backed
//! implementation will implement them for real Ceph clusters, so the layers above run unchanged
//! on either.
//!
//! Besides the traits it holds the contract's executable model, [`memory::MemoryRados`] (also
//! a fast backend for the layers' own tests), and the contract's test suite, [`contract`],
//! which every backend runs (`rados::contract_tests!`).
//!
//! ## Contract every implementation keeps
//! It is what librados on Ceph 16.2 does, except where a layer above needs more (marked
//! *emulated*: the librados backend adds it). [`memory::MemoryRados`] is its executable
//! model and [`contract`] its test suite, which every backend passes.
//! - **Atomicity.** [`IoCtx::operate`] applies all steps of a [`WriteOp`] or none: a failed
//!   guard or a failing step (bad argument, missing object, exclusive create) applies nothing.
//!   The convenience methods ([`IoCtx::write_full`], [`IoCtx::set_xattr`], ...) are one-step
//!   `operate` calls. An empty op changes nothing, even on a missing object.
//! - **Guards test the object as it was before the op**, wherever they stand in it: a
//!   `CompareOmap` after an `OmapSet` of its key sees the old value (the gateway consumes its
//!   write intents that way). Steps apply in order, each seeing the ones before (an
//!   exclusive `Create` after a write fails with `Exists`). See [`Op`] for each step.
//! - **Missing objects (Ceph's rules).** Writes, appends, `Create`, `SetXattr` and `OmapSet`
//!   create the object; `Truncate` and `Zero` do nothing to a missing object and create
//!   nothing; `Remove`, `RemoveXattr`, `OmapRemoveKeys`, `OmapClear`, `AssertExists` and
//!   `CompareXattr` fail with `NotFound`. `CompareOmap` treats a missing object as one with
//!   no keys and, when the op applies, leaves it created (*emulated*: librados compares omap
//!   only on an existing object, so the backend creates it first).
//! - **Omap** keys are any bytes (NUL and 0xFF included, ordered bytewise, also in
//!   `start_after` and prefixes: *emulated* where the C API takes C strings); values are
//!   never empty (`InvalidArgument`), because librados' `omap_cmp` cannot tell an empty value
//!   from a missing key. [`IoCtx::omap_get_vals`] returns at most `max` entries (a backend may
//!   return fewer: Ceph stops at 1024) and `more` exactly when a matching entry follows.
//! - **Versions** ([`ObjectStat::version`]) grow with every change of an object and stay
//!   put across reads and failed ops; a recreated object's version is above its old one's.
//!   mtime resolution is the backend's (1 s on Ceph 16.2).
//! - **Reads** past the end are short or empty; a read of length 0 is empty (*emulated*: for
//!   the OSD, 0 means "to the end").
//! - **Listing** returns every object exactly once through its cursors, at most `max` names a
//!   page (possibly fewer, even none, before the end), in no promised order (Ceph lists in
//!   hash order, one PG after another).
//! - **Durability.** A mutation returns `Ok` only once every replica the backend writes is on
//!   stable storage; below the pool's `min_size` it fails with [`RadosError::Degraded`]
//!   instead of accepting less redundancy.
//! - **Read integrity.** A read returns the bytes last written or an error, never other bytes:
//!   a bad copy is read around; when every copy is bad the error is [`RadosError::Checksum`].
//! - **Ordering.** Mutations of one object are applied in one order on every replica; a read
//!   that starts after a mutation returned sees it (read-your-writes, per object).
//! - **Names.** Object names are 1..=2048 bytes ([`OBJECT_NAME_BYTES_MAX`], Ceph's
//!   `osd_max_object_name_len`) of UTF-8 without NUL; xattr names are non-empty, without NUL,
//!   and those starting with `_strata` are reserved for the backend (`InvalidArgument`).
//! - **Pools.** `pool_create` of a taken name is `Exists`, of size 0 `InvalidArgument`;
//!   whether a size above the failure domains is refused is the backend's (the embedded
//!   cluster refuses it, Ceph accepts an undersized pool).
//! - **Errors** are one enum, [`RadosError`], with its errno in one place ([`RadosError::errno`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
pub use bytes::Bytes;

pub mod contract;
mod error;
pub mod memory;
mod op;
mod types;

pub use error::{errno, RadosError, Result};
pub use op::{Comparison, Op, WriteOp};
pub use types::{
    ClusterStats, FullLevel, ListCursor, ListPage, ObjectStat, OmapPage, PoolId, PoolInfo,
    PoolSpec, PoolStats,
};

/// Longest object name in bytes.
pub const OBJECT_NAME_BYTES_MAX: usize = 2048;

/// Prefix of xattr names the backend reserves for itself (object versions...).
pub const RESERVED_XATTR_PREFIX: &str = "_strata";

/// Checks an object name against the API's rules (see the crate docs).
pub fn validate_object_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > OBJECT_NAME_BYTES_MAX || name.contains('\0') {
        return Err(RadosError::InvalidArgument(format!(
            "object name of {} bytes must be 1..={OBJECT_NAME_BYTES_MAX} bytes without NUL",
            name.len()
        )));
    }
    Ok(())
}

/// Checks a user xattr name: not empty, not reserved.
pub fn validate_xattr_name(name: &str) -> Result<()> {
    if name.is_empty() || name.starts_with(RESERVED_XATTR_PREFIX) || name.contains('\0') {
        return Err(RadosError::InvalidArgument(format!(
            "xattr name {name:?} must be non-empty, without NUL, and not start with {RESERVED_XATTR_PREFIX:?}"
        )));
    }
    Ok(())
}

/// A handle on a cluster: pools and cluster-wide statistics. Cheap to share (`Arc<dyn Rados>`).
#[async_trait]
pub trait Rados: Send + Sync {
    /// Creates a pool; `Exists` if the name is taken, `InvalidArgument` for impossible
    /// parameters (size above the failure domains available, unknown class or rule...).
    async fn pool_create(&self, spec: PoolSpec) -> Result<PoolInfo>;

    /// Deletes a pool and every object in it; `NotFound` if there is no such pool.
    async fn pool_delete(&self, name: &str) -> Result<()>;

    /// Every pool, by id.
    async fn pool_list(&self) -> Result<Vec<PoolInfo>>;

    /// The pool called `name`; `NotFound` if there is none.
    async fn pool_lookup(&self, name: &str) -> Result<PoolInfo>;

    /// Space, objects and OSD counts.
    async fn cluster_stats(&self) -> Result<ClusterStats>;

    /// A handle for the objects of pool `name`; `NotFound` if there is no such pool.
    async fn io_ctx(&self, pool: &str) -> Result<Arc<dyn IoCtx>>;

    /// The acting set (primary first) of each placement group of pool `pool`, indexed by PG
    /// (`pg_num` entries), for callers that group work by the OSD CRUSH sends it to (the
    /// gateway's small-object packs). A hint only: the map may change right after. The
    /// default, for a backend that cannot say, is `NotSupported`.
    async fn pg_acting_sets(&self, pool: &str) -> Result<Vec<Vec<i32>>> {
        Err(RadosError::NotSupported(format!(
            "acting sets of pool {pool}"
        )))
    }
}

/// A handle on the objects of one pool (librados' `IoCtx`). Cheap to share.
///
/// Only [`IoCtx::operate`] and the reads are required; every single mutation has a default
/// implementation as a one-step [`WriteOp`].
#[async_trait]
pub trait IoCtx: Send + Sync {
    /// The pool this handle addresses.
    fn pool(&self) -> &PoolInfo;

    /// Applies the steps of `op` to `object` atomically (see [`WriteOp`]).
    async fn operate(&self, object: &str, op: WriteOp) -> Result<()>;

    /// Reads up to `length_bytes` from `offset_bytes`; shorter at the end, empty beyond it
    /// (and for a length of 0). `NotFound` if the object does not exist.
    async fn read(&self, object: &str, offset_bytes: u64, length_bytes: u64) -> Result<Vec<u8>>;

    /// Size, mtime and version; `NotFound` if the object does not exist.
    async fn stat(&self, object: &str) -> Result<ObjectStat>;

    /// One xattr; `NotFound` if the object or the xattr does not exist.
    async fn get_xattr(&self, object: &str, name: &str) -> Result<Vec<u8>>;

    /// Every user xattr of the object.
    async fn get_xattrs(&self, object: &str) -> Result<BTreeMap<String, Vec<u8>>>;

    /// Up to `max` omap entries with keys after `start_after` (from the first when `None`)
    /// that start with `prefix` (all when empty), in bytewise key order; `more` says whether
    /// a matching entry follows the last one returned. `NotFound` if the object is missing.
    async fn omap_get_vals(
        &self,
        object: &str,
        start_after: Option<&[u8]>,
        prefix: &[u8],
        max: usize,
    ) -> Result<OmapPage>;

    /// The values of those of `keys` that are set; `NotFound` if the object is missing.
    async fn omap_get_vals_by_keys(
        &self,
        object: &str,
        keys: &[Vec<u8>],
    ) -> Result<BTreeMap<Vec<u8>, Vec<u8>>>;

    /// Up to `max` object names from `cursor` on, in no promised order; `next` is `None` once
    /// every object was listed.
    async fn list(&self, cursor: &ListCursor, max: usize) -> Result<ListPage>;

    /// The whole object.
    async fn read_full(&self, object: &str) -> Result<Vec<u8>> {
        self.read(object, 0, u64::MAX).await
    }

    /// Replaces the data of `object` (creating it).
    async fn write_full(&self, object: &str, data: &[u8]) -> Result<()> {
        self.operate(
            object,
            WriteOp::new().write_full(Bytes::copy_from_slice(data)),
        )
        .await
    }

    /// Writes `data` at `offset_bytes` (creating the object, extending it).
    async fn write(&self, object: &str, offset_bytes: u64, data: &[u8]) -> Result<()> {
        self.operate(
            object,
            WriteOp::new().write(offset_bytes, Bytes::copy_from_slice(data)),
        )
        .await
    }

    /// Appends `data` (creating the object).
    async fn append(&self, object: &str, data: &[u8]) -> Result<()> {
        self.operate(object, WriteOp::new().append(Bytes::copy_from_slice(data)))
            .await
    }

    /// Sets the size of an existing object (a missing one stays missing).
    async fn truncate(&self, object: &str, size_bytes: u64) -> Result<()> {
        self.operate(object, WriteOp::new().truncate(size_bytes))
            .await
    }

    /// Creates an empty object; with `exclusive`, `Exists` if it is there.
    async fn create(&self, object: &str, exclusive: bool) -> Result<()> {
        self.operate(object, WriteOp::new().create(exclusive)).await
    }

    /// Removes the object; `NotFound` if it is missing.
    async fn remove(&self, object: &str) -> Result<()> {
        self.operate(object, WriteOp::new().remove()).await
    }

    /// Sets an xattr (creating the object).
    async fn set_xattr(&self, object: &str, name: &str, value: &[u8]) -> Result<()> {
        self.operate(object, WriteOp::new().set_xattr(name, value.to_vec()))
            .await
    }

    /// Removes an xattr of an existing object (`NotFound` if the object is missing).
    async fn remove_xattr(&self, object: &str, name: &str) -> Result<()> {
        self.operate(object, WriteOp::new().remove_xattr(name))
            .await
    }

    /// Sets omap entries (creating the object).
    async fn omap_set(&self, object: &str, entries: Vec<(Vec<u8>, Vec<u8>)>) -> Result<()> {
        self.operate(object, WriteOp::new().omap_set(entries)).await
    }

    /// Removes omap keys of an existing object (`NotFound` if the object is missing).
    async fn omap_remove_keys(&self, object: &str, keys: Vec<Vec<u8>>) -> Result<()> {
        self.operate(object, WriteOp::new().omap_remove_keys(keys))
            .await
    }

    /// Removes every omap entry of an existing object (`NotFound` if the object is missing).
    async fn omap_clear(&self, object: &str) -> Result<()> {
        self.operate(object, WriteOp::new().omap_clear()).await
    }

    /// Every object name of the pool, following cursors.
    async fn list_all(&self) -> Result<Vec<String>> {
        let mut names = Vec::new();
        let mut cursor = ListCursor::start();
        loop {
            let page = self.list(&cursor, 1000).await?;
            names.extend(page.objects);
            match page.next {
                Some(next) => cursor = next,
                None => return Ok(names),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(validate_object_name("a").is_ok());
        assert!(validate_object_name("").is_err());
        assert!(validate_object_name("a\0b").is_err());
        assert!(validate_object_name(&"x".repeat(OBJECT_NAME_BYTES_MAX + 1)).is_err());
        assert!(validate_xattr_name("etag").is_ok());
        assert!(validate_xattr_name("_strata.v").is_err());
        assert!(validate_xattr_name("").is_err());
    }

    #[test]
    fn traits_are_object_safe() {
        fn take(_: Option<Arc<dyn Rados>>, _: Option<Arc<dyn IoCtx>>) {}
        take(None, None);
    }
}
