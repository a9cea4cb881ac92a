//! `strata osdmap` end to end: its stdout must equal what Ceph 16.2.15's osdmaptool printed for
//! the same map and flags (fixtures/osdmap/*.txt, made by fixtures/osdmap/make_fixtures.sh).

use std::process::Command;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn strata(args: &[&str]) -> (bool, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("osdmap")
        .args(args)
        .current_dir(ROOT)
        .output()
        .expect("strata runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn fixture(path: &str) -> String {
    std::fs::read_to_string(format!("{ROOT}/{path}")).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn assert_same(ours: &str, theirs: &str, what: &str) {
    for (i, (a, b)) in ours.lines().zip(theirs.lines()).enumerate() {
        assert_eq!(a, b, "{what}: line {}", i + 1);
    }
    assert_eq!(ours, theirs, "{what}");
}

#[test]
fn test_map_pgs_dump_pool1_equals_the_golden_pgs_tsv() {
    let (ok, out, err) = strata(&[
        "fixtures/crush-vectors/osdmap/om_c5x12_pool1_pg2048.bin",
        "--test-map-pgs-dump",
        "--pool",
        "1",
    ]);
    assert!(ok, "{err}");
    let rows: Vec<&str> = out.lines().skip(1).take(2048).collect();
    let golden = fixture("fixtures/crush-vectors/osdmap/om_c5x12_pool1_pg2048.pgs.tsv");
    assert_eq!(rows, golden.lines().collect::<Vec<_>>());
    // The whole stdout, header and statistics included, equals osdmaptool's.
    assert_same(
        &out,
        &fixture("fixtures/osdmap/om_c5x12_pool1_pg2048.pgs_dump.txt"),
        "dump",
    );
}

#[test]
fn every_fixture_prints_and_dumps_like_osdmaptool() {
    for (map, name) in [
        (
            "fixtures/crush-vectors/osdmap/om_c5x12_pool1_pg1920_pgp960.bin",
            "om_c5x12_pool1_pg1920_pgp960",
        ),
        (
            "fixtures/crush-vectors/osdmap/om_c5x12_pool1_pg2048_upmap_dev1.bin",
            "om_c5x12_pool1_pg2048_upmap_dev1",
        ),
        ("fixtures/osdmap/om_states.bin", "om_states"),
        ("fixtures/osdmap/om_ec.bin", "om_ec"),
        ("fixtures/osdmap/om_choose_args.bin", "om_choose_args"),
    ] {
        let (ok, out, err) = strata(&[map, "--test-map-pgs-dump"]);
        assert!(ok, "{err}");
        assert_same(
            &out,
            &fixture(&format!("fixtures/osdmap/{name}.pgs_dump.txt")),
            name,
        );
        let (ok, out, err) = strata(&[map, "--print"]);
        assert!(ok, "{err}");
        assert_same(
            &out,
            &fixture(&format!("fixtures/osdmap/{name}.print.txt")),
            name,
        );
    }
}

#[test]
fn test_map_object_and_pg_like_osdmaptool() {
    let (ok, out, err) = strata(&[
        "fixtures/osdmap/om_ec.bin",
        "--test-map-object",
        "obj_3",
        "--pool",
        "2",
    ]);
    assert!(ok, "{err}");
    let golden = fixture("fixtures/osdmap/om_ec.objects.txt");
    assert!(golden.lines().any(|l| l == out.trim_end()), "{out}");
    let (ok, out, _) = strata(&["fixtures/osdmap/om_ec.bin", "--test-map-pg", "2.0"]);
    assert!(ok);
    assert_same(
        &out,
        &fixture("fixtures/osdmap/om_ec.map_pg_2.0.txt"),
        "map pg",
    );
}

#[test]
fn mark_out_and_mark_up_edit_in_memory_like_osdmaptool() {
    let (ok, out, err) = strata(&[
        "fixtures/osdmap/om_ec.bin",
        "--mark-out",
        "5",
        "--mark-up",
        "3",
        "--test-map-pgs-dump-all",
    ]);
    assert!(ok, "{err}");
    let golden = fixture("fixtures/osdmap/om_ec.mark_out_5_up_3.pgs_dump_all.txt");
    assert_same(&out, &golden, "mark-out");
}

#[test]
fn pg_num_override_like_osdmaptool() {
    let (ok, out, err) = strata(&[
        "fixtures/osdmap/om_ec.bin",
        "--test-map-pgs",
        "--pg_num",
        "64",
        "--pool",
        "1",
        "--print",
    ]);
    assert!(ok, "{err}");
    assert_same(
        &out,
        &fixture("fixtures/osdmap/om_ec.pg_num_64_pool1.txt"),
        "pg_num",
    );
}

#[test]
fn dump_json_input_gives_the_same_answers() {
    let (ok, out, err) = strata(&[
        "--dump-json",
        "fixtures/osdmap-json/om_ec.dump.json",
        "--crush",
        "fixtures/osdmap-json/om_ec.crush.bin",
        "--test-map-pgs-dump-all",
    ]);
    assert!(ok, "{err}");
    assert_same(
        &out,
        &fixture("fixtures/osdmap/om_ec.pgs_dump_all.txt"),
        "json",
    );
}

#[test]
fn bad_input_fails_with_a_message() {
    let (ok, _, err) = strata(&[
        "fixtures/crush-vectors/osdmap/om_c5x12_pool1_pg2048.pgs.tsv",
        "--print",
    ]);
    assert!(!ok);
    assert!(err.contains("strata: error:"), "{err}");
    let (ok, _, err) = strata(&["fixtures/osdmap/om_ec.bin", "--test-map-pgs", "--pool", "9"]);
    assert!(!ok);
    assert!(err.contains("no pool 9"), "{err}");
    let (ok, _, _) = strata(&["fixtures/osdmap/om_ec.bin"]);
    assert!(!ok, "no action is an error");
}
