//! Online changes to a pool's placement settings and quotas, as Ceph's `osd pool set|get`
//! names them: `size`, `min_size`, `pg_num` (refused: no PG splitting or merging yet),
//! `quota_max_bytes` and `quota_max_objects`.
//!
//! Each change is one new epoch of the state (`state.json`), through [`Inner::change_map`]:
//! a larger `size` gives every PG more up OSDs and recovery copies the replicas they lack
//! (the old holders serve as `pg_temp` meanwhile); a smaller one drops the last ones, whose
//! copies recovery removes as strays. Quotas are checked by the write path
//! ([`Inner::check_pool_quota`]) against the pool's usage read from the stores, as Ceph's
//! `FLAG_FULL_QUOTA` is: a write that would add an object past `quota_max_objects` or bytes
//! past `quota_max_bytes` is refused with `NoSpace` ("pool quota exceeded"); removals, and
//! changes that add neither, go on, so a user can get back under the quota.

use rados::{PoolInfo, RadosError};
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::{Cluster, Inner};

/// The keys [`Cluster::pool_set`] takes and [`Cluster::pool_settings`] reports.
pub const POOL_KEYS: [&str; 5] = [
    "size",
    "min_size",
    "pg_num",
    "quota_max_bytes",
    "quota_max_objects",
];

/// A pool's placement settings and quotas (`osd pool get POOL all`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolSettings {
    /// Replicas (`k + m` for an erasure-coded pool).
    pub size: u32,
    /// Replicas needed to accept a write.
    pub min_size: u32,
    /// Placement groups.
    pub pg_num: u32,
    /// The CRUSH rule's name.
    pub crush_rule: String,
    /// Bytes the pool may store (once, not per replica); 0: no quota.
    pub quota_max_bytes: u64,
    /// Objects the pool may hold; 0: no quota.
    pub quota_max_objects: u64,
}

impl PoolSettings {
    /// The value of `key` (one of [`POOL_KEYS`] or `crush_rule`) as `osd pool get` prints it.
    pub fn get(&self, key: &str) -> Option<String> {
        Some(match key {
            "size" => self.size.to_string(),
            "min_size" => self.min_size.to_string(),
            "pg_num" => self.pg_num.to_string(),
            "crush_rule" => self.crush_rule.clone(),
            "quota_max_bytes" => self.quota_max_bytes.to_string(),
            "quota_max_objects" => self.quota_max_objects.to_string(),
            _ => return None,
        })
    }
}

fn invalid(what: String) -> crate::ClusterError {
    RadosError::InvalidArgument(what).into()
}

impl Cluster {
    /// The settings of pool `name`.
    pub fn pool_settings(&self, name: &str) -> Result<PoolSettings> {
        let state = self.inner.lock_state();
        let pool = state
            .pool_by_name(name)
            .ok_or_else(|| RadosError::NotFound(format!("pool {name:?}")))?;
        Ok(PoolSettings {
            size: pool.size,
            min_size: pool.min_size,
            pg_num: pool.pg_num,
            crush_rule: pool.rule.clone(),
            quota_max_bytes: pool.quota_max_bytes,
            quota_max_objects: pool.quota_max_objects,
        })
    }

    /// Sets `key` (one of [`POOL_KEYS`]) of pool `name` to `value`, as Ceph's `osd pool set`
    /// does: `size` 1..=10, at most the hosts its rule can place on (min_size follows:
    /// `size - size/2`); `min_size` 1..=size; `pg_num` refused unless unchanged; quotas any
    /// count, 0 removing them. An erasure-coded pool takes none of them yet (its profile
    /// sets size and min_size, and its write path does not check quotas). Returns the epoch.
    pub fn pool_set(&self, name: &str, key: &str, value: &str) -> Result<u64> {
        let number: u64 = value.parse().map_err(|_| {
            invalid(format!(
                "value {value:?} for {key} is not a whole number (of {})",
                if key.starts_with("quota_max_bytes") {
                    "bytes"
                } else {
                    "replicas, PGs or objects"
                }
            ))
        })?;
        if !POOL_KEYS.contains(&key) {
            return Err(invalid(format!(
                "unrecognized variable {key:?} (pool settings: {})",
                POOL_KEYS.join(", ")
            )));
        }
        let placed = self.inner.placed();
        self.inner.change_map(|state| {
            let class = {
                let pool = state
                    .pool_by_name(name)
                    .ok_or_else(|| RadosError::NotFound(format!("pool {name:?}")))?;
                state
                    .rules
                    .iter()
                    .find(|rule| rule.name == pool.rule)
                    .and_then(|rule| rule.class.clone())
            };
            let pool = state
                .pools
                .values_mut()
                .find(|pool| pool.name == name)
                .ok_or_else(|| RadosError::NotFound(format!("pool {name:?}")))?;
            if let Some(profile) = &pool.erasure {
                if key != "pg_num" {
                    return Err(RadosError::NotSupported(format!(
                        "{key} of erasure-coded pool {name:?} stays as its profile {profile}                          set it: its write path does not apply it yet"
                    ))
                    .into());
                }
            }
            match key {
                "size" => {
                    if !(1..=10).contains(&number) {
                        return Err(invalid("pool size must be between 1 and 10".into()));
                    }
                    let hosts = placed.hosts_with_class(class.as_deref()) as u64;
                    if number > hosts {
                        return Err(invalid(format!(
                            "pool {name:?} can not have {number} replicas: its rule places \
                             them on distinct hosts and {hosts} host(s) have OSDs{}",
                            class
                                .as_deref()
                                .map(|class| format!(" of class {class:?}"))
                                .unwrap_or_default()
                        )));
                    }
                    pool.size = number as u32;
                    pool.min_size = pool.size - pool.size / 2;
                }
                "min_size" => {
                    if number < 1 || number > u64::from(pool.size) {
                        return Err(invalid(format!(
                            "pool min_size must be between 1 and size, which is set to {}",
                            pool.size
                        )));
                    }
                    pool.min_size = number as u32;
                }
                "pg_num" => {
                    if number != u64::from(pool.pg_num) {
                        return Err(RadosError::NotSupported(format!(
                            "pg_num of pool {name:?} stays {}: changing it needs PG splitting \
                             and merging, which strata does not do yet; create a pool with the \
                             pg_num wanted and copy the objects into it",
                            pool.pg_num
                        ))
                        .into());
                    }
                }
                "quota_max_bytes" => pool.quota_max_bytes = number,
                "quota_max_objects" => pool.quota_max_objects = number,
                _ => unreachable!("checked against POOL_KEYS"),
            }
            Ok(())
        })
    }
}

impl Inner {
    /// Refuses a write adding `data_bytes` (or a new object) to `pool` once that would take
    /// the pool past a quota of its (`quota_max_objects`: at that many objects already;
    /// `quota_max_bytes`: stored bytes plus these past it). Without quotas, nothing is read.
    pub(crate) fn check_pool_quota(&self, pool: &PoolInfo, data_bytes: u64) -> rados::Result<()> {
        let (max_bytes, max_objects) = match self.map().pool(pool.id) {
            Some(entry) => (entry.extra.quota_max_bytes, entry.extra.quota_max_objects),
            None => return Ok(()),
        };
        if max_bytes == 0 && max_objects == 0 {
            return Ok(());
        }
        let stats = crate::stats::cluster_stats(self);
        let Some(usage) = stats.pools.iter().find(|p| p.name == pool.name) else {
            return Ok(());
        };
        if max_objects != 0 && usage.objects >= max_objects {
            return Err(RadosError::NoSpace(format!(
                "pool {:?} quota exceeded: it holds {} objects, its quota_max_objects is \
                 {max_objects}; remove objects or raise the quota (strata osd pool set {} \
                 quota_max_objects N)",
                pool.name, usage.objects, pool.name
            )));
        }
        if max_bytes != 0 && usage.stored_bytes.saturating_add(data_bytes) > max_bytes {
            return Err(RadosError::NoSpace(format!(
                "pool {:?} quota exceeded: it stores {} bytes, this write adds {data_bytes}, \
                 its quota_max_bytes is {max_bytes}; remove objects or raise the quota \
                 (strata osd pool set {} quota_max_bytes N)",
                pool.name, usage.stored_bytes, pool.name
            )));
        }
        Ok(())
    }
}
