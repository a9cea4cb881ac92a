//! The cache tier on the Ceph backend: a cache pool over a base pool of a real Ceph cluster
//! (scripts/ceph-minicluster.sh: memstore, 3 OSDs, pools of 3), served by `TieredRados` over
//! the `rados` traits' Ceph implementation (librados). Writes go through the overlay and read
//! back; the tier's dirty state is found again by a new tier over the same cluster (a
//! restart); the agent then flushes and evicts everything, and Ceph's own `rados get` reads
//! every object from the base pool. Skips when Ceph is missing and `STRATA_SKIP_CEPH=1`.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use rados::{PoolSpec, Rados, RadosError};
use tier::{CacheMode, TieredRados};

const BASE: &str = "tierbase";
const CACHE: &str = "tiercache";

async fn open(inner: Arc<dyn Rados>) -> Arc<TieredRados> {
    TieredRados::open(
        inner,
        Arc::new(worker::SystemClock::new()),
        tier::system_wall_clock(),
    )
    .await
    .expect("open tiers")
}

/// `rados -c CONF -p POOL ARGS...` (Ceph's own client), its standard output.
fn rados_tool(conf: &Path, pool: &str, args: &[&str]) -> Result<Vec<u8>, String> {
    let output = Command::new("rados")
        .arg("-c")
        .arg(conf)
        .args(["-p", pool])
        .args(args)
        .output()
        .map_err(|error| format!("running rados: {error}"))?;
    if !output.status.success() {
        return Err(format!(
            "rados -p {pool} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(output.stdout)
}

/// `rados get` of one object into a file, read back (`None` when Ceph says it does not exist).
fn rados_get(conf: &Path, dir: &Path, pool: &str, name: &str) -> Option<Vec<u8>> {
    let file = dir.join(format!("{pool}.{name}"));
    match rados_tool(conf, pool, &["get", name, file.to_str().unwrap()]) {
        Ok(_) => Some(std::fs::read(&file).unwrap()),
        Err(error) if error.contains("No such file or directory") => None,
        Err(error) => panic!("{error}"),
    }
}

fn rados_ls(conf: &Path, pool: &str) -> Vec<String> {
    let listed = rados_tool(conf, pool, &["ls"]).unwrap_or_else(|error| panic!("{error}"));
    let mut names: Vec<String> = String::from_utf8(listed)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    names.sort();
    names
}

async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..6000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_pool_over_a_base_pool_on_ceph() {
    let Some(cluster) = ceph_backend::minicluster::shared() else {
        return;
    };
    let conf = cluster.conf();
    let files = tempfile::tempdir().unwrap();
    let ceph: Arc<dyn Rados> = Arc::new(cluster.connect().await.expect("connect to Ceph"));
    for pool in [BASE, CACHE] {
        ceph.pool_create(PoolSpec::new(pool).with_size(3).with_pg_num(8))
            .await
            .unwrap();
    }
    // Objects in the base pool before the tier exists (written by librados directly).
    let base = ceph.io_ctx(BASE).await.unwrap();
    let mut expected: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for i in 0..4u8 {
        let data = vec![i + 1; 20_000];
        base.write_full(&format!("old{i}"), &data).await.unwrap();
        expected.insert(format!("old{i}"), data);
    }

    let tiers = open(ceph.clone()).await;
    tiers.tier_add(BASE, CACHE, false).await.unwrap();
    for (key, value) in [
        ("hit_set_count", "0"),
        ("tier_block_bytes", "4096"),
        // The agent stays idle until asked (flush-evict-all below): nothing is over target.
        ("target_max_objects", "1000"),
    ] {
        tiers.pool_set(CACHE, key, value).await.unwrap();
    }
    tiers
        .cache_mode(CACHE, CacheMode::Writeback, false)
        .await
        .unwrap();
    tiers.set_overlay(BASE, CACHE).await.unwrap();

    // Writes through the overlay: new objects, and a partial write over an old one (a 4 KiB
    // block promoted, not the whole object).
    let io = tiers.io_ctx(BASE).await.unwrap();
    for i in 0..3u8 {
        let data = vec![0x40 + i; 10_000 + usize::from(i) * 3000];
        io.write_full(&format!("new{i}"), &data).await.unwrap();
        expected.insert(format!("new{i}"), data);
    }
    io.write("old1", 5000, &[0xee; 3000]).await.unwrap();
    expected.get_mut("old1").unwrap()[5000..8000].fill(0xee);
    io.remove("old3").await.unwrap();
    expected.remove("old3");
    for (name, data) in &expected {
        assert_eq!(&io.read_full(name).await.unwrap(), data, "{name}");
    }
    assert!(matches!(
        io.read_full("old3").await,
        Err(RadosError::NotFound(_))
    ));
    let tier = tiers.overlay_of(BASE).unwrap();
    tiers.quiesce().await;
    let dirty = tier.dirty_objects();
    assert!(dirty >= 5, "dirty objects: {dirty} ({:?})", tier.stats());
    // Nothing flushed yet: Ceph's base pool has no new object and the old contents of old1;
    // old3 is still there (its delete is a whiteout in the cache).
    assert_eq!(rados_get(&conf, files.path(), BASE, "new0"), None);
    assert_eq!(
        rados_get(&conf, files.path(), BASE, "old1"),
        Some(vec![2; 20_000])
    );
    assert!(rados_get(&conf, files.path(), BASE, "old3").is_some());
    let in_cache = rados_ls(&conf, CACHE);
    for name in ["new0", "new1", "new2", "old1"] {
        assert!(in_cache.contains(&name.to_string()), "{in_cache:?}");
    }
    drop(tier);
    drop(io);
    tiers.shutdown().await;
    drop(tiers);

    // A restart: a new tier over the same Ceph cluster finds the dirty objects in the cache
    // pool and serves the same data.
    let restarted = open(ceph.clone()).await;
    let tier = restarted.overlay_of(BASE).expect("the overlay persisted");
    assert_eq!(tier.dirty_objects(), dirty, "{:?}", tier.stats());
    assert_eq!(
        restarted.pool_get(CACHE, "tier_block_bytes").unwrap(),
        "4096"
    );
    let io = restarted.io_ctx(BASE).await.unwrap();
    for (name, data) in &expected {
        assert_eq!(
            &io.read_full(name).await.unwrap(),
            data,
            "{name} after restart"
        );
    }

    // The agent flushes and evicts everything.
    restarted.flush_evict_all(CACHE).unwrap();
    wait_for("the agent to flush and evict", || {
        tier.dirty_objects() == 0 && tier.cached_objects() == 0
    })
    .await;
    let stats = tier.stats();
    assert!(stats.flushes >= dirty, "{stats:?}");
    assert!(stats.evictions >= 4, "{stats:?}");

    // Ceph's own tool reads every object from the base pool; the deleted one is gone.
    for (name, data) in &expected {
        assert_eq!(
            rados_get(&conf, files.path(), BASE, name).as_ref(),
            Some(data),
            "{name} in Ceph's base pool"
        );
    }
    assert_eq!(rados_get(&conf, files.path(), BASE, "old3"), None);
    let in_base = rados_ls(&conf, BASE);
    assert_eq!(
        in_base,
        expected.keys().cloned().collect::<Vec<_>>(),
        "base pool listing"
    );
    let left: Vec<String> = rados_ls(&conf, CACHE)
        .into_iter()
        .filter(|name| name != tier::CONFIG_OBJECT)
        .collect();
    assert!(left.is_empty(), "left in the cache pool: {left:?}");

    // And the overlay still serves them (now proxied or promoted again).
    for (name, data) in &expected {
        assert_eq!(
            &io.read_full(name).await.unwrap(),
            data,
            "{name} after flush"
        );
    }
    drop(tier);
    drop(io);
    restarted.shutdown().await;
}
