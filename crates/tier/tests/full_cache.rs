//! A cache pool whose OSDs reach their full ratio before the tier's own targets (its objects
//! take more room than `target_max_objects` accounts for): client writes and reads go around
//! it to the base pool instead of failing, every acknowledged write reads back, and the
//! refusals are counted.

mod common;

use std::sync::Arc;

use cluster::{Cluster, ClusterConfig, ClusterOptions, HostConfig, OsdConfig};
use rados::{PoolSpec, Rados};
use tier::{CacheMode, TieredRados};

const OBJECT_BYTES: usize = 1 << 20;
const OBJECTS: u64 = 96;

fn content(seed: u64) -> Vec<u8> {
    common::content(seed, OBJECT_BYTES)
}

/// Three hosts, each with a small NVMe OSD (the cache pool's, 48 MiB) and a large HDD one.
fn three_hosts() -> ClusterConfig {
    let mut config = ClusterConfig::empty();
    config.scrub_interval_s = 0;
    config.durable = false;
    for host_index in 0..3i32 {
        let host = format!("host{host_index}");
        config.hosts.push(HostConfig { name: host.clone() });
        for (slot, (class, size)) in [("nvme", "48M"), ("hdd", "512M")].into_iter().enumerate() {
            let id = host_index * 2 + slot as i32;
            config.osds.push(OsdConfig {
                id,
                host: host.clone(),
                device: format!("mem:{size}"),
                size: None,
                class: class.into(),
                weight: Some(1.0),
                min_alloc_size: 4096,
                emulation: None,
                data_cache_size: None,
            });
        }
    }
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_and_reads_go_around_a_cache_pool_whose_osds_are_full() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cluster = Arc::new(
        Cluster::create(dir.path(), three_hosts(), ClusterOptions::default())
            .await
            .expect("create cluster"),
    );
    for (name, class) in [("base", "hdd"), ("cache", "nvme")] {
        cluster
            .pool_create(
                PoolSpec::new(name)
                    .with_size(3)
                    .with_pg_num(8)
                    .with_device_class(class),
            )
            .await
            .expect("pool");
    }
    let tiered = TieredRados::open(
        cluster.clone(),
        Arc::new(worker::SystemClock::new()),
        tier::system_wall_clock(),
    )
    .await
    .expect("open tiers");
    tiered.tier_add("base", "cache", false).await.expect("add");
    // The tier believes it may hold 10,000 objects: only the OSDs' full ratio stops it.
    for (key, value) in [
        ("tier_admission", "ceph"),
        ("hit_set_count", "0"),
        ("target_max_objects", "10000"),
        ("cache_min_flush_age", "3600"),
        ("cache_min_evict_age", "3600"),
    ] {
        tiered.pool_set("cache", key, value).await.expect("set");
    }
    tiered
        .cache_mode("cache", CacheMode::Writeback, false)
        .await
        .expect("writeback");
    tiered.set_overlay("base", "cache").await.expect("overlay");
    let io = tiered.io_ctx("base").await.expect("io");

    // 96 MiB of writes into a cache pool of 48 MiB OSDs: every one is acknowledged.
    for object in 0..OBJECTS {
        io.write_full(&format!("object{object}"), &content(object))
            .await
            .unwrap_or_else(|e| panic!("write of object{object} failed: {e}"));
    }
    let stats = tiered.stats();
    let tier_stats = stats
        .iter()
        .find(|s| s.cache_pool == "cache")
        .expect("the cache pool's stats");
    assert!(
        tier_stats.cache_refusals_full > 0 && tier_stats.writes_around_full > 0,
        "the cache pool never refused a write for space: {tier_stats:?}"
    );
    assert!(
        tier_stats.objects < OBJECTS,
        "every object stayed in the cache: {tier_stats:?}"
    );
    // Every write reads back, through the tier, whichever pool holds it.
    for object in 0..OBJECTS {
        let read = io
            .read(&format!("object{object}"), 0, OBJECT_BYTES as u64)
            .await
            .unwrap_or_else(|e| panic!("read of object{object} failed: {e}"));
        assert!(
            read == content(object),
            "object{object} read back {} bytes, not what was written",
            read.len()
        );
    }
    // Overwrites of objects the cache holds go around it too, and read back.
    for object in 0..8 {
        let data = content(object + 1000);
        io.write_full(&format!("object{object}"), &data)
            .await
            .unwrap_or_else(|e| panic!("overwrite of object{object} failed: {e}"));
        let read = io
            .read(&format!("object{object}"), 0, OBJECT_BYTES as u64)
            .await
            .expect("read");
        assert!(read == data, "object{object}'s overwrite did not read back");
    }
}
