//! The cache device's on-disk format.
//!
//! ```text
//! [superblock 4 KiB][metadata blocks, 4 KiB each, 255 line entries][line 0][line 1]...
//! ```
//! Superblock: magic, version, clean-shutdown flag, mode, line size, line count, core size,
//! the cores' labels (count, then length-prefixed UTF-8; zero in caches made before labels),
//! crc32c. Metadata block: 255 entries of 16 bytes (core line, flags valid/dirty, class),
//! then block index, magic and crc32c. Both are checksummed before they are written and
//! verified after they are read.

use crate::config::CacheMode;
use crate::error::CacheError;

/// Bytes of the superblock and of each metadata block.
pub const BLOCK_BYTES: u64 = 4096;
/// Line entries per metadata block.
pub const ENTRIES_PER_BLOCK: u64 = 255;
const ENTRY_BYTES: usize = 16;
const SUPER_MAGIC: u64 = 0x5354_5241_5441_4343; // "STRATACC"
const BLOCK_MAGIC: u32 = 0x4d45_5441; // "META"
const VERSION: u32 = 1;
/// Entry flag: the line holds data for its core line.
pub const FLAG_VALID: u8 = 1;
/// Entry flag: the line is newer than the core.
pub const FLAG_DIRTY: u8 = 2;

/// Where things are on the cache device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Line size in bytes.
    pub line_size_bytes: u64,
    /// Number of cache lines.
    pub lines: u64,
    /// Number of metadata blocks.
    pub metadata_blocks: u64,
    /// Offset of line 0.
    pub data_offset_bytes: u64,
}

impl Layout {
    /// The most lines a cache device of `size_bytes` holds with `line_size_bytes` lines.
    pub fn plan(size_bytes: u64, line_size_bytes: u64) -> Result<Layout, CacheError> {
        let per_line = line_size_bytes as f64 + BLOCK_BYTES as f64 / ENTRIES_PER_BLOCK as f64;
        let mut lines = (size_bytes.saturating_sub(2 * BLOCK_BYTES) as f64 / per_line) as u64;
        loop {
            let layout = Self::with_lines(lines, line_size_bytes);
            if layout.end_bytes() <= size_bytes || lines == 0 {
                break;
            }
            lines -= 1;
        }
        if lines < 16 {
            return Err(CacheError::InvalidConfig(format!(
                "cache device of {size_bytes} bytes holds fewer than 16 lines"
            )));
        }
        Ok(Self::with_lines(lines, line_size_bytes))
    }

    fn with_lines(lines: u64, line_size_bytes: u64) -> Layout {
        let metadata_blocks = lines.div_ceil(ENTRIES_PER_BLOCK);
        Layout {
            line_size_bytes,
            lines,
            metadata_blocks,
            data_offset_bytes: BLOCK_BYTES * (1 + metadata_blocks),
        }
    }

    /// First byte after the last line.
    pub fn end_bytes(&self) -> u64 {
        self.data_offset_bytes + self.lines * self.line_size_bytes
    }

    /// Offset of line `line` on the cache device.
    pub fn line_offset(&self, line: u32) -> u64 {
        self.data_offset_bytes + u64::from(line) * self.line_size_bytes
    }

    /// Offset of metadata block `block`.
    pub fn metadata_offset(&self, block: u64) -> u64 {
        BLOCK_BYTES * (1 + block)
    }
}

/// Where the core labels start in the superblock, and the most bytes they may take.
const LABELS_AT: usize = 40;
/// Bytes the labels may take (count and every length included): the rest of the block
/// before the checksum.
pub const CORE_LABELS_BYTES_MAX: usize = 4092 - LABELS_AT;

/// What the superblock records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Superblock {
    /// The cache was stopped cleanly (every metadata block written after the last change).
    pub clean_shutdown: bool,
    /// Mode at the time of writing.
    pub mode: CacheMode,
    /// The layout.
    pub layout: Layout,
    /// Size of the core device.
    pub core_size_bytes: u64,
    /// What the cores were, in order (e.g. their paths): with several cores laid end to end,
    /// loading them in another order would hand one core's cached lines to another, so a
    /// load compares them. Empty when the caller gave none.
    pub core_labels: Vec<String>,
}

/// Whether `labels` fit in a superblock.
pub fn core_labels_fit(labels: &[String]) -> bool {
    2 + labels.iter().map(|l| 2 + l.len()).sum::<usize>() <= CORE_LABELS_BYTES_MAX
        && labels.iter().all(|l| l.len() <= usize::from(u16::MAX))
}

impl Superblock {
    /// Encodes into one block, checksummed.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![0u8; BLOCK_BYTES as usize];
        out[0..8].copy_from_slice(&SUPER_MAGIC.to_le_bytes());
        out[8..12].copy_from_slice(&VERSION.to_le_bytes());
        out[12] = u8::from(self.clean_shutdown);
        out[13] = self.mode.code();
        out[16..24].copy_from_slice(&self.layout.line_size_bytes.to_le_bytes());
        out[24..32].copy_from_slice(&self.layout.lines.to_le_bytes());
        out[32..40].copy_from_slice(&self.core_size_bytes.to_le_bytes());
        // Callers check `core_labels_fit` before a cache is made; labels that would not fit
        // are not recorded rather than cut (a cut label could match a wrong core).
        if core_labels_fit(&self.core_labels) {
            let mut at = LABELS_AT;
            out[at..at + 2].copy_from_slice(&(self.core_labels.len() as u16).to_le_bytes());
            at += 2;
            for label in &self.core_labels {
                out[at..at + 2].copy_from_slice(&(label.len() as u16).to_le_bytes());
                at += 2;
                out[at..at + label.len()].copy_from_slice(label.as_bytes());
                at += label.len();
            }
        }
        seal(&mut out);
        out
    }

    /// `Ok(None)` when the block holds no superblock at all (never formatted).
    pub fn decode(block: &[u8]) -> Result<Option<Superblock>, CacheError> {
        if block.len() < BLOCK_BYTES as usize || read_u64(block, 0) != SUPER_MAGIC {
            return Ok(None);
        }
        if !verify(block) {
            return Err(CacheError::Corrupt("superblock checksum".into()));
        }
        if read_u32(block, 8) != VERSION {
            return Err(CacheError::Corrupt(format!(
                "version {}",
                read_u32(block, 8)
            )));
        }
        let mode = CacheMode::from_code(block[13])
            .ok_or_else(|| CacheError::Corrupt(format!("mode code {}", block[13])))?;
        let layout = Layout::with_lines(read_u64(block, 24), read_u64(block, 16));
        Ok(Some(Superblock {
            clean_shutdown: block[12] == 1,
            mode,
            layout,
            core_size_bytes: read_u64(block, 32),
            core_labels: decode_labels(block)?,
        }))
    }
}

/// The core labels of a (checksum-verified) superblock.
fn decode_labels(block: &[u8]) -> Result<Vec<String>, CacheError> {
    let bad = || CacheError::Corrupt("superblock core labels overrun the block".into());
    let read_u16 = |at: usize| -> Result<usize, CacheError> {
        let bytes = block.get(at..at + 2).ok_or_else(bad)?;
        Ok(usize::from(u16::from_le_bytes([bytes[0], bytes[1]])))
    };
    let count = read_u16(LABELS_AT)?;
    let mut at = LABELS_AT + 2;
    let mut labels = Vec::with_capacity(count);
    for _ in 0..count {
        let length = read_u16(at)?;
        at += 2;
        if at + length > LABELS_AT + CORE_LABELS_BYTES_MAX {
            return Err(bad());
        }
        let label = std::str::from_utf8(&block[at..at + length])
            .map_err(|_| CacheError::Corrupt("superblock core label is not UTF-8".into()))?;
        labels.push(label.to_string());
        at += length;
    }
    Ok(labels)
}

/// One line's entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Core line number.
    pub core_line: u64,
    /// `FLAG_VALID | FLAG_DIRTY`.
    pub flags: u8,
    /// I/O class index.
    pub class: u8,
}

/// Encodes metadata block `block` from its entries (at most 255).
pub fn encode_metadata(block: u64, entries: &[Entry]) -> Vec<u8> {
    assert!(entries.len() as u64 <= ENTRIES_PER_BLOCK);
    let mut out = vec![0u8; BLOCK_BYTES as usize];
    for (index, entry) in entries.iter().enumerate() {
        let at = index * ENTRY_BYTES;
        out[at..at + 8].copy_from_slice(&entry.core_line.to_le_bytes());
        out[at + 8] = entry.flags;
        out[at + 9] = entry.class;
    }
    out[4080..4084].copy_from_slice(&(block as u32).to_le_bytes());
    out[4084..4088].copy_from_slice(&BLOCK_MAGIC.to_le_bytes());
    seal(&mut out);
    out
}

/// Decodes metadata block `block`: `Ok(None)` for a block never written (all zeros).
pub fn decode_metadata(block: u64, bytes: &[u8]) -> Result<Option<Vec<Entry>>, CacheError> {
    if bytes.iter().all(|&b| b == 0) {
        return Ok(None);
    }
    if !verify(bytes)
        || read_u32(bytes, 4084) != BLOCK_MAGIC
        || u64::from(read_u32(bytes, 4080)) != block
    {
        return Err(CacheError::Corrupt(format!("metadata block {block}")));
    }
    Ok(Some(
        (0..ENTRIES_PER_BLOCK as usize)
            .map(|index| {
                let at = index * ENTRY_BYTES;
                Entry {
                    core_line: read_u64(bytes, at),
                    flags: bytes[at + 8],
                    class: bytes[at + 9],
                }
            })
            .collect(),
    ))
}

fn seal(block: &mut [u8]) {
    let crc = crc32c::crc32c(&block[..4092]);
    block[4092..4096].copy_from_slice(&crc.to_le_bytes());
    debug_assert!(verify(block));
}

fn verify(block: &[u8]) -> bool {
    crc32c::crc32c(&block[..4092]) == read_u32(block, 4092)
}

fn read_u64(bytes: &[u8], at: usize) -> u64 {
    let mut out = [0u8; 8];
    out.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(out)
}

fn read_u32(bytes: &[u8], at: usize) -> u32 {
    let mut out = [0u8; 4];
    out.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_fits_the_device() {
        for (size, line) in [(1u64 << 30, 4096u64), (64 << 20, 65536), (1 << 20, 4096)] {
            let layout = Layout::plan(size, line).unwrap();
            assert!(layout.end_bytes() <= size);
            assert!(layout.end_bytes() + line + BLOCK_BYTES > size, "{layout:?}");
        }
        assert!(Layout::plan(64 << 10, 4096).is_err());
    }

    #[test]
    fn superblock_and_metadata_round_trip_and_detect_corruption() {
        let superblock = Superblock {
            clean_shutdown: true,
            mode: CacheMode::Wb,
            layout: Layout::plan(1 << 30, 8192).unwrap(),
            core_size_bytes: 1 << 40,
            core_labels: vec!["/dev/sdb".into(), "/srv/core 2.img".into()],
        };
        let mut bytes = superblock.encode();
        assert_eq!(
            Superblock::decode(&bytes).unwrap(),
            Some(superblock.clone())
        );
        let unlabelled = Superblock {
            core_labels: Vec::new(),
            ..superblock.clone()
        };
        assert_eq!(
            Superblock::decode(&unlabelled.encode()).unwrap(),
            Some(unlabelled)
        );
        let huge = vec!["x".repeat(3000), "y".repeat(3000)];
        assert!(!core_labels_fit(&huge));
        assert!(core_labels_fit(&superblock.core_labels));
        bytes[20] ^= 1;
        assert!(Superblock::decode(&bytes).is_err());
        assert_eq!(Superblock::decode(&[0u8; 4096]).unwrap(), None);

        let entries: Vec<Entry> = (0..255)
            .map(|i| Entry {
                core_line: i * 3,
                flags: FLAG_VALID | ((i % 2) as u8 * FLAG_DIRTY),
                class: 1,
            })
            .collect();
        let mut bytes = encode_metadata(7, &entries);
        assert_eq!(decode_metadata(7, &bytes).unwrap().unwrap(), entries);
        assert!(
            decode_metadata(8, &bytes).is_err(),
            "a block at the wrong place"
        );
        bytes[100] ^= 4;
        assert!(decode_metadata(7, &bytes).is_err());
        assert_eq!(decode_metadata(0, &[0u8; 4096]).unwrap(), None);
    }
}
