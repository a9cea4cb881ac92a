//! Write intents and orphan collection: how `strata gc` removes the data of uploads whose
//! gateway died, and never the data of an upload it acknowledged or may still acknowledge.
//!
//! ## The protocol (radosgw's bucket-index "prepare", in spirit)
//! - A PUT, copy or part upload first records an [`Intent`] (`0xFE tag` -> start time) in the
//!   omap of the object it will commit to (the key's index shard, or the upload's object),
//!   then writes its data objects (`<bucket-id>_<tag>_...`), then commits: one guarded omap
//!   write that stores the entry and removes the intent, and applies only if the intent is
//!   still there.
//! - Orphan collection lists the data pool first, then reads every reference: GC queue,
//!   uploaded parts and their intents, index entries and their intents, each object in one
//!   read. Data under an intent younger than the grace period is in flight and left alone.
//!   An older intent is fenced: removed by a write guarded by its value. The fence and the
//!   commit are writes to one object, so exactly one wins; an upload that lost answers 500
//!   (nothing stored, the client retries) instead of acknowledging data that is gone.
//! - A listed data object no entry, part, queue entry or live intent names cannot become
//!   referenced any more (its intent is gone), but it may be data an overwrite replaced a
//!   moment ago whose GET is still streaming. So orphans are not removed at once: they go
//!   to the GC queue and are removed after `gc_min_wait_s`, as replaced data is.
//! - The data pool is listed before the references are read, so data committed during the
//!   pass is not in the listing; it was the other way round, and every object committed
//!   between the two steps was taken for an orphan.
//!
//! A short grace period therefore never loses acknowledged data, but fails every upload that
//! takes longer than it; the CLI and the admin API refuse one shorter than
//! [`ORPHAN_GRACE_S_MIN`] unless forced.

use std::collections::HashSet;
use std::sync::atomic::Ordering;

use rados::{Comparison, RadosError, WriteOp};

use super::Store;
use crate::error::{GatewayError, Result};
use crate::layout::{self, BucketRecord, ObjectEntry, PartRecord, Piece};

/// The shortest grace period `strata gc` accepts without `--force`: longer than any upload
/// should take, so fencing hits only uploads whose gateway died.
pub const ORPHAN_GRACE_S_MIN: u64 = 600;

/// Most omap entries one index shard or upload object may hold for orphan collection, which
/// reads each in one go (see [`Store::omap_snapshot`]).
const SNAPSHOT_ENTRIES_MAX: usize = 1 << 22;

/// What one [`Store::collect_orphans`] pass found. The counts of the listed data objects
/// (`referenced`, `awaiting_gc`, `in_flight`, `too_young`, `orphans`) add up to at most
/// `data_objects` (objects removed during the pass are in none).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct OrphanReport {
    /// Objects in the data pool when the pass listed it.
    pub data_objects: u64,
    /// Of them, those an index entry or an uploaded part refers to.
    pub referenced: u64,
    /// Of them, those already in the GC queue (removed when their wait is over).
    pub awaiting_gc: u64,
    /// Of them, data of uploads in progress (a write intent younger than the grace period).
    pub in_flight: u64,
    /// Unreferenced objects younger than the grace period (data written without an intent,
    /// by an older gateway).
    pub too_young: u64,
    /// Write intents older than the grace period, removed so their uploads can no longer
    /// commit (their data is among the orphans from now on).
    pub intents_fenced: u64,
    /// Unreferenced objects older than the grace period.
    pub orphans: Vec<String>,
    /// Their logical bytes.
    pub orphan_bytes: u64,
    /// Members of referenced packs that no entry names and no write in flight will commit
    /// (a gateway died between the pack write and their commits), logged as dead ranges
    /// for the pack GC (none in a dry run).
    pub pack_ranges_dead: u64,
    /// How many of them were queued for removal after `gc_min_wait_s` (none in a dry run).
    pub queued: u64,
    /// How many of them were removed at once (`gc_min_wait_s` 0; none in a dry run).
    pub removed: u64,
}

/// A write in progress: omap key `0xFE tag` in the object its commit will write (see the
/// module docs).
#[derive(Clone, Debug)]
pub(crate) struct Intent {
    /// The index-pool object (index shard or upload object).
    pub(super) oid: String,
    key: Vec<u8>,
    value: Vec<u8>,
}

impl Intent {
    /// `op` required to find the intent still there.
    pub(super) fn guard(&self, op: WriteOp) -> WriteOp {
        op.compare_omap(self.key.clone(), Some(self.value.clone()))
    }

    /// `op` also ending the intent.
    pub(super) fn consume(&self, op: WriteOp) -> WriteOp {
        op.omap_remove_keys(vec![self.key.clone()])
    }
}

/// What refers to data objects, read by one pass.
#[derive(Default)]
struct References {
    /// Data objects index entries and uploaded parts name.
    pieces: HashSet<String>,
    /// (pack, offset) of every packed piece an index entry names.
    pack_ranges: HashSet<(String, u64)>,
    /// Data objects in the GC queue.
    queued: HashSet<String>,
    /// `<bucket-id>_<tag>_` of every live write intent.
    in_flight: HashSet<String>,
    intents_fenced: u64,
}

/// The clock and the settings of one pass.
#[derive(Clone, Copy)]
struct Pass {
    now_ns: u64,
    grace_ns: u64,
    dry_run: bool,
}

/// `<bucket-id>_<tag>_` of a data object's name (bucket ids and tags have no `_`).
fn tag_prefix(name: &str) -> Option<&str> {
    let (at, _) = name.match_indices('_').nth(1)?;
    name.get(..=at)
}

impl Store {
    /// Records the intent of a PUT or copy of `key` that will write data tagged `tag`.
    pub async fn begin_object_write(
        &self,
        bucket: &BucketRecord,
        key: &str,
        tag: &str,
    ) -> Result<Intent> {
        let shard = layout::shard_of(key, bucket.shards);
        self.begin_write(layout::index_shard_object(&bucket.id, shard), tag, false)
            .await
    }

    /// [`Store::begin_object_write`] for a PUT decided on a copy of the bucket record
    /// ([`Store::bucket_cached`]): the intent is written only if the key's index shard exists
    /// and its versioning stamp says what `bucket` says. `None` (nothing written) when it
    /// does not: the bucket was deleted, or its versioning changed, since the copy was read;
    /// the caller reads the record and decides again ([`Store::begin_object_write_checked`]).
    /// A deleted bucket thus never takes a write, whatever the copy's age.
    pub async fn begin_object_write_guarded(
        &self,
        bucket: &BucketRecord,
        key: &str,
        tag: &str,
    ) -> Result<Option<Intent>> {
        let stamp = layout::versioning_stamp(bucket.versioning);
        let guard = WriteOp::new().compare_xattr(
            layout::VERSIONING_STAMP_XATTR,
            Comparison::Equal,
            stamp.to_vec(),
        );
        match self.begin_object_write_with(bucket, key, tag, guard).await {
            Ok(intent) => Ok(Some(intent)),
            Err(GatewayError::Rados(RadosError::NotFound(_) | RadosError::CompareFailed(_))) => {
                Ok(None)
            }
            Err(error) => Err(error),
        }
    }

    /// The intent of a PUT decided on `bucket` as just read from the cluster: guarded by the
    /// shard's stamp as [`Store::begin_object_write_guarded`]; a shard without a stamp (a
    /// bucket of an older build, or its shard not written yet) is stamped by the same write
    /// (created if missing); a stamp that disagrees with the record (a versioning change
    /// whose gateway died before it stamped) is left to the next versioning change and the
    /// intent written unguarded, as before stamps, with a warning.
    pub async fn begin_object_write_checked(
        &self,
        bucket: &BucketRecord,
        key: &str,
        tag: &str,
    ) -> Result<Intent> {
        if let Some(intent) = self.begin_object_write_guarded(bucket, key, tag).await? {
            return Ok(intent);
        }
        let stamp = layout::versioning_stamp(bucket.versioning).to_vec();
        let unstamped = WriteOp::new()
            .compare_xattr(
                layout::VERSIONING_STAMP_XATTR,
                Comparison::Equal,
                Vec::new(),
            )
            .set_xattr(layout::VERSIONING_STAMP_XATTR, stamp.clone());
        match self
            .begin_object_write_with(bucket, key, tag, unstamped)
            .await
        {
            Err(GatewayError::Rados(RadosError::NotFound(_))) => {
                let stamped = WriteOp::new().set_xattr(layout::VERSIONING_STAMP_XATTR, stamp);
                self.begin_object_write_with(bucket, key, tag, stamped)
                    .await
            }
            Err(GatewayError::Rados(RadosError::CompareFailed(_))) => {
                tracing::warn!(
                    bucket = %bucket.name,
                    "an index shard's versioning stamp disagrees with the bucket record; \
                     a versioning change did not finish (put the versioning status again)"
                );
                self.begin_object_write(bucket, key, tag).await
            }
            other => other,
        }
    }

    /// The intent of a write to `key`, in one write with `op`'s guards and steps.
    async fn begin_object_write_with(
        &self,
        bucket: &BucketRecord,
        key: &str,
        tag: &str,
        op: WriteOp,
    ) -> Result<Intent> {
        let shard = layout::shard_of(key, bucket.shards);
        let oid = layout::index_shard_object(&bucket.id, shard);
        let intent = self.intent(oid, tag);
        let op = op.omap_set(vec![(intent.key.clone(), intent.value.clone())]);
        let counters = &self.counters;
        let write = self.index_operate(&intent.oid, op);
        super::timed(&counters.intents_written, &counters.intent_write_ns, write).await?;
        Ok(intent)
    }

    /// Records the intent of a part upload of `upload_id` that will write data tagged `tag`,
    /// in the upload's parts object, which must exist (CreateMultipartUpload creates it,
    /// Complete and Abort remove it): otherwise `NoSuchUpload`, and nothing is written, so a
    /// part racing Abort does not bring the object back (it was left behind, empty). With
    /// `create`, the intent creates the object, for an upload begun by a version that created
    /// it with the first part.
    pub async fn begin_part_write(
        &self,
        bucket: &BucketRecord,
        upload_id: &str,
        tag: &str,
        create: bool,
    ) -> Result<Intent> {
        let oid = layout::upload_object(&bucket.id, upload_id);
        match self.begin_write(oid, tag, !create).await {
            Err(GatewayError::Rados(RadosError::NotFound(_))) => {
                Err(GatewayError::NoSuchUpload(upload_id.to_string()))
            }
            other => other,
        }
    }

    /// Writes the intent into `oid`; with `existing`, only if `oid` exists.
    async fn begin_write(&self, oid: String, tag: &str, existing: bool) -> Result<Intent> {
        let intent = self.intent(oid, tag);
        let mut op = WriteOp::new();
        if existing {
            op = op.assert_exists();
        }
        let op = op.omap_set(vec![(intent.key.clone(), intent.value.clone())]);
        let counters = &self.counters;
        let write = self.index_operate(&intent.oid, op);
        super::timed(&counters.intents_written, &counters.intent_write_ns, write).await?;
        Ok(intent)
    }

    /// A new intent of data tagged `tag`, committing to `oid`, started now.
    fn intent(&self, oid: String, tag: &str) -> Intent {
        debug_assert!(!tag.contains('_'), "tag_prefix needs tags without '_'");
        Intent {
            oid,
            key: layout::intent_key(tag),
            value: self.now_ns().to_string().into_bytes(),
        }
    }

    /// Ends a write that will not commit: its data (none left when orphan collection fenced
    /// it, or the write failed) and its intent are removed. A failure leaves the intent, which
    /// orphan collection fences after its grace period.
    pub async fn abandon_write(&self, intent: &Intent, pieces: Vec<Piece>) {
        self.remove_pieces(pieces).await;
        if let Err(error) = self
            .index
            .omap_remove_keys(&intent.oid, vec![intent.key.clone()])
            .await
        {
            tracing::warn!(oid = %intent.oid, %error, "cannot remove a write intent");
        }
    }

    /// After a guarded commit failed: the error when it failed because orphan collection
    /// fenced the intent (else the commit lost an ordinary race and is decided again).
    pub(super) async fn check_intent(&self, intent: Option<&Intent>) -> Result<()> {
        let Some(intent) = intent else {
            return Ok(());
        };
        let found = match self
            .index
            .omap_get_vals_by_keys(&intent.oid, std::slice::from_ref(&intent.key))
            .await
        {
            Ok(found) => found,
            Err(RadosError::NotFound(_)) => Default::default(),
            Err(error) => return Err(error.into()),
        };
        if found.get(&intent.key) == Some(&intent.value) {
            return Ok(());
        }
        Err(GatewayError::UploadCollected(format!(
            "{} {}",
            intent.oid,
            String::from_utf8_lossy(&intent.key[1..])
        )))
    }

    /// Every omap entry of index-pool object `oid` in one read (a consistent view of it: a
    /// commit moves a reference between keys of one object atomically, and a paged read
    /// could see neither place).
    async fn omap_snapshot(&self, oid: &str) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        match self
            .index
            .omap_get_vals(oid, None, b"", SNAPSHOT_ENTRIES_MAX)
            .await
        {
            Ok(page) if page.more => Err(GatewayError::Corrupt(format!(
                "{oid} holds more than {SNAPSHOT_ENTRIES_MAX} entries, too many to check in one \
                 read; orphan collection stopped, nothing removed"
            ))),
            Ok(page) => Ok(page.entries),
            Err(RadosError::NotFound(_)) => Ok(Vec::new()),
            Err(error) => Err(error.into()),
        }
    }

    /// A write intent read in `oid` of bucket `bucket_id`: live ones protect their data;
    /// those older than `grace_ns` are fenced (unless `dry_run`), after which they protect
    /// nothing.
    async fn visit_intent(
        &self,
        refs: &mut References,
        bucket_id: &str,
        oid: &str,
        (key, value): (Vec<u8>, Vec<u8>),
        pass: Pass,
    ) -> Result<()> {
        let Pass {
            now_ns,
            grace_ns,
            dry_run,
        } = pass;
        let Some(tag) = layout::parse_intent_key(&key) else {
            return Ok(());
        };
        let prefix = layout::pieces_prefix(bucket_id, &tag);
        let started_ns: u64 = String::from_utf8_lossy(&value).parse().unwrap_or(0);
        if now_ns.saturating_sub(started_ns) < grace_ns {
            refs.in_flight.insert(prefix);
            return Ok(());
        }
        if dry_run {
            return Ok(()); // would be fenced
        }
        let fence = WriteOp::new()
            .compare_omap(key.clone(), Some(value))
            .omap_remove_keys(vec![key]);
        match self.index.operate(oid, fence).await {
            Ok(()) => refs.intents_fenced += 1,
            // The upload committed (or ended) first: whatever it left is referenced or gone.
            Err(RadosError::CompareFailed(_)) | Err(RadosError::NotFound(_)) => {
                refs.in_flight.insert(prefix);
            }
            Err(error) => return Err(error.into()),
        }
        Ok(())
    }

    /// Everything that refers to data objects. Uploads are read before the index shards: a
    /// multipart completion commits its entry before it forgets the upload, so a part moving
    /// from one to the other is seen in at least one of them. The GC queue is read last, so
    /// data retired by a commit after its shard was read is seen there (and what is still
    /// missed is queued by the pass, never removed at once).
    async fn references(&self, grace_ns: u64, dry_run: bool) -> Result<References> {
        let pass = Pass {
            now_ns: self.now_ns(),
            grace_ns,
            dry_run,
        };
        let mut refs = References::default();
        for bucket in self.buckets().await? {
            for (raw, _) in self
                .omap_snapshot(&layout::uploads_object(&bucket.id))
                .await?
            {
                let Some(at) = raw.iter().position(|&b| b == 0) else {
                    continue;
                };
                let upload_id = String::from_utf8_lossy(&raw[at + 1..]).into_owned();
                let oid = layout::upload_object(&bucket.id, &upload_id);
                for (key, value) in self.omap_snapshot(&oid).await? {
                    if layout::is_namespaced(&key) {
                        let intent = (key, value);
                        self.visit_intent(&mut refs, &bucket.id, &oid, intent, pass)
                            .await?;
                        continue;
                    }
                    let part: PartRecord = layout::decode(&value)?;
                    refs.pieces.extend(part.pieces.into_iter().map(|p| p.oid));
                }
            }
            for shard in 0..bucket.shards {
                let oid = layout::index_shard_object(&bucket.id, shard);
                for (key, value) in self.omap_snapshot(&oid).await? {
                    if key.first() == Some(&layout::INTENT_NAMESPACE) {
                        let intent = (key, value);
                        self.visit_intent(&mut refs, &bucket.id, &oid, intent, pass)
                            .await?;
                        continue;
                    }
                    let entry: ObjectEntry = layout::decode(&value)?;
                    for piece in entry.pieces {
                        if let Some(offset) = piece.pack_offset {
                            refs.pack_ranges.insert((piece.oid.clone(), offset));
                        }
                        refs.pieces.insert(piece.oid);
                    }
                }
            }
        }
        refs.queued = self
            .omap_all(&self.meta, layout::GC_OBJECT)
            .await?
            .into_iter()
            .map(|(key, _)| String::from_utf8_lossy(&key).into_owned())
            .collect();
        Ok(refs)
    }

    /// Finds data objects nothing refers to (see the module docs) that are older than
    /// `grace_ns`, and unless `dry_run` hands them to the GC queue (removed after
    /// `gc_min_wait_s`; at once when that is 0). Such objects are left by a gateway that died
    /// between writing an object's data and committing its index entry (overwrites and
    /// deletes free their data themselves), like the orphans radosgw's `rgw-orphan-list`
    /// finds.
    pub async fn collect_orphans(&self, grace_ns: u64, dry_run: bool) -> Result<OrphanReport> {
        let names = self.data.list_all().await?;
        let refs = self.references(grace_ns, dry_run).await?;
        let now_ns = self.now_ns();
        let mut report = OrphanReport {
            data_objects: names.len() as u64,
            intents_fenced: refs.intents_fenced,
            ..OrphanReport::default()
        };
        let mut orphans = Vec::new();
        let targets = self.pack_gc_targets().await?;
        for name in names {
            if refs.queued.contains(&name) {
                report.awaiting_gc += 1;
                continue;
            }
            if layout::is_pack_object(&name) {
                // A pack the pack GC is writing, or one holding a write in flight.
                if targets.contains(&name) {
                    report.in_flight += 1;
                    continue;
                }
                let members = self.pack_members(&name).await?;
                if members
                    .values()
                    .any(|member| refs.in_flight.contains(&member.writer))
                {
                    report.in_flight += 1;
                    continue;
                }
                if refs.pieces.contains(&name) {
                    let dead: Vec<Piece> = members
                        .into_iter()
                        .filter(|(offset, _)| !refs.pack_ranges.contains(&(name.clone(), *offset)))
                        .map(|(offset, member)| Piece {
                            oid: name.clone(),
                            size: member.length,
                            pack_offset: Some(offset),
                        })
                        .collect();
                    report.pack_ranges_dead += dead.len() as u64;
                    if !dry_run {
                        self.log_dead_ranges(&dead).await;
                    }
                    report.referenced += 1;
                    continue;
                }
            }
            if refs.pieces.contains(&name) {
                report.referenced += 1;
                continue;
            }
            if tag_prefix(&name).is_some_and(|prefix| refs.in_flight.contains(prefix)) {
                report.in_flight += 1;
                continue;
            }
            let stat = match self.data.stat(&name).await {
                Ok(stat) => stat,
                Err(RadosError::NotFound(_)) => continue,
                Err(error) => return Err(error.into()),
            };
            if now_ns.saturating_sub(stat.mtime_ns) < grace_ns {
                report.too_young += 1;
                continue;
            }
            report.orphan_bytes += stat.size_bytes;
            orphans.push(Piece::whole(name, stat.size_bytes));
        }
        report.orphans = orphans.iter().map(|p| p.oid.clone()).collect();
        if !dry_run && !orphans.is_empty() {
            let count = orphans.len() as u64;
            if self.config.gc_min_wait_s == 0 {
                report.removed = count;
            } else {
                report.queued = count;
            }
            self.retire_pieces(orphans).await;
            self.counters
                .orphans_removed
                .fetch_add(count, Ordering::Relaxed);
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests;
