//! Each fault kind of the faulty device, with fixed seeds.

use std::sync::Arc;
use std::time::{Duration, Instant};

use device::{
    Device, DeviceError, FaultConfig, FaultKind, FaultRule, FaultTrigger, FaultyDevice,
    MemoryDevice, OpKind,
};

const BLOCK: usize = 512;

fn faulty(config: FaultConfig) -> (Arc<MemoryDevice>, FaultyDevice) {
    let memory = Arc::new(MemoryDevice::new("memory", 1 << 20).unwrap());
    let device = FaultyDevice::new("faulty", memory.clone(), config);
    (memory, device)
}

fn pattern(length: usize, seed: u8) -> Vec<u8> {
    (0..length)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[tokio::test]
async fn scripted_nth_op_fails_once_with_eio() {
    let (_, device) = faulty(FaultConfig {
        rules: vec![FaultRule::fail_nth(OpKind::Read, 2)],
        ..FaultConfig::default()
    });
    let mut buffer = vec![0u8; BLOCK];
    for index in 0..5 {
        let result = device.read_at(0, &mut buffer).await;
        if index == 2 {
            let error = result.unwrap_err();
            assert!(matches!(error, DeviceError::Injected { .. }));
            assert_eq!(error.errno(), device::EIO);
        } else {
            result.unwrap();
        }
    }
    assert_eq!(device.fault_counts().errors, 1);
    assert_eq!(device.stats().read.errors, 1);
}

#[tokio::test]
async fn scripted_range_fails_overlapping_requests_and_can_be_switched_off() {
    let (_, device) = faulty(FaultConfig {
        rules: vec![FaultRule::fail_range(8192, 12288)],
        ..FaultConfig::default()
    });
    let data = pattern(4096, 1);
    device.write_at(0, &data).await.unwrap();
    assert!(device.write_at(4096, &pattern(8192, 2)).await.is_err()); // overlaps
    assert!(device.write_at(12288, &data).await.is_ok()); // just after
    device.set_enabled(false);
    assert!(device.write_at(8192, &data).await.is_ok());
    device.set_enabled(true);
    let mut buffer = vec![0u8; 4096];
    assert!(device.read_at(8192, &mut buffer).await.is_err());
}

#[tokio::test]
async fn random_errors_follow_the_seed() {
    let config = FaultConfig {
        seed: 42,
        read_error_probability: 0.3,
        ..FaultConfig::default()
    };
    let mut outcomes = Vec::new();
    for _ in 0..2 {
        let (_, device) = faulty(config.clone());
        let mut buffer = vec![0u8; BLOCK];
        let mut run = Vec::new();
        for _ in 0..200 {
            run.push(device.read_at(0, &mut buffer).await.is_ok());
        }
        outcomes.push(run);
    }
    assert_eq!(outcomes[0], outcomes[1]);
    let failures = outcomes[0].iter().filter(|ok| !**ok).count();
    assert!((35..=85).contains(&failures), "{failures}");
}

#[tokio::test]
async fn torn_write_stores_a_prefix_then_fails() {
    let (memory, device) = faulty(FaultConfig {
        rules: vec![FaultRule {
            op: Some(OpKind::Write),
            trigger: FaultTrigger::NthOp(0),
            fault: FaultKind::TornWrite {
                blocks_written: Some(3),
                crash: false,
            },
            times: None,
        }],
        ..FaultConfig::default()
    });
    let data = pattern(8 * BLOCK, 7);
    assert!(matches!(
        device.write_at(0, &data).await,
        Err(DeviceError::Injected { .. })
    ));
    let mut stored = vec![0u8; 8 * BLOCK];
    memory.read_at(0, &mut stored).await.unwrap();
    assert_eq!(&stored[..3 * BLOCK], &data[..3 * BLOCK]);
    assert!(stored[3 * BLOCK..].iter().all(|&b| b == 0));
    assert_eq!(device.fault_counts().torn_writes, 1);
}

#[tokio::test]
async fn random_torn_writes_never_write_everything() {
    let (memory, device) = faulty(FaultConfig {
        seed: 3,
        torn_write_probability: 1.0,
        ..FaultConfig::default()
    });
    for round in 0..20u8 {
        let offset = u64::from(round) * 8 * BLOCK as u64;
        let data = pattern(8 * BLOCK, round + 1);
        assert!(device.write_at(offset, &data).await.is_err());
        let mut stored = vec![0u8; 8 * BLOCK];
        memory.read_at(offset, &mut stored).await.unwrap();
        let prefix = stored
            .chunks(BLOCK)
            .zip(data.chunks(BLOCK))
            .take_while(|(a, b)| a == b)
            .count();
        assert!(prefix < 8);
        assert!(
            stored[prefix * BLOCK..].iter().all(|&b| b == 0),
            "a torn write is a prefix"
        );
    }
}

#[tokio::test]
async fn torn_write_with_crash_stops_the_device_until_restart() {
    let (_, device) = faulty(FaultConfig {
        rules: vec![FaultRule {
            op: Some(OpKind::Write),
            trigger: FaultTrigger::NthOp(1),
            fault: FaultKind::TornWrite {
                blocks_written: Some(1),
                crash: true,
            },
            times: None,
        }],
        ..FaultConfig::default()
    });
    let data = pattern(4 * BLOCK, 9);
    device.write_at(0, &data).await.unwrap();
    assert!(matches!(
        device.write_at(4096, &data).await,
        Err(DeviceError::Crashed)
    ));
    assert!(device.is_crashed());
    let mut buffer = vec![0u8; BLOCK];
    assert!(matches!(
        device.read_at(0, &mut buffer).await,
        Err(DeviceError::Crashed)
    ));
    assert!(matches!(device.flush().await, Err(DeviceError::Crashed)));
    device.restart();
    device.read_at(4096, &mut buffer).await.unwrap();
    assert_eq!(buffer, data[..BLOCK]);
    device
        .read_at(4096 + BLOCK as u64, &mut buffer)
        .await
        .unwrap();
    assert!(buffer.iter().all(|&b| b == 0));
}

#[tokio::test]
async fn crash_loses_only_unflushed_blocks() {
    let (_, device) = faulty(FaultConfig {
        seed: 5,
        unflushed_loss_probability: 1.0,
        ..FaultConfig::default()
    });
    let durable = pattern(2 * BLOCK, 1);
    device.write_at(0, &durable).await.unwrap();
    device.flush().await.unwrap();
    device.write_at(0, &pattern(BLOCK, 2)).await.unwrap(); // overwrite, unflushed
    device.write_at(8192, &pattern(BLOCK, 3)).await.unwrap(); // new, unflushed
    device.crash().await.unwrap();
    device.restart();
    let mut buffer = vec![0u8; 2 * BLOCK];
    device.read_at(0, &mut buffer).await.unwrap();
    assert_eq!(buffer, durable);
    device.read_at(8192, &mut buffer[..BLOCK]).await.unwrap();
    assert!(buffer[..BLOCK].iter().all(|&b| b == 0));
    assert_eq!(device.fault_counts().blocks_lost, 2);
}

#[tokio::test]
async fn bit_flips_on_read_are_silent_and_transient() {
    let (_, device) = faulty(FaultConfig {
        rules: vec![FaultRule {
            op: Some(OpKind::Read),
            trigger: FaultTrigger::NthOp(0),
            fault: FaultKind::BitFlip,
            times: None,
        }],
        ..FaultConfig::default()
    });
    let data = pattern(4096, 4);
    device.write_at(0, &data).await.unwrap();
    let mut buffer = vec![0u8; 4096];
    device.read_at(0, &mut buffer).await.unwrap();
    let flipped: u32 = buffer
        .iter()
        .zip(&data)
        .map(|(a, b)| (a ^ b).count_ones())
        .sum();
    assert_eq!(flipped, 1);
    device.read_at(0, &mut buffer).await.unwrap();
    assert_eq!(buffer, data);
}

#[tokio::test]
async fn bit_flips_on_write_corrupt_what_is_stored() {
    let (memory, device) = faulty(FaultConfig {
        seed: 9,
        write_bit_flip_probability: 1.0,
        ..FaultConfig::default()
    });
    let data = pattern(4096, 5);
    device.write_at(0, &data).await.unwrap();
    let mut stored = vec![0u8; 4096];
    memory.read_at(0, &mut stored).await.unwrap();
    let flipped: u32 = stored
        .iter()
        .zip(&data)
        .map(|(a, b)| (a ^ b).count_ones())
        .sum();
    assert_eq!(flipped, 1);
    assert_eq!(device.fault_counts().bit_flips, 1);
}

#[tokio::test]
async fn latency_spikes_delay_but_serve() {
    let (_, device) = faulty(FaultConfig {
        seed: 1,
        latency_spike_probability: 1.0,
        latency_spike_us: 20_000,
        ..FaultConfig::default()
    });
    let started = Instant::now();
    device.write_at(0, &pattern(BLOCK, 6)).await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(20));
    assert_eq!(device.fault_counts().latency_spikes, 1);
}

#[tokio::test]
async fn config_can_be_replaced_at_run_time() {
    let (_, device) = faulty(FaultConfig::default());
    let mut buffer = vec![0u8; BLOCK];
    device.read_at(0, &mut buffer).await.unwrap();
    device.set_config(FaultConfig {
        read_error_probability: 1.0,
        ..FaultConfig::default()
    });
    assert!(device.read_at(0, &mut buffer).await.is_err());
    device.set_config(FaultConfig::default());
    device.add_rule(FaultRule {
        op: Some(OpKind::Flush),
        trigger: FaultTrigger::Always,
        fault: FaultKind::Error,
        times: Some(1),
    });
    assert!(device.flush().await.is_err());
    assert!(device.flush().await.is_ok());
    device.add_rule(FaultRule {
        op: Some(OpKind::Discard),
        trigger: FaultTrigger::NthOp(1),
        fault: FaultKind::Error,
        times: None,
    });
    assert!(device.discard(0, 4096).await.is_ok());
    assert!(device.discard(0, 4096).await.is_err());
    assert!(device.discard(0, 4096).await.is_ok());
}
