//! `strata bench balance-load` at tiny sizes: the three placements run, each rate gets a row
//! per placement, the upmap balancer's rebalances stay within the movement budget, and the SVGs
//! are written.

use std::process::Command;

#[test]
fn a_tiny_run_measures_every_placement() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("balance-load.svg");
    let output = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["bench", "balance-load", "--rates", "100,400"])
        .args(["--step-s", "1", "--rounds", "1", "--objects", "64"])
        .args(["--pg-num", "16", "--period-s", "1"])
        .args(["--load-periods-max", "2"])
        .args(["--nvme-size", "32M"])
        .arg("--dir")
        .arg(dir.path())
        .arg("--svg")
        .arg(&svg)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    for placement in ["crush", "upmap", "load"] {
        let rows = stdout
            .lines()
            .filter(|line| line.split_whitespace().next() == Some(placement))
            .count();
        // Two steps and one line of rebalances.
        assert_eq!(rows, 3, "{placement}: {stdout}");
    }
    assert!(stdout.contains("variance load/crush"), "{stdout}");
    // Every rebalance moves at most the budget's share of the pool (5 %).
    for line in stdout.lines().filter(|l| l.contains("%)")) {
        let share: f64 = line
            .split('(')
            .nth(1)
            .and_then(|s| s.split('%').next())
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(share <= 5.0 + 1e-9, "{line}");
    }
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<polyline"));
    assert!(dir.path().join("balance-load-served.svg").exists());
    // The cluster's files are gone.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("strata-bench"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
