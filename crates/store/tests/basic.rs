//! Object API behaviour on a memory device (and a file device where its timing matters).

use std::sync::Arc;

use device::{Device, MemoryDevice};
use store::{ObjectId, Store, StoreConfig, StoreError, Transaction};

const MIB: u64 = 1 << 20;

async fn new_store(dir: &tempfile::TempDir, config: StoreConfig) -> (Arc<dyn Device>, Store) {
    let device: Arc<dyn Device> = Arc::new(MemoryDevice::new("mem", 64 * MIB).expect("device"));
    let store = Store::create(Arc::clone(&device), dir.path().join("meta"), config)
        .await
        .expect("create");
    (device, store)
}

fn pattern(seed: u8, length: usize) -> Vec<u8> {
    (0..length)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_read_overwrite_truncate_zero() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_device, store) = new_store(&dir, StoreConfig::default()).await;
    let id = ObjectId::new("1.0", "object");
    let mut expected = pattern(1, 10_000);
    let mut t = Transaction::new(7);
    t.write_full(&id, expected.clone());
    store.apply(t).await.expect("write_full");
    assert_eq!(
        store.read("1.0", "object", 0, 1 << 20).await.expect("read"),
        expected
    );
    let stat = store.stat("1.0", "object").await.expect("stat");
    assert_eq!(
        (stat.size_bytes, stat.mtime_ns, stat.allocated_bytes),
        (10_000, 7, 12_288)
    );

    // Partial overwrite inside, across units and beyond the end.
    let patch = pattern(9, 5000);
    let mut t = Transaction::new(8);
    t.write(&id, 3000, patch.clone());
    t.write(&id, 9000, patch.clone());
    store.apply(t).await.expect("write");
    expected[3000..8000].copy_from_slice(&patch);
    expected.resize(14_000, 0);
    expected[9000..14_000].copy_from_slice(&patch);
    assert_eq!(
        store.read("1.0", "object", 0, 1 << 20).await.expect("read"),
        expected
    );
    assert_eq!(
        store.read("1.0", "object", 4000, 100).await.expect("read"),
        expected[4000..4100]
    );

    // Truncate down (partial unit), then up: the tail reads as zeros.
    let mut t = Transaction::new(9);
    t.truncate(&id, 5000).truncate(&id, 9000);
    store.apply(t).await.expect("truncate");
    expected.truncate(5000);
    expected.resize(9000, 0);
    assert_eq!(
        store.read("1.0", "object", 0, 1 << 20).await.expect("read"),
        expected
    );

    // Zero a range spanning whole units.
    let mut t = Transaction::new(10);
    t.zero(&id, 100, 8000);
    store.apply(t).await.expect("zero");
    expected[100..8100].fill(0);
    assert_eq!(
        store.read("1.0", "object", 0, 1 << 20).await.expect("read"),
        expected
    );
    store.check_consistency().expect("consistent");

    // Remove frees everything.
    let mut t = Transaction::new(11);
    t.remove(&id);
    store.apply(t).await.expect("remove");
    assert!(matches!(
        store.read("1.0", "object", 0, 1).await,
        Err(StoreError::NotFound { .. })
    ));
    let statfs = store.statfs();
    assert_eq!(
        (statfs.allocated_bytes, statfs.objects, statfs.stored_bytes),
        (0, 0, 0)
    );
    store.check_consistency().expect("consistent");
    store.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn xattrs_omap_listing_and_exclusive_create() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (device, store) = new_store(&dir, StoreConfig::default()).await;
    let id = ObjectId::new("2.1", "index");
    let mut t = Transaction::new(1);
    t.create(&id, true)
        .set_xattr(&id, "user.a", b"1".to_vec())
        .set_xattr(&id, "user.b", b"2".to_vec())
        .omap_set(
            &id,
            (0..10u8).map(|i| (vec![b'k', i], vec![i; 3])).collect(),
        );
    store.apply(t).await.expect("apply");
    let mut t = Transaction::new(2);
    t.create(&id, true);
    assert!(matches!(
        store.apply(t).await,
        Err(StoreError::Exists { .. })
    ));

    let mut t = Transaction::new(3);
    t.remove_xattr(&id, "user.a")
        .omap_remove(&id, vec![vec![b'k', 3]]);
    store.apply(t).await.expect("apply");
    assert_eq!(
        store
            .get_xattr("2.1", "index", "user.b")
            .await
            .expect("xattr"),
        b"2"
    );
    assert!(store.get_xattr("2.1", "index", "user.a").await.is_err());
    let page = store
        .omap_get_range("2.1", "index", Some(&[b'k', 1]), 3)
        .await
        .expect("range");
    let keys: Vec<_> = page.iter().map(|(k, _)| k[1]).collect();
    assert_eq!(keys, vec![2, 4, 5]);
    let got = store
        .omap_get_keys("2.1", "index", &[vec![b'k', 3], vec![b'k', 9]])
        .await
        .expect("keys");
    assert_eq!(got.len(), 1);
    assert_eq!(got[&vec![b'k', 9]], vec![9; 3]);

    for i in 0..25 {
        let mut t = Transaction::new(4);
        t.write_full(
            &ObjectId::new("2.1", format!("obj{i:02}")),
            vec![i as u8; 100],
        );
        store.apply(t).await.expect("apply");
    }
    let first = store.list("2.1", None, 10).await.expect("list");
    assert_eq!(first.len(), 10);
    let rest = store
        .list("2.1", first.last().map(String::as_str), 100)
        .await
        .expect("list");
    assert_eq!(first.len() + rest.len(), 26);
    assert_eq!(store.list_collections()["2.1"], 26);
    let statfs = store.statfs();
    assert_eq!(statfs.stored_bytes, 2500);
    assert_eq!(statfs.allocated_bytes, 25 * 4096);
    assert!(statfs.data_hole_ratio() > 0.97);
    assert!(statfs.omap_bytes > 0 && statfs.onode_bytes > 0);
    store.shutdown().await.expect("shutdown");

    // Everything survives a remount.
    let store = Store::open(device, dir.path().join("meta"), StoreConfig::default())
        .await
        .expect("open");
    assert_eq!(store.list_collections()["2.1"], 26);
    assert_eq!(store.statfs().stored_bytes, 2500);
    assert_eq!(
        store
            .omap_get_range("2.1", "index", None, 100)
            .await
            .expect("omap")
            .len(),
        9
    );
    store.check_consistency().expect("consistent");
}

/// Many tasks change disjoint parts of the same two objects at once: no update is lost (the
/// object lock serializes read-modify-write of onodes across concurrent transactions).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_transactions_on_shared_objects_lose_no_update() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_device, store) = new_store(&dir, StoreConfig::default()).await;
    let store = Arc::new(store);
    const TASKS: u64 = 16;
    const ROUNDS: u64 = 20;
    let mut handles = Vec::new();
    for task in 0..TASKS {
        let store = Arc::clone(&store);
        handles.push(tokio::spawn(async move {
            for round in 0..ROUNDS {
                let a = ObjectId::new("3.0", "shared-a");
                let b = ObjectId::new("3.0", "shared-b");
                let mut t = Transaction::new(round);
                // 1500-byte slots straddle allocation units: neighbours share units.
                t.write(&a, task * 1500, vec![(task * ROUNDS + round) as u8; 1500])
                    .omap_set(
                        &b,
                        vec![(format!("t{task:02}").into_bytes(), vec![round as u8])],
                    )
                    .set_xattr(&b, format!("t{task:02}"), vec![round as u8]);
                store.apply(t).await.expect("apply");
            }
        }));
    }
    for handle in handles {
        handle.await.expect("task");
    }
    let data = store
        .read("3.0", "shared-a", 0, 1 << 20)
        .await
        .expect("read");
    assert_eq!(data.len() as u64, TASKS * 1500);
    for task in 0..TASKS {
        let slot = &data[(task * 1500) as usize..((task + 1) * 1500) as usize];
        let last = (task * ROUNDS + ROUNDS - 1) as u8;
        assert!(
            slot.iter().all(|&b| b == last),
            "slot {task} lost an update"
        );
    }
    let omap = store
        .omap_get_range("3.0", "shared-b", None, 1000)
        .await
        .expect("omap");
    assert_eq!(omap.len() as u64, TASKS);
    assert!(omap.iter().all(|(_, v)| v == &vec![(ROUNDS - 1) as u8]));
    assert_eq!(
        store
            .get_xattrs("3.0", "shared-b")
            .await
            .expect("xattrs")
            .len() as u64,
        TASKS
    );
    store.check_consistency().expect("consistent");
}

#[test]
fn handles_are_shareable_across_tasks() {
    fn assert_send_sync<T: Send + Sync + 'static>() {}
    assert_send_sync::<Store>();
    assert_send_sync::<StoreError>();
    assert_send_sync::<Transaction>();
}

/// On a current-thread runtime a dropped handle cannot wait for its threads; reopening right
/// away still works.
#[tokio::test(flavor = "current_thread")]
async fn reopen_right_after_drop_on_a_current_thread_runtime() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (device, store) = new_store(&dir, StoreConfig::default()).await;
    let mut t = Transaction::new(1);
    t.write_full(&ObjectId::new("4.0", "x"), vec![7u8; 5000]);
    store.apply(t).await.expect("write");
    drop(store);
    let store = Store::open(device, dir.path().join("meta"), StoreConfig::default())
        .await
        .expect("reopen");
    assert_eq!(
        store.read("4.0", "x", 0, 10).await.expect("read"),
        vec![7u8; 10]
    );
    store.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_collection_usage_is_tracked_and_rebuilt_at_mount() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (device, store) = new_store(&dir, StoreConfig::default()).await;
    let mut t = Transaction::new(1);
    t.write_full(&ObjectId::new("1.0", "a"), vec![1; 4096]);
    t.write_full(&ObjectId::new("1.0", "b"), vec![2; 100]);
    t.write_full(&ObjectId::new("1.1", "c"), vec![3; 5000]);
    t.omap_set(
        &ObjectId::new("1.1", "c"),
        vec![(b"key".to_vec(), vec![0; 50])],
    );
    store.apply(t).await.expect("apply");
    let usage = store.statfs().collections;
    assert_eq!(
        (
            usage["1.0"].objects,
            usage["1.0"].stored_bytes,
            usage["1.0"].allocated_bytes
        ),
        (2, 4196, 8192)
    );
    assert_eq!(
        (
            usage["1.1"].objects,
            usage["1.1"].stored_bytes,
            usage["1.1"].allocated_bytes
        ),
        (1, 5000, 8192)
    );
    let statfs = store.statfs();
    assert!(
        usage["1.1"].metadata_bytes > statfs.omap_bytes,
        "onode + omap"
    );
    let metadata: u64 = usage.values().map(|u| u.metadata_bytes).sum();
    assert_eq!(metadata, statfs.onode_bytes + statfs.omap_bytes);

    // Removing the last object of a collection drops it; a remount rebuilds the same figures.
    let mut t = Transaction::new(2);
    t.remove(&ObjectId::new("1.1", "c"));
    store.apply(t).await.expect("remove");
    let before = store.statfs().collections;
    assert!(!before.contains_key("1.1"));
    store.check_consistency().expect("counters match a scan");
    store.shutdown().await.expect("shutdown");
    let store = Store::open(device, dir.path().join("meta"), StoreConfig::default())
        .await
        .expect("open");
    assert_eq!(store.statfs().collections, before);
}

/// A transaction whose caller goes away (its future dropped after the first poll, as when a
/// client disconnects) still runs to its end: nothing is abandoned half way through its
/// device writes, and the store stays consistent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_apply_still_commits_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A file device: its writes complete on I/O threads, so the first poll stops in one.
    let device: Arc<dyn Device> = Arc::new(
        device::FileDevice::create(
            dir.path().join("data.img"),
            64 * MIB,
            device::FileDeviceConfig::default(),
        )
        .expect("device"),
    );
    let store = Store::create(device, dir.path().join("meta"), StoreConfig::default())
        .await
        .expect("create");
    let id = ObjectId::new("1.0", "large");
    // Larger than the write-behind limit: its data is written during the preparation.
    let data = pattern(3, 1 << 20);
    let mut t = Transaction::new(1);
    t.write_full(&id, data.clone());
    let dropped = tokio::time::timeout(std::time::Duration::ZERO, store.apply(t)).await;
    assert!(dropped.is_err(), "the caller gave up before the commit");
    let mut waited_ms = 0;
    while !store.exists("1.0", "large").await.expect("exists") {
        assert!(
            waited_ms < 10_000,
            "the dropped transaction never committed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        waited_ms += 10;
    }
    assert_eq!(
        store.read("1.0", "large", 0, 2 << 20).await.expect("read"),
        data
    );
    store.check_consistency().expect("consistent");
}

/// The presence filter (`presence.rs`) answers "absent" without the database, so it must know
/// every object the database holds: those a mount finds and those committed since. With the
/// onode cache off, every lookup goes through it; an object it wrongly denied would be taken
/// for a new one, and a partial write would then lose the rest of its data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_from_before_a_mount_and_since_are_found_without_the_onode_cache() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = StoreConfig {
        onode_cache_bytes: 0,
        ..StoreConfig::default()
    };
    let (device, store) = new_store(&dir, config.clone()).await;
    let old = pattern(3, 8192);
    for index in 0..200 {
        let mut t = Transaction::new(1);
        t.write_full(&ObjectId::new("1.0", format!("old-{index}")), old.clone());
        store.apply(t).await.expect("write before the mount");
    }
    store.shutdown().await.expect("shutdown");
    let store = Store::open(device, dir.path().join("meta"), config)
        .await
        .expect("open");
    let patch = pattern(7, 4096);
    for index in 0..200 {
        let mut t = Transaction::new(2);
        t.write(
            &ObjectId::new("1.0", format!("old-{index}")),
            4096,
            patch.clone(),
        );
        store.apply(t).await.expect("partial write");
    }
    let mut t = Transaction::new(3);
    t.write_full(&ObjectId::new("1.0", "new-0"), old.clone());
    store.apply(t).await.expect("a new object");
    let mut t = Transaction::new(4);
    t.write(&ObjectId::new("1.0", "new-0"), 4096, patch.clone());
    store
        .apply(t)
        .await
        .expect("partial write of the new object");
    let mut expected = old[..4096].to_vec();
    expected.extend_from_slice(&patch);
    for name in (0..200).map(|i| format!("old-{i}")).chain(["new-0".into()]) {
        assert_eq!(
            store.read("1.0", &name, 0, 1 << 20).await.expect("read"),
            expected,
            "{name}: its first 4 KiB kept, the second patched"
        );
    }
    assert!(
        matches!(
            store.stat("1.0", "never-written").await,
            Err(StoreError::NotFound { .. })
        ),
        "an object never written is still absent"
    );
    store.shutdown().await.expect("shutdown");
}

/// Writes that start on an allocation unit are placed from the caller's buffer itself unless
/// the unit they end in still holds bytes of the object after them (`write_range`): those
/// bytes must be read and kept, and bytes past the object's end read as zeros.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aligned_writes_keep_the_rest_of_their_last_unit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_device, store) = new_store(&dir, StoreConfig::default()).await;
    let id = ObjectId::new("1.0", "object");
    let mut expected = pattern(1, 10_000);
    let mut t = Transaction::new(1);
    t.write_full(&id, expected.clone());
    store.apply(t).await.expect("write_full");
    let cases: [(usize, usize); 4] = [
        (4096, 100),    // inside: the rest of the unit is the object's
        (8192, 500),    // the last unit, ending before the object's end
        (8192, 3000),   // the last unit, past the object's end
        (16_384, 4096), // a whole unit beyond the end: a hole before it
    ];
    for (seed, (offset, length)) in cases.into_iter().enumerate() {
        let patch = pattern(10 + seed as u8, length);
        let mut t = Transaction::new(2);
        t.write(&id, offset as u64, patch.clone());
        store.apply(t).await.expect("aligned write");
        if expected.len() < offset + length {
            expected.resize(offset + length, 0);
        }
        expected[offset..offset + length].copy_from_slice(&patch);
        assert_eq!(
            store.read("1.0", "object", 0, 1 << 20).await.expect("read"),
            expected,
            "after {length} bytes at {offset}"
        );
    }
    store.shutdown().await.expect("shutdown");
}

/// A transaction over more objects than its preparation finds by a scan (it then indexes
/// them): each object is written twice in it, the second write patching the first, and every
/// third one gets omap keys, which must land on that object and no other, before and after a
/// mount.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_transaction_over_many_objects_each_changed_twice() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (device, store) = new_store(&dir, StoreConfig::default()).await;
    const OBJECTS: usize = 40;
    let id = |index: usize| ObjectId::new("1.0", format!("many-{index}"));
    let mut t = Transaction::new(1);
    for index in 0..OBJECTS {
        t.write_full(&id(index), pattern(index as u8, 8192));
    }
    for index in 0..OBJECTS {
        t.write(&id(index), 4096, pattern(100 + index as u8, 4096));
        if index % 3 == 0 {
            t.omap_set(&id(index), vec![(b"key".to_vec(), vec![index as u8])]);
        }
    }
    store
        .apply(t)
        .await
        .expect("one transaction over many objects");
    let check = |store: Store| async move {
        for index in 0..OBJECTS {
            let name = format!("many-{index}");
            let mut expected = pattern(index as u8, 8192)[..4096].to_vec();
            expected.extend_from_slice(&pattern(100 + index as u8, 4096));
            assert_eq!(
                store.read("1.0", &name, 0, 1 << 20).await.expect("read"),
                expected,
                "{name}: written in full, then its second 4 KiB patched"
            );
            let omap = store
                .omap_get_keys("1.0", &name, &[b"key".to_vec()])
                .await
                .expect("omap");
            let wanted = (index % 3 == 0).then(|| vec![index as u8]);
            assert_eq!(
                omap.get(b"key".as_slice()).cloned(),
                wanted,
                "{name}'s omap"
            );
        }
        store
    };
    let store = check(store).await;
    store.shutdown().await.expect("shutdown");
    let store = Store::open(device, dir.path().join("meta"), StoreConfig::default())
        .await
        .expect("open");
    let store = check(store).await;
    store.shutdown().await.expect("shutdown");
}

/// The data cache holds blocks by device offset, and the store is copy-on-write: each
/// overwrite or removal frees an extent that the next write may be given. A block cached from
/// its old contents must never be read back as the new object's data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_data_cache_never_serves_a_freed_extent_written_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_device, store) = new_store(&dir, StoreConfig::default()).await;
    for round in 0..40u8 {
        // Overwrites of one object, and a removal followed by a new object: both free the
        // extent just read (and cached) and hand it out again.
        let name = if round % 2 == 0 {
            "again".to_owned()
        } else {
            format!("new-{round}")
        };
        let expected = pattern(round, 4096);
        let mut t = Transaction::new(u64::from(round));
        t.write_full(&ObjectId::new("1.0", name.as_str()), expected.clone());
        store.apply(t).await.expect("write");
        for _ in 0..2 {
            let read = store.read("1.0", &name, 0, 4096).await.expect("read");
            assert!(read == expected, "round {round}: stale data read back");
        }
        if round % 2 == 1 {
            let mut t = Transaction::new(u64::from(round));
            t.remove(&ObjectId::new("1.0", name.as_str()));
            store.apply(t).await.expect("remove");
        }
    }
    let stats = store.data_cache_stats();
    assert_eq!(
        stats.misses, 40,
        "each object's first read went to the device"
    );
    assert_eq!(stats.hits, 40, "and its second came from memory");
    assert!(
        store.statfs().allocated_bytes <= 2 * 4096,
        "extents were freed and reused: {:?}",
        store.statfs()
    );
    store.check_consistency().expect("consistent");
}

/// `read_device` is what deep scrub reads: the device, even where the cache holds the blocks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_device_bypasses_the_data_cache() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (device, store) = new_store(&dir, StoreConfig::default()).await;
    let expected = pattern(3, 4096);
    let mut t = Transaction::new(1);
    t.write_full(&ObjectId::new("1.0", "x"), expected.clone());
    store.apply(t).await.expect("write");
    assert_eq!(
        store.read("1.0", "x", 0, 4096).await.expect("read"),
        expected
    );
    // Rot on the device under the cached copy: every block of the device's data area that
    // holds the object's bytes is overwritten with zeros.
    let size = device.size_bytes();
    let mut block = vec![0u8; 4096];
    let mut offset = 0;
    while offset < size {
        device.read_at(offset, &mut block).await.expect("scan");
        if block == expected {
            device
                .write_at(offset, &vec![0u8; 4096])
                .await
                .expect("rot");
        }
        offset += 4096;
    }
    assert_eq!(
        store.read("1.0", "x", 0, 4096).await.expect("cached read"),
        expected,
        "a normal read is served from the cache"
    );
    assert!(matches!(
        store.read_device("1.0", "x", 0, 4096).await,
        Err(StoreError::Checksum { .. })
    ));
}

/// Readers racing writers that overwrite small objects (each overwrite frees the extent the
/// readers just cached, and the next write may be given it): every read returns a whole
/// committed version of the object read, never another object's blocks, and no reader sees
/// an object's versions go back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_reads_racing_overwrites_see_only_their_objects_committed_versions() {
    const OBJECTS: u8 = 6;
    const VERSIONS: u32 = 150;
    let dir = tempfile::tempdir().expect("tempdir");
    let (_device, store) = new_store(&dir, StoreConfig::default()).await;
    let store = Arc::new(store);
    // Block contents: the object's number, then its version, repeated.
    let contents = |object: u8, version: u32| -> Vec<u8> {
        let mut tag = vec![object];
        tag.extend(version.to_le_bytes());
        tag.iter().copied().cycle().take(8192).collect()
    };
    for object in 0..OBJECTS {
        let mut t = Transaction::new(0);
        t.write_full(
            &ObjectId::new("1.0", format!("o{object}")),
            contents(object, 0),
        );
        store.apply(t).await.expect("create");
    }
    let writer = {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            for version in 1..=VERSIONS {
                for object in 0..OBJECTS {
                    let mut t = Transaction::new(u64::from(version));
                    t.write_full(
                        &ObjectId::new("1.0", format!("o{object}")),
                        contents(object, version),
                    );
                    store.apply(t).await.expect("overwrite");
                }
            }
        })
    };
    let readers: Vec<_> = (0..2u8)
        .map(|reader| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                let mut seen = [0u32; OBJECTS as usize];
                let mut reads = 0u64;
                while seen.iter().any(|&version| version < VERSIONS) {
                    let object = ((reads * 7 + u64::from(reader)) % u64::from(OBJECTS)) as u8;
                    reads += 1;
                    let data = store
                        .read("1.0", &format!("o{object}"), 0, 8192)
                        .await
                        .expect("read");
                    assert_eq!(data[0], object, "another object's data read as o{object}");
                    let version = u32::from_le_bytes(data[1..5].try_into().unwrap());
                    assert!(
                        data == contents(object, version),
                        "o{object}: a torn or foreign block in version {version}"
                    );
                    assert!(
                        version >= seen[object as usize],
                        "o{object} went back from {} to {version}",
                        seen[object as usize]
                    );
                    seen[object as usize] = version;
                    tokio::task::yield_now().await;
                }
                reads
            })
        })
        .collect();
    writer.await.expect("writer");
    for reader in readers {
        assert!(reader.await.expect("reader") > 0);
    }
    let stats = store.data_cache_stats();
    assert!(stats.hits > 0, "some reads came from the cache: {stats:?}");
    store.check_consistency().expect("consistent");
}
