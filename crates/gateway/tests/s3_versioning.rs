//! Bucket versioning end to end: the real S3 server over a real embedded cluster, driven by
//! boto3 (tests/versioning.py). Between the script's two phases the data pool is counted, so
//! a removed version that left its data behind (or a live one that lost it) fails the test;
//! at the end every bucket was removed version by version and no data object may remain.

mod common;

/// Runs one phase of the script; panics with its output if it fails.
async fn run_phase(endpoint: &str, user: &gateway::User, phase: &str) -> String {
    let mut env = vec![("S3_ENDPOINT", endpoint.to_string())];
    env.extend(common::main_keys(user));
    common::run_script("tests/versioning.py", &[phase], &env).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versioning_against_embedded_cluster() {
    if !common::have_boto3() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let (rados, config, mut servers) = common::cluster_and_gateways(dir.path(), "1G", 1).await;
    let server = servers.remove(0);
    let user = common::user(&server, "main").await;
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
