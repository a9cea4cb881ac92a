//! The server's error type, and the one place where errors become HTTP statuses and the JSON
//! error body of the admin API.

use rados::RadosError;

/// Why serving or an admin request failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The cluster failed to open, create or shut down.
    #[error(transparent)]
    Cluster(#[from] cluster::ClusterError),
    /// An operation of the cluster failed.
    #[error(transparent)]
    Rados(#[from] RadosError),
    /// The S3 gateway failed to start.
    #[error("S3 gateway: {0}")]
    Gateway(String),
    /// An endpoint could not be bound.
    #[error("bind {addr}: {source}")]
    Bind {
        /// The address.
        addr: std::net::SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The request is malformed; the message names the problem.
    #[error("bad request: {0}")]
    BadRequest(String),
    /// No such endpoint.
    #[error("no such endpoint: {method} {path}")]
    NoRoute {
        /// Method.
        method: String,
        /// Path.
        path: String,
    },
    /// An `/api/...` request without the admin token, or with a wrong one.
    #[error("admin token missing or wrong: send `Authorization: Bearer TOKEN` with the token in {token_file} of the data directory (the CLI reads it with --data DIR, or takes STRATA_ADMIN_TOKEN)")]
    Unauthorized {
        /// The token file's name.
        token_file: &'static str,
    },
    /// The request body is larger than allowed.
    #[error("body larger than {limit_bytes} bytes")]
    TooLarge {
        /// The limit.
        limit_bytes: usize,
    },
    /// Shutdown could not complete.
    #[error("shutdown: {0}")]
    Shutdown(String),
    /// The storage backend failed outside an object operation (connecting, a monitor
    /// command); the message says which.
    #[error("backend: {0}")]
    Backend(String),
    /// A volume call failed.
    #[error(transparent)]
    Volume(#[from] volume::VolumeError),
    /// A cache tier command failed.
    #[error(transparent)]
    Tier(#[from] tier::TierError),
    /// The resource is in use (the message says by whom).
    #[error("busy: {0}")]
    Busy(String),
    /// The backend does not offer this (the message names it and the backend).
    #[error("not supported: {0}")]
    NotSupported(String),
}

/// The server's result type.
pub type Result<T, E = ServerError> = std::result::Result<T, E>;

impl ServerError {
    /// HTTP status and a short machine-readable code.
    pub fn status(&self) -> (u16, &'static str) {
        match self {
            ServerError::BadRequest(_) => (400, "BadRequest"),
            ServerError::Unauthorized { .. } => (401, "Unauthorized"),
            ServerError::NoRoute { .. } => (404, "NoSuchEndpoint"),
            ServerError::TooLarge { .. } => (413, "TooLarge"),
            ServerError::NotSupported(_) => (501, "NotSupported"),
            ServerError::Backend(_) => (502, "Backend"),
            ServerError::Rados(error) => rados_status(error),
            ServerError::Busy(_) => (409, "Busy"),
            ServerError::Volume(error) => volume_status(error),
            ServerError::Tier(error) => tier_status(error),
            ServerError::Cluster(cluster::ClusterError::Rados(error)) => rados_status(error),
            ServerError::Cluster(cluster::ClusterError::Config(_)) => (400, "InvalidArgument"),
            _ => (500, "Internal"),
        }
    }

    /// The JSON body of an error reply.
    pub fn to_json(&self) -> serde_json::Value {
        let (_, code) = self.status();
        serde_json::json!({ "error": self.to_string(), "code": code })
    }
}

fn tier_status(error: &tier::TierError) -> (u16, &'static str) {
    use tier::TierError;
    match error {
        TierError::Invalid(_) => (400, "InvalidArgument"),
        TierError::Busy(_) | TierError::FlushInFlight { .. } => (409, "Busy"),
        TierError::NotFound(_) => (404, "NotFound"),
        TierError::Rados(error) => rados_status(error),
        TierError::FlushConflict { .. } => (409, "Conflict"),
        _ => (500, "Internal"),
    }
}

fn volume_status(error: &volume::VolumeError) -> (u16, &'static str) {
    use volume::VolumeError;
    match error {
        VolumeError::InvalidName { .. }
        | VolumeError::InvalidSize { .. }
        | VolumeError::InvalidOrder { .. } => (400, "InvalidArgument"),
        VolumeError::Exists { .. } => (409, "Exists"),
        VolumeError::NotFound { .. } => (404, "NotFound"),
        VolumeError::Unsupported { .. } => (422, "Unsupported"),
        VolumeError::Malformed { .. } => (422, "Malformed"),
        VolumeError::Leased { .. } => (423, "Leased"),
        VolumeError::LeaseLost { .. } | VolumeError::Conflict { .. } => (409, "Conflict"),
        VolumeError::ReadOnly { .. } => (403, "ReadOnly"),
        VolumeError::Rados { source, .. } => rados_status(source),
        _ => (500, "Internal"),
    }
}

fn rados_status(error: &RadosError) -> (u16, &'static str) {
    match error {
        RadosError::NotFound(_) => (404, "NotFound"),
        RadosError::Exists(_) => (409, "Exists"),
        RadosError::InvalidArgument(_) => (400, "InvalidArgument"),
        RadosError::CompareFailed(_) => (412, "CompareFailed"),
        RadosError::NoSpace(_) => (507, "NoSpace"),
        RadosError::Degraded { .. } => (503, "Degraded"),
        RadosError::TimedOut(_) => (503, "TimedOut"),
        RadosError::Busy(_) => (503, "Busy"),
        RadosError::Shutdown => (503, "Shutdown"),
        RadosError::NotSupported(_) => (501, "NotSupported"),
        RadosError::Checksum(_) => (500, "Checksum"),
        _ => (500, "Io"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_mistakes_are_4xx() {
        assert_eq!(ServerError::BadRequest("x".into()).status().0, 400);
        assert_eq!(
            ServerError::Rados(RadosError::NotFound("o".into()))
                .status()
                .0,
            404
        );
        assert_eq!(
            ServerError::Rados(RadosError::Exists("p".into()))
                .status()
                .0,
            409
        );
        let body = ServerError::BadRequest("size: 0".into()).to_json();
        assert_eq!(body["code"], "BadRequest");
        assert!(body["error"]
            .as_str()
            .is_some_and(|e| e.contains("size: 0")));
    }
}
