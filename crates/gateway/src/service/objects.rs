//! Object operations: put, get, head, delete, copy, ACLs.

use std::collections::BTreeMap;

use s3s::dto::*;
use s3s::S3Request;

use super::acl_request;
use super::acls::AclRequest;
use super::checksums::{self, checksum_fields};
use super::convert::{self, Conditions};
use super::encryption::{answer_fields, SealedBody};
use super::Gateway;
use crate::acl::{self, Permission, Requester};
use crate::error::{GatewayError, Result};
use crate::layout::{BucketRecord, ObjectEntry};
use crate::policy::{Context, Decision};
use crate::server::ChannelStream;
use crate::store::{Body, DeleteCondition, Unversioned};

/// Standard headers kept with an object, from the request fields.
pub(super) fn standard_headers(
    content_type: Option<&str>,
    content_encoding: Option<&str>,
    cache_control: Option<&str>,
    content_disposition: Option<&str>,
    content_language: Option<&str>,
    expires: Option<&Timestamp>,
) -> BTreeMap<String, String> {
    let mut headers = BTreeMap::new();
    let mut put = |name: &str, value: Option<&str>| {
        if let Some(value) = value {
            headers.insert(name.to_string(), value.to_string());
        }
    };
    // S3's default type; `aws-chunked` is the upload's framing, not the object's encoding.
    put(
        "content-type",
        Some(content_type.unwrap_or("binary/octet-stream")),
    );
    let content_encoding = content_encoding.map(|value| {
        value
            .split(',')
            .map(str::trim)
            .filter(|e| !e.eq_ignore_ascii_case("aws-chunked"))
            .collect::<Vec<_>>()
            .join(", ")
    });
    put(
        "content-encoding",
        content_encoding.as_deref().filter(|e| !e.is_empty()),
    );
    put("cache-control", cache_control);
    put("content-disposition", content_disposition);
    put("content-language", content_language);
    put("expires", expires.map(convert::http_date).as_deref());
    headers
}

fn header<'a>(entry: &'a ObjectEntry, name: &str) -> Option<&'a str> {
    entry.headers.get(name).map(String::as_str)
}

fn header_owned(entry: &ObjectEntry, name: &str) -> Option<String> {
    header(entry, name).map(str::to_string)
}

/// The representation headers a GET or HEAD answers with: each one a request's `response-*`
/// parameter names (signed requests only, see `server::refuse`), else the one the object
/// was stored with.
struct RepresentationHeaders {
    cache_control: Option<String>,
    content_disposition: Option<String>,
    content_encoding: Option<String>,
    content_language: Option<String>,
    content_type: Option<String>,
    expires: Option<Timestamp>,
}

/// The `response-*` overrides of a request input that has them (`GetObjectInput`,
/// `HeadObjectInput`: two s3s types with the same fields), as [`RepresentationHeaders`].
macro_rules! requested_headers {
    ($input:expr) => {
        RepresentationHeaders {
            cache_control: $input.response_cache_control,
            content_disposition: $input.response_content_disposition,
            content_encoding: $input.response_content_encoding,
            content_language: $input.response_content_language,
            content_type: $input.response_content_type,
            expires: $input.response_expires,
        }
    };
}

impl RepresentationHeaders {
    /// These, each one not requested taken from what `entry` was stored with.
    fn or_stored(self, entry: &ObjectEntry) -> Self {
        Self {
            cache_control: self
                .cache_control
                .or_else(|| header_owned(entry, "cache-control")),
            content_disposition: self
                .content_disposition
                .or_else(|| header_owned(entry, "content-disposition")),
            content_encoding: self
                .content_encoding
                .or_else(|| header_owned(entry, "content-encoding")),
            content_language: self
                .content_language
                .or_else(|| header_owned(entry, "content-language")),
            content_type: self
                .content_type
                .or_else(|| header_owned(entry, "content-type")),
            expires: self
                .expires
                .or_else(|| header(entry, "expires").and_then(convert::parse_http_date)),
        }
    }
}

/// Checks Content-MD5 (base64 of 16 bytes) against the body's digest.
pub(super) fn check_content_md5(given: Option<&str>, md5: &[u8; 16]) -> Result<()> {
    use base64::Engine;
    let Some(given) = given else {
        return Ok(());
    };
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(given.trim())
        .map_err(|_| GatewayError::InvalidDigest)?;
    if decoded.len() != 16 {
        return Err(GatewayError::InvalidDigest);
    }
    if decoded != md5 {
        return Err(GatewayError::BadDigest);
    }
    Ok(())
}

impl Gateway {
    /// The object (its version `version_id`, else the latest) if `requester` may do
    /// `permission` on it; AccessDenied rather than NoSuchKey when the requester may not even
    /// list the bucket. A delete marker is no object: NoSuchKey when it is the latest,
    /// MethodNotAllowed when named by its version id.
    pub(super) async fn object_for(
        &self,
        bucket_name: &str,
        key: &str,
        version_id: Option<&str>,
        requester: &Requester,
        permission: Permission,
    ) -> Result<(BucketRecord, ObjectEntry)> {
        let action = match permission {
            Permission::Read => "s3:GetObject",
            Permission::Write => "s3:PutObject",
            Permission::ReadAcp => "s3:GetObjectAcl",
            Permission::WriteAcp => "s3:PutObjectAcl",
        };
        self.object_for_action(
            bucket_name,
            (key, version_id),
            requester,
            permission,
            action,
        )
        .await
    }

    /// [`Gateway::object_for`] for a request whose policy action is `action` rather than the
    /// one of `permission` (tagging, attributes). The bucket policy sees the object's tags as
    /// `s3:ExistingObjectTag/<key>`.
    pub(super) async fn object_for_action(
        &self,
        bucket_name: &str,
        (key, version_id): (&str, Option<&str>),
        requester: &Requester,
        permission: Permission,
        action: &str,
    ) -> Result<(BucketRecord, ObjectEntry)> {
        self.object_for_action_in(
            bucket_name,
            (key, version_id),
            requester,
            (permission, action),
            &Context::new(),
        )
        .await
    }

    /// [`Gateway::object_for_action`] with the request's own condition values besides the
    /// object's tags (the tags PutObjectTagging sets).
    pub(super) async fn object_for_action_in(
        &self,
        bucket_name: &str,
        (key, version_id): (&str, Option<&str>),
        requester: &Requester,
        (permission, action): (Permission, &str),
        request_context: &Context,
    ) -> Result<(BucketRecord, ObjectEntry)> {
        // A read may decide on this gateway's copy of the bucket record (ACL and policy as
        // of at most `metadata_cache_ms` ago); a missing entry is looked up again in the
        // record as it is now (the copy may be of a bucket deleted, or deleted and created
        // again, since).
        let (bucket, copy) = match permission {
            Permission::Read | Permission::ReadAcp => self.store.bucket_cached(bucket_name).await?,
            Permission::Write | Permission::WriteAcp => {
                (self.store.bucket(bucket_name).await?, false)
            }
        };
        let mut found = self.entry_of(&bucket, key, version_id).await?;
        let bucket = match found {
            None if copy => {
                self.store.forget_bucket(bucket_name);
                let now = self.store.bucket(bucket_name).await?;
                found = self.entry_of(&now, key, version_id).await?;
                now
            }
            _ => bucket,
        };
        let Some(entry) = found else {
            // Whoever may list the key's name learns it is missing; others only AccessDenied.
            let context = Context::from([("s3:prefix".to_string(), key.to_string())]);
            let listable =
                match super::policy_decision(&bucket, requester, "s3:ListBucket", None, &context) {
                    Decision::Deny => false,
                    Decision::Allow => true,
                    Decision::Unspecified => {
                        let bucket_grants = super::access_grants(&bucket, bucket.grants());
                        acl::allows(&bucket.owner, &bucket_grants, requester, Permission::Read)
                    }
                };
            if !listable {
                return Err(GatewayError::AccessDenied);
            }
            if let Some(version_id) = version_id {
                return Err(GatewayError::NoSuchVersion(format!("{key} {version_id}")));
            }
            if bucket.versioning.is_some() {
                if let Some(marker) = self.store.latest_delete_marker(&bucket, key).await? {
                    return Err(GatewayError::LatestIsDeleteMarker {
                        key: key.to_string(),
                        version_id: marker.version_id.unwrap_or_default(),
                    });
                }
            }
            return Err(GatewayError::NoSuchKey(key.to_string()));
        };
        let mut context = crate::tagging::existing_tags_context(&entry.tags);
        context.extend(request_context.clone());
        let allowed = match super::policy_decision(&bucket, requester, action, Some(key), &context)
        {
            Decision::Deny => false,
            Decision::Allow => true,
            Decision::Unspecified => {
                let grants = super::access_grants(&bucket, entry.grants(&bucket.owner));
                acl::allows(&entry.owner, &grants, requester, permission)
            }
        };
        if !allowed {
            return Err(GatewayError::AccessDenied);
        }
        // Only after the access check: a delete marker's headers tell of the key's history.
        if entry.delete_marker {
            return Err(GatewayError::VersionIsDeleteMarker {
                version_id: entry.version_id.unwrap_or_default(),
                mtime_ns: entry.mtime_ns,
            });
        }
        Ok((bucket, entry))
    }

    /// The entry of `key` (its version `version_id`, else the latest), if there is one.
    async fn entry_of(
        &self,
        bucket: &BucketRecord,
        key: &str,
        version_id: Option<&str>,
    ) -> Result<Option<ObjectEntry>> {
        match version_id {
            None => self.store.entry_opt(bucket, key).await,
            Some(version_id) => self.store.version(bucket, key, version_id).await,
        }
    }

    pub(super) async fn do_put_object(
        &self,
        req: S3Request<PutObjectInput>,
    ) -> Result<PutObjectOutput> {
        let requester = self.requester(&req).await?;
        // An empty Content-MD5 header is a bad digest, not a missing one.
        let content_md5 = match req.headers.get("content-md5") {
            Some(value) if value.is_empty() => Some(String::new()),
            _ => req.input.content_md5.clone(),
        };
        super::integrity::refuse_unsupported_write_headers(&req.headers)?;
        let checksums = super::integrity::ChecksumCheck::of(&req.headers);
        let trailers = req.trailing_headers.clone();
        let input = req.input;
        // This gateway's copy of the bucket record decides, unless the intent's guard finds
        // it stale (the bucket deleted, its versioning changed): then it is read again and
        // everything it decided is decided again.
        let tags = tags_of(input.tagging.as_deref())?;
        let mut write_context = crate::tagging::request_tags_context(&tags);
        write_context.extend(super::encryption::request_context(&req.headers));
        let (mut bucket, mut fresh) = self
            .bucket_for_object_cached(
                &input.bucket,
                &requester,
                "s3:PutObject",
                &input.key,
                &write_context,
            )
            .await?;
        convert::validate_key(&input.key)?;
        // Everything that can refuse the request is checked before its data is written.
        let sealing = self.write_sealing(&req.headers, bucket.encryption.as_deref())?;
        let metadata = convert::metadata_in(input.metadata.clone())?;
        let condition =
            convert::write_condition(input.if_match.as_ref(), input.if_none_match.as_ref())?;
        let owner = Self::owner_of(&requester)?;
        let acl = input
            .acl
            .as_ref()
            .map(|a| a.as_str().to_string())
            .unwrap_or_default();
        let tag = self.store.new_tag(8);
        // A small PUT tells its pack group it is coming before its intent write, so the
        // group waits for it and for no one else (`store/pack_close.rs`).
        // The size it announces is the stored one (sealed, when encrypted), as decides below.
        let stored_length = input.content_length.map(|length| {
            let length = length.max(0) as u64;
            match sealing {
                Some(_) => crate::encryption::sealed_len(length),
                None => length,
            }
        });
        let arrival = self
            .store
            .announce_packed(&bucket, &tag, &input.key, stored_length)
            .await;
        let (grants, intent) = loop {
            let grants = self
                .grants_from_request(acl_request!(input), &owner, &bucket.owner)
                .await?;
            super::check_public_block(&bucket, &grants)?;
            // Orphan collection leaves the data of a write with a live intent alone.
            if fresh {
                let intent = self
                    .store
                    .begin_object_write_checked(&bucket, &input.key, &tag)
                    .await?;
                break (grants, intent);
            }
            let guarded = self
                .store
                .begin_object_write_guarded(&bucket, &input.key, &tag)
                .await?;
            if let Some(intent) = guarded {
                break (grants, intent);
            }
            self.store.forget_bucket(&input.bucket);
            bucket = self
                .bucket_for_object_in(
                    &input.bucket,
                    &requester,
                    "s3:PutObject",
                    &input.key,
                    &write_context,
                )
                .await?;
            fresh = true;
        };
        // The checksums the client gave are checked against the data as it streams in,
        // before it is sealed (when it is).
        let body = super::integrity::request_body(input.body, checksums.as_ref());
        let length = input.content_length.map(|length| length.max(0) as u64);
        let SealedBody {
            stream: body,
            length,
            sealed,
        } = SealedBody::new(body, length, sealing.as_ref());
        let tally = sealed.as_ref().map(|(tally, _)| tally.clone());
        let check = |md5: &[u8; 16]| {
            let (md5, _) = SealedBody::plain(tally.as_ref(), (*md5, 0));
            check_content_md5(content_md5.as_deref(), &md5)?;
            checksums.map_or(Ok(None), |check| check.verify(trailers.as_ref()))
        };
        // A small object announced as such goes into a pack with others (`store/pack.rs`).
        let packed = length.is_some_and(|length| self.store.packs(&bucket, length));
        let body = Body::new(body, length);
        let write = async {
            if packed {
                self.store
                    .write_checked_packed(arrival, &intent, &bucket, &tag, &input.key, body, check)
                    .await
            } else {
                self.store
                    .write_checked(&intent, &bucket.id, &tag, &input.key, body, check)
                    .await
            }
        };
        // The entry the commit replaces is read while the data is written, so the commit
        // after the data is one guarded write (which fails, and reads again, if the entry
        // changed meanwhile).
        let prefetch = async {
            match bucket.versioning {
                None => self.store.prefetch_plain(&bucket, &input.key).await.ok(),
                Some(_) => None,
            }
        };
        let (written, prefetched) = futures::join!(write, prefetch);
        let (pieces, size, md5, checksum) = written?;
        let (md5, size) = SealedBody::plain(tally.as_ref(), (md5, size));
        let encryption = sealing.as_ref().zip(sealed).map(|(sealing, (_, key))| {
            crate::encryption::ObjectEncryption {
                mode: sealing.mode,
                keys: vec![key],
            }
        });
        let entry = ObjectEntry {
            size,
            etag: hex::encode(md5),
            mtime_ns: self.store.now_ns(),
            owner,
            acl,
            grants: Some(grants),
            headers: standard_headers(
                input.content_type.as_deref(),
                input.content_encoding.as_deref(),
                input.cache_control.as_deref(),
                input.content_disposition.as_deref(),
                input.content_language.as_deref(),
                input.expires.as_ref(),
            ),
            metadata,
            pieces,
            parts_count: 0,
            checksum,
            tags,
            encryption,
            ..Default::default()
        };
        let pieces = entry.pieces.clone();
        let entry = match self
            .store
            .commit_from(
                &bucket,
                &input.key,
                entry,
                &condition,
                Some(&intent),
                prefetched,
            )
            .await
        {
            Ok(entry) => entry,
            Err(error) => {
                // Nothing refers to the data (a cluster error may hide a commit that
                // happened: then the intent is gone, and orphan collection sorts it out).
                if matches!(
                    error,
                    GatewayError::PreconditionFailed
                        | GatewayError::NoSuchKey(_)
                        | GatewayError::UploadCollected(_)
                ) {
                    self.store.abandon_write(&intent, pieces).await;
                }
                return Err(error);
            }
        };
        let (server_side_encryption, sse_customer_algorithm, sse_customer_key_md5) =
            answer_fields(sealing.map(|s| s.mode), &req.headers);
        let mut output = PutObjectOutput {
            e_tag: Some(convert::etag(&entry.etag)),
            expiration: super::lifecycle::expiration_header(&bucket, &input.key, &entry),
            version_id: new_version_id(&entry),
            server_side_encryption,
            sse_customer_algorithm,
            sse_customer_key_md5,
            ..Default::default()
        };
        if let Some(checksum) = entry.stored_checksum() {
            checksum_fields!(output, checksums::stored_dto(&checksum), type);
        }
        Ok(output)
    }

    /// What GET and HEAD share: the object (or version) the requester may read, its
    /// preconditions checked, and the requested range resolved.
    async fn object_to_read(
        &self,
        requester: &Requester,
        (bucket_name, key, version_id): (&str, &str, Option<&str>),
        conditions: Conditions<'_>,
        (range, part_number): (Option<Range>, Option<i32>),
    ) -> Result<ObjectRead> {
        if range.is_some() && part_number.is_some() {
            return Err(GatewayError::InvalidRequest(
                "a Range header and partNumber cannot be given together".into(),
            ));
        }
        let (bucket, entry) = self
            .object_for(bucket_name, key, version_id, requester, Permission::Read)
            .await?;
        conditions.check(&entry, false)?;
        let (start, end, content_range) = match part_number {
            Some(number) => part_range(&entry, number)?,
            None => byte_range(range, entry.size)?,
        };
        Ok(ObjectRead {
            bucket,
            entry,
            start,
            end,
            content_range,
        })
    }

    pub(super) async fn do_get_object(
        &self,
        req: S3Request<GetObjectInput>,
    ) -> Result<GetObjectOutput> {
        let requester = self.requester(&req).await?;
        let input = req.input;
        let ObjectRead {
            bucket,
            entry,
            start,
            end,
            content_range,
        } = self
            .object_to_read(
                &requester,
                (&input.bucket, &input.key, input.version_id.as_deref()),
                Conditions {
                    if_match: input.if_match.as_ref(),
                    if_none_match: input.if_none_match.as_ref(),
                    if_modified_since: input.if_modified_since.as_ref(),
                    if_unmodified_since: input.if_unmodified_since.as_ref(),
                },
                (input.range, input.part_number),
            )
            .await?;
        let segments = self.read_segments(&req.headers, false, &entry)?;
        let stream = self
            .read_plain(&entry, segments, (start, end), true)
            .await?;
        let body = ChannelStream::spawn(stream);
        let (server_side_encryption, sse_customer_algorithm, sse_customer_key_md5) =
            answer_fields(entry.encryption.as_ref().map(|e| e.mode), &req.headers);
        let headers = requested_headers!(input).or_stored(&entry);
        let checksum = checksum_answered(
            &entry,
            input.checksum_mode.as_ref(),
            input.range.is_some(),
            input.part_number,
        );
        let mut output = GetObjectOutput {
            accept_ranges: Some("bytes".into()),
            body: Some(StreamingBlob::wrap(body)),
            cache_control: headers.cache_control,
            content_disposition: headers.content_disposition,
            content_encoding: headers.content_encoding,
            content_language: headers.content_language,
            content_type: headers.content_type,
            expires: headers.expires,
            content_length: Some((end - start) as i64),
            content_range,
            e_tag: Some(convert::etag(&entry.etag)),
            last_modified: Some(convert::timestamp(entry.mtime_ns)),
            metadata: convert::metadata_out(&entry),
            parts_count: (entry.parts_count > 0).then_some(entry.parts_count as i32),
            tag_count: (!entry.tags.is_empty()).then_some(entry.tags.len() as i32),
            version_id: version_header(&bucket, &entry),
            expiration: input
                .version_id
                .is_none()
                .then(|| super::lifecycle::expiration_header(&bucket, &input.key, &entry))
                .flatten(),
            server_side_encryption,
            sse_customer_algorithm,
            sse_customer_key_md5,
            ..Default::default()
        };
        if let Some(checksum) = checksum {
            checksum_fields!(output, checksum, type);
        }
        Ok(output)
    }

    pub(super) async fn do_head_object(
        &self,
        req: S3Request<HeadObjectInput>,
    ) -> Result<HeadObjectOutput> {
        let requester = self.requester(&req).await?;
        let input = req.input;
        let ObjectRead {
            bucket,
            entry,
            start,
            end,
            content_range,
        } = self
            .object_to_read(
                &requester,
                (&input.bucket, &input.key, input.version_id.as_deref()),
                Conditions {
                    if_match: input.if_match.as_ref(),
                    if_none_match: input.if_none_match.as_ref(),
                    if_modified_since: input.if_modified_since.as_ref(),
                    if_unmodified_since: input.if_unmodified_since.as_ref(),
                },
                (input.range, input.part_number),
            )
            .await?;
        let length = end - start;
        // The key is checked as a GET checks it.
        self.read_segments(&req.headers, false, &entry)?;
        let (server_side_encryption, sse_customer_algorithm, sse_customer_key_md5) =
            answer_fields(entry.encryption.as_ref().map(|e| e.mode), &req.headers);
        let headers = requested_headers!(input).or_stored(&entry);
        let checksum = checksum_answered(
            &entry,
            input.checksum_mode.as_ref(),
            input.range.is_some(),
            input.part_number,
        );
        let mut output = HeadObjectOutput {
            accept_ranges: Some("bytes".into()),
            cache_control: headers.cache_control,
            content_disposition: headers.content_disposition,
            content_encoding: headers.content_encoding,
            content_language: headers.content_language,
            content_type: headers.content_type,
            expires: headers.expires,
            content_length: Some(length as i64),
            content_range,
            e_tag: Some(convert::etag(&entry.etag)),
            last_modified: Some(convert::timestamp(entry.mtime_ns)),
            metadata: convert::metadata_out(&entry),
            parts_count: (entry.parts_count > 0).then_some(entry.parts_count as i32),
            version_id: version_header(&bucket, &entry),
            expiration: input
                .version_id
                .is_none()
                .then(|| super::lifecycle::expiration_header(&bucket, &input.key, &entry))
                .flatten(),
            server_side_encryption,
            sse_customer_algorithm,
            sse_customer_key_md5,
            ..Default::default()
        };
        if let Some(checksum) = checksum {
            checksum_fields!(output, checksum, type);
        }
        Ok(output)
    }

    pub(super) async fn do_delete_object(
        &self,
        req: S3Request<DeleteObjectInput>,
    ) -> Result<DeleteObjectOutput> {
        let requester = self.requester(&req).await?;
        let condition = DeleteCondition {
            if_match: req
                .input
                .if_match
                .as_ref()
                .map(|condition| match condition {
                    ETagCondition::Any => "*".to_string(),
                    ETagCondition::ETag(tag) => tag.value().to_string(),
                }),
            mtime_s: req
                .input
                .if_match_last_modified_time
                .as_ref()
                .map(convert::seconds),
            size: req.input.if_match_size,
        };
        let action = super::delete_action(req.input.version_id.as_deref());
        let bucket = self
            .bucket_for_object(&req.input.bucket, &requester, action, &req.input.key)
            .await?;
        let owner = Self::owner_of(&requester)?;
        let deleted = self
            .delete_one(
                &bucket,
                &req.input.key,
                req.input.version_id.as_deref(),
                &owner,
                &condition,
            )
            .await?;
        Ok(DeleteObjectOutput {
            delete_marker: deleted.delete_marker.then_some(true),
            version_id: deleted.version_id,
            ..Default::default()
        })
    }

    /// Deletes `key`: with a version id, that version for good (no error if it is gone);
    /// without, the object in a bucket without versioning, else a new delete marker. The
    /// version it acts on (the one named, else the newest, a delete marker included) must
    /// pass `condition` (412): checked in the guarded write that removes a version or a
    /// plain entry; for a new delete marker, on the newest version read just before it is
    /// written (a write between the two is not seen).
    pub(super) async fn delete_one(
        &self,
        bucket: &BucketRecord,
        key: &str,
        version_id: Option<&str>,
        owner: &str,
        condition: &DeleteCondition,
    ) -> Result<Deleted> {
        if condition.is_some() && version_id.is_none() && bucket.versioning.is_some() {
            condition.check(self.store.newest_version(bucket, key).await?.as_ref())?;
        }
        match (version_id, bucket.versioning) {
            (Some(version_id), _) => {
                let removed = self
                    .store
                    .remove_version_if(bucket, key, version_id, condition)
                    .await?;
                Ok(Deleted {
                    delete_marker: removed.is_some_and(|e| e.delete_marker),
                    version_id: Some(version_id.to_string()),
                })
            }
            (None, None) => match self.store.delete_if(bucket, key, condition).await? {
                Unversioned::Done => Ok(Deleted::default()),
                // Versioning was enabled meanwhile: the key gets a delete marker.
                Unversioned::BucketVersioned => {
                    let bucket = self.store.bucket(&bucket.name).await?;
                    if condition.is_some() {
                        condition.check(self.store.newest_version(&bucket, key).await?.as_ref())?;
                    }
                    let marker = self.store.delete_marker(&bucket, key, owner).await?;
                    Ok(Deleted {
                        delete_marker: true,
                        version_id: marker.version_id,
                    })
                }
            },
            (None, Some(_)) => {
                let marker = self.store.delete_marker(bucket, key, owner).await?;
                Ok(Deleted {
                    delete_marker: true,
                    version_id: marker.version_id,
                })
            }
        }
    }

    pub(super) async fn do_delete_objects(
        &self,
        req: S3Request<DeleteObjectsInput>,
    ) -> Result<DeleteObjectsOutput> {
        let requester = self.requester(&req).await?;
        let input = req.input;
        // Each key is checked on its own (below), as the policy may treat them differently.
        let bucket = self.store.bucket(&input.bucket).await?;
        if input.delete.objects.len() > 1000 {
            return Err(GatewayError::Malformed("more than 1000 keys".into()));
        }
        let quiet = input.delete.quiet.unwrap_or(false);
        let owner = Self::owner_of(&requester)?;
        let mut deleted = Vec::new();
        let mut errors = Vec::new();
        for object in input.delete.objects {
            let version_id = object.version_id.as_deref();
            let action = super::delete_action(version_id);
            let condition = DeleteCondition {
                if_match: object.e_tag.as_ref().map(|tag| tag.value().to_string()),
                mtime_s: object.last_modified_time.as_ref().map(convert::seconds),
                size: object.size,
            };
            let outcome = if super::may_change_object(&bucket, &requester, action, &object.key) {
                self.delete_one(&bucket, &object.key, version_id, &owner, &condition)
                    .await
            } else {
                Err(GatewayError::AccessDenied)
            };
            match outcome {
                Ok(outcome) => {
                    if !quiet {
                        // A removed version echoes its id; a new or removed delete marker is
                        // named as such.
                        let marker_id = outcome.delete_marker.then(|| outcome.version_id.clone());
                        deleted.push(DeletedObject {
                            key: Some(object.key),
                            version_id: object.version_id.clone(),
                            delete_marker: outcome.delete_marker.then_some(true),
                            delete_marker_version_id: marker_id.flatten(),
                        });
                    }
                }
                Err(error) => {
                    errors.push(Error {
                        code: Some(error.code().as_str().to_string()),
                        key: Some(object.key),
                        message: Some(error.to_string()),
                        version_id: object.version_id,
                    });
                }
            }
        }
        Ok(DeleteObjectsOutput {
            deleted: Some(deleted),
            errors: (!errors.is_empty()).then_some(errors),
            ..Default::default()
        })
    }

    /// Resolves a copy source the requester may read, with its conditions checked.
    pub(super) async fn copy_source(
        &self,
        source: &CopySource,
        requester: &Requester,
        conditions: Conditions<'_>,
    ) -> Result<(BucketRecord, String, ObjectEntry)> {
        let CopySource::Bucket {
            bucket,
            key,
            version_id,
        } = source
        else {
            return Err(GatewayError::NotImplemented(
                "access point copy source".into(),
            ));
        };
        let (bucket, entry) = self
            .object_for(
                bucket,
                key,
                version_id.as_deref(),
                requester,
                Permission::Read,
            )
            .await?;
        conditions.check(&entry, true)?;
        Ok((bucket, key.to_string(), entry))
    }

    pub(super) async fn do_copy_object(
        &self,
        req: S3Request<CopyObjectInput>,
    ) -> Result<CopyObjectOutput> {
        let requester = self.requester(&req).await?;
        super::integrity::refuse_unsupported_write_headers(&req.headers)?;
        let input = req.input;
        let (source_bucket, source_key, source) = self
            .copy_source(
                &input.copy_source,
                &requester,
                Conditions {
                    if_match: input.copy_source_if_match.as_ref(),
                    if_none_match: input.copy_source_if_none_match.as_ref(),
                    if_modified_since: input.copy_source_if_modified_since.as_ref(),
                    if_unmodified_since: input.copy_source_if_unmodified_since.as_ref(),
                },
            )
            .await?;
        let bucket = self
            .bucket_for_object(&input.bucket, &requester, "s3:PutObject", &input.key)
            .await?;
        convert::validate_key(&input.key)?;
        // The source is read with its key (SSE-C: the x-amz-copy-source-…-customer-*
        // headers), the copy sealed as the request or the bucket's default says.
        let source_segments = self.read_segments(&req.headers, true, &source)?;
        let sealing = self.write_sealing(&req.headers, bucket.encryption.as_deref())?;
        let replace = match input.metadata_directive.as_ref().map(|d| d.as_str()) {
            None | Some(MetadataDirective::COPY) => false,
            Some(MetadataDirective::REPLACE) => true,
            Some(other) => {
                return Err(GatewayError::InvalidArgument(format!(
                    "x-amz-metadata-directive {other:?} (valid: COPY, REPLACE)"
                )))
            }
        };
        // Copying a named version onto its key makes it the latest again, which S3 allows.
        let names_version = matches!(
            &input.copy_source,
            CopySource::Bucket {
                version_id: Some(_),
                ..
            }
        );
        // Sealing the object anew (SSE headers, or the bucket's default) is a change, as S3
        // counts it.
        let reencrypts = sealing.is_some();
        if source_bucket.id == bucket.id
            && source_key == input.key
            && !replace
            && !names_version
            && !reencrypts
        {
            return Err(GatewayError::InvalidRequest(
                "copying an object to itself without changing its metadata".into(),
            ));
        }
        let (headers, metadata) = if replace {
            (
                standard_headers(
                    input.content_type.as_deref(),
                    input.content_encoding.as_deref(),
                    input.cache_control.as_deref(),
                    input.content_disposition.as_deref(),
                    input.content_language.as_deref(),
                    input.expires.as_ref(),
                ),
                convert::metadata_in(input.metadata)?,
            )
        } else {
            (source.headers.clone(), source.metadata.clone())
        };
        let tags = match input.tagging_directive.as_ref().map(|d| d.as_str()) {
            None | Some(TaggingDirective::COPY) => source.tags.clone(),
            Some(TaggingDirective::REPLACE) => {
                let tags = tags_of(input.tagging.as_deref())?;
                // The policy sees the tags the copy sets as the request's.
                let context = crate::tagging::request_tags_context(&tags);
                if !super::may_change_object_in(
                    &bucket,
                    &requester,
                    "s3:PutObject",
                    &input.key,
                    &context,
                ) {
                    return Err(GatewayError::AccessDenied);
                }
                tags
            }
            Some(other) => {
                return Err(GatewayError::InvalidArgument(format!(
                    "x-amz-tagging-directive {other:?} (valid: COPY, REPLACE)"
                )))
            }
        };
        let owner = Self::owner_of(&requester)?;
        let grants = self
            .grants_from_request(acl_request!(input), &owner, &bucket.owner)
            .await?;
        super::check_public_block(&bucket, &grants)?;
        let acl = input
            .acl
            .as_ref()
            .map(|a| a.as_str().to_string())
            .unwrap_or_default();
        let tag = self.store.new_tag(8);
        let intent = self
            .store
            .begin_object_write(&bucket, &input.key, &tag)
            .await?;
        let plain = self
            .read_plain(&source, source_segments, (0, source.size), false)
            .await?;
        let SealedBody {
            stream,
            length,
            sealed,
        } = SealedBody::new(plain, Some(source.size), sealing.as_ref());
        let (tally, wrapped) = sealed.unzip();
        let (pieces, size, md5, ()) = self
            .store
            .write_checked(
                &intent,
                &bucket.id,
                &tag,
                &input.key,
                Body::new(stream, length),
                |_| Ok(()),
            )
            .await?;
        let (md5, size) = SealedBody::plain(tally.as_ref(), (md5, size));
        let encryption = sealing.as_ref().zip(wrapped).map(|(sealing, key)| {
            crate::encryption::ObjectEncryption {
                mode: sealing.mode,
                keys: vec![key],
            }
        });
        // Sealed anew as one segment, a multipart source's parts are no longer segments.
        let etag = if source.parts_count > 0 {
            source.etag.clone()
        } else {
            hex::encode(md5)
        };
        let entry = ObjectEntry {
            size,
            etag,
            mtime_ns: self.store.now_ns(),
            owner,
            acl,
            grants: Some(grants),
            headers,
            metadata,
            pieces,
            parts_count: source.parts_count,
            // The data is the same: so are its checksums.
            checksum: source.stored_checksum(),
            part_checksums: source.part_checksums.clone(),
            tags,
            encryption,
            ..Default::default()
        };
        let pieces = entry.pieces.clone();
        let entry = match self
            .store
            .commit(&bucket, &input.key, entry, Some(&intent))
            .await
        {
            Ok(entry) => entry,
            Err(error) => {
                if matches!(error, GatewayError::UploadCollected(_)) {
                    self.store.abandon_write(&intent, pieces).await;
                }
                return Err(error);
            }
        };
        let (server_side_encryption, sse_customer_algorithm, sse_customer_key_md5) =
            answer_fields(sealing.map(|s| s.mode), &req.headers);
        Ok(CopyObjectOutput {
            copy_object_result: Some(CopyObjectResult {
                e_tag: Some(convert::etag(&entry.etag)),
                last_modified: Some(convert::timestamp(entry.mtime_ns)),
                ..Default::default()
            }),
            copy_source_version_id: version_header(&source_bucket, &source),
            version_id: new_version_id(&entry),
            server_side_encryption,
            sse_customer_algorithm,
            sse_customer_key_md5,
            ..Default::default()
        })
    }

    pub(super) async fn do_get_object_acl(
        &self,
        req: S3Request<GetObjectAclInput>,
    ) -> Result<GetObjectAclOutput> {
        let requester = self.requester(&req).await?;
        let (bucket, entry) = self
            .object_for(
                &req.input.bucket,
                &req.input.key,
                req.input.version_id.as_deref(),
                &requester,
                Permission::ReadAcp,
            )
            .await?;
        Ok(GetObjectAclOutput {
            grants: Some(self.grants_dto(&entry.grants(&bucket.owner)).await),
            owner: Some(self.owner_dto(&entry.owner).await),
            request_charged: None,
        })
    }

    pub(super) async fn do_put_object_acl(
        &self,
        req: S3Request<PutObjectAclInput>,
    ) -> Result<PutObjectAclOutput> {
        let requester = self.requester(&req).await?;
        let input = req.input;
        let version_id = input.version_id.as_deref();
        for _ in 0..ACL_RACE_RETRIES {
            let (bucket, read) = self
                .object_for(
                    &input.bucket,
                    &input.key,
                    version_id,
                    &requester,
                    Permission::WriteAcp,
                )
                .await?;
            let request = AclRequest {
                policy: input.access_control_policy.as_ref(),
                ..acl_request!(input)
            };
            let grants = self
                .grants_from_request(request, &read.owner, &bucket.owner)
                .await?;
            super::check_public_block(&bucket, &grants)?;
            let mut entry = read.clone();
            entry.acl = input
                .acl
                .as_ref()
                .map(|a| a.as_str().to_string())
                .unwrap_or_default();
            entry.grants = Some(grants);
            // The same version with a new ACL (its mtime stays, as S3's), unless a write or
            // a delete replaced it meanwhile: then again, on what is there now.
            if self
                .store
                .update_version(&bucket, &input.key, version_id, &read, entry)
                .await?
            {
                return Ok(PutObjectAclOutput::default());
            }
        }
        Err(rados::RadosError::CompareFailed(format!(
            "{}/{}: the object changed under {ACL_RACE_RETRIES} ACL updates in a row",
            input.bucket, input.key
        ))
        .into())
    }
}

/// The tag set of a write's `x-amz-tagging` header (none without one).
pub(super) fn tags_of(header: Option<&str>) -> Result<Vec<crate::tagging::Tag>> {
    header.map_or(Ok(Vec::new()), crate::tagging::parse_header)
}

/// Attempts of PutObjectAcl while the object keeps changing under it.
const ACL_RACE_RETRIES: usize = 8;

/// What deleting one key did.
#[derive(Debug, Default)]
pub(super) struct Deleted {
    /// A delete marker was created or removed.
    delete_marker: bool,
    /// The version removed or the delete marker created.
    version_id: Option<String>,
}

/// The x-amz-version-id of a stored object: its id in a bucket with versioning (`null` for
/// one written before versioning was configured); none in a bucket without.
pub(super) fn version_header(bucket: &BucketRecord, entry: &ObjectEntry) -> Option<String> {
    bucket.versioning?;
    Some(
        entry
            .version_id
            .clone()
            .unwrap_or_else(|| crate::versioning::NULL_VERSION_ID.to_string()),
    )
}

/// The version id a write reports: a generated one (radosgw reports none for the null
/// versions written while versioning is suspended, nor in buckets without versioning).
pub(super) fn new_version_id(entry: &ObjectEntry) -> Option<String> {
    entry
        .version_id
        .clone()
        .filter(|v| v != crate::versioning::NULL_VERSION_ID)
}

/// The checksum a GET or HEAD answers with: none unless ChecksumMode is ENABLED, none for a
/// range (it would not be the range's), a part's own for `partNumber` of a multipart object
/// that kept them (with the object's checksum type), else the object's.
fn checksum_answered(
    entry: &ObjectEntry,
    mode: Option<&ChecksumMode>,
    ranged: bool,
    part_number: Option<i32>,
) -> Option<Checksum> {
    if !mode.is_some_and(|mode| mode.as_str().eq_ignore_ascii_case(ChecksumMode::ENABLED)) || ranged
    {
        return None;
    }
    let stored = entry.stored_checksum()?;
    match part_number {
        Some(number) if entry.parts_count > 0 => {
            let value = entry
                .part_checksums
                .get(usize::try_from(number).ok()?.checked_sub(1)?)?;
            Some(checksums::dto(
                &stored.algorithm,
                value,
                Some(checksums::checksum_type(&stored)),
            ))
        }
        _ => Some(checksums::stored_dto(&stored)),
    }
}

/// The object a GET or HEAD reads and the byte range `[start, end)` it returns.
struct ObjectRead {
    bucket: BucketRecord,
    entry: ObjectEntry,
    start: u64,
    end: u64,
    /// The Content-Range header, for a range request.
    content_range: Option<String>,
}

/// The byte range `[start, end)` a GET or HEAD with an optional Range header covers, and the
/// Content-Range header it answers with (None for the whole object).
/// The bytes of part `number` of an object (GET/HEAD `?partNumber=N`), as S3 serves them:
/// an object that is not multipart is its own part 1.
fn part_range(entry: &ObjectEntry, number: i32) -> Result<(u64, u64, Option<String>)> {
    let index = usize::try_from(number)
        .ok()
        .and_then(|n| n.checked_sub(1))
        .ok_or_else(|| GatewayError::InvalidArgument(format!("part number {number}")))?;
    if entry.parts_count == 0 {
        return match index {
            0 => Ok((0, entry.size, None)),
            _ => Err(GatewayError::InvalidPartNumber),
        };
    }
    if entry.part_sizes.len() != entry.parts_count as usize {
        return Err(GatewayError::NotImplemented(
            "partNumber on an object completed before part sizes were recorded".into(),
        ));
    }
    let size = *entry
        .part_sizes
        .get(index)
        .ok_or(GatewayError::InvalidPartNumber)?;
    let start: u64 = entry.part_sizes[..index].iter().sum();
    let end = start + size;
    let header = (size > 0).then(|| format!("bytes {start}-{}/{}", end - 1, entry.size));
    Ok((start, end, header))
}

fn byte_range(range: Option<Range>, size_bytes: u64) -> Result<(u64, u64, Option<String>)> {
    match range {
        None => Ok((0, size_bytes, None)),
        Some(range) => {
            let r = range
                .check(size_bytes)
                .map_err(|_| GatewayError::InvalidRange)?;
            // An empty object has no byte to return: every range is unsatisfiable (s3s
            // answers a suffix range over it with 0..0).
            if r.start >= r.end {
                return Err(GatewayError::InvalidRange);
            }
            let header = format!("bytes {}-{}/{}", r.start, r.end - 1, size_bytes);
            Ok((r.start, r.end, Some(header)))
        }
    }
}
