//! The public vocabulary: object ids, transactions, stat results.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::error::{Result, StoreError};

/// Longest collection or object name, in bytes.
pub const NAME_BYTES_MAX: usize = 4096;

/// An object: a name inside a collection (a PG, in the cluster: "1.2a").
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectId {
    /// The collection; no NUL bytes, not empty.
    pub collection: String,
    /// The object's name; not empty.
    pub name: String,
}

impl ObjectId {
    /// An id from its parts (checked when used).
    pub fn new(collection: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            collection: collection.into(),
            name: name.into(),
        }
    }

    pub(crate) fn validate(&self) -> Result<()> {
        validate_names(&self.collection, &self.name)
    }
}

pub(crate) fn validate_collection(collection: &str) -> Result<()> {
    if collection.is_empty() || collection.len() > NAME_BYTES_MAX || collection.contains('\0') {
        return Err(StoreError::InvalidArgument(format!(
            "collection {collection:?} must be 1..={NAME_BYTES_MAX} bytes without NUL"
        )));
    }
    Ok(())
}

pub(crate) fn validate_names(collection: &str, name: &str) -> Result<()> {
    validate_collection(collection)?;
    if name.is_empty() || name.len() > NAME_BYTES_MAX {
        return Err(StoreError::InvalidArgument(format!(
            "object name of {} bytes must be 1..={NAME_BYTES_MAX}",
            name.len()
        )));
    }
    Ok(())
}

/// One operation of a [`Transaction`]. Every operation but `Remove` creates the object if it is
/// missing (as RADOS does).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Op {
    /// Creates the object; with `exclusive`, fails with `Exists` if it is there.
    Create {
        /// Fail if the object exists.
        exclusive: bool,
    },
    /// Replaces the whole data with `data` (size becomes its length). Xattrs and omap stay.
    WriteFull {
        /// The new content (shared, never copied: the replicas of a write hold one buffer).
        data: Bytes,
    },
    /// Writes `data` at `offset_bytes`, extending the object if it ends beyond it.
    Write {
        /// Where in the object.
        offset_bytes: u64,
        /// What (shared, never copied).
        data: Bytes,
    },
    /// Sets the size; bytes beyond the new size are dropped, and read as zeros if it grows.
    Truncate {
        /// The new size.
        size_bytes: u64,
    },
    /// Zeroes a range (extending the object if it ends beyond it); whole allocation units in the
    /// range are released.
    Zero {
        /// First byte.
        offset_bytes: u64,
        /// Bytes.
        length_bytes: u64,
    },
    /// Removes the object: data, xattrs and omap. Fails with `NotFound` if it is missing.
    Remove,
    /// Rewrites the mapped parts of a range (widened to allocation units) that the device
    /// holds in more than one run to fresh contiguous extents. The content, size and mtime do
    /// not change; a missing object or a contiguous range is left alone (and a transaction of
    /// only such ops writes nothing). Reads are made under the object's lock, so no write can
    /// change the range between the read and the rewrite.
    Defragment {
        /// First byte.
        offset_bytes: u64,
        /// Bytes.
        length_bytes: u64,
    },
    /// Sets an extended attribute.
    SetXattr {
        /// Attribute name.
        key: String,
        /// Attribute value.
        value: Vec<u8>,
    },
    /// Removes an extended attribute (no error if it is missing).
    RemoveXattr {
        /// Attribute name.
        key: String,
    },
    /// Sets omap keys.
    OmapSet {
        /// Key/value pairs.
        entries: Vec<(Vec<u8>, Vec<u8>)>,
    },
    /// Removes omap keys (missing keys are ignored).
    OmapRemove {
        /// Keys.
        keys: Vec<Vec<u8>>,
    },
    /// Removes every omap key of the object.
    OmapClear,
}

impl Op {
    /// Whether it changes the object's data or its mapping (writes, truncation, zeroing,
    /// removal, defragmentation), as opposed to its xattrs or omap.
    pub(crate) fn changes_data(&self) -> bool {
        matches!(
            self,
            Op::WriteFull { .. }
                | Op::Write { .. }
                | Op::Truncate { .. }
                | Op::Zero { .. }
                | Op::Remove
                | Op::Defragment { .. }
        )
    }
}

/// Operations applied atomically: after a crash either all of them are visible or none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Transaction {
    /// Modification time stamped on every object the transaction changes, in ns since the
    /// Unix epoch, chosen by the caller (the store reads no clock).
    pub mtime_ns: u64,
    /// The operations, applied in order.
    pub ops: Vec<(ObjectId, Op)>,
}

impl Transaction {
    /// An empty transaction stamping `mtime_ns`.
    pub fn new(mtime_ns: u64) -> Self {
        Self {
            mtime_ns,
            ops: Vec::new(),
        }
    }

    /// Appends an operation.
    pub fn push(&mut self, object: &ObjectId, op: Op) -> &mut Self {
        self.ops.push((object.clone(), op));
        self
    }

    /// Appends `Create`.
    pub fn create(&mut self, object: &ObjectId, exclusive: bool) -> &mut Self {
        self.push(object, Op::Create { exclusive })
    }

    /// Appends `WriteFull`.
    pub fn write_full(&mut self, object: &ObjectId, data: impl Into<Bytes>) -> &mut Self {
        self.push(object, Op::WriteFull { data: data.into() })
    }

    /// Appends `Write`.
    pub fn write(
        &mut self,
        object: &ObjectId,
        offset_bytes: u64,
        data: impl Into<Bytes>,
    ) -> &mut Self {
        self.push(
            object,
            Op::Write {
                offset_bytes,
                data: data.into(),
            },
        )
    }

    /// Appends `Truncate`.
    pub fn truncate(&mut self, object: &ObjectId, size_bytes: u64) -> &mut Self {
        self.push(object, Op::Truncate { size_bytes })
    }

    /// Appends `Zero`.
    pub fn zero(&mut self, object: &ObjectId, offset_bytes: u64, length_bytes: u64) -> &mut Self {
        self.push(
            object,
            Op::Zero {
                offset_bytes,
                length_bytes,
            },
        )
    }

    /// Appends `Defragment`.
    pub fn defragment(
        &mut self,
        object: &ObjectId,
        offset_bytes: u64,
        length_bytes: u64,
    ) -> &mut Self {
        self.push(
            object,
            Op::Defragment {
                offset_bytes,
                length_bytes,
            },
        )
    }

    /// Appends `Remove`.
    pub fn remove(&mut self, object: &ObjectId) -> &mut Self {
        self.push(object, Op::Remove)
    }

    /// Appends `SetXattr`.
    pub fn set_xattr(
        &mut self,
        object: &ObjectId,
        key: impl Into<String>,
        value: impl Into<Vec<u8>>,
    ) -> &mut Self {
        self.push(
            object,
            Op::SetXattr {
                key: key.into(),
                value: value.into(),
            },
        )
    }

    /// Appends `RemoveXattr`.
    pub fn remove_xattr(&mut self, object: &ObjectId, key: impl Into<String>) -> &mut Self {
        self.push(object, Op::RemoveXattr { key: key.into() })
    }

    /// Appends `OmapSet`.
    pub fn omap_set(&mut self, object: &ObjectId, entries: Vec<(Vec<u8>, Vec<u8>)>) -> &mut Self {
        self.push(object, Op::OmapSet { entries })
    }

    /// Appends `OmapRemove`.
    pub fn omap_remove(&mut self, object: &ObjectId, keys: Vec<Vec<u8>>) -> &mut Self {
        self.push(object, Op::OmapRemove { keys })
    }

    /// Appends `OmapClear`.
    pub fn omap_clear(&mut self, object: &ObjectId) -> &mut Self {
        self.push(object, Op::OmapClear)
    }
}

/// What the data cache (`StoreConfig::data_cache_bytes`) did since mount, and holds now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DataCacheStats {
    /// Reads served from memory.
    pub hits: u64,
    /// Reads small enough for the cache that went to the device.
    pub misses: u64,
    /// Blocks held.
    pub blocks: u64,
    /// Memory they take, in bytes.
    pub bytes: u64,
}

/// Summed over stores (a cluster's OSDs).
impl std::iter::Sum for DataCacheStats {
    fn sum<I: Iterator<Item = DataCacheStats>>(stats: I) -> DataCacheStats {
        stats.fold(DataCacheStats::default(), |total, stats| DataCacheStats {
            hits: total.hits + stats.hits,
            misses: total.misses + stats.misses,
            blocks: total.blocks + stats.blocks,
            bytes: total.bytes + stats.bytes,
        })
    }
}

/// How the store's group commit shared its syncs among transactions, counted since mount:
/// `(device_flushes + metadata_syncs) / transactions` is the fsyncs paid per acknowledged
/// write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CommitStats {
    /// Transactions committed (acknowledged with `Ok`).
    pub transactions: u64,
    /// Batches committed: each is one metadata commit shared by its transactions.
    pub batches: u64,
    /// Device flushes (`fdatasync` of the data device for a file): at most one per batch.
    pub device_flushes: u64,
    /// Metadata commits made durable with an fsync: one per batch of a durable store.
    pub metadata_syncs: u64,
    /// Where the committed transactions spent their time.
    pub stages: CommitStages,
}

/// Summed over stores (a cluster's OSDs).
impl std::iter::Sum for CommitStats {
    fn sum<I: Iterator<Item = CommitStats>>(stats: I) -> CommitStats {
        stats.fold(CommitStats::default(), |total, stats| CommitStats {
            transactions: total.transactions + stats.transactions,
            batches: total.batches + stats.batches,
            device_flushes: total.device_flushes + stats.device_flushes,
            metadata_syncs: total.metadata_syncs + stats.metadata_syncs,
            stages: total.stages.plus(&stats.stages),
        })
    }
}

/// [`CommitStages`]' names, in path order.
const STAGE_NAMES: [&str; 7] = [
    "prepare", "queue", "write", "flush", "order", "apply", "answer",
];

/// The time committed transactions spent in each stage of their path through the store,
/// summed over them, in nanoseconds: divided by [`CommitStats::transactions`], where one
/// write's latency goes. The stages follow one another, so per transaction they add up to
/// the time from `apply` to its answer.
///
/// Why: a write's latency is mostly waiting (for the device, for a batch, for a CPU), and
/// which wait dominates decides what to change; CPU profiles do not show waits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CommitStages {
    /// From `apply` to the committer's queue: the task's start, the object locks, the
    /// preparation (onode lookup, allocation, data placement).
    pub prepare_ns: u64,
    /// In the queue until the committer's writer takes it into a batch (the writer is
    /// writing the batch before meanwhile).
    pub queued_ns: u64,
    /// The batch's sealing (metadata staged, log record encoded) and its device writes
    /// (record and data at once), until the writer sees them done.
    pub written_ns: u64,
    /// From there to the end of the batch's device flush, the hand-off to a sync thread
    /// included.
    pub flushed_ns: u64,
    /// Waiting for every earlier batch to finish (batches finish in order).
    pub ordered_ns: u64,
    /// Applying the batch: metadata database, onode cache, freed extents, counters.
    pub applied_ns: u64,
    /// Answering the batch (its whole answer time, for each of its transactions); added just
    /// after the answers, so a reading taken by a caller the moment it is answered may lack
    /// its batch's share.
    pub answered_ns: u64,
}

impl CommitStages {
    /// The stages' names and their times, in path order.
    ///
    /// Per transaction (divided by the transactions counted in the same reading) they are
    /// what `examples/bench_cluster.rs` and `strata bench cluster` print.
    pub fn named(&self) -> [(&'static str, u64); 7] {
        let nanos = self.nanos();
        std::array::from_fn(|stage| (STAGE_NAMES[stage], nanos[stage]))
    }

    /// The stages' times in path order (as [`CommitStages::named`]).
    pub(crate) fn nanos(&self) -> [u64; 7] {
        [
            self.prepare_ns,
            self.queued_ns,
            self.written_ns,
            self.flushed_ns,
            self.ordered_ns,
            self.applied_ns,
            self.answered_ns,
        ]
    }

    /// Stages from their times in path order.
    pub(crate) fn from_nanos(nanos: [u64; 7]) -> CommitStages {
        let [prepare_ns, queued_ns, written_ns, flushed_ns, ordered_ns, applied_ns, answered_ns] =
            nanos;
        CommitStages {
            prepare_ns,
            queued_ns,
            written_ns,
            flushed_ns,
            ordered_ns,
            applied_ns,
            answered_ns,
        }
    }

    /// Each stage's mean over `transactions`, in µs: "prepare 51, queue 237, ..., answer 31 µs
    /// (sum 1313)".
    pub fn per_transaction(&self, transactions: u64) -> String {
        let transactions = transactions.max(1) as f64;
        let micros = |nanos: u64| nanos as f64 / transactions / 1000.0;
        let stages: Vec<String> = self
            .named()
            .iter()
            .map(|(name, nanos)| format!("{name} {:.0}", micros(*nanos)))
            .collect();
        let sum: u64 = self.named().iter().map(|(_, nanos)| nanos).sum();
        format!("{} µs (sum {:.0})", stages.join(", "), micros(sum))
    }

    fn combine(&self, other: &CommitStages, op: fn(u64, u64) -> u64) -> CommitStages {
        let (mine, theirs) = (self.nanos(), other.nanos());
        CommitStages::from_nanos(std::array::from_fn(|stage| op(mine[stage], theirs[stage])))
    }

    /// Both summed.
    pub fn plus(&self, other: &CommitStages) -> CommitStages {
        self.combine(other, u64::saturating_add)
    }

    /// What was added since `before` (an earlier reading of the same counters).
    pub fn since(&self, before: &CommitStages) -> CommitStages {
        self.combine(before, u64::saturating_sub)
    }
}

/// What `stat` says about an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjectStat {
    /// Logical size.
    pub size_bytes: u64,
    /// Modification time given by the last transaction that changed the object.
    pub mtime_ns: u64,
    /// Device bytes allocated to the object's data.
    pub allocated_bytes: u64,
}

/// Space and metadata accounting, like BlueStore's `statfs`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Statfs {
    /// Device capacity.
    pub total_bytes: u64,
    /// Device bytes not allocated.
    pub free_bytes: u64,
    /// Device bytes allocated to object data (multiples of min_alloc_size).
    pub allocated_bytes: u64,
    /// Object bytes backed by allocated extents (user data, without padding or holes).
    pub stored_bytes: u64,
    /// Objects.
    pub objects: u64,
    /// Key + value bytes of the object records (onodes, with xattrs and extent maps).
    pub onode_bytes: u64,
    /// Key + value bytes of all omap entries.
    pub omap_bytes: u64,
    /// Bytes metadata takes on disk: the database's files and the metadata log's region on
    /// the device.
    pub metadata_file_bytes: u64,
    /// Allocation unit.
    pub min_alloc_size_bytes: u64,
    /// Objects and space per collection (collections holding objects only).
    pub collections: BTreeMap<String, CollectionUsage>,
}

/// Objects and space of one collection (a PG, in the cluster): what per-pool `df` adds up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CollectionUsage {
    /// Objects.
    pub objects: u64,
    /// Object bytes backed by extents (as [`Statfs::stored_bytes`]).
    pub stored_bytes: u64,
    /// Device bytes its objects' extents hold (multiples of min_alloc_size).
    pub allocated_bytes: u64,
    /// Key + value bytes of its object records and omap entries.
    pub metadata_bytes: u64,
}

impl Statfs {
    /// Share of allocated bytes that hold no object data: `1 - stored / allocated` (seed 002's
    /// data-hole rate); 0 when nothing is allocated.
    pub fn data_hole_ratio(&self) -> f64 {
        if self.allocated_bytes == 0 {
            return 0.0;
        }
        1.0 - self.stored_bytes as f64 / self.allocated_bytes as f64
    }

    /// Key + value bytes of metadata records per object (onodes and omap); 0 without objects.
    pub fn metadata_bytes_per_object(&self) -> f64 {
        if self.objects == 0 {
            return 0.0;
        }
        (self.onode_bytes + self.omap_bytes) as f64 / self.objects as f64
    }

    /// Metadata file bytes per object; 0 without objects.
    pub fn metadata_file_bytes_per_object(&self) -> f64 {
        if self.objects == 0 {
            return 0.0;
        }
        self.metadata_file_bytes as f64 / self.objects as f64
    }
}
