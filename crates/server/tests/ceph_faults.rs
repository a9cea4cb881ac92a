//! What an S3 client sees when Ceph cannot take a write: `strata serve --backend ceph` on a
//! fresh minicluster (memstore, 3 OSDs, pools of 3), driven with boto3 without retries.
//! - Two OSDs of three SIGSTOPped (every PG below min_size, so librados blocks): a PUT fails
//!   within the op timeout with 503 SlowDown, which SDKs retry, never a bare 500; after SIGCONT
//!   the same PUT succeeds.
//! - Ceph's full ratios lowered under the OSDs' use (a memstore OSD holds ~60 KiB of its 4 GiB): the monitors flag the OSDs and pools full,
//!   the backend's statistics say so (the gateway's early GC reads them), and a PUT is refused
//!   at once with 507 as on a full embedded cluster; with the ratios back, PUTs resume.

use std::time::{Duration, Instant};

use ceph_backend::minicluster::{self, MiniCluster, MiniClusterSpec};
use rados::{FullLevel, Rados};

/// The op timeout the server runs with: short, so the test is short.
const OP_TIMEOUT_S: u64 = 5;

/// One S3 request through boto3 with retries off: prints `STATUS CODE`.
const CLIENT: &str = r#"
import os, sys, boto3, botocore
from botocore.config import Config
op, bucket, key = sys.argv[1], sys.argv[2], sys.argv[3]
s3 = boto3.client("s3", endpoint_url=os.environ["S3_ENDPOINT"], region_name="us-east-1",
    aws_access_key_id=os.environ["AK"], aws_secret_access_key=os.environ["SK"],
    config=Config(retries={"total_max_attempts": 1, "mode": "standard"}, read_timeout=300,
                  s3={"addressing_style": "path"}))
try:
    if op == "create_bucket":
        s3.create_bucket(Bucket=bucket)
    elif op == "put":
        s3.put_object(Bucket=bucket, Key=key, Body=b"x" * 4096)
    elif op == "get":
        s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    print(200, "OK")
except botocore.exceptions.ClientError as error:
    print(error.response["ResponseMetadata"]["HTTPStatusCode"], error.response["Error"]["Code"])
"#;

struct S3 {
    endpoint: String,
    access_key: String,
    secret_key: String,
}

impl S3 {
    /// `(status, code)` of one request.
    async fn request(&self, op: &str, bucket: &str, key: &str) -> (u16, String) {
        let output = tokio::process::Command::new("python3")
            .args(["-c", CLIENT, op, bucket, key])
            .env("S3_ENDPOINT", &self.endpoint)
            .env("AK", &self.access_key)
            .env("SK", &self.secret_key)
            .env("AWS_CONFIG_FILE", "/dev/null")
            .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
            .output()
            .await
            .expect("python3 with boto3");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let line = stdout.lines().last().unwrap_or_else(|| {
            panic!(
                "{op} {bucket}/{key}: no answer\n{}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
        let (status, code) = line.split_once(' ').expect("STATUS CODE");
        (status.parse().expect("a status"), code.to_string())
    }
}

fn signal(pid: u32, name: &str) {
    let status = std::process::Command::new("kill")
        .args([format!("-{name}"), pid.to_string()])
        .status()
        .expect("kill");
    assert!(status.success(), "kill -{name} {pid}");
}

/// Polls `check` (up to `limit`) until it holds.
async fn wait_for(what: &str, limit: Duration, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !check().await {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn set_ratios(ceph: &MiniCluster, nearfull: &str, backfillfull: &str, full: &str) {
    for (command, ratio) in [
        ("set-nearfull-ratio", nearfull),
        ("set-backfillfull-ratio", backfillfull),
        ("set-full-ratio", full),
    ] {
        ceph.ceph(&["osd", command, ratio])
            .unwrap_or_else(|error| panic!("{error}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_are_503_slow_down_and_full_is_507() {
    if !minicluster::available_or_skip() {
        return;
    }
    let temp = tempfile::tempdir().unwrap();
    let ceph = MiniCluster::start(&temp.path().join("ceph"), &MiniClusterSpec::default())
        .unwrap_or_else(|error| panic!("{error}"));
    let data = temp.path().join("server");
    let mut config = server::ServeConfig::new(&data);
    config.admin_addr = "127.0.0.1:0".parse().unwrap();
    config.s3_addr = Some("127.0.0.1:0".parse().unwrap());
    config.backend = server::BackendChoice::Ceph(ceph.config(OP_TIMEOUT_S));
    let running = server::start(config).await.expect("serve on Ceph");
    let user = running
        .gateway()
        .unwrap()
        .users()
        .create("main", "main user", "", None)
        .await
        .unwrap();
    let s3 = S3 {
        endpoint: format!("http://{}", running.s3_addr.unwrap()),
        access_key: user.access_key.clone(),
        secret_key: user.secret_key.clone(),
    };
    assert_eq!(s3.request("create_bucket", "faults", "").await.0, 200);
    assert_eq!(s3.request("put", "faults", "before").await.0, 200);

    // Two OSDs of three stopped: no PG can take a write, librados waits for them.
    let stopped = [
        ceph.pid("osd.1").expect("osd.1"),
        ceph.pid("osd.2").expect("osd.2"),
    ];
    for pid in stopped {
        signal(pid, "STOP");
    }
    let started = Instant::now();
    let (status, code) = s3.request("put", "faults", "during").await;
    let took = started.elapsed();
    for pid in stopped {
        signal(pid, "CONT");
    }
    println!("PUT with 2 of 3 OSDs stopped: {status} {code} after {took:?}");
    assert_eq!(
        (status, code.as_str()),
        (503, "SlowDown"),
        "a timed-out PUT is a retryable 503"
    );
    // The gateway's PUT is a few RADOS ops in turn, each bounded by the op timeout.
    assert!(took < Duration::from_secs(6 * OP_TIMEOUT_S), "{took:?}");
    wait_for(
        "PUTs work after SIGCONT",
        Duration::from_secs(120),
        async || s3.request("put", "faults", "during").await.0 == 200,
    )
    .await;
    assert_eq!(s3.request("get", "faults", "before").await.0, 200);

    // The full ratios under what the OSDs hold: Ceph flags them, strata reads the flags.
    let rados = ceph.connect().await.expect("connect");
    set_ratios(&ceph, "0.0000001", "0.0000002", "0.0000003");
    wait_for(
        "the OSDs and the data pool flagged full",
        Duration::from_secs(60),
        async || {
            let stats = rados.cluster_stats().await.expect("cluster_stats");
            stats.full_level() == FullLevel::Full
                && stats.pools.iter().any(|pool| {
                    pool.name == "strata.rgw.data" && pool.full_level == FullLevel::Full
                })
        },
    )
    .await;
    let stats = rados.cluster_stats().await.unwrap();
    println!("full OSDs: {:?}", stats.full_osds);
    let started = Instant::now();
    let (status, code) = s3.request("put", "faults", "full").await;
    println!(
        "PUT on a full Ceph: {status} {code} after {:?}",
        started.elapsed()
    );
    assert_eq!(status, 507, "a full cluster is 507 ({code}), not a timeout");
    assert!(
        started.elapsed() < Duration::from_secs(OP_TIMEOUT_S),
        "refused at once"
    );
    assert_eq!(
        s3.request("get", "faults", "before").await.0,
        200,
        "reads go on"
    );

    set_ratios(&ceph, "0.85", "0.90", "0.95");
    wait_for(
        "PUTs resume below the ratios",
        Duration::from_secs(60),
        async || s3.request("put", "faults", "after").await.0 == 200,
    )
    .await;
    let stats = rados.cluster_stats().await.unwrap();
    assert_eq!(stats.full_level(), FullLevel::Ok, "{:?}", stats.full_osds);

    running.shutdown().await.unwrap();
    drop(ceph);
}
