//! The contract suite: one async function per behaviour the crate docs promise, generic over
//! the backend, so the memory model, the embedded cluster and librados are held to one text.
//!
//! Every case takes a cluster handle and a pool name, creates that pool fresh (size 1, 8 PGs:
//! it runs on a one-OSD cluster too), works in it, and deletes it; it panics on the first
//! difference, saying what was expected. A backend runs them with [`crate::contract_tests!`]
//! (one `#[tokio::test]` per case) or with [`run_all`]. The cases assume nothing the contract
//! leaves open: no listing order, no page sizes beyond "at most `max`", no mtime resolution.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::{
    Comparison, IoCtx, ListCursor, Op, PoolSpec, Rados, RadosError, Result, WriteOp,
    OBJECT_NAME_BYTES_MAX,
};

/// A case's future.
pub type CaseFuture<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// One case of the suite: its name and how to run it on a backend and a pool name.
pub struct Case {
    /// The function's name.
    pub name: &'static str,
    /// Runs it.
    pub run: for<'a> fn(&'a dyn Rados, &'a str) -> CaseFuture<'a>,
}

macro_rules! cases {
    ($($case:ident),* $(,)?) => {
        /// Every case, in the order [`run_all`] runs them.
        pub const CASES: &[Case] = &[$(Case {
            name: stringify!($case),
            run: |rados, pool| Box::pin($case(rados, pool)),
        }),*];
    };
}

cases!(
    pools_create_lookup_list_delete,
    pool_errors,
    pool_delete_removes_its_objects,
    pools_are_isolated,
    write_full_replaces_data,
    write_extends_with_zeros,
    append_creates_and_extends,
    read_ranges_and_past_end,
    large_object_round_trip,
    missing_object_reads_not_found,
    truncate_shrinks_and_grows,
    truncate_missing_object_creates_nothing,
    zero_never_creates_or_extends,
    create_plain_and_exclusive,
    remove_takes_data_xattrs_and_omap,
    stat_reports_size_mtime_version,
    versions_grow_with_every_change,
    xattrs_round_trip,
    xattr_names_are_checked,
    remove_xattr_needs_the_object,
    omap_round_trip,
    omap_keys_are_binary,
    omap_values_are_never_empty,
    omap_on_missing_object,
    omap_paging_reports_more,
    omap_prefix_filter,
    omap_start_after_is_binary,
    compare_xattr_each_comparison,
    compare_xattr_missing_xattr_and_object,
    compare_omap_values_and_absence,
    compare_omap_on_missing_object,
    compare_omap_sees_state_before_op,
    assert_exists_guard,
    failed_guard_applies_nothing,
    failed_step_applies_nothing,
    steps_apply_in_order,
    empty_write_op_changes_nothing,
    object_name_limits,
    listing_empty_pool,
    listing_many_pages,
);

/// Runs every case in turn on `rados`, each in its own pool named `{pool_prefix}{case}`.
pub async fn run_all(rados: &dyn Rados, pool_prefix: &str) {
    for case in CASES {
        let pool = format!("{pool_prefix}{}", case.name);
        (case.run)(rados, &pool).await;
    }
}

/// Generates one `#[tokio::test]` per case of [`CASES`] in the calling module (which needs
/// `tokio` with its macros), plus a test that the list is complete.
///
/// `$backend` is an expression evaluated afresh in each test (it may `.await`) to a value that
/// dereferences to a [`Rados`] implementation and owns whatever must outlive the case (a
/// temporary directory, say): `Arc<MemoryRados>`, `Arc<dyn Rados>`, a struct with `Deref`.
///
/// ```ignore
/// rados::contract_tests!(std::sync::Arc::new(rados::memory::MemoryRados::new()));
/// ```
#[macro_export]
macro_rules! contract_tests {
    ($backend:expr) => {
        $crate::contract_tests!(@cases $backend;
            pools_create_lookup_list_delete,
            pool_errors,
            pool_delete_removes_its_objects,
            pools_are_isolated,
            write_full_replaces_data,
            write_extends_with_zeros,
            append_creates_and_extends,
            read_ranges_and_past_end,
            large_object_round_trip,
            missing_object_reads_not_found,
            truncate_shrinks_and_grows,
            truncate_missing_object_creates_nothing,
            zero_never_creates_or_extends,
            create_plain_and_exclusive,
            remove_takes_data_xattrs_and_omap,
            stat_reports_size_mtime_version,
            versions_grow_with_every_change,
            xattrs_round_trip,
            xattr_names_are_checked,
            remove_xattr_needs_the_object,
            omap_round_trip,
            omap_keys_are_binary,
            omap_values_are_never_empty,
            omap_on_missing_object,
            omap_paging_reports_more,
            omap_prefix_filter,
            omap_start_after_is_binary,
            compare_xattr_each_comparison,
            compare_xattr_missing_xattr_and_object,
            compare_omap_values_and_absence,
            compare_omap_on_missing_object,
            compare_omap_sees_state_before_op,
            assert_exists_guard,
            failed_guard_applies_nothing,
            failed_step_applies_nothing,
            steps_apply_in_order,
            empty_write_op_changes_nothing,
            object_name_limits,
            listing_empty_pool,
            listing_many_pages,
        );
    };
    (@cases $backend:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let backend = $backend;
                let rados: &dyn $crate::Rados = &*backend;
                $crate::contract::$case(rados, concat!("contract-", stringify!($case))).await;
            }
        )*

        #[test]
        fn contract_tests_cover_every_case() {
            let generated: &[&str] = &[$(stringify!($case)),*];
            let all: Vec<&str> = $crate::contract::CASES.iter().map(|case| case.name).collect();
            assert_eq!(generated, all.as_slice(), "contract_tests! lists every case of CASES");
        }
    };
}

/// Fails the case unless `$result` is an `Err` matching `$pattern`.
macro_rules! expect_err {
    ($result:expr, $pattern:pat, $($what:tt)+) => {
        match $result {
            Err($pattern) => {}
            other => panic!(
                "{}: expected Err({}), got {:?}",
                format!($($what)+),
                stringify!($pattern),
                other
            ),
        }
    };
}

/// `pool`, created afresh (a leftover of an earlier run is deleted first).
async fn fresh_pool(rados: &dyn Rados, pool: &str) -> Arc<dyn IoCtx> {
    match rados.pool_delete(pool).await {
        Ok(()) | Err(RadosError::NotFound(_)) => {}
        Err(error) => panic!("deleting a leftover pool {pool:?}: {error}"),
    }
    rados
        .pool_create(spec(pool))
        .await
        .unwrap_or_else(|error| panic!("creating pool {pool:?}: {error}"));
    rados
        .io_ctx(pool)
        .await
        .unwrap_or_else(|error| panic!("io_ctx({pool:?}): {error}"))
}

fn spec(pool: &str) -> PoolSpec {
    PoolSpec::new(pool).with_size(1).with_pg_num(8)
}

async fn finish(rados: &dyn Rados, pool: &str) {
    rados
        .pool_delete(pool)
        .await
        .unwrap_or_else(|error| panic!("deleting pool {pool:?}: {error}"));
}

fn ok<T>(result: Result<T>, what: &str) -> T {
    result.unwrap_or_else(|error| panic!("{what}: {error}"))
}

async fn data(io: &dyn IoCtx, object: &str) -> Vec<u8> {
    ok(
        io.read_full(object).await,
        &format!("read_full({object:?})"),
    )
}

async fn version(io: &dyn IoCtx, object: &str) -> u64 {
    ok(io.stat(object).await, &format!("stat({object:?})")).version
}

async fn exists(io: &dyn IoCtx, object: &str) -> bool {
    match io.stat(object).await {
        Ok(_) => true,
        Err(RadosError::NotFound(_)) => false,
        Err(error) => panic!("stat({object:?}): {error}"),
    }
}

async fn omap(io: &dyn IoCtx, object: &str) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let page = ok(
        io.omap_get_vals(object, None, b"", 1000).await,
        &format!("omap_get_vals({object:?})"),
    );
    assert!(
        !page.more,
        "{object}: more than 1000 omap entries in a test"
    );
    page.entries.into_iter().collect()
}

fn entries(pairs: &[(&[u8], &[u8])]) -> Vec<(Vec<u8>, Vec<u8>)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect()
}

/// Pools: create, look up, list, delete.
pub async fn pools_create_lookup_list_delete(rados: &dyn Rados, pool: &str) {
    let _ = rados.pool_delete(pool).await;
    let created = ok(rados.pool_create(spec(pool)).await, "pool_create");
    assert_eq!(created.name, pool);
    assert_eq!(created.size, 1);
    assert_eq!(created.min_size, 1, "min_size defaults to size - size / 2");
    let found = ok(rados.pool_lookup(pool).await, "pool_lookup");
    assert_eq!((found.id, &found.name), (created.id, &created.name));
    let listed = ok(rados.pool_list().await, "pool_list");
    assert!(
        listed.iter().any(|p| p.id == created.id && p.name == pool),
        "pool_list holds the new pool"
    );
    let io = ok(rados.io_ctx(pool).await, "io_ctx");
    assert_eq!(io.pool().name, pool);
    assert_eq!(io.pool().id, created.id);
    let stats = ok(rados.cluster_stats().await, "cluster_stats");
    assert!(stats.osds >= 1 && stats.osds_up >= 1, "{stats:?}");
    assert!(stats.osds_up <= stats.osds && stats.osds_in <= stats.osds);
    assert!(stats.total_bytes > 0, "{stats:?}");
    finish(rados, pool).await;
    expect_err!(
        rados.pool_lookup(pool).await,
        RadosError::NotFound(_),
        "lookup after delete"
    );
    let listed = ok(rados.pool_list().await, "pool_list");
    assert!(
        !listed.iter().any(|p| p.name == pool),
        "deleted pool listed"
    );
}

/// Pool errors: `Exists`, `NotFound`, `InvalidArgument`.
pub async fn pool_errors(rados: &dyn Rados, pool: &str) {
    fresh_pool(rados, pool).await;
    expect_err!(
        rados.pool_create(spec(pool)).await,
        RadosError::Exists(_),
        "second create"
    );
    let missing = format!("{pool}-missing");
    expect_err!(
        rados.pool_lookup(&missing).await,
        RadosError::NotFound(_),
        "lookup"
    );
    expect_err!(
        rados.io_ctx(&missing).await.map(|io| io.pool().clone()),
        RadosError::NotFound(_),
        "io_ctx"
    );
    expect_err!(
        rados.pool_delete(&missing).await,
        RadosError::NotFound(_),
        "delete"
    );
    let zero = PoolSpec::new(format!("{pool}-size0")).with_size(0);
    expect_err!(
        rados.pool_create(zero).await,
        RadosError::InvalidArgument(_),
        "size 0"
    );
    finish(rados, pool).await;
}

/// Deleting a pool deletes its objects: a pool created again under the name is empty.
pub async fn pool_delete_removes_its_objects(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    ok(io.write_full("o", b"data").await, "write_full");
    finish(rados, pool).await;
    expect_err!(
        rados.io_ctx(pool).await.map(|io| io.pool().clone()),
        RadosError::NotFound(_),
        "io_ctx after delete"
    );
    let io = fresh_pool(rados, pool).await;
    expect_err!(
        io.stat("o").await,
        RadosError::NotFound(_),
        "object of the old pool"
    );
    assert!(ok(io.list_all().await, "list_all").is_empty());
    finish(rados, pool).await;
}

/// One object name in two pools is two objects.
pub async fn pools_are_isolated(rados: &dyn Rados, pool: &str) {
    let other = format!("{pool}-other");
    let first = fresh_pool(rados, pool).await;
    let second = fresh_pool(rados, &other).await;
    ok(first.write_full("same", b"one").await, "write first");
    expect_err!(
        second.stat("same").await,
        RadosError::NotFound(_),
        "other pool"
    );
    ok(second.write_full("same", b"two").await, "write second");
    assert_eq!(data(&*first, "same").await, b"one");
    assert_eq!(data(&*second, "same").await, b"two");
    finish(rados, &other).await;
    assert_eq!(data(&*first, "same").await, b"one");
    finish(rados, pool).await;
}

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

/// Omap: set (creating the object), read all and by keys, remove keys, clear.
pub async fn omap_round_trip(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    let set = entries(&[(b"b", b"2"), (b"a", b"1"), (b"c", b"3")]);
    ok(io.omap_set("o", set).await, "omap_set on a missing object");
    assert_eq!(
        data(&*io, "o").await,
        b"",
        "omap_set creates an empty object"
    );
    let all = omap(&*io, "o").await;
    assert_eq!(
        all,
        entries(&[(b"a", b"1"), (b"b", b"2"), (b"c", b"3")])
            .into_iter()
            .collect()
    );
    let page = ok(io.omap_get_vals("o", None, b"", 10).await, "get_vals");
    let keys: Vec<&[u8]> = page.entries.iter().map(|(k, _)| k.as_slice()).collect();
    assert_eq!(keys, [b"a", b"b", b"c"], "in key order");
    ok(
        io.omap_set("o", entries(&[(b"a", b"one")])).await,
        "overwrite",
    );
    let by_keys = ok(
        io.omap_get_vals_by_keys("o", &[b"a".to_vec(), b"zz".to_vec(), b"c".to_vec()])
            .await,
        "by keys",
    );
    assert_eq!(
        by_keys,
        entries(&[(b"a", b"one"), (b"c", b"3")])
            .into_iter()
            .collect()
    );
    ok(
        io.omap_remove_keys("o", vec![b"a".to_vec(), b"missing".to_vec()])
            .await,
        "remove keys (one missing)",
    );
    assert_eq!(omap(&*io, "o").await.len(), 2);
    ok(io.omap_clear("o").await, "clear");
    assert!(omap(&*io, "o").await.is_empty());
    assert!(
        exists(&*io, "o").await,
        "clearing the omap keeps the object"
    );
    finish(rados, pool).await;
}

/// Omap keys and values are bytes: 0x00 and 0xFF anywhere, ordered bytewise (unsigned).
pub async fn omap_keys_are_binary(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    let keys: [&[u8]; 8] = [
        b"\0",
        b"\0\x01",
        b"a",
        b"a\0b",
        b"a\0c",
        b"a\x01",
        b"\xfex",
        b"\xff\xff",
    ];
    let set: Vec<(Vec<u8>, Vec<u8>)> = keys
        .iter()
        .rev()
        .enumerate()
        .map(|(i, k)| (k.to_vec(), vec![0, 0xff, i as u8]))
        .collect();
    ok(io.omap_set("o", set.clone()).await, "omap_set binary");
    let page = ok(io.omap_get_vals("o", None, b"", 100).await, "get_vals");
    let got: Vec<&[u8]> = page.entries.iter().map(|(k, _)| k.as_slice()).collect();
    assert_eq!(got, keys, "bytewise order, NUL and 0xFF kept");
    let expected: BTreeMap<Vec<u8>, Vec<u8>> = set.into_iter().collect();
    assert_eq!(
        page.entries.into_iter().collect::<BTreeMap<_, _>>(),
        expected
    );
    let wanted = vec![b"a\0b".to_vec(), b"\0".to_vec(), b"a\0".to_vec()];
    let by_keys = ok(
        io.omap_get_vals_by_keys("o", &wanted).await,
        "by binary keys",
    );
    let found: Vec<&Vec<u8>> = by_keys.keys().collect();
    assert_eq!(found, [&b"\0".to_vec(), &b"a\0b".to_vec()]);
    ok(
        io.omap_remove_keys("o", vec![b"a\0b".to_vec()]).await,
        "remove a\\0b",
    );
    let left = omap(&*io, "o").await;
    assert!(!left.contains_key(&b"a\0b"[..]) && left.contains_key(&b"a\0c"[..]));
    assert!(left.contains_key(&b"a"[..]), "removing a\\0b left a alone");
    finish(rados, pool).await;
}

/// Omap values are never empty: an `OmapSet` with one is `InvalidArgument`, applying nothing.
pub async fn omap_values_are_never_empty(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    let set = entries(&[(b"a", b"1"), (b"b", b"")]);
    expect_err!(
        io.omap_set("o", set).await,
        RadosError::InvalidArgument(_),
        "empty value"
    );
    assert!(
        !exists(&*io, "o").await,
        "an invalid omap_set created the object"
    );
    ok(io.omap_set("o", entries(&[(b"a", b"1")])).await, "omap_set");
    let op = WriteOp::new()
        .write_full(b"x".to_vec())
        .omap_set(entries(&[(b"c", b"")]));
    expect_err!(
        io.operate("o", op).await,
        RadosError::InvalidArgument(_),
        "in an op"
    );
    assert_eq!(data(&*io, "o").await, b"", "nothing applied");
    finish(rados, pool).await;
}

/// Omap removals on a missing object are `NotFound` (Ceph's) and create nothing.
pub async fn omap_on_missing_object(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    let keys = vec![b"k".to_vec()];
    expect_err!(
        io.omap_remove_keys("none", keys.clone()).await,
        RadosError::NotFound(_),
        "rm"
    );
    expect_err!(
        io.omap_clear("none").await,
        RadosError::NotFound(_),
        "clear"
    );
    let op = WriteOp::new().omap_remove_keys(keys);
    expect_err!(
        io.operate("none", op).await,
        RadosError::NotFound(_),
        "rm step"
    );
    let op = WriteOp::new().omap_clear();
    expect_err!(
        io.operate("none", op).await,
        RadosError::NotFound(_),
        "clear step"
    );
    assert!(!exists(&*io, "none").await);
    finish(rados, pool).await;
}

/// Paging: at most `max` entries a page, `more` exactly when an entry follows.
pub async fn omap_paging_reports_more(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    let all: Vec<(Vec<u8>, Vec<u8>)> = (0..250)
        .map(|i| {
            (
                format!("key-{i:04}").into_bytes(),
                format!("{i}").into_bytes(),
            )
        })
        .collect();
    ok(io.omap_set("o", all.clone()).await, "omap_set 250");
    let mut seen = Vec::new();
    let mut pages = 0;
    loop {
        let after = seen.last().map(|(k, _): &(Vec<u8>, Vec<u8>)| k.clone());
        let page = ok(
            io.omap_get_vals("o", after.as_deref(), b"", 100).await,
            "page",
        );
        assert!(page.entries.len() <= 100, "a page holds at most max");
        pages += 1;
        assert!(pages <= 250, "paging does not end");
        let more = page.more;
        seen.extend(page.entries);
        assert_eq!(
            more,
            seen.len() < all.len(),
            "more after {} entries",
            seen.len()
        );
        if !more {
            break;
        }
    }
    assert_eq!(seen, all, "pages concatenate to the omap, in order");
    let exact = ok(io.omap_get_vals("o", None, b"", 250).await, "max = count");
    assert_eq!((exact.entries.len(), exact.more), (250, false));
    let one_short = ok(
        io.omap_get_vals("o", None, b"", 249).await,
        "max = count - 1",
    );
    assert_eq!((one_short.entries.len(), one_short.more), (249, true));
    let after_last = ok(
        io.omap_get_vals("o", Some(b"key-0249"), b"", 10).await,
        "after last",
    );
    assert_eq!((after_last.entries.len(), after_last.more), (0, false));
    let between = ok(
        io.omap_get_vals("o", Some(b"key-0100a"), b"", 1).await,
        "not a key",
    );
    assert_eq!(
        between.entries[0].0, b"key-0101",
        "start_after need not be a key"
    );
    finish(rados, pool).await;
}

/// The prefix filter, alone and with `start_after` before, inside and after its range.
pub async fn omap_prefix_filter(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    let keys: [&[u8]; 6] = [b"a", b"ab", b"abc", b"abd", b"ac", b"b"];
    let set: Vec<(Vec<u8>, Vec<u8>)> = keys.iter().map(|k| (k.to_vec(), b"v".to_vec())).collect();
    ok(io.omap_set("o", set).await, "omap_set");
    let get = |after: Option<&'static [u8]>, prefix: &'static [u8], max| {
        let io = io.clone();
        async move {
            let page = ok(io.omap_get_vals("o", after, prefix, max).await, "get_vals");
            let keys: Vec<Vec<u8>> = page.entries.into_iter().map(|(k, _)| k).collect();
            (keys, page.more)
        }
    };
    let owned = |keys: &[&[u8]]| keys.iter().map(|k| k.to_vec()).collect::<Vec<_>>();
    assert_eq!(
        get(None, b"ab", 10).await,
        (owned(&[b"ab", b"abc", b"abd"]), false)
    );
    assert_eq!(get(None, b"ab", 2).await, (owned(&[b"ab", b"abc"]), true));
    assert_eq!(
        get(Some(b"abc"), b"ab", 10).await,
        (owned(&[b"abd"]), false)
    );
    assert_eq!(
        get(Some(b"a"), b"ab", 10).await,
        (owned(&[b"ab", b"abc", b"abd"]), false)
    );
    assert_eq!(get(Some(b"abd"), b"ab", 10).await, (owned(&[]), false));
    assert_eq!(get(Some(b"b"), b"ab", 10).await, (owned(&[]), false));
    assert_eq!(get(None, b"x", 10).await, (owned(&[]), false));
    assert_eq!(get(None, b"", 10).await, (owned(&keys), false));
    assert_eq!(get(Some(b"aa"), b"", 10).await, (owned(&keys[1..]), false));
    finish(rados, pool).await;
}

/// `start_after` and the prefix are bytes too: NUL and 0xFF in them page correctly.
pub async fn omap_start_after_is_binary(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    let keys: [&[u8]; 7] = [
        b"\0", b"\0\0", b"\0a", b"k\0a", b"k\0b", b"k\x01", b"\xff\0",
    ];
    let set: Vec<(Vec<u8>, Vec<u8>)> = keys.iter().map(|k| (k.to_vec(), b"v".to_vec())).collect();
    ok(io.omap_set("o", set).await, "omap_set");
    let mut seen: Vec<Vec<u8>> = Vec::new();
    loop {
        let after = seen.last().cloned();
        let page = ok(
            io.omap_get_vals("o", after.as_deref(), b"", 1).await,
            "page of 1",
        );
        seen.extend(page.entries.into_iter().map(|(k, _)| k));
        assert!(seen.len() <= keys.len(), "paging repeats keys: {seen:?}");
        if !page.more {
            break;
        }
    }
    let expected: Vec<Vec<u8>> = keys.iter().map(|k| k.to_vec()).collect();
    assert_eq!(seen, expected, "one key a page, after keys holding NUL");
    let prefixed = |prefix: &'static [u8], after: Option<&'static [u8]>| {
        let io = io.clone();
        async move {
            let page = ok(io.omap_get_vals("o", after, prefix, 10).await, "prefix");
            page.entries.into_iter().map(|(k, _)| k).collect::<Vec<_>>()
        }
    };
    assert_eq!(
        prefixed(b"k\0", None).await,
        [b"k\0a".to_vec(), b"k\0b".to_vec()]
    );
    assert_eq!(prefixed(b"k\0", Some(b"k\0a")).await, [b"k\0b".to_vec()]);
    assert_eq!(prefixed(b"\0", None).await.len(), 3);
    assert_eq!(prefixed(b"\xff", None).await, [b"\xff\0".to_vec()]);
    finish(rados, pool).await;
}

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

/// Names: 1..=2048 bytes without NUL (any other character goes); the rest `InvalidArgument`.
pub async fn object_name_limits(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    assert_eq!(
        OBJECT_NAME_BYTES_MAX, 2048,
        "Ceph's osd_max_object_name_len"
    );
    let longest = "n".repeat(OBJECT_NAME_BYTES_MAX);
    let multibyte = "é".repeat(OBJECT_NAME_BYTES_MAX / 2);
    let odd = [
        ".hidden",
        "_under",
        "dir/sub/file",
        "with space",
        "ünïcode ☃",
        "a\u{1}b",
        "%00",
    ];
    let good: Vec<&str> = [longest.as_str(), multibyte.as_str()]
        .into_iter()
        .chain(odd)
        .collect();
    for name in &good {
        ok(
            io.write_full(name, name.as_bytes()).await,
            &format!("write {} bytes", name.len()),
        );
        assert_eq!(data(&*io, name).await, name.as_bytes());
    }
    let listed: BTreeSet<String> = ok(io.list_all().await, "list_all").into_iter().collect();
    let expected: BTreeSet<String> = good.iter().map(|n| n.to_string()).collect();
    assert_eq!(listed, expected, "every name lists as written");
    let too_long = "n".repeat(OBJECT_NAME_BYTES_MAX + 1);
    for name in [too_long.as_str(), "", "a\0b"] {
        let what = format!("name of {} bytes", name.len());
        expect_err!(
            io.write_full(name, b"x").await,
            RadosError::InvalidArgument(_),
            "write {what}"
        );
        expect_err!(
            io.stat(name).await,
            RadosError::InvalidArgument(_),
            "stat {what}"
        );
        expect_err!(
            io.read_full(name).await,
            RadosError::InvalidArgument(_),
            "read {what}"
        );
    }
    finish(rados, pool).await;
}

/// An empty pool lists nothing and ends.
pub async fn listing_empty_pool(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    let page = ok(io.list(&ListCursor::start(), 10).await, "list");
    assert!(page.objects.is_empty());
    assert!(page.next.is_none(), "an empty listing ends");
    assert!(ok(io.list_all().await, "list_all").is_empty());
    finish(rados, pool).await;
}

/// Listing many objects through small pages: each page at most `max`, every object exactly
/// once, in no promised order; removed objects no longer listed.
pub async fn listing_many_pages(rados: &dyn Rados, pool: &str) {
    let io = fresh_pool(rados, pool).await;
    let names: Vec<String> = (0..300)
        .map(|i| format!("object-{i:03}-{}", i * 7919 % 1000))
        .collect();
    for name in &names {
        ok(io.create(name, true).await, name);
    }
    let listed = list_in_pages(&*io, 7).await;
    assert_eq!(listed.len(), names.len(), "each object once");
    let expected: BTreeSet<String> = names.iter().cloned().collect();
    assert_eq!(listed.iter().cloned().collect::<BTreeSet<_>>(), expected);
    let all: BTreeSet<String> = ok(io.list_all().await, "list_all").into_iter().collect();
    assert_eq!(all, expected);
    for name in names.iter().step_by(3) {
        ok(io.remove(name).await, name);
    }
    let left: BTreeSet<String> = list_in_pages(&*io, 50).await.into_iter().collect();
    let expected: BTreeSet<String> = names
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 3 != 0)
        .map(|(_, n)| n.clone())
        .collect();
    assert_eq!(left, expected, "removed objects are not listed");
    finish(rados, pool).await;
}

/// Every name, through pages of `max`, checking each page's bound and that no name repeats.
async fn list_in_pages(io: &dyn IoCtx, max: usize) -> Vec<String> {
    let mut cursor = ListCursor::start();
    let mut names = Vec::new();
    let mut seen = BTreeSet::new();
    for _ in 0..10_000 {
        let page = ok(io.list(&cursor, max).await, "list");
        assert!(
            page.objects.len() <= max,
            "page of {} > max {max}",
            page.objects.len()
        );
        for name in page.objects {
            assert!(seen.insert(name.clone()), "{name} listed twice");
            names.push(name);
        }
        match page.next {
            Some(next) => cursor = next,
            None => return names,
        }
    }
    panic!("listing did not end after 10000 pages");
}
