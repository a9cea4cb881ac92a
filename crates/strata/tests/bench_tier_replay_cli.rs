//! `strata bench tier --scenarios replay` on cloudPhysicsIO (the project's fixture, all of it):
//! the live tier and the simulator, running Ceph's tier policy and seed 000's hot table
//! (`predictive`) on the same trace and cache size, give hit ratios within 0.02 of each other,
//! and every request's background work settled before the next was sent.

use std::process::Command;

#[test]
fn a_short_replay_hits_as_the_simulator_does() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("replay.json");
    let trace = format!(
        "{}/../../fixtures/traces/cloudPhysicsIO.csv.zst",
        env!("CARGO_MANIFEST_DIR")
    );
    let output = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args([
            "bench",
            "tier",
            "--scenarios",
            "replay",
            "--configs",
            "ceph,predictive",
        ])
        .args(["--trace", &trace])
        .arg("--dir")
        .arg(dir.path())
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("Live against simulated"), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let replays = report["replay"].as_array().expect("replay results");
    assert_eq!(replays.len(), 2, "{report}");
    for (replay, config) in replays.iter().zip(["ceph", "predictive"]) {
        assert_eq!(replay["config"], config);
        assert!(replay["requests"].as_u64().unwrap() > 100_000, "{replay}");
        assert_eq!(replay["unsettled"], 0, "{replay}");
        let live = replay["live_hit_ratio"].as_f64().unwrap();
        let simulated = replay["simulated_hit_ratio"].as_f64().unwrap();
        assert!(live > 0.0, "{replay}");
        assert!((live - simulated).abs() <= 0.02, "{replay}");
    }
}
