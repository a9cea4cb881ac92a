//! The data directory is private: `0700`, and every file in it `0600` (objects, metadata and
//! the S3 gateway's keys live there). A directory found with looser modes (made by an older
//! build, or by hand) is tightened with a warning naming each change; one that cannot be
//! (another user owns it) is refused. OSD device files outside the directory are tightened
//! too; block devices keep their modes (see [`device::tighten`]).

use std::path::Path;

use crate::config::ClusterConfig;
use crate::error::{ClusterError, Result};

/// Creates `data_dir` (and missing parents) `0700`.
pub(crate) fn create_directory(data_dir: &Path) -> Result<()> {
    device::create_private_directory(data_dir).map_err(|e| ClusterError::io(data_dir, e))
}

/// Takes group and other permissions off `data_dir`, everything under it and the OSD device
/// files of `config` elsewhere. `report`: a warning per change (what an operator left
/// open), else a debug line (what a library just created under another umask).
pub(crate) fn tighten(data_dir: &Path, config: Option<&ClusterConfig>, report: bool) -> Result<()> {
    let mut roots = vec![data_dir.to_path_buf()];
    for osd in config.map_or(&[][..], |config| &config.osds[..]) {
        if let Ok(spec) = blockcache::LayeredSpec::parse(&osd.device) {
            for part in spec.devices() {
                if let device::Backing::File { path, .. } = &part.backing {
                    if path.is_absolute() && !path.starts_with(data_dir) {
                        roots.push(path.clone());
                    }
                }
            }
        }
    }
    for root in roots {
        let changed = device::tighten(&root).map_err(|error| {
            ClusterError::Config(format!(
                "{error}: strata keeps objects and keys there; make its owner the user \
                 running strata, or its mode 0700 (directories) / 0600 (files)"
            ))
        })?;
        for change in changed {
            let path = change.path.display();
            let (before, after) = (change.mode_before, change.mode_after);
            if report {
                tracing::warn!("{path} was readable by others (mode {before:o}): now {after:o}");
            } else {
                tracing::debug!("{path}: mode {before:o} -> {after:o}");
            }
        }
    }
    Ok(())
}
