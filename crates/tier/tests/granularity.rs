//! The promotion granularity of a cache pool: at Ceph's (`whole-object`, the ceph family's
//! default) a 4 KiB read of a 4 MiB object copies the whole object into the cache and a flush
//! writes it all back; at strata's (`extents`) the same read copies one block and the flush
//! writes only the dirty block. The data read and flushed is the same either way.

use std::sync::Arc;
use std::time::Duration;

use rados::memory::MemoryRados;
use rados::{PoolSpec, Rados};
use tier::{CacheMode, TieredRados};

const OBJECT_BYTES: usize = 4 << 20;
const BLOCK_BYTES: u64 = 64 << 10;

fn pattern() -> Vec<u8> {
    (0..OBJECT_BYTES).map(|i| (i / 4096 % 251) as u8).collect()
}

/// Promoted and flushed bytes for a 4 KiB read then a 4 KiB write of a 4 MiB base object.
async fn moved_bytes(granularity: Option<&'static str>) -> (u64, u64) {
    let memory: Arc<dyn Rados> = Arc::new(MemoryRados::new());
    for name in ["base", "cache"] {
        memory
            .pool_create(PoolSpec::new(name).with_size(1).with_pg_num(8))
            .await
            .expect("pool");
    }
    let base = memory.io_ctx("base").await.expect("base");
    let original = pattern();
    base.write_full("object", &original).await.expect("seed");

    let tiered = TieredRados::open(
        memory.clone(),
        Arc::new(worker::SystemClock::new()),
        tier::system_wall_clock(),
    )
    .await
    .expect("open");
    tiered.tier_add("base", "cache", false).await.expect("add");
    let mut settings = vec![("hit_set_count", "0"), ("tier_admission", "ceph")];
    if let Some(granularity) = granularity {
        settings.push(("tier_promote_granularity", granularity));
    }
    for (key, value) in settings {
        tiered.pool_set("cache", key, value).await.expect("set");
    }
    tiered
        .cache_mode("cache", CacheMode::Writeback, false)
        .await
        .expect("mode");
    tiered.set_overlay("base", "cache").await.expect("overlay");
    let io = tiered.io_ctx("base").await.expect("io");
    let tier = tiered.overlay_of("base").expect("tier");

    let offset = (1 << 20) + 4096;
    let read = io.read("object", offset, 4096).await.expect("read");
    assert_eq!(read, original[offset as usize..offset as usize + 4096]);
    // The promotion may run in the background: wait for it.
    for _ in 0..500 {
        if tier.stats().promotions > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let promoted = tier.stats().promoted_bytes;
    assert!(tier.cached_objects() == 1, "the object was promoted");

    io.write("object", offset, &[7u8; 4096])
        .await
        .expect("write");
    assert_eq!(tier.dirty_objects(), 1);
    let flushed = tier.flush("object").await.expect("flush");
    assert_eq!(tier.dirty_objects(), 0);
    let mut expected = original;
    expected[offset as usize..offset as usize + 4096].fill(7);
    let in_base = base
        .read("object", 0, OBJECT_BYTES as u64)
        .await
        .expect("base read");
    assert!(in_base == expected, "the base object holds the write");
    tiered.shutdown().await;
    (promoted, flushed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ceph_family_promotes_and_flushes_whole_objects_by_default() {
    let (promoted, flushed) = moved_bytes(None).await;
    assert_eq!(promoted, OBJECT_BYTES as u64);
    assert_eq!(flushed, OBJECT_BYTES as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extents_move_only_the_block_the_op_touches() {
    let (promoted, flushed) = moved_bytes(Some("extents")).await;
    assert_eq!(promoted, BLOCK_BYTES);
    assert_eq!(flushed, BLOCK_BYTES);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whole_object_can_be_chosen_explicitly() {
    let (promoted, flushed) = moved_bytes(Some("whole-object")).await;
    assert_eq!(promoted, OBJECT_BYTES as u64);
    assert_eq!(flushed, OBJECT_BYTES as u64);
}
