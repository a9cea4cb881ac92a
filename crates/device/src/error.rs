//! The one error type of the device crate.

use std::io;

/// Why a device operation failed.
///
/// Callers map these to user-facing codes in one place (NBD errno, S3 error, CLI exit code);
/// [`DeviceError::errno`] gives the POSIX errno each variant stands for.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeviceError {
    /// The operating system refused the operation.
    ///
    /// The OS error is part of the message and not a `source()`: error chains printed
    /// whole (`{:#}`) said it twice ("open /x failed: No such file or directory (os error
    /// 2) (errno 2): No such file or directory (os error 2)").
    #[error("{operation} failed: {cause}")]
    Io {
        /// What was being done ("pread", "open /path", ...).
        operation: String,
        /// The raw errno, or `libc`'s EIO (5) when the error carried none.
        errno: i32,
        /// The underlying error.
        cause: io::Error,
    },
    /// The range `[offset_bytes, offset_bytes + length_bytes)` is not inside the device.
    #[error("range {offset_bytes}+{length_bytes} is outside the device of {size_bytes} bytes")]
    OutOfRange {
        /// First byte of the request.
        offset_bytes: u64,
        /// Length of the request.
        length_bytes: u64,
        /// Size of the device.
        size_bytes: u64,
    },
    /// Offset or length is not a multiple of the device's block size.
    #[error("offset {offset_bytes} or length {length_bytes} is not a multiple of the block size {block_size_bytes}")]
    Misaligned {
        /// First byte of the request.
        offset_bytes: u64,
        /// Length of the request.
        length_bytes: u64,
        /// The device's block size.
        block_size_bytes: u64,
    },
    /// A fault injected by a [`crate::FaultyDevice`] (surfaces as EIO).
    #[error("injected fault: {what}")]
    Injected {
        /// Which fault fired, for the test log.
        what: String,
    },
    /// The device "lost power" (a [`crate::FaultyDevice`] crash): every operation fails until
    /// it is restarted.
    #[error("device crashed (injected); restart it to continue")]
    Crashed,
    /// A flush failed earlier: the device refuses writes and flushes from then on, because the
    /// state of the data written before the failed flush is unknown (see fsyncgate).
    #[error("device is poisoned by an earlier failed flush; reopen it")]
    Poisoned,
    /// The configuration is invalid (zero size, block size not a power of two, ...).
    #[error("invalid device configuration: {0}")]
    InvalidConfig(String),
}

/// EIO, the errno used for device faults that carry none.
pub const EIO: i32 = 5;
const EINVAL: i32 = 22;
const ENOSPC_RANGE: i32 = 34; // ERANGE: the closest errno for an out-of-range request

impl DeviceError {
    /// Wraps an [`io::Error`] raised while doing `operation`.
    pub fn io(operation: impl Into<String>, source: io::Error) -> Self {
        DeviceError::Io {
            operation: operation.into(),
            errno: source.raw_os_error().unwrap_or(EIO),
            cause: source,
        }
    }

    /// The POSIX errno this error stands for (for NBD replies and logs).
    pub fn errno(&self) -> i32 {
        match self {
            DeviceError::Io { errno, .. } => *errno,
            DeviceError::OutOfRange { .. } => ENOSPC_RANGE,
            DeviceError::Misaligned { .. } | DeviceError::InvalidConfig(_) => EINVAL,
            DeviceError::Injected { .. } | DeviceError::Crashed | DeviceError::Poisoned => EIO,
        }
    }
}
