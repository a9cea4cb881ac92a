//! Private files and directories: what strata keeps (objects, metadata, keys) is readable by
//! its owner only.
//!
//! Directories strata creates are `0700` and files `0600` ([`create_private_directory`],
//! [`FileDevice`](crate::FileDevice) creating its file); [`tighten`] takes the group and other
//! bits off what already exists (a data directory made by an older build, or by hand), and
//! returns what it changed so that the caller can say so. Only regular files and directories
//! are touched: symbolic links are not followed, and device nodes, sockets and FIFOs keep
//! their modes (a block device's mode is the system's business).

use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Mode of the directories strata creates.
pub const PRIVATE_DIRECTORY_MODE: u32 = 0o700;
/// Mode of the files strata creates.
pub const PRIVATE_FILE_MODE: u32 = 0o600;
/// Permission bits of the group and others, which private entries never have.
const SHARED_BITS: u32 = 0o077;
/// Bound on the depth [`tighten`] descends (a data directory is two or three levels deep).
const DEPTH_MAX: usize = 16;

/// Creates `path` and its missing parents with mode `0700` (existing ones are left as they
/// are: see [`tighten`]).
pub fn create_private_directory(path: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(PRIVATE_DIRECTORY_MODE)
        .create(path)
}

/// One entry whose mode [`tighten`] changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tightened {
    /// The file or directory.
    pub path: PathBuf,
    /// Its permission bits before.
    pub mode_before: u32,
    /// Its permission bits now.
    pub mode_after: u32,
}

/// An entry [`tighten`] could not make private.
#[derive(Debug, thiserror::Error)]
#[error("{} has mode {mode:o}, readable by others, and cannot be made private: {cause}", path.display())]
pub struct TightenError {
    /// The file or directory.
    pub path: PathBuf,
    /// Its permission bits.
    pub mode: u32,
    /// Why (typically EPERM: another user owns it).
    pub cause: io::Error,
}

/// Takes the group and other permission bits off `path` and, for a directory, everything
/// under it (regular files and directories only; see the module doc). Returns the entries
/// changed; a missing `path` changes nothing. Fails on the first entry that cannot be changed
/// (or read), naming it.
pub fn tighten(path: &Path) -> Result<Vec<Tightened>, TightenError> {
    let mut changed = Vec::new();
    tighten_into(path, 0, &mut changed)?;
    Ok(changed)
}

fn tighten_into(
    path: &Path,
    depth: usize,
    changed: &mut Vec<Tightened>,
) -> Result<(), TightenError> {
    let failed = |mode: u32| {
        let path = path.to_path_buf();
        move |cause: io::Error| TightenError { path, mode, cause }
    };
    let metadata = match std::fs::symlink_metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(failed(0)(error)),
    };
    let kind = metadata.file_type();
    if !(kind.is_file() || kind.is_dir()) {
        return Ok(());
    }
    let mode = metadata.permissions().mode() & 0o7777;
    if mode & SHARED_BITS != 0 {
        let private = mode & !SHARED_BITS;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(private))
            .map_err(failed(mode))?;
        changed.push(Tightened {
            path: path.to_path_buf(),
            mode_before: mode,
            mode_after: private,
        });
    }
    if kind.is_dir() && depth < DEPTH_MAX {
        let entries = std::fs::read_dir(path).map_err(failed(mode))?;
        for entry in entries {
            let entry = entry.map_err(failed(mode))?;
            tighten_into(&entry.path(), depth + 1, changed)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode_of(path: &Path) -> u32 {
        std::fs::symlink_metadata(path)
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    }

    #[test]
    fn tightens_what_others_could_read_and_nothing_else() {
        let directory = tempfile::tempdir().unwrap();
        let root = directory.path().join("data");
        create_private_directory(&root.join("sub")).unwrap();
        assert_eq!(mode_of(&root), 0o700);
        assert_eq!(mode_of(&root.join("sub")), 0o700);
        let loose = root.join("sub").join("osd.0.img");
        std::fs::write(&loose, b"secret").unwrap();
        std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
        let private = root.join("state.json");
        std::fs::write(&private, b"{}").unwrap();
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o600)).unwrap();
        let outside = directory.path().join("outside");
        std::fs::write(&outside, b"x").unwrap();
        std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();

        let changed = tighten(&root).unwrap();
        let paths: Vec<&Path> = changed.iter().map(|t| t.path.as_path()).collect();
        assert_eq!(paths, [root.as_path(), loose.as_path()]);
        assert_eq!(changed[1].mode_before, 0o644);
        assert_eq!(changed[1].mode_after, 0o600);
        assert_eq!(mode_of(&root), 0o700);
        assert_eq!(mode_of(&loose), 0o600);
        assert_eq!(mode_of(&outside), 0o644, "links are not followed");
        assert!(
            tighten(&root).unwrap().is_empty(),
            "a second pass finds nothing"
        );
        assert!(tighten(&directory.path().join("missing"))
            .unwrap()
            .is_empty());
    }
}
