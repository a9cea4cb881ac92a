//! The RADOS API on the embedded cluster: every operation, guards, errors, listing.

mod common;

use std::sync::Arc;

use cluster::{Cluster, ClusterOptions};
use rados::{Comparison, IoCtx, ListCursor, PoolSpec, Rados, RadosError, WriteOp};

async fn cluster(dir: &std::path::Path) -> Cluster {
    let options = ClusterOptions {
        background: false,
        ..ClusterOptions::default()
    };
    Cluster::create(dir, common::small_config(3, 2, "mem", 3), options)
        .await
        .expect("cluster starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn object_operations_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster(dir.path()).await;
    let pool: Arc<dyn IoCtx> = cluster.io_ctx("data").await.unwrap();

    pool.write_full("a", b"hello").await.unwrap();
    assert_eq!(pool.read_full("a").await.unwrap(), b"hello");
    pool.append("a", b" world").await.unwrap();
    pool.write("a", 0, b"J").await.unwrap();
    assert_eq!(pool.read_full("a").await.unwrap(), b"Jello world");
    assert_eq!(pool.read("a", 6, 3).await.unwrap(), b"wor");
    let stat = pool.stat("a").await.unwrap();
    assert_eq!(stat.size_bytes, 11);
    pool.truncate("a", 4).await.unwrap();
    let after = pool.stat("a").await.unwrap();
    assert_eq!(after.size_bytes, 4);
    assert!(after.version > stat.version, "versions grow");

    pool.set_xattr("a", "etag", b"v1").await.unwrap();
    assert_eq!(pool.get_xattr("a", "etag").await.unwrap(), b"v1");
    let xattrs = pool.get_xattrs("a").await.unwrap();
    assert_eq!(xattrs.len(), 1, "the version xattr is hidden: {xattrs:?}");
    assert!(matches!(
        pool.set_xattr("a", "_strata.v", b"x").await,
        Err(RadosError::InvalidArgument(_))
    ));
    pool.remove_xattr("a", "etag").await.unwrap();
    assert!(matches!(
        pool.get_xattr("a", "etag").await,
        Err(RadosError::NotFound(_))
    ));

    let entries: Vec<(Vec<u8>, Vec<u8>)> = (0..20u8)
        .map(|i| (format!("key{i:02}").into_bytes(), vec![i]))
        .chain([(b"other".to_vec(), b"o".to_vec())])
        .collect();
    pool.omap_set("index", entries).await.unwrap();
    let page = pool.omap_get_vals("index", None, b"key", 5).await.unwrap();
    assert_eq!(page.entries.len(), 5);
    assert!(page.more);
    assert_eq!(page.entries[0].0, b"key00");
    let rest = pool
        .omap_get_vals("index", Some(b"key04"), b"key", 100)
        .await
        .unwrap();
    assert_eq!(rest.entries.len(), 15);
    assert!(!rest.more);
    let all = pool.omap_get_vals("index", None, b"", 100).await.unwrap();
    assert_eq!(all.entries.len(), 21);
    pool.omap_remove_keys("index", vec![b"key00".to_vec()])
        .await
        .unwrap();
    let some = pool
        .omap_get_vals_by_keys("index", &[b"key00".to_vec(), b"key01".to_vec()])
        .await
        .unwrap();
    assert_eq!(some.len(), 1);
    pool.omap_clear("index").await.unwrap();
    assert!(pool
        .omap_get_vals("index", None, b"", 10)
        .await
        .unwrap()
        .entries
        .is_empty());

    pool.remove("a").await.unwrap();
    assert!(matches!(
        pool.read_full("a").await,
        Err(RadosError::NotFound(_))
    ));
    assert!(matches!(
        pool.remove("a").await,
        Err(RadosError::NotFound(_))
    ));
    drop(pool);
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compound_operations_are_guarded_and_atomic() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster(dir.path()).await;
    let pool = cluster.pool("data").unwrap();

    pool.create("o", true).await.unwrap();
    assert!(matches!(
        pool.create("o", true).await,
        Err(RadosError::Exists(_))
    ));
    pool.create("o", false).await.unwrap();
    assert!(matches!(
        pool.operate(
            "missing",
            WriteOp::new().assert_exists().write_full(b"x".to_vec())
        )
        .await,
        Err(RadosError::NotFound(_))
    ));
    assert!(matches!(
        pool.stat("missing").await,
        Err(RadosError::NotFound(_))
    ));

    let first = WriteOp::new()
        .compare_xattr("etag", Comparison::Equal, b"")
        .write_full(b"body-1".to_vec())
        .set_xattr("etag", b"1".to_vec())
        .omap_set(vec![(b"k".to_vec(), b"v".to_vec())]);
    pool.operate("o", first).await.unwrap();
    let stale = WriteOp::new()
        .compare_xattr("etag", Comparison::Equal, b"0")
        .write_full(b"never".to_vec());
    assert!(matches!(
        pool.operate("o", stale).await,
        Err(RadosError::CompareFailed(_))
    ));
    assert_eq!(pool.read_full("o").await.unwrap(), b"body-1");
    let swap = WriteOp::new()
        .compare_xattr("etag", Comparison::Equal, b"1")
        .remove()
        .create(true)
        .append(b"fresh".to_vec());
    pool.operate("o", swap).await.unwrap();
    assert_eq!(pool.read_full("o").await.unwrap(), b"fresh");
    assert!(pool.get_xattrs("o").await.unwrap().is_empty());
    assert!(matches!(
        pool.operate("bad\0name", WriteOp::new().create(false))
            .await,
        Err(RadosError::InvalidArgument(_))
    ));
    drop(pool);
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn omap_compare_guards_a_read_modify_write_of_one_key() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster(dir.path()).await;
    let pool = cluster.pool("data").unwrap();
    let set = |value: &[u8]| vec![(b"key".to_vec(), value.to_vec())];

    // "Absent" holds on a missing object and on a missing key, and only there.
    pool.operate(
        "index",
        WriteOp::new()
            .compare_omap(b"key".to_vec(), None)
            .omap_set(set(b"v1")),
    )
    .await
    .unwrap();
    let again = WriteOp::new()
        .compare_omap(b"key".to_vec(), None)
        .omap_set(set(b"v2"));
    assert!(matches!(
        pool.operate("index", again).await,
        Err(RadosError::CompareFailed(_))
    ));
    // A stale expected value writes nothing, not even the other steps of the op.
    let stale = WriteOp::new()
        .compare_omap(b"key".to_vec(), Some(b"v0".to_vec()))
        .omap_set(set(b"v2"))
        .write_full(b"never".to_vec());
    assert!(matches!(
        pool.operate("index", stale).await,
        Err(RadosError::CompareFailed(_))
    ));
    let read = |keys: &[&[u8]]| {
        let keys: Vec<Vec<u8>> = keys.iter().map(|k| k.to_vec()).collect();
        let pool = pool.clone();
        async move { pool.omap_get_vals_by_keys("index", &keys).await.unwrap() }
    };
    assert_eq!(read(&[b"key"]).await[&b"key".to_vec()], b"v1");
    assert_eq!(pool.read_full("index").await.unwrap(), b"");
    let current = WriteOp::new()
        .compare_omap(b"key".to_vec(), Some(b"v1".to_vec()))
        .omap_remove_keys(vec![b"key".to_vec()]);
    pool.operate("index", current).await.unwrap();
    assert!(read(&[b"key"]).await.is_empty());
    drop(pool);
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pools_and_listing() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster(dir.path()).await;
    let info = cluster
        .pool_create(
            PoolSpec::new("fast")
                .with_device_class("ssd")
                .with_pg_num(8),
        )
        .await
        .unwrap();
    assert_eq!(info.crush_rule, "replicated_ssd");
    assert!(matches!(
        cluster.pool_create(PoolSpec::new("fast")).await,
        Err(RadosError::Exists(_))
    ));
    assert!(matches!(
        cluster.pool_create(PoolSpec::new("big").with_size(4)).await,
        Err(RadosError::InvalidArgument(_))
    ));
    assert!(matches!(
        cluster
            .pool_create(PoolSpec::new("x").with_device_class("tape"))
            .await,
        Err(RadosError::InvalidArgument(_))
    ));
    let names: Vec<String> = cluster
        .pool_list()
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(names, ["data", "fast"]);

    let pool = cluster.io_ctx("fast").await.unwrap();
    for i in 0..50 {
        pool.write_full(&format!("obj{i}"), &[i as u8; 100])
            .await
            .unwrap();
    }
    // Every replica of the ssd pool is on an ssd OSD (id % 2 == 0 in this layout).
    let placement = cluster.locate("fast", "obj1").unwrap();
    assert_eq!(placement.acting.len(), 3);
    assert!(
        placement.acting.iter().all(|osd| osd % 2 == 0),
        "{placement:?}"
    );
    let mut listed = Vec::new();
    let mut cursor = ListCursor::start();
    loop {
        let page = pool.list(&cursor, 7).await.unwrap();
        assert!(page.objects.len() <= 7);
        listed.extend(page.objects);
        match page.next {
            Some(next) => cursor = next,
            None => break,
        }
    }
    listed.sort();
    let mut expected: Vec<String> = (0..50).map(|i| format!("obj{i}")).collect();
    expected.sort();
    assert_eq!(listed, expected);
    let stats = cluster.cluster_stats().await.unwrap();
    assert_eq!(stats.objects, 50);
    assert_eq!(stats.osds, 6);
    // Stored once (100 B per object), allocated on every replica (one 4 KiB unit each).
    let fast = stats.pools.iter().find(|p| p.name == "fast").unwrap();
    assert_eq!(
        (fast.objects, fast.stored_bytes, fast.allocated_bytes),
        (50, 50 * 100, 3 * 50 * 4096)
    );
    assert!(
        fast.metadata_bytes > 3 * 50 * 40,
        "one onode record per replica"
    );
    let data = stats.pools.iter().find(|p| p.name == "data").unwrap();
    assert_eq!((data.stored_bytes, data.allocated_bytes), (0, 0));

    cluster.pool_delete("fast").await.unwrap();
    assert!(matches!(
        pool.read_full("obj1").await,
        Err(RadosError::NotFound(_))
    ));
    assert!(matches!(
        cluster.io_ctx("fast").await.err(),
        Some(RadosError::NotFound(_))
    ));
    // Recovery removes the deleted pool's objects from the stores.
    assert!(cluster.recover(5).await.unwrap());
    for osd in 0..6 {
        let statfs = cluster.osd(osd).unwrap().store().statfs();
        assert_eq!(statfs.objects, 0, "osd.{osd}");
    }
    drop(pool);
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_to_one_object_leave_identical_replicas() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster(dir.path()).await;
    let pool = cluster.pool("data").unwrap();
    let mut tasks = Vec::new();
    for writer in 0..8u8 {
        let pool = pool.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..25u8 {
                pool.append("log", &[writer; 100]).await.unwrap();
                pool.omap_set("log", vec![(vec![writer, i], vec![i])])
                    .await
                    .unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let data = pool.read_full("log").await.unwrap();
    assert_eq!(data.len(), 8 * 25 * 100);
    for chunk in data.chunks(100) {
        assert!(
            chunk.iter().all(|&b| b == chunk[0]),
            "appends never interleave"
        );
    }
    let report = cluster.scrub(None, false).await.unwrap();
    assert!(report.is_clean(), "{report:?}");
    drop(pool);
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statistics_count_osd_load_and_object_accesses() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster(dir.path()).await;
    let pool = cluster.pool("data").unwrap();
    let _ = cluster.take_stats_period();
    for _ in 0..5 {
        pool.write_full("hot", &[1u8; 4096]).await.unwrap();
        pool.read_full("hot").await.unwrap();
    }
    pool.write_full("cold", b"x").await.unwrap();
    let period = cluster.take_stats_period();
    let hot = period.access.objects[&(1, "hot".to_string())];
    assert_eq!((hot.reads, hot.writes), (5, 5));
    assert_eq!(hot.write_bytes, 5 * 4096);
    assert_eq!(period.access.objects[&(1, "cold".to_string())].writes, 1);
    let primary = cluster.locate("data", "hot").unwrap().primary().unwrap();
    let load = period.osds.iter().find(|osd| osd.id == primary).unwrap();
    assert_eq!(load.ops.read.ops, 5);
    assert!(load.ops.write.ops >= 5);
    assert!(load.device.write.ops > 0);
    let writes: u64 = period.osds.iter().map(|osd| osd.ops.write.ops).sum();
    assert_eq!(writes, 6 * 3, "every write reaches 3 replicas");
    let next = cluster.take_stats_period();
    assert!(next.access.objects.is_empty());
    assert!(next.osds.iter().all(|osd| osd.ops.read.ops == 0));
    drop(pool);
    cluster.shutdown().await.unwrap();
}

/// With `poll_while_busy` a task yields on the runtime while operations are in flight; on a
/// one-thread runtime, where it shares the only thread with them, they still complete, and
/// every write reads back.
#[tokio::test(flavor = "current_thread")]
async fn polling_while_busy_leaves_operations_to_complete() {
    let dir = tempfile::tempdir().unwrap();
    let options = ClusterOptions {
        background: false,
        poll_while_busy: true,
        ..ClusterOptions::default()
    };
    let cluster = Cluster::create(dir.path(), common::small_config(3, 2, "mem", 3), options)
        .await
        .expect("cluster starts");
    let pool: Arc<dyn IoCtx> = cluster.io_ctx("data").await.unwrap();
    let mut writes = tokio::task::JoinSet::new();
    for i in 0..64u32 {
        let pool = Arc::clone(&pool);
        writes.spawn(async move {
            pool.write_full(&format!("object-{i}"), &i.to_le_bytes())
                .await
        });
    }
    while let Some(result) = writes.join_next().await {
        result.unwrap().unwrap();
    }
    for i in 0..64u32 {
        assert_eq!(
            pool.read_full(&format!("object-{i}")).await.unwrap(),
            i.to_le_bytes()
        );
    }
    cluster.shutdown().await.unwrap();
}
