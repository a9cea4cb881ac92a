//! The metadata write-ahead log: one record per group commit, written to a region at the end
//! of the data device and made durable by the batch's device flush before the batch is
//! acknowledged; the metadata database (fjall) then takes the same changes without a sync of
//! its own.
//!
//! Why a log of our own in front of the database: a durable fjall commit is a journal append,
//! an fdatasync and memtable inserts, but with deferred data in it (4 KiB values) it cost
//! about 210 µs per batch in the cluster and 47 µs of CPU per replica-1 write, against 35
//! without deferral; the log is one write of bytes already encoded.
//!
//! ## Why on the data device
//! A batch's data and its record must both be durable before the answer. With the log in a
//! file of its own that took two syncs per batch, the device's flush and the file's
//! fdatasync; with the log on the device, one flush after both writes covers both (BlueStore
//! puts RocksDB's log on its block device through BlueFS for the same reason). Measured with
//! `examples/bench_cluster.rs --replicas 1 --concurrency 16` (4 KiB objects, file devices),
//! a prototype writing each record to the device's last 64 MiB and flushing once, against
//! the separate file, alternating, the four runs with the least CPU stolen by the hypervisor:
//! 59.1k, 51.3k, 50.4k and 70.1k writes/s against 47.6k, 45.5k, 54.3k and 52.2k.
//!
//! Region: the last `log_bytes` of the device (`Layout::log_bytes`, chosen at create: a 16th of
//! the device, between 1 and 64 MiB); the allocator never hands it out. Records start at
//! multiples of the device's block size (writes are whole blocks, for O_DIRECT), each
//! `u32 magic | u32 payload length | u32 crc32c(payload) | payload`, zero padding after it;
//! payload: `u64 generation | u64 sequence | u8 flags | [u64 flushed before] | u32 changes |
//! per change: u8
//! keyspace, u8 kind (0 remove, 1 insert), u32 key length, key, [u32 value length, value] |
//! u32 deferred | per deferred write: u64 device offset, u32 length, data | [u32 digests |
//! per extent written: u64 device offset, u64 length, u64 xxh3 of the data]`. Reading stops at
//! the first record that is short, has a bad magic or checksum, belongs to another
//! generation than the first record or breaks the sequence: a torn tail is never applied.
//! But a log may end early only where a crash can have cut it: when a later intact record of
//! the generation says the missing one had been flushed (`flushed before` beyond it), the
//! missing record was durable and was damaged since, so opening the log fails
//! (`StoreError::Mount`) rather than drop it and every later, maybe acknowledged, record.
//! Flag 2 (`FLUSHED_BEFORE`, set by every record since format 5): the `u64` after the flags
//! is a sequence number S such that, when this record was written, a device flush had
//! completed after the records before S (and their data) were written: only the records from
//! S on may have a record or data that is not on the device. Several batches are flushed at
//! once (see `commit`), so S is usually a few records back. Flag 1 (`DEVICE_FLUSHED`, format
//! 4's records, still read): S is the record's own sequence. Flag 4 (`DATA_DIGESTS`, set by
//! every record since format 6): the record ends with a digest of every extent its batch
//! wrote, so a mount can tell whether that data reached the device.
//!
//! ## Why digests, not the onodes' crc32c
//! A record and its batch's data are written at once, so after a crash a record can be on
//! the device while its data is not, and the extent holds what was there before: another
//! object's data, or an older version of the same object (a freed extent is reused once
//! its batch is flushed). Format 5 checked such extents against the crc32c values of the
//! onodes. A crc is linear: data built of pieces that each end with their own crc32c (many
//! formats, and the SIGKILL test's objects) has the same crc32c whatever the pieces hold,
//! so old data passed as new and a mount made a transaction visible over the wrong bytes
//! (`tests/kill.rs` found it: one run in 10-40). A 64-bit xxh3 of each extent has no such
//! structure, and its cost does not show in `examples/bench_cluster.rs` (ARCHITECTURE).
//!
//! ## Old records after the end
//! The region is rewritten from its start after every checkpoint: emptying the log zeroes
//! the first block, durably, and rewinds. Bytes after the last valid record are then old
//! records or parts of them; they never read as part of the log:
//! - a new generation starts at offset 0 with a fresh random generation id, and every record
//!   must carry the first record's id, so an old record (or a record-shaped piece of old
//!   deferred client data) is never taken for a new one;
//! - and the sequence must continue by one, which old records of the same generation (left
//!   after a failed batch's record was taken back) cannot do once the store is poisoned.
//!
//! Recovery (at mount, see `replay`): metadata changes of the records newer than the sequence
//! the database holds are applied again; the deferred overwrites of every record kept are
//! written again, in log order; then the device is flushed, the database
//! persisted and the log emptied. A checkpoint (database persisted, log emptied) also happens
//! when the log passes half its region, and before a record that would not fit.

use std::sync::Arc;

use device::{AlignedBuffer, Device};

use crate::error::{Result, StoreError};
use crate::meta::{MetaBatch, Space};

const MAGIC: u32 = 0x4c41_5753; // "SWAL" little endian
const HEADER_BYTES: usize = 12;
/// Format 4: the device was flushed after every earlier record was written.
const DEVICE_FLUSHED: u8 = 1;
/// A `u64` "flushed before" sequence follows the flags.
const FLUSHED_BEFORE: u8 = 2;
/// The record ends with its batch's [`DataDigest`]s (format 6).
const DATA_DIGESTS: u8 = 4;

/// What a batch wrote to one range of the device: a mount compares it with what the device
/// holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DataDigest {
    pub offset_bytes: u64,
    pub length_bytes: u64,
    /// [`digest`] of the data.
    pub hash: u64,
}

/// The xxh3 (64 bits) of one block of data: a transaction keeps these for the blocks it
/// writes and digests the blocks its onodes still reference at the end (a block it wrote
/// and then replaced itself is free once its batch is flushed, and may be reused before a
/// mount checks the record).
pub(crate) fn block_hash(block: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(block)
}

/// The digest of consecutive blocks from their [`block_hash`]es: the xxh3 of the hashes,
/// little endian, one after the other (streamed, not gathered first).
pub(crate) fn combine(hashes: impl IntoIterator<Item = u64>) -> u64 {
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    for hash in hashes {
        hasher.update(&hash.to_le_bytes());
    }
    hasher.digest()
}

/// The digest of data written to a range (blocks of `block_bytes`; see the module
/// documentation).
pub(crate) fn digest(data: &[u8], block_bytes: usize) -> u64 {
    combine(data.chunks(block_bytes.max(1)).map(block_hash))
}

/// One change of a record: (keyspace, key, new value or `None` for a removal).
pub(crate) type Change = (Space, Vec<u8>, Option<Vec<u8>>);

/// The log region's size for a device of `device_bytes` with blocks of `block_bytes`: a
/// 16th of the device, between 1 and 64 MiB, whole blocks.
pub(crate) fn region_bytes_for(device_bytes: u64, block_bytes: u64) -> u64 {
    let wanted = (device_bytes / 16).clamp(1 << 20, 64 << 20);
    wanted / block_bytes.max(1) * block_bytes.max(1)
}

/// A record's padded bytes and the device offset they go to (see [`Wal::place`]).
pub(crate) struct PlacedRecord {
    pub offset_bytes: u64,
    pub buffer: AlignedBuffer,
}

/// One decoded record.
#[derive(Debug, PartialEq)]
pub(crate) struct Record {
    pub generation: u64,
    pub sequence: u64,
    /// The records before this sequence, and their data, were on the device (flushed) when
    /// this one was written; 0 when nothing was known to be.
    pub flushed_before: u64,
    pub changes: Vec<Change>,
    pub deferred: Vec<(u64, Vec<u8>)>,
    /// The extents the batch wrote, with their digests; `None` for a record of format 5 or
    /// older, whose data a mount checks against the onodes' crc32c values instead.
    pub digests: Option<Vec<DataDigest>>,
}

/// The log on its device region.
pub(crate) struct Wal {
    device: Arc<dyn Device>,
    /// Device offset of the region's first byte.
    start_bytes: u64,
    /// Size of the region.
    region_bytes: u64,
    /// Records start at multiples of this (the device's block size).
    block_bytes: u64,
    /// End of the last valid record, rounded up to a block: where the next one goes.
    end_bytes: u64,
    /// Generation id every record written until the next reset carries.
    pub generation: u64,
    /// Sequence of the next record.
    pub next_sequence: u64,
    /// The highest sequence of any intact record in the region at open, valid or not, when
    /// the log was found damaged (else 0): a mount that salvages it moves past them all.
    pub sequence_max_in_region: u64,
}

/// A generation id no earlier generation of this log is likely to have had: 64 random bits
/// (std's per-process random hash keys, mixed with the time, so two opens in one process
/// differ too).
fn new_generation() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    hasher.write_u128(now);
    hasher.finish()
}

/// Bytes read from the region at a time when opening.
const READ_CHUNK_BYTES: u64 = 4 << 20;

impl Wal {
    /// Opens the log in `region_bytes` of `device` from `start_bytes` and reads its valid
    /// records. A log damaged after it was durable fails with [`StoreError::Mount`] (see
    /// [`Wal::open_checked`]).
    #[cfg(test)]
    pub async fn open(
        device: Arc<dyn Device>,
        start_bytes: u64,
        region_bytes: u64,
    ) -> Result<(Wal, Vec<Record>)> {
        let (wal, records, damage) =
            Self::open_checked(device, start_bytes, region_bytes, None).await?;
        match damage {
            Some(why) => Err(StoreError::Mount(why)),
            None => Ok((wal, records)),
        }
    }

    /// Opens the log and reads its valid records, up to the first bad one, and says whether
    /// the log was damaged after it was durable (a later record says the missing one had been
    /// flushed) rather than cut by a crash: then the records before the damage come with
    /// the reason, and the caller decides whether to replay them. `first_unapplied`: the
    /// sequence after the last one the database holds, when known. With no valid record at
    /// all (the first one is bad), any record behind claiming that `first_unapplied` had
    /// been flushed proves the damage: records of older generations all have sequences the
    /// database already holds, and their claims lie at or below it.
    pub async fn open_checked(
        device: Arc<dyn Device>,
        start_bytes: u64,
        region_bytes: u64,
        first_unapplied: Option<u64>,
    ) -> Result<(Wal, Vec<Record>, Option<String>)> {
        let block_bytes = device.block_size_bytes().max(1);
        if start_bytes + region_bytes > device.size_bytes() || region_bytes < block_bytes {
            return Err(StoreError::metadata(format!(
                "metadata log region {start_bytes}+{region_bytes} does not fit the {}-byte device",
                device.size_bytes()
            )));
        }
        // The whole region (at most 64 MiB, once per mount), in chunks.
        let mut bytes = vec![0u8; region_bytes as usize];
        for (index, chunk) in bytes.chunks_mut(READ_CHUNK_BYTES as usize).enumerate() {
            device
                .read_at(start_bytes + index as u64 * READ_CHUNK_BYTES, chunk)
                .await?;
        }
        let (records, end) = decode_records(&bytes, block_bytes as usize);
        let mut damage = None;
        if let Some(last) = records.last() {
            if let Some((offset, later)) =
                durable_record_after_end(&bytes, block_bytes as usize, end, last)
            {
                damage = Some(format!(
                    "the metadata log of {} is damaged: the record of sequence {} at log offset {end} (device offset {}) does not read back, yet the intact record of sequence {} at log offset {offset} says every record before sequence {} had been flushed; replaying the {} records before the damage would lose acknowledged writes, so the log was left as it is (restore this store's objects from another replica)",
                    device.name(),
                    last.sequence + 1,
                    start_bytes + end as u64,
                    later.sequence,
                    later.flushed_before,
                    records.len(),
                ));
            }
        } else if let Some(first) = first_unapplied {
            if let Some((offset, later)) =
                record_claiming_flushed(&bytes, block_bytes as usize, first)
            {
                damage = Some(format!(
                    "the metadata log of {} is damaged: its first record (device offset {start_bytes}) does not read back, yet the intact record of sequence {} at log offset {offset} says every record before sequence {} had been flushed, and the database holds none from sequence {first} on; starting without them would lose acknowledged writes, so the log was left as it is (restore this store's objects from another replica)",
                    device.name(),
                    later.sequence,
                    later.flushed_before,
                ));
            }
        }
        Ok((
            Wal {
                device,
                start_bytes,
                region_bytes,
                block_bytes,
                end_bytes: end as u64,
                generation: records
                    .first()
                    .map_or_else(new_generation, |record| record.generation),
                next_sequence: records.last().map_or(0, |record| record.sequence + 1),
                sequence_max_in_region: match damage {
                    Some(_) => sequence_max(&bytes, block_bytes as usize),
                    None => 0,
                },
            },
            records,
            damage,
        ))
    }

    /// The highest sequence of any intact record in the region (an earlier store's, when a
    /// store is created on a used device), if any.
    pub async fn sequence_max_on(
        device: &Arc<dyn Device>,
        start_bytes: u64,
        region_bytes: u64,
    ) -> Result<Option<u64>> {
        let mut bytes = vec![0u8; region_bytes as usize];
        for (index, chunk) in bytes.chunks_mut(READ_CHUNK_BYTES as usize).enumerate() {
            device
                .read_at(start_bytes + index as u64 * READ_CHUNK_BYTES, chunk)
                .await?;
        }
        let align_bytes = device.block_size_bytes().max(1) as usize;
        Ok(intact_records_from(&bytes, align_bytes, 0)
            .map(|(_, record)| record.sequence)
            .max())
    }

    /// Bytes of the region the valid records take.
    pub fn len_bytes(&self) -> u64 {
        self.end_bytes
    }

    /// Size of the region.
    pub fn region_bytes(&self) -> u64 {
        self.region_bytes
    }

    /// Whether a record of `record_bytes` fits after the valid ones.
    pub fn fits(&self, record_bytes: usize) -> bool {
        self.end_bytes + self.padded(record_bytes) <= self.region_bytes
    }

    fn padded(&self, record_bytes: usize) -> u64 {
        (record_bytes as u64).div_ceil(self.block_bytes) * self.block_bytes
    }

    /// Writes an encoded record (see [`encode_record`]) after the valid ones, from a thread
    /// that may block; it is durable after the device's next flush. The caller checked
    /// [`Wal::fits`]. (The committer writes records itself: [`Wal::place`].)
    #[cfg(test)]
    pub fn append_blocking(
        &mut self,
        record: &[u8],
        runtime: &tokio::runtime::Handle,
    ) -> Result<()> {
        let placed = self.place(record)?;
        self.device
            .write_blocking(placed.offset_bytes, placed.buffer.as_slice(), runtime)?;
        self.advance(&placed);
        Ok(())
    }

    /// Where an encoded record goes after the valid ones (a device offset) and the
    /// block-padded bytes to write there, for a caller that writes them itself (beside other
    /// writes) and then calls [`Wal::advance`].
    pub fn place(&self, record: &[u8]) -> Result<PlacedRecord> {
        let padded = self.padded(record.len());
        if self.end_bytes + padded > self.region_bytes {
            return Err(StoreError::metadata(format!(
                "a {}-byte record does not fit the metadata log ({} of {} bytes used)",
                record.len(),
                self.end_bytes,
                self.region_bytes
            )));
        }
        let zeros = vec![0u8; (padded - record.len() as u64) as usize];
        Ok(PlacedRecord {
            offset_bytes: self.start_bytes + self.end_bytes,
            buffer: AlignedBuffer::gathered(&[record, &zeros], self.block_bytes as usize),
        })
    }

    /// Takes a placed record, written, into the log: the next one goes after it.
    pub fn advance(&mut self, placed: &PlacedRecord) {
        self.end_bytes += placed.buffer.as_slice().len() as u64;
    }

    /// Cuts the log back to `end_bytes` (the length before a record whose batch failed),
    /// durably, so a mount does not apply that record: its first block is zeroed.
    pub fn truncate_blocking(
        &mut self,
        end_bytes: u64,
        runtime: &tokio::runtime::Handle,
    ) -> Result<()> {
        runtime.block_on(self.invalidate_at(end_bytes))?;
        self.end_bytes = end_bytes;
        Ok(())
    }

    /// [`Wal::reset`] from a thread that may block.
    pub fn reset_blocking(&mut self, runtime: &tokio::runtime::Handle) -> Result<()> {
        runtime.block_on(self.reset())
    }

    /// Empties the log, durably, and starts a new generation. The caller made everything it
    /// holds durable elsewhere.
    pub async fn reset(&mut self) -> Result<()> {
        self.invalidate_at(0).await?;
        self.end_bytes = 0;
        self.generation = new_generation();
        Ok(())
    }

    /// Zeroes the block at `offset_bytes` of the region (if inside it) and flushes.
    async fn invalidate_at(&mut self, offset_bytes: u64) -> Result<()> {
        if offset_bytes + self.block_bytes <= self.region_bytes {
            let zeros = AlignedBuffer::gathered(
                &[&vec![0u8; self.block_bytes as usize]],
                self.block_bytes as usize,
            );
            self.device
                .write_at(self.start_bytes + offset_bytes, zeros.as_slice())
                .await?;
        }
        self.device.flush().await?;
        Ok(())
    }
}

/// Encodes one record into `out` (cleared first).
pub(crate) fn encode_record(
    out: &mut Vec<u8>,
    generation: u64,
    sequence: u64,
    flushed_before: u64,
    changes: &MetaBatch,
    deferred: &[&(u64, Vec<u8>)],
    digests: &[&DataDigest],
) {
    out.clear();
    out.extend_from_slice(&[0u8; HEADER_BYTES]);
    out.extend_from_slice(&generation.to_le_bytes());
    out.extend_from_slice(&sequence.to_le_bytes());
    out.push(FLUSHED_BEFORE | DATA_DIGESTS);
    out.extend_from_slice(&flushed_before.to_le_bytes());
    out.extend_from_slice(&(changes.len() as u32).to_le_bytes());
    for (space, key, value) in changes.iter() {
        out.push(space as u8);
        out.push(u8::from(value.is_some()));
        out.extend_from_slice(&(key.len() as u32).to_le_bytes());
        out.extend_from_slice(key);
        if let Some(value) = value {
            out.extend_from_slice(&(value.len() as u32).to_le_bytes());
            out.extend_from_slice(value);
        }
    }
    out.extend_from_slice(&(deferred.len() as u32).to_le_bytes());
    for (offset, data) in deferred {
        out.extend_from_slice(&offset.to_le_bytes());
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
        out.extend_from_slice(data);
    }
    out.extend_from_slice(&(digests.len() as u32).to_le_bytes());
    for digest in digests {
        out.extend_from_slice(&digest.offset_bytes.to_le_bytes());
        out.extend_from_slice(&digest.length_bytes.to_le_bytes());
        out.extend_from_slice(&digest.hash.to_le_bytes());
    }
    let payload_bytes = (out.len() - HEADER_BYTES) as u32;
    let crc = crc32c::crc32c(&out[HEADER_BYTES..]);
    out[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    out[4..8].copy_from_slice(&payload_bytes.to_le_bytes());
    out[8..12].copy_from_slice(&crc.to_le_bytes());
}

/// The valid records at the start of `bytes`, each starting at a multiple of `align_bytes`,
/// in order, and the offset where they end (rounded up to `align_bytes`).
pub(crate) fn decode_records(bytes: &[u8], align_bytes: usize) -> (Vec<Record>, usize) {
    let align_bytes = align_bytes.max(1);
    let mut records: Vec<Record> = Vec::new();
    let mut at = 0usize;
    while let Some(header) = bytes.get(at..at + HEADER_BYTES) {
        let word =
            |i: usize| u32::from_le_bytes([header[i], header[i + 1], header[i + 2], header[i + 3]]);
        if word(0) != MAGIC {
            break;
        }
        let length = word(4) as usize;
        let Some(payload) = bytes.get(at + HEADER_BYTES..at + HEADER_BYTES + length) else {
            break;
        };
        if crc32c::crc32c(payload) != word(8) {
            break;
        }
        let Some(record) = decode_payload(payload) else {
            break;
        };
        if let Some(last) = records.last() {
            if record.generation != last.generation || record.sequence != last.sequence + 1 {
                break;
            }
        }
        records.push(record);
        at = (at + HEADER_BYTES + length).div_ceil(align_bytes) * align_bytes;
    }
    (records, at)
}

/// A record after the valid ones (which end at `end`, the last being `last`) that proves the
/// log was damaged after it was durable rather than cut short by a crash: one of `last`'s
/// generation, with a later sequence, that says the records up to and including the missing
/// one had been flushed when it was written (`flushed_before` beyond it). The log can end
/// at a bad record for two reasons:
/// - a crash while records were unflushed: the device kept some writes and not others, so a
///   record can be missing while a later one (written before any flush covered the missing
///   one) is intact. None of them was acknowledged (a batch is answered after its flush and
///   every earlier batch's), and every such later record has `flushed_before` at or below
///   the missing sequence, since nothing had flushed it;
/// - damage at rest (a flipped bit, a bad sector) of a record that was flushed, and maybe
///   acknowledged. Any record written after that flush says so.
///
/// A record whose failed batch was taken back (`Wal::truncate_blocking`) is a missing record
/// of the first kind: its flush failed, so no record says it was flushed. Old records of
/// this generation behind the end were taken back with it or written before a reset (a new
/// generation), so they never continue the sequence with such a claim.
fn durable_record_after_end(
    bytes: &[u8],
    align_bytes: usize,
    end: usize,
    last: &Record,
) -> Option<(usize, Record)> {
    let missing = last.sequence + 1;
    intact_records_from(bytes, align_bytes, end + align_bytes.max(1)).find(|(_, record)| {
        record.generation == last.generation
            && record.sequence > missing
            && record.flushed_before > missing
    })
}

/// An intact record anywhere in the region that says the records before a sequence beyond
/// `first` had been flushed (so `first`, which the database lacks, was durable), with its
/// log offset: what proves a log whose first record is bad was damaged, not cut by a crash.
fn record_claiming_flushed(
    bytes: &[u8],
    align_bytes: usize,
    first: u64,
) -> Option<(usize, Record)> {
    intact_records_from(bytes, align_bytes, 0)
        .find(|(_, record)| record.sequence > first && record.flushed_before > first)
}

/// The highest sequence of any intact record in the region.
fn sequence_max(bytes: &[u8], align_bytes: usize) -> u64 {
    intact_records_from(bytes, align_bytes, 0)
        .map(|(_, record)| record.sequence)
        .max()
        .unwrap_or(0)
}

/// Every intact record (magic, length and checksum right) at an aligned offset from `at`
/// on, whatever its generation or sequence, with its offset.
fn intact_records_from(
    bytes: &[u8],
    align_bytes: usize,
    at: usize,
) -> impl Iterator<Item = (usize, Record)> + '_ {
    let align_bytes = align_bytes.max(1);
    (at..bytes.len().saturating_sub(HEADER_BYTES - 1))
        .step_by(align_bytes)
        .filter_map(move |at| {
            let header = bytes.get(at..at + HEADER_BYTES)?;
            let word = |i: usize| {
                u32::from_le_bytes([header[i], header[i + 1], header[i + 2], header[i + 3]])
            };
            if word(0) != MAGIC {
                return None;
            }
            let payload = bytes.get(at + HEADER_BYTES..at + HEADER_BYTES + word(4) as usize)?;
            if crc32c::crc32c(payload) != word(8) {
                return None;
            }
            decode_payload(payload).map(|record| (at, record))
        })
}

/// Reads little-endian fields off the front of a slice.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, count: usize) -> Option<&'a [u8]> {
        if self.0.len() < count {
            return None;
        }
        let (head, rest) = self.0.split_at(count);
        self.0 = rest;
        Some(head)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Option<u64> {
        let mut word = [0u8; 8];
        word.copy_from_slice(self.take(8)?);
        Some(u64::from_le_bytes(word))
    }

    fn bytes(&mut self) -> Option<Vec<u8>> {
        let length = self.u32()? as usize;
        self.take(length).map(<[u8]>::to_vec)
    }
}

fn decode_payload(payload: &[u8]) -> Option<Record> {
    let mut reader = Reader(payload);
    let generation = reader.u64()?;
    let sequence = reader.u64()?;
    let flags = reader.u8()?;
    let flushed_before = match flags & !DATA_DIGESTS {
        0 => 0,
        DEVICE_FLUSHED => sequence,
        FLUSHED_BEFORE => reader.u64()?,
        _ => return None,
    };
    let count = reader.u32()? as usize;
    let mut changes = Vec::with_capacity(count.min(payload.len()));
    for _ in 0..count {
        let space = Space::from_u8(reader.u8()?)?;
        let insert = match reader.u8()? {
            0 => false,
            1 => true,
            _ => return None,
        };
        let key = reader.bytes()?;
        let value = if insert { Some(reader.bytes()?) } else { None };
        changes.push((space, key, value));
    }
    let count = reader.u32()? as usize;
    let mut deferred = Vec::with_capacity(count.min(payload.len()));
    for _ in 0..count {
        let offset = reader.u64()?;
        deferred.push((offset, reader.bytes()?));
    }
    let digests = if flags & DATA_DIGESTS == 0 {
        None
    } else {
        let count = reader.u32()? as usize;
        let mut digests = Vec::with_capacity(count.min(payload.len() / 24));
        for _ in 0..count {
            digests.push(DataDigest {
                offset_bytes: reader.u64()?,
                length_bytes: reader.u64()?,
                hash: reader.u64()?,
            });
        }
        Some(digests)
    };
    if !reader.0.is_empty() {
        return None;
    }
    Some(Record {
        generation,
        sequence,
        flushed_before,
        changes,
        deferred,
        digests,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn batch(changes: &[Change]) -> MetaBatch {
        let mut batch = MetaBatch::default();
        for (space, key, value) in changes {
            match value {
                Some(value) => batch.insert(*space, key.clone(), value.clone()),
                None => batch.remove(*space, key.clone()),
            }
        }
        batch
    }

    fn space() -> impl Strategy<Value = Space> {
        prop_oneof![Just(Space::Objects), Just(Space::Omap), Just(Space::Super)]
    }

    proptest! {
        /// Records read back as written, and any cut or flipped byte ends the log at the
        /// record it touches, never earlier and never with a damaged record.
        #[test]
        fn records_round_trip_and_damage_ends_the_log(
            records in prop::collection::vec(
                (
                    prop::collection::btree_map(
                        (space(), prop::collection::vec(any::<u8>(), 0..12)),
                        prop::option::of(prop::collection::vec(any::<u8>(), 0..20)),
                        0..5,
                    ),
                    prop::collection::vec((any::<u64>(), prop::collection::vec(any::<u8>(), 0..16)), 0..3),
                    any::<u64>(),
                    prop::collection::vec(any::<(u64, u64, u64)>(), 0..3),
                ),
                1..6,
            ),
            damage_at in any::<prop::sample::Index>(),
            cut in any::<bool>(),
        ) {
            let mut log = Vec::new();
            let mut starts = Vec::new();
            let mut expected = Vec::new();
            let mut out = Vec::new();
            for (number, (changes, deferred, flushed_before, digests)) in records.iter().enumerate() {
                let digests: Vec<DataDigest> = digests
                    .iter()
                    .map(|&(offset_bytes, length_bytes, hash)| DataDigest { offset_bytes, length_bytes, hash })
                    .collect();
                let digest_refs: Vec<_> = digests.iter().collect();
                let changes: Vec<_> = changes
                    .iter()
                    .map(|((space, key), value)| (*space, key.clone(), value.clone()))
                    .collect();
                let deferred_refs: Vec<_> = deferred.iter().collect();
                encode_record(&mut out, 3, 7 + number as u64, *flushed_before, &batch(&changes), &deferred_refs, &digest_refs);
                starts.push(log.len());
                log.extend_from_slice(&out);
                expected.push(Record {
                    generation: 3,
                    sequence: 7 + number as u64,
                    flushed_before: *flushed_before,
                    changes,
                    deferred: deferred.clone(),
                    digests: Some(digests),
                });
            }
            prop_assert_eq!(&decode_records(&log, 1).0, &expected);
            let at = damage_at.index(log.len());
            let damaged_record = starts.iter().rposition(|&start| start <= at).unwrap_or(0);
            if cut {
                log.truncate(at);
            } else {
                log[at] ^= 0x40;
            }
            let (decoded, end) = decode_records(&log, 1);
            prop_assert_eq!(end, starts.get(damaged_record).copied().unwrap_or(log.len()));
            prop_assert_eq!(decoded.len(), damaged_record);
            prop_assert_eq!(&decoded[..], &expected[..damaged_record]);
        }
    }

    /// Appends a payload with its header (magic, length, crc32c) to `log`.
    fn frame(log: &mut Vec<u8>, payload: &[u8]) {
        log.extend_from_slice(&MAGIC.to_le_bytes());
        log.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        log.extend_from_slice(&crc32c::crc32c(payload).to_le_bytes());
        log.extend_from_slice(payload);
    }

    /// Format 4 wrote a flags byte only (1: flushed after every earlier record), format 5 no
    /// digests; a mount of such a store after a crash still reads their records (without
    /// digests: their data is checked against the onodes' crc32c).
    #[test]
    fn format_4_records_still_read() {
        let mut changes = MetaBatch::default();
        changes.insert(Space::Objects, b"key".to_vec(), b"value".to_vec());
        let mut log = Vec::new();
        let mut out = Vec::new();
        for (sequence, old_flags) in [(9u64, 0u8), (10, DEVICE_FLUSHED), (11, 0)] {
            encode_record(&mut out, 4, sequence, 0, &changes, &[], &[]);
            // Format 4's layout: the flags byte without the u64 after it.
            let flags_at = HEADER_BYTES + 16;
            let mut payload = out[HEADER_BYTES..flags_at].to_vec();
            payload.push(old_flags);
            // And without format 6's digest count at the end.
            payload.extend_from_slice(&out[flags_at + 9..out.len() - 4]);
            frame(&mut log, &payload);
        }
        let (decoded, end) = decode_records(&log, 1);
        assert_eq!(end, log.len());
        let flushed: Vec<(u64, u64)> = decoded
            .iter()
            .map(|record| (record.sequence, record.flushed_before))
            .collect();
        assert_eq!(flushed, vec![(9, 0), (10, 10), (11, 0)]);
        assert_eq!(decoded[2].changes, decoded[0].changes);
        assert!(decoded.iter().all(|record| record.digests.is_none()));
        // Format 5: flushed-before, no digests.
        encode_record(&mut out, 4, 12, 3, &changes, &[], &[]);
        let flags_at = HEADER_BYTES + 16;
        let mut payload = out[HEADER_BYTES..out.len() - 4].to_vec();
        payload[flags_at - HEADER_BYTES] = FLUSHED_BEFORE;
        frame(&mut log, &payload);
        let (decoded, end) = decode_records(&log, 1);
        assert_eq!(end, log.len());
        assert_eq!(decoded[3].flushed_before, 3);
        assert_eq!(decoded[3].changes, decoded[0].changes);
        assert_eq!(decoded[3].digests, None);
    }

    #[test]
    fn a_gap_in_the_sequence_ends_the_log() {
        let mut log = Vec::new();
        let mut out = Vec::new();
        let empty = MetaBatch::default();
        for sequence in [1, 2, 4] {
            encode_record(&mut out, 5, sequence, 0, &empty, &[], &[]);
            log.extend_from_slice(&out);
        }
        let (decoded, _) = decode_records(&log, 1);
        assert_eq!(decoded.len(), 2);
        assert_eq!(decoded[1].sequence, 2);
    }

    #[test]
    fn another_generation_ends_the_log() {
        let mut log = Vec::new();
        let mut out = Vec::new();
        let empty = MetaBatch::default();
        for (generation, sequence) in [(5, 1), (5, 2), (6, 3)] {
            encode_record(&mut out, generation, sequence, 0, &empty, &[], &[]);
            log.extend_from_slice(&out);
        }
        let (decoded, _) = decode_records(&log, 1);
        assert_eq!(decoded.len(), 2);
        assert_eq!(decoded[1].generation, 5);
    }

    fn memory_device() -> Arc<dyn Device> {
        Arc::new(device::MemoryDevice::with_block_size("log", 8 << 20, 4096).unwrap())
    }

    /// After a reset the old records never read back, before or after new ones are written
    /// over them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_recycled_log_never_reads_old_records() {
        let device = memory_device();
        let runtime = tokio::runtime::Handle::current();
        let (start, region) = (1 << 20, 4 << 20);
        let (mut wal, _) = Wal::open(Arc::clone(&device), start, region).await.unwrap();
        let mut out = Vec::new();
        let big = (0u64, vec![7u8; 3000]);
        for sequence in 1..=5 {
            encode_record(
                &mut out,
                wal.generation,
                sequence,
                0,
                &MetaBatch::default(),
                &[&big],
                &[],
            );
            assert!(wal.fits(out.len()));
            let r = runtime.clone();
            wal = tokio::task::spawn_blocking(move || {
                wal.append_blocking(&out, &r).unwrap();
                wal
            })
            .await
            .unwrap();
            out = Vec::new();
        }
        assert_eq!(wal.len_bytes(), 5 * 4096, "one block per record");
        wal.next_sequence = 6;
        let old_generation = wal.generation;
        wal.reset().await.unwrap();
        assert_ne!(wal.generation, old_generation);
        drop(wal);
        let (mut wal, records) = Wal::open(Arc::clone(&device), start, region).await.unwrap();
        assert!(records.is_empty(), "old records after a reset: {records:?}");
        // A small new record over the first old one: the old ones behind it stay unread,
        // even the one whose sequence would follow.
        encode_record(
            &mut out,
            wal.generation,
            6,
            0,
            &MetaBatch::default(),
            &[],
            &[],
        );
        let r = runtime.clone();
        let wal_after = tokio::task::spawn_blocking(move || {
            wal.append_blocking(&out, &r).unwrap();
            wal
        })
        .await
        .unwrap();
        let small_end = wal_after.len_bytes();
        drop(wal_after);
        let (wal, records) = Wal::open(Arc::clone(&device), start, region).await.unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].sequence, 6);
        assert_eq!(wal.len_bytes(), small_end);
        assert_eq!(wal.next_sequence, 7);
        // Nothing outside the region was written.
        let mut before = vec![1u8; start as usize];
        device.read_at(0, &mut before).await.unwrap();
        assert!(before.iter().all(|&b| b == 0));
    }

    /// Writes records `1..=4` of one generation, record `s` saying the records before
    /// `flushed_before(s)` were flushed, then flips a byte inside record 2.
    async fn four_records_the_second_damaged(flushed_before: fn(u64) -> u64) -> Arc<dyn Device> {
        let device = memory_device();
        let runtime = tokio::runtime::Handle::current();
        let (start, region) = (1 << 20, 1 << 20);
        let (mut wal, _) = Wal::open(Arc::clone(&device), start, region).await.unwrap();
        let change = batch(&[(Space::Objects, b"k".to_vec(), Some(b"v".to_vec()))]);
        for sequence in 1..=4 {
            let mut out = Vec::new();
            encode_record(
                &mut out,
                wal.generation,
                sequence,
                flushed_before(sequence),
                &change,
                &[],
                &[],
            );
            let r = runtime.clone();
            wal = tokio::task::spawn_blocking(move || {
                wal.append_blocking(&out, &r).unwrap();
                wal
            })
            .await
            .unwrap();
        }
        let mut block = vec![0u8; 4096];
        device.read_at(start + 4096, &mut block).await.unwrap();
        block[HEADER_BYTES + 20] ^= 0x10;
        device.write_at(start + 4096, &block).await.unwrap();
        device
    }

    /// A record that does not read back, followed by one that says it had been flushed
    /// (so it was durable, and maybe acknowledged), is damage, not a torn tail: the open
    /// fails and names it, where it used to end the log there and lose records 2 to 4 for
    /// good (a mount empties the log after replaying it).
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_damaged_record_that_a_later_one_says_was_flushed_refuses_the_open() {
        // Each record written after the previous one's flush, as one write at a time does.
        let device = four_records_the_second_damaged(|sequence| sequence).await;
        let error = Wal::open(Arc::clone(&device), 1 << 20, 1 << 20)
            .await
            .err()
            .expect("a damaged log must not open");
        let text = error.to_string();
        assert!(matches!(error, StoreError::Mount(_)), "{text}");
        assert!(text.contains("sequence 2 at log offset 4096"), "{text}");
        assert!(text.contains("sequence 3"), "{text}");
    }

    /// The same missing record when nothing after it says it was flushed is what a crash
    /// leaves when the device kept a later unflushed write and not an earlier one: none of
    /// them was acknowledged, and the log ends before it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_missing_record_that_no_later_one_says_was_flushed_ends_the_log() {
        let device = four_records_the_second_damaged(|_| 1).await;
        let (wal, records) = Wal::open(Arc::clone(&device), 1 << 20, 1 << 20)
            .await
            .expect("a torn tail opens");
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].sequence, 1);
        assert_eq!(wal.next_sequence, 2);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn append_truncate_reset_and_reopen() {
        let device = memory_device();
        let runtime = tokio::runtime::Handle::current();
        let (start, region) = (0, 64 << 10);
        let (wal, records) = Wal::open(Arc::clone(&device), start, region).await.unwrap();
        assert!(records.is_empty());
        let data = (4096u64, vec![9u8; 8]);
        let mut out = Vec::new();
        encode_record(
            &mut out,
            wal.generation,
            1,
            0,
            &batch(&[(Space::Objects, b"k".to_vec(), Some(b"v".to_vec()))]),
            &[&data],
            &[],
        );
        let mut second = Vec::new();
        encode_record(
            &mut second,
            wal.generation,
            2,
            0,
            &MetaBatch::default(),
            &[],
            &[],
        );
        let r = runtime.clone();
        let wal = tokio::task::spawn_blocking(move || {
            let mut wal = wal;
            wal.append_blocking(&out, &r).unwrap();
            let first_end = wal.len_bytes();
            wal.append_blocking(&second, &r).unwrap();
            // The second record's batch failed: taken back.
            wal.truncate_blocking(first_end, &r).unwrap();
            // A record that does not fit the region is refused, not written.
            assert!(!wal.fits(70 << 10));
            assert!(wal.append_blocking(&vec![0u8; 70 << 10], &r).is_err());
            wal
        })
        .await
        .unwrap();
        assert_eq!(wal.len_bytes(), 4096);
        drop(wal);
        let (mut wal, records) = Wal::open(Arc::clone(&device), start, region).await.unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].deferred, vec![data]);
        wal.reset().await.unwrap();
        assert_eq!(wal.len_bytes(), 0);
        drop(wal);
        let (_, records) = Wal::open(device, start, region).await.unwrap();
        assert!(records.is_empty());
    }

    #[test]
    fn region_is_a_sixteenth_within_bounds() {
        assert_eq!(region_bytes_for(8 << 20, 4096), 1 << 20);
        assert_eq!(region_bytes_for(256 << 20, 4096), 16 << 20);
        assert_eq!(region_bytes_for(100 << 30, 4096), 64 << 20);
        assert_eq!(region_bytes_for((64 << 20) + 512, 512) % 512, 0);
    }
}
