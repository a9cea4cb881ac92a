//! `strata crush` end to end: `--test` output against the golden crushtool files, against the
//! real `/usr/bin/crushtool` when it is installed, and the binary round trip through `-o`.

use std::path::Path;
use std::process::Command;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
const CRUSHTOOL: &str = "/usr/bin/crushtool";

fn run(program: &str, args: &[&str]) -> (bool, String, String) {
    let output = Command::new(program)
        .args(args)
        .current_dir(Path::new(ROOT).join("fixtures/crush-vectors"))
        .output()
        .unwrap_or_else(|e| panic!("{program} runs: {e}"));
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn strata(args: &[&str]) -> (bool, String, String) {
    let mut full = vec!["crush"];
    full.extend_from_slice(args);
    run(env!("CARGO_BIN_EXE_strata"), &full)
}

fn assert_same(ours: &str, theirs: &str, what: &str) {
    for (i, (a, b)) in ours.lines().zip(theirs.lines()).enumerate() {
        assert_eq!(a, b, "{what}: line {}", i + 1);
    }
    assert_eq!(
        ours.lines().count(),
        theirs.lines().count(),
        "{what}: line count"
    );
}

/// Decompress a golden file with the system `gzip` (the strata crate has no gzip dependency).
fn gunzip(path: &str) -> String {
    let output = Command::new("gzip")
        .arg("-dc")
        .arg(Path::new(ROOT).join("fixtures/crush-vectors").join(path))
        .output()
        .expect("gzip runs");
    assert!(output.status.success(), "gzip -dc {path}");
    String::from_utf8(output.stdout).expect("utf8")
}

#[test]
fn show_mappings_equals_golden_files() {
    for (args, golden) in [
        (
            "-i hier3x4_weightset.bin --test --rule 1 --num-rep 4 --min-x 0 --max-x 9999 --show-mappings",
            "mappings/hier3x4_weightset__r1_n4.txt.gz",
        ),
        (
            "-i c5x12_jewel.bin --test --rule 0 --num-rep 3 --min-x 0 --max-x 2047 --pool-id 7 --show-mappings",
            "mappings/c5x12_jewel__r0_n3__pool7_pgs2048.txt.gz",
        ),
        (
            "-i c5x12_argonaut.bin --test --rule 0 --num-rep 3 --min-x 0 --max-x 9999 --show-mappings --weight 0 0.0 --weight 1 0.0 --weight 13 0.3 --weight 30 0.7 --weight 47 0.0",
            "mappings/c5x12_argonaut__r0_n3__rw2.txt.gz",
        ),
    ] {
        let args: Vec<&str> = args.split_whitespace().collect();
        let (ok, out, err) = strata(&args);
        assert!(ok, "strata crush {args:?} failed: {err}");
        assert_same(&out, &gunzip(golden), golden);
    }
}

#[test]
fn test_output_equals_crushtool_when_installed() {
    if !Path::new(CRUSHTOOL).exists() {
        println!("note: {CRUSHTOOL} not installed; skipping the live comparison");
        return;
    }
    let cases = [
        "-i classes_ssd_hdd.bin --test --show-utilization --rule 2 --num-rep 5 --min-x 0 --max-x 499",
        "-i classes_ssd_hdd.bin --test --show-statistics --min-x 0 --max-x 19",
        "-i hier3x4_mixed.bin --test --show-statistics --show-bad-mappings --min-x 0 --max-x 299",
        "-i flat16.bin --test --show-mappings --show-bad-mappings --num-rep 20 --min-x 5 --max-x 200",
        "-i algs_mixed_scv1.bin --test --show-utilization-all --rule 1 --num-rep 4 --weight 3 0.5 --max-x 500 --min-x 0",
        "-i hier3x4_weightset.bin --test --show-mappings --show-utilization --rule 2 --num-rep 6 --pool-id 3 --min-x 0 --max-x 999",
    ];
    for case in cases {
        let args: Vec<&str> = case.split_whitespace().collect();
        let (ok, ours, our_err) = strata(&args);
        assert!(ok, "strata crush {case} failed: {our_err}");
        let (ok, theirs, _) = run(CRUSHTOOL, &args);
        assert!(ok, "crushtool {case} failed");
        assert_same(&ours, &theirs, case);
    }
}

#[test]
fn binary_round_trips_through_output_file() {
    let dir = std::env::temp_dir().join(format!("strata-crush-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let out = dir.join("copy.bin");
    let out_str = out.to_str().expect("utf8 path");
    let (ok, _, err) = strata(&["-i", "hier3x4_weightset.bin", "-o", out_str]);
    assert!(ok, "{err}");
    let original =
        std::fs::read(Path::new(ROOT).join("fixtures/crush-vectors/hier3x4_weightset.bin"))
            .expect("fixture");
    assert_eq!(std::fs::read(&out).expect("written"), original);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn malformed_map_is_a_clean_error() {
    let dir = std::env::temp_dir().join(format!("strata-crush-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let bad = dir.join("bad.bin");
    let original =
        std::fs::read(Path::new(ROOT).join("fixtures/crush-vectors/flat16.bin")).expect("fixture");
    std::fs::write(&bad, &original[..100]).expect("write");
    let (ok, _, err) = strata(&[
        "-i",
        bad.to_str().expect("utf8"),
        "--test",
        "--show-mappings",
    ]);
    assert!(!ok);
    assert!(err.contains("malformed crushmap at byte"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn compile_and_decompile_match_the_fixtures() {
    let dir = std::env::temp_dir().join(format!("strata-crush-text-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let fixtures = Path::new(ROOT).join("fixtures/crush-vectors");
    for name in ["flat16", "classes_ssd_hdd", "hier3x4_weightset"] {
        // -c: the exact source crushtool compiled gives the very same binary.
        let out = dir.join(format!("{name}.bin"));
        let src = format!("src_{name}.txt");
        let (ok, _, err) = strata(&["-c", &src, "-o", out.to_str().expect("utf8")]);
        assert!(ok, "compile {name}: {err}");
        let expected = std::fs::read(fixtures.join(format!("{name}.bin"))).expect("bin");
        assert_eq!(
            std::fs::read(&out).expect("compiled"),
            expected,
            "{name}: -c"
        );
        // -d: the text crushtool -d printed.
        let (ok, text, err) = strata(&["-d", &format!("{name}.bin")]);
        assert!(ok, "decompile {name}: {err}");
        let expected = std::fs::read_to_string(fixtures.join(format!("{name}.txt"))).expect("txt");
        assert_same(&text, &expected, &format!("{name}: -d"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A reader that goes away after the first line ends `strata crush` by SIGPIPE, as it ends
/// crushtool: no error message, no panic.
#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args([
            "crush",
            "-i",
            "c5x12_argonaut.bin",
            "--test",
            "--show-mappings",
            "--min-x",
            "0",
            "--max-x",
            "2000000",
        ])
        .current_dir(Path::new(ROOT).join("fixtures/crush-vectors"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("strata runs");
    let mut first = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut first)
        .expect("a first line");
    assert!(first.starts_with("CRUSH rule 0 x 0 "), "{first}");
    // The reader is dropped here, closing the pipe.
    let output = child.wait_with_output().expect("strata ends");
    assert_eq!(output.status.signal(), Some(SIGPIPE), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stderr), "");
}

/// SIGPIPE's number on Linux.
const SIGPIPE: i32 = 13;
