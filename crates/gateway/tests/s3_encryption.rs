//! Server-side encryption end to end: a real gateway over a real embedded cluster, started
//! with an SSE master key and SSE-C allowed over plain HTTP, driven by boto3
//! (tests/s3/encryption.py); then the data pool is searched for the plaintext of the
//! encrypted objects the script left, which must not be there.

mod common;

use gateway::encryption::SecretKey;
use gateway::GatewayConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn encrypted_objects_round_trip_and_are_not_stored_in_the_clear() {
    if !common::have_boto3() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let config = GatewayConfig {
        gc_min_wait_s: 0,
        sse_master_key: Some(SecretKey::generate()),
        sse_c_allow_insecure: true,
        ..GatewayConfig::default()
    };
    let (rados, config, servers) =
        common::cluster_and_gateways_with(dir.path(), "2G", 1, config).await;
    let server = &servers[0];
    let main = common::user(server, "main").await;
    let pattern = "strata-plaintext-at-rest-0123456789";
    let mut env = common::main_keys(&main).to_vec();
    env.push(("S3_ENDPOINT", format!("http://{}", server.local_addr)));
    env.push(("AT_REST_BUCKET", "at-rest".to_string()));
    env.push(("AT_REST_PATTERN", pattern.to_string()));
    common::run_script("../../tests/s3/encryption.py", &[], &env).await;

    let data = rados.io_ctx(&config.data_pool).await.expect("data pool");
    let names = data.list_all().await.expect("list");
    assert!(!names.is_empty(), "the script left encrypted objects");
    let mut stored_bytes = 0;
    for name in names {
        let size = data.stat(&name).await.expect("stat").size_bytes;
        let bytes = data.read(&name, 0, size).await.expect("read");
        stored_bytes += bytes.len();
        assert!(
            !bytes
                .windows(pattern.len())
                .any(|window| window == pattern.as_bytes()),
            "{name} holds the plaintext"
        );
    }
    assert!(stored_bytes >= 600_000, "{stored_bytes} bytes stored");
    for server in servers {
        server.shutdown().await;
    }
}
