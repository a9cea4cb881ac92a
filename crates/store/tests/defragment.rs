//! Defragmentation: a client read of a range scattered on the device rewrites it
//! contiguously in the background (`StoreConfig::defragment_runs_max`), explicit
//! `Op::Defragment` keeps holes, content and mtime, and a power loss during one loses nothing.

use std::sync::Arc;

use device::{
    Device, FaultConfig, FaultKind, FaultRule, FaultTrigger, FaultyDevice, MemoryDevice, OpKind,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use store::{ObjectId, Store, StoreConfig, Transaction};

const DEVICE_BYTES: u64 = 64 << 20;
const OBJECT_BYTES: usize = 1 << 20;

/// Writes a 1 MiB object, then overwrites 200 random 4 KiB blocks of it one transaction at a
/// time (copy-on-write scatters them); returns the content.
async fn fragmented_object(store: &Store, id: &ObjectId, seed: u64) -> Vec<u8> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut content: Vec<u8> = (0..OBJECT_BYTES).map(|_| rng.gen()).collect();
    let mut t = Transaction::new(1);
    t.write_full(id, content.clone());
    store.apply(t).await.expect("write_full");
    for step in 0..200u64 {
        let block = rng.gen_range(0..OBJECT_BYTES / 4096);
        let data: Vec<u8> = (0..4096).map(|_| rng.gen()).collect();
        content[block * 4096..(block + 1) * 4096].copy_from_slice(&data);
        let mut t = Transaction::new(2 + step);
        t.write(id, (block * 4096) as u64, data);
        store.apply(t).await.expect("overwrite");
    }
    content
}

async fn runs(store: &Store, id: &ObjectId) -> usize {
    store
        .extent_runs(&id.collection, &id.name)
        .await
        .expect("extent runs")
        .expect("exists")
        .1
}

/// A fragmented whole-object read leaves the object in at most `defragment_runs_max` runs
/// (here one), with the same content and mtime, before and after a remount; a second read
/// starts nothing. With the threshold at 0 nothing is rewritten.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fragmented_read_rewrites_the_range_contiguously() {
    for (runs_max, expect_rewrite) in [(8, true), (0, false)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let meta = dir.path().join("m");
        let device: Arc<dyn Device> =
            Arc::new(MemoryDevice::new("mem", DEVICE_BYTES).expect("device"));
        let config = StoreConfig {
            defragment_runs_max: runs_max,
            // Copy-on-write overwrites, which scatter the object (deferred ones would not).
            deferred_write_bytes_max: 0,
            ..StoreConfig::default()
        };
        let store = Store::create(Arc::clone(&device), &meta, config.clone())
            .await
            .expect("create");
        let id = ObjectId::new("1.0", "volume-object");
        let content = fragmented_object(&store, &id, 7).await;
        let before = runs(&store, &id).await;
        assert!(before > 100, "200 scattered overwrites: {before} runs");
        let mtime = store
            .stat("1.0", "volume-object")
            .await
            .expect("stat")
            .mtime_ns;
        let read = store
            .read("1.0", "volume-object", 0, OBJECT_BYTES as u64)
            .await
            .expect("read");
        assert!(read == content, "the read itself");
        store.wait_for_defragmentation().await;
        let after = runs(&store, &id).await;
        if expect_rewrite {
            assert_eq!(after, 1, "rewritten as one run (was {before})");
        } else {
            assert_eq!(after, before, "defragmentation off");
        }
        assert_eq!(
            store
                .stat("1.0", "volume-object")
                .await
                .expect("stat")
                .mtime_ns,
            mtime,
            "mtime kept"
        );
        let commits = store.commit_stats().transactions;
        let again = store
            .read("1.0", "volume-object", 0, OBJECT_BYTES as u64)
            .await
            .expect("read again");
        assert!(again == content, "content after the rewrite");
        store.wait_for_defragmentation().await;
        assert_eq!(
            store.commit_stats().transactions,
            commits,
            "a contiguous range starts nothing"
        );
        store.check_consistency().expect("consistent");
        store.shutdown().await.expect("shutdown");
        let store = Store::open(Arc::clone(&device), &meta, config)
            .await
            .expect("remount");
        assert!(
            store
                .read("1.0", "volume-object", 0, OBJECT_BYTES as u64)
                .await
                .expect("read after remount")
                == content
        );
        assert_eq!(runs(&store, &id).await, after);
        store.check_consistency().expect("consistent after remount");
        store.shutdown().await.expect("shutdown");
    }
}

/// Explicit `Op::Defragment`: holes stay holes (each hole-free part becomes one run), a
/// missing object is not created, and a range past the end changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defragment_keeps_holes_and_creates_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let device: Arc<dyn Device> = Arc::new(MemoryDevice::new("mem", DEVICE_BYTES).expect("device"));
    let config = StoreConfig {
        defragment_runs_max: 0,
        ..StoreConfig::default()
    };
    let store = Store::create(device, dir.path().join("m"), config)
        .await
        .expect("create");
    let id = ObjectId::new("1.0", "o");
    let mut content = fragmented_object(&store, &id, 3).await;
    // A 64 KiB hole in the middle.
    let mut t = Transaction::new(500);
    t.zero(&id, 512 << 10, 64 << 10);
    store.apply(t).await.expect("zero");
    content[512 << 10..576 << 10].fill(0);
    let allocated = store.statfs().allocated_bytes;
    let mut t = Transaction::new(501);
    t.defragment(&id, 0, 4 << 20);
    store.apply(t).await.expect("defragment");
    assert_eq!(
        runs(&store, &id).await,
        2,
        "one run either side of the hole"
    );
    assert_eq!(store.statfs().allocated_bytes, allocated, "the hole stays");
    assert!(store.read("1.0", "o", 0, 4 << 20).await.expect("read") == content);
    let missing = ObjectId::new("1.0", "missing");
    let mut t = Transaction::new(502);
    t.defragment(&missing, 0, 4096)
        .defragment(&id, 8 << 20, 4096);
    store.apply(t).await.expect("nothing to do");
    assert!(!store.exists("1.0", "missing").await.expect("exists"));
    assert_eq!(runs(&store, &id).await, 2);
    store.check_consistency().expect("consistent");
    store.shutdown().await.expect("shutdown");
}

/// A power loss (unflushed blocks lost at random) during a defragmentation, with an
/// overwrite of the same object queued behind it: after the restart the object holds its
/// acknowledged content (the overwrite's only if it was acknowledged), whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_power_loss_during_a_defragmentation_loses_nothing() {
    let mut defragment_failed = 0;
    for round in 0..8u64 {
        let dir = tempfile::tempdir().expect("tempdir");
        let meta = dir.path().join("m");
        let memory: Arc<dyn Device> = Arc::new(
            MemoryDevice::with_block_size("mem", DEVICE_BYTES, 4096).expect("memory device"),
        );
        let device = Arc::new(FaultyDevice::new(
            "faulty",
            memory,
            FaultConfig {
                seed: round,
                unflushed_loss_probability: 0.5,
                ..FaultConfig::default()
            },
        ));
        let config = StoreConfig {
            defragment_runs_max: 0,
            deferred_write_bytes_max: 0,
            ..StoreConfig::default()
        };
        let store = Arc::new(
            Store::create(device.clone(), &meta, config.clone())
                .await
                .expect("create"),
        );
        let id = ObjectId::new("1.0", "o");
        let content = fragmented_object(&store, &id, 100 + round).await;
        let mut overwritten = content.clone();
        overwritten[..4096].fill(0xab);
        device.add_rule(FaultRule {
            op: Some(OpKind::Flush),
            trigger: FaultTrigger::Always,
            fault: FaultKind::Crash,
            times: Some(1),
        });
        let defragment = {
            let (store, id) = (Arc::clone(&store), id.clone());
            tokio::spawn(async move {
                let mut t = Transaction::new(900);
                t.defragment(&id, 0, OBJECT_BYTES as u64);
                store.apply(t).await
            })
        };
        let overwrite = {
            let (store, id) = (Arc::clone(&store), id.clone());
            tokio::spawn(async move {
                let mut t = Transaction::new(901);
                t.write(&id, 0, vec![0xab; 4096]);
                store.apply(t).await
            })
        };
        defragment_failed += usize::from(defragment.await.expect("join").is_err());
        let overwrite_acked = overwrite.await.expect("join").is_ok();
        drop(store);
        device.restart();
        let store = Store::open(device.clone(), &meta, config)
            .await
            .expect("reopen");
        let data = store.read("1.0", "o", 0, 4 << 20).await.expect("read");
        if overwrite_acked {
            assert!(
                data == overwritten,
                "round {round}: acknowledged overwrite lost"
            );
        } else {
            assert!(
                data == content || data == overwritten,
                "round {round}: torn or lost content"
            );
        }
        store.check_consistency().expect("consistent");
        store.shutdown().await.expect("shutdown");
    }
    assert!(
        defragment_failed > 0,
        "the power never went during a defragmentation: the test tested nothing"
    );
}
