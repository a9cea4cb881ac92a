//! A GET of an object one of whose data pieces is lost (every replica gone) answers an error
//! status, not a `200` whose body stops short: the gateway checks the pieces a range needs
//! before it answers. Ranges that need only pieces that are there are still served.

mod common;

use gateway::{layout, GatewayConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_that_needs_a_lost_piece_fails_before_its_status() {
    let dir = tempfile::tempdir().expect("temp dir");
    let chunk_bytes = 4096;
    let config = GatewayConfig {
        auth: false,
        gc_min_wait_s: 0,
        chunk_size_bytes: chunk_bytes,
        ..GatewayConfig::default()
    };
    let (rados, config, mut servers) =
        common::cluster_and_gateways_with(dir.path(), "1G", 1, config).await;
    let server = servers.remove(0);
    let address = server.local_addr;
    assert_eq!(common::status_of(address, "PUT", "/bucket").await, 200);
    let body: Vec<u8> = (0..3 * chunk_bytes + 100)
        .map(|i| (i % 251) as u8)
        .collect();
    assert_eq!(
        common::status_of_request(address, "PUT", "/bucket/key", &[], &body).await,
        200
    );
    assert_eq!(common::status_of(address, "GET", "/bucket/key").await, 200);

    // The last piece is lost.
    let data = rados.io_ctx(&config.data_pool).await.expect("data pool");
    let shadows =
        common::object_names(&rados, &config.data_pool, |name| name.contains("__shadow_")).await;
    assert_eq!(
        shadows.len(),
        3,
        "pieces 1..=3 beside the head: {shadows:?}"
    );
    let last = shadows.last().expect("a shadow piece").clone();
    assert!(last.ends_with("__shadow_3"), "{last}");
    data.remove(&last).await.expect("remove the last piece");

    assert_eq!(
        common::status_of(address, "GET", "/bucket/key").await,
        500,
        "a GET needing the lost piece"
    );
    let head_only = [("range", "bytes=0-99")];
    assert_eq!(
        common::status_of_request(address, "GET", "/bucket/key", &head_only, &[]).await,
        206,
        "a range within the pieces that are there"
    );
    let lost_only = [("range", "bytes=-50")];
    assert_eq!(
        common::status_of_request(address, "GET", "/bucket/key", &lost_only, &[]).await,
        500,
        "a range within the lost piece"
    );
    // The head lost too: still an error, not NoSuchKey (the index says the object exists).
    let head = layout::piece_object(
        last.split('_').next().expect("bucket id"),
        last.split('_').nth(1).expect("tag"),
        "key",
        0,
    );
    data.remove(&head).await.expect("remove the head");
    assert_eq!(
        common::status_of_request(address, "GET", "/bucket/key", &head_only, &[]).await,
        500,
        "a GET needing the lost head"
    );
    server.shutdown().await;
}
