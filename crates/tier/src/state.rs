//! What the cache pool knows of one cached object: its tier state, kept in the cache object's
//! own xattr [`STATE_XATTR`] and written in the same atomic operation as the data it describes,
//! so a crash never separates them.

use crate::error::{Result, TierError};

/// The cache object's xattr holding its [`ObjectState`].
pub const STATE_XATTR: &str = "strata.tier.state";
/// The base object's xattr holding the flush generation (8 bytes, big-endian): each flush
/// checks it and advances it in one operation, so an older copy never overwrites a newer one.
pub const GENERATION_XATTR: &str = "strata.tier.gen";
/// The base object's xattr holding the logical version the cache reached before its last
/// flush (8 bytes, big-endian), so versions seen through the overlay keep growing after an
/// eviction.
pub const VERSION_XATTR: &str = "strata.tier.version";
/// Prefix of every xattr the tier keeps for itself; clients of the overlay can neither see
/// nor set them.
pub const RESERVED_PREFIX: &str = "strata.tier";
/// Prefix of the tier's own objects in a cache pool (its configuration), never listed as data.
pub const OBJECT_PREFIX: &str = "strata.tier.";

const FORMAT: u8 = 1;

/// A set of block numbers as a bitmap.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlockSet {
    words: Vec<u64>,
}

impl BlockSet {
    /// Whether block `index` is in the set.
    pub fn contains(&self, index: u64) -> bool {
        let word = (index / 64) as usize;
        self.words
            .get(word)
            .is_some_and(|w| w & (1 << (index % 64)) != 0)
    }

    /// Adds block `index`.
    pub fn insert(&mut self, index: u64) {
        let word = (index / 64) as usize;
        if self.words.len() <= word {
            self.words.resize(word + 1, 0);
        }
        self.words[word] |= 1 << (index % 64);
    }

    /// Adds blocks `first..end`.
    pub fn insert_range(&mut self, first: u64, end: u64) {
        for index in first..end {
            self.insert(index);
        }
    }

    /// Drops every block at or above `end`.
    pub fn truncate(&mut self, end: u64) {
        let words = end.div_ceil(64) as usize;
        self.words.truncate(words);
        if !end.is_multiple_of(64) {
            if let Some(last) = self.words.last_mut() {
                *last &= (1u64 << (end % 64)) - 1;
            }
        }
        while self.words.last() == Some(&0) {
            self.words.pop();
        }
    }

    /// Empties the set.
    pub fn clear(&mut self) {
        self.words.clear();
    }

    /// Whether no block is in the set.
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|w| *w == 0)
    }

    /// Blocks in the set.
    pub fn count(&self) -> u64 {
        self.words.iter().map(|w| u64::from(w.count_ones())).sum()
    }

    /// The blocks in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.words.iter().enumerate().flat_map(|(i, w)| {
            (0..64)
                .filter(move |bit| w & (1 << bit) != 0)
                .map(move |bit| i as u64 * 64 + bit)
        })
    }
}

/// The tier's record of one object in the cache pool.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObjectState {
    /// Whether the object exists for clients; `false` is a whiteout: deleted in the cache and
    /// not yet in the base pool.
    pub exists: bool,
    /// Logical size.
    pub size_bytes: u64,
    /// Logical mtime (ns since the Unix epoch).
    pub mtime_ns: u64,
    /// Logical version: grows with every change seen through the overlay.
    pub version: u64,
    /// Bytes of each block of [`ObjectState::present`] and [`ObjectState::dirty`].
    pub block_bytes: u64,
    /// Blocks whose bytes in the cache object are the object's.
    pub present: BlockSet,
    /// Blocks the base pool lacks (a subset of `present`).
    pub dirty: BlockSet,
    /// Xattrs or omap differ from the base pool's (they are always wholly cached).
    pub meta_dirty: bool,
    /// Size or existence differs from the base pool's.
    pub shape_dirty: bool,
    /// Whether the base pool holds the object, as of the promotion or last flush.
    pub base_exists: bool,
    /// The base object's flush generation, as of the promotion or last flush.
    pub base_generation: u64,
    /// Below this offset a block that is not present reads from the base pool; at and above it
    /// the object reads zeros (it was truncated in the cache since the promotion).
    pub base_valid_bytes: u64,
    /// When the object was last written through the cache (the agent's flush age), ms of the
    /// tier's clock; 0 when never.
    pub last_write_ms: u64,
}

impl ObjectState {
    /// Whether the base pool is behind this copy.
    pub fn is_dirty(&self) -> bool {
        !self.dirty.is_empty() || self.meta_dirty || self.shape_dirty
    }

    /// The block holding byte `offset`.
    pub fn block_of(&self, offset: u64) -> u64 {
        offset / self.block_bytes
    }

    /// The blocks the object's size spans.
    pub fn block_count(&self) -> u64 {
        self.size_bytes.div_ceil(self.block_bytes)
    }

    /// Encodes for [`STATE_XATTR`].
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(96);
        out.push(FORMAT);
        let flags = u8::from(self.exists)
            | u8::from(self.meta_dirty) << 1
            | u8::from(self.shape_dirty) << 2
            | u8::from(self.base_exists) << 3;
        out.push(flags);
        for value in [
            self.size_bytes,
            self.mtime_ns,
            self.version,
            self.block_bytes,
            self.base_generation,
            self.base_valid_bytes,
            self.last_write_ms,
        ] {
            out.extend_from_slice(&value.to_le_bytes());
        }
        for set in [&self.present, &self.dirty] {
            out.extend_from_slice(&(set.words.len() as u32).to_le_bytes());
            for word in &set.words {
                out.extend_from_slice(&word.to_le_bytes());
            }
        }
        out
    }

    /// Decodes [`ObjectState::encode`]'s bytes; `object` names the object in the error.
    pub fn decode(object: &str, bytes: &[u8]) -> Result<Self> {
        let bad = |why: &str| TierError::Corrupt {
            object: object.to_string(),
            reason: why.to_string(),
        };
        let mut cursor = bytes;
        let mut take = |n: usize| -> Result<&[u8]> {
            if cursor.len() < n {
                return Err(bad("state record is short"));
            }
            let (head, rest) = cursor.split_at(n);
            cursor = rest;
            Ok(head)
        };
        let format = take(1)?[0];
        if format != FORMAT {
            return Err(bad(&format!("state format {format}, expected {FORMAT}")));
        }
        let flags = take(1)?[0];
        let mut values = [0u64; 7];
        for value in &mut values {
            *value = u64::from_le_bytes(take(8)?.try_into().expect("8 bytes"));
        }
        let mut sets = [BlockSet::default(), BlockSet::default()];
        for set in &mut sets {
            let words = u32::from_le_bytes(take(4)?.try_into().expect("4 bytes")) as usize;
            if words > 1 << 24 {
                return Err(bad("block map too large"));
            }
            for _ in 0..words {
                set.words
                    .push(u64::from_le_bytes(take(8)?.try_into().expect("8 bytes")));
            }
        }
        if values[3] == 0 {
            return Err(bad("block size 0"));
        }
        let [present, dirty] = sets;
        Ok(ObjectState {
            exists: flags & 1 != 0,
            meta_dirty: flags & 2 != 0,
            shape_dirty: flags & 4 != 0,
            base_exists: flags & 8 != 0,
            size_bytes: values[0],
            mtime_ns: values[1],
            version: values[2],
            block_bytes: values[3],
            base_generation: values[4],
            base_valid_bytes: values[5],
            last_write_ms: values[6],
            present,
            dirty,
        })
    }
}

/// Encodes a generation or version xattr.
pub fn encode_u64(value: u64) -> Vec<u8> {
    value.to_be_bytes().to_vec()
}

/// Decodes [`encode_u64`]'s bytes (missing or malformed reads as 0).
pub fn decode_u64(bytes: &[u8]) -> u64 {
    bytes.try_into().map(u64::from_be_bytes).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trips() {
        let mut state = ObjectState {
            exists: true,
            size_bytes: 5 << 20,
            mtime_ns: 7,
            version: 9,
            block_bytes: 65536,
            base_exists: true,
            base_generation: 3,
            base_valid_bytes: 4 << 20,
            last_write_ms: 11,
            shape_dirty: true,
            ..Default::default()
        };
        state.present.insert_range(0, 70);
        state.dirty.insert(65);
        let bytes = state.encode();
        assert_eq!(ObjectState::decode("o", &bytes).unwrap(), state);
        assert!(ObjectState::decode("o", &bytes[..bytes.len() - 1]).is_err());
        assert!(ObjectState::decode("o", &[]).is_err());
        assert!(ObjectState::decode("o", &[9]).is_err());
    }

    #[test]
    fn block_sets_truncate_and_iterate() {
        let mut set = BlockSet::default();
        set.insert_range(3, 130);
        assert_eq!(set.count(), 127);
        set.truncate(65);
        assert_eq!(set.count(), 62);
        assert!(set.contains(64) && !set.contains(65) && !set.contains(2));
        assert_eq!(set.iter().next(), Some(3));
        assert_eq!(set.iter().last(), Some(64));
        set.truncate(3);
        assert!(set.is_empty());
    }
}
