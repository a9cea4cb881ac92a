//! Large writes (issue 42): a payload shared as `Bytes` goes to the device from the caller's
//! memory (whole units as slices of it, a partial last unit padded), aligned or not, and
//! reads back the same after a remount, on a file device (O_DIRECT where the filesystem
//! takes it) and on a memory device.

use std::sync::Arc;

use bytes::Bytes;
use device::{Device, FileDevice, FileDeviceConfig, MemoryDevice};
use store::{aligned_copy, ObjectId, Store, StoreConfig, Transaction};

const MIB: usize = 1 << 20;

fn pattern(seed: u8, length: usize) -> Vec<u8> {
    (0..length)
        .map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed) ^ (i >> 12) as u8)
        .collect()
}

/// `data` at a memory address that is not a multiple of 4096 (one byte past a 4 KiB
/// boundary), as a payload arriving from the network is.
fn unaligned(data: &[u8]) -> Bytes {
    let aligned = aligned_copy(&Bytes::copy_from_slice(&[&[0u8][..], data].concat()), 4096);
    let shifted = aligned.slice(1..);
    assert!(!(shifted.as_ptr() as usize).is_multiple_of(4096));
    shifted
}

/// Writes objects of several sizes from aligned and unaligned memory (whole 4 MiB, a partial
/// last unit, a write at an offset and one into the middle of a large object), checks every
/// byte, remounts and checks again.
async fn large_writes_read_back(device: Arc<dyn Device>, meta: std::path::PathBuf) {
    let store = Store::create(Arc::clone(&device), &meta, StoreConfig::default())
        .await
        .expect("create");
    let mut expected: Vec<(ObjectId, Vec<u8>)> = Vec::new();
    let sizes = [4 * MIB, 4 * MIB + 100, 3 * MIB + 4096, 65 * 1024 + 1];
    for (index, size) in sizes.into_iter().enumerate() {
        for aligned in [true, false] {
            let id = ObjectId::new("1.0", format!("object-{index}-{aligned}"));
            let content = pattern(index as u8 + aligned as u8, size);
            let payload = if aligned {
                aligned_copy(&Bytes::from(content.clone()), 4096)
            } else {
                unaligned(&content)
            };
            assert_eq!((payload.as_ptr() as usize).is_multiple_of(4096), aligned);
            let mut transaction = Transaction::new(1);
            transaction.write_full(&id, payload);
            store.apply(transaction).await.expect("write_full");
            expected.push((id, content));
        }
    }
    // A large write at an offset past the end (a hole before it), then one into the middle
    // of it that starts on a unit and ends inside one (old bytes after it kept).
    let id = ObjectId::new("1.0", "offset");
    let mut content = vec![0u8; 8192];
    let first = pattern(40, 2 * MIB + 10);
    content.extend_from_slice(&first);
    let mut transaction = Transaction::new(2);
    transaction.write(&id, 8192, unaligned(&first));
    store.apply(transaction).await.expect("write at an offset");
    let middle = pattern(41, MIB + 5);
    content[MIB..2 * MIB + 5].copy_from_slice(&middle);
    let mut transaction = Transaction::new(3);
    transaction.write(&id, MIB as u64, Bytes::from(middle));
    store
        .apply(transaction)
        .await
        .expect("write into the middle");
    expected.push((id, content));

    for (id, content) in &expected {
        let read = store
            .read(&id.collection, &id.name, 0, 64 * MIB as u64)
            .await
            .expect("read");
        assert!(read == *content, "{}: the bytes read back differ", id.name);
    }
    store.shutdown().await.expect("shutdown");
    let store = Store::open(device, &meta, StoreConfig::default())
        .await
        .expect("open");
    for (id, content) in &expected {
        let read = store
            .read(&id.collection, &id.name, 0, 64 * MIB as u64)
            .await
            .expect("read after the remount");
        assert!(read == *content, "{}: differs after the remount", id.name);
    }
    store.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_writes_from_shared_buffers_on_a_file_device() {
    let dir = tempfile::tempdir().expect("tempdir");
    let device: Arc<dyn Device> = Arc::new(
        FileDevice::create(
            dir.path().join("data.img"),
            256 * MIB as u64,
            FileDeviceConfig::default(),
        )
        .expect("device"),
    );
    large_writes_read_back(device, dir.path().join("meta")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_writes_from_shared_buffers_on_a_memory_device() {
    let dir = tempfile::tempdir().expect("tempdir");
    let device: Arc<dyn Device> =
        Arc::new(MemoryDevice::new("mem", 256 * MIB as u64).expect("device"));
    large_writes_read_back(device, dir.path().join("meta")).await;
}

#[test]
fn an_aligned_copy_is_aligned_equal_and_made_once() {
    let data = Bytes::from(pattern(7, 3 * 4096 + 17));
    let aligned = aligned_copy(&data, 4096);
    assert!((aligned.as_ptr() as usize).is_multiple_of(4096));
    assert_eq!(aligned, data);
    // Already aligned: the same memory, no copy.
    let again = aligned_copy(&aligned, 4096);
    assert_eq!(again.as_ptr(), aligned.as_ptr());
    assert!(aligned_copy(&Bytes::new(), 4096).is_empty());
}
