//! The metadata write-ahead log: one record per group commit, appended and fdatasync'd before
//! the batch is acknowledged; the metadata database (fjall) then takes the same changes
//! without a sync of its own.
//!
//! Why a log of our own in front of the database: a durable fjall commit is a journal append,
//! an fdatasync and memtable inserts, but with deferred data in it (4 KiB values) it cost
//! about 210 µs per batch in the cluster and 47 µs of CPU per replica-1 write, against 35
//! without deferral; the log is one `pwrite` and one `fdatasync` of bytes already encoded,
//! and deferred data never enters the database's memtables, flushes and compactions.
//!
//! File: records back to back from offset 0, each `u32 magic | u32 payload length |
//! u32 crc32c(payload) | payload`; payload: `u64 generation | u64 sequence | u8 flags |
//! u32 changes | per change: u8 keyspace, u8 kind (0 remove, 1 insert), u32 key length, key,
//! [u32 value length, value] | u32 deferred | per deferred write: u64 device offset,
//! u32 length, data`. Reading stops at the first record that is short, has a bad magic or
//! checksum, belongs to another generation than the first record or breaks the sequence: a
//! torn tail is never applied. Flag 1 (`DEVICE_FLUSHED`): the device was flushed before this
//! record was written, so the deferred data of every earlier record is on the device.
//!
//! ## The file is recycled, not truncated
//! The fdatasync of an append must also commit the file's new size to the filesystem's
//! journal (ext4: a jbd2 commit, which waits for the other dirty data that commit orders); the
//! fdatasync of bytes written over already written bytes is only a flush of the disk's cache.
//! On this machine's ext4 the latter took 14 µs at the median (`fio --fdatasync=1` on a laid
//! out file) while the log's appends took 85-105 µs. So, as RocksDB's `recycle_log_file_num`
//! does, the file keeps its length: it grows by zeroed chunks when a record would pass its
//! end (one journal commit per `GROW_BYTES`), and emptying it rewinds the write position and
//! zeroes the first header, durably, instead of truncating. Bytes after the last valid record
//! are then old records or parts of them; they never read as part of the log:
//! - a new generation starts at offset 0 with a fresh random generation id, and every record
//!   must carry the first record's id, so an old record (or a record-shaped piece of old
//!   deferred data, which clients chose) is never taken for a new one;
//! - and the sequence must continue by one, which old records of the same generation (left
//!   after a failed batch's record was taken back) cannot do once the store is poisoned.
//!
//! Recovery (at mount, see `replay`): metadata changes of the records newer than the sequence
//! the database holds are applied again; deferred data of the records after the last
//! `DEVICE_FLUSHED` one is written again; then the device is flushed, the database persisted
//! and the log emptied. A checkpoint (database persisted, log emptied) also happens when the
//! log passes its size limit at a batch that flushed the device.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{Result, StoreError};
use crate::meta::{MetaBatch, Space};

const MAGIC: u32 = 0x4c41_5753; // "SWAL" little endian
const HEADER_BYTES: usize = 12;
/// The device was flushed before this record was written.
pub(crate) const DEVICE_FLUSHED: u8 = 1;

/// One change of a record: (keyspace, key, new value or `None` for a removal).
pub(crate) type Change = (Space, Vec<u8>, Option<Vec<u8>>);

/// The file grows by this many zeroed bytes when a record would pass its end.
const GROW_BYTES: u64 = 4 << 20;

/// One decoded record.
#[derive(Debug, PartialEq)]
pub(crate) struct Record {
    pub generation: u64,
    pub sequence: u64,
    pub flags: u8,
    pub changes: Vec<Change>,
    pub deferred: Vec<(u64, Vec<u8>)>,
}

/// The open log file.
pub(crate) struct Wal {
    file: File,
    path: PathBuf,
    /// End of the last valid record: where the next one goes.
    end_bytes: u64,
    /// The file's length: every byte before it was written (zeros or old records), so
    /// writing over it changes no filesystem metadata.
    file_bytes: u64,
    /// Generation id every record written until the next reset carries.
    pub generation: u64,
    /// Sequence of the next record.
    pub next_sequence: u64,
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

impl Wal {
    /// Opens (creating if missing) the log at `path` and reads its valid records.
    pub fn open(path: &Path) -> Result<(Wal, Vec<Record>)> {
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| StoreError::metadata(format!("{}: {e}", path.display())))?;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut file, &mut bytes)
            .map_err(|e| StoreError::metadata(format!("{}: {e}", path.display())))?;
        let (records, end_bytes) = decode_records(&bytes);
        Ok((
            Wal {
                file,
                path: path.to_path_buf(),
                end_bytes: end_bytes as u64,
                file_bytes: bytes.len() as u64,
                generation: records
                    .first()
                    .map_or_else(new_generation, |record| record.generation),
                next_sequence: records.last().map_or(0, |record| record.sequence + 1),
            },
            records,
        ))
    }

    /// Bytes of valid records in the log.
    pub fn len_bytes(&self) -> u64 {
        self.end_bytes
    }

    /// Appends an encoded record (see [`encode_record`]); with `sync`, it is durable on return.
    pub fn append(&mut self, record: &[u8], sync: bool) -> Result<()> {
        let end_bytes = self.end_bytes + record.len() as u64;
        if end_bytes > self.file_bytes {
            self.grow(end_bytes)?;
        }
        self.file
            .write_all_at(record, self.end_bytes)
            .map_err(|e| self.error(e))?;
        self.end_bytes = end_bytes;
        if sync {
            self.file.sync_data().map_err(|e| self.error(e))?;
        }
        Ok(())
    }

    /// Extends the file with zeros to a multiple of `GROW_BYTES` covering `end_bytes` (made
    /// durable by the next sync, with the record that needed it).
    fn grow(&mut self, end_bytes: u64) -> Result<()> {
        let target_bytes = end_bytes.div_ceil(GROW_BYTES) * GROW_BYTES;
        let zeros = vec![0u8; 1 << 20];
        while self.file_bytes < target_bytes {
            let length = (target_bytes - self.file_bytes).min(zeros.len() as u64) as usize;
            self.file
                .write_all_at(&zeros[..length], self.file_bytes)
                .map_err(|e| self.error(e))?;
            self.file_bytes += length as u64;
        }
        Ok(())
    }

    /// Cuts the log back to `end_bytes` (the length before a record whose batch failed),
    /// durably, so a mount does not apply that record: its header is zeroed.
    pub fn truncate(&mut self, end_bytes: u64) -> Result<()> {
        self.invalidate_at(end_bytes)?;
        self.end_bytes = end_bytes;
        Ok(())
    }

    /// Empties the log, durably, and starts a new generation. The caller made everything it
    /// holds durable elsewhere.
    pub fn reset(&mut self) -> Result<()> {
        self.invalidate_at(0)?;
        self.end_bytes = 0;
        self.generation = new_generation();
        Ok(())
    }

    /// Zeroes the record header at `offset_bytes` (if the file reaches it) and syncs.
    fn invalidate_at(&mut self, offset_bytes: u64) -> Result<()> {
        if offset_bytes < self.file_bytes {
            let length = (self.file_bytes - offset_bytes).min(HEADER_BYTES as u64) as usize;
            self.file
                .write_all_at(&[0u8; HEADER_BYTES][..length], offset_bytes)
                .map_err(|e| self.error(e))?;
        }
        self.file.sync_data().map_err(|e| self.error(e))
    }

    /// Bytes the file takes (for the metadata accounting).
    #[cfg(test)]
    pub fn file_bytes(&self) -> u64 {
        self.file_bytes
    }

    fn error(&self, error: std::io::Error) -> StoreError {
        StoreError::metadata(format!("{}: {error}", self.path.display()))
    }
}

/// Encodes one record into `out` (cleared first).
pub(crate) fn encode_record(
    out: &mut Vec<u8>,
    generation: u64,
    sequence: u64,
    flags: u8,
    changes: &MetaBatch,
    deferred: &[&(u64, Vec<u8>)],
) {
    out.clear();
    out.extend_from_slice(&[0u8; HEADER_BYTES]);
    out.extend_from_slice(&generation.to_le_bytes());
    out.extend_from_slice(&sequence.to_le_bytes());
    out.push(flags);
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
    let payload_bytes = (out.len() - HEADER_BYTES) as u32;
    let crc = crc32c::crc32c(&out[HEADER_BYTES..]);
    out[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    out[4..8].copy_from_slice(&payload_bytes.to_le_bytes());
    out[8..12].copy_from_slice(&crc.to_le_bytes());
}

/// The valid records at the start of `bytes`, in order, and the offset where they end.
pub(crate) fn decode_records(bytes: &[u8]) -> (Vec<Record>, usize) {
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
        at += HEADER_BYTES + length;
    }
    (records, at)
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
    if !reader.0.is_empty() {
        return None;
    }
    Some(Record {
        generation,
        sequence,
        flags,
        changes,
        deferred,
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
                    any::<bool>(),
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
            for (number, (changes, deferred, flushed)) in records.iter().enumerate() {
                let changes: Vec<_> = changes
                    .iter()
                    .map(|((space, key), value)| (*space, key.clone(), value.clone()))
                    .collect();
                let flags = if *flushed { DEVICE_FLUSHED } else { 0 };
                let deferred_refs: Vec<_> = deferred.iter().collect();
                encode_record(&mut out, 3, 7 + number as u64, flags, &batch(&changes), &deferred_refs);
                starts.push(log.len());
                log.extend_from_slice(&out);
                expected.push(Record {
                    generation: 3,
                    sequence: 7 + number as u64,
                    flags,
                    changes,
                    deferred: deferred.clone(),
                });
            }
            prop_assert_eq!(&decode_records(&log).0, &expected);
            let at = damage_at.index(log.len());
            let damaged_record = starts.iter().rposition(|&start| start <= at).unwrap_or(0);
            if cut {
                log.truncate(at);
            } else {
                log[at] ^= 0x40;
            }
            let (decoded, end) = decode_records(&log);
            prop_assert_eq!(end, starts.get(damaged_record).copied().unwrap_or(log.len()));
            prop_assert_eq!(decoded.len(), damaged_record);
            prop_assert_eq!(&decoded[..], &expected[..damaged_record]);
        }
    }

    #[test]
    fn a_gap_in_the_sequence_ends_the_log() {
        let mut log = Vec::new();
        let mut out = Vec::new();
        let empty = MetaBatch::default();
        for sequence in [1, 2, 4] {
            encode_record(&mut out, 5, sequence, 0, &empty, &[]);
            log.extend_from_slice(&out);
        }
        let (decoded, _) = decode_records(&log);
        assert_eq!(decoded.len(), 2);
        assert_eq!(decoded[1].sequence, 2);
    }

    #[test]
    fn another_generation_ends_the_log() {
        let mut log = Vec::new();
        let mut out = Vec::new();
        let empty = MetaBatch::default();
        for (generation, sequence) in [(5, 1), (5, 2), (6, 3)] {
            encode_record(&mut out, generation, sequence, 0, &empty, &[]);
            log.extend_from_slice(&out);
        }
        let (decoded, _) = decode_records(&log);
        assert_eq!(decoded.len(), 2);
        assert_eq!(decoded[1].generation, 5);
    }

    /// A reset keeps the file's bytes (so later syncs change no filesystem metadata) yet the
    /// old records never read back, before or after new ones are written over them.
    #[test]
    fn a_recycled_log_never_reads_old_records() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal");
        let (mut wal, _) = Wal::open(&path).unwrap();
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
            );
            wal.append(&out, true).unwrap();
        }
        wal.next_sequence = 6;
        let old_generation = wal.generation;
        let file_bytes = wal.file_bytes();
        assert_eq!(file_bytes, GROW_BYTES, "grown by one zeroed chunk");
        wal.reset().unwrap();
        assert_ne!(wal.generation, old_generation);
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            file_bytes,
            "not truncated"
        );
        drop(wal);
        let (mut wal, records) = Wal::open(&path).unwrap();
        assert!(records.is_empty(), "old records after a reset: {records:?}");
        // A small new record over the first old one: the old ones behind it stay unread,
        // even the one whose sequence would follow.
        encode_record(&mut out, wal.generation, 6, 0, &MetaBatch::default(), &[]);
        wal.append(&out, true).unwrap();
        let small_end = wal.len_bytes();
        drop(wal);
        let (wal, records) = Wal::open(&path).unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].sequence, 6);
        assert_eq!(wal.len_bytes(), small_end);
        assert_eq!(wal.next_sequence, 7);
    }

    #[test]
    fn append_reset_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal");
        let (mut wal, records) = Wal::open(&path).unwrap();
        assert!(records.is_empty());
        let mut out = Vec::new();
        let data = (4096u64, vec![9u8; 8]);
        encode_record(
            &mut out,
            wal.generation,
            1,
            0,
            &batch(&[(Space::Objects, b"k".to_vec(), Some(b"v".to_vec()))]),
            &[&data],
        );
        wal.append(&out, true).unwrap();
        assert_eq!(wal.len_bytes(), out.len() as u64);
        drop(wal);
        let (mut wal, records) = Wal::open(&path).unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].deferred, vec![data]);
        wal.reset().unwrap();
        assert_eq!(wal.len_bytes(), 0);
        drop(wal);
        let (_, records) = Wal::open(&path).unwrap();
        assert!(records.is_empty());
    }
}
