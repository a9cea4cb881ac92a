//! Listing a sharded bucket index in key order: a k-way merge of the shards' omaps, with
//! S3's prefix / delimiter / marker / max-keys rules.

use std::collections::VecDeque;
use std::sync::Arc;

use rados::{IoCtx, RadosError};

use crate::error::Result;
use crate::layout::{self, BucketRecord, ObjectEntry};

/// Entries fetched from one shard per round trip.
const PAGE_ENTRIES: usize = 1000;

struct ShardCursor {
    oid: String,
    buffer: VecDeque<(Vec<u8>, Vec<u8>)>,
    after: Option<Vec<u8>>,
    exhausted: bool,
}

/// Walks the merged index of one bucket from a start point, in key order.
pub(crate) struct IndexWalk {
    io: Arc<dyn IoCtx>,
    prefix: Vec<u8>,
    shards: Vec<ShardCursor>,
}

impl IndexWalk {
    /// Keys starting with `prefix` and greater than `after`.
    pub fn new(
        io: Arc<dyn IoCtx>,
        bucket: &BucketRecord,
        prefix: &str,
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
        Self {
            io,
            prefix: prefix.as_bytes().to_vec(),
            shards,
        }
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

    /// The next key and its entry, or `None` at the end.
    pub async fn next(&mut self) -> Result<Option<(String, ObjectEntry)>> {
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
        let Some((key, value)) = self.shards[i].buffer.pop_front() else {
            return Ok(None);
        };
        let key =
            String::from_utf8(key).map_err(|e| crate::GatewayError::Corrupt(e.to_string()))?;
        Ok(Some((key, layout::decode(&value)?)))
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
    let mut walk = IndexWalk::new(io, bucket, prefix, after.as_deref());
    let mut count = 0usize;
    while let Some((key, entry)) = walk.next().await? {
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
