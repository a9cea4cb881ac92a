//! The balancer on a running server: `balancer on` balances the embedded cluster's PGs
//! within the movement budget per period while objects are being written (no acknowledged
//! write lost, no PG inactive), reaches the balance and the movement `strata balance` plans
//! for the same map, and stays on across a restart; upmap items by hand.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rados::WriteOp;
use serde_json::Value;

/// Six hosts of one OSD, pool `data` of 3 replicas and 64 PGs: CRUSH leaves OSDs off target.
fn config() -> cluster::ClusterConfig {
    let mut config = common::config(6, "128M", 3);
    config.pools[0].pg_num = 64;
    config
}

fn total_score(eval: &Value) -> Value {
    eval["scores"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["scope"] == "total")
        .unwrap()
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn balancer_on_balances_under_writes_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let running = common::serve(dir.path(), config(), false).await;
    let path = dir.path();

    // The plan `strata balance` makes for the map as it is now.
    let (problem, _) = balancer::cluster::from_osdmap(&running.cluster().unwrap().osd_map(), &[]);
    let full = balancer::balance(&problem, &balancer::BalanceConfig::default()).unwrap();
    assert!(full.shards_changed > 3, "the map should need balancing");
    let before = common::json(&running, path, "GET", "/api/balancer/eval").await;
    assert!(total_score(&before)["outside_bounds"].as_u64().unwrap() > 0);

    let status = common::json(&running, path, "GET", "/api/balancer").await;
    assert_eq!(status["active"], false);
    assert_eq!(status["mode"], "upmap");
    common::json(
        &running,
        path,
        "POST",
        "/api/balancer/config?period_s=1&target_max_misplaced_ratio=0.02",
    )
    .await;

    // A writer: every acknowledged write is remembered, with its content.
    let rados = running.backend().rados();
    let io = rados.io_ctx("data").await.unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        let io = io.clone();
        tokio::spawn(async move {
            let mut acknowledged = BTreeMap::new();
            let mut failures = 0u64;
            let mut sequence = 0u64;
            while !stop.load(Ordering::SeqCst) {
                let name = format!("object-{}", sequence % 400);
                let body = Bytes::from(format!("{name} version {sequence}").repeat(50));
                match io
                    .operate(&name, WriteOp::new().write_full(body.clone()))
                    .await
                {
                    Ok(()) => {
                        acknowledged.insert(name, body);
                    }
                    Err(_) => failures += 1,
                }
                sequence += 1;
            }
            (acknowledged, failures)
        })
    };

    let status = common::json(&running, path, "POST", "/api/balancer/on").await;
    assert_eq!(status["active"], true);
    let started = Instant::now();
    let mut applied_periods = 0;
    let mut last_at = 0;
    loop {
        assert!(
            started.elapsed() < Duration::from_secs(240),
            "not balanced in 240 s: {status}"
        );
        for pg in running.cluster().unwrap().pg_list() {
            assert!(
                pg.state != "inactive" && !pg.acting.is_empty(),
                "pg {} unavailable while upmaps apply: {:?}",
                pg.pg,
                pg.state
            );
        }
        let status = common::json(&running, path, "GET", "/api/balancer").await;
        let last = &status["last_period"];
        if last["at_ms"].as_u64().unwrap_or(0) > last_at {
            last_at = last["at_ms"].as_u64().unwrap();
            match last["outcome"].as_str().unwrap() {
                "applied" => applied_periods += 1,
                "balanced" => break,
                "waiting" => {}
                other => panic!("period {other}: {}", last["detail"]),
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.store(true, Ordering::SeqCst);
    let (acknowledged, failures) = writer.await.unwrap();
    assert_eq!(failures, 0, "writes failed while the balancer moved PGs");
    assert!(applied_periods > 1, "the budget should split the moves");

    let status = common::json(&running, path, "GET", "/api/balancer").await;
    assert_eq!(
        status["shards_moved"].as_u64().unwrap(),
        full.shards_changed as u64,
        "the periods together move what one unlimited plan moves"
    );
    let after = common::json(&running, path, "GET", "/api/balancer/eval").await;
    assert_eq!(total_score(&after)["outside_bounds"], 0, "{after}");
    assert!(total_score(&after)["max_deviation"].as_f64().unwrap() < 1.0);

    // Let recovery settle the last moves, then every acknowledged write reads back.
    assert!(running.cluster().unwrap().recover(50).await.unwrap());
    for (name, body) in &acknowledged {
        let read = io.read_full(name).await.unwrap();
        assert_eq!(&read[..], &body[..], "{name}");
    }
    drop(io);
    drop(rados);

    // `on` survives a restart.
    running.shutdown().await.unwrap();
    let running = common::serve(dir.path(), config(), false).await;
    let status = common::json(&running, path, "GET", "/api/balancer").await;
    assert_eq!(status["active"], true);
    assert_eq!(status["period_s"], 1);
    let report = common::json(&running, path, "GET", "/status").await;
    assert_eq!(report["balancer"]["active"], true);
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plans_and_upmap_items_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let running = common::serve(dir.path(), config(), false).await;
    let path = dir.path();

    // By hand: a PG's first OSD replaced by an OSD outside its set.
    let pg = running.cluster().unwrap().pg_list().remove(0);
    let from = pg.up[0];
    let to = (0..6).find(|o| !pg.up.contains(o)).unwrap();
    let body = format!("{{\"items\":[[{from},{to}]]}}");
    let (status, reply) = common::http(
        &running,
        path,
        "PUT",
        &format!("/api/pg/{}/upmap-items", pg.pg),
        body.as_bytes(),
    )
    .await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&reply));
    let moved = common::json(&running, path, "GET", &format!("/api/pg/{}", pg.pg)).await;
    assert_eq!(moved["up"][0], to);
    let (status, _) = common::http(
        &running,
        path,
        "PUT",
        &format!("/api/pg/{}/upmap-items", pg.pg),
        b"{\"items\":[[0,99]]}",
    )
    .await;
    assert_eq!(status, 400, "an OSD that does not exist is refused");
    let (status, _) = common::http(
        &running,
        path,
        "PUT",
        "/api/pg/1.ff/upmap-items",
        body.as_bytes(),
    )
    .await;
    assert_eq!(status, 404);
    common::json(
        &running,
        path,
        "DELETE",
        &format!("/api/pg/{}/upmap-items", pg.pg),
    )
    .await;
    let back = common::json(&running, path, "GET", &format!("/api/pg/{}", pg.pg)).await;
    assert_eq!(back["up"][0], from);

    // Plans: optimize shows commands, eval scores the plan better, a stale plan is refused.
    assert!(running.cluster().unwrap().recover(50).await.unwrap());
    let plan = common::json(&running, path, "POST", "/api/balancer/optimize/first").await;
    assert!(plan["changes"].as_u64().unwrap() > 0);
    assert!(plan["commands"][0]
        .as_str()
        .unwrap()
        .starts_with("ceph osd pg-upmap-items "));
    let now = common::json(&running, path, "GET", "/api/balancer/eval").await;
    let then = common::json(&running, path, "GET", "/api/balancer/eval/first").await;
    assert!(
        total_score(&then)["score"].as_f64().unwrap()
            < total_score(&now)["score"].as_f64().unwrap()
    );
    common::json(&running, path, "POST", "/api/balancer/optimize/stale").await;
    let executed = common::json(&running, path, "POST", "/api/balancer/execute/first").await;
    assert_eq!(executed["changes"], plan["changes"]);
    let (status, _) =
        common::http(&running, path, "POST", "/api/balancer/execute/stale", b"").await;
    assert_eq!(status, 409, "a plan made on an older epoch is refused");
    common::json(&running, path, "DELETE", "/api/balancer/plans/stale").await;
    let (status, _) = common::http(&running, path, "GET", "/api/balancer/plans/stale", b"").await;
    assert_eq!(status, 404);
    let (status, _) =
        common::http(&running, path, "POST", "/api/balancer/mode/sideways", b"").await;
    assert_eq!(status, 400);
    running.shutdown().await.unwrap();
}

/// `strata osd getmap`: Ceph's own osdmaptool reads the embedded cluster's map and maps every
/// PG as the cluster does (upmap items included). Skipped when osdmaptool is not installed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn getmap_reads_back_in_osdmaptool_with_the_same_mappings() {
    if std::process::Command::new("osdmaptool")
        .arg("--help")
        .output()
        .is_err()
    {
        eprintln!("skipping: osdmaptool is not installed (package ceph-base)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let running = common::serve(dir.path(), config(), false).await;
    let path = dir.path();
    assert!(running.cluster().unwrap().recover(50).await.unwrap());
    common::json(&running, path, "POST", "/api/balancer/optimize/p").await;
    common::json(&running, path, "POST", "/api/balancer/execute/p").await;
    assert!(running.cluster().unwrap().recover(50).await.unwrap());
    let (status, map) = common::http(&running, path, "GET", "/api/osd/map", b"").await;
    assert_eq!(status, 200);
    let file = dir.path().join("osdmap.bin");
    std::fs::write(&file, &map).unwrap();
    let output = std::process::Command::new("osdmaptool")
        .arg(&file)
        .arg("--test-map-pgs-dump")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    let mapped: BTreeMap<String, String> = text
        .lines()
        .filter_map(|line| {
            let mut fields = line.split('\t');
            let (pg, set) = (fields.next()?, fields.next()?);
            // PG lines only (not the per-OSD summary osdmaptool prints after them).
            set.starts_with('[')
                .then(|| (pg.to_string(), set.to_string()))
        })
        .collect();
    let pgs = running.cluster().unwrap().pg_list();
    assert!(!running
        .cluster()
        .unwrap()
        .osd_map()
        .pg_upmap_items()
        .is_empty());
    assert_eq!(mapped.len(), pgs.len(), "{text}");
    for pg in pgs {
        let set: Vec<String> = pg.up.iter().map(i32::to_string).collect();
        assert_eq!(
            mapped[&pg.pg],
            format!("[{}]", set.join(",")),
            "pg {}",
            pg.pg
        );
    }
    let printed = std::process::Command::new("osdmaptool")
        .arg(&file)
        .arg("--print")
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&printed.stdout);
    assert!(
        printed.contains("pool 1 'data' replicated size 3"),
        "{printed}"
    );
    running.shutdown().await.unwrap();
}

/// Runs `balancer on` with 1 s periods until a period finds nothing to do; the periods that
/// applied a plan.
async fn run_until_balanced(running: &server::Running, path: &std::path::Path) -> usize {
    common::json(running, path, "POST", "/api/balancer/config?period_s=1").await;
    common::json(running, path, "POST", "/api/balancer/on").await;
    let started = Instant::now();
    let (mut applied, mut last_at) = (0, 0);
    loop {
        assert!(started.elapsed() < Duration::from_secs(240), "not balanced");
        let status = common::json(running, path, "GET", "/api/balancer").await;
        let last = &status["last_period"];
        if last["at_ms"].as_u64().unwrap_or(0) > last_at {
            last_at = last["at_ms"].as_u64().unwrap();
            match last["outcome"].as_str().unwrap() {
                "applied" => applied += 1,
                "balanced" => break,
                "waiting" => {}
                other => panic!("period {other}: {}", last["detail"]),
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    common::json(running, path, "POST", "/api/balancer/off").await;
    applied
}

/// `mode read`: primaries spread to each OSD's share (64 PGs over 6 equal OSDs: 10 or 11 each)
/// with no data moved: every PG keeps its members, recovery has nothing to copy, and the data
/// reads back from the new primaries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_mode_spreads_primaries_without_moving_data() {
    let dir = tempfile::tempdir().unwrap();
    let running = common::serve(dir.path(), config(), false).await;
    let path = dir.path();
    let rados = running.backend().rados();
    let io = rados.io_ctx("data").await.unwrap();
    for i in 0..200 {
        io.operate(
            &format!("object-{i}"),
            WriteOp::new().write_full(Bytes::from(format!("body {i}"))),
        )
        .await
        .unwrap();
    }
    assert!(running.cluster().unwrap().recover(50).await.unwrap());
    let members = |pgs: &[cluster::PgInfo]| -> BTreeMap<String, Vec<i32>> {
        pgs.iter()
            .map(|pg| {
                let mut set = pg.up.clone();
                set.sort_unstable();
                (pg.pg.clone(), set)
            })
            .collect()
    };
    let primaries = |pgs: &[cluster::PgInfo]| -> BTreeMap<i32, usize> {
        let mut count = BTreeMap::new();
        for pg in pgs {
            *count.entry(pg.acting[0]).or_default() += 1;
        }
        count
    };
    let before = running.cluster().unwrap().pg_list();
    let eval = common::json(&running, path, "GET", "/api/balancer/eval").await;
    assert!(
        eval["primaries"][1]["outside_bounds"].as_u64().unwrap() > 0,
        "CRUSH should leave primaries uneven: {eval}"
    );
    common::json(&running, path, "POST", "/api/balancer/mode/read").await;
    let plan = common::json(&running, path, "POST", "/api/balancer/optimize/r").await;
    assert!(plan["commands"][0]
        .as_str()
        .unwrap()
        .starts_with("ceph osd pg-upmap "));
    assert_eq!(plan["shards_changed"], 0);
    common::json(&running, path, "DELETE", "/api/balancer/plans/r").await;

    run_until_balanced(&running, path).await;
    let after = running.cluster().unwrap().pg_list();
    assert_eq!(members(&after), members(&before), "read mode moved data");
    for pg in &after {
        assert_eq!(pg.state, "active+clean", "pg {} needs recovery", pg.pg);
        assert_eq!(pg.acting, pg.up);
    }
    let count = primaries(&after);
    assert!(
        count.values().all(|&c| (10..=11).contains(&c)),
        "primaries per OSD {count:?} (before {:?})",
        primaries(&before)
    );
    assert_eq!(
        running.cluster().unwrap().osd_map().pg_upmap().len(),
        before
            .iter()
            .zip(&after)
            .filter(|(b, a)| b.acting[0] != a.acting[0])
            .count()
    );
    for i in 0..200 {
        let read = io.read_full(&format!("object-{i}")).await.unwrap();
        assert_eq!(&read[..], format!("body {i}").as_bytes());
    }
    drop(io);
    drop(rados);
    running.shutdown().await.unwrap();
}

/// `mode bytes`: objects of unequal sizes leave the OSDs' bytes uneven even with balanced
/// counts; the periods bring the fullest OSD closer to its share, and every object reads back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_mode_evens_bytes_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let running = common::serve(dir.path(), config(), false).await;
    let path = dir.path();
    let rados = running.backend().rados();
    let io = rados.io_ctx("data").await.unwrap();
    let mut bodies = BTreeMap::new();
    for i in 0..160u64 {
        // Sizes 4 KiB to 256 KiB, skewed so a few PGs hold much of the data.
        let size = 4096 << (i * 7919 % 7);
        let body = Bytes::from(vec![(i % 251) as u8; size as usize]);
        let name = format!("object-{i}");
        io.operate(&name, WriteOp::new().write_full(body.clone()))
            .await
            .unwrap();
        bodies.insert(name, body);
    }
    assert!(running.cluster().unwrap().recover(50).await.unwrap());
    let eval = common::json(&running, path, "GET", "/api/balancer/eval").await;
    let fill_before = eval["bytes"]["fill_max"].as_f64().unwrap();
    assert!(
        fill_before > 1.05,
        "sizes should leave bytes uneven: {eval}"
    );

    common::json(&running, path, "POST", "/api/balancer/mode/bytes").await;
    let applied = run_until_balanced(&running, path).await;
    assert!(applied > 0);
    assert!(running.cluster().unwrap().recover(50).await.unwrap());
    let eval = common::json(&running, path, "GET", "/api/balancer/eval").await;
    let fill_after = eval["bytes"]["fill_max"].as_f64().unwrap();
    assert!(
        fill_after < fill_before - 0.02,
        "fullest OSD {fill_before} -> {fill_after}"
    );
    for (name, body) in &bodies {
        let read = io.read_full(name).await.unwrap();
        assert_eq!(&read[..], &body[..], "{name}");
    }
    drop(io);
    drop(rados);
    running.shutdown().await.unwrap();
}

/// `mode load`: four hot objects read over and over overload their primaries (an OSD leading
/// three of them serves 3x what one leading one does: above half of the busiest's rate); the plan relieves them by moving primaries first, with
/// no data moved, and executing it leaves every PG's members and data in place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_mode_relieves_read_hot_spots_by_primaries() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config();
    config.stats_period_s = 1;
    let running = common::serve(dir.path(), config.clone(), false).await;
    let path = dir.path();
    let rados = running.backend().rados();
    let io = rados.io_ctx("data").await.unwrap();
    for i in 0..64 {
        io.operate(
            &format!("object-{i}"),
            WriteOp::new().write_full(Bytes::from(format!("body {i}"))),
        )
        .await
        .unwrap();
    }
    assert!(running.cluster().unwrap().recover(50).await.unwrap());
    // Reads of 4 hot objects for three statistics periods.
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(3) {
        for i in 0..4 {
            io.read_full(&format!("object-{i}")).await.unwrap();
        }
    }
    let before = running.cluster().unwrap().pg_list();
    common::json(&running, path, "POST", "/api/balancer/mode/load").await;
    common::json(
        &running,
        path,
        "POST",
        "/api/balancer/config?read_threshold=0.5&write_threshold=0.9&hysteresis=0.3",
    )
    .await;
    let (status, _) = common::http(
        &running,
        path,
        "POST",
        "/api/balancer/config?weight_load=0.9",
        b"",
    )
    .await;
    assert_eq!(status, 400, "weights that do not sum to 1 are refused");
    let plan = common::json(&running, path, "POST", "/api/balancer/optimize/hot").await;
    let stats = common::json(&running, path, "GET", "/api/stats?top=5").await;
    assert!(plan["changes"].as_u64().unwrap() > 0, "{plan} {stats}");
    assert_eq!(
        plan["shards_changed"], 0,
        "reads are relieved first: {plan}"
    );
    assert!(plan["commands"][0]
        .as_str()
        .unwrap()
        .starts_with("ceph osd pg-upmap "));
    common::json(&running, path, "POST", "/api/balancer/execute/hot").await;
    let after = running.cluster().unwrap().pg_list();
    let mut changed = 0;
    for (b, a) in before.iter().zip(&after) {
        let (mut x, mut y) = (b.up.clone(), a.up.clone());
        x.sort_unstable();
        y.sort_unstable();
        assert_eq!(x, y, "pg {} members changed", a.pg);
        assert_eq!(a.state, "active+clean");
        changed += usize::from(b.acting[0] != a.acting[0]);
    }
    assert_eq!(changed as u64, plan["changes"].as_u64().unwrap());
    for i in 0..64 {
        let read = io.read_full(&format!("object-{i}")).await.unwrap();
        assert_eq!(&read[..], format!("body {i}").as_bytes());
    }
    drop(io);
    drop(rados);
    running.shutdown().await.unwrap();
}
