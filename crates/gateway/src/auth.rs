//! SigV4 secrets from the cluster's user table, and s3s's access hook (authorization itself is
//! done per operation in [`crate::service`], where owners and ACLs are known).
//!
//! The hook ([`GatewayAccess`]) runs after s3s has checked the signature and before it reads
//! a body it parses whole (DeleteObjects, CompleteMultipartUpload, ACL, policy and other
//! configuration documents). There, so that nothing of the body is read for a request that
//! may not be served (issue 43): an anonymous request to a bucket that grants anonymous
//! writes nothing is AccessDenied; a body longer than [`XML_BODY_MAX_BYTES`] is refused with
//! 400 MaxMessageLengthExceeded (s3s read it and answered 500 past its own 20 MiB), and one
//! without a length with 411 MissingContentLength.

use s3s::access::{S3Access, S3AccessContext};
use s3s::auth::{S3Auth, SecretKey};
use s3s::path::S3Path;
use s3s::{s3_error, S3Result};

use crate::service::Gateway;
use crate::users::Users;

/// Longest body of an operation whose body s3s reads whole (an XML document): a
/// DeleteObjects of 1000 keys of 1024 bytes, or a CompleteMultipartUpload of 10000 parts
/// with checksums, is a few MiB.
pub const XML_BODY_MAX_BYTES: u64 = 8 << 20;

/// The operations whose body s3s reads whole before calling the gateway (s3s 0.14.1's
/// routing table).
const WHOLE_BODY_OPERATIONS: &[&str] = &[
    "CompleteMultipartUpload",
    "CreateBucket",
    "CreateBucketMetadataTableConfiguration",
    "DeleteObjects",
    "PutBucketAccelerateConfiguration",
    "PutBucketAcl",
    "PutBucketAnalyticsConfiguration",
    "PutBucketCors",
    "PutBucketEncryption",
    "PutBucketIntelligentTieringConfiguration",
    "PutBucketInventoryConfiguration",
    "PutBucketLifecycleConfiguration",
    "PutBucketLogging",
    "PutBucketMetricsConfiguration",
    "PutBucketNotificationConfiguration",
    "PutBucketOwnershipControls",
    "PutBucketPolicy",
    "PutBucketReplication",
    "PutBucketRequestPayment",
    "PutBucketTagging",
    "PutBucketVersioning",
    "PutBucketWebsite",
    "PutObjectAcl",
    "PutObjectLegalHold",
    "PutObjectLockConfiguration",
    "PutObjectRetention",
    "PutObjectTagging",
    "PutPublicAccessBlock",
    "RestoreObject",
    "SelectObjectContent",
];

/// Whether the body of a request for operation `name` is read whole by s3s.
pub(crate) fn reads_whole_body(name: &str) -> bool {
    WHOLE_BODY_OPERATIONS.contains(&name)
}

/// The refusal of a whole-read body by its framing (`None`: acceptable): longer than
/// [`XML_BODY_MAX_BYTES`], or chunked without a length.
pub(crate) fn whole_body_refusal(headers: &http::HeaderMap) -> Option<s3s::S3Error> {
    let length = headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|text| text.parse::<u64>().ok());
    match length {
        Some(bytes) if bytes > XML_BODY_MAX_BYTES => Some(s3_error!(
            MaxMessageLengthExceeded,
            "the request body is {bytes} bytes; at most {XML_BODY_MAX_BYTES} are accepted"
        )),
        Some(_) => None,
        None if headers.contains_key(http::header::TRANSFER_ENCODING) => {
            let mut error = s3_error!(
                MissingContentLength,
                "You must provide the Content-Length HTTP header."
            );
            error.set_status_code(http::StatusCode::LENGTH_REQUIRED);
            Some(error)
        }
        None => None,
    }
}

/// Looks secret keys up in the cluster's user table.
pub struct ClusterAuth {
    users: Users,
}

impl ClusterAuth {
    /// Auth over `users`.
    pub fn new(users: Users) -> Self {
        Self { users }
    }
}

#[async_trait::async_trait]
impl S3Auth for ClusterAuth {
    async fn get_secret_key(&self, access_key: &str) -> S3Result<SecretKey> {
        match self.users.by_access_key(access_key).await {
            Ok(Some(user)) => Ok(SecretKey::from(user.secret_key)),
            Ok(None) => Err(s3_error!(InvalidAccessKeyId)),
            Err(error) => Err(error.into()),
        }
    }
}

/// Checks what must be checked before s3s reads a whole body (see the module doc); lets
/// everything else through to the operation, which checks owners and ACLs itself.
pub struct GatewayAccess {
    gateway: Gateway,
}

impl GatewayAccess {
    /// The hook for `gateway`.
    pub fn new(gateway: Gateway) -> Self {
        Self { gateway }
    }
}

#[async_trait::async_trait]
impl S3Access for GatewayAccess {
    async fn check(&self, cx: &mut S3AccessContext<'_>) -> S3Result<()> {
        if !reads_whole_body(cx.s3_op().name()) {
            return Ok(());
        }
        if cx.credentials().is_none() {
            let bucket = match cx.s3_path() {
                S3Path::Root => return Err(s3_error!(AccessDenied)),
                S3Path::Bucket { bucket } | S3Path::Object { bucket, .. } => bucket,
            };
            if cx.s3_op().name() == "CreateBucket"
                || !self.gateway.anonymous_may_write(bucket).await?
            {
                return Err(s3_error!(AccessDenied));
            }
        }
        match whole_body_refusal(cx.headers()) {
            Some(refusal) => Err(refusal),
            None => Ok(()),
        }
    }
}

/// Lets every request through to the operation, anonymous ones included: each operation checks
/// owners and ACLs itself.
pub struct AllowAll;

#[async_trait::async_trait]
impl S3Access for AllowAll {
    async fn check(&self, _cx: &mut S3AccessContext<'_>) -> S3Result<()> {
        Ok(())
    }
}
