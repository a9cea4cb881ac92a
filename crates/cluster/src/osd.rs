//! One OSD: a [`store::Store`] on one device, with object-level statistics. In one process,
//! "sending an op to an OSD" is calling its store.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use device::{Device, DeviceKind, DeviceStats, OpKind, StatsRecorder};
use store::{Store, StoreConfig, StoreError, Transaction};

use crate::config::OsdConfig;
use crate::error::{ClusterError, Result};

/// Xattr holding an object's version (u64, little endian) on every replica.
pub const VERSION_XATTR: &str = "_strata.v";

/// A whole object as one replica holds it, for copies (recovery, repair) and comparisons
/// (scrub).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectImage {
    /// Data.
    pub data: Vec<u8>,
    /// Every xattr, the version included.
    pub xattrs: BTreeMap<String, Vec<u8>>,
    /// Every omap entry.
    pub omap: Vec<(Vec<u8>, Vec<u8>)>,
    /// Modification time.
    pub mtime_ns: u64,
}

impl ObjectImage {
    /// The version recorded in the image (0 if none).
    pub fn version(&self) -> u64 {
        self.xattrs
            .get(VERSION_XATTR)
            .map_or(0, |v| decode_version(v))
    }

    /// A digest of data, xattrs and omap (xxh3, 64 bits, every field length-prefixed), for
    /// scrub comparisons. Not a crc32c: a crc is linear, so data made of pieces that each end
    /// with their own crc32c has one crc32c whatever the pieces hold, and two replicas that
    /// diverged (one missed a write) would compare equal.
    pub fn digest(&self) -> u64 {
        let mut hasher = xxhash_rust::xxh3::Xxh3::new();
        let mut field = |bytes: &[u8]| {
            hasher.update(&(bytes.len() as u64).to_le_bytes());
            hasher.update(bytes);
        };
        field(&self.data);
        for (key, value) in &self.xattrs {
            field(key.as_bytes());
            field(value);
        }
        for (key, value) in &self.omap {
            field(key);
            field(value);
        }
        hasher.digest()
    }
}

/// Decodes a version xattr value.
pub fn decode_version(bytes: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    for (slot, byte) in word.iter_mut().zip(bytes) {
        *slot = *byte;
    }
    u64::from_le_bytes(word)
}

/// One OSD of the embedded cluster.
pub struct Osd {
    /// Its id.
    pub id: i32,
    /// Its host.
    pub host: String,
    /// Its device class.
    pub class: String,
    store: Store,
    /// Object-level operations served (reads, writes), their latency, queue depth, busy time.
    ops: StatsRecorder,
    /// A setting of `cluster.toml` the store does not follow (see [`Osd::config_warning`]).
    config_warning: Option<String>,
    /// Space reserved by writes in flight and the last full level seen ([`crate::full`]).
    pub(crate) space: crate::full::SpaceTracker,
    /// The block cache under the store when its device spec is cached, stopped cleanly at
    /// [`Osd::shutdown`].
    cache: Option<Arc<blockcache::BlockCache>>,
}

impl Osd {
    /// Opens (or creates) the OSD's device and store under `directory`.
    pub async fn open(
        config: &OsdConfig,
        data_dir: &Path,
        durable: bool,
        wrap: Option<&crate::DeviceWrapper>,
        create: bool,
    ) -> Result<Osd> {
        let (device, cache) = open_device(config, data_dir, create).await?;
        let device = match wrap {
            Some(wrap) => wrap(config.id, device),
            None => device,
        };
        let meta = meta_path(data_dir, config.id);
        let store_config = StoreConfig {
            min_alloc_size_bytes: config.min_alloc_size,
            data_cache_bytes: config.data_cache_bytes(),
            durable,
            // A damaged log is refilled from the peers (see the `peering` module).
            salvage_damaged_log: true,
            ..StoreConfig::default()
        };
        let store = if create && !meta.exists() {
            Store::create(device, &meta, store_config).await
        } else {
            Store::open(device, &meta, store_config).await
        }
        .map_err(|source| ClusterError::Store {
            osd: config.id,
            source,
        })?;
        let recorded = store.statfs().min_alloc_size_bytes;
        let warning = (recorded != config.min_alloc_size).then(|| {
            let warning = format!(
                "osd.{}: cluster.toml's min_alloc_size {} is ignored: its store was created \
                 with {recorded}, which stays (set it back to {recorded}, or recreate the OSD \
                 to change it)",
                config.id, config.min_alloc_size
            );
            tracing::warn!("{warning}");
            warning
        });
        Ok(Osd {
            config_warning: warning,
            id: config.id,
            host: config.host.clone(),
            class: config.class.clone(),
            store,
            ops: StatsRecorder::new(format!("osd.{}", config.id), DeviceKind::Other("osd")),
            space: crate::full::SpaceTracker::default(),
            cache,
        })
    }

    /// What of its `cluster.toml` entry the OSD ignores, if anything: a `min_alloc_size`
    /// other than the one its store was created with (the store's layout keeps its own).
    pub fn config_warning(&self) -> Option<&str> {
        self.config_warning.as_deref()
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The device under the store.
    pub fn device(&self) -> &Arc<dyn Device> {
        self.store.device()
    }

    /// Object-level statistics (ops, bytes, latency, busy, queue depth).
    pub fn op_stats(&self) -> DeviceStats {
        self.ops.snapshot()
    }

    /// Applies a transaction, counted as one write of `bytes`.
    pub async fn apply(&self, transaction: Transaction, bytes: u64) -> Result<(), StoreError> {
        let guard = self.ops.begin(OpKind::Write);
        let result = self.store.apply(transaction).await;
        guard.finish(bytes, result)
    }

    /// Reads a range, counted as one read (a small one may come from the store's data
    /// cache).
    pub async fn read(
        &self,
        collection: &str,
        name: &str,
        offset_bytes: u64,
        length_bytes: u64,
    ) -> Result<Vec<u8>, StoreError> {
        self.read_counted(collection, name, offset_bytes, length_bytes, false)
            .await
    }

    /// [`Osd::read`], from the device itself with `from_device`.
    async fn read_counted(
        &self,
        collection: &str,
        name: &str,
        offset_bytes: u64,
        length_bytes: u64,
        from_device: bool,
    ) -> Result<Vec<u8>, StoreError> {
        let guard = self.ops.begin(OpKind::Read);
        let result = if from_device {
            self.store
                .read_device(collection, name, offset_bytes, length_bytes)
                .await
        } else {
            self.store
                .read(collection, name, offset_bytes, length_bytes)
                .await
        };
        let bytes = result.as_ref().map_or(0, |data| data.len() as u64);
        guard.finish(bytes, result)
    }

    /// The object's version (0 without one); `Ok(None)` if it does not exist.
    pub async fn version(&self, collection: &str, name: &str) -> Result<Option<u64>, StoreError> {
        match self.store.get_xattrs(collection, name).await {
            Ok(xattrs) => Ok(Some(
                xattrs.get(VERSION_XATTR).map_or(0, |v| decode_version(v)),
            )),
            Err(StoreError::NotFound { .. }) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Reads a whole object from the device (data verified by its checksums, never from the
    /// data cache: scrub and recovery check and copy what the device holds); `Ok(None)` if
    /// it does not exist.
    pub async fn image(
        &self,
        collection: &str,
        name: &str,
    ) -> Result<Option<ObjectImage>, StoreError> {
        let stat = match self.store.stat(collection, name).await {
            Ok(stat) => stat,
            Err(StoreError::NotFound { .. }) => return Ok(None),
            Err(error) => return Err(error),
        };
        let data = self
            .read_counted(collection, name, 0, stat.size_bytes, true)
            .await?;
        let xattrs = self.store.get_xattrs(collection, name).await?;
        let mut omap = Vec::new();
        loop {
            let after = omap.last().map(|(key, _): &(Vec<u8>, Vec<u8>)| key.clone());
            let page = self
                .store
                .omap_get_range(collection, name, after.as_deref(), 1024)
                .await?;
            let done = page.len() < 1024;
            omap.extend(page);
            if done {
                break;
            }
        }
        Ok(Some(ObjectImage {
            data,
            xattrs,
            omap,
            mtime_ns: stat.mtime_ns,
        }))
    }

    /// Replaces the object with `image` (or removes it with `None`), atomically.
    pub async fn install(
        &self,
        collection: &str,
        name: &str,
        image: Option<&ObjectImage>,
    ) -> Result<(), StoreError> {
        let object = store::ObjectId::new(collection, name);
        let exists = self.store.exists(collection, name).await?;
        let Some(image) = image else {
            if !exists {
                return Ok(());
            }
            let mut transaction = Transaction::new(0);
            transaction.remove(&object);
            return self.apply(transaction, 0).await;
        };
        let mut transaction = Transaction::new(image.mtime_ns);
        if exists {
            transaction.remove(&object);
        }
        transaction.create(&object, false);
        transaction.write_full(&object, image.data.clone());
        for (key, value) in &image.xattrs {
            transaction.set_xattr(&object, key.clone(), value.clone());
        }
        if !image.omap.is_empty() {
            transaction.omap_set(&object, image.omap.clone());
        }
        self.apply(transaction, image.data.len() as u64).await
    }

    /// Every object name of a collection.
    pub async fn list_all(&self, collection: &str) -> Result<Vec<String>, StoreError> {
        let mut names: Vec<String> = Vec::new();
        loop {
            let page = self
                .store
                .list(collection, names.last().map(String::as_str), 1024)
                .await?;
            let done = page.len() < 1024;
            names.extend(page);
            if done {
                return Ok(names);
            }
        }
    }

    /// Shuts the store down (waits for queued commits), then stops its block cache, if any,
    /// cleanly: metadata written and the superblock marked clean, so the next start loads it
    /// warm instead of recovering it as after a crash. Dirty lines are not flushed to the slow
    /// device first (as `casadm --stop-cache --no-data-flush`): they stay on the cache
    /// device, recorded, and the cleaning policy writes them back after the next start;
    /// flushing a large write-back cache to an HDD would hold the shutdown for minutes.
    pub async fn shutdown(self) -> Result<()> {
        let id = self.id;
        let stored = self
            .store
            .shutdown()
            .await
            .map_err(|source| ClusterError::Store { osd: id, source });
        let Some(cache) = self.cache else {
            return stored;
        };
        // A store that failed to shut down may still have had writes in flight: the cache
        // is then left as a crash leaves it, and the next start recovers it.
        stored?;
        let result = cache.set_config(|config| config.flush_on_stop = false);
        let result = match result {
            Ok(()) => cache.stop().await,
            Err(error) => Err(error),
        };
        result.map_err(|error| ClusterError::Device {
            osd: id,
            source: device_error(error),
        })
    }

    /// Whether the OSD's device is a block cache (`cache:...` spec).
    pub fn is_cached(&self) -> bool {
        self.cache.is_some()
    }
}

/// The metadata store of OSD `id` in `data_dir`.
pub(crate) fn meta_path(data_dir: &Path, id: i32) -> std::path::PathBuf {
    data_dir.join(format!("osd.{id}.meta"))
}

/// The size in bytes the OSD's device has, or will have once opened (`create`: its store is
/// about to be created): a memory device's, an existing file's or block device's own length,
/// else the size the config asks a new file to have; `None` when nothing says.
///
/// A config that asks an existing store's file for another size is refused: the store keeps
/// its metadata log at the end of the device, so a file grown under it would put the log
/// in the middle, and the review found the other outcome, the size ignored while the CRUSH
/// weight followed the config, moving PGs for capacity that was never there.
pub(crate) fn device_size_bytes(
    config: &OsdConfig,
    data_dir: &Path,
    create: bool,
) -> Result<Option<u64>> {
    let failed = |source| ClusterError::Device {
        osd: config.id,
        source,
    };
    let spec = blockcache::LayeredSpec::parse(&config.device)
        .map_err(device_error)
        .map_err(failed)?;
    // A cached device presents its core: the cache device adds no capacity.
    let (path, asked) = match spec.core().backing.clone() {
        device::Backing::Memory { size_bytes } => return Ok(Some(size_bytes)),
        device::Backing::File { path, size_bytes } => (
            data_dir.join(path),
            size_bytes.or_else(|| config.size.as_deref().and_then(device::parse_size_bytes)),
        ),
    };
    let actual = match std::fs::File::open(&path) {
        Ok(mut file) => {
            use std::io::Seek;
            // A block device's metadata length is 0; its end is its size.
            Some(file.seek(std::io::SeekFrom::End(0)).map_err(|e| {
                failed(device::DeviceError::InvalidConfig(format!(
                    "{}: {e}",
                    path.display()
                )))
            })?)
        }
        Err(_) => None,
    };
    match (asked, actual) {
        (Some(asked), Some(actual)) if !create && asked != actual => {
            Err(failed(device::DeviceError::InvalidConfig(format!(
                "cluster.toml asks for a device of {asked} bytes, but {} holds {actual}: the \
                 size of an existing OSD's device cannot be changed (its store's metadata log \
                 sits at the end of the device). Put the size back; for a larger device, add a \
                 new OSD of that size, then mark this one out and remove it once drained",
                path.display()
            ))))
        }
        (Some(asked), Some(actual)) => Ok(Some(asked.max(actual))),
        (asked, actual) => Ok(actual.or(asked)),
    }
}

/// A cached spec's error as the device error the cluster reports.
fn device_error(error: blockcache::CacheError) -> device::DeviceError {
    match error {
        blockcache::CacheError::Device(error) => error,
        other => device::DeviceError::InvalidConfig(other.to_string()),
    }
}

/// Opens the device of an OSD: the spec, plain or cached (`cache:OPTIONS:FAST|SLOW`, see
/// `blockcache::spec`), relative file paths under `data_dir`; the core (the plain device
/// itself) takes `size` if its spec has none and the emulation profile if it has none.
async fn open_device(
    config: &OsdConfig,
    data_dir: &Path,
    create: bool,
) -> Result<(Arc<dyn Device>, Option<Arc<blockcache::BlockCache>>)> {
    let failed = |source| ClusterError::Device {
        osd: config.id,
        source,
    };
    let mut spec = blockcache::LayeredSpec::parse(&config.device)
        .map_err(device_error)
        .map_err(failed)?;
    let core = spec.core_mut();
    if core.profile.is_none() {
        core.profile.clone_from(&config.emulation);
    }
    if let device::Backing::File { size_bytes, .. } = &mut core.backing {
        if size_bytes.is_none() {
            *size_bytes = config.size.as_deref().and_then(device::parse_size_bytes);
        }
    }
    let parts = spec.devices_mut().len();
    for (index, part) in spec.devices_mut().into_iter().enumerate() {
        let is_core = index + 1 == parts;
        if let device::Backing::File { path, size_bytes } = &mut part.backing {
            if path.is_relative() {
                *path = data_dir.join(&*path);
            }
            // Re-opening an existing file must not resize it unless asked at creation.
            if !create && path.exists() {
                *size_bytes = None;
            }
            // A store whose device file is gone: making a new empty file would serve an OSD
            // that has lost every object while its metadata says otherwise. (A cache device
            // may be new: a cache is added to an existing OSD that way.)
            let meta = meta_path(data_dir, config.id);
            if is_core && !path.exists() && meta.exists() {
                return Err(failed(device::DeviceError::InvalidConfig(format!(
                    "its device {} is missing while its store {} exists: restore the file \
                     (or remove {} to start this OSD empty, and let recovery refill it)",
                    path.display(),
                    meta.display(),
                    meta.display()
                ))));
            }
        }
    }
    spec.open_cached(&format!("osd.{}", config.id))
        .await
        .map_err(device_error)
        .map_err(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(data: Vec<u8>, xattrs: &[(&str, &[u8])]) -> ObjectImage {
        ObjectImage {
            data,
            xattrs: xattrs
                .iter()
                .map(|(key, value)| (key.to_string(), value.to_vec()))
                .collect(),
            omap: Vec::new(),
            mtime_ns: 0,
        }
    }

    /// Pieces that each end with their own crc32c: the whole has one crc32c, whatever the
    /// pieces hold.
    fn self_checked(fill: u8) -> Vec<u8> {
        let mut data = Vec::new();
        for index in 0..4u8 {
            let mut piece = vec![fill.wrapping_add(index); 1020];
            let crc = crc32c::crc32c(&piece);
            piece.extend_from_slice(&crc.to_le_bytes());
            data.extend_from_slice(&piece);
        }
        data
    }

    #[test]
    fn digests_tell_apart_what_a_crc32c_does_not() {
        let (old, new) = (self_checked(1), self_checked(9));
        assert_eq!(crc32c::crc32c(&old), crc32c::crc32c(&new), "the premise");
        assert_ne!(image(old, &[]).digest(), image(new, &[]).digest());
        // Field boundaries count: ("ab", "c") is not ("a", "bc").
        assert_ne!(
            image(Vec::new(), &[("ab", b"c")]).digest(),
            image(Vec::new(), &[("a", b"bc")]).digest()
        );
        assert_eq!(
            image(b"same".to_vec(), &[("k", b"v")]).digest(),
            image(b"same".to_vec(), &[("k", b"v")]).digest()
        );
    }
}
