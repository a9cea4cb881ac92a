//! Conversions between stored records and s3s DTOs: timestamps, ETags, headers, conditions,
//! URL encoding of listed keys.

use std::collections::BTreeMap;

use s3s::dto::{ETag, ETagCondition, Metadata, Timestamp, TimestampFormat};

use crate::error::{GatewayError, Result};
use crate::layout::ObjectEntry;

/// A stored ns timestamp as an S3 timestamp (whole seconds, as S3 reports them).
pub fn timestamp(ns: u64) -> Timestamp {
    let seconds = (ns / 1_000_000_000) as i64;
    let time = time::OffsetDateTime::from_unix_timestamp(seconds)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    Timestamp::from(time)
}

/// Seconds since the epoch of an S3 timestamp.
pub fn seconds(ts: &Timestamp) -> i64 {
    time::OffsetDateTime::from(ts.clone()).unix_timestamp()
}

/// A stored hex ETag as the DTO.
pub fn etag(value: &str) -> ETag {
    ETag::Strong(value.to_string())
}

/// Formats a timestamp as an HTTP date (for stored `expires`).
pub fn http_date(ts: &Timestamp) -> String {
    let mut out = Vec::new();
    let _ = ts.format(TimestampFormat::HttpDate, &mut out);
    String::from_utf8(out).unwrap_or_default()
}

/// Parses a stored HTTP date.
pub fn parse_http_date(value: &str) -> Option<Timestamp> {
    Timestamp::parse(TimestampFormat::HttpDate, value).ok()
}

/// User metadata as stored.
pub fn metadata_in(metadata: Option<Metadata>) -> Result<BTreeMap<String, String>> {
    let metadata: BTreeMap<String, String> = metadata
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v))
        .collect();
    let bytes: usize = metadata.iter().map(|(k, v)| k.len() + v.len()).sum();
    if bytes > USER_METADATA_BYTES_MAX {
        return Err(GatewayError::MetadataTooLarge(bytes));
    }
    Ok(metadata)
}

/// S3's limit on user metadata: the UTF-8 bytes of every `x-amz-meta-*` name (without the
/// prefix) and value, 2 KiB.
pub const USER_METADATA_BYTES_MAX: usize = 2048;

/// User metadata for a response.
pub fn metadata_out(entry: &ObjectEntry) -> Option<Metadata> {
    if entry.metadata.is_empty() {
        return None;
    }
    Some(entry.metadata.clone().into_iter().collect())
}

/// Whether `condition` holds for an object whose ETag is `stored`. If-Match compares
/// strongly (RFC 9110 §13.1.1: a weak tag never matches), If-None-Match weakly (§13.1.2).
fn etag_matches(condition: &ETagCondition, stored: &str, strong: bool) -> bool {
    match condition {
        ETagCondition::Any => true,
        ETagCondition::ETag(ETag::Weak(_)) if strong => false,
        ETagCondition::ETag(tag) => tag.value() == stored,
    }
}

/// The preconditions of a write from its `If-Match` / `If-None-Match` headers. S3 takes only
/// `*` in a write's If-None-Match; another value is refused rather than ignored.
pub fn write_condition(
    if_match: Option<&ETagCondition>,
    if_none_match: Option<&ETagCondition>,
) -> Result<crate::store::WriteCondition> {
    let if_none_match_any = match if_none_match {
        None => false,
        Some(ETagCondition::Any) => true,
        Some(ETagCondition::ETag(_)) => {
            return Err(GatewayError::NotImplemented(
                "If-None-Match with an ETag on a write (only * is supported, as in S3)".into(),
            ))
        }
    };
    Ok(crate::store::WriteCondition {
        if_match: if_match.map(|condition| match condition {
            ETagCondition::Any => "*".to_string(),
            // Compared strongly: kept with its W/ so that it matches no stored ETag.
            ETagCondition::ETag(ETag::Weak(value)) => format!("W/{value}"),
            ETagCondition::ETag(tag) => tag.value().to_string(),
        }),
        if_none_match_any,
    })
}

/// The conditions of a GET/HEAD (or a copy source) on an existing object.
pub struct Conditions<'a> {
    /// If-Match.
    pub if_match: Option<&'a ETagCondition>,
    /// If-None-Match.
    pub if_none_match: Option<&'a ETagCondition>,
    /// If-Modified-Since.
    pub if_modified_since: Option<&'a Timestamp>,
    /// If-Unmodified-Since.
    pub if_unmodified_since: Option<&'a Timestamp>,
}

impl Conditions<'_> {
    /// RFC 9110 §13.2.2 order. `not_modified_is_failure`: copy sources answer 412 where GET
    /// answers 304.
    pub fn check(&self, entry: &ObjectEntry, not_modified_is_failure: bool) -> Result<()> {
        let mtime_s = (entry.mtime_ns / 1_000_000_000) as i64;
        if let Some(condition) = self.if_match {
            if !etag_matches(condition, &entry.etag, true) {
                return Err(GatewayError::PreconditionFailed);
            }
        } else if let Some(since) = self.if_unmodified_since {
            if mtime_s > seconds(since) {
                return Err(GatewayError::PreconditionFailed);
            }
        }
        let not_modified = if not_modified_is_failure {
            GatewayError::PreconditionFailed
        } else {
            GatewayError::NotModified(entry.etag.clone())
        };
        if let Some(condition) = self.if_none_match {
            if etag_matches(condition, &entry.etag, false) {
                return Err(not_modified);
            }
        } else if let Some(since) = self.if_modified_since {
            if mtime_s <= seconds(since) {
                return Err(not_modified);
            }
        }
        Ok(())
    }
}

/// S3's `encoding-type=url` for keys and prefixes in listings.
pub fn url_encode(value: &str) -> String {
    const KEEP: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'~')
        .remove(b'/');
    percent_encoding::utf8_percent_encode(value, KEEP).to_string()
}

/// Applies `encoding-type` to a listed name.
pub fn encode_name(url: bool, value: &str) -> String {
    if url {
        url_encode(value)
    } else {
        value.to_string()
    }
}

/// Validates a bucket name (S3's DNS-compatible rules, relaxed like radosgw: 3..=63 bytes of
/// lowercase letters, digits, `.`, `-`, `_`, starting and ending with a letter or digit, not an IP).
pub fn validate_bucket_name(name: &str) -> Result<()> {
    let bytes = name.as_bytes();
    let valid_char = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit() || b".-_".contains(c);
    let alnum = |c: Option<&u8>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let is_ip = name.split('.').count() == 4 && name.split('.').all(|p| p.parse::<u8>().is_ok());
    if !(3..=63).contains(&bytes.len())
        || !bytes.iter().all(valid_char)
        || !alnum(bytes.first())
        || !alnum(bytes.last())
        || name.contains("..")
        || is_ip
        || reserved_bucket_name(name)
    {
        return Err(GatewayError::InvalidBucketName(format!(
            "{name:?}: {}",
            bucket_name_problem(name)
        )));
    }
    Ok(())
}

/// Names S3 reserves for its own use (access point aliases, Object Lambda): refused at
/// creation as S3 refuses them, so a bucket made here can move to S3 under its name.
fn reserved_bucket_name(name: &str) -> bool {
    name.starts_with("sthree-")
        || name.starts_with("xn--")
        || name.ends_with("-s3alias")
        || name.ends_with("--ol-s3")
}

/// Which of S3's bucket naming rules `name` breaks (the rules s3s checks), for an error message;
/// a generic summary of them if it breaks none of these.
pub fn bucket_name_problem(name: &str) -> &'static str {
    let bytes = name.as_bytes();
    let alnum = |c: Option<&u8>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !(3..=63).contains(&bytes.len()) {
        "it must be 3 to 63 characters long"
    } else if !bytes
        .iter()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || b".-".contains(c))
    {
        "it may hold only lowercase letters, digits, '.' and '-'"
    } else if !alnum(bytes.first()) || !alnum(bytes.last()) {
        "it must start and end with a lowercase letter or a digit"
    } else if name.contains("..") {
        "it may not hold two '.' in a row"
    } else if name.parse::<std::net::IpAddr>().is_ok() {
        "it may not be an IP address"
    } else if name.starts_with("xn--") {
        "it may not start with 'xn--'"
    } else if reserved_bucket_name(name) {
        "it may not start with 'sthree-' or end with '-s3alias' or '--ol-s3' (reserved by S3)"
    } else {
        "bucket names are 3 to 63 lowercase letters, digits, '.' and '-'"
    }
}

/// Validates an object key.
pub fn validate_key(key: &str) -> Result<()> {
    if key.is_empty() {
        return Err(GatewayError::InvalidArgument("empty key".into()));
    }
    if key.len() > 1024 {
        return Err(GatewayError::KeyTooLong);
    }
    // NUL separates a key from its upload id in the index, and RADOS names cannot hold it.
    if key.contains('\0') {
        return Err(GatewayError::InvalidArgument(
            "a key cannot contain NUL".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_names() {
        assert!(validate_bucket_name("abc").is_ok());
        assert!(validate_bucket_name("my-bucket.1").is_ok());
        assert!(validate_bucket_name("ab").is_err());
        assert!(validate_bucket_name("Abc").is_err());
        assert!(validate_bucket_name("-abc").is_err());
        assert!(validate_bucket_name("192.168.5.4").is_err());
        assert!(validate_bucket_name("a..b").is_err());
        assert!(validate_bucket_name("sthree-bucket").is_err());
        assert!(validate_bucket_name("bucket-s3alias").is_err());
        assert!(validate_bucket_name("bucket--ol-s3").is_err());
        assert!(bucket_name_problem("sthree-bucket").contains("reserved"));
    }

    #[test]
    fn keys() {
        assert!(validate_key("a/b c").is_ok());
        assert!(validate_key("").is_err());
        assert!(validate_key(&"k".repeat(1025)).is_err());
        assert!(matches!(
            validate_key("a\0b"),
            Err(GatewayError::InvalidArgument(_))
        ));
    }

    #[test]
    fn url_encoding_keeps_slashes() {
        assert_eq!(url_encode("a b/c+d"), "a%20b/c%2Bd");
    }

    #[test]
    fn conditions_follow_rfc_order() {
        let entry = ObjectEntry {
            etag: "abc".into(),
            mtime_ns: 100_000_000_000,
            ..ObjectEntry::default()
        };
        let tag = ETagCondition::ETag(ETag::Strong("abc".into()));
        let other = ETagCondition::ETag(ETag::Strong("x".into()));
        let c = |m, n| Conditions {
            if_match: m,
            if_none_match: n,
            if_modified_since: None,
            if_unmodified_since: None,
        };
        assert!(c(Some(&tag), None).check(&entry, false).is_ok());
        assert!(matches!(
            c(Some(&other), None).check(&entry, false),
            Err(GatewayError::PreconditionFailed)
        ));
        assert!(matches!(
            c(None, Some(&tag)).check(&entry, false),
            Err(GatewayError::NotModified(_))
        ));
        let later = timestamp(200_000_000_000);
        let since = Conditions {
            if_match: None,
            if_none_match: None,
            if_modified_since: Some(&later),
            if_unmodified_since: None,
        };
        assert!(matches!(
            since.check(&entry, false),
            Err(GatewayError::NotModified(_))
        ));
    }
}
