//! A replicated cache tier over an erasure-coded 4+2 base pool (the deployment Ceph's cache
//! tiering documentation gives): writes through the overlay land in the cache, the agent
//! flushes and evicts them into the EC base (read there directly), and reads of evicted
//! objects promote them back from the base. Omap, which an EC base cannot keep, fails the
//! object's flush with a clear error and stays dirty in the cache.

mod common;

use std::sync::Arc;
use std::time::Duration;

use cluster::ec::ErasureProfile;
use cluster::{Cluster, ClusterConfig, ClusterOptions, HostConfig, OsdConfig};
use rados::{PoolSpec, Rados, WriteOp};
use tier::{CacheMode, TieredRados};

use common::content;

/// Six hosts of one OSD each (sparse 256 MiB files).
fn six_hosts() -> ClusterConfig {
    let mut config = ClusterConfig::empty();
    config.scrub_interval_s = 0;
    config.durable = false;
    for id in 0..6 {
        let host = format!("host{id}");
        config.hosts.push(HostConfig { name: host.clone() });
        config.osds.push(OsdConfig {
            id,
            host,
            device: format!("file:osd.{id}.img:256M"),
            size: None,
            class: "hdd".into(),
            weight: Some(1.0),
            min_alloc_size: 4096,
            emulation: None,
            data_cache_size: None,
        });
    }
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replicated_cache_flushes_and_evicts_into_an_erasure_coded_base() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = six_hosts();
    let cluster = Arc::new(
        Cluster::create(dir.path(), config, ClusterOptions::default())
            .await
            .expect("create cluster"),
    );
    cluster
        .create_erasure_pool("ecbase", &ErasureProfile::new(4, 2), 16)
        .expect("erasure-coded base");
    cluster
        .pool_create(PoolSpec::new("cache").with_size(3).with_pg_num(16))
        .await
        .expect("cache pool");
    let tiered = TieredRados::open(
        cluster.clone(),
        Arc::new(worker::SystemClock::new()),
        tier::system_wall_clock(),
    )
    .await
    .expect("open tiers");
    // As Ceph: an erasure-coded pool cannot be the cache.
    cluster
        .create_erasure_pool("eccache", &ErasureProfile::new(4, 2), 16)
        .expect("erasure-coded pool");
    let refused = tiered
        .tier_add("cache", "eccache", false)
        .await
        .expect_err("an erasure-coded cache pool is refused");
    assert!(
        refused
            .to_string()
            .contains("erasure-coded pool, which cannot be a tier"),
        "{refused}"
    );
    assert!(tiered.tiers().is_empty());
    tiered
        .tier_add("ecbase", "cache", false)
        .await
        .expect("tier add");
    tiered
        .cache_mode("cache", CacheMode::Writeback, false)
        .await
        .expect("writeback");
    tiered
        .set_overlay("ecbase", "cache")
        .await
        .expect("overlay");
    let io = tiered.io_ctx("ecbase").await.expect("overlay io");
    let base = cluster.io_ctx("ecbase").await.expect("base io");
    let cache = cluster.io_ctx("cache").await.expect("cache io");
    let tier = tiered.overlay_of("ecbase").expect("tier");

    // Writes through the overlay, whole and partial (a partial overwrite of a flushed
    // object makes the base do read-modify-write of its stripes).
    let mut expected = Vec::new();
    for index in 0..12u64 {
        let name = format!("object-{index}");
        let mut data = content(index, 5000 + 37_000 * index as usize);
        io.write_full(&name, &data).await.expect("write_full");
        let patch = content(100 + index, 3000);
        io.write(&name, 1234, &patch).await.expect("write");
        data[1234..4234].copy_from_slice(&patch);
        io.operate(
            &name,
            WriteOp::new().set_xattr("user.color", format!("c{index}").into_bytes()),
        )
        .await
        .expect("xattr");
        expected.push((name, data));
    }
    for (name, _) in &expected {
        assert!(cache.stat(name).await.is_ok(), "{name} is not in the cache");
    }

    // The agent flushes and evicts everything.
    tiered.flush_evict_all("cache").expect("flush-evict-all");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while tier.cached_objects() > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the agent did not flush and evict: {} cached, {} dirty",
            tier.cached_objects(),
            tier.dirty_objects()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for (name, data) in &expected {
        assert_eq!(
            &base.read_full(name).await.expect("base read"),
            data,
            "{name} in the base"
        );
        let color = base.get_xattr(name, "user.color").await.expect("xattr");
        assert!(color.starts_with(b"c"), "{name}");
        assert!(
            cache.stat(name).await.is_err(),
            "{name} is still in the cache pool"
        );
    }

    // One OSD down: reads through the overlay promote from the degraded base; a partial
    // overwrite, flushed again, lands in the base.
    cluster.mark_down(2).expect("down");
    for (name, data) in &expected {
        assert_eq!(
            &io.read(name, 0, data.len() as u64).await.expect("read"),
            data,
            "{name} through the overlay"
        );
    }
    let (name, data) = &mut expected[5];
    let patch = content(999, 10_000);
    io.write(name, 20_000, &patch).await.expect("write");
    data[20_000..30_000].copy_from_slice(&patch);
    tier.flush(name).await.expect("flush");
    assert_eq!(&base.read_full(name).await.expect("base read"), data);
    cluster.mark_up(2).expect("up");
    cluster.recover_erasure().await.expect("recovery");

    // Omap cannot go to an EC base: refused at once when the op is proxied to the base
    // (the object is not cached), else kept in the cache, but then its flush fails naming
    // it and the object stays dirty. Never dropped silently.
    io.write_full("with-omap", b"data").await.expect("write");
    match io
        .omap_set("with-omap", vec![(b"k".to_vec(), b"v".to_vec())])
        .await
    {
        Err(rados::RadosError::NotSupported(message)) => {
            assert!(message.contains("omap"), "{message}")
        }
        Err(other) => panic!("omap on an EC base: {other:?}"),
        Ok(()) => {
            let error = tier.flush("with-omap").await.expect_err("flush of omap");
            assert!(error.to_string().contains("omap"), "{error}");
            assert!(tier.dirty_objects() >= 1);
        }
    }
    tiered.shutdown().await;
}
