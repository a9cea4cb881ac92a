//! `/metrics` is what Prometheus accepts (`promtool check metrics`: before, quantile labels on
//! gauges and `_total` on a gauge failed it), counts S3 requests by operation and status
//! with latency histograms, and carries the health gauges; `/status` reports the rates of the
//! last seconds and `/api/history` their series (issue 44).

mod common;

use std::io::Write;

use rados::IoCtx;
use std::process::{Command, Stdio};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One raw, unsigned S3 request: (status line's code).
async fn s3_request(addr: std::net::SocketAddr, method: &str, path: &str) -> u16 {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8_lossy(&raw);
    text.split(' ').nth(1).unwrap().parse().unwrap()
}

/// `promtool check metrics` on `text`: `None` when promtool is missing and the test may skip.
fn promtool_check(text: &str) -> Option<(bool, String)> {
    let child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(error) => {
            assert!(
                std::env::var("STRATA_SKIP_INSTALL").is_ok_and(|v| v == "1"),
                "promtool not found ({error}): install Debian's prometheus package \
                 (scripts/test.sh does), or set STRATA_SKIP_INSTALL=1 to skip this check"
            );
            eprintln!("SKIP promtool check: promtool not found and STRATA_SKIP_INSTALL=1");
            return None;
        }
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Some((output.status.success(), said))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_pass_promtool_and_count_s3_requests() {
    let dir = tempfile::tempdir().unwrap();
    let running = common::serve(dir.path(), common::config(3, "64M", 2), true).await;
    let s3 = running.s3_addr.expect("S3 is served");
    // Unsigned requests are refused (403), and still counted by operation.
    assert_eq!(s3_request(s3, "GET", "/").await, 403);
    assert_eq!(s3_request(s3, "GET", "/").await, 403);
    let put_status = s3_request(s3, "PUT", "/bucket/key").await;
    assert!((400..500).contains(&put_status), "{put_status}");
    running
        .cluster()
        .unwrap()
        .pool("data")
        .unwrap()
        .write_full("object", &[7u8; 8192])
        .await
        .unwrap();

    let (status, body) = common::http(&running, dir.path(), "GET", "/metrics", b"").await;
    assert_eq!(status, 200);
    let metrics = String::from_utf8(body).unwrap();
    let put_line =
        format!("strata_s3_requests_total{{operation=\"PutObject\",status=\"{put_status}\"}} 1");
    for line in [
        "strata_s3_requests_total{operation=\"ListBuckets\",status=\"403\"} 2",
        put_line.as_str(),
        "strata_s3_request_duration_seconds_bucket{operation=\"ListBuckets\",le=\"+Inf\"} 2",
        "strata_s3_request_duration_seconds_count{operation=\"PutObject\"} 1",
        "strata_health_status 0",
        "strata_scrub_errors 0",
        "strata_objects_unfound 0",
        "# TYPE strata_osd_op_latency_seconds summary",
    ] {
        assert!(
            metrics.contains(line),
            "{line:?} missing from /metrics:\n{metrics}"
        );
    }
    if let Some((passed, said)) = promtool_check(&metrics) {
        assert!(passed, "promtool check metrics failed:\n{said}\n{metrics}");
    }

    // Two samples (one every 2 s) give the rates.
    tokio::time::sleep(std::time::Duration::from_millis(4_500)).await;
    let status = common::json(&running, dir.path(), "GET", "/status").await;
    let io = &status["io"];
    assert!(io.is_object(), "no io rates in /status: {status}");
    assert!(io["interval_s"].as_f64().unwrap() > 0.0, "{io}");
    let history = common::json(&running, dir.path(), "GET", "/api/history").await;
    assert!(
        !history["rates"].as_array().unwrap().is_empty(),
        "{history}"
    );
    running.shutdown().await.unwrap();
}
