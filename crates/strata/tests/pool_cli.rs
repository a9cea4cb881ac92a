//! `strata osd pool set|get` of placement settings and quotas on a running `strata serve`
//! (issue 44): refused as Ceph refuses, quotas enforced on writes (deletes allowed), a size
//! change recovered, shown by `osd pool ls detail` and `df`, kept across a restart.

mod serve_common;

use std::time::{Duration, Instant};

use serve_common::{strata, Server};

/// The acting sets of pool `id`'s PGs.
fn acting_sets(server: &Server, id: &str) -> Vec<Vec<i64>> {
    let (status, body) = server.http("GET", "/api/pg", b"");
    assert_eq!(status, 200);
    let pgs: Vec<serde_json::Value> = serde_json::from_slice(&body).unwrap();
    pgs.iter()
        .filter(|pg| pg["pg"].as_str().unwrap().split('.').next() == Some(id))
        .map(|pg| {
            let clean = pg["state"].as_str() == Some("active+clean");
            let acting: Vec<i64> = pg["acting"]
                .as_array()
                .unwrap()
                .iter()
                .map(|osd| osd.as_i64().unwrap())
                .collect();
            if clean {
                acting
            } else {
                Vec::new()
            }
        })
        .collect()
}

fn put(server: &Server, dir: &std::path::Path, name: &str) -> std::process::Output {
    let file = dir.join(name);
    std::fs::write(&file, name.repeat(100)).unwrap();
    strata(&server.args(&["put", "q", name, file.to_str().unwrap()]))
}

fn refused(server: &Server, args: &[&str], text: &str) {
    let out = strata(&server.args(args));
    let message = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && message.contains(text),
        "{args:?}: {message}"
    );
}

#[test]
fn pool_settings_and_quotas_on_a_running_server() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    let out = server.ok(&["pool", "create", "q", "--size", "2", "--pg-num", "8"]);
    let id = out
        .split("(id ")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap()
        .to_string();
    let get = |key: &str| server.ok(&["osd", "pool", "get", "q", key]);
    assert_eq!(get("size").trim(), "size: 2");

    // Refused as Ceph refuses, nothing changed.
    refused(
        &server,
        &["osd", "pool", "set", "q", "min_size", "3"],
        "pool min_size must be between 1 and size, which is set to 2",
    );
    refused(
        &server,
        &["osd", "pool", "set", "q", "pg_num", "16"],
        "PG splitting",
    );
    refused(
        &server,
        &["osd", "pool", "set", "q", "size", "x"],
        "whole number",
    );
    refused(
        &server,
        &["osd", "pool", "set", "nope", "size", "2"],
        "nope",
    );
    assert_eq!(get("min_size").trim(), "min_size: 1");

    // Quota on objects: the third put fails, a delete makes room.
    server.ok(&["osd", "pool", "set", "q", "quota_max_objects", "2"]);
    assert!(put(&server, data.path(), "a").status.success());
    assert!(put(&server, data.path(), "b").status.success());
    let third = put(&server, data.path(), "c");
    let message = String::from_utf8_lossy(&third.stderr);
    assert!(
        !third.status.success() && message.contains("quota exceeded"),
        "{message}"
    );
    server.ok(&["rm", "q", "a"]);
    assert!(put(&server, data.path(), "c").status.success());
    let detail = server.ok(&["osd", "pool", "ls", "detail"]);
    assert!(
        detail.contains("'q' replicated size 2") && detail.contains("max_objects 2"),
        "{detail}"
    );
    let df = server.ok(&["df"]);
    let line = df.lines().find(|line| line.starts_with("q ")).unwrap();
    // QUOTA-OBJECTS, then QUOTA-BYTES (sizes hold a space: "400 B").
    let mut columns = line.split_whitespace().rev();
    assert_eq!(
        (columns.next(), columns.next()),
        (Some("N/A"), Some("2")),
        "{df}"
    );

    // Size 2 -> 3: every PG gets a third OSD.
    server.ok(&["osd", "pool", "set", "q", "size", "3"]);
    let all = get("all");
    assert!(
        all.contains("size: 3") && all.contains("min_size: 2"),
        "{all}"
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let sets = acting_sets(&server, &id);
        if !sets.is_empty() && sets.iter().all(|acting| acting.len() == 3) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "size 3 was not recovered: {sets:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    for name in ["b", "c"] {
        let out = strata(&server.args(&["get", "q", name]));
        assert_eq!(out.stdout, name.repeat(100).into_bytes());
    }

    // Kept across a restart, and still enforced.
    server.stop();
    let server = Server::start(data.path(), &[]);
    let all = server.ok(&["osd", "pool", "get", "q", "all"]);
    assert!(
        all.contains("size: 3") && all.contains("quota_max_objects: 2"),
        "{all}"
    );
    assert!(!put(&server, data.path(), "d").status.success());
    server.ok(&["osd", "pool", "set", "q", "quota_max_objects", "0"]);
    assert!(put(&server, data.path(), "d").status.success());
    server.stop();
}
