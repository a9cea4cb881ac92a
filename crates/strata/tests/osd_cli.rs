//! `strata osd reweight` and `strata osd crush set-device-class|rm-device-class` on a running
//! `strata serve` (issue 44): shown by `osd tree`, refused as Ceph refuses, kept in
//! `cluster.toml` and across a restart, with recovery moving the data and every object
//! reading back.

mod serve_common;

use std::time::{Duration, Instant};

use serve_common::{strata, Server};

/// Waits until every PG is active+clean (recovery done).
fn wait_clean(server: &Server) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let pgs = server.ok(&["pg", "ls"]);
        let clean = pgs
            .lines()
            .skip(1)
            .all(|line| line.contains("active+clean"));
        if clean {
            return;
        }
        assert!(Instant::now() < deadline, "recovery did not finish: {pgs}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The `osd tree` line of `osd.N`.
fn tree_line(server: &Server, id: i32) -> String {
    let tree = server.ok(&["osd", "tree"]);
    let name = format!("osd.{id} ");
    tree.lines()
        .find(|line| line.contains(&name))
        .unwrap_or_else(|| panic!("{tree}"))
        .to_string()
}

fn objects(server: &Server, dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut written = Vec::new();
    for pool in ["default", "fast"] {
        for i in 0..30u32 {
            let name = format!("object-{i}");
            let data: Vec<u8> = (0..2000 + i * 37).map(|b| (b * 7 + i) as u8).collect();
            let file = dir.join(format!("{pool}-{name}"));
            std::fs::write(&file, &data).unwrap();
            server.ok(&["put", pool, &name, file.to_str().unwrap()]);
            written.push((format!("{pool}/{name}"), data));
        }
    }
    written
}

fn check_objects(server: &Server, written: &[(String, Vec<u8>)]) {
    for (path, data) in written {
        let (pool, name) = path.split_once('/').unwrap();
        let out = strata(&server.args(&["get", pool, name]));
        assert!(out.status.success(), "{path}: {out:?}");
        assert!(out.stdout == *data, "{path} came back changed");
    }
}

fn class_in_file(data: &std::path::Path, id: i32) -> String {
    let config = cluster::ClusterConfig::load(&data.join("cluster.toml")).unwrap();
    let osd = config.osds.iter().find(|osd| osd.id == id).unwrap();
    osd.class.clone()
}

#[test]
fn reweight_and_device_classes_on_a_running_server() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    let written = objects(&server, data.path());
    wait_clean(&server);

    // Reweight: shown in the tree, refused out of range, data moves, reads go on.
    assert!(tree_line(&server, 1).ends_with("1.00000"));
    let out = server.ok(&["osd", "reweight", "1", "0.5"]);
    assert!(out.contains("reweighted osd.1 to 0.5"), "{out}");
    assert!(tree_line(&server, 1).ends_with("0.50000"));
    let bad = strata(&server.args(&["osd", "reweight", "1", "2"]));
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("0.0 to 1.0"));
    let unknown = strata(&server.args(&["osd", "reweight", "99", "0.5"]));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("osd.99"));
    check_objects(&server, &written);
    wait_clean(&server);

    // Device classes: osd.1 is hdd; Ceph refuses rebinding it without rm-device-class.
    assert!(tree_line(&server, 1).contains(" hdd "));
    let refused = strata(&server.args(&["osd", "crush", "set-device-class", "ssd", "1"]));
    assert!(!refused.status.success());
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(
        message.contains("rm-device-class 1") && message.contains("HTTP 409"),
        "{message}"
    );
    // Pool "fast" (ssd, 3 replicas) needs the ssd OSD of each of the 3 hosts.
    let refused = strata(&server.args(&["osd", "crush", "rm-device-class", "osd.0"]));
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(message.contains("\"fast\""), "{message}");
    assert_eq!(class_in_file(data.path(), 0), "ssd");

    let out = server.ok(&["osd", "crush", "rm-device-class", "1"]);
    assert!(out.contains("removed the class of osd.1"), "{out}");
    assert_eq!(class_in_file(data.path(), 1), "");
    let out = server.ok(&["osd", "crush", "set-device-class", "ssd", "1"]);
    assert!(out.contains("set osd.1 to class ssd"), "{out}");
    assert_eq!(class_in_file(data.path(), 1), "ssd");
    assert!(tree_line(&server, 1).contains(" ssd "));
    check_objects(&server, &written);
    wait_clean(&server);
    check_objects(&server, &written);

    // A restart keeps both.
    server.stop();
    let server = Server::start(data.path(), &[]);
    let line = tree_line(&server, 1);
    assert!(
        line.contains(" ssd ") && line.ends_with("0.50000"),
        "{line}"
    );
    wait_clean(&server);
    check_objects(&server, &written);
    // `osd in` resets the override weight, as Ceph's does.
    server.ok(&["osd", "in", "1"]);
    assert!(tree_line(&server, 1).ends_with("1.00000"));
    server.stop();
}
