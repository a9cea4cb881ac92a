//! The tiers of a cluster: their configurations (kept in each cache pool's
//! [`CONFIG_OBJECT`], so they live in the cluster whatever the backend), the commands that
//! change them with Ceph's rules, and [`TieredRados`], the [`Rados`] handle whose `io_ctx` of
//! a base pool with an overlay serves it through its tier.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use rados::{ClusterStats, IoCtx, ListCursor, PoolInfo, PoolSpec, Rados, RadosError};
use worker::{Clock, WorkerHandle};

use crate::config::{CacheMode, TierConfig};
use crate::engine::{Tier, WallClock};
use crate::error::{Result, TierError};
use crate::overlay::OverlayIoCtx;
use crate::stats::TierStats;

/// The object of a cache pool holding its [`TierConfig`].
pub const CONFIG_OBJECT: &str = "strata.tier.config";

struct Running {
    tier: Arc<Tier>,
    agent: WorkerHandle,
}

/// A cluster handle that knows its tiers.
pub struct TieredRados {
    inner: Arc<dyn Rados>,
    clock: Arc<dyn Clock>,
    wall: WallClock,
    changes: tokio::sync::Mutex<()>,
    configs: RwLock<BTreeMap<String, TierConfig>>,
    running: RwLock<HashMap<String, Running>>,
}

impl TieredRados {
    /// Reads every pool's tier configuration and opens the tiers that are overlays.
    pub async fn open(
        inner: Arc<dyn Rados>,
        clock: Arc<dyn Clock>,
        wall: WallClock,
    ) -> Result<Arc<TieredRados>> {
        let rados = Arc::new(TieredRados {
            inner,
            clock,
            wall,
            changes: tokio::sync::Mutex::new(()),
            configs: RwLock::new(BTreeMap::new()),
            running: RwLock::new(HashMap::new()),
        });
        for pool in rados.inner.pool_list().await? {
            let io = rados.inner.io_ctx(&pool.name).await?;
            match io.read_full(CONFIG_OBJECT).await {
                Ok(bytes) => {
                    let config = TierConfig::decode(&bytes)?;
                    rados
                        .configs
                        .write()
                        .expect("configs lock")
                        .insert(config.cache_pool.clone(), config);
                }
                Err(RadosError::NotFound(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let overlays: Vec<TierConfig> = rados
            .configs
            .read()
            .expect("configs lock")
            .values()
            .filter(|c| c.overlay)
            .cloned()
            .collect();
        for config in overlays {
            rados.start(config).await?;
        }
        Ok(rados)
    }

    /// The backend under the tiers.
    pub fn inner(&self) -> &Arc<dyn Rados> {
        &self.inner
    }

    async fn start(&self, config: TierConfig) -> Result<()> {
        let base = self.inner.io_ctx(&config.base_pool).await?;
        let cache = self.inner.io_ctx(&config.cache_pool).await?;
        let tier = Tier::open(
            config.clone(),
            base,
            cache,
            self.clock.clone(),
            self.wall.clone(),
        )
        .await?;
        let agent = crate::agent::start(&tier);
        self.running
            .write()
            .expect("running lock")
            .insert(config.base_pool.clone(), Running { tier, agent });
        Ok(())
    }

    /// Every tier's configuration.
    pub fn tiers(&self) -> Vec<TierConfig> {
        self.configs
            .read()
            .expect("configs lock")
            .values()
            .cloned()
            .collect()
    }

    /// The configuration of cache pool `cache`.
    pub fn tier_config(&self, cache: &str) -> Result<TierConfig> {
        self.configs
            .read()
            .expect("configs lock")
            .get(cache)
            .cloned()
            .ok_or_else(|| TierError::NotFound(format!("pool {cache:?} is not a cache tier")))
    }

    /// The running tier serving base pool `base`, if it has an overlay.
    pub fn overlay_of(&self, base: &str) -> Option<Arc<Tier>> {
        self.running
            .read()
            .expect("running lock")
            .get(base)
            .map(|r| r.tier.clone())
    }

    /// Counters and gauges of every tier (overlays running; others only configured).
    pub fn stats(&self) -> Vec<TierStats> {
        self.tiers()
            .into_iter()
            .map(|config| match self.overlay_of(&config.base_pool) {
                Some(tier) if tier.config().cache_pool == config.cache_pool => tier.stats(),
                _ => TierStats {
                    cache_pool: config.cache_pool.clone(),
                    base_pool: config.base_pool.clone(),
                    mode: config.mode.name().to_string(),
                    admission: config.settings.tier_admission.name().to_string(),
                    capacity_objects: config.settings.capacity_objects() as u64,
                    ..Default::default()
                },
            })
            .collect()
    }

    async fn persist(&self, config: &TierConfig) -> Result<()> {
        let io = self.inner.io_ctx(&config.cache_pool).await?;
        io.write_full(CONFIG_OBJECT, &config.encode()).await?;
        self.configs
            .write()
            .expect("configs lock")
            .insert(config.cache_pool.clone(), config.clone());
        if let Some(tier) = self.overlay_of(&config.base_pool) {
            if config.overlay {
                tier.reconfigure(config.clone());
            }
        }
        Ok(())
    }

    /// `osd tier add BASE CACHE [--force-nonempty]`.
    pub async fn tier_add(&self, base: &str, cache: &str, force_nonempty: bool) -> Result<()> {
        let _changes = self.changes.lock().await;
        if base == cache {
            return Err(TierError::Invalid(format!(
                "pool {base:?} cannot be a tier of itself"
            )));
        }
        self.inner
            .pool_lookup(base)
            .await
            .map_err(|_| TierError::NotFound(format!("unrecognized pool {base:?}")))?;
        let cache_io = self
            .inner
            .io_ctx(cache)
            .await
            .map_err(|_| TierError::NotFound(format!("unrecognized pool {cache:?}")))?;
        if cache_io.pool().erasure_coded {
            return Err(TierError::Invalid(format!(
                "tier pool {cache:?} is an erasure-coded pool, which cannot be a tier \
                 (a cache pool must be replicated; the base pool may be erasure-coded)"
            )));
        }
        let configs = self.tiers();
        if let Some(existing) = configs.iter().find(|c| c.cache_pool == cache) {
            return Err(TierError::Invalid(format!(
                "tier pool {cache:?} is already a tier of {:?}",
                existing.base_pool
            )));
        }
        if let Some(existing) = configs.iter().find(|c| c.cache_pool == base) {
            return Err(TierError::Invalid(format!(
                "pool {base:?} is a tier of {:?}: a tier cannot have tiers",
                existing.base_pool
            )));
        }
        if configs.iter().any(|c| c.base_pool == cache) {
            return Err(TierError::Invalid(format!(
                "pool {cache:?} has tiers of its own: it cannot be a tier"
            )));
        }
        if !force_nonempty {
            let page = cache_io.list(&ListCursor::start(), 1).await?;
            let mut cursor = page.next.clone();
            let mut empty = page.objects.is_empty();
            while empty {
                let Some(next) = cursor else { break };
                let page = cache_io.list(&next, 16).await?;
                empty = page.objects.is_empty();
                cursor = page.next;
            }
            if !empty {
                return Err(TierError::Invalid(format!(
                    "tier pool {cache:?} is not empty; --force-nonempty to force"
                )));
            }
        }
        self.persist(&TierConfig::new(base, cache)).await
    }

    /// `osd tier remove BASE CACHE`.
    pub async fn tier_remove(&self, base: &str, cache: &str) -> Result<()> {
        let _changes = self.changes.lock().await;
        let config = self.tier_config(cache)?;
        if config.base_pool != base {
            return Err(TierError::Invalid(format!(
                "tier pool {cache:?} is not a tier of {base:?} (it is of {:?})",
                config.base_pool
            )));
        }
        if config.overlay {
            return Err(TierError::Busy(format!(
                "tier pool {cache:?} is the overlay for {base:?}; please remove-overlay first"
            )));
        }
        let io = self.inner.io_ctx(cache).await?;
        match io.remove(crate::registry::CONFIG_OBJECT).await {
            Ok(()) | Err(RadosError::NotFound(_)) => {}
            Err(e) => return Err(e.into()),
        }
        self.configs.write().expect("configs lock").remove(cache);
        Ok(())
    }

    /// `osd tier cache-mode CACHE MODE [--yes-i-really-mean-it]`.
    pub async fn cache_mode(&self, cache: &str, mode: CacheMode, confirmed: bool) -> Result<()> {
        let _changes = self.changes.lock().await;
        let mut config = self.tier_config(cache)?;
        let dirty = self
            .overlay_of(&config.base_pool)
            .map(|t| t.dirty_objects())
            .unwrap_or(0);
        config.check_mode_change(mode, dirty, confirmed)?;
        config.mode = mode;
        self.persist(&config).await
    }

    /// `osd tier set-overlay BASE CACHE`.
    pub async fn set_overlay(&self, base: &str, cache: &str) -> Result<()> {
        let _changes = self.changes.lock().await;
        let mut config = self.tier_config(cache)?;
        if config.base_pool != base {
            return Err(TierError::Invalid(format!(
                "tier pool {cache:?} is not a tier of {base:?}"
            )));
        }
        if let Some(other) = self
            .tiers()
            .into_iter()
            .find(|c| c.base_pool == base && c.overlay)
        {
            return Err(TierError::Busy(format!(
                "pool {base:?} has overlay {:?}; please remove-overlay first",
                other.cache_pool
            )));
        }
        config.overlay = true;
        self.persist(&config).await?;
        self.start(config).await
    }

    /// `osd tier remove-overlay BASE`: refused while the cache holds objects, so nothing
    /// written through it is left behind where the base pool's clients cannot see it.
    pub async fn remove_overlay(&self, base: &str) -> Result<()> {
        let _changes = self.changes.lock().await;
        let Some(mut config) = self
            .tiers()
            .into_iter()
            .find(|c| c.base_pool == base && c.overlay)
        else {
            return Err(TierError::Invalid(format!("pool {base:?} has no overlay")));
        };
        if let Some(tier) = self.overlay_of(base) {
            let (objects, dirty) = (tier.cached_objects(), tier.dirty_objects());
            if objects > 0 {
                return Err(TierError::Busy(format!(
                    "cache pool {:?} still holds {objects} objects ({dirty} dirty): set \
                     cache-mode proxy (or none) and run `strata osd tier flush-evict-all {}` \
                     first",
                    config.cache_pool, config.cache_pool
                )));
            }
        }
        config.overlay = false;
        self.persist(&config).await?;
        let running = self.running.write().expect("running lock").remove(base);
        if let Some(running) = running {
            running.agent.stop().await;
        }
        Ok(())
    }

    /// `osd pool set CACHE KEY VALUE` for a tier setting.
    pub async fn pool_set(&self, cache: &str, key: &str, value: &str) -> Result<()> {
        let _changes = self.changes.lock().await;
        let mut config = self.tier_config(cache)?;
        config.settings.set(key, value)?;
        self.persist(&config).await
    }

    /// `osd pool get CACHE KEY`.
    pub fn pool_get(&self, cache: &str, key: &str) -> Result<String> {
        self.tier_config(cache)?.settings.get(key)
    }

    /// `rados -p CACHE cache-flush-evict-all`, in the background: the agent flushes every
    /// dirty object and evicts everything; [`TieredRados::stats`] shows the progress.
    pub fn flush_evict_all(&self, cache: &str) -> Result<()> {
        let config = self.tier_config(cache)?;
        match self.overlay_of(&config.base_pool) {
            Some(tier) => {
                tier.request_flush_evict_all();
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Waits until no background promotion is running (tests stop a process between ops).
    pub async fn quiesce(&self) {
        let tiers: Vec<Arc<Tier>> = self
            .running
            .read()
            .expect("running lock")
            .values()
            .map(|r| r.tier.clone())
            .collect();
        for tier in tiers {
            while tier.promotions_running() > 0 {
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
        }
    }

    /// Stops every agent (the data is already durable; a restart resumes the flushing).
    pub async fn shutdown(&self) {
        let running: Vec<Running> = self
            .running
            .write()
            .expect("running lock")
            .drain()
            .map(|(_, r)| r)
            .collect();
        for running in running {
            running.agent.stop().await;
        }
    }
}

#[async_trait]
impl Rados for TieredRados {
    async fn pool_create(&self, spec: PoolSpec) -> rados::Result<PoolInfo> {
        self.inner.pool_create(spec).await
    }

    async fn pool_delete(&self, name: &str) -> rados::Result<()> {
        for config in self.tiers() {
            if config.cache_pool == name {
                return Err(RadosError::Busy(format!(
                    "pool {name:?} is a tier of {:?}; remove the tier first",
                    config.base_pool
                )));
            }
            if config.base_pool == name {
                return Err(RadosError::Busy(format!(
                    "pool {name:?} has tier {:?}; remove the tier first",
                    config.cache_pool
                )));
            }
        }
        self.inner.pool_delete(name).await
    }

    async fn pool_list(&self) -> rados::Result<Vec<PoolInfo>> {
        self.inner.pool_list().await
    }

    async fn pool_lookup(&self, name: &str) -> rados::Result<PoolInfo> {
        self.inner.pool_lookup(name).await
    }

    async fn cluster_stats(&self) -> rados::Result<ClusterStats> {
        self.inner.cluster_stats().await
    }

    async fn io_ctx(&self, pool: &str) -> rados::Result<Arc<dyn IoCtx>> {
        if let Some(tier) = self.overlay_of(pool) {
            let info = self.inner.pool_lookup(pool).await?;
            return Ok(Arc::new(OverlayIoCtx::new(info, tier)));
        }
        self.inner.io_ctx(pool).await
    }

    /// The backend's answer for the pool itself (a hint: with an overlay, objects written
    /// through it land in the cache pool first).
    async fn pg_acting_sets(&self, pool: &str) -> rados::Result<Vec<Vec<i32>>> {
        self.inner.pg_acting_sets(pool).await
    }
}
