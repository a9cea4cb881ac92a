//! `strata osd tier` on `strata serve --backend ceph` (issue 37): on a real Ceph cluster
//! (scripts/ceph-minicluster.sh, memstore), a cache pool is configured over a base pool through
//! the CLI on the running server, a block volume on the base pool is written by qemu-io through
//! the overlay, the writes are dirty in the cache pool, and after `flush-evict-all` Ceph's own
//! `rados` tool finds the data in the base pool and nothing left in the cache pool. Skips when
//! Ceph is missing and `STRATA_SKIP_CEPH=1`.

mod serve_common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serve_common::{strata, Server};

const BASE: &str = "tcbase";
const CACHE: &str = "tccache";

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

fn qemu_io(server: &Server, commands: &[&str]) {
    let mut arguments = vec!["-f", "raw"];
    for command in commands {
        arguments.extend(["-c", command]);
    }
    let uri = format!("nbd+unix:///{BASE}/vm?socket={}/nbd.sock", server.data);
    arguments.push(&uri);
    let out = run("qemu-io", &arguments);
    assert!(!out.contains("Pattern verification failed"), "{out}");
}

/// `rados -c CONF -p POOL ARGS...`, Ceph's own client: its standard output.
fn rados(conf: &Path, pool: &str, arguments: &[&str]) -> Vec<u8> {
    let output = Command::new("rados")
        .arg("-c")
        .arg(conf)
        .args(["-p", pool])
        .args(arguments)
        .output()
        .expect("running rados (ceph-common)");
    assert!(
        output.status.success(),
        "rados -p {pool} {arguments:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

fn rados_ls(conf: &Path, pool: &str) -> Vec<String> {
    String::from_utf8(rados(conf, pool, &["ls"]))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn a_cache_tier_configured_by_the_cli_flushes_to_a_ceph_base_pool() {
    let Some(cluster) = ceph_backend::minicluster::shared() else {
        return;
    };
    let conf = cluster.conf();
    let dir = tempfile::tempdir().unwrap();
    let conf_text = conf.display().to_string();
    let server = Server::start(
        dir.path(),
        &[
            "--backend",
            "ceph",
            "--ceph-conf",
            &conf_text,
            "--no-s3",
            "--nbd-port",
            "0",
        ],
    );
    server.ok(&["pool", "create", BASE, "--size", "3"]);
    server.ok(&["pool", "create", CACHE, "--size", "3"]);
    server.ok(&["osd", "tier", "add", BASE, CACHE]);
    for (key, value) in [
        // Ceph's admission without hit sets promotes on the first access (predictive
        // admission learns over a period first), whole objects (the family's granularity).
        ("tier_admission", "ceph"),
        ("hit_set_count", "0"),
        // The agent stays idle until asked: nothing is over target, nothing old enough.
        ("target_max_objects", "1000"),
        ("cache_min_flush_age", "3600"),
    ] {
        server.ok(&["osd", "pool", "set", CACHE, key, value]);
    }
    server.ok(&["osd", "tier", "cache-mode", CACHE, "writeback"]);
    server.ok(&["osd", "tier", "set-overlay", BASE, CACHE]);
    let detail = server.ok(&["osd", "pool", "ls", "detail"]);
    assert!(
        detail.contains(&format!("tier_of '{BASE}'"))
            && detail.contains("tier_promote_granularity family"),
        "{detail}"
    );

    server.ok(&["volume", "create", &format!("{BASE}/vm"), "--size", "32M"]);
    qemu_io(
        &server,
        &[
            "write -P 0x5a 1M 3M",
            "write -P 0x11 8M 4k",
            "read -P 0x5a 1M 3M",
        ],
    );
    let stats = server.ok(&["osd", "pool", "stats", CACHE]);
    let dirty_line = stats
        .lines()
        .find(|l| l.contains(" dirty,"))
        .unwrap_or_default()
        .to_string();
    assert!(
        !dirty_line.is_empty() && !dirty_line.contains(" 0 dirty"),
        "the writes are dirty in the cache pool: {stats}"
    );
    let data_objects = |pool: &str| -> Vec<String> {
        rados_ls(&conf, pool)
            .into_iter()
            .filter(|name| name.starts_with("rbd_data."))
            .collect()
    };
    assert!(
        !data_objects(CACHE).is_empty(),
        "Ceph holds the volume's data objects in the cache pool"
    );

    server.ok(&["osd", "tier", "cache-mode", CACHE, "proxy"]);
    server.ok(&["osd", "tier", "flush-evict-all", CACHE]);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let out = strata(&server.args(&["osd", "tier", "remove-overlay", BASE]));
        if out.status.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the cache did not empty: {}",
            server.ok(&["osd", "pool", "stats", CACHE])
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    server.ok(&["osd", "tier", "remove", BASE, CACHE]);

    // Ceph's own tool: the data is in the base pool, nothing is left in the cache pool.
    assert!(data_objects(CACHE).is_empty(), "{:?}", data_objects(CACHE));
    let in_base = data_objects(BASE);
    let first = in_base
        .iter()
        .find(|name| name.ends_with(".0000000000000000"))
        .unwrap_or_else(|| panic!("object 0 of the volume in the base pool: {in_base:?}"));
    let file = dir.path().join("object0");
    rados(&conf, BASE, &["get", first, file.to_str().unwrap()]);
    let bytes = std::fs::read(&file).unwrap();
    assert!(bytes.len() >= 4 << 20, "object 0 is {} bytes", bytes.len());
    assert!(bytes[..1 << 20].iter().all(|b| *b == 0), "zeros before 1M");
    assert!(
        bytes[1 << 20..4 << 20].iter().all(|b| *b == 0x5a),
        "the flushed write"
    );
    let second = in_base
        .iter()
        .find(|name| name.ends_with(".0000000000000002"))
        .unwrap_or_else(|| panic!("object 2 of the volume in the base pool: {in_base:?}"));
    rados(&conf, BASE, &["get", second, file.to_str().unwrap()]);
    let bytes = std::fs::read(&file).unwrap();
    assert!(bytes.len() >= 4096 && bytes[..4096].iter().all(|b| *b == 0x11));

    // The volume reads back through strata from the base pool alone.
    qemu_io(&server, &["read -P 0x5a 1M 3M", "read -P 0x11 8M 4k"]);
    let rest = server.stop();
    assert!(rest.iter().all(|l| !l.contains("panicked")), "{rest:?}");
}
