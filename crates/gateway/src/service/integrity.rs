//! What a PUT or a part upload asks the gateway to check or keep beyond its bytes: the
//! `x-amz-checksum-*` values it gives (in headers, or announced by `x-amz-trailer` and sent
//! after an aws-chunked body), and the features it asks for that strata does not have
//! (object lock, storage classes, website redirects), which are refused rather than
//! silently dropped.
//!
//! Why: s3s 0.14.1 parses these headers but checks none of them. A client that sends a
//! CRC32 (boto3 from 1.36 on does by default, as a trailer) expects a corrupted upload to be
//! refused with BadDigest. Answering 200 tells it something false.

use std::sync::{Arc, Mutex};

use s3s::checksum::ChecksumHasher;
use s3s::crypto::{Checksum as _, Crc32, Crc32c, Crc64Nvme, Sha1, Sha256};
use s3s::dto::Checksum;
use s3s::TrailingHeaders;

use crate::error::{GatewayError, Result};
use crate::layout::StoredChecksum;

/// The checksum algorithms S3 defines, by header name and display name.
const ALGORITHMS: [(&str, &str); 5] = [
    ("x-amz-checksum-crc32", "crc32"),
    ("x-amz-checksum-crc32c", "crc32c"),
    ("x-amz-checksum-sha1", "sha1"),
    ("x-amz-checksum-sha256", "sha256"),
    ("x-amz-checksum-crc64nvme", "crc64nvme"),
];

/// The checksums one upload must match, and the hasher its body feeds.
pub(super) struct ChecksumCheck {
    /// (algorithm, base64 value) given in headers.
    given: Vec<(&'static str, String)>,
    /// The algorithm whose value the body's trailer carries.
    trailer: Option<&'static str>,
    /// The algorithm whose checksum is kept (computed when the request gave none).
    kept: Option<&'static str>,
    hasher: Arc<Mutex<ChecksumHasher>>,
}

impl ChecksumCheck {
    /// The checks `headers` ask for; `None` when they ask for none.
    pub(super) fn of(headers: &http::HeaderMap) -> Option<ChecksumCheck> {
        Self::keeping(headers, None)
    }

    /// [`ChecksumCheck::of`], also computing the checksum of algorithm `kept` (a stored
    /// name, see [`super::checksums`]) when the request gives none of it: a part of an
    /// upload created with a checksum algorithm keeps that one.
    pub(super) fn keeping(
        headers: &http::HeaderMap,
        kept: Option<&'static str>,
    ) -> Option<ChecksumCheck> {
        let given: Vec<(&'static str, String)> = ALGORITHMS
            .iter()
            .filter_map(|&(header, name)| {
                let value = headers.get(header)?;
                Some((
                    name,
                    String::from_utf8_lossy(value.as_bytes()).trim().to_string(),
                ))
            })
            .collect();
        let trailer = headers
            .get("x-amz-trailer")
            .and_then(|value| value.to_str().ok())
            .and_then(|value| {
                let value = value.trim().to_ascii_lowercase();
                ALGORITHMS
                    .iter()
                    .find(|(header, _)| *header == value)
                    .map(|&(_, name)| name)
            });
        if given.is_empty() && trailer.is_none() && kept.is_none() {
            return None;
        }
        let mut hasher = ChecksumHasher::default();
        for name in given
            .iter()
            .map(|(name, _)| *name)
            .chain(trailer)
            .chain(kept)
        {
            match name {
                "crc32" => hasher.crc32 = Some(Crc32::new()),
                "crc32c" => hasher.crc32c = Some(Crc32c::new()),
                "sha1" => hasher.sha1 = Some(Sha1::new()),
                "sha256" => hasher.sha256 = Some(Sha256::new()),
                _ => hasher.crc64nvme = Some(Crc64Nvme::new()),
            }
        }
        Some(ChecksumCheck {
            given,
            trailer,
            kept,
            hasher: Arc::new(Mutex::new(hasher)),
        })
    }

    /// The hasher the body's bytes go through, in order.
    pub(super) fn hasher(&self) -> Arc<Mutex<ChecksumHasher>> {
        Arc::clone(&self.hasher)
    }

    /// Compares what the body hashed to with every value given; returns the checksum to
    /// keep with the object or part: of the algorithm it was to keep, else the first one
    /// given (in header order, then the trailer's).
    pub(super) fn verify(
        self,
        trailers: Option<&TrailingHeaders>,
    ) -> Result<Option<StoredChecksum>> {
        let hasher = std::mem::take(&mut *self.hasher.lock().unwrap_or_else(|p| p.into_inner()));
        let computed = hasher.finalize();
        let mut expected = self.given;
        if let Some(name) = self.trailer {
            let header = format!("x-amz-checksum-{name}");
            let value = trailers
                .and_then(|trailers| {
                    trailers.read(|headers| {
                        headers
                            .get(header.as_str())
                            .map(|v| String::from_utf8_lossy(v.as_bytes()).trim().to_string())
                    })
                })
                .flatten()
                .ok_or_else(|| {
                    GatewayError::InvalidRequest(format!(
                        "x-amz-trailer announced {header} but the body carried no such trailer"
                    ))
                })?;
            expected.push((name, value));
        }
        for (name, value) in &expected {
            if computed_value(&computed, name) != Some(value) {
                return Err(GatewayError::ChecksumMismatch(name));
            }
        }
        let kept = match self.kept {
            Some(name) => computed_value(&computed, name).map(|value| (name, value.clone())),
            None => expected.into_iter().next(),
        };
        Ok(kept.map(|(name, value)| StoredChecksum {
            algorithm: name.to_string(),
            value,
            composite: false,
        }))
    }
}

fn computed_value<'a>(computed: &'a Checksum, name: &str) -> Option<&'a String> {
    match name {
        "crc32" => computed.checksum_crc32.as_ref(),
        "crc32c" => computed.checksum_crc32c.as_ref(),
        "sha1" => computed.checksum_sha1.as_ref(),
        "sha256" => computed.checksum_sha256.as_ref(),
        _ => computed.checksum_crc64nvme.as_ref(),
    }
}

/// A PUT's or part's body as the store writes it: request-body errors as S3 reports them,
/// every byte fed in order to `checksums`' hasher; an absent body is empty.
pub(super) fn request_body(
    body: Option<s3s::dto::StreamingBlob>,
    checksums: Option<&ChecksumCheck>,
) -> futures::stream::BoxStream<'static, Result<bytes::Bytes>> {
    use futures::{StreamExt, TryStreamExt};
    let Some(body) = body else {
        return futures::stream::empty().boxed();
    };
    let hasher = checksums.map(ChecksumCheck::hasher);
    body.inspect(move |item| {
        if let (Some(feed), Ok(bytes)) = (&hasher, item) {
            feed.lock().unwrap_or_else(|p| p.into_inner()).update(bytes);
        }
    })
    .map_err(|error| GatewayError::from_request_body(&*error))
    .boxed()
}

/// `stream` (a copy's source data) with every byte fed in order to `checksums`' hasher.
pub(super) fn hashed<S>(
    stream: S,
    checksums: Option<&ChecksumCheck>,
) -> futures::stream::BoxStream<'static, Result<bytes::Bytes>>
where
    S: futures::Stream<Item = Result<bytes::Bytes>> + Send + 'static,
{
    use futures::StreamExt;
    let hasher = checksums.map(ChecksumCheck::hasher);
    stream
        .inspect(move |item| {
            if let (Some(feed), Ok(bytes)) = (&hasher, item) {
                feed.lock().unwrap_or_else(|p| p.into_inner()).update(bytes);
            }
        })
        .boxed()
}

/// Refuses what a write asks for that strata does not have, as S3 answers where the feature
/// is missing: object lock headers (no bucket here has object lock), a storage class other
/// than STANDARD and website redirects (501: they would be dropped). Encryption headers are
/// the business of `service/encryption.rs`.
pub(super) fn refuse_unsupported_write_headers(headers: &http::HeaderMap) -> Result<()> {
    for lock in [
        "x-amz-object-lock-mode",
        "x-amz-object-lock-retain-until-date",
        "x-amz-object-lock-legal-hold",
    ] {
        if headers.contains_key(lock) {
            return Err(GatewayError::InvalidRequest(format!(
                "{lock}: the bucket is missing its object lock configuration"
            )));
        }
    }
    if let Some(class) = header_text(headers, "x-amz-storage-class") {
        if class != "STANDARD" {
            return Err(GatewayError::InvalidStorageClass(class));
        }
    }
    if headers.contains_key("x-amz-website-redirect-location") {
        return Err(GatewayError::NotImplemented(
            "x-amz-website-redirect-location: strata does not keep website redirects".into(),
        ));
    }
    Ok(())
}

fn header_text(headers: &http::HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .map(|value| String::from_utf8_lossy(value.as_bytes()).trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> http::HeaderMap {
        let mut map = http::HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    fn fed(check: &ChecksumCheck, data: &[u8]) {
        check.hasher().lock().unwrap().update(data);
    }

    #[test]
    fn header_checksums_are_compared_with_the_body() {
        // crc32("hello") = 0x3610a686, crc32c("hello") = 0x9a71bb4c.
        let good = headers(&[
            ("x-amz-checksum-crc32", "NhCmhg=="),
            ("x-amz-checksum-crc32c", "mnG7TA=="),
        ]);
        let check = ChecksumCheck::of(&good).unwrap();
        fed(&check, b"hello");
        let kept = check.verify(None).unwrap().unwrap();
        assert_eq!(
            (kept.algorithm.as_str(), kept.value.as_str()),
            ("crc32", "NhCmhg==")
        );

        // A part of an upload created with CRC32C keeps one though the request gave none.
        let check = ChecksumCheck::keeping(&headers(&[]), Some("crc32c")).unwrap();
        fed(&check, b"hello");
        let kept = check.verify(None).unwrap().unwrap();
        assert_eq!(
            (kept.algorithm.as_str(), kept.value.as_str()),
            ("crc32c", "mnG7TA==")
        );

        let bad = headers(&[("x-amz-checksum-crc32", "AAAAAA==")]);
        let check = ChecksumCheck::of(&bad).unwrap();
        fed(&check, b"hello");
        assert!(matches!(
            check.verify(None),
            Err(GatewayError::ChecksumMismatch("crc32"))
        ));
        assert!(ChecksumCheck::of(&headers(&[("content-type", "a/b")])).is_none());
    }

    #[test]
    fn an_announced_trailer_that_never_came_is_refused() {
        let announced = headers(&[("x-amz-trailer", "x-amz-checksum-crc32")]);
        let check = ChecksumCheck::of(&announced).unwrap();
        fed(&check, b"hello");
        assert!(matches!(
            check.verify(None),
            Err(GatewayError::InvalidRequest(_))
        ));
    }

    #[test]
    fn features_strata_lacks_are_refused_not_dropped() {
        let refused = |pairs: &[(&'static str, &str)]| {
            refuse_unsupported_write_headers(&headers(pairs)).unwrap_err()
        };
        assert!(matches!(
            refused(&[("x-amz-object-lock-mode", "COMPLIANCE")]),
            GatewayError::InvalidRequest(_)
        ));
        assert!(matches!(
            refused(&[("x-amz-storage-class", "STANDARD_IA")]),
            GatewayError::InvalidStorageClass(_)
        ));
        assert!(matches!(
            refused(&[("x-amz-website-redirect-location", "/a")]),
            GatewayError::NotImplemented(_)
        ));
        assert!(refuse_unsupported_write_headers(&headers(&[
            ("x-amz-tagging", "a=1"),
            ("x-amz-storage-class", "STANDARD"),
            ("content-type", "text/plain"),
            ("x-amz-server-side-encryption", "AES256"),
        ]))
        .is_ok());
    }
}
