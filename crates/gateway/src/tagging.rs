//! Object and bucket tags: the tag set as stored with an object version or a bucket, S3's
//! limits on it (AWS's: 10 tags per object, 50 per bucket, keys up to 128 and values up to
//! 256 Unicode characters, no key twice), and the forms requests give it in (the
//! `x-amz-tagging` header, URL-query encoded; a `Tagging` XML body).

use serde::{Deserialize, Serialize};

use crate::error::{GatewayError, Result};

/// Tags an object version may carry.
pub const OBJECT_TAGS_MAX: usize = 10;
/// Tags a bucket may carry.
pub const BUCKET_TAGS_MAX: usize = 50;
/// Unicode characters of a tag key.
pub const KEY_CHARS_MAX: usize = 128;
/// Unicode characters of a tag value.
pub const VALUE_CHARS_MAX: usize = 256;

/// One tag, as stored.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Tag {
    /// Its key (1 to [`KEY_CHARS_MAX`] characters).
    pub key: String,
    /// Its value (up to [`VALUE_CHARS_MAX`] characters, may be empty).
    pub value: String,
}

/// Refuses a tag set beyond S3's limits: more than `count_max` tags, an empty or too long
/// key, a too long value, a key given twice.
pub fn validate(tags: &[Tag], count_max: usize) -> Result<()> {
    if tags.len() > count_max {
        return Err(GatewayError::InvalidTag(format!(
            "{} tags (at most {count_max})",
            tags.len()
        )));
    }
    for (n, tag) in tags.iter().enumerate() {
        let key_chars = tag.key.chars().count();
        if key_chars == 0 || key_chars > KEY_CHARS_MAX {
            return Err(GatewayError::InvalidTag(format!(
                "a tag key of {key_chars} characters (1 to {KEY_CHARS_MAX})"
            )));
        }
        let value_chars = tag.value.chars().count();
        if value_chars > VALUE_CHARS_MAX {
            return Err(GatewayError::InvalidTag(format!(
                "a tag value of {value_chars} characters (at most {VALUE_CHARS_MAX})"
            )));
        }
        if tags[..n].iter().any(|earlier| earlier.key == tag.key) {
            return Err(GatewayError::InvalidTag(format!(
                "tag key {:?} given twice",
                tag.key
            )));
        }
    }
    Ok(())
}

/// The object tag set of an `x-amz-tagging` header (`k1=v1&k2=v2`, URL-query encoded; a
/// key without `=` has the empty value), checked against the object limits.
pub fn parse_header(text: &str) -> Result<Vec<Tag>> {
    let decode = |part: &str| -> Result<String> {
        let spaced = part.replace('+', " ");
        percent_encoding::percent_decode_str(&spaced)
            .decode_utf8()
            .map(|text| text.into_owned())
            .map_err(|_| GatewayError::InvalidTag("x-amz-tagging is not UTF-8".into()))
    };
    let mut tags = Vec::new();
    for pair in text.split('&').filter(|pair| !pair.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        tags.push(Tag {
            key: decode(key)?,
            value: decode(value)?,
        });
    }
    validate(&tags, OBJECT_TAGS_MAX)?;
    Ok(tags)
}

/// The tags of an S3 `Tagging` body, checked against `count_max`.
pub fn from_dto(tagging: s3s::dto::Tagging, count_max: usize) -> Result<Vec<Tag>> {
    let tags: Vec<Tag> = tagging
        .tag_set
        .into_iter()
        .map(|tag| Tag {
            key: tag.key.unwrap_or_default(),
            value: tag.value.unwrap_or_default(),
        })
        .collect();
    validate(&tags, count_max)?;
    Ok(tags)
}

/// Tags as the S3 `TagSet` of a response.
pub fn to_dto(tags: &[Tag]) -> s3s::dto::TagSet {
    tags.iter()
        .map(|tag| s3s::dto::Tag {
            key: Some(tag.key.clone()),
            value: Some(tag.value.clone()),
        })
        .collect()
}

/// The prefix of the policy condition keys naming an object's stored tags.
pub const EXISTING_TAG_KEY_PREFIX: &str = "s3:ExistingObjectTag/";

/// The policy condition values of an object's stored tags (`s3:ExistingObjectTag/<key>`).
pub fn existing_tags_context(tags: &[Tag]) -> crate::policy::Context {
    tags.iter()
        .map(|tag| {
            (
                format!("{EXISTING_TAG_KEY_PREFIX}{}", tag.key),
                tag.value.clone(),
            )
        })
        .collect()
}

/// Prefix of the policy condition keys of the tags a request sets (`s3:RequestObjectTag/<key>`).
pub const REQUEST_TAG_KEY_PREFIX: &str = "s3:RequestObjectTag/";

/// The policy condition key of the keys of the tags a request sets (multi-valued: tested
/// with `ForAnyValue:` / `ForAllValues:`).
pub const REQUEST_TAG_KEYS: &str = "s3:RequestObjectTagKeys";

/// The policy condition values of the tags a write sets (PutObject's and
/// CreateMultipartUpload's `x-amz-tagging`, a copy's replacing tags, PutObjectTagging's
/// set): `s3:RequestObjectTag/<key>` each, and their keys as `s3:RequestObjectTagKeys`
/// (one value per line, [`crate::policy::MULTI_VALUE_SEPARATOR`]). None when it sets none.
pub fn request_tags_context(tags: &[Tag]) -> crate::policy::Context {
    let mut context: crate::policy::Context = tags
        .iter()
        .map(|tag| {
            (
                format!("{REQUEST_TAG_KEY_PREFIX}{}", tag.key),
                tag.value.clone(),
            )
        })
        .collect();
    if !tags.is_empty() {
        let keys: Vec<&str> = tags.iter().map(|tag| tag.key.as_str()).collect();
        context.insert(
            REQUEST_TAG_KEYS.to_string(),
            keys.join(&crate::policy::MULTI_VALUE_SEPARATOR.to_string()),
        );
    }
    context
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(key: &str, value: &str) -> Tag {
        Tag {
            key: key.into(),
            value: value.into(),
        }
    }

    #[test]
    fn the_header_is_url_query_encoded() {
        assert_eq!(
            parse_header("a=1&b%20c=d+e&empty=&bare").unwrap(),
            [
                tag("a", "1"),
                tag("b c", "d e"),
                tag("empty", ""),
                tag("bare", "")
            ]
        );
        assert_eq!(parse_header("").unwrap(), []);
    }

    #[test]
    fn limits_are_aws_ones_in_characters() {
        let ten: Vec<Tag> = (0..10).map(|n| tag(&format!("k{n}"), "v")).collect();
        assert!(validate(&ten, OBJECT_TAGS_MAX).is_ok());
        let eleven: Vec<Tag> = (0..11).map(|n| tag(&format!("k{n}"), "v")).collect();
        assert!(matches!(
            validate(&eleven, OBJECT_TAGS_MAX),
            Err(GatewayError::InvalidTag(_))
        ));
        assert!(validate(&eleven, BUCKET_TAGS_MAX).is_ok());
        // 128 two-byte characters are 128 characters, not 256.
        assert!(validate(&[tag(&"é".repeat(128), &"ü".repeat(256))], 10).is_ok());
        assert!(validate(&[tag(&"k".repeat(129), "")], 10).is_err());
        assert!(validate(&[tag("k", &"v".repeat(257))], 10).is_err());
        assert!(validate(&[tag("", "v")], 10).is_err());
        assert!(validate(&[tag("k", "1"), tag("k", "2")], 10).is_err());
    }
}
