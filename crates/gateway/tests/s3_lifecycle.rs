//! Bucket lifecycle end to end: a real gateway over a real embedded cluster with a two-second
//! lifecycle day, driven by boto3 (tests/s3/lifecycle.py): the configuration operations and
//! their errors, then the lifecycle worker expiring objects and noncurrent versions and
//! aborting incomplete multipart uploads, while what no rule matches stays.

mod common;

use gateway::GatewayConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lifecycle_worker_expires_what_rules_match_and_nothing_else() {
    if !common::have_boto3() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let day_s = 2;
    let config = GatewayConfig {
        lifecycle_day_s: day_s,
        ..GatewayConfig::default()
    };
    let (_rados, _config, servers) =
        common::cluster_and_gateways_with(dir.path(), "2G", 1, config).await;
    let server = &servers[0];
    let main = common::user(server, "main").await;
    let mut env = common::main_keys(&main).to_vec();
    env.push(("S3_ENDPOINT", format!("http://{}", server.local_addr)));
    env.push(("LC_DAY_S", day_s.to_string()));
    common::run_script("../../tests/s3/lifecycle.py", &[], &env).await;
    for server in servers {
        server.shutdown().await;
    }
}
