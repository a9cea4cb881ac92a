//! Multipart uploads: parts are stored as pieces of their own and become the object's manifest
//! at completion (no data is copied).

use md5::{Digest, Md5};
use rados::{RadosError, WriteOp};
use s3s::dto::*;
use s3s::S3Request;

use super::checksums::{self, checksum_fields};
use super::convert::{self, Conditions};
use super::encryption::{answer_fields, SealedBody};
use super::objects::{check_content_md5, standard_headers, tags_of};
use super::Gateway;
use crate::acl::{Permission, Requester};
use crate::encryption::ObjectEncryption;
use crate::error::{GatewayError, Result};
use crate::layout::{self, BucketRecord, ObjectEntry, PartRecord, UploadRecord};
use crate::list::past_prefix;
use crate::store::{Body, Intent, OmapChange};

/// Highest part number S3 allows.
const PART_NUMBER_MAX: i32 = 10_000;

impl Gateway {
    async fn upload(
        &self,
        bucket: &BucketRecord,
        key: &str,
        upload_id: &str,
    ) -> Result<UploadRecord> {
        let wanted = layout::upload_key(key, upload_id);
        let found = match self
            .store
            .index
            .omap_get_vals_by_keys(
                &layout::uploads_object(&bucket.id),
                std::slice::from_ref(&wanted),
            )
            .await
        {
            Ok(found) => found,
            Err(RadosError::NotFound(_)) => Default::default(),
            Err(error) => return Err(error.into()),
        };
        match found.get(&wanted) {
            Some(bytes) => layout::decode(bytes),
            None => Err(GatewayError::NoSuchUpload(upload_id.to_string())),
        }
    }

    async fn parts(&self, bucket: &BucketRecord, upload_id: &str) -> Result<Vec<PartRecord>> {
        let oid = layout::upload_object(&bucket.id, upload_id);
        let mut out = Vec::new();
        let mut after: Option<Vec<u8>> = None;
        loop {
            let page = match self
                .store
                .index
                .omap_get_vals(&oid, after.as_deref(), b"", 1000)
                .await
            {
                Ok(page) => page,
                Err(RadosError::NotFound(_)) => return Ok(out),
                Err(error) => return Err(error.into()),
            };
            for (key, value) in &page.entries {
                after = Some(key.clone());
                if layout::is_namespaced(key) {
                    continue; // the write intent of a part upload in progress
                }
                out.push(layout::decode(value)?);
            }
            if !page.more || page.entries.is_empty() {
                return Ok(out);
            }
        }
    }

    pub(super) async fn do_create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> Result<CreateMultipartUploadOutput> {
        let requester = self.requester(&req).await?;
        super::integrity::refuse_unsupported_write_headers(&req.headers)?;
        let input = req.input;
        let tags = tags_of(input.tagging.as_deref())?;
        let bucket = self
            .bucket_for_object_in(
                &input.bucket,
                &requester,
                "s3:PutObject",
                &input.key,
                &crate::tagging::request_tags_context(&tags),
            )
            .await?;
        convert::validate_key(&input.key)?;
        let owner = Self::owner_of(&requester)?;
        let grants = self
            .grants_from_request(super::acl_request!(input), &owner, &bucket.owner)
            .await?;
        super::check_public_block(&bucket, &grants)?;
        // The parts are sealed each with a data key of its own, wrapped by the key the
        // upload names here; a key wrapped now lets each part check it is the same.
        let sealing = self.write_sealing(&req.headers, bucket.encryption.as_deref())?;
        let encryption = sealing.as_ref().map(|sealing| ObjectEncryption {
            mode: sealing.mode,
            keys: vec![sealing.new_data_key().1],
        });
        let (checksum_algorithm, checksum_full_object) = checksums::upload_checksum(
            input.checksum_algorithm.as_ref(),
            input.checksum_type.as_ref(),
        )?;
        let upload_id = format!("2~{}", self.store.new_tag(12));
        let record = UploadRecord {
            key: input.key.clone(),
            upload_id: upload_id.clone(),
            owner: Self::owner_of(&requester)?,
            initiated_ns: self.store.now_ns(),
            template: ObjectEntry {
                owner: Self::owner_of(&requester)?,
                acl: input
                    .acl
                    .as_ref()
                    .map(|a| a.as_str().to_string())
                    .unwrap_or_default(),
                grants: Some(grants),
                headers: standard_headers(
                    input.content_type.as_deref(),
                    input.content_encoding.as_deref(),
                    input.cache_control.as_deref(),
                    input.content_disposition.as_deref(),
                    input.content_language.as_deref(),
                    input.expires.as_ref(),
                ),
                metadata: convert::metadata_in(input.metadata)?,
                tags,
                encryption,
                ..ObjectEntry::default()
            },
            checksum_algorithm: checksum_algorithm.map(str::to_string),
            checksum_full_object,
        };
        // The parts object first: parts write their intents only into an existing one, so
        // one racing Abort or Complete (which remove it) cannot bring it back.
        self.store
            .index
            .operate(
                &layout::upload_object(&bucket.id, &upload_id),
                WriteOp::new().create(true),
            )
            .await?;
        let recorded = self
            .store
            .index
            .omap_set(
                &layout::uploads_object(&bucket.id),
                vec![(
                    layout::upload_key(&input.key, &upload_id),
                    layout::encode(&record),
                )],
            )
            .await;
        if let Err(error) = recorded {
            // No client knows this upload id: its parts object would never be removed.
            let parts = layout::upload_object(&bucket.id, &upload_id);
            if let Err(cleanup) = self.store.index.remove(&parts).await {
                tracing::warn!(%parts, error = %cleanup, "cannot remove an unrecorded upload's parts object");
            }
            return Err(error.into());
        }
        let (server_side_encryption, sse_customer_algorithm, sse_customer_key_md5) =
            answer_fields(sealing.map(|s| s.mode), &req.headers);
        Ok(CreateMultipartUploadOutput {
            bucket: Some(input.bucket),
            key: Some(input.key),
            upload_id: Some(upload_id),
            checksum_algorithm: checksum_algorithm.map(checksums::algorithm_dto),
            checksum_type: checksum_algorithm.map(|_| upload_checksum_type(&record)),
            server_side_encryption,
            sse_customer_algorithm,
            sse_customer_key_md5,
            ..Default::default()
        })
    }

    /// The write intent of a part (see [`crate::store::Store::begin_part_write`]): written only
    /// into the upload's existing parts object. An upload begun by a version that created that
    /// object with the first part has none yet: while its record is there, the intent creates
    /// it, as then.
    async fn begin_part_intent(
        &self,
        bucket: &BucketRecord,
        object_key: &str,
        upload_id: &str,
        tag: &str,
    ) -> Result<Intent> {
        match self
            .store
            .begin_part_write(bucket, upload_id, tag, false)
            .await
        {
            Err(GatewayError::NoSuchUpload(_)) => {
                self.upload(bucket, object_key, upload_id).await?;
                self.store
                    .begin_part_write(bucket, upload_id, tag, true)
                    .await
            }
            other => other,
        }
    }

    /// Records an uploaded part, under the upload's lock, which Complete and Abort hold while
    /// they read and retire the parts: a part saved meanwhile would otherwise replace (and
    /// free) data the completed object uses, or bring back a finished upload. A part whose
    /// upload is gone by then is refused and its data removed.
    async fn save_part(
        &self,
        bucket: &BucketRecord,
        object_key: &str,
        upload_id: &str,
        part: PartRecord,
        intent: &Intent,
    ) -> Result<()> {
        let oid = layout::upload_object(&bucket.id, upload_id);
        let key = layout::part_key(part.number);
        let _guard = self.store.lock_upload(upload_id).await;
        if let Err(error) = self.upload(bucket, object_key, upload_id).await {
            self.store.abandon_write(intent, part.pieces).await;
            return Err(error);
        }
        let encoded = layout::encode(&part);
        let replaced = match self
            .store
            .update_omap_value(&oid, &key, Some(intent), |stored| {
                let old = stored.map(layout::decode::<PartRecord>).transpose()?;
                let replaced = old.map(|old| old.pieces).unwrap_or_default();
                Ok(OmapChange::Set(encoded.clone(), Vec::new(), replaced))
            })
            .await
        {
            Ok(replaced) => replaced,
            Err(error) => {
                if matches!(error, GatewayError::UploadCollected(_)) {
                    self.store.abandon_write(intent, part.pieces).await;
                }
                return Err(error);
            }
        };
        if replaced.is_empty() {
            return Ok(());
        }
        // A Complete that crashed after committing left the upload behind: the parts it
        // used belong to the object now.
        let live = self.store.pieces_in_use(bucket, object_key).await?;
        self.store
            .remove_pieces(
                replaced
                    .into_iter()
                    .filter(|piece| !live.contains(&piece.oid))
                    .collect(),
            )
            .await;
        Ok(())
    }

    fn check_part_number(number: i32) -> Result<()> {
        if !(1..=PART_NUMBER_MAX).contains(&number) {
            return Err(GatewayError::InvalidArgument(format!(
                "part number {number}"
            )));
        }
        Ok(())
    }

    pub(super) async fn do_upload_part(
        &self,
        req: S3Request<UploadPartInput>,
    ) -> Result<UploadPartOutput> {
        let requester = self.requester(&req).await?;
        let trailers = req.trailing_headers.clone();
        let input = req.input;
        let bucket = self
            .bucket_for_object(&input.bucket, &requester, "s3:PutObject", &input.key)
            .await?;
        Self::check_part_number(input.part_number)?;
        let upload = self.upload(&bucket, &input.key, &input.upload_id).await?;
        let sealing = self.upload_sealing(&req.headers, &upload.template)?;
        // A part of an upload created with a checksum algorithm keeps that checksum.
        let checksums = super::integrity::ChecksumCheck::keeping(
            &req.headers,
            upload
                .checksum_algorithm
                .as_deref()
                .and_then(checksums::algorithm_name),
        );
        let tag = format!(
            "{}.{}.{}",
            input.upload_id,
            input.part_number,
            self.store.new_tag(4)
        );
        let intent = self
            .begin_part_intent(&bucket, &input.key, &input.upload_id, &tag)
            .await?;
        let length = input.content_length.map(|length| length.max(0) as u64);
        let SealedBody {
            stream,
            length,
            sealed,
        } = SealedBody::new(
            super::integrity::request_body(input.body, checksums.as_ref()),
            length,
            sealing.as_ref(),
        );
        let (tally, wrapped) = sealed.unzip();
        let (pieces, size, md5, checksum) = self
            .store
            .write_checked(
                &intent,
                &bucket.id,
                &tag,
                &input.key,
                Body::new(stream, length),
                |md5| {
                    let (md5, _) = SealedBody::plain(tally.as_ref(), (*md5, 0));
                    check_content_md5(input.content_md5.as_deref(), &md5)?;
                    checksums.map_or(Ok(None), |check| check.verify(trailers.as_ref()))
                },
            )
            .await?;
        let (md5, size) = SealedBody::plain(tally.as_ref(), (md5, size));
        let etag = hex::encode(md5);
        let part = PartRecord {
            number: input.part_number,
            etag: etag.clone(),
            size,
            mtime_ns: self.store.now_ns(),
            pieces,
            checksum: checksum.clone(),
            encryption: wrapped,
        };
        self.save_part(&bucket, &input.key, &input.upload_id, part, &intent)
            .await?;
        let (server_side_encryption, sse_customer_algorithm, sse_customer_key_md5) =
            answer_fields(sealing.map(|s| s.mode), &req.headers);
        let mut output = UploadPartOutput {
            e_tag: Some(convert::etag(&etag)),
            server_side_encryption,
            sse_customer_algorithm,
            sse_customer_key_md5,
            ..Default::default()
        };
        if let Some(checksum) = checksum {
            checksum_fields!(
                output,
                checksums::dto(&checksum.algorithm, &checksum.value, None)
            );
        }
        Ok(output)
    }

    pub(super) async fn do_upload_part_copy(
        &self,
        req: S3Request<UploadPartCopyInput>,
    ) -> Result<UploadPartCopyOutput> {
        let requester = self.requester(&req).await?;
        let input = req.input;
        let (_source_bucket, _source_key, source) = self
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
        Self::check_part_number(input.part_number)?;
        let upload = self.upload(&bucket, &input.key, &input.upload_id).await?;
        let source_segments = self.read_segments(&req.headers, true, &source)?;
        let sealing = self.upload_sealing(&req.headers, &upload.template)?;
        let kept = upload
            .checksum_algorithm
            .as_deref()
            .and_then(checksums::algorithm_name);
        let checksums = kept.and_then(|name| {
            super::integrity::ChecksumCheck::keeping(&http::HeaderMap::new(), Some(name))
        });
        let (start, end) = match &input.copy_source_range {
            None => (0, source.size),
            Some(range) => parse_copy_range(range, source.size)?,
        };
        let tag = format!(
            "{}.{}.{}",
            input.upload_id,
            input.part_number,
            self.store.new_tag(4)
        );
        let intent = self
            .begin_part_intent(&bucket, &input.key, &input.upload_id, &tag)
            .await?;
        let plain = self
            .read_plain(&source, source_segments, (start, end), false)
            .await?;
        let stream = super::integrity::hashed(plain, checksums.as_ref());
        let SealedBody {
            stream,
            length,
            sealed,
        } = SealedBody::new(stream, Some(end - start), sealing.as_ref());
        let (tally, wrapped) = sealed.unzip();
        let (pieces, size, md5, checksum) = self
            .store
            .write_checked(
                &intent,
                &bucket.id,
                &tag,
                &input.key,
                Body::new(stream, length),
                |_| checksums.map_or(Ok(None), |check| check.verify(None)),
            )
            .await?;
        let (md5, size) = SealedBody::plain(tally.as_ref(), (md5, size));
        let etag = hex::encode(md5);
        let mtime_ns = self.store.now_ns();
        let part = PartRecord {
            number: input.part_number,
            etag: etag.clone(),
            size,
            mtime_ns,
            pieces,
            checksum,
            encryption: wrapped,
        };
        self.save_part(&bucket, &input.key, &input.upload_id, part, &intent)
            .await?;
        Ok(UploadPartCopyOutput {
            copy_part_result: Some(CopyPartResult {
                e_tag: Some(convert::etag(&etag)),
                last_modified: Some(convert::timestamp(mtime_ns)),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    pub(super) async fn do_list_parts(
        &self,
        req: S3Request<ListPartsInput>,
    ) -> Result<ListPartsOutput> {
        let requester = self.requester(&req).await?;
        let input = req.input;
        // An object action: the policy sees the upload's object.
        let bucket = self.store.bucket(&input.bucket).await?;
        if !super::bucket_allows(
            &bucket,
            &requester,
            "s3:ListMultipartUploadParts",
            Some(&input.key),
            &crate::policy::Context::new(),
            Permission::Read,
        ) {
            return Err(GatewayError::AccessDenied);
        }
        let upload = self.upload(&bucket, &input.key, &input.upload_id).await?;
        let marker = input.part_number_marker.unwrap_or(0);
        let max = input.max_parts.unwrap_or(1000).clamp(0, 1000) as usize;
        let all: Vec<PartRecord> = self
            .parts(&bucket, &input.upload_id)
            .await?
            .into_iter()
            .filter(|p| p.number > marker)
            .collect();
        let truncated = all.len() > max;
        let shown: Vec<PartRecord> = all.into_iter().take(max).collect();
        let next = shown.last().map(|p| p.number);
        let owner = self.owner_dto(&upload.owner).await;
        Ok(ListPartsOutput {
            bucket: Some(input.bucket),
            key: Some(input.key),
            upload_id: Some(input.upload_id),
            initiator: Some(Initiator {
                display_name: owner.display_name.clone(),
                id: owner.id.clone(),
            }),
            owner: Some(owner),
            is_truncated: Some(truncated),
            max_parts: Some(max as i32),
            part_number_marker: input.part_number_marker,
            next_part_number_marker: next,
            storage_class: Some(StorageClass::from_static(StorageClass::STANDARD)),
            parts: Some(
                shown
                    .into_iter()
                    .map(|p| {
                        let mut part = Part {
                            e_tag: Some(convert::etag(&p.etag)),
                            last_modified: Some(convert::timestamp(p.mtime_ns)),
                            part_number: Some(p.number),
                            size: Some(p.size as i64),
                            ..Default::default()
                        };
                        if let Some(checksum) = &p.checksum {
                            checksum_fields!(
                                part,
                                checksums::dto(&checksum.algorithm, &checksum.value, None)
                            );
                        }
                        part
                    })
                    .collect(),
            ),
            checksum_algorithm: upload
                .checksum_algorithm
                .as_deref()
                .map(checksums::algorithm_dto),
            checksum_type: upload
                .checksum_algorithm
                .is_some()
                .then(|| upload_checksum_type(&upload)),
            ..Default::default()
        })
    }

    pub(super) async fn do_list_multipart_uploads(
        &self,
        req: S3Request<ListMultipartUploadsInput>,
    ) -> Result<ListMultipartUploadsOutput> {
        let requester = self.requester(&req).await?;
        let input = req.input;
        let bucket = self
            .bucket_for_listing(
                &input.bucket,
                &requester,
                "s3:ListBucketMultipartUploads",
                input.prefix.as_deref(),
            )
            .await?;
        let prefix = input.prefix.clone().unwrap_or_default();
        let delimiter = input.delimiter.clone().unwrap_or_default();
        let max = input.max_uploads.unwrap_or(1000).clamp(0, 1000) as usize;
        let mut after: Option<Vec<u8>> = match (&input.key_marker, &input.upload_id_marker) {
            (Some(key), Some(id)) => Some(layout::upload_key(key, id)),
            // A common prefix returned as the marker: past every key under it.
            (Some(key), None)
                if !delimiter.is_empty()
                    && key.starts_with(&prefix)
                    && key.ends_with(&delimiter) =>
            {
                Some(past_prefix(key))
            }
            (Some(key), None) => Some(past_prefix(&format!("{key}\0"))),
            _ => None,
        };
        let oid = layout::uploads_object(&bucket.id);
        let mut uploads = Vec::new();
        let mut prefixes: Vec<String> = Vec::new();
        let mut truncated = false;
        // The last upload (key, id) or common prefix (key, none) returned: the next markers.
        let mut last: Option<(String, Option<String>)> = None;
        'pages: loop {
            let page = match self
                .store
                .index
                .omap_get_vals(&oid, after.as_deref(), prefix.as_bytes(), 1000)
                .await
            {
                Ok(page) => page,
                Err(RadosError::NotFound(_)) => break,
                Err(error) => return Err(error.into()),
            };
            for (key, value) in &page.entries {
                after = Some(key.clone());
                let record: UploadRecord = layout::decode(value)?;
                let rolled_up = (!delimiter.is_empty())
                    .then(|| record.key[prefix.len()..].find(&delimiter))
                    .flatten()
                    .map(|at| record.key[..prefix.len() + at + delimiter.len()].to_string());
                if rolled_up.is_some() && rolled_up.as_ref() == prefixes.last() {
                    continue; // one more upload under a prefix already returned
                }
                if uploads.len() + prefixes.len() == max {
                    truncated = true;
                    break 'pages;
                }
                if let Some(common) = rolled_up {
                    last = Some((common.clone(), None));
                    prefixes.push(common);
                    continue;
                }
                last = Some((record.key.clone(), Some(record.upload_id.clone())));
                let owner = self.owner_dto(&record.owner).await;
                uploads.push(MultipartUpload {
                    initiated: Some(convert::timestamp(record.initiated_ns)),
                    initiator: Some(Initiator {
                        display_name: owner.display_name.clone(),
                        id: owner.id.clone(),
                    }),
                    key: Some(record.key),
                    owner: Some(owner),
                    storage_class: Some(StorageClass::from_static(StorageClass::STANDARD)),
                    upload_id: Some(record.upload_id),
                    ..Default::default()
                });
            }
            if !page.more || page.entries.is_empty() {
                break;
            }
        }
        Ok(ListMultipartUploadsOutput {
            bucket: Some(input.bucket),
            common_prefixes: Some(
                prefixes
                    .into_iter()
                    .map(|p| CommonPrefix { prefix: Some(p) })
                    .collect(),
            ),
            delimiter: input.delimiter,
            encoding_type: input.encoding_type,
            is_truncated: Some(truncated),
            key_marker: input.key_marker,
            max_uploads: Some(max as i32),
            next_key_marker: last.as_ref().map(|(key, _)| key.clone()),
            next_upload_id_marker: last.and_then(|(_, id)| id),
            prefix: input.prefix,
            upload_id_marker: input.upload_id_marker,
            uploads: Some(uploads),
            ..Default::default()
        })
    }

    async fn forget_upload(&self, bucket: &BucketRecord, key: &str, upload_id: &str) -> Result<()> {
        self.store
            .index
            .omap_remove_keys(
                &layout::uploads_object(&bucket.id),
                vec![layout::upload_key(key, upload_id)],
            )
            .await?;
        crate::store::ignore_missing(
            self.store
                .index
                .remove(&layout::upload_object(&bucket.id, upload_id))
                .await,
        )
    }

    pub(super) async fn do_complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> Result<CompleteMultipartUploadOutput> {
        let requester = self.requester(&req).await?;
        let input = req.input;
        let given_checksum = checksums::checksum_of!(input);
        let bucket = self
            .bucket_for_object(&input.bucket, &requester, "s3:PutObject", &input.key)
            .await?;
        let condition =
            convert::write_condition(input.if_match.as_ref(), input.if_none_match.as_ref())?;
        let _guard = self.store.lock_upload(&input.upload_id).await;
        let upload = match self.upload(&bucket, &input.key, &input.upload_id).await {
            Err(GatewayError::NoSuchUpload(missing)) => {
                // A Complete repeated after one that finished (a client's retry whose first
                // answer was lost) answers again with the object it made, as AWS does,
                // while that object is still the key's or one of its versions.
                let done = self
                    .store
                    .completed_by(&bucket, &input.key, &input.upload_id)
                    .await?
                    .ok_or(GatewayError::NoSuchUpload(missing))?;
                return Ok(completed_output(&input.bucket, &input.key, &done));
            }
            found => found?,
        };
        if let Some(done) = self
            .store
            .completed_by(&bucket, &input.key, &input.upload_id)
            .await?
        {
            // A Complete that crashed after its commit left the upload listed: this retry
            // finishes its cleanup and answers as it would have (committing again would make
            // a second object sharing the first one's pieces, which deleting either frees).
            self.forget_completed_upload(&bucket, &input.key, &input.upload_id)
                .await?;
            return Ok(completed_output(&input.bucket, &input.key, &done));
        }
        let mut listed: Vec<CompletedPart> = input
            .multipart_upload
            .and_then(|m| m.parts)
            .unwrap_or_default();
        // A part number listed twice in a row (a client that resent a part and kept both
        // answers) means its last upload, as radosgw takes it.
        listed.dedup_by(|later, earlier| {
            let same = later.part_number == earlier.part_number;
            if same {
                std::mem::swap(later, earlier);
            }
            same
        });
        if listed.is_empty() {
            return Err(GatewayError::Malformed("no parts".into()));
        }
        let stored = self.parts(&bucket, &input.upload_id).await?;
        let mut chosen: Vec<&PartRecord> = Vec::with_capacity(listed.len());
        let mut previous = 0;
        for part in &listed {
            let number = part.part_number.unwrap_or(0);
            if number <= previous {
                return Err(GatewayError::InvalidPartOrder);
            }
            previous = number;
            let Some(record) = stored.iter().find(|p| p.number == number) else {
                return Err(GatewayError::InvalidPart(format!("part {number} missing")));
            };
            if let Some(etag) = &part.e_tag {
                if etag.value().trim_matches('"') != record.etag {
                    return Err(GatewayError::InvalidPart(format!("part {number} etag")));
                }
            }
            chosen.push(record);
        }
        let minimum = self.store.config.multipart_part_size_min_bytes;
        if chosen[..chosen.len() - 1].iter().any(|p| p.size < minimum) {
            return Err(GatewayError::EntityTooSmall);
        }
        let mut md5 = Md5::new();
        for part in &chosen {
            let digest =
                hex::decode(&part.etag).map_err(|e| GatewayError::Corrupt(e.to_string()))?;
            md5.update(&digest);
        }
        let etag = format!("{}-{}", hex::encode(md5.finalize()), chosen.len());
        let (checksum, part_checksums) = match upload
            .checksum_algorithm
            .as_deref()
            .and_then(checksums::algorithm_name)
        {
            Some(name) => {
                let parts: Vec<_> = chosen
                    .iter()
                    .map(|p| (p.checksum.as_ref(), p.size))
                    .collect();
                let listed: Vec<_> = listed.iter().map(|p| checksums::checksum_of!(p)).collect();
                let (checksum, values) = checksums::completed(
                    name,
                    upload.checksum_full_object,
                    &parts,
                    &listed,
                    &given_checksum,
                )?;
                (Some(checksum), values)
            }
            None => (None, Vec::new()),
        };
        // An encrypted upload's object keeps each part's wrapped data key, in part order.
        let encryption = match &upload.template.encryption {
            None => None,
            Some(template) => Some(ObjectEncryption {
                mode: template.mode,
                keys: chosen
                    .iter()
                    .map(|p| {
                        p.encryption.clone().ok_or_else(|| {
                            GatewayError::Corrupt(format!(
                                "part {} of an encrypted upload has no data key",
                                p.number
                            ))
                        })
                    })
                    .collect::<Result<_>>()?,
            }),
        };
        let entry = ObjectEntry {
            size: chosen.iter().map(|p| p.size).sum(),
            etag: etag.clone(),
            mtime_ns: self.store.now_ns(),
            pieces: chosen
                .iter()
                .flat_map(|p| p.pieces.iter().cloned())
                .collect(),
            parts_count: chosen.len() as u32,
            part_sizes: chosen.iter().map(|p| p.size).collect(),
            upload_id: Some(input.upload_id.clone()),
            checksum,
            part_checksums,
            encryption,
            ..upload.template
        };
        // A precondition that fails leaves the upload as it was, for another Complete.
        let entry = self
            .store
            .commit_if(&bucket, &input.key, entry, &condition, None)
            .await?;
        let used: std::collections::BTreeSet<i32> = chosen.iter().map(|p| p.number).collect();
        let unused = stored
            .into_iter()
            .filter(|p| !used.contains(&p.number))
            .flat_map(|p| p.pieces)
            .collect();
        self.store.remove_pieces(unused).await;
        self.forget_upload(&bucket, &input.key, &input.upload_id)
            .await?;
        Ok(completed_output(&input.bucket, &input.key, &entry))
    }

    /// Aborts every multipart upload of `bucket` (DeleteBucket does, as radosgw): removes
    /// their parts' pieces and records.
    pub(super) async fn abort_all_uploads(&self, bucket: &BucketRecord) -> Result<()> {
        let oid = layout::uploads_object(&bucket.id);
        loop {
            let page = match self.store.index.omap_get_vals(&oid, None, b"", 1000).await {
                Ok(page) => page,
                Err(RadosError::NotFound(_)) => return Ok(()),
                Err(error) => return Err(error.into()),
            };
            if page.entries.is_empty() {
                return Ok(());
            }
            for (_, value) in &page.entries {
                let record: UploadRecord = layout::decode(value)?;
                let _guard = self.store.lock_upload(&record.upload_id).await;
                let parts = self.parts(bucket, &record.upload_id).await?;
                self.store
                    .remove_pieces(parts.into_iter().flat_map(|p| p.pieces).collect())
                    .await;
                self.forget_upload(bucket, &record.key, &record.upload_id)
                    .await?;
            }
        }
    }

    pub(super) async fn do_abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> Result<AbortMultipartUploadOutput> {
        let requester = self.requester(&req).await?;
        let input = req.input;
        let bucket = self
            .bucket_for_object(
                &input.bucket,
                &requester,
                "s3:AbortMultipartUpload",
                &input.key,
            )
            .await?;
        let _guard = self.store.lock_upload(&input.upload_id).await;
        let upload = self.upload(&bucket, &input.key, &input.upload_id).await?;
        let owns = matches!(requester, Requester::System)
            || requester.uid() == Some(upload.owner.as_str())
            || requester.uid() == Some(bucket.owner.as_str());
        if !owns {
            return Err(GatewayError::AccessDenied);
        }
        // A Complete that crashed after committing left the upload listed: the parts the
        // object uses stay.
        self.forget_completed_upload(&bucket, &input.key, &input.upload_id)
            .await?;
        Ok(AbortMultipartUploadOutput::default())
    }

    /// Removes an upload's parts but those an object of `key` uses, and its records.
    pub(super) async fn forget_completed_upload(
        &self,
        bucket: &BucketRecord,
        key: &str,
        upload_id: &str,
    ) -> Result<()> {
        let parts = self.parts(bucket, upload_id).await?;
        let live = self.store.pieces_in_use(bucket, key).await?;
        self.store
            .remove_pieces(
                parts
                    .into_iter()
                    .flat_map(|p| p.pieces)
                    .filter(|piece| !live.contains(&piece.oid))
                    .collect(),
            )
            .await;
        self.forget_upload(bucket, key, upload_id).await
    }
}

/// What a CompleteMultipartUpload answers for the object `entry` it made (or made before,
/// when repeated).
fn completed_output(bucket: &str, key: &str, entry: &ObjectEntry) -> CompleteMultipartUploadOutput {
    let mut output = CompleteMultipartUploadOutput {
        bucket: Some(bucket.to_string()),
        key: Some(key.to_string()),
        e_tag: Some(convert::etag(&entry.etag)),
        location: Some(format!("/{bucket}/{key}")),
        version_id: super::objects::new_version_id(entry),
        ..Default::default()
    };
    if let Some(checksum) = entry.stored_checksum() {
        checksum_fields!(output, checksums::stored_dto(&checksum), type);
    }
    output
}

/// The checksum type of an upload created with a checksum algorithm.
fn upload_checksum_type(upload: &UploadRecord) -> ChecksumType {
    ChecksumType::from_static(if upload.checksum_full_object {
        ChecksumType::FULL_OBJECT
    } else {
        ChecksumType::COMPOSITE
    })
}

/// `bytes=a-b` of a copy source of `size` bytes, as `[start, end)`.
fn parse_copy_range(range: &str, size: u64) -> Result<(u64, u64)> {
    let invalid = || GatewayError::InvalidArgument(format!("x-amz-copy-source-range {range}"));
    let spec = range.strip_prefix("bytes=").ok_or_else(invalid)?;
    let (a, b) = spec.split_once('-').ok_or_else(invalid)?;
    let first: u64 = a.trim().parse().map_err(|_| invalid())?;
    let last: u64 = b.trim().parse().map_err(|_| invalid())?;
    if first > last || last >= size {
        return Err(GatewayError::InvalidRange);
    }
    Ok((first, last + 1))
}
