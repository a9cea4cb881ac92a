//! The emulated device's executor under concurrency: no lost wake-ups, every request answered,
//! data intact, with a fast HDD (reordering on) and NVMe.

use std::sync::Arc;
use std::time::Duration;

use device::model::{HddProfile, Scheduler};
use device::{Device, EmulatedDevice, EmulationProfile, MemoryDevice};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A disk spinning at 600k rpm (0.1 ms a revolution) with 10-100 µs seeks: the HDD model's
/// code paths at a rate a unit test can afford.
fn fast_hdd() -> EmulationProfile {
    EmulationProfile::Hdd(HddProfile {
        rpm: 600_000,
        seek_track_to_track_us: 10,
        seek_average_us: 50,
        seek_full_stroke_us: 100,
        write_settle_us: 5,
        command_overhead_us: 5,
        transfer_mb_per_s: 2_000,
        scheduler: Scheduler::ShortestPositioningFirst { window: 24 },
    })
}

async fn hammer(profile: EmulationProfile, tasks: u64, ops_per_task: u64) {
    let size_bytes = 64 << 20;
    let backing = Arc::new(MemoryDevice::with_block_size("m", size_bytes, 4096).unwrap());
    let device = Arc::new(EmulatedDevice::new("e", backing, profile));
    let mut handles = Vec::new();
    for task in 0..tasks {
        let device = Arc::clone(&device);
        handles.push(tokio::spawn(async move {
            let mut rng = ChaCha8Rng::seed_from_u64(task);
            // Each task owns the blocks congruent to its index, so it can check its data.
            let slots = size_bytes / 4096 / tasks;
            let mut buffer = vec![0u8; 4096];
            for op in 0..ops_per_task {
                let offset = (rng.gen_range(0..slots) * tasks + task) * 4096;
                let stamp = vec![(task as u8) ^ (op as u8); 4096];
                device.write_at(offset, &stamp).await.unwrap();
                device.read_at(offset, &mut buffer).await.unwrap();
                assert_eq!(buffer, stamp);
            }
        }));
    }
    let all = async {
        for handle in handles {
            handle.await.unwrap();
        }
    };
    tokio::time::timeout(Duration::from_secs(30), all)
        .await
        .expect("every request is answered");
    let stats = device.stats();
    assert_eq!(stats.read.ops, tasks * ops_per_task);
    assert_eq!(stats.write.ops, tasks * ops_per_task);
    assert_eq!(stats.queue_depth, 0);
    assert!(stats.queue_depth_max() > 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fast_hdd_answers_every_request() {
    hammer(fast_hdd(), 48, 40).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nvme_answers_every_request() {
    hammer(EmulationProfile::preset("nvme").unwrap(), 64, 100).await;
}
