//! Mounting after a crash: the write-ahead log's records replayed into the database and onto
//! the device (see [`replay`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use device::Device;

use crate::error::{Result, StoreError};
use crate::meta::{self, Layout, Meta};
use crate::onode::{first_bad_block, Onode};
use crate::wal::Wal;

/// Opens the write-ahead log and brings the database and the device up to its last valid
/// record, in log order:
/// - records the database already took only give back their deferred overwrites;
/// - every other record's metadata changes are applied again;
/// - every kept record's deferred overwrites are written again (a dropped record made none);
/// - from the largest `flushed_before` of the records on (the records before it, and their
///   data, are known to be on the device), the extents
///   that the record's batch wrote are read and checked against the record's digests: the
///   record and the data of a batch are made durable by one flush after both, and several
///   batches' flushes run at once, so after a crash a record can be on the device while its
///   data is not. Such a record was never acknowledged (a batch is answered after its flush
///   and every earlier batch's), nor was any later one: the log ends there. The data of a
///   checked record cannot have been overwritten since: an extent is reused only after the
///   batch freeing it was flushed and said so to every record sealed after (`commit`).
///
/// Then flushes the device, persists the database and empties the log. Idempotent: a crash
/// during it replays again.
///
/// A log damaged after it was durable fails the mount ([`StoreError::Mount`]), unless
/// `salvage`: then the records before the damage are replayed, and the reason is kept in the
/// database ([`Store::log_damage`]) until [`Store::clear_log_damage`], so a crash before the
/// owner acted on it cannot hide it.
pub(crate) async fn replay(
    device: &Arc<dyn Device>,
    meta: &Meta,
    layout: &Layout,
    salvage: bool,
) -> Result<Wal> {
    let checksum_block_bytes = layout.checksum_block_bytes;
    let applied = meta.wal_sequence()?;
    let (mut wal, records, damage) = Wal::open_checked(
        Arc::clone(device),
        layout.device_size_bytes,
        layout.log_bytes,
        Some(applied.map_or(0, |sequence| sequence + 1)),
    )
    .await?;
    if let Some(why) = &damage {
        if !salvage {
            return Err(StoreError::Mount(why.clone()));
        }
        tracing::error!(
            device = device.name(),
            "{why}; mounting the {} records before the damage: this store lacks acknowledged writes until its owner restores them",
            records.len()
        );
    }
    wal.next_sequence = wal
        .next_sequence
        .max(applied.map_or(0, |sequence| sequence + 1));
    if records.is_empty() && damage.is_none() {
        return Ok(wal);
    }
    let flushed_before = records
        .iter()
        .map(|record| record.flushed_before)
        .max()
        .unwrap_or(0);
    let mut rewritten = 0usize;
    let mut reapplied = 0usize;
    let mut dropped = 0usize;
    let total = records.len();
    for (index, record) in records.into_iter().enumerate() {
        let unflushed = record.sequence >= flushed_before;
        // A record of the older format (no digests) carried copies of data written to fresh
        // extents, to be written again before its data is checked.
        if unflushed && record.digests.is_none() {
            for (offset_bytes, data) in &record.deferred {
                device.write_at(*offset_bytes, data).await?;
                rewritten += 1;
            }
        }
        let taken = applied.is_some_and(|sequence| record.sequence <= sequence);
        let intact = match (&record.digests, unflushed) {
            _ if taken => true,
            (_, false) => true,
            (Some(digests), true) => data_matches(device, digests, checksum_block_bytes).await?,
            (None, true) => data_is_intact(device, meta, &record, checksum_block_bytes).await?,
        };
        if !intact {
            dropped = total - index;
            break;
        }
        if record.digests.is_some() {
            // Deferred overwrites, in log order, of every record kept (they were made in place
            // after the record's flush, and are durable only once a later flush or checkpoint
            // covered them); never those of a record that is dropped, which were not made.
            for (offset_bytes, data) in &record.deferred {
                device.write_at(*offset_bytes, data).await?;
                rewritten += 1;
            }
        }
        if taken {
            continue;
        }
        let mut changes = meta::MetaBatch::default();
        for (space, key, value) in record.changes {
            match value {
                Some(value) => changes.insert(space, key, value),
                None => changes.remove(space, key),
            }
        }
        changes.commit(meta)?;
        reapplied += 1;
    }
    if dropped > 0 {
        tracing::warn!(
            dropped,
            "metadata log records whose data never reached the device were dropped (never acknowledged)"
        );
    }
    tracing::info!(rewritten, reapplied, "replayed the metadata log");
    if let Some(why) = damage {
        // Kept until the owner clears it; and every record left in the region counts as
        // applied from now on, so its claims never make a later mount see damage again.
        let last = wal.sequence_max_in_region.max(wal.next_sequence);
        wal.next_sequence = last + 1;
        let mut note = meta::MetaBatch::default();
        note.insert(
            meta::Space::Super,
            meta::LOG_DAMAGE_KEY.to_vec(),
            why.into_bytes(),
        );
        note.insert(
            meta::Space::Super,
            meta::WAL_SEQUENCE_KEY.to_vec(),
            last.to_le_bytes().to_vec(),
        );
        note.commit(meta)?;
    }
    device.flush().await?;
    meta.persist()?;
    wal.reset().await?;
    Ok(wal)
}

/// Whether the device holds what a record's batch wrote: every extent's digest matches.
async fn data_matches(
    device: &Arc<dyn Device>,
    digests: &[crate::wal::DataDigest],
    block_bytes: u64,
) -> Result<bool> {
    for digest in digests {
        let data = read_for_replay(device, digest.offset_bytes, digest.length_bytes).await?;
        if crate::wal::digest(&data, block_bytes as usize) != digest.hash {
            return Ok(false);
        }
    }
    Ok(true)
}

/// `length_bytes` read at `offset_bytes` for a mount's check of a record's data. A failed
/// read fails the mount: it says nothing about whether the data reached the device (an
/// unwritten extent reads back as its old contents, not as an error), and taking it for
/// "never written" dropped the record and every later one, acknowledged or not, for good
/// (the log is emptied after a replay).
async fn read_for_replay(
    device: &Arc<dyn Device>,
    offset_bytes: u64,
    length_bytes: u64,
) -> Result<Vec<u8>> {
    let mut data = vec![0u8; length_bytes as usize];
    device
        .read_at(offset_bytes, &mut data)
        .await
        .map_err(|error| {
            StoreError::Mount(format!(
                "reading {length_bytes} bytes at device offset {offset_bytes} of {}, to check the data of a metadata log record, failed: {error}; the log was left as it is (retry once the device reads, or restore this store's objects from another replica)",
                device.name()
            ))
        })?;
    Ok(data)
}

/// For a record of format 5 or older (no digests): whether every extent that its onodes
/// reference and the database's onodes (its state before the record) do not is on the
/// device with its checksums. A crc32c does not tell every old content from the new one
/// (see `wal`), hence the digests since format 6.
async fn data_is_intact(
    device: &Arc<dyn Device>,
    meta: &Meta,
    record: &crate::wal::Record,
    checksum_block_bytes: u64,
) -> Result<bool> {
    for (space, key, value) in &record.changes {
        let (meta::Space::Objects, Some(value)) = (space, value) else {
            continue;
        };
        let onode = Onode::decode(value, checksum_block_bytes)?;
        let before = match meta.object(key)? {
            Some(bytes) => Onode::decode(&bytes, checksum_block_bytes)?,
            None => Onode::default(),
        };
        // Device start -> end of the extents the object had: a new extent inside one of them
        // is old data (an extent split by a partial overwrite), checked when it was written.
        let known: BTreeMap<u64, u64> = before
            .extents
            .values()
            .map(|extent| {
                (
                    extent.device_offset_bytes,
                    extent.device_offset_bytes + extent.length_bytes,
                )
            })
            .collect();
        for extent in onode.extents.values() {
            let start = extent.device_offset_bytes;
            let old = known
                .range(..=start)
                .next_back()
                .is_some_and(|(_, &end)| start + extent.length_bytes <= end);
            if old {
                continue;
            }
            let data =
                read_for_replay(device, extent.device_offset_bytes, extent.length_bytes).await?;
            if first_bad_block(&data, &extent.crcs, checksum_block_bytes).is_some() {
                return Ok(false);
            }
        }
    }
    Ok(true)
}
