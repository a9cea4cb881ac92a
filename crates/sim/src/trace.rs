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
//! - `strata`: our own text format, documented in [`write_strata`]: a header line
//!   `# strata-trace v2` then `time_ms,key,size_bytes,op,object_bytes` with op `r` or `w`;
//!   version 1 files (no `object_bytes`) read as before.
//!
//! Any file may be compressed: `.zst`, `.gz`, `.bz2` and `.xz` are decompressed by extension.
//! Without timestamps, request `i` happens at `i` ms (1,000 requests per second).
//!
//! A record the simulator cannot represent is refused, with the file and line (or vscsi record)
//! named, never wrapped, clamped or dropped: a block record longer than [`RECORD_BYTES_MAX`]
//! (1 GiB), an object above 4 GiB - 1, byte offsets or times that overflow 64 bits, block
//! numbers at or beyond 2^48 (the key space of one volume), negative or non-finite times,
//! unknown ops, a partial vscsi record at the end of the file.

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
            .with_context(|| format!("unknown trace format `{name}` (known: {})", Format::names()))
    }

    /// The command-line names, comma-separated.
    pub fn names() -> String {
        Format::ALL.map(|(name, _)| name).join(", ")
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
    /// A size must be at least 1 byte and fit the simulator's 32-bit request sizes; `record`
    /// takes none (its requests are the records' own lengths).
    pub fn parse(text: &str) -> Result<Mapping> {
        let (kind, size) = match text.split_once(':') {
            Some((kind, size)) => {
                let bytes =
                    crate::parse_bytes(size).with_context(|| format!("mapping `{text}`"))?;
                if bytes == 0 || bytes > u64::from(u32::MAX) {
                    bail!("mapping `{text}`: the size must be 1 byte to 4 GiB - 1");
                }
                (kind, Some(bytes))
            }
            None => (text, None),
        };
        Ok(match kind {
            "record" if size.is_some() => {
                bail!(
                    "mapping `{text}`: record takes no size (each request is its record's length)"
                )
            }
            "record" => Mapping::Record,
            "block" => Mapping::Block {
                block_bytes: size.unwrap_or(4096),
            },
            "object" | "rbd" => Mapping::Object {
                object_bytes: size.unwrap_or(4 << 20),
            },
            _ => {
                bail!("unknown mapping `{text}`: expected record, block[:BYTES] or object[:BYTES]")
            }
        })
    }

    /// Bytes per key: a key is the record's first unit, the block or the object.
    fn key_bytes(self, unit_bytes: u64) -> u64 {
        match self {
            Mapping::Record => unit_bytes,
            Mapping::Block { block_bytes } => block_bytes,
            Mapping::Object { object_bytes } => object_bytes,
        }
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
    /// A whole object; `object_bytes`, when the record says it, is the object's size (the
    /// strata format's fifth field), which may exceed the request's.
    Object {
        id: u64,
        size_bytes: u64,
        object_bytes: Option<u64>,
    },
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

/// Longest byte range one block record may span: 1 GiB, far above any real I/O (SCSI and NVMe
/// transfers are a few MiB at most) and low enough that expanding it into 512-byte blocks stays
/// within memory (2 M requests). A longer record is refused with its file and line: a record of
/// 10^12 bytes used to be expanded block by block until memory ran out.
pub const RECORD_BYTES_MAX: u64 = 1 << 30;

/// Keys of one volume: a key is `volume << 48 | unit`, so a unit (block, object or record
/// start) number must stay below 2^48 (128 PiB of 512-byte blocks), or two volumes' keys
/// would collide.
const UNITS_PER_VOLUME: u64 = 1 << 48;

/// The compression of a file, from its extension.
fn compression(path: &Path) -> Option<&'static str> {
    let name = path.to_string_lossy().to_ascii_lowercase();
    [
        (".zst", "zstd"),
        (".gz", "gzip"),
        (".bz2", "bzip2"),
        (".xz", "xz"),
    ]
    .into_iter()
    .find(|(extension, _)| name.ends_with(extension))
    .map(|(_, kind)| kind)
}

/// What a read error means: in a compressed file, a stream that ends early or is not what its
/// extension says (the decoders' own messages name neither the file nor the format). `lines`
/// are the lines read before it, when counted.
fn read_error(path: &Path, error: std::io::Error, lines: Option<usize>) -> anyhow::Error {
    let after = match lines {
        None => String::new(),
        Some(0) => " at its start".to_string(),
        Some(n) => format!(" after line {n}"),
    };
    match compression(path) {
        Some(kind) => anyhow::anyhow!(
            "truncated or corrupt {kind} stream in {}{after}: {error}",
            path.display()
        ),
        None => anyhow::anyhow!("reading {}{after}: {error}", path.display()),
    }
}

/// Opens a file, decompressing by extension.
pub fn open(path: &Path) -> Result<Box<dyn Read>> {
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("no such file: {}", path.display())
        }
        Err(e) => bail!("opening {}: {e}", path.display()),
    };
    if file.metadata().is_ok_and(|m| m.is_dir()) {
        bail!("{} is a directory, not a trace file", path.display());
    }
    Ok(match compression(path) {
        Some("zstd") => Box::new(zstd::Decoder::new(file).map_err(|e| read_error(path, e, None))?),
        Some("gzip") => Box::new(flate2::read::MultiGzDecoder::new(BufReader::new(file))),
        Some("bzip2") => Box::new(bzip2::read::MultiBzDecoder::new(BufReader::new(file))),
        Some(_) => {
            let mut input = BufReader::new(file);
            let mut output = Vec::new();
            lzma_rs::xz_decompress(&mut input, &mut output).map_err(|e| {
                anyhow::anyhow!("truncated or corrupt xz stream in {}: {e}", path.display())
            })?;
            Box::new(std::io::Cursor::new(output))
        }
        None => Box::new(file),
    })
}

fn hash_text(text: &str) -> u64 {
    // FNV-1a: stable across runs and platforms.
    text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Field `index` (0-based) of a record, named `what` in errors.
fn field<'a>(fields: &[&'a str], index: usize, what: &str) -> Result<&'a str> {
    fields
        .get(index)
        .map(|f| f.trim())
        .with_context(|| format!("missing field {} ({what})", index + 1))
}

/// Field `index` parsed as a number.
fn number<T: std::str::FromStr>(fields: &[&str], index: usize, what: &str) -> Result<T> {
    let text = field(fields, index, what)?;
    text.parse()
        .map_err(|_| anyhow::anyhow!("bad {what} `{text}` in field {}", index + 1))
}

/// `value * factor`, or an error naming `what` when it does not fit 64 bits.
fn scaled(value: u64, factor: u64, what: &str) -> Result<u64> {
    value
        .checked_mul(factor)
        .with_context(|| format!("{what} {value} is too large (x {factor} overflows 64 bits)"))
}

/// A block record's byte range: refused when longer than [`RECORD_BYTES_MAX`] or when its end
/// overflows 64 bits (it used to wrap, and the record vanished).
fn block(volume: u32, offset_bytes: u64, length_bytes: u64) -> Result<Address> {
    let length_bytes = length_bytes.max(1);
    if length_bytes > RECORD_BYTES_MAX {
        bail!(
            "a record of {length_bytes} bytes is longer than the {RECORD_BYTES_MAX} bytes (1 GiB) \
             one request may span"
        );
    }
    if offset_bytes.checked_add(length_bytes).is_none() {
        bail!("offset {offset_bytes} + length {length_bytes} overflows 64 bits");
    }
    Ok(Address::Block {
        volume,
        offset_bytes,
        length_bytes,
        unit_bytes: 512,
    })
}

/// An object of `size_bytes`, which must fit the simulator's 32-bit sizes (it was clamped).
fn object(id: u64, size_bytes: u64) -> Result<Address> {
    sized_object(id, size_bytes, None)
}

/// An object requested for `size_bytes` whose whole size may be given apart.
fn sized_object(id: u64, size_bytes: u64, object_bytes: Option<u64>) -> Result<Address> {
    for size in std::iter::once(size_bytes).chain(object_bytes) {
        if size > u64::from(u32::MAX) {
            bail!("object size {size} is above the 4 GiB - 1 bytes the simulator stores");
        }
    }
    Ok(Address::Object {
        id,
        size_bytes,
        object_bytes,
    })
}

/// Seconds (whole) to milliseconds, refusing overflow.
fn seconds_ms(seconds: u64) -> Result<u64> {
    scaled(seconds, 1000, "time")
}

fn parse_line(format: Format, text: &str) -> Result<Option<RawRecord>> {
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
            let time_s: u64 = number(&csv, 1, "time")?;
            let op_text = field(&csv, 2, "op")?;
            let op = u8::from_str_radix(op_text.trim_start_matches("0x"), 16).map_err(|_| {
                anyhow::anyhow!(
                    "bad op `{op_text}` in field 3 (a hex SCSI opcode: 28 read, 2a write)"
                )
            })?;
            let length: u64 = number(&csv, 3, "size")?;
            let lbn: u64 = number(&csv, 4, "lbn")?;
            RawRecord {
                time_ms: Some(seconds_ms(time_s)?),
                address: block(0, scaled(lbn, 512, "lbn")?, length)?,
                write: matches!(op, 0x2a | 0x8a | 0xaa),
            }
        }
        Format::Arc => {
            let start: u64 = number(&words, 0, "start block")?;
            let blocks: u64 = number(&words, 1, "block count")?;
            RawRecord {
                time_ms: None,
                address: block(
                    0,
                    scaled(start, 512, "start block")?,
                    scaled(blocks.max(1), 512, "block count")?,
                )?,
                write: false,
            }
        }
        Format::Msr => {
            let filetime: u64 = number(&csv, 0, "timestamp")?;
            let disk: u32 = number(&csv, 2, "disk number")?;
            let host = hash_text(field(&csv, 1, "host")?) as u32;
            RawRecord {
                time_ms: Some(filetime / 10_000),
                address: block(
                    host.wrapping_mul(31).wrapping_add(disk),
                    number(&csv, 4, "offset")?,
                    number(&csv, 5, "size")?,
                )?,
                write: field(&csv, 3, "type")?.eq_ignore_ascii_case("write"),
            }
        }
        Format::Systor => {
            if csv[0].trim() == "Timestamp" {
                return Ok(None);
            }
            let time_s: f64 = number(&csv, 0, "timestamp")?;
            // Below 2^53 ms, a whole number of milliseconds is exact.
            if !(0.0..9e12).contains(&time_s) {
                bail!("timestamp {time_s} s is not a time from 0 to 9e12 s");
            }
            RawRecord {
                time_ms: Some((time_s * 1000.0) as u64),
                address: block(
                    number(&csv, 3, "LUN")?,
                    number(&csv, 4, "offset")?,
                    number(&csv, 5, "size")?,
                )?,
                write: field(&csv, 2, "IO type")?.eq_ignore_ascii_case("w"),
            }
        }
        Format::TencentBlock => {
            let time_s: u64 = number(&csv, 0, "timestamp")?;
            let sector: u64 = number(&csv, 1, "offset")?;
            let sectors: u64 = number(&csv, 2, "size")?;
            RawRecord {
                time_ms: Some(seconds_ms(time_s)?),
                address: block(
                    number(&csv, 4, "volume")?,
                    scaled(sector, 512, "offset")?,
                    scaled(sectors.max(1), 512, "size")?,
                )?,
                write: field(&csv, 3, "IO type")? == "1",
            }
        }
        Format::TencentPhoto => {
            let time: u64 = number(&words, 0, "timestamp")?;
            let id = format!("{}{}", field(&words, 1, "id")?, field(&words, 3, "type")?);
            RawRecord {
                time_ms: Some(photo_time_ms(time)),
                address: object(hash_text(&id), number(&words, 4, "size")?)?,
                write: false,
            }
        }
        Format::Object => {
            let time: u64 = number(&words, 0, "timestamp")?;
            let id = field(&words, 1, "id")?;
            RawRecord {
                time_ms: Some(seconds_ms(time)?),
                address: object(
                    id.parse().unwrap_or_else(|_| hash_text(id)),
                    number(&words, 2, "size")?,
                )?,
                write: false,
            }
        }
        Format::Strata => {
            let op = field(&csv, 3, "op")?;
            if !["r", "w"].iter().any(|o| op.eq_ignore_ascii_case(o)) {
                bail!("bad op `{op}` in field 4 (r or w)");
            }
            // Version 2's fifth field; version 1 lines have four.
            let object_bytes = match csv.get(4) {
                Some(_) => Some(number(&csv, 4, "object size")?),
                None => None,
            };
            RawRecord {
                time_ms: Some(number(&csv, 0, "time")?),
                address: sized_object(
                    number(&csv, 1, "key")?,
                    number(&csv, 2, "size")?,
                    object_bytes,
                )?,
                write: op.eq_ignore_ascii_case("w"),
            }
        }
        Format::Vscsi => bail!("vscsi is a binary format"),
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

/// The records of a vscsi file; errors name the file and the record (1-based).
fn read_vscsi(path: &Path, mut input: impl Read) -> Result<Vec<RawRecord>> {
    let mut bytes = Vec::new();
    input
        .read_to_end(&mut bytes)
        .map_err(|e| read_error(path, e, None))?;
    let u16_at = |b: &[u8], o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
    let u32_at = |b: &[u8], o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
    let u64_at = |b: &[u8], o: usize| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[o..o + 8]);
        u64::from_le_bytes(a)
    };
    if bytes.len() < 80 {
        bail!(
            "{}: not a vscsi trace ({} bytes, less than two records)",
            path.display(),
            bytes.len()
        );
    }
    // Version 2 keeps `ver` at offset 2, version 1 at offset 14; its high byte is the version.
    let v2 = (0..2).all(|i| u16_at(&bytes, i * 40 + 2) >> 8 == 2);
    let v1 = (0..2).all(|i| u16_at(&bytes, i * 32 + 14) >> 8 == 1);
    let (size, cmd_at, len_at) = match (v2, v1) {
        (true, _) => (40, 0, 8),
        (false, true) => (32, 12, 4),
        _ => bail!(
            "{}: not a vscsi trace (no version 1 or 2 record header)",
            path.display()
        ),
    };
    let trailing = bytes.len() % size;
    if trailing != 0 {
        bail!(
            "{}: {trailing} bytes at the end are not a whole {size}-byte vscsi record (truncated \
             file?)",
            path.display()
        );
    }
    bytes
        .chunks_exact(size)
        .enumerate()
        .map(|(index, r)| {
            let cmd = u16_at(r, cmd_at) as u8;
            let address = scaled(u64_at(r, 16), 512, "lbn")
                .and_then(|offset| block(0, offset, u64::from(u32_at(r, len_at))))
                .with_context(|| format!("{} record {}", path.display(), index + 1))?;
            Ok(RawRecord {
                time_ms: Some(u64_at(r, 24) / 1000),
                address,
                write: matches!(cmd, 0x2a | 0x8a | 0xaa),
            })
        })
        .collect()
}

/// Refuses a record whose last unit under `mapping` is at or beyond 2^48: its key would
/// overlap the volume bits (MSR offsets near 2^64, or `block:1` beyond 256 TiB).
fn check_units(record: &RawRecord, mapping: Mapping) -> Result<()> {
    if let Address::Block {
        offset_bytes,
        length_bytes,
        unit_bytes,
        ..
    } = record.address
    {
        let last = (offset_bytes + length_bytes - 1) / mapping.key_bytes(unit_bytes);
        if last >= UNITS_PER_VOLUME {
            bail!(
                "block number {last} is beyond the 2^48 blocks a volume may have (offset \
                 {offset_bytes} bytes)"
            );
        }
    }
    Ok(())
}

/// Loads a trace file. Errors name the file, and the line (or vscsi record) where the file is
/// at fault. `limit` caps the requests after expansion into blocks or objects.
pub fn load(
    path: &Path,
    format: Option<Format>,
    mapping: Option<Mapping>,
    limit: Option<usize>,
) -> Result<Trace> {
    let input = open(path)?;
    let format = match format {
        Some(f) => f,
        None => Format::guess(path).with_context(|| {
            format!(
                "cannot guess the format of {} from its name; pass --format (one of {})",
                path.display(),
                Format::names()
            )
        })?,
    };
    let mapping = mapping.unwrap_or_else(|| format.default_mapping());
    let records = if format == Format::Vscsi {
        let records = read_vscsi(path, input)?;
        for (index, record) in records.iter().enumerate() {
            check_units(record, mapping)
                .with_context(|| format!("{} record {}", path.display(), index + 1))?;
        }
        records
    } else {
        let mut records = Vec::new();
        let mut reader = BufReader::with_capacity(1 << 20, input);
        let mut bytes = Vec::new();
        let mut line = 0usize;
        loop {
            bytes.clear();
            let read = reader
                .read_until(b'\n', &mut bytes)
                .map_err(|e| read_error(path, e, Some(line)))?;
            if read == 0 {
                break;
            }
            line += 1;
            let at = || format!("{} line {line}", path.display());
            let text = std::str::from_utf8(&bytes)
                .map_err(|_| anyhow::anyhow!("not UTF-8 text"))
                .with_context(at)?;
            if let Some(record) = parse_line(format, text).with_context(at)? {
                check_units(&record, mapping).with_context(at)?;
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
    let limit = limit.unwrap_or(usize::MAX);
    let mut parts: Vec<(u64, u32, u64, bool)> = Vec::with_capacity(records.len().min(limit));
    // Object sizes the records state (raw id -> largest), applied after the dense remap.
    let mut stated: HashMap<u64, u32> = HashMap::new();
    'records: for record in records {
        let time_ms = |index: usize| {
            if timed {
                record.time_ms.unwrap_or(0) - origin
            } else {
                index as u64
            }
        };
        match record.address {
            Address::Object {
                id,
                size_bytes,
                object_bytes,
            } => {
                if let Some(bytes) = object_bytes {
                    let slot = stated.entry(id).or_default();
                    *slot = (*slot).max(bytes.min(u32::MAX as u64) as u32);
                }
                parts.push((
                    id,
                    size_bytes.min(u32::MAX as u64) as u32,
                    time_ms(parts.len()),
                    record.write,
                ))
            }
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
                        // `load` checked that the range ends below 2^64 and its units below
                        // 2^48, so none of this overflows.
                        let first = offset_bytes / block_bytes;
                        let last = (offset_bytes + length_bytes - 1) / block_bytes;
                        for unit in first..=last {
                            if parts.len() >= limit {
                                break 'records;
                            }
                            let start = (unit * block_bytes).max(offset_bytes);
                            let end = (unit * block_bytes)
                                .saturating_add(block_bytes)
                                .min(offset_bytes + length_bytes);
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
            break;
        }
    }
    parts.truncate(limit);
    let mut trace = if stated.is_empty() {
        Trace::from_parts(name, parts, timed)
    } else {
        // Keys are dense in order of first request: walk the parts again to find each
        // stated object's key.
        let raw: Vec<u64> = parts.iter().map(|p| p.0).collect();
        let mut trace = Trace::from_parts(name, parts, timed);
        let mut seen = vec![false; trace.unique];
        for (request, id) in trace.requests.iter().zip(raw) {
            let key = request.key as usize;
            if !std::mem::replace(&mut seen[key], true) {
                if let Some(&bytes) = stated.get(&id) {
                    trace.object_bytes[key] = trace.object_bytes[key].max(bytes);
                }
            }
        }
        trace
    };
    if let Mapping::Object { object_bytes } = mapping {
        // A promotion copies the whole RBD object, whatever part of it was requested.
        trace
            .object_bytes
            .iter_mut()
            .for_each(|b| *b = object_bytes.min(u32::MAX as u64) as u32);
    }
    trace
}

/// Writes a trace in our own format: a header line `# strata-trace v2`, then one line per request
/// `time_ms,key,size_bytes,op,object_bytes` where `key` is the dense object id, `op` is `r` or
/// `w` and `object_bytes` the object's size (what a promotion copies: 4 MiB for RBD-like
/// objects requested 4 KiB at a time). Version 1 had no `object_bytes`, so a converted trace
/// took each object's size from its largest request (seed 003's 4 MiB objects came back as
/// 4 KiB ones); version 1 files still read, and readers of version 1 ignore the fifth field.
pub fn write_strata(trace: &Trace, mut out: impl Write) -> Result<()> {
    writeln!(out, "# strata-trace v2")?;
    for r in &trace.requests {
        writeln!(
            out,
            "{},{},{},{},{}",
            r.time_ms,
            r.key,
            r.size_bytes,
            if r.write { 'w' } else { 'r' },
            trace.object_bytes[r.key as usize]
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
            .filter_map(|l| parse_line(Format::Arc, l).ok().flatten())
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
            .filter_map(|l| parse_line(Format::Strata, l).ok().flatten())
            .collect();
        let again = expand("t", &records, Mapping::Record, None);
        assert_eq!(again.requests, trace.requests);
    }

    /// The object size survives a round trip (4 KiB requests of 4 MiB objects came back as
    /// 4 KiB objects), and version 1 lines, without it, still read.
    #[test]
    fn own_format_keeps_object_sizes_and_reads_version_1() {
        let trace = crate::generator::ClientWorkload {
            clients: 2,
            requests_per_client: 1_000,
            ..Default::default()
        }
        .generate();
        let mut bytes = Vec::new();
        write_strata(&trace, &mut bytes).unwrap_or_else(|e| panic!("{e}"));
        let again = load_bytes("gen.strata", &bytes, None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(again.requests, trace.requests);
        assert_eq!(again.object_bytes, trace.object_bytes);
        assert!(again.object_bytes.iter().all(|&b| b == 4 << 20));
        let v1 = load_bytes(
            "v1.strata",
            b"# strata-trace v1\n0,5,100,r\n3,7,200,w\n9,5,50,r\n",
            None,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(again.name, "gen");
        assert_eq!(v1.object_bytes, vec![100, 200]);
    }

    /// Writes `bytes` to `name` in a fresh directory, loads it, and returns the error text
    /// (with its causes) or the trace.
    fn load_bytes(name: &str, bytes: &[u8], limit: Option<usize>) -> Result<Trace, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).map_err(|e| e.to_string())?;
        load(&path, None, None, limit).map_err(|e| format!("{e:#}"))
    }

    fn refusal(name: &str, bytes: &[u8]) -> String {
        match load_bytes(name, bytes, None) {
            Ok(trace) => panic!("{name} loaded: {} requests", trace.requests.len()),
            Err(error) => error,
        }
    }

    /// One record spanning 10^11 pages (ARC) or 10^12 bytes (MSR) is refused with its file and
    /// line: it used to be expanded block by block until memory ran out, `--limit` or not.
    #[test]
    fn oversized_records_are_refused_with_file_and_line() {
        let error = refusal("huge.lis", b"1 1 0 0\n0 100000000000 0 1\n");
        assert!(error.contains("huge.lis line 2"), "{error}");
        assert!(error.contains("1 GiB"), "{error}");
        let msr = b"128166385295514663,hm,0,Write,9056014336,2048,2833\n\
                    128166385295514663,hm,0,Write,9056014336,1000000000000,2833\n";
        let error = refusal("msr-huge.csv", msr);
        assert!(error.contains("msr-huge.csv line 2"), "{error}");
        let error = refusal("big.trace", b"1 a 10\n2 b 99999999999\n");
        assert!(
            error.contains("big.trace line 2") && error.contains("4 GiB"),
            "{error}"
        );
        // The limit holds inside a record: 10 of its 1,000 blocks.
        let trace = load_bytes("long.lis", b"0 1000 0 1\n", Some(10)).unwrap_or_default();
        assert_eq!(trace.requests.len(), 10);
    }

    /// Block numbers whose byte offsets overflow 64 bits, or whose keys would reach the volume
    /// bits, are refused: page 0 and page 2^55 used to be one object, and an MSR offset near
    /// 2^64 made its record vanish.
    #[test]
    fn block_numbers_that_overflow_are_refused() {
        let error = refusal("collide.lis", b"0 1 0 0\n36028797018963968 1 0 1\n");
        assert!(error.contains("collide.lis line 2"), "{error}");
        let msr = b"128166385295514663,hm,0,Write,18446744073709551000,2048,2833\n";
        let error = refusal("msr-wrap.csv", msr);
        assert!(
            error.contains("line 1") && error.contains("overflows"),
            "{error}"
        );
        let cloud = b"version,time,op,size,lbn\n1,5,2a,512,42\n1,5,2a,512,36028797018963968\n";
        let error = refusal("cloudphysics-big.csv", cloud);
        assert!(error.contains("line 3") && error.contains("lbn"), "{error}");
        let time = b"version,time,op,size,lbn\n1,18446744073709552,2a,512,42\n";
        let error = refusal("cloudphysics-time.csv", time);
        assert!(
            error.contains("line 2") && error.contains("time"),
            "{error}"
        );
        let error = refusal("systor-neg.csv", b"-5,0.1,R,0,0,4096\n");
        assert!(
            error.contains("line 1") && error.contains("timestamp"),
            "{error}"
        );
        let error = load_bytes("far.lis", b"281474976710656 1 0 0\n", None);
        assert!(error.is_err_and(|e| e.contains("2^48")));
    }

    /// Parse errors name the file, the line and the field; a missing file says so; an
    /// unknown format lists the known ones.
    #[test]
    fn errors_name_the_file_the_line_and_the_field() {
        let cloud = b"version,time,op,size,lbn\n1,5,2a,512,42\n1,5,zz,512,43\n";
        let error = refusal("cloudphysics-badop.csv", cloud);
        assert!(
            error.contains("cloudphysics-badop.csv line 3: bad op `zz`"),
            "{error}"
        );
        let error = refusal("a-msr.csv", b"1,hm,0,Read,abc,512,1\n");
        assert!(
            error.contains("a-msr.csv line 1: bad offset `abc`"),
            "{error}"
        );
        let error = refusal("bad.strata", b"0,1,4096,x\n");
        assert!(error.contains("bad op `x`"), "{error}");
        let error = refusal("latin1.lis", b"1 1 0 0\n\xe9 1 0 0\n");
        assert!(error.contains("latin1.lis line 2: not UTF-8"), "{error}");
        let error = load(Path::new("/nonexistent/x.csv"), None, None, None)
            .map(|_| ())
            .map_err(|e| format!("{e:#}"));
        assert_eq!(error, Err("no such file: /nonexistent/x.csv".to_string()));
        let error = Format::parse("csv").map_err(|e| e.to_string());
        assert!(error.is_err_and(|e| e.contains("cloudphysics-csv, vscsi, arc")));
        let error = refusal("unknown.dat", b"1\n");
        assert!(
            error.contains("pass --format (one of cloudphysics-csv"),
            "{error}"
        );
    }

    /// A compressed stream that ends early or is not what its extension says is reported as
    /// such, with the file (xz used to print a Rust debug dump).
    #[test]
    fn broken_compressed_streams_are_named() {
        let text = "1 1 0 0\n".repeat(50_000);
        let zstd = zstd::encode_all(text.as_bytes(), 3).unwrap_or_default();
        let error = refusal("cut.lis.zst", &zstd[..zstd.len() / 2]);
        assert!(
            error.contains("truncated or corrupt zstd stream in "),
            "{error}"
        );
        assert!(error.contains("cut.lis.zst after line"), "{error}");
        let error = refusal("plain.lis.zst", b"1 1 0 0\n");
        assert!(error.contains("corrupt zstd stream in"), "{error}");
        let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gzip.write_all(text.as_bytes()).unwrap_or_default();
        let gzip = gzip.finish().unwrap_or_default();
        let error = refusal("cut.lis.gz", &gzip[..gzip.len() / 2]);
        assert!(
            error.contains("truncated or corrupt gzip stream in "),
            "{error}"
        );
        let mut xz = Vec::new();
        lzma_rs::xz_compress(&mut text.as_bytes(), &mut xz).unwrap_or_default();
        let error = refusal("cut.trace.xz", &xz[..xz.len() / 2]);
        assert!(
            error.contains("truncated or corrupt xz stream in "),
            "{error}"
        );
        assert!(!error.contains("IoError"), "{error}");
    }

    /// A vscsi file whose size is not a whole number of records is refused (a partial record
    /// at the end used to be dropped silently); errors name the file.
    #[test]
    fn vscsi_files_are_whole_records() {
        let mut records = vec![0u8; 3 * 40];
        for record in records.chunks_exact_mut(40) {
            record[2..4].copy_from_slice(&0x0200u16.to_le_bytes());
            record[8..12].copy_from_slice(&4096u32.to_le_bytes());
        }
        let trace = load_bytes("t.vscsi", &records, None).unwrap_or_default();
        assert_eq!(trace.requests.len(), 3);
        records.extend([0; 5]);
        let error = refusal("t.vscsi", &records);
        assert!(error.contains("t.vscsi: 5 bytes at the end"), "{error}");
        let error = refusal("small.vscsi", &[0; 10]);
        assert!(error.contains("small.vscsi: not a vscsi trace"), "{error}");
    }

    #[test]
    fn mappings_refuse_sizes_they_would_ignore_or_cannot_use() {
        for bad in ["record:4K", "block:0", "object:0", "object:8G", "block:1.5"] {
            assert!(Mapping::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            Mapping::parse("object:4M").ok(),
            Some(Mapping::Object {
                object_bytes: 4 << 20
            })
        );
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
