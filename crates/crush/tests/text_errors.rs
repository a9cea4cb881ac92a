//! Broken sources give `CrushError::Parse` naming the right line, and no input makes the
//! compiler or decompiler panic (proptest over random and mutated text).

use crush::text::{compile, decompile};
use crush::CrushError;
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

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

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
