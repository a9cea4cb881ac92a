//! What the boto3-driven gateway tests share: a one-OSD embedded cluster, gateways over it,
//! a user, a pool's object names, and running a Python script against them.

#![allow(dead_code)] // each test file uses its own subset

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;

use cluster::{Cluster, ClusterConfig, ClusterOptions, HostConfig, OsdConfig};
use gateway::{serve, GatewayConfig, Server, User};
use rados::Rados;

/// One host, one OSD on a file of `device_size` (e.g. "1G") under the test's directory.
pub fn one_osd_config(device_size: &str) -> ClusterConfig {
    let mut config = ClusterConfig::empty();
    config.scrub_interval_s = 0;
    // The protocol is under test here, not fsync: the cluster's own tests cover durability.
    config.durable = false;
    config.hosts.push(HostConfig {
        name: "host0".into(),
    });
    config.osds.push(OsdConfig {
        id: 0,
        host: "host0".into(),
        device: format!("file:osd.0.img:{device_size}"),
        size: None,
        class: "ssd".into(),
        weight: Some(1.0),
        min_alloc_size: 4096,
        emulation: None,
        data_cache_size: None,
    });
    config
}

/// Whether python3 with boto3 runs here. CI installs boto3 in scripts/test.sh; a developer
/// machine without it skips the test loudly.
pub fn have_boto3() -> bool {
    let found = std::process::Command::new("python3")
        .args(["-c", "import boto3"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        eprintln!("SKIPPED: python3 with boto3 is not available");
    }
    found
}

/// A cluster in `dir` (one OSD of `device_size`) and `gateways` S3 servers over it, with the
/// default configuration but replaced data removed at once (the suites count data objects),
/// on free ports.
pub async fn cluster_and_gateways(
    dir: &std::path::Path,
    device_size: &str,
    gateways: usize,
) -> (Arc<dyn Rados>, GatewayConfig, Vec<Server>) {
    let config = GatewayConfig {
        gc_min_wait_s: 0,
        ..GatewayConfig::default()
    };
    cluster_and_gateways_with(dir, device_size, gateways, config).await
}

/// [`cluster_and_gateways`] with `config`.
pub async fn cluster_and_gateways_with(
    dir: &std::path::Path,
    device_size: &str,
    gateways: usize,
    config: GatewayConfig,
) -> (Arc<dyn Rados>, GatewayConfig, Vec<Server>) {
    let rados = cluster(dir, device_size).await;
    let mut servers = Vec::new();
    for _ in 0..gateways {
        let server = serve(
            rados.clone(),
            "127.0.0.1:0".parse().unwrap(),
            config.clone(),
        )
        .await
        .expect("gateway");
        servers.push(server);
    }
    (rados, config, servers)
}

/// A one-OSD embedded cluster in `dir` ([`one_osd_config`]).
pub async fn cluster(dir: &std::path::Path, device_size: &str) -> Arc<dyn Rados> {
    let cluster = Cluster::create(dir, one_osd_config(device_size), ClusterOptions::default())
        .await
        .expect("cluster");
    Arc::new(cluster)
}

/// The names of the objects in `pool` that `keep` accepts, sorted.
pub async fn object_names(
    rados: &Arc<dyn Rados>,
    pool: &str,
    keep: impl Fn(&str) -> bool,
) -> Vec<String> {
    let io_ctx = rados.io_ctx(pool).await.expect("pool");
    let mut names: Vec<String> = io_ctx
        .list_all()
        .await
        .expect("list")
        .into_iter()
        .filter(|name| keep(name))
        .collect();
    names.sort();
    names
}

/// Creates S3 user `uid` through `server`.
pub async fn user(server: &Server, uid: &str) -> User {
    server
        .gateway
        .users()
        .create(uid, &format!("{uid} user"), "", None)
        .await
        .expect("user")
}

/// Runs `tests/<script> args...` with `env` (plus no AWS config files); returns its stdout,
/// panics with its output if it fails.
pub async fn run_script(script: &str, args: &[&str], env: &[(&str, String)]) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(script);
    let output = tokio::process::Command::new("python3")
        .arg(path)
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .env("AWS_CONFIG_FILE", "/dev/null")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
        .output()
        .await
        .expect("python3");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(
        output.status.success(),
        "{script} {args:?} failed:\n{stdout}\n{stderr}"
    );
    stdout
}

/// The main user's keys as the scripts read them.
pub fn main_keys(user: &User) -> [(&'static str, String); 2] {
    [
        ("MAIN_AK", user.access_key.clone()),
        ("MAIN_SK", user.secret_key.clone()),
    ]
}

/// Sends one request with `body` over a fresh connection (for gateways with authentication
/// off) and returns the status code.
pub async fn status_of_request(
    address: std::net::SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    let mut request = format!(
        "{method} {target} HTTP/1.1\r\nHost: {address}\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await.expect("send");
    stream.write_all(body).await.expect("send body");
    let mut answer = Vec::new();
    // A server that fails a body it already started may reset the connection: what came
    // before is the answer.
    let _ = stream.read_to_end(&mut answer).await;
    let answer = String::from_utf8_lossy(&answer);
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {answer}"))
}

/// [`status_of_request`] without headers or body.
pub async fn status_of(address: std::net::SocketAddr, method: &str, target: &str) -> u16 {
    status_of_request(address, method, target, &[], &[]).await
}
