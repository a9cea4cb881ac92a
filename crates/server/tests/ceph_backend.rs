//! `strata serve` on a real Ceph (`BackendChoice::Ceph`): a fresh minicluster (memstore, 3
//! OSDs, pools of 3) from scripts/ceph-minicluster.sh, two servers on it. Checks that the
//! admin API reports Ceph's own state, refuses what Ceph does not offer with 501, that the
//! gateway's boto3 suite passes on Ceph, and that a user and a bucket made through one server
//! are served by the other (users live in the cluster).

mod common;

use std::path::Path;

use ceph_backend::minicluster::{self, MiniCluster, MiniClusterSpec};

/// A fresh minicluster (memstore, 3 OSDs, pools of 3) in `dir`, purged when dropped; `None`
/// when Ceph is missing and STRATA_SKIP_CEPH=1 says to skip.
fn start_ceph(dir: &Path) -> Option<MiniCluster> {
    if !minicluster::available_or_skip() {
        return None;
    }
    Some(
        MiniCluster::start(dir, &MiniClusterSpec::default())
            .unwrap_or_else(|error| panic!("{error}")),
    )
}

/// A server on the Ceph cluster of `conf`, sealing S3 secrets with `key` (servers sharing a
/// cluster share its users, so they must share the key that seals their secrets).
async fn serve_on_ceph(data: &Path, conf: &Path, key: &gateway::MasterKey) -> server::Running {
    let mut config = server::ServeConfig::new(data);
    config.gateway.secret_keys = Some(gateway::SecretKeyring::new(key.clone()));
    config.admin_addr = "127.0.0.1:0".parse().unwrap();
    config.s3_addr = Some("127.0.0.1:0".parse().unwrap());
    config.gateway.gc_min_wait_s = 0;
    config.backend = server::BackendChoice::Ceph(ceph_backend::CephConfig {
        conf_path: Some(conf.to_path_buf()),
        op_timeout_s: 30,
        ..ceph_backend::CephConfig::default()
    });
    server::start(config).await.expect("serve on Ceph")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_runs_on_ceph() {
    let temp = tempfile::tempdir().unwrap();
    let Some(ceph) = start_ceph(&temp.path().join("ceph")) else {
        return;
    };
    let conf = ceph.conf();
    let first_dir = temp.path().join("first");
    let second_dir = temp.path().join("second");
    let key = gateway::MasterKey::generate();
    let first = serve_on_ceph(&first_dir, &conf, &key).await;
    let second = serve_on_ceph(&second_dir, &conf, &key).await;
    assert!(first.cluster().is_none());
    assert_eq!(first.backend().kind(), "ceph");

    // The admin API shows Ceph's own state.
    let status = common::json(&first, &first_dir, "GET", "/status").await;
    assert!(
        status["health"]
            .as_str()
            .is_some_and(|h| h.starts_with("HEALTH_")),
        "{status}"
    );
    assert_eq!(status["osds"].as_array().map(Vec::len), Some(3), "{status}");
    assert!(status["epoch"].as_u64().is_some_and(|e| e > 0), "{status}");
    assert!(
        status["pgs"]["total"].as_u64().is_some_and(|n| n > 0),
        "{status}"
    );
    let pools = common::json(&first, &first_dir, "GET", "/api/pools").await;
    let names: Vec<&str> = pools
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert!(names.contains(&"strata.rgw.data"), "{pools}");
    let usage = common::json(&first, &first_dir, "GET", "/api/osd/df").await;
    assert!(usage
        .as_array()
        .unwrap()
        .iter()
        .all(|osd| osd["total_bytes"].as_u64().is_some_and(|b| b > 0)));

    // Objects through the admin API, and where Ceph places them.
    let (code, _) = common::http(
        &first,
        &first_dir,
        "PUT",
        "/api/objects/strata.rgw.data/probe",
        b"hello ceph",
    )
    .await;
    assert_eq!(code, 200);
    let stat = common::json(&first, &first_dir, "GET", "/api/stat/strata.rgw.data/probe").await;
    assert_eq!(stat["size_bytes"], 10);
    assert_eq!(stat["acting"].as_array().map(Vec::len), Some(3), "{stat}");
    assert!(
        stat["pg"].as_str().is_some_and(|pg| pg.contains('.')),
        "{stat}"
    );
    let (code, body) = common::http(
        &second,
        &second_dir,
        "GET",
        "/api/objects/strata.rgw.data/probe",
        b"",
    )
    .await;
    assert_eq!((code, body.as_slice()), (200, &b"hello ceph"[..]));
    let (code, _) = common::http(
        &first,
        &first_dir,
        "DELETE",
        "/api/objects/strata.rgw.data/probe",
        b"",
    )
    .await;
    assert_eq!(code, 200);

    // What Ceph does not offer is refused plainly, not shown as zeros.
    for (method, path) in [
        ("GET", "/api/stats"),
        ("POST", "/api/osd/1/up"),
        ("POST", "/api/scrub"),
    ] {
        let (code, body) = common::http(&first, &first_dir, method, path, b"").await;
        let body = String::from_utf8_lossy(&body);
        assert_eq!(code, 501, "{method} {path}: {body}");
        assert!(body.contains("ceph backend"), "{body}");
    }
    // The gateway's pools cannot be deleted while S3 is served.
    let (code, _) = common::http(
        &first,
        &first_dir,
        "DELETE",
        "/api/pools/strata.rgw.index",
        b"",
    )
    .await;
    assert_eq!(code, 400);

    // A user made through one server signs requests to the other: users live in Ceph.
    let users = first.gateway().unwrap().users();
    let main = users.create("main", "main user", "", None).await.unwrap();
    let alt = users.create("alt", "alt user", "", None).await.unwrap();
    let endpoint = format!("http://{}", second.s3_addr.unwrap());
    let output = tokio::process::Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/s3/test_gateway.py"))
        .envs([
            ("S3_ENDPOINT", endpoint.clone()),
            ("MAIN_AK", main.access_key.clone()),
            ("MAIN_SK", main.secret_key.clone()),
            ("ALT_AK", alt.access_key.clone()),
            ("ALT_SK", alt.secret_key.clone()),
        ])
        .env("AWS_CONFIG_FILE", "/dev/null")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
        .output()
        .await
        .expect("python3");
    println!("{}", String::from_utf8_lossy(&output.stdout));
    assert!(
        output.status.success(),
        "the boto3 suite failed on the Ceph backend:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );

    second.shutdown().await.unwrap();
    first.shutdown().await.unwrap();
    drop(ceph);
}
