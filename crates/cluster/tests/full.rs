//! Full OSDs stop writes instead of lowering redundancy (Ceph's full handling): with one OSD
//! much smaller than its peers, writes are refused with `NoSpace` once it is full, every
//! acknowledged write is on every replica, reads and removals go on, and writes resume once
//! removals made room; recovery does not backfill onto an OSD past `backfillfull_ratio`.
//!
//! Before, a replica's ENOSPC took it out of the PG's acting set and the write was
//! acknowledged on 2 of 3 copies (`active+undersized+degraded`), and recovery retried every
//! second to copy onto the full OSD.

mod common;

use std::collections::BTreeMap;

use cluster::full::FullLevel;
use cluster::{Cluster, ClusterOptions};
use rados::{IoCtx, RadosError};

const OBJECT_BYTES: usize = 256 << 10;

/// Every acting replica of `name` holds `data` and all hold one version.
async fn on_every_replica(cluster: &Cluster, name: &str, data: &[u8], size: usize) {
    let placement = cluster.locate("data", name).unwrap();
    assert_eq!(
        placement.acting.len(),
        size,
        "{name}: acting set {:?} below the pool's size",
        placement.acting
    );
    let collection = cluster.collection_of("data", name).unwrap();
    let mut versions = Vec::new();
    for osd in &placement.acting {
        let osd = cluster.osd(*osd).unwrap();
        let copy = osd
            .store()
            .read(&collection, name, 0, u64::MAX)
            .await
            .unwrap_or_else(|e| panic!("{name} on osd.{}: {e}", osd.id));
        assert_eq!(copy, data, "{name} on osd.{}", osd.id);
        versions.push(osd.version(&collection, name).await.unwrap());
    }
    versions.dedup();
    assert_eq!(
        versions.len(),
        1,
        "{name}: replicas at versions {versions:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_osd_fills_and_writes_stop_on_every_replica() {
    let dir = tempfile::tempdir().unwrap();
    let options = ClusterOptions {
        background: false,
        ..ClusterOptions::default()
    };
    // Three hosts of one OSD each, pool of 3: every object is on every OSD, and osd.0 has a
    // quarter of its peers' space.
    let mut config = common::small_config(3, 1, "mem", 3);
    config.osds[0].device = "mem:16M".into();
    let full_ratio = config.full_ratio;
    let cluster = Cluster::create(dir.path(), config, options).await.unwrap();
    let pool = cluster.pool("data").unwrap();

    let mut acknowledged = BTreeMap::new();
    let mut refusal = None;
    for index in 0..200u64 {
        let name = format!("object-{index}");
        let data = common::content(index, OBJECT_BYTES);
        match pool.write_full(&name, &data).await {
            Ok(()) => {
                acknowledged.insert(name, data);
            }
            Err(RadosError::NoSpace(message)) => {
                refusal = Some(message);
                break;
            }
            Err(other) => panic!("{name}: {other}"),
        }
    }
    let refusal = refusal.expect("writes were never refused");
    assert!(refusal.contains("osd.0"), "{refusal}");
    assert!(acknowledged.len() > 10, "{}", acknowledged.len());
    for (name, data) in &acknowledged {
        on_every_replica(&cluster, name, data, 3).await;
    }
    let state = cluster.full_state();
    assert_eq!(state.osds[&0].level, FullLevel::Full, "{state:?}");
    assert!(state.osds[&0].used_ratio <= full_ratio, "{state:?}");
    assert!(state.osds[&1].level < FullLevel::Nearfull, "{state:?}");
    let pool_id = pool.pool().id;
    assert_eq!(state.pools[&pool_id].level, FullLevel::Full);

    // No write is acknowledged once the OSD is full: not another object, not a small one,
    // not an append; a new empty object neither (it adds an object).
    for (index, bytes) in [(1000u64, OBJECT_BYTES), (1001, 4096), (1002, 1)] {
        let name = format!("late-{index}");
        let wrote = pool.write_full(&name, &common::content(index, bytes)).await;
        assert!(
            matches!(wrote, Err(RadosError::NoSpace(_))),
            "{name}: {wrote:?}"
        );
        assert_eq!(wrote.unwrap_err().errno(), rados::errno::ENOSPC);
    }
    let first = acknowledged.keys().next().unwrap().clone();
    assert!(matches!(
        pool.append(&first, b"more").await,
        Err(RadosError::NoSpace(_))
    ));
    assert!(matches!(
        pool.create("empty", true).await,
        Err(RadosError::NoSpace(_))
    ));

    // Reads work, and so do changes that add no data: an xattr of an existing object.
    for (name, data) in &acknowledged {
        assert_eq!(&pool.read_full(name).await.unwrap(), data, "{name}");
    }
    pool.set_xattr(&first, "tag", b"kept").await.unwrap();

    // Removals work, and once they made room, writes resume, on every replica.
    let removed: Vec<String> = acknowledged.keys().take(20).cloned().collect();
    for name in &removed {
        pool.remove(name).await.unwrap();
        acknowledged.remove(name);
    }
    assert!(cluster.full_state().osds[&0].level < FullLevel::Full);
    let data = common::content(7, OBJECT_BYTES);
    pool.write_full("after-cleanup", &data).await.unwrap();
    on_every_replica(&cluster, "after-cleanup", &data, 3).await;
    for (name, data) in &acknowledged {
        on_every_replica(&cluster, name, data, 3).await;
    }
    drop(pool);
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_does_not_backfill_onto_a_backfillfull_osd() {
    let dir = tempfile::tempdir().unwrap();
    let options = ClusterOptions {
        background: false,
        ..ClusterOptions::default()
    };
    // Four hosts, pool of 3: an OSD out moves its PGs to the fourth host's OSD. At 10% used
    // an OSD is backfillfull here, so none can take another PG.
    let mut config = common::small_config(4, 1, "mem", 3);
    config.nearfull_ratio = 0.05;
    config.backfillfull_ratio = 0.10;
    let cluster = Cluster::create(dir.path(), config, options).await.unwrap();
    let pool = cluster.pool("data").unwrap();
    let mut written = BTreeMap::new();
    for index in 0..40u64 {
        let name = format!("object-{index}");
        let data = common::content(index, OBJECT_BYTES);
        pool.write_full(&name, &data).await.unwrap();
        written.insert(name, data);
    }
    let levels = cluster.full_state();
    assert!(
        levels
            .osds
            .values()
            .all(|osd| osd.level == FullLevel::Backfillfull),
        "{levels:?}"
    );
    let objects_before: Vec<u64> = (0..4)
        .map(|id| cluster.osd(id).unwrap().store().statfs().objects)
        .collect();
    cluster.mark_out(0).unwrap();
    assert!(
        !cluster.recover(3).await.unwrap(),
        "recovery finished onto backfillfull OSDs"
    );
    let waiting = cluster.backfill_toofull();
    assert!(!waiting.is_empty(), "no PG reported backfill_toofull");
    assert!(cluster.recovery_progress().pgs_backfill_toofull > 0);
    // Nothing was copied onto the OSDs the PGs moved to.
    for id in 1..4 {
        let objects = cluster.osd(id).unwrap().store().statfs().objects;
        assert_eq!(
            objects, objects_before[id as usize],
            "osd.{id} was backfilled"
        );
    }
    assert_eq!(cluster.recovery_progress().objects_copied, 0);
    // The PGs keep serving from their old holders.
    for (name, data) in &written {
        assert_eq!(&pool.read_full(name).await.unwrap(), data, "{name}");
    }
    // Room made: backfill proceeds and the cluster becomes clean.
    for name in written.keys().take(36) {
        pool.remove(name).await.unwrap();
    }
    assert!(cluster.recover(5).await.unwrap(), "recovery did not resume");
    assert!(cluster.backfill_toofull().is_empty());
    for (name, data) in written.iter().skip(36) {
        on_every_replica(&cluster, name, data, 3).await;
    }
    drop(pool);
    cluster.shutdown().await.unwrap();
}

/// At full, every write that needs new space is refused as a creation is, whatever its
/// shape: a same-size overwrite (copy-on-write needs the new blocks before the old ones go),
/// a partial overwrite, a larger overwrite, an append. Reads, removals and truncates that
/// shrink go on, and nothing refused changed any replica. (A truncate that extends makes a
/// hole, which takes no space, and goes on.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overwrites_and_appends_are_refused_at_full_while_reads_and_removals_work() {
    let dir = tempfile::tempdir().unwrap();
    let options = ClusterOptions {
        background: false,
        ..ClusterOptions::default()
    };
    let mut config = common::small_config(3, 1, "mem", 3);
    config.osds[0].device = "mem:16M".into();
    let cluster = Cluster::create(dir.path(), config, options).await.unwrap();
    let pool = cluster.pool("data").unwrap();
    let mut acknowledged = BTreeMap::new();
    for index in 0..200u64 {
        let name = format!("object-{index}");
        let data = common::content(index, OBJECT_BYTES);
        match pool.write_full(&name, &data).await {
            Ok(()) => {
                acknowledged.insert(name, data);
            }
            Err(RadosError::NoSpace(_)) => break,
            Err(other) => panic!("{name}: {other}"),
        }
    }
    assert_eq!(cluster.full_state().osds[&0].level, FullLevel::Full);
    let (first, data) = acknowledged.iter().next().unwrap();
    let (first, data) = (first.clone(), data.clone());
    let attempts: Vec<(&str, Result<(), RadosError>)> = vec![
        (
            "same-size overwrite",
            pool.write_full(&first, &common::content(5000, OBJECT_BYTES))
                .await,
        ),
        (
            "larger overwrite",
            pool.write_full(&first, &common::content(5001, OBJECT_BYTES * 2))
                .await,
        ),
        (
            "partial overwrite of 4 KiB",
            pool.write(&first, 8192, &common::content(5002, 4096)).await,
        ),
        ("one-byte overwrite", pool.write(&first, 0, b"x").await),
        ("append", pool.append(&first, b"more").await),
    ];
    for (what, result) in attempts {
        assert!(
            matches!(result, Err(RadosError::NoSpace(_))),
            "{what} at full: {result:?}"
        );
    }
    on_every_replica(&cluster, &first, &data, 3).await;
    for (name, data) in &acknowledged {
        assert_eq!(&pool.read_full(name).await.unwrap(), data, "{name}");
    }
    // A truncate that frees space and a removal go on.
    let second = acknowledged.keys().nth(1).unwrap().clone();
    pool.truncate(&second, 4096).await.unwrap();
    let shortened = acknowledged[&second][..4096].to_vec();
    on_every_replica(&cluster, &second, &shortened, 3).await;
    pool.remove(&first).await.unwrap();
    assert!(matches!(
        pool.read_full(&first).await,
        Err(RadosError::NotFound(_))
    ));
    drop(pool);
    cluster.shutdown().await.unwrap();
}
