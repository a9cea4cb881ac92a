//! Issue 43 through the real `strata serve`: the data directory is private (0700, files
//! 0600, the S3 master key among them), no S3 secret key can be read out of its files, and
//! refused S3 requests do not write ERROR lines (any client could flood the log).

mod serve_common;

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cluster::{ClusterConfig, HostConfig, OsdConfig};

/// Three OSDs of 64 MiB on files: small enough to search whole.
fn small_cluster(path: &Path) {
    let mut config = ClusterConfig::empty();
    config.scrub_interval_s = 0;
    for id in 0..3 {
        let host = format!("host{id}");
        config.hosts.push(HostConfig { name: host.clone() });
        config.osds.push(OsdConfig {
            id,
            host,
            device: format!("file:osd.{id}.img:64M"),
            size: None,
            class: "ssd".into(),
            weight: Some(1.0),
            min_alloc_size: 4096,
            emulation: None,
            data_cache_size: None,
        });
    }
    std::fs::write(path, config.to_toml()).unwrap();
}

/// Every regular file under `root`, with its mode; directories' modes too.
fn walk(root: &Path, out: &mut Vec<(std::path::PathBuf, u32, bool)>) {
    let metadata = std::fs::symlink_metadata(root).unwrap();
    out.push((
        root.to_path_buf(),
        metadata.permissions().mode() & 0o777,
        metadata.is_dir(),
    ));
    if metadata.is_dir() {
        for entry in std::fs::read_dir(root).unwrap() {
            walk(&entry.unwrap().path(), out);
        }
    }
}

/// One raw HTTP request: the status code.
fn status_of(address: &str, request: &str) -> u16 {
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut reply = Vec::new();
    let _ = stream.read_to_end(&mut reply);
    let text = String::from_utf8_lossy(&reply);
    text.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// Fails before issue 43: the directory was 0755 and the OSD files 0644 under the usual umask,
/// the users table kept secrets in plaintext on the OSDs, and every refused request wrote
/// ERROR lines.
#[test]
fn data_is_private_secrets_are_sealed_and_refusals_are_quiet() {
    let parent = tempfile::tempdir().unwrap();
    let data = parent.path().join("data");
    let config = parent.path().join("cluster.toml");
    small_cluster(&config);
    let log_path = parent.path().join("serve.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["serve", "--data"])
        .arg(&data)
        .arg("--config")
        .arg(&config)
        .args(["--admin", "127.0.0.1:0", "--s3", "127.0.0.1:0"])
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let (mut admin, mut s3) = (String::new(), String::new());
    let started = Instant::now();
    loop {
        let mut line = String::new();
        use std::io::BufRead;
        if stdout.read_line(&mut line).unwrap() == 0 {
            panic!(
                "serve exited: {}",
                std::fs::read_to_string(&log_path).unwrap()
            );
        }
        if let Some(rest) = line.strip_prefix("strata: admin  http://") {
            admin = rest.split_whitespace().next().unwrap().to_string();
        }
        if let Some(rest) = line.strip_prefix("strata: s3     http://") {
            s3 = rest.trim().to_string();
        }
        if line.contains("ready") {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "not ready");
    }
    let data_text = data.display().to_string();
    let created = serve_common::ok(&[
        "user", "create", "--uid", "alice", "--admin", &admin, "--data", &data_text,
    ]);
    let created: serde_json::Value = serde_json::from_str(&created).unwrap();
    let secret = created["keys"][0]["secret_key"]
        .as_str()
        .unwrap()
        .to_string();
    let access = created["keys"][0]["access_key"]
        .as_str()
        .unwrap()
        .to_string();

    // Refused requests: unsigned writes, a bad signature, a missing bucket.
    for index in 0..20 {
        let host = format!("Host: {s3}\r\nConnection: close\r\n");
        let refused = [
            format!("PUT /nobucket{index}/key HTTP/1.1\r\n{host}Content-Length: 0\r\n\r\n"),
            format!(
                "GET /bucket HTTP/1.1\r\n{host}Authorization: AWS4-HMAC-SHA256 \
                 Credential={access}/20260101/us-east-1/s3/aws4_request, \
                 SignedHeaders=host, Signature=00\r\nx-amz-date: 20260101T000000Z\r\n\
                 x-amz-content-sha256: UNSIGNED-PAYLOAD\r\n\r\n"
            ),
            format!("POST /b{index}?delete HTTP/1.1\r\n{host}Content-Length: 5\r\n\r\n<oops"),
        ];
        for request in refused {
            let status = status_of(&s3, &request);
            assert!((400..500).contains(&status), "{status} for {request}");
        }
    }
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    assert!(child.wait().unwrap().success());

    let log = std::fs::read_to_string(&log_path).unwrap();
    let errors: Vec<&str> = log.lines().filter(|line| line.contains("ERROR")).collect();
    assert!(errors.is_empty(), "ERROR lines:\n{}", errors.join("\n"));
    // 60 refused requests: none is worth a warning (a start may warn of other things).
    let warnings: Vec<&str> = log.lines().filter(|line| line.contains("WARN")).collect();
    assert!(warnings.len() < 10, "warnings:\n{}", warnings.join("\n"));

    let mut entries = Vec::new();
    walk(&data, &mut entries);
    let shared: Vec<String> = entries
        .iter()
        .filter(|(_, mode, _)| mode & 0o077 != 0)
        .map(|(path, mode, _)| format!("{} {mode:o}", path.display()))
        .collect();
    assert!(shared.is_empty(), "readable by others: {shared:?}");
    let key = std::fs::metadata(data.join("s3-master.key")).unwrap();
    assert_eq!(key.permissions().mode() & 0o777, 0o600);
    for (path, _, is_dir) in &entries {
        if *is_dir || path.ends_with("s3-master.key") {
            continue;
        }
        let bytes = std::fs::read(path).unwrap();
        assert!(
            !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "{} holds the secret key in plaintext",
            path.display()
        );
    }
}
