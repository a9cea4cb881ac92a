//! Object and bucket tagging ([`crate::tagging`]): the tag set of an object version is
//! changed in place (its mtime and ETag stay, as S3's), the bucket's is kept in its record.

use s3s::dto::*;
use s3s::S3Request;

use super::objects::version_header;
use super::Gateway;
use crate::acl::Permission;
use crate::error::{GatewayError, Result};
use crate::layout::BucketRecord;
use crate::tagging::{self, Tag};

/// Attempts of a tag change while the object keeps changing under it.
const TAG_RACE_RETRIES: usize = 8;

impl Gateway {
    /// Replaces the tag set of `key` (its version `version_id`, else the latest) with `tags`
    /// once the requester may do `action` on it; the version changed.
    async fn set_object_tags<T>(
        &self,
        req: &S3Request<T>,
        (bucket_name, key, version_id): (&str, &str, Option<&str>),
        action: &str,
        tags: Vec<Tag>,
    ) -> Result<Option<String>> {
        let requester = self.requester(req).await?;
        for _ in 0..TAG_RACE_RETRIES {
            let (bucket, read) = self
                .object_for_action_in(
                    bucket_name,
                    (key, version_id),
                    &requester,
                    (Permission::Write, action),
                    &tagging::request_tags_context(&tags),
                )
                .await?;
            let mut entry = read.clone();
            entry.tags = tags.clone();
            // Unless a write or a delete replaced the version meanwhile: then again, on
            // what is there now.
            if self
                .store
                .update_version(&bucket, key, version_id, &read, entry)
                .await?
            {
                return Ok(version_header(&bucket, &read));
            }
        }
        Err(rados::RadosError::CompareFailed(format!(
            "{bucket_name}/{key}: the object changed under {TAG_RACE_RETRIES} tag updates in a row"
        ))
        .into())
    }

    pub(super) async fn do_put_object_tagging(
        &self,
        req: S3Request<PutObjectTaggingInput>,
    ) -> Result<PutObjectTaggingOutput> {
        let tags = tagging::from_dto(req.input.tagging.clone(), tagging::OBJECT_TAGS_MAX)?;
        let input = &req.input;
        let version_id = self
            .set_object_tags(
                &req,
                (&input.bucket, &input.key, input.version_id.as_deref()),
                "s3:PutObjectTagging",
                tags,
            )
            .await?;
        Ok(PutObjectTaggingOutput { version_id })
    }

    pub(super) async fn do_delete_object_tagging(
        &self,
        req: S3Request<DeleteObjectTaggingInput>,
    ) -> Result<DeleteObjectTaggingOutput> {
        let input = &req.input;
        let version_id = self
            .set_object_tags(
                &req,
                (&input.bucket, &input.key, input.version_id.as_deref()),
                "s3:DeleteObjectTagging",
                Vec::new(),
            )
            .await?;
        Ok(DeleteObjectTaggingOutput { version_id })
    }

    pub(super) async fn do_get_object_tagging(
        &self,
        req: S3Request<GetObjectTaggingInput>,
    ) -> Result<GetObjectTaggingOutput> {
        let requester = self.requester(&req).await?;
        let input = req.input;
        let (bucket, entry) = self
            .object_for_action(
                &input.bucket,
                (&input.key, input.version_id.as_deref()),
                &requester,
                Permission::Read,
                "s3:GetObjectTagging",
            )
            .await?;
        Ok(GetObjectTaggingOutput {
            tag_set: tagging::to_dto(&entry.tags),
            version_id: version_header(&bucket, &entry),
        })
    }

    /// The bucket, if `requester` may do the bucket tagging operation `action` on it.
    async fn tagged_bucket<T>(
        &self,
        req: &S3Request<T>,
        name: &str,
        action: &str,
    ) -> Result<BucketRecord> {
        let requester = self.requester(req).await?;
        self.owned_bucket(name, &requester, action).await
    }

    pub(super) async fn do_put_bucket_tagging(
        &self,
        req: S3Request<PutBucketTaggingInput>,
    ) -> Result<PutBucketTaggingOutput> {
        let mut bucket = self
            .tagged_bucket(&req, &req.input.bucket, "s3:PutBucketTagging")
            .await?;
        let tags = tagging::from_dto(req.input.tagging, tagging::BUCKET_TAGS_MAX)?;
        bucket.tags = Some(tags);
        self.store.save_bucket(&bucket).await?;
        Ok(PutBucketTaggingOutput::default())
    }

    pub(super) async fn do_get_bucket_tagging(
        &self,
        req: S3Request<GetBucketTaggingInput>,
    ) -> Result<GetBucketTaggingOutput> {
        let bucket = self
            .tagged_bucket(&req, &req.input.bucket, "s3:GetBucketTagging")
            .await?;
        let tags = bucket.tags.ok_or(GatewayError::NoSuchTagSet)?;
        Ok(GetBucketTaggingOutput {
            tag_set: tagging::to_dto(&tags),
        })
    }

    pub(super) async fn do_delete_bucket_tagging(
        &self,
        req: S3Request<DeleteBucketTaggingInput>,
    ) -> Result<DeleteBucketTaggingOutput> {
        let mut bucket = self
            .tagged_bucket(&req, &req.input.bucket, "s3:PutBucketTagging")
            .await?;
        if bucket.tags.take().is_some() {
            self.store.save_bucket(&bucket).await?;
        }
        Ok(DeleteBucketTaggingOutput::default())
    }
}
