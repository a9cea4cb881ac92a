//! `status` warns of nearly full OSDs and errs on full ones, naming them, at the cluster
//! config's `nearfull_ratio`, `backfillfull_ratio` and `full_ratio` (Ceph's OSD_NEARFULL,
//! OSD_BACKFILLFULL, OSD_FULL and POOL_FULL). Before, a review saw HEALTH_OK at 93.87% and
//! 99.73% used.

mod common;

use rados::IoCtx;

fn used_ratio(running: &server::Running) -> f64 {
    let statfs = &running.cluster().expect("the embedded cluster").osd_stats()[0].statfs;
    (statfs.total_bytes - statfs.free_bytes) as f64 / statfs.total_bytes as f64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nearly_full_and_full_osds_are_named_in_the_health() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = common::config(1, "64M", 1);
    config.nearfull_ratio = 0.3;
    config.backfillfull_ratio = 0.45;
    config.full_ratio = 0.6;
    let running = common::serve(dir.path(), config, false).await;
    let status = server::report::status(running.cluster().expect("the embedded cluster"))
        .await
        .unwrap();
    assert_eq!(status.health, "HEALTH_OK", "{:?}", status.checks);

    let pool = running
        .cluster()
        .expect("the embedded cluster")
        .pool("data")
        .unwrap();
    let mut written = 0;
    let (mut seen_nearfull, mut seen_backfillfull) = (false, false);
    // Writes stop at the full ratio: the one that would pass it is refused.
    loop {
        let wrote = pool
            .write_full(&format!("o{written}"), &vec![1u8; 1 << 20])
            .await;
        match wrote {
            Ok(()) => written += 1,
            Err(rados::RadosError::NoSpace(message)) => {
                assert!(message.contains("osd.0"), "{message}");
                break;
            }
            Err(other) => panic!("{other}"),
        }
        let used = used_ratio(&running);
        assert!(used <= 0.6, "{used}");
        let status = server::report::status(running.cluster().expect("the embedded cluster"))
            .await
            .unwrap();
        if (0.3..0.45).contains(&used) {
            seen_nearfull = true;
            assert_eq!(status.health, "HEALTH_WARN", "{used}: {:?}", status.checks);
            assert!(
                status.checks[0].starts_with("OSD_NEARFULL: 1 nearfull osd(s)")
                    && status.checks[0].contains("osd.0 ("),
                "{:?}",
                status.checks
            );
        } else if (0.45..0.6).contains(&used) {
            seen_backfillfull = true;
            assert_eq!(status.health, "HEALTH_WARN", "{used}: {:?}", status.checks);
            assert!(
                status.checks[0].starts_with("OSD_BACKFILLFULL: 1 backfillfull osd(s)"),
                "{:?}",
                status.checks
            );
        } else if used < 0.3 {
            assert_eq!(status.health, "HEALTH_OK", "{used}: {:?}", status.checks);
        }
    }
    assert!(seen_nearfull && seen_backfillfull && written > 0);
    let (code, body) = common::http(&running, dir.path(), "GET", "/status", b"").await;
    assert_eq!(code, 200);
    let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(status["health"], "HEALTH_ERR");
    let checks: Vec<&str> = status["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|check| check.as_str().unwrap())
        .collect();
    assert!(
        checks[0].starts_with("OSD_FULL: 1 full osd(s)") && checks[0].contains("osd.0 ("),
        "{checks:?}"
    );
    assert!(
        checks
            .iter()
            .any(|c| c.starts_with("POOL_FULL: 1 pool(s) full") && c.contains("'data'")),
        "{checks:?}"
    );
    assert!(
        !checks.iter().any(|c| c.starts_with("OSD_NEARFULL")),
        "{checks:?}"
    );
    drop(pool);
    running.shutdown().await.unwrap();
}
