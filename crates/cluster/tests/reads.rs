//! Reads beside slow writes (issue 43): with every device's writes delayed (a latency spike
//! on each), a read of another object of the same PG completes while the write is still in
//! flight, and a read of the object being written waits at most for the write in flight
//! (never for a second write queued behind it) and returns the old or the new content.
//! Ordering only, no speed threshold: each check compares when two operations finished.

mod common;

use std::time::{Duration, Instant};

use cluster::Cluster;
use device::{FaultConfig, FaultKind, FaultRule, FaultTrigger, OpKind};
use rados::IoCtx;

/// The delay of every device write while the slow phase runs.
const SPIKE: Duration = Duration::from_millis(800);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_do_not_wait_for_slow_writes_they_need_not_wait_for() {
    let dir = tempfile::tempdir().unwrap();
    let (options, devices) = common::faulty_options();
    let config = common::small_config(3, 1, "mem", 3);
    let cluster = Cluster::create(dir.path(), config, options).await.unwrap();
    let pool = cluster.pool("data").unwrap();
    // "slow" and a neighbour in the same PG; the neighbour is larger than the data cache's
    // reads (64 KiB), so its read goes to the device.
    let pg = cluster.collection_of("data", "slow").unwrap();
    let neighbour = (0..1000)
        .map(|i| format!("neighbour{i}"))
        .find(|name| cluster.collection_of("data", name).unwrap() == pg)
        .unwrap();
    let old = common::content(1, 8192);
    let first = common::content(2, 8192);
    let second = common::content(3, 8192);
    let neighbour_data = common::content(4, 256 << 10);
    pool.write_full("slow", &old).await.unwrap();
    pool.write_full(&neighbour, &neighbour_data).await.unwrap();

    let slow = FaultConfig {
        rules: vec![FaultRule {
            op: Some(OpKind::Write),
            trigger: FaultTrigger::Always,
            fault: FaultKind::LatencySpike {
                duration_us: SPIKE.as_micros() as u64,
            },
            times: None,
        }],
        ..FaultConfig::default()
    };
    for device in devices.lock().unwrap().values() {
        device.set_config(slow.clone());
    }
    let write = |data: Vec<u8>| {
        let pool = pool.clone();
        tokio::spawn(async move {
            pool.write_full("slow", &data).await.unwrap();
            Instant::now()
        })
    };
    let first_write = write(first.clone());
    tokio::time::sleep(SPIKE / 4).await;
    // Queued behind the first on the object's lock.
    let second_write = write(second.clone());
    tokio::time::sleep(SPIKE / 8).await;

    let neighbour_read = pool.read_full(&neighbour).await.unwrap();
    let neighbour_done = Instant::now();
    let slow_read = pool.read_full("slow").await.unwrap();
    let slow_done = Instant::now();
    let first_done = first_write.await.unwrap();
    let second_done = second_write.await.unwrap();
    for device in devices.lock().unwrap().values() {
        device.set_config(FaultConfig::default());
    }

    assert_eq!(neighbour_read, neighbour_data);
    assert!(
        neighbour_done < first_done,
        "the read of another object of the PG waited for the slow write ({:?} after it)",
        neighbour_done - first_done
    );
    assert!(
        slow_read == old || slow_read == first,
        "a read during the writes returned content neither the old nor the first write had"
    );
    assert!(
        slow_done < second_done,
        "the read of the object waited for the second write queued behind the first ({:?} after it)",
        slow_done - second_done
    );
    assert_eq!(pool.read_full("slow").await.unwrap(), second);
    drop(pool);
    cluster.shutdown().await.unwrap();
}
