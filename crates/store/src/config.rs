//! How a store is laid out and tuned.

use crate::error::{Result, StoreError};

/// Configuration of a [`crate::Store`]. The layout fields (`min_alloc_size_bytes`,
/// `checksum_block_bytes`) are fixed at `create` and recorded in the metadata; `open` uses the
/// recorded values and ignores these.
#[derive(Clone, Debug)]
pub struct StoreConfig {
    /// Allocation unit in bytes: every extent is a multiple of it, and a write replaces whole
    /// units (copy-on-write). A power of two, a multiple of `checksum_block_bytes`. Default 4096
    /// (BlueStore's SSD and, since Pacific, HDD default).
    pub min_alloc_size_bytes: u64,
    /// Bytes covered by one crc32c. A power of two, at least the device block size, dividing
    /// `min_alloc_size_bytes`. Default 4096 (BlueStore's `bluestore_csum_block_size` is 4 KiB
    /// too).
    pub checksum_block_bytes: u64,
    /// Transactions waiting for the committer at most; `apply` waits for room beyond it.
    /// Default 1024.
    pub queue_depth_max: usize,
    /// Transactions in one group commit at most (one device flush + one metadata commit).
    /// Default 256.
    pub batch_transactions_max: usize,
    /// Batches whose device flush may run at once (each on a thread of its own): the
    /// committer writes the next batch's log record while earlier batches' flushes are in
    /// flight, and batches are answered in order. A flush here takes 100-1000 µs while a 4 KiB
    /// write takes 50-100, so one flush at a time capped replica-1 writes at a batch per
    /// flush (see `commit`). With 1, a batch's record is written while the previous batch
    /// flushes, but its flush waits for that one. Default 4.
    pub flushes_in_flight_max: usize,
    /// Page cache of the metadata database in bytes. Default 64 MiB.
    pub metadata_cache_bytes: usize,
    /// Small overwrites are *deferred*, as BlueStore's are: a `Write` that is its object's
    /// only data change in the transaction and falls inside one extent the object already
    /// has, at most this many bytes per transaction, is not copied to fresh extents. Its data
    /// rides in the batch's log record (durable with the batch's one flush) and is written
    /// over the old blocks after that flush, before the object's lock is released; a mount
    /// writes it again from the log. So small random overwrites leave an object in the
    /// extents it had (a large read of it stays one device read per extent) and its onode
    /// does not grow by an extent per write. Only with `durable`. 0 turns it off (every write
    /// copy-on-write). Default 65536 (BlueStore's `bluestore_prefer_deferred_size_hdd`).
    pub deferred_write_bytes_max: u64,
    /// Transactions writing at most this many data bytes leave their device writes to the
    /// committer's writer thread, which makes them (adjacent extents of a batch as one write,
    /// beside the batch's log record) just before
    /// the batch's flush: no hop to the device's I/O threads and back per write. Larger ones
    /// write from `apply`, in parallel. 0 turns it off. Default 65536.
    pub write_behind_bytes_max: u64,
    /// Memory for committed onodes (and known-absent objects) kept encoded, so reads and
    /// writes of them skip the metadata database lookup, in bytes (about 300 per small
    /// object). 0 turns the cache off. Default 128 MiB (about 400,000 small objects; BlueStore
    /// gives its onode cache a share of `osd_memory_target`, 4 GiB per OSD by default).
    pub onode_cache_bytes: usize,
    /// Memory for blocks of small reads (at most `DATA_CACHE_READ_BYTES_MAX`, 64 KiB) that
    /// passed their checksums, so a re-read small object costs no device read, in bytes. 0
    /// turns it off. Default 256 MiB: a bound, not a reservation (it fills only as distinct
    /// small objects are read). BlueStore caches read data too
    /// (`bluestore_default_buffered_read`), in a share of `osd_memory_target`, 4 GiB per OSD
    /// by default and 896 MiB in the Ceph that `strata bench cluster` starts.
    pub data_cache_bytes: usize,
    /// Run the commit pipeline's threads (writer, sync threads) on the CPU that
    /// takes the device's completion interrupts, when the device has exactly one such CPU
    /// (a single-queue disk: virtio-blk with one queue, SATA) and the process may use others.
    /// Those threads spend their time waiting for the device, and a wake-up from an interrupt
    /// on another CPU is an inter-processor interrupt (in a VM whose idle vCPUs halt, a vCPU
    /// to wake). Measured on the 2-vCPU development machine (`examples/bench_cluster.rs
    /// --replicas 1 --concurrency 16`, six runs alternating with the code before): 32.7-39.6k
    /// durable 4 KiB writes/s (five of six at 36.7k or more) and 26.5-33.3 µs of CPU per
    /// write, against 32.3-34.2k and 33.7-35.9 µs.
    /// Stores on one disk share that CPU; three of them (replica 3) measured within noise,
    /// with less CPU per write (ARCHITECTURE.md). Default true.
    pub pin_to_interrupt_cpu: bool,
    /// Flush the device and fsync the metadata at every commit. Default true. `false` is only
    /// for benchmarks that want the cost of the rest: acknowledged writes may be lost.
    pub durable: bool,
    /// Mount a store whose metadata log was damaged after it was durable (a record a later
    /// one says was flushed does not read back): replay the records before the damage and
    /// note it ([`crate::Store::log_damage`]) instead of failing with `StoreError::Mount`.
    /// The store then lacks acknowledged writes: only for an owner that restores them from
    /// elsewhere (the cluster refills such an OSD from its peers). Default false.
    pub salvage_damaged_log: bool,
    /// A client read ([`crate::Store::read`]) of a range the device holds in more than this
    /// many separate runs rewrites that range contiguously afterwards, in the background, as
    /// an [`crate::Op::Defragment`] transaction (copy-on-write: durability is a write's).
    /// Copy-on-write scatters small overwrites: a 4 MiB volume object after 4 KiB random
    /// writes had 250-328 extents, and a 1 MiB read of it was 60-80 device reads. 0 turns it
    /// off. Default 8.
    pub defragment_runs_max: usize,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            min_alloc_size_bytes: 4096,
            checksum_block_bytes: 4096,
            queue_depth_max: 1024,
            batch_transactions_max: 256,
            flushes_in_flight_max: 4,
            metadata_cache_bytes: 64 << 20,
            deferred_write_bytes_max: 65536,
            write_behind_bytes_max: 65536,
            onode_cache_bytes: 128 << 20,
            data_cache_bytes: 256 << 20,
            pin_to_interrupt_cpu: true,
            durable: true,
            salvage_damaged_log: false,
            defragment_runs_max: 8,
        }
    }
}

impl StoreConfig {
    /// Checks the layout against a device block size.
    pub(crate) fn validate(&self, device_block_bytes: u64) -> Result<()> {
        let invalid = |what: String| Err(StoreError::InvalidArgument(what));
        let unit = self.min_alloc_size_bytes;
        let checksum = self.checksum_block_bytes;
        if !unit.is_power_of_two() || !checksum.is_power_of_two() {
            return invalid(format!(
                "min_alloc_size {unit} and checksum block {checksum} must be powers of two"
            ));
        }
        if checksum < device_block_bytes || !unit.is_multiple_of(checksum) {
            return invalid(format!(
                "checksum block {checksum} must be >= the device block {device_block_bytes} and divide min_alloc_size {unit}"
            ));
        }
        if self.queue_depth_max == 0
            || self.batch_transactions_max == 0
            || self.flushes_in_flight_max == 0
        {
            return invalid(
                "queue_depth_max, batch_transactions_max and flushes_in_flight_max must be > 0"
                    .into(),
            );
        }
        Ok(())
    }
}
