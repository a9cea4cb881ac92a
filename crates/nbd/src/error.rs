//! The crate's error type, and the one place device errors become NBD errnos.

use device::DeviceError;

use crate::proto;

/// Why a connection or a client call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NbdError {
    /// The socket failed.
    #[error("nbd i/o: {0}")]
    Io(#[from] std::io::Error),
    /// The peer broke the protocol (bad magic, oversized option, ...).
    #[error("nbd protocol: {0}")]
    Protocol(String),
    /// The server answered a request with an error (client side).
    #[error("nbd server replied errno {errno}")]
    Server {
        /// The errno in the reply.
        errno: u32,
    },
    /// The server refused the option or the export (client side).
    #[error("nbd server refused option {option}: reply type {reply:#x}: {message}")]
    Refused {
        /// The option.
        option: u32,
        /// The error reply type.
        reply: u32,
        /// The server's message (may be empty).
        message: String,
    },
    /// A listener could not be bound (hosting).
    #[error("nbd: cannot listen on {address}: {source}")]
    Bind {
        /// The socket path or TCP address.
        address: String,
        /// Why.
        source: std::io::Error,
    },
    /// An export source could not look up or list its exports (server side). A client
    /// asking for the export with NBD_OPT_INFO/GO gets NBD_REP_ERR_UNKNOWN with this message.
    #[error("nbd export source: {0}")]
    Source(String),
    /// The export exists but may not be served now, e.g. another writer holds its lease
    /// (server side). A client asking for it with NBD_OPT_INFO/GO gets NBD_REP_ERR_POLICY
    /// with this message.
    #[error("nbd export unavailable: {0}")]
    Unavailable(String),
}

/// Which command an error answers; the errno for a range error depends on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// READ.
    Read,
    /// WRITE, WRITE_ZEROES, TRIM.
    Write,
    /// FLUSH.
    Flush,
}

/// The NBD errno for a device error: EINVAL for misaligned requests and reads past the end,
/// ENOSPC for writes past the end, EPERM/ENOSPC when the OS said so, EIO otherwise.
pub fn errno_of(error: &DeviceError, direction: Direction) -> u32 {
    match error {
        DeviceError::Misaligned { .. } | DeviceError::InvalidConfig(_) => proto::EINVAL,
        DeviceError::OutOfRange { .. } => match direction {
            Direction::Write => proto::ENOSPC,
            Direction::Read | Direction::Flush => proto::EINVAL,
        },
        DeviceError::Io { errno, .. } => match *errno {
            1 | 13 | 30 => proto::EPERM, // EPERM, EACCES, EROFS
            28 => proto::ENOSPC,
            12 => proto::ENOMEM,
            _ => proto::EIO,
        },
        _ => proto::EIO,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_range_by_direction_and_os_errors() {
        let range = DeviceError::OutOfRange {
            offset_bytes: 0,
            length_bytes: 1,
            size_bytes: 0,
        };
        assert_eq!(errno_of(&range, Direction::Write), proto::ENOSPC);
        assert_eq!(errno_of(&range, Direction::Read), proto::EINVAL);
        let rofs = DeviceError::io("pwrite", std::io::Error::from_raw_os_error(30));
        assert_eq!(errno_of(&rofs, Direction::Write), proto::EPERM);
        assert_eq!(
            errno_of(&DeviceError::Poisoned, Direction::Flush),
            proto::EIO
        );
    }
}
