//! The compiler and decompiler against Ceph's own `crushtool` on tricky sources
//! (tests/text_cases/*.txt and the malformed table): where crushtool is installed, every case
//! must succeed or fail as it does, encode to the bytes it writes and decompile to the text it
//! prints. Without crushtool the test prints a note and passes.

use std::path::{Path, PathBuf};
use std::process::Command;

use crush::codec::{decode, encode};
use crush::text::{compile, decompile};

const CRUSHTOOL: &str = "/usr/bin/crushtool";

fn cases_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/text_cases")
}

fn scratch_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("crush-text-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir
}

/// `crushtool -c` then `crushtool -d`: the binary and the text, or `None` if it refused.
fn crushtool(source: &Path, scratch: &Path) -> Option<(Vec<u8>, String)> {
    let binary = scratch.join("out.bin");
    let _ = std::fs::remove_file(&binary);
    let status = Command::new(CRUSHTOOL)
        .arg("-c")
        .arg(source)
        .arg("-o")
        .arg(&binary)
        .output()
        .expect("run crushtool");
    if !status.status.success() {
        return None;
    }
    let text = Command::new(CRUSHTOOL)
        .arg("-d")
        .arg(&binary)
        .output()
        .expect("run crushtool -d");
    let bytes = std::fs::read(&binary).expect("crushtool output");
    Some((bytes, String::from_utf8_lossy(&text.stdout).into_owned()))
}

fn crushtool_present() -> bool {
    if Path::new(CRUSHTOOL).exists() {
        true
    } else {
        eprintln!("note: {CRUSHTOOL} not installed; skipping the crushtool oracle comparison");
        false
    }
}

#[test]
fn cases_compile_and_decompile_like_crushtool() {
    if !crushtool_present() {
        return;
    }
    let scratch = scratch_dir("cases");
    let mut entries: Vec<PathBuf> = std::fs::read_dir(cases_dir())
        .expect("tests/text_cases")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    entries.sort();
    assert!(entries.len() >= 10);
    let mut problems = Vec::new();
    for path in &entries {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let source = std::fs::read_to_string(path).expect("case");
        let ours = compile(&source);
        match (crushtool(path, &scratch), ours) {
            (None, Err(_)) => {}
            (None, Ok(_)) => problems.push(format!("{name}: crushtool refuses it, we accept it")),
            (Some(_), Err(e)) => problems.push(format!("{name}: crushtool accepts it, we say {e}")),
            (Some((bytes, text)), Ok(map)) => {
                if decompile(&map) != text {
                    problems.push(format!("{name}: decompile differs from crushtool -d"));
                }
                if name.starts_with("tree_classes") {
                    // Ceph's shadow tree buckets hold uninitialised node weights.
                    continue;
                }
                if encode(&map) != bytes {
                    problems.push(format!("{name}: encoding differs from crushtool -c"));
                }
                match decode(&bytes) {
                    Ok(theirs) if theirs == map => {}
                    Ok(_) => problems.push(format!("{name}: decode(crushtool bin) != compile")),
                    Err(e) => problems.push(format!("{name}: decode failed: {e}")),
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn malformed_sources_are_refused_by_crushtool_too() {
    if !crushtool_present() {
        return;
    }
    let scratch = scratch_dir("malformed");
    let mut problems = Vec::new();
    for (index, (source, _line)) in malformed::CASES.iter().enumerate() {
        let path = scratch.join(format!("bad{index}.txt"));
        std::fs::write(&path, source).expect("write case");
        if crushtool(&path, &scratch).is_some() {
            problems.push(format!("case {index} is accepted by crushtool:\n{source}"));
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    assert!(problems.is_empty(), "{problems:#?}");
}

#[path = "text_cases/malformed.rs"]
mod malformed;
