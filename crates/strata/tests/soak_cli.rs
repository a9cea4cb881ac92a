//! `strata bench soak`, short: 5 kill -9 of a real `strata serve` under S3 and object writers
//! on a cluster with a small OSD (it fills up: writes are refused with 507) and a faulty one.
//! The soak exits non-zero on any acknowledged write lost or changed, a flipping read, a
//! scrub error after peering, an undersized PG or a write acknowledged below size; the table
//! must say so too. The long run (>= 100 kills) is in BENCHMARKS.md.

use std::process::Command;

fn row<'a>(table: &'a str, measure: &str) -> &'a str {
    table
        .lines()
        .find(|line| line.starts_with(&format!("| {measure} |")))
        .unwrap_or_else(|| panic!("no row {measure:?} in:\n{table}"))
}

#[test]
fn five_kills_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let seed: u64 = std::env::var("STRATA_SOAK_SEED")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(5);
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["bench", "soak", "--kills", "5", "--small-osd-size", "16M"])
        .args(["--seed", &seed.to_string(), "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    let errors = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "soak failed (seed {seed}):\n{table}\n{errors}"
    );
    assert_eq!(
        row(&table, "kills (kill -9 of strata serve)"),
        "| kills (kill -9 of strata serve) | 5 |  |"
    );
    for measure in [
        "acknowledged writes lost",
        "acknowledged writes changed",
        "reads during writes neither acknowledged nor in flight",
        "scrub errors after peering",
        "objects scrub reported lost",
        "writes acknowledged on fewer than size replicas",
        "PGs below size once settled",
    ] {
        assert_eq!(
            row(&table, measure),
            format!("| {measure} | 0 | 0 |"),
            "{table}"
        );
    }
    let acknowledged: u64 = row(&table, "acknowledged writes (PUT, overwrite, DELETE)")
        .split('|')
        .nth(2)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(acknowledged > 0, "{table}");
    // The small OSD filled up: writes were refused at full, not acknowledged below size.
    assert!(
        row(&table, "refusals and failures by kind").contains("full (507)"),
        "{table}"
    );
    assert!(
        std::fs::read_dir(dir.path()).unwrap().next().is_none(),
        "the run's directory is removed"
    );
}
