//! The gateway's error enum and its one mapping to S3 error codes and HTTP statuses.

use rados::RadosError;
use s3s::{S3Error, S3ErrorCode};

/// The S3 error code of a write refused because the cluster is full (HTTP 507).
pub const INSUFFICIENT_STORAGE: &str = "InsufficientStorage";

/// Why a gateway operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GatewayError {
    /// No bucket of that name.
    #[error("no such bucket: {0}")]
    NoSuchBucket(String),
    /// No object of that key.
    #[error("no such key: {0}")]
    NoSuchKey(String),
    /// No version of that id (the key or the version is missing).
    #[error("no such version: {0}")]
    NoSuchVersion(String),
    /// A GET or HEAD without version id of a key whose latest version is a delete marker:
    /// NoSuchKey, with the marker named in the headers as S3 does.
    #[error("no such key: {key} (its latest version is a delete marker)")]
    LatestIsDeleteMarker {
        /// The key.
        key: String,
        /// The delete marker's version id.
        version_id: String,
    },
    /// A request naming a delete marker's version id where an object is needed (GET, HEAD,
    /// ACLs, copy source): 405 MethodNotAllowed, as S3.
    #[error("version {version_id} is a delete marker")]
    VersionIsDeleteMarker {
        /// The delete marker's version id.
        version_id: String,
        /// Its write time, ns since the epoch (the reply's Last-Modified).
        mtime_ns: u64,
    },
    /// No multipart upload of that id.
    #[error("no such upload: {0}")]
    NoSuchUpload(String),
    /// The bucket name belongs to another user.
    #[error("bucket already exists")]
    BucketAlreadyExists,
    /// The bucket name belongs to the requester already.
    #[error("bucket already owned by you")]
    BucketAlreadyOwnedByYou,
    /// DeleteBucket on a bucket with objects or uploads.
    #[error("bucket not empty")]
    BucketNotEmpty,
    /// The requester may not do this.
    #[error("access denied")]
    AccessDenied,
    /// Invalid bucket name.
    #[error("invalid bucket name: {0}")]
    InvalidBucketName(String),
    /// Key longer than 1024 bytes.
    #[error("key too long")]
    KeyTooLong,
    /// A user of that uid (or access key) exists already.
    #[error("user exists: {0}")]
    UserExists(String),
    /// A bad argument.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// Range outside the object.
    #[error("range not satisfiable")]
    InvalidRange,
    /// `partNumber` beyond the object's parts.
    #[error("the requested part number is not satisfiable")]
    InvalidPartNumber,
    /// If-Match / If-Unmodified-Since failed.
    #[error("precondition failed")]
    PreconditionFailed,
    /// If-None-Match / If-Modified-Since matched (GET/HEAD); the object's ETag, which the
    /// 304 reply carries.
    #[error("Not Modified")]
    NotModified(String),
    /// A part listed in CompleteMultipartUpload is missing or its ETag differs.
    #[error("invalid part: {0}")]
    InvalidPart(String),
    /// Parts not in ascending order.
    #[error("parts not in ascending order")]
    InvalidPartOrder,
    /// A part but the last is below the minimum size.
    #[error("part too small")]
    EntityTooSmall,
    /// Content-MD5 does not match the body.
    #[error("content-md5 mismatch")]
    BadDigest,
    /// An `x-amz-checksum-*` the request gave (header or trailer) does not match the body.
    #[error("the body's {0} does not match the x-amz-checksum-{0} the request gave")]
    ChecksumMismatch(&'static str),
    /// User metadata over S3's 2 KiB.
    #[error("user metadata of {0} bytes is over S3's limit of 2048")]
    MetadataTooLarge(usize),
    /// A storage class strata does not have (it has one, STANDARD).
    #[error("storage class {0:?}: strata stores every object as STANDARD")]
    InvalidStorageClass(String),
    /// A CreateBucket LocationConstraint other than this gateway's region.
    #[error("location constraint {0:?}: this gateway serves region {1:?} only")]
    InvalidLocationConstraint(String, String),
    /// Content-MD5 is not valid base64 of 16 bytes.
    #[error("invalid content-md5")]
    InvalidDigest,
    /// Body shorter than Content-Length.
    #[error("incomplete body")]
    IncompleteBody,
    /// The body's SHA-256 differs from the `x-amz-content-sha256` the request was signed with
    /// (the body was changed after signing).
    #[error("the body's SHA-256 does not match x-amz-content-sha256")]
    ContentSha256Mismatch,
    /// A chunk of an aws-chunked body does not carry the signature its bytes and the
    /// previous chunk's signature give.
    #[error("a chunk's signature does not match its data")]
    ChunkSignatureMismatch,
    /// An ACL grant names an e-mail address no user has.
    #[error("no user has the e-mail address {0}")]
    UnresolvableGrantByEmailAddress(String),
    /// An ACL that does not parse or names an unknown permission.
    #[error("malformed ACL: {0}")]
    MalformedAcl(String),
    /// The bucket is not in a state that allows the request (object lock on a bucket created
    /// without it).
    #[error("invalid bucket state: {0}")]
    InvalidBucketState(String),
    /// The bucket has no CORS configuration.
    #[error("no CORS configuration")]
    NoSuchCorsConfiguration,
    /// A tag set beyond S3's limits (count, key or value length, a repeated key).
    #[error("invalid tag: {0}")]
    InvalidTag(String),
    /// The bucket has no tag set.
    #[error("the bucket has no tag set")]
    NoSuchTagSet,
    /// A bucket policy that does not parse or uses what strata cannot evaluate.
    #[error("malformed policy: {0}")]
    MalformedPolicy(String),
    /// The bucket has no default encryption.
    #[error("the bucket has no server-side encryption configuration")]
    NoSuchEncryptionConfiguration,
    /// The bucket has no lifecycle configuration.
    #[error("the bucket has no lifecycle configuration")]
    NoSuchLifecycleConfiguration,
    /// The bucket has no policy.
    #[error("the bucket has no policy")]
    NoSuchBucketPolicy,
    /// The bucket has no public access block.
    #[error("no public access block configuration")]
    NoSuchPublicAccessBlockConfiguration,
    /// The bucket has no object lock configuration.
    #[error("object lock configuration not found")]
    ObjectLockConfigurationNotFound,
    /// A request S3 refuses as a whole (conflicting headers, ...).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// Malformed XML or request.
    #[error("malformed request: {0}")]
    Malformed(String),
    /// Not implemented by this gateway.
    #[error("not implemented: {0}")]
    NotImplemented(String),
    /// The cluster failed.
    #[error("cluster: {0}")]
    Rados(#[from] RadosError),
    /// A stored record does not decode (a bug or corruption).
    #[error("corrupt metadata: {0}")]
    Corrupt(String),
    /// Orphan collection (`strata gc`) took this upload for abandoned (it ran longer than the
    /// grace period) and fenced its commit: nothing was stored, the client may retry (500).
    #[error("upload outlived the orphan collection's grace period and was not stored; retry: {0}")]
    UploadCollected(String),
    /// A user's sealed secret key does not open with the gateway's master keys (or there
    /// are none): the gateway was given another key than the one it sealed with.
    #[error("{0}")]
    SecretKeySealed(String),
}

/// The result type of the gateway.
pub type Result<T, E = GatewayError> = std::result::Result<T, E>;

impl GatewayError {
    /// What a request body's stream failed with, as S3 reports it. s3s checks the body while
    /// it streams in (the SHA-256 a request was signed with, each aws-chunked chunk's
    /// signature, the declared length) and ends the stream with an error of its own when a
    /// check fails; those types are private to s3s (pinned at 0.14.1), so their text decides.
    /// A stream that failed underneath (the client went away) is an incomplete body;
    /// anything else is an invalid request, never a server error.
    pub fn from_request_body(error: &(dyn std::error::Error + 'static)) -> Self {
        let text = error.to_string();
        let (source, detail) = text.split_once(": ").unwrap_or(("", text.as_str()));
        match (source, detail) {
            (_, detail) if detail.starts_with("Underlying") => GatewayError::IncompleteBody,
            ("UploadStreamError", "Sha256Mismatch") => GatewayError::ContentSha256Mismatch,
            ("AwsChunkedStreamError", "SignatureMismatch") => GatewayError::ChunkSignatureMismatch,
            ("UploadStreamError" | "AwsChunkedStreamError", "Incomplete") => {
                GatewayError::IncompleteBody
            }
            _ => GatewayError::InvalidRequest(format!("request body: {text}")),
        }
    }

    /// The S3 error code this error is reported as.
    pub fn code(&self) -> S3ErrorCode {
        match self {
            GatewayError::NoSuchBucket(_) => S3ErrorCode::NoSuchBucket,
            GatewayError::NoSuchKey(_) | GatewayError::LatestIsDeleteMarker { .. } => {
                S3ErrorCode::NoSuchKey
            }
            GatewayError::NoSuchVersion(_) => S3ErrorCode::NoSuchVersion,
            GatewayError::VersionIsDeleteMarker { .. } => S3ErrorCode::MethodNotAllowed,
            GatewayError::NoSuchUpload(_) => S3ErrorCode::NoSuchUpload,
            GatewayError::BucketAlreadyExists => S3ErrorCode::BucketAlreadyExists,
            GatewayError::BucketAlreadyOwnedByYou => S3ErrorCode::BucketAlreadyOwnedByYou,
            GatewayError::BucketNotEmpty => S3ErrorCode::BucketNotEmpty,
            GatewayError::AccessDenied => S3ErrorCode::AccessDenied,
            GatewayError::InvalidBucketName(_) => S3ErrorCode::InvalidBucketName,
            GatewayError::KeyTooLong => S3ErrorCode::KeyTooLongError,
            GatewayError::InvalidArgument(_) | GatewayError::UserExists(_) => {
                S3ErrorCode::InvalidArgument
            }
            GatewayError::InvalidRange => S3ErrorCode::InvalidRange,
            GatewayError::InvalidPartNumber => S3ErrorCode::Custom("InvalidPartNumber".into()),
            GatewayError::PreconditionFailed => S3ErrorCode::PreconditionFailed,
            GatewayError::NotModified(_) => S3ErrorCode::NotModified,
            GatewayError::InvalidPart(_) => S3ErrorCode::InvalidPart,
            GatewayError::InvalidPartOrder => S3ErrorCode::InvalidPartOrder,
            GatewayError::EntityTooSmall => S3ErrorCode::EntityTooSmall,
            GatewayError::BadDigest | GatewayError::ChecksumMismatch(_) => S3ErrorCode::BadDigest,
            GatewayError::InvalidStorageClass(_) => S3ErrorCode::InvalidStorageClass,
            GatewayError::MetadataTooLarge(_) => S3ErrorCode::MetadataTooLarge,
            GatewayError::InvalidLocationConstraint(..) => S3ErrorCode::InvalidLocationConstraint,
            GatewayError::InvalidDigest => S3ErrorCode::InvalidDigest,
            GatewayError::IncompleteBody => S3ErrorCode::IncompleteBody,
            GatewayError::ContentSha256Mismatch => {
                S3ErrorCode::Custom("XAmzContentSHA256Mismatch".into())
            }
            GatewayError::ChunkSignatureMismatch => S3ErrorCode::SignatureDoesNotMatch,
            GatewayError::Malformed(_) => S3ErrorCode::MalformedXML,
            GatewayError::UnresolvableGrantByEmailAddress(_) => {
                S3ErrorCode::UnresolvableGrantByEmailAddress
            }
            GatewayError::MalformedAcl(_) => S3ErrorCode::MalformedACLError,
            GatewayError::InvalidRequest(_) => S3ErrorCode::InvalidRequest,
            GatewayError::InvalidBucketState(_) => S3ErrorCode::InvalidBucketState,
            GatewayError::NoSuchCorsConfiguration => S3ErrorCode::NoSuchCORSConfiguration,
            GatewayError::InvalidTag(_) => S3ErrorCode::InvalidTag,
            GatewayError::NoSuchTagSet => S3ErrorCode::NoSuchTagSet,
            GatewayError::NoSuchLifecycleConfiguration => S3ErrorCode::NoSuchLifecycleConfiguration,
            GatewayError::NoSuchEncryptionConfiguration => {
                S3ErrorCode::Custom("ServerSideEncryptionConfigurationNotFoundError".into())
            }
            GatewayError::MalformedPolicy(_) => S3ErrorCode::MalformedPolicy,
            GatewayError::NoSuchBucketPolicy => S3ErrorCode::NoSuchBucketPolicy,
            GatewayError::NoSuchPublicAccessBlockConfiguration => {
                S3ErrorCode::Custom("NoSuchPublicAccessBlockConfiguration".into())
            }
            GatewayError::ObjectLockConfigurationNotFound => {
                S3ErrorCode::ObjectLockConfigurationNotFoundError
            }
            GatewayError::NotImplemented(_) => S3ErrorCode::NotImplemented,
            GatewayError::Rados(error) => match error {
                RadosError::Degraded { .. } | RadosError::Shutdown => {
                    S3ErrorCode::ServiceUnavailable
                }
                // No answer within the backend's op timeout (a Ceph PG without enough OSDs),
                // or the backend asked to come back later: 503 SlowDown, which every AWS SDK
                // retries with backoff, as radosgw answers a timed-out RADOS op.
                RadosError::TimedOut(_) | RadosError::Busy(_) => S3ErrorCode::SlowDown,
                // A full cluster (an OSD at full_ratio): 507, which AWS SDKs do not retry
                // (botocore retries 500, 502, 503, 504 and throttling codes), as MinIO
                // answers a full backend; a retried PUT would only fail again until space is
                // freed. See ARCHITECTURE.md.
                RadosError::NoSpace(_) => S3ErrorCode::Custom(INSUFFICIENT_STORAGE.into()),
                // Index commits retry a lost race a bounded number of times; past that the
                // key is too contended: the client may retry, as after radosgw's 503.
                RadosError::CompareFailed(_) => S3ErrorCode::ServiceUnavailable,
                _ => S3ErrorCode::InternalError,
            },
            GatewayError::Corrupt(_)
            | GatewayError::UploadCollected(_)
            | GatewayError::SecretKeySealed(_) => S3ErrorCode::InternalError,
        }
    }

    /// The HTTP status of [`GatewayError::code`].
    pub fn status(&self) -> http::StatusCode {
        use http::StatusCode as S;
        match self {
            GatewayError::NoSuchBucket(_)
            | GatewayError::NoSuchKey(_)
            | GatewayError::NoSuchVersion(_)
            | GatewayError::LatestIsDeleteMarker { .. }
            | GatewayError::NoSuchUpload(_)
            | GatewayError::ObjectLockConfigurationNotFound
            | GatewayError::NoSuchPublicAccessBlockConfiguration
            | GatewayError::NoSuchBucketPolicy
            | GatewayError::NoSuchTagSet
            | GatewayError::NoSuchEncryptionConfiguration
            | GatewayError::NoSuchLifecycleConfiguration
            | GatewayError::NoSuchCorsConfiguration => S::NOT_FOUND,
            GatewayError::BucketAlreadyExists
            | GatewayError::BucketAlreadyOwnedByYou
            | GatewayError::BucketNotEmpty
            | GatewayError::InvalidBucketState(_) => S::CONFLICT,
            GatewayError::AccessDenied | GatewayError::ChunkSignatureMismatch => S::FORBIDDEN,
            GatewayError::VersionIsDeleteMarker { .. } => S::METHOD_NOT_ALLOWED,
            GatewayError::InvalidRange | GatewayError::InvalidPartNumber => {
                S::RANGE_NOT_SATISFIABLE
            }
            GatewayError::PreconditionFailed => S::PRECONDITION_FAILED,
            GatewayError::NotModified(_) => S::NOT_MODIFIED,
            GatewayError::NotImplemented(_) => S::NOT_IMPLEMENTED,
            GatewayError::Rados(RadosError::NoSpace(_)) => S::INSUFFICIENT_STORAGE,
            GatewayError::Rados(_)
            | GatewayError::Corrupt(_)
            | GatewayError::UploadCollected(_)
            | GatewayError::SecretKeySealed(_) => match self.code() {
                S3ErrorCode::ServiceUnavailable | S3ErrorCode::SlowDown => S::SERVICE_UNAVAILABLE,
                _ => S::INTERNAL_SERVER_ERROR,
            },
            _ => S::BAD_REQUEST,
        }
    }
}

impl From<GatewayError> for S3Error {
    fn from(error: GatewayError) -> Self {
        let status = error.status();
        let mut s3 = S3Error::with_message(error.code(), error.to_string());
        s3.set_status_code(status);
        if let Some(headers) = error_headers(&error) {
            s3.set_headers(headers);
        }
        if status.is_server_error() {
            tracing::warn!(%error, "server error");
        }
        s3
    }
}

/// The headers S3 sends with an error: the ETag of a 304, the delete marker behind a 404 or
/// a 405.
fn error_headers(error: &GatewayError) -> Option<http::HeaderMap> {
    let mut headers = http::HeaderMap::new();
    let mut put = |name: http::HeaderName, value: &str| {
        if let Ok(value) = http::HeaderValue::from_str(value) {
            headers.insert(name, value);
        }
    };
    match error {
        GatewayError::NotModified(etag) => put(http::header::ETAG, &format!("\"{etag}\"")),
        GatewayError::LatestIsDeleteMarker { version_id, .. } => {
            put(http::HeaderName::from_static("x-amz-delete-marker"), "true");
            put(
                http::HeaderName::from_static("x-amz-version-id"),
                version_id,
            );
        }
        GatewayError::VersionIsDeleteMarker {
            version_id,
            mtime_ns,
        } => {
            put(http::HeaderName::from_static("x-amz-delete-marker"), "true");
            put(
                http::HeaderName::from_static("x-amz-version-id"),
                version_id,
            );
            let last_modified = crate::service::http_date_of(*mtime_ns);
            put(http::header::LAST_MODIFIED, &last_modified);
        }
        _ => return None,
    }
    Some(headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Text(&'static str);

    impl std::fmt::Display for Text {
        fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            formatter.write_str(self.0)
        }
    }

    impl std::error::Error for Text {}

    #[test]
    fn body_stream_failures_are_reported_as_s3_does() {
        let cases = [
            (
                "UploadStreamError: Sha256Mismatch",
                "XAmzContentSHA256Mismatch",
                400,
            ),
            (
                "AwsChunkedStreamError: SignatureMismatch",
                "SignatureDoesNotMatch",
                403,
            ),
            ("UploadStreamError: Incomplete", "IncompleteBody", 400),
            ("AwsChunkedStreamError: Incomplete", "IncompleteBody", 400),
            (
                "UploadStreamError: Underlying: connection reset",
                "IncompleteBody",
                400,
            ),
            // The underlying error's own words do not decide.
            (
                "AwsChunkedStreamError: Underlying: SignatureMismatch",
                "IncompleteBody",
                400,
            ),
            ("AwsChunkedStreamError: FormatError", "InvalidRequest", 400),
            ("UploadStreamError: LengthMismatch", "InvalidRequest", 400),
            ("something else", "InvalidRequest", 400),
        ];
        for (text, code, status) in cases {
            let error = GatewayError::from_request_body(&Text(text));
            assert_eq!(error.code().as_str(), code, "{text}");
            assert_eq!(error.status().as_u16(), status, "{text}");
        }
    }

    #[test]
    fn client_mistakes_are_4xx_and_cluster_failures_5xx() {
        let client = [
            GatewayError::NoSuchKey("k".into()),
            GatewayError::AccessDenied,
            GatewayError::InvalidRange,
            GatewayError::EntityTooSmall,
            GatewayError::Malformed("x".into()),
            GatewayError::BadDigest,
        ];
        for error in client {
            assert!(error.status().is_client_error(), "{error}");
        }
        assert!(GatewayError::Rados(RadosError::Io("eio".into()))
            .status()
            .is_server_error());
        assert_eq!(
            GatewayError::Rados(RadosError::Shutdown).status(),
            http::StatusCode::SERVICE_UNAVAILABLE
        );
    }

    #[test]
    fn timeouts_are_a_retryable_slow_down_and_full_is_507() {
        for error in [
            RadosError::TimedOut("write o".into()),
            RadosError::Busy("write o".into()),
        ] {
            let error = GatewayError::Rados(error);
            assert_eq!(error.code(), S3ErrorCode::SlowDown, "{error}");
            assert_eq!(error.status(), http::StatusCode::SERVICE_UNAVAILABLE);
        }
        let full = GatewayError::Rados(RadosError::NoSpace("osd.1".into()));
        assert_eq!(full.status(), http::StatusCode::INSUFFICIENT_STORAGE);
    }
}
