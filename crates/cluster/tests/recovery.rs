//! OSD failure and recovery: down -> degraded service, out -> backfill to the new up sets,
//! in -> data moves back; below min_size writes are refused.

mod common;

use std::collections::BTreeMap;

use cluster::{Cluster, ClusterOptions};
use rados::{IoCtx, RadosError};

const OBJECTS: usize = 60;

async fn check_all(
    cluster: &Cluster,
    pool: &cluster::PoolHandle,
    expected: &BTreeMap<String, Vec<u8>>,
) {
    for (name, data) in expected {
        assert_eq!(&pool.read_full(name).await.unwrap(), data, "{name}");
        // Every up-set member holds the same version of the object.
        let placement = cluster.locate("data", name).unwrap();
        let collection = cluster.collection_of("data", name).unwrap();
        for osd in &placement.acting {
            let copy = cluster
                .osd(*osd)
                .unwrap()
                .store()
                .read(&collection, name, 0, u64::MAX)
                .await
                .unwrap_or_else(|e| panic!("{name} on osd.{osd}: {e}"));
            assert_eq!(&copy, data, "{name} on osd.{osd}");
        }
    }
}

/// Objects stored per OSD (by the stores' own accounting).
fn objects_per_osd(cluster: &Cluster) -> BTreeMap<i32, u64> {
    (0..6)
        .map(|id| (id, cluster.osd(id).unwrap().store().statfs().objects))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn down_out_recover_in() {
    let dir = tempfile::tempdir().unwrap();
    let options = ClusterOptions {
        background: false,
        ..ClusterOptions::default()
    };
    // 3 hosts x 2 OSDs, 2 replicas: an out OSD's PGs can move to its host neighbour.
    let mut config = common::small_config(3, 2, "mem", 2);
    config.pools[0].min_size = Some(1);
    let cluster = Cluster::create(dir.path(), config, options).await.unwrap();
    let pool = cluster.pool("data").unwrap();
    let mut expected = BTreeMap::new();
    for i in 0..OBJECTS {
        let name = format!("object-{i}");
        let data = common::content(i as u64, 1000 + i * 97);
        pool.write_full(&name, &data).await.unwrap();
        expected.insert(name, data);
    }
    assert!(
        cluster.recover(3).await.unwrap(),
        "a fresh cluster is clean"
    );
    let victim = 0;
    let before = objects_per_osd(&cluster);
    assert!(before[&victim] > 0);

    // Down: reads and writes continue on the other replica.
    cluster.mark_down(victim).unwrap();
    for i in (0..OBJECTS).step_by(3) {
        let name = format!("object-{i}");
        let data = common::content(1000 + i as u64, 3000);
        pool.write_full(&name, &data).await.unwrap();
        expected.insert(name, data);
    }
    pool.remove("object-1").await.unwrap();
    expected.remove("object-1");
    check_all(&cluster, &pool, &expected).await;

    // Out: the victim's PGs get new up sets; recovery copies the data there.
    cluster.mark_out(victim).unwrap();
    assert!(!cluster.state().pg_temp.is_empty(), "PGs wait for backfill");
    check_all(&cluster, &pool, &expected).await; // served by the old holders meanwhile
    assert!(cluster.recover(5).await.unwrap());
    let progress = cluster.recovery_progress();
    assert!(progress.objects_copied > 0, "{progress:?}");
    assert!(cluster.state().pg_temp.is_empty());
    for name in expected.keys() {
        let placement = cluster.locate("data", name).unwrap();
        assert!(!placement.up.contains(&victim));
        assert_eq!(placement.acting.len(), 2);
    }
    check_all(&cluster, &pool, &expected).await;

    // Up and in again: the victim gets its PGs back, with the writes it missed; the
    // temporary holders drop their copies.
    cluster.mark_up(victim).unwrap();
    cluster.mark_in(victim).unwrap();
    assert!(cluster.recover(5).await.unwrap());
    check_all(&cluster, &pool, &expected).await;
    assert_eq!(objects_per_osd(&cluster), {
        // Same placement as at the start: same object counts (object-1 is gone).
        let mut counts = before.clone();
        let placement = cluster.locate("data", "object-1").unwrap();
        for osd in placement.acting {
            *counts.get_mut(&osd).unwrap() -= 1;
        }
        counts
    });
    let report = cluster.scrub(None, false).await.unwrap();
    assert!(report.is_clean(), "{report:?}");
    drop(pool);
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_below_min_size_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let options = ClusterOptions {
        background: false,
        ..ClusterOptions::default()
    };
    let cluster = Cluster::create(dir.path(), common::small_config(3, 1, "mem", 3), options)
        .await
        .unwrap();
    let pool = cluster.pool("data").unwrap();
    pool.write_full("o", b"v1").await.unwrap();
    cluster.mark_down(0).unwrap();
    pool.write_full("o", b"v2").await.unwrap(); // 2 of 3 >= min_size 2
    cluster.mark_down(1).unwrap();
    let refused = pool.write_full("o", b"v3").await;
    assert!(
        matches!(
            refused,
            Err(RadosError::Degraded {
                available: 1,
                min_size: 2,
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(pool.read_full("o").await.unwrap(), b"v2", "reads continue");
    cluster.mark_down(2).unwrap();
    assert!(matches!(
        pool.read_full("o").await,
        Err(RadosError::Degraded { .. })
    ));
    // OSDs 0 and 1 missed v2; when they return, recovery brings them up to date before
    // they serve.
    cluster.mark_up(0).unwrap();
    cluster.mark_up(1).unwrap();
    assert!(
        matches!(pool.read_full("o").await, Err(RadosError::Degraded { .. })),
        "only stale copies are up"
    );
    cluster.mark_up(2).unwrap();
    assert_eq!(pool.read_full("o").await.unwrap(), b"v2");
    assert!(cluster.recover(5).await.unwrap());
    for osd in 0..3 {
        let collection = cluster.collection_of("data", "o").unwrap();
        let copy = cluster
            .osd(osd)
            .unwrap()
            .store()
            .read(&collection, "o", 0, 100)
            .await
            .unwrap();
        assert_eq!(copy, b"v2", "osd.{osd}");
    }
    drop(pool);
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_recovery_and_upmap() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::create(
        dir.path(),
        common::small_config(3, 2, "mem", 2),
        ClusterOptions::default(),
    )
    .await
    .unwrap();
    let pool = cluster.pool("data").unwrap();
    let mut expected = BTreeMap::new();
    for i in 0..30 {
        let name = format!("o{i}");
        let data = common::content(i, 5000);
        pool.write_full(&name, &data).await.unwrap();
        expected.insert(name, data);
    }
    // Move one PG's replica with an upmap item; the background task backfills it.
    let placement = cluster.locate("data", "o1").unwrap();
    let from = placement.up[0];
    let to = if from % 2 == 0 { from + 1 } else { from - 1 }; // the host neighbour
    cluster
        .set_pg_upmap_items(placement.pg, vec![(from, to)])
        .unwrap();
    for _ in 0..200 {
        if cluster.state().pg_temp.is_empty() && cluster.recovery_progress().pgs_pending == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let moved = cluster.locate("data", "o1").unwrap();
    assert!(
        moved.acting.contains(&to) && !moved.acting.contains(&from),
        "{moved:?}"
    );
    check_all(&cluster, &pool, &expected).await;
    drop(pool);
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_and_placement_survive_a_restart() {
    use rados::{PoolSpec, Rados};
    let dir = tempfile::tempdir().unwrap();
    let options = || ClusterOptions {
        background: false,
        ..ClusterOptions::default()
    };
    let cluster = Cluster::create(dir.path(), common::small_config(3, 2, "file", 2), options())
        .await
        .unwrap();
    cluster
        .pool_create(
            PoolSpec::new("extra")
                .with_size(2)
                .with_device_class("hdd")
                .with_pg_num(8),
        )
        .await
        .unwrap();
    let extra = cluster.pool("extra").unwrap();
    for i in 0..20 {
        extra
            .write_full(&format!("e{i}"), &common::content(i, 3000))
            .await
            .unwrap();
    }
    cluster.mark_out(3).unwrap();
    assert!(cluster.recover(5).await.unwrap());
    let pg = cluster.locate("extra", "e1").unwrap().pg;
    let up = cluster.locate("extra", "e1").unwrap().up;
    let other = [0, 2, 4].into_iter().find(|osd| !up.contains(osd)).unwrap();
    cluster
        .set_pg_upmap_items(pg, vec![(up[0], other)])
        .unwrap();
    assert!(cluster.recover(5).await.unwrap());
    let placements: Vec<_> = (0..20)
        .map(|i| cluster.locate("extra", &format!("e{i}")).unwrap())
        .collect();
    let state = cluster.state();
    let crush = cluster.osd_map().crush().clone();
    drop(extra);
    cluster.shutdown().await.unwrap();

    let reopened = Cluster::open(dir.path(), options()).await.unwrap();
    let mut restored = reopened.state();
    restored.version_reserved = state.version_reserved; // a restart takes a new lease
    assert_eq!(restored, state);
    assert_eq!(reopened.osd_map().crush().item_names, crush.item_names);
    assert_eq!(reopened.osd_map().crush().buckets, crush.buckets);
    let again: Vec<_> = (0..20)
        .map(|i| reopened.locate("extra", &format!("e{i}")).unwrap())
        .collect();
    assert_eq!(again, placements);
    let extra = reopened.pool("extra").unwrap();
    for i in 0..20 {
        assert_eq!(
            extra.read_full(&format!("e{i}")).await.unwrap(),
            common::content(i, 3000)
        );
    }
    let version = extra.stat("e0").await.unwrap().version;
    extra.write_full("e0", b"new").await.unwrap();
    assert!(
        extra.stat("e0").await.unwrap().version > version,
        "versions keep growing after a restart"
    );
    drop(extra);
    reopened.shutdown().await.unwrap();
}

/// Rewrites the data directory's `cluster.toml` with `edit` applied.
fn edit_config(dir: &std::path::Path, edit: impl FnOnce(&mut cluster::ClusterConfig)) {
    let path = dir.join("cluster.toml");
    let mut config = cluster::ClusterConfig::load(&path).unwrap();
    edit(&mut config);
    std::fs::write(&path, config.to_toml()).unwrap();
}

/// Opens the cluster, recovers it, and checks every object on every acting member.
async fn reopen_and_check(
    dir: &std::path::Path,
    expected: &BTreeMap<String, Vec<u8>>,
    context: &str,
) -> Cluster {
    let options = ClusterOptions {
        background: false,
        ..ClusterOptions::default()
    };
    let cluster = Cluster::open(dir, options)
        .await
        .unwrap_or_else(|e| panic!("{context}: {e}"));
    let pool = cluster.pool("data").unwrap();
    // Before recovery: reads find the data where it was.
    for (name, data) in expected {
        assert_eq!(
            &pool.read_full(name).await.unwrap(),
            data,
            "{context}: {name}"
        );
    }
    assert!(cluster.recover(10).await.unwrap(), "{context}: recovers");
    check_all(&cluster, &pool, expected).await;
    drop(pool);
    cluster
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edits_of_the_config_move_data_without_losing_any() {
    let dir = tempfile::tempdir().unwrap();
    let options = ClusterOptions {
        background: false,
        ..ClusterOptions::default()
    };
    let cluster = Cluster::create(dir.path(), common::small_config(3, 2, "file", 2), options)
        .await
        .unwrap();
    let pool = cluster.pool("data").unwrap();
    let mut expected = BTreeMap::new();
    for i in 0..OBJECTS {
        let name = format!("object-{i}");
        let data = common::content(i as u64, 2000 + i * 31);
        pool.write_full(&name, &data).await.unwrap();
        expected.insert(name, data);
    }
    drop(pool);
    cluster.shutdown().await.unwrap();

    // A weight changed: PGs move to and from osd.0.
    edit_config(dir.path(), |config| config.osds[0].weight = Some(4.0));
    let cluster = reopen_and_check(dir.path(), &expected, "weight").await;
    let epoch = cluster.epoch();
    cluster.shutdown().await.unwrap();

    // Unchanged: the same map, no new epoch.
    let cluster = reopen_and_check(dir.path(), &expected, "unchanged").await;
    assert_eq!(cluster.epoch(), epoch, "an unchanged file changes nothing");
    cluster.shutdown().await.unwrap();

    // A host with two new OSDs: their stores are created, and they fill.
    edit_config(dir.path(), |config| {
        let wider = common::small_config(4, 2, "file", 2);
        config.hosts = wider.hosts;
        config.osds.extend(wider.osds.into_iter().skip(6));
    });
    let cluster = reopen_and_check(dir.path(), &expected, "host added").await;
    assert!(cluster.osd(6).unwrap().store().statfs().objects > 0);
    cluster.shutdown().await.unwrap();

    // A store removed to start its OSD empty: the other replica refills it.
    let objects = {
        let cluster = reopen_and_check(dir.path(), &expected, "again").await;
        let count = cluster.osd(2).unwrap().store().statfs().objects;
        cluster.shutdown().await.unwrap();
        count
    };
    assert!(objects > 0);
    std::fs::remove_dir_all(dir.path().join("osd.2.meta"))
        .or_else(|_| std::fs::remove_file(dir.path().join("osd.2.meta")))
        .unwrap();
    let cluster = reopen_and_check(dir.path(), &expected, "store removed").await;
    assert_eq!(cluster.osd(2).unwrap().store().statfs().objects, objects);
    cluster.mark_out(7).unwrap();
    cluster.shutdown().await.unwrap();

    // An OSD leaves the file: refused while it is in, accepted once it is out and drained.
    let saved = std::fs::read(dir.path().join("cluster.toml")).unwrap();
    edit_config(dir.path(), |config| config.osds.retain(|osd| osd.id != 6));
    let options = ClusterOptions {
        background: false,
        ..ClusterOptions::default()
    };
    let Err(error) = Cluster::open(dir.path(), options).await else {
        panic!("an OSD that is in was removed from the file");
    };
    let error = error.to_string();
    assert!(
        error.contains("osd.6") && error.contains("still in"),
        "{error}"
    );
    std::fs::write(dir.path().join("cluster.toml"), &saved).unwrap();
    let cluster = reopen_and_check(dir.path(), &expected, "osd.7 out").await;
    assert_eq!(cluster.osd(7).unwrap().store().statfs().objects, 0);
    cluster.shutdown().await.unwrap();
    edit_config(dir.path(), |config| config.osds.retain(|osd| osd.id != 7));
    reopen_and_check(dir.path(), &expected, "osd.7 removed")
        .await
        .shutdown()
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_that_finds_too_few_osds_keeps_the_earlier_holders() {
    use rados::{PoolSpec, Rados};
    let dir = tempfile::tempdir().unwrap();
    let options = ClusterOptions {
        background: false,
        ..ClusterOptions::default()
    };
    // One ssd per host, 3 hosts, 3 replicas on ssds: with an ssd out, CRUSH finds 2.
    let cluster = Cluster::create(dir.path(), common::small_config(3, 2, "mem", 2), options)
        .await
        .unwrap();
    cluster
        .pool_create(
            PoolSpec::new("fast")
                .with_size(3)
                .with_device_class("ssd")
                .with_pg_num(8),
        )
        .await
        .unwrap();
    let fast = cluster.pool("fast").unwrap();
    let mut expected = BTreeMap::new();
    for i in 0..20u64 {
        let name = format!("f{i}");
        let data = common::content(i, 1500);
        fast.write_full(&name, &data).await.unwrap();
        expected.insert(name, data);
    }
    let on_osd0 = cluster.osd(0).unwrap().store().statfs().objects;
    assert_eq!(on_osd0, 20, "every object has a copy on each ssd");

    cluster.mark_out(0).unwrap();
    assert!(cluster.recover(5).await.unwrap(), "settles");
    for name in expected.keys() {
        let place = cluster.locate("fast", name).unwrap();
        assert_eq!(place.up.len(), 2, "{name}: CRUSH finds two ssds");
        assert_eq!(place.acting.len(), 3, "{name}: three copies kept");
        assert!(place.acting.contains(&0), "{name}");
    }
    assert_eq!(
        cluster.osd(0).unwrap().store().statfs().objects,
        20,
        "the out OSD's copies stay"
    );
    // Writes reach all three holders.
    fast.write_full("f0", b"changed").await.unwrap();
    expected.insert("f0".to_string(), b"changed".to_vec());
    assert_eq!(
        cluster
            .osd(0)
            .unwrap()
            .store()
            .read(
                &cluster.collection_of("fast", "f0").unwrap(),
                "f0",
                0,
                u64::MAX
            )
            .await
            .unwrap(),
        b"changed"
    );

    cluster.mark_in(0).unwrap();
    assert!(cluster.recover(5).await.unwrap());
    assert!(
        cluster.osd_map().pg_temp().is_empty(),
        "back to the up sets"
    );
    for (name, data) in &expected {
        assert_eq!(&fast.read_full(name).await.unwrap(), data, "{name}");
        assert_eq!(cluster.locate("fast", name).unwrap().acting.len(), 3);
    }
    drop(fast);
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrub_errors_survive_a_restart_until_repaired() {
    let dir = tempfile::tempdir().unwrap();
    let options = || ClusterOptions {
        background: false,
        ..ClusterOptions::default()
    };
    let cluster = Cluster::create(dir.path(), common::small_config(3, 1, "file", 3), options())
        .await
        .unwrap();
    let pool = cluster.pool("data").unwrap();
    pool.write_full("o", b"good").await.unwrap();
    // One replica loses its copy behind the cluster's back.
    let place = cluster.locate("data", "o").unwrap();
    let collection = cluster.collection_of("data", "o").unwrap();
    let mut transaction = store::Transaction::new(0);
    transaction.remove(&store::ObjectId::new(collection.as_str(), "o"));
    cluster
        .osd(place.acting[1])
        .unwrap()
        .store()
        .apply(transaction)
        .await
        .unwrap();
    assert!(!cluster.scrub(None, false).await.unwrap().is_clean());
    assert_eq!(cluster.scrub_errors(), 1);
    drop(pool);
    cluster.shutdown().await.unwrap();

    let cluster = Cluster::open(dir.path(), options()).await.unwrap();
    assert_eq!(cluster.scrub_errors(), 1, "HEALTH_ERR survives a restart");
    cluster.scrub(None, true).await.unwrap();
    assert_eq!(cluster.scrub_errors(), 0, "repaired");
    cluster.shutdown().await.unwrap();
    let cluster = Cluster::open(dir.path(), options()).await.unwrap();
    assert_eq!(cluster.scrub_errors(), 0);
    assert_eq!(
        cluster.pool("data").unwrap().read_full("o").await.unwrap(),
        b"good"
    );
    cluster.shutdown().await.unwrap();
}

/// An object deleted while one of its OSDs was down stays deleted: the OSD that returns with
/// the old copy serves nothing until recovery has removed it, so a scrub right after its
/// return (which keeps a copy some acting replica holds) cannot bring the object back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_missed_by_a_down_osd_is_not_undone_by_scrub() {
    let dir = tempfile::tempdir().unwrap();
    let options = ClusterOptions {
        background: false,
        ..ClusterOptions::default()
    };
    let mut config = common::small_config(3, 1, "mem", 3);
    config.pools[0].min_size = Some(2);
    let cluster = Cluster::create(dir.path(), config, options).await.unwrap();
    let pool = cluster.pool("data").unwrap();
    // The primary, then a replica, misses the deletion.
    for position in [0, 1] {
        let name = format!("doomed-{position}");
        pool.write_full(&name, b"old data").await.unwrap();
        let placement = cluster.locate("data", &name).unwrap();
        let absent = placement.acting[position];
        cluster.mark_down(absent).unwrap();
        pool.remove(&name).await.unwrap();
        cluster.mark_up(absent).unwrap();
        let back = cluster.locate("data", &name).unwrap();
        assert!(
            !back.acting.contains(&absent),
            "the returning osd.{absent} serves before recovery: {back:?}"
        );
        let report = cluster.scrub(Some("data"), true).await.unwrap();
        assert!(report.is_clean(), "{report:?}");
        assert!(matches!(
            pool.read_full(&name).await,
            Err(RadosError::NotFound(_))
        ));
        assert!(cluster.recover(5).await.unwrap());
        assert!(matches!(
            pool.read_full(&name).await,
            Err(RadosError::NotFound(_))
        ));
        let collection = cluster.collection_of("data", &name).unwrap();
        assert_eq!(
            cluster
                .osd(absent)
                .unwrap()
                .version(&collection, &name)
                .await
                .unwrap(),
            None,
            "recovery removed the stale copy from osd.{absent}"
        );
        assert!(cluster.scrub(Some("data"), true).await.unwrap().is_clean());
    }
    drop(pool);
    cluster.shutdown().await.unwrap();
}
