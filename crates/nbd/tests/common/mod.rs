//! Helpers shared by the nbd crate's integration tests: running the real NBD clients.
#![allow(dead_code)]

use std::process::Command;

/// Whether `tool` is installed; says so on stderr when it is not (its part is skipped).
pub fn have(tool: &str) -> bool {
    let found = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !found {
        eprintln!("note: {tool} not installed; skipping its part of the test");
    }
    found
}

/// Runs `command`; panics with its output unless it succeeds; its stdout and stderr.
pub fn run(command: &mut Command) -> String {
    let output = command.output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout).to_string()
        + &String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{command:?} failed:\n{text}");
    text
}
