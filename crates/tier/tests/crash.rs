//! Crash safety: the process dies at every possible point of a sequence of writes, promotions,
//! flushes and evictions (the backend refuses every op after the N-th mutation, as if the
//! process were killed there), a new tier opens over the same cluster, and every write that was
//! acknowledged before the crash reads back, through the overlay and, once everything is
//! flushed, from the base pool alone.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use rados::memory::MemoryRados;
use rados::{
    ClusterStats, IoCtx, ListCursor, ListPage, ObjectStat, OmapPage, PoolInfo, PoolSpec, Rados,
    RadosError, Result, WriteOp,
};
use tier::{CacheMode, TieredRados};

/// Counts mutations across all pools; after `limit` of them every op fails.
struct Dying {
    inner: Arc<dyn Rados>,
    mutations: Arc<AtomicU64>,
    limit: u64,
}

struct DyingIo {
    inner: Arc<dyn IoCtx>,
    mutations: Arc<AtomicU64>,
    limit: u64,
}

impl DyingIo {
    fn alive(&self) -> Result<()> {
        if self.mutations.load(Ordering::SeqCst) > self.limit {
            return Err(RadosError::Shutdown);
        }
        Ok(())
    }
}

#[async_trait]
impl Rados for Dying {
    async fn pool_create(&self, spec: PoolSpec) -> Result<PoolInfo> {
        self.inner.pool_create(spec).await
    }
    async fn pool_delete(&self, name: &str) -> Result<()> {
        self.inner.pool_delete(name).await
    }
    async fn pool_list(&self) -> Result<Vec<PoolInfo>> {
        self.inner.pool_list().await
    }
    async fn pool_lookup(&self, name: &str) -> Result<PoolInfo> {
        self.inner.pool_lookup(name).await
    }
    async fn cluster_stats(&self) -> Result<ClusterStats> {
        self.inner.cluster_stats().await
    }
    async fn io_ctx(&self, pool: &str) -> Result<Arc<dyn IoCtx>> {
        Ok(Arc::new(DyingIo {
            inner: self.inner.io_ctx(pool).await?,
            mutations: self.mutations.clone(),
            limit: self.limit,
        }))
    }
}

#[async_trait]
impl IoCtx for DyingIo {
    fn pool(&self) -> &PoolInfo {
        self.inner.pool()
    }
    async fn operate(&self, object: &str, op: WriteOp) -> Result<()> {
        let n = self.mutations.fetch_add(1, Ordering::SeqCst);
        if n >= self.limit {
            return Err(RadosError::Shutdown);
        }
        self.inner.operate(object, op).await
    }
    async fn read(&self, object: &str, offset_bytes: u64, length_bytes: u64) -> Result<Vec<u8>> {
        self.alive()?;
        self.inner.read(object, offset_bytes, length_bytes).await
    }
    async fn stat(&self, object: &str) -> Result<ObjectStat> {
        self.alive()?;
        self.inner.stat(object).await
    }
    async fn get_xattr(&self, object: &str, name: &str) -> Result<Vec<u8>> {
        self.alive()?;
        self.inner.get_xattr(object, name).await
    }
    async fn get_xattrs(&self, object: &str) -> Result<BTreeMap<String, Vec<u8>>> {
        self.alive()?;
        self.inner.get_xattrs(object).await
    }
    async fn omap_get_vals(
        &self,
        object: &str,
        start_after: Option<&[u8]>,
        prefix: &[u8],
        max: usize,
    ) -> Result<OmapPage> {
        self.alive()?;
        self.inner
            .omap_get_vals(object, start_after, prefix, max)
            .await
    }
    async fn omap_get_vals_by_keys(
        &self,
        object: &str,
        keys: &[Vec<u8>],
    ) -> Result<BTreeMap<Vec<u8>, Vec<u8>>> {
        self.alive()?;
        self.inner.omap_get_vals_by_keys(object, keys).await
    }
    async fn list(&self, cursor: &ListCursor, max: usize) -> Result<ListPage> {
        self.alive()?;
        self.inner.list(cursor, max).await
    }
}

async fn open(inner: Arc<dyn Rados>) -> Arc<TieredRados> {
    TieredRados::open(
        inner,
        Arc::new(worker::SystemClock::new()),
        tier::system_wall_clock(),
    )
    .await
    .expect("open tiers")
}

/// One scenario: writes (some partial, over promoted blocks), deletes, flushes and
/// evictions; the process dies after `limit` mutations. Returns whether it died.
async fn scenario(limit: u64) -> bool {
    let memory: Arc<dyn Rados> = Arc::new(MemoryRados::new());
    for name in ["base", "cache"] {
        memory
            .pool_create(PoolSpec::new(name).with_size(1).with_pg_num(8))
            .await
            .unwrap();
    }
    // Objects in the base pool before the tier exists.
    let base = memory.io_ctx("base").await.unwrap();
    let mut expected: BTreeMap<String, Option<Vec<u8>>> = BTreeMap::new();
    for i in 0..4 {
        let data = vec![i as u8 + 1; 20_000];
        base.write_full(&format!("o{i}"), &data).await.unwrap();
        expected.insert(format!("o{i}"), Some(data));
    }
    {
        let setup = open(memory.clone()).await;
        setup.tier_add("base", "cache", false).await.unwrap();
        setup.pool_set("cache", "hit_set_count", "0").await.unwrap();
        setup
            .pool_set("cache", "tier_block_bytes", "4096")
            .await
            .unwrap();
        setup
            .cache_mode("cache", CacheMode::Writeback, false)
            .await
            .unwrap();
        setup.set_overlay("base", "cache").await.unwrap();
        setup.shutdown().await;
    }
    let mutations = Arc::new(AtomicU64::new(0));
    let dying: Arc<dyn Rados> = Arc::new(Dying {
        inner: memory.clone(),
        mutations: mutations.clone(),
        limit,
    });
    let tiered = open(dying).await;
    let io = tiered.io_ctx("base").await.unwrap();
    let tier = tiered.overlay_of("base").unwrap();
    let mut died = false;
    for round in 0..6u8 {
        for i in 0..5 {
            let name = format!("o{i}");
            let byte = 100 + round * 10 + i as u8;
            let step = (round as usize + i) % 4;
            let result = match step {
                0 => {
                    // A partial write in the middle of a block the cache may lack.
                    let offset = 1000 + 4096 * u64::from(round);
                    let outcome = io.write(&name, offset, &[byte; 3000]).await;
                    if outcome.is_ok() {
                        let entry = expected.entry(name.clone()).or_insert(None);
                        let data = entry.get_or_insert_with(Vec::new);
                        let end = offset as usize + 3000;
                        if data.len() < end {
                            data.resize(end, 0);
                        }
                        data[offset as usize..end].fill(byte);
                    }
                    outcome.map(|_| ())
                }
                1 => {
                    let outcome = io.truncate(&name, 7000).await;
                    if outcome.is_ok() {
                        if let Some(Some(data)) = expected.get_mut(&name) {
                            data.resize(7000, 0);
                        }
                    }
                    outcome
                }
                2 => tier
                    .flush(&name)
                    .await
                    .map(|_| ())
                    .map_err(RadosError::from),
                _ => {
                    if round % 2 == 0 {
                        tier.evict(&name).await.map_err(RadosError::from)
                    } else {
                        let outcome = io.remove(&name).await;
                        match outcome {
                            Ok(()) => {
                                expected.insert(name.clone(), None);
                                Ok(())
                            }
                            Err(RadosError::NotFound(_)) => Ok(()),
                            Err(e) => Err(e),
                        }
                    }
                }
            };
            if matches!(result, Err(RadosError::Shutdown)) {
                died = true;
                break;
            }
            if let Err(e) = result {
                if !matches!(e, RadosError::NotFound(_)) {
                    panic!("limit {limit} round {round} object {name}: {e:?}");
                }
            }
        }
        if died {
            break;
        }
    }
    tiered.quiesce().await;
    tiered.shutdown().await;
    drop(tier);
    drop(io);
    // A new process over the same cluster.
    let restarted = open(memory.clone()).await;
    let io = restarted.io_ctx("base").await.unwrap();
    for (name, want) in &expected {
        let got = match io.read_full(name).await {
            Ok(data) => Some(data),
            Err(RadosError::NotFound(_)) => None,
            Err(e) => panic!("limit {limit}: read {name}: {e:?}"),
        };
        assert!(
            got == *want,
            "limit {limit}: {name} through the restarted tier: {:?} bytes vs {:?} expected",
            got.as_ref().map(Vec::len),
            want.as_ref().map(Vec::len)
        );
    }
    // Everything flushed: the base pool alone has it.
    restarted
        .cache_mode("cache", CacheMode::Proxy, false)
        .await
        .unwrap();
    restarted.flush_evict_all("cache").unwrap();
    let mut emptied = false;
    for _ in 0..2000 {
        if restarted.remove_overlay("base").await.is_ok() {
            emptied = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert!(
        emptied,
        "limit {limit}: cache did not empty: {:?}",
        restarted.stats()
    );
    let base = memory.io_ctx("base").await.unwrap();
    let listed: BTreeSet<String> = base.list_all().await.unwrap().into_iter().collect();
    for (name, want) in &expected {
        let got = base.read_full(name).await.ok();
        assert!(
            got == *want,
            "limit {limit}: {name} in the base pool after flushing: {:?} vs {:?}",
            got.as_ref().map(Vec::len),
            want.as_ref().map(Vec::len)
        );
        assert_eq!(
            listed.contains(name),
            want.is_some(),
            "limit {limit}: listing {name}"
        );
    }
    died
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_crash_point_keeps_acknowledged_writes() {
    let mut limit = 0;
    loop {
        let died = scenario(limit).await;
        if !died {
            break;
        }
        limit += 1;
        assert!(limit < 10_000, "the scenario never ends");
    }
    assert!(
        limit > 20,
        "only {limit} crash points: the scenario is too short to cross flushes"
    );
}
