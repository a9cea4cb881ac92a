//! The gateway's data pool on an erasure-coded 4+2 pool (its metadata and index pools
//! replicated 3x) over six single-OSD hosts: boto3 PUTs, GETs, ranged GETs, multipart uploads
//! and DELETEs of 4 KiB to 8 MiB objects (tests/s3/erasure_data.py), with every OSD up and
//! then with one down (degraded reads decode from the other shards, writes go on with k+1).
//! And packing, which needs omap in the data pool, is refused at start with a clear error.

mod common;

use std::sync::Arc;

use cluster::ec::ErasureProfile;
use cluster::{Cluster, ClusterConfig, ClusterOptions, HostConfig, OsdConfig};
use gateway::{serve, GatewayConfig, PackingConfig};
use rados::Rados;

/// Six hosts of one OSD each (sparse files of `device_size`).
fn six_hosts(device_size: &str) -> ClusterConfig {
    let mut config = ClusterConfig::empty();
    config.scrub_interval_s = 0;
    config.durable = false;
    for id in 0..6 {
        let host = format!("host{id}");
        config.hosts.push(HostConfig { name: host.clone() });
        config.osds.push(OsdConfig {
            id,
            host,
            device: format!("file:osd.{id}.img:{device_size}"),
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

/// A six-OSD cluster in `dir` whose gateway data pool (named as `config` says) is 4+2.
async fn cluster_with_erasure_data(dir: &std::path::Path, config: &GatewayConfig) -> Arc<Cluster> {
    let cluster = Cluster::create(dir, six_hosts("512M"), ClusterOptions::default())
        .await
        .expect("cluster");
    cluster
        .create_erasure_pool(&config.data_pool, &ErasureProfile::new(4, 2), 16)
        .expect("erasure-coded data pool");
    Arc::new(cluster)
}

fn gateway_config() -> GatewayConfig {
    GatewayConfig {
        gc_min_wait_s: 0,
        pool_size: 3,
        ..GatewayConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_on_an_erasure_coded_data_pool_with_one_osd_down() {
    if !common::have_boto3() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let config = gateway_config();
    let cluster = cluster_with_erasure_data(dir.path(), &config).await;
    let rados: Arc<dyn Rados> = cluster.clone();
    let server = serve(
        rados.clone(),
        "127.0.0.1:0".parse().unwrap(),
        config.clone(),
    )
    .await
    .expect("gateway");
    let user = common::user(&server, "main").await;
    let env = [
        ("S3_ENDPOINT", format!("http://{}", server.local_addr)),
        ("AK", user.access_key.clone()),
        ("SK", user.secret_key.clone()),
    ];
    let script = "../../tests/s3/erasure_data.py";
    let written = common::run_script(script, &["write"], &env).await;
    assert!(written.contains("WRITTEN 7"), "{written}");
    let profile = cluster.erasure_profile(&config.data_pool).expect("4+2");
    assert_eq!((profile.k, profile.m), (4, 2));
    let data = rados.io_ctx(&config.data_pool).await.expect("data pool");
    assert!(
        !data.list_all().await.expect("list").is_empty(),
        "the objects' data is not in the erasure-coded pool"
    );

    cluster.mark_down(3).expect("mark osd.3 down");
    let degraded = common::run_script(script, &["degraded"], &env).await;
    assert!(degraded.contains("DEGRADED OK 7 7"), "{degraded}");

    cluster.mark_up(3).expect("mark osd.3 up");
    cluster.recover_erasure().await.expect("recovery");
    let clean = common::run_script(script, &["clean"], &env).await;
    assert!(clean.contains("CLEAN 11"), "{clean}");
    let left = data.list_all().await.expect("list");
    assert!(
        left.is_empty(),
        "data objects left behind: {:?}",
        &left[..left.len().min(10)]
    );
    assert_eq!(server.gateway.stats().gc_enqueued, 0);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn packing_is_refused_on_an_erasure_coded_data_pool() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = GatewayConfig {
        packing: PackingConfig {
            enabled: true,
            ..PackingConfig::default()
        },
        ..gateway_config()
    };
    let cluster = cluster_with_erasure_data(dir.path(), &config).await;
    let rados: Arc<dyn Rados> = cluster.clone();
    let error = match serve(
        rados.clone(),
        "127.0.0.1:0".parse().unwrap(),
        config.clone(),
    )
    .await
    {
        Ok(server) => {
            server.shutdown().await;
            panic!("a packing gateway started on an erasure-coded data pool");
        }
        Err(error) => error.to_string(),
    };
    assert!(
        error.contains("strata.rgw.data") && error.contains("packing"),
        "{error}"
    );
    // Without packing the same pools serve.
    let config = GatewayConfig {
        packing: PackingConfig::default(),
        ..config
    };
    let server = serve(rados, "127.0.0.1:0".parse().unwrap(), config)
        .await
        .expect("gateway without packing");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erasure_coded_index_pool_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = GatewayConfig {
        index_pool: "erasure-index".into(),
        ..gateway_config()
    };
    let cluster = Cluster::create(dir.path(), six_hosts("128M"), ClusterOptions::default())
        .await
        .expect("cluster");
    cluster
        .create_erasure_pool("erasure-index", &ErasureProfile::new(4, 2), 8)
        .expect("pool");
    let rados: Arc<dyn Rados> = Arc::new(cluster);
    let error = match serve(rados, "127.0.0.1:0".parse().unwrap(), config).await {
        Ok(server) => {
            server.shutdown().await;
            panic!("a gateway started with an erasure-coded index pool");
        }
        Err(error) => error.to_string(),
    };
    assert!(
        error.contains("index pool") && error.contains("erasure-index"),
        "{error}"
    );
}
