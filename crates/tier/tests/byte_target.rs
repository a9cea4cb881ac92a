//! A byte target (`target_max_bytes`) counts the bytes the cache holds, as Ceph's agent does:
//! objects promoted in part (64 KiB extents of 1 MiB objects) leave room for more of them, so
//! the predictive tier keeps more objects than the target over `tier_object_bytes`; once
//! objects are read whole, the agent evicts down to the byte target and the capacity follows
//! the bytes the remaining objects hold.
//! Every read returns the base pool's data throughout.

mod common;

use std::sync::Arc;
use std::time::Duration;

use rados::memory::MemoryRados;
use rados::{PoolSpec, Rados};
use tier::{CacheMode, TierSettings, TieredRados};

const OBJECT_BYTES: usize = 1 << 20;
const OBJECTS: u64 = 64;
/// Sixteen whole objects.
const TARGET_BYTES: u64 = 16 << 20;

async fn settle(tier: &tier::Tier) {
    for _ in 0..1000 {
        if tier.settled() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("the tier did not settle: {:?}", tier.stats());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_cached_in_part_leave_room_for_more_of_them() {
    let memory: Arc<dyn Rados> = Arc::new(MemoryRados::new());
    for name in ["base", "cache"] {
        memory
            .pool_create(PoolSpec::new(name).with_size(1).with_pg_num(8))
            .await
            .expect("pool");
    }
    let base = memory.io_ctx("base").await.expect("base");
    for index in 0..OBJECTS {
        base.write_full(
            &format!("object{index}"),
            &common::content(index, OBJECT_BYTES),
        )
        .await
        .expect("seed");
    }
    let tiered = TieredRados::open(
        memory.clone(),
        Arc::new(worker::SystemClock::new()),
        tier::system_wall_clock(),
    )
    .await
    .expect("open");
    tiered.tier_add("base", "cache", false).await.expect("add");
    let target = TARGET_BYTES.to_string();
    for (key, value) in [
        ("tier_admission", "predictive"),
        ("predictive_threshold", "0"),
        ("predictive_period", "1"),
        ("tier_block_bytes", "65536"),
        ("tier_object_bytes", "1048576"),
        ("target_max_bytes", target.as_str()),
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
    assert_eq!(
        tier.capacity_objects(),
        16,
        "an empty cache counts whole objects"
    );

    // 4 KiB of every object, a few passes a statistics period apart (an object requested in
    // one period is hot in the next): each promotion copies one 64 KiB block.
    for pass in 0..4 {
        if pass > 0 {
            tokio::time::sleep(Duration::from_millis(1100)).await;
        }
        for index in 0..OBJECTS {
            let offset = 4096 * (index % 16);
            let read = io
                .read(&format!("object{index}"), offset, 4096)
                .await
                .expect("read");
            let expected = common::content(index, OBJECT_BYTES);
            assert_eq!(
                read,
                expected[offset as usize..offset as usize + 4096],
                "object{index}, pass {pass}"
            );
        }
        settle(&tier).await;
        tier.agent_step(0).await;
        settle(&tier).await;
    }
    let stats = tier.stats();
    assert_eq!(
        tier.capacity_objects(),
        64,
        "64 KiB objects under a 16 MiB target: four times the whole-object count, at most: {stats:?}"
    );
    assert!(
        stats.objects > 20,
        "more objects than 16 whole ones over the full ratio: {stats:?}"
    );
    assert!(stats.cached_bytes <= TARGET_BYTES, "{stats:?}");

    // Now read 24 objects whole: the cache's objects grow, the capacity falls back, and the
    // agent evicts down to the byte target.
    for index in 0..24 {
        let read = io
            .read(&format!("object{index}"), 0, OBJECT_BYTES as u64)
            .await
            .expect("read whole");
        assert!(
            read == common::content(index, OBJECT_BYTES),
            "object{index}"
        );
    }
    for _ in 0..20 {
        settle(&tier).await;
        tier.agent_step(0).await;
    }
    settle(&tier).await;
    let stats = tier.stats();
    let held = TierSettings {
        target_max_bytes: TARGET_BYTES,
        tier_object_bytes: OBJECT_BYTES as u64,
        ..TierSettings::default()
    }
    .capacity_objects_holding(stats.objects, stats.cached_bytes);
    assert_eq!(
        tier.capacity_objects(),
        held,
        "the capacity follows the bytes objects hold: {stats:?}"
    );
    assert!(
        stats.cached_bytes as f64 <= TARGET_BYTES as f64 / 0.8,
        "the agent keeps the bytes within the target over the full ratio: {stats:?}"
    );
    for index in 0..OBJECTS {
        let read = io
            .read(&format!("object{index}"), 0, OBJECT_BYTES as u64)
            .await
            .expect("read back");
        assert!(
            read == common::content(index, OBJECT_BYTES),
            "object{index}"
        );
    }
}
