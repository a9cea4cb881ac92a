//! A background flush does not hold the object's lock while it writes the base pool: a
//! client write that lands meanwhile completes at once, keeps the object dirty, and the next
//! flush carries it to the base pool. An eviction asked for meanwhile is refused, not run over
//! the flush in flight.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rados::memory::MemoryRados;
use rados::{
    ClusterStats, IoCtx, ListCursor, ListPage, ObjectStat, OmapPage, PoolInfo, PoolSpec, Rados,
    Result, WriteOp,
};
use tier::{CacheMode, TierError, TieredRados};

/// Holds every write to the base pool while armed, until released.
#[derive(Default)]
struct Gate {
    armed: AtomicBool,
    blocked: tokio::sync::Notify,
    release: tokio::sync::Notify,
}

struct Gated {
    inner: Arc<dyn Rados>,
    gate: Arc<Gate>,
}

struct GatedIo {
    inner: Arc<dyn IoCtx>,
    gate: Option<Arc<Gate>>,
}

#[async_trait]
impl Rados for Gated {
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
        Ok(Arc::new(GatedIo {
            inner: self.inner.io_ctx(pool).await?,
            gate: (pool == "base").then(|| self.gate.clone()),
        }))
    }
}

#[async_trait]
impl IoCtx for GatedIo {
    fn pool(&self) -> &PoolInfo {
        self.inner.pool()
    }
    async fn operate(&self, object: &str, op: WriteOp) -> Result<()> {
        if let Some(gate) = &self.gate {
            if gate.armed.load(Ordering::SeqCst) {
                let released = gate.release.notified();
                gate.blocked.notify_one();
                released.await;
            }
        }
        self.inner.operate(object, op).await
    }
    async fn read(&self, object: &str, offset_bytes: u64, length_bytes: u64) -> Result<Vec<u8>> {
        self.inner.read(object, offset_bytes, length_bytes).await
    }
    async fn stat(&self, object: &str) -> Result<ObjectStat> {
        self.inner.stat(object).await
    }
    async fn get_xattr(&self, object: &str, name: &str) -> Result<Vec<u8>> {
        self.inner.get_xattr(object, name).await
    }
    async fn get_xattrs(&self, object: &str) -> Result<BTreeMap<String, Vec<u8>>> {
        self.inner.get_xattrs(object).await
    }
    async fn omap_get_vals(
        &self,
        object: &str,
        start_after: Option<&[u8]>,
        prefix: &[u8],
        max: usize,
    ) -> Result<OmapPage> {
        self.inner
            .omap_get_vals(object, start_after, prefix, max)
            .await
    }
    async fn omap_get_vals_by_keys(
        &self,
        object: &str,
        keys: &[Vec<u8>],
    ) -> Result<BTreeMap<Vec<u8>, Vec<u8>>> {
        self.inner.omap_get_vals_by_keys(object, keys).await
    }
    async fn list(&self, cursor: &ListCursor, max: usize) -> Result<ListPage> {
        self.inner.list(cursor, max).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_during_a_flush_neither_waits_for_it_nor_is_lost() {
    let memory: Arc<dyn Rados> = Arc::new(MemoryRados::new());
    for name in ["base", "cache"] {
        memory
            .pool_create(PoolSpec::new(name).with_size(1).with_pg_num(8))
            .await
            .expect("pool");
    }
    let gate = Arc::new(Gate::default());
    let gated: Arc<dyn Rados> = Arc::new(Gated {
        inner: memory.clone(),
        gate: gate.clone(),
    });
    let tiered = TieredRados::open(
        gated,
        Arc::new(worker::SystemClock::new()),
        tier::system_wall_clock(),
    )
    .await
    .expect("open");
    tiered.tier_add("base", "cache", false).await.expect("add");
    tiered
        .pool_set("cache", "hit_set_count", "0")
        .await
        .expect("set");
    tiered
        .cache_mode("cache", CacheMode::Writeback, false)
        .await
        .expect("mode");
    tiered.set_overlay("base", "cache").await.expect("overlay");
    let io = tiered.io_ctx("base").await.expect("io");
    let tier = tiered.overlay_of("base").expect("tier");

    io.write_full("object", &[1u8; 8192]).await.expect("write");
    assert_eq!(tier.dirty_objects(), 1, "the write is in the cache, dirty");

    gate.armed.store(true, Ordering::SeqCst);
    let blocked = gate.blocked.notified();
    let flushing = {
        let tier = tier.clone();
        tokio::spawn(async move { tier.flush("object").await })
    };
    blocked.await;
    // The flush is writing the base pool now: a client write goes through at once.
    tokio::time::timeout(Duration::from_secs(5), io.write("object", 100, &[2u8; 50]))
        .await
        .expect("the write did not wait for the flush")
        .expect("write during the flush");
    // An eviction would run over the flush in flight: refused.
    match tier.evict("object").await {
        Err(TierError::Busy(message)) => assert!(message.contains("in flight"), "{message}"),
        other => panic!("evict during a flush: {other:?}"),
    }
    gate.armed.store(false, Ordering::SeqCst);
    gate.release.notify_one();
    let written = flushing.await.expect("join").expect("flush");
    assert_eq!(written, 8192);
    assert_eq!(
        tier.dirty_objects(),
        1,
        "the write that landed during the flush keeps the object dirty"
    );

    let mut expected = vec![1u8; 8192];
    expected[100..150].fill(2);
    let base = memory.io_ctx("base").await.expect("base");
    let in_base = base.read("object", 0, 8192).await.expect("base read");
    assert_eq!(
        in_base,
        vec![1u8; 8192],
        "the first flush wrote what it read"
    );
    tier.flush("object").await.expect("second flush");
    assert_eq!(tier.dirty_objects(), 0);
    assert_eq!(
        base.read("object", 0, 8192).await.expect("base read"),
        expected
    );
    assert_eq!(
        io.read("object", 0, 8192).await.expect("overlay read"),
        expected
    );
    tiered.shutdown().await;
}

/// An eviction of a dirty object flushes it without the object's lock, and so does the flush
/// again when a write landed during the first one: client writes never wait for the base
/// pool's writes, and the eviction still carries every write to the base pool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eviction_never_flushes_under_the_lock() {
    let memory: Arc<dyn Rados> = Arc::new(MemoryRados::new());
    for name in ["base", "cache"] {
        memory
            .pool_create(PoolSpec::new(name).with_size(1).with_pg_num(8))
            .await
            .expect("pool");
    }
    let gate = Arc::new(Gate::default());
    let gated: Arc<dyn Rados> = Arc::new(Gated {
        inner: memory.clone(),
        gate: gate.clone(),
    });
    let tiered = TieredRados::open(
        gated,
        Arc::new(worker::SystemClock::new()),
        tier::system_wall_clock(),
    )
    .await
    .expect("open");
    tiered.tier_add("base", "cache", false).await.expect("add");
    for (key, value) in [
        ("hit_set_count", "0"),
        ("tier_promote_granularity", "extents"),
    ] {
        tiered.pool_set("cache", key, value).await.expect("set");
    }
    tiered
        .cache_mode("cache", CacheMode::Writeback, false)
        .await
        .expect("mode");
    tiered.set_overlay("base", "cache").await.expect("overlay");
    let io = tiered.io_ctx("base").await.expect("io");
    let tier = tiered.overlay_of("base").expect("tier");
    io.write_full("object", &[1u8; 8192]).await.expect("write");

    gate.armed.store(true, Ordering::SeqCst);
    let blocked = gate.blocked.notified();
    let evicting = {
        let tier = tier.clone();
        tokio::spawn(async move { tier.evict("object").await })
    };
    blocked.await;
    tokio::time::timeout(Duration::from_secs(5), io.write("object", 0, &[2u8; 10]))
        .await
        .expect("a write during the eviction's first flush waited")
        .expect("write");
    // The gate stays armed: the eviction's next flush (the object is dirty again) blocks too.
    let blocked = gate.blocked.notified();
    gate.release.notify_one();
    blocked.await;
    tokio::time::timeout(Duration::from_secs(5), io.write("object", 20, &[3u8; 10]))
        .await
        .expect("a write during the eviction's second flush waited: it held the lock")
        .expect("write");
    gate.armed.store(false, Ordering::SeqCst);
    gate.release.notify_one();
    evicting.await.expect("join").expect("evict");
    assert_eq!(tier.cached_objects(), 0, "evicted");

    let mut expected = vec![1u8; 8192];
    expected[0..10].fill(2);
    expected[20..30].fill(3);
    let base = memory.io_ctx("base").await.expect("base");
    assert_eq!(
        base.read("object", 0, 8192).await.expect("base read"),
        expected
    );
    assert_eq!(
        io.read("object", 0, 8192).await.expect("overlay read"),
        expected
    );
    tiered.shutdown().await;
}
