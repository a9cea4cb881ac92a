//! Xattrs: round trips, name checks, removal on a missing object.

use std::collections::BTreeMap;

use super::{data, exists, finish, fresh_pool, ok};
use crate::{Rados, RadosError, WriteOp};

/// Xattrs: set (creating the object), get, list, overwrite, binary and empty values.
pub async fn xattrs_round_trip(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    ok(
        io.set_xattr("o", "etag", b"v1").await,
        "set_xattr on a missing object",
    );
    assert!(exists(&*io, "o").await, "set_xattr creates");
    assert_eq!(data(&*io, "o").await, b"");
    ok(io.set_xattr("o", "etag", b"v2").await, "overwrite");
    ok(
        io.set_xattr("o", "binary", b"\0\xff\x01").await,
        "binary value",
    );
    ok(io.set_xattr("o", "empty", b"").await, "empty value");
    assert_eq!(ok(io.get_xattr("o", "etag").await, "get"), b"v2");
    assert_eq!(ok(io.get_xattr("o", "binary").await, "get"), b"\0\xff\x01");
    assert_eq!(ok(io.get_xattr("o", "empty").await, "get"), b"");
    expect_err!(
        io.get_xattr("o", "nope").await,
        RadosError::NotFound(_),
        "missing xattr"
    );
    let all = ok(io.get_xattrs("o").await, "get_xattrs");
    let expected: BTreeMap<String, Vec<u8>> = [
        ("binary".to_string(), b"\0\xff\x01".to_vec()),
        ("empty".to_string(), Vec::new()),
        ("etag".to_string(), b"v2".to_vec()),
    ]
    .into();
    assert_eq!(all, expected, "get_xattrs holds the user xattrs only");
    ok(io.remove_xattr("o", "etag").await, "remove_xattr");
    expect_err!(
        io.get_xattr("o", "etag").await,
        RadosError::NotFound(_),
        "removed"
    );
    ok(
        io.remove_xattr("o", "etag").await,
        "remove a missing xattr of an object",
    );
    finish(rados, pool).await;
}

/// Xattr names: empty, reserved or with NUL are `InvalidArgument`, nothing applied.
pub async fn xattr_names_are_checked(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    for name in ["", "_strata.v", "_strataX", "a\0b"] {
        expect_err!(
            io.set_xattr("o", name, b"v").await,
            RadosError::InvalidArgument(_),
            "set_xattr({name:?})"
        );
    }
    assert!(
        !exists(&*io, "o").await,
        "an invalid set_xattr created the object"
    );
    ok(io.write_full("o", b"").await, "write_full");
    expect_err!(
        io.get_xattr("o", "_strata.v").await,
        RadosError::InvalidArgument(_),
        "get reserved"
    );
    let op = WriteOp::new()
        .set_xattr("ok", b"1".to_vec())
        .remove_xattr("_strata.v");
    expect_err!(
        io.operate("o", op).await,
        RadosError::InvalidArgument(_),
        "remove reserved"
    );
    expect_err!(
        io.get_xattr("o", "ok").await,
        RadosError::NotFound(_),
        "applied in part"
    );
    finish(rados, pool).await;
}

/// `RemoveXattr` on a missing object is `NotFound` (Ceph's) and creates nothing.
pub async fn remove_xattr_needs_the_object(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    expect_err!(
        io.remove_xattr("none", "x").await,
        RadosError::NotFound(_),
        "convenience"
    );
    let op = WriteOp::new().remove_xattr("x");
    expect_err!(
        io.operate("none", op).await,
        RadosError::NotFound(_),
        "operate"
    );
    assert!(!exists(&*io, "none").await);
    finish(rados, pool).await;
}
