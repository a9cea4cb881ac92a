//! Bucket lifecycle rules as stored with the bucket, their validation (as S3 answers a
//! PutBucketLifecycleConfiguration) and the pure decision of what a pass expires: which
//! versions of a key and which multipart uploads, given the time and the length of a day.
//! The executor that carries the decisions out is `lifecycle.rs`.

use serde::{Deserialize, Serialize};

use crate::error::{GatewayError, Result};
use crate::tagging::Tag;

/// The most rules a configuration holds (S3's limit).
pub const RULES_MAX: usize = 1000;
/// The longest rule ID, in characters (S3's limit).
pub const ID_CHARS_MAX: usize = 255;

/// A rule's filter as it was put (`<Filter>`), kept in its shape so GET answers it back.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct RuleFilter {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<Tag>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_greater_than_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_less_than_bytes: Option<u64>,
    /// `<And>`: every condition in it holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub and: Option<AndFilter>,
}

/// The `<And>` of a filter.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct AndFilter {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<Tag>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_greater_than_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_less_than_bytes: Option<u64>,
}

/// One lifecycle rule.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Rule {
    pub id: String,
    pub enabled: bool,
    /// The rule-level `<Prefix>` (the older form), when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<RuleFilter>,
    /// Current versions expire this many days after they were written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiration_days: Option<u32>,
    /// Current versions expire from this time (seconds since the epoch, a UTC midnight).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiration_date_s: Option<i64>,
    /// A delete marker left as its key's only version is removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expired_object_delete_marker: Option<bool>,
    /// Noncurrent versions expire this many days after they became noncurrent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noncurrent_days: Option<u32>,
    /// ... keeping this many newer noncurrent versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub newer_noncurrent_versions: Option<u32>,
    /// Multipart uploads are aborted this many days after they were initiated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort_multipart_days: Option<u32>,
}

/// The conditions of a rule's filter, flattened.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Conditions<'a> {
    prefix: &'a str,
    tags: Vec<&'a Tag>,
    size_greater_than_bytes: Option<u64>,
    size_less_than_bytes: Option<u64>,
}

impl Rule {
    fn conditions(&self) -> Conditions<'_> {
        let mut conditions = Conditions {
            prefix: self.prefix.as_deref().unwrap_or_default(),
            ..Conditions::default()
        };
        if let Some(filter) = &self.filter {
            if let Some(prefix) = &filter.prefix {
                conditions.prefix = prefix;
            }
            conditions.tags.extend(filter.tag.iter());
            conditions.size_greater_than_bytes = filter.size_greater_than_bytes;
            conditions.size_less_than_bytes = filter.size_less_than_bytes;
            if let Some(and) = &filter.and {
                if let Some(prefix) = &and.prefix {
                    conditions.prefix = prefix;
                }
                conditions.tags.extend(and.tags.iter());
                conditions.size_greater_than_bytes = and.size_greater_than_bytes;
                conditions.size_less_than_bytes = and.size_less_than_bytes;
            }
        }
        conditions
    }

    /// Whether the rule's filter takes an object of `key` with `tags` and `size_bytes`.
    pub fn matches(&self, key: &str, tags: &[Tag], size_bytes: u64) -> bool {
        let conditions = self.conditions();
        key.starts_with(conditions.prefix)
            && conditions.tags.iter().all(|wanted| tags.contains(wanted))
            && conditions
                .size_greater_than_bytes
                .is_none_or(|bound| size_bytes > bound)
            && conditions
                .size_less_than_bytes
                .is_none_or(|bound| size_bytes < bound)
    }

    /// Whether the rule's filter looks at the key only (multipart uploads have no tags or
    /// size yet: a rule with such conditions does not abort them).
    fn matches_key_only(&self, key: &str) -> bool {
        let conditions = self.conditions();
        key.starts_with(conditions.prefix)
            && conditions.tags.is_empty()
            && conditions.size_greater_than_bytes.is_none()
            && conditions.size_less_than_bytes.is_none()
    }
}

/// Checks rules as S3 does on PutBucketLifecycleConfiguration, giving missing IDs one.
pub fn validate(rules: &mut [Rule], new_id: &mut dyn FnMut() -> String) -> Result<()> {
    if rules.is_empty() || rules.len() > RULES_MAX {
        return Err(GatewayError::Malformed(format!(
            "a lifecycle configuration holds 1 to {RULES_MAX} rules"
        )));
    }
    for rule in rules.iter_mut() {
        if rule.id.is_empty() {
            rule.id = new_id();
        }
        if rule.id.chars().count() > ID_CHARS_MAX {
            return Err(GatewayError::InvalidArgument(format!(
                "a rule ID is at most {ID_CHARS_MAX} characters"
            )));
        }
        if rule.prefix.is_some() && rule.filter.is_some() {
            return Err(GatewayError::Malformed(
                "a rule has a Prefix or a Filter, not both".into(),
            ));
        }
        if let Some(filter) = &rule.filter {
            let given = [
                filter.prefix.is_some(),
                filter.tag.is_some(),
                filter.size_greater_than_bytes.is_some(),
                filter.size_less_than_bytes.is_some(),
                filter.and.is_some(),
            ];
            if given.iter().filter(|given| **given).count() > 1 {
                return Err(GatewayError::Malformed(
                    "a Filter holds one condition; several go in an And".into(),
                ));
            }
        }
        let conditions = rule.conditions();
        if let (Some(greater), Some(less)) = (
            conditions.size_greater_than_bytes,
            conditions.size_less_than_bytes,
        ) {
            if greater >= less {
                return Err(GatewayError::InvalidArgument(
                    "ObjectSizeGreaterThan must be less than ObjectSizeLessThan".into(),
                ));
            }
        }
        let tags: Vec<Tag> = conditions.tags.iter().map(|tag| (*tag).clone()).collect();
        crate::tagging::validate(&tags, usize::MAX)?;
        for days in [
            rule.expiration_days,
            rule.noncurrent_days,
            rule.abort_multipart_days,
        ]
        .into_iter()
        .flatten()
        {
            if days == 0 {
                return Err(GatewayError::InvalidArgument(
                    "days in a lifecycle rule must be a positive integer".into(),
                ));
            }
        }
        if rule.expiration_days.is_some() && rule.expiration_date_s.is_some() {
            return Err(GatewayError::Malformed(
                "an Expiration has Days or Date, not both".into(),
            ));
        }
        if rule.expired_object_delete_marker.is_some()
            && (rule.expiration_days.is_some() || rule.expiration_date_s.is_some())
        {
            return Err(GatewayError::Malformed(
                "ExpiredObjectDeleteMarker cannot be given with Days or Date".into(),
            ));
        }
        if rule.expired_object_delete_marker == Some(true) && !conditions.tags.is_empty() {
            return Err(GatewayError::InvalidArgument(
                "ExpiredObjectDeleteMarker cannot be given with a tag filter".into(),
            ));
        }
        if let Some(date_s) = rule.expiration_date_s {
            if date_s.rem_euclid(86_400) != 0 {
                return Err(GatewayError::InvalidArgument(
                    "an expiration Date must be a midnight UTC".into(),
                ));
            }
        }
        if rule.abort_multipart_days.is_some() && !conditions.tags.is_empty() {
            return Err(GatewayError::InvalidArgument(
                "AbortIncompleteMultipartUpload cannot be given with a tag filter".into(),
            ));
        }
        let acts = rule.expiration_days.is_some()
            || rule.expiration_date_s.is_some()
            || rule.expired_object_delete_marker.is_some()
            || rule.noncurrent_days.is_some()
            || rule.abort_multipart_days.is_some();
        if !acts {
            return Err(GatewayError::InvalidRequest(
                "at least one action needs to be specified in a rule".into(),
            ));
        }
    }
    let mut ids: Vec<&str> = rules.iter().map(|rule| rule.id.as_str()).collect();
    ids.sort_unstable();
    if ids.windows(2).any(|pair| pair[0] == pair[1]) {
        return Err(GatewayError::InvalidArgument(
            "rule IDs must be unique".into(),
        ));
    }
    Ok(())
}

/// One version of a key as a pass sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionView {
    pub size_bytes: u64,
    pub mtime_ns: u64,
    pub tags: Vec<Tag>,
    pub delete_marker: bool,
}

/// What a pass does to one version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// The current version expires: deleted as DeleteObject without a version id does
    /// (removed without versioning, else a delete marker on top).
    ExpireCurrent,
    /// This version (a noncurrent one, or a delete marker left alone) is removed for good.
    RemoveVersion,
}

/// The time a version `days` days after `from_ns` expires at.
fn after_days(from_ns: u64, days: u32, day_ns: u64) -> u64 {
    from_ns.saturating_add(u64::from(days).saturating_mul(day_ns))
}

/// What a pass at `now_ns` does to the versions of `key` (newest first; a bucket without
/// versioning has one), with days of `day_ns`: the index of each version acted on and how.
pub fn decide_key(
    rules: &[Rule],
    key: &str,
    versions: &[VersionView],
    now_ns: u64,
    day_ns: u64,
) -> Vec<(usize, Action)> {
    let mut actions = Vec::new();
    let enabled: Vec<&Rule> = rules.iter().filter(|rule| rule.enabled).collect();
    let Some(current) = versions.first() else {
        return actions;
    };
    let mut removed = vec![false; versions.len()];
    // Noncurrent versions: each became noncurrent when the next newer one was written.
    for (index, version) in versions.iter().enumerate().skip(1) {
        // The noncurrent versions newer than this one.
        let newer_noncurrent = u32::try_from(index - 1).unwrap_or(u32::MAX);
        let since_ns = versions[index - 1].mtime_ns;
        let expires = enabled.iter().any(|rule| {
            let Some(days) = rule.noncurrent_days else {
                return false;
            };
            rule.matches(key, &version.tags, version.size_bytes)
                && now_ns >= after_days(since_ns, days, day_ns)
                && rule
                    .newer_noncurrent_versions
                    .is_none_or(|keep| newer_noncurrent >= keep)
        });
        if expires {
            removed[index] = true;
            actions.push((index, Action::RemoveVersion));
        }
    }
    let only_version = removed.iter().skip(1).all(|gone| *gone);
    if current.delete_marker {
        // A delete marker left as its key's only version.
        let expires = only_version
            && enabled.iter().any(|rule| {
                rule.matches(key, &current.tags, 0)
                    && (rule.expired_object_delete_marker == Some(true)
                        || rule.expiration_days.is_some_and(|days| {
                            now_ns >= after_days(current.mtime_ns, days, day_ns)
                        }))
            });
        if expires {
            actions.push((0, Action::RemoveVersion));
        }
    } else {
        let expires = enabled.iter().any(|rule| {
            rule.matches(key, &current.tags, current.size_bytes)
                && (rule
                    .expiration_days
                    .is_some_and(|days| now_ns >= after_days(current.mtime_ns, days, day_ns))
                    || rule
                        .expiration_date_s
                        .is_some_and(|date_s| now_ns as i128 >= i128::from(date_s) * 1_000_000_000))
        });
        if expires {
            actions.push((0, Action::ExpireCurrent));
        }
    }
    actions
}

/// Whether a multipart upload of `key` initiated at `initiated_ns` is aborted by a pass at
/// `now_ns`.
pub fn upload_expires(
    rules: &[Rule],
    key: &str,
    initiated_ns: u64,
    now_ns: u64,
    day_ns: u64,
) -> bool {
    rules.iter().any(|rule| {
        rule.enabled
            && rule.matches_key_only(key)
            && rule
                .abort_multipart_days
                .is_some_and(|days| now_ns >= after_days(initiated_ns, days, day_ns))
    })
}

/// When the current version of `key` (written at `mtime_ns`, with `tags` and `size_bytes`)
/// expires by the rules' days, and the rule that says so: the soonest (for the
/// `x-amz-expiration` header).
pub fn expiry_of<'a>(
    rules: &'a [Rule],
    key: &str,
    tags: &[Tag],
    size_bytes: u64,
    mtime_ns: u64,
    day_ns: u64,
) -> Option<(u64, &'a str)> {
    rules
        .iter()
        .filter(|rule| rule.enabled && rule.matches(key, tags, size_bytes))
        .filter_map(|rule| {
            let at_ns = match (rule.expiration_days, rule.expiration_date_s) {
                (Some(days), _) => after_days(mtime_ns, days, day_ns),
                (None, Some(date_s)) => u64::try_from(date_s)
                    .unwrap_or(0)
                    .saturating_mul(1_000_000_000),
                (None, None) => return None,
            };
            Some((at_ns, rule.id.as_str()))
        })
        .min()
}

#[cfg(test)]
#[path = "lifecycle_rules_tests.rs"]
mod tests;
