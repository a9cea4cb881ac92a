//! `strata sim cache` end to end: runs the binary on the shipped cloudPhysicsIO fixture.

use std::path::Path;
use std::process::Command;

fn strata(args: &[&str]) -> (bool, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
        .output()
        .unwrap_or_else(|e| panic!("running strata: {e}"));
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn number_after(text: &str, field: &str) -> f64 {
    let start = text
        .find(&format!("\"{field}\": "))
        .unwrap_or_else(|| panic!("no {field} in {text}"))
        + field.len()
        + 4;
    let rest = &text[start..];
    let end = rest.find([',', '\n', '}']).unwrap_or(rest.len());
    rest[..end]
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("bad {field}: {}", &rest[..end]))
}

#[test]
fn cache_json_holds_the_required_fields() {
    let (ok, stdout, stderr) = strata(&[
        "sim",
        "cache",
        "--trace",
        "fixtures/traces/cloudPhysicsIO.csv.zst",
        "--policy",
        "lru",
        "--cache-size",
        "10%",
        "--json",
    ]);
    assert!(ok, "{stderr}");
    for field in [
        "policy",
        "cache_size_objects",
        "requests",
        "miss_ratio",
        "byte_miss_ratio",
        "cache_writes",
    ] {
        assert!(
            stdout.contains(&format!("\"{field}\"")),
            "missing {field}: {stdout}"
        );
    }
    assert_eq!(number_after(&stdout, "cache_size_objects"), 4897.0);
    assert_eq!(number_after(&stdout, "requests"), 113_872.0);
    assert!((number_after(&stdout, "miss_ratio") - 0.8049).abs() < 0.005);
}

#[test]
fn sweeps_print_a_table_csv_and_plot() {
    let plot = std::env::temp_dir().join(format!("strata-sim-{}.svg", std::process::id()));
    let plot_arg = plot.to_string_lossy().into_owned();
    let (ok, stdout, stderr) = strata(&[
        "sim",
        "cache",
        "--trace",
        "fixtures/traces/request.trace.xz",
        "--policy",
        "lru,sieve+second-hit,hottable",
        "--cache-size",
        "1%,500",
        "-H",
        "0.5,2",
        "--period",
        "1000r",
        "--csv",
        "--plot",
        &plot_arg,
    ]);
    assert!(ok, "{stderr}");
    // lru x 2 sizes + sieve x 2 + hottable x 2 sizes x 2 thresholds, plus the header.
    assert_eq!(stdout.lines().count(), 1 + 2 + 2 + 4, "{stdout}");
    let svg = std::fs::read_to_string(&plot).unwrap_or_default();
    assert!(svg.starts_with("<svg") && svg.contains("polyline"));
    let _ = std::fs::remove_file(plot);
}

#[test]
fn unknown_policy_fails_with_a_message() {
    let (ok, _, stderr) = strata(&[
        "sim",
        "cache",
        "--trace",
        "fixtures/traces/request.trace.xz",
        "--policy",
        "mru",
        "--cache-size",
        "1%",
    ]);
    assert!(!ok);
    assert!(stderr.contains("unknown policy"), "{stderr}");
}

/// `strata sim compare --late` scores the 15 late synthetic hold-out cells (under a second).
#[test]
fn compare_scores_the_late_hold_outs() {
    let (ok, stdout, stderr) = strata(&["sim", "compare", "--late"]);
    assert!(ok, "{stderr}");
    assert_eq!(stdout.matches("| late-").count(), 15, "{stdout}");
    assert!(stdout.contains("of 15 cells"), "{stdout}");
}
