//! What one shard object holds besides its chunks: the object's version, logical size, user
//! xattrs, and the undo record of the write that made it (see the module docs of `ec`).

use std::collections::BTreeMap;

use crate::osd::{decode_version, VERSION_XATTR};

/// The object's logical size, on every shard.
pub const SIZE_XATTR: &str = "_strata.ec.size";

/// The undo record of the last write, on every shard it changed.
pub const UNDO_XATTR: &str = "_strata.ec.undo";

const UNDO_MAGIC: &[u8; 4] = b"ecu1";

/// How to put a shard back as it was before the write that last changed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Undo {
    /// The object's version before.
    pub prev_version: u64,
    /// The object's logical size before.
    pub prev_size_bytes: u64,
    /// The shard's length before.
    pub prev_shard_bytes: u64,
    /// Where `bytes` go back in the shard.
    pub offset_bytes: u64,
    /// The shard's bytes that the write changed, as they were.
    pub bytes: Vec<u8>,
    /// The user xattrs before.
    pub xattrs: BTreeMap<String, Vec<u8>>,
}

impl Undo {
    /// The record as stored.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(48 + self.bytes.len());
        out.extend_from_slice(UNDO_MAGIC);
        for word in [
            self.prev_version,
            self.prev_size_bytes,
            self.prev_shard_bytes,
            self.offset_bytes,
            self.bytes.len() as u64,
        ] {
            out.extend_from_slice(&word.to_le_bytes());
        }
        out.extend_from_slice(&self.bytes);
        out.extend_from_slice(&(self.xattrs.len() as u64).to_le_bytes());
        for (key, value) in &self.xattrs {
            out.extend_from_slice(&(key.len() as u64).to_le_bytes());
            out.extend_from_slice(key.as_bytes());
            out.extend_from_slice(&(value.len() as u64).to_le_bytes());
            out.extend_from_slice(value);
        }
        out
    }

    /// A stored record; `None` if it is not one.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let mut rest = bytes.strip_prefix(UNDO_MAGIC)?;
        let mut word = || -> Option<u64> {
            let (head, tail) = rest.split_first_chunk::<8>()?;
            rest = tail;
            Some(u64::from_le_bytes(*head))
        };
        let prev_version = word()?;
        let prev_size_bytes = word()?;
        let prev_shard_bytes = word()?;
        let offset_bytes = word()?;
        let length = usize::try_from(word()?).ok()?;
        let take = |count: usize, rest: &mut &[u8]| -> Option<Vec<u8>> {
            let (head, tail) = rest.split_at_checked(count)?;
            *rest = tail;
            Some(head.to_vec())
        };
        let data = take(length, &mut rest)?;
        let read_word = |rest: &mut &[u8]| -> Option<u64> {
            let (head, tail) = rest.split_first_chunk::<8>()?;
            *rest = tail;
            Some(u64::from_le_bytes(*head))
        };
        let count = read_word(&mut rest)?;
        let mut xattrs = BTreeMap::new();
        for _ in 0..count {
            let key_length = usize::try_from(read_word(&mut rest)?).ok()?;
            let key = String::from_utf8(take(key_length, &mut rest)?).ok()?;
            let value_length = usize::try_from(read_word(&mut rest)?).ok()?;
            let value = take(value_length, &mut rest)?;
            xattrs.insert(key, value);
        }
        rest.is_empty().then_some(Self {
            prev_version,
            prev_size_bytes,
            prev_shard_bytes,
            offset_bytes,
            bytes: data,
            xattrs,
        })
    }
}

/// One shard's record of the object, from its xattrs and stat.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardMeta {
    /// The object version this shard holds.
    pub version: u64,
    /// The object's logical size at that version.
    pub size_bytes: u64,
    /// The shard's own length.
    pub shard_bytes: u64,
    /// Modification time of the shard.
    pub mtime_ns: u64,
    /// The user xattrs.
    pub xattrs: BTreeMap<String, Vec<u8>>,
    /// How to go back to the previous version, if this shard can.
    pub undo: Option<Undo>,
}

impl ShardMeta {
    /// The record of a shard from its xattrs (all of them, reserved ones included).
    pub fn from_xattrs(
        all: BTreeMap<String, Vec<u8>>,
        shard_bytes: u64,
        mtime_ns: u64,
    ) -> ShardMeta {
        let mut meta = ShardMeta {
            version: 0,
            size_bytes: 0,
            shard_bytes,
            mtime_ns,
            xattrs: BTreeMap::new(),
            undo: None,
        };
        for (key, value) in all {
            match key.as_str() {
                VERSION_XATTR => meta.version = decode_version(&value),
                SIZE_XATTR => meta.size_bytes = decode_version(&value),
                UNDO_XATTR => meta.undo = Undo::decode(&value),
                _ if key.starts_with(rados::RESERVED_XATTR_PREFIX) => {}
                _ => {
                    meta.xattrs.insert(key, value);
                }
            }
        }
        meta
    }

    /// Whether this shard can go back to `version` with its undo record.
    pub fn rolls_back_to(&self, version: u64) -> bool {
        self.version > version
            && self
                .undo
                .as_ref()
                .is_some_and(|undo| undo.prev_version == version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn undo_round_trips() {
        let undo = Undo {
            prev_version: 7,
            prev_size_bytes: 12345,
            prev_shard_bytes: 8192,
            offset_bytes: 4096,
            bytes: vec![1, 2, 3],
            xattrs: [("a".to_string(), vec![9]), ("bb".to_string(), vec![])]
                .into_iter()
                .collect(),
        };
        let encoded = undo.encode();
        assert_eq!(Undo::decode(&encoded), Some(undo));
        assert_eq!(Undo::decode(&encoded[..encoded.len() - 1]), None);
        assert_eq!(Undo::decode(b"nope"), None);
    }
}
