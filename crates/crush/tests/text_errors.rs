//! Broken sources give `CrushError::Parse` naming the right line, and no input makes the
//! compiler or decompiler panic (proptest over random and mutated text).

use crush::text::{compile, decompile};
use crush::{Bucket, BucketAlgorithm, BucketData, ChooseArg, CrushError, CrushMap, Rule, RuleStep};
use proptest::prelude::*;

#[path = "text_cases/malformed.rs"]
mod malformed;

#[test]
fn malformed_sources_name_their_line() {
    let mut problems = Vec::new();
    for (index, (source, line)) in malformed::CASES.iter().enumerate() {
        match compile(source) {
            Err(CrushError::Parse { line: got, message }) => {
                if got != *line {
                    problems.push(format!("case {index}: line {got} (want {line}): {message}"));
                }
                assert!(!message.is_empty());
            }
            Err(other) => problems.push(format!("case {index}: not a Parse error: {other}")),
            Ok(_) => problems.push(format!("case {index}: accepted:\n{source}")),
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn error_messages_say_what_is_wrong() {
    let message = |source: &str| match compile(source) {
        Err(e) => e.to_string(),
        Ok(_) => String::new(),
    };
    let cases = &malformed::CASES;
    assert!(message(&cases[1].0).contains("item 'osd.9' in bucket 'h' is not defined"));
    assert!(message(&cases[2].0).contains("Duplicate bucket id -1"));
    assert!(message(&cases[3].0).contains("expected a number"));
    assert!(message(&cases[4].0).contains("device weight limited to 100"));
    assert!(message(&cases[0].0).contains("bucket type 'rack' is not defined"));
    assert!(message(&cases[0].0).starts_with("crushmap text line 5:"));
    assert!(message(&cases[15].0).contains("must come before buckets"));
    assert!(message(&cases[17].0).contains("has weight 2 but previous item(s) have weight 1"));
}

fn fixture_source() -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/crush-vectors/src_classes_ssd_hdd.txt"
    );
    std::fs::read_to_string(path).unwrap_or_default()
}

const VOCABULARY: &[&str] = &[
    "device",
    "type",
    "tunable",
    "host",
    "root",
    "rule",
    "step",
    "take",
    "emit",
    "choose",
    "chooseleaf",
    "firstn",
    "indep",
    "id",
    "class",
    "alg",
    "hash",
    "item",
    "weight",
    "pos",
    "straw2",
    "straw",
    "list",
    "tree",
    "uniform",
    "{",
    "}",
    "[",
    "]",
    "-1",
    "0",
    "1.5",
    "osd.0",
    "default",
    "choose_args",
    "bucket_id",
    "weight_set",
    "ids",
    "ssd",
    "#",
    "\n",
    "rjenkins1",
    "min_size",
    "max_size",
    "replicated",
    "erasure",
    "99999999999",
    "-0",
    "1e40",
    "node0",
];

/// An arbitrary (possibly inconsistent) map, as a corrupt binary could decode to.
fn arbitrary_map() -> impl Strategy<Value = CrushMap> {
    let bucket = (
        -12i32..0,
        0u16..4,
        1u8..6,
        any::<u8>(),
        any::<u32>(),
        proptest::collection::vec(-14i32..20, 0..6),
        proptest::collection::vec(any::<u32>(), 0..8),
    )
        .prop_map(|(id, type_id, alg, hash, weight, items, weights)| {
            let algorithm = BucketAlgorithm::from_code(alg).unwrap_or(BucketAlgorithm::Straw2);
            let data = match algorithm {
                BucketAlgorithm::Uniform => BucketData::Uniform {
                    item_weight: weight,
                },
                BucketAlgorithm::List => BucketData::List {
                    item_weights: weights.clone(),
                    sum_weights: weights,
                },
                BucketAlgorithm::Tree => BucketData::Tree {
                    num_nodes: weights.len() as u8,
                    node_weights: weights,
                },
                BucketAlgorithm::Straw => BucketData::Straw {
                    item_weights: weights.clone(),
                    straws: weights,
                },
                BucketAlgorithm::Straw2 => BucketData::Straw2 {
                    item_weights: weights,
                },
            };
            Bucket {
                id,
                type_id,
                algorithm,
                hash,
                weight,
                items,
                data,
            }
        });
    let step = (0u32..14, -15i32..20, -2i32..5)
        .prop_map(|(op, a, b)| RuleStep::from_raw(op, a, b).unwrap_or(RuleStep::Emit));
    let rule = (
        any::<u8>(),
        any::<u8>(),
        proptest::collection::vec(step, 0..6),
    )
        .prop_map(|(ruleset, rule_type, steps)| Rule {
            ruleset,
            rule_type,
            min_size: 1,
            max_size: 10,
            steps,
        });
    (
        proptest::collection::vec(proptest::option::of(bucket), 0..12),
        proptest::collection::vec(proptest::option::of(rule), 0..4),
        -2i32..20,
        proptest::collection::btree_map(-14i32..20, "[a-z~.]{0,6}", 0..20),
        proptest::collection::btree_map(-3i32..6, "[a-z]{0,4}", 0..4),
        proptest::collection::btree_map(-14i32..20, -1i32..3, 0..10),
        proptest::collection::btree_map(
            -14i32..0,
            proptest::collection::btree_map(-1i32..3, -20i32..0, 0..3),
            0..4,
        ),
        proptest::collection::btree_map(
            -14i32..0,
            (
                proptest::collection::vec(-5i32..5, 0..3),
                proptest::collection::vec(proptest::collection::vec(any::<u32>(), 0..3), 0..3),
            ),
            0..4,
        ),
    )
        .prop_map(
            |(
                buckets,
                rules,
                max_devices,
                item_names,
                type_names,
                device_classes,
                class_buckets,
                args,
            )| {
                let mut map = CrushMap {
                    buckets,
                    rules,
                    max_devices,
                    item_names,
                    type_names,
                    device_classes,
                    class_buckets,
                    ..CrushMap::default()
                };
                map.class_names.insert(0, "hdd".into());
                map.class_names.insert(1, "ssd".into());
                map.rule_names.insert(0, "r".into());
                let args = args
                    .into_iter()
                    .map(|(id, (ids, weight_set))| (id, ChooseArg { ids, weight_set }))
                    .collect();
                map.choose_args.insert(-1, args);
                map
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn decompile_of_arbitrary_maps_never_panics(map in arbitrary_map()) {
        let text = decompile(&map);
        prop_assert!(text.starts_with("# begin crush map\n"));
        let _ = compile(&text);
    }

    #[test]
    fn random_token_soup_never_panics(words in proptest::collection::vec(proptest::sample::select(VOCABULARY), 0..80)) {
        let source = words.join(" ");
        if let Ok(map) = compile(&source) {
            let _ = decompile(&map);
        }
    }

    #[test]
    fn random_bytes_never_panic(source in "\\PC{0,300}") {
        let _ = compile(&source);
    }

    #[test]
    fn mutated_fixture_never_panics(
        cut in 0usize..2000,
        length in 0usize..40,
        insert in proptest::sample::select(VOCABULARY),
    ) {
        let source = fixture_source();
        let mut bytes = source.into_bytes();
        let start = cut.min(bytes.len());
        let end = (start + length).min(bytes.len());
        bytes.splice(start..end, insert.bytes());
        let mutated = String::from_utf8_lossy(&bytes).into_owned();
        if let Ok(map) = compile(&mutated) {
            let text = decompile(&map);
            // Whatever compiles decompiles to text that compiles again.
            prop_assert!(compile(&text).is_ok(), "{}", text);
        }
    }
}

/// Regression (review finding 6): `device 2147483647 osd.53` compiled, and `--test` then sized
/// its per-device tables by that id (17 GB). Such an id is refused, by the compiler with its
/// line and by the decoder (which sees binary maps from elsewhere), naming the id.
#[test]
fn absurd_device_ids_are_refused_naming_the_id() {
    let source = |id: i64| {
        format!(
            "device 0 osd.0\ndevice {id} osd.big\ntype 0 osd\ntype 1 root\n\
             root r {{\n\tid -1\n\talg straw2\n\thash 0\n\titem osd.0 weight 1.0\n\titem osd.big weight 1.0\n}}\n"
        )
    };
    match compile(&source(2_147_483_647)) {
        Err(CrushError::Parse { line, message }) => {
            assert_eq!(line, 2);
            assert!(message.contains("2147483647"), "{message}");
        }
        other => panic!("expected a parse error, got {other:?}"),
    }
    assert!(compile(&source(i64::from(crush::DEVICE_ID_MAX))).is_ok());
    // A binary map holding such an id (encoded by hand, as another tool could write it).
    let mut map = compile(&source(1)).unwrap_or_default();
    if let Some(Some(bucket)) = map.buckets.first_mut() {
        bucket.items[1] = 2_147_483_647;
    }
    map.item_names.insert(2_147_483_647, "osd.big".into());
    let bytes = crush::codec::encode(&map);
    match crush::codec::decode(&bytes) {
        Err(error) => assert!(error.to_string().contains("2147483647"), "{error}"),
        Ok(_) => panic!("decoded a map with device 2147483647"),
    }
}
