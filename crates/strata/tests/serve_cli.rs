//! `strata serve` end to end: the real binary on free ports with a temporary data directory,
//! driven by the CLI (objects, pools, OSDs, status, df, scrub), /metrics parsed, bad requests
//! answered with a 4xx JSON error, a clean SIGTERM stop and a restart that finds the data.

mod serve_common;

use std::process::Command;

use serve_common::{strata, strata_with_input, Server};

#[test]
fn serve_and_drive_with_the_cli() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    assert!(server.s3.is_some(), "S3 endpoint printed");

    let status = server.ok(&["status"]);
    assert!(status.contains("HEALTH_OK"), "{status}");
    assert!(status.contains("9 osds: 9 up, 9 in"), "{status}");

    // Objects: put from a file and from stdin, get to a file and to stdout.
    let payload: Vec<u8> = (0..100_000u32).map(|i| (i * 31 % 251) as u8).collect();
    let file = data.path().join("payload.bin");
    std::fs::write(&file, &payload).unwrap();
    let file_text = file.display().to_string();
    server.ok(&["put", "default", "obj1", &file_text]);
    let out = strata_with_input(
        &server.args(&["put", "default", "dir/with space", "-"]),
        b"from stdin",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let back = data.path().join("back.bin");
    server.ok(&["get", "default", "obj1", &back.display().to_string()]);
    assert_eq!(std::fs::read(&back).unwrap(), payload);
    let out = strata(&server.args(&["get", "default", "dir/with space"]));
    assert_eq!(out.stdout, b"from stdin");
    let listing = server.ok(&["ls", "default"]);
    assert_eq!(listing, "dir/with space\nobj1\n");
    let stat = server.ok(&["stat", "default", "obj1"]);
    assert!(stat.contains("size 100000"), "{stat}");
    server.ok(&["rm", "default", "dir/with space"]);
    assert_eq!(server.ok(&["ls", "default"]), "obj1\n");
    let missing = strata(&server.args(&["get", "default", "dir/with space"]));
    assert!(!missing.status.success());
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("not found"),
        "{}",
        String::from_utf8_lossy(&missing.stderr)
    );

    // Pools.
    let created = server.ok(&[
        "pool", "create", "scratch", "--size", "2", "--pg-num", "8", "--class", "ssd",
    ]);
    assert!(created.contains("pool 'scratch' created"), "{created}");
    assert!(server.ok(&["pool", "ls"]).contains("scratch"));
    let bad = strata(&server.args(&["pool", "create", "toobig", "--size", "4"]));
    assert!(!bad.status.success());
    let message = String::from_utf8_lossy(&bad.stderr);
    assert!(
        message.contains("size") && message.contains("HTTP 400"),
        "{message}"
    );
    let dup = strata(&server.args(&["pool", "create", "scratch"]));
    assert!(String::from_utf8_lossy(&dup.stderr).contains("HTTP 409"));
    server.ok(&["put", "scratch", "x", &file_text]);
    // An object larger than one piece (4 MiB) is striped as the S3 gateway stripes, and
    // comes back whole; its removal takes its pieces (issue 44: put stopped at 64 MiB).
    let large: Vec<u8> = (0..(10u32 << 20) + 12345)
        .map(|i| (i % 251) as u8)
        .collect();
    let large_file = data.path().join("large");
    std::fs::write(&large_file, &large).unwrap();
    server.ok(&["put", "scratch", "large", large_file.to_str().unwrap()]);
    let back = data.path().join("large.back");
    server.ok(&["get", "scratch", "large", back.to_str().unwrap()]);
    assert!(
        std::fs::read(&back).unwrap() == large,
        "the striped object came back changed"
    );
    let pieces = server.ok(&["ls", "scratch"]);
    assert_eq!(pieces.matches("large__shadow_").count(), 2, "{pieces}");
    server.ok(&["rm", "scratch", "large"]);
    assert_eq!(server.ok(&["ls", "scratch"]), "x\n");
    // Removing a pool asks for confirmation, as `ceph osd pool rm` does.
    let unconfirmed = strata(&server.args(&["pool", "rm", "scratch"]));
    assert!(!unconfirmed.status.success());
    assert!(
        String::from_utf8_lossy(&unconfirmed.stderr).contains("--yes-i-really-really-mean-it"),
        "{}",
        String::from_utf8_lossy(&unconfirmed.stderr)
    );
    assert!(server.ok(&["pool", "ls"]).contains("scratch"), "kept");
    server.ok(&["pool", "rm", "scratch", "--yes-i-really-really-mean-it"]);
    assert!(!server.ok(&["pool", "ls"]).contains("scratch"));

    // OSDs.
    let tree = server.ok(&["osd", "tree"]);
    assert!(
        tree.contains("host host2") && tree.contains("osd.8"),
        "{tree}"
    );
    assert!(server.ok(&["osd", "out", "1"]).contains("marked osd.1 out"));
    let status = server.ok(&["status"]);
    assert!(status.contains("1 osds out"), "{status}");
    server.ok(&["osd", "in", "osd.1"]);
    let unknown = strata(&server.args(&["osd", "down", "99"]));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("osd.99"));
    let huge = strata(&server.args(&["osd", "down", "4294967296"]));
    assert!(
        String::from_utf8_lossy(&huge.stderr).contains("not a number from 0 to 65535"),
        "{}",
        String::from_utf8_lossy(&huge.stderr)
    );
    let long_name = "n".repeat(100_000);
    let long = strata(&server.args(&["get", "default", &long_name]));
    assert!(
        String::from_utf8_lossy(&long.stderr).contains("object name of 100000 bytes"),
        "{}",
        String::from_utf8_lossy(&long.stderr)
    );
    // Header, 9 OSDs, TOTAL and the spread (`MIN/MAX VAR ... STDDEV`), as `ceph osd df`.
    let df = server.ok(&["osd", "df"]);
    assert_eq!(df.lines().count(), 12, "{df}");
    assert!(df.contains("STDDEV"), "{df}");
    let tree = server.ok(&["osd", "df", "tree"]);
    assert!(
        tree.contains("host host1") && tree.contains("VAR"),
        "{tree}"
    );

    // Space and scrub.
    let df = server.ok(&["df"]);
    assert!(df.contains("DATA-HOLE%") && df.contains("default"), "{df}");
    let scrub = server.ok(&["scrub", "default"]);
    assert!(scrub.contains("clean"), "{scrub}");
    // PGs: states and unfound objects, and their resolution (none here).
    let pgs = server.ok(&["pg", "ls"]);
    assert!(pgs.contains("active+clean"), "{pgs}");
    let first = pgs
        .lines()
        .nth(1)
        .and_then(|line| line.split_whitespace().next())
        .unwrap_or_else(|| panic!("{pgs}"))
        .to_string();
    let query = server.ok(&["pg", "query", &first]);
    assert!(query.contains(&format!("pg {first}")), "{query}");
    let lost = server.ok(&["pg", "mark-unfound-lost", "delete", &first]);
    assert!(lost.contains("0 unfound objects marked lost"), "{lost}");
    let gc = server.ok(&["gc", "--dry-run", "--grace-s", "0"]);
    assert!(
        gc.contains("orphans 0 (0 bytes)") && gc.contains("removed 0"),
        "{gc}"
    );

    // /metrics: every sample line is `name{labels} value`.
    let (code, body) = server.http("GET", "/metrics", b"");
    assert_eq!(code, 200);
    let text = String::from_utf8(body).unwrap();
    let mut osd_up = 0;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (name, value) = line.rsplit_once(' ').unwrap();
        value
            .parse::<f64>()
            .unwrap_or_else(|_| panic!("bad sample {line}"));
        if name.starts_with("strata_osd_up{") {
            osd_up += 1;
        }
    }
    assert_eq!(osd_up, 9);
    assert!(text.contains("strata_cluster_epoch "));
    assert!(text.contains("strata_pool_objects{pool=\"default\"} 1"));
    assert!(text.contains("strata_pgs{state=\"active+clean\"}"));
    // The S3 gateway's reclamation counters (nothing overwritten yet).
    assert!(text.contains("strata_s3_index_races_total 0"), "{text}");
    assert!(text.contains("strata_s3_gc_enqueued_total 0"), "{text}");

    // Bad requests: 4xx with a JSON error naming the problem.
    let (code, body) = server.http("POST", "/api/pools", b"{\"name\": 5}");
    assert_eq!(code, 400);
    let error: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert!(error["error"].as_str().unwrap().contains("JSON body"));
    let (code, _) = server.http("GET", "/nowhere", b"");
    assert_eq!(code, 404);
    let (code, body) = server.http("POST", "/api/osd/abc/out", b"");
    assert_eq!(code, 400, "{}", String::from_utf8_lossy(&body));

    // The admin API wants the data directory's token; monitoring stays open.
    for authorization in [None, Some("Bearer wrong"), Some("Basic abc")] {
        let (code, body) = server.http_with("GET", "/api/pools", b"", authorization);
        assert_eq!(code, 401, "{authorization:?}");
        let error: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(error["code"], "Unauthorized");
    }
    let (code, _) = server.http_with("POST", "/api/users", b"{\"uid\":\"mallory\"}", None);
    assert_eq!(code, 401, "no user without the token");
    // Other spellings of API paths (the router drops leading slashes and decodes segments)
    // and unknown paths need the token too.
    for (method, path, body) in [
        ("GET", "//api/pools", &b""[..]),
        ("GET", "/%61pi/pools", b""),
        ("POST", "//api/users", b"{\"uid\":\"mallory\"}"),
        ("POST", "///%61pi/pools", b"{\"name\":\"mallory\"}"),
        ("GET", "/nowhere", b""),
    ] {
        let (code, reply) = server.http_with(method, path, body, None);
        assert_eq!(
            code,
            401,
            "{method} {path}: {}",
            String::from_utf8_lossy(&reply)
        );
    }
    let (code, _) = server.http_with("GET", "/status", b"", None);
    assert_eq!(code, 200);
    let (code, _) = server.http_with("GET", "/metrics", b"", None);
    assert_eq!(code, 200);
    let elsewhere = tempfile::tempdir().unwrap();
    let refused = strata(&[
        "pool",
        "ls",
        "--admin",
        &server.admin,
        "--data",
        &elsewhere.path().display().to_string(),
    ]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("no admin token was found"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let by_environment = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["pool", "ls", "--admin", &server.admin])
        .env("STRATA_ADMIN_TOKEN", server.token())
        .current_dir(elsewhere.path())
        .output()
        .unwrap();
    assert!(by_environment.status.success(), "STRATA_ADMIN_TOKEN");

    // Clean stop, restart: the data is there.
    let admin = server.admin.clone();
    let rest = server.stop();
    assert!(rest.iter().any(|l| l.contains("stopped")), "{rest:?}");
    let unreachable = strata(&["status", "--admin", &admin]);
    assert!(
        String::from_utf8_lossy(&unreachable.stderr).contains(&format!(
            "cannot reach strata at {admin}: is `strata serve` running?"
        ))
    );
    // The restart also lays the runtime out for small objects.
    let server = Server::start(data.path(), &["--no-s3", "--poll-while-busy"]);
    assert!(server.s3.is_none());
    let back = data.path().join("back2.bin");
    server.ok(&["get", "default", "obj1", &back.display().to_string()]);
    assert_eq!(std::fs::read(&back).unwrap(), payload);
    assert!(server.ok(&["status"]).contains("9 osds: 9 up, 9 in"));
    server.stop();
}
