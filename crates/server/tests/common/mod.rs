//! Shared by the server's integration tests: a small cluster served in-process on free ports,
//! and raw HTTP/1.1 requests to its admin API.
#![allow(dead_code)]

use std::path::Path;

use cluster::{ClusterConfig, HostConfig, OsdConfig, PoolConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One host per OSD, each OSD a file of `size` (e.g. "64M"), pool "data" of `replicas`.
pub fn config(osds: usize, size: &str, replicas: u32) -> ClusterConfig {
    let mut config = ClusterConfig::empty();
    config.scrub_interval_s = 0;
    for id in 0..osds {
        let host = format!("host{id}");
        config.hosts.push(HostConfig { name: host.clone() });
        config.osds.push(OsdConfig {
            id: id as i32,
            host,
            device: format!("file:osd.{id}.img:{size}"),
            size: None,
            class: "hdd".to_string(),
            weight: None,
            min_alloc_size: 4096,
            emulation: None,
            data_cache_size: None,
        });
    }
    config.pools.push(PoolConfig {
        name: "data".to_string(),
        size: replicas,
        min_size: Some(1),
        pg_num: 8,
        device_class: None,
        crush_rule: None,
        erasure: None,
    });
    config
}

/// Serves `config` from `dir` (admin on a free port; S3 only when `s3`).
pub async fn serve(dir: &Path, config: ClusterConfig, s3: bool) -> server::Running {
    let mut serve = server::ServeConfig::new(dir);
    serve.cluster_config = Some(config);
    serve.admin_addr = "127.0.0.1:0".parse().unwrap();
    serve.s3_addr = s3.then(|| "127.0.0.1:0".parse().unwrap());
    server::start(serve).await.unwrap()
}

/// One request with the admin token: (status, body).
pub async fn http(
    running: &server::Running,
    dir: &Path,
    method: &str,
    path: &str,
    body: &[u8],
) -> (u16, Vec<u8>) {
    let token = std::fs::read_to_string(server::token::token_path(dir)).unwrap();
    let mut stream = tokio::net::TcpStream::connect(running.admin_addr)
        .await
        .unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        token.trim(),
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&raw[..end]).to_string();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, raw[end + 4..].to_vec())
}

/// A JSON request that must succeed.
pub async fn json(
    running: &server::Running,
    dir: &Path,
    method: &str,
    path: &str,
) -> serde_json::Value {
    let (status, body) = http(running, dir, method, path, b"").await;
    assert_eq!(
        status,
        200,
        "{method} {path}: {}",
        String::from_utf8_lossy(&body)
    );
    serde_json::from_slice(&body).unwrap()
}
