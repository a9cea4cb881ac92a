//! `strata osd tier` on a running `strata serve`: a cache pool over a base pool configured as
//! Ceph names it (bad settings refused with the reason), a block volume on the base pool
//! written and read by qemu-io through the overlay, `strata serve` killed with SIGKILL while
//! the cache holds dirty objects, and after the restart every write read back, the cache
//! flushed and emptied the documented way, and the volume read back from the base pool alone.

mod serve_common;

use std::process::Command;
use std::time::{Duration, Instant};

use serve_common::{strata, Server};

fn run(program: &str, arguments: &[&str]) -> String {
    let output = Command::new(program)
        .args(arguments)
        .output()
        .unwrap_or_else(|error| panic!("{program}: {error} (scripts/test.sh installs qemu-utils)"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "{program} {arguments:?} failed:\n{text}"
    );
    text
}

fn uri(server: &Server) -> String {
    format!("nbd+unix:///base/vm?socket={}/nbd.sock", server.data)
}

fn qemu_io(server: &Server, commands: &[&str]) -> String {
    let mut arguments = vec!["-f", "raw"];
    for command in commands {
        arguments.extend(["-c", command]);
    }
    let uri = uri(server);
    arguments.push(&uri);
    let out = run("qemu-io", &arguments);
    assert!(!out.contains("Pattern verification failed"), "{out}");
    out
}

fn fails_with(server: &Server, arguments: &[&str], message: &str) {
    let out = strata(&server.args(arguments));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains(message),
        "{arguments:?} should fail naming {message:?}: {stderr}"
    );
}

#[test]
fn a_cache_tier_serves_a_volume_and_survives_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--no-s3", "--nbd-port", "0"]);
    server.ok(&["pool", "create", "base", "--size", "3"]);
    server.ok(&["pool", "create", "cache", "--size", "3"]);

    // Bad commands and settings are refused with the reason.
    fails_with(
        &server,
        &["osd", "tier", "add", "base", "base"],
        "tier of itself",
    );
    fails_with(
        &server,
        &["osd", "tier", "add", "base", "nope"],
        "unrecognized pool",
    );
    server.ok(&["osd", "tier", "add", "base", "cache"]);
    fails_with(
        &server,
        &["osd", "tier", "add", "base", "cache"],
        "already a tier",
    );
    fails_with(
        &server,
        &["osd", "tier", "cache-mode", "cache", "forward"],
        "removed",
    );
    fails_with(
        &server,
        &["osd", "tier", "cache-mode", "cache", "readonly"],
        "yes-i-really-mean-it",
    );
    fails_with(
        &server,
        &[
            "osd",
            "pool",
            "set",
            "cache",
            "cache_target_dirty_ratio",
            "2",
        ],
        "between 0 and 1",
    );
    fails_with(
        &server,
        &["osd", "pool", "set", "cache", "no_such", "1"],
        "unknown cache pool setting",
    );
    fails_with(
        &server,
        &["osd", "pool", "set", "base", "hit_set_count", "1"],
        "not a cache tier",
    );
    fails_with(
        &server,
        &["pool", "rm", "cache", "--yes-i-really-really-mean-it"],
        "remove the tier first",
    );

    server.ok(&["osd", "pool", "set", "cache", "hit_set_count", "0"]);
    server.ok(&["osd", "pool", "set", "cache", "cache_min_flush_age", "3600"]);
    let got = server.ok(&["osd", "pool", "get", "cache", "hit_set_count"]);
    assert!(got.contains("hit_set_count: 0"), "{got}");
    server.ok(&["osd", "tier", "cache-mode", "cache", "writeback"]);
    server.ok(&["osd", "tier", "set-overlay", "base", "cache"]);
    fails_with(
        &server,
        &["osd", "tier", "remove", "base", "cache"],
        "remove-overlay first",
    );

    // A volume on the base pool, through the tier.
    server.ok(&["volume", "create", "base/vm", "--size", "32M"]);
    qemu_io(
        &server,
        &[
            "write -P 0x5a 1M 3M",
            "write -P 0x11 8M 4k",
            "read -P 0x5a 1M 3M",
        ],
    );
    let stats = server.ok(&["osd", "pool", "stats", "cache"]);
    assert!(
        stats.contains("pool cache (cache tier of base, writeback"),
        "{stats}"
    );
    let listed = server.ok(&["osd", "tier", "ls"]);
    assert!(
        listed.contains("writeback") && listed.contains("yes"),
        "{listed}"
    );
    let dirty_line = stats
        .lines()
        .find(|l| l.contains(" dirty,"))
        .unwrap_or_default()
        .to_string();
    assert!(
        !dirty_line.contains(" 0 dirty"),
        "writes are dirty in the cache: {stats}"
    );

    // kill -9 with dirty objects in the cache.
    server.kill();
    let server = Server::start(dir.path(), &["--no-s3", "--nbd-port", "0"]);
    qemu_io(
        &server,
        &["read -P 0x5a 1M 3M", "read -P 0x11 8M 4k", "read -P 0 0 1M"],
    );
    fails_with(
        &server,
        &["osd", "tier", "remove-overlay", "base"],
        "flush-evict-all",
    );

    // Stop caching the documented way; everything ends in the base pool.
    server.ok(&["osd", "tier", "cache-mode", "cache", "proxy"]);
    server.ok(&["osd", "tier", "flush-evict-all", "cache"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = strata(&server.args(&["osd", "tier", "remove-overlay", "base"]));
        if out.status.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the cache did not empty: {}",
            server.ok(&["osd", "pool", "stats", "cache"])
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    server.ok(&["osd", "tier", "remove", "base", "cache"]);
    qemu_io(
        &server,
        &["read -P 0x5a 1M 3M", "read -P 0x11 8M 4k", "read -P 0 0 1M"],
    );
    let rest = server.stop();
    assert!(rest.iter().all(|l| !l.contains("panicked")), "{rest:?}");
}
