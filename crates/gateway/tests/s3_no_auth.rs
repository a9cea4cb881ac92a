//! Signing clients (boto3) against a gateway with authentication off and on
//! (tests/s3/signed_clients.py): with it off their signatures are ignored and aws-chunked
//! bodies refused; with it on signatures are checked and aws-chunked bodies decoded.

mod common;

use gateway::GatewayConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_requests_are_served_when_auth_is_off() {
    if !common::have_boto3() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let config = GatewayConfig {
        auth: false,
        gc_min_wait_s: 0,
        ..GatewayConfig::default()
    };
    let (_rados, _config, servers) =
        common::cluster_and_gateways_with(dir.path(), "1G", 1, config).await;
    let server = &servers[0];
    common::run_script(
        "../../tests/s3/signed_clients.py",
        &["off"],
        &[
            ("S3_ENDPOINT", format!("http://{}", server.local_addr)),
            ("AK", "any-key".to_string()),
            ("SK", "any-secret".to_string()),
        ],
    )
    .await;
    for server in servers {
        server.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_requests_are_checked_when_auth_is_on() {
    if !common::have_boto3() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let (_rados, _config, servers) = common::cluster_and_gateways(dir.path(), "1G", 1).await;
    let server = &servers[0];
    let main = common::user(server, "main").await;
    common::run_script(
        "../../tests/s3/signed_clients.py",
        &["on"],
        &[
            ("S3_ENDPOINT", format!("http://{}", server.local_addr)),
            ("AK", main.access_key.clone()),
            ("SK", main.secret_key.clone()),
        ],
    )
    .await;
    for server in servers {
        server.shutdown().await;
    }
}
