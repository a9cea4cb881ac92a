//! Server-side encryption at the request's edge: which key a write seals its data with (the
//! SSE-C headers, `x-amz-server-side-encryption`, else the bucket's default), which keys open
//! an object a read names, and the bucket encryption operations. The sealing itself is
//! [`crate::encryption`].

use http::HeaderMap;
use s3s::dto::*;
use s3s::S3Request;

use super::Gateway;
use crate::encryption::{
    self, ByteStream, ObjectEncryption, SecretKey, Segment, SseMode, WrappedKey,
};
use crate::error::{GatewayError, Result};
use crate::layout::ObjectEntry;

/// The headers of SSE-C for the object a request names, and for a copy's source.
const CUSTOMER: &str = "x-amz-server-side-encryption-customer-";
const COPY_SOURCE_CUSTOMER: &str = "x-amz-copy-source-server-side-encryption-customer-";
/// The only algorithm of SSE-C and SSE-S3.
const AES256: &str = "AES256";

/// The key a write seals its data keys with, and how.
#[derive(Clone, Debug)]
pub(super) struct Sealing {
    pub mode: SseMode,
    pub key_encryption_key: SecretKey,
}

impl Sealing {
    /// A fresh data key, and it wrapped.
    pub fn new_data_key(&self) -> (SecretKey, WrappedKey) {
        let data_key = SecretKey::generate();
        let wrapped = self.key_encryption_key.wrap(self.mode, &data_key);
        (data_key, wrapped)
    }
}

fn header_text(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .map(|value| String::from_utf8_lossy(value.as_bytes()).trim().to_string())
}

/// The SSE-C key the headers under `prefix` give, if any: algorithm AES256, the key, and its
/// MD5, all three; InvalidRequest or InvalidArgument for anything else, and over plain HTTP
/// unless the operator allows it.
fn customer_key(
    headers: &HeaderMap,
    prefix: &str,
    allow_insecure: bool,
) -> Result<Option<(SecretKey, String)>> {
    let algorithm = header_text(headers, &format!("{prefix}algorithm"));
    let key = header_text(headers, &format!("{prefix}key"));
    let key_md5 = header_text(headers, &format!("{prefix}key-md5"));
    if algorithm.is_none() && key.is_none() && key_md5.is_none() {
        return Ok(None);
    }
    if !allow_insecure {
        return Err(GatewayError::InvalidRequest(
            "requests with server-side encryption customer keys (SSE-C) must be made over a \
             secure connection; this gateway speaks plain HTTP (its operator may allow SSE-C \
             anyway with [s3] sse_c_allow_insecure = true)"
                .into(),
        ));
    }
    let Some(algorithm) = algorithm else {
        return Err(GatewayError::InvalidArgument(format!(
            "{prefix}algorithm is missing (SSE-C needs it with the key and its MD5)"
        )));
    };
    if algorithm != AES256 {
        return Err(GatewayError::InvalidArgument(format!(
            "{prefix}algorithm {algorithm:?}: the only one is AES256"
        )));
    }
    let (Some(key), Some(key_md5)) = (key, key_md5) else {
        return Err(GatewayError::InvalidArgument(format!(
            "SSE-C needs {prefix}key and {prefix}key-MD5 with the algorithm"
        )));
    };
    Ok(Some((SecretKey::from_customer(&key, &key_md5)?, key_md5)))
}

impl Gateway {
    /// The master key of SSE-S3, or the error that says how to give one.
    fn master_key(&self) -> Result<SecretKey> {
        self.store.config.sse_master_key.clone().ok_or_else(|| {
            GatewayError::NotImplemented(
                "SSE-S3 (x-amz-server-side-encryption: AES256) needs a master key: start the \
                 gateway with STRATA_SSE_MASTER_KEY_FILE or [s3] sse_master_key_file"
                    .into(),
            )
        })
    }

    /// How a write (PUT, CreateMultipartUpload, CopyObject's destination) seals its data:
    /// with the SSE-C key of its headers, with the master key if it asks for SSE-S3 or the
    /// bucket's default is SSE-S3, else not at all.
    pub(super) fn write_sealing(
        &self,
        headers: &HeaderMap,
        bucket_default: Option<&str>,
    ) -> Result<Option<Sealing>> {
        let customer = customer_key(headers, CUSTOMER, self.store.config.sse_c_allow_insecure)?;
        let requested = header_text(headers, "x-amz-server-side-encryption");
        if let Some((key, _)) = customer {
            if requested.is_some() {
                return Err(GatewayError::InvalidArgument(
                    "x-amz-server-side-encryption and SSE-C headers cannot be given together"
                        .into(),
                ));
            }
            return Ok(Some(Sealing {
                mode: SseMode::Customer,
                key_encryption_key: key,
            }));
        }
        match requested.as_deref().or(bucket_default) {
            None => Ok(None),
            Some(AES256) => Ok(Some(Sealing {
                mode: SseMode::Managed,
                key_encryption_key: self.master_key()?,
            })),
            Some(value @ ("aws:kms" | "aws:kms:dsse")) => Err(GatewayError::NotImplemented(
                format!("server-side encryption {value}: strata has no key management service"),
            )),
            Some(value) => Err(GatewayError::InvalidArgument(format!(
                "x-amz-server-side-encryption {value:?} (valid: AES256, aws:kms, aws:kms:dsse)"
            ))),
        }
    }

    /// The key-encryption key that opens `entry` (SSE-C: the one of the request's headers
    /// under `prefix`), checked: an SSE-C object read without its key, a key given for an
    /// object not encrypted with one, or another key than the object's are refused (400).
    fn opening_key(
        &self,
        headers: &HeaderMap,
        copy_source: bool,
        encryption: Option<&ObjectEncryption>,
        check: Option<&WrappedKey>,
    ) -> Result<Option<(SseMode, SecretKey)>> {
        let prefix = if copy_source {
            COPY_SOURCE_CUSTOMER
        } else {
            CUSTOMER
        };
        let customer = customer_key(headers, prefix, self.store.config.sse_c_allow_insecure)?;
        let Some(encryption) = encryption else {
            if customer.is_some() {
                return Err(GatewayError::InvalidRequest(
                    "the object was not encrypted with a customer key (SSE-C): send no SSE-C \
                     headers to read it"
                        .into(),
                ));
            }
            return Ok(None);
        };
        let key =
            match (encryption.mode, customer) {
                (SseMode::Customer, Some((key, _))) => key,
                (SseMode::Customer, None) => return Err(GatewayError::InvalidRequest(
                    "the object is encrypted with a customer key (SSE-C): the request must give \
                     it (x-amz-server-side-encryption-customer-algorithm, -key, -key-MD5)"
                        .into(),
                )),
                (SseMode::Managed, Some(_)) => {
                    return Err(GatewayError::InvalidRequest(
                        "the object is encrypted with SSE-S3, not with a customer key".into(),
                    ))
                }
                (SseMode::Managed, None) => self.master_key()?,
            };
        if let Some(wrapped) = check.or(encryption.keys.first()) {
            if key.unwrap(encryption.mode, wrapped).is_none() {
                return Err(match encryption.mode {
                    SseMode::Customer => GatewayError::InvalidRequest(
                        "the SSE-C key given is not the one the object was encrypted with".into(),
                    ),
                    SseMode::Managed => GatewayError::SecretKeySealed(
                        "an SSE-S3 object does not open with this gateway's master key".into(),
                    ),
                });
            }
        }
        Ok(Some((encryption.mode, key)))
    }

    /// The segments of an encrypted `entry`, their data keys unwrapped with the key the
    /// request gives (see [`Gateway::opening_key`]); `None` for an object in the clear.
    pub(super) fn read_segments(
        &self,
        headers: &HeaderMap,
        copy_source: bool,
        entry: &ObjectEntry,
    ) -> Result<Option<Vec<Segment>>> {
        let encryption = entry.encryption.as_ref();
        let Some((mode, key)) = self.opening_key(headers, copy_source, encryption, None)? else {
            return Ok(None);
        };
        let keys = &encryption
            .expect("an opening key is of an encrypted entry")
            .keys;
        // One key seals the whole (a PUT, a copy, a multipart object of one part).
        let sizes: Vec<u64> = if keys.len() == 1 {
            vec![entry.size]
        } else {
            entry.part_sizes.clone()
        };
        if sizes.len() != keys.len() {
            return Err(GatewayError::Corrupt(format!(
                "an encrypted object with {} data keys for {} segments",
                keys.len(),
                sizes.len()
            )));
        }
        let mut segments = Vec::with_capacity(keys.len());
        for (wrapped, plain_bytes) in keys.iter().zip(sizes) {
            let key = key.unwrap(mode, wrapped).ok_or_else(|| {
                GatewayError::InvalidRequest(
                    "the key given is not the one the object was encrypted with".into(),
                )
            })?;
            segments.push(Segment { key, plain_bytes });
        }
        Ok(Some(segments))
    }

    /// Checks the request's SSE-C key against a multipart upload's (its `template`'s
    /// encryption holds a key wrapped at CreateMultipartUpload as the check) and returns the
    /// sealing of its parts.
    pub(super) fn upload_sealing(
        &self,
        headers: &HeaderMap,
        template: &ObjectEntry,
    ) -> Result<Option<Sealing>> {
        let Some(encryption) = template.encryption.as_ref() else {
            // A part of an upload in the clear may not ask for encryption.
            self.opening_key(headers, false, None, None)?;
            return Ok(None);
        };
        let check = encryption.keys.first();
        let Some((mode, key)) = self.opening_key(headers, false, Some(encryption), check)? else {
            return Ok(None);
        };
        Ok(Some(Sealing {
            mode,
            key_encryption_key: key,
        }))
    }

    /// Plaintext `[start, end)` of `entry`, decrypted with `segments` when it is encrypted.
    pub(super) async fn read_plain(
        &self,
        entry: &ObjectEntry,
        segments: Option<Vec<Segment>>,
        (start, end): (u64, u64),
        checked: bool,
    ) -> Result<ByteStream> {
        use futures::StreamExt;
        let Some(segments) = segments else {
            return Ok(if checked {
                self.store
                    .read_range_checked(&entry.pieces, start, end)
                    .await?
                    .boxed()
            } else {
                self.store.read_range(&entry.pieces, start, end).boxed()
            });
        };
        if start >= end {
            return Ok(futures::stream::empty().boxed());
        }
        let (sealed_start, sealed_end) = encryption::sealed_range(&segments, start, end);
        let sealed = if checked {
            self.store
                .read_range_checked(&entry.pieces, sealed_start, sealed_end)
                .await?
                .boxed()
        } else {
            self.store
                .read_range(&entry.pieces, sealed_start, sealed_end)
                .boxed()
        };
        Ok(encryption::decrypt_range(sealed, segments, start, end))
    }

    pub(super) async fn do_put_bucket_encryption(
        &self,
        req: S3Request<PutBucketEncryptionInput>,
    ) -> Result<PutBucketEncryptionOutput> {
        let requester = self.requester(&req).await?;
        let input = req.input;
        let mut bucket = self
            .owned_bucket(&input.bucket, &requester, "s3:PutEncryptionConfiguration")
            .await?;
        let rules = &input.server_side_encryption_configuration.rules;
        let [rule] = rules.as_slice() else {
            return Err(GatewayError::Malformed(
                "a server-side encryption configuration has exactly one rule".into(),
            ));
        };
        let Some(default) = &rule.apply_server_side_encryption_by_default else {
            return Err(GatewayError::Malformed(
                "the rule has no ApplyServerSideEncryptionByDefault".into(),
            ));
        };
        let algorithm = default.sse_algorithm.as_str().to_string();
        match algorithm.as_str() {
            AES256 => {
                self.master_key()?;
            }
            "aws:kms" | "aws:kms:dsse" => {
                return Err(GatewayError::NotImplemented(format!(
                    "default encryption {algorithm}: strata has no key management service"
                )))
            }
            other => {
                return Err(GatewayError::Malformed(format!(
                    "SSEAlgorithm {other:?} (valid: AES256, aws:kms, aws:kms:dsse)"
                )))
            }
        }
        bucket.encryption = Some(algorithm);
        self.store.save_bucket(&bucket).await?;
        Ok(PutBucketEncryptionOutput::default())
    }

    pub(super) async fn do_get_bucket_encryption(
        &self,
        req: S3Request<GetBucketEncryptionInput>,
    ) -> Result<GetBucketEncryptionOutput> {
        let requester = self.requester(&req).await?;
        let bucket = self
            .owned_bucket(
                &req.input.bucket,
                &requester,
                "s3:GetEncryptionConfiguration",
            )
            .await?;
        let algorithm = bucket
            .encryption
            .ok_or(GatewayError::NoSuchEncryptionConfiguration)?;
        Ok(GetBucketEncryptionOutput {
            server_side_encryption_configuration: Some(ServerSideEncryptionConfiguration {
                rules: vec![ServerSideEncryptionRule {
                    apply_server_side_encryption_by_default: Some(ServerSideEncryptionByDefault {
                        sse_algorithm: ServerSideEncryption::from(algorithm),
                        kms_master_key_id: None,
                    }),
                    bucket_key_enabled: Some(false),
                }],
            }),
        })
    }

    pub(super) async fn do_delete_bucket_encryption(
        &self,
        req: S3Request<DeleteBucketEncryptionInput>,
    ) -> Result<DeleteBucketEncryptionOutput> {
        let requester = self.requester(&req).await?;
        let mut bucket = self
            .owned_bucket(
                &req.input.bucket,
                &requester,
                "s3:PutEncryptionConfiguration",
            )
            .await?;
        if bucket.encryption.take().is_some() {
            self.store.save_bucket(&bucket).await?;
        }
        Ok(DeleteBucketEncryptionOutput::default())
    }
}

/// The policy condition values of the encryption a write asks for in its headers.
pub(super) fn request_context(headers: &HeaderMap) -> crate::policy::Context {
    let mut context = crate::policy::Context::new();
    for (key, header) in [
        (
            "s3:x-amz-server-side-encryption",
            "x-amz-server-side-encryption",
        ),
        (
            "s3:x-amz-server-side-encryption-customer-algorithm",
            "x-amz-server-side-encryption-customer-algorithm",
        ),
    ] {
        if let Some(value) = header_text(headers, header) {
            context.insert(key.to_string(), value);
        }
    }
    context
}

/// The SSE fields of an answer about an object encrypted by `encryption` (SSE-C's key MD5 as
/// the request gave it).
pub(super) fn answer_fields(
    encryption: Option<SseMode>,
    headers: &HeaderMap,
) -> (
    Option<ServerSideEncryption>,
    Option<SSECustomerAlgorithm>,
    Option<SSECustomerKeyMD5>,
) {
    match encryption {
        None => (None, None, None),
        Some(SseMode::Managed) => (
            Some(ServerSideEncryption::from(AES256.to_string())),
            None,
            None,
        ),
        Some(SseMode::Customer) => (
            None,
            Some(AES256.to_string()),
            header_text(headers, &format!("{CUSTOMER}key-md5")),
        ),
    }
}

/// A write's body as it is stored: sealed with a fresh data key when `sealing` says so.
pub(super) struct SealedBody {
    pub stream: ByteStream,
    /// The stored bytes, when the plaintext's are known.
    pub length: Option<u64>,
    /// What the sealing stream saw of the plaintext, and the wrapped data key.
    pub sealed: Option<(
        std::sync::Arc<std::sync::Mutex<encryption::PlainTally>>,
        WrappedKey,
    )>,
}

impl SealedBody {
    /// `body` (of `length` plaintext bytes, when known) sealed by `sealing`, or as is.
    pub fn new(body: ByteStream, length: Option<u64>, sealing: Option<&Sealing>) -> Self {
        let Some(sealing) = sealing else {
            return Self {
                stream: body,
                length,
                sealed: None,
            };
        };
        let (data_key, wrapped) = sealing.new_data_key();
        let (stream, tally) = encryption::encrypt_stream(body, data_key);
        Self {
            stream,
            length: length.map(encryption::sealed_len),
            sealed: Some((tally, wrapped)),
        }
    }

    /// The plaintext's MD5 and size: the store's figures (`stored`) for a body in the
    /// clear, the sealing stream's otherwise.
    pub fn plain(
        tally: Option<&std::sync::Arc<std::sync::Mutex<encryption::PlainTally>>>,
        stored: ([u8; 16], u64),
    ) -> ([u8; 16], u64) {
        match tally {
            None => stored,
            Some(tally) => tally.lock().unwrap_or_else(|p| p.into_inner()).finish(),
        }
    }
}
