//! The commit pipeline's threads run on the CPU that takes the device's interrupts, when the
//! device names exactly one (`StoreConfig::pin_to_interrupt_cpu`), and are left alone
//! otherwise. A test binary of its own: it reads every thread of the process.

use std::sync::Arc;

use device::{Device, DeviceError, MemoryDevice};
use store::{Store, StoreConfig};

const MIB: u64 = 1 << 20;

/// A memory device whose completion interrupts are said to land on `cpus`.
struct InterruptsOn {
    inner: MemoryDevice,
    cpus: Option<Vec<usize>>,
}

#[async_trait::async_trait]
impl Device for InterruptsOn {
    async fn read_at(&self, offset_bytes: u64, buffer: &mut [u8]) -> Result<(), DeviceError> {
        self.inner.read_at(offset_bytes, buffer).await
    }
    async fn write_at(&self, offset_bytes: u64, data: &[u8]) -> Result<(), DeviceError> {
        self.inner.write_at(offset_bytes, data).await
    }
    async fn flush(&self) -> Result<(), DeviceError> {
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
        "interrupts-on"
    }
    fn kind(&self) -> device::DeviceKind {
        self.inner.kind()
    }
    fn interrupt_cpus(&self) -> Option<Vec<usize>> {
        self.cpus.clone()
    }
    fn stats(&self) -> device::DeviceStats {
        self.inner.stats()
    }
}

/// (name, allowed CPUs) of every thread of this process whose name starts with `prefix`.
fn threads_named(prefix: &str) -> Vec<(String, Vec<usize>)> {
    let mut found = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").expect("/proc/self/task") {
        let task = task.expect("task").path();
        let Ok(name) = std::fs::read_to_string(task.join("comm")) else {
            continue; // the thread ended meanwhile
        };
        let name = name.trim().to_string();
        if !name.starts_with(prefix) {
            continue;
        }
        let Ok(status) = std::fs::read_to_string(task.join("status")) else {
            continue;
        };
        let list = status
            .lines()
            .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
            .expect("Cpus_allowed_list");
        let cpus = device::affinity::parse_cpu_list(list).expect("a CPU list");
        found.push((name, cpus));
    }
    found.sort();
    found
}

/// Creates a store over a device with interrupts on `cpus`, writes one object, and returns
/// the commit threads' names and CPUs seen while it runs.
async fn commit_threads(cpus: Option<Vec<usize>>, pin: bool) -> Vec<(String, Vec<usize>)> {
    let dir = tempfile::tempdir().expect("tempdir");
    let device = InterruptsOn {
        inner: MemoryDevice::new("mem", 64 * MIB).expect("device"),
        cpus,
    };
    let config = StoreConfig {
        pin_to_interrupt_cpu: pin,
        ..StoreConfig::default()
    };
    let store = Store::create(Arc::new(device), dir.path().join("meta"), config)
        .await
        .expect("create");
    let mut transaction = store::Transaction::new(1);
    transaction.write_full(&store::ObjectId::new("c", "o"), vec![7u8; 4096]);
    store.apply(transaction).await.expect("apply");
    let threads = threads_named("store-");
    store.shutdown().await.expect("shutdown");
    assert_eq!(
        threads_named("store-"),
        vec![],
        "the commit threads end with the store"
    );
    threads
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_threads_run_on_the_interrupt_cpu_only_when_it_is_one() {
    let allowed = device::affinity::allowed_cpus().expect("affinity");
    if allowed.len() < 2 {
        eprintln!("one CPU allowed ({allowed:?}): nothing to pin; skipped");
        return;
    }
    let cpu = *allowed.last().expect("a CPU");
    let names = ["store-commit", "store-sync-0"];

    let pinned = commit_threads(Some(vec![cpu]), true).await;
    for name in names {
        assert!(
            pinned.iter().any(|(n, _)| n == name),
            "{name} among {pinned:?}"
        );
    }
    for (name, cpus) in &pinned {
        assert_eq!(cpus, &vec![cpu], "{name} runs on the interrupt CPU");
    }
    assert_eq!(
        device::affinity::allowed_cpus().expect("affinity"),
        allowed,
        "the caller's own thread is left alone"
    );

    for (cpus, pin) in [
        (Some(vec![cpu]), false),
        (Some(allowed.clone()), true),
        (None, true),
    ] {
        let threads = commit_threads(cpus.clone(), pin).await;
        assert!(!threads.is_empty());
        for (name, on) in &threads {
            assert_eq!(
                on, &allowed,
                "{name} left on every allowed CPU (interrupts on {cpus:?}, pin {pin})"
            );
        }
    }
}
