//! A key's plain index entry (a bucket without versioning): reading it, and changing it by
//! a guarded read-modify-write of its omap value that another gateway's change makes fail
//! and decide again.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use rados::{RadosError, WriteOp};

use super::{races_exhausted, Intent, Store, INDEX_RACE_RETRIES};
use crate::error::{GatewayError, Result};
use crate::layout::{self, BucketRecord, ObjectEntry, Piece};

/// The preconditions of a write (PutObject, CompleteMultipartUpload): `If-Match` with an
/// ETag (without quotes, or `*`) and `If-None-Match: *`, as S3 checks them.
#[derive(Clone, Debug, Default)]
pub struct WriteCondition {
    /// The current object's ETag must be this (`*`: any object must exist).
    pub if_match: Option<String>,
    /// No object may exist.
    pub if_none_match_any: bool,
}

impl WriteCondition {
    /// Checks the condition against the key's current object (`None`: none, or a delete
    /// marker): 412 when it fails, 404 for If-Match on a missing key (as S3 answers).
    pub fn check(&self, key: &str, current: Option<&ObjectEntry>) -> Result<()> {
        if self.if_none_match_any && current.is_some() {
            return Err(GatewayError::PreconditionFailed);
        }
        if let Some(wanted) = &self.if_match {
            match current {
                None => return Err(GatewayError::NoSuchKey(key.to_string())),
                Some(current) if wanted != "*" && *wanted != current.etag => {
                    return Err(GatewayError::PreconditionFailed)
                }
                Some(_) => {}
            }
        }
        Ok(())
    }
}

/// The preconditions of a delete (DeleteObject's `If-Match`, `x-amz-if-match-last-modified-time`
/// and `x-amz-if-match-size`; DeleteObjects' `ETag`, `LastModifiedTime` and `Size`), checked
/// against the version the delete would act on.
#[derive(Clone, Debug, Default)]
pub struct DeleteCondition {
    /// Its ETag must be this (without quotes; `*`: anything that exists).
    pub if_match: Option<String>,
    /// Its modification time must be this, in whole seconds since the epoch.
    pub mtime_s: Option<i64>,
    /// Its size must be this.
    pub size: Option<i64>,
}

impl DeleteCondition {
    /// Whether it tests anything.
    pub fn is_some(&self) -> bool {
        self.if_match.is_some() || self.mtime_s.is_some() || self.size.is_some()
    }

    /// Checks the condition against `found`, the version (a delete marker included) the
    /// delete acts on: 412 when it fails; a key or version that does not exist passes (a
    /// delete of nothing is no error, conditional or not, as in S3).
    pub fn check(&self, found: Option<&ObjectEntry>) -> Result<()> {
        let Some(found) = found else {
            return Ok(());
        };
        let etag_fails = self
            .if_match
            .as_deref()
            .is_some_and(|wanted| wanted != "*" && wanted.trim_matches('"') != found.etag);
        let mtime_fails = self
            .mtime_s
            .is_some_and(|wanted| wanted != (found.mtime_ns / 1_000_000_000) as i64);
        let size_fails = self.size.is_some_and(|wanted| wanted != found.size as i64);
        if etag_fails || mtime_fails || size_fails {
            return Err(GatewayError::PreconditionFailed);
        }
        Ok(())
    }
}

/// The stored bytes of an omap value (`None`: not set) read a moment ago, for a guarded
/// update to start from instead of reading it.
pub(crate) struct Prefetched(Option<Vec<u8>>);

/// What [`Store::update_omap_value`] does with one omap value, and what it then returns.
pub(crate) enum OmapChange<T> {
    /// Nothing; return `T`.
    Keep(T),
    /// Store this (encoded) value, then free these pieces.
    Set(Vec<u8>, Vec<Piece>, T),
    /// Remove the value, then free these pieces.
    Remove(Vec<Piece>, T),
}

/// What a change meant for a bucket without versioning did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unversioned {
    /// Done.
    Done,
    /// Nothing: the key has a version entry, so the bucket got versioning since the caller
    /// read it; the caller re-reads the bucket and makes the change as a versioned one.
    BucketVersioned,
}

impl Store {
    pub async fn entry_opt(&self, bucket: &BucketRecord, key: &str) -> Result<Option<ObjectEntry>> {
        self.index_entry(bucket, key, key.as_bytes().to_vec()).await
    }

    /// The entry stored under omap key `wanted` in `key`'s index shard (its plain entry or
    /// one of its versions); none when the shard or the omap key does not exist.
    pub(super) async fn index_entry(
        &self,
        bucket: &BucketRecord,
        key: &str,
        wanted: Vec<u8>,
    ) -> Result<Option<ObjectEntry>> {
        let raw = self.index_value(bucket, key, wanted).await?;
        raw.map(|v| layout::decode(&v)).transpose()
    }

    /// The stored bytes under omap key `wanted` in `key`'s index shard.
    pub(super) async fn index_value(
        &self,
        bucket: &BucketRecord,
        key: &str,
        wanted: Vec<u8>,
    ) -> Result<Option<Vec<u8>>> {
        let oid = layout::index_shard_object(&bucket.id, layout::shard_of(key, bucket.shards));
        let mut found = match self
            .index
            .omap_get_vals_by_keys(&oid, std::slice::from_ref(&wanted))
            .await
        {
            Ok(found) => found,
            Err(RadosError::NotFound(_)) => return Ok(None),
            Err(error) => return Err(error.into()),
        };
        Ok(found.remove(&wanted))
    }

    /// Read-modify-write of omap value `omap_key` of index-pool object `oid`, safe against
    /// other gateways: reads the stored bytes, lets `change` decide, and applies its change
    /// guarded by "the value still holds those bytes" ([`rados::Op::CompareOmap`]). A gateway
    /// that lost the race reads again and decides again, so the value it replaced (and whose
    /// pieces it frees) is always the one the index held: no overwrite or delete orphans
    /// another writer's data. Callers hold an in-process lock, which only spares this
    /// gateway's own writers the retries.
    /// With `intent`, the write also requires the intent to still be there and removes it
    /// (the commit of a write in progress, see [`orphans`]): when orphan collection fenced
    /// it, nothing is written and the error is [`GatewayError::UploadCollected`].
    pub(crate) async fn update_omap_value<T>(
        &self,
        oid: &str,
        omap_key: &[u8],
        intent: Option<&Intent>,
        change: impl FnMut(Option<&[u8]>) -> Result<OmapChange<T>>,
    ) -> Result<T> {
        self.update_omap_value_from(oid, omap_key, intent, None, change)
            .await
    }

    /// [`Store::update_omap_value`] whose first attempt decides on `prefetched`, the value
    /// as read a moment ago (a PUT reads it while its data is written), instead of reading
    /// it: the guard makes a value changed since fail the write, which then reads again.
    async fn update_omap_value_from<T>(
        &self,
        oid: &str,
        omap_key: &[u8],
        intent: Option<&Intent>,
        mut prefetched: Option<Prefetched>,
        mut change: impl FnMut(Option<&[u8]>) -> Result<OmapChange<T>>,
    ) -> Result<T> {
        if let Some(intent) = intent {
            assert_eq!(intent.oid, oid, "a write commits where its intent is");
        }
        for _ in 0..INDEX_RACE_RETRIES {
            let raw = match prefetched.take() {
                Some(Prefetched(raw)) => raw,
                None => match self
                    .index
                    .omap_get_vals_by_keys(oid, &[omap_key.to_vec()])
                    .await
                {
                    Ok(mut found) => found.remove(omap_key),
                    Err(RadosError::NotFound(_)) => None,
                    Err(error) => return Err(error.into()),
                },
            };
            let guarded = WriteOp::new().compare_omap(omap_key.to_vec(), raw.clone());
            let guarded = match intent {
                Some(intent) => intent.guard(guarded),
                None => guarded,
            };
            let (op, freed, result) = match change(raw.as_deref())? {
                OmapChange::Keep(result) => return Ok(result),
                OmapChange::Set(value, freed, result) => (
                    guarded.omap_set(vec![(omap_key.to_vec(), value)]),
                    freed,
                    result,
                ),
                OmapChange::Remove(freed, result) => (
                    guarded.omap_remove_keys(vec![omap_key.to_vec()]),
                    freed,
                    result,
                ),
            };
            let op = match intent {
                Some(intent) => intent.consume(op),
                None => op,
            };
            // Pack ranges this write frees are logged before it (see `pack_gc`): a crash
            // between the two leaves a live range logged, which the GC checks, and never a
            // dead range nobody logged.
            let (packed, freed): (Vec<Piece>, Vec<Piece>) =
                freed.into_iter().partition(|p| p.pack_offset.is_some());
            self.log_dead_ranges(&packed).await;
            match self.index_operate(oid, op).await {
                Ok(()) => {
                    self.retire_pieces(freed).await;
                    return Ok(result);
                }
                Err(RadosError::CompareFailed(_)) => {
                    self.check_intent(intent).await?;
                    self.counters.index_races.fetch_add(1, Ordering::Relaxed);
                }
                Err(error) => return Err(error.into()),
            }
        }
        Err(races_exhausted(&format!(
            "{oid} omap key {:?}",
            String::from_utf8_lossy(omap_key)
        )))
    }

    /// [`Store::update_omap_value`] of `key`'s plain index entry, under the key's lock.
    pub(super) async fn update_plain<T>(
        &self,
        bucket: &BucketRecord,
        key: &str,
        intent: Option<&Intent>,
        change: impl FnMut(Option<ObjectEntry>) -> OmapChange<T>,
    ) -> Result<T> {
        self.update_plain_from(bucket, key, intent, None, change)
            .await
    }

    /// [`Store::update_plain`], first deciding on `prefetched`.
    async fn update_plain_from<T>(
        &self,
        bucket: &BucketRecord,
        key: &str,
        intent: Option<&Intent>,
        prefetched: Option<Prefetched>,
        mut change: impl FnMut(Option<ObjectEntry>) -> OmapChange<T>,
    ) -> Result<T> {
        let oid = layout::index_shard_object(&bucket.id, layout::shard_of(key, bucket.shards));
        let _guard = self.locks.lock(&bucket.id, key).await;
        self.update_omap_value_from(&oid, key.as_bytes(), intent, prefetched, |raw| {
            let old = raw.map(layout::decode).transpose()?;
            Ok(change(old))
        })
        .await
    }

    /// The stored bytes of `key`'s plain index entry now, for a commit to start from
    /// ([`Store::commit_from`]): read while a PUT writes its data, so the commit that
    /// follows the data is one write, not a read and a write.
    pub async fn prefetch_plain(&self, bucket: &BucketRecord, key: &str) -> Result<Prefetched> {
        Ok(Prefetched(
            self.index_value(bucket, key, key.as_bytes().to_vec())
                .await?,
        ))
    }

    /// Makes `entry` the object `key` (a new version of it in a bucket with versioning) and
    /// returns the object as stored, with its version id in a bucket with versioning. With
    /// `intent` (the write that stored the entry's data), the commit also ends the intent,
    /// and fails with [`GatewayError::UploadCollected`] if orphan collection fenced it.
    pub async fn commit(
        &self,
        bucket: &BucketRecord,
        key: &str,
        entry: ObjectEntry,
        intent: Option<&Intent>,
    ) -> Result<ObjectEntry> {
        self.commit_if(bucket, key, entry, &WriteCondition::default(), intent)
            .await
    }

    /// [`Store::commit`] if `condition` holds for the key's current object when the entry is
    /// written (checked under the key's lock, in the guarded write itself, so no other write
    /// slips between the check and the commit); else its error, with nothing written.
    pub async fn commit_if(
        &self,
        bucket: &BucketRecord,
        key: &str,
        entry: ObjectEntry,
        condition: &WriteCondition,
        intent: Option<&Intent>,
    ) -> Result<ObjectEntry> {
        self.commit_from(bucket, key, entry, condition, intent, None)
            .await
    }

    /// [`Store::commit_if`], first deciding on `prefetched` (the key's plain entry read a
    /// moment ago, [`Store::prefetch_plain`]) in a bucket without versioning.
    pub async fn commit_from(
        &self,
        bucket: &BucketRecord,
        key: &str,
        entry: ObjectEntry,
        condition: &WriteCondition,
        intent: Option<&Intent>,
        prefetched: Option<Prefetched>,
    ) -> Result<ObjectEntry> {
        let bucket = match bucket.versioning {
            Some(_) => bucket.clone(),
            None => match super::timed(
                &self.counters.commits,
                &self.counters.commit_ns,
                self.commit_unversioned(bucket, key, &entry, condition, intent, prefetched),
            )
            .await?
            {
                Unversioned::Done => return Ok(entry),
                Unversioned::BucketVersioned => self.bucket(&bucket.name).await?,
            },
        };
        let status = bucket.versioning.ok_or_else(|| {
            GatewayError::Corrupt(format!("{key}: a version in a bucket without versioning"))
        })?;
        self.commit_version(&bucket, key, entry, status, condition, intent)
            .await
    }

    /// One guarded omap set (the acknowledgement point), then the pieces of the version it
    /// replaced are removed. Writes nothing if the key turns out to have a version entry:
    /// versioning was enabled since the caller read the bucket, and the old pieces belong to
    /// a version.
    async fn commit_unversioned(
        &self,
        bucket: &BucketRecord,
        key: &str,
        entry: &ObjectEntry,
        condition: &WriteCondition,
        intent: Option<&Intent>,
        prefetched: Option<Prefetched>,
    ) -> Result<Unversioned> {
        self.update_plain_from(bucket, key, intent, prefetched, |old| match old {
            Some(old) if old.version_id.is_some() => {
                OmapChange::Keep(Ok(Unversioned::BucketVersioned))
            }
            old => {
                if let Err(refusal) = condition.check(key, old.as_ref()) {
                    return OmapChange::Keep(Err(refusal));
                }
                // A piece is its object and, in a pack, its offset: two PUTs of one key in
                // one pack share the object but not the range.
                let keep: BTreeSet<(&str, Option<u64>)> = entry
                    .pieces
                    .iter()
                    .map(|p| (p.oid.as_str(), p.pack_offset))
                    .collect();
                let stale = old
                    .map(|old| old.pieces)
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|p| !keep.contains(&(p.oid.as_str(), p.pack_offset)))
                    .collect();
                OmapChange::Set(layout::encode(entry), stale, Ok(Unversioned::Done))
            }
        })
        .await?
    }

    /// Removes object `key` of a bucket without versioning (done if it was not there);
    /// removes nothing if the key has a version entry (as [`Store::commit_unversioned`]).
    #[cfg(test)]
    pub async fn delete(&self, bucket: &BucketRecord, key: &str) -> Result<Unversioned> {
        self.delete_if(bucket, key, &DeleteCondition::default())
            .await
    }

    /// [`Store::delete`] if the entry passes `condition`, decided in the same guarded write
    /// (412 when it does not).
    pub async fn delete_if(
        &self,
        bucket: &BucketRecord,
        key: &str,
        condition: &DeleteCondition,
    ) -> Result<Unversioned> {
        self.update_plain(bucket, key, None, |old| match old {
            None => OmapChange::Keep(Ok(Unversioned::Done)),
            Some(old) if old.version_id.is_some() => {
                OmapChange::Keep(Ok(Unversioned::BucketVersioned))
            }
            Some(old) => match condition.check(Some(&old)) {
                Ok(()) => OmapChange::Remove(old.pieces, Ok(Unversioned::Done)),
                Err(refusal) => OmapChange::Keep(Err(refusal)),
            },
        })
        .await?
    }
}
