//! Deletion by log and the pack GC (seed 002): deleting or overwriting a packed object only
//! logs its range; a GC pass rewrites a pack without its dead ranges once they are
//! `packing.gc_dead_percent_min` percent of it.
//!
//! ## The log
//! Metadata-pool objects `pack_gc.<shard>` ([`layout::pack_gc_log_object`], sharded by pack
//! name). A dead range is `r\0<pack>\0<offset>` -> [`DeadRange`] (state *initial*: logged,
//! nothing started); a rewrite is `j\0<pack>` -> [`PackJob`] with state *processing*,
//! *failed* or *complete* and the target pack. A range is logged **before** the index write
//! that makes it dead (see `index.rs`), so a crash between the two can only leave a range
//! logged that is still live, never a dead one unlogged; the log is a hint and the rewrite
//! decides liveness from the index alone.
//!
//! ## One rewrite, step by step (each step may crash; the next pass resumes)
//! 1. The job is written (*processing*, target name chosen in the pack's placement group).
//! 2. If the target does not exist: the members whose entries (plain or versions of their
//!    key) still name their range of the pack are copied into the target, in one write that
//!    also records them (with the offset each came from).
//! 3. Each member of the target is switched: its entries that name the old range are set
//!    to the new one by a write guarded by the entry's bytes (a concurrent overwrite wins or
//!    loses cleanly, and is decided again); a member no entry names any more is logged dead
//!    in the target.
//! 4. The job becomes *complete* and the old pack's ranges leave the log (one write), the
//!    old pack goes to the GC queue (removed after `gc_min_wait_s`, so a GET that started on
//!    it finishes), and the job is removed.
//!
//! A failure in 2-3 records *failed*; the next pass resumes with the same target, which is
//! idempotent (a target already written is used as it is).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;

use bytes::Bytes;
use rados::{RadosError, WriteOp};

use super::index::OmapChange;
use super::pack::{pack_name_in, placement_group};
use super::Store;
use crate::error::Result;
use crate::layout::{self, DeadRange, ObjectEntry, PackGcState, PackJob, PackMember, Piece};

/// One omap key and value.
type OmapEntry = (Vec<u8>, Vec<u8>);

/// What the pack GC log holds now (`strata df`, `strata gc`, `/metrics`).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PackGcStatus {
    /// Packs with dead ranges logged.
    pub packs_with_dead: u64,
    /// Dead ranges logged.
    pub dead_ranges: u64,
    /// Their bytes (once, not per replica).
    pub dead_bytes: u64,
    /// Rewrites in each state (processing, failed, complete).
    pub jobs_processing: u64,
    pub jobs_failed: u64,
    pub jobs_complete: u64,
}

/// What one pack GC pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PackGcReport {
    /// Packs rewritten (jobs completed).
    pub packs_rewritten: u64,
    /// Live bytes copied into new packs.
    pub bytes_copied: u64,
    /// Dead bytes of the rewritten packs (reclaimed once the old packs are removed).
    pub bytes_reclaimed: u64,
    /// Jobs that failed this pass (resumed by the next).
    pub jobs_failed: u64,
    /// Log entries of packs that no longer exist, removed.
    pub stale_entries_removed: u64,
    /// Old packs of completed rewrites removed in the pass (`gc_min_wait_s` 0) ...
    #[serde(default)]
    pub old_packs_removed: u64,
    /// ... or queued for the GC, which removes them once `gc_min_wait_s` has passed.
    #[serde(default)]
    pub old_packs_queued: u64,
}

/// One pack's entries in the log.
#[derive(Default)]
struct Logged {
    ranges: BTreeMap<u64, u64>,
    keys: Vec<Vec<u8>>,
    job: Option<PackJob>,
}

impl Store {
    /// Logs the ranges of packed `pieces` as dead (one write per log shard). A failure is
    /// only logged: the range stays until its pack is rewritten for others' sake.
    pub(crate) async fn log_dead_ranges(&self, pieces: &[Piece]) {
        let now_ns = self.now_ns();
        let mut by_shard: HashMap<String, Vec<OmapEntry>> = HashMap::new();
        for piece in pieces {
            let Some(offset) = piece.pack_offset else {
                continue;
            };
            let value = layout::encode(&DeadRange {
                length: piece.size,
                logged_ns: now_ns,
            });
            by_shard
                .entry(layout::pack_gc_log_object(&piece.oid))
                .or_default()
                .push((layout::pack_range_key(&piece.oid, offset), value));
        }
        for (shard, entries) in by_shard {
            let count = entries.len() as u64;
            match self.meta.omap_set(&shard, entries).await {
                Ok(()) => {
                    self.packer
                        .counters
                        .ranges_logged
                        .fetch_add(count, Ordering::Relaxed);
                }
                Err(error) => tracing::warn!(%shard, %error, "cannot log dead pack ranges"),
            }
        }
    }

    /// Every pack's entries in the log.
    async fn pack_log(&self) -> Result<BTreeMap<String, Logged>> {
        let mut packs: BTreeMap<String, Logged> = BTreeMap::new();
        for shard in 0..layout::PACK_GC_LOG_SHARDS {
            let oid = format!("pack_gc.{shard}");
            for (key, value) in self.omap_all(&self.meta, &oid).await? {
                let Some((pack, offset)) = layout::parse_pack_log_key(&key) else {
                    continue;
                };
                let logged = packs.entry(pack).or_default();
                match offset {
                    Some(offset) => {
                        let range: DeadRange = layout::decode(&value)?;
                        logged.ranges.insert(offset, range.length);
                        logged.keys.push(key);
                    }
                    None => logged.job = Some(layout::decode(&value)?),
                }
            }
        }
        Ok(packs)
    }

    /// The packs rewrites are reading and writing: their targets are not referenced yet, and
    /// their sources are retired by the rewrite itself; orphan collection leaves both alone.
    pub(crate) async fn pack_gc_targets(&self) -> Result<std::collections::HashSet<String>> {
        let mut busy = std::collections::HashSet::new();
        for (pack, logged) in self.pack_log().await? {
            if let Some(job) = logged.job {
                busy.insert(job.target);
                busy.insert(pack);
            }
        }
        Ok(busy)
    }

    /// What the pack GC log holds now.
    pub async fn pack_gc_status(&self) -> Result<PackGcStatus> {
        let mut status = PackGcStatus::default();
        for logged in self.pack_log().await?.values() {
            if !logged.ranges.is_empty() {
                status.packs_with_dead += 1;
            }
            status.dead_ranges += logged.ranges.len() as u64;
            status.dead_bytes += logged.ranges.values().sum::<u64>();
            match logged.job.as_ref().map(|job| job.state) {
                Some(PackGcState::Processing) => status.jobs_processing += 1,
                Some(PackGcState::Failed) => status.jobs_failed += 1,
                Some(PackGcState::Complete) => status.jobs_complete += 1,
                Some(PackGcState::Initial) | None => {}
            }
        }
        Ok(status)
    }

    /// One pack GC pass: resumes every job, and rewrites every pack whose logged dead share
    /// is at least `packing.gc_dead_percent_min` percent.
    pub async fn pack_gc(&self) -> Result<PackGcReport> {
        let mut report = PackGcReport::default();
        let threshold = self.config.packing.gc_dead_percent_min;
        for (pack, logged) in self.pack_log().await? {
            let dead_bytes: u64 = logged.ranges.values().sum();
            let job = match logged.job.clone() {
                Some(job) => job,
                None => {
                    let size_bytes = match self.data.stat(&pack).await {
                        Ok(stat) => stat.size_bytes,
                        Err(RadosError::NotFound(_)) => {
                            // Ranges logged after the pack was rewritten and removed.
                            report.stale_entries_removed += logged.keys.len() as u64;
                            self.meta
                                .omap_remove_keys(&layout::pack_gc_log_object(&pack), logged.keys)
                                .await?;
                            continue;
                        }
                        Err(error) => return Err(error.into()),
                    };
                    if dead_bytes.saturating_mul(100) < size_bytes.saturating_mul(threshold) {
                        continue;
                    }
                    let pg_num = self.data.pool().pg_num;
                    let job = PackJob {
                        state: PackGcState::Processing,
                        target: pack_name_in(
                            &self.new_tag(8),
                            placement_group(&pack, pg_num),
                            pg_num,
                        ),
                        changed_ns: self.now_ns(),
                    };
                    self.set_job(&pack, &job).await?;
                    job
                }
            };
            match self.run_job(&pack, job, &logged, &mut report).await {
                Ok(()) => {
                    report.packs_rewritten += 1;
                    report.bytes_reclaimed += dead_bytes;
                }
                Err(error) => {
                    tracing::warn!(%pack, %error, "pack rewrite failed; resumed next pass");
                    report.jobs_failed += 1;
                    self.mark_failed(&pack).await;
                }
            }
        }
        let counters = &self.packer.counters;
        counters
            .packs_rewritten
            .fetch_add(report.packs_rewritten, Ordering::Relaxed);
        counters
            .bytes_reclaimed
            .fetch_add(report.bytes_reclaimed, Ordering::Relaxed);
        Ok(report)
    }

    async fn set_job(&self, pack: &str, job: &PackJob) -> Result<()> {
        self.meta
            .omap_set(
                &layout::pack_gc_log_object(pack),
                vec![(layout::pack_job_key(pack), layout::encode(job))],
            )
            .await?;
        Ok(())
    }

    /// Records that `pack`'s job failed (its target kept, so the next pass resumes it).
    async fn mark_failed(&self, pack: &str) {
        let oid = layout::pack_gc_log_object(pack);
        let key = layout::pack_job_key(pack);
        let Ok(mut found) = self
            .meta
            .omap_get_vals_by_keys(&oid, std::slice::from_ref(&key))
            .await
        else {
            return;
        };
        let Some(Ok(mut job)) = found.remove(&key).map(|v| layout::decode::<PackJob>(&v)) else {
            return;
        };
        job.state = PackGcState::Failed;
        job.changed_ns = self.now_ns();
        if let Err(error) = self.set_job(pack, &job).await {
            tracing::warn!(%pack, %error, "cannot record a failed pack rewrite");
        }
    }

    /// Steps 2-4 of a rewrite (see the module docs), from wherever the job is.
    async fn run_job(
        &self,
        pack: &str,
        mut job: PackJob,
        logged: &Logged,
        report: &mut PackGcReport,
    ) -> Result<()> {
        if job.state != PackGcState::Complete {
            let members = match self.data.stat(&job.target).await {
                Ok(_) => self.pack_members(&job.target).await?,
                Err(RadosError::NotFound(_)) => {
                    let members = self.copy_live_members(pack, &job.target).await?;
                    report.bytes_copied += members.values().map(|m| m.length).sum::<u64>();
                    members
                }
                Err(error) => return Err(error.into()),
            };
            let mut dead = Vec::new();
            for (offset, member) in members {
                let from = member_origin(&member)?;
                let old = Piece {
                    oid: pack.to_string(),
                    size: member.length,
                    pack_offset: Some(from),
                };
                let new = Piece {
                    oid: job.target.clone(),
                    size: member.length,
                    pack_offset: Some(offset),
                };
                if !self.switch_entries(&member, &old, &new).await? {
                    dead.push(new);
                }
            }
            self.log_dead_ranges(&dead).await;
            job.state = PackGcState::Complete;
            job.changed_ns = self.now_ns();
            let op = WriteOp::new()
                .omap_set(vec![(layout::pack_job_key(pack), layout::encode(&job))])
                .omap_remove_keys(logged.keys.clone());
            self.meta
                .operate(&layout::pack_gc_log_object(pack), op)
                .await?;
        }
        // The old pack waits in the GC queue like replaced data (removed now with no wait).
        let removed = self.retire_whole(vec![pack.to_string()]).await;
        match removed {
            0 => report.old_packs_queued += 1,
            _ => report.old_packs_removed += removed,
        }
        self.meta
            .omap_remove_keys(
                &layout::pack_gc_log_object(pack),
                vec![layout::pack_job_key(pack)],
            )
            .await?;
        Ok(())
    }

    /// The members a pack records, by offset: its member list, or (a pack written before
    /// member lists) its records keyed by offset.
    pub(crate) async fn pack_members(&self, pack: &str) -> Result<BTreeMap<u64, PackMember>> {
        let mut members = BTreeMap::new();
        for (key, value) in self.omap_all(&self.data, pack).await? {
            if key == layout::PACK_MEMBERS_KEY {
                let list: layout::PackMemberList = layout::decode(&value)?;
                members.extend(list.members()?);
                continue;
            }
            let Some(offset) = std::str::from_utf8(&key).ok().and_then(|k| k.parse().ok()) else {
                continue;
            };
            members.insert(offset, layout::decode(&value)?);
        }
        Ok(members)
    }

    /// Writes the members of `pack` some index entry still names into `target` (one write,
    /// which records them with their origin); returns them by their offset in `target`.
    async fn copy_live_members(
        &self,
        pack: &str,
        target: &str,
    ) -> Result<BTreeMap<u64, PackMember>> {
        let members = self.pack_members(pack).await?;
        if members.is_empty() {
            return Ok(BTreeMap::new()); // nothing recorded (or the pack is gone): nothing to copy
        }
        let data = Bytes::from(self.data.read_full(pack).await?);
        let mut body = Vec::new();
        let mut copied = BTreeMap::new();
        for (from, member) in members {
            let piece = Piece {
                oid: pack.to_string(),
                size: member.length,
                pack_offset: Some(from),
            };
            if self.entries_naming(&member, &piece).await?.is_empty() {
                // Not committed, or dead. A write still in flight could commit it after
                // this check and lose it with the old pack, so its intent is fenced first
                // (its commit then fails, as after orphan collection), and the entries are
                // read again: named now means it committed just before the fence.
                self.fence_writer(&member).await?;
                if self.entries_naming(&member, &piece).await?.is_empty() {
                    continue;
                }
            }
            let end = from + member.length;
            if end > data.len() as u64 {
                return Err(crate::GatewayError::Corrupt(format!(
                    "pack {pack} holds {} bytes, its member at {from} needs {end}",
                    data.len()
                )));
            }
            let offset = body.len() as u64;
            body.extend_from_slice(&data[from as usize..end as usize]);
            let moved = PackMember {
                moved_from: Some(from),
                ..member
            };
            copied.insert(offset, moved);
        }
        if copied.is_empty() {
            return Ok(copied);
        }
        let list = layout::PackMemberList::of(copied.iter().map(|(&o, m)| (o, m)));
        let records = vec![(layout::PACK_MEMBERS_KEY.to_vec(), layout::encode(&list))];
        self.data
            .operate(target, WriteOp::new().write_full(body).omap_set(records))
            .await?;
        Ok(copied)
    }

    /// Removes the write intent of the PUT that wrote `member`, if it is still there.
    async fn fence_writer(&self, member: &PackMember) -> Result<()> {
        let Some(tag) = member.writer.split('_').nth(1) else {
            return Ok(());
        };
        super::ignore_missing(
            self.index
                .omap_remove_keys(&member.index_oid, vec![layout::intent_key(tag)])
                .await,
        )
    }

    /// The omap keys and entries of `member`'s key (plain entry and versions) naming `piece`.
    async fn entries_naming(
        &self,
        member: &PackMember,
        piece: &Piece,
    ) -> Result<Vec<(Vec<u8>, ObjectEntry)>> {
        let mut found = Vec::new();
        let plain = match self
            .index
            .omap_get_vals_by_keys(&member.index_oid, &[member.key.as_bytes().to_vec()])
            .await
        {
            Ok(values) => values.into_iter().collect::<Vec<_>>(),
            Err(RadosError::NotFound(_)) => Vec::new(),
            Err(error) => return Err(error.into()),
        };
        let mut versions = Vec::new();
        let prefix = layout::versions_prefix(&member.key);
        loop {
            let after = versions.last().map(|(k, _): &(Vec<u8>, Vec<u8>)| k.clone());
            let page = match self
                .index
                .omap_get_vals(&member.index_oid, after.as_deref(), &prefix, 1000)
                .await
            {
                Ok(page) => page,
                Err(RadosError::NotFound(_)) => break,
                Err(error) => return Err(error.into()),
            };
            let done = !page.more || page.entries.is_empty();
            versions.extend(page.entries);
            if done {
                break;
            }
        }
        for (key, value) in plain.into_iter().chain(versions) {
            let entry: ObjectEntry = layout::decode(&value)?;
            if entry.pieces.contains(piece) {
                found.push((key, entry));
            }
        }
        Ok(found)
    }

    /// Sets every entry of `member`'s key naming `old` to name `new` instead, each by a
    /// guarded write; whether any entry names `new` afterwards.
    async fn switch_entries(&self, member: &PackMember, old: &Piece, new: &Piece) -> Result<bool> {
        let mut named = !self.entries_naming(member, new).await?.is_empty();
        for (omap_key, _) in self.entries_naming(member, old).await? {
            let switched = self
                .update_omap_value(&member.index_oid, &omap_key, None, |raw| {
                    let Some(raw) = raw else {
                        return Ok(OmapChange::Keep(false));
                    };
                    let mut entry: ObjectEntry = layout::decode(raw)?;
                    if !entry.pieces.contains(old) {
                        return Ok(OmapChange::Keep(false));
                    }
                    for piece in &mut entry.pieces {
                        if piece == old {
                            *piece = new.clone();
                        }
                    }
                    Ok(OmapChange::Set(layout::encode(&entry), Vec::new(), true))
                })
                .await?;
            named |= switched;
        }
        Ok(named)
    }

    /// Queues whole data objects for the GC (removed after `gc_min_wait_s`, or now when it
    /// is 0); returns how many were removed now.
    async fn retire_whole(&self, oids: Vec<String>) -> u64 {
        let pieces = oids.into_iter().map(|oid| Piece::whole(oid, 0)).collect();
        self.retire_pieces(pieces).await
    }
}

/// The offset in the old pack a member of a rewritten pack came from.
fn member_origin(member: &PackMember) -> Result<u64> {
    member.moved_from.ok_or_else(|| {
        crate::GatewayError::Corrupt(format!(
            "a member of a rewritten pack ({}) does not say where it came from",
            member.key
        ))
    })
}
