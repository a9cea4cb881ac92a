//! The one error type of the store crate.

use device::DeviceError;

/// Why a store operation failed.
///
/// Callers map these to user-facing codes in one place (RADOS-like errno in the cluster, S3
/// error codes in the gateway); [`StoreError::errno`] gives the POSIX errno each stands for.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The object (or xattr) does not exist.
    #[error("{collection}/{name}: not found{}", what.as_deref().map(|w| format!(" ({w})")).unwrap_or_default())]
    NotFound {
        /// Collection of the object.
        collection: String,
        /// Name of the object.
        name: String,
        /// What is missing inside the object (an xattr name), if not the object itself.
        what: Option<String>,
    },
    /// An exclusive create found the object already there.
    #[error("{collection}/{name}: already exists")]
    Exists {
        /// Collection of the object.
        collection: String,
        /// Name of the object.
        name: String,
    },
    /// Data read back does not match the checksum recorded when it was written. The store never
    /// returns such data.
    #[error("{collection}/{name}: checksum mismatch at object offset {offset_bytes} (device offset {device_offset_bytes}): expected {expected:#010x}, found {found:#010x}")]
    Checksum {
        /// Collection of the object.
        collection: String,
        /// Name of the object.
        name: String,
        /// Offset in the object of the first byte of the bad checksum block.
        offset_bytes: u64,
        /// Where that block lies on the device.
        device_offset_bytes: u64,
        /// The crc32c recorded at write time.
        expected: u32,
        /// The crc32c of what was read.
        found: u32,
    },
    /// The device has no free extent for the request.
    #[error("no space: {requested_bytes} bytes requested, {free_bytes} free")]
    NoSpace {
        /// Bytes the operation needed.
        requested_bytes: u64,
        /// Bytes free on the device.
        free_bytes: u64,
    },
    /// The data device failed.
    #[error("device: {0}")]
    Device(#[from] DeviceError),
    /// The metadata store failed, or holds something the store cannot decode.
    #[error("metadata: {0}")]
    Metadata(String),
    /// A flush or metadata commit failed earlier; the store refuses writes because it cannot know
    /// what reached the media. Reopen it.
    #[error("store is poisoned by a failed flush or commit (this transaction's or an earlier one's; the log has the cause); reopen it")]
    Poisoned,
    /// The store was shut down.
    #[error("store is shut down")]
    Closed,
    /// A mount found its metadata log or the data it vouches for in a state it cannot replay
    /// without losing acknowledged writes (a record damaged in the middle of the log, data it
    /// cannot read). Nothing was replayed, dropped or reset: the log is left as found.
    #[error("cannot mount: {0}")]
    Mount(String),
    /// The request is malformed (bad name, offset beyond limits, bad configuration...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

/// POSIX errno values the store maps to.
const ENOENT: i32 = 2;
const EIO: i32 = 5;
const EEXIST: i32 = 17;
const EINVAL: i32 = 22;
const ENOSPC: i32 = 28;
const ESHUTDOWN: i32 = 108;

impl StoreError {
    /// The POSIX errno this error stands for (as Ceph's OSD would return it).
    pub fn errno(&self) -> i32 {
        match self {
            StoreError::NotFound { .. } => ENOENT,
            StoreError::Exists { .. } => EEXIST,
            StoreError::NoSpace { .. } => ENOSPC,
            StoreError::InvalidArgument(_) => EINVAL,
            StoreError::Closed => ESHUTDOWN,
            StoreError::Device(error) => error.errno(),
            StoreError::Checksum { .. }
            | StoreError::Metadata(_)
            | StoreError::Mount(_)
            | StoreError::Poisoned => EIO,
        }
    }

    pub(crate) fn not_found(collection: &str, name: &str) -> Self {
        StoreError::NotFound {
            collection: collection.to_owned(),
            name: name.to_owned(),
            what: None,
        }
    }

    pub(crate) fn metadata(error: impl std::fmt::Display) -> Self {
        StoreError::Metadata(error.to_string())
    }
}

impl From<fjall::Error> for StoreError {
    fn from(error: fjall::Error) -> Self {
        StoreError::metadata(error)
    }
}

/// The store's result type.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
