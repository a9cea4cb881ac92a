//! Peering after a restart, OSDs whose metadata log was damaged, unfound objects.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use cluster::osd::VERSION_XATTR;
use cluster::{Cluster, ClusterOptions, UnfoundResolution};
use device::{FaultConfig, FaultKind, FaultRule, FaultTrigger, OpKind};
use rados::IoCtx;

fn quiet() -> ClusterOptions {
    ClusterOptions {
        background: false,
        ..ClusterOptions::default()
    }
}

/// Every object of `names` as each of `osds` holds it in pool "data": (version, data).
async fn copies(cluster: &Cluster, name: &str) -> BTreeMap<i32, Option<(u64, Vec<u8>)>> {
    let collection = cluster.collection_of("data", name).unwrap();
    let mut held = BTreeMap::new();
    for osd in cluster.locate("data", name).unwrap().acting {
        let image = cluster
            .osd(osd)
            .unwrap()
            .image(&collection, name)
            .await
            .unwrap();
        held.insert(osd, image.map(|image| (image.version(), image.data)));
    }
    held
}

/// Writes that reached only some replicas when the process stopped (put there directly, as
/// a crash leaves them: a newer version on one replica, a removal on another) are reconciled
/// when the cluster starts again: every replica holds the newest version, scrub finds
/// nothing, and reads give the same bytes whichever replica is primary. Before peering,
/// scrub reported every such object, and a read flipped to the newer version once the
/// primary changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_in_flight_at_a_stop_are_reconciled_before_serving() {
    let dir = tempfile::tempdir().unwrap();
    let config = common::small_config(3, 1, "file", 3);
    let cluster = Cluster::create(dir.path(), config, quiet()).await.unwrap();
    let pool = cluster.pool("data").unwrap();
    let names: Vec<String> = (0..24).map(|i| format!("object{i}")).collect();
    for (i, name) in names.iter().enumerate() {
        pool.write_full(name, &common::content(i as u64, 6000))
            .await
            .unwrap();
    }
    // A newer version on the second acting replica only (an overwrite the crash cut short),
    // and, for every third object, the removal on the third replica only.
    let mut newer = BTreeMap::new();
    for (i, name) in names.iter().enumerate() {
        let acting = cluster.locate("data", name).unwrap().acting;
        let collection = cluster.collection_of("data", name).unwrap();
        let second = cluster.osd(acting[1]).unwrap();
        let mut image = second.image(&collection, name).await.unwrap().unwrap();
        let version = image.version() + 1;
        image.data = common::content(1000 + i as u64, 5000);
        image
            .xattrs
            .insert(VERSION_XATTR.to_string(), version.to_le_bytes().to_vec());
        second
            .install(&collection, name, Some(&image))
            .await
            .unwrap();
        newer.insert(name.clone(), (version, image.data.clone()));
        if i % 3 == 0 {
            cluster
                .osd(acting[2])
                .unwrap()
                .install(&collection, name, None)
                .await
                .unwrap();
        }
    }
    drop(pool);
    cluster.shutdown().await.unwrap();

    let cluster = Cluster::open(dir.path(), quiet()).await.unwrap();
    let pool = cluster.pool("data").unwrap();
    // A client's first read of a PG peers it: the newest version, whoever is primary.
    for name in &names {
        let read = pool.read_full(name).await.unwrap();
        assert_eq!(read, newer[name].1, "{name} right after the start");
    }
    assert!(cluster.recover(10).await.unwrap());
    for name in &names {
        for (osd, copy) in copies(&cluster, name).await {
            assert_eq!(
                copy.as_ref(),
                Some(&newer[name]),
                "{name} on osd.{osd} after peering"
            );
        }
    }
    let report = cluster.scrub(Some("data"), false).await.unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(cluster.scrub_errors(), 0);
    // A change of primary changes nothing a read sees.
    let victim = cluster.locate("data", &names[0]).unwrap().acting[0];
    cluster.mark_down(victim).unwrap();
    for name in &names {
        assert_eq!(pool.read_full(name).await.unwrap(), newer[name].1, "{name}");
    }
    drop(pool);
    cluster.shutdown().await.unwrap();
}

/// The offsets in `osd.{id}.img` (64 MiB, its log in the last 4 MiB) of its log's records.
fn log_records(dir: &Path, id: i32) -> (Vec<u8>, u64, Vec<usize>) {
    let file = std::fs::read(dir.join(format!("osd.{id}.img"))).unwrap();
    let start = file.len() - (4 << 20);
    let log = file[start..].to_vec();
    let records = (0..log.len())
        .step_by(4096)
        .filter(|&at| log[at..at + 4] == *b"SWAL")
        .collect();
    (log, start as u64, records)
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// A cluster whose osd.0 stopped with acknowledged writes only its log holds (its metadata
/// database as before them, as after a crash that lost the database's unsynced part), then
/// 4 bytes zeroed in its log record number `damaged`. Returns the objects and contents.
async fn osd0_log_damaged(dir: &Path, damaged: usize) -> Vec<(String, Vec<u8>)> {
    let config = common::small_config(3, 1, "file", 3);
    let cluster = Cluster::create(dir, config, quiet()).await.unwrap();
    cluster.shutdown().await.unwrap();
    let meta = dir.join("osd.0.meta");
    let before = dir.join("osd.0.meta-before");
    copy_tree(&meta, &before);
    let cluster = Cluster::open(dir, quiet()).await.unwrap();
    let pool = cluster.pool("data").unwrap();
    let mut written = Vec::new();
    for i in 0..30u64 {
        let name = format!("object{i}");
        let data = common::content(i, 3000 + i as usize * 100);
        pool.write_full(&name, &data).await.unwrap();
        written.push((name, data));
    }
    drop(pool);
    drop(cluster); // no shutdown: the logs keep their records
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    std::fs::remove_dir_all(&meta).unwrap();
    copy_tree(&before, &meta);
    let (mut log, start, records) = log_records(dir, 0);
    assert!(records.len() > damaged + 2, "{records:?}");
    let at = records[damaged] + 40;
    log[at..at + 4].fill(0);
    let image = dir.join("osd.0.img");
    let mut file = std::fs::read(&image).unwrap();
    file[start as usize..].copy_from_slice(&log);
    std::fs::write(&image, file).unwrap();
    written
}

async fn damaged_log_is_refilled_from_peers(damaged: usize) {
    let dir = tempfile::tempdir().unwrap();
    let written = osd0_log_damaged(dir.path(), damaged).await;
    let cluster = Cluster::open(dir.path(), quiet())
        .await
        .expect("a damaged log marks the OSD for recovery, it does not stop the cluster");
    let pool = cluster.pool("data").unwrap();
    // Before any recovery, every acknowledged object reads back right.
    for (name, data) in &written {
        assert_eq!(&pool.read_full(name).await.unwrap(), data, "{name}");
    }
    assert!(cluster.recover(10).await.unwrap(), "recovery finishes");
    // osd.0 serves again, refilled: it holds every object, like its peers.
    for (name, data) in &written {
        let held = copies(&cluster, name).await;
        assert!(held.contains_key(&0), "osd.0 is acting again for {name}");
        for (osd, copy) in held {
            assert_eq!(
                copy.map(|(_, d)| d).as_ref(),
                Some(data),
                "{name} on osd.{osd}"
            );
        }
    }
    let report = cluster.scrub(Some("data"), false).await.unwrap();
    assert!(report.is_clean(), "{report:?}");
    drop(pool);
    cluster.shutdown().await.unwrap();
    // The damage was dealt with once: the next start is an ordinary one.
    let cluster = Cluster::open(dir.path(), quiet()).await.unwrap();
    assert!(cluster.state().pg_temp.is_empty());
    cluster.shutdown().await.unwrap();
}

/// Zeroing 4 bytes of an OSD's first log record made it start without that record's and
/// every later record's writes, serving 404 for acknowledged objects whose primary it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_first_log_record_refills_the_osd_from_its_peers() {
    damaged_log_is_refilled_from_peers(0).await;
}

/// A damaged record in the middle of the log refused the start, advising a remedy that did
/// not work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_middle_log_record_refills_the_osd_from_its_peers() {
    damaged_log_is_refilled_from_peers(2).await;
}

use common::Faulty;

/// Four hosts of one OSD on memory devices behind [`FaultyDevice`]s; pool "data" of 3.
async fn faulty_cluster(dir: &Path) -> (Cluster, Faulty) {
    let (options, devices) = common::faulty_options();
    let cluster = Cluster::create(dir, common::small_config(4, 1, "mem", 3), options)
        .await
        .unwrap();
    (cluster, devices)
}

/// Writes `data` to `name` with every block it writes on `osds` bit-flipped.
async fn write_rotten(pool: &cluster::PoolHandle, devices: &Faulty, osds: &[i32], name: &str) {
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
    pool.write_full(name, &common::content(99, 20_000))
        .await
        .unwrap();
    for osd in osds {
        devices.lock().unwrap()[osd].set_config(FaultConfig::default());
    }
}

/// Objects of the PG of `name` (other than it), written after it.
async fn neighbours(cluster: &Cluster, pool: &cluster::PoolHandle, name: &str) -> Vec<String> {
    let pg = cluster.collection_of("data", name).unwrap();
    let mut found = Vec::new();
    for i in 0..400 {
        let other = format!("n{i}");
        if cluster.collection_of("data", &other).unwrap() == pg {
            pool.write_full(&other, &common::content(i, 4096))
                .await
                .unwrap();
            found.push(other);
        }
        if found.len() == 4 {
            break;
        }
    }
    found
}

/// An object no replica can read no longer stalls its PG's recovery: the PG's other objects
/// reach the new member, the object is reported unfound (status, `pg_list`), and
/// `mark_unfound_lost delete` resolves it, after which the PG finishes recovering. Before,
/// recovery of the PG failed on it at every pass and copied nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_lost_everywhere_is_unfound_and_the_rest_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, devices) = faulty_cluster(dir.path()).await;
    let pool = cluster.pool("data").unwrap();
    let acting = cluster.locate("data", "lost").unwrap().acting;
    write_rotten(&pool, &devices, &acting, "lost").await;
    let others = neighbours(&cluster, &pool, "lost").await;
    assert!(!others.is_empty());
    cluster.mark_out(acting[2]).unwrap();
    let place = cluster.locate("data", "lost").unwrap();
    let newcomer = *place
        .up
        .iter()
        .find(|osd| !acting.contains(osd))
        .expect("a new member");
    assert!(
        !cluster.recover(3).await.unwrap(),
        "not clean while unfound"
    );
    let collection = cluster.collection_of("data", "lost").unwrap();
    for name in &others {
        assert!(
            cluster
                .osd(newcomer)
                .unwrap()
                .store()
                .exists(&collection, name)
                .await
                .unwrap(),
            "{name} reached osd.{newcomer} despite the unfound object"
        );
    }
    let unfound = cluster.unfound_objects();
    assert_eq!(unfound.len(), 1, "{unfound:?}");
    assert_eq!(
        (unfound[0].pg.as_str(), unfound[0].object.as_str()),
        (collection.as_str(), "lost")
    );
    let pgs = cluster.pg_list();
    let info = pgs.iter().find(|info| info.pg == collection).unwrap();
    assert_eq!(info.state, "active+recovery_unfound");
    assert_eq!(
        cluster
            .mark_unfound_lost(&collection, UnfoundResolution::Delete)
            .await
            .unwrap(),
        1
    );
    assert!(cluster.unfound_objects().is_empty());
    assert!(cluster.recover(5).await.unwrap(), "clean once resolved");
    assert!(matches!(
        pool.read_full("lost").await,
        Err(rados::RadosError::NotFound(_))
    ));
    for name in &others {
        assert_eq!(copies(&cluster, name).await.len(), 3);
    }
    assert!(cluster.scrub(Some("data"), false).await.unwrap().is_clean());
    drop(pool);
    cluster.shutdown().await.unwrap();
}

/// `revert` rolls an unfound object back to the older copy an OSD that missed the newer
/// write still holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revert_rolls_an_unfound_object_back_to_an_older_copy() {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, devices) = faulty_cluster(dir.path()).await;
    let pool = cluster.pool("data").unwrap();
    let old = common::content(5, 12_000);
    pool.write_full("doc", &old).await.unwrap();
    let acting = cluster.locate("data", "doc").unwrap().acting;
    cluster.mark_down(acting[2]).unwrap();
    let now = cluster.locate("data", "doc").unwrap().acting;
    write_rotten(&pool, &devices, &now, "doc").await;
    cluster.mark_up(acting[2]).unwrap();
    assert!(!cluster.recover(3).await.unwrap());
    let collection = cluster.collection_of("data", "doc").unwrap();
    assert_eq!(cluster.unfound_objects().len(), 1);
    cluster
        .mark_unfound_lost(&collection, UnfoundResolution::Revert)
        .await
        .unwrap();
    assert!(cluster.recover(5).await.unwrap());
    assert_eq!(pool.read_full("doc").await.unwrap(), old);
    assert!(cluster.scrub(Some("data"), false).await.unwrap().is_clean());
    drop(pool);
    cluster.shutdown().await.unwrap();
}
