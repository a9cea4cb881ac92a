//! Group commit: concurrent transactions share one device flush (their data and the batch's
//! log record, on the same device) per batch, and no batch pays more than that.

use std::sync::Arc;

use device::{
    Device, DeviceError, FaultConfig, FaultKind, FaultRule, FaultTrigger, FaultyDevice,
    MemoryDevice, OpKind,
};
use store::{CommitStats, ObjectId, Store, StoreConfig, StoreError, Transaction};

const MIB: u64 = 1 << 20;

/// Every flush takes `flush_us` more.
fn slow_flushes(flush_us: u64) -> FaultRule {
    FaultRule {
        op: Some(OpKind::Flush),
        trigger: FaultTrigger::Always,
        fault: FaultKind::LatencySpike {
            duration_us: flush_us,
        },
        times: None,
    }
}

/// A memory device whose every flush takes `flush_us`, so transactions submitted meanwhile
/// queue behind it.
fn slow_flushing_device(flush_us: u64) -> Arc<dyn Device> {
    let memory: Arc<dyn Device> = Arc::new(MemoryDevice::new("mem", 64 * MIB).expect("device"));
    let rule = slow_flushes(flush_us);
    Arc::new(FaultyDevice::new(
        "slow-flush",
        memory,
        FaultConfig {
            rules: vec![rule],
            ..FaultConfig::default()
        },
    ))
}

async fn write_concurrently(store: &Arc<Store>, objects: usize) {
    let writers: Vec<_> = (0..objects)
        .map(|index| {
            let store = Arc::clone(store);
            tokio::spawn(async move {
                let mut transaction = Transaction::new(1);
                let id = ObjectId::new("1.0", format!("object-{index}"));
                transaction.write_full(&id, vec![index as u8; 4096]);
                store.apply(transaction).await
            })
        })
        .collect();
    for writer in writers {
        writer.await.expect("join").expect("apply");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writes_share_flushes_and_commits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let device = slow_flushing_device(20_000);
    let config = StoreConfig {
        deferred_write_bytes_max: 0,
        ..StoreConfig::default()
    };
    let store = Arc::new(
        Store::create(Arc::clone(&device), dir.path().join("meta"), config)
            .await
            .expect("create"),
    );
    write_concurrently(&store, 64).await;
    let stats = store.commit_stats();
    assert_eq!(stats.transactions, 64);
    // One metadata commit and at most one device flush per batch, whatever its size.
    assert_eq!(stats.metadata_syncs, stats.batches);
    assert_eq!(
        stats.device_flushes, stats.batches,
        "every batch wrote data"
    );
    assert_eq!(device.stats().flush.ops, stats.device_flushes);
    // While the first 20 ms flush runs, at most 7 batches fill the pipeline (4 flushing, 2
    // queued for a sync thread, 1 in the writer's hands); the writes submitted meanwhile wait
    // and share the next ones. A few more: 64 objects hash onto 1,024 lock shards (about two
    // collisions expected), and a write whose shard an earlier one holds waits for that
    // one's commit, then makes or joins a later batch (with each transaction on a task of
    // its own, CI saw 10). A handful of batches, not one per write.
    assert!(stats.batches <= 16, "{stats:?}");
    // Write-behind: the committer wrote each batch's neighbouring 4 KiB extents as one write.
    assert!(device.stats().write.ops < 64, "{:?}", device.stats().write);
    Arc::into_inner(store)
        .expect("last handle")
        .shutdown()
        .await
        .expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deferred_copies_ride_in_the_batch_that_flushes_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let device = slow_flushing_device(0);
    let config = StoreConfig {
        deferred_write_bytes_max: 65536,
        ..StoreConfig::default()
    };
    let store = Arc::new(
        Store::create(Arc::clone(&device), dir.path().join("meta"), config)
            .await
            .expect("create"),
    );
    write_concurrently(&store, 16).await;
    let stats = store.commit_stats();
    assert_eq!(
        stats,
        CommitStats {
            transactions: 16,
            device_flushes: stats.batches,
            metadata_syncs: stats.batches,
            ..stats
        },
        "the log is on the device: one flush per batch, deferred or not"
    );
    assert!(stats.batches >= 1);
}

/// A device whose flushes take `flush_ms` and that counts how many run at once. Its first
/// flush numbered `held_flush` also waits (up to `first_flush_hold`) for a second flush to start
/// beside it, so that whether flushes overlap does not depend on how the scheduler happens to
/// interleave writers.
struct OverlapCountingDevice {
    inner: MemoryDevice,
    flush_ms: u64,
    first_flush_hold: std::time::Duration,
    flushes_started: std::sync::atomic::AtomicU64,
    held_flush: std::sync::atomic::AtomicU64,
    flushing: std::sync::atomic::AtomicU64,
    flushing_max: std::sync::atomic::AtomicU64,
}

impl OverlapCountingDevice {
    fn new(flush_ms: u64) -> Self {
        Self {
            inner: MemoryDevice::new("mem", 64 * MIB).expect("device"),
            flush_ms,
            first_flush_hold: std::time::Duration::from_secs(2),
            flushes_started: Default::default(),
            held_flush: std::sync::atomic::AtomicU64::new(u64::MAX),
            flushing: Default::default(),
            flushing_max: Default::default(),
        }
    }
}

#[async_trait::async_trait]
impl Device for OverlapCountingDevice {
    async fn read_at(&self, offset_bytes: u64, buffer: &mut [u8]) -> Result<(), DeviceError> {
        self.inner.read_at(offset_bytes, buffer).await
    }
    async fn write_at(&self, offset_bytes: u64, data: &[u8]) -> Result<(), DeviceError> {
        self.inner.write_at(offset_bytes, data).await
    }
    async fn flush(&self) -> Result<(), DeviceError> {
        use std::sync::atomic::Ordering::SeqCst;
        let now = self.flushing.fetch_add(1, SeqCst) + 1;
        self.flushing_max.fetch_max(now, SeqCst);
        if self.flushes_started.fetch_add(1, SeqCst) == self.held_flush.load(SeqCst) {
            let deadline = std::time::Instant::now() + self.first_flush_hold;
            while self.flushing.load(SeqCst) < 2 && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        // A blocking sleep: the store flushes from threads of its own, never from a task.
        std::thread::sleep(std::time::Duration::from_millis(self.flush_ms));
        self.flushing.fetch_sub(1, SeqCst);
        self.inner.flush().await
    }
    async fn discard(&self, offset_bytes: u64, length_bytes: u64) -> Result<(), DeviceError> {
        self.inner.discard(offset_bytes, length_bytes).await
    }
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }
    fn block_size_bytes(&self) -> u64 {
        self.inner.block_size_bytes()
    }
    fn name(&self) -> &str {
        "overlap-counting"
    }
    fn kind(&self) -> device::DeviceKind {
        self.inner.kind()
    }
    fn stats(&self) -> device::DeviceStats {
        self.inner.stats()
    }
}

/// One write whose flush is held, then 16 writers, each writing its objects one after
/// another: the batches formed while one flushes are sealed and flushed beside it, up to
/// `flushes_in_flight_max` at once, and never more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flushes_of_later_batches_run_beside_earlier_ones_up_to_the_limit() {
    for (in_flight_max, expected) in [(1u64, 1..=1u64), (4, 2..=4)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let device = Arc::new(OverlapCountingDevice::new(10));
        let config = StoreConfig {
            flushes_in_flight_max: in_flight_max as usize,
            ..StoreConfig::default()
        };
        let store = Arc::new(
            Store::create(
                Arc::clone(&device) as Arc<dyn Device>,
                dir.path().join("meta"),
                config,
            )
            .await
            .expect("create"),
        );
        let flushes_before = device
            .flushes_started
            .load(std::sync::atomic::Ordering::SeqCst);
        device
            .held_flush
            .store(flushes_before, std::sync::atomic::Ordering::SeqCst);
        let first = {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                let mut transaction = Transaction::new(1);
                transaction.write_full(&ObjectId::new("1.0", "first"), vec![0xFF; 4096]);
                store.apply(transaction).await.expect("apply first");
            })
        };
        while device
            .flushes_started
            .load(std::sync::atomic::Ordering::SeqCst)
            == flushes_before
        {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        let writers: Vec<_> = (0..16)
            .map(|writer| {
                let store = Arc::clone(&store);
                tokio::spawn(async move {
                    for step in 0..5 {
                        let mut transaction = Transaction::new(1);
                        let id = ObjectId::new("1.0", format!("object-{writer}-{step}"));
                        transaction.write_full(&id, vec![writer as u8; 4096]);
                        store.apply(transaction).await.expect("apply");
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.await.expect("join");
        }
        first.await.expect("join first");
        let overlapped = device
            .flushing_max
            .load(std::sync::atomic::Ordering::SeqCst);
        assert!(
            expected.contains(&overlapped),
            "{overlapped} flushes at once with flushes_in_flight_max {in_flight_max}"
        );
        for writer in 0..16u8 {
            let data = store
                .read("1.0", &format!("object-{writer}-4"), 0, 4096)
                .await
                .expect("read");
            assert_eq!(data, vec![writer; 4096]);
        }
        Arc::into_inner(store)
            .expect("last handle")
            .shutdown()
            .await
            .expect("shutdown");
    }
}

/// A flush that fails while later batches are sealed or flushing behind it: that batch and
/// every later one fail (their records, after the failed one's, are taken back with it), the
/// earlier ones were acknowledged, and after a remount exactly the acknowledged objects
/// exist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_flush_fails_every_batch_behind_it_and_only_those() {
    let dir = tempfile::tempdir().expect("tempdir");
    let meta = dir.path().join("meta");
    let memory: Arc<dyn Device> = Arc::new(MemoryDevice::new("mem", 64 * MIB).expect("device"));
    let device = Arc::new(FaultyDevice::new(
        "fails-one-flush",
        memory,
        FaultConfig {
            rules: vec![FaultRule::fail_nth(OpKind::Flush, 6), slow_flushes(5_000)],
            ..FaultConfig::default()
        },
    ));
    let store = Arc::new(
        Store::create(
            Arc::clone(&device) as Arc<dyn Device>,
            &meta,
            StoreConfig::default(),
        )
        .await
        .expect("create"),
    );
    let acknowledged = Arc::new(std::sync::Mutex::new(Vec::new()));
    let writers: Vec<_> = (0..16)
        .map(|writer| {
            let store = Arc::clone(&store);
            let acknowledged = Arc::clone(&acknowledged);
            tokio::spawn(async move {
                for step in 0.. {
                    let name = format!("object-{writer}-{step}");
                    let mut transaction = Transaction::new(1);
                    transaction.write_full(&ObjectId::new("1.0", name.clone()), vec![7; 4096]);
                    match store.apply(transaction).await {
                        Ok(()) => acknowledged.lock().expect("lock").push(name),
                        Err(StoreError::Poisoned) => return step,
                        Err(other) => panic!("{other}"),
                    }
                }
                unreachable!()
            })
        })
        .collect();
    for writer in writers {
        writer.await.expect("join");
    }
    assert!(store.is_poisoned());
    let mut acknowledged = acknowledged.lock().expect("lock").clone();
    assert!(!acknowledged.is_empty());
    drop(Arc::into_inner(store).expect("last handle"));
    device.set_config(FaultConfig::default());
    let store = Store::open(
        Arc::clone(&device) as Arc<dyn Device>,
        &meta,
        StoreConfig::default(),
    )
    .await
    .expect("reopen");
    let mut present = store.list("1.0", None, usize::MAX).await.expect("list");
    acknowledged.sort();
    present.sort();
    assert_eq!(present, acknowledged);
    store.check_consistency().expect("consistent");
}

/// The stage times say where a write waited: with every flush taking 20 ms, each committed
/// transaction spent at least that in the flush stage, and its stages add up to no more than
/// its caller waited for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stage_times_show_a_slow_flush_where_it_is() {
    const FLUSH_US: u64 = 20_000;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(
        Store::create(
            slow_flushing_device(FLUSH_US),
            dir.path().join("meta"),
            StoreConfig::default(),
        )
        .await
        .expect("create"),
    );
    let before = store.commit_stats();
    let started = std::time::Instant::now();
    write_concurrently(&store, 8).await;
    let waited_ns = started.elapsed().as_nanos() as u64;
    let after = store.commit_stats();
    let transactions = after.transactions - before.transactions;
    assert_eq!(transactions, 8, "every write counted once answered");
    let stages = after.stages.since(&before.stages);
    assert!(
        stages.flushed_ns >= transactions * FLUSH_US * 1000,
        "each transaction waited for a whole flush: {stages:?}"
    );
    // Every transaction was applied no earlier than `started` and answered before
    // `write_concurrently` returned, so its stages (all but the answer's, added after it) fit
    // in that time.
    let counted: u64 = stages
        .named()
        .iter()
        .filter(|(name, _)| *name != "answer")
        .map(|(_, nanos)| nanos)
        .sum();
    assert!(
        counted <= transactions * waited_ns,
        "{counted} ns over {transactions} transactions in {waited_ns} ns: {stages:?}"
    );
    assert!(
        stages.per_transaction(transactions).starts_with("prepare "),
        "{}",
        stages.per_transaction(transactions)
    );
}
