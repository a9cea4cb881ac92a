//! The S3 master key: the 256-bit key the gateway seals users' secret keys with
//! ([`gateway::secrets`]), kept in the data directory as `s3-master.key` (64 hexadecimal
//! digits, mode 0600, created on first start) unless the operator gives one
//! (`STRATA_S3_MASTER_KEY`, or a file, on `strata serve`'s command line).
//!
//! Why beside the data, like the admin token: the key protects the users table against
//! whoever reads the OSD files without the directory (a copied image, a disk sent for
//! repair, a backup of the files alone); an operator who wants more keeps the key elsewhere
//! and gives it at start.

use std::io::Write;
use std::path::{Path, PathBuf};

use gateway::MasterKey;

use crate::error::{Result, ServerError};

/// The key file's name inside the data directory.
pub const MASTER_KEY_FILE: &str = "s3-master.key";

/// The environment variable that gives the key (64 hex digits) instead of a file.
pub const MASTER_KEY_ENV: &str = "STRATA_S3_MASTER_KEY";

/// Where the master key of the cluster in `data_dir` lives.
pub fn master_key_path(data_dir: &Path) -> PathBuf {
    data_dir.join(MASTER_KEY_FILE)
}

/// Reads the key file at `path` (64 hex digits).
pub fn read(path: &Path) -> Result<MasterKey> {
    let text = std::fs::read_to_string(path).map_err(|error| {
        ServerError::BadRequest(format!(
            "reading the S3 master key {}: {error}",
            path.display()
        ))
    })?;
    MasterKey::from_hex(&text)
        .map_err(|error| ServerError::BadRequest(format!("{}: {error}", path.display())))
}

/// Reads the key of `data_dir`, creating it (32 random bytes from the OS, hex, mode 0600,
/// fsync'd) on first use.
pub fn load_or_create(data_dir: &Path) -> Result<MasterKey> {
    let path = master_key_path(data_dir);
    if path.exists() {
        return read(&path);
    }
    let key = MasterKey::generate();
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, device::PRIVATE_FILE_MODE);
    let failed = |what: &str, error: std::io::Error| {
        ServerError::Shutdown(format!("{what} {}: {error}", path.display()))
    };
    let mut file = options
        .open(&path)
        .map_err(|error| failed("creating", error))?;
    file.write_all(format!("{}\n", key.to_hex()).as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|error| failed("writing", error))?;
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn created_private_once_then_read() {
        let directory = tempfile::tempdir().unwrap();
        let key = load_or_create(directory.path()).unwrap();
        let path = master_key_path(directory.path());
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(load_or_create(directory.path()).unwrap(), key);
        std::fs::write(&path, "short\n").unwrap();
        let error = load_or_create(directory.path()).unwrap_err().to_string();
        assert!(error.contains("64 hexadecimal digits"), "{error}");
    }
}
