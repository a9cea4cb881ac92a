//! GetObjectAttributes: what S3 keeps of an object besides its data (ETag, size, storage
//! class, checksum, and the parts of a multipart object with their sizes and checksums).

use s3s::dto::*;
use s3s::S3Request;

use super::checksums::{self, checksum_fields};
use super::convert;
use super::objects::version_header;
use super::Gateway;
use crate::acl::Permission;
use crate::error::Result;
use crate::layout::ObjectEntry;

/// Parts GetObjectAttributes returns at most when the request names no MaxParts.
const PARTS_MAX: i32 = 1000;

impl Gateway {
    pub(super) async fn do_get_object_attributes(
        &self,
        req: S3Request<GetObjectAttributesInput>,
    ) -> Result<GetObjectAttributesOutput> {
        let requester = self.requester(&req).await?;
        let input = req.input;
        let (bucket, entry) = self
            .object_for(
                &input.bucket,
                &input.key,
                input.version_id.as_deref(),
                &requester,
                Permission::Read,
            )
            .await?;
        let wanted = |name: &str| {
            input
                .object_attributes
                .iter()
                // One header may carry them all, comma-separated.
                .flat_map(|a| a.as_str().split(','))
                .any(|a| a.trim().eq_ignore_ascii_case(name))
        };
        let checksum = entry
            .stored_checksum()
            .filter(|_| wanted(ObjectAttributes::CHECKSUM))
            .map(|stored| checksums::stored_dto(&stored));
        let object_parts =
            (wanted(ObjectAttributes::OBJECT_PARTS) && entry.parts_count > 0).then(|| {
                object_parts(
                    &entry,
                    input.part_number_marker.unwrap_or(0),
                    input.max_parts.unwrap_or(PARTS_MAX),
                )
            });
        Ok(GetObjectAttributesOutput {
            e_tag: wanted(ObjectAttributes::ETAG).then(|| convert::etag(&entry.etag)),
            object_size: wanted(ObjectAttributes::OBJECT_SIZE).then_some(entry.size as i64),
            storage_class: wanted(ObjectAttributes::STORAGE_CLASS)
                .then(|| StorageClass::from_static(StorageClass::STANDARD)),
            last_modified: Some(convert::timestamp(entry.mtime_ns)),
            checksum,
            object_parts,
            version_id: version_header(&bucket, &entry),
            ..Default::default()
        })
    }
}

/// The parts of a multipart object after part `marker`, at most `max` of them: their
/// numbers, sizes and checksums where those were recorded (objects completed before part
/// sizes were kept answer only their count).
fn object_parts(entry: &ObjectEntry, marker: i32, max: i32) -> GetObjectAttributesParts {
    let max = max.clamp(0, PARTS_MAX);
    let algorithm = entry.stored_checksum().map(|stored| stored.algorithm);
    let all: Vec<ObjectPart> = entry
        .part_sizes
        .iter()
        .enumerate()
        .map(|(index, size)| {
            let mut part = ObjectPart {
                part_number: Some(index as i32 + 1),
                size: Some(*size as i64),
                ..Default::default()
            };
            if let (Some(algorithm), Some(value)) = (&algorithm, entry.part_checksums.get(index)) {
                checksum_fields!(part, checksums::dto(algorithm, value, None));
            }
            part
        })
        .filter(|part| part.part_number.unwrap_or(0) > marker)
        .collect();
    let truncated = all.len() > max as usize;
    let parts: Vec<ObjectPart> = all.into_iter().take(max as usize).collect();
    GetObjectAttributesParts {
        total_parts_count: Some(entry.parts_count as i32),
        part_number_marker: Some(marker),
        next_part_number_marker: parts.last().and_then(|part| part.part_number),
        max_parts: Some(max),
        is_truncated: Some(truncated),
        parts: (!parts.is_empty()).then_some(parts),
    }
}
