//! The cluster's volumes, for NBD and the admin API: [`VolumeExports`] finds `pool/volume`
//! exports on any backend (it sees only `dyn Rados`), keeps each volume open once for every
//! connection to it (one lease, one size), and carries out the admin API's volume calls so
//! that a resize of a served volume goes through the open handle.
//!
//! A volume stays open while connections use it; the next lookup after the last one ended
//! closes it (releasing its lease), so another writer (a `strata serve` on the same Ceph
//! pool) may take it.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use device::Device;
use nbd::{Export, ExportConfig, ExportSource, NbdError};
use rados::{Rados, RadosError};
use tokio::sync::Mutex;
use volume::{OpenMode, Volume, VolumeError, VolumeInfo, Volumes, VolumesConfig};

use crate::error::{Result, ServerError};

/// The pool `strata volume` uses when none is named (rbd's default pool name).
pub const VOLUME_POOL_DEFAULT: &str = "rbd";

/// Every volume of every pool, as NBD exports named `pool/volume`.
pub struct VolumeExports {
    rados: Arc<dyn Rados>,
    config: VolumesConfig,
    catalogues: Mutex<BTreeMap<String, Volumes>>,
    /// Open volumes by export name; an entry whose only holder is this map is unused.
    open: Mutex<BTreeMap<String, Arc<Volume>>>,
}

/// The lease holder id of the server of `data_dir`: `strata-serve:<host>:<data dir>`, the
/// same across its restarts and no other server's.
pub fn holder_for(data_dir: &std::path::Path) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_string())
        .unwrap_or_else(|_| "localhost".into());
    let directory = std::fs::canonicalize(data_dir).unwrap_or_else(|_| data_dir.to_path_buf());
    format!("strata-serve:{host}:{}", directory.display())
}

/// Splits an export name `pool/volume`.
pub fn split_export_name(name: &str) -> Option<(&str, &str)> {
    let (pool, volume) = name.split_once('/')?;
    (!pool.is_empty() && !volume.is_empty()).then_some((pool, volume))
}

impl VolumeExports {
    /// The volumes of `rados`'s pools.
    pub fn new(rados: Arc<dyn Rados>, config: VolumesConfig) -> Self {
        Self {
            rados,
            config,
            catalogues: Mutex::default(),
            open: Mutex::default(),
        }
    }

    /// The catalogue of `pool` (`NotFound` if there is no such pool).
    pub async fn catalogue(&self, pool: &str) -> Result<Volumes> {
        let mut catalogues = self.catalogues.lock().await;
        if let Some(volumes) = catalogues.get(pool) {
            return Ok(volumes.clone());
        }
        let io_ctx = self.rados.io_ctx(pool).await?;
        let volumes = Volumes::on_cluster(self.rados.clone(), io_ctx, self.config.clone());
        catalogues.insert(pool.to_string(), volumes.clone());
        Ok(volumes)
    }

    /// Closes the open volumes no connection uses any more.
    async fn close_unused(&self) {
        let unused: Vec<Arc<Volume>> = {
            let mut open = self.open.lock().await;
            let names: Vec<String> = open
                .iter()
                .filter(|(_, volume)| Arc::strong_count(volume) == 1)
                .map(|(name, _)| name.clone())
                .collect();
            names.iter().filter_map(|name| open.remove(name)).collect()
        };
        for volume in unused {
            close(volume).await;
        }
    }

    /// The open volume `pool/name`, opening it for writing if needed.
    pub async fn open(&self, pool: &str, name: &str) -> Result<Arc<Volume>> {
        self.close_unused().await;
        let export = format!("{pool}/{name}");
        let mut open = self.open.lock().await;
        if let Some(volume) = open.get(&export) {
            return Ok(volume.clone());
        }
        let volume = Arc::new(
            self.catalogue(pool)
                .await?
                .open(name, OpenMode::ReadWrite)
                .await?,
        );
        open.insert(export, volume.clone());
        Ok(volume)
    }

    /// `pool/name` of every volume, by pool then name.
    pub async fn list_all(&self) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for pool in self.rados.pool_list().await? {
            let volumes = match self.catalogue(&pool.name).await {
                Ok(volumes) => volumes,
                Err(ServerError::Rados(RadosError::NotFound(_))) => continue, // deleted meanwhile
                Err(error) => return Err(error),
            };
            for name in volumes.list().await? {
                names.push(format!("{}/{name}", pool.name));
            }
        }
        Ok(names)
    }

    /// Creates a volume, its data objects in `data_pool` when given (rbd's `--data-pool`).
    pub async fn create(
        &self,
        pool: &str,
        name: &str,
        size_bytes: u64,
        order: u8,
        data_pool: Option<&str>,
    ) -> Result<VolumeInfo> {
        Ok(self
            .catalogue(pool)
            .await?
            .create_in(name, size_bytes, order, data_pool)
            .await?)
    }

    /// The name of the pool of id `id`, if there is one.
    pub async fn pool_name(&self, id: i64) -> Option<String> {
        let pools = self.rados.pool_list().await.ok()?;
        pools
            .into_iter()
            .find(|pool| pool.id == id)
            .map(|pool| pool.name)
    }

    /// Describes a volume.
    pub async fn info(&self, pool: &str, name: &str) -> Result<VolumeInfo> {
        Ok(self.catalogue(pool).await?.info(name).await?)
    }

    /// Resizes a volume, through its open handle when it is served.
    pub async fn resize(&self, pool: &str, name: &str, size_bytes: u64) -> Result<VolumeInfo> {
        self.close_unused().await;
        let served = self
            .open
            .lock()
            .await
            .get(&format!("{pool}/{name}"))
            .cloned();
        let volumes = self.catalogue(pool).await?;
        match served {
            Some(volume) => {
                volume.resize(size_bytes).await?;
                Ok(volumes.info(name).await?)
            }
            None => Ok(volumes.resize(name, size_bytes).await?),
        }
    }

    /// Removes a volume; refused while NBD clients use it.
    pub async fn remove(&self, pool: &str, name: &str) -> Result<()> {
        self.close_unused().await;
        if self
            .open
            .lock()
            .await
            .contains_key(&format!("{pool}/{name}"))
        {
            return Err(ServerError::Busy(format!(
                "volume {pool}/{name} is in use by NBD clients; disconnect them first"
            )));
        }
        Ok(self.catalogue(pool).await?.remove(name).await?)
    }

    /// Closes every open volume (their leases released); connections still using one get
    /// errors from then on.
    pub async fn close_all(&self) {
        let open = std::mem::take(&mut *self.open.lock().await);
        for (_, volume) in open {
            close(volume).await;
        }
    }
}

/// Releases a volume's lease now if this is its last handle (else when the last one drops).
async fn close(volume: Arc<Volume>) {
    let name = volume.name().to_string();
    if let Ok(volume) = Arc::try_unwrap(volume) {
        if let Err(error) = volume.close().await {
            tracing::warn!(volume = %name, %error, "closing the volume failed");
        }
    }
}

#[async_trait]
impl ExportSource for VolumeExports {
    async fn find(&self, name: &[u8]) -> Result<Option<Export>, NbdError> {
        let Some((pool, volume)) = std::str::from_utf8(name).ok().and_then(split_export_name)
        else {
            return Ok(None);
        };
        match self.open(pool, volume).await {
            Ok(opened) => Ok(Some(Export {
                device: opened as Arc<dyn Device>,
                config: ExportConfig {
                    name: format!("{pool}/{volume}"),
                    description: format!("strata volume {pool}/{volume}"),
                    ..ExportConfig::default()
                },
            })),
            Err(ServerError::Volume(VolumeError::NotFound { .. }))
            | Err(ServerError::Volume(VolumeError::InvalidName { .. }))
            | Err(ServerError::Rados(RadosError::NotFound(_))) => Ok(None),
            Err(error @ ServerError::Volume(VolumeError::Leased { .. })) => {
                tracing::info!(export = %String::from_utf8_lossy(name), %error, "volume refused to an NBD client");
                Err(NbdError::Unavailable(error.to_string()))
            }
            Err(error) => {
                tracing::warn!(export = %String::from_utf8_lossy(name), %error, "cannot export the volume");
                Err(NbdError::Source(error.to_string()))
            }
        }
    }

    async fn list(&self) -> Result<Vec<String>, NbdError> {
        self.list_all()
            .await
            .map_err(|error| NbdError::Source(error.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rados::memory::MemoryRados;
    use rados::PoolSpec;

    #[test]
    fn export_names_are_pool_slash_volume() {
        assert_eq!(split_export_name("rbd/vm1"), Some(("rbd", "vm1")));
        assert_eq!(split_export_name("rbd/a/b"), Some(("rbd", "a/b")));
        for bad in ["", "rbd", "rbd/", "/vm1"] {
            assert_eq!(split_export_name(bad), None, "{bad:?}");
        }
    }

    #[tokio::test]
    async fn connections_share_one_open_volume_and_a_served_volume_is_not_removed() {
        let rados = Arc::new(MemoryRados::new());
        rados.pool_create(PoolSpec::new("rbd")).await.unwrap();
        let exports = VolumeExports::new(rados.clone(), VolumesConfig::default());
        exports
            .create("rbd", "vm1", 1 << 20, 22, None)
            .await
            .unwrap();
        assert_eq!(exports.list().await.unwrap(), vec!["rbd/vm1".to_string()]);
        assert!(exports.find(b"rbd/missing").await.unwrap().is_none());
        assert!(exports.find(b"nopool/vm1").await.unwrap().is_none());
        let first = exports.find(b"rbd/vm1").await.unwrap().unwrap();
        let second = exports.find(b"rbd/vm1").await.unwrap().unwrap();
        first.device.write_at(0, &[5u8; 512]).await.unwrap();
        let mut block = [0u8; 512];
        second.device.read_at(0, &mut block).await.unwrap();
        assert_eq!(block, [5u8; 512]);
        assert!(matches!(
            exports.remove("rbd", "vm1").await,
            Err(ServerError::Busy(_))
        ));
        // Served, it is resized through the open handle, which the connections see.
        exports.resize("rbd", "vm1", 2 << 20).await.unwrap();
        assert_eq!(first.device.size_bytes(), 2 << 20);
        drop((first, second));
        exports.remove("rbd", "vm1").await.unwrap();
        assert!(exports.list().await.unwrap().is_empty());
    }

    /// A volume another writer leases is unavailable (NBD_REP_ERR_POLICY for the client), with
    /// a message naming that writer, not a failure of the source.
    #[tokio::test]
    async fn a_volume_leased_elsewhere_is_unavailable_naming_the_holder() {
        let rados = Arc::new(MemoryRados::new());
        rados.pool_create(PoolSpec::new("rbd")).await.unwrap();
        let config = |holder: &str| VolumesConfig {
            holder: Some(holder.into()),
            ..VolumesConfig::default()
        };
        let here = VolumeExports::new(rados.clone(), config("strata-serve:host-a:/data"));
        let there = VolumeExports::new(rados.clone(), config("strata-serve:host-b:/data"));
        here.create("rbd", "vm1", 1 << 20, 22, None).await.unwrap();
        let held = here.find(b"rbd/vm1").await.unwrap().unwrap();
        match there.find(b"rbd/vm1").await {
            Err(NbdError::Unavailable(message)) => {
                assert!(message.contains("host-a"), "{message}");
            }
            Err(other) => panic!("expected Unavailable, got {other}"),
            Ok(_) => panic!("a leased volume was exported twice"),
        }
        drop(held);
    }
}
