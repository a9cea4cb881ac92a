//! The admin token: a random secret in the data directory that every `/api/...` request must
//! carry (`Authorization: Bearer TOKEN`).
//!
//! Why: the admin API creates S3 users and their keys, writes and deletes objects and marks
//! OSDs out; without a secret any local process (or anyone, if the endpoint is bound beyond
//! loopback) could mint S3 credentials and bypass the gateway's signature checks. The token
//! lives beside the cluster with mode 0600, like Ceph's admin keyring, so whoever can read the
//! data directory is the administrator. `/status` and `/metrics` stay open (read-only
//! monitoring, as Ceph's Prometheus endpoint).

use std::io::Write;
use std::path::{Path, PathBuf};

use rand::RngCore;

use crate::error::{Result, ServerError};

/// The token file's name inside the data directory.
pub const ADMIN_TOKEN_FILE: &str = "admin.token";

/// Where the token of the cluster in `data_dir` lives.
pub fn token_path(data_dir: &Path) -> PathBuf {
    data_dir.join(ADMIN_TOKEN_FILE)
}

/// Reads the token of `data_dir`, creating it (32 random bytes from the OS, hex, mode 0600,
/// fsync'd) on first use.
pub fn load_or_create(data_dir: &Path) -> Result<String> {
    let path = token_path(data_dir);
    let failed = |what: &str, error: std::io::Error| {
        ServerError::Shutdown(format!("{what} {}: {error}", path.display()))
    };
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let token = text.trim().to_string();
            if token.len() < 16 || !token.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(ServerError::BadRequest(format!(
                    "{} holds no usable token (16 or more printable characters); remove it to make a new one",
                    path.display()
                )));
            }
            Ok(token)
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let mut secret = [0u8; 32];
            rand::rngs::OsRng.fill_bytes(&mut secret);
            let token: String = secret.iter().map(|b| format!("{b:02x}")).collect();
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let mut file = options
                .open(&path)
                .map_err(|error| failed("creating", error))?;
            file.write_all(format!("{token}\n").as_bytes())
                .and_then(|()| file.sync_all())
                .map_err(|error| failed("writing", error))?;
            Ok(token)
        }
        Err(error) => Err(failed("reading", error)),
    }
}

/// Whether an `Authorization` header value carries `token` (compared in constant time).
pub fn authorizes(header: Option<&[u8]>, token: &str) -> bool {
    let Some(given) = header.and_then(|value| value.strip_prefix(b"Bearer ")) else {
        return false;
    };
    let expected = token.as_bytes();
    given.len() == expected.len()
        && given
            .iter()
            .zip(expected)
            .fold(0u8, |difference, (a, b)| difference | (a ^ b))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_once_private_and_checked() {
        let directory = tempfile::tempdir().unwrap();
        let token = load_or_create(directory.path()).unwrap();
        assert_eq!(token.len(), 64);
        assert_eq!(load_or_create(directory.path()).unwrap(), token, "kept");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(token_path(directory.path()))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let header = format!("Bearer {token}");
        assert!(authorizes(Some(header.as_bytes()), &token));
        assert!(!authorizes(None, &token));
        assert!(
            !authorizes(Some(token.as_bytes()), &token),
            "scheme missing"
        );
        let mut wrong = header.clone().into_bytes();
        *wrong.last_mut().unwrap() ^= 1;
        assert!(!authorizes(Some(&wrong), &token));
        assert!(!authorizes(Some(&header.as_bytes()[..20]), &token));
        std::fs::write(token_path(directory.path()), "short\n").unwrap();
        assert!(load_or_create(directory.path()).is_err());
    }
}
