//! The per-object record ("onode", as BlueStore calls it): size, mtime, xattrs and the extent
//! map from logical offsets to device extents with one crc32c per checksum block.
//!
//! Encoding (little endian), version 1:
//! `u8 version | u64 size | u64 mtime_ns | u32 extents | per extent: u64 logical, u64 device,
//!  u64 length, length / checksum_block × u32 crc | u32 xattrs | per xattr: u16 key length,
//!  key, u32 value length, value`.

use std::collections::BTreeMap;

use crate::allocator::DeviceExtent;
use crate::error::{Result, StoreError};

const VERSION: u8 = 1;

/// Object data at `[logical, logical + length)` lives at `device_offset_bytes` on the device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Extent {
    pub device_offset_bytes: u64,
    pub length_bytes: u64,
    /// One crc32c per checksum block, in order.
    pub crcs: Vec<u32>,
}

impl Extent {
    pub fn device(&self) -> DeviceExtent {
        DeviceExtent {
            offset_bytes: self.device_offset_bytes,
            length_bytes: self.length_bytes,
        }
    }

    /// Splits at `at` bytes from the start (a multiple of the checksum block).
    fn split(mut self, at: u64, checksum_block_bytes: u64) -> (Extent, Extent) {
        debug_assert!(at > 0 && at < self.length_bytes && at.is_multiple_of(checksum_block_bytes));
        let right_crcs = self.crcs.split_off((at / checksum_block_bytes) as usize);
        let right = Extent {
            device_offset_bytes: self.device_offset_bytes + at,
            length_bytes: self.length_bytes - at,
            crcs: right_crcs,
        };
        self.length_bytes = at;
        (self, right)
    }
}

/// The first checksum block of `data` whose crc32c is not the one in `crcs` (a block without
/// one counts as a mismatch): (block index, expected, found).
pub(crate) fn first_bad_block(
    data: &[u8],
    crcs: &[u32],
    checksum_block_bytes: u64,
) -> Option<(usize, u32, u32)> {
    data.chunks(checksum_block_bytes as usize)
        .enumerate()
        .find_map(|(index, block)| {
            let found = crc32c::crc32c(block);
            let expected = crcs.get(index).copied().unwrap_or(!found);
            (found != expected).then_some((index, expected, found))
        })
}

/// An object's metadata.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Onode {
    pub size_bytes: u64,
    pub mtime_ns: u64,
    /// Logical offset -> extent; extents are disjoint and aligned to the allocation unit.
    pub extents: BTreeMap<u64, Extent>,
    pub xattrs: BTreeMap<String, Vec<u8>>,
}

impl Onode {
    /// Device bytes held.
    pub fn allocated_bytes(&self) -> u64 {
        self.extents.values().map(|e| e.length_bytes).sum()
    }

    /// Object bytes backed by extents (below the size).
    pub fn stored_bytes(&self) -> u64 {
        self.extents
            .iter()
            .map(|(&logical, e)| {
                let end = (logical + e.length_bytes).min(self.size_bytes);
                end.saturating_sub(logical)
            })
            .sum()
    }

    /// Removes the mapping of `[start, end)` (both multiples of the allocation unit), splitting
    /// extents that straddle it, and returns the device extents no longer referenced.
    pub fn unmap(&mut self, start: u64, end: u64, checksum_block_bytes: u64) -> Vec<DeviceExtent> {
        let mut freed = Vec::new();
        if start >= end {
            return freed;
        }
        let overlapping: Vec<u64> = self
            .extents
            .range(..end)
            .rev()
            .take_while(|(&logical, e)| logical + e.length_bytes > start)
            .map(|(&logical, _)| logical)
            .collect();
        for logical in overlapping {
            let Some(mut extent) = self.extents.remove(&logical) else {
                continue;
            };
            let mut logical = logical;
            if logical < start {
                let (left, right) = extent.split(start - logical, checksum_block_bytes);
                self.extents.insert(logical, left);
                extent = right;
                logical = start;
            }
            if logical + extent.length_bytes > end {
                let (left, right) = extent.split(end - logical, checksum_block_bytes);
                self.extents.insert(end, right);
                extent = left;
            }
            freed.push(extent.device());
        }
        freed
    }

    /// Extents overlapping `[start, end)`, in logical order.
    pub fn overlapping(&self, start: u64, end: u64) -> Vec<(u64, &Extent)> {
        let mut found: Vec<(u64, &Extent)> = self
            .extents
            .range(..end)
            .rev()
            .take_while(|(&logical, e)| logical + e.length_bytes > start)
            .map(|(&logical, e)| (logical, e))
            .collect();
        found.reverse();
        found
    }

    pub fn encode(&self) -> Vec<u8> {
        // The exact size: a 4 MiB object carries 1,024 crcs, and growing the buffer as it
        // fills copied them several times per write.
        let crc_count: usize = self.extents.values().map(|e| e.crcs.len()).sum();
        let xattr_bytes: usize = self
            .xattrs
            .iter()
            .map(|(key, value)| 6 + key.len() + value.len())
            .sum();
        let mut out =
            Vec::with_capacity(21 + self.extents.len() * 24 + crc_count * 4 + 4 + xattr_bytes);
        out.push(VERSION);
        out.extend_from_slice(&self.size_bytes.to_le_bytes());
        out.extend_from_slice(&self.mtime_ns.to_le_bytes());
        out.extend_from_slice(&(self.extents.len() as u32).to_le_bytes());
        for (logical, extent) in &self.extents {
            out.extend_from_slice(&logical.to_le_bytes());
            out.extend_from_slice(&extent.device_offset_bytes.to_le_bytes());
            out.extend_from_slice(&extent.length_bytes.to_le_bytes());
            out.extend(extent.crcs.iter().flat_map(|crc| crc.to_le_bytes()));
        }
        out.extend_from_slice(&(self.xattrs.len() as u32).to_le_bytes());
        for (key, value) in &self.xattrs {
            out.extend_from_slice(&(key.len() as u16).to_le_bytes());
            out.extend_from_slice(key.as_bytes());
            out.extend_from_slice(&(value.len() as u32).to_le_bytes());
            out.extend_from_slice(value);
        }
        out
    }

    pub fn decode(bytes: &[u8], checksum_block_bytes: u64) -> Result<Onode> {
        let mut reader = Reader { bytes, at: 0 };
        let version = reader.u8()?;
        if version != VERSION {
            return Err(StoreError::Metadata(format!(
                "onode version {version} unknown"
            )));
        }
        let mut onode = Onode {
            size_bytes: reader.u64()?,
            mtime_ns: reader.u64()?,
            ..Onode::default()
        };
        // Extents are encoded in logical order, so the map is built in bulk from a vector
        // (inserting one by one walked the tree for each), and each extent's crcs are taken
        // as one slice: this decode runs on every onode cache hit, and a 4 MiB volume object
        // has 1,024 crcs (read one checked `u32` at a time, it was a quarter of a volume
        // write's CPU).
        let extent_count = reader.u32()? as usize;
        let mut extents = Vec::with_capacity(extent_count.min(bytes.len() / 24));
        for _ in 0..extent_count {
            let logical = reader.u64()?;
            let device_offset_bytes = reader.u64()?;
            let length_bytes = reader.u64()?;
            if length_bytes == 0 || !length_bytes.is_multiple_of(checksum_block_bytes) {
                return Err(StoreError::Metadata(format!(
                    "extent length {length_bytes}"
                )));
            }
            let count = length_bytes / checksum_block_bytes;
            if count > (bytes.len() as u64) / 4 {
                return Err(StoreError::Metadata("extent crcs beyond the record".into()));
            }
            let crcs = reader
                .take(count as usize * 4)?
                .chunks_exact(4)
                .map(|crc| u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]))
                .collect();
            extents.push((
                logical,
                Extent {
                    device_offset_bytes,
                    length_bytes,
                    crcs,
                },
            ));
        }
        // A later duplicate replaces an earlier one, as inserting in order did.
        onode.extents = extents.into_iter().collect();
        for _ in 0..reader.u32()? {
            let key_length = reader.u16()? as usize;
            let key = String::from_utf8(reader.take(key_length)?.to_vec())
                .map_err(|_| StoreError::Metadata("xattr name is not UTF-8".into()))?;
            let value_length = reader.u32()? as usize;
            let value = reader.take(value_length)?.to_vec();
            onode.xattrs.insert(key, value);
        }
        if reader.at != bytes.len() {
            return Err(StoreError::Metadata("trailing bytes after onode".into()));
        }
        Ok(onode)
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, length: usize) -> Result<&'a [u8]> {
        let end = self
            .at
            .checked_add(length)
            .filter(|&end| end <= self.bytes.len())
            .ok_or_else(|| StoreError::Metadata("truncated onode".into()))?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut array = [0u8; N];
        array.copy_from_slice(self.take(N)?);
        Ok(array)
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.array::<1>()?[0])
    }

    fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const BLOCK: u64 = 4096;

    fn extent(device: u64, blocks: u64) -> Extent {
        Extent {
            device_offset_bytes: device,
            length_bytes: blocks * BLOCK,
            crcs: (0..blocks as u32).map(|i| i + device as u32).collect(),
        }
    }

    #[test]
    fn unmap_splits_straddling_extents() {
        let mut onode = Onode {
            size_bytes: 8 * BLOCK,
            ..Onode::default()
        };
        onode.extents.insert(0, extent(100 * BLOCK, 8));
        let freed = onode.unmap(2 * BLOCK, 5 * BLOCK, BLOCK);
        assert_eq!(
            freed,
            vec![DeviceExtent {
                offset_bytes: 102 * BLOCK,
                length_bytes: 3 * BLOCK
            }]
        );
        assert_eq!(onode.extents.len(), 2);
        assert_eq!(onode.extents[&0].length_bytes, 2 * BLOCK);
        assert_eq!(onode.extents[&(5 * BLOCK)].device_offset_bytes, 105 * BLOCK);
        assert_eq!(onode.extents[&(5 * BLOCK)].crcs.len(), 3);
        assert_eq!(onode.allocated_bytes(), 5 * BLOCK);
        assert_eq!(onode.stored_bytes(), 5 * BLOCK);
    }

    proptest! {
        #[test]
        fn encode_decode_round_trip(
            size in any::<u64>(),
            mtime in any::<u64>(),
            extents in proptest::collection::btree_map(0u64..1000, (0u64..1000, 1u64..5), 0..8),
            xattrs in proptest::collection::btree_map("[a-z_.]{0,12}", proptest::collection::vec(any::<u8>(), 0..40), 0..5),
        ) {
            let onode = Onode {
                size_bytes: size,
                mtime_ns: mtime,
                extents: extents.into_iter().map(|(l, (d, n))| (l * BLOCK, extent(d * BLOCK, n))).collect(),
                xattrs,
            };
            let bytes = onode.encode();
            prop_assert_eq!(bytes.capacity(), bytes.len(), "encoded into an exactly sized buffer");
            prop_assert_eq!(Onode::decode(&bytes, BLOCK).expect("decodes"), onode);
            for cut in 0..bytes.len() {
                prop_assert!(Onode::decode(&bytes[..cut], BLOCK).is_err());
            }
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = Onode::decode(&bytes, BLOCK);
        }
    }
}
