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

/// Runs strata from `dir` (not the workspace root).
fn strata_in(dir: &Path, args: &[&str]) -> (bool, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("running strata: {e}"));
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Bad options are refused before any run, with what is wrong; they used to be read as
/// something else (a bare decimal as bytes, `0s` as 1 ms, `-a 2` or NaN as given, knobs after
/// `lru:` dropped) and the run went ahead.
#[test]
fn bad_options_are_refused_with_what_is_wrong() {
    let trace = "fixtures/traces/request.trace.xz";
    for (extra, expected) in [
        (vec!["--cache-size", "4897.0"], "whole number of objects"),
        (vec!["--cache-size", "100B"], "less than one object"),
        (vec!["--period", "0s"], "period `0s`"),
        (vec!["--period", "NaNs"], "period `NaNs`"),
        (vec!["--period", "0r"], "at least 1r"),
        (vec!["--hdd-op-us=-100000"], "hdd_op_us"),
        (vec!["--ssd-op-us", "NaN"], "ssd_op_us"),
        (vec!["--mapping", "record:4K"], "record takes no size"),
        (vec!["--policy", "hottable", "-a", "2"], "outside (0, 1]"),
        (vec!["--policy", "hottable", "-H", "NaN"], "finite"),
        (vec!["--policy", "lru:small=0.5"], "only strata takes knobs"),
        (vec!["--policy", "strata:budget=NaN"], "[0, inf]"),
        (vec!["--plot", "/tmp/x.png"], "ending in .svg"),
        (
            vec!["--plot", "/nonexistent/dir/x.svg"],
            "cannot write the plot",
        ),
    ] {
        let mut args = vec!["sim", "cache", "--trace", trace, "--cache-size", "1%"];
        if !extra.contains(&"--policy") {
            args.extend(["--policy", "lru"]);
        }
        args.extend(extra.iter().copied());
        let (ok, _, stderr) = strata(&args);
        assert!(!ok, "{extra:?} was accepted");
        assert!(stderr.contains(expected), "{extra:?}: {stderr}");
    }
}

/// `--per-period --csv` prints one CSV (a row per run and period); the per-period text tables
/// used to follow the CSV.
#[test]
fn per_period_csv_is_one_csv() {
    let (ok, stdout, stderr) = strata(&[
        "sim",
        "cache",
        "--trace",
        "fixtures/traces/request.trace.xz",
        "--policy",
        "lru",
        "--cache-size",
        "5%",
        "--period",
        "10000r",
        "--per-period",
        "--csv",
    ]);
    assert!(ok, "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("trace,policy,cache_size_objects,threshold,smoothing,period,"));
    let columns = lines[0].split(',').count();
    assert!(lines.len() > 2, "{stdout}");
    for line in &lines {
        assert_eq!(line.split(',').count(), columns, "{line}");
    }
}

/// seed003 honours --csv and --plot, as its --help says, and refuses an empty ramp.
#[test]
fn seed003_writes_csv_and_a_plot_and_refuses_nothing_to_run() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let plot = dir.path().join("ramp.svg");
    let plot_arg = plot.to_string_lossy().into_owned();
    let (ok, stdout, stderr) = strata(&[
        "sim",
        "seed003",
        "--max-clients",
        "2",
        "--requests-per-client",
        "500",
        "--policy",
        "lru,strata",
        "--csv",
        "--plot",
        &plot_arg,
    ]);
    assert!(ok, "{stderr}");
    assert!(stdout.starts_with("clients,trace,policy,"), "{stdout}");
    assert_eq!(stdout.lines().count(), 1 + 4, "{stdout}");
    let svg = std::fs::read_to_string(&plot).unwrap_or_default();
    assert_eq!(svg.matches("<polyline").count(), 2, "{svg}");
    for (option, value) in [
        ("--requests-per-client", "0"),
        ("--cache-objects", "0"),
        ("--max-clients", "0"),
    ] {
        let (ok, _, stderr) = strata(&["sim", "seed003", option, value]);
        assert!(
            !ok && stderr.contains("at least 1"),
            "{option} {value}: {stderr}"
        );
    }
}

/// A tuning trace given with --trace is labelled (tuned) by its name, as with --traces.
#[test]
fn compare_labels_a_tuning_trace_given_by_file() {
    let (ok, stdout, stderr) = strata(&[
        "sim",
        "compare",
        "--trace",
        "fixtures/traces/cloudPhysicsIO.csv.zst",
        "--cache-size",
        "1%",
        "--policy",
        "lru",
    ]);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("| cloudPhysicsIO (tuned) | 1% (489) |"),
        "{stdout}"
    );
    assert!(stdout.contains("lru on tuning traces: "), "{stdout}");
}

/// Started outside the workspace, seed000 and bench sim find their default traces from the
/// project root (they failed with "No such file" on a relative path).
#[test]
fn default_traces_are_found_from_anywhere() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (ok, stdout, stderr) = strata_in(
        dir.path(),
        &["bench", "sim", "--policy", "lru", "--repeat", "1"],
    );
    assert!(ok, "{stderr}");
    assert!(stdout.contains("trace cloudPhysicsIO"), "{stdout}");
    let (ok, _, stderr) = strata_in(dir.path(), &["bench", "sim", "--repeat", "0"]);
    assert!(!ok && stderr.contains("--repeat 0"), "{stderr}");
    let empty = dir.path().join("empty.lis");
    std::fs::write(&empty, "").unwrap_or_else(|e| panic!("{e}"));
    let empty_arg = empty.to_string_lossy().into_owned();
    let (ok, _, stderr) = strata_in(dir.path(), &["bench", "sim", "--trace", &empty_arg]);
    assert!(!ok && stderr.contains("no requests"), "{stderr}");
}

/// Parse errors name the file and the line.
#[test]
fn trace_errors_name_the_file() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let bad = dir.path().join("cloudphysics-badop.csv");
    std::fs::write(
        &bad,
        "version,time,op,size,lbn\n1,5,2a,512,42\n1,5,zz,512,43\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let bad_arg = bad.to_string_lossy().into_owned();
    let (ok, _, stderr) = strata(&[
        "sim",
        "compare",
        "--trace",
        &format!("fixtures/traces/request.trace.xz,{bad_arg}"),
    ]);
    assert!(!ok);
    assert!(
        stderr.contains(&format!("{bad_arg} line 3: bad op `zz`")),
        "{stderr}"
    );
}
