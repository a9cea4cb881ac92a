//! A `rados` backend whose every pool is served through a cache tier: each `pool_create`
//! makes the pool and a cache pool, adds the tier, sets its mode and overlay; `pool_delete`
//! empties the cache the documented way (flush-evict-all, remove-overlay, tier remove).

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rados::{ClusterStats, IoCtx, PoolInfo, PoolSpec, Rados, RadosError, Result};
use tier::{CacheMode, TieredRados};

/// Every pool tiered.
pub struct AutoTiered {
    pub tiered: Arc<TieredRados>,
    pub mode: CacheMode,
    pub settings: Vec<(&'static str, &'static str)>,
}

pub const CACHE_SUFFIX: &str = ".cache";

impl AutoTiered {
    pub async fn new(
        inner: Arc<dyn Rados>,
        mode: CacheMode,
        settings: Vec<(&'static str, &'static str)>,
    ) -> Arc<AutoTiered> {
        let tiered = TieredRados::open(
            inner,
            Arc::new(worker::SystemClock::new()),
            tier::system_wall_clock(),
        )
        .await
        .expect("open tiers");
        Arc::new(AutoTiered {
            tiered,
            mode,
            settings,
        })
    }
}

fn rados_error(error: tier::TierError) -> RadosError {
    error.into()
}

#[async_trait]
impl Rados for AutoTiered {
    async fn pool_create(&self, spec: PoolSpec) -> Result<PoolInfo> {
        let name = spec.name.clone();
        let info = self.tiered.pool_create(spec.clone()).await?;
        let cache = format!("{name}{CACHE_SUFFIX}");
        let mut cache_spec = spec;
        cache_spec.name = cache.clone();
        self.tiered.pool_create(cache_spec).await?;
        self.tiered
            .tier_add(&name, &cache, false)
            .await
            .map_err(rados_error)?;
        for (key, value) in &self.settings {
            self.tiered
                .pool_set(&cache, key, value)
                .await
                .map_err(rados_error)?;
        }
        self.tiered
            .cache_mode(&cache, self.mode, true)
            .await
            .map_err(rados_error)?;
        self.tiered
            .set_overlay(&name, &cache)
            .await
            .map_err(rados_error)?;
        Ok(info)
    }

    async fn pool_delete(&self, name: &str) -> Result<()> {
        let cache = format!("{name}{CACHE_SUFFIX}");
        if self.tiered.tier_config(&cache).is_err() {
            return self.tiered.pool_delete(name).await;
        }
        self.tiered
            .cache_mode(&cache, CacheMode::Proxy, true)
            .await
            .map_err(rados_error)?;
        self.tiered.flush_evict_all(&cache).map_err(rados_error)?;
        let mut removed = false;
        for _ in 0..1000 {
            match self.tiered.remove_overlay(name).await {
                Ok(()) => {
                    removed = true;
                    break;
                }
                Err(tier::TierError::Busy(_)) => {
                    tokio::time::sleep(Duration::from_millis(10)).await
                }
                Err(e) => return Err(e.into()),
            }
        }
        assert!(
            removed,
            "flush-evict-all did not empty the cache: {:?}",
            self.tiered.stats()
        );
        self.tiered
            .tier_remove(name, &cache)
            .await
            .map_err(rados_error)?;
        self.tiered.pool_delete(&cache).await?;
        self.tiered.pool_delete(name).await
    }

    async fn pool_list(&self) -> Result<Vec<PoolInfo>> {
        Ok(self
            .tiered
            .pool_list()
            .await?
            .into_iter()
            .filter(|p| !p.name.ends_with(CACHE_SUFFIX))
            .collect())
    }

    async fn pool_lookup(&self, name: &str) -> Result<PoolInfo> {
        self.tiered.pool_lookup(name).await
    }

    async fn cluster_stats(&self) -> Result<ClusterStats> {
        self.tiered.cluster_stats().await
    }

    async fn io_ctx(&self, pool: &str) -> Result<Arc<dyn IoCtx>> {
        self.tiered.io_ctx(pool).await
    }
}

/// `length` bytes of a pseudo-random pattern drawn from `seed` (xorshift).
pub fn content(seed: u64, length: usize) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..length)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}
