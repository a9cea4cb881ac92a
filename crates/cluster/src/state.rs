//! The persisted cluster state (`state.json` in the data directory) and the placement maps
//! built from it.
//!
//! The state is what changes at run time: the map epoch, OSD up/in states, pools, upmap
//! exceptions, `pg_temp` (PGs whose acting set still differs from their up set until
//! recovery finishes) and the CRUSH bucket and rule ids, kept so that placement is the same
//! after a restart. It is written atomically (temp file, fsync, rename, fsync of the directory)
//! after every change, before the change takes effect.

use std::collections::BTreeMap;
use std::path::Path;

use osdmap::map::{OSD_EXISTS, OSD_UP, WEIGHT_IN, WEIGHT_OUT};
use osdmap::{OsdMap, PgId, Pool, PoolType};
use serde::{Deserialize, Serialize};

use crate::config::{class_rule_name, ClusterConfig, RULE_ANY};
use crate::error::{ClusterError, Result};

/// Format version of `state.json`.
pub const STATE_FORMAT: u32 = 1;

/// Version numbers reserved (persisted) ahead of use, so a restart never reuses one.
pub const VERSION_LEASE: u64 = 1 << 20;

/// One OSD's state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsdState {
    /// Serving I/O.
    pub up: bool,
    /// Holding data (CRUSH places on it).
    pub is_in: bool,
    /// Override weight while in, 16.16 fixed point (`0x10000` = 1.0): the share of the PGs
    /// CRUSH gives it that it keeps (`strata osd reweight`, Ceph's `osd reweight`). Absent
    /// in older files and when 1.0.
    #[serde(default = "full_weight", skip_serializing_if = "is_full_weight")]
    pub weight: u32,
}

fn full_weight() -> u32 {
    WEIGHT_IN
}

fn is_full_weight(weight: &u32) -> bool {
    *weight == WEIGHT_IN
}

/// A pool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolState {
    /// Numeric id (never reused).
    pub id: i64,
    /// Name.
    pub name: String,
    /// Replicas.
    pub size: u32,
    /// Replicas needed for writes.
    pub min_size: u32,
    /// Placement groups.
    pub pg_num: u32,
    /// CRUSH rule name.
    pub rule: String,
    /// The erasure-code profile of an erasure-coded pool (`size` is then `k + m`); `None`
    /// for a replicated pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub erasure: Option<crate::ec::ErasureProfile>,
    /// Ceph's `quota_max_bytes`: writes that would take the pool's stored bytes past it are
    /// refused; 0: no quota.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub quota_max_bytes: u64,
    /// Ceph's `quota_max_objects`: writes creating an object once the pool holds that many
    /// are refused; 0: no quota.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub quota_max_objects: u64,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

/// A CRUSH rule the cluster defined (its id is its index).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleState {
    /// Name.
    pub name: String,
    /// Device class it takes, if any.
    pub class: Option<String>,
    /// An erasure rule (`chooseleaf indep`), as Ceph makes for an erasure-coded pool.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub erasure: bool,
}

/// A PG-keyed exception entry (JSON maps need string keys, so these are lists).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PgEntry<T> {
    /// Pool id.
    pub pool: i64,
    /// PG seed.
    pub seed: u32,
    /// The value.
    pub value: T,
}

/// Everything persisted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterState {
    /// Format of this file.
    pub format: u32,
    /// Map epoch: grows with every change.
    pub epoch: u64,
    /// Object versions below this may have been handed out.
    pub version_reserved: u64,
    /// OSD states by id.
    pub osds: BTreeMap<i32, OsdState>,
    /// CRUSH bucket ids of hosts and the root, by name.
    pub bucket_ids: BTreeMap<String, i32>,
    /// CRUSH rules in id order.
    pub rules: Vec<RuleState>,
    /// Pools by id.
    pub pools: BTreeMap<i64, PoolState>,
    /// Next pool id.
    pub next_pool_id: i64,
    /// `pg_upmap_items` exceptions.
    pub pg_upmap_items: Vec<PgEntry<Vec<(i32, i32)>>>,
    /// `pg_upmap` exceptions: a PG's whole set in place of CRUSH's (the read balancer
    /// reorders a replicated PG's members to choose its primary). Absent in older files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pg_upmap: Vec<PgEntry<Vec<i32>>>,
    /// `pg_temp`: acting sets that hold the latest data while recovery fills the up set.
    pub pg_temp: Vec<PgEntry<Vec<i32>>>,
    /// The hosts and OSDs of `cluster.toml` that placement was last computed from, so that an
    /// edit of the file (an OSD added, a weight or host changed) is noticed at the next start
    /// and the PGs it moves keep their old holders until recovery has copied them. Absent in
    /// files written before it existed (the first start records it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<Topology>,
}

/// What placement takes from `cluster.toml`: hosts in order, and each OSD's host, class and
/// CRUSH weight.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    /// Host names in file order.
    pub hosts: Vec<String>,
    /// OSDs in file order.
    pub osds: Vec<TopologyOsd>,
}

/// One OSD's part of a [`Topology`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopologyOsd {
    /// OSD id.
    pub id: i32,
    /// Its host.
    pub host: String,
    /// Its device class.
    pub class: String,
    /// Its CRUSH weight in 16.16 fixed point (what the CRUSH map holds).
    pub crush_weight: u32,
}

impl Topology {
    /// The topology `config` describes.
    pub fn of(config: &ClusterConfig) -> Self {
        Self {
            hosts: config.hosts.iter().map(|host| host.name.clone()).collect(),
            osds: config
                .osds
                .iter()
                .map(|osd| TopologyOsd {
                    id: osd.id,
                    host: osd.host.clone(),
                    class: osd.class.clone(),
                    crush_weight: crush_weight(osd),
                })
                .collect(),
        }
    }

    /// `config` with this topology's hosts and OSDs instead of its own: what the map was
    /// built from before an edit. Its OSDs name no device (placement does not use one).
    pub fn apply_to(&self, config: &ClusterConfig) -> ClusterConfig {
        let mut config = config.clone();
        config.hosts = self
            .hosts
            .iter()
            .map(|name| crate::config::HostConfig { name: name.clone() })
            .collect();
        config.osds = self
            .osds
            .iter()
            .map(|osd| crate::config::OsdConfig {
                id: osd.id,
                host: osd.host.clone(),
                device: String::new(),
                size: None,
                class: osd.class.clone(),
                weight: Some(f64::from(osd.crush_weight) / 65536.0),
                min_alloc_size: 4096,
                emulation: None,
                data_cache_size: None,
            })
            .collect();
        config
    }

    /// Whether it has OSD `id`.
    pub fn has_osd(&self, id: i32) -> bool {
        self.osds.iter().any(|osd| osd.id == id)
    }
}

impl ClusterState {
    /// The state of a new cluster: every OSD up and in, rules for "any" and each class.
    pub fn initial(config: &ClusterConfig) -> Self {
        let mut state = Self {
            format: STATE_FORMAT,
            epoch: 1,
            version_reserved: 0,
            osds: BTreeMap::new(),
            bucket_ids: BTreeMap::new(),
            rules: Vec::new(),
            pools: BTreeMap::new(),
            next_pool_id: 1,
            pg_upmap_items: Vec::new(),
            pg_upmap: Vec::new(),
            pg_temp: Vec::new(),
            topology: Some(Topology::of(config)),
        };
        state.reconcile(config);
        state
    }

    /// Brings the state in line with a (possibly edited) config: new OSDs up and in, rules
    /// for new classes; OSDs no longer configured are dropped, with the upmap exceptions
    /// naming them.
    pub fn reconcile(&mut self, config: &ClusterConfig) {
        for osd in &config.osds {
            self.osds.entry(osd.id).or_insert(OsdState {
                up: true,
                is_in: true,
                weight: WEIGHT_IN,
            });
        }
        self.osds
            .retain(|id, _| config.osds.iter().any(|osd| osd.id == *id));
        let configured = |id: &i32| config.osds.iter().any(|osd| osd.id == *id);
        self.pg_upmap_items.retain(|entry| {
            entry
                .value
                .iter()
                .all(|(from, to)| configured(from) && configured(to))
        });
        self.pg_upmap
            .retain(|entry| entry.value.iter().all(configured));
        if !self.rules.iter().any(|rule| rule.name == RULE_ANY) {
            self.rules.push(RuleState {
                name: RULE_ANY.to_string(),
                class: None,
                erasure: false,
            });
        }
        for class in config.classes() {
            let name = class_rule_name(&class);
            if !self.rules.iter().any(|rule| rule.name == name) {
                self.rules.push(RuleState {
                    name,
                    class: Some(class),
                    erasure: false,
                });
            }
        }
    }

    /// Reads `path`.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| ClusterError::io(path, e))?;
        let state: ClusterState = serde_json::from_str(&text)
            .map_err(|e| ClusterError::State(format!("{}: {e}", path.display())))?;
        if state.format != STATE_FORMAT {
            return Err(ClusterError::State(format!(
                "{}: format {} (this build reads {STATE_FORMAT})",
                path.display(),
                state.format
            )));
        }
        state
            .check_pools()
            .map_err(|what| ClusterError::State(format!("{}: {what}", path.display())))?;
        Ok(state)
    }

    /// The checks a pool passed when it was created, again for what was read back: a pool
    /// with 0 replicas or PGs, or a second pool with its id, would have recovery move or
    /// drop objects on the next start.
    fn check_pools(&self) -> std::result::Result<(), String> {
        let mut names = std::collections::BTreeSet::new();
        for (id, pool) in &self.pools {
            let at = format!("pool {id} ({:?})", pool.name);
            if pool.id != *id {
                return Err(format!("{at}: its id field says {}", pool.id));
            }
            if !names.insert(pool.name.as_str()) {
                return Err(format!("{at}: a second pool has this name"));
            }
            let size_max = if pool.erasure.is_some() {
                crate::ec::SHARDS_MAX
            } else {
                10
            };
            if !(1..=size_max).contains(&pool.size) {
                return Err(format!("{at}: size {} must be 1..={size_max}", pool.size));
            }
            if let Some(profile) = &pool.erasure {
                profile.validate().map_err(|what| format!("{at}: {what}"))?;
                if profile.size() != pool.size {
                    return Err(format!("{at}: size {} is not k+m of {profile}", pool.size));
                }
            }
            if pool.min_size == 0 || pool.min_size > pool.size {
                return Err(format!(
                    "{at}: min_size {} must be 1..=size ({})",
                    pool.min_size, pool.size
                ));
            }
            if !(1..=65536).contains(&pool.pg_num) {
                return Err(format!("{at}: pg_num {} must be 1..=65536", pool.pg_num));
            }
        }
        Ok(())
    }

    /// Writes `path` atomically and durably.
    pub fn save(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_vec_pretty(self)
            .map_err(|e| ClusterError::State(format!("encode: {e}")))?;
        crate::membership::replace_file(path, &text)
    }

    /// The rule id (index) of a rule name.
    pub fn rule_id(&self, name: &str) -> Option<usize> {
        self.rules.iter().position(|rule| rule.name == name)
    }

    /// The pool called `name`.
    pub fn pool_by_name(&self, name: &str) -> Option<&PoolState> {
        self.pools.values().find(|pool| pool.name == name)
    }

    /// `pg_temp` of a PG.
    pub fn pg_temp_of(&self, pg: PgId) -> Option<&Vec<i32>> {
        self.pg_temp
            .iter()
            .find(|entry| entry.pool == pg.pool && entry.seed == pg.seed)
            .map(|entry| &entry.value)
    }

    /// Sets (non-empty) or clears (`None`) the `pg_temp` of a PG.
    pub fn set_pg_temp(&mut self, pg: PgId, osds: Option<Vec<i32>>) {
        self.pg_temp
            .retain(|entry| !(entry.pool == pg.pool && entry.seed == pg.seed));
        if let Some(osds) = osds {
            self.pg_temp.push(PgEntry {
                pool: pg.pool,
                seed: pg.seed,
                value: osds,
            });
        }
    }

    /// Sets or clears the `pg_upmap_items` of a PG.
    pub fn set_pg_upmap_items(&mut self, pg: PgId, items: Option<Vec<(i32, i32)>>) {
        self.pg_upmap_items
            .retain(|entry| !(entry.pool == pg.pool && entry.seed == pg.seed));
        if let Some(items) = items.filter(|items| !items.is_empty()) {
            self.pg_upmap_items.push(PgEntry {
                pool: pg.pool,
                seed: pg.seed,
                value: items,
            });
        }
    }

    /// Sets or clears the `pg_upmap` of a PG.
    pub fn set_pg_upmap(&mut self, pg: PgId, osds: Option<Vec<i32>>) {
        self.pg_upmap
            .retain(|entry| !(entry.pool == pg.pool && entry.seed == pg.seed));
        if let Some(osds) = osds.filter(|osds| !osds.is_empty()) {
            self.pg_upmap.push(PgEntry {
                pool: pg.pool,
                seed: pg.seed,
                value: osds,
            });
        }
    }

    /// Builds the CRUSH map (recording new bucket ids) and the OSD map of this state.
    pub fn build_map(&mut self, config: &ClusterConfig) -> Result<OsdMap> {
        let crush = self.build_crush(config)?;
        let max_osd = config.osds.iter().map(|osd| osd.id + 1).max().unwrap_or(0);
        let mut map = OsdMap::new(crush, max_osd);
        for (&id, osd) in &self.osds {
            let mut bits = OSD_EXISTS;
            if osd.up {
                bits |= OSD_UP;
            }
            map.set_osd_state(id, bits);
            map.set_osd_weight(id, if osd.is_in { osd.weight } else { WEIGHT_OUT });
        }
        for pool in self.pools.values() {
            let kind = if pool.erasure.is_some() {
                PoolType::Erasure
            } else {
                PoolType::Replicated
            };
            let mut entry = Pool::new(pool.id, &pool.name, kind, pool.size, pool.pg_num);
            entry.min_size = pool.min_size;
            entry.extra.quota_max_bytes = pool.quota_max_bytes;
            entry.extra.quota_max_objects = pool.quota_max_objects;
            if let Some(profile) = &pool.erasure {
                entry.stripe_width = profile.stripe_width_bytes() as u32;
                entry.erasure_code_profile = pool.name.clone();
            }
            let rule = self.rule_id(&pool.rule).ok_or_else(|| {
                ClusterError::State(format!("pool {}: unknown rule {}", pool.name, pool.rule))
            })?;
            entry.crush_rule = rule as i32;
            map.insert_pool(entry);
        }
        for entry in &self.pg_upmap {
            map.set_pg_upmap(PgId::new(entry.pool, entry.seed), Some(entry.value.clone()));
        }
        for entry in &self.pg_upmap_items {
            map.set_pg_upmap_items(PgId::new(entry.pool, entry.seed), Some(entry.value.clone()));
        }
        for entry in &self.pg_temp {
            map.set_pg_temp(PgId::new(entry.pool, entry.seed), entry.value.clone());
        }
        Ok(map)
    }

    fn build_crush(&mut self, config: &ClusterConfig) -> Result<crush::CrushMap> {
        let mut builder = crush::text::MapBuilder::new();
        for osd in &config.osds {
            // An OSD whose class was removed (`strata osd crush rm-device-class`) has none.
            let class = Some(osd.class.as_str()).filter(|class| !class.is_empty());
            builder.add_device(osd.id, class, crush_weight(osd));
        }
        for host in &config.hosts {
            let devices: Vec<i32> = config
                .osds
                .iter()
                .filter(|osd| osd.host == host.name)
                .map(|osd| osd.id)
                .collect();
            builder.add_host(&host.name, &devices);
        }
        for (name, &id) in &self.bucket_ids {
            if name == "default" || config.hosts.iter().any(|host| &host.name == name) {
                builder.bucket_id(name, id);
            }
        }
        for rule in &self.rules {
            if rule.erasure {
                builder.add_erasure_rule(&rule.name, rule.class.as_deref());
            } else {
                builder.add_replicated_rule(&rule.name, rule.class.as_deref());
            }
        }
        let map = builder
            .build()
            .map_err(|e| ClusterError::Crush(e.to_string()))?;
        for name in config
            .hosts
            .iter()
            .map(|h| h.name.as_str())
            .chain(["default"])
        {
            if let Some(id) = map.item_id_by_name(name) {
                self.bucket_ids.entry(name.to_string()).or_insert(id);
            }
        }
        Ok(map)
    }
}

/// CRUSH weight (16.16) of an OSD: its configured weight, else the size its config names in
/// TiB. The cluster builds placement from configs whose every OSD has a weight, its device's
/// real size where none was given (`weighed` in the crate root); the size fallbacks here
/// serve configs built elsewhere.
fn crush_weight(osd: &crate::config::OsdConfig) -> u32 {
    let weight = osd.weight.unwrap_or_else(|| {
        let size = osd
            .size
            .as_deref()
            .and_then(device::parse_size_bytes)
            .or_else(|| {
                match blockcache::LayeredSpec::parse(&osd.device)
                    .ok()?
                    .core()
                    .backing
                {
                    device::Backing::Memory { size_bytes } => Some(size_bytes),
                    device::Backing::File { size_bytes, .. } => size_bytes,
                }
            })
            .unwrap_or(1 << 40);
        size as f64 / (1u64 << 40) as f64
    });
    ((weight * 65536.0).round() as u32).max(1)
}
