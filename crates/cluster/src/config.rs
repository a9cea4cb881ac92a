//! The cluster's TOML configuration ([`ClusterConfig`]) and its validation.
//!
//! ```toml
//! scrub_interval_s = 86400
//!
//! [[host]]
//! name = "host0"
//!
//! [[osd]]
//! id = 0
//! host = "host0"
//! device = "file:osd.0.img:1G"     # relative paths live under the data directory
//! class = "ssd"
//!
//! [[pool]]
//! name = "default"
//! size = 3
//! device_class = "hdd"
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{ClusterError, Result};

/// A whole cluster. Every field has a default, so an empty file is valid but has no OSDs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// Seconds between periodic deep scrubs of every PG; 0 turns them off. Default 86400 (a
    /// day, Ceph's `osd_deep_scrub_interval` is a week).
    #[serde(default = "default_scrub_interval_s")]
    pub scrub_interval_s: u64,
    /// Length of a statistics period in seconds: how often `strata serve` ends a period
    /// (`Cluster::take_stats_period`: per-OSD load and per-object access counts, reported by
    /// `/api/stats`, `strata stats` and the `strata_osd_period_*` metrics; the access table
    /// starts empty each period). 0: no periods. Default 60.
    #[serde(default = "default_stats_period_s")]
    pub stats_period_s: u64,
    /// Objects whose access counts are tracked per period at most; accesses to further objects
    /// are counted in a total only. Default 100000.
    #[serde(default = "default_access_objects_max")]
    pub access_objects_max: usize,
    /// Flush devices and fsync metadata before acknowledging writes. Default true; false only
    /// for benchmarks (acknowledged writes may be lost on a crash).
    #[serde(default = "default_true")]
    pub durable: bool,
    /// Consecutive device errors (EIO and the like from its data device or metadata store)
    /// after which an OSD is marked down and out, so CRUSH places its PGs elsewhere and
    /// recovery restores their replica count, as Ceph does with an OSD whose disk fails. A
    /// store that cannot know what reached its media (a failed flush) is taken down at once.
    /// 0 turns this off. Default 8.
    #[serde(default = "default_osd_device_errors_max")]
    pub osd_device_errors_max: u32,
    /// Share of an OSD's device in use (allocated data and metadata) from which `status`
    /// warns that it is nearly full (`OSD_NEARFULL`, HEALTH_WARN), as Ceph's
    /// `mon_osd_nearfull_ratio`. 0 < nearfull_ratio <= full_ratio. Default 0.85.
    #[serde(default = "default_nearfull_ratio")]
    pub nearfull_ratio: f64,
    /// Share in use from which recovery and backfill copy nothing more onto an OSD: its PGs
    /// wait (`backfill_toofull` in `status`, `OSD_BACKFILLFULL`, HEALTH_WARN), as Ceph's
    /// `mon_osd_backfillfull_ratio`. nearfull_ratio <= backfillfull_ratio <= full_ratio.
    /// Default 0.90.
    #[serde(default = "default_backfillfull_ratio")]
    pub backfillfull_ratio: f64,
    /// Share in use from which an OSD is full (`OSD_FULL`, HEALTH_ERR), as Ceph's
    /// `mon_osd_full_ratio`: writes that would add data or objects to a pool that can place
    /// on it are refused with `NoSpace` (`POOL_FULL`), and no write may take an OSD past it
    /// (each write counts the space it needs); reads, removals and writes that only shrink
    /// or change metadata of existing objects go on. At most 1. Default 0.95.
    #[serde(default = "default_full_ratio")]
    pub full_ratio: f64,
    /// Failure domains: hosts, each holding OSDs.
    #[serde(default, rename = "host")]
    pub hosts: Vec<HostConfig>,
    /// The OSDs.
    #[serde(default, rename = "osd")]
    pub osds: Vec<OsdConfig>,
    /// Pools created with the cluster (more can be created at run time).
    #[serde(default, rename = "pool")]
    pub pools: Vec<PoolConfig>,
}

/// A host: a CRUSH failure domain.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostConfig {
    /// Name; unique, non-empty. No default.
    pub name: String,
}

/// One OSD: a store on one device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OsdConfig {
    /// OSD id (`osd.<id>`): unique, 0..=65535. No default.
    pub id: i32,
    /// Name of the host holding it (must be declared in `[[host]]`). No default.
    pub host: String,
    /// Device spec, `[faulty:OPTIONS:][PROFILE@]BACKING` as in `device::DeviceSpec`:
    /// `file:PATH[:SIZE]`, `mem:SIZE`, a block device path, optionally with injected faults
    /// (`faulty:eio=0.001,seed=7:file:osd.3.img:10G`); relative paths are under the data
    /// directory. No default.
    pub device: String,
    /// Size to create a file device with when `device` names none (`1G`, `512M`; binary
    /// units). Default: none (the spec or the existing file decides).
    #[serde(default)]
    pub size: Option<String>,
    /// Device class (`ssd`, `hdd`, `nvme`, ...), used by CRUSH rules; `""` for none (what
    /// `strata osd crush rm-device-class` leaves: only rules taking any class use it).
    /// Default "hdd".
    #[serde(default = "default_class")]
    pub class: String,
    /// CRUSH weight (relative capacity share), > 0 and <= 100. Default: the device size in TiB
    /// (Ceph's convention), at least 1/65536.
    #[serde(default)]
    pub weight: Option<f64>,
    /// Allocation unit of the store in bytes, a power of two >= 4096. Default 4096.
    #[serde(default = "default_min_alloc_size")]
    pub min_alloc_size: u64,
    /// Emulation profile (`hdd-7200`, `hdd-10k`, `ssd-sata`, `nvme`, `instant`) applied over
    /// the device, unless the spec already names one. Default none.
    #[serde(default)]
    pub emulation: Option<String>,
    /// Memory for the store's cache of small reads (`64M`, `1G`; `0` turns it off): a
    /// re-read object of at most 64 KiB costs no device read, as with BlueStore's buffered
    /// reads. Default 256M (a bound: it fills only as small objects are read).
    #[serde(default)]
    pub data_cache_size: Option<String>,
}

impl OsdConfig {
    /// The store's data cache in bytes: `data_cache_size` (checked by
    /// [`ClusterConfig::validate`]), or the store's default.
    pub fn data_cache_bytes(&self) -> usize {
        self.data_cache_size
            .as_deref()
            .and_then(device::parse_size_bytes)
            .map_or(store::StoreConfig::default().data_cache_bytes, |bytes| {
                usize::try_from(bytes).unwrap_or(usize::MAX)
            })
    }
}

/// A pool created with the cluster.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolConfig {
    /// Name; unique, 1..=255 bytes. No default.
    pub name: String,
    /// Replicas per object, 1..=10, at most the number of hosts with OSDs of the pool's class.
    /// Default 3.
    #[serde(default = "default_size")]
    pub size: u32,
    /// Replicas needed to accept a write, 1..=size. Default `size - size / 2`.
    #[serde(default)]
    pub min_size: Option<u32>,
    /// Placement groups, 1..=65536. Default 32.
    #[serde(default = "default_pg_num")]
    pub pg_num: u32,
    /// Place only on OSDs of this class (a class some OSD has). Default: any OSD.
    #[serde(default)]
    pub device_class: Option<String>,
    /// Or place with this CRUSH rule: `replicated_rule` (any OSD) or `replicated_<class>`.
    /// Default: derived from `device_class`.
    #[serde(default)]
    pub crush_rule: Option<String>,
    /// Make it an erasure-coded pool with this profile (`k=4,m=2[,failure-domain=host]
    /// [,device-class=hdd][,stripe-unit=4K]`, see [`crate::ec::ErasureProfile::parse`]):
    /// `size` and `min_size` are then ignored (`k + m` and `k + 1`), and the profile's
    /// device class is the pool's. Default: replicated.
    #[serde(default)]
    pub erasure: Option<String>,
}

fn default_scrub_interval_s() -> u64 {
    86_400
}
fn default_stats_period_s() -> u64 {
    60
}
fn default_access_objects_max() -> usize {
    100_000
}
fn default_osd_device_errors_max() -> u32 {
    8
}
fn default_nearfull_ratio() -> f64 {
    0.85
}
fn default_backfillfull_ratio() -> f64 {
    0.90
}
fn default_full_ratio() -> f64 {
    0.95
}

fn default_true() -> bool {
    true
}
fn default_class() -> String {
    "hdd".to_string()
}
fn default_min_alloc_size() -> u64 {
    4096
}
fn default_size() -> u32 {
    3
}
fn default_pg_num() -> u32 {
    32
}

/// Name of the rule placing on every OSD.
pub const RULE_ANY: &str = "replicated_rule";

/// Whether `class` can name a device class: non-empty `[A-Za-z0-9_-]`.
pub fn is_class_name(class: &str) -> bool {
    !class.is_empty()
        && class
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Name of the rule placing on one device class.
pub fn class_rule_name(class: &str) -> String {
    format!("replicated_{class}")
}

impl PoolConfig {
    /// `min_size` as given or defaulted.
    pub fn effective_min_size(&self) -> u32 {
        self.min_size.unwrap_or(self.size - self.size / 2)
    }
}

impl ClusterConfig {
    /// Parses TOML; errors name the line and field (serde) or the offending item (validation).
    pub fn from_toml(text: &str) -> Result<Self> {
        let config: ClusterConfig =
            toml::from_str(text).map_err(|e| ClusterError::Config(e.to_string()))?;
        config.validate()?;
        Ok(config)
    }

    /// Reads and parses a file.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ClusterError::Config(format!("{}: {e}", path.display())))?;
        Self::from_toml(&text).map_err(|e| match e {
            ClusterError::Config(m) => ClusterError::Config(format!("{}: {m}", path.display())),
            other => other,
        })
    }

    /// The TOML text of this config.
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).unwrap_or_default()
    }

    /// The default cluster: 3 hosts, each with one "ssd" and two "hdd" OSDs on sparse 1 GiB
    /// files under the data directory; pool "default" (hdd, 3 replicas) and "fast" (ssd, 3
    /// replicas).
    pub fn default_cluster() -> Self {
        let mut config = Self::empty();
        for host in 0..3 {
            let name = format!("host{host}");
            config.hosts.push(HostConfig { name: name.clone() });
            for (slot, class) in ["ssd", "hdd", "hdd"].into_iter().enumerate() {
                let id = host * 3 + slot as i32;
                config.osds.push(OsdConfig {
                    id,
                    host: name.clone(),
                    device: format!("file:osd.{id}.img:1G"),
                    size: None,
                    class: class.to_string(),
                    weight: None,
                    min_alloc_size: 4096,
                    emulation: None,
                    data_cache_size: None,
                });
            }
        }
        for (name, class) in [("default", "hdd"), ("fast", "ssd")] {
            config.pools.push(PoolConfig {
                name: name.to_string(),
                size: 3,
                min_size: None,
                pg_num: 32,
                device_class: Some(class.to_string()),
                crush_rule: None,
                erasure: None,
            });
        }
        config
    }

    /// No hosts, OSDs or pools; default settings.
    pub fn empty() -> Self {
        Self {
            scrub_interval_s: default_scrub_interval_s(),
            stats_period_s: default_stats_period_s(),
            access_objects_max: default_access_objects_max(),
            durable: true,
            osd_device_errors_max: default_osd_device_errors_max(),
            nearfull_ratio: default_nearfull_ratio(),
            backfillfull_ratio: default_backfillfull_ratio(),
            full_ratio: default_full_ratio(),
            hosts: Vec::new(),
            osds: Vec::new(),
            pools: Vec::new(),
        }
    }

    /// Device classes some OSD has.
    pub fn classes(&self) -> BTreeSet<String> {
        self.osds
            .iter()
            .filter(|osd| !osd.class.is_empty())
            .map(|osd| osd.class.clone())
            .collect()
    }

    /// Hosts holding at least one OSD of `class` (any class with `None`).
    pub fn hosts_with_class(&self, class: Option<&str>) -> usize {
        self.osds
            .iter()
            .filter(|osd| class.is_none_or(|c| osd.class == c))
            .map(|osd| osd.host.as_str())
            .collect::<BTreeSet<_>>()
            .len()
    }

    /// Checks everything serde cannot: unique names and ids, references, ranges.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: String| Err(ClusterError::Config(what));
        if !(self.nearfull_ratio > 0.0
            && self.nearfull_ratio <= self.backfillfull_ratio
            && self.backfillfull_ratio <= self.full_ratio
            && self.full_ratio <= 1.0)
        {
            return bad(format!(
                "nearfull_ratio {}, backfillfull_ratio {} and full_ratio {}: need 0 < \
                 nearfull_ratio <= backfillfull_ratio <= full_ratio <= 1",
                self.nearfull_ratio, self.backfillfull_ratio, self.full_ratio
            ));
        }
        let mut hosts = BTreeSet::new();
        for (index, host) in self.hosts.iter().enumerate() {
            if host.name.is_empty() {
                return bad(format!("host[{index}].name: must not be empty"));
            }
            if !hosts.insert(host.name.as_str()) {
                return bad(format!(
                    "host[{index}].name: duplicate host {:?}",
                    host.name
                ));
            }
        }
        if self.osds.is_empty() {
            return bad("osd: the cluster has no OSDs (declare at least one [[osd]])".into());
        }
        let mut ids = BTreeMap::new();
        // Two OSDs on one file would overwrite each other's data.
        let mut files: BTreeMap<PathBuf, i32> = BTreeMap::new();
        for (index, osd) in self.osds.iter().enumerate() {
            let at = format!("osd[{index}] (id {})", osd.id);
            if !(0..=65535).contains(&osd.id) {
                return bad(format!("{at}.id: must be 0..=65535"));
            }
            if ids.insert(osd.id, index).is_some() {
                return bad(format!("{at}.id: duplicate OSD id {}", osd.id));
            }
            if !hosts.contains(osd.host.as_str()) {
                return bad(format!(
                    "{at}.host: unknown host {:?} (declare it in [[host]])",
                    osd.host
                ));
            }
            if !is_class_name(&osd.class) && !osd.class.is_empty() {
                return bad(format!(
                    "{at}.class: {:?} must be [A-Za-z0-9_-] (or empty for none)",
                    osd.class
                ));
            }
            match blockcache::LayeredSpec::parse(&osd.device) {
                Err(e) => return bad(format!("{at}.device: {e}")),
                Ok(spec) => {
                    // Every file of the OSD's device (a cached device has two) is its own.
                    for part in spec.devices() {
                        if let device::Backing::File { path, .. } = &part.backing {
                            let path: PathBuf = path
                                .components()
                                .filter(|c| !matches!(c, std::path::Component::CurDir))
                                .collect();
                            if let Some(other) = files.insert(path.clone(), osd.id) {
                                let whose = if other == osd.id {
                                    "its own cache's and core's".to_string()
                                } else {
                                    format!("also osd.{other}'s")
                                };
                                return bad(format!(
                                    "{at}.device: {} is {whose} device",
                                    path.display()
                                ));
                            }
                        }
                    }
                }
            }
            if let Some(size) = &osd.size {
                if device::parse_size_bytes(size).is_none_or(|s| s == 0) {
                    return bad(format!("{at}.size: {size:?} is not a size like 1G or 512M"));
                }
            }
            if let Some(weight) = osd.weight {
                if !(weight > 0.0 && weight <= 100.0) {
                    return bad(format!("{at}.weight: {weight} must be in (0, 100]"));
                }
            }
            if !osd.min_alloc_size.is_power_of_two() || osd.min_alloc_size < 4096 {
                return bad(format!(
                    "{at}.min_alloc_size: {} must be a power of two >= 4096",
                    osd.min_alloc_size
                ));
            }
            if let Some(size) = &osd.data_cache_size {
                if device::parse_size_bytes(size).is_none() {
                    return bad(format!(
                        "{at}.data_cache_size: {size:?} is not a size like 64M or 0"
                    ));
                }
            }
            if let Some(profile) = &osd.emulation {
                if profile != "instant" && device::EmulationProfile::preset(profile).is_none() {
                    return bad(format!(
                        "{at}.emulation: unknown profile {profile:?} (known: {}, instant)",
                        device::EmulationProfile::PRESETS.join(", ")
                    ));
                }
            }
        }
        let mut pools = BTreeSet::new();
        for (index, pool) in self.pools.iter().enumerate() {
            let at = format!("pool[{index}] ({:?})", pool.name);
            self.validate_pool(pool).map_err(|e| match e {
                ClusterError::Config(m) => ClusterError::Config(format!("{at}.{m}")),
                other => other,
            })?;
            if !pools.insert(pool.name.as_str()) {
                return bad(format!("{at}.name: duplicate pool"));
            }
        }
        Ok(())
    }

    /// Checks one pool against this cluster's OSDs; messages start with the field name.
    pub fn validate_pool(&self, pool: &PoolConfig) -> Result<()> {
        let bad = |what: String| Err(ClusterError::Config(what));
        if pool.erasure.is_some() {
            return self.validate_erasure_pool(pool);
        }
        if pool.name.is_empty()
            || pool.name.len() > 255
            || pool.name.contains('/')
            || pool.name.chars().any(char::is_control)
        {
            return bad(
                "name: must be 1..=255 bytes without '/' or control characters (tabs, newlines)"
                    .to_string(),
            );
        }
        if !(1..=10).contains(&pool.size) {
            return bad(format!("size: {} must be 1..=10", pool.size));
        }
        let min_size = pool.effective_min_size();
        if min_size == 0 || min_size > pool.size {
            return bad(format!(
                "min_size: {min_size} must be 1..=size ({})",
                pool.size
            ));
        }
        if !(1..=65536).contains(&pool.pg_num) {
            return bad(format!("pg_num: {} must be 1..=65536", pool.pg_num));
        }
        let class = self.pool_class(pool)?;
        if let Some(class) = &class {
            if !self.classes().contains(class) {
                return bad(format!(
                    "device_class: no OSD has class {class:?} (classes: {:?})",
                    self.classes()
                ));
            }
        }
        let hosts = self.hosts_with_class(class.as_deref());
        if pool.size as usize > hosts {
            return bad(format!(
                "size: {} replicas need as many hosts, but only {hosts} hosts have {} OSDs",
                pool.size,
                class.as_deref().unwrap_or("any")
            ));
        }
        Ok(())
    }

    /// The device class a pool places on (from `device_class` or `crush_rule`).
    pub fn pool_class(&self, pool: &PoolConfig) -> Result<Option<String>> {
        match (&pool.device_class, &pool.crush_rule) {
            (Some(_), Some(_)) => Err(ClusterError::Config(
                "crush_rule: give device_class or crush_rule, not both".to_string(),
            )),
            (Some(class), None) => Ok(Some(class.clone())),
            (None, None) => Ok(None),
            (None, Some(rule)) if rule == RULE_ANY => Ok(None),
            (None, Some(rule)) => match rule.strip_prefix("replicated_") {
                Some(class) if self.classes().contains(class) => Ok(Some(class.to_string())),
                _ => Err(ClusterError::Config(format!(
                    "crush_rule: unknown rule {rule:?} (rules: {RULE_ANY}, {})",
                    self.classes()
                        .iter()
                        .map(|c| class_rule_name(c))
                        .collect::<Vec<_>>()
                        .join(", ")
                ))),
            },
        }
    }
}
