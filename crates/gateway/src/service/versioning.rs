//! Bucket versioning operations: the versioning configuration and ListObjectVersions. How
//! versions are stored is [`crate::versioning`]'s; the object operations take version ids in
//! [`super::objects`].

use s3s::dto::*;
use s3s::S3Request;

use super::buckets::{is_url, max_keys, prefixes_dto, MAX_KEYS_DEFAULT};
use super::convert::{self, encode_name};
use super::Gateway;
use crate::error::{GatewayError, Result};
use crate::layout::Versioning;
use crate::list;
use crate::versioning::{Found, NULL_VERSION_ID};

impl Gateway {
    /// Enabled or Suspended, by the bucket's owner or whom its policy allows
    /// `s3:PutBucketVersioning` (as radosgw decides). A bucket never goes back to having no versioning; MFA delete
    /// is not supported (strata has no MFA devices), so only `Disabled` is accepted for it.
    pub(super) async fn do_put_bucket_versioning(
        &self,
        req: S3Request<PutBucketVersioningInput>,
    ) -> Result<PutBucketVersioningOutput> {
        let requester = self.requester(&req).await?;
        let input = req.input;
        let mut bucket = self
            .owned_bucket(&input.bucket, &requester, "s3:PutBucketVersioning")
            .await?;
        let configuration = input.versioning_configuration;
        if configuration
            .mfa_delete
            .as_ref()
            .is_some_and(|m| m.as_str() != MFADelete::DISABLED)
        {
            return Err(GatewayError::NotImplemented("MFA delete".into()));
        }
        let status = match configuration.status.as_ref().map(|s| s.as_str()) {
            Some(BucketVersioningStatus::ENABLED) => Versioning::Enabled,
            Some(BucketVersioningStatus::SUSPENDED) => Versioning::Suspended,
            Some(other) => {
                return Err(GatewayError::Malformed(format!(
                    "versioning status {other:?}"
                )))
            }
            // Only MFADelete given: the status stays as it is.
            None => return Ok(PutBucketVersioningOutput::default()),
        };
        if bucket.versioning != Some(status) {
            bucket.versioning = Some(status);
            self.store.save_bucket(&bucket).await?;
        }
        // After the record (the truth): gateways with an older copy of it then fail their
        // next PUT's guard and read it. Stamped even when nothing changed, which repairs
        // the stamps of a change whose gateway died before this step.
        self.store.stamp_shards(&bucket).await?;
        Ok(PutBucketVersioningOutput::default())
    }

    /// The status; none for a bucket whose versioning was never configured.
    pub(super) async fn do_get_bucket_versioning(
        &self,
        req: S3Request<GetBucketVersioningInput>,
    ) -> Result<GetBucketVersioningOutput> {
        let requester = self.requester(&req).await?;
        let bucket = self
            .owned_bucket(&req.input.bucket, &requester, "s3:GetBucketVersioning")
            .await?;
        let status = bucket.versioning.map(|v| match v {
            Versioning::Enabled => {
                BucketVersioningStatus::from_static(BucketVersioningStatus::ENABLED)
            }
            Versioning::Suspended => {
                BucketVersioningStatus::from_static(BucketVersioningStatus::SUSPENDED)
            }
        });
        Ok(GetBucketVersioningOutput {
            mfa_delete: None,
            status,
        })
    }

    pub(super) async fn do_list_object_versions(
        &self,
        req: S3Request<ListObjectVersionsInput>,
    ) -> Result<ListObjectVersionsOutput> {
        let requester = self.requester(&req).await?;
        let input = req.input;
        let bucket = self
            .bucket_for_listing(
                &input.bucket,
                &requester,
                "s3:ListBucketVersions",
                input.prefix.as_deref(),
            )
            .await?;
        let url = is_url(&input.encoding_type)?;
        let prefix = input.prefix.clone().unwrap_or_default();
        let delimiter = input.delimiter.clone().unwrap_or_default();
        let max = max_keys(input.max_keys)?;
        let key_marker = input.key_marker.clone().filter(|m| !m.is_empty());
        let version_marker = input.version_id_marker.clone().filter(|m| !m.is_empty());
        // Where inside the marker key to continue: the marker version's suffix; a null
        // version without a version entry (or one gone since) continues after the key.
        let after_version = match (&key_marker, &version_marker) {
            (Some(key), Some(version)) if version == NULL_VERSION_ID => {
                let state = self.store.key_state(&bucket, key, usize::MAX).await?;
                match state.find(NULL_VERSION_ID) {
                    Some(Found::Entry(i)) => Some(state.versions[i].suffix.clone()),
                    _ => None,
                }
            }
            (Some(_), Some(version)) => {
                crate::store::Store::check_version_id(version)?;
                Some(version.clone())
            }
            (None, Some(_)) => {
                return Err(GatewayError::InvalidArgument(
                    "a version-id-marker needs a key-marker".into(),
                ))
            }
            _ => None,
        };
        let listing = list::list_versions(
            self.store.index.clone(),
            &bucket,
            &prefix,
            &delimiter,
            key_marker.as_deref(),
            after_version.as_deref(),
            max,
        )
        .await?;
        let owner = |id: &str| Owner {
            display_name: Some(id.to_string()),
            id: Some(id.to_string()),
        };
        let mut versions = Vec::new();
        let mut delete_markers = Vec::new();
        for item in listing.items {
            let key = Some(encode_name(url, &item.key));
            let last_modified = Some(convert::timestamp(item.entry.mtime_ns));
            if item.entry.delete_marker {
                delete_markers.push(DeleteMarkerEntry {
                    is_latest: Some(item.is_latest),
                    key,
                    last_modified,
                    owner: Some(owner(&item.entry.owner)),
                    version_id: Some(item.version_id),
                });
            } else {
                versions.push(ObjectVersion {
                    e_tag: Some(convert::etag(&item.entry.etag)),
                    is_latest: Some(item.is_latest),
                    key,
                    last_modified,
                    owner: Some(owner(&item.entry.owner)),
                    size: Some(item.entry.size as i64),
                    storage_class: Some(ObjectVersionStorageClass::from_static(
                        ObjectVersionStorageClass::STANDARD,
                    )),
                    version_id: Some(item.version_id),
                    ..Default::default()
                });
            }
        }
        let truncated = listing.truncated;
        Ok(ListObjectVersionsOutput {
            common_prefixes: Some(prefixes_dto(url, listing.prefixes)),
            delete_markers: Some(delete_markers),
            delimiter: input.delimiter.map(|d| encode_name(url, &d)),
            encoding_type: input.encoding_type,
            is_truncated: Some(truncated),
            key_marker: input.key_marker.map(|m| encode_name(url, &m)),
            max_keys: Some(input.max_keys.unwrap_or(MAX_KEYS_DEFAULT)),
            name: Some(input.bucket),
            next_key_marker: listing
                .next_key
                .filter(|_| truncated)
                .map(|k| encode_name(url, &k)),
            next_version_id_marker: listing.next_version_id.filter(|_| truncated),
            prefix: Some(encode_name(url, &prefix)),
            version_id_marker: input.version_id_marker,
            versions: Some(versions),
            ..Default::default()
        })
    }
}
