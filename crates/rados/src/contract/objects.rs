//! Object data: whole and partial writes, appends, reads, truncate, zero, create, remove, stat
//! and versions.

use super::{data, entries, exists, finish, fresh_pool, ok, omap, version};
use crate::{Rados, RadosError, WriteOp};

/// `WriteFull` creates, replaces the data (the size follows it), keeps xattrs and omap.
pub async fn write_full_replaces_data(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    ok(io.write_full("o", b"a longer body").await, "write_full");
    ok(io.set_xattr("o", "x", b"1").await, "set_xattr");
    ok(io.omap_set("o", entries(&[(b"k", b"v")])).await, "omap_set");
    ok(io.write_full("o", b"short").await, "write_full shorter");
    assert_eq!(data(&*io, "o").await, b"short");
    assert_eq!(ok(io.stat("o").await, "stat").size_bytes, 5);
    assert_eq!(ok(io.get_xattr("o", "x").await, "get_xattr"), b"1");
    assert_eq!(omap(&*io, "o").await.len(), 1, "omap stays");
    ok(io.write_full("o", b"").await, "write_full empty");
    assert!(exists(&*io, "o").await, "an empty object exists");
    assert_eq!(data(&*io, "o").await, b"");
    finish(rados, pool).await;
}

/// `Write` creates, overwrites in place, and extends with zeros past the end.
pub async fn write_extends_with_zeros(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    ok(
        io.write("o", 4, b"tail").await,
        "write at 4 on a missing object",
    );
    assert_eq!(data(&*io, "o").await, b"\0\0\0\0tail");
    ok(io.write("o", 1, b"ab").await, "overwrite");
    assert_eq!(data(&*io, "o").await, b"\0ab\0tail");
    ok(io.write("o", 6, b"ILS!").await, "overlapping the end");
    assert_eq!(data(&*io, "o").await, b"\0ab\0taILS!");
    finish(rados, pool).await;
}

/// `Append` creates and appends at the current end.
pub async fn append_creates_and_extends(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    ok(io.append("log", b"one,").await, "append to missing");
    ok(io.append("log", b"two,").await, "append");
    ok(
        io.operate(
            "log",
            WriteOp::new().append(b"3".to_vec()).append(b"4".to_vec()),
        )
        .await,
        "two appends in one op",
    );
    assert_eq!(data(&*io, "log").await, b"one,two,34");
    finish(rados, pool).await;
}

/// Reads: ranges, shorter at the end, empty at and past it, empty for length 0.
pub async fn read_ranges_and_past_end(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    ok(io.write_full("o", b"0123456789").await, "write_full");
    let read = |offset, length| io.read("o", offset, length);
    assert_eq!(ok(read(0, 4).await, "head"), b"0123");
    assert_eq!(ok(read(3, 4).await, "middle"), b"3456");
    assert_eq!(ok(read(8, 100).await, "across the end"), b"89");
    assert_eq!(ok(read(10, 5).await, "at the end"), b"");
    assert_eq!(ok(read(1000, 5).await, "past the end"), b"");
    assert_eq!(ok(read(2, 0).await, "length 0"), b"");
    assert_eq!(
        ok(read(0, u64::MAX).await, "length u64::MAX"),
        b"0123456789"
    );
    ok(io.create("empty", false).await, "create");
    assert_eq!(ok(io.read("empty", 0, 10).await, "empty object"), b"");
    finish(rados, pool).await;
}

/// A megabyte and a bit, whole and in pieces.
pub async fn large_object_round_trip(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    let body: Vec<u8> = (0..(1u32 << 20) + 17).map(|i| (i % 251) as u8).collect();
    ok(io.write_full("big", &body).await, "write_full 1 MiB");
    assert_eq!(
        ok(io.stat("big").await, "stat").size_bytes,
        body.len() as u64
    );
    assert!(data(&*io, "big").await == body, "whole read differs");
    let piece = ok(io.read("big", 65_530, 70_000).await, "read across 64 KiB");
    assert!(piece == body[65_530..135_530], "range read differs");
    finish(rados, pool).await;
}

/// Every read of a missing object is `NotFound`.
pub async fn missing_object_reads_not_found(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    expect_err!(
        io.read("none", 0, 10).await,
        RadosError::NotFound(_),
        "read"
    );
    expect_err!(
        io.read_full("none").await,
        RadosError::NotFound(_),
        "read_full"
    );
    expect_err!(io.stat("none").await, RadosError::NotFound(_), "stat");
    expect_err!(
        io.get_xattr("none", "x").await,
        RadosError::NotFound(_),
        "get_xattr"
    );
    expect_err!(
        io.get_xattrs("none").await,
        RadosError::NotFound(_),
        "get_xattrs"
    );
    expect_err!(
        io.omap_get_vals("none", None, b"", 10).await,
        RadosError::NotFound(_),
        "omap_get_vals"
    );
    expect_err!(
        io.omap_get_vals_by_keys("none", &[b"k".to_vec()]).await,
        RadosError::NotFound(_),
        "omap_get_vals_by_keys"
    );
    expect_err!(io.remove("none").await, RadosError::NotFound(_), "remove");
    finish(rados, pool).await;
}

/// `Truncate` drops bytes past the new size and grows with zeros.
pub async fn truncate_shrinks_and_grows(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    ok(io.write_full("o", b"abcdef").await, "write_full");
    ok(io.truncate("o", 3).await, "shrink");
    assert_eq!(data(&*io, "o").await, b"abc");
    ok(io.truncate("o", 5).await, "grow");
    assert_eq!(data(&*io, "o").await, b"abc\0\0");
    ok(io.truncate("o", 0).await, "to zero");
    assert!(exists(&*io, "o").await, "a truncated object exists");
    assert_eq!(ok(io.stat("o").await, "stat").size_bytes, 0);
    finish(rados, pool).await;
}

/// `Truncate` of a missing object succeeds and creates nothing (Ceph's behaviour).
pub async fn truncate_missing_object_creates_nothing(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    ok(io.truncate("none", 10).await, "truncate missing");
    assert!(!exists(&*io, "none").await, "truncate created the object");
    finish(rados, pool).await;
}

/// `Zero` (Ceph's): zeroes inside, truncates to the range's start when the range reaches the
/// end, does nothing from the end on or to a missing object, never creates or extends.
pub async fn zero_never_creates_or_extends(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    let zero = |offset, length| WriteOp::new().zero(offset, length);
    ok(io.write_full("o", b"abcdefgh").await, "write_full");
    ok(io.operate("o", zero(2, 3)).await, "zero inside");
    assert_eq!(data(&*io, "o").await, b"ab\0\0\0fgh");
    ok(io.operate("o", zero(6, 100)).await, "zero across the end");
    assert_eq!(
        data(&*io, "o").await,
        b"ab\0\0\0f",
        "shrinks to the range start"
    );
    ok(io.operate("o", zero(4, 2)).await, "zero exactly to the end");
    assert_eq!(
        data(&*io, "o").await,
        b"ab\0\0",
        "shrinks to the range start"
    );
    ok(io.operate("o", zero(10, 5)).await, "zero past the end");
    assert_eq!(data(&*io, "o").await, b"ab\0\0", "no extension");
    ok(io.operate("o", zero(1, 0)).await, "zero of length 0");
    assert_eq!(data(&*io, "o").await, b"ab\0\0", "no change");
    ok(
        io.operate("none", zero(0, 10)).await,
        "zero a missing object",
    );
    assert!(!exists(&*io, "none").await, "zero created the object");
    finish(rados, pool).await;
}

/// `Create`: plain creates or keeps; exclusive fails with `Exists` on an existing object.
pub async fn create_plain_and_exclusive(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    ok(
        io.create("o", true).await,
        "exclusive create of a missing object",
    );
    assert_eq!(ok(io.stat("o").await, "stat").size_bytes, 0);
    expect_err!(
        io.create("o", true).await,
        RadosError::Exists(_),
        "exclusive again"
    );
    ok(io.write_full("o", b"kept").await, "write_full");
    ok(
        io.create("o", false).await,
        "plain create of an existing object",
    );
    assert_eq!(
        data(&*io, "o").await,
        b"kept",
        "plain create keeps the data"
    );
    ok(
        io.create("p", false).await,
        "plain create of a missing object",
    );
    assert!(exists(&*io, "p").await);
    finish(rados, pool).await;
}

/// `Remove` takes data, xattrs and omap; a new object of the name starts empty.
pub async fn remove_takes_data_xattrs_and_omap(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    ok(io.write_full("o", b"data").await, "write_full");
    ok(io.set_xattr("o", "x", b"1").await, "set_xattr");
    ok(io.omap_set("o", entries(&[(b"k", b"v")])).await, "omap_set");
    ok(io.remove("o").await, "remove");
    assert!(!exists(&*io, "o").await, "removed object still there");
    expect_err!(
        io.remove("o").await,
        RadosError::NotFound(_),
        "remove twice"
    );
    ok(io.create("o", true).await, "create again");
    assert_eq!(data(&*io, "o").await, b"");
    assert!(
        ok(io.get_xattrs("o").await, "get_xattrs").is_empty(),
        "xattrs came back"
    );
    assert!(omap(&*io, "o").await.is_empty(), "omap came back");
    finish(rados, pool).await;
}

/// `stat`: size, a set mtime, a version.
pub async fn stat_reports_size_mtime_version(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    ok(io.write_full("o", b"12345").await, "write_full");
    let stat = ok(io.stat("o").await, "stat");
    assert_eq!(stat.size_bytes, 5);
    assert!(stat.mtime_ns > 0, "mtime is set");
    assert!(stat.version > 0, "version is set");
    ok(io.set_xattr("o", "x", b"1").await, "set_xattr");
    assert_eq!(
        ok(io.stat("o").await, "stat").size_bytes,
        5,
        "xattrs are not data"
    );
    finish(rados, pool).await;
}

/// The version grows with every change (each kind of step), not with reads or failures,
/// and a recreated object's version is above the removed one's.
pub async fn versions_grow_with_every_change(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    ok(io.write_full("o", b"abc").await, "write_full");
    let mut last = version(&*io, "o").await;
    let changes: Vec<(&str, WriteOp)> = vec![
        ("write_full", WriteOp::new().write_full(b"abcdef".to_vec())),
        ("write", WriteOp::new().write(1, b"X".to_vec())),
        ("append", WriteOp::new().append(b"!".to_vec())),
        ("truncate", WriteOp::new().truncate(4)),
        ("zero", WriteOp::new().zero(0, 1)),
        ("create", WriteOp::new().create(false)),
        ("set_xattr", WriteOp::new().set_xattr("x", b"1".to_vec())),
        ("remove_xattr", WriteOp::new().remove_xattr("x")),
        (
            "omap_set",
            WriteOp::new().omap_set(entries(&[(b"k", b"v")])),
        ),
        (
            "omap_remove_keys",
            WriteOp::new().omap_remove_keys(vec![b"k".to_vec()]),
        ),
        ("omap_clear", WriteOp::new().omap_clear()),
    ];
    for (what, op) in changes {
        ok(io.operate("o", op).await, what);
        let now = version(&*io, "o").await;
        assert!(now > last, "{what}: version {now} after {last}");
        last = now;
    }
    ok(io.read_full("o").await, "read");
    ok(io.get_xattrs("o").await, "get_xattrs");
    ok(io.omap_get_vals("o", None, b"", 10).await, "omap_get_vals");
    assert_eq!(version(&*io, "o").await, last, "reads change nothing");
    let failed = io
        .operate("o", WriteOp::new().create(true).write_full(b"no".to_vec()))
        .await;
    expect_err!(failed, RadosError::Exists(_), "exclusive create");
    assert_eq!(
        version(&*io, "o").await,
        last,
        "a failed op changes nothing"
    );
    ok(io.remove("o").await, "remove");
    ok(io.write_full("o", b"again").await, "recreate");
    let recreated = version(&*io, "o").await;
    assert!(recreated > last, "recreated at {recreated} after {last}");
    finish(rados, pool).await;
}
