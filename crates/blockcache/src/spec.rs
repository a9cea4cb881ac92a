//! Cached devices named by one string, for configuration files and command lines: the layer
//! above [`device::DeviceSpec`], which cannot name a [`BlockCache`] (the `device` crate is
//! below this one).
//!
//! Grammar: `cache:OPTIONS:FAST|SLOW`, where `FAST` (the cache device) and `SLOW` (the core
//! device) are device specs (`[faulty:OPTIONS:][PROFILE@]BACKING`) and `OPTIONS` are
//! comma-separated, each optional:
//! - `mode=wt|wb|wa|wi|wo|pt` (default `wt`, as Open-CAS);
//! - `line=4K|8K|16K|32K|64K` (default `4K`);
//! - `cleaning=alru|acp|nop` (default `alru`, Open-CAS's parameters);
//! - `promotion=always|nhit` (default `always`);
//! - `cutoff=full|always|never` (the sequential cut-off, default `full`).
//!
//! Example: `cache:mode=wb,cleaning=alru,line=4K:nvme@file:osd.0.cache:4G|hdd-10k@file:osd.0.img:100G`.
//! Anything without the `cache:` prefix is a plain device spec, so [`LayeredSpec`] reads every
//! device string there is. Faults go on either device (`...|faulty:eio=0.01:file:core.img`), not
//! around the cache (`faulty:` takes a plain device).
//!
//! ## Invariants
//! - The cache's metadata lives on its cache device (as the standalone cache's), so a
//!   write-back cache's acknowledged writes survive a kill when the cache device is a file:
//!   a memory cache device in a mode that leaves dirty lines (`wb`, `wo`) is refused.
//! - The exported size is the core's; the cache device adds none.
//! - The spec's mode and policies apply at every open; the line size is the one the cache
//!   was created with. Dirty lines left by an earlier write-back mode stay readable from the
//!   cache and are cleaned by the cleaning policy, as after a mode switch without flush.
//! - Opening loads the cache found on the cache device (warm after a clean stop, dirty lines
//!   recovered and flushed after a crash) or creates one on a device holding none; the core's
//!   path is recorded, so the cache is never loaded over another core.
//! - Dropping the opened device without [`BlockCache::stop`] leaves the cache as a crash
//!   would (the cleaner stops, the superblock stays dirty): the next open recovers it.

use std::sync::Arc;

use async_trait::async_trait;
use device::{AllocationExtent, Backing, Device, DeviceError, DeviceKind, DeviceSpec, DeviceStats};

use crate::cache::{BlockCache, StartMode};
use crate::config::{
    CacheConfig, CacheMode, CleaningConfig, PromotionConfig, SeqCutoffPolicy, LINE_SIZES_BYTES,
};
use crate::error::CacheError;
use crate::ioclass::IoClasses;

/// The prefix of a cached device's spec.
pub const PREFIX: &str = "cache:";

/// A device spec, or a cache of one device over another.
#[derive(Clone, Debug, PartialEq)]
pub enum LayeredSpec {
    /// A plain device (`[faulty:OPTIONS:][PROFILE@]BACKING`).
    Device(DeviceSpec),
    /// `cache:OPTIONS:FAST|SLOW`.
    Cached(Box<CachedSpec>),
}

/// A cache of one device over another.
#[derive(Clone, Debug, PartialEq)]
pub struct CachedSpec {
    /// Mode, line size and policies; the rest of the fields keep Open-CAS's defaults.
    pub config: CacheConfig,
    /// The fast device holding cache lines and the cache's metadata.
    pub cache: DeviceSpec,
    /// The slow device whose contents the cached device presents.
    pub core: DeviceSpec,
}

impl LayeredSpec {
    /// Parses a plain device spec or `cache:OPTIONS:FAST|SLOW` (see the module doc).
    pub fn parse(text: &str) -> Result<LayeredSpec, CacheError> {
        let Some(rest) = text.strip_prefix(PREFIX) else {
            return Ok(LayeredSpec::Device(DeviceSpec::parse(text)?));
        };
        let invalid = |why: &str| CacheError::InvalidConfig(format!("device spec {text:?}: {why}"));
        let shape = "a cached device is `cache:OPTIONS:FAST|SLOW`, e.g. \
                     `cache:mode=wb:nvme@file:c.img:1G|hdd-10k@file:d.img:10G`";
        let (options, devices) = rest.split_once(':').ok_or_else(|| invalid(shape))?;
        let (fast, slow) = devices.split_once('|').ok_or_else(|| invalid(shape))?;
        if fast.starts_with(PREFIX) || slow.starts_with(PREFIX) {
            return Err(invalid("a cache inside a cache"));
        }
        if slow.contains('|') {
            return Err(invalid(
                "one `|` between the cache device and the core device",
            ));
        }
        let config = parse_options(options).map_err(|why| invalid(&why))?;
        let cache = DeviceSpec::parse(fast)?;
        let core = DeviceSpec::parse(slow)?;
        if config.mode.writes_back() && matches!(cache.backing, Backing::Memory { .. }) {
            return Err(invalid(&format!(
                "mode {} keeps dirty lines on the cache device, and a memory one loses them \
                 at exit: give the cache device a file (`nvme@file:PATH:SIZE`) or use mode wt",
                config.mode.name()
            )));
        }
        Ok(LayeredSpec::Cached(Box::new(CachedSpec {
            config,
            cache,
            core,
        })))
    }

    /// The device specs it is made of: itself, or the cache device then the core device (to
    /// resolve relative paths, check files are not shared, tighten their modes).
    pub fn devices(&self) -> Vec<&DeviceSpec> {
        match self {
            LayeredSpec::Device(spec) => vec![spec],
            LayeredSpec::Cached(cached) => vec![&cached.cache, &cached.core],
        }
    }

    /// [`LayeredSpec::devices`], to change them.
    pub fn devices_mut(&mut self) -> Vec<&mut DeviceSpec> {
        match self {
            LayeredSpec::Device(spec) => vec![spec],
            LayeredSpec::Cached(cached) => vec![&mut cached.cache, &mut cached.core],
        }
    }

    /// The device whose size and data the layered device presents: itself, or the core.
    pub fn core(&self) -> &DeviceSpec {
        match self {
            LayeredSpec::Device(spec) => spec,
            LayeredSpec::Cached(cached) => &cached.core,
        }
    }

    /// [`LayeredSpec::core`], to change it.
    pub fn core_mut(&mut self) -> &mut DeviceSpec {
        match self {
            LayeredSpec::Device(spec) => spec,
            LayeredSpec::Cached(cached) => &mut cached.core,
        }
    }

    /// Opens the device named `name` (creating sized files as the specs ask): a plain device
    /// as [`DeviceSpec::open`] does, a cached one by loading the cache its cache device holds
    /// or creating one there. Needs a tokio runtime (the cache's cleaner runs on it).
    pub async fn open(&self, name: &str) -> Result<Arc<dyn Device>, CacheError> {
        Ok(self.open_cached(name).await?.0)
    }

    /// [`LayeredSpec::open`], and the cache itself when the device is cached, for a caller
    /// that stops it cleanly ([`BlockCache::stop`]: dirty lines flushed as configured,
    /// metadata written, superblock clean, so the next open is warm) before dropping it.
    pub async fn open_cached(
        &self,
        name: &str,
    ) -> Result<(Arc<dyn Device>, Option<Arc<BlockCache>>), CacheError> {
        let cached = match self {
            LayeredSpec::Device(spec) => return Ok((spec.open(name)?, None)),
            LayeredSpec::Cached(cached) => cached,
        };
        let cache_device = cached.cache.open(&format!("{name}.cache"))?;
        let core_device = cached.core.open(&format!("{name}.core"))?;
        let label = match &cached.core.backing {
            Backing::File { path, .. } => std::fs::canonicalize(path)
                .unwrap_or_else(|_| path.clone())
                .display()
                .to_string(),
            Backing::Memory { size_bytes } => format!("memory:{size_bytes}"),
        };
        let start = |mode| {
            BlockCache::start_labelled(
                Arc::clone(&cache_device),
                Arc::clone(&core_device),
                cached.config.clone(),
                IoClasses::default(),
                mode,
                vec![label.clone()],
            )
        };
        let cache = match start(StartMode::Load).await {
            Err(CacheError::NoCache(_)) => start(StartMode::Create).await?,
            other => other?,
        };
        let device: Arc<dyn Device> = Arc::new(OpenedCache {
            cache: Arc::clone(&cache),
        });
        Ok((device, Some(cache)))
    }
}

impl std::fmt::Display for LayeredSpec {
    /// The spec in the grammar [`LayeredSpec::parse`] reads.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cached = match self {
            LayeredSpec::Device(spec) => return write!(f, "{spec}"),
            LayeredSpec::Cached(cached) => cached,
        };
        let config = &cached.config;
        let cleaning = match config.cleaning {
            CleaningConfig::Alru { .. } => "alru",
            CleaningConfig::Acp { .. } => "acp",
            CleaningConfig::Nop => "nop",
        };
        let promotion = match config.promotion {
            PromotionConfig::Always => "always",
            PromotionConfig::Nhit { .. } => "nhit",
        };
        let cutoff = match config.seq_cutoff.policy {
            SeqCutoffPolicy::Full => "full",
            SeqCutoffPolicy::Always => "always",
            SeqCutoffPolicy::Never => "never",
        };
        write!(
            f,
            "{PREFIX}mode={},line={}K,cleaning={cleaning},promotion={promotion},cutoff={cutoff}:{}|{}",
            config.mode.name(),
            config.line_size_bytes / 1024,
            cached.cache,
            cached.core
        )
    }
}

/// Parses the comma-separated options of a cached spec into a configuration.
fn parse_options(options: &str) -> Result<CacheConfig, String> {
    let mut config = CacheConfig::default();
    for option in options.split(',').filter(|option| !option.is_empty()) {
        let (key, value) = option
            .split_once('=')
            .ok_or_else(|| format!("option {option:?} is not KEY=VALUE"))?;
        match key {
            "mode" => config.mode = CacheMode::parse(value).map_err(|e| e.to_string())?,
            "line" => {
                config.line_size_bytes = device::parse_size_bytes(value)
                    .filter(|size| LINE_SIZES_BYTES.contains(size))
                    .ok_or_else(|| format!("line size {value:?} (4K, 8K, 16K, 32K or 64K)"))?
            }
            "cleaning" => {
                config.cleaning = match value {
                    "alru" => CleaningConfig::alru(),
                    "acp" => CleaningConfig::acp(),
                    "nop" => CleaningConfig::Nop,
                    _ => return Err(format!("cleaning {value:?} (alru, acp or nop)")),
                }
            }
            "promotion" => {
                config.promotion = match value {
                    "always" => PromotionConfig::Always,
                    "nhit" => PromotionConfig::Nhit {
                        threshold: 3,
                        trigger_percent: 80,
                    },
                    _ => return Err(format!("promotion {value:?} (always or nhit)")),
                }
            }
            "cutoff" => {
                config.seq_cutoff.policy = match value {
                    "full" => SeqCutoffPolicy::Full,
                    "always" => SeqCutoffPolicy::Always,
                    "never" => SeqCutoffPolicy::Never,
                    _ => return Err(format!("cutoff {value:?} (full, always or never)")),
                }
            }
            _ => {
                return Err(format!(
                    "unknown option {key:?} (mode, line, cleaning, promotion, cutoff)"
                ))
            }
        }
    }
    config.validate().map_err(|e| e.to_string())?;
    Ok(config)
}

/// A cache opened from a spec: the [`BlockCache`], left as a crash would leave it when
/// dropped (its cleaner stopped; nothing more can be done without an async stop).
struct OpenedCache {
    cache: Arc<BlockCache>,
}

impl Drop for OpenedCache {
    fn drop(&mut self) {
        self.cache.abandon();
    }
}

#[async_trait]
impl Device for OpenedCache {
    async fn read_at(&self, offset_bytes: u64, buffer: &mut [u8]) -> Result<(), DeviceError> {
        self.cache.read_at(offset_bytes, buffer).await
    }

    async fn write_at(&self, offset_bytes: u64, data: &[u8]) -> Result<(), DeviceError> {
        self.cache.write_at(offset_bytes, data).await
    }

    async fn flush(&self) -> Result<(), DeviceError> {
        self.cache.flush().await
    }

    async fn discard(&self, offset_bytes: u64, length_bytes: u64) -> Result<(), DeviceError> {
        self.cache.discard(offset_bytes, length_bytes).await
    }

    async fn allocation(
        &self,
        offset_bytes: u64,
        length_bytes: u64,
    ) -> Result<Vec<AllocationExtent>, DeviceError> {
        self.cache.allocation(offset_bytes, length_bytes).await
    }

    fn size_bytes(&self) -> u64 {
        self.cache.size_bytes()
    }

    fn block_size_bytes(&self) -> u64 {
        self.cache.block_size_bytes()
    }

    fn name(&self) -> &str {
        self.cache.name()
    }

    fn kind(&self) -> DeviceKind {
        self.cache.kind()
    }

    fn stats(&self) -> DeviceStats {
        self.cache.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cached_specs_and_writes_them_back() {
        let text = "cache:mode=wb,cleaning=acp,line=16K,promotion=nhit,cutoff=never:nvme@file:/srv/c.img:1G|hdd-10k@file:/srv/d.img:10G";
        let spec = LayeredSpec::parse(text).unwrap();
        let LayeredSpec::Cached(cached) = &spec else {
            panic!("{spec:?}");
        };
        assert_eq!(cached.config.mode, CacheMode::Wb);
        assert_eq!(cached.config.line_size_bytes, 16384);
        assert_eq!(cached.config.cleaning, CleaningConfig::acp());
        assert!(matches!(
            cached.config.promotion,
            PromotionConfig::Nhit { .. }
        ));
        assert_eq!(cached.config.seq_cutoff.policy, SeqCutoffPolicy::Never);
        assert_eq!(cached.cache.profile.as_deref(), Some("nvme"));
        assert_eq!(spec.core().profile.as_deref(), Some("hdd-10k"));
        assert_eq!(spec.devices().len(), 2);
        assert_eq!(LayeredSpec::parse(&spec.to_string()).unwrap(), spec);
        // Defaults: Open-CAS's (wt, 4 KiB lines, alru); faults inside either device.
        let spec = LayeredSpec::parse("cache::mem:64M|faulty:eio=0.5,seed=3:mem:1G").unwrap();
        let LayeredSpec::Cached(cached) = &spec else {
            panic!("{spec:?}");
        };
        assert_eq!(cached.config, CacheConfig::default());
        assert!(cached.core.faults.is_some());
        assert_eq!(LayeredSpec::parse(&spec.to_string()).unwrap(), spec);
        // A plain spec is a device.
        assert!(matches!(
            LayeredSpec::parse("hdd-10k@mem:1G").unwrap(),
            LayeredSpec::Device(_)
        ));
    }

    #[test]
    fn refuses_malformed_and_unsafe_cached_specs() {
        for (text, why) in [
            ("cache:mode=wb", "cache:OPTIONS:FAST|SLOW"),
            ("cache:mode=wb:mem:1G", "cache:OPTIONS:FAST|SLOW"),
            ("cache:mode=xx:file:a:1G|mem:1G", "unknown cache mode"),
            ("cache:line=3K:file:a:1G|mem:1G", "line size"),
            ("cache:cleaning=lru:file:a:1G|mem:1G", "cleaning"),
            ("cache:colour=red:file:a:1G|mem:1G", "unknown option"),
            ("cache:mode:file:a:1G|mem:1G", "KEY=VALUE"),
            ("cache::file:a:1G|mem:1G|mem:1G", "one `|`"),
            ("cache::cache::mem:1M|mem:1M|mem:1G", "inside a cache"),
            ("cache:mode=wb:mem:64M|mem:1G", "memory one loses them"),
            ("cache:mode=wo:nvme@mem:64M|mem:1G", "memory one loses them"),
            ("cache::bogus:1G|mem:1G", "unknown backing"),
        ] {
            let error = LayeredSpec::parse(text).unwrap_err().to_string();
            assert!(error.contains(why), "{text}: {error}");
        }
    }

    /// A write-back cache of two files: writes acknowledged and flushed, the device dropped
    /// without a stop (as a kill leaves it), then reopened: every write reads back, from a
    /// cache that recovered its dirty lines; the core alone has them after that.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn write_back_data_survives_a_drop_without_stop() {
        let directory = tempfile::tempdir().unwrap();
        let fast = directory.path().join("fast.img");
        let slow = directory.path().join("slow.img");
        let text = format!(
            "cache:mode=wb,cleaning=nop:file:{}:16M|file:{}:64M",
            fast.display(),
            slow.display()
        );
        let spec = LayeredSpec::parse(&text).unwrap();
        let pattern = |index: u64| vec![(index % 251) as u8 + 1; 4096];
        {
            let device = spec.open("osd.0").await.unwrap();
            assert_eq!(device.size_bytes(), 64 << 20, "the core's size");
            for index in 0..64u64 {
                device
                    .write_at(index * 65536, &pattern(index))
                    .await
                    .unwrap();
            }
            device.flush().await.unwrap();
        }
        // Nothing was cleaned (nop), so the core file holds none of it yet.
        let core_bytes = std::fs::read(&slow).unwrap();
        assert!(core_bytes[..4096].iter().all(|&byte| byte == 0));
        let device = spec.open("osd.0").await.unwrap();
        let mut back = vec![0u8; 4096];
        for index in 0..64u64 {
            device.read_at(index * 65536, &mut back).await.unwrap();
            assert_eq!(back, pattern(index), "block {index}");
        }
        drop(device);
        // The reopen flushed the recovered lines to the core.
        let core_bytes = std::fs::read(&slow).unwrap();
        assert_eq!(&core_bytes[65536..65536 + 4096], &pattern(1)[..]);
        // A cache made for this core is not loaded over another one.
        let other = directory.path().join("other.img");
        let moved = format!(
            "cache:mode=wb:file:{}|file:{}:64M",
            fast.display(),
            other.display()
        );
        let error = LayeredSpec::parse(&moved)
            .unwrap()
            .open("osd.0")
            .await
            .err()
            .unwrap();
        assert!(error.to_string().contains("cores"), "{error}");
    }
}
