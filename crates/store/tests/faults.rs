//! Faulty-device tests: bit flips are checksum errors, EIO is an error, a failed flush poisons
//! the store, torn writes and device crashes never expose a torn or lost acknowledged write,
//! and transactions whose callers are dropped mid-flight leak nothing.

#[path = "../src/crash_format.rs"]
mod crash_format;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use device::{
    Device, FaultConfig, FaultKind, FaultRule, FaultTrigger, FaultyDevice, MemoryDevice, OpKind,
};
use rand::{Rng, SeedableRng};
use store::{ObjectId, Store, StoreConfig, StoreError, Transaction};

const DEVICE_BYTES: u64 = 64 << 20;

fn faulty(config: FaultConfig) -> Arc<FaultyDevice> {
    let memory: Arc<dyn Device> =
        Arc::new(MemoryDevice::new("mem", DEVICE_BYTES).expect("memory device"));
    Arc::new(FaultyDevice::new("faulty", memory, config))
}

fn object(id: u64) -> ObjectId {
    ObjectId::new(crash_format::collection(id), crash_format::name(id))
}

fn create_transaction(id: u64) -> Transaction {
    let mut t = Transaction::new(id);
    t.write_full(&object(id), crash_format::content(id, 0))
        .set_xattr(&object(id), "gen", 0u64.to_le_bytes().to_vec());
    t
}

fn update_transaction(id: u64, generation: u64) -> Transaction {
    let (offset, data) = crash_format::update(id, generation);
    let mut t = Transaction::new(id);
    t.write(&object(id), offset, data).set_xattr(
        &object(id),
        "gen",
        generation.to_le_bytes().to_vec(),
    );
    t
}

/// Every acknowledged (id, generation) reads back as exactly some generation >= it.
async fn verify(store: &Store, acked: &BTreeMap<u64, u64>) {
    for (&id, &minimum) in acked {
        let (collection, name) = (crash_format::collection(id), crash_format::name(id));
        let generation = store
            .get_xattr(&collection, &name, "gen")
            .await
            .unwrap_or_else(|e| panic!("acknowledged object {id} lost: {e}"));
        let generation = u64::from_le_bytes(generation.try_into().expect("8 bytes"));
        assert!(
            generation >= minimum,
            "object {id}: {generation} < {minimum}"
        );
        let data = store
            .read(&collection, &name, 0, 1 << 30)
            .await
            .expect("read");
        assert!(
            data == crash_format::content(id, generation),
            "object {id} torn"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bit_flips_are_checksum_errors_never_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    let device = faulty(FaultConfig::default());
    let store = Store::create(device.clone(), dir.path().join("m"), StoreConfig::default())
        .await
        .expect("create");
    for id in 0..20 {
        store.apply(create_transaction(id)).await.expect("write");
    }
    device.set_config(FaultConfig {
        seed: 3,
        read_bit_flip_probability: 1.0,
        ..FaultConfig::default()
    });
    for id in 0..20 {
        let result = store
            .read(
                &crash_format::collection(id),
                &crash_format::name(id),
                0,
                1 << 20,
            )
            .await;
        assert!(
            matches!(result, Err(StoreError::Checksum { .. })),
            "object {id}: {result:?}"
        );
    }
    // A partial overwrite must not merge corrupt old bytes into new data either.
    let result = store.apply(update_transaction(5, 1)).await;
    let (start, end) = crash_format::range(5, 1);
    let unit_aligned = (start * crash_format::BLOCK_BYTES).is_multiple_of(4096)
        && ((end * crash_format::BLOCK_BYTES).is_multiple_of(4096)
            || end == crash_format::blocks(5));
    if !unit_aligned {
        assert!(
            matches!(result, Err(StoreError::Checksum { .. })),
            "{result:?}"
        );
    }
    // Corruption written to the medium is caught on the way back too.
    device.set_config(FaultConfig {
        seed: 4,
        write_bit_flip_probability: 1.0,
        ..FaultConfig::default()
    });
    store.apply(create_transaction(100)).await.expect("write");
    device.set_config(FaultConfig::default());
    let result = store
        .read(
            &crash_format::collection(100),
            &crash_format::name(100),
            0,
            1 << 20,
        )
        .await;
    assert!(
        matches!(result, Err(StoreError::Checksum { .. })),
        "{result:?}"
    );
    // Clean reads still work.
    let data = store
        .read(
            &crash_format::collection(7),
            &crash_format::name(7),
            0,
            1 << 20,
        )
        .await
        .expect("read");
    assert!(data == crash_format::content(7, 0));
    assert!(!store.is_poisoned());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eio_surfaces_as_an_error_and_leaks_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let device = faulty(FaultConfig::default());
    let store = Store::create(device.clone(), dir.path().join("m"), StoreConfig::default())
        .await
        .expect("create");
    store.apply(create_transaction(1)).await.expect("write");
    device.set_config(FaultConfig {
        seed: 9,
        read_error_probability: 1.0,
        ..FaultConfig::default()
    });
    let result = store
        .read(&crash_format::collection(1), &crash_format::name(1), 0, 100)
        .await;
    assert!(matches!(result, Err(StoreError::Device(_))), "{result:?}");
    // Random write EIO and torn writes: failed transactions vanish, others are intact.
    device.set_config(FaultConfig {
        seed: 10,
        write_error_probability: 0.1,
        torn_write_probability: 0.1,
        ..FaultConfig::default()
    });
    let mut acked = BTreeMap::from([(1u64, 0u64)]);
    let mut failures = 0;
    for id in 2..200 {
        match store.apply(create_transaction(id)).await {
            Ok(()) => {
                acked.insert(id, 0);
            }
            Err(StoreError::Device(_)) => failures += 1,
            Err(other) => panic!("unexpected {other}"),
        }
    }
    assert!(failures > 0);
    device.set_config(FaultConfig::default());
    verify(&store, &acked).await;
    for id in 2..200 {
        if !acked.contains_key(&id) {
            assert!(!store
                .exists(&crash_format::collection(id), &crash_format::name(id))
                .await
                .expect("exists"));
        }
    }
    store.check_consistency().expect("no leaked extents");
    assert!(!store.is_poisoned());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_flush_poisons_and_the_transaction_is_not_visible() {
    let dir = tempfile::tempdir().expect("tempdir");
    let meta = dir.path().join("m");
    let device = faulty(FaultConfig::default());
    // Without deferral every data transaction flushes the device.
    let config = StoreConfig {
        deferred_write_bytes_max: 0,
        ..StoreConfig::default()
    };
    let store = Store::create(device.clone(), &meta, config)
        .await
        .expect("create");
    store.apply(create_transaction(1)).await.expect("write");
    device.add_rule(FaultRule::fail_nth(OpKind::Flush, 0));
    let result = store.apply(create_transaction(2)).await;
    assert!(matches!(result, Err(StoreError::Poisoned)), "{result:?}");
    assert!(store.is_poisoned());
    let result = store.apply(create_transaction(3)).await;
    assert!(matches!(result, Err(StoreError::Poisoned)), "{result:?}");
    drop(store);
    device.set_config(FaultConfig::default());
    let store = Store::open(device.clone(), &meta, StoreConfig::default())
        .await
        .expect("reopen");
    verify(&store, &BTreeMap::from([(1, 0)])).await;
    assert!(!store
        .exists(&crash_format::collection(2), &crash_format::name(2))
        .await
        .expect("exists"));
    store.check_consistency().expect("consistent");
}

/// Copies a directory tree (the metadata database, between mounts).
fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// Four acknowledged writes whose changes only the metadata log holds, as after a SIGKILL
/// (the database takes a batch's changes without a sync, so a crash can leave it behind the
/// log): the store is dropped without a shutdown and its database put back as it was before
/// the writes. Returns the device, the metadata path and the writes' ids.
async fn acknowledged_writes_only_the_log_holds(
    dir: &std::path::Path,
) -> (Arc<FaultyDevice>, std::path::PathBuf, Vec<u64>) {
    let meta = dir.join("m");
    let before = dir.join("m-before");
    let device = faulty(FaultConfig::default());
    let store = Store::create(device.clone(), &meta, StoreConfig::default())
        .await
        .expect("create");
    store.shutdown().await.expect("shutdown");
    copy_tree(&meta, &before);
    let store = Store::open(device.clone(), &meta, StoreConfig::default())
        .await
        .expect("open");
    let ids = vec![1, 2, 3, 4];
    for &id in &ids {
        store.apply(create_transaction(id)).await.expect("write");
    }
    drop(store);
    std::fs::remove_dir_all(&meta).expect("rm");
    copy_tree(&before, &meta);
    (device, meta, ids)
}

/// A read that fails while a mount checks a log record's data fails the mount and changes
/// nothing; the next mount, with the device reading again, has every acknowledged write. It
/// used to take the failed read for "never written": the record and every later one were
/// dropped and the log emptied, so the acknowledged writes were gone for good (found by a
/// review: one EIO on the last batch's data lost it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_error_while_replaying_fails_the_mount_and_loses_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (device, meta, ids) = acknowledged_writes_only_the_log_holds(dir.path()).await;
    // Once, any read below the log region (the last 4 MiB): the mount's check of the last
    // batch's data.
    device.add_rule(FaultRule {
        op: Some(OpKind::Read),
        trigger: FaultTrigger::OffsetRange {
            start_bytes: 0,
            end_bytes: DEVICE_BYTES - (4 << 20),
        },
        fault: FaultKind::Error,
        times: Some(1),
    });
    let result = Store::open(device.clone(), &meta, StoreConfig::default()).await;
    assert_eq!(device.fault_counts().errors, 1, "the mount read the data");
    let error = result.err().expect("the mount must fail");
    assert!(matches!(error, StoreError::Mount(_)), "{error}");
    let store = Store::open(device.clone(), &meta, StoreConfig::default())
        .await
        .expect("reopen");
    verify(&store, &ids.iter().map(|&id| (id, 0)).collect()).await;
    store.check_consistency().expect("consistent");
    store.shutdown().await.expect("shutdown");
}

/// A flipped bit in a record in the middle of the log fails the mount, naming it, where it
/// used to end the log there and drop the acknowledged writes of that record and every later
/// one without a word.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_record_in_the_middle_of_the_log_fails_the_mount() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (device, meta, _) = acknowledged_writes_only_the_log_holds(dir.path()).await;
    // The records are the blocks of the log region (the device's blocks) that start with its
    // magic ("SWAL").
    let block = device.block_size_bytes() as usize;
    let log_start = DEVICE_BYTES - (4 << 20);
    let mut log = vec![0u8; 4 << 20];
    device.read_at(log_start, &mut log).await.expect("read log");
    let records: Vec<usize> = (0..log.len())
        .step_by(block)
        .filter(|&at| log[at..at + 4] == *b"SWAL")
        .collect();
    assert!(records.len() >= 4, "{records:?}");
    let damaged = records[1];
    log[damaged + 40] ^= 0x10;
    device
        .write_at(log_start, &log)
        .await
        .expect("write log back");
    let error = Store::open(device.clone(), &meta, StoreConfig::default())
        .await
        .err()
        .expect("the mount must fail");
    assert!(matches!(error, StoreError::Mount(_)), "{error}");
    assert!(
        error
            .to_string()
            .contains(&format!("log offset {damaged} ")),
        "{error}"
    );
}

/// The log region's records: offsets (in the region) of the blocks that start with its magic.
async fn log_records(device: &FaultyDevice) -> (Vec<u8>, Vec<usize>) {
    let block = device.block_size_bytes() as usize;
    let mut log = vec![0u8; 4 << 20];
    device
        .read_at(DEVICE_BYTES - (4 << 20), &mut log)
        .await
        .expect("read log");
    let records = (0..log.len())
        .step_by(block)
        .filter(|&at| log[at..at + 4] == *b"SWAL")
        .collect();
    (log, records)
}

/// Four bytes zeroed in the log's first record, which later ones say was flushed: the mount
/// fails, where it used to take the log for empty and start without every write it held
/// (acknowledged objects were gone, and nothing said so). With `salvage_damaged_log` the
/// store mounts what it can prove and keeps the damage noted, across mounts, until its owner
/// clears it; then it mounts cleanly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_first_record_fails_the_mount_or_is_salvaged_and_noted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (device, meta, ids) = acknowledged_writes_only_the_log_holds(dir.path()).await;
    let (mut log, records) = log_records(&device).await;
    assert!(records.len() >= 4, "{records:?}");
    log[records[0] + 40..records[0] + 44].fill(0);
    device
        .write_at(DEVICE_BYTES - (4 << 20), &log)
        .await
        .expect("write log back");
    let error = Store::open(device.clone(), &meta, StoreConfig::default())
        .await
        .err()
        .expect("the mount must fail");
    assert!(matches!(error, StoreError::Mount(_)), "{error}");
    assert!(error.to_string().contains("first record"), "{error}");
    let salvage = StoreConfig {
        salvage_damaged_log: true,
        ..StoreConfig::default()
    };
    let store = Store::open(device.clone(), &meta, salvage.clone())
        .await
        .expect("a salvaging mount");
    let noted = store.log_damage().expect("read the note");
    assert!(noted.is_some_and(|why| why.contains("first record")));
    let collection = crash_format::collection(ids[0]);
    assert!(!store
        .exists(&collection, &crash_format::name(ids[0]))
        .await
        .expect("exists"));
    store.check_consistency().expect("consistent");
    // The note outlives a crash (no shutdown), and the next mount finds no damage anew.
    drop(store);
    let store = Store::open(device.clone(), &meta, salvage)
        .await
        .expect("reopen");
    assert!(store.log_damage().expect("note").is_some());
    store.clear_log_damage().expect("clear");
    store.shutdown().await.expect("shutdown");
    let store = Store::open(device.clone(), &meta, StoreConfig::default())
        .await
        .expect("a clean mount once cleared");
    assert_eq!(store.log_damage().expect("note"), None);
    store.shutdown().await.expect("shutdown");
}

/// Every object among `attempted` that exists after a remount, acknowledged or not, reads
/// back whole as some generation: a transaction the crash cut short is absent or complete,
/// never metadata over data that did not reach the device.
async fn verify_present_are_whole(store: &Store, attempted: &std::collections::BTreeSet<u64>) {
    for &id in attempted {
        let (collection, name) = (crash_format::collection(id), crash_format::name(id));
        if !store.exists(&collection, &name).await.expect("exists") {
            continue;
        }
        let generation = store
            .get_xattr(&collection, &name, "gen")
            .await
            .unwrap_or_else(|e| panic!("object {id} without its generation: {e}"));
        let generation = u64::from_le_bytes(generation.try_into().expect("8 bytes"));
        let data = store
            .read(&collection, &name, 0, 1 << 30)
            .await
            .unwrap_or_else(|e| panic!("object {id} (unacknowledged or not) unreadable: {e}"));
        assert!(
            data == crash_format::content(id, generation),
            "object {id} torn"
        );
    }
}

/// Concurrent writers; the device crashes (losing unflushed blocks) or the writers' tasks
/// are aborted mid-transaction at a random moment; after a remount every acknowledged write is
/// intact, every object present is whole, and the allocator matches the metadata. Half of
/// the crash rounds defer no write, so a batch's record can reach the device without its
/// data and the mount must drop records whose data was lost. From round 6 on every flush
/// takes 0.3-3 ms, so several batches' flushes are in flight when the device crashes (as on
/// a real disk, where a flush is several times slower than a write).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashes_and_dropped_transactions_lose_no_acknowledged_write() {
    for round in 0..16u64 {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(round);
        let dir = tempfile::tempdir().expect("tempdir");
        let meta = dir.path().join("m");
        let slow_flushes = (round >= 6).then(|| FaultRule {
            op: Some(OpKind::Flush),
            trigger: FaultTrigger::Always,
            fault: FaultKind::LatencySpike {
                duration_us: 300 * (1 + round % 10),
            },
            times: None,
        });
        let device = faulty(FaultConfig {
            seed: round,
            unflushed_loss_probability: 0.7,
            rules: slow_flushes.into_iter().collect(),
            ..FaultConfig::default()
        });
        let config = if (round / 2) % 2 == 1 {
            StoreConfig {
                deferred_write_bytes_max: 0,
                ..StoreConfig::default()
            }
        } else {
            StoreConfig::default()
        };
        let store = Arc::new(
            Store::create(device.clone(), &meta, config)
                .await
                .expect("create"),
        );
        let acked = Arc::new(Mutex::new(BTreeMap::<u64, u64>::new()));
        let attempted = Arc::new(Mutex::new(std::collections::BTreeSet::<u64>::new()));
        let mut tasks = Vec::new();
        for task in 0..8u64 {
            let store = Arc::clone(&store);
            let acked = Arc::clone(&acked);
            let attempted = Arc::clone(&attempted);
            tasks.push(tokio::spawn(async move {
                let mut generation = BTreeMap::new();
                for step in 0..10_000u64 {
                    let id = task * 1_000_000 + step / 2;
                    let next = if step % 2 == 0 { 0 } else { 1 };
                    let transaction = if next == 0 {
                        create_transaction(id)
                    } else {
                        update_transaction(id, 1)
                    };
                    attempted.lock().expect("lock").insert(id);
                    if store.apply(transaction).await.is_err() {
                        return;
                    }
                    generation.insert(id, next);
                    acked.lock().expect("lock").insert(id, next);
                }
            }));
        }
        tokio::time::sleep(std::time::Duration::from_millis(rng.gen_range(1..40))).await;
        let crash = round % 2 == 0;
        if crash {
            device.crash().await.expect("crash");
        }
        for task in &tasks {
            task.abort();
        }
        for task in tasks {
            let _ = task.await;
        }
        if !crash {
            // The dropped callers' transactions run to their end on their own tasks (see
            // `Store::apply`); once they have, nothing is leaked.
            store
                .apply(create_transaction(u64::MAX / 2))
                .await
                .expect("sentinel");
            let mut waited_ms = 0;
            while let Err(error) = store.check_consistency() {
                assert!(
                    waited_ms < 10_000,
                    "leak once the dropped callers' transactions ended: {error}"
                );
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                waited_ms += 10;
            }
        }
        drop(Arc::try_unwrap(store).ok().expect("only owner"));
        device.restart();
        let store = Store::open(device.clone(), &meta, StoreConfig::default())
            .await
            .expect("reopen");
        let acked = acked.lock().expect("lock").clone();
        verify(&store, &acked).await;
        let attempted = attempted.lock().expect("lock").clone();
        verify_present_are_whole(&store, &attempted).await;
        store.check_consistency().expect("consistent after remount");
        store.shutdown().await.expect("shutdown");
    }
}

/// A power loss that drops every unflushed block (the metadata log's included: it lives on
/// the device) loses no acknowledged write, with deferred copies in the log records (the
/// mount rewrites those of the last record) and with a transaction in flight at the loss.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deferred_writes_are_replayed_after_a_power_loss() {
    let dir = tempfile::tempdir().expect("tempdir");
    let meta = dir.path().join("m");
    let device = faulty(FaultConfig {
        seed: 1,
        unflushed_loss_probability: 1.0,
        ..FaultConfig::default()
    });
    let config = StoreConfig {
        deferred_write_bytes_max: 65536,
        ..StoreConfig::default()
    };
    let store = Store::create(device.clone(), &meta, config.clone())
        .await
        .expect("create");
    let mut acked = BTreeMap::new();
    for id in 0..50 {
        store.apply(create_transaction(id)).await.expect("write");
        acked.insert(id, 0);
    }
    for id in 0..50 {
        store
            .apply(update_transaction(id, 1))
            .await
            .expect("update");
        acked.insert(id, 1);
    }
    // Removing objects frees extents while records exist: they must stay unused until the
    // records are retired.
    for id in 40..50 {
        let mut t = Transaction::new(9);
        t.remove(&object(id));
        store.apply(t).await.expect("remove");
        acked.remove(&id);
    }
    store.check_consistency().expect("held extents accounted");
    // One more update in flight when the power goes.
    let store = Arc::new(store);
    let in_flight = {
        let store = Arc::clone(&store);
        tokio::spawn(async move { store.apply(update_transaction(0, 2)).await })
    };
    tokio::task::yield_now().await;
    device.crash().await.expect("crash");
    let landed = in_flight.await.expect("join").is_ok();
    if landed {
        acked.insert(0, 2);
    }
    drop(store);
    device.restart();
    let store = Store::open(device.clone(), &meta, config)
        .await
        .expect("reopen");
    if !landed {
        // Never acknowledged: either version may be there, whole.
        let data = store
            .read(
                &crash_format::collection(0),
                &crash_format::name(0),
                0,
                1 << 20,
            )
            .await
            .expect("read");
        assert!(
            data == crash_format::content(0, 1) || data == crash_format::content(0, 2),
            "object 0 is torn"
        );
        acked.remove(&0);
    }
    verify(&store, &acked).await;
    store.check_consistency().expect("consistent");
    store.shutdown().await.expect("shutdown");
}

/// 4 KiB of 1 KiB pieces that each end with their own crc32c: the crc32c of the whole is
/// the same whatever the pieces hold (a crc's residue), as for the crash format's objects.
fn self_checked_unit(seed: u64) -> Vec<u8> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut unit = Vec::with_capacity(4096);
    for _ in 0..4 {
        let mut piece: Vec<u8> = (0..1020).map(|_| rng.gen()).collect();
        let crc = crc32c::crc32c(&piece);
        piece.extend_from_slice(&crc.to_le_bytes());
        unit.extend_from_slice(&piece);
    }
    unit
}

/// A power loss during a batch's flush can keep its log record and lose its data: the
/// extent then holds what it held before, here an older object's data with the same crc32c
/// as the new data. A mount must not make the batch visible over those bytes (it did, when
/// it checked a record's data against the onodes' crc32c; `tests/kill.rs` found it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_data_write_is_caught_even_when_the_old_data_has_the_same_crc() {
    let (old, new) = (self_checked_unit(1), self_checked_unit(2));
    assert_eq!(crc32c::crc32c(&old), crc32c::crc32c(&new), "the premise");
    assert_ne!(old, new);
    let mut reverted_rounds = 0;
    for round in 0..24u64 {
        let dir = tempfile::tempdir().expect("tempdir");
        let meta = dir.path().join("m");
        // 4 KiB blocks: a lost write loses the whole unit, not a mix of old and new.
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
        let store = Store::create(device.clone(), &meta, StoreConfig::default())
            .await
            .expect("create");
        let (x, y) = (ObjectId::new("1.0", "x"), ObjectId::new("1.0", "y"));
        let mut t = Transaction::new(1);
        t.write_full(&x, old.clone());
        store.apply(t).await.expect("write x");
        // x moves to a new extent; its old one, holding `old`, is free once this is durable.
        let mut t = Transaction::new(2);
        t.write_full(&x, vec![7u8; 4096]);
        store.apply(t).await.expect("rewrite x");
        let reused = store.describe_onode("1.0", "x").await.expect("x");
        // y takes the freed extent; the device loses power during its batch's flush.
        device.add_rule(FaultRule {
            op: Some(OpKind::Flush),
            trigger: FaultTrigger::Always,
            fault: FaultKind::Crash,
            times: Some(1),
        });
        let mut t = Transaction::new(3);
        t.write_full(&y, new.clone());
        assert!(
            store.apply(t).await.is_err(),
            "the flush failed: never acknowledged"
        );
        drop(store);
        device.restart();
        let mut first_unit = vec![0u8; 4096];
        device.read_at(0, &mut first_unit).await.expect("read");
        reverted_rounds += usize::from(first_unit == old);
        let store = Store::open(device.clone(), &meta, StoreConfig::default())
            .await
            .expect("reopen");
        if store.exists("1.0", "y").await.expect("exists") {
            let data = store.read("1.0", "y", 0, 1 << 20).await.expect("read y");
            assert!(
                data == new,
                "round {round}: y is visible over data it never wrote (x was {reused:?})"
            );
        }
        assert_eq!(
            store.read("1.0", "x", 0, 1 << 20).await.expect("read x"),
            vec![7u8; 4096]
        );
        store.check_consistency().expect("consistent");
        store.shutdown().await.expect("shutdown");
    }
    assert!(
        reverted_rounds > 0,
        "no round lost y's data write: the test tested nothing"
    );
}
