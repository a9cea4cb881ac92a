//! The one error type of the block cache.

use device::DeviceError;

/// Why a cache operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CacheError {
    /// The cache or core device failed.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// The cache device holds a cache and neither load nor force was asked.
    #[error(
        "the cache device holds a cache: start with --load to use it or --force to discard it"
    )]
    Exists,
    /// Load was asked but the cache device holds no (valid) cache.
    #[error("no valid cache on the cache device: {0}")]
    NoCache(String),
    /// Metadata on the cache device failed its checksum or does not fit the devices.
    #[error("cache metadata is corrupt: {0}")]
    Corrupt(String),
    /// A configuration value is out of range or unparsable.
    #[error("invalid cache configuration: {0}")]
    InvalidConfig(String),
}
