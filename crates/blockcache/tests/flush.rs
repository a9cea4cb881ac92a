//! A client flush reaches the core only when a client write went to the core since the last
//! one: write-back hits cost no core flush (on an HDD core it would wait behind the cleaner's
//! queued writes), and whatever a write put on the core is durable once the flush returns.

use std::sync::Arc;

use blockcache::{
    BlockCache, CacheConfig, CacheMode, CleaningConfig, IoClasses, PromotionConfig, StartMode,
};
use device::{Device, FaultConfig, FaultyDevice, MemoryDevice};

const BLOCK: usize = 4096;

fn config(mode: CacheMode) -> CacheConfig {
    CacheConfig {
        line_size_bytes: BLOCK as u64,
        mode,
        // Nothing but the client's requests touches the core.
        cleaning: CleaningConfig::Nop,
        promotion: PromotionConfig::Always,
        flush_on_stop: false,
        ..CacheConfig::default()
    }
}

fn pattern(seed: u8) -> Vec<u8> {
    (0..BLOCK).map(|index| (index as u8) ^ seed).collect()
}

/// A core that loses every block not flushed when it crashes.
fn volatile_core() -> Arc<FaultyDevice> {
    let memory: Arc<dyn Device> =
        Arc::new(MemoryDevice::with_block_size("core", 16 << 20, BLOCK as u64).unwrap());
    Arc::new(FaultyDevice::new(
        "core",
        memory,
        FaultConfig {
            seed: 1,
            unflushed_loss_probability: 1.0,
            ..FaultConfig::default()
        },
    ))
}

async fn start(mode: CacheMode, core: Arc<FaultyDevice>) -> Arc<BlockCache> {
    let cache: Arc<dyn Device> =
        Arc::new(MemoryDevice::with_block_size("cache", 8 << 20, BLOCK as u64).unwrap());
    let core: Arc<dyn Device> = core;
    BlockCache::start(
        cache,
        core,
        config(mode),
        IoClasses::default(),
        StartMode::Create,
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn write_back_hits_flush_the_cache_device_only() {
    let core = volatile_core();
    let cache = start(CacheMode::Wb, core.clone()).await;
    // The first flush may reach the core (what the cache's creation wrote is not its concern).
    cache.flush().await.unwrap();
    let before = core.stats().flush.ops;
    for round in 0..8u8 {
        cache
            .write_at(u64::from(round) * BLOCK as u64, &pattern(round))
            .await
            .unwrap();
        cache.flush().await.unwrap();
    }
    assert_eq!(
        core.stats().flush.ops,
        before,
        "write-back writes that stayed in the cache flushed the core"
    );
    let mut buffer = vec![0u8; BLOCK];
    cache.read_at(0, &mut buffer).await.unwrap();
    assert_eq!(buffer, pattern(0));
    cache.abandon();
}

/// In every mode that writes the core, a flush after the write makes it survive the core's
/// power loss, and a second flush with no write between finds nothing owed.
#[tokio::test]
async fn a_flush_after_a_core_write_makes_it_durable_on_the_core() {
    for (index, mode) in [CacheMode::Wt, CacheMode::Pt, CacheMode::Wa, CacheMode::Wi]
        .into_iter()
        .enumerate()
    {
        let core = volatile_core();
        let cache = start(mode, core.clone()).await;
        cache.flush().await.unwrap();
        let offset = (index * BLOCK) as u64;
        let data = pattern(index as u8 + 1);
        cache.write_at(offset, &data).await.unwrap();
        let before = core.stats().flush.ops;
        cache.flush().await.unwrap();
        assert_eq!(
            core.stats().flush.ops,
            before + 1,
            "{mode:?}: the flush after a core write skipped the core"
        );
        cache.flush().await.unwrap();
        assert_eq!(
            core.stats().flush.ops,
            before + 1,
            "{mode:?}: a flush with nothing owed reached the core"
        );
        core.crash().await.unwrap();
        core.restart();
        let mut buffer = vec![0u8; BLOCK];
        core.read_at(offset, &mut buffer).await.unwrap();
        assert_eq!(
            buffer, data,
            "{mode:?}: an acknowledged, flushed write was lost"
        );
        cache.abandon();
    }
}
