//! The one error type of the volume crate.

use rados::RadosError;

/// Why a volume operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VolumeError {
    /// The volume name breaks the rules ([`crate::validate_name`]).
    #[error("invalid volume name {name:?}: {reason}")]
    InvalidName {
        /// The name given.
        name: String,
        /// Which rule it breaks.
        reason: String,
    },
    /// The size is zero, not a multiple of 512 or above [`crate::VOLUME_SIZE_BYTES_MAX`].
    #[error("invalid volume size {size_bytes} bytes: {reason}")]
    InvalidSize {
        /// The size given.
        size_bytes: u64,
        /// Which rule it breaks.
        reason: String,
    },
    /// The object order is outside [`crate::ORDER_MIN`]..=[`crate::ORDER_MAX`].
    #[error(
        "invalid object order {order}: must be {}..={}",
        crate::ORDER_MIN,
        crate::ORDER_MAX
    )]
    InvalidOrder {
        /// The order given.
        order: u8,
    },
    /// A volume of that name exists (or is being created by someone else right now).
    #[error("volume {name:?} already exists{detail}")]
    Exists {
        /// The name.
        name: String,
        /// More, when the volume is half-created.
        detail: String,
    },
    /// No volume of that name.
    #[error("no volume {name:?}")]
    NotFound {
        /// The name.
        name: String,
    },
    /// The image uses a feature strata does not implement.
    #[error("volume {name:?} uses {what}, which strata does not implement (it implements layering only)")]
    Unsupported {
        /// The image.
        name: String,
        /// The features or parts ("feature object-map (8)", "snapshots", "a parent image").
        what: String,
    },
    /// A metadata object does not decode.
    #[error("malformed {object}: key {key:?}: {reason}")]
    Malformed {
        /// The object (`rbd_header.<id>`, `rbd_id.<name>`, `rbd_directory`).
        object: String,
        /// The omap key or part that is wrong (`size`, `order`, `data`).
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Another writer holds the volume's lease.
    #[error("volume {name:?} is leased by writer {holder:?} until {expires_ns} ns (Unix time); retry after it expires")]
    Leased {
        /// The volume.
        name: String,
        /// Who holds it.
        holder: String,
        /// When the lease expires, ns since the Unix epoch of the injected clock.
        expires_ns: u64,
    },
    /// This handle's lease was lost (expired and taken by another writer): writes are refused.
    #[error("volume {name:?}: this writer's lease was lost ({reason}); reopen the volume")]
    LeaseLost {
        /// The volume.
        name: String,
        /// What happened.
        reason: String,
    },
    /// The volume was opened read-only.
    #[error("volume {name:?} is open read-only")]
    ReadOnly {
        /// The volume.
        name: String,
    },
    /// The header changed under a guarded update (a concurrent resize, the lease taken).
    #[error("volume {name:?} changed concurrently: {reason}")]
    Conflict {
        /// The volume.
        name: String,
        /// What the guard found.
        reason: String,
    },
    /// The object layer failed.
    #[error("{context}: {source}")]
    Rados {
        /// What was being done.
        context: String,
        /// The object layer's error.
        source: RadosError,
    },
}

impl VolumeError {
    /// Wraps a [`RadosError`] raised while doing `context`.
    pub fn rados(context: impl Into<String>, source: RadosError) -> Self {
        VolumeError::Rados {
            context: context.into(),
            source,
        }
    }

    /// The POSIX errno this error stands for (NBD replies, exit codes).
    pub fn errno(&self) -> i32 {
        use rados::errno;
        match self {
            VolumeError::InvalidName { .. }
            | VolumeError::InvalidSize { .. }
            | VolumeError::InvalidOrder { .. } => errno::EINVAL,
            VolumeError::Exists { .. } => errno::EEXIST,
            VolumeError::NotFound { .. } => errno::ENOENT,
            VolumeError::Unsupported { .. } => errno::EOPNOTSUPP,
            VolumeError::Malformed { .. } => errno::EIO,
            VolumeError::Leased { .. } => 16, // EBUSY
            VolumeError::LeaseLost { .. } | VolumeError::ReadOnly { .. } => errno::EPERM,
            VolumeError::Conflict { .. } => errno::ECANCELED,
            VolumeError::Rados { source, .. } => source.errno(),
        }
    }
}

/// The result type of the volume crate.
pub type Result<T, E = VolumeError> = std::result::Result<T, E>;
