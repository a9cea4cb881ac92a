//! Where everything lives in the cluster: object names and the records stored in omap and xattrs.
//!
//! Records are JSON (serde) so they stay readable with `rados getomapval`; each carries only
//! what the S3 API returns.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Metadata-pool object whose omap maps access key -> [`crate::User`].
pub const USERS_OBJECT: &str = "users";
/// Metadata-pool object whose omap maps bucket name -> [`BucketRecord`].
pub const BUCKETS_OBJECT: &str = "buckets";
/// Metadata-pool object whose omap lists data objects awaiting removal (name -> enqueue time).
pub const GC_OBJECT: &str = "gc";
/// Xattr of a head object holding its [`ObjectEntry`] (for recovery and inspection).
pub const HEAD_META_XATTR: &str = "user.rgw.meta";

/// Metadata-pool object taken exclusively by a bucket's creator (the name's lock).
pub fn bucket_claim_object(bucket: &str) -> String {
    format!(".bucket.{bucket}")
}

/// Index-pool object holding shard `shard` of a bucket's index.
pub fn index_shard_object(bucket_id: &str, shard: u32) -> String {
    format!(".dir.{bucket_id}.{shard}")
}

/// Xattr of every index shard saying the bucket's versioning status as its shards were
/// last told ([`versioning_stamp`]): a PUT answered from a gateway's copy of the bucket
/// record guards its write intent with it, so a versioning change made through another
/// gateway, or the bucket's removal (its shards go with it), fails the intent instead of
/// being missed.
pub const VERSIONING_STAMP_XATTR: &str = "strata.versioning";

/// The value of [`VERSIONING_STAMP_XATTR`] for a bucket with `versioning` (never empty: a
/// missing xattr compares as empty, and means "not stamped").
pub fn versioning_stamp(versioning: Option<Versioning>) -> &'static [u8] {
    match versioning {
        None => b"off",
        Some(Versioning::Enabled) => b"enabled",
        Some(Versioning::Suspended) => b"suspended",
    }
}

/// Index-pool object whose omap lists a bucket's multipart uploads (`key \0 upload-id`).
pub fn uploads_object(bucket_id: &str) -> String {
    format!(".uploads.{bucket_id}")
}

/// Index-pool object whose omap lists the parts of one upload (`part number, 5 digits`).
pub fn upload_object(bucket_id: &str, upload_id: &str) -> String {
    format!(".upload.{bucket_id}.{upload_id}")
}

/// Omap key of an upload in [`uploads_object`].
pub fn upload_key(key: &str, upload_id: &str) -> Vec<u8> {
    let mut out = key.as_bytes().to_vec();
    out.push(0);
    out.extend_from_slice(upload_id.as_bytes());
    out
}

/// Omap key of a part in [`upload_object`].
pub fn part_key(part_number: i32) -> Vec<u8> {
    format!("{part_number:05}").into_bytes()
}

/// Data object `n` of a version: the head (n = 0) carries the key for inspection; the rest are
/// shadow pieces.
pub fn piece_object(bucket_id: &str, tag: &str, key: &str, n: usize) -> String {
    if n == 0 {
        format!("{bucket_id}_{tag}_{key}")
    } else {
        format!("{bucket_id}_{tag}__shadow_{n}")
    }
}

/// The index shard of `key` among `shards` (FNV-1a, stable across versions and machines).
pub fn shard_of(key: &str, shards: u32) -> u32 {
    assert!(shards > 0, "a bucket has at least one index shard");
    let mut hash: u32 = 0x811c_9dc5;
    for byte in key.as_bytes() {
        hash ^= u32::from(*byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash % shards
}

/// First byte of every version entry's omap key. It never occurs in UTF-8, so the version
/// entries of a shard sort after all of its plain entries: a plain listing stops at the first
/// one, and the unversioned read and write paths never see them.
pub const VERSION_NAMESPACE: u8 = 0xff;

/// First byte of every write intent's omap key (`0xFE tag`, value: the start time in ns as
/// decimal text), kept in the object the write will commit to: the key's index shard for a
/// PUT or copy, the upload's object for a part. Like [`VERSION_NAMESPACE`] it never occurs in
/// UTF-8, and it sorts between the plain entries and the version entries: listings stop at
/// it. A commit removes its intent in the same guarded omap write that stores the entry, and
/// orphan collection removes (fences) an intent older than its grace period the same way, so
/// exactly one of the two wins (see [`crate::store`]).
pub const INTENT_NAMESPACE: u8 = 0xfe;

/// The omap key of the write intent of data tag `tag`.
pub fn intent_key(tag: &str) -> Vec<u8> {
    let mut out = vec![INTENT_NAMESPACE];
    out.extend_from_slice(tag.as_bytes());
    out
}

/// The tag of a write intent's omap key; `None` for any other omap key.
pub fn parse_intent_key(raw: &[u8]) -> Option<String> {
    let (&first, tag) = raw.split_first()?;
    (first == INTENT_NAMESPACE)
        .then(|| String::from_utf8(tag.to_vec()).ok())
        .flatten()
}

/// Whether an omap key of an index shard or an upload object is bookkeeping (a version entry
/// or a write intent) rather than a plain entry or a part.
pub fn is_namespaced(raw: &[u8]) -> bool {
    raw.first().is_some_and(|&b| b >= INTENT_NAMESPACE)
}

/// The prefix every data object of tag `tag` in bucket `bucket_id` starts with.
pub fn pieces_prefix(bucket_id: &str, tag: &str) -> String {
    format!("{bucket_id}_{tag}_")
}

/// Characters of a version suffix: 16 hex digits of `u64::MAX - mtime_ns`, then 8 random hex
/// digits.
pub const VERSION_SUFFIX_CHARS: usize = 24;

/// The omap prefix shared by every version entry of `key` (`0xFF key 0x00`).
pub fn versions_prefix(key: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + 2);
    out.push(VERSION_NAMESPACE);
    out.extend_from_slice(key.as_bytes());
    out.push(0);
    out
}

/// The omap key of the version of `key` with `suffix` (see [`VERSION_SUFFIX_CHARS`]).
pub fn version_key(key: &str, suffix: &str) -> Vec<u8> {
    debug_assert!(is_version_suffix(suffix), "bad version suffix {suffix:?}");
    let mut out = versions_prefix(key);
    out.extend_from_slice(suffix.as_bytes());
    out
}

/// The S3 key and the suffix of a version entry's omap key; `None` for any other omap key.
pub fn parse_version_key(raw: &[u8]) -> Option<(String, String)> {
    let (&first, rest) = raw.split_first()?;
    if first != VERSION_NAMESPACE || rest.len() < VERSION_SUFFIX_CHARS + 1 {
        return None;
    }
    let (key_nul, suffix) = rest.split_at(rest.len() - VERSION_SUFFIX_CHARS);
    let (&nul, key) = key_nul.split_last()?;
    let suffix = std::str::from_utf8(suffix).ok()?;
    if nul != 0 || !is_version_suffix(suffix) {
        return None;
    }
    Some((String::from_utf8(key.to_vec()).ok()?, suffix.to_string()))
}

/// Whether `text` has the form of a version suffix (and so of a generated version id).
pub fn is_version_suffix(text: &str) -> bool {
    text.len() == VERSION_SUFFIX_CHARS
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The suffix of a version written at `mtime_ns` with the random hex `tag` (8 digits): later
/// versions sort first.
pub fn version_suffix(mtime_ns: u64, tag: &str) -> String {
    let suffix = format!("{:016x}{tag}", u64::MAX - mtime_ns);
    assert!(is_version_suffix(&suffix), "a version tag is 8 hex digits");
    suffix
}

/// The write time encoded in a version suffix.
pub fn suffix_mtime_ns(suffix: &str) -> Option<u64> {
    let inverted = u64::from_str_radix(suffix.get(..16)?, 16).ok()?;
    Some(u64::MAX - inverted)
}

/// A canned ACL, as stored (the S3 names).
pub type CannedAcl = String;

/// Legacy records carry only a canned ACL name; newer ones the grants themselves.
fn effective_grants(
    grants: &Option<Vec<crate::acl::Grant>>,
    canned: &str,
    owner: &str,
    bucket_owner: &str,
) -> Vec<crate::acl::Grant> {
    match grants {
        Some(grants) => grants.clone(),
        None => crate::acl::canned_grants(canned, owner, bucket_owner),
    }
}

/// A bucket, as stored in [`BUCKETS_OBJECT`].
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct BucketRecord {
    /// Name.
    pub name: String,
    /// Unique id, prefix of every object of the bucket.
    pub id: String,
    /// Owner's user id.
    pub owner: String,
    /// Creation, ns since the epoch.
    pub created_ns: u64,
    /// Shards of the index.
    pub shards: u32,
    /// Canned ACL name it was last set with (`private`, ...; empty when set by grants).
    pub acl: CannedAcl,
    /// Location constraint given at creation.
    #[serde(default)]
    pub location: String,
    /// The ACL's grants; `None` in records written before grants existed (then `acl` is a
    /// canned ACL name standing for them).
    #[serde(default)]
    pub grants: Option<Vec<crate::acl::Grant>>,
    /// The bucket's public access block, if one was put.
    #[serde(default)]
    pub public_access_block: Option<PublicAccessBlock>,
    /// The bucket's CORS rules, if a configuration was put.
    #[serde(default)]
    pub cors: Option<Vec<crate::cors::CorsRule>>,
    /// The bucket policy document as it was put ([`crate::policy`]), if one was.
    #[serde(default)]
    pub policy: Option<String>,
    /// The versioning state; `None` while versioning was never configured (then every write
    /// replaces the key's one version, as before versioning existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub versioning: Option<Versioning>,
    /// The bucket's tag set, if one was put ([`crate::tagging`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<crate::tagging::Tag>>,
    /// The bucket's default encryption (`AES256`: SSE-S3), applied to writes that ask for
    /// none ([`crate::encryption`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption: Option<String>,
    /// The bucket's lifecycle rules, if a configuration was put (`service/lifecycle_rules.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<Vec<crate::service::lifecycle_rules::Rule>>,
}

/// A bucket's versioning state once versioning was configured (S3 never goes back to
/// "unversioned").
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub enum Versioning {
    /// Every write creates a new version with a generated id.
    Enabled,
    /// Writes create the version `null`, replacing the key's previous null version; other
    /// versions are kept.
    Suspended,
}

/// S3's PublicAccessBlockConfiguration of one bucket (every flag defaults to false).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct PublicAccessBlock {
    /// Refuse requests that set a public ACL.
    pub block_public_acls: bool,
    /// Grant nothing through public ACL grants.
    pub ignore_public_acls: bool,
    /// Refuse to put a public bucket policy.
    pub block_public_policy: bool,
    /// Restrict public buckets to their owner (kept and reported only, as above).
    pub restrict_public_buckets: bool,
}

impl BucketRecord {
    /// The bucket's ACL.
    pub fn grants(&self) -> Vec<crate::acl::Grant> {
        effective_grants(&self.grants, &self.acl, &self.owner, &self.owner)
    }
}

/// One data object of an object's manifest.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Piece {
    /// Data-pool object name.
    pub oid: String,
    /// Bytes in it.
    pub size: u64,
    /// Where the piece starts in `oid` when `oid` is a pack object shared by several small
    /// objects ([`pack_object`]); `None`: the piece is the whole of `oid`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pack_offset: Option<u64>,
}

impl Piece {
    /// A piece that is the whole of data object `oid`.
    pub fn whole(oid: String, size: u64) -> Self {
        Self {
            oid,
            size,
            pack_offset: None,
        }
    }

    /// Where its bytes start in its data object.
    pub fn start(&self) -> u64 {
        self.pack_offset.unwrap_or(0)
    }
}

/// One small object written into a pack object: recorded in the pack's omap, so orphan
/// collection, `strata gc` and the pack GC know whom a pack holds without reading an index.
/// A pack records all its members in one value ([`PACK_MEMBERS_KEY`], [`PackMemberList`]);
/// packs written before that hold one record per member, keyed by its offset as 20 decimal
/// digits ([`pack_member_key`]), and are still read.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct PackMember {
    /// The index-pool object its entry is committed to (the key's index shard).
    pub index_oid: String,
    /// The S3 key (the omap key of its plain entry there).
    pub key: String,
    /// `<bucket-id>_<tag>_` of the write that put it (its write intent's prefix).
    pub writer: String,
    /// Its bytes.
    pub length: u64,
    /// In a pack the GC wrote: the member's offset in the pack it was copied from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moved_from: Option<u64>,
}

/// The omap key of a pack's member list: one value for every member, written in the same
/// op as the pack's data.
pub const PACK_MEMBERS_KEY: &[u8] = b"members";

/// A pack's members as one omap value, in a compact form (it is paid once per packed
/// object): the index objects named once, then per member a row
/// `[offset, index object's position, key, writer, length, moved_from]`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct PackMemberList {
    /// The index objects the members' entries are committed to.
    #[serde(rename = "i")]
    pub index_oids: Vec<String>,
    /// One row per member.
    #[serde(rename = "m")]
    pub rows: Vec<PackMemberRow>,
}

/// A member of a [`PackMemberList`]: offset in the pack, position of its index object in
/// `index_oids`, key, writer, length, origin in the pack it was copied from.
pub type PackMemberRow = (u64, u32, String, String, u64, Option<u64>);

impl PackMemberList {
    /// The list of `members`, by their offsets.
    pub fn of<'a>(members: impl IntoIterator<Item = (u64, &'a PackMember)>) -> Self {
        let mut list = PackMemberList::default();
        for (offset, member) in members {
            let index = match list.index_oids.iter().position(|o| *o == member.index_oid) {
                Some(index) => index,
                None => {
                    list.index_oids.push(member.index_oid.clone());
                    list.index_oids.len() - 1
                }
            };
            list.rows.push((
                offset,
                index as u32,
                member.key.clone(),
                member.writer.clone(),
                member.length,
                member.moved_from,
            ));
        }
        list
    }

    /// The members, by offset; a row naming an index object the list lacks is corruption.
    pub fn members(self) -> crate::error::Result<BTreeMap<u64, PackMember>> {
        let PackMemberList { index_oids, rows } = self;
        rows.into_iter()
            .map(|(offset, index, key, writer, length, moved_from)| {
                let index_oid = index_oids.get(index as usize).cloned().ok_or_else(|| {
                    crate::GatewayError::Corrupt(format!(
                        "pack member {key} names index object {index} of {}",
                        index_oids.len()
                    ))
                })?;
                Ok((
                    offset,
                    PackMember {
                        index_oid,
                        key,
                        writer,
                        length,
                        moved_from,
                    },
                ))
            })
            .collect()
    }
}

/// A pack's state in the pack GC log ([`pack_gc_log_object`]).
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub enum PackGcState {
    /// Dead ranges are logged; no rewrite started.
    Initial,
    /// A rewrite into `target` is under way (resumed from here after a crash).
    Processing,
    /// The last rewrite attempt failed; the next pass starts it again.
    Failed,
    /// The live members are in `target` and the index names it; the old pack is queued for
    /// removal after the grace period and its log entries are being removed.
    Complete,
}

/// The pack GC log's record of one pack being rewritten (omap key [`pack_job_key`]).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct PackJob {
    /// Where the job is.
    pub state: PackGcState,
    /// The pack the live members are rewritten into.
    pub target: String,
    /// When the state was written, ns since the epoch.
    pub changed_ns: u64,
}

/// A dead range of a pack in the pack GC log (omap key [`pack_range_key`]).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct DeadRange {
    /// Its bytes.
    pub length: u64,
    /// When it was logged, ns since the epoch.
    pub logged_ns: u64,
}

/// Prefix of every pack object's name.
pub const PACK_PREFIX: &str = "pack.";

/// Shards of the pack GC log.
pub const PACK_GC_LOG_SHARDS: u32 = 8;

/// Data-pool pack object `n` of a pack written with `tag` (`n` is searched so the name maps
/// to the wanted placement group). No `_`, so it never looks like a write's data object.
pub fn pack_object(tag: &str, n: u32) -> String {
    format!("{PACK_PREFIX}{tag}.{n}")
}

/// Whether data object `oid` is a pack object.
pub fn is_pack_object(oid: &str) -> bool {
    oid.starts_with(PACK_PREFIX)
}

/// Metadata-pool object of the pack GC log shard holding pack `pack`'s entries.
pub fn pack_gc_log_object(pack: &str) -> String {
    format!("pack_gc.{}", shard_of(pack, PACK_GC_LOG_SHARDS))
}

/// The omap key of a pack member at `offset` in the pack's omap.
pub fn pack_member_key(offset: u64) -> Vec<u8> {
    format!("{offset:020}").into_bytes()
}

/// The omap key of the dead range at `offset` of `pack` in its log shard.
pub fn pack_range_key(pack: &str, offset: u64) -> Vec<u8> {
    format!("r\0{pack}\0{offset:020}").into_bytes()
}

/// The omap key of `pack`'s rewrite job in its log shard.
pub fn pack_job_key(pack: &str) -> Vec<u8> {
    format!("j\0{pack}").into_bytes()
}

/// The (pack, offset) of a [`pack_range_key`], or the pack of a [`pack_job_key`] (offset
/// `None`).
pub fn parse_pack_log_key(key: &[u8]) -> Option<(String, Option<u64>)> {
    let text = std::str::from_utf8(key).ok()?;
    if let Some(rest) = text.strip_prefix("r\0") {
        let (pack, offset) = rest.rsplit_once('\0')?;
        return Some((pack.to_string(), Some(offset.parse().ok()?)));
    }
    let pack = text.strip_prefix("j\0")?;
    Some((pack.to_string(), None))
}

/// An object's index entry (value in a [`index_shard_object`] omap, key = the S3 key).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ObjectEntry {
    /// Size in bytes.
    pub size: u64,
    /// ETag without quotes (hex md5, or `md5-N` for multipart).
    pub etag: String,
    /// Last modification, ns since the epoch.
    pub mtime_ns: u64,
    /// Owner's user id.
    pub owner: String,
    /// Canned ACL name it was last set with (empty when set by grants).
    pub acl: CannedAcl,
    /// Standard headers stored with the object (content-type, cache-control, ...), lower case.
    pub headers: BTreeMap<String, String>,
    /// User metadata (x-amz-meta-*, without the prefix).
    pub metadata: BTreeMap<String, String>,
    /// Data pieces in order; their sizes add up to `size`.
    pub pieces: Vec<Piece>,
    /// Parts of a multipart object (0 for a simple PUT).
    #[serde(default)]
    pub parts_count: u32,
    /// Sizes of those parts in order (for GET `?partNumber=N`); empty for a simple PUT and
    /// in objects completed before they were recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub part_sizes: Vec<u64>,
    /// The ACL's grants; `None` in records written before grants existed.
    #[serde(default)]
    pub grants: Option<Vec<crate::acl::Grant>>,
    /// Base64 SHA-256 of the data, when the PUT gave one (checked against the data).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum_sha256: Option<String>,
    /// The version id: `None` for an object written while the bucket never had versioning
    /// (S3's null version, kept only as a plain entry); `Some("null")` for one written while
    /// versioning was suspended; otherwise the generated id ([`crate::versioning`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_id: Option<String>,
    /// Whether this version is a delete marker (only ever in version entries; no data).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub delete_marker: bool,
    /// The multipart upload that completed into this object, so that a CompleteMultipartUpload
    /// retried after a crash between its commit and the upload's removal finds its object
    /// instead of committing a second one that shares its data pieces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upload_id: Option<String>,
    /// The version's tag set ([`crate::tagging`]); absent in entries written before tags
    /// were kept, which decode with none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<crate::tagging::Tag>,
    /// The checksum the version was written with (`x-amz-checksum-*`); absent in entries
    /// written before checksums were kept (those have at most `checksum_sha256`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<StoredChecksum>,
    /// Of a multipart object with a checksum: each part's checksum (base64, in the
    /// algorithm of `checksum`), in part order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub part_checksums: Vec<String>,
    /// How the data is encrypted, if it is ([`crate::encryption`]): `size` and `part_sizes`
    /// stay the plaintext's, the pieces hold the sealed chunks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption: Option<crate::encryption::ObjectEncryption>,
}

impl ObjectEntry {
    /// The object's ACL in a bucket owned by `bucket_owner`.
    pub fn grants(&self, bucket_owner: &str) -> Vec<crate::acl::Grant> {
        effective_grants(&self.grants, &self.acl, &self.owner, bucket_owner)
    }

    /// The checksum the version was written with: `checksum`, or in an entry written
    /// before it existed the SHA-256 the PUT gave.
    pub fn stored_checksum(&self) -> Option<StoredChecksum> {
        self.checksum.clone().or_else(|| {
            self.checksum_sha256.clone().map(|value| StoredChecksum {
                algorithm: "sha256".into(),
                value,
                composite: false,
            })
        })
    }
}

/// A checksum kept with an object version or a part, as S3 answers it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct StoredChecksum {
    /// The algorithm, lower case: `crc32`, `crc32c`, `crc64nvme`, `sha1` or `sha256`.
    pub algorithm: String,
    /// The value in base64; a composite one ends in `-<parts>`.
    pub value: String,
    /// Whether it is S3's COMPOSITE checksum of a multipart object (the checksum of its
    /// parts' checksums) rather than one of the whole data (FULL_OBJECT).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub composite: bool,
}

/// A multipart upload in progress ([`uploads_object`]).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct UploadRecord {
    /// Object key.
    pub key: String,
    /// Upload id.
    pub upload_id: String,
    /// Initiator's user id.
    pub owner: String,
    /// Initiation, ns since the epoch.
    pub initiated_ns: u64,
    /// The object's headers, metadata and ACL, applied at completion.
    pub template: ObjectEntry,
    /// The checksum algorithm the upload was created with (`crc32`, ...; see
    /// [`StoredChecksum`]): every part keeps one, and the object gets one at completion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum_algorithm: Option<String>,
    /// Whether the object's checksum is to be of the whole data (FULL_OBJECT) rather than
    /// COMPOSITE.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub checksum_full_object: bool,
}

/// One uploaded part ([`upload_object`]).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct PartRecord {
    /// Part number.
    pub number: i32,
    /// Hex md5 of the part.
    pub etag: String,
    /// Bytes.
    pub size: u64,
    /// Upload time, ns since the epoch.
    pub mtime_ns: u64,
    /// Its data pieces.
    pub pieces: Vec<Piece>,
    /// The part's checksum (full, never composite), when its upload gave or asked for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<StoredChecksum>,
    /// The part's wrapped data key, in an encrypted upload (`size` is the plaintext's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption: Option<crate::encryption::WrappedKey>,
}

/// Encodes a record.
/// An index entry of a packed object is the short binary record of
/// [`crate::store::packed_entry`] when it fits one; everything else is JSON.
pub fn encode<T: Serialize + 'static>(record: &T) -> Vec<u8> {
    let any: &dyn std::any::Any = record;
    if let Some(short) = any
        .downcast_ref::<ObjectEntry>()
        .and_then(crate::store::packed_entry::encode)
    {
        return short;
    }
    serde_json::to_vec(record).expect("gateway records always serialize")
}

/// Decodes a record (JSON, or a packed object's short index entry).
pub fn decode<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> crate::error::Result<T> {
    if crate::store::packed_entry::is_short(bytes) {
        let entry = crate::store::packed_entry::decode(bytes)
            .ok_or_else(|| crate::GatewayError::Corrupt("a cut short index entry".into()))?;
        // Through serde's data model, so a caller decoding it as another type gets an error.
        let value = serde_json::to_value(entry).expect("an entry always serializes");
        return serde_json::from_value(value)
            .map_err(|e| crate::GatewayError::Corrupt(e.to_string()));
    }
    serde_json::from_slice(bytes).map_err(|e| crate::GatewayError::Corrupt(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_key_fits_in_an_object_name() {
        // S3 keys are up to 1024 bytes (service::convert refuses longer ones); the longest
        // tag is a part's: upload id, part number, 4 random bytes in hex.
        let key = "k".repeat(1024);
        let tag = format!("2~{}.10000.{}", "f".repeat(24), "f".repeat(8));
        let bucket_id = "f".repeat(16);
        for n in [0, 1] {
            let oid = piece_object(&bucket_id, &tag, &key, n);
            assert!(
                rados::validate_object_name(&oid).is_ok(),
                "{} bytes > {}",
                oid.len(),
                rados::OBJECT_NAME_BYTES_MAX
            );
        }
    }

    #[test]
    fn shards_are_stable_and_in_range() {
        assert_eq!(shard_of("a", 8), shard_of("a", 8));
        for key in ["", "a", "photos/2024/x.jpg", "ü"] {
            assert!(shard_of(key, 8) < 8);
        }
        assert_eq!(shard_of("anything", 1), 0);
    }

    #[test]
    fn upload_keys_sort_by_key_then_id() {
        assert!(upload_key("a", "z") < upload_key("ab", "a"));
        assert!(part_key(2) < part_key(10));
    }

    #[test]
    fn version_keys_sort_newest_first_after_every_plain_key() {
        let older = version_key("a", &version_suffix(10, "00000001"));
        let newer = version_key("a", &version_suffix(11, "00000000"));
        assert!(newer < older);
        // After every plain key, even one of the highest code points.
        assert!(older.as_slice() > "\u{10ffff}".as_bytes());
        // All versions of "a" before those of "a/b" and "ab", as the plain keys sort.
        assert!(older < version_key("a/b", &version_suffix(0, "00000000")));
        assert!(older < version_key("ab", &version_suffix(0, "00000000")));
        assert_eq!(
            parse_version_key(&older),
            Some(("a".to_string(), version_suffix(10, "00000001")))
        );
        assert_eq!(suffix_mtime_ns(&version_suffix(10, "00000001")), Some(10));
        assert_eq!(parse_version_key(b"a"), None);
        assert!(!is_version_suffix("null"));
    }

    #[test]
    fn entries_round_trip() {
        let entry = ObjectEntry {
            size: 3,
            etag: "abc".into(),
            pieces: vec![Piece::whole("b_t_k".into(), 3)],
            ..ObjectEntry::default()
        };
        let back: ObjectEntry = decode(&encode(&entry)).unwrap();
        assert_eq!(back, entry);
    }

    #[test]
    fn tags_round_trip_and_old_entries_decode_without_them() {
        let entry = ObjectEntry {
            size: 1,
            tags: vec![crate::tagging::Tag {
                key: "k".into(),
                value: "v".into(),
            }],
            ..ObjectEntry::default()
        };
        let back: ObjectEntry = decode(&encode(&entry)).unwrap();
        assert_eq!(back, entry);
        // An entry as written before tags were kept.
        let old = br#"{"size":1,"etag":"e","mtime_ns":2,"owner":"o","acl":"","headers":{},"metadata":{},"pieces":[]}"#;
        let back: ObjectEntry = decode(old).unwrap();
        assert!(back.tags.is_empty());
        // An entry without tags is written as before.
        let plain = String::from_utf8(encode(&ObjectEntry::default())).unwrap();
        assert!(!plain.contains("tags"), "{plain}");
    }

    #[test]
    fn checksums_round_trip_and_old_entries_decode_with_their_sha256() {
        let entry = ObjectEntry {
            size: 1,
            checksum: Some(StoredChecksum {
                algorithm: "sha1".into(),
                value: "c2hh-2".into(),
                composite: true,
            }),
            part_checksums: vec!["YQ==".into(), "Yg==".into()],
            ..ObjectEntry::default()
        };
        let back: ObjectEntry = decode(&encode(&entry)).unwrap();
        assert_eq!(back, entry);
        let old = br#"{"size":1,"etag":"e","mtime_ns":2,"owner":"o","acl":"","headers":{},"metadata":{},"pieces":[],"checksum_sha256":"c2hh"}"#;
        let back: ObjectEntry = decode(old).unwrap();
        assert_eq!(
            back.stored_checksum(),
            Some(StoredChecksum {
                algorithm: "sha256".into(),
                value: "c2hh".into(),
                composite: false,
            })
        );
        let part = br#"{"number":1,"etag":"e","size":1,"mtime_ns":2,"pieces":[]}"#;
        assert_eq!(decode::<PartRecord>(part).unwrap().checksum, None);
        let plain = String::from_utf8(encode(&ObjectEntry::default())).unwrap();
        assert!(!plain.contains("checksum"), "{plain}");
    }
}
