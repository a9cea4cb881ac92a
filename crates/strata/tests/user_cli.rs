//! `strata user` end to end: the real `strata serve` on free ports, users created with given and
//! generated keys, listed, shown, refused when duplicated, removed; errors are 4xx with a
//! message, never a crash.

mod serve_common;

use serve_common::{strata, Server};

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

#[test]
fn users_are_created_listed_shown_and_removed() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);

    // Given keys are kept; the output has radosgw-admin's shape.
    let given = json(&server.ok(&[
        "user",
        "create",
        "--uid",
        "alice",
        "--display-name",
        "Alice A.",
        "--email",
        "alice@example.com",
        "--access-key",
        "AKIAALICE0000000000A",
        "--secret",
        "alice-secret/with+symbols==",
    ]));
    assert_eq!(given["user_id"], "alice");
    assert_eq!(given["display_name"], "Alice A.");
    assert_eq!(given["email"], "alice@example.com");
    assert_eq!(given["keys"][0]["access_key"], "AKIAALICE0000000000A");
    assert_eq!(
        given["keys"][0]["secret_key"],
        "alice-secret/with+symbols=="
    );

    // Generated keys: 20 and 40 characters, different for each user.
    let generated = json(&server.ok(&["user", "create", "--uid", "bob"]));
    let access = generated["keys"][0]["access_key"].as_str().unwrap();
    let secret = generated["keys"][0]["secret_key"].as_str().unwrap();
    assert_eq!((access.len(), secret.len()), (20, 40), "{generated}");
    assert_eq!(generated["display_name"], "bob");

    assert_eq!(
        json(&server.ok(&["user", "ls"])),
        serde_json::json!(["alice", "bob"])
    );
    let info = json(&server.ok(&["user", "info", "--uid", "bob"]));
    assert_eq!(info["keys"][0]["secret_key"], secret);

    // Mistakes: a taken uid or access key is 409, a missing user 404, half a key pair is
    // refused by the CLI itself.
    let duplicate = strata(&server.args(&["user", "create", "--uid", "alice"]));
    assert!(!duplicate.status.success());
    assert!(
        String::from_utf8_lossy(&duplicate.stderr).contains("HTTP 409"),
        "{}",
        String::from_utf8_lossy(&duplicate.stderr)
    );
    let taken_key = strata(&server.args(&[
        "user",
        "create",
        "--uid",
        "carol",
        "--access-key",
        "AKIAALICE0000000000A",
        "--secret",
        "x",
    ]));
    assert!(String::from_utf8_lossy(&taken_key.stderr).contains("HTTP 409"));
    let half = strata(&server.args(&["user", "create", "--uid", "dave", "--access-key", "K"]));
    assert!(!half.status.success());
    let missing = strata(&server.args(&["user", "info", "--uid", "nobody"]));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("HTTP 404"));

    server.ok(&["user", "rm", "--uid", "alice"]);
    assert_eq!(
        json(&server.ok(&["user", "ls"])),
        serde_json::json!(["bob"])
    );
    let again = strata(&server.args(&["user", "rm", "--uid", "alice"]));
    assert!(String::from_utf8_lossy(&again.stderr).contains("HTTP 404"));

    // Users live in the cluster: a restart keeps them.
    let lines = server.stop();
    assert!(lines.iter().any(|l| l.contains("stopped")), "{lines:?}");
    let server = Server::start(data.path(), &[]);
    assert_eq!(
        json(&server.ok(&["user", "ls"])),
        serde_json::json!(["bob"])
    );
    server.stop();
}

/// The lines `strata serve` prints up to "ready" (then it is killed).
fn start_up_lines(data: &std::path::Path) -> Vec<String> {
    use std::io::BufRead;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_strata"))
        .args([
            "serve",
            "--admin",
            "127.0.0.1:0",
            "--s3",
            "127.0.0.1:0",
            "--data",
        ])
        .arg(data)
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = Vec::new();
    for line in std::io::BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        let ready = line.contains("ready");
        lines.push(line);
        if ready {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    lines
}

#[test]
fn first_start_says_how_to_create_a_user() {
    let data = tempfile::tempdir().unwrap();
    let first = start_up_lines(data.path());
    assert!(
        first.iter().any(|l| l.contains("strata user create --uid")),
        "{first:?}"
    );
    let second = start_up_lines(data.path());
    assert!(second.iter().any(|l| l.contains("opened")), "{second:?}");
    assert!(
        !second.iter().any(|l| l.contains("user create")),
        "{second:?}"
    );
}
