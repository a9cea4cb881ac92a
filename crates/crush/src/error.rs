//! The one error type of the crush crate.

/// Everything that can go wrong reading, writing or checking a CRUSH map.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CrushError {
    /// Malformed binary map: names the byte offset and the field being read.
    #[error("malformed crushmap at byte {offset}: {field}: {reason}")]
    Decode {
        offset: usize,
        field: String,
        reason: String,
    },
    /// Malformed text map: names the line (1-based) and what was wrong.
    #[error("crushmap text line {line}: {message}")]
    Parse { line: usize, message: String },
    /// A map that decodes but breaks an invariant (unknown bucket, rule out of range, ...).
    #[error("invalid crushmap: {0}")]
    Invalid(String),
}

pub type Result<T> = std::result::Result<T, CrushError>;
