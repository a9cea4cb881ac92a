//! # device: where bytes meet a medium
//!
//! Owns the async [`Device`] trait every storage layer of strata writes through, and its
//! implementations:
//!
//! - [`FileDevice`]: a regular file or a block device, with O_DIRECT where the filesystem allows
//!   it, through a dedicated pool of I/O threads; a sparse file's holes are filled with zeros
//!   a chunk ahead of the writes (`initialize.rs`), so a flush after writes into fresh space
//!   is a flush of the disk's cache, not also a filesystem journal commit;
//! - [`MemoryDevice`]: sparse memory, for tests and as the backing of emulated devices;
//! - [`EmulatedDevice`]: any device slowed down by a documented timing model ([`model`]): HDD
//!   (seek by distance, rotation, transfer, one actuator, command queueing) or SSD/NVMe
//!   (latency, channels, IOPS and bandwidth ceilings), with the presets `hdd-7200`, `hdd-10k`,
//!   `ssd-sata` and `nvme`; service times are honoured to tens of µs by a [`PreciseTimer`];
//! - [`FaultyDevice`]: any device with seeded or scripted faults (EIO, torn writes, bit flips,
//!   latency spikes, crashes);
//! - per-device statistics ([`DeviceStats`]) kept by every device;
//! - [`affinity`]: which CPUs take a device's completion interrupts
//!   ([`Device::interrupt_cpus`]), and pinning a thread there;
//! - [`DeviceSpec`]: a device described by one string (`hdd-10k@file:/srv/hdd0.img:100G`,
//!   `faulty:eio=0.001,seed=7:mem:1G`), for configuration files and command lines;
//! - [`tighten`] and [`create_private_directory`]: files and directories readable by their
//!   owner only (`0600`, `0700`); a file device creates its file `0600`.
//!
//! ## Invariants (the contract every implementation keeps)
//! - **Alignment.** `offset_bytes` and the buffer length of `read_at`/`write_at`, and both
//!   arguments of `discard`, are multiples of [`Device::block_size_bytes`]; otherwise the call
//!   fails with [`DeviceError::Misaligned`] and touches nothing. The *memory* alignment of the
//!   caller's buffer is free: the file device bounces through its own aligned buffers when it
//!   uses O_DIRECT. A device never does read-modify-write on behalf of a caller, so two
//!   concurrent writes to different blocks never interfere.
//! - **Range.** A request must lie inside `[0, size_bytes)`; otherwise
//!   [`DeviceError::OutOfRange`]. A zero-length request inside the device succeeds.
//! - **Durability.** A completed `write_at` is visible to every later `read_at`; it is durable
//!   only after a later `flush` returns `Ok`. After a failed flush, a file device refuses further
//!   writes and flushes ([`DeviceError::Poisoned`]) rather than guess what reached the medium.
//! - **Discard** is a hint: afterwards the range reads as zeros on the devices of this crate,
//!   but callers must not rely on that for real block devices; a device that promises it says
//!   so in [`Device::discard_zeroes`].
//! - **Concurrency.** All methods take `&self`; any number of operations may be in flight.
//!   Overlapping concurrent writes land in an unspecified order, blockwise. A write whose
//!   future is dropped before it completes may or may not have landed.
//! - **Statistics.** Every operation that enters a device is counted once by that device, on
//!   success (ops, bytes, latency) or failure (errors).
//! - **Policies are pure.** The timing models in [`model`] take state, request and virtual time
//!   and return times; only the executors ([`EmulatedDevice`], [`PreciseTimer`]) read clocks.
//!
//! ## Example
//! ```
//! use std::sync::Arc;
//! use device::{Device, DeviceSpec, FaultConfig, FaultRule, FaultyDevice, OpKind};
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! // An emulated 10k rpm disk over 1 GiB of memory (or `hdd-10k@file:/srv/hdd0.img:100G`).
//! let disk: Arc<dyn Device> = DeviceSpec::parse("hdd-10k@mem:1G")?.open("hdd0")?;
//! // The second read fails with EIO.
//! let faulty = FaultyDevice::new(
//!     "hdd0-faulty",
//!     disk,
//!     FaultConfig { rules: vec![FaultRule::fail_nth(OpKind::Read, 1)], ..FaultConfig::default() },
//! );
//! let mut block = vec![0u8; 4096];
//! faulty.write_at(8192, &[7u8; 4096]).await?;
//! faulty.read_at(8192, &mut block).await?;
//! assert!(faulty.read_at(8192, &mut block).await.is_err());
//! println!("{}", faulty.stats()); // one line: ops, bytes, p50/p99, busy, queue depth
//! # Ok::<(), device::DeviceError>(())
//! # }).unwrap();
//! ```

use async_trait::async_trait;

pub mod affinity;
mod aligned;
pub use aligned::AlignedBuffer;
mod emulated;
mod error;
mod faulty;
mod file;
pub mod histogram;
mod initialize;
mod memory;
pub mod model;
mod private;
mod realtime;
mod ring;
mod spec;
mod stats;
mod timer;
mod workqueue;

pub use emulated::EmulatedDevice;
pub use error::{DeviceError, EIO};
pub use faulty::{FaultConfig, FaultKind, FaultRule, FaultTrigger, FaultyDevice};
pub use file::{FileDevice, FileDeviceConfig, IoEngine};
pub use initialize::lay_out;
pub use memory::MemoryDevice;
pub use model::{EmulationProfile, HddProfile, Scheduler, SsdProfile};
pub use private::{
    create_private_directory, tighten, TightenError, Tightened, PRIVATE_DIRECTORY_MODE,
    PRIVATE_FILE_MODE,
};
pub use spec::{parse_size_bytes, Backing, DeviceSpec};
pub use stats::{DeviceStats, OpGuard, OpStats, StatsRecorder};
pub use timer::{PreciseTimer, TimerConfig, TimerStats};

/// The kinds of operation a device serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// `read_at`.
    Read,
    /// `write_at`.
    Write,
    /// `flush`.
    Flush,
    /// `discard`.
    Discard,
}

impl OpKind {
    /// A dense index (0..4) for per-kind arrays.
    pub fn index(self) -> usize {
        match self {
            OpKind::Read => 0,
            OpKind::Write => 1,
            OpKind::Flush => 2,
            OpKind::Discard => 3,
        }
    }
}

/// What a device is, for statistics and status output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DeviceKind {
    /// A regular file.
    File,
    /// A block device node.
    BlockDevice,
    /// Memory.
    Memory,
    /// A timing model over another device.
    Emulated,
    /// Fault injection over another device.
    Faulty,
    /// A device implemented in another crate (a cached device, a remote volume, ...).
    Other(&'static str),
}

/// An asynchronous block device. Object safe: layers hold `Arc<dyn Device>`.
///
/// See the crate documentation for the alignment, range, durability and concurrency contract.
#[async_trait]
pub trait Device: Send + Sync {
    /// Fills `buffer` with the bytes at `offset_bytes`.
    async fn read_at(&self, offset_bytes: u64, buffer: &mut [u8]) -> Result<(), DeviceError>;

    /// Writes `data` at `offset_bytes`; durable after the next successful `flush`.
    async fn write_at(&self, offset_bytes: u64, data: &[u8]) -> Result<(), DeviceError>;

    /// Makes every write completed before this call durable.
    async fn flush(&self) -> Result<(), DeviceError>;

    /// [`Device::flush`] for a caller on a thread that may block (a dedicated thread, never an
    /// async task): a device whose flush is one blocking syscall makes it on the calling thread
    /// instead of handing it to an I/O thread and waiting for the answer (two thread wake-ups
    /// per flush). The default drives `flush` to completion on `runtime`.
    fn flush_blocking(&self, runtime: &tokio::runtime::Handle) -> Result<(), DeviceError> {
        runtime.block_on(self.flush())
    }

    /// [`Device::write_at`] for a caller on a thread that may block, as
    /// [`Device::flush_blocking`]: a file device makes its `pwrite` on the calling thread. The
    /// default drives `write_at` to completion on `runtime`.
    fn write_blocking(
        &self,
        offset_bytes: u64,
        data: &[u8],
        runtime: &tokio::runtime::Handle,
    ) -> Result<(), DeviceError> {
        runtime.block_on(self.write_at(offset_bytes, data))
    }

    /// Several [`Device::write_blocking`]s at once, for a caller on a thread that may block:
    /// every `(offset, data)` of `writes` is written, in no particular order, and the call
    /// returns when all are done, with one result per write. A file device submits them
    /// together through io_uring and sleeps once (`ring.rs`); the default runs the writes
    /// concurrently on `runtime`.
    fn write_many_blocking(
        &self,
        writes: &[(u64, &[u8])],
        runtime: &tokio::runtime::Handle,
    ) -> Vec<Result<(), DeviceError>> {
        runtime.block_on(futures_util::future::join_all(
            writes
                .iter()
                .map(|(offset_bytes, data)| self.write_at(*offset_bytes, data)),
        ))
    }

    /// Tells the device the range's contents are no longer needed.
    async fn discard(&self, offset_bytes: u64, length_bytes: u64) -> Result<(), DeviceError>;

    /// Whether a completed [`Device::discard`] of a range makes it read back as zeros, so a
    /// caller that wants zeros (NBD's WRITE_ZEROES without NO_HOLE) may discard instead of
    /// writing them: a memory device frees or zeroes its chunks and a regular file punches a
    /// hole (or writes zeros where its filesystem has none), so both say yes; a block device
    /// may drop the hint and a cache may keep stale lines, so the default says no. A device
    /// answering yes must keep that promise for every aligned range, or zeros written the
    /// slow way become old data.
    fn discard_zeroes(&self) -> bool {
        false
    }

    /// The allocation state of `[offset_bytes, offset_bytes + length_bytes)`: consecutive
    /// extents, in order, that cover the range exactly (NBD's BLOCK_STATUS, so clients such as
    /// nbdcopy and `qemu-img convert` skip holes). A device that does not track holes reports
    /// the whole range as data (the default); a sparse one (a volume whose missing objects
    /// read as zeros) reports its holes.
    async fn allocation(
        &self,
        offset_bytes: u64,
        length_bytes: u64,
    ) -> Result<Vec<AllocationExtent>, DeviceError> {
        check_request(
            offset_bytes,
            length_bytes,
            self.size_bytes(),
            self.block_size_bytes(),
        )?;
        Ok(vec![AllocationExtent {
            length_bytes,
            state: ExtentState::Data,
        }])
    }

    /// Whether [`Device::allocation`] costs far less than reading the range (a memory
    /// device's table, a file's `SEEK_DATA`), so a reader may ask it first and skip the
    /// holes (NBD's structured READ sends them as hole chunks). Default no: a device whose
    /// answer takes a round trip per extent (a volume asking for each object) should not be
    /// asked on every read; BLOCK_STATUS, which asks for nothing else, still asks it.
    fn allocation_is_cheap(&self) -> bool {
        false
    }

    /// Capacity in bytes (a multiple of the block size).
    fn size_bytes(&self) -> u64;

    /// The alignment every offset and length must have.
    fn block_size_bytes(&self) -> u64;

    /// The name statistics and logs use.
    fn name(&self) -> &str;

    /// What kind of device this is.
    fn kind(&self) -> DeviceKind;

    /// The CPUs that take this device's completion interrupts, when known ([`affinity`]):
    /// threads that spend their time waiting for its requests run best there. The default
    /// (and devices whose completions come from elsewhere, such as a timing model's timer
    /// thread) say nothing.
    fn interrupt_cpus(&self) -> Option<Vec<usize>> {
        None
    }

    /// A snapshot of the device's statistics.
    fn stats(&self) -> DeviceStats;
}

/// What a range of a device holds ([`Device::allocation`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExtentState {
    /// Stored data (which may happen to be zeros).
    Data,
    /// Stored, and known to read as zeros.
    Zero,
    /// Not stored: reads as zeros and takes no space.
    Hole,
}

/// One extent of [`Device::allocation`]'s answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocationExtent {
    /// Its length; the extents of one answer follow each other from the range's start.
    pub length_bytes: u64,
    /// What it holds.
    pub state: ExtentState,
}

/// Checks a request against the device contract: aligned to `block_size_bytes` and inside
/// `size_bytes`. Every device calls this before touching anything.
pub fn check_request(
    offset_bytes: u64,
    length_bytes: u64,
    size_bytes: u64,
    block_size_bytes: u64,
) -> Result<(), DeviceError> {
    if !offset_bytes.is_multiple_of(block_size_bytes)
        || !length_bytes.is_multiple_of(block_size_bytes)
    {
        return Err(DeviceError::Misaligned {
            offset_bytes,
            length_bytes,
            block_size_bytes,
        });
    }
    match offset_bytes.checked_add(length_bytes) {
        Some(end) if end <= size_bytes => Ok(()),
        _ => Err(DeviceError::OutOfRange {
            offset_bytes,
            length_bytes,
            size_bytes,
        }),
    }
}

/// Checks a block size: a power of two of at least 1.
pub(crate) fn check_block_size(block_size_bytes: u64) -> Result<(), DeviceError> {
    if block_size_bytes == 0 || !block_size_bytes.is_power_of_two() {
        return Err(DeviceError::InvalidConfig(format!(
            "block size {block_size_bytes} is not a power of two"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_request_enforces_alignment_and_range() {
        assert!(check_request(0, 4096, 8192, 512).is_ok());
        assert!(check_request(8192, 0, 8192, 512).is_ok());
        assert!(matches!(
            check_request(100, 512, 8192, 512),
            Err(DeviceError::Misaligned { .. })
        ));
        assert!(matches!(
            check_request(0, 100, 8192, 512),
            Err(DeviceError::Misaligned { .. })
        ));
        assert!(matches!(
            check_request(7680, 1024, 8192, 512),
            Err(DeviceError::OutOfRange { .. })
        ));
        assert!(matches!(
            check_request(u64::MAX - 511, 1024, 8192, 512),
            Err(DeviceError::OutOfRange { .. })
        ));
    }

    /// Checks `Device::write_many_blocking` on `device` (at least 64 MiB, 4 KiB blocks), from
    /// a thread that may block: every write lands where it says, each reports its own outcome
    /// (a misaligned or out-of-range one fails alone), more writes than one io_uring round
    /// hold, caller memory aligned or not, and each write counts once in the statistics.
    fn check_write_many(device: &dyn Device, runtime: &tokio::runtime::Handle) {
        let block = |seed: u8| -> Vec<u8> { (0..4096u32).map(|i| (i as u8) ^ seed).collect() };
        // 40 writes (a ring round is 32): scattered over two 16 MiB chunks of a sparse file,
        // one of them two blocks long from memory off by a byte, one misaligned, one past
        // the end.
        let mut owned: Vec<(u64, Vec<u8>)> = (0..38u64)
            .map(|index| ((index * 7919 % 8192) * 4096, block(index as u8)))
            .collect();
        let mut unaligned_storage = vec![0u8; 8192 + 1];
        unaligned_storage[1..4097].copy_from_slice(&block(200));
        unaligned_storage[4097..].copy_from_slice(&block(201));
        let unaligned = &unaligned_storage[1..];
        let aligned = AlignedBuffer::gathered(&[&block(202)], 4096);
        owned.retain(|(offset, _)| !(40 << 20..(40 << 20) + 3 * 4096).contains(offset));
        let good = owned.len();
        let mut writes: Vec<(u64, &[u8])> = owned
            .iter()
            .map(|(offset, data)| (*offset, data.as_slice()))
            .collect();
        writes.push((40 << 20, unaligned));
        writes.push(((40 << 20) + 2 * 4096, aligned.as_slice()));
        writes.push((100, &owned[0].1));
        writes.push((device.size_bytes(), &owned[1].1));
        let writes_before = device.stats().write.ops;
        let errors_before = device.stats().write.errors;
        let results = std::thread::scope(|scope| {
            scope
                .spawn(|| device.write_many_blocking(&writes, runtime))
                .join()
                .unwrap()
        });
        assert_eq!(results.len(), writes.len());
        for (index, result) in results[..good + 2].iter().enumerate() {
            assert!(result.is_ok(), "write {index}: {result:?}");
        }
        assert!(matches!(
            results[good + 2],
            Err(DeviceError::Misaligned { .. })
        ));
        assert!(matches!(
            results[good + 3],
            Err(DeviceError::OutOfRange { .. })
        ));
        assert_eq!(device.stats().write.ops, writes_before + good as u64 + 2);
        assert_eq!(device.stats().write.errors, errors_before + 2);
        let mut back = vec![0u8; 3 * 4096];
        for (offset, data) in &writes[..good] {
            runtime
                .block_on(device.read_at(*offset, &mut back[..4096]))
                .unwrap();
            assert_eq!(&back[..4096], *data, "at {offset}");
        }
        runtime
            .block_on(device.read_at(40 << 20, &mut back))
            .unwrap();
        assert_eq!(&back[..8192], unaligned);
        assert_eq!(&back[8192..], aligned.as_slice());
        // Nothing to write, nothing written.
        assert!(device.write_many_blocking(&[], runtime).is_empty());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn write_many_lands_every_write_on_a_file_device() {
        let runtime = tokio::runtime::Handle::current();
        // O_DIRECT where the filesystem takes it, and through the page cache.
        for direct_io in [true, false] {
            let directory = tempfile::tempdir().unwrap();
            let path = directory.path().join("device");
            let config = FileDeviceConfig {
                direct_io,
                ..FileDeviceConfig::default()
            };
            // Created sparse, so the writes also go through the hole filler (`initialize.rs`).
            let device = FileDevice::create(&path, 64 << 20, config).unwrap();
            tokio::task::block_in_place(|| check_write_many(&device, &runtime));
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn write_many_lands_every_write_on_a_memory_device() {
        let device = MemoryDevice::new("m", 64 << 20).unwrap();
        let runtime = tokio::runtime::Handle::current();
        tokio::task::block_in_place(|| check_write_many(&device, &runtime));
    }

    #[test]
    fn device_is_object_safe() {
        fn take(_: Option<std::sync::Arc<dyn Device>>) {}
        take(None);
    }
}
