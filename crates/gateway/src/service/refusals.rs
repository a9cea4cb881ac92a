//! Operations whose feature strata does not have (object lock, torrents) answered the way S3
//! answers them for a bucket or object without the feature, after the same access checks as
//! any read or write, so clients see a precise 4xx instead of 501 NotImplemented. Also the
//! bucket policy status, which without bucket policies follows from the ACL alone.

use s3s::dto::*;
use s3s::S3Request;

use super::Gateway;
use crate::acl::{Grantee, Permission};
use crate::error::{GatewayError, Result};

fn no_object_lock() -> GatewayError {
    GatewayError::InvalidRequest("the bucket has no object lock configuration".into())
}

impl Gateway {
    pub(super) async fn do_put_object_lock_configuration(
        &self,
        req: S3Request<PutObjectLockConfigurationInput>,
    ) -> Result<PutObjectLockConfigurationOutput> {
        let requester = self.requester(&req).await?;
        self.bucket_for(&req.input.bucket, &requester, Permission::WriteAcp)
            .await?;
        Err(GatewayError::InvalidBucketState(
            "object lock cannot be enabled on an existing bucket".into(),
        ))
    }

    pub(super) async fn do_get_object_lock_configuration(
        &self,
        req: S3Request<GetObjectLockConfigurationInput>,
    ) -> Result<GetObjectLockConfigurationOutput> {
        let requester = self.requester(&req).await?;
        self.bucket_for(&req.input.bucket, &requester, Permission::ReadAcp)
            .await?;
        Err(GatewayError::ObjectLockConfigurationNotFound)
    }

    pub(super) async fn do_put_object_retention(
        &self,
        req: S3Request<PutObjectRetentionInput>,
    ) -> Result<PutObjectRetentionOutput> {
        let requester = self.requester(&req).await?;
        self.bucket_for(&req.input.bucket, &requester, Permission::Write)
            .await?;
        Err(no_object_lock())
    }

    pub(super) async fn do_get_object_retention(
        &self,
        req: S3Request<GetObjectRetentionInput>,
    ) -> Result<GetObjectRetentionOutput> {
        let requester = self.requester(&req).await?;
        self.bucket_for(&req.input.bucket, &requester, Permission::Read)
            .await?;
        Err(no_object_lock())
    }

    pub(super) async fn do_put_object_legal_hold(
        &self,
        req: S3Request<PutObjectLegalHoldInput>,
    ) -> Result<PutObjectLegalHoldOutput> {
        let requester = self.requester(&req).await?;
        self.bucket_for(&req.input.bucket, &requester, Permission::Write)
            .await?;
        Err(no_object_lock())
    }

    pub(super) async fn do_get_object_legal_hold(
        &self,
        req: S3Request<GetObjectLegalHoldInput>,
    ) -> Result<GetObjectLegalHoldOutput> {
        let requester = self.requester(&req).await?;
        self.bucket_for(&req.input.bucket, &requester, Permission::Read)
            .await?;
        Err(no_object_lock())
    }

    /// No torrent is ever stored for an object, so there is none to return (radosgw answers
    /// NoSuchKey the same way when it has no torrent for an object).
    pub(super) async fn do_get_object_torrent(
        &self,
        req: S3Request<GetObjectTorrentInput>,
    ) -> Result<GetObjectTorrentOutput> {
        let requester = self.requester(&req).await?;
        self.object_for(
            &req.input.bucket,
            &req.input.key,
            &requester,
            Permission::Read,
        )
        .await?;
        Err(GatewayError::NoSuchKey(format!(
            "{} (no torrent)",
            req.input.key
        )))
    }

    /// Public when the ACL grants anything to all or to all authenticated users.
    pub(super) async fn do_get_bucket_policy_status(
        &self,
        req: S3Request<GetBucketPolicyStatusInput>,
    ) -> Result<GetBucketPolicyStatusOutput> {
        let requester = self.requester(&req).await?;
        let bucket = self
            .bucket_for(&req.input.bucket, &requester, Permission::ReadAcp)
            .await?;
        let public = bucket
            .grants()
            .iter()
            .any(|g| matches!(g.grantee, Grantee::AllUsers | Grantee::AuthenticatedUsers));
        Ok(GetBucketPolicyStatusOutput {
            policy_status: Some(PolicyStatus {
                is_public: Some(public),
            }),
        })
    }
}
