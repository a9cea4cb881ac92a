//! The cluster's error type and its mapping to [`rados::RadosError`] (the one place).

use rados::RadosError;
use store::StoreError;

/// Why a cluster operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterError {
    /// The configuration is malformed; the message names the field.
    #[error("config: {0}")]
    Config(String),
    /// The persisted state is unreadable or inconsistent with the configuration.
    #[error("state: {0}")]
    State(String),
    /// A file of the data directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// An OSD's device could not be opened.
    #[error("osd.{osd}: device: {source}")]
    Device {
        /// The OSD.
        osd: i32,
        /// Why.
        source: device::DeviceError,
    },
    /// An OSD's store failed.
    #[error("osd.{osd}: {source}")]
    Store {
        /// The OSD.
        osd: i32,
        /// Why.
        source: StoreError,
    },
    /// The data directory holds a cluster whose creation was interrupted (a `creating`
    /// marker, no `state.json`). Nothing was written to it yet: create it again
    /// ([`crate::Cluster::create`] or `open_or_create` completes it).
    #[error("{dir}: the cluster's creation did not complete (interrupted); create it again to finish it")]
    IncompleteCreate {
        /// The data directory.
        dir: String,
    },
    /// Building the CRUSH map failed.
    #[error("crush: {0}")]
    Crush(String),
    /// An operation error in API terms.
    #[error(transparent)]
    Rados(#[from] RadosError),
}

impl ClusterError {
    /// A file error.
    pub fn io(path: impl AsRef<std::path::Path>, source: std::io::Error) -> Self {
        ClusterError::Io {
            path: path.as_ref().display().to_string(),
            source,
        }
    }
}

impl From<ClusterError> for RadosError {
    fn from(error: ClusterError) -> Self {
        match error {
            ClusterError::Rados(error) => error,
            ClusterError::Config(m) => RadosError::InvalidArgument(m),
            ClusterError::Store { osd, source } => store_to_rados(osd, &source),
            other => RadosError::Io(other.to_string()),
        }
    }
}

/// A store error in API terms, naming the OSD.
pub fn store_to_rados(osd: i32, error: &StoreError) -> RadosError {
    let what = format!("osd.{osd}: {error}");
    match error {
        StoreError::NotFound { .. } => RadosError::NotFound(what),
        StoreError::Exists { .. } => RadosError::Exists(what),
        StoreError::NoSpace { .. } => RadosError::NoSpace(what),
        StoreError::InvalidArgument(_) => RadosError::InvalidArgument(what),
        StoreError::Checksum { .. } => RadosError::Checksum(what),
        StoreError::Closed => RadosError::Shutdown,
        _ => RadosError::Io(what),
    }
}

/// The cluster's result type.
pub type Result<T, E = ClusterError> = std::result::Result<T, E>;
