//! Creating a cluster is crash-safe: an interrupted create is refused by `open` with a clear
//! error and completed by `create` / `open_or_create`; foreign leftovers are never overwritten.

mod common;

use std::sync::Arc;

use cluster::{Cluster, ClusterError, ClusterOptions};
use device::Device;
use rados::IoCtx;

fn quiet() -> ClusterOptions {
    ClusterOptions {
        background: false,
        ..ClusterOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupted_create_is_refused_by_open_then_completed() {
    let dir = tempfile::tempdir().unwrap();
    let config = common::small_config(3, 1, "file", 3);
    // A crash while the second OSD is being created: the wrapper aborts the create there,
    // after osd.0's store exists and before the others do.
    let crashing = ClusterOptions {
        device_wrapper: Some(Arc::new(|id, device: Arc<dyn Device>| {
            assert!(id != 1, "simulated crash while creating osd.1");
            device
        })),
        ..quiet()
    };
    let path = dir.path().to_path_buf();
    let attempt = config.clone();
    let crashed =
        tokio::spawn(async move { Cluster::create(&path, attempt, crashing).await.map(drop) })
            .await;
    assert!(crashed.is_err(), "the create must have been interrupted");
    assert!(dir.path().join("osd.0.meta").exists());

    let refused = Cluster::open(dir.path(), quiet()).await;
    match refused {
        Err(ClusterError::IncompleteCreate { .. }) => {}
        Err(other) => panic!("open of a half-created cluster: unclear error {other}"),
        Ok(_) => panic!("open of a half-created cluster succeeded"),
    }

    let cluster = Cluster::open_or_create(dir.path(), config, quiet())
        .await
        .unwrap();
    let pool = cluster.pool("data").unwrap();
    pool.write_full("after", b"completed").await.unwrap();
    drop(pool);
    cluster.shutdown().await.unwrap();
    assert!(!dir.path().join("creating").exists());

    let cluster = Cluster::open(dir.path(), quiet()).await.unwrap();
    let pool = cluster.pool("data").unwrap();
    assert_eq!(pool.read_full("after").await.unwrap(), b"completed");
    drop(pool);
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_metadata_without_a_cluster_is_not_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("osd.0.meta"), b"someone's data").unwrap();
    let config = common::small_config(1, 1, "file", 1);
    let refused = Cluster::create(dir.path(), config, quiet()).await;
    let error = refused
        .err()
        .expect("create over foreign metadata must fail");
    assert!(error.to_string().contains("refusing"), "{error}");
    assert_eq!(
        std::fs::read(dir.path().join("osd.0.meta")).unwrap(),
        b"someone's data"
    );
    let missing = Cluster::open(dir.path(), quiet()).await.err().unwrap();
    assert!(
        missing.to_string().contains("holds no cluster"),
        "{missing}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_osd_whose_device_file_is_gone_is_refused_not_recreated_empty() {
    let dir = tempfile::tempdir().unwrap();
    let config = common::small_config(3, 1, "file", 3);
    let cluster = Cluster::create(dir.path(), config, quiet()).await.unwrap();
    let pool = cluster.pool("data").unwrap();
    pool.write_full("kept", b"on three replicas").await.unwrap();
    drop(pool);
    cluster.shutdown().await.unwrap();
    let image = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.extension().is_some_and(|e| e == "img"))
        .expect("an OSD image file");
    std::fs::remove_file(&image).unwrap();
    match Cluster::open(dir.path(), quiet()).await {
        Err(error) => assert!(error.to_string().contains("is missing"), "{error}"),
        Ok(_) => panic!("opened with {} gone", image.display()),
    }
    assert!(!image.exists(), "no empty file was made in its place");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_file_with_an_impossible_pool_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::create(dir.path(), common::small_config(3, 1, "file", 3), quiet())
        .await
        .unwrap();
    cluster.shutdown().await.unwrap();
    let path = dir.path().join("state.json");
    let good = std::fs::read_to_string(&path).unwrap();
    for (field, value, expected) in [
        ("size", 0, "size 0 must be"),
        ("pg_num", 0, "pg_num 0 must be"),
        ("min_size", 7, "min_size 7 must be"),
        ("id", 9, "its id field says 9"),
    ] {
        let mut state: serde_json::Value = serde_json::from_str(&good).unwrap();
        let pools = state["pools"].as_object_mut().unwrap();
        let pool = pools.values_mut().next().unwrap();
        pool[field] = serde_json::json!(value);
        std::fs::write(&path, serde_json::to_vec(&state).unwrap()).unwrap();
        match Cluster::open(dir.path(), quiet()).await {
            Err(error) => assert!(error.to_string().contains(expected), "{error}"),
            Ok(_) => panic!("opened with pool {field} = {value}"),
        }
    }
    std::fs::write(&path, good).unwrap();
    Cluster::open(dir.path(), quiet())
        .await
        .unwrap()
        .shutdown()
        .await
        .unwrap();
}

/// CRUSH weight in 16.16 of 64 MiB in TiB (Ceph's convention): 64 MiB / 1 TiB x 65536.
const WEIGHT_64M: u32 = 4;

/// An OSD whose spec names no size weighs what its device holds. Before, the size written in
/// the config decided: an existing 64 MiB file named without a size weighed 1 TiB (weight
/// 1.0), and took nearly every PG.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_osd_without_a_configured_size_weighs_its_device() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = common::small_config(2, 1, "file", 2);
    for osd in &mut config.osds {
        osd.weight = None;
    }
    std::fs::File::create(dir.path().join("osd.0.img"))
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    config.osds[0].device = "file:osd.0.img".to_string();
    let cluster = Cluster::create(dir.path(), config, quiet()).await.unwrap();
    let map = cluster.osd_map();
    assert_eq!(map.crush_item_weight(0), Some(WEIGHT_64M));
    assert_eq!(map.crush_item_weight(1), Some(WEIGHT_64M));
    cluster.shutdown().await.unwrap();
    let cluster = Cluster::open(dir.path(), quiet()).await.unwrap();
    assert_eq!(cluster.osd_map().crush_item_weight(0), Some(WEIGHT_64M));
    cluster.shutdown().await.unwrap();
}

/// The store keeps its metadata log at the end of its device, so an existing OSD's device
/// cannot be resized: a config asking for another size is refused at start, naming the OSD,
/// and nothing changes. Before, the file kept its size while the weight followed the config,
/// and PGs moved for capacity that was not there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_size_of_an_existing_osd_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = common::small_config(2, 1, "file", 2);
    for osd in &mut config.osds {
        osd.weight = None;
        osd.device = format!("file:osd.{}.img", osd.id);
        osd.size = Some("64M".to_string());
    }
    let cluster = Cluster::create(dir.path(), config, quiet()).await.unwrap();
    let epoch = cluster.epoch();
    cluster.shutdown().await.unwrap();
    let path = dir.path().join("cluster.toml");
    let saved = std::fs::read_to_string(&path).unwrap();
    let mut edited = cluster::ClusterConfig::from_toml(&saved).unwrap();
    edited.osds[1].size = Some("128M".to_string());
    std::fs::write(&path, edited.to_toml()).unwrap();
    match Cluster::open(dir.path(), quiet()).await {
        Err(error) => {
            let error = error.to_string();
            assert!(
                error.contains("osd.1") && error.contains("cannot be changed"),
                "{error}"
            );
        }
        Ok(_) => panic!("opened with osd.1's size changed"),
    }
    let image = dir.path().join("osd.1.img");
    assert_eq!(std::fs::metadata(&image).unwrap().len(), 64 << 20);
    std::fs::write(&path, saved).unwrap();
    let cluster = Cluster::open(dir.path(), quiet()).await.unwrap();
    assert_eq!(cluster.epoch(), epoch, "nothing moved");
    assert_eq!(cluster.osd_map().crush_item_weight(1), Some(WEIGHT_64M));
    cluster.shutdown().await.unwrap();
}

/// A store keeps the allocation unit it was created with; a `min_alloc_size` edited in
/// `cluster.toml` afterwards is reported, naming the OSD and the recorded value, where it
/// used to be ignored without a word.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_min_alloc_size_is_reported_not_silently_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::create(dir.path(), common::small_config(2, 1, "file", 2), quiet())
        .await
        .unwrap();
    assert_eq!(cluster.osd(1).unwrap().config_warning(), None);
    cluster.shutdown().await.unwrap();
    let path = dir.path().join("cluster.toml");
    let mut edited = cluster::ClusterConfig::load(&path).unwrap();
    edited.osds[1].min_alloc_size = 65536;
    std::fs::write(&path, edited.to_toml()).unwrap();
    let cluster = Cluster::open(dir.path(), quiet()).await.unwrap();
    assert_eq!(cluster.osd(0).unwrap().config_warning(), None);
    let warning = cluster.osd(1).unwrap().config_warning().expect("a warning");
    assert!(
        warning.contains("osd.1") && warning.contains("65536") && warning.contains("4096"),
        "{warning}"
    );
    assert_eq!(
        cluster
            .osd(1)
            .unwrap()
            .store()
            .statfs()
            .min_alloc_size_bytes,
        4096
    );
    cluster.shutdown().await.unwrap();
}
