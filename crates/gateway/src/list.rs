//! Listing a sharded bucket index in key order: a k-way merge of the shards' omaps, with
//! S3's prefix / delimiter / marker / max-keys rules. ListObjects reads the plain entries;
//! ListObjectVersions merges them with the version entries ([`crate::versioning`]).

use std::collections::VecDeque;
use std::sync::Arc;

use rados::{IoCtx, RadosError};

use crate::error::Result;
use crate::layout::{self, BucketRecord, ObjectEntry, VERSION_NAMESPACE};
use crate::versioning::NULL_VERSION_ID;

/// Entries fetched from one shard per round trip.
const PAGE_ENTRIES: usize = 1000;

struct ShardCursor {
    oid: String,
    buffer: VecDeque<(Vec<u8>, Vec<u8>)>,
    after: Option<Vec<u8>>,
    exhausted: bool,
}

/// Walks the merged index of one bucket from a start point, in omap key order.
pub(crate) struct IndexWalk {
    io: Arc<dyn IoCtx>,
    prefix: Vec<u8>,
    shards: Vec<ShardCursor>,
}

impl IndexWalk {
    /// Omap keys starting with `prefix` and greater than `after`.
    pub fn new(
        io: Arc<dyn IoCtx>,
        bucket: &BucketRecord,
        prefix: Vec<u8>,
        after: Option<&[u8]>,
    ) -> Self {
        let shards = (0..bucket.shards)
            .map(|shard| ShardCursor {
                oid: layout::index_shard_object(&bucket.id, shard),
                buffer: VecDeque::new(),
                after: after.map(<[u8]>::to_vec),
                exhausted: false,
            })
            .collect();
        Self { io, prefix, shards }
    }

    async fn fill(&mut self) -> Result<()> {
        for shard in &mut self.shards {
            if !shard.buffer.is_empty() || shard.exhausted {
                continue;
            }
            let page = match self
                .io
                .omap_get_vals(
                    &shard.oid,
                    shard.after.as_deref(),
                    &self.prefix,
                    PAGE_ENTRIES,
                )
                .await
            {
                Ok(page) => page,
                Err(RadosError::NotFound(_)) => {
                    shard.exhausted = true;
                    continue;
                }
                Err(error) => return Err(error.into()),
            };
            if let Some((last, _)) = page.entries.last() {
                shard.after = Some(last.clone());
            }
            shard.exhausted = !page.more || page.entries.is_empty();
            shard.buffer.extend(page.entries);
        }
        Ok(())
    }

    /// The next omap key and its value, or `None` at the end.
    pub async fn next(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.fill().await?;
        let smallest = self
            .shards
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.buffer.front().map(|(k, _)| (i, k)))
            .min_by(|a, b| a.1.cmp(b.1))
            .map(|(i, _)| i);
        let Some(i) = smallest else {
            return Ok(None);
        };
        Ok(self.shards[i].buffer.pop_front())
    }

    /// The next plain entry (key and entry); `None` at the end or at the write intents and
    /// version entries, which sort after every plain entry.
    pub async fn next_plain(&mut self) -> Result<Option<(String, ObjectEntry)>> {
        match self.next().await? {
            // Write intents (0xFE) and then versions (0xFF) follow the plain entries.
            Some((key, _)) if layout::is_namespaced(&key) => Ok(None),
            Some((key, value)) => {
                let key = String::from_utf8(key)
                    .map_err(|e| crate::GatewayError::Corrupt(e.to_string()))?;
                Ok(Some((key, layout::decode(&value)?)))
            }
            None => Ok(None),
        }
    }

    /// Skips every key that is `<= bound`.
    pub fn skip_through(&mut self, bound: &[u8]) {
        for shard in &mut self.shards {
            while shard
                .buffer
                .front()
                .is_some_and(|(k, _)| k.as_slice() <= bound)
            {
                shard.buffer.pop_front();
            }
            if shard.buffer.is_empty() && shard.after.as_deref().is_none_or(|a| a < bound) {
                shard.after = Some(bound.to_vec());
            }
        }
    }
}

/// What one listing request returns.
#[derive(Debug, Default)]
pub(crate) struct Listing {
    /// Objects, in key order.
    pub objects: Vec<(String, ObjectEntry)>,
    /// Common prefixes, in order.
    pub prefixes: Vec<String>,
    /// Whether more keys follow.
    pub truncated: bool,
    /// The last key or prefix returned (the marker to continue after).
    pub last: Option<String>,
}

/// The key just past every key starting with `prefix` (keys are UTF-8: no 0xFF byte).
pub(crate) fn past_prefix(prefix: &str) -> Vec<u8> {
    let mut bound = prefix.as_bytes().to_vec();
    bound.push(0xff);
    bound
}

/// Lists `bucket` after `marker` (a key or a common prefix), S3 style.
pub(crate) async fn list(
    io: Arc<dyn IoCtx>,
    bucket: &BucketRecord,
    prefix: &str,
    delimiter: &str,
    marker: Option<&str>,
    max_keys: usize,
) -> Result<Listing> {
    let common_prefix = |key: &str| -> Option<String> {
        if delimiter.is_empty() {
            return None;
        }
        let rest = key.get(prefix.len()..)?;
        rest.find(delimiter)
            .map(|at| key[..prefix.len() + at + delimiter.len()].to_string())
    };
    let after: Option<Vec<u8>> = marker
        .filter(|m| !m.is_empty())
        .map(|m| match common_prefix(m) {
            Some(cp) if m.starts_with(prefix) && cp.len() == m.len() => past_prefix(&cp),
            _ => m.as_bytes().to_vec(),
        });
    let mut listing = Listing::default();
    if max_keys == 0 {
        return Ok(listing);
    }
    let mut walk = IndexWalk::new(io, bucket, prefix.as_bytes().to_vec(), after.as_deref());
    let mut count = 0usize;
    while let Some((key, entry)) = walk.next_plain().await? {
        if count == max_keys {
            listing.truncated = true;
            break;
        }
        if let Some(cp) = common_prefix(&key) {
            walk.skip_through(&past_prefix(&cp));
            listing.last = Some(cp.clone());
            listing.prefixes.push(cp);
        } else {
            listing.last = Some(key.clone());
            listing.objects.push((key, entry));
        }
        count += 1;
    }
    Ok(listing)
}

/// One version or delete marker of a version listing.
#[derive(Debug)]
pub(crate) struct VersionItem {
    /// The key.
    pub key: String,
    /// The version's id (`null` for a legacy plain entry).
    pub version_id: String,
    /// The version.
    pub entry: ObjectEntry,
    /// Whether it is the key's newest version.
    pub is_latest: bool,
}

/// What one version listing request returns.
#[derive(Debug, Default)]
pub(crate) struct VersionListing {
    /// Versions and delete markers: keys in order, each key's newest first.
    pub items: Vec<VersionItem>,
    /// Common prefixes, in order.
    pub prefixes: Vec<String>,
    /// Whether more follow.
    pub truncated: bool,
    /// The key (or common prefix) to continue after.
    pub next_key: Option<String>,
    /// The version id to continue after (none after a common prefix).
    pub next_version_id: Option<String>,
}

/// The legacy plain entries (null versions without a version entry) and the version entries
/// of a bucket, merged in key order. A key has one kind or the other, never both.
struct VersionWalk {
    plain: IndexWalk,
    versions: IndexWalk,
    plain_head: Option<(String, ObjectEntry)>,
    version_head: Option<(String, ObjectEntry)>,
    plain_done: bool,
}

impl VersionWalk {
    async fn fill(&mut self) -> Result<()> {
        while self.plain_head.is_none() && !self.plain_done {
            match self.plain.next_plain().await? {
                // A plain entry with a version id duplicates its version entry.
                Some((key, entry)) if entry.version_id.is_none() => {
                    self.plain_head = Some((key, entry));
                }
                Some(_) => {}
                None => self.plain_done = true,
            }
        }
        if self.version_head.is_none() {
            if let Some((raw, value)) = self.versions.next().await? {
                let (key, _) = layout::parse_version_key(&raw)
                    .ok_or_else(|| crate::GatewayError::Corrupt(format!("version key {raw:?}")))?;
                self.version_head = Some((key, layout::decode(&value)?));
            }
        }
        Ok(())
    }

    async fn next(&mut self) -> Result<Option<(String, ObjectEntry)>> {
        self.fill().await?;
        let plain_first = match (&self.plain_head, &self.version_head) {
            (Some((p, _)), Some((v, _))) => p < v,
            (Some(_), None) => true,
            (None, _) => false,
        };
        Ok(if plain_first {
            self.plain_head.take()
        } else {
            self.version_head.take()
        })
    }

    /// Skips every key starting with `common_prefix`.
    fn skip_prefix(&mut self, common_prefix: &str) {
        let bound = past_prefix(common_prefix);
        self.plain.skip_through(&bound);
        let mut version_bound = vec![VERSION_NAMESPACE];
        version_bound.extend_from_slice(&bound);
        self.versions.skip_through(&version_bound);
        for head in [&mut self.plain_head, &mut self.version_head] {
            if head
                .as_ref()
                .is_some_and(|(k, _)| k.starts_with(common_prefix))
            {
                *head = None;
            }
        }
    }
}

/// Lists the versions of `bucket` S3 style, after `key_marker` (a key or a common prefix)
/// or, with `after_version` (the marker key's version suffix), after that version of it.
pub(crate) async fn list_versions(
    io: Arc<dyn IoCtx>,
    bucket: &BucketRecord,
    prefix: &str,
    delimiter: &str,
    key_marker: Option<&str>,
    after_version: Option<&str>,
    max_keys: usize,
) -> Result<VersionListing> {
    let common_prefix = |key: &str| -> Option<String> {
        if delimiter.is_empty() {
            return None;
        }
        let rest = key.get(prefix.len()..)?;
        rest.find(delimiter)
            .map(|at| key[..prefix.len() + at + delimiter.len()].to_string())
    };
    let mut listing = VersionListing::default();
    if max_keys == 0 {
        return Ok(listing);
    }
    let marker = key_marker.filter(|m| !m.is_empty());
    let marker_prefix = marker
        .and_then(|m| common_prefix(m).filter(|cp| m.starts_with(prefix) && cp.len() == m.len()));
    let (after_plain, after_versions) = match (marker, &marker_prefix) {
        (None, _) => (None, None),
        (Some(_), Some(cp)) => {
            let bound = past_prefix(cp);
            let mut versions = vec![VERSION_NAMESPACE];
            versions.extend_from_slice(&bound);
            (Some(bound), Some(versions))
        }
        (Some(m), None) => {
            let versions = match after_version {
                Some(suffix) => layout::version_key(m, suffix),
                None => {
                    let mut past = layout::versions_prefix(m);
                    past.push(0xff);
                    past
                }
            };
            (Some(m.as_bytes().to_vec()), Some(versions))
        }
    };
    let mut version_prefix = vec![VERSION_NAMESPACE];
    version_prefix.extend_from_slice(prefix.as_bytes());
    let mut walk = VersionWalk {
        plain: IndexWalk::new(
            io.clone(),
            bucket,
            prefix.as_bytes().to_vec(),
            after_plain.as_deref(),
        ),
        versions: IndexWalk::new(io, bucket, version_prefix, after_versions.as_deref()),
        plain_head: None,
        version_head: None,
        plain_done: false,
    };
    // Continuing inside a key: its remaining versions are not its newest.
    let mut previous_key: Option<String> = after_version.and(marker).map(str::to_string);
    let mut count = 0usize;
    while let Some((key, entry)) = walk.next().await? {
        if count == max_keys {
            listing.truncated = true;
            break;
        }
        count += 1;
        if let Some(cp) = common_prefix(&key) {
            walk.skip_prefix(&cp);
            listing.next_key = Some(cp.clone());
            listing.next_version_id = None;
            listing.prefixes.push(cp);
            continue;
        }
        let version_id = entry
            .version_id
            .clone()
            .unwrap_or_else(|| NULL_VERSION_ID.to_string());
        let is_latest = previous_key.as_deref() != Some(key.as_str());
        previous_key = Some(key.clone());
        listing.next_key = Some(key.clone());
        listing.next_version_id = Some(version_id.clone());
        listing.items.push(VersionItem {
            key,
            version_id,
            entry,
            is_latest,
        });
    }
    Ok(listing)
}
