//! `strata bench cache` end to end on tiny regions: two rounds of the 4 KiB random jobs on
//! the seed's cache, the fast device and the wt cache through fio's nbd engine, so the table of medians and the
//! per-round ratios are printed from real measurements. Checks the shape, not the speed.

use std::process::Command;

#[test]
fn two_rounds_print_medians_and_ratios() {
    if Command::new("fio").arg("--version").output().is_err() {
        eprintln!("note: fio not installed (scripts/test.sh installs it); skipping");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["bench", "cache", "--rounds", "2", "--runtime-s", "1"])
        .args(["--jobs", "randread,randwrite", "--targets", "cache,fast,wt"])
        .args([
            "--hdd-size",
            "64M",
            "--random-size",
            "8M",
            "--seq-size",
            "8M",
        ])
        .arg("--dir")
        .arg(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("medians over 2 round(s)"), "{stdout}");
    assert_eq!(stderr.matches("== round").count(), 2, "{stderr}");
    // Each job appears once per target in the table, with a positive median.
    for job in ["4k randread (100% hit)", "4k randwrite"] {
        for target in ["cache (wb, seed 001)", "fast device alone"] {
            let line = stdout
                .lines()
                .find(|line| line.starts_with(job) && line.contains(target))
                .unwrap_or_else(|| panic!("no row for {job} on {target}:\n{stdout}"));
            let iops: f64 = line[job.len()..]
                .trim_start()
                .trim_start_matches(target)
                .split_whitespace()
                .next()
                .unwrap()
                .parse()
                .unwrap();
            assert!(iops > 0.0, "{line}");
        }
    }
    let ratio_line = stdout
        .lines()
        .find(|line| line.starts_with("4k randread (100% hit)") && line.contains(">=0.80x fast"))
        .unwrap_or_else(|| panic!("no ratio row:\n{stdout}"));
    assert!(ratio_line.contains('x'), "{ratio_line}");
    // The Open-CAS comparison is made with the target set up as its reference run was.
    assert!(
        stdout.contains("cache (wt, raw files) vs Open-CAS"),
        "{stdout}"
    );
    // The run removes its device files.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
