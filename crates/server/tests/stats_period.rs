//! The server ends a statistics period every `stats_period_s`: `/api/stats` reports the last
//! one (per-OSD load of that period, the most accessed objects), `/metrics` its gauges, and
//! the access table starts empty each period. Before, nothing called
//! `Cluster::take_stats_period` outside a test: `stats_period_s` did nothing and the table
//! filled up once and for all.

mod common;

use std::time::Duration;

use serde_json::Value;

/// Waits (up to 10 s) for a period to end after `after_ns`, and returns it.
async fn next_period(running: &server::Running, dir: &std::path::Path, after_ns: u64) -> Value {
    for _ in 0..500 {
        let report = common::json(running, dir, "GET", "/api/stats?top=2").await;
        if report["period"]["end_ns"].as_u64().unwrap_or(0) > after_ns {
            return report["period"].clone();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no statistics period ended within 10 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_ends_statistics_periods_and_reports_the_last() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = common::config(1, "64M", 1);
    config.stats_period_s = 2;
    let running = common::serve(dir.path(), config, false).await;
    let before = common::json(&running, dir.path(), "GET", "/api/stats").await;
    assert_eq!(before["stats_period_s"], 2);
    assert!(before["period"].is_null(), "no period has ended yet");

    // Start right after a period ended, so the accesses fall in one period.
    let first = next_period(&running, dir.path(), 0).await;
    let first_end = first["end_ns"].as_u64().unwrap();
    for _ in 0..3 {
        let (status, _) = common::http(
            &running,
            dir.path(),
            "PUT",
            "/api/objects/data/hot",
            &[7u8; 8192],
        )
        .await;
        assert_eq!(status, 200);
        let (status, _) =
            common::http(&running, dir.path(), "GET", "/api/objects/data/hot", b"").await;
        assert_eq!(status, 200);
    }
    common::http(&running, dir.path(), "PUT", "/api/objects/data/warm", b"x").await;
    common::http(&running, dir.path(), "PUT", "/api/objects/data/cold", b"x").await;
    let period = next_period(&running, dir.path(), first_end).await;
    assert_eq!(period["start_ns"], first_end, "periods follow each other");
    assert_eq!(period["objects_tracked"], 3);
    let hot = &period["objects"][0];
    assert_eq!(hot["object"], "hot");
    assert_eq!(hot["reads"], 3);
    assert_eq!(hot["pool"], "data");
    assert_eq!(hot["writes"], 3);
    assert_eq!(hot["write_bytes"], 3 * 8192);
    assert_eq!(period["objects"].as_array().unwrap().len(), 2, "top=2");
    let length_ns = period["end_ns"].as_u64().unwrap() - period["start_ns"].as_u64().unwrap();
    assert!(
        (1_500_000_000..4_000_000_000).contains(&length_ns),
        "a period of about 2 s: {length_ns} ns"
    );
    let osd = &period["osds"][0];
    assert_eq!(osd["object_read_ops"], 3);
    assert!(osd["write_ops"].as_u64().unwrap() > 0, "{osd}");
    assert!(osd["busy_fraction"].as_f64().unwrap() <= 1.0);

    let (status, metrics) = common::http(&running, dir.path(), "GET", "/metrics", b"").await;
    assert_eq!(status, 200);
    let metrics = String::from_utf8(metrics).unwrap();
    for name in [
        "strata_stats_period_seconds ",
        "strata_osd_period_busy_ratio{osd=\"0\"}",
        "strata_osd_period_device_ops{osd=\"0\",op=\"write\"}",
        "strata_osd_period_device_latency_seconds{osd=\"0\",op=\"read\",quantile=\"0.99\"}",
        "strata_osd_period_queue_depth_max{osd=\"0\"}",
        "strata_osd_data_cache_hits_total{osd=\"0\"}",
        "strata_osd_data_cache_bytes{osd=\"0\"}",
    ] {
        assert!(metrics.contains(name), "{name} missing from /metrics");
    }

    // The next period, without accesses, is empty: the table was reset.
    let idle = next_period(&running, dir.path(), period["end_ns"].as_u64().unwrap()).await;
    assert_eq!(idle["objects_tracked"], 0, "{idle}");
    assert_eq!(idle["objects"].as_array().unwrap().len(), 0);
    assert_eq!(idle["osds"][0]["object_read_ops"], 0);
    running.shutdown().await.unwrap();
}
