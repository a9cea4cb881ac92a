//! Data an overwrite or delete replaced stays until the GC's wait is over, so a GET that
//! started on the old version reads all of it (tests/s3/deferred_gc.py); then the GC pass
//! removes it.

mod common;

use gateway::GatewayConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_finishes_on_data_an_overwrite_replaced() {
    if !common::have_boto3() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let config = GatewayConfig {
        gc_min_wait_s: 2,
        gc_period_s: 3600, // passes only when this test asks
        ..GatewayConfig::default()
    };
    let (rados, config, mut servers) =
        common::cluster_and_gateways_with(dir.path(), "1G", 1, config).await;
    let server = servers.remove(0);
    let user = common::user(&server, "main").await;
    let stdout = common::run_script(
        "../../tests/s3/deferred_gc.py",
        &[],
        &[
            ("S3_ENDPOINT", format!("http://{}", server.local_addr)),
            ("AK", user.access_key.clone()),
            ("SK", user.secret_key.clone()),
        ],
    )
    .await;
    assert!(stdout.contains("READ WHOLE"), "{stdout}");

    let data = rados.io_ctx(&config.data_pool).await.expect("data pool");
    let stats = server.gateway.stats();
    assert!(stats.pieces_retired > 0, "{stats:?}");
    assert_eq!(
        stats.pieces_removed, 0,
        "nothing removed before the wait: {stats:?}"
    );
    let before = data.list_all().await.expect("list").len();
    // Not yet: the wait is not over (the script took less than 2 s after its last change,
    // or this pass finds nothing old enough: either way nothing live may go).
    server.gateway.reclaim().await.expect("reclaim");
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let reclaimed = server.gateway.reclaim().await.expect("reclaim");
    let after = data.list_all().await.expect("list");
    assert!(reclaimed > 0, "the GC pass removed nothing");
    assert!(after.len() < before, "{} -> {}", before, after.len());
    // What is left is what the index refers to.
    let report = server
        .gateway
        .collect_orphans(0, true)
        .await
        .expect("orphans");
    assert!(report.orphans.is_empty(), "{report:?}");
    assert_eq!(report.data_objects, after.len() as u64);
    server.shutdown().await;
}
