//! OSDs on cached devices (`cache:OPTIONS:FAST|SLOW` in `cluster.toml`), as seed 001's OSDs
//! sit on Open-CAS: write-back caches on file fast devices over emulated 10k-rpm HDD files,
//! and a write-through one on memory. Every acknowledged write reads back after the cluster is
//! dropped without a shutdown (the caches left dirty, as a kill leaves them) and reopened,
//! and after a clean shutdown too.

mod common;

use cluster::{Cluster, ClusterOptions};
use rados::IoCtx;

fn quiet() -> ClusterOptions {
    ClusterOptions {
        background: false,
        ..ClusterOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_a_crash_of_cached_osds() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = common::small_config(3, 1, "file", 3);
    for osd in &mut config.osds {
        let id = osd.id;
        // Write-back, no background cleaning: acknowledged data is on the fast file only,
        // so every replica's copy depends on its cache surviving.
        osd.device = format!(
            "cache:mode=wb,cleaning=nop,line=4K:nvme@file:osd.{id}.cache:16M|hdd-10k@file:osd.{id}.img:64M"
        );
    }
    let cluster = Cluster::create(dir.path(), config, quiet()).await.unwrap();
    assert!(dir.path().join("osd.0.cache").exists());
    assert!(dir.path().join("osd.0.img").exists());
    let pool = cluster.pool("data").unwrap();
    let mut written = Vec::new();
    for index in 0..24u64 {
        let name = format!("object-{index}");
        let data = common::content(index, 4096 * (1 + index as usize % 5));
        pool.write_full(&name, &data).await.unwrap();
        written.push((name, data));
    }
    drop(pool);
    drop(cluster); // no shutdown: the caches keep dirty lines and a dirty superblock
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;

    let cluster = Cluster::open(dir.path(), quiet()).await.unwrap();
    let pool = cluster.pool("data").unwrap();
    for (name, data) in &written {
        assert_eq!(&pool.read_full(name).await.unwrap(), data, "{name}");
    }
    // More writes, then a clean shutdown and another open.
    pool.write_full("after-crash", b"second life")
        .await
        .unwrap();
    drop(pool);
    cluster.shutdown().await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let cluster = Cluster::open(dir.path(), quiet()).await.unwrap();
    let pool = cluster.pool("data").unwrap();
    assert_eq!(pool.read_full("after-crash").await.unwrap(), b"second life");
    for (name, data) in &written {
        assert_eq!(&pool.read_full(name).await.unwrap(), data, "{name}");
    }
    drop(pool);
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_specs_are_checked_with_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = common::small_config(1, 1, "file", 1);
    // A write-back cache on memory would lose acknowledged writes at exit.
    config.osds[0].device = "cache:mode=wb:mem:16M|file:osd.0.img:64M".into();
    let error = Cluster::create(dir.path(), config.clone(), quiet())
        .await
        .err()
        .unwrap();
    assert!(
        error.to_string().contains("memory one loses them"),
        "{error}"
    );
    // A write-through cache on memory is fine: the core has every write.
    config.osds[0].device = "cache:mode=wt:nvme@mem:16M|hdd-10k@file:osd.0.img:64M".into();
    let cluster = Cluster::create(dir.path(), config.clone(), quiet())
        .await
        .unwrap();
    let pool = cluster.pool("data").unwrap();
    pool.write_full("through", b"to the core").await.unwrap();
    drop(pool);
    cluster.shutdown().await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let cluster = Cluster::open(dir.path(), quiet()).await.unwrap();
    let pool = cluster.pool("data").unwrap();
    assert_eq!(pool.read_full("through").await.unwrap(), b"to the core");
    drop(pool);
    cluster.shutdown().await.unwrap();
    // The cache and the core on one file.
    let dir = tempfile::tempdir().unwrap();
    config.osds[0].device = "cache::file:osd.0.img:16M|file:osd.0.img:64M".into();
    let error = Cluster::create(dir.path(), config, quiet())
        .await
        .err()
        .unwrap();
    assert!(error.to_string().contains("osd.0.img"), "{error}");
}

/// Whether the cache device file of `osd` records a clean stop.
fn cache_clean(dir: &std::path::Path, osd: i32) -> bool {
    let bytes = std::fs::read(dir.join(format!("osd.{osd}.cache"))).unwrap();
    blockcache::layout::Superblock::decode(&bytes[..4096])
        .unwrap()
        .expect("a cache superblock")
        .clean_shutdown
}

/// A cluster shutdown stops every OSD's cache cleanly: metadata written, superblock marked
/// clean, so the next start loads it warm (dirty lines and all) instead of recovering it; a
/// drop without shutdown (a crash) leaves it marked dirty. Either way every acknowledged
/// write reads back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_shutdown_stops_cached_osds_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = common::small_config(3, 1, "file", 3);
    for osd in &mut config.osds {
        let id = osd.id;
        osd.device = format!(
            "cache:mode=wb,cleaning=nop,line=4K:nvme@file:osd.{id}.cache:16M|hdd-10k@file:osd.{id}.img:64M"
        );
    }
    let cluster = Cluster::create(dir.path(), config, quiet()).await.unwrap();
    let pool = cluster.pool("data").unwrap();
    pool.write_full("before", &common::content(1, 12288))
        .await
        .unwrap();
    // Running: the superblock says dirty until a clean stop.
    assert!(!cache_clean(dir.path(), 0));
    drop(pool);
    cluster.shutdown().await.unwrap();
    for osd in 0..3 {
        assert!(
            cache_clean(dir.path(), osd),
            "osd.{osd}'s cache after shutdown"
        );
    }

    let cluster = Cluster::open(dir.path(), quiet()).await.unwrap();
    assert!(
        !cache_clean(dir.path(), 0),
        "marked dirty again while running"
    );
    let pool = cluster.pool("data").unwrap();
    assert_eq!(
        pool.read_full("before").await.unwrap(),
        common::content(1, 12288)
    );
    pool.write_full("crash", b"kept").await.unwrap();
    drop(pool);
    drop(cluster); // a crash: no clean stop
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!cache_clean(dir.path(), 1));

    let cluster = Cluster::open(dir.path(), quiet()).await.unwrap();
    let pool = cluster.pool("data").unwrap();
    assert_eq!(pool.read_full("crash").await.unwrap(), b"kept");
    assert_eq!(
        pool.read_full("before").await.unwrap(),
        common::content(1, 12288)
    );
    drop(pool);
    cluster.shutdown().await.unwrap();
    for osd in 0..3 {
        assert!(
            cache_clean(dir.path(), osd),
            "osd.{osd} after the second shutdown"
        );
    }
}
