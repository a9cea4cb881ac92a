//! Online changes of OSDs: override weights and device classes, persisted (state.json,
//! cluster.toml), with recovery moving the data and every object reading back.

mod common;

use std::collections::BTreeMap;

use cluster::{Cluster, ClusterConfig, ClusterError, ClusterOptions, PoolConfig};
use rados::{IoCtx, RadosError};

const OBJECTS: usize = 40;

fn options() -> ClusterOptions {
    ClusterOptions {
        background: false,
        ..ClusterOptions::default()
    }
}

/// 3 hosts x 3 OSDs (slot 0 "ssd", the others "hdd"), pool "data" (any class) and pool
/// "fast" (ssd), 2 replicas each.
fn config() -> ClusterConfig {
    let mut config = common::small_config(3, 3, "file", 2);
    config.pools[0].min_size = Some(1);
    config.pools.push(PoolConfig {
        name: "fast".to_string(),
        size: 2,
        min_size: Some(1),
        pg_num: 16,
        device_class: Some("ssd".to_string()),
        crush_rule: None,
        erasure: None,
    });
    config
}

async fn fill(cluster: &Cluster) -> BTreeMap<(String, String), Vec<u8>> {
    let mut expected = BTreeMap::new();
    for pool_name in ["data", "fast"] {
        let pool = cluster.pool(pool_name).unwrap();
        for i in 0..OBJECTS {
            let name = format!("object-{i}");
            let data = common::content(i as u64, 500 + i * 31);
            pool.write_full(&name, &data).await.unwrap();
            expected.insert((pool_name.to_string(), name), data);
        }
    }
    expected
}

/// Every object reads back, its PG is clean (acting = up) and every acting OSD's store
/// holds it.
async fn check_all(cluster: &Cluster, expected: &BTreeMap<(String, String), Vec<u8>>) {
    for ((pool_name, name), data) in expected {
        let pool = cluster.pool(pool_name).unwrap();
        assert_eq!(
            &pool.read_full(name).await.unwrap(),
            data,
            "{pool_name}/{name}"
        );
        let placement = cluster.locate(pool_name, name).unwrap();
        assert_eq!(placement.acting, placement.up, "{pool_name}/{name}");
        let collection = cluster.collection_of(pool_name, name).unwrap();
        for osd in &placement.acting {
            let copy = cluster
                .osd(*osd)
                .unwrap()
                .store()
                .read(&collection, name, 0, u64::MAX)
                .await
                .unwrap_or_else(|e| panic!("{pool_name}/{name} on osd.{osd}: {e}"));
            assert_eq!(&copy, data, "{pool_name}/{name} on osd.{osd}");
        }
    }
}

fn objects_on(cluster: &Cluster, osd: i32) -> u64 {
    cluster.osd(osd).unwrap().store().statfs().objects
}

fn class_in_file(dir: &std::path::Path, osd: i32) -> String {
    let config = ClusterConfig::load(&dir.join("cluster.toml")).unwrap();
    config
        .osds
        .iter()
        .find(|entry| entry.id == osd)
        .unwrap()
        .class
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reweight_moves_data_off_and_in_restores_it() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::create(dir.path(), config(), options())
        .await
        .unwrap();
    let expected = fill(&cluster).await;
    assert!(cluster.recover(3).await.unwrap());
    let victim = 1; // an hdd OSD: "data" only
    assert!(objects_on(&cluster, victim) > 0);

    for refused in [1.5, -0.1, f64::NAN] {
        let error = cluster.reweight(victim, refused).unwrap_err();
        assert!(
            matches!(error, ClusterError::Rados(RadosError::InvalidArgument(_))),
            "{refused}: {error}"
        );
    }
    assert!(matches!(
        cluster.reweight(99, 0.5).unwrap_err(),
        ClusterError::Rados(RadosError::NotFound(_))
    ));

    let epoch = cluster.epoch();
    assert_eq!(cluster.reweight(victim, 0.0).unwrap(), epoch + 1);
    assert_eq!(cluster.osd_map().osd_weight(victim), 0);
    // The moved PGs keep serving from their old holders until recovery copied them.
    check_reads(&cluster, &expected).await;
    assert!(cluster.recover(5).await.unwrap());
    assert_eq!(objects_on(&cluster, victim), 0, "reweight 0 empties it");
    check_all(&cluster, &expected).await;

    // Persisted: a reopened cluster keeps the weight.
    cluster.reweight(victim, 0.5).unwrap();
    assert!(cluster.recover(5).await.unwrap());
    cluster.shutdown().await.unwrap();
    let cluster = Cluster::open(dir.path(), options()).await.unwrap();
    assert_eq!(cluster.state().osds[&victim].weight, 0x8000);
    assert_eq!(cluster.osd_map().osd_weight(victim), 0x8000);
    assert!(cluster.recover(5).await.unwrap());
    check_all(&cluster, &expected).await;

    // `in` resets the override weight to 1.0, as Ceph's `osd in` does.
    cluster.mark_in(victim).unwrap();
    assert_eq!(cluster.osd_map().osd_weight(victim), 0x10000);
    assert!(cluster.recover(5).await.unwrap());
    assert!(objects_on(&cluster, victim) > 0);
    check_all(&cluster, &expected).await;
    cluster.shutdown().await.unwrap();
}

/// Reads of every object (not their placement, which recovery has yet to settle).
async fn check_reads(cluster: &Cluster, expected: &BTreeMap<(String, String), Vec<u8>>) {
    for ((pool_name, name), data) in expected {
        let pool = cluster.pool(pool_name).unwrap();
        assert_eq!(
            &pool.read_full(name).await.unwrap(),
            data,
            "{pool_name}/{name}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_class_changes_are_refused_or_persisted_and_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::create(dir.path(), config(), options())
        .await
        .unwrap();
    let expected = fill(&cluster).await;
    assert!(cluster.recover(3).await.unwrap());
    let file_before = std::fs::read(dir.path().join("cluster.toml")).unwrap();
    let epoch = cluster.epoch();

    // osd.1 is hdd: Ceph refuses to rebind a class without rm-device-class; osd.0 (ssd)
    // before it in the list is not changed either.
    let error = cluster.set_device_class("ssd", &[0, 1]).unwrap_err();
    assert!(
        matches!(&error, ClusterError::Rados(RadosError::Exists(m)) if m.contains("rm-device-class 1")),
        "{error}"
    );
    assert!(matches!(
        cluster.set_device_class("bad class", &[1]).unwrap_err(),
        ClusterError::Rados(RadosError::InvalidArgument(_))
    ));
    assert!(matches!(
        cluster.set_device_class("ssd", &[42]).unwrap_err(),
        ClusterError::Rados(RadosError::NotFound(_))
    ));
    // Taking the class of two of the three ssd hosts leaves "fast" (size 2) one host.
    let error = cluster.rm_device_class(&[3, 6]).unwrap_err();
    assert!(error.to_string().contains("\"fast\""), "{error}");
    assert_eq!(cluster.epoch(), epoch, "refusals change nothing");
    assert_eq!(
        std::fs::read(dir.path().join("cluster.toml")).unwrap(),
        file_before
    );
    // Setting the class an OSD has is no error (and changes no placement).
    cluster.set_device_class("ssd", &[0]).unwrap();

    // rm-device-class, then set-device-class: osd.1 becomes ssd, in the map and the file.
    cluster.rm_device_class(&[1]).unwrap();
    assert_eq!(class_in_file(dir.path(), 1), "");
    assert_eq!(cluster.config().osds[1].class, "");
    cluster.set_device_class("ssd", &[1]).unwrap();
    assert_eq!(class_in_file(dir.path(), 1), "ssd");
    check_reads(&cluster, &expected).await;
    assert!(cluster.recover(5).await.unwrap());
    check_all(&cluster, &expected).await;
    let ssd: Vec<i32> = vec![0, 1, 3, 6];
    let mut fast_on_1 = 0;
    for i in 0..OBJECTS {
        let placement = cluster.locate("fast", &format!("object-{i}")).unwrap();
        assert!(
            placement.up.iter().all(|osd| ssd.contains(osd)),
            "{placement:?}"
        );
        fast_on_1 += usize::from(placement.up.contains(&1));
    }
    assert!(fast_on_1 > 0, "the new ssd OSD takes some of the ssd pool");

    // Persisted: the reopened cluster places by the new class.
    cluster.shutdown().await.unwrap();
    let cluster = Cluster::open(dir.path(), options()).await.unwrap();
    assert_eq!(cluster.config().osds[1].class, "ssd");
    assert!(cluster.recover(5).await.unwrap());
    check_all(&cluster, &expected).await;
    cluster.shutdown().await.unwrap();
}
