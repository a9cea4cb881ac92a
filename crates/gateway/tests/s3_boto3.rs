//! Starts the real S3 server over a real embedded cluster (files in a temp dir) and drives it
//! with boto3 (tests/s3/test_gateway.py); then checks that nothing was left in the data pool.

mod common;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn boto3_suite_against_embedded_cluster() {
    if !common::have_boto3() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let (rados, config, servers) = common::cluster_and_gateways(dir.path(), "2G", 1).await;
    let server = &servers[0];
    let main = common::user(server, "main").await;
    let alt = common::user(server, "alt").await;

    common::run_script(
        "../../tests/s3/test_gateway.py",
        &[],
        &[
            ("S3_ENDPOINT", format!("http://{}", server.local_addr)),
            ("MAIN_AK", main.access_key.clone()),
            ("MAIN_SK", main.secret_key.clone()),
            ("ALT_AK", alt.access_key.clone()),
            ("ALT_SK", alt.secret_key.clone()),
        ],
    )
    .await;

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
    for server in servers {
        server.shutdown().await;
    }
}
