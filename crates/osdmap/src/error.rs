//! The one error type of the osdmap crate.

/// Everything that can go wrong reading an osdmap or asking it something.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OsdMapError {
    /// Malformed binary osdmap: names the byte offset and the field being read.
    #[error("malformed osdmap at byte {offset}: {field}: {reason}")]
    Decode {
        offset: usize,
        field: &'static str,
        reason: String,
    },
    /// A versioned section whose compat version is newer than this decoder understands.
    #[error("osdmap section {field} at byte {offset}: struct_v {version} compat {compat} is not supported")]
    UnsupportedVersion {
        offset: usize,
        field: &'static str,
        version: u8,
        compat: u8,
    },
    /// The stored crc32c does not match the bytes.
    #[error("osdmap crc mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Crc { stored: u32, computed: u32 },
    /// The embedded crushmap did not decode.
    #[error("osdmap crushmap: {0}")]
    Crush(#[from] crush::CrushError),
    /// `ceph osd dump --format json` input that is not what Ceph writes.
    #[error("osd dump json: {0}")]
    Json(String),
    /// A pool id that the map does not hold.
    #[error("no pool {0}")]
    NoPool(i64),
    /// A PG id that does not parse (`<pool>.<hex seed>`).
    #[error("bad pg id {0:?}")]
    BadPgId(String),
}

pub type Result<T> = std::result::Result<T, OsdMapError>;
