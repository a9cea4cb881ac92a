//! The Ceph backend on a real Ceph (a fresh minicluster for this binary): objects, guards,
//! omap, listing and pools, with a test for every way librados differs from the `rados`
//! contract (see the crate docs).

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use rados::{Comparison, IoCtx, ListCursor, PoolSpec, Rados, RadosError, WriteOp};

/// A fresh pool of 3 replicas for one test, or `None` to skip.
async fn pool(name: &str) -> Option<(ceph_backend::CephRados, Arc<dyn IoCtx>)> {
    let rados = common::connect().await?;
    rados
        .pool_create(PoolSpec::new(name).with_pg_num(8))
        .await
        .expect("create the test's pool");
    let io = rados.io_ctx(name).await.expect("open the test's pool");
    Some((rados, io))
}

#[tokio::test]
async fn objects_round_trip_with_versions_from_their_own_operations() {
    let Some((_rados, io)) = pool("objects").await else {
        return;
    };
    io.write_full("a", b"hello").await.expect("write_full");
    assert_eq!(io.read_full("a").await.expect("read"), b"hello");
    assert_eq!(io.read("a", 1, 3).await.expect("read"), b"ell");
    assert_eq!(io.read("a", 9, 3).await.expect("read"), b"");
    assert_eq!(io.read("a", 1, 0).await.expect("read nothing"), b"");
    assert!(matches!(
        io.read("none", 0, 0).await,
        Err(RadosError::NotFound(_))
    ));
    let first = io.stat("a").await.expect("stat");
    assert_eq!(first.size_bytes, 5);
    assert!(first.mtime_ns > 0);
    io.append("a", b"!").await.expect("append");
    io.write("a", 8, b"x").await.expect("write beyond the end");
    assert_eq!(io.read_full("a").await.expect("read"), b"hello!\0\0x");
    assert!(io.stat("a").await.expect("stat").version > first.version);
    // Larger than the first read's guess: read again with the size the stat gave.
    let big: Vec<u8> = (0..6 << 20).map(|index: u32| (index % 251) as u8).collect();
    io.write_full("big", &big).await.expect("write 6 MiB");
    assert_eq!(io.read_full("big").await.expect("read 6 MiB"), big);
    assert!(matches!(
        io.create("a", true).await,
        Err(RadosError::Exists(_))
    ));
    io.create("a", false).await.expect("non-exclusive create");
    io.remove("a").await.expect("remove");
    assert!(matches!(io.stat("a").await, Err(RadosError::NotFound(_))));
    assert!(matches!(
        io.read_full("a").await,
        Err(RadosError::NotFound(_))
    ));
    assert!(matches!(io.remove("a").await, Err(RadosError::NotFound(_))));
    io.set_xattr("x", "etag", b"1")
        .await
        .expect("set_xattr creates");
    assert_eq!(io.get_xattr("x", "etag").await.expect("get_xattr"), b"1");
    assert!(matches!(
        io.get_xattr("x", "nope").await,
        Err(RadosError::NotFound(_))
    ));
    assert!(matches!(
        io.set_xattr("x", "_strata.v", b"1").await,
        Err(RadosError::InvalidArgument(_))
    ));

    // Versions come from each operation's completion: stats racing on one ioctx never see
    // another object's version (the ioctx-wide "last version" would).
    for _ in 0..5 {
        io.write_full("busy", b"v").await.expect("write");
    }
    io.write_full("quiet", b"v").await.expect("write");
    let busy = io.stat("busy").await.expect("stat").version;
    let quiet = io.stat("quiet").await.expect("stat").version;
    assert_ne!(busy, quiet);
    let mut stats = Vec::new();
    for index in 0..64 {
        let io = io.clone();
        let name = if index % 2 == 0 { "busy" } else { "quiet" };
        stats.push(tokio::spawn(async move { (name, io.stat(name).await) }));
    }
    for stat in stats {
        let (name, stat) = stat.await.expect("join");
        let expected = if name == "busy" { busy } else { quiet };
        assert_eq!(stat.expect("stat").version, expected, "{name}");
    }
}

#[tokio::test]
async fn compare_omap_tells_absent_keys_and_creates_nothing_when_a_guard_fails() {
    let Some((_rados, io)) = pool("omapguard").await else {
        return;
    };
    let set = |value: &[u8]| vec![(b"k".to_vec(), value.to_vec())];
    // Absent key on a missing object: passes, and the op's create step makes the object.
    io.operate(
        "o",
        WriteOp::new()
            .compare_omap(b"k".to_vec(), None)
            .omap_set(set(b"v1")),
    )
    .await
    .expect("absent key on a missing object");
    // Present now: the same guard fails and nothing changes.
    let failed = io
        .operate(
            "o",
            WriteOp::new()
                .compare_omap(b"k".to_vec(), None)
                .omap_set(set(b"v2")),
        )
        .await;
    assert!(
        matches!(failed, Err(RadosError::CompareFailed(_))),
        "{failed:?}"
    );
    io.operate(
        "o",
        WriteOp::new()
            .compare_omap(b"k".to_vec(), Some(b"v1".to_vec()))
            .omap_set(set(b"v2")),
    )
    .await
    .expect("value matches");
    let wrong = io
        .operate(
            "o",
            WriteOp::new()
                .compare_omap(b"k".to_vec(), Some(b"v1".to_vec()))
                .omap_set(set(b"v3")),
        )
        .await;
    assert!(
        matches!(wrong, Err(RadosError::CompareFailed(_))),
        "{wrong:?}"
    );
    let values = io
        .omap_get_vals_by_keys("o", &[b"k".to_vec()])
        .await
        .expect("get");
    assert_eq!(values.get(&b"k"[..]).map(Vec::as_slice), Some(&b"v2"[..]));
    // A failing guard on a missing object: the create step does not take effect.
    let missing = io
        .operate(
            "missing",
            WriteOp::new()
                .compare_omap(b"k".to_vec(), Some(b"v".to_vec()))
                .write_full(b"body".to_vec()),
        )
        .await;
    assert!(
        matches!(missing, Err(RadosError::CompareFailed(_))),
        "{missing:?}"
    );
    assert!(matches!(
        io.stat("missing").await,
        Err(RadosError::NotFound(_))
    ));
    // Guard-only operations never create the object.
    io.operate("missing", WriteOp::new().compare_omap(b"k".to_vec(), None))
        .await
        .expect("absent key holds on a missing object");
    let guard_only = io
        .operate(
            "missing",
            WriteOp::new().compare_omap(b"k".to_vec(), Some(b"v".to_vec())),
        )
        .await;
    assert!(
        matches!(guard_only, Err(RadosError::CompareFailed(_))),
        "{guard_only:?}"
    );
    assert!(matches!(
        io.stat("missing").await,
        Err(RadosError::NotFound(_))
    ));
    // Empty values are refused: Ceph could not tell them from absent keys.
    let empty = io.omap_set("o", set(b"")).await;
    assert!(
        matches!(empty, Err(RadosError::InvalidArgument(_))),
        "{empty:?}"
    );
}

#[tokio::test]
async fn compare_xattr_compares_stored_with_given() {
    let Some((_rados, io)) = pool("xattrguard").await else {
        return;
    };
    io.set_xattr("o", "n", b"5").await.expect("set");
    let check = |comparison, value: &'static [u8]| {
        let io = io.clone();
        async move {
            io.operate(
                "o",
                WriteOp::new()
                    .compare_xattr("n", comparison, value.to_vec())
                    .set_xattr("hit", b"1".to_vec()),
            )
            .await
        }
    };
    // stored "5" <op> given
    for (comparison, given, holds) in [
        (Comparison::Greater, &b"3"[..], true),
        (Comparison::Greater, b"7", false),
        (Comparison::Less, b"7", true),
        (Comparison::Less, b"3", false),
        (Comparison::GreaterOrEqual, b"5", true),
        (Comparison::LessOrEqual, b"4", false),
        (Comparison::Equal, b"5", true),
        (Comparison::NotEqual, b"5", false),
    ] {
        let result = check(comparison, given).await;
        if holds {
            result.unwrap_or_else(|error| panic!("5 {comparison:?} {given:?}: {error}"));
        } else {
            assert!(
                matches!(result, Err(RadosError::CompareFailed(_))),
                "5 {comparison:?} {given:?}: {result:?}"
            );
        }
    }
    // A missing xattr compares as empty on an existing object; a missing object is
    // NotFound (the contract, as Ceph's cmpxattr), and nothing is created.
    io.operate(
        "o",
        WriteOp::new()
            .compare_xattr("absent", Comparison::Equal, b"".to_vec())
            .set_xattr("absent", b"1".to_vec()),
    )
    .await
    .expect("missing xattr is empty");
    for (object, given) in [("new", &b""[..]), ("other", &b"x"[..])] {
        let failed = io
            .operate(
                object,
                WriteOp::new()
                    .compare_xattr("etag", Comparison::Equal, given.to_vec())
                    .write_full(b"b".to_vec()),
            )
            .await;
        assert!(matches!(failed, Err(RadosError::NotFound(_))), "{failed:?}");
        assert!(matches!(
            io.stat(object).await,
            Err(RadosError::NotFound(_))
        ));
    }
}

#[tokio::test]
async fn omap_pages_keys_holding_nul_bytes() {
    let Some((_rados, io)) = pool("omapnul").await else {
        return;
    };
    // Index-like keys: a NUL separator, and bytes 0x00/0x01 inside.
    let keys: Vec<Vec<u8>> = (0..2500u32)
        .map(|index| {
            let mut key = b"bucket\0".to_vec();
            key.extend_from_slice(format!("{index:05}").as_bytes());
            if index % 7 == 0 {
                key.extend_from_slice(b"\0\x01v");
            }
            key
        })
        .collect();
    for chunk in keys.chunks(500) {
        let entries = chunk.iter().map(|key| (key.clone(), key.clone())).collect();
        io.omap_set("index", entries).await.expect("omap_set");
    }
    io.omap_set("index", vec![(b"other".to_vec(), b"o".to_vec())])
        .await
        .expect("set");
    let mut sorted = keys.clone();
    sorted.sort();
    // Paging by the last key (which holds NUL) visits every key once, in order.
    let mut seen: Vec<Vec<u8>> = Vec::new();
    let mut after: Option<Vec<u8>> = None;
    loop {
        let page = io
            .omap_get_vals("index", after.as_deref(), b"bucket\0", 300)
            .await
            .expect("page");
        for (key, value) in &page.entries {
            assert_eq!(key, value);
        }
        seen.extend(page.entries.iter().map(|(key, _)| key.clone()));
        after = page.entries.last().map(|(key, _)| key.clone());
        if !page.more {
            break;
        }
    }
    assert_eq!(seen, sorted);
    // A page longer than one OSD request (1024 entries) is gathered from several.
    let all = io
        .omap_get_vals("index", None, b"", 3000)
        .await
        .expect("all");
    assert_eq!(all.entries.len(), 2501);
    assert!(!all.more);
    let first = io
        .omap_get_vals("index", None, b"", 1500)
        .await
        .expect("first 1500");
    assert_eq!(first.entries.len(), 1500);
    assert!(first.more);
    // Lookups and removals of NUL keys.
    let wanted = vec![keys[7].clone(), keys[8].clone(), b"bucket\0nope".to_vec()];
    let found = io
        .omap_get_vals_by_keys("index", &wanted)
        .await
        .expect("by keys");
    assert_eq!(
        found.keys().cloned().collect::<Vec<_>>(),
        vec![keys[7].clone(), keys[8].clone()]
    );
    io.omap_remove_keys("index", vec![keys[7].clone()])
        .await
        .expect("remove");
    let found = io
        .omap_get_vals_by_keys("index", &wanted)
        .await
        .expect("by keys");
    assert_eq!(found.len(), 1);
    // A prefix holding NUL filters on the whole prefix.
    let page = io
        .omap_get_vals("index", None, b"bucket\x0001", 5000)
        .await
        .expect("prefix");
    assert_eq!(page.entries.len(), 1000);
    assert!(page
        .entries
        .iter()
        .all(|(key, _)| key.starts_with(b"bucket\x0001")));
}

#[tokio::test]
async fn ceph_behaviours_the_contract_follows() {
    let Some((_rados, io)) = pool("behaviours").await else {
        return;
    };
    // zero never extends, and shrinks when it reaches the end.
    io.write_full("z", b"12345").await.expect("write");
    io.operate("z", WriteOp::new().zero(2, 100))
        .await
        .expect("zero");
    assert_eq!(io.read_full("z").await.expect("read"), b"12");
    io.operate("z", WriteOp::new().zero(0, 1))
        .await
        .expect("zero");
    assert_eq!(io.read_full("z").await.expect("read"), b"\x002");
    // zero and truncate of a missing object create nothing.
    let _ = io.operate("nz", WriteOp::new().zero(0, 10)).await;
    assert!(matches!(io.stat("nz").await, Err(RadosError::NotFound(_))));
    let _ = io.truncate("nt", 10).await;
    assert!(matches!(io.stat("nt").await, Err(RadosError::NotFound(_))));
    // Removals on a missing object: NotFound.
    assert!(matches!(
        io.remove_xattr("nx", "a").await,
        Err(RadosError::NotFound(_))
    ));
    assert!(matches!(
        io.omap_remove_keys("nx", vec![b"k".to_vec()]).await,
        Err(RadosError::NotFound(_))
    ));
    assert!(matches!(
        io.omap_clear("nx").await,
        Err(RadosError::NotFound(_))
    ));
    let bare = io.operate("nx", WriteOp::new().remove_xattr("a")).await;
    assert!(matches!(bare, Err(RadosError::NotFound(_))), "{bare:?}");
    assert!(matches!(io.stat("nx").await, Err(RadosError::NotFound(_))));
    // Object names: 2048 bytes is Ceph's limit.
    io.write_full(&"n".repeat(2048), b"x")
        .await
        .expect("2048-byte name");
    let long = io.write_full(&"n".repeat(2100), b"x").await;
    assert!(
        matches!(long, Err(RadosError::InvalidArgument(_))),
        "{long:?}"
    );
}

#[tokio::test]
async fn listing_resumes_exactly_over_pages() {
    let Some((_rados, io)) = pool("listing").await else {
        return;
    };
    let names: BTreeSet<String> = (0..1500).map(|index| format!("object-{index}")).collect();
    let mut writes = Vec::new();
    for chunk in names.iter().cloned().collect::<Vec<_>>().chunks(100) {
        let chunk = chunk.to_vec();
        let io = io.clone();
        writes.push(tokio::spawn(async move {
            for name in chunk {
                io.write_full(&name, b"x").await.expect("write");
            }
        }));
    }
    for write in writes {
        write.await.expect("join");
    }
    let mut listed = Vec::new();
    let mut cursor = ListCursor::start();
    let mut pages = 0;
    loop {
        let page = io.list(&cursor, 97).await.expect("page");
        assert!(page.objects.len() <= 97);
        pages += 1;
        // Removing the object a cursor names does not lose the place.
        if pages == 3 {
            if let Some(next) = &page.next {
                io.remove(&next.0)
                    .await
                    .expect("remove the cursor's object");
                listed.retain(|name: &String| name != &next.0);
            }
        }
        listed.extend(page.objects);
        match page.next {
            Some(next) => cursor = next,
            None => break,
        }
    }
    let unique: BTreeSet<String> = listed.iter().cloned().collect();
    assert_eq!(unique.len(), listed.len(), "no object listed twice");
    let remaining: BTreeSet<String> = io.list_all().await.expect("list_all").into_iter().collect();
    assert_eq!(remaining.len(), 1499);
    assert!(remaining.is_subset(&names));
    // The removed object was listed before its removal and nothing else is missing.
    assert!(unique.len() >= 1499);
    assert!(remaining.is_subset(&unique));
}

#[tokio::test]
async fn pools_and_statistics_through_the_monitors() {
    let Some(rados) = common::connect().await else {
        return;
    };
    let info = rados
        .pool_create(PoolSpec::new("stats").with_pg_num(8))
        .await
        .expect("create");
    assert_eq!((info.size, info.min_size, info.pg_num), (3, 2, 8));
    assert!(matches!(
        rados.pool_create(PoolSpec::new("stats")).await,
        Err(RadosError::Exists(_))
    ));
    assert_eq!(rados.pool_lookup("stats").await.expect("lookup"), info);
    assert!(rados.pool_list().await.expect("list").contains(&info));
    // Device classes: the minicluster has osd.0 as ssd, osd.1 and osd.2 as hdd.
    let hdd = rados
        .pool_create(
            PoolSpec::new("hdd")
                .with_size(2)
                .with_device_class("hdd")
                .with_pg_num(8),
        )
        .await
        .expect("hdd pool");
    assert_eq!(hdd.device_class.as_deref(), Some("hdd"));
    assert_eq!(hdd.crush_rule, "strata-hdd");
    let too_big = rados
        .pool_create(PoolSpec::new("ssd3").with_device_class("ssd"))
        .await;
    assert!(
        matches!(too_big, Err(RadosError::InvalidArgument(_))),
        "{too_big:?}"
    );
    let unknown = rados
        .pool_create(PoolSpec::new("nvme").with_device_class("nvme"))
        .await;
    assert!(
        matches!(unknown, Err(RadosError::InvalidArgument(_))),
        "{unknown:?}"
    );
    let io = rados.io_ctx("hdd").await.expect("open");
    io.write_full("o", &[7; 4096]).await.expect("write");
    io.omap_set("o", vec![(b"k".to_vec(), vec![1; 100])])
        .await
        .expect("omap");
    let stats = rados.cluster_stats().await.expect("stats");
    assert_eq!((stats.osds, stats.osds_up, stats.osds_in), (3, 3, 3));
    assert!(stats.total_bytes > 0 && stats.epoch > 0);
    assert!(stats.pools.iter().any(|pool| pool.name == "hdd"));
    let detail = rados
        .mon_command(
            r#"{"prefix": "osd pool get", "pool": "hdd", "var": "size", "format": "json"}"#,
        )
        .await
        .expect("mon_command");
    assert!(String::from_utf8_lossy(&detail.outbuf).contains("\"size\":2"));
    rados.pool_delete("stats").await.expect("delete");
    assert!(matches!(
        rados.pool_lookup("stats").await,
        Err(RadosError::NotFound(_))
    ));
    assert!(matches!(
        rados.pool_delete("stats").await,
        Err(RadosError::NotFound(_))
    ));
    assert!(matches!(
        rados.io_ctx("stats").await,
        Err(RadosError::NotFound(_))
    ));
}

#[tokio::test]
async fn dropped_operations_release_the_connection_off_librados_threads() {
    let Some(cluster) = common::cluster() else {
        return;
    };
    let rados = cluster.connect().await.expect("connect");
    rados
        .pool_create(PoolSpec::new("dropped").with_pg_num(8))
        .await
        .expect("pool");
    for round in 0..4 {
        let rados = cluster.connect().await.expect("connect");
        let io = rados.io_ctx("dropped").await.expect("open");
        for index in 0..32 {
            // Polled once (submitted to librados), then dropped before its completion.
            let (name, data) = (format!("o-{round}-{index}"), vec![1; 1 << 16]);
            let _ = tokio::time::timeout(Duration::ZERO, io.write_full(&name, &data)).await;
        }
        // The last references to the connection now sit with in-flight completions: letting
        // go of them on librados' callback thread would shut librados down from its own thread
        // (abort: "Resource deadlock avoided").
        drop(io);
        drop(rados);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let io = rados.io_ctx("dropped").await.expect("open");
    io.write_full("after", b"x").await.expect("write");
}

#[tokio::test]
async fn a_bad_configuration_is_a_clear_error() {
    let error = ceph_backend::CephRados::connect(ceph_backend::CephConfig {
        conf_path: Some("/nonexistent/ceph.conf".into()),
        ..ceph_backend::CephConfig::default()
    })
    .await
    .expect_err("no such ceph.conf");
    assert!(
        error.to_string().contains("/nonexistent/ceph.conf"),
        "{error}"
    );
}
