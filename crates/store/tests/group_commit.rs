//! Group commit: concurrent transactions share one device flush (their data and the batch's
//! log record, on the same device) per batch, and no batch pays more than that.

use std::sync::Arc;

use device::{
    Device, FaultConfig, FaultKind, FaultRule, FaultTrigger, FaultyDevice, MemoryDevice, OpKind,
};
use store::{CommitStats, ObjectId, Store, StoreConfig, Transaction};

const MIB: u64 = 1 << 20;

/// A memory device whose every flush takes `flush_us`, so transactions submitted meanwhile
/// queue behind it.
fn slow_flushing_device(flush_us: u64) -> Arc<dyn Device> {
    let memory: Arc<dyn Device> = Arc::new(MemoryDevice::new("mem", 64 * MIB).expect("device"));
    let rule = FaultRule {
        op: Some(OpKind::Flush),
        trigger: FaultTrigger::Always,
        fault: FaultKind::LatencySpike {
            duration_us: flush_us,
        },
        times: None,
    };
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
    // The 63 writes submitted during the first 20 ms flush wait for it and share the next
    // ones: a handful of batches, not one per write.
    assert!(stats.batches <= 8, "{stats:?}");
    // Write-behind: the flusher wrote each batch's neighbouring 4 KiB extents as one write.
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
