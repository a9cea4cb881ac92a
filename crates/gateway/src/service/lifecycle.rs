//! Bucket lifecycle: the Put/Get/DeleteBucketLifecycleConfiguration operations, the
//! `x-amz-expiration` header, and the executor of a lifecycle pass (what expires is decided by
//! [`super::lifecycle_rules`]; versions are deleted through DeleteObject's own path, uploads
//! aborted through AbortMultipartUpload's). [`LifecycleLoop`] runs passes on a
//! [`worker::Worker`].

use rados::RadosError;
use s3s::dto::*;
use s3s::S3Request;

use super::convert;
use super::lifecycle_rules::{self, Action, AndFilter, Rule, RuleFilter, VersionView};
use super::Gateway;
use crate::error::{GatewayError, Result};
use crate::layout::{self, BucketRecord, ObjectEntry, UploadRecord};
use crate::list::{self, VersionItem};
use crate::store::DeleteCondition;
use crate::versioning::{Found, NULL_VERSION_ID};

/// A day of the `x-amz-expiration` header (always a real one, as S3 answers).
const HEADER_DAY_NS: u64 = 86_400_000_000_000;
/// Versions listed per page by a pass.
const PAGE_VERSIONS: usize = 1000;

/// What one lifecycle pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LifecycleReport {
    /// Buckets with a lifecycle configuration looked at.
    pub buckets: u64,
    /// Current versions expired (deleted, or hidden under a delete marker).
    pub expired: u64,
    /// Noncurrent versions and lone delete markers removed.
    pub versions_removed: u64,
    /// Multipart uploads aborted.
    pub uploads_aborted: u64,
}

fn tag_from_dto(tag: &Tag) -> crate::tagging::Tag {
    crate::tagging::Tag {
        key: tag.key.clone().unwrap_or_default(),
        value: tag.value.clone().unwrap_or_default(),
    }
}

fn tag_to_dto(tag: &crate::tagging::Tag) -> Tag {
    Tag {
        key: Some(tag.key.clone()),
        value: Some(tag.value.clone()),
    }
}

fn size_bound(bytes: Option<i64>) -> Result<Option<u64>> {
    bytes
        .map(|bytes| {
            u64::try_from(bytes).map_err(|_| {
                GatewayError::InvalidArgument("an object size bound is not negative".into())
            })
        })
        .transpose()
}

fn days(days: Option<i32>) -> Result<Option<u32>> {
    days.map(|days| {
        u32::try_from(days).map_err(|_| {
            GatewayError::InvalidArgument(
                "days in a lifecycle rule must be a positive integer".into(),
            )
        })
    })
    .transpose()
}

/// A rule as put, checked for what the DTO lets through and S3 refuses.
fn rule_from_dto(rule: LifecycleRule) -> Result<Rule> {
    let enabled = match rule.status.as_str() {
        ExpirationStatus::ENABLED => true,
        ExpirationStatus::DISABLED => false,
        other => {
            return Err(GatewayError::Malformed(format!(
                "Status {other:?} (valid: Enabled, Disabled)"
            )))
        }
    };
    if rule.transitions.as_ref().is_some_and(|t| !t.is_empty())
        || rule
            .noncurrent_version_transitions
            .as_ref()
            .is_some_and(|t| !t.is_empty())
    {
        return Err(GatewayError::NotImplemented(
            "lifecycle transitions: strata has one storage class".into(),
        ));
    }
    let filter = match rule.filter {
        None => None,
        Some(filter) => Some(RuleFilter {
            prefix: filter.prefix,
            tag: filter.tag.as_ref().map(tag_from_dto),
            size_greater_than_bytes: size_bound(filter.object_size_greater_than)?,
            size_less_than_bytes: size_bound(filter.object_size_less_than)?,
            and: match filter.and {
                None => None,
                Some(and) => Some(AndFilter {
                    prefix: and.prefix,
                    tags: and
                        .tags
                        .unwrap_or_default()
                        .iter()
                        .map(tag_from_dto)
                        .collect(),
                    size_greater_than_bytes: size_bound(and.object_size_greater_than)?,
                    size_less_than_bytes: size_bound(and.object_size_less_than)?,
                }),
            },
        }),
    };
    let expiration = rule.expiration.unwrap_or_default();
    let noncurrent = rule.noncurrent_version_expiration;
    Ok(Rule {
        id: rule.id.unwrap_or_default(),
        enabled,
        prefix: rule.prefix,
        filter,
        expiration_days: days(expiration.days)?,
        expiration_date_s: expiration.date.as_ref().map(convert::seconds),
        expired_object_delete_marker: expiration.expired_object_delete_marker,
        noncurrent_days: days(noncurrent.as_ref().and_then(|n| n.noncurrent_days))?,
        newer_noncurrent_versions: days(
            noncurrent
                .as_ref()
                .and_then(|n| n.newer_noncurrent_versions),
        )?,
        abort_multipart_days: days(
            rule.abort_incomplete_multipart_upload
                .and_then(|a| a.days_after_initiation),
        )?,
    })
}

fn rule_to_dto(rule: &Rule) -> LifecycleRule {
    let expiration = (rule.expiration_days.is_some()
        || rule.expiration_date_s.is_some()
        || rule.expired_object_delete_marker.is_some())
    .then(|| LifecycleExpiration {
        date: rule
            .expiration_date_s
            .map(|s| convert::timestamp(u64::try_from(s).unwrap_or(0) * 1_000_000_000)),
        days: rule.expiration_days.map(|d| d as i32),
        expired_object_delete_marker: rule.expired_object_delete_marker,
    });
    let size = |bytes: Option<u64>| bytes.map(|b| b as i64);
    LifecycleRule {
        abort_incomplete_multipart_upload: rule.abort_multipart_days.map(|d| {
            AbortIncompleteMultipartUpload {
                days_after_initiation: Some(d as i32),
            }
        }),
        expiration,
        filter: rule.filter.as_ref().map(|filter| LifecycleRuleFilter {
            and: filter.and.as_ref().map(|and| LifecycleRuleAndOperator {
                object_size_greater_than: size(and.size_greater_than_bytes),
                object_size_less_than: size(and.size_less_than_bytes),
                prefix: and.prefix.clone(),
                tags: (!and.tags.is_empty()).then(|| and.tags.iter().map(tag_to_dto).collect()),
            }),
            object_size_greater_than: size(filter.size_greater_than_bytes),
            object_size_less_than: size(filter.size_less_than_bytes),
            prefix: filter.prefix.clone(),
            tag: filter.tag.as_ref().map(tag_to_dto),
        }),
        id: Some(rule.id.clone()),
        noncurrent_version_expiration: rule.noncurrent_days.map(|d| NoncurrentVersionExpiration {
            newer_noncurrent_versions: rule.newer_noncurrent_versions.map(|n| n as i32),
            noncurrent_days: Some(d as i32),
        }),
        noncurrent_version_transitions: None,
        prefix: rule.prefix.clone(),
        status: ExpirationStatus::from_static(if rule.enabled {
            ExpirationStatus::ENABLED
        } else {
            ExpirationStatus::DISABLED
        }),
        transitions: None,
    }
}

/// The `x-amz-expiration` header of an object's current version under `bucket`'s rules:
/// the midnight UTC after its expiry, and the rule.
pub(super) fn expiration_header(
    bucket: &BucketRecord,
    key: &str,
    entry: &ObjectEntry,
) -> Option<String> {
    let rules = bucket.lifecycle.as_deref()?;
    let (at_ns, rule_id) = lifecycle_rules::expiry_of(
        rules,
        key,
        &entry.tags,
        entry.size,
        entry.mtime_ns,
        HEADER_DAY_NS,
    )?;
    let midnight_ns = at_ns.div_ceil(HEADER_DAY_NS) * HEADER_DAY_NS;
    let date = httpdate::fmt_http_date(
        std::time::UNIX_EPOCH + std::time::Duration::from_nanos(midnight_ns),
    );
    Some(format!("expiry-date=\"{date}\", rule-id=\"{rule_id}\""))
}

impl Gateway {
    pub(super) async fn do_put_bucket_lifecycle_configuration(
        &self,
        req: S3Request<PutBucketLifecycleConfigurationInput>,
    ) -> Result<PutBucketLifecycleConfigurationOutput> {
        let requester = self.requester(&req).await?;
        let input = req.input;
        let mut bucket = self
            .owned_bucket(&input.bucket, &requester, "s3:PutLifecycleConfiguration")
            .await?;
        let configuration = input.lifecycle_configuration.ok_or_else(|| {
            GatewayError::Malformed("the request has no LifecycleConfiguration".into())
        })?;
        let mut rules = configuration
            .rules
            .into_iter()
            .map(rule_from_dto)
            .collect::<Result<Vec<_>>>()?;
        lifecycle_rules::validate(&mut rules, &mut || self.store.new_tag(16))?;
        bucket.lifecycle = Some(rules);
        self.store.save_bucket(&bucket).await?;
        Ok(PutBucketLifecycleConfigurationOutput::default())
    }

    pub(super) async fn do_get_bucket_lifecycle_configuration(
        &self,
        req: S3Request<GetBucketLifecycleConfigurationInput>,
    ) -> Result<GetBucketLifecycleConfigurationOutput> {
        let requester = self.requester(&req).await?;
        let bucket = self
            .owned_bucket(
                &req.input.bucket,
                &requester,
                "s3:GetLifecycleConfiguration",
            )
            .await?;
        let rules = bucket
            .lifecycle
            .ok_or(GatewayError::NoSuchLifecycleConfiguration)?;
        Ok(GetBucketLifecycleConfigurationOutput {
            rules: Some(rules.iter().map(rule_to_dto).collect()),
            ..Default::default()
        })
    }

    pub(super) async fn do_delete_bucket_lifecycle(
        &self,
        req: S3Request<DeleteBucketLifecycleInput>,
    ) -> Result<DeleteBucketLifecycleOutput> {
        let requester = self.requester(&req).await?;
        let mut bucket = self
            .owned_bucket(
                &req.input.bucket,
                &requester,
                "s3:PutLifecycleConfiguration",
            )
            .await?;
        if bucket.lifecycle.take().is_some() {
            self.store.save_bucket(&bucket).await?;
        }
        Ok(DeleteBucketLifecycleOutput::default())
    }

    /// One lifecycle pass at `now_ns` (ns since the epoch) over every bucket with rules, a
    /// day lasting `day_ns`. A bucket that fails is logged and the pass goes on.
    pub async fn lifecycle_pass(&self, now_ns: u64, day_ns: u64) -> Result<LifecycleReport> {
        let mut report = LifecycleReport::default();
        for bucket in self.store.buckets().await? {
            let Some(rules) = bucket.lifecycle.clone() else {
                continue;
            };
            report.buckets += 1;
            if let Err(error) = self
                .lifecycle_bucket(&bucket, &rules, now_ns, day_ns, &mut report)
                .await
            {
                tracing::warn!(bucket = %bucket.name, %error, "lifecycle pass over a bucket failed");
            }
        }
        Ok(report)
    }

    async fn lifecycle_bucket(
        &self,
        bucket: &BucketRecord,
        rules: &[Rule],
        now_ns: u64,
        day_ns: u64,
        report: &mut LifecycleReport,
    ) -> Result<()> {
        if rules.iter().any(|r| {
            r.expiration_days.is_some()
                || r.expiration_date_s.is_some()
                || r.expired_object_delete_marker.is_some()
                || r.noncurrent_days.is_some()
        }) {
            self.lifecycle_versions(bucket, rules, now_ns, day_ns, report)
                .await?;
        }
        if rules.iter().any(|r| r.abort_multipart_days.is_some()) {
            self.lifecycle_uploads(bucket, rules, now_ns, day_ns, report)
                .await?;
        }
        Ok(())
    }

    /// Walks every version of the bucket, a key's versions together.
    async fn lifecycle_versions(
        &self,
        bucket: &BucketRecord,
        rules: &[Rule],
        now_ns: u64,
        day_ns: u64,
        report: &mut LifecycleReport,
    ) -> Result<()> {
        let mut key_marker: Option<String> = None;
        let mut after_version: Option<String> = None;
        let mut group: Vec<VersionItem> = Vec::new();
        loop {
            let listing = list::list_versions(
                self.store.index.clone(),
                bucket,
                "",
                "",
                key_marker.as_deref(),
                after_version.as_deref(),
                PAGE_VERSIONS,
            )
            .await?;
            for item in listing.items {
                if group.first().is_some_and(|first| first.key != item.key) {
                    let done = std::mem::take(&mut group);
                    self.lifecycle_key(bucket, rules, done, now_ns, day_ns, report)
                        .await;
                }
                group.push(item);
            }
            if !listing.truncated {
                break;
            }
            let (Some(key), Some(version)) = (listing.next_key, listing.next_version_id) else {
                break;
            };
            after_version = if version == NULL_VERSION_ID {
                let state = self.store.key_state(bucket, &key, usize::MAX).await?;
                match state.find(NULL_VERSION_ID) {
                    Some(Found::Entry(i)) => Some(state.versions[i].suffix.clone()),
                    _ => None,
                }
            } else {
                Some(version)
            };
            key_marker = Some(key);
        }
        if !group.is_empty() {
            self.lifecycle_key(bucket, rules, group, now_ns, day_ns, report)
                .await;
        }
        Ok(())
    }

    /// Carries out the decision on one key's versions (newest first). Each delete is
    /// guarded by the version's ETag, so a version written since the listing stays.
    async fn lifecycle_key(
        &self,
        bucket: &BucketRecord,
        rules: &[Rule],
        versions: Vec<VersionItem>,
        now_ns: u64,
        day_ns: u64,
        report: &mut LifecycleReport,
    ) {
        let Some(key) = versions.first().map(|v| v.key.clone()) else {
            return;
        };
        let views: Vec<VersionView> = versions
            .iter()
            .map(|item| VersionView {
                size_bytes: item.entry.size,
                mtime_ns: item.entry.mtime_ns,
                tags: item.entry.tags.clone(),
                delete_marker: item.entry.delete_marker,
            })
            .collect();
        for (index, action) in lifecycle_rules::decide_key(rules, &key, &views, now_ns, day_ns) {
            let item = &versions[index];
            let condition = DeleteCondition {
                if_match: Some(item.entry.etag.clone()).filter(|etag| !etag.is_empty()),
                ..DeleteCondition::default()
            };
            let result = match action {
                Action::ExpireCurrent => {
                    self.delete_one(bucket, &key, None, &bucket.owner, &condition)
                        .await
                }
                Action::RemoveVersion => {
                    self.delete_one(
                        bucket,
                        &key,
                        Some(&item.version_id),
                        &bucket.owner,
                        &condition,
                    )
                    .await
                }
            };
            match (result, action) {
                (Ok(_), Action::ExpireCurrent) => report.expired += 1,
                (Ok(_), Action::RemoveVersion) => report.versions_removed += 1,
                (Err(GatewayError::PreconditionFailed), _) => {}
                (Err(error), _) => {
                    tracing::warn!(bucket = %bucket.name, %key, %error, "lifecycle delete failed");
                }
            }
        }
    }

    /// Aborts the uploads past their rule's days.
    async fn lifecycle_uploads(
        &self,
        bucket: &BucketRecord,
        rules: &[Rule],
        now_ns: u64,
        day_ns: u64,
        report: &mut LifecycleReport,
    ) -> Result<()> {
        let oid = layout::uploads_object(&bucket.id);
        let mut after: Option<Vec<u8>> = None;
        let mut expired = Vec::new();
        loop {
            let page = match self
                .store
                .index
                .omap_get_vals(&oid, after.as_deref(), b"", 1000)
                .await
            {
                Ok(page) => page,
                Err(RadosError::NotFound(_)) => break,
                Err(error) => return Err(error.into()),
            };
            for (key, value) in &page.entries {
                after = Some(key.clone());
                let record: UploadRecord = layout::decode(value)?;
                if lifecycle_rules::upload_expires(
                    rules,
                    &record.key,
                    record.initiated_ns,
                    now_ns,
                    day_ns,
                ) {
                    expired.push(record);
                }
            }
            if !page.more || page.entries.is_empty() {
                break;
            }
        }
        for record in expired {
            let _guard = self.store.lock_upload(&record.upload_id).await;
            match self
                .forget_completed_upload(bucket, &record.key, &record.upload_id)
                .await
            {
                Ok(()) => report.uploads_aborted += 1,
                Err(error) => tracing::warn!(
                    bucket = %bucket.name, key = %record.key, %error,
                    "lifecycle abort of a multipart upload failed"
                ),
            }
        }
        Ok(())
    }
}

/// Lifecycle passes on a [`worker::Worker`]: each step is one pass at the clock's time (ms
/// since the epoch), with days of `day_ms`.
pub struct LifecycleLoop {
    pub gateway: Gateway,
    pub day_ms: u64,
}

#[async_trait::async_trait]
impl worker::Step for LifecycleLoop {
    async fn step(&mut self, now_ms: u64) -> worker::Next {
        let now_ns = now_ms.saturating_mul(1_000_000);
        let day_ns = self.day_ms.saturating_mul(1_000_000);
        match self.gateway.lifecycle_pass(now_ns, day_ns).await {
            Ok(report) if report != LifecycleReport::default() => {
                tracing::debug!(?report, "lifecycle pass");
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "lifecycle pass failed"),
        }
        worker::Next::Sleep
    }
}

/// How often the lifecycle worker runs a pass for days of `day_ms`: ten times a day, at
/// least every second and at most every hour.
pub fn lifecycle_period_ms(day_ms: u64) -> u64 {
    (day_ms / 10).clamp(1000, 3_600_000)
}
