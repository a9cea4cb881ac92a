//! The checksums kept with objects and parts (`x-amz-checksum-*`): the checksum of a
//! multipart object made from its parts' (S3's COMPOSITE: the hash of the parts' digests,
//! `<base64>-<parts>`; FULL_OBJECT: the parts' CRCs combined into the CRC of the whole
//! data), and how a kept checksum is answered (GET and HEAD with ChecksumMode,
//! GetObjectAttributes, ListParts, PutObject, CompleteMultipartUpload).
//!
//! Why: a client that sent a checksum (boto3 sends a CRC32 with every upload by default)
//! asks for it back to check what it downloads, and the newer SDKs check it when it is
//! there. The hashes are s3s's (`s3s::crypto`), the CRC combination crc-fast's (which s3s
//! computes its CRCs with).

use base64::Engine;
use s3s::crypto::{Checksum as _, Crc32, Crc32c, Crc64Nvme, Sha1, Sha256};
use s3s::dto::{Checksum, ChecksumAlgorithm, ChecksumType};

use crate::error::{GatewayError, Result};
use crate::layout::StoredChecksum;

/// The algorithm names as stored (lower case), in the order S3 lists them.
pub(super) const NAMES: [&str; 5] = ["crc32", "crc32c", "crc64nvme", "sha1", "sha256"];

/// The stored name of an algorithm S3 names `name` (any case); `None` for no algorithm.
pub(super) fn algorithm_name(name: &str) -> Option<&'static str> {
    NAMES
        .iter()
        .copied()
        .find(|known| known.eq_ignore_ascii_case(name.trim()))
}

/// The digest of `data` by algorithm `name` (a stored name).
fn digest(name: &str, data: &[u8]) -> Vec<u8> {
    match name {
        "crc32" => Crc32::checksum(data).to_vec(),
        "crc32c" => Crc32c::checksum(data).to_vec(),
        "crc64nvme" => Crc64Nvme::checksum(data).to_vec(),
        "sha1" => Sha1::checksum(data).to_vec(),
        _ => Sha256::checksum(data).to_vec(),
    }
}

fn crc_algorithm(name: &str) -> Option<crc_fast::CrcAlgorithm> {
    match name {
        "crc32" => Some(crc_fast::CrcAlgorithm::Crc32IsoHdlc),
        "crc32c" => Some(crc_fast::CrcAlgorithm::Crc32Iscsi),
        "crc64nvme" => Some(crc_fast::CrcAlgorithm::Crc64Nvme),
        _ => None,
    }
}

/// Whether a multipart upload with algorithm `name` may ask for a FULL_OBJECT checksum (the
/// CRCs can be combined; the SHAs cannot), and whether it must (CRC64NVME has no composite
/// form).
pub(super) fn full_object_allowed(name: &str) -> (bool, bool) {
    (crc_algorithm(name).is_some(), name == "crc64nvme")
}

fn decode(value: &str) -> Result<Vec<u8>> {
    base64::engine::general_purpose::STANDARD
        .decode(value.trim())
        .map_err(|_| GatewayError::Corrupt(format!("stored checksum {value:?} is not base64")))
}

fn encode(digest: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(digest)
}

/// The checksum of a multipart object from its parts' `(checksum, size)` in order, all in
/// algorithm `name`: COMPOSITE (the digest of the parts' digests, `-<parts>` appended) or,
/// when `full_object`, the CRC of the whole data (the parts' CRCs combined).
pub(super) fn multipart_checksum(
    name: &str,
    full_object: bool,
    parts: &[(&str, u64)],
) -> Result<StoredChecksum> {
    let value = if full_object {
        let algorithm = crc_algorithm(name).ok_or_else(|| {
            GatewayError::InvalidRequest(format!("{name} has no FULL_OBJECT checksum type"))
        })?;
        let width = if name == "crc64nvme" { 8 } else { 4 };
        let mut combined: Option<u64> = None;
        for (value, size) in parts {
            let bytes = decode(value)?;
            if bytes.len() != width {
                return Err(GatewayError::Corrupt(format!(
                    "stored {name} {value:?} is {} bytes",
                    bytes.len()
                )));
            }
            let crc = bytes.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
            combined = Some(match combined {
                None => crc,
                Some(so_far) => crc_fast::checksum_combine(algorithm, so_far, crc, *size),
            });
        }
        let combined = combined.unwrap_or(0).to_be_bytes();
        encode(&combined[8 - width..])
    } else {
        let mut digests = Vec::new();
        for (value, _) in parts {
            digests.extend(decode(value)?);
        }
        format!("{}-{}", encode(&digest(name, &digests)), parts.len())
    };
    Ok(StoredChecksum {
        algorithm: name.to_string(),
        value,
        composite: !full_object,
    })
}

/// Whether `given` (a client's value) is `stored`: a composite value may be given with or
/// without its `-<parts>`.
pub(super) fn matches(stored: &StoredChecksum, given: &str) -> bool {
    let given = given.trim();
    if given == stored.value {
        return true;
    }
    stored.composite
        && stored
            .value
            .rsplit_once('-')
            .is_some_and(|(digest, _)| digest == given)
}

/// The checksum type S3 names for `stored`.
pub(super) fn checksum_type(stored: &StoredChecksum) -> ChecksumType {
    ChecksumType::from_static(if stored.composite {
        ChecksumType::COMPOSITE
    } else {
        ChecksumType::FULL_OBJECT
    })
}

/// S3's name of an algorithm stored as `name`.
pub(super) fn algorithm_dto(name: &str) -> ChecksumAlgorithm {
    ChecksumAlgorithm::from(name.to_ascii_uppercase())
}

/// `value` in the field of algorithm `name`, with `kind` as its type.
pub(super) fn dto(name: &str, value: &str, kind: Option<ChecksumType>) -> Checksum {
    let mut out = Checksum {
        checksum_type: kind,
        ..Default::default()
    };
    let value = Some(value.to_string());
    match name {
        "crc32" => out.checksum_crc32 = value,
        "crc32c" => out.checksum_crc32c = value,
        "crc64nvme" => out.checksum_crc64nvme = value,
        "sha1" => out.checksum_sha1 = value,
        _ => out.checksum_sha256 = value,
    }
    out
}

/// `stored` as S3 answers it, with its type.
pub(super) fn stored_dto(stored: &StoredChecksum) -> Checksum {
    dto(
        &stored.algorithm,
        &stored.value,
        Some(checksum_type(stored)),
    )
}

/// The value a request gave for algorithm `name` among the five `checksum_*` fields of
/// `checksum`.
pub(super) fn given_value(checksum: &Checksum, name: &str) -> Option<String> {
    match name {
        "crc32" => checksum.checksum_crc32.clone(),
        "crc32c" => checksum.checksum_crc32c.clone(),
        "crc64nvme" => checksum.checksum_crc64nvme.clone(),
        "sha1" => checksum.checksum_sha1.clone(),
        _ => checksum.checksum_sha256.clone(),
    }
}

/// The checksum algorithm and type a CreateMultipartUpload asks for, as stored in its
/// [`crate::layout::UploadRecord`]: (algorithm, full object). A type without an algorithm,
/// FULL_OBJECT with a SHA or COMPOSITE with CRC64NVME is refused, as S3 does.
pub(super) fn upload_checksum(
    algorithm: Option<&ChecksumAlgorithm>,
    kind: Option<&ChecksumType>,
) -> Result<(Option<&'static str>, bool)> {
    let Some(algorithm) = algorithm else {
        if kind.is_some() {
            return Err(GatewayError::InvalidRequest(
                "x-amz-checksum-type needs x-amz-checksum-algorithm".into(),
            ));
        }
        return Ok((None, false));
    };
    let name = algorithm_name(algorithm.as_str()).ok_or_else(|| {
        GatewayError::InvalidRequest(format!(
            "x-amz-checksum-algorithm {:?} (valid: CRC32, CRC32C, CRC64NVME, SHA1, SHA256)",
            algorithm.as_str()
        ))
    })?;
    let (allowed, required) = full_object_allowed(name);
    let full_object = match kind.map(|kind| kind.as_str().to_ascii_uppercase()) {
        None => required,
        Some(kind) if kind == ChecksumType::FULL_OBJECT && allowed => true,
        Some(kind) if kind == ChecksumType::COMPOSITE && !required => false,
        Some(kind) => {
            return Err(GatewayError::InvalidRequest(format!(
                "checksum type {kind} is not available with {}",
                algorithm.as_str()
            )))
        }
    };
    Ok((Some(name), full_object))
}

/// The checksum of a multipart object being completed from `parts` (each part's kept
/// checksum and size, in order) and each part's value, when the upload was created with
/// algorithm `name`. A part checksum the client listed (`listed`, by part) or an object
/// checksum it gave (`given`) that is not the one computed is a BadDigest; so is a part
/// that kept no checksum of that algorithm.
pub(super) fn completed(
    name: &'static str,
    full_object: bool,
    parts: &[(Option<&StoredChecksum>, u64)],
    listed: &[Checksum],
    given: &Checksum,
) -> Result<(StoredChecksum, Vec<String>)> {
    let mut values = Vec::with_capacity(parts.len());
    for (index, (kept, size)) in parts.iter().enumerate() {
        let kept = kept
            .filter(|kept| kept.algorithm == name)
            .ok_or(GatewayError::ChecksumMismatch(name))?;
        if let Some(value) = listed.get(index).and_then(|part| given_value(part, name)) {
            if value.trim() != kept.value {
                return Err(GatewayError::ChecksumMismatch(name));
            }
        }
        values.push((kept.value.as_str(), *size));
    }
    let stored = multipart_checksum(name, full_object, &values)?;
    if let Some(value) = given_value(given, name) {
        if !matches(&stored, &value) {
            return Err(GatewayError::ChecksumMismatch(name));
        }
    }
    // An object checksum given in another algorithm cannot be the object's.
    let other = NAMES
        .iter()
        .any(|other| *other != name && given_value(given, other).is_some());
    if other {
        return Err(GatewayError::InvalidRequest(format!(
            "the upload was created with checksum algorithm {}",
            name.to_ascii_uppercase()
        )));
    }
    let part_values = values.iter().map(|(value, _)| value.to_string()).collect();
    Ok((stored, part_values))
}

/// Copies the five `checksum_*` fields (and, with `type`, `checksum_type`) of a [`Checksum`]
/// into an s3s input or output that has them.
macro_rules! checksum_fields {
    ($target:expr, $checksum:expr) => {{
        let checksum: s3s::dto::Checksum = $checksum;
        $target.checksum_crc32 = checksum.checksum_crc32;
        $target.checksum_crc32c = checksum.checksum_crc32c;
        $target.checksum_crc64nvme = checksum.checksum_crc64nvme;
        $target.checksum_sha1 = checksum.checksum_sha1;
        $target.checksum_sha256 = checksum.checksum_sha256;
    }};
    ($target:expr, $checksum:expr, type) => {{
        let checksum: s3s::dto::Checksum = $checksum;
        $target.checksum_type = checksum.checksum_type.clone();
        checksum_fields!($target, checksum);
    }};
}
pub(super) use checksum_fields;

/// The fields of a request that has the five `checksum_*` fields, as a [`Checksum`].
macro_rules! checksum_of {
    ($source:expr) => {
        s3s::dto::Checksum {
            checksum_crc32: $source.checksum_crc32.clone(),
            checksum_crc32c: $source.checksum_crc32c.clone(),
            checksum_crc64nvme: $source.checksum_crc64nvme.clone(),
            checksum_sha1: $source.checksum_sha1.clone(),
            checksum_sha256: $source.checksum_sha256.clone(),
            checksum_type: None,
        }
    };
}
pub(super) use checksum_of;

#[cfg(test)]
mod tests {
    use super::*;

    /// `(value, size)` of each of three parts of 5 MiB of 'A', 'B', 'C' (the parts of
    /// ceph/s3-tests' multipart checksum tests).
    fn parts_of(name: &str) -> Vec<(String, u64)> {
        let size = 5 * 1024 * 1024;
        [b'A', b'B', b'C']
            .iter()
            .map(|&byte| (encode(&digest(name, &vec![byte; size])), size as u64))
            .collect()
    }

    fn combined(name: &str, full_object: bool) -> String {
        let parts = parts_of(name);
        let parts: Vec<(&str, u64)> = parts.iter().map(|(v, s)| (v.as_str(), *s)).collect();
        multipart_checksum(name, full_object, &parts).unwrap().value
    }

    #[test]
    fn multipart_checksums_are_those_s3_computes() {
        // The values ceph/s3-tests expects (computed with AWS's SDKs).
        assert_eq!(
            parts_of("sha256")[0].0,
            "275VF5loJr1YYawit0XSHREhkFXYkkPKGuoK0x9VKxI="
        );
        assert_eq!(
            combined("sha256", false),
            "uWBwpe1dxI4Vw8Gf0X9ynOdw/SS6VBzfWm9giiv1sf4=-3"
        );
        assert_eq!(combined("sha1", false), "sizjvY4eud3MrcHdZM3cQ/ol39o=-3");
        assert_eq!(combined("crc32", true), "WgDhBQ==");
        assert_eq!(combined("crc32c", true), "xU+Krw==");
        assert_eq!(combined("crc64nvme", true), "i+6LR0y3eFo=");
        // A full-object CRC is the CRC of the data.
        let whole: Vec<u8> = [b'A', b'B', b'C']
            .iter()
            .flat_map(|&byte| vec![byte; 5 * 1024 * 1024])
            .collect();
        assert_eq!(combined("crc32", true), encode(&digest("crc32", &whole)));
        assert!(multipart_checksum("sha1", true, &[("YQ==", 1)]).is_err());
    }

    #[test]
    fn a_composite_value_matches_with_or_without_its_part_count() {
        let stored = StoredChecksum {
            algorithm: "sha256".into(),
            value: "abc=-3".into(),
            composite: true,
        };
        assert!(matches(&stored, "abc=-3"));
        assert!(matches(&stored, "abc="));
        assert!(!matches(&stored, "abd="));
        let full = StoredChecksum {
            composite: false,
            value: "abc=".into(),
            ..stored
        };
        assert!(matches(&full, "abc="));
        assert!(!matches(&full, "abc=-3"));
        assert_eq!(algorithm_name("CRC64NVME"), Some("crc64nvme"));
        assert_eq!(algorithm_name("md5"), None);
    }
}
