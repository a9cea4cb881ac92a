//! A key's versions in a bucket with versioning: reading them, and carrying out the plans of
//! [`crate::versioning`] as one guarded omap write to the key's shard.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use rados::{RadosError, WriteOp};

use super::{races_exhausted, same_version, Intent, Store, Stored, INDEX_RACE_RETRIES};
use super::{DeleteCondition, OmapChange, WriteCondition};
use crate::error::{GatewayError, Result};
use crate::layout::{self, BucketRecord, ObjectEntry, Versioning};
use crate::versioning::{self, Found, KeyState, Plan, Version};

impl Store {
    /// A write time for a new version of a key whose newest version was written at
    /// `after_ns`: the clock, but strictly after that and after every version this process
    /// created before.
    fn version_time_ns(&self, after_ns: u64) -> u64 {
        let now = self.now_ns();
        let mut last = self.version_time_ns_last.load(Ordering::Relaxed);
        loop {
            let time = now.max(last + 1).max(after_ns + 1);
            match self.version_time_ns_last.compare_exchange(
                last,
                time,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return time,
                Err(current) => last = current,
            }
        }
    }

    /// Up to `max` version entries of `key`, newest first.
    async fn versions_of(
        &self,
        bucket: &BucketRecord,
        key: &str,
        max: usize,
    ) -> Result<Vec<Version>> {
        self.versions_stored(bucket, key, max, &mut Stored::new())
            .await
    }

    /// [`Store::versions_of`], also recording each entry's stored bytes in `stored`.
    async fn versions_stored(
        &self,
        bucket: &BucketRecord,
        key: &str,
        max: usize,
        stored: &mut Stored,
    ) -> Result<Vec<Version>> {
        let oid = layout::index_shard_object(&bucket.id, layout::shard_of(key, bucket.shards));
        let prefix = layout::versions_prefix(key);
        let mut out = Vec::new();
        let mut after: Option<Vec<u8>> = None;
        while out.len() < max {
            let want = (max - out.len()).min(1000);
            let page = match self
                .index
                .omap_get_vals(&oid, after.as_deref(), &prefix, want)
                .await
            {
                Ok(page) => page,
                Err(RadosError::NotFound(_)) => break,
                Err(error) => return Err(error.into()),
            };
            for (raw, value) in &page.entries {
                let (_, suffix) = layout::parse_version_key(raw)
                    .ok_or_else(|| GatewayError::Corrupt(format!("version key {raw:?}")))?;
                out.push(Version {
                    suffix,
                    entry: layout::decode(value)?,
                });
                stored.insert(raw.clone(), value.clone());
                after = Some(raw.clone());
            }
            if !page.more || page.entries.is_empty() {
                break;
            }
        }
        Ok(out)
    }

    /// The object of `key` (its plain entry or a version) that multipart upload `upload_id`
    /// completed into, if one did.
    pub async fn completed_by(
        &self,
        bucket: &BucketRecord,
        key: &str,
        upload_id: &str,
    ) -> Result<Option<ObjectEntry>> {
        let state = self.key_state(bucket, key, usize::MAX).await?;
        Ok(state
            .plain
            .into_iter()
            .chain(state.versions.into_iter().map(|version| version.entry))
            .find(|entry| entry.upload_id.as_deref() == Some(upload_id)))
    }

    /// The data objects the versions of `key` use (its plain entry and every version).
    pub async fn pieces_in_use(
        &self,
        bucket: &BucketRecord,
        key: &str,
    ) -> Result<BTreeSet<String>> {
        let state = self.key_state(bucket, key, usize::MAX).await?;
        Ok(state
            .plain
            .iter()
            .chain(state.versions.iter().map(|version| &version.entry))
            .flat_map(|entry| entry.pieces.iter().map(|piece| piece.oid.clone()))
            .collect())
    }

    /// The plain entry and up to `versions_max` version entries of `key`, read concurrently.
    pub async fn key_state(
        &self,
        bucket: &BucketRecord,
        key: &str,
        versions_max: usize,
    ) -> Result<KeyState> {
        Ok(self.key_state_stored(bucket, key, versions_max).await?.0)
    }

    /// [`Store::key_state`] with the stored bytes of every entry read (the guards of
    /// [`Store::carry_out`]).
    async fn key_state_stored(
        &self,
        bucket: &BucketRecord,
        key: &str,
        versions_max: usize,
    ) -> Result<(KeyState, Stored)> {
        let mut stored = Stored::new();
        let (plain_raw, versions) = futures::try_join!(
            self.index_value(bucket, key, key.as_bytes().to_vec()),
            self.versions_stored(bucket, key, versions_max, &mut stored)
        )?;
        let plain = plain_raw.as_deref().map(layout::decode).transpose()?;
        if let Some(raw) = plain_raw {
            stored.insert(key.as_bytes().to_vec(), raw);
        }
        Ok((KeyState { plain, versions }, stored))
    }

    /// Writes `plan` to the key's shard in one atomic omap change, then frees its pieces.
    /// Every omap key the plan sets or removes is guarded to still hold what was read into
    /// `stored` (absent if not there): `false` when another gateway changed one meanwhile
    /// (nothing was written; the caller reads and plans again).
    async fn carry_out(
        &self,
        bucket: &BucketRecord,
        key: &str,
        plan: Plan,
        stored: &Stored,
        intent: Option<&Intent>,
    ) -> Result<bool> {
        let oid = layout::index_shard_object(&bucket.id, layout::shard_of(key, bucket.shards));
        let touched: BTreeSet<&Vec<u8>> = plan
            .remove
            .iter()
            .chain(plan.set.iter().map(|(k, _)| k))
            .collect();
        let mut op = WriteOp::new();
        for omap_key in touched {
            op = op.compare_omap(omap_key.clone(), stored.get(omap_key).cloned());
        }
        if !plan.remove.is_empty() {
            op = op.omap_remove_keys(plan.remove);
        }
        if !plan.set.is_empty() {
            let set = plan
                .set
                .iter()
                .map(|(k, entry)| (k.clone(), layout::encode(entry)))
                .collect();
            op = op.omap_set(set);
        }
        if let Some(intent) = intent {
            assert_eq!(intent.oid, oid, "a write commits where its intent is");
            op = intent.consume(intent.guard(op));
        }
        match self.index.operate(&oid, op).await {
            Ok(()) => {
                self.retire_pieces(plan.freed).await;
                Ok(true)
            }
            Err(RadosError::CompareFailed(_)) => {
                self.check_intent(intent).await?;
                self.counters.index_races.fetch_add(1, Ordering::Relaxed);
                Ok(false)
            }
            Err(error) => Err(error.into()),
        }
    }

    /// `entry` as a new version of `key` (an object or a delete marker), as stored.
    pub(super) async fn commit_version(
        &self,
        bucket: &BucketRecord,
        key: &str,
        mut entry: ObjectEntry,
        status: Versioning,
        condition: &WriteCondition,
        intent: Option<&Intent>,
    ) -> Result<ObjectEntry> {
        let _guard = self.locks.lock(&bucket.id, key).await;
        // Enabled needs only the newest version (for the ordering); Suspended must find the
        // null version wherever it is.
        let versions_max = match status {
            Versioning::Enabled => 1,
            Versioning::Suspended => usize::MAX,
        };
        for _ in 0..INDEX_RACE_RETRIES {
            let (state, stored) = self.key_state_stored(bucket, key, versions_max).await?;
            condition.check(key, state.current())?;
            entry.mtime_ns = self.version_time_ns(state.newest_mtime_ns());
            let suffix = layout::version_suffix(entry.mtime_ns, &self.new_tag(4));
            let (plan, written) =
                versioning::plan_write(key, &state, status, entry.clone(), &suffix);
            if self.carry_out(bucket, key, plan, &stored, intent).await? {
                return Ok(written);
            }
        }
        Err(races_exhausted(&format!("{}/{key}", bucket.name)))
    }

    /// A delete marker on top of `key` (bucket with versioning), as stored.
    pub async fn delete_marker(
        &self,
        bucket: &BucketRecord,
        key: &str,
        owner: &str,
    ) -> Result<ObjectEntry> {
        let status = bucket.versioning.ok_or_else(|| {
            GatewayError::Corrupt(format!("{key}: a version in a bucket without versioning"))
        })?;
        let marker = ObjectEntry {
            owner: owner.to_string(),
            delete_marker: true,
            ..ObjectEntry::default()
        };
        self.commit_version(
            bucket,
            key,
            marker,
            status,
            &WriteCondition::default(),
            None,
        )
        .await
    }

    /// Checks a version id from a request: `null` or one this gateway could have generated.
    pub fn check_version_id(version_id: &str) -> Result<()> {
        if version_id == versioning::NULL_VERSION_ID || layout::is_version_suffix(version_id) {
            Ok(())
        } else {
            Err(GatewayError::InvalidArgument(format!(
                "invalid version id {version_id:?}"
            )))
        }
    }

    /// The version `version_id` of `key` (`null` included), if it exists.
    pub async fn version(
        &self,
        bucket: &BucketRecord,
        key: &str,
        version_id: &str,
    ) -> Result<Option<ObjectEntry>> {
        Self::check_version_id(version_id)?;
        if version_id == versioning::NULL_VERSION_ID {
            let state = self.key_state(bucket, key, usize::MAX).await?;
            return Ok(state.find(version_id).and_then(|f| state.get(f)).cloned());
        }
        self.index_entry(bucket, key, layout::version_key(key, version_id))
            .await
    }

    /// The newest version of `key`, a delete marker included (`None`: no version).
    pub async fn newest_version(
        &self,
        bucket: &BucketRecord,
        key: &str,
    ) -> Result<Option<ObjectEntry>> {
        let state = self.key_state(bucket, key, 1).await?;
        Ok(match state.versions.first() {
            Some(newest) => Some(newest.entry.clone()),
            None => state.legacy().cloned(),
        })
    }

    /// The newest version of `key` if it is a delete marker (why a GET finds no object).
    pub async fn latest_delete_marker(
        &self,
        bucket: &BucketRecord,
        key: &str,
    ) -> Result<Option<ObjectEntry>> {
        let newest = self.versions_of(bucket, key, 1).await?;
        Ok(newest
            .into_iter()
            .next()
            .map(|v| v.entry)
            .filter(|e| e.delete_marker))
    }

    /// Removes version `version_id` of `key` for good, with its data; returns it, or `None`
    /// when there is no such version (removing it again is no error, as in S3).
    /// The version must pass `condition`, checked on the state the guarded removal is
    /// decided on (412 when it fails).
    pub async fn remove_version_if(
        &self,
        bucket: &BucketRecord,
        key: &str,
        version_id: &str,
        condition: &DeleteCondition,
    ) -> Result<Option<ObjectEntry>> {
        Self::check_version_id(version_id)?;
        let _guard = self.locks.lock(&bucket.id, key).await;
        for _ in 0..INDEX_RACE_RETRIES {
            let (state, stored) = self.key_state_stored(bucket, key, usize::MAX).await?;
            let Some(found) = state.find(version_id) else {
                return Ok(None);
            };
            let removed = state.get(found).cloned();
            condition.check(removed.as_ref())?;
            let plan = versioning::plan_remove(key, &state, found);
            if self.carry_out(bucket, key, plan, &stored, None).await? {
                return Ok(removed);
            }
        }
        Err(races_exhausted(&format!("{}/{key}", bucket.name)))
    }

    /// Replaces version `version_id` of `key` (the latest when `None`) by `entry`, the same
    /// version with other metadata (an ACL), provided it is still `read`, the version the
    /// caller read and checked: returns false when an overwrite or a delete replaced it since
    /// (writing the stale entry back would undo that acknowledged change), for the caller to
    /// read and check again.
    pub async fn update_version(
        &self,
        bucket: &BucketRecord,
        key: &str,
        version_id: Option<&str>,
        read: &ObjectEntry,
        entry: ObjectEntry,
    ) -> Result<bool> {
        /// What the unversioned update found.
        enum Plain {
            Done,
            Changed,
            BucketVersioned,
        }
        let null = version_id.is_none_or(|v| v == versioning::NULL_VERSION_ID);
        if bucket.versioning.is_none() && null {
            let outcome = self
                .update_plain(bucket, key, None, |old| match old {
                    Some(old) if old.version_id.is_some() => {
                        OmapChange::Keep(Plain::BucketVersioned)
                    }
                    Some(old) if same_version(&old, read) => {
                        OmapChange::Set(layout::encode(&entry), Vec::new(), Plain::Done)
                    }
                    _ => OmapChange::Keep(Plain::Changed),
                })
                .await?;
            match outcome {
                Plain::Done => return Ok(true),
                Plain::Changed => return Ok(false),
                Plain::BucketVersioned => {}
            }
        }
        let _guard = self.locks.lock(&bucket.id, key).await;
        for _ in 0..INDEX_RACE_RETRIES {
            let (state, stored) = self.key_state_stored(bucket, key, usize::MAX).await?;
            let found = match version_id {
                Some(v) => state.find(v),
                None => match &state.plain {
                    Some(plain) if plain.version_id.is_none() => Some(Found::Legacy),
                    Some(_) => Some(Found::Entry(0)),
                    None => None,
                },
            };
            // Gone or replaced since the caller read it: the caller reads and checks again.
            let Some(found) = found.filter(|&found| {
                state
                    .get(found)
                    .is_some_and(|current| same_version(current, read))
            }) else {
                return Ok(false);
            };
            let plan = versioning::plan_update(key, &state, found, entry.clone());
            if self.carry_out(bucket, key, plan, &stored, None).await? {
                return Ok(true);
            }
        }
        Err(races_exhausted(&format!("{}/{key}", bucket.name)))
    }
}
