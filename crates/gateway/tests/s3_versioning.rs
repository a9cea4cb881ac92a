//! Bucket versioning end to end: the real S3 server over a real embedded cluster, driven by
//! boto3 (tests/versioning.py). Between the script's two phases the data pool is counted, so
//! a removed version that left its data behind (or a live one that lost it) fails the test;
//! at the end every bucket was removed version by version and no data object may remain.

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
        device: "file:osd.0.img:1G".into(),
        size: None,
        class: "ssd".into(),
        weight: Some(1.0),
        min_alloc_size: 4096,
        emulation: None,
    });
    config
}

fn have_boto3() -> bool {
    std::process::Command::new("python3")
        .args(["-c", "import boto3"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs one phase of the script; panics with its output if it fails.
async fn run_phase(endpoint: &str, user: &gateway::User, phase: &str) -> String {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/versioning.py");
    let output = tokio::process::Command::new("python3")
        .arg(script)
        .arg(phase)
        .env("S3_ENDPOINT", endpoint)
        .env("MAIN_AK", &user.access_key)
        .env("MAIN_SK", &user.secret_key)
        .env("AWS_CONFIG_FILE", "/dev/null")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
        .output()
        .await
        .expect("python3");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(
        output.status.success(),
        "versioning phase {phase} failed:\n{stdout}\n{stderr}"
    );
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versioning_against_embedded_cluster() {
    if !have_boto3() {
        eprintln!("SKIPPED: python3 with boto3 is not available");
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let cluster = Cluster::create(dir.path(), one_osd_config(), ClusterOptions::default())
        .await
        .expect("cluster");
    let rados: Arc<dyn Rados> = Arc::new(cluster);
    let config = GatewayConfig::default();
    let server = serve(
        rados.clone(),
        "127.0.0.1:0".parse().unwrap(),
        config.clone(),
    )
    .await
    .expect("server");
    let user = server
        .gateway
        .users()
        .create("main", "Main User", "", None)
        .await
        .expect("user");
    let endpoint = format!("http://{}", server.local_addr);
    let data = rados.io_ctx(&config.data_pool).await.expect("data pool");

    // Five small versions written, two removed by version id, one delete marker (no data):
    // exactly three head objects remain.
    let stdout = run_phase(&endpoint, &user, "data").await;
    assert!(stdout.contains("LIVE 3"), "unexpected output {stdout}");
    let live = data.list_all().await.expect("list");
    assert_eq!(
        live.len(),
        3,
        "data objects after removing versions: {live:?}"
    );
    let removed_before = server.gateway.stats().pieces_removed;
    assert_eq!(removed_before, 2, "the two removed versions' data");

    run_phase(&endpoint, &user, "rest").await;
    let left = data.list_all().await.expect("list");
    assert!(
        left.is_empty(),
        "orphaned data objects: {:?}",
        &left[..left.len().min(10)]
    );
    let index = rados.io_ctx(&config.index_pool).await.expect("index pool");
    let left = index.list_all().await.expect("list");
    assert!(left.is_empty(), "leftover index objects: {left:?}");
    assert_eq!(server.gateway.stats().gc_enqueued, 0);
    server.shutdown().await;
}
