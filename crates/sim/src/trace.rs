//! Trace readers. Every supported format becomes a [`Trace`]: requests with dense object ids
//! (remapped at load time so policies can use flat arrays), sizes, times and read/write flags.
//!
//! Formats (`--format`, or guessed from the file name):
//! - `cloudphysics-csv`: `version,time,op,size,lbn`; time in seconds; op `2a` write, `28` read.
//! - `vscsi`: VMware vscsi binary, version 1 (32-byte) or 2 (40-byte) records; time in us.
//! - `arc`: ARC `.lis` text `start nblocks 0 reqno` of 512-byte pages; no timestamps.
//! - `msr`: MSR Cambridge `filetime,host,disk,type,offset,size,resp` (filetime in 100 ns).
//! - `systor`: SNIA SYSTOR'17 `Timestamp,Response,IOType,LUN,Offset,Size` (time in s).
//! - `tencent-block`: Tencent CBS `ts,offset,size,ioType,volumeId` (offset and size in
//!   512-byte sectors, ioType 1 = write, time in s).
//! - `tencent-photo`: Tencent photo cache lines `time id type size ...`; object = id + type.
//! - `object`: whitespace `ts id size` object requests (adapt_size traces).
//! - `strata`: our own text format, documented in [`write_strata`]:
//!   a header line `# strata-trace v1` then `time_ms,key,size_bytes,op` with op `r` or `w`.
//!
//! Any file may be compressed: `.zst`, `.gz`, `.bz2` and `.xz` are decompressed by extension.
//! Without timestamps, request `i` happens at `i` ms (1,000 requests per second).

use anyhow::{bail, Context, Result};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;

/// Trace file formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// CloudPhysics csv (`version,time,op,size,lbn`).
    CloudPhysicsCsv,
    /// VMware vscsi binary.
    Vscsi,
    /// ARC `.lis` text.
    Arc,
    /// MSR Cambridge csv.
    Msr,
    /// SNIA SYSTOR'17 csv.
    Systor,
    /// Tencent cloud block storage csv.
    TencentBlock,
    /// Tencent photo cache text.
    TencentPhoto,
    /// `ts id size` object requests.
    Object,
    /// Our own format.
    Strata,
}

impl Format {
    /// Every format with its command-line name.
    pub const ALL: [(&'static str, Format); 9] = [
        ("cloudphysics-csv", Format::CloudPhysicsCsv),
        ("vscsi", Format::Vscsi),
        ("arc", Format::Arc),
        ("msr", Format::Msr),
        ("systor", Format::Systor),
        ("tencent-block", Format::TencentBlock),
        ("tencent-photo", Format::TencentPhoto),
        ("object", Format::Object),
        ("strata", Format::Strata),
    ];

    /// Parses a command-line name.
    pub fn parse(name: &str) -> Result<Format> {
        Format::ALL
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|&(_, f)| f)
            .with_context(|| format!("unknown trace format `{name}`"))
    }

    /// Guesses the format from a file name.
    pub fn guess(path: &Path) -> Option<Format> {
        let name = path.file_name()?.to_string_lossy().to_ascii_lowercase();
        let stem = ["zst", "gz", "bz2", "xz"]
            .iter()
            .find_map(|ext| name.strip_suffix(&format!(".{ext}")))
            .unwrap_or(&name)
            .to_string();
        Some(if stem.ends_with(".vscsi") {
            Format::Vscsi
        } else if stem.ends_with(".lis") {
            Format::Arc
        } else if stem.ends_with(".strace") || stem.ends_with(".strata") {
            Format::Strata
        } else if stem.contains("cloudphysics") {
            Format::CloudPhysicsCsv
        } else if stem.contains("msr") || stem.contains("cambridge") {
            Format::Msr
        } else if stem.contains("systor") {
            Format::Systor
        } else if stem.contains("cloud_storage") || stem.contains("tencent-block") {
            Format::TencentBlock
        } else if stem.contains("photo") {
            Format::TencentPhoto
        } else if stem.contains("trace") || stem.ends_with(".txt") {
            Format::Object
        } else {
            return None;
        })
    }

    /// How records become objects unless the user says otherwise.
    pub fn default_mapping(self) -> Mapping {
        match self {
            Format::CloudPhysicsCsv | Format::Vscsi => Mapping::Record,
            Format::Arc => Mapping::Block { block_bytes: 512 },
            Format::Msr | Format::Systor | Format::TencentBlock => {
                Mapping::Block { block_bytes: 4096 }
            }
            Format::TencentPhoto | Format::Object | Format::Strata => Mapping::Record,
        }
    }
}

/// How block records become object requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mapping {
    /// One request per record, the object being the record's first block (libCacheSim's
    /// counting for cloudPhysics); the request size is the record's length.
    Record,
    /// One request per block spanned (1 block = 1 object); ARC's page expansion.
    Block {
        /// Block size in bytes.
        block_bytes: u64,
    },
    /// One request per RBD-like object spanned, sized by the bytes it covers.
    Object {
        /// Object size in bytes (RBD's default is 4 MiB).
        object_bytes: u64,
    },
}

impl Mapping {
    /// Parses `record`, `block[:BYTES]` or `object[:BYTES]` (BYTES accepts K/M/G suffixes).
    pub fn parse(text: &str) -> Result<Mapping> {
        let (kind, size) = match text.split_once(':') {
            Some((kind, size)) => (kind, Some(crate::parse_bytes(size)?)),
            None => (text, None),
        };
        Ok(match kind {
            "record" => Mapping::Record,
            "block" => Mapping::Block {
                block_bytes: size.unwrap_or(4096).max(1),
            },
            "object" | "rbd" => Mapping::Object {
                object_bytes: size.unwrap_or(4 << 20).max(1),
            },
            _ => {
                bail!("unknown mapping `{text}`: expected record, block[:BYTES] or object[:BYTES]")
            }
        })
    }
}

/// Where a raw record points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Address {
    /// A byte range of a volume.
    Block {
        volume: u32,
        offset_bytes: u64,
        length_bytes: u64,
        unit_bytes: u64,
    },
    /// A whole object.
    Object { id: u64, size_bytes: u64 },
}

#[derive(Clone, Copy, Debug)]
struct RawRecord {
    time_ms: Option<u64>,
    address: Address,
    write: bool,
}

/// One request of a loaded trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceRequest {
    /// Dense object id.
    pub key: u32,
    /// Bytes requested.
    pub size_bytes: u32,
    /// Time in milliseconds from the trace start.
    pub time_ms: u64,
    /// Whether it writes.
    pub write: bool,
}

/// A loaded trace.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    /// Short name (file stem).
    pub name: String,
    /// Requests in order.
    pub requests: Vec<TraceRequest>,
    /// Distinct objects (keys are `0..unique`).
    pub unique: usize,
    /// Whether times come from the trace (otherwise 1 request per ms).
    pub timed: bool,
    /// Size of each object in bytes (the largest request seen for it).
    pub object_bytes: Vec<u32>,
}

impl Trace {
    /// `next[i]` = index of the next request for the same key, `u64::MAX` if none.
    pub fn next_seq(&self) -> Vec<u64> {
        let mut next = vec![u64::MAX; self.requests.len()];
        let mut seen = vec![u64::MAX; self.unique];
        for (i, request) in self.requests.iter().enumerate().rev() {
            next[i] = seen[request.key as usize];
            seen[request.key as usize] = i as u64;
        }
        next
    }

    /// Total bytes of distinct objects.
    pub fn unique_bytes(&self) -> u64 {
        self.object_bytes.iter().map(|&b| b as u64).sum()
    }

    /// Builds a trace from `(raw key, size, time_ms, write)` tuples, remapping keys densely.
    pub fn from_parts(
        name: &str,
        parts: impl IntoIterator<Item = (u64, u32, u64, bool)>,
        timed: bool,
    ) -> Trace {
        let mut ids: HashMap<u64, u32> = HashMap::new();
        let mut trace = Trace {
            name: name.to_string(),
            timed,
            ..Trace::default()
        };
        for (raw, size_bytes, time_ms, write) in parts {
            let next = ids.len() as u32;
            let key = *ids.entry(raw).or_insert(next);
            if key == next {
                trace.object_bytes.push(size_bytes);
            } else {
                let slot = &mut trace.object_bytes[key as usize];
                *slot = (*slot).max(size_bytes);
            }
            trace.requests.push(TraceRequest {
                key,
                size_bytes,
                time_ms,
                write,
            });
        }
        trace.unique = ids.len();
        trace
    }
}

/// Opens a file, decompressing by extension.
pub fn open(path: &Path) -> Result<Box<dyn Read>> {
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let name = path.to_string_lossy().to_ascii_lowercase();
    Ok(if name.ends_with(".zst") {
        Box::new(zstd::Decoder::new(file)?)
    } else if name.ends_with(".gz") {
        Box::new(flate2::read::MultiGzDecoder::new(BufReader::new(file)))
    } else if name.ends_with(".bz2") {
        Box::new(bzip2::read::MultiBzDecoder::new(BufReader::new(file)))
    } else if name.ends_with(".xz") {
        let mut input = BufReader::new(file);
        let mut output = Vec::new();
        lzma_rs::xz_decompress(&mut input, &mut output)
            .map_err(|e| anyhow::anyhow!("xz: {e:?}"))?;
        Box::new(std::io::Cursor::new(output))
    } else {
        Box::new(file)
    })
}

fn hash_text(text: &str) -> u64 {
    // FNV-1a: stable across runs and platforms.
    text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

fn field<'a>(fields: &[&'a str], index: usize, line: usize) -> Result<&'a str> {
    fields
        .get(index)
        .map(|f| f.trim())
        .with_context(|| format!("line {line}: missing field {}", index + 1))
}

fn number<T: std::str::FromStr>(text: &str, line: usize) -> Result<T> {
    text.parse()
        .map_err(|_| anyhow::anyhow!("line {line}: bad number `{text}`"))
}

fn parse_line(format: Format, text: &str, line: usize) -> Result<Option<RawRecord>> {
    let text = text.trim();
    if text.is_empty() || text.starts_with('#') {
        return Ok(None);
    }
    let csv: Vec<&str> = text.split(',').collect();
    let words: Vec<&str> = text.split_whitespace().collect();
    let record = match format {
        Format::CloudPhysicsCsv => {
            if csv[0].trim() == "version" {
                return Ok(None);
            }
            let time_s: u64 = number(field(&csv, 1, line)?, line)?;
            let op = u8::from_str_radix(field(&csv, 2, line)?.trim_start_matches("0x"), 16)?;
            let length: u64 = number(field(&csv, 3, line)?, line)?;
            let lbn: u64 = number(field(&csv, 4, line)?, line)?;
            RawRecord {
                time_ms: Some(time_s * 1000),
                address: Address::Block {
                    volume: 0,
                    offset_bytes: lbn * 512,
                    length_bytes: length.max(1),
                    unit_bytes: 512,
                },
                write: matches!(op, 0x2a | 0x8a | 0xaa),
            }
        }
        Format::Arc => {
            let start: u64 = number(field(&words, 0, line)?, line)?;
            let blocks: u64 = number(field(&words, 1, line)?, line)?;
            RawRecord {
                time_ms: None,
                address: Address::Block {
                    volume: 0,
                    offset_bytes: start * 512,
                    length_bytes: blocks.max(1) * 512,
                    unit_bytes: 512,
                },
                write: false,
            }
        }
        Format::Msr => {
            let filetime: u64 = number(field(&csv, 0, line)?, line)?;
            let disk: u32 = number(field(&csv, 2, line)?, line).unwrap_or(0);
            let host = hash_text(field(&csv, 1, line)?) as u32;
            RawRecord {
                time_ms: Some(filetime / 10_000),
                address: Address::Block {
                    volume: host.wrapping_mul(31).wrapping_add(disk),
                    offset_bytes: number(field(&csv, 4, line)?, line)?,
                    length_bytes: number::<u64>(field(&csv, 5, line)?, line)?.max(1),
                    unit_bytes: 512,
                },
                write: field(&csv, 3, line)?.eq_ignore_ascii_case("write"),
            }
        }
        Format::Systor => {
            if csv[0].trim() == "Timestamp" {
                return Ok(None);
            }
            let time_s: f64 = number(field(&csv, 0, line)?, line)?;
            RawRecord {
                time_ms: Some((time_s * 1000.0) as u64),
                address: Address::Block {
                    volume: number(field(&csv, 3, line)?, line)?,
                    offset_bytes: number(field(&csv, 4, line)?, line)?,
                    length_bytes: number::<u64>(field(&csv, 5, line)?, line)?.max(1),
                    unit_bytes: 512,
                },
                write: field(&csv, 2, line)?.eq_ignore_ascii_case("w"),
            }
        }
        Format::TencentBlock => {
            let time_s: u64 = number(field(&csv, 0, line)?, line)?;
            let sector: u64 = number(field(&csv, 1, line)?, line)?;
            let sectors: u64 = number(field(&csv, 2, line)?, line)?;
            RawRecord {
                time_ms: Some(time_s * 1000),
                address: Address::Block {
                    volume: number(field(&csv, 4, line)?, line)?,
                    offset_bytes: sector * 512,
                    length_bytes: sectors.max(1) * 512,
                    unit_bytes: 512,
                },
                write: field(&csv, 3, line)? == "1",
            }
        }
        Format::TencentPhoto => {
            let time: u64 = number(field(&words, 0, line)?, line)?;
            let id = format!("{}{}", field(&words, 1, line)?, field(&words, 3, line)?);
            RawRecord {
                time_ms: Some(photo_time_ms(time)),
                address: Address::Object {
                    id: hash_text(&id),
                    size_bytes: number(field(&words, 4, line)?, line)?,
                },
                write: false,
            }
        }
        Format::Object => {
            let time: u64 = number(field(&words, 0, line)?, line)?;
            RawRecord {
                time_ms: Some(time * 1000),
                address: Address::Object {
                    id: number(field(&words, 1, line)?, line)
                        .unwrap_or_else(|_| hash_text(words[1])),
                    size_bytes: number(field(&words, 2, line)?, line)?,
                },
                write: false,
            }
        }
        Format::Strata => {
            let op = field(&csv, 3, line)?;
            RawRecord {
                time_ms: Some(number(field(&csv, 0, line)?, line)?),
                address: Address::Object {
                    id: number(field(&csv, 1, line)?, line)?,
                    size_bytes: number(field(&csv, 2, line)?, line)?,
                },
                write: op.eq_ignore_ascii_case("w"),
            }
        }
        Format::Vscsi => unreachable!("binary format"),
    };
    Ok(Some(record))
}

/// `YYYYMMDDhhmmss` to milliseconds since an arbitrary origin (days approximated as 31 per
/// month, which preserves order and one-second resolution within a month).
fn photo_time_ms(stamp: u64) -> u64 {
    let (s, mi, h) = (stamp % 100, stamp / 100 % 100, stamp / 10_000 % 100);
    let (d, mo) = (stamp / 1_000_000 % 100, stamp / 100_000_000 % 100);
    (((mo * 31 + d) * 24 + h) * 3600 + mi * 60 + s) * 1000
}

fn read_vscsi(mut input: impl Read) -> Result<Vec<RawRecord>> {
    let mut bytes = Vec::new();
    input.read_to_end(&mut bytes)?;
    let u16_at = |b: &[u8], o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
    let u32_at = |b: &[u8], o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
    let u64_at = |b: &[u8], o: usize| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[o..o + 8]);
        u64::from_le_bytes(a)
    };
    if bytes.len() < 80 {
        bail!("vscsi file too small");
    }
    // Version 2 keeps `ver` at offset 2, version 1 at offset 14; its high byte is the version.
    let v2 = (0..2).all(|i| u16_at(&bytes, i * 40 + 2) >> 8 == 2);
    let v1 = (0..2).all(|i| u16_at(&bytes, i * 32 + 14) >> 8 == 1);
    let (size, cmd_at, len_at) = match (v2, v1) {
        (true, _) => (40, 0, 8),
        (false, true) => (32, 12, 4),
        _ => bail!("unrecognised vscsi version"),
    };
    Ok(bytes
        .chunks_exact(size)
        .map(|r| {
            let cmd = u16_at(r, cmd_at) as u8;
            RawRecord {
                time_ms: Some(u64_at(r, 24) / 1000),
                address: Address::Block {
                    volume: 0,
                    offset_bytes: u64_at(r, 16) * 512,
                    length_bytes: (u32_at(r, len_at) as u64).max(1),
                    unit_bytes: 512,
                },
                write: matches!(cmd, 0x2a | 0x8a | 0xaa),
            }
        })
        .collect())
}

/// Loads a trace file.
pub fn load(
    path: &Path,
    format: Option<Format>,
    mapping: Option<Mapping>,
    limit: Option<usize>,
) -> Result<Trace> {
    let format = match format {
        Some(f) => f,
        None => Format::guess(path).with_context(|| {
            format!(
                "cannot guess the format of {}; pass --format",
                path.display()
            )
        })?,
    };
    let mapping = mapping.unwrap_or_else(|| format.default_mapping());
    let input = open(path)?;
    let records = if format == Format::Vscsi {
        read_vscsi(input)?
    } else {
        let mut records = Vec::new();
        for (i, line) in BufReader::with_capacity(1 << 20, input).lines().enumerate() {
            let line = line.with_context(|| format!("reading {}", path.display()))?;
            if let Some(record) = parse_line(format, &line, i + 1)? {
                records.push(record);
                if limit.is_some_and(|l| records.len() >= l) {
                    break;
                }
            }
        }
        records
    };
    let name = path
        .file_name()
        .map(|n| {
            n.to_string_lossy()
                .split('.')
                .next()
                .unwrap_or("trace")
                .to_string()
        })
        .unwrap_or_default();
    Ok(expand(&name, &records, mapping, limit))
}

fn expand(name: &str, records: &[RawRecord], mapping: Mapping, limit: Option<usize>) -> Trace {
    let timed = records.iter().all(|r| r.time_ms.is_some()) && !records.is_empty();
    let origin = records.iter().filter_map(|r| r.time_ms).min().unwrap_or(0);
    let mut parts: Vec<(u64, u32, u64, bool)> = Vec::with_capacity(records.len());
    let limit = limit.unwrap_or(usize::MAX);
    for record in records {
        let time_ms = |index: usize| {
            if timed {
                record.time_ms.unwrap_or(0) - origin
            } else {
                index as u64
            }
        };
        match record.address {
            Address::Object { id, size_bytes } => parts.push((
                id,
                size_bytes.min(u32::MAX as u64) as u32,
                time_ms(parts.len()),
                record.write,
            )),
            Address::Block {
                volume,
                offset_bytes,
                length_bytes,
                unit_bytes,
            } => {
                let volume_bits = (volume as u64) << 48;
                match mapping {
                    Mapping::Record => {
                        let key = volume_bits | (offset_bytes / unit_bytes);
                        parts.push((
                            key,
                            length_bytes.min(u32::MAX as u64) as u32,
                            time_ms(parts.len()),
                            record.write,
                        ));
                    }
                    Mapping::Block { block_bytes }
                    | Mapping::Object {
                        object_bytes: block_bytes,
                    } => {
                        let first = offset_bytes / block_bytes;
                        let last = (offset_bytes + length_bytes - 1) / block_bytes;
                        for unit in first..=last {
                            let start = (unit * block_bytes).max(offset_bytes);
                            let end = ((unit + 1) * block_bytes).min(offset_bytes + length_bytes);
                            let size = if matches!(mapping, Mapping::Block { .. }) {
                                block_bytes
                            } else {
                                end - start
                            };
                            parts.push((
                                volume_bits | unit,
                                size.min(u32::MAX as u64) as u32,
                                time_ms(parts.len()),
                                record.write,
                            ));
                        }
                    }
                }
            }
        }
        if parts.len() >= limit {
            parts.truncate(limit);
            break;
        }
    }
    let mut trace = Trace::from_parts(name, parts, timed);
    if let Mapping::Object { object_bytes } = mapping {
        // A promotion copies the whole RBD object, whatever part of it was requested.
        trace
            .object_bytes
            .iter_mut()
            .for_each(|b| *b = object_bytes.min(u32::MAX as u64) as u32);
    }
    trace
}

/// Writes a trace in our own format: a header line `# strata-trace v1`, then one line per request
/// `time_ms,key,size_bytes,op` where `key` is the dense object id and `op` is `r` or `w`.
pub fn write_strata(trace: &Trace, mut out: impl Write) -> Result<()> {
    writeln!(out, "# strata-trace v1")?;
    for r in &trace.requests {
        writeln!(
            out,
            "{},{},{},{}",
            r.time_ms,
            r.key,
            r.size_bytes,
            if r.write { 'w' } else { 'r' }
        )?;
    }
    Ok(())
}

/// A zstd-compressing writer for [`write_strata`] output.
pub type ZstdWriter = zstd::Encoder<'static, std::fs::File>;

/// Wraps `file` in a zstd encoder (level 3); call `finish` when done.
pub fn zstd_writer(file: std::fs::File) -> Result<ZstdWriter> {
    Ok(zstd::Encoder::new(file, 3)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arc_lines_expand_into_pages() {
        let records: Vec<RawRecord> = ["10 3 0 1", "11 1 0 2"]
            .iter()
            .enumerate()
            .filter_map(|(i, l)| parse_line(Format::Arc, l, i).ok().flatten())
            .collect();
        let trace = expand("t", &records, Mapping::Block { block_bytes: 512 }, None);
        assert_eq!(trace.requests.len(), 4);
        assert_eq!(trace.unique, 3);
        assert_eq!(trace.requests[3].key, trace.requests[1].key);
        assert_eq!(trace.next_seq(), vec![u64::MAX, 3, u64::MAX, u64::MAX]);
    }

    #[test]
    fn rbd_mapping_splits_ranges_across_objects() {
        let record = RawRecord {
            time_ms: Some(0),
            address: Address::Block {
                volume: 1,
                offset_bytes: (4 << 20) - 4096,
                length_bytes: 8192,
                unit_bytes: 512,
            },
            write: true,
        };
        let trace = expand(
            "t",
            &[record],
            Mapping::Object {
                object_bytes: 4 << 20,
            },
            None,
        );
        assert_eq!(
            trace
                .requests
                .iter()
                .map(|r| r.size_bytes)
                .collect::<Vec<_>>(),
            vec![4096, 4096]
        );
        assert_eq!(trace.unique, 2);
    }

    #[test]
    fn own_format_round_trips() {
        let trace = Trace::from_parts(
            "t",
            [(5, 100, 0, false), (7, 200, 3, true), (5, 100, 9, false)],
            true,
        );
        let mut bytes = Vec::new();
        write_strata(&trace, &mut bytes).unwrap_or_else(|e| panic!("{e}"));
        let text = String::from_utf8(bytes).unwrap_or_default();
        let records: Vec<RawRecord> = text
            .lines()
            .enumerate()
            .filter_map(|(i, l)| parse_line(Format::Strata, l, i).ok().flatten())
            .collect();
        let again = expand("t", &records, Mapping::Record, None);
        assert_eq!(again.requests, trace.requests);
    }

    #[test]
    fn formats_are_guessed_from_names() {
        for (name, format) in [
            ("cloudPhysicsIO.csv", Format::CloudPhysicsCsv),
            ("x.vscsi", Format::Vscsi),
            ("OLTP.lis.zst", Format::Arc),
            ("msr-cambridge1-sample.csv", Format::Msr),
            ("systor17-traces-sample.csv.gz", Format::Systor),
            ("cloud_storage-sample.bz2", Format::TencentBlock),
            ("cloud_photos-sample.bz2", Format::TencentPhoto),
            ("request.trace.xz", Format::Object),
        ] {
            assert_eq!(Format::guess(Path::new(name)), Some(format), "{name}");
        }
    }
}
