//! Operations whose feature strata does not have (object lock, torrents) answered the way S3
//! answers them for a bucket or object without the feature, after the same access checks as
//! any read or write, so clients see a precise 4xx instead of 501 NotImplemented. Also the
//! bucket configuration kept with the bucket: its policy ([`crate::policy`], evaluated by
//! every access check), policy status, public access block and CORS rules
//! ([`crate::server`] applies them).

use s3s::dto::*;
use s3s::S3Request;

use super::Gateway;
use crate::acl::Requester;
use crate::acl::{Grantee, Permission};
use crate::cors::CorsRule;
use crate::error::{GatewayError, Result};
use crate::layout::{BucketRecord, PublicAccessBlock};
use crate::policy::{Context, Decision, Policy};

fn no_object_lock() -> GatewayError {
    GatewayError::InvalidRequest("the bucket has no object lock configuration".into())
}

impl Gateway {
    /// The object lock refusals: after the access check any such request makes (so a
    /// stranger still gets AccessDenied), the answer for a bucket without object lock.
    async fn refuse_object_lock<I, O>(
        &self,
        req: &S3Request<I>,
        bucket: &str,
        action: &str,
        permission: Permission,
        refusal: GatewayError,
    ) -> Result<O> {
        let requester = self.requester(req).await?;
        self.bucket_for(bucket, &requester, action, permission)
            .await?;
        Err(refusal)
    }

    pub(super) async fn do_put_object_lock_configuration(
        &self,
        req: S3Request<PutObjectLockConfigurationInput>,
    ) -> Result<PutObjectLockConfigurationOutput> {
        let refusal = GatewayError::InvalidBucketState(
            "object lock cannot be enabled on an existing bucket".into(),
        );
        self.refuse_object_lock(
            &req,
            &req.input.bucket,
            "s3:PutBucketObjectLockConfiguration",
            Permission::WriteAcp,
            refusal,
        )
        .await
    }

    pub(super) async fn do_get_object_lock_configuration(
        &self,
        req: S3Request<GetObjectLockConfigurationInput>,
    ) -> Result<GetObjectLockConfigurationOutput> {
        let refusal = GatewayError::ObjectLockConfigurationNotFound;
        self.refuse_object_lock(
            &req,
            &req.input.bucket,
            "s3:GetBucketObjectLockConfiguration",
            Permission::ReadAcp,
            refusal,
        )
        .await
    }

    pub(super) async fn do_put_object_retention(
        &self,
        req: S3Request<PutObjectRetentionInput>,
    ) -> Result<PutObjectRetentionOutput> {
        self.refuse_object_lock(
            &req,
            &req.input.bucket,
            "s3:PutObjectRetention",
            Permission::Write,
            no_object_lock(),
        )
        .await
    }

    pub(super) async fn do_get_object_retention(
        &self,
        req: S3Request<GetObjectRetentionInput>,
    ) -> Result<GetObjectRetentionOutput> {
        self.refuse_object_lock(
            &req,
            &req.input.bucket,
            "s3:GetObjectRetention",
            Permission::Read,
            no_object_lock(),
        )
        .await
    }

    pub(super) async fn do_put_object_legal_hold(
        &self,
        req: S3Request<PutObjectLegalHoldInput>,
    ) -> Result<PutObjectLegalHoldOutput> {
        self.refuse_object_lock(
            &req,
            &req.input.bucket,
            "s3:PutObjectLegalHold",
            Permission::Write,
            no_object_lock(),
        )
        .await
    }

    pub(super) async fn do_get_object_legal_hold(
        &self,
        req: S3Request<GetObjectLegalHoldInput>,
    ) -> Result<GetObjectLegalHoldOutput> {
        self.refuse_object_lock(
            &req,
            &req.input.bucket,
            "s3:GetObjectLegalHold",
            Permission::Read,
            no_object_lock(),
        )
        .await
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
            None,
            &requester,
            Permission::Read,
        )
        .await?;
        Err(GatewayError::NoSuchKey(format!(
            "{} (no torrent)",
            req.input.key
        )))
    }

    /// Public when the ACL grants anything to all or to all authenticated users, or the
    /// bucket policy allows something to everyone without a condition.
    pub(super) async fn do_get_bucket_policy_status(
        &self,
        req: S3Request<GetBucketPolicyStatusInput>,
    ) -> Result<GetBucketPolicyStatusOutput> {
        let requester = self.requester(&req).await?;
        let bucket = self
            .owned_bucket(&req.input.bucket, &requester, "s3:GetBucketPolicyStatus")
            .await?;
        let public_policy = bucket
            .policy
            .as_deref()
            .and_then(|text| Policy::parse(text).ok())
            .is_some_and(|policy| policy.is_public());
        let public = public_policy
            || bucket
                .grants()
                .iter()
                .any(|g| matches!(g.grantee, Grantee::AllUsers | Grantee::AuthenticatedUsers));
        Ok(GetBucketPolicyStatusOutput {
            policy_status: Some(PolicyStatus {
                is_public: Some(public),
            }),
        })
    }

    /// The bucket, if `requester` may do `action` (a bucket configuration operation) on it:
    /// its owner unless the bucket policy denies it, others only where the policy allows it.
    pub(super) async fn owned_bucket(
        &self,
        name: &str,
        requester: &Requester,
        action: &str,
    ) -> Result<BucketRecord> {
        let bucket = self.store.bucket(name).await?;
        let allowed =
            match super::policy_decision(&bucket, requester, action, None, &Context::new()) {
                Decision::Deny => false,
                Decision::Allow => true,
                Decision::Unspecified => {
                    *requester == Requester::System
                        || requester.uid() == Some(bucket.owner.as_str())
                }
            };
        if !allowed {
            return Err(GatewayError::AccessDenied);
        }
        Ok(bucket)
    }

    /// Checks the document ([`Policy::parse`]) and, unless the public access block refuses
    /// public policies and this one is public, keeps it with the bucket.
    pub(super) async fn do_put_bucket_policy(
        &self,
        req: S3Request<PutBucketPolicyInput>,
    ) -> Result<PutBucketPolicyOutput> {
        let requester = self.requester(&req).await?;
        let mut bucket = self
            .owned_bucket(&req.input.bucket, &requester, "s3:PutBucketPolicy")
            .await?;
        let policy = Policy::parse(&req.input.policy)?;
        let blocks = bucket
            .public_access_block
            .is_some_and(|b| b.block_public_policy);
        if blocks && policy.is_public() {
            return Err(GatewayError::AccessDenied);
        }
        bucket.policy = Some(req.input.policy);
        self.store.save_bucket(&bucket).await?;
        Ok(PutBucketPolicyOutput::default())
    }

    pub(super) async fn do_get_bucket_policy(
        &self,
        req: S3Request<GetBucketPolicyInput>,
    ) -> Result<GetBucketPolicyOutput> {
        let requester = self.requester(&req).await?;
        let bucket = self
            .owned_bucket(&req.input.bucket, &requester, "s3:GetBucketPolicy")
            .await?;
        let policy = bucket.policy.ok_or(GatewayError::NoSuchBucketPolicy)?;
        Ok(GetBucketPolicyOutput {
            policy: Some(policy),
        })
    }

    pub(super) async fn do_delete_bucket_policy(
        &self,
        req: S3Request<DeleteBucketPolicyInput>,
    ) -> Result<DeleteBucketPolicyOutput> {
        let requester = self.requester(&req).await?;
        let mut bucket = self
            .owned_bucket(&req.input.bucket, &requester, "s3:DeleteBucketPolicy")
            .await?;
        if bucket.policy.take().is_some() {
            self.store.save_bucket(&bucket).await?;
        }
        Ok(DeleteBucketPolicyOutput::default())
    }

    pub(super) async fn do_put_public_access_block(
        &self,
        req: S3Request<PutPublicAccessBlockInput>,
    ) -> Result<PutPublicAccessBlockOutput> {
        let requester = self.requester(&req).await?;
        let mut bucket = self
            .owned_bucket(
                &req.input.bucket,
                &requester,
                "s3:PutBucketPublicAccessBlock",
            )
            .await?;
        let given = &req.input.public_access_block_configuration;
        bucket.public_access_block = Some(PublicAccessBlock {
            block_public_acls: given.block_public_acls.unwrap_or(false),
            ignore_public_acls: given.ignore_public_acls.unwrap_or(false),
            block_public_policy: given.block_public_policy.unwrap_or(false),
            restrict_public_buckets: given.restrict_public_buckets.unwrap_or(false),
        });
        self.store.save_bucket(&bucket).await?;
        Ok(PutPublicAccessBlockOutput::default())
    }

    pub(super) async fn do_get_public_access_block(
        &self,
        req: S3Request<GetPublicAccessBlockInput>,
    ) -> Result<GetPublicAccessBlockOutput> {
        let requester = self.requester(&req).await?;
        let bucket = self
            .owned_bucket(
                &req.input.bucket,
                &requester,
                "s3:GetBucketPublicAccessBlock",
            )
            .await?;
        let block = bucket
            .public_access_block
            .ok_or(GatewayError::NoSuchPublicAccessBlockConfiguration)?;
        Ok(GetPublicAccessBlockOutput {
            public_access_block_configuration: Some(PublicAccessBlockConfiguration {
                block_public_acls: Some(block.block_public_acls),
                ignore_public_acls: Some(block.ignore_public_acls),
                block_public_policy: Some(block.block_public_policy),
                restrict_public_buckets: Some(block.restrict_public_buckets),
            }),
        })
    }

    pub(super) async fn do_delete_public_access_block(
        &self,
        req: S3Request<DeletePublicAccessBlockInput>,
    ) -> Result<DeletePublicAccessBlockOutput> {
        let requester = self.requester(&req).await?;
        let mut bucket = self
            .owned_bucket(
                &req.input.bucket,
                &requester,
                "s3:PutBucketPublicAccessBlock",
            )
            .await?;
        if bucket.public_access_block.take().is_some() {
            self.store.save_bucket(&bucket).await?;
        }
        Ok(DeletePublicAccessBlockOutput::default())
    }

    pub(super) async fn do_put_bucket_cors(
        &self,
        req: S3Request<PutBucketCorsInput>,
    ) -> Result<PutBucketCorsOutput> {
        let requester = self.requester(&req).await?;
        let mut bucket = self
            .owned_bucket(&req.input.bucket, &requester, "s3:PutBucketCORS")
            .await?;
        let rules: Vec<CorsRule> = req
            .input
            .cors_configuration
            .cors_rules
            .into_iter()
            .map(|rule| CorsRule {
                id: rule.id,
                allowed_origins: rule.allowed_origins,
                allowed_methods: rule.allowed_methods,
                allowed_headers: rule.allowed_headers.unwrap_or_default(),
                expose_headers: rule.expose_headers.unwrap_or_default(),
                max_age_s: rule.max_age_seconds,
            })
            .collect();
        if rules.is_empty() {
            return Err(GatewayError::Malformed(
                "CORS configuration without rules".into(),
            ));
        }
        bucket.cors = Some(rules);
        self.store.save_bucket(&bucket).await?;
        Ok(PutBucketCorsOutput::default())
    }

    pub(super) async fn do_get_bucket_cors(
        &self,
        req: S3Request<GetBucketCorsInput>,
    ) -> Result<GetBucketCorsOutput> {
        let requester = self.requester(&req).await?;
        let bucket = self
            .owned_bucket(&req.input.bucket, &requester, "s3:GetBucketCORS")
            .await?;
        let rules = bucket.cors.ok_or(GatewayError::NoSuchCorsConfiguration)?;
        let non_empty = |v: Vec<String>| (!v.is_empty()).then_some(v);
        Ok(GetBucketCorsOutput {
            cors_rules: Some(
                rules
                    .into_iter()
                    .map(|rule| CORSRule {
                        id: rule.id,
                        allowed_origins: rule.allowed_origins,
                        allowed_methods: rule.allowed_methods,
                        allowed_headers: non_empty(rule.allowed_headers),
                        expose_headers: non_empty(rule.expose_headers),
                        max_age_seconds: rule.max_age_s,
                    })
                    .collect(),
            ),
        })
    }

    pub(super) async fn do_delete_bucket_cors(
        &self,
        req: S3Request<DeleteBucketCorsInput>,
    ) -> Result<DeleteBucketCorsOutput> {
        let requester = self.requester(&req).await?;
        let mut bucket = self
            .owned_bucket(&req.input.bucket, &requester, "s3:PutBucketCORS")
            .await?;
        if bucket.cors.take().is_some() {
            self.store.save_bucket(&bucket).await?;
        }
        Ok(DeleteBucketCorsOutput::default())
    }
}
