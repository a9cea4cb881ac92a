//! The tier's one error enum.

use rados::RadosError;

/// Errors of the tier: the backend's, and the tier's own refusals.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TierError {
    /// The backend failed.
    #[error(transparent)]
    Rados(#[from] RadosError),
    /// A tier command or setting is not valid here (the message says why and what to do).
    #[error("{0}")]
    Invalid(String),
    /// A tier command cannot run now (dirty objects, an overlay in place...).
    #[error("{0}")]
    Busy(String),
    /// No such pool or tier.
    #[error("{0}")]
    NotFound(String),
    /// The tier's record of an object cannot be read.
    #[error("tier state of object {object:?} is corrupt: {reason}")]
    Corrupt {
        /// The object.
        object: String,
        /// What is wrong.
        reason: String,
    },
    /// A background flush of the object is writing the base pool, and the op needed the
    /// object flushed or evicted under its lock (to go around a full cache): the flush needs
    /// that lock to finish, so the op lets go of it and runs again.
    #[error("{object:?}: a flush of this object is in flight")]
    FlushInFlight {
        /// The object.
        object: String,
    },
    /// The cache holds its byte target over `cache_target_full_ratio`: the blocks an op
    /// needs are not promoted into it, and the op goes around the cache to the base pool.
    #[error("{object:?}: the cache is over its byte target")]
    OverTarget {
        /// The object.
        object: String,
    },
    /// The base object changed behind the tier's back (its flush generation is not the one
    /// the cache copy descends from): the cache copy is kept dirty and not written over it.
    #[error("flush of {object:?} refused: the base object's generation is {found}, the cache copy descends from {expected}")]
    FlushConflict {
        /// The object.
        object: String,
        /// What the cache copy descends from.
        expected: u64,
        /// What the base pool has.
        found: u64,
    },
}

/// The tier's result type.
pub type Result<T> = std::result::Result<T, TierError>;

impl From<TierError> for RadosError {
    fn from(error: TierError) -> Self {
        match error {
            TierError::Rados(error) => error,
            TierError::Invalid(message) => RadosError::InvalidArgument(message),
            TierError::Busy(message) => RadosError::Busy(message),
            error @ TierError::FlushInFlight { .. } => RadosError::Busy(error.to_string()),
            error @ TierError::OverTarget { .. } => RadosError::NoSpace(error.to_string()),
            TierError::NotFound(message) => RadosError::NotFound(message),
            other => RadosError::Io(other.to_string()),
        }
    }
}
