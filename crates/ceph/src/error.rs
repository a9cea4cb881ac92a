//! The crate's error type, and the one place librados' errno values become [`RadosError`]s.

use rados::RadosError;

/// Why connecting to Ceph or a control-plane command failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CephError {
    /// `librados.so.2` could not be loaded.
    #[error(
        "cannot load librados ({0}); the Ceph backend needs Ceph's client library: install the \
         Debian/Ubuntu package `librados2` (or your distribution's librados, Ceph 16.2 or newer)"
    )]
    LibraryMissing(String),
    /// The loaded librados lacks a function this binding needs (an older Ceph).
    #[error("librados lacks {symbol} ({reason}); Ceph 16.2 or newer is needed")]
    LibrarySymbol {
        /// The missing C function.
        symbol: &'static str,
        /// What the loader said.
        reason: String,
    },
    /// A setting was refused before connecting (unknown option, unreadable ceph.conf...).
    #[error("Ceph configuration: {0}")]
    Config(String),
    /// A librados call failed.
    #[error("{call}: {message} (errno {errno})")]
    Call {
        /// What was being done.
        call: String,
        /// The positive errno.
        errno: i32,
        /// strerror text, and the monitor's message for commands.
        message: String,
    },
    /// A monitor's reply did not parse as expected.
    #[error("unexpected reply to {command}: {reason}")]
    Reply {
        /// The command's prefix.
        command: String,
        /// What was wrong.
        reason: String,
    },
}

impl CephError {
    /// A failed call from its (negative or positive) librados return value.
    pub fn call(call: impl Into<String>, return_value: i32, detail: &str) -> Self {
        let errno = return_value.abs();
        let mut message = strerror(errno);
        if !detail.is_empty() {
            message = format!("{message}: {detail}");
        }
        CephError::Call {
            call: call.into(),
            errno,
            message,
        }
    }
}

impl From<CephError> for RadosError {
    fn from(error: CephError) -> Self {
        match error {
            CephError::Call {
                errno, ref call, ..
            } => from_errno(errno, call, &error.to_string()),
            CephError::LibraryMissing(_) | CephError::LibrarySymbol { .. } => {
                RadosError::NotSupported(error.to_string())
            }
            CephError::Config(_) => RadosError::InvalidArgument(error.to_string()),
            CephError::Reply { .. } => RadosError::Io(error.to_string()),
        }
    }
}

/// The one mapping of librados' errno values (positive) to [`RadosError`]. `what` names the
/// object or pool for `NotFound`/`Exists`, `context` is the full message for the others.
pub fn from_errno(errno: i32, what: &str, context: &str) -> RadosError {
    match errno {
        libc::ENOENT => RadosError::NotFound(what.to_string()),
        libc::EEXIST => RadosError::Exists(what.to_string()),
        libc::ENOSPC | libc::EDQUOT => RadosError::NoSpace(context.to_string()),
        libc::ECANCELED => RadosError::CompareFailed(context.to_string()),
        libc::EINVAL | libc::ENAMETOOLONG | libc::E2BIG | libc::EFBIG | libc::ERANGE => {
            RadosError::InvalidArgument(context.to_string())
        }
        libc::EBADMSG => RadosError::Checksum(context.to_string()),
        libc::EOPNOTSUPP => RadosError::NotSupported(context.to_string()),
        libc::ESHUTDOWN => RadosError::Shutdown,
        // A degraded or unreachable PG blocks an op until `rados_osd_op_timeout`: the client
        // sees a retryable timeout saying so, never a hang.
        libc::ETIMEDOUT => RadosError::TimedOut(format!(
            "{context}: no answer within the op timeout (rados_osd_op_timeout, \
             CephConfig::op_timeout_s): a placement group may be degraded or an OSD down; retry \
             later"
        )),
        libc::EAGAIN | libc::EBUSY => RadosError::Busy(format!("{context} (errno {errno})")),
        _ => RadosError::Io(format!("{context} (errno {errno})")),
    }
}

/// The operating system's text for a (positive) errno.
pub fn strerror(errno: i32) -> String {
    std::io::Error::from_raw_os_error(errno).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errnos_map_to_the_contract_errors() {
        assert_eq!(
            from_errno(libc::ENOENT, "o", "x"),
            RadosError::NotFound("o".into())
        );
        assert!(matches!(
            from_errno(libc::ECANCELED, "o", "x"),
            RadosError::CompareFailed(_)
        ));
        assert!(matches!(
            from_errno(libc::ENAMETOOLONG, "o", "x"),
            RadosError::InvalidArgument(_)
        ));
        let timeout = from_errno(libc::ETIMEDOUT, "o", "write o");
        assert!(matches!(timeout, RadosError::TimedOut(_)));
        assert!(timeout.is_retryable());
        for errno in [libc::EAGAIN, libc::EBUSY] {
            let busy = from_errno(errno, "o", "write o");
            assert!(
                matches!(busy, RadosError::Busy(_)) && busy.is_retryable(),
                "{busy}"
            );
        }
        for errno in [libc::ENOSPC, libc::EDQUOT] {
            assert!(matches!(
                from_errno(errno, "o", "write o"),
                RadosError::NoSpace(_)
            ));
        }
        assert!(timeout.to_string().contains("op timeout"));
        let missing = RadosError::from(CephError::LibraryMissing("not found".into()));
        assert!(missing.to_string().contains("librados2"));
    }
}
