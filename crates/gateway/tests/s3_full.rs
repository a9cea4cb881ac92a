//! A full cluster refuses S3 writes with 507 InsufficientStorage, which boto3 does not retry,
//! while reads and deletes work, and the GC reclaims deleted data early once the cluster is
//! nearfull, so writes resume before `gc_min_wait_s` (tests/s3/full.py). Before, a full
//! cluster answered 503, which SDKs retry, and deleted data came back only after 300 s.

mod common;

use gateway::GatewayConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_cluster_refuses_puts_without_retries_and_recovers_after_deletes() {
    if !common::have_boto3() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let config = GatewayConfig {
        gc_min_wait_s: 300,
        gc_period_s: 3600,
        gc_fullness_check_s: 1,
        gc_nearfull_min_wait_s: 0,
        ..GatewayConfig::default()
    };
    let (_rados, _config, mut servers) =
        common::cluster_and_gateways_with(dir.path(), "32M", 1, config).await;
    let server = servers.remove(0);
    let user = common::user(&server, "main").await;
    let stdout = common::run_script(
        "../../tests/s3/full.py",
        &[],
        &[
            ("S3_ENDPOINT", format!("http://{}", server.local_addr)),
            ("AK", user.access_key.clone()),
            ("SK", user.secret_key.clone()),
        ],
    )
    .await;
    assert!(stdout.contains("RESUMED"), "{stdout}");
    let stats = server.gateway.stats();
    assert!(stats.pieces_retired > 0, "{stats:?}");
    assert!(
        stats.gc_reclaimed > 0,
        "the GC did not run early: {stats:?}"
    );
    server.shutdown().await;
}
