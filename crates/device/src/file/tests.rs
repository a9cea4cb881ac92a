//! The file device against real files: engines, O_DIRECT fallback, configs, holes.

use super::*;
use crate::aligned::AlignedBuffer;
use crate::Device;

async fn roundtrip(engine: IoEngine) {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("disk");
    let config = FileDeviceConfig {
        engine,
        ..FileDeviceConfig::default()
    };
    let device = FileDevice::create(&path, 1 << 20, config.clone()).unwrap();
    assert_eq!(device.size_bytes(), 1 << 20);
    // Sparse: nothing allocated yet.
    let allocated = std::fs::metadata(&path).unwrap();
    assert!(std::os::unix::fs::MetadataExt::blocks(&allocated) * 512 < 1 << 20);

    // An unaligned caller buffer (offset by one byte in memory) is fine.
    let mut storage = vec![0u8; 8192 + 1];
    for (index, byte) in storage.iter_mut().enumerate() {
        *byte = (index % 253) as u8;
    }
    let data = &storage[1..];
    device.write_at(4096, data).await.unwrap();
    device.flush().await.unwrap();
    // The blocking flush (a dedicated thread's) is counted as a flush like the async one.
    let flushes = device.stats().flush.ops;
    let runtime = tokio::runtime::Handle::current();
    std::thread::scope(|scope| {
        scope
            .spawn(|| device.flush_blocking(&runtime))
            .join()
            .unwrap()
    })
    .unwrap();
    // So is a blocking write, which lands where the async one would.
    let block = vec![0x3cu8; 4096];
    std::thread::scope(|scope| {
        scope
            .spawn(|| device.write_blocking(3 * 4096, &block, &runtime))
            .join()
            .unwrap()
    })
    .unwrap();
    let mut read_back = vec![0u8; 4096];
    device.read_at(3 * 4096, &mut read_back).await.unwrap();
    assert_eq!(read_back, block);
    assert!(matches!(
        device.write_blocking(100, &block, &runtime),
        Err(DeviceError::Misaligned { .. })
    ));
    // Memory aligned by the caller goes to the file as it is (no bounce), same contract.
    let aligned = AlignedBuffer::gathered(&[&[0x5au8; 4096], &[0xa5u8; 4096]], 4096);
    let writes_before = device.stats().write.ops;
    std::thread::scope(|scope| {
        scope
            .spawn(|| device.write_blocking(5 * 4096, aligned.as_slice(), &runtime))
            .join()
            .unwrap()
    })
    .unwrap();
    assert_eq!(device.stats().write.ops, writes_before + 1);
    let mut read_back = vec![0u8; 8192];
    device.read_at(5 * 4096, &mut read_back).await.unwrap();
    assert_eq!(read_back, aligned.as_slice());
    assert!(matches!(
        device.write_blocking(100, &aligned.as_slice()[..4096], &runtime),
        Err(DeviceError::Misaligned { .. })
    ));
    assert_eq!(device.stats().flush.ops, flushes + 1);
    let mut back = vec![0u8; 8192 + 1];
    device.read_at(4096, &mut back[1..]).await.unwrap();
    assert_eq!(&back[1..], data);

    device.discard(4096, 4096).await.unwrap();
    device.read_at(4096, &mut back[1..]).await.unwrap();
    assert!(back[1..4097].iter().all(|&b| b == 0));
    assert_eq!(&back[4097..], &data[4096..]);

    assert!(matches!(
        device.write_at(100, &data[..4096]).await,
        Err(DeviceError::Misaligned { .. })
    ));
    assert!(matches!(
        device.read_at(1 << 20, &mut back[..4096]).await,
        Err(DeviceError::OutOfRange { .. })
    ));
    drop(device);

    // Reopen: the data persisted and the size is the file's.
    let device = FileDevice::open(&path, config).unwrap();
    assert_eq!(device.size_bytes(), 1 << 20);
    device.read_at(8192, &mut back[1..4097]).await.unwrap();
    assert_eq!(&back[1..4097], &data[4096..]);
    let stats = device.stats();
    assert_eq!(stats.read.ops, 1);
    assert_eq!(stats.kind, DeviceKind::File);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roundtrip_with_dedicated_threads() {
    roundtrip(IoEngine::Threads { threads: 4 }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roundtrip_with_tokio_blocking_pool() {
    roundtrip(IoEngine::TokioBlocking).await;
}

#[tokio::test]
async fn buffered_fallback_on_tmpfs_or_when_asked() {
    let directory = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let path = directory.path().join("disk");
    let device = FileDevice::create(
        &path,
        64 * 1024,
        FileDeviceConfig {
            direct_io: false,
            ..FileDeviceConfig::default()
        },
    )
    .unwrap();
    assert!(!device.is_direct());
    device.write_at(0, &[7u8; 4096]).await.unwrap();
    let mut back = [0u8; 4096];
    device.read_at(0, &mut back).await.unwrap();
    assert_eq!(back, [7u8; 4096]);
    drop(device);
    // O_DIRECT on tmpfs is refused with EINVAL and falls back; elsewhere it takes effect.
    let direct = FileDevice::open(&path, FileDeviceConfig::default()).unwrap();
    direct.read_at(0, &mut back).await.unwrap();
    assert_eq!(back, [7u8; 4096]);
}

#[tokio::test]
async fn small_configured_blocks_work_with_o_direct() {
    // 512-byte blocks: honoured if the kernel allows O_DIRECT at 512, raised otherwise.
    let directory = tempfile::tempdir().unwrap();
    let config = FileDeviceConfig {
        block_size_bytes: 512,
        ..FileDeviceConfig::default()
    };
    let device = FileDevice::create(directory.path().join("disk"), 64 * 1024, config).unwrap();
    let block = device.block_size_bytes();
    assert!(block >= 512 && block.is_power_of_two());
    let data = vec![3u8; block as usize];
    device.write_at(block, &data).await.unwrap();
    let mut back = vec![0u8; block as usize];
    device.read_at(block, &mut back).await.unwrap();
    assert_eq!(back, data);
}

#[test]
fn rejects_bad_configs() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("disk");
    assert!(FileDevice::create(&path, 1000, FileDeviceConfig::default()).is_err());
    let config = FileDeviceConfig {
        engine: IoEngine::Threads { threads: 0 },
        ..FileDeviceConfig::default()
    };
    assert!(FileDevice::create(&path, 4096, config).is_err());
    assert!(FileDevice::open(
        directory.path().join("missing"),
        FileDeviceConfig::default()
    )
    .is_err());
}

/// An existing file whose size is not whole blocks is refused, naming its size: it was
/// exported cut to whole blocks without a word (6,000 bytes as 4,096; 100 bytes as an
/// empty device). One of whole blocks opens at its size.
#[test]
fn an_existing_file_of_partial_blocks_is_refused() {
    let directory = tempfile::tempdir().unwrap();
    for (raw, wanted) in [(6000u64, "not a multiple"), (100, "less than one")] {
        let path = directory.path().join(format!("odd-{raw}"));
        std::fs::File::create(&path).unwrap().set_len(raw).unwrap();
        let error = FileDevice::open(&path, FileDeviceConfig::default())
            .err()
            .expect("refused");
        assert!(error.to_string().contains(wanted), "{error}");
        assert!(error.to_string().contains(&raw.to_string()), "{error}");
    }
    let path = directory.path().join("whole");
    std::fs::File::create(&path).unwrap().set_len(8192).unwrap();
    let device = FileDevice::open(&path, FileDeviceConfig::default()).unwrap();
    assert_eq!(device.size_bytes(), 8192);
}

/// An OS error is said once when the error's chain is printed whole.
#[test]
fn an_os_error_is_said_once() {
    let error = FileDevice::open("/nonexistent/strata-disk", FileDeviceConfig::default())
        .err()
        .expect("refused");
    let chain = format!("{:#}", anyhow::Error::from(error));
    assert_eq!(chain.matches("No such file").count(), 1, "{chain}");
}

#[tokio::test]
async fn allocation_reports_a_sparse_files_holes() {
    use crate::{AllocationExtent, ExtentState};
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("disk");
    let chunk = crate::initialize::CHUNK_BYTES;
    // Four fill chunks; a write into the last fills that chunk only (none lies ahead).
    let device = FileDevice::create(&path, 4 * chunk, FileDeviceConfig::default()).unwrap();
    let extent = |length_bytes, state| AllocationExtent {
        length_bytes,
        state,
    };
    assert_eq!(
        device.allocation(0, 4 * chunk).await.unwrap(),
        vec![extent(4 * chunk, ExtentState::Hole)]
    );
    device
        .write_at(3 * chunk + 8192, &[5u8; 4096])
        .await
        .unwrap();
    device.flush().await.unwrap();
    assert_eq!(
        device.allocation(0, 4 * chunk).await.unwrap(),
        vec![
            extent(3 * chunk, ExtentState::Hole),
            extent(chunk, ExtentState::Data)
        ]
    );
    // A range inside one state, and one that starts in a hole and ends in data.
    assert_eq!(
        device.allocation(4096, 8192).await.unwrap(),
        vec![extent(8192, ExtentState::Hole)]
    );
    assert_eq!(
        device.allocation(3 * chunk - 4096, 8192).await.unwrap(),
        vec![
            extent(4096, ExtentState::Hole),
            extent(4096, ExtentState::Data)
        ]
    );
    // A discard punches the hole again, and reads back as zeros as promised.
    assert!(device.discard_zeroes());
    device.discard(3 * chunk, chunk).await.unwrap();
    assert_eq!(
        device.allocation(0, 4 * chunk).await.unwrap(),
        vec![extent(4 * chunk, ExtentState::Hole)]
    );
    let mut back = vec![1u8; 4096];
    device.read_at(3 * chunk + 8192, &mut back).await.unwrap();
    assert!(back.iter().all(|&byte| byte == 0));
    assert!(device.allocation(0, 5 * chunk).await.is_err());
    assert!(device.allocation(100, 4096).await.is_err());
}
