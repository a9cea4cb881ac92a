//! The cluster-level calls for erasure-coded pools: creation (from `cluster.toml` or at run
//! time), the profile of a pool, recovery and scrub of their PGs, and their space.

use osdmap::PgId;
use rados::{PoolInfo, RadosError};

use crate::config::{ClusterConfig, PoolConfig};
use crate::ec::{repair, ErasureProfile};
use crate::error::{ClusterError, Result};
use crate::scrub::ScrubReport;
use crate::{Cluster, Inner};

impl ClusterConfig {
    /// The profile of `pool` if it is erasure-coded (its `erasure` field, parsed).
    pub fn erasure_profile(&self, pool: &PoolConfig) -> Result<Option<ErasureProfile>> {
        let Some(text) = &pool.erasure else {
            return Ok(None);
        };
        let mut profile = ErasureProfile::parse(text)
            .map_err(|what| ClusterError::Config(format!("erasure: {what}")))?;
        if profile.device_class.is_none() {
            profile.device_class = pool.device_class.clone();
        }
        Ok(Some(profile))
    }

    /// [`ClusterConfig::validate_pool`] for an erasure-coded pool: a valid profile, a known
    /// class, `k + m` hosts with OSDs of it (one shard per host).
    pub(crate) fn validate_erasure_pool(&self, pool: &PoolConfig) -> Result<()> {
        let bad = |what: String| Err(ClusterError::Config(what));
        let Some(profile) = self.erasure_profile(pool)? else {
            return Ok(());
        };
        if pool.name.is_empty()
            || pool.name.len() > 255
            || pool.name.contains('/')
            || pool.name.chars().any(char::is_control)
        {
            return bad("name: must be 1..=255 bytes without '/' or control characters".into());
        }
        if pool.crush_rule.is_some() {
            return bad("crush_rule: an erasure-coded pool gets its own rule".into());
        }
        if pool.name == crate::config::RULE_ANY || pool.name.starts_with("replicated_") {
            return bad(format!(
                "name: {:?} is the name of a replicated rule; an erasure-coded pool's rule \
                 takes its name",
                pool.name
            ));
        }
        if !(1..=65536).contains(&pool.pg_num) {
            return bad(format!("pg_num: {} must be 1..=65536", pool.pg_num));
        }
        if let (Some(profile_class), Some(class)) = (&profile.device_class, &pool.device_class) {
            if profile_class != class {
                return bad(format!(
                    "device_class: {class:?} differs from the profile's {profile_class:?}"
                ));
            }
        }
        let class = profile.device_class.as_deref();
        if let Some(class) = class {
            if !self.classes().contains(class) {
                return bad(format!(
                    "device_class: no OSD has class {class:?} (classes: {:?})",
                    self.classes()
                ));
            }
        }
        let hosts = self.hosts_with_class(class);
        if profile.size() as usize > hosts {
            return bad(format!(
                "erasure: k+m = {} shards need as many hosts (failure-domain=host), but only \
                 {hosts} hosts have {} OSDs",
                profile.size(),
                class.unwrap_or("any")
            ));
        }
        Ok(())
    }
}

impl Cluster {
    /// Creates an erasure-coded pool, as `ceph osd erasure-code-profile set` followed by
    /// `ceph osd pool create NAME PG_NUM erasure PROFILE`: `size` `k + m`, `min_size`
    /// `k + 1`, an erasure rule named after the pool.
    pub fn create_erasure_pool(
        &self,
        name: &str,
        profile: &ErasureProfile,
        pg_num: u32,
    ) -> rados::Result<PoolInfo> {
        self.inner.check_open()?;
        let pool = PoolConfig {
            name: name.to_string(),
            size: profile.size(),
            min_size: None,
            pg_num,
            device_class: None,
            crush_rule: None,
            erasure: Some(profile.to_string()),
        };
        self.inner.config().validate_pool(&pool)?;
        let mut info = None;
        self.inner.change_map(|state| {
            if state.pool_by_name(name).is_some() {
                return Err(RadosError::Exists(format!("pool {name:?}")).into());
            }
            if state.rules.iter().any(|rule| rule.name == name) {
                return Err(RadosError::Exists(format!("CRUSH rule {name:?}")).into());
            }
            info = Some(crate::ec::add_pool(state, name, profile, pg_num));
            Ok(())
        })?;
        info.ok_or_else(|| RadosError::Io("pool creation lost".into()))
    }

    /// The erasure-code profile of pool `name`; `None` for a replicated pool.
    pub fn erasure_profile(&self, name: &str) -> Option<ErasureProfile> {
        self.inner
            .lock_state()
            .pool_by_name(name)
            .and_then(|pool| pool.erasure.clone())
    }

    /// Recovers every PG of the erasure-coded pools now (what the background recovery does
    /// for the PGs it has queued); returns whether every one is whole.
    pub async fn recover_erasure(&self) -> Result<bool> {
        let mut whole = true;
        for (pg, profile) in self.inner.erasure_pgs(None) {
            whole &= repair::recover_pg(&self.inner, pg, &profile).await?;
        }
        Ok(whole)
    }

    /// Device bytes the shards of erasure-coded pool `name` take on every up OSD, and the
    /// logical bytes of its objects: (allocated, stored, objects).
    pub async fn erasure_usage(&self, name: &str) -> rados::Result<(u64, u64, u64)> {
        let profile = self
            .erasure_profile(name)
            .ok_or_else(|| repair::not_erasure(name))?;
        let map = self.inner.map();
        let pool = map
            .pool_by_name(name)
            .ok_or_else(|| RadosError::NotFound(format!("pool {name:?}")))?;
        let allocated = self.erasure_allocated_bytes(pool.id);
        let mut stored = 0;
        let mut objects = 0;
        let io = crate::ec::EcPoolHandle::new(&self.inner, self.inner.pool_info(name)?, profile);
        let mut cursor = rados::ListCursor::default();
        loop {
            use rados::IoCtx;
            let page = io.list(&cursor, 1000).await?;
            for object in &page.objects {
                stored += io.stat(object).await?.size_bytes;
                objects += 1;
            }
            match page.next {
                Some(next) => cursor = next,
                None => break,
            }
        }
        Ok((allocated, stored, objects))
    }
}

impl Cluster {
    /// Device bytes allocated to the shards of erasure-coded pool `pool` (an id) on every
    /// OSD: what the pool costs in space.
    pub fn erasure_allocated_bytes(&self, pool: i64) -> u64 {
        let prefix = format!("{pool}.");
        let mut allocated = 0;
        for osd in self.inner.osds.values() {
            for (collection, usage) in &osd.store().statfs().collections {
                let shard = collection
                    .strip_prefix(&prefix)
                    .is_some_and(|rest| rest.contains('s'));
                if shard {
                    allocated += usage.allocated_bytes;
                }
            }
        }
        allocated
    }
}

impl Inner {
    /// The PGs of the erasure-coded pools (of pool `only`, if given), with their profiles.
    pub(crate) fn erasure_pgs(&self, only: Option<i64>) -> Vec<(PgId, ErasureProfile)> {
        let state = self.lock_state();
        state
            .pools
            .values()
            .filter(|pool| only.is_none_or(|id| id == pool.id))
            .filter_map(|pool| {
                let profile = pool.erasure.clone()?;
                Some((0..pool.pg_num).map(move |seed| (PgId::new(pool.id, seed), profile.clone())))
            })
            .flatten()
            .collect()
    }

    /// The profile of pool `id`, if it is erasure-coded.
    pub(crate) fn erasure_profile_of(&self, id: i64) -> Option<ErasureProfile> {
        self.lock_state()
            .pools
            .get(&id)
            .and_then(|pool| pool.erasure.clone())
    }

    /// Scrubs one erasure-coded PG.
    pub(crate) async fn scrub_erasure_pg(
        &self,
        pg: PgId,
        profile: &ErasureProfile,
        repair: bool,
    ) -> rados::Result<ScrubReport> {
        repair::scrub_pg(self, pg, profile, repair).await
    }
}
