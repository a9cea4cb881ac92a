//! Starts the real S3 server over a real embedded cluster (files in a temp dir) and drives it
//! with boto3 (tests/s3/test_gateway.py); then checks that nothing was left in the data pool.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;

use cluster::{Cluster, ClusterConfig, ClusterOptions, HostConfig, OsdConfig};
use gateway::{serve, GatewayConfig};
use rados::Rados;

fn one_osd_config() -> ClusterConfig {
    let mut config = ClusterConfig::empty();
    config.scrub_interval_s = 0;
    // The protocol is under test here, not fsync: the cluster's own tests cover durability.
    config.durable = false;
    config.hosts.push(HostConfig {
        name: "host0".into(),
    });
    config.osds.push(OsdConfig {
        id: 0,
        host: "host0".into(),
        device: "file:osd.0.img:2G".into(),
        size: None,
        class: "ssd".into(),
        weight: Some(1.0),
        min_alloc_size: 4096,
        emulation: None,
    });
    config
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/s3/test_gateway.py")
}

fn have_boto3() -> bool {
    std::process::Command::new("python3")
        .args(["-c", "import boto3"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn boto3_suite_against_embedded_cluster() {
    if !have_boto3() {
        // CI installs boto3 in scripts/test.sh; a developer machine without it skips loudly.
        eprintln!("SKIPPED: python3 with boto3 is not available");
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let cluster = Cluster::create(dir.path(), one_osd_config(), ClusterOptions::default())
        .await
        .expect("cluster");
    let cluster = Arc::new(cluster);
    let rados: Arc<dyn Rados> = cluster.clone();
    let config = GatewayConfig::default();
    let server = serve(
        rados.clone(),
        "127.0.0.1:0".parse().unwrap(),
        config.clone(),
    )
    .await
    .expect("server");
    let users = server.gateway.users().clone();
    let main = users
        .create("main", "Main User", "", None)
        .await
        .expect("user");
    let alt = users
        .create("alt", "Alt User", "", None)
        .await
        .expect("user");

    let output = tokio::process::Command::new("python3")
        .arg(script())
        .env("S3_ENDPOINT", format!("http://{}", server.local_addr))
        .env("MAIN_AK", &main.access_key)
        .env("MAIN_SK", &main.secret_key)
        .env("ALT_AK", &alt.access_key)
        .env("ALT_SK", &alt.secret_key)
        .env("AWS_CONFIG_FILE", "/dev/null")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
        .output()
        .await
        .expect("python3");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(
        output.status.success(),
        "boto3 suite failed:\n{stdout}\n{stderr}"
    );

    // Every bucket was removed: no data object, index shard or upload record may remain.
    let data = rados.io_ctx(&config.data_pool).await.expect("data pool");
    let left = data.list_all().await.expect("list");
    assert!(
        left.is_empty(),
        "orphaned data objects: {:?}",
        &left[..left.len().min(10)]
    );
    let index = rados.io_ctx(&config.index_pool).await.expect("index pool");
    let left = index.list_all().await.expect("list");
    assert!(
        left.is_empty(),
        "leftover index objects: {:?}",
        &left[..left.len().min(10)]
    );
    let stats = server.gateway.stats();
    assert!(stats.pieces_removed > 0);
    assert_eq!(stats.gc_enqueued, 0);
    server.shutdown().await;
}
