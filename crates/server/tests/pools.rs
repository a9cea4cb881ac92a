//! The S3 gateway's pools cannot be deleted while the server serves S3. Before, `strata pool
//! rm strata.rgw.index` was accepted: every key then answered NoSuchKey and `strata gc`
//! listed every data object as an orphan.

mod common;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateways_pools_are_not_deleted_while_s3_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let running = common::serve(dir.path(), common::config(1, "64M", 1), true).await;
    for pool in ["strata.rgw.meta", "strata.rgw.index", "strata.rgw.data"] {
        let path = format!("/api/pools/{pool}");
        let (status, body) = common::http(&running, dir.path(), "DELETE", &path, b"").await;
        let body = String::from_utf8_lossy(&body);
        assert_eq!(status, 400, "{pool}: {body}");
        assert!(body.contains("in use by the S3 gateway"), "{body}");
    }
    let pools = common::json(&running, dir.path(), "GET", "/api/pools").await;
    let names: Vec<&str> = pools
        .as_array()
        .unwrap()
        .iter()
        .map(|pool| pool["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"strata.rgw.index"), "{names:?}");
    // Other pools still go.
    let (status, body) = common::http(&running, dir.path(), "DELETE", "/api/pools/data", b"").await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    running.shutdown().await.unwrap();
}

/// `osd df` counts the PGs the map places on each OSD, as `ceph osd df` does. Before, it
/// counted the PG collections the store held: 0 everywhere on a fresh cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn osd_df_counts_the_pgs_the_map_places_on_each_osd() {
    let dir = tempfile::tempdir().unwrap();
    let running = common::serve(dir.path(), common::config(3, "64M", 2), false).await;
    let osds = common::json(&running, dir.path(), "GET", "/api/osd/df").await;
    let pgs: Vec<u64> = osds
        .as_array()
        .unwrap()
        .iter()
        .map(|osd| osd["pgs"].as_u64().unwrap())
        .collect();
    // Pool "data": 8 PGs of 2 replicas over 3 OSDs.
    assert_eq!(pgs.iter().sum::<u64>(), 16, "{pgs:?}");
    assert!(pgs.iter().all(|&count| count > 0), "{pgs:?}");
    running.shutdown().await.unwrap();
}
