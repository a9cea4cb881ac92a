//! Online changes to the OSDs of a running cluster: override weights (`strata osd reweight`)
//! and device classes (`strata osd crush set-device-class|rm-device-class`).
//!
//! A reweight is state (`state.json`, as out and in are); a class is `cluster.toml`'s, so a
//! class change replaces that file (atomically, before `state.json`) and the topology the
//! state records, through [`Inner::change_map_with`]. Either way the change is one new
//! epoch: PGs whose up set moves keep their old holders as `pg_temp` until recovery has
//! copied them, as for `osd out`.

use std::io::Write as _;
use std::path::Path;

use osdmap::map::WEIGHT_IN;
use rados::RadosError;

use crate::config::{is_class_name, ClusterConfig};
use crate::error::{ClusterError, Result};
use crate::state::ClusterState;
use crate::Cluster;

impl Cluster {
    /// Sets an OSD's override weight, 0.0..=1.0 (Ceph's `osd reweight`): CRUSH keeps that
    /// share of the PGs it would give the OSD and places the rest elsewhere; recovery moves
    /// the data. `mark_in` sets it back to 1.0, as Ceph's `osd in` does. Returns the epoch.
    pub fn reweight(&self, osd: i32, weight: f64) -> Result<u64> {
        if !(0.0..=1.0).contains(&weight) {
            return Err(RadosError::InvalidArgument(format!(
                "weight {weight} must be from 0.0 to 1.0 (the share of its CRUSH placements \
                 osd.{osd} keeps; change its capacity share with its weight in cluster.toml)"
            ))
            .into());
        }
        let fixed = (weight * f64::from(WEIGHT_IN)).round() as u32;
        self.inner.change_map(|state| {
            let entry = state
                .osds
                .get_mut(&osd)
                .ok_or_else(|| RadosError::NotFound(format!("osd.{osd}")))?;
            entry.weight = fixed;
            Ok(())
        })
    }

    /// Gives each of `osds` device class `class` (Ceph's `osd crush set-device-class`): an
    /// OSD that already has it is left as it is; one with another class refuses the whole
    /// change until [`Cluster::rm_device_class`] removed it, as Ceph does. Persisted in
    /// `cluster.toml`; PGs of class rules move by recovery. Returns the epoch.
    pub fn set_device_class(&self, class: &str, osds: &[i32]) -> Result<u64> {
        if !is_class_name(class) {
            return Err(RadosError::InvalidArgument(format!(
                "class {class:?} must be non-empty [A-Za-z0-9_-]"
            ))
            .into());
        }
        let edit = |config: &mut ClusterConfig| -> Result<()> {
            for &id in osds {
                let osd = osd_config(config, id)?;
                if !osd.class.is_empty() && osd.class != class {
                    return Err(RadosError::Exists(format!(
                        "osd.{id} has already bound to class {:?}, can not reset class to \
                         {class:?}; use `strata osd crush rm-device-class {id}` to remove \
                         the old class first",
                        osd.class
                    ))
                    .into());
                }
                osd.class = class.to_string();
            }
            Ok(())
        };
        self.inner
            .change_map_with(Some(&edit), check_pools_placeable)
    }

    /// Removes the device class of each of `osds` (Ceph's `osd crush rm-device-class`): only
    /// rules taking any class place on them until a class is set again. Refused when a pool
    /// of a class would be left with fewer hosts of it than its size. Returns the epoch.
    pub fn rm_device_class(&self, osds: &[i32]) -> Result<u64> {
        let edit = |config: &mut ClusterConfig| -> Result<()> {
            for &id in osds {
                osd_config(config, id)?.class.clear();
            }
            Ok(())
        };
        self.inner
            .change_map_with(Some(&edit), check_pools_placeable)
    }
}

fn osd_config(config: &mut ClusterConfig, id: i32) -> Result<&mut crate::config::OsdConfig> {
    config
        .osds
        .iter_mut()
        .find(|osd| osd.id == id)
        .ok_or_else(|| RadosError::NotFound(format!("osd.{id}")).into())
}

/// Refuses a topology that leaves a pool of a device class fewer hosts with OSDs of that
/// class than the pool's size: its PGs could not get their replicas anywhere.
fn check_pools_placeable(state: &mut ClusterState, placed: &ClusterConfig) -> Result<()> {
    for pool in state.pools.values() {
        let class = state
            .rules
            .iter()
            .find(|rule| rule.name == pool.rule)
            .and_then(|rule| rule.class.as_deref());
        let Some(class) = class else { continue };
        let hosts = placed.hosts_with_class(Some(class));
        if (hosts as u32) < pool.size {
            return Err(RadosError::InvalidArgument(format!(
                "pool {:?} places {} replicas on class {class:?}, which would be left on {hosts} \
                 host(s)",
                pool.name, pool.size
            ))
            .into());
        }
    }
    Ok(())
}

/// Replaces `path` with `contents` atomically and durably (temp file, fsync, rename, fsync
/// of the directory): a crash leaves the old file or the new one, never a mix.
pub(crate) fn replace_file(path: &Path, contents: &[u8]) -> Result<()> {
    // `state.json` -> `state.json.tmp`: the temp file is named after the whole name.
    let mut temp_name = path.as_os_str().to_os_string();
    temp_name.push(".tmp");
    let temp = std::path::PathBuf::from(temp_name);
    let write = || -> std::io::Result<()> {
        let mut file = std::os::unix::fs::OpenOptionsExt::mode(
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true),
            device::PRIVATE_FILE_MODE,
        )
        .open(&temp)?;
        file.write_all(contents)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)?;
        if let Some(directory) = path.parent() {
            std::fs::File::open(directory)?.sync_all()?;
        }
        Ok(())
    };
    write().map_err(|e| ClusterError::io(path, e))
}
