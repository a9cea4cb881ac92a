//! The one error type of the RADOS API, and its errno mapping (in one place).

/// POSIX errno values, as librados returns them (negated there).
pub mod errno {
    /// Operation not permitted.
    pub const EPERM: i32 = 1;
    /// No such object, pool, xattr.
    pub const ENOENT: i32 = 2;
    /// I/O error.
    pub const EIO: i32 = 5;
    /// Try again (PG below min_size, OSDs down).
    pub const EAGAIN: i32 = 11;
    /// Device or resource busy.
    pub const EBUSY: i32 = 16;
    /// Timed out.
    pub const ETIMEDOUT: i32 = 110;
    /// Already exists.
    pub const EEXIST: i32 = 17;
    /// Invalid argument.
    pub const EINVAL: i32 = 22;
    /// No space left on device.
    pub const ENOSPC: i32 = 28;
    /// Not supported.
    pub const EOPNOTSUPP: i32 = 95;
    /// Shut down.
    pub const ESHUTDOWN: i32 = 108;
    /// Data checksum mismatch (Linux EBADMSG, what BlueStore returns for a bad csum).
    pub const EBADMSG: i32 = 74;
    /// A guard of a compound operation did not hold (librados returns ECANCELED for a failed
    /// cmpxattr).
    pub const ECANCELED: i32 = 125;
}

/// Why a RADOS operation failed.
///
/// Every backend (the embedded cluster, librados) maps its failures to these; user-facing
/// layers map these to their codes (S3 errors, NBD errno, CLI exit codes) with [`RadosError::errno`]
/// as the common denominator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RadosError {
    /// The object, pool or attribute does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// An exclusive create found the object (or pool) already there.
    #[error("already exists: {0}")]
    Exists(String),
    /// No space left on an OSD the operation needed.
    #[error("no space: {0}")]
    NoSpace(String),
    /// Fewer replicas than the pool's `min_size` are available: the cluster refuses the write
    /// (or, with none at all, the read) rather than lose redundancy silently. Retry later.
    #[error(
        "placement group {pg} is degraded: {available} replicas available, min_size {min_size}"
    )]
    Degraded {
        /// The PG, as `pool.seed` in hex (`1.2a`).
        pg: String,
        /// Replicas holding the latest data that are up.
        available: u32,
        /// The pool's min_size.
        min_size: u32,
    },
    /// No answer within the backend's op timeout (librados' `rados_osd_op_timeout`: a PG that
    /// lost too many OSDs blocks instead of failing). Nothing is known of whether a write
    /// applied; retry later (a retried write is whole, so it converges).
    #[error("timed out: {0}")]
    TimedOut(String),
    /// The backend refused the request for now (librados' EAGAIN or EBUSY: a PG peering, a
    /// resource held). Nothing was applied; retry after a pause.
    #[error("busy, retry later: {0}")]
    Busy(String),
    /// A device or store failed and no other replica could serve the request.
    #[error("I/O error: {0}")]
    Io(String),
    /// Every replica's copy of the data failed its checksum: the data is lost, and the cluster
    /// refuses to return any of it.
    #[error("checksum mismatch on every replica: {0}")]
    Checksum(String),
    /// The request is malformed (bad name, bad range, bad pool parameters...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A guard of a compound operation (compare xattr) did not hold; nothing was applied.
    #[error("comparison failed: {0}")]
    CompareFailed(String),
    /// The backend does not implement this operation.
    #[error("not supported: {0}")]
    NotSupported(String),
    /// The cluster handle was shut down.
    #[error("cluster is shut down")]
    Shutdown,
}

impl RadosError {
    /// The POSIX errno this error stands for (positive; librados returns it negated).
    pub fn errno(&self) -> i32 {
        match self {
            RadosError::NotFound(_) => errno::ENOENT,
            RadosError::Exists(_) => errno::EEXIST,
            RadosError::NoSpace(_) => errno::ENOSPC,
            RadosError::Degraded { .. } => errno::EAGAIN,
            RadosError::TimedOut(_) => errno::ETIMEDOUT,
            RadosError::Busy(_) => errno::EBUSY,
            RadosError::Io(_) => errno::EIO,
            RadosError::Checksum(_) => errno::EBADMSG,
            RadosError::InvalidArgument(_) => errno::EINVAL,
            RadosError::CompareFailed(_) => errno::ECANCELED,
            RadosError::NotSupported(_) => errno::EOPNOTSUPP,
            RadosError::Shutdown => errno::ESHUTDOWN,
        }
    }

    /// Whether retrying the same request later may succeed (degraded PGs, timeouts, a busy
    /// backend, transient I/O).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            RadosError::Degraded { .. }
                | RadosError::TimedOut(_)
                | RadosError::Busy(_)
                | RadosError::Io(_)
        )
    }
}

/// The result type of the RADOS API.
pub type Result<T, E = RadosError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_mapping_is_distinct_per_variant() {
        let errors = [
            RadosError::NotFound("o".into()),
            RadosError::Exists("o".into()),
            RadosError::NoSpace("osd.1".into()),
            RadosError::Degraded {
                pg: "1.0".into(),
                available: 1,
                min_size: 2,
            },
            RadosError::TimedOut("write o".into()),
            RadosError::Busy("write o".into()),
            RadosError::Io("eio".into()),
            RadosError::Checksum("o".into()),
            RadosError::InvalidArgument("x".into()),
            RadosError::CompareFailed("x".into()),
            RadosError::NotSupported("x".into()),
            RadosError::Shutdown,
        ];
        let mut codes: Vec<i32> = errors.iter().map(RadosError::errno).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), errors.len());
        assert!(errors[3].is_retryable());
        assert!(errors[4].is_retryable() && errors[5].is_retryable());
        assert!(!errors[0].is_retryable());
    }
}
