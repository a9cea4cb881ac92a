//! Every golden mapping file in fixtures/crush-vectors/mappings/ (crushtool 16.2 output) is
//! reproduced line for line by `crush::tester`, driven by the manifest's exact command line.

use std::io::Read;
use std::path::{Path, PathBuf};

use crush::tester::{self, TestConfig};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/crush-vectors")
}

/// The subset of crushtool's command line the fixtures use.
fn config_from_cmd(cmd: &str) -> (String, TestConfig) {
    let words: Vec<&str> = cmd.split_whitespace().collect();
    let mut config = TestConfig::default();
    let mut map = String::new();
    let (mut min_x, mut max_x) = (-1, -1);
    let mut i = 1;
    while i < words.len() {
        let value = |k: usize| words[i + k].to_string();
        match words[i] {
            "-i" => map = value(1),
            "--rule" => config.rule = Some(value(1).parse().expect("rule")),
            "--num-rep" => {
                let n = value(1).parse().expect("num-rep");
                config.num_rep = Some((n, n));
            }
            "--min-x" => min_x = value(1).parse().expect("min-x"),
            "--max-x" => max_x = value(1).parse().expect("max-x"),
            "--pool-id" => config.pool_id = Some(value(1).parse().expect("pool")),
            "--weight" => {
                config
                    .device_weights
                    .insert(value(1).parse().expect("dev"), value(2).parse().expect("w"));
                i += 1;
            }
            "--show-mappings" => config.show_mappings = true,
            "--test" => {}
            other => panic!("unexpected crushtool argument {other} in {cmd}"),
        }
        i += if words[i].starts_with("--show") || words[i] == "--test" {
            1
        } else {
            2
        };
    }
    config.x_range = Some((min_x, max_x));
    (map, config)
}

#[test]
fn every_mapping_file_matches_crushtool() {
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(fixtures().join("manifest.json")).expect("read manifest"),
    )
    .expect("parse manifest");
    let cases = manifest.as_array().expect("manifest is a list");
    let (mut rows_total, mut rows_matched) = (0_usize, 0_usize);
    let mut failures = Vec::new();
    for case in cases {
        let cmd = case["cmd"].as_str().expect("cmd");
        let file = case["file"].as_str().expect("file");
        let (map_file, config) = config_from_cmd(cmd);
        // The manifest's 16.16 reweights are what crushtool derived from the command line.
        if let Some(reweights) = case
            .get("device_reweights_16_16")
            .and_then(|v| v.as_object())
        {
            for (device, weight) in reweights {
                let device: i32 = device.parse().expect("device id");
                let given = config.device_weights[&device];
                assert_eq!(
                    u64::from(tester::device_weight_16_16(given)),
                    weight.as_u64().expect("weight"),
                    "{file}: --weight {device} {given}"
                );
            }
        }
        let bytes = std::fs::read(fixtures().join(&map_file)).expect("read map");
        let map = crush::codec::decode(&bytes).expect("decode map");
        let mut ours = Vec::new();
        tester::run(&map, &config, &mut ours).expect("run tester");
        let ours = String::from_utf8(ours).expect("utf8");
        let mut expected = String::new();
        flate2::read::GzDecoder::new(std::fs::File::open(fixtures().join(file)).expect("open"))
            .read_to_string(&mut expected)
            .expect("gunzip");
        let expected_lines: Vec<&str> = expected.lines().collect();
        let our_lines: Vec<&str> = ours.lines().collect();
        rows_total += expected_lines.len();
        let matched = expected_lines
            .iter()
            .zip(&our_lines)
            .filter(|(a, b)| a == b)
            .count();
        rows_matched += matched;
        if matched != expected_lines.len() || our_lines.len() != expected_lines.len() {
            let first = expected_lines
                .iter()
                .zip(&our_lines)
                .find(|(a, b)| a != b)
                .map(|(a, b)| format!("expected `{a}`, got `{b}`"))
                .unwrap_or_else(|| {
                    format!("{} lines vs {}", our_lines.len(), expected_lines.len())
                });
            failures.push(format!(
                "{file}: {matched}/{} rows; first: {first}",
                expected_lines.len()
            ));
        }
    }
    println!(
        "mapping vectors: {rows_matched}/{rows_total} rows matched in {} files",
        cases.len()
    );
    assert!(failures.is_empty(), "mismatches:\n{}", failures.join("\n"));
    assert_eq!(rows_matched, rows_total);
}
