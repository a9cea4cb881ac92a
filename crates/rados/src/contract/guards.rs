//! Guards and compound ops: `CompareXattr`, `CompareOmap`, `AssertExists`, all-or-nothing
//! application, step order, the empty op.

use super::{data, entries, exists, finish, fresh_pool, ok, omap, version};
use crate::{Comparison, Op, Rados, RadosError, WriteOp};

/// `CompareXattr`: `stored <comparison> given`, bytewise and unsigned, for every comparison.
pub async fn compare_xattr_each_comparison(rados: &dyn Rados, pool: &str) {
    use Comparison::*;
    let io = fresh_pool(rados, pool).await;
    ok(io.set_xattr("o", "n", b"5").await, "set_xattr");
    // (comparison, holds against given "3", "5", "7") with stored "5".
    let table = [
        (Equal, [false, true, false]),
        (NotEqual, [true, false, true]),
        (Greater, [true, false, false]),
        (GreaterOrEqual, [true, true, false]),
        (Less, [false, false, true]),
        (LessOrEqual, [false, true, true]),
    ];
    for (comparison, holds) in table {
        for (given, holds) in [b"3", b"5", b"7"].into_iter().zip(holds) {
            let before = version(&*io, "o").await;
            let op = WriteOp::new()
                .compare_xattr("n", comparison, given.to_vec())
                .set_xattr("hit", given.to_vec());
            let result = io.operate("o", op).await;
            let what = format!("stored 5 {comparison:?} {}", given[0] as char);
            if holds {
                ok(result, &what);
                assert_eq!(ok(io.get_xattr("o", "hit").await, &what), given);
            } else {
                expect_err!(result, RadosError::CompareFailed(_), "{what}");
                assert_eq!(version(&*io, "o").await, before, "{what}: applied");
            }
        }
    }
    ok(io.set_xattr("o", "s", b"ab").await, "set_xattr");
    ok(
        io.operate(
            "o",
            WriteOp::new().compare_xattr("s", Greater, b"a".to_vec()),
        )
        .await,
        "ab > a",
    );
    ok(io.set_xattr("o", "u", b"\xff").await, "set_xattr");
    ok(
        io.operate(
            "o",
            WriteOp::new().compare_xattr("u", Greater, b"\x01".to_vec()),
        )
        .await,
        "0xff > 0x01 (unsigned)",
    );
    finish(rados, pool).await;
}

/// `CompareXattr`: a missing xattr compares as empty; a missing object is `NotFound`.
pub async fn compare_xattr_missing_xattr_and_object(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    ok(io.write_full("o", b"").await, "write_full");
    let compare = |comparison, given: &[u8]| WriteOp::new().compare_xattr("x", comparison, given);
    expect_err!(
        io.operate("o", compare(Comparison::Equal, b"v")).await,
        RadosError::CompareFailed(_),
        "missing xattr == v"
    );
    ok(
        io.operate("o", compare(Comparison::NotEqual, b"v")).await,
        "missing != v",
    );
    ok(
        io.operate("o", compare(Comparison::Less, b"a")).await,
        "missing (empty) < a",
    );
    let op = compare(Comparison::NotEqual, b"v").write_full(b"x".to_vec());
    expect_err!(
        io.operate("none", op).await,
        RadosError::NotFound(_),
        "missing object"
    );
    assert!(
        !exists(&*io, "none").await,
        "a failed guard created the object"
    );
    let op = WriteOp::new().compare_xattr("_strata.v", Comparison::Equal, b"1".to_vec());
    expect_err!(
        io.operate("o", op).await,
        RadosError::InvalidArgument(_),
        "reserved name"
    );
    finish(rados, pool).await;
}

/// `CompareOmap`: equal value holds, other value fails, `None` holds exactly when absent.
pub async fn compare_omap_values_and_absence(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    ok(
        io.omap_set("o", entries(&[(b"k\0", b"v1")])).await,
        "omap_set",
    );
    let guarded = |value: Option<&[u8]>| {
        WriteOp::new()
            .compare_omap(b"k\0".to_vec(), value.map(<[u8]>::to_vec))
            .set_xattr("hit", b"1".to_vec())
    };
    ok(io.operate("o", guarded(Some(b"v1"))).await, "equal value");
    expect_err!(
        io.operate("o", guarded(Some(b"v2"))).await,
        RadosError::CompareFailed(_),
        "other value"
    );
    expect_err!(
        io.operate("o", guarded(Some(b"v"))).await,
        RadosError::CompareFailed(_),
        "prefix of the value"
    );
    expect_err!(
        io.operate("o", guarded(None)).await,
        RadosError::CompareFailed(_),
        "None on a set key"
    );
    let absent = WriteOp::new().compare_omap(b"k".to_vec(), None);
    ok(
        io.operate("o", absent).await,
        "None on an absent key (a prefix of a set one)",
    );
    let empty = WriteOp::new().compare_omap(b"k\0".to_vec(), Some(Vec::new()));
    expect_err!(
        io.operate("o", empty).await,
        RadosError::InvalidArgument(_),
        "Some(empty)"
    );
    finish(rados, pool).await;
}

/// `CompareOmap` on a missing object: the object has no keys, so `None` holds (and the op,
/// applied with a mutation, leaves the object created) and `Some` fails, creating nothing.
/// Whether a guard alone creates the object is left to the backend (librados does not).
pub async fn compare_omap_on_missing_object(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    let op = WriteOp::new()
        .compare_omap(b"k".to_vec(), Some(b"v".to_vec()))
        .omap_set(entries(&[(b"k", b"v2")]));
    expect_err!(
        io.operate("a", op).await,
        RadosError::CompareFailed(_),
        "Some on missing"
    );
    assert!(
        !exists(&*io, "a").await,
        "a failed guard created the object"
    );
    let op = WriteOp::new()
        .compare_omap(b"k".to_vec(), None)
        .omap_set(entries(&[(b"k", b"v")]));
    ok(io.operate("b", op).await, "None on missing, then set");
    assert_eq!(
        omap(&*io, "b").await,
        entries(&[(b"k", b"v")]).into_iter().collect()
    );
    let op = WriteOp::new().compare_omap(b"k".to_vec(), None);
    ok(io.operate("c", op).await, "None on missing, alone");
    finish(rados, pool).await;
}

/// `CompareOmap` compares with the object as it was before the op, wherever it stands (the
/// gateway consumes a write intent with a guard placed after its own omap changes).
pub async fn compare_omap_sees_state_before_op(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    ok(
        io.omap_set("o", entries(&[(b"k", b"v1"), (b"i", b"t")]))
            .await,
        "omap_set",
    );
    let op = WriteOp::new()
        .omap_set(entries(&[(b"k", b"v2")]))
        .compare_omap(b"k".to_vec(), Some(b"v1".to_vec()))
        .omap_remove_keys(vec![b"i".to_vec()])
        .compare_omap(b"i".to_vec(), Some(b"t".to_vec()));
    ok(io.operate("o", op).await, "guards after the steps");
    assert_eq!(
        omap(&*io, "o").await,
        entries(&[(b"k", b"v2")]).into_iter().collect()
    );
    let op = WriteOp::new()
        .omap_set(entries(&[(b"k", b"v3")]))
        .compare_omap(b"k".to_vec(), Some(b"v3".to_vec()));
    expect_err!(
        io.operate("o", op).await,
        RadosError::CompareFailed(_),
        "sees its own set"
    );
    assert_eq!(omap(&*io, "o").await.get(&b"k"[..]), Some(&b"v2".to_vec()));
    finish(rados, pool).await;
}

/// `AssertExists`: passes on an existing object, `NotFound` (nothing applied) on a missing.
pub async fn assert_exists_guard(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    let op = || WriteOp::new().assert_exists().write_full(b"x".to_vec());
    expect_err!(
        io.operate("o", op()).await,
        RadosError::NotFound(_),
        "missing"
    );
    assert!(
        !exists(&*io, "o").await,
        "a failed AssertExists created the object"
    );
    ok(io.create("o", true).await, "create");
    ok(io.operate("o", op()).await, "existing");
    assert_eq!(data(&*io, "o").await, b"x");
    finish(rados, pool).await;
}

/// A failed guard anywhere in an op applies none of its steps: data, xattrs, omap, version.
pub async fn failed_guard_applies_nothing(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    ok(io.write_full("o", b"body").await, "write_full");
    ok(io.set_xattr("o", "etag", b"v1").await, "set_xattr");
    ok(io.omap_set("o", entries(&[(b"k", b"1")])).await, "omap_set");
    let before = version(&*io, "o").await;
    let op = WriteOp::new()
        .write_full(b"new body".to_vec())
        .set_xattr("etag", b"v2".to_vec())
        .omap_set(entries(&[(b"k", b"2"), (b"n", b"3")]))
        .truncate(2)
        .compare_xattr("etag", Comparison::Equal, b"v0".to_vec());
    expect_err!(
        io.operate("o", op).await,
        RadosError::CompareFailed(_),
        "guard fails"
    );
    let op = WriteOp::new()
        .omap_clear()
        .remove_xattr("etag")
        .compare_omap(b"k".to_vec(), Some(b"0".to_vec()));
    expect_err!(
        io.operate("o", op).await,
        RadosError::CompareFailed(_),
        "omap guard fails"
    );
    let op = WriteOp::new().create(true).append(b"!".to_vec());
    expect_err!(
        io.operate("o", op).await,
        RadosError::Exists(_),
        "exclusive create fails"
    );
    let op = WriteOp::new().remove().assert_exists();
    ok(
        io.operate("o", op).await,
        "AssertExists tests the object before the op",
    );
    assert!(!exists(&*io, "o").await);
    ok(io.write_full("o", b"body").await, "write_full");
    ok(io.set_xattr("o", "etag", b"v1").await, "set_xattr");
    ok(io.omap_set("o", entries(&[(b"k", b"1")])).await, "omap_set");
    let before_again = version(&*io, "o").await;
    let op = WriteOp::new().append(b"more".to_vec()).compare_xattr(
        "etag",
        Comparison::Equal,
        b"other".to_vec(),
    );
    expect_err!(
        io.operate("o", op).await,
        RadosError::CompareFailed(_),
        "guard last"
    );
    assert_eq!(data(&*io, "o").await, b"body");
    assert_eq!(ok(io.get_xattr("o", "etag").await, "etag"), b"v1");
    assert_eq!(
        omap(&*io, "o").await,
        entries(&[(b"k", b"1")]).into_iter().collect()
    );
    assert_eq!(version(&*io, "o").await, before_again, "version unchanged");
    assert!(before_again > before);
    finish(rados, pool).await;
}

/// A step failing after others (bad argument, missing object) applies none of the op.
pub async fn failed_step_applies_nothing(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    let op = WriteOp::new()
        .write_full(b"x".to_vec())
        .set_xattr("a", b"1".to_vec())
        .set_xattr("", b"bad".to_vec());
    expect_err!(
        io.operate("new", op).await,
        RadosError::InvalidArgument(_),
        "bad name"
    );
    assert!(!exists(&*io, "new").await, "a failed op created the object");
    ok(io.write_full("o", b"kept").await, "write_full");
    let before = version(&*io, "o").await;
    let op = WriteOp::new()
        .write_full(b"lost".to_vec())
        .remove()
        .omap_clear();
    expect_err!(
        io.operate("o", op).await,
        RadosError::NotFound(_),
        "clear after remove"
    );
    let op = WriteOp::new().append(b"lost".to_vec()).create(true);
    expect_err!(
        io.operate("o", op).await,
        RadosError::Exists(_),
        "exclusive create after a write"
    );
    assert_eq!(data(&*io, "o").await, b"kept");
    assert_eq!(version(&*io, "o").await, before);
    finish(rados, pool).await;
}

/// The steps of an op apply in order.
pub async fn steps_apply_in_order(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    let op = WriteOp::new()
        .write_full(b"abc".to_vec())
        .append(b"def".to_vec())
        .truncate(4)
        .write(6, b"z".to_vec())
        .set_xattr("a", b"1".to_vec())
        .set_xattr("b", b"2".to_vec())
        .remove_xattr("a")
        .omap_set(entries(&[(b"k", b"1"), (b"l", b"2")]))
        .omap_remove_keys(vec![b"k".to_vec()])
        .omap_set(entries(&[(b"k", b"3")]));
    ok(io.operate("o", op).await, "compound op");
    assert_eq!(data(&*io, "o").await, b"abcd\0\0z");
    let xattrs = ok(io.get_xattrs("o").await, "get_xattrs");
    assert_eq!(xattrs.keys().collect::<Vec<_>>(), ["b"]);
    assert_eq!(
        omap(&*io, "o").await,
        entries(&[(b"k", b"3"), (b"l", b"2")]).into_iter().collect()
    );
    let op = WriteOp::new()
        .omap_clear()
        .omap_set(entries(&[(b"m", b"4")]));
    ok(io.operate("o", op).await, "clear, then set");
    assert_eq!(
        omap(&*io, "o").await,
        entries(&[(b"m", b"4")]).into_iter().collect()
    );
    let op = WriteOp::new().create(true).write_full(b"new".to_vec());
    ok(io.operate("p", op).await, "exclusive create, then write");
    assert_eq!(data(&*io, "p").await, b"new");
    finish(rados, pool).await;
}

/// An empty op succeeds and changes nothing, on an existing or a missing object.
pub async fn empty_write_op_changes_nothing(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    ok(
        io.operate("none", WriteOp::new()).await,
        "empty op, missing object",
    );
    assert!(
        !exists(&*io, "none").await,
        "an empty op created the object"
    );
    ok(io.write_full("o", b"x").await, "write_full");
    let before = version(&*io, "o").await;
    ok(io.operate("o", WriteOp::new()).await, "empty op");
    assert_eq!(version(&*io, "o").await, before);
    assert!(WriteOp::new().push(Op::AssertExists).ops()[0].is_guard());
    finish(rados, pool).await;
}
