//! What is unfound and what is lost (issue 43). Unfound means a replica's metadata names an
//! object no replica can provide; an object gone from every replica's metadata is simply
//! gone (no PG log remembers it), so it is never reported unfound, nor does it stall
//! anything. And an object any replica still holds readable is never reported lost or
//! unfound: reads serve it and repair brings it back to every replica.

mod common;

use cluster::{Cluster, ClusterOptions};
use device::{FaultConfig, FaultKind, FaultRule, FaultTrigger, OpKind};
use rados::{IoCtx, RadosError};

use common::{faulty_options, Faulty};

/// Writes `data` as `name` with every block written on `osds` bit-flipped (rotten copies).
async fn write_rotten(
    pool: &cluster::PoolHandle,
    devices: &Faulty,
    osds: &[i32],
    name: &str,
    data: &[u8],
) {
    let flip = FaultConfig {
        rules: vec![FaultRule {
            op: Some(OpKind::Write),
            trigger: FaultTrigger::Always,
            fault: FaultKind::BitFlip,
            times: None,
        }],
        ..FaultConfig::default()
    };
    for osd in osds {
        devices.lock().unwrap()[osd].set_config(flip.clone());
    }
    pool.write_full(name, data).await.unwrap();
    for osd in osds {
        devices.lock().unwrap()[osd].set_config(FaultConfig::default());
    }
}

/// Removes `name` from the metadata of the given acting replicas, as a crash or a lost log
/// would leave them.
async fn remove_from(cluster: &Cluster, name: &str, osds: &[i32]) {
    let collection = cluster.collection_of("data", name).unwrap();
    for osd in osds {
        cluster
            .osd(*osd)
            .unwrap()
            .install(&collection, name, None)
            .await
            .unwrap();
    }
}

fn assert_nothing_unfound(cluster: &Cluster, when: &str) {
    assert!(
        cluster.unfound_objects().is_empty(),
        "{when}: unfound {:?}",
        cluster
            .unfound_objects()
            .iter()
            .map(|o| o.object.clone())
            .collect::<Vec<_>>()
    );
    for pg in cluster.pg_list() {
        assert!(
            !pg.state.contains("unfound") && pg.unfound.is_empty(),
            "{when}: {} {}",
            pg.pg,
            pg.state
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gone_everywhere_is_not_unfound_and_one_good_copy_is_never_lost() {
    let dir = tempfile::tempdir().unwrap();
    let (options, devices) = faulty_options();
    let config = common::small_config(3, 1, "mem", 3);
    let cluster = Cluster::create(dir.path(), config, options).await.unwrap();
    let pool = cluster.pool("data").unwrap();
    let gone = common::content(1, 20_000);
    let single = common::content(2, 20_000);
    let readable = common::content(3, 20_000);
    pool.write_full("gone", &gone).await.unwrap();
    pool.write_full("one-copy", &single).await.unwrap();
    let acting = cluster.locate("data", "one-readable").unwrap().acting;
    // Two rotten copies (the primary's among them) and one good one.
    write_rotten(&pool, &devices, &acting[..2], "one-readable", &readable).await;
    remove_from(
        &cluster,
        "gone",
        &cluster.locate("data", "gone").unwrap().acting,
    )
    .await;
    // Only the last acting replica keeps "one-copy": the primary lacks it.
    let single_acting = cluster.locate("data", "one-copy").unwrap().acting;
    remove_from(&cluster, "one-copy", &single_acting[..2]).await;

    let report = cluster.scrub(Some("data"), false).await.unwrap();
    assert!(report.lost.is_empty(), "scrub reported lost: {report:?}");
    assert!(
        report.inconsistencies.iter().all(|i| i.object != "gone"),
        "an object no replica names was reported: {report:?}"
    );
    let kinds = |object: &str| {
        let mut kinds: Vec<&str> = report
            .inconsistencies
            .iter()
            .filter(|i| i.object == object)
            .map(|i| i.kind)
            .collect();
        kinds.sort_unstable();
        kinds
    };
    assert_eq!(kinds("one-copy"), ["missing", "missing"], "{report:?}");
    assert_eq!(
        kinds("one-readable"),
        ["unreadable", "unreadable"],
        "{report:?}"
    );
    assert_nothing_unfound(&cluster, "after a scrub");

    // Reads: the gone object is not found; the others are served from their good copy,
    // also the one the primary lacks (the scrub that found it took the PG out of the known
    // clean ones; before, the primary answered NotFound until a repair).
    assert!(matches!(
        pool.read_full("gone").await,
        Err(RadosError::NotFound(_))
    ));
    assert_eq!(pool.read_full("one-copy").await.unwrap(), single);
    assert_eq!(pool.read_full("one-readable").await.unwrap(), readable);
    assert!(cluster.recover(5).await.unwrap());
    assert_nothing_unfound(&cluster, "after recovery");

    // Repair brings the single copies back to every replica; nothing is lost.
    let repaired = cluster.scrub(Some("data"), true).await.unwrap();
    assert!(repaired.lost.is_empty(), "{repaired:?}");
    let clean = cluster.scrub(Some("data"), false).await.unwrap();
    assert!(clean.is_clean(), "{clean:?}");
    for (name, data) in [("one-copy", &single), ("one-readable", &readable)] {
        let collection = cluster.collection_of("data", name).unwrap();
        for osd in cluster.locate("data", name).unwrap().acting {
            let image = cluster
                .osd(osd)
                .unwrap()
                .image(&collection, name)
                .await
                .unwrap()
                .unwrap_or_else(|| panic!("{name} missing on osd.{osd} after repair"));
            assert_eq!(&image.data, data, "{name} on osd.{osd}");
        }
    }
    assert_nothing_unfound(&cluster, "after repair");
    drop(pool);
    cluster.shutdown().await.unwrap();
}

/// The same across a restart: peering finds the object no replica names nowhere (it is not
/// unfound) and brings the single copy back to every replica before the PG serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_peering_neither_invents_nor_loses() {
    let dir = tempfile::tempdir().unwrap();
    let options = ClusterOptions {
        background: false,
        ..ClusterOptions::default()
    };
    let config = common::small_config(3, 1, "file", 3);
    let cluster = Cluster::create(dir.path(), config, options.clone())
        .await
        .unwrap();
    let pool = cluster.pool("data").unwrap();
    let single = common::content(2, 20_000);
    pool.write_full("gone", &common::content(1, 20_000))
        .await
        .unwrap();
    pool.write_full("one-copy", &single).await.unwrap();
    remove_from(
        &cluster,
        "gone",
        &cluster.locate("data", "gone").unwrap().acting,
    )
    .await;
    let acting = cluster.locate("data", "one-copy").unwrap().acting;
    remove_from(&cluster, "one-copy", &acting[..2]).await;
    drop(pool);
    cluster.shutdown().await.unwrap();

    let cluster = Cluster::open(dir.path(), options).await.unwrap();
    let pool = cluster.pool("data").unwrap();
    assert_eq!(pool.read_full("one-copy").await.unwrap(), single);
    assert!(matches!(
        pool.read_full("gone").await,
        Err(RadosError::NotFound(_))
    ));
    assert!(cluster.recover(5).await.unwrap());
    assert_nothing_unfound(&cluster, "after the restart");
    let report = cluster.scrub(Some("data"), false).await.unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert!(cluster
        .pg_list()
        .iter()
        .all(|pg| pg.state == "active+clean"));
    drop(pool);
    cluster.shutdown().await.unwrap();
}
