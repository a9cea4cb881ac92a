//! Smoke tests of `strata bench cluster` and `strata bench s3` without their Ceph peers (a
//! real Ceph run takes minutes and several GB; the closing figures are run by hand, see the
//! modules' docs): each runs the real embedded cluster (and the real HTTP gateway) for a few
//! hundred operations and must print a table with every row and a JSON file that agrees.

use std::path::Path;
use std::process::Command;

fn bench(args: &[&str], dir: &Path) -> (String, serde_json::Value) {
    let json = dir.join("rows.json");
    let output = Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("bench")
        .args(args)
        .arg("--dir")
        .arg(dir)
        .arg("--json")
        .arg(&json)
        .output()
        .expect("run strata");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "strata bench {args:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let rows = serde_json::from_slice(&std::fs::read(&json).expect("JSON written")).expect("JSON");
    (stdout, rows)
}

/// The strata rows of the table: (size, op) -> ops column.
fn strata_rows(stdout: &str) -> Vec<(String, String, u64)> {
    stdout
        .lines()
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            (words.get(2) == Some(&"strata")).then(|| {
                (
                    words[0].to_string(),
                    words[1].to_string(),
                    words[8].parse().expect("ops column"),
                )
            })
        })
        .collect()
}

fn check(stdout: &str, json: &serde_json::Value, ops: [&str; 2]) {
    let rows = strata_rows(stdout);
    let expected: Vec<(String, String, u64)> = ["4K", "64K"]
        .iter()
        .flat_map(|size| {
            ops.iter()
                .map(move |op| (size.to_string(), op.to_string(), 100))
        })
        .collect();
    assert_eq!(rows, expected, "table:\n{stdout}");
    let json_rows = json["rows"].as_array().expect("rows");
    assert_eq!(json_rows.len(), 4);
    for row in json_rows {
        assert_eq!(row["system"], "strata");
        assert_eq!(row["ops"], 100);
        assert!(
            row["latency_ms_p99"].as_f64().expect("p99")
                >= row["latency_ms_p50"].as_f64().expect("p50")
        );
    }
}

#[test]
fn bench_cluster_prints_every_row_without_peers() {
    let dir = tempfile::tempdir().unwrap();
    let (stdout, json) = bench(
        &[
            "cluster",
            "--no-ceph",
            "--no-fio",
            "--ops",
            "100",
            "--sizes",
            "4K,64K",
            "--concurrency",
            "4",
            "--osd-size",
            "1G",
            "--osd-layout",
            "32M",
            "--seconds",
            "60",
        ],
        dir.path(),
    );
    check(&stdout, &json, ["write", "read"]);
    assert_eq!(json["settings"]["osd_layout_bytes"], 32 << 20);
    assert!(stdout.contains("laid out for their first 32M"), "{stdout}");
    assert!(stdout.contains("strata/ceph"));
    // Under the table, each write phase's group commit: replica writes and device writes
    // per device flush.
    for size in ["4K", "64K"] {
        let note = format!("strata {size} write: ");
        let line = stdout
            .lines()
            .find(|line| line.starts_with(&note))
            .unwrap_or_else(|| panic!("no {note:?} line in {stdout}"));
        assert!(line.contains(" replica writes and "), "{line}");
        assert!(line.contains(" device writes per device flush"), "{line}");
    }
    // And each read phase's share of reads the stores' data caches served (256 MiB each by
    // default; 64K reads are small enough to use them).
    for size in ["4K", "64K"] {
        let note = format!("strata {size} read: ");
        let line = stdout
            .lines()
            .find(|line| line.starts_with(&note))
            .unwrap_or_else(|| panic!("no {note:?} line in {stdout}"));
        assert!(
            line.contains("% of the replica reads from the stores' data caches (")
                && line.contains(" of 100;"),
            "{line}"
        );
    }
    // The run's temporary directory is removed at the end: only the JSON file remains.
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "only rows.json remains: {leftovers:?}");
}

#[test]
fn bench_cluster_rounds_pair_strata_with_fio_of_the_same_round() {
    if Command::new("fio").arg("--version").output().is_err() {
        eprintln!("note: fio not installed (scripts/test.sh installs it); skipping");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (stdout, json) = bench(
        &[
            "cluster",
            "--no-ceph",
            "--rounds",
            "2",
            "--ops",
            "200",
            "--sizes",
            "4K",
            "--concurrency",
            "4",
            "--osd-size",
            "1G",
            "--osd-layout",
            "32M",
            "--fio-size",
            "16M",
            "--seconds",
            "1",
            "--data-cache-size",
            "0",
        ],
        dir.path(),
    );
    assert_eq!(json["settings"]["rounds"], 2);
    // One row per system: its median round.
    let systems: Vec<&str> = json["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|row| row["system"].as_str().expect("system"))
        .collect();
    assert_eq!(
        systems,
        [
            "strata",
            "strata",
            "fio (disk limit)",
            "fio fdatasync/batch",
            "fio (disk limit)"
        ],
        "{stdout}"
    );
    assert!(stdout.contains("2 rounds of strata then fio"), "{stdout}");
    // Every round's group commit, and every round's ratio per operation.
    for round in ["round 1: strata 4K write: ", "round 2: strata 4K write: "] {
        assert!(stdout.lines().any(|l| l.starts_with(round)), "{stdout}");
    }
    // `--data-cache-size 0`: every read went to the device.
    for round in ["round 1", "round 2"] {
        let line = format!("{round}: strata 4K read: the stores' data caches were not used");
        assert!(stdout.lines().any(|l| l == line), "{stdout}");
    }
    for op in ["write", "read"] {
        let note = format!("strata 4K {op} per round: ");
        let line = stdout
            .lines()
            .find(|line| line.starts_with(&note))
            .unwrap_or_else(|| panic!("no {note:?} line in {stdout}"));
        assert_eq!(line.matches("x (").count(), 2, "two rounds: {line}");
        assert!(line.contains("; strata/fio (disk limit): "), "{line}");
        assert!(line.contains("; median "), "{line}");
    }
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "only rows.json remains: {leftovers:?}");
}

#[test]
fn bench_s3_prints_every_row_without_radosgw() {
    let dir = tempfile::tempdir().unwrap();
    let (stdout, json) = bench(
        &[
            "s3",
            "--no-radosgw",
            "--ops",
            "100",
            "--sizes",
            "4K,64K",
            "--concurrency",
            "4",
            "--osd-size",
            "1G",
            "--seconds",
            "60",
        ],
        dir.path(),
    );
    check(&stdout, &json, ["PUT", "GET"]);
    assert!(stdout.contains("strata/rgw"));
    // The run's temporary directory is removed at the end: only the JSON file remains.
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "only rows.json remains: {leftovers:?}");
}

#[test]
fn bad_sizes_are_refused_with_a_message() {
    let output = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["bench", "cluster", "--no-ceph", "--no-fio", "--sizes", "4X"])
        .output()
        .expect("run strata");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("unknown unit"), "{stderr}");
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["bench", "cluster", "--no-ceph", "--no-fio"])
        .args(["--data-cache-size", "lots", "--dir"])
        .arg(dir.path())
        .output()
        .expect("run strata");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--data-cache-size: \"lots\" is not a size like 64M or 0"),
        "{stderr}"
    );
}

/// `strata bench pack` on a few hundred objects: every table, the GC line, and the packed
/// objects' holes never above the unpacked ones' (each pack pads once, not once per object).
#[test]
fn bench_pack_prints_holes_metadata_and_gc() {
    let dir = tempfile::tempdir().expect("temp dir");
    let output = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args([
            "bench",
            "pack",
            "--objects",
            "300",
            "--sizes",
            "5K",
            "--group-counts",
            "5",
            "--concurrency",
            "16",
            "--replicas",
            "1",
            "--osd-size",
            "1G",
            "--dir",
        ])
        .arg(dir.path())
        .output()
        .expect("run strata");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "strata bench pack failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let holes: Vec<u64> = stdout
        .lines()
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            (words.first() == Some(&"5120")).then(|| words[4].parse().expect("hole bytes"))
        })
        .collect();
    assert_eq!(holes.len(), 2, "an off and an on row:\n{stdout}");
    assert!(holes[1] <= holes[0], "packing added holes:\n{stdout}");
    assert!(stdout.contains("hole bytes with packing"), "{stdout}");
    assert!(stdout.contains("Metadata"), "{stdout}");
    assert!(
        stdout.contains("GC: 300 packed 4 KiB objects, 150 deleted"),
        "{stdout}"
    );
    assert!(
        stdout.contains("of the deleted bytes given back"),
        "{stdout}"
    );
}
