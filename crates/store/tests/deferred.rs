//! Deferred overwrites (`StoreConfig::deferred_write_bytes_max`): a small overwrite inside an
//! object's extents is made in place after its batch's flush, with a copy in the log, so the
//! object keeps its extents; content survives remounts, checkpoints and power losses.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use device::{Device, FaultConfig, FaultyDevice, MemoryDevice};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use store::{ObjectId, Store, StoreConfig, Transaction};

const DEVICE_BYTES: u64 = 64 << 20;
const OBJECT_BYTES: usize = 256 << 10;

fn object(index: u64) -> ObjectId {
    ObjectId::new("pg.1", format!("object-{index}"))
}

async fn read_all(store: &Store, id: &ObjectId) -> Option<Vec<u8>> {
    match store.read(&id.collection, &id.name, 0, u64::MAX / 4).await {
        Ok(data) => Some(data),
        Err(store::StoreError::NotFound { .. }) => None,
        Err(error) => panic!("read {}: {error}", id.name),
    }
}

async fn runs(store: &Store, id: &ObjectId) -> usize {
    store
        .extent_runs(&id.collection, &id.name)
        .await
        .expect("extent runs")
        .expect("exists")
        .1
}

/// Thousands of random small overwrites (aligned blocks and unaligned pieces) leave the object
/// in the one device run it was written in, with the right content before and after a
/// remount, across the checkpoints the log fills up to. With deferral off, the same writes
/// scatter it (the test can tell the two apart).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_overwrites_keep_the_object_where_it_was() {
    for deferred_write_bytes_max in [65536, 0] {
        let dir = tempfile::tempdir().expect("tempdir");
        let meta = dir.path().join("m");
        let device: Arc<dyn Device> =
            Arc::new(MemoryDevice::new("mem", DEVICE_BYTES).expect("device"));
        let config = StoreConfig {
            deferred_write_bytes_max,
            defragment_runs_max: 0,
            ..StoreConfig::default()
        };
        let store = Store::create(Arc::clone(&device), &meta, config.clone())
            .await
            .expect("create");
        let id = object(0);
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut content: Vec<u8> = (0..OBJECT_BYTES).map(|_| rng.gen()).collect();
        let mut t = Transaction::new(1);
        t.write_full(&id, content.clone());
        store.apply(t).await.expect("write_full");
        assert_eq!(runs(&store, &id).await, 1, "written in one run");
        // 4 MiB of log is about 1,000 records of 4 KiB: 3,000 writes pass a checkpoint or two.
        for step in 0..3000u64 {
            let (offset, length) = if rng.gen_bool(0.8) {
                (rng.gen_range(0..OBJECT_BYTES / 4096) * 4096, 4096)
            } else {
                let length = rng.gen_range(1..3000);
                (rng.gen_range(0..OBJECT_BYTES - length), length)
            };
            let data: Vec<u8> = (0..length).map(|_| rng.gen()).collect();
            content[offset..offset + length].copy_from_slice(&data);
            let mut t = Transaction::new(2 + step);
            t.write(&id, offset as u64, data);
            store.apply(t).await.expect("overwrite");
            if step % 500 == 0 {
                assert_eq!(read_all(&store, &id).await.as_deref(), Some(&content[..]));
            }
        }
        assert_eq!(read_all(&store, &id).await.as_deref(), Some(&content[..]));
        let runs_after = runs(&store, &id).await;
        if deferred_write_bytes_max > 0 {
            assert_eq!(runs_after, 1, "deferred overwrites keep the object's run");
        } else {
            assert!(
                runs_after > 16,
                "copy-on-write scatters it: {runs_after} runs"
            );
        }
        store.check_consistency().expect("consistent");
        store.shutdown().await.expect("shutdown");
        let store = Store::open(Arc::clone(&device), &meta, config)
            .await
            .expect("reopen");
        assert_eq!(read_all(&store, &id).await.as_deref(), Some(&content[..]));
        store.check_consistency().expect("consistent after remount");
        store.shutdown().await.expect("shutdown");
    }
}

/// A transaction that defers a small overwrite of one object and then overwrites another past
/// what is left to defer keeps both: the first in place, the second copy-on-write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_beyond_the_budget_keeps_the_ones_deferred_before_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let meta = dir.path().join("m");
    let device: Arc<dyn Device> = Arc::new(MemoryDevice::new("mem", DEVICE_BYTES).expect("device"));
    let config = StoreConfig {
        deferred_write_bytes_max: 8192,
        ..StoreConfig::default()
    };
    let store = Store::create(Arc::clone(&device), &meta, config.clone())
        .await
        .expect("create");
    let (small, large) = (object(1), object(2));
    let mut contents = [vec![1u8; OBJECT_BYTES], vec![2u8; OBJECT_BYTES]];
    let mut t = Transaction::new(1);
    t.write_full(&small, contents[0].clone())
        .write_full(&large, contents[1].clone());
    store.apply(t).await.expect("write_full");
    let mut t = Transaction::new(2);
    t.write(&small, 4096, vec![3u8; 4096])
        .write(&large, 0, vec![4u8; 65536]);
    store.apply(t).await.expect("overwrites");
    contents[0][4096..8192].fill(3);
    contents[1][..65536].fill(4);
    for (id, content) in [&small, &large].into_iter().zip(&contents) {
        assert_eq!(read_all(&store, id).await.as_deref(), Some(&content[..]));
    }
    store.shutdown().await.expect("shutdown");
    let store = Store::open(device, &meta, config).await.expect("reopen");
    for (id, content) in [&small, &large].into_iter().zip(&contents) {
        assert_eq!(read_all(&store, id).await.as_deref(), Some(&content[..]));
    }
    store.check_consistency().expect("consistent");
    store.shutdown().await.expect("shutdown");
}

/// What a writer task knows of its object: the last acknowledged content (`None`: absent)
/// and, while a transaction is in flight, the content it would leave.
#[derive(Default)]
struct Known {
    acknowledged: Option<Vec<u8>>,
    in_flight: Option<Option<Vec<u8>>>,
}

/// Power losses (every unflushed block dropped) while writers overwrite small pieces of their
/// objects in place, rewrite them whole (freeing extents that deferred writes touched) and
/// remove and recreate them: after each remount every object holds its last acknowledged
/// content or the one its in-flight transaction would have left, and the store is consistent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_loss_during_deferred_overwrites_loses_nothing() {
    const WRITERS: u64 = 4;
    for round in 0..6u64 {
        let dir = tempfile::tempdir().expect("tempdir");
        let meta = dir.path().join("m");
        let memory: Arc<dyn Device> =
            Arc::new(MemoryDevice::new("mem", DEVICE_BYTES).expect("memory device"));
        let device = Arc::new(FaultyDevice::new(
            "faulty",
            memory,
            FaultConfig {
                seed: round,
                unflushed_loss_probability: 1.0,
                ..FaultConfig::default()
            },
        ));
        let config = StoreConfig::default();
        let store = Arc::new(
            Store::create(device.clone(), &meta, config.clone())
                .await
                .expect("create"),
        );
        let known: Arc<Vec<Mutex<Known>>> =
            Arc::new((0..WRITERS).map(|_| Mutex::new(Known::default())).collect());
        let acknowledged = Arc::new(AtomicU64::new(0));
        let mut writers = Vec::new();
        for writer in 0..WRITERS {
            let store = Arc::clone(&store);
            let known = Arc::clone(&known);
            let acknowledged = Arc::clone(&acknowledged);
            writers.push(tokio::spawn(async move {
                let id = object(writer);
                let mut rng = ChaCha8Rng::seed_from_u64(round * 100 + writer);
                let mut content: Option<Vec<u8>> = None;
                for step in 0u64.. {
                    let mut t = Transaction::new(step);
                    let next = match &content {
                        Some(old) if rng.gen_bool(0.85) => {
                            let length = if rng.gen_bool(0.7) {
                                4096
                            } else {
                                rng.gen_range(1..9000)
                            };
                            let offset = if length == 4096 {
                                rng.gen_range(0..OBJECT_BYTES / 4096) * 4096
                            } else {
                                rng.gen_range(0..OBJECT_BYTES - length)
                            };
                            let data: Vec<u8> = (0..length).map(|_| rng.gen()).collect();
                            let mut new = old.clone();
                            new[offset..offset + length].copy_from_slice(&data);
                            t.write(&id, offset as u64, data);
                            Some(new)
                        }
                        Some(_) if rng.gen_bool(0.5) => {
                            t.remove(&id);
                            None
                        }
                        _ => {
                            let data: Vec<u8> = (0..OBJECT_BYTES).map(|_| rng.gen()).collect();
                            t.write_full(&id, data.clone());
                            Some(data)
                        }
                    };
                    known[writer as usize].lock().unwrap().in_flight = Some(next.clone());
                    if store.apply(t).await.is_err() {
                        // The power went: this transaction may or may not have landed.
                        return;
                    }
                    let mut state = known[writer as usize].lock().unwrap();
                    state.acknowledged = next.clone();
                    state.in_flight = None;
                    drop(state);
                    content = next;
                    acknowledged.fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
        let target = 200 + round * 150;
        while acknowledged.load(Ordering::Relaxed) < target {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        device.crash().await.expect("crash");
        for writer in writers {
            writer.await.expect("writer");
        }
        drop(store);
        device.restart();
        let store = Store::open(device.clone(), &meta, config)
            .await
            .expect("reopen");
        for writer in 0..WRITERS {
            let id = object(writer);
            let found = read_all(&store, &id).await;
            let state = known[writer as usize].lock().unwrap();
            let matches_in_flight = state
                .in_flight
                .as_ref()
                .is_some_and(|in_flight| *in_flight == found);
            assert!(
                found == state.acknowledged || matches_in_flight,
                "round {round}: object {writer} is neither its acknowledged content nor its \
                 in-flight one ({} bytes found)",
                found.as_ref().map_or(0, Vec::len)
            );
        }
        store
            .check_consistency()
            .expect("consistent after the power loss");
        store.shutdown().await.expect("shutdown");
    }
}
