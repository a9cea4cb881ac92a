//! The S3 operations ([`s3s::S3`]) over the [`crate::store::Store`]: one method per operation,
//! each checking the requester against owners and canned ACLs first.

mod acls;
mod attributes;
mod buckets;
mod checksums;
pub(crate) mod convert;
mod encryption;
mod integrity;
mod lifecycle;
pub(crate) mod lifecycle_rules;
mod multipart;
mod objects;
mod refusals;
mod tagging;
mod versioning;

use std::sync::Arc;

pub use lifecycle::{lifecycle_period_ms, LifecycleLoop, LifecycleReport};

use rados::Rados;
use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, S3};

use crate::acl::{self, Permission, Requester};
use crate::error::{GatewayError, Result};
use crate::layout::BucketRecord;
use crate::policy::{arn, Context, Decision, Policy};
use crate::store::{Clock, GatewayStats, OrphanReport, Store};
use crate::users::Users;
use crate::GatewayConfig;

/// The S3 service: stateless apart from the cluster handle; clone-cheap.
#[derive(Clone)]
pub struct Gateway {
    pub(crate) store: Arc<Store>,
    pub(crate) users: Users,
}

impl Gateway {
    /// A gateway over `rados`, creating its pools when missing.
    pub async fn open(rados: Arc<dyn Rados>, config: GatewayConfig) -> Result<Self> {
        Self::open_with_clock(rados, config, crate::store::system_clock()).await
    }

    /// The same with an injected clock (ns since the epoch).
    pub async fn open_with_clock(
        rados: Arc<dyn Rados>,
        config: GatewayConfig,
        clock: Clock,
    ) -> Result<Self> {
        let keys = config.secret_keys.clone();
        let cache_ns = config.metadata_cache_ms.saturating_mul(1_000_000);
        let store = Store::open(rados.as_ref(), config, clock.clone())
            .await?
            .with_placement_source(rados);
        let users = Users::from_io(store.meta.clone(), keys).with_cache(cache_ns, clock);
        // Plaintext secrets (older builds) and ones sealed with a previous master key.
        let resealed = users.reseal().await?;
        if resealed > 0 {
            tracing::info!(
                resealed,
                "S3 secret keys sealed with the current master key"
            );
        }
        Ok(Self {
            store: Arc::new(store),
            users,
        })
    }

    /// The user table this gateway authenticates against.
    pub fn users(&self) -> &Users {
        &self.users
    }

    /// The CORS rules of bucket `name` (none for a missing bucket or one without rules).
    pub async fn cors_rules(&self, name: &str) -> Vec<crate::cors::CorsRule> {
        match self.store.bucket(name).await {
            Ok(bucket) => bucket.cors.unwrap_or_default(),
            Err(_) => Vec::new(),
        }
    }

    /// The gateway's configuration.
    pub fn config(&self) -> &GatewayConfig {
        &self.store.config
    }

    /// Counters (pieces removed, GC).
    pub fn stats(&self) -> GatewayStats {
        self.store.stats()
    }

    /// One pack GC pass: packs whose logged dead share passed the threshold are rewritten
    /// without their dead ranges (see `store/pack_gc.rs`).
    pub async fn pack_gc(&self) -> Result<crate::PackGcReport> {
        self.store.pack_gc().await
    }

    /// What the pack GC log holds now (dead ranges awaiting the pack GC, rewrites under way).
    pub async fn pack_gc_status(&self) -> Result<crate::PackGcStatus> {
        self.store.pack_gc_status().await
    }

    /// One GC pass over the queue of data objects whose removal failed.
    pub async fn reclaim(&self) -> Result<u64> {
        self.store.reclaim().await
    }

    /// One GC pass removing the queued data that waited `wait_s` (see [`crate::gc_wait_s`]).
    pub async fn reclaim_after(&self, wait_s: u64) -> Result<u64> {
        self.store.reclaim_after(wait_s).await
    }

    /// The data objects waiting in the GC queue and their bytes.
    pub async fn gc_backlog(&self) -> Result<crate::GcBacklog> {
        self.store.gc_backlog().await
    }

    /// Finds (and unless `dry_run` removes) data objects nothing refers to that are older
    /// than `grace_ns`: see [`crate::OrphanReport`].
    pub async fn collect_orphans(&self, grace_ns: u64, dry_run: bool) -> Result<OrphanReport> {
        self.store.collect_orphans(grace_ns, dry_run).await
    }

    async fn requester<T>(&self, req: &S3Request<T>) -> Result<Requester> {
        if !self.store.config.auth {
            return Ok(Requester::System);
        }
        let Some(credentials) = &req.credentials else {
            return Ok(Requester::Anonymous);
        };
        match self.users.by_access_key(&credentials.access_key).await? {
            Some(user) => Ok(Requester::User(user.uid)),
            None => Err(GatewayError::AccessDenied),
        }
    }

    /// The bucket, if `requester` may do `action` on it: the bucket policy's decision on that
    /// action, else the bucket ACL's `permission`. (Object writes and deletes are checked on
    /// their object: `bucket_for_object`.)
    async fn bucket_for(
        &self,
        name: &str,
        requester: &Requester,
        action: &str,
        permission: Permission,
    ) -> Result<BucketRecord> {
        let bucket = self.store.bucket(name).await?;
        if !bucket_allows(
            &bucket,
            requester,
            action,
            None,
            &Context::new(),
            permission,
        ) {
            return Err(GatewayError::AccessDenied);
        }
        Ok(bucket)
    }

    /// The bucket, if `requester` may list it (`action`: `s3:ListBucket`,
    /// `s3:ListBucketVersions`, `s3:ListBucketMultipartUploads`) with `prefix`, which the
    /// policy sees as `s3:prefix` (empty when none is given); without a statement about it,
    /// the bucket ACL's READ decides.
    async fn bucket_for_listing(
        &self,
        name: &str,
        requester: &Requester,
        action: &str,
        prefix: Option<&str>,
    ) -> Result<BucketRecord> {
        let bucket = self.store.bucket(name).await?;
        let context = Context::from([(
            "s3:prefix".to_string(),
            prefix.unwrap_or_default().to_string(),
        )]);
        if !bucket_allows(&bucket, requester, action, None, &context, Permission::Read) {
            return Err(GatewayError::AccessDenied);
        }
        Ok(bucket)
    }

    /// The bucket, if `requester` may do `action` (an object write or delete:
    /// `s3:PutObject`, `s3:DeleteObject`, `s3:AbortMultipartUpload`, ...) on its object `key`.
    async fn bucket_for_object(
        &self,
        name: &str,
        requester: &Requester,
        action: &str,
        key: &str,
    ) -> Result<BucketRecord> {
        self.bucket_for_object_in(name, requester, action, key, &Context::new())
            .await
    }

    /// [`Gateway::bucket_for_object`] with the request's own condition values (the tags a
    /// write sets: [`crate::tagging::request_tags_context`]).
    async fn bucket_for_object_in(
        &self,
        name: &str,
        requester: &Requester,
        action: &str,
        key: &str,
        context: &Context,
    ) -> Result<BucketRecord> {
        let bucket = self.store.bucket(name).await?;
        if !may_change_object_in(&bucket, requester, action, key, context) {
            return Err(GatewayError::AccessDenied);
        }
        Ok(bucket)
    }

    /// [`Gateway::bucket_for_object_in`] from this gateway's copy of the bucket record when
    /// it has a recent one ([`Store::bucket_cached`]); `true` when read from the cluster.
    async fn bucket_for_object_cached(
        &self,
        name: &str,
        requester: &Requester,
        action: &str,
        key: &str,
        context: &Context,
    ) -> Result<(BucketRecord, bool)> {
        let (bucket, copy) = self.store.bucket_cached(name).await?;
        if !may_change_object_in(&bucket, requester, action, key, context) {
            return Err(GatewayError::AccessDenied);
        }
        Ok((bucket, !copy))
    }

    /// `x-amz-expected-bucket-owner`: AccessDenied unless the bucket of the (path-style)
    /// request belongs to that uid.
    async fn check_expected_owner<T>(&self, req: &S3Request<T>) -> Result<()> {
        let Some(expected) = req.headers.get("x-amz-expected-bucket-owner") else {
            return Ok(());
        };
        let bucket = req
            .uri
            .path()
            .trim_start_matches('/')
            .split('/')
            .next()
            .unwrap_or_default();
        if bucket.is_empty() {
            return Ok(());
        }
        let record = self.store.bucket(bucket).await?;
        if expected.as_bytes() != record.owner.as_bytes() {
            return Err(GatewayError::AccessDenied);
        }
        Ok(())
    }

    /// Whether an anonymous request may change bucket `name` or its objects at all: the
    /// bucket has a policy (which may allow it), or its ACL grants everyone more than reading.
    /// Requests whose body s3s reads whole are refused before it is read otherwise
    /// ([`crate::auth::GatewayAccess`]); the operation still decides precisely.
    pub(crate) async fn anonymous_may_write(&self, name: &str) -> Result<bool> {
        let bucket = self.store.bucket(name).await?;
        if bucket.policy.is_some() {
            return Ok(true);
        }
        let grants = access_grants(&bucket, bucket.grants());
        Ok(grants.iter().any(|grant| {
            grant.grantee == acl::Grantee::AllUsers
                && matches!(
                    grant.permission,
                    acl::GrantPermission::Write
                        | acl::GrantPermission::WriteAcp
                        | acl::GrantPermission::FullControl
                )
        }))
    }

    /// The uid new things are owned by.
    fn owner_of(requester: &Requester) -> Result<String> {
        match requester {
            Requester::User(uid) => Ok(uid.clone()),
            Requester::System => Ok("anonymous".into()),
            Requester::Anonymous => Ok("anonymous".into()),
        }
    }
}

/// Whether `requester` may do `action` (a write or a delete) on the bucket's object `key`: the
/// bucket policy decides on that action and that object's ARN, so a Deny of
/// `s3:DeleteObject`, or of everything under a prefix, holds, and an Allow of `s3:PutObject`
/// does not also allow deletes; without a statement about it, the bucket ACL's WRITE does.
pub(crate) fn may_change_object(
    bucket: &BucketRecord,
    requester: &Requester,
    action: &str,
    key: &str,
) -> bool {
    may_change_object_in(bucket, requester, action, key, &Context::new())
}

/// [`may_change_object`] with the request's own condition values.
pub(crate) fn may_change_object_in(
    bucket: &BucketRecord,
    requester: &Requester,
    action: &str,
    key: &str,
    context: &Context,
) -> bool {
    bucket_allows(
        bucket,
        requester,
        action,
        Some(key),
        context,
        Permission::Write,
    )
}

/// The bucket policy's decision on `action` (on the bucket, or on its object `key`), else the
/// bucket ACL's `permission`.
fn bucket_allows(
    bucket: &BucketRecord,
    requester: &Requester,
    action: &str,
    key: Option<&str>,
    context: &Context,
    permission: Permission,
) -> bool {
    match policy_decision(bucket, requester, action, key, context) {
        Decision::Deny => false,
        Decision::Allow => true,
        Decision::Unspecified => acl::allows(
            &bucket.owner,
            &access_grants(bucket, bucket.grants()),
            requester,
            permission,
        ),
    }
}

/// The policy action of deleting `key` (a version of it, when named).
pub(crate) fn delete_action(version_id: Option<&str>) -> &'static str {
    if version_id.is_some() {
        "s3:DeleteObjectVersion"
    } else {
        "s3:DeleteObject"
    }
}

/// What the bucket's policy says about `requester` doing `action` on the bucket (`key`
/// `None`) or on one of its objects; no policy (or authentication off) leaves it to the ACL.
pub(crate) fn policy_decision(
    bucket: &BucketRecord,
    requester: &Requester,
    action: &str,
    key: Option<&str>,
    context: &Context,
) -> Decision {
    let Some(text) = &bucket.policy else {
        return Decision::Unspecified;
    };
    if *requester == Requester::System {
        return Decision::Unspecified;
    }
    // The keys every request carries (`policy::CONDITION_KEYS`), beside the caller's.
    let mut context = context.clone();
    context.insert("aws:SecureTransport".to_string(), "false".to_string());
    let _ = REQUEST_FACTS.try_with(|facts| {
        if let Some(address) = facts.source_ip {
            context.insert(
                "aws:SourceIp".to_string(),
                address.to_canonical().to_string(),
            );
        }
        if let Some(referer) = &facts.referer {
            context.insert("aws:Referer".to_string(), referer.clone());
        }
        if let Some(user_agent) = &facts.user_agent {
            context.insert("aws:UserAgent".to_string(), user_agent.clone());
        }
    });
    // The document was checked when it was put; one that no longer parses grants nothing.
    match Policy::parse(text) {
        Ok(policy) => policy.evaluate(requester, action, &arn(&bucket.name, key), &context),
        Err(_) => Decision::Unspecified,
    }
}

tokio::task_local! {
    /// What the connection and the headers tell about the request being served, for the
    /// policy's condition keys: the server's front sets it around each request.
    pub static REQUEST_FACTS: RequestFacts;
}

/// See [`REQUEST_FACTS`].
#[derive(Clone, Debug, Default)]
pub struct RequestFacts {
    /// The client's address (`aws:SourceIp`).
    pub source_ip: Option<std::net::IpAddr>,
    /// `Referer` (`aws:Referer`).
    pub referer: Option<String>,
    /// `User-Agent` (`aws:UserAgent`).
    pub user_agent: Option<String>,
}

/// The grants that decide access to the bucket or to one of its objects: without the public
/// ones when the bucket's public access block ignores public ACLs.
pub(crate) fn access_grants(bucket: &BucketRecord, mut grants: Vec<acl::Grant>) -> Vec<acl::Grant> {
    if bucket
        .public_access_block
        .is_some_and(|b| b.ignore_public_acls)
    {
        grants.retain(|g| !g.is_public());
    }
    grants
}

/// AccessDenied when the bucket's public access block refuses public ACLs and `grants` has one.
pub(crate) fn check_public_block(bucket: &BucketRecord, grants: &[acl::Grant]) -> Result<()> {
    let blocks = bucket
        .public_access_block
        .is_some_and(|b| b.block_public_acls);
    if blocks && grants.iter().any(acl::Grant::is_public) {
        return Err(GatewayError::AccessDenied);
    }
    Ok(())
}

/// The ACL parts common to every input that sets an ACL, as an [`acls::AclRequest`].
macro_rules! acl_request {
    ($input:expr) => {
        $crate::service::acls::AclRequest {
            canned: $input.acl.as_ref().map(|a| a.as_str()),
            grant_read: $input.grant_read.as_deref(),
            grant_read_acp: $input.grant_read_acp.as_deref(),
            grant_write_acp: $input.grant_write_acp.as_deref(),
            grant_full_control: $input.grant_full_control.as_deref(),
            ..Default::default()
        }
    };
}
pub(crate) use acl_request;

/// An HTTP date of a stored ns time (error replies' Last-Modified).
pub(crate) fn http_date_of(ns: u64) -> String {
    convert::http_date(&convert::timestamp(ns))
}

fn ok<T>(output: T) -> S3Result<S3Response<T>> {
    Ok(S3Response::new(output))
}

macro_rules! route {
    ($self:ident . $method:ident ( $req:ident )) => {{
        if let Err(error) = $self.check_expected_owner(&$req).await {
            return Err(error.into());
        }
        match $self.$method($req).await {
            Ok(output) => ok(output),
            Err(error) => Err(error.into()),
        }
    }};
}

#[async_trait::async_trait]
impl S3 for Gateway {
    async fn create_bucket(
        &self,
        req: S3Request<CreateBucketInput>,
    ) -> S3Result<S3Response<CreateBucketOutput>> {
        route!(self.do_create_bucket(req))
    }

    async fn delete_bucket(
        &self,
        req: S3Request<DeleteBucketInput>,
    ) -> S3Result<S3Response<DeleteBucketOutput>> {
        route!(self.do_delete_bucket(req))
    }

    async fn head_bucket(
        &self,
        req: S3Request<HeadBucketInput>,
    ) -> S3Result<S3Response<HeadBucketOutput>> {
        route!(self.do_head_bucket(req))
    }

    async fn list_buckets(
        &self,
        req: S3Request<ListBucketsInput>,
    ) -> S3Result<S3Response<ListBucketsOutput>> {
        route!(self.do_list_buckets(req))
    }

    async fn get_bucket_location(
        &self,
        req: S3Request<GetBucketLocationInput>,
    ) -> S3Result<S3Response<GetBucketLocationOutput>> {
        route!(self.do_get_bucket_location(req))
    }

    async fn get_bucket_acl(
        &self,
        req: S3Request<GetBucketAclInput>,
    ) -> S3Result<S3Response<GetBucketAclOutput>> {
        route!(self.do_get_bucket_acl(req))
    }

    async fn put_bucket_acl(
        &self,
        req: S3Request<PutBucketAclInput>,
    ) -> S3Result<S3Response<PutBucketAclOutput>> {
        route!(self.do_put_bucket_acl(req))
    }

    async fn list_objects(
        &self,
        req: S3Request<ListObjectsInput>,
    ) -> S3Result<S3Response<ListObjectsOutput>> {
        route!(self.do_list_objects(req))
    }

    async fn list_objects_v2(
        &self,
        req: S3Request<ListObjectsV2Input>,
    ) -> S3Result<S3Response<ListObjectsV2Output>> {
        route!(self.do_list_objects_v2(req))
    }

    async fn list_object_versions(
        &self,
        req: S3Request<ListObjectVersionsInput>,
    ) -> S3Result<S3Response<ListObjectVersionsOutput>> {
        route!(self.do_list_object_versions(req))
    }

    async fn put_bucket_versioning(
        &self,
        req: S3Request<PutBucketVersioningInput>,
    ) -> S3Result<S3Response<PutBucketVersioningOutput>> {
        route!(self.do_put_bucket_versioning(req))
    }

    async fn get_bucket_versioning(
        &self,
        req: S3Request<GetBucketVersioningInput>,
    ) -> S3Result<S3Response<GetBucketVersioningOutput>> {
        route!(self.do_get_bucket_versioning(req))
    }

    async fn put_object(
        &self,
        req: S3Request<PutObjectInput>,
    ) -> S3Result<S3Response<PutObjectOutput>> {
        route!(self.do_put_object(req))
    }

    async fn get_object(
        &self,
        req: S3Request<GetObjectInput>,
    ) -> S3Result<S3Response<GetObjectOutput>> {
        route!(self.do_get_object(req))
    }

    async fn get_object_attributes(
        &self,
        req: S3Request<GetObjectAttributesInput>,
    ) -> S3Result<S3Response<GetObjectAttributesOutput>> {
        route!(self.do_get_object_attributes(req))
    }

    async fn head_object(
        &self,
        req: S3Request<HeadObjectInput>,
    ) -> S3Result<S3Response<HeadObjectOutput>> {
        route!(self.do_head_object(req))
    }

    async fn delete_object(
        &self,
        req: S3Request<DeleteObjectInput>,
    ) -> S3Result<S3Response<DeleteObjectOutput>> {
        route!(self.do_delete_object(req))
    }

    async fn delete_objects(
        &self,
        req: S3Request<DeleteObjectsInput>,
    ) -> S3Result<S3Response<DeleteObjectsOutput>> {
        route!(self.do_delete_objects(req))
    }

    async fn copy_object(
        &self,
        req: S3Request<CopyObjectInput>,
    ) -> S3Result<S3Response<CopyObjectOutput>> {
        route!(self.do_copy_object(req))
    }

    async fn get_object_acl(
        &self,
        req: S3Request<GetObjectAclInput>,
    ) -> S3Result<S3Response<GetObjectAclOutput>> {
        route!(self.do_get_object_acl(req))
    }

    async fn put_object_acl(
        &self,
        req: S3Request<PutObjectAclInput>,
    ) -> S3Result<S3Response<PutObjectAclOutput>> {
        route!(self.do_put_object_acl(req))
    }

    async fn create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        route!(self.do_create_multipart_upload(req))
    }

    async fn upload_part(
        &self,
        req: S3Request<UploadPartInput>,
    ) -> S3Result<S3Response<UploadPartOutput>> {
        route!(self.do_upload_part(req))
    }

    async fn upload_part_copy(
        &self,
        req: S3Request<UploadPartCopyInput>,
    ) -> S3Result<S3Response<UploadPartCopyOutput>> {
        route!(self.do_upload_part_copy(req))
    }

    async fn list_parts(
        &self,
        req: S3Request<ListPartsInput>,
    ) -> S3Result<S3Response<ListPartsOutput>> {
        route!(self.do_list_parts(req))
    }

    async fn list_multipart_uploads(
        &self,
        req: S3Request<ListMultipartUploadsInput>,
    ) -> S3Result<S3Response<ListMultipartUploadsOutput>> {
        route!(self.do_list_multipart_uploads(req))
    }

    async fn complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        route!(self.do_complete_multipart_upload(req))
    }

    async fn abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        route!(self.do_abort_multipart_upload(req))
    }
    async fn put_object_lock_configuration(
        &self,
        req: S3Request<PutObjectLockConfigurationInput>,
    ) -> S3Result<S3Response<PutObjectLockConfigurationOutput>> {
        route!(self.do_put_object_lock_configuration(req))
    }

    async fn get_object_lock_configuration(
        &self,
        req: S3Request<GetObjectLockConfigurationInput>,
    ) -> S3Result<S3Response<GetObjectLockConfigurationOutput>> {
        route!(self.do_get_object_lock_configuration(req))
    }

    async fn put_object_retention(
        &self,
        req: S3Request<PutObjectRetentionInput>,
    ) -> S3Result<S3Response<PutObjectRetentionOutput>> {
        route!(self.do_put_object_retention(req))
    }

    async fn get_object_retention(
        &self,
        req: S3Request<GetObjectRetentionInput>,
    ) -> S3Result<S3Response<GetObjectRetentionOutput>> {
        route!(self.do_get_object_retention(req))
    }

    async fn put_object_legal_hold(
        &self,
        req: S3Request<PutObjectLegalHoldInput>,
    ) -> S3Result<S3Response<PutObjectLegalHoldOutput>> {
        route!(self.do_put_object_legal_hold(req))
    }

    async fn get_object_legal_hold(
        &self,
        req: S3Request<GetObjectLegalHoldInput>,
    ) -> S3Result<S3Response<GetObjectLegalHoldOutput>> {
        route!(self.do_get_object_legal_hold(req))
    }

    async fn get_object_torrent(
        &self,
        req: S3Request<GetObjectTorrentInput>,
    ) -> S3Result<S3Response<GetObjectTorrentOutput>> {
        route!(self.do_get_object_torrent(req))
    }

    async fn get_bucket_policy_status(
        &self,
        req: S3Request<GetBucketPolicyStatusInput>,
    ) -> S3Result<S3Response<GetBucketPolicyStatusOutput>> {
        route!(self.do_get_bucket_policy_status(req))
    }
    async fn put_bucket_policy(
        &self,
        req: S3Request<PutBucketPolicyInput>,
    ) -> S3Result<S3Response<PutBucketPolicyOutput>> {
        route!(self.do_put_bucket_policy(req))
    }

    async fn get_bucket_policy(
        &self,
        req: S3Request<GetBucketPolicyInput>,
    ) -> S3Result<S3Response<GetBucketPolicyOutput>> {
        route!(self.do_get_bucket_policy(req))
    }

    async fn delete_bucket_policy(
        &self,
        req: S3Request<DeleteBucketPolicyInput>,
    ) -> S3Result<S3Response<DeleteBucketPolicyOutput>> {
        route!(self.do_delete_bucket_policy(req))
    }

    async fn put_public_access_block(
        &self,
        req: S3Request<PutPublicAccessBlockInput>,
    ) -> S3Result<S3Response<PutPublicAccessBlockOutput>> {
        route!(self.do_put_public_access_block(req))
    }

    async fn get_public_access_block(
        &self,
        req: S3Request<GetPublicAccessBlockInput>,
    ) -> S3Result<S3Response<GetPublicAccessBlockOutput>> {
        route!(self.do_get_public_access_block(req))
    }

    async fn delete_public_access_block(
        &self,
        req: S3Request<DeletePublicAccessBlockInput>,
    ) -> S3Result<S3Response<DeletePublicAccessBlockOutput>> {
        route!(self.do_delete_public_access_block(req))
    }
    async fn put_bucket_cors(
        &self,
        req: S3Request<PutBucketCorsInput>,
    ) -> S3Result<S3Response<PutBucketCorsOutput>> {
        route!(self.do_put_bucket_cors(req))
    }

    async fn get_bucket_cors(
        &self,
        req: S3Request<GetBucketCorsInput>,
    ) -> S3Result<S3Response<GetBucketCorsOutput>> {
        route!(self.do_get_bucket_cors(req))
    }

    async fn delete_bucket_cors(
        &self,
        req: S3Request<DeleteBucketCorsInput>,
    ) -> S3Result<S3Response<DeleteBucketCorsOutput>> {
        route!(self.do_delete_bucket_cors(req))
    }

    async fn put_object_tagging(
        &self,
        req: S3Request<PutObjectTaggingInput>,
    ) -> S3Result<S3Response<PutObjectTaggingOutput>> {
        route!(self.do_put_object_tagging(req))
    }

    async fn get_object_tagging(
        &self,
        req: S3Request<GetObjectTaggingInput>,
    ) -> S3Result<S3Response<GetObjectTaggingOutput>> {
        route!(self.do_get_object_tagging(req))
    }

    async fn delete_object_tagging(
        &self,
        req: S3Request<DeleteObjectTaggingInput>,
    ) -> S3Result<S3Response<DeleteObjectTaggingOutput>> {
        route!(self.do_delete_object_tagging(req))
    }

    async fn put_bucket_tagging(
        &self,
        req: S3Request<PutBucketTaggingInput>,
    ) -> S3Result<S3Response<PutBucketTaggingOutput>> {
        route!(self.do_put_bucket_tagging(req))
    }

    async fn get_bucket_tagging(
        &self,
        req: S3Request<GetBucketTaggingInput>,
    ) -> S3Result<S3Response<GetBucketTaggingOutput>> {
        route!(self.do_get_bucket_tagging(req))
    }

    async fn delete_bucket_tagging(
        &self,
        req: S3Request<DeleteBucketTaggingInput>,
    ) -> S3Result<S3Response<DeleteBucketTaggingOutput>> {
        route!(self.do_delete_bucket_tagging(req))
    }

    async fn put_bucket_encryption(
        &self,
        req: S3Request<PutBucketEncryptionInput>,
    ) -> S3Result<S3Response<PutBucketEncryptionOutput>> {
        route!(self.do_put_bucket_encryption(req))
    }

    async fn get_bucket_encryption(
        &self,
        req: S3Request<GetBucketEncryptionInput>,
    ) -> S3Result<S3Response<GetBucketEncryptionOutput>> {
        route!(self.do_get_bucket_encryption(req))
    }

    async fn delete_bucket_encryption(
        &self,
        req: S3Request<DeleteBucketEncryptionInput>,
    ) -> S3Result<S3Response<DeleteBucketEncryptionOutput>> {
        route!(self.do_delete_bucket_encryption(req))
    }

    async fn put_bucket_lifecycle_configuration(
        &self,
        req: S3Request<PutBucketLifecycleConfigurationInput>,
    ) -> S3Result<S3Response<PutBucketLifecycleConfigurationOutput>> {
        route!(self.do_put_bucket_lifecycle_configuration(req))
    }

    async fn get_bucket_lifecycle_configuration(
        &self,
        req: S3Request<GetBucketLifecycleConfigurationInput>,
    ) -> S3Result<S3Response<GetBucketLifecycleConfigurationOutput>> {
        route!(self.do_get_bucket_lifecycle_configuration(req))
    }

    async fn delete_bucket_lifecycle(
        &self,
        req: S3Request<DeleteBucketLifecycleInput>,
    ) -> S3Result<S3Response<DeleteBucketLifecycleOutput>> {
        route!(self.do_delete_bucket_lifecycle(req))
    }
}
