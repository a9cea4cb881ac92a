//! Faulty devices: a bad replica is read around and repaired; bad data on every replica is a
//! clear Checksum error, never wrong data; scrub finds and repairs silent corruption.

mod common;

use cluster::Cluster;
use device::{FaultConfig, FaultKind, FaultRule, FaultTrigger, OpKind};
use rados::{IoCtx, RadosError};

use common::Faulty;

async fn faulty_cluster(dir: &std::path::Path) -> (Cluster, Faulty) {
    faulty_cluster_with(dir, 1).await
}

/// Three hosts of `per_host` OSDs each, every device wrapped in a [`FaultyDevice`]; pool
/// "data" of 3 replicas.
async fn faulty_cluster_with(dir: &std::path::Path, per_host: usize) -> (Cluster, Faulty) {
    let (options, devices) = common::faulty_options();
    let cluster = Cluster::create(dir, common::small_config(3, per_host, "mem", 3), options)
        .await
        .unwrap();
    (cluster, devices)
}

fn rule(op: OpKind, fault: FaultKind) -> FaultRule {
    FaultRule {
        op: Some(op),
        trigger: FaultTrigger::Always,
        fault,
        times: None,
    }
}

/// Writes `data` to `name` with bit flips stored on the given OSDs' devices.
async fn write_corrupted(
    pool: &cluster::PoolHandle,
    devices: &Faulty,
    osds: &[i32],
    name: &str,
    data: &[u8],
) {
    for osd in osds {
        devices.lock().unwrap()[osd].set_config(FaultConfig {
            rules: vec![rule(OpKind::Write, FaultKind::BitFlip)],
            ..FaultConfig::default()
        });
    }
    pool.write_full(name, data).await.unwrap();
    for osd in osds {
        devices.lock().unwrap()[osd].set_config(FaultConfig::default());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_primary_is_read_around_and_repaired() {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, devices) = faulty_cluster(dir.path()).await;
    let pool = cluster.pool("data").unwrap();
    let data = common::content(7, 64 * 1024);
    let primary = cluster.locate("data", "victim").unwrap().primary().unwrap();
    write_corrupted(&pool, &devices, &[primary], "victim", &data).await;
    let collection = cluster.collection_of("data", "victim").unwrap();
    let store = cluster.osd(primary).unwrap().store();
    assert!(matches!(
        store.read(&collection, "victim", 0, u64::MAX).await,
        Err(store::StoreError::Checksum { .. })
    ));

    assert_eq!(
        pool.read_full("victim").await.unwrap(),
        data,
        "served by another replica"
    );
    let progress = cluster.recovery_progress();
    assert!(progress.objects_repaired >= 1);
    // The repair's copy counts as an object copied, with its bytes: the two counters count
    // the same copies (bytes were counted, objects not, for repairs outside recovery).
    assert_eq!(
        (progress.objects_copied, progress.bytes_copied),
        (1, data.len() as u64),
        "{progress:?}"
    );
    assert!(cluster.replica_read_errors() >= 1);
    assert_eq!(
        store
            .read(&collection, "victim", 0, u64::MAX)
            .await
            .unwrap(),
        data,
        "repaired"
    );
    drop(pool);
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eio_on_a_replica_is_read_around() {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, devices) = faulty_cluster(dir.path()).await;
    let pool = cluster.pool("data").unwrap();
    let data = common::content(8, 10_000);
    pool.write_full("o", &data).await.unwrap();
    let primary = cluster.locate("data", "o").unwrap().primary().unwrap();
    devices.lock().unwrap()[&primary].set_config(FaultConfig {
        rules: vec![rule(OpKind::Read, FaultKind::Error)],
        ..FaultConfig::default()
    });
    assert_eq!(pool.read_full("o").await.unwrap(), data);
    devices.lock().unwrap()[&primary].set_config(FaultConfig::default());
    assert_eq!(pool.read_full("o").await.unwrap(), data);
    drop(pool);
    cluster.shutdown().await.unwrap();
}

/// A small object read once is then served from the primary's data cache; rot on the device
/// under that copy is still found by deep scrub, which reads the device itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_scrub_reads_the_device_under_the_data_cache() {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, devices) = faulty_cluster(dir.path()).await;
    let pool = cluster.pool("data").unwrap();
    let data = common::content(11, 4096);
    pool.write_full("cached", &data).await.unwrap();
    assert_eq!(pool.read_full("cached").await.unwrap(), data);
    let primary = cluster.locate("data", "cached").unwrap().primary().unwrap();
    // From now on every read of the primary's device returns a flipped bit.
    devices.lock().unwrap()[&primary].set_config(FaultConfig {
        rules: vec![rule(OpKind::Read, FaultKind::BitFlip)],
        ..FaultConfig::default()
    });
    let hits_before = cluster.data_cache_stats().hits;
    assert_eq!(pool.read_full("cached").await.unwrap(), data);
    assert_eq!(
        cluster.data_cache_stats().hits,
        hits_before + 1,
        "the second read came from memory"
    );
    let report = cluster.scrub(Some("data"), false).await.unwrap();
    let kinds: Vec<(&str, i32)> = report
        .inconsistencies
        .iter()
        .map(|i| (i.kind, i.osd))
        .collect();
    assert!(kinds.contains(&("unreadable", primary)), "{report:?}");
    devices.lock().unwrap()[&primary].set_config(FaultConfig::default());
    drop(pool);
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corruption_on_every_replica_is_a_checksum_error() {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, devices) = faulty_cluster(dir.path()).await;
    let pool = cluster.pool("data").unwrap();
    let data = common::content(9, 20_000);
    write_corrupted(&pool, &devices, &[0, 1, 2], "lost", &data).await;
    let error = pool.read_full("lost").await.unwrap_err();
    assert!(matches!(error, RadosError::Checksum(_)), "{error:?}");
    assert_eq!(error.errno(), rados::errno::EBADMSG);
    let report = cluster.scrub(Some("data"), true).await.unwrap();
    assert_eq!(report.lost, vec!["lost".to_string()]);
    // Status reports it until a scrub finds nothing wrong (HEALTH_ERR in `strata status`).
    assert_eq!(cluster.scrub_errors(), 1);
    pool.remove("lost").await.unwrap();
    assert!(cluster.scrub(Some("data"), false).await.unwrap().is_clean());
    assert_eq!(cluster.scrub_errors(), 0);
    drop(pool);
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrub_finds_and_repairs_a_silently_bad_replica() {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, devices) = faulty_cluster(dir.path()).await;
    let pool = cluster.pool("data").unwrap();
    for i in 0..20 {
        pool.write_full(&format!("o{i}"), &common::content(i, 8192))
            .await
            .unwrap();
    }
    let placement = cluster.locate("data", "o3").unwrap();
    let secondary = placement.acting[1];
    write_corrupted(
        &pool,
        &devices,
        &[secondary],
        "o3",
        &common::content(3, 8192),
    )
    .await;
    // A replica that lost an object (bypassing the cluster) and one with an extra object.
    let collection = cluster.collection_of("data", "o3").unwrap();
    let third = placement.acting[2];
    let mut transaction = store::Transaction::new(0);
    transaction.remove(&store::ObjectId::new(collection.as_str(), "o3"));
    cluster
        .osd(third)
        .unwrap()
        .store()
        .apply(transaction)
        .await
        .unwrap();

    let report = cluster.scrub(Some("data"), true).await.unwrap();
    let kinds: Vec<(&str, i32)> = report
        .inconsistencies
        .iter()
        .map(|i| (i.kind, i.osd))
        .collect();
    assert!(kinds.contains(&("unreadable", secondary)), "{report:?}");
    assert!(kinds.contains(&("missing", third)), "{report:?}");
    assert!(report.inconsistencies.iter().all(|i| i.repaired));
    assert_eq!(cluster.scrub_errors(), 0, "every bad copy was repaired");
    assert_eq!(report.objects, 20);
    let again = cluster.scrub(Some("data"), false).await.unwrap();
    assert!(again.is_clean(), "{again:?}");
    drop(pool);
    cluster.shutdown().await.unwrap();
}

/// Scrub's repair keeps the last copy: an object two of three replicas lost (the primary among
/// them, so a vote counting "missing" as a copy outvotes it and the tie rule favours it too)
/// is copied back to both, not deleted from the one that has it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrub_restores_an_object_most_replicas_lost_instead_of_deleting_it() {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, _devices) = faulty_cluster(dir.path()).await;
    let pool = cluster.pool("data").unwrap();
    for i in 0..10 {
        pool.write_full(&format!("o{i}"), &common::content(i, 8192))
            .await
            .unwrap();
    }
    let placement = cluster.locate("data", "o4").unwrap();
    let collection = cluster.collection_of("data", "o4").unwrap();
    let (primary, keeper, second) = (
        placement.acting[0],
        placement.acting[1],
        placement.acting[2],
    );
    for osd in [primary, second] {
        let mut transaction = store::Transaction::new(0);
        transaction.remove(&store::ObjectId::new(collection.as_str(), "o4"));
        cluster
            .osd(osd)
            .unwrap()
            .store()
            .apply(transaction)
            .await
            .unwrap();
    }

    let report = cluster.scrub(Some("data"), true).await.unwrap();
    let mut kinds: Vec<(&str, i32)> = report
        .inconsistencies
        .iter()
        .map(|i| (i.kind, i.osd))
        .collect();
    kinds.sort();
    let mut expected = vec![("missing", primary), ("missing", second)];
    expected.sort();
    assert_eq!(kinds, expected, "{report:?}");
    assert!(report.inconsistencies.iter().all(|i| i.repaired));
    assert!(report.lost.is_empty(), "{report:?}");
    for osd in [primary, keeper, second] {
        assert!(
            version_on(&cluster, osd, "o4").await.is_some(),
            "osd.{osd} holds o4 after the repair"
        );
    }
    assert_eq!(
        pool.read("o4", 0, 1 << 20).await.unwrap(),
        common::content(4, 8192)
    );
    assert!(cluster.scrub(Some("data"), false).await.unwrap().is_clean());
    drop(pool);
    cluster.shutdown().await.unwrap();
}

/// The version an OSD holds of `name` in pool "data".
async fn version_on(cluster: &Cluster, osd: i32, name: &str) -> Option<u64> {
    let collection = cluster.collection_of("data", name).unwrap();
    cluster
        .osd(osd)
        .unwrap()
        .version(&collection, name)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_primary_write_is_repaired_from_the_replicas_and_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, devices) = faulty_cluster(dir.path()).await;
    let pool = cluster.pool("data").unwrap();
    let placement = cluster.locate("data", "victim").unwrap();
    let primary = placement.primary().unwrap();
    pool.write_full("victim", b"old").await.unwrap();
    // The primary's next device write fails once; the replicas commit the new version.
    devices.lock().unwrap()[&primary].set_config(FaultConfig {
        rules: vec![FaultRule {
            times: Some(1),
            ..rule(OpKind::Write, FaultKind::Error)
        }],
        ..FaultConfig::default()
    });
    pool.write_full("victim", b"new").await.unwrap();
    devices.lock().unwrap()[&primary].set_config(FaultConfig::default());
    assert_eq!(pool.read_full("victim").await.unwrap(), b"new");
    let versions: Vec<Option<u64>> = versions_on(&cluster, &placement.acting).await;
    assert!(
        versions.iter().all(|v| *v == versions[0] && v.is_some()),
        "replicas diverge: {versions:?}"
    );
    let report = cluster.scrub(Some("data"), false).await.unwrap();
    assert!(report.is_clean(), "{report:?}");
    drop(pool);
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unrepairable_primary_leaves_the_acting_set_and_the_write_is_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, devices) = faulty_cluster(dir.path()).await;
    let pool = cluster.pool("data").unwrap();
    let placement = cluster.locate("data", "victim").unwrap();
    let primary = placement.primary().unwrap();
    pool.write_full("victim", b"old").await.unwrap();
    devices.lock().unwrap()[&primary].set_config(FaultConfig {
        rules: vec![rule(OpKind::Write, FaultKind::Error)],
        ..FaultConfig::default()
    });
    // The replicas (min_size) commit; the primary can be neither written nor repaired, so
    // it leaves the acting set and a replica serves the PG.
    pool.write_full("victim", b"new").await.unwrap();
    let degraded = cluster.locate("data", "victim").unwrap();
    assert!(!degraded.acting.contains(&primary), "{degraded:?}");
    assert_eq!(pool.read_full("victim").await.unwrap(), b"new");
    devices.lock().unwrap()[&primary].set_config(FaultConfig::default());
    // Recovery refills it and the PG returns to its up set.
    assert!(cluster.recover(3).await.unwrap());
    assert_eq!(cluster.locate("data", "victim").unwrap(), placement);
    let versions = versions_on(&cluster, &placement.acting).await;
    assert!(
        versions.iter().all(|v| *v == versions[0]),
        "replicas diverge: {versions:?}"
    );
    assert_eq!(pool.read_full("victim").await.unwrap(), b"new");
    drop(pool);
    cluster.shutdown().await.unwrap();
}

async fn versions_on(cluster: &Cluster, osds: &[i32]) -> Vec<Option<u64>> {
    let mut versions = Vec::new();
    for &osd in osds {
        versions.push(version_on(cluster, osd, "victim").await);
    }
    versions
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_osd_is_marked_down_and_out_and_its_pgs_re_replicated() {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, devices) = faulty_cluster_with(dir.path(), 2).await;
    let pool = cluster.pool("data").unwrap();
    let names: Vec<String> = (0..24).map(|i| format!("o{i}")).collect();
    let body = |i: usize| common::content(i as u64, 5000);
    for (i, name) in names.iter().enumerate() {
        pool.write_full(name, &body(i)).await.unwrap();
    }
    let victim = cluster.locate("data", "o0").unwrap().primary().unwrap();
    devices.lock().unwrap()[&victim].set_config(FaultConfig {
        rules: vec![FaultRule {
            op: None,
            trigger: FaultTrigger::Always,
            fault: FaultKind::Error,
            times: None,
        }],
        ..FaultConfig::default()
    });
    let taken_out = |cluster: &Cluster| {
        cluster
            .osd_stats()
            .iter()
            .any(|osd| osd.id == victim && !osd.up && !osd.is_in)
    };
    // Reads are served around the dead device all along; writes whose primary it is fail
    // until it is taken out; its errors take it out within a round.
    let mut rounds = 0;
    while !taken_out(&cluster) {
        rounds += 1;
        assert!(
            rounds <= 2,
            "osd.{victim} still up or in after {rounds} rounds"
        );
        for (i, name) in names.iter().enumerate() {
            assert_eq!(pool.read_full(name).await.unwrap(), body(i), "{name}");
            let _ = pool.write_full(name, &body(i)).await;
        }
    }
    for (i, name) in names.iter().enumerate() {
        pool.write_full(name, &body(i)).await.unwrap();
    }
    assert!(
        cluster.recover(50).await.unwrap(),
        "recovery did not finish"
    );
    for (i, name) in names.iter().enumerate() {
        let placement = cluster.locate("data", name).unwrap();
        assert_eq!(placement.acting.len(), 3, "{name}: {placement:?}");
        assert!(!placement.acting.contains(&victim), "{name}: {placement:?}");
        for osd in &placement.acting {
            assert!(
                version_on(&cluster, *osd, name).await.is_some(),
                "{name} on osd.{osd}"
            );
        }
        assert_eq!(pool.read_full(name).await.unwrap(), body(i));
    }
    drop(pool);
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_failed_an_acknowledged_write_serves_nothing_until_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, devices) = faulty_cluster(dir.path()).await;
    let pool = cluster.pool("data").unwrap();
    let placement = cluster.locate("data", "victim").unwrap();
    let primary = placement.primary().unwrap();
    let replica = placement.acting[1];
    pool.write_full("victim", b"old").await.unwrap();
    // The replica's device refuses writes (a full or failing disk): the write commits on the
    // other two, min_size, and is acknowledged.
    devices.lock().unwrap()[&replica].set_config(FaultConfig {
        rules: vec![rule(OpKind::Write, FaultKind::Error)],
        ..FaultConfig::default()
    });
    pool.write_full("victim", b"new").await.unwrap();
    let degraded = cluster.locate("data", "victim").unwrap();
    assert!(
        !degraded.acting.contains(&replica),
        "the stale replica left the acting set: {degraded:?}"
    );
    assert!(degraded.up.contains(&replica), "{degraded:?}");
    // With the replicas that hold the write down, the stale copy is not served.
    let others: Vec<i32> = placement
        .acting
        .iter()
        .copied()
        .filter(|&osd| osd != replica)
        .collect();
    for &osd in &others {
        cluster.mark_down(osd).unwrap();
    }
    match pool.read_full("victim").await {
        Ok(data) => assert_eq!(data, b"new", "an acknowledged overwrite was lost"),
        Err(error) => assert!(
            matches!(error, RadosError::Degraded { .. }),
            "unexpected error {error}"
        ),
    }
    for &osd in &others {
        cluster.mark_up(osd).unwrap();
    }
    // Recovery never copies the stale version over the new one; once the disk works, it
    // refills the replica and the PG returns to its up set.
    assert!(
        !cluster.recover(2).await.unwrap(),
        "the replica still fails"
    );
    assert_eq!(pool.read_full("victim").await.unwrap(), b"new");
    devices.lock().unwrap()[&replica].set_config(FaultConfig::default());
    assert!(cluster.recover(5).await.unwrap());
    let healed = cluster.locate("data", "victim").unwrap();
    assert_eq!(healed.acting, healed.up);
    let versions = versions_on(&cluster, &placement.acting).await;
    assert!(
        versions.iter().all(|v| *v == versions[0] && v.is_some()),
        "replicas diverge: {versions:?}"
    );
    assert_eq!(pool.read_full("victim").await.unwrap(), b"new");
    assert_eq!(
        cluster.locate("data", "victim").unwrap().primary(),
        Some(primary)
    );
    drop(pool);
    cluster.shutdown().await.unwrap();
}
