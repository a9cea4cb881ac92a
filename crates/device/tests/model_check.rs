//! Model tests: random operations against each device and a `Vec<u8>`, compared after every
//! read and at the end. A failing seed becomes a named regression test.

use std::sync::Arc;

use device::{
    Device, DeviceError, EmulatedDevice, EmulationProfile, FileDevice, FileDeviceConfig, IoEngine,
    MemoryDevice,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const SIZE_BYTES: u64 = 512 * 1024;
const OPS: usize = 600;

/// Runs `OPS` random operations (sequentially, then a concurrent burst of non-overlapping
/// writes) and checks every byte against the model.
async fn check_against_model(device: Arc<dyn Device>, seed: u64) {
    let block = device.block_size_bytes();
    let blocks = device.size_bytes() / block;
    let mut model = vec![0u8; device.size_bytes() as usize];
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for step in 0..OPS {
        let first = rng.gen_range(0..blocks);
        let count = rng.gen_range(1..=(blocks - first).min(16));
        let (offset, length) = (first * block, (count * block) as usize);
        let range = offset as usize..offset as usize + length;
        match rng.gen_range(0..10) {
            0..=3 => {
                let data: Vec<u8> = (0..length).map(|_| rng.gen()).collect();
                device.write_at(offset, &data).await.unwrap();
                model[range].copy_from_slice(&data);
            }
            4..=7 => {
                let mut buffer = vec![0xAAu8; length];
                device.read_at(offset, &mut buffer).await.unwrap();
                assert!(
                    buffer == model[range],
                    "seed {seed} step {step}: read at {offset}+{length}"
                );
            }
            8 => {
                device.discard(offset, length as u64).await.unwrap();
                model[range].fill(0);
            }
            _ => device.flush().await.unwrap(),
        }
    }
    // Contract errors change nothing.
    let mut small = vec![0u8; block as usize];
    assert!(matches!(
        device.read_at(1, &mut small).await,
        Err(DeviceError::Misaligned { .. })
    ));
    assert!(matches!(
        device.write_at(device.size_bytes(), &small).await,
        Err(DeviceError::OutOfRange { .. })
    ));
    // Concurrent writes to distinct blocks all land.
    let mut tasks = Vec::new();
    for index in 0..32u64 {
        let device = Arc::clone(&device);
        let offset = (index * 7 % blocks) * block;
        let data = vec![index as u8 + 1; block as usize];
        model[offset as usize..(offset + block) as usize].copy_from_slice(&data);
        tasks.push(tokio::spawn(
            async move { device.write_at(offset, &data).await },
        ));
    }
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    let mut all = vec![0u8; model.len()];
    device.read_at(0, &mut all).await.unwrap();
    assert!(all == model, "seed {seed}: final image differs");
    let stats = device.stats();
    assert!(stats.read.ops > 0 && stats.write.ops >= 32);
    assert_eq!(stats.errors(), 2);
    assert_eq!(stats.queue_depth, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_device_matches_the_model() {
    for seed in 0..3 {
        let device = MemoryDevice::new("memory", SIZE_BYTES).unwrap();
        check_against_model(Arc::new(device), seed).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_device_matches_the_model() {
    let directory = tempfile::tempdir().unwrap();
    for (seed, engine) in [IoEngine::Threads { threads: 4 }, IoEngine::TokioBlocking]
        .into_iter()
        .enumerate()
    {
        let config = FileDeviceConfig {
            engine,
            ..FileDeviceConfig::default()
        };
        let path = directory.path().join(format!("disk-{seed}"));
        let device = FileDevice::create(&path, SIZE_BYTES, config).unwrap();
        check_against_model(Arc::new(device), seed as u64).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emulated_instant_device_matches_the_model() {
    for seed in 0..2 {
        let backing = Arc::new(MemoryDevice::with_block_size("backing", SIZE_BYTES, 4096).unwrap());
        let device = EmulatedDevice::new("emulated", backing, EmulationProfile::instant());
        check_against_model(Arc::new(device), seed).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emulated_nvme_device_matches_the_model() {
    let backing = Arc::new(MemoryDevice::new("backing", SIZE_BYTES).unwrap());
    let profile = EmulationProfile::preset("nvme").unwrap();
    let device = EmulatedDevice::new("nvme", backing, profile);
    check_against_model(Arc::new(device), 11).await;
}
