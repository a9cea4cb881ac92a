//! Issue 39: small-object packing keeps every acknowledged write through kill -9 of `strata
//! serve`, with the pack GC rewriting packs at the same time.
//!
//! Each cycle starts `strata serve --packing on`, checks every key against what was
//! acknowledged, then runs boto3 writers (tests/scripts/pack_crash.py: 8 threads PUTting,
//! overwriting and deleting objects of 14 B to 9 KiB, all packed) and `strata gc --packs` in a
//! loop (packs rewritten without their dead ranges while they are written to), and kills the
//! server at a random moment. A key must then hold its last acknowledged state, or the state
//! of the one request that was in flight on it when the server died. After the last cycle, a
//! clean start, a pack GC pass that must find nothing left unfinished, and the check again.

mod serve_common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use serve_common::{strata, Server};

const SCRIPT: &str = "tests/scripts/pack_crash.py";
const KEYS: usize = 160;
const CYCLES: usize = 3;
/// Requests acknowledged before the random delay to the kill starts.
const ACKS_BEFORE_KILL: usize = 40;

fn have_boto3() -> bool {
    let found = Command::new("python3")
        .args(["-c", "import boto3"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        eprintln!("SKIPPED: python3 with boto3 is not available");
    }
    found
}

/// What a key may hold: its last acknowledged version (0 = absent) and, if a request on it
/// was in flight when the server died, that request's version too.
type Model = BTreeMap<String, Vec<u64>>;

/// The S3 user's keys and the environment the script needs.
fn script_env(server: &Server, keys: &(String, String)) -> Vec<(&'static str, String)> {
    vec![
        (
            "ENDPOINT",
            format!("http://{}", server.s3.as_ref().expect("S3 address")),
        ),
        ("ACCESS_KEY", keys.0.clone()),
        ("SECRET_KEY", keys.1.clone()),
        ("BUCKET", "packed".to_string()),
    ]
}

/// Runs the check; every key must hold one of its allowed versions. Returns the model of
/// what was found (one version per key).
fn check(server: &Server, keys: &(String, String), model: &Model, when: &str) -> Model {
    let mut child = Command::new("python3")
        .args([SCRIPT, "check"])
        .envs(script_env(server, keys))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("python3");
    let mut input = String::new();
    for (key, allowed) in model {
        let versions: Vec<String> = allowed.iter().map(u64::to_string).collect();
        input.push_str(&format!("{key} {}\n", versions.join(" ")));
    }
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let bad: Vec<&str> = text.lines().filter(|l| l.starts_with("BAD ")).collect();
    assert!(
        bad.is_empty(),
        "{when}: keys not in an acknowledged state:\n{}",
        bad.join("\n")
    );
    assert!(
        text.contains(&format!("CHECKED {}", model.len())),
        "{when}: the check did not finish:\n{text}"
    );
    let mut found = Model::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if let ["STATE", key, version] = fields.as_slice() {
            found.insert(key.to_string(), vec![version.parse().unwrap()]);
        }
    }
    assert_eq!(found.len(), model.len(), "{when}: a key was not reported");
    found
}

#[test]
fn acknowledged_packed_writes_survive_sigkill_during_writes_and_pack_rewrites() {
    if !have_boto3() {
        return;
    }
    let seed: u64 = std::env::var("STRATA_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::thread_rng().gen());
    eprintln!("STRATA_CRASH_SEED={seed}");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let data = tempfile::tempdir().unwrap();
    let serve_args = ["--packing", "on"];
    let mut model: Model = (0..KEYS).map(|j| (format!("k{j}"), vec![0])).collect();
    let mut keys = None;
    let mut next_version = 1u64;
    let rewritten = Arc::new(AtomicU64::new(0));
    for cycle in 0..CYCLES {
        let server = Server::start(data.path(), &serve_args);
        let keys = keys.get_or_insert_with(|| {
            let created = server.ok(&["user", "create", "--uid", "packer"]);
            let created: serde_json::Value = serde_json::from_str(&created).unwrap();
            let key = |name: &str| created["keys"][0][name].as_str().unwrap().to_string();
            (key("access_key"), key("secret_key"))
        });
        if cycle > 0 {
            model = check(
                &server,
                keys,
                &model,
                &format!("cycle {cycle} (seed {seed})"),
            );
        }
        // The pack GC, in a loop, while the writers run.
        let stop = Arc::new(AtomicBool::new(false));
        let gc = {
            let stop = Arc::clone(&stop);
            let rewritten = Arc::clone(&rewritten);
            let args: Vec<String> = server
                .args(&["gc", "--packs"])
                .iter()
                .map(|s| s.to_string())
                .collect();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let args: Vec<&str> = args.iter().map(String::as_str).collect();
                    let out = strata(&args);
                    let text = String::from_utf8_lossy(&out.stdout);
                    if let Some(count) = text
                        .strip_prefix("packs rewritten ")
                        .and_then(|rest| rest.split(',').next())
                        .and_then(|n| n.trim().parse::<u64>().ok())
                    {
                        rewritten.fetch_add(count, Ordering::Relaxed);
                    }
                    std::thread::sleep(Duration::from_millis(150));
                }
            })
        };
        let mut writer = Command::new("python3")
            .args([
                SCRIPT,
                "write",
                &next_version.to_string(),
                &rng.gen::<u32>().to_string(),
            ])
            .envs(script_env(&server, keys))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3");
        let stdout = writer.stdout.take().unwrap();
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        // The kill comes at a random moment after the writers are under way (python and
        // boto3 take a while to start on a loaded machine).
        let mut lines = Vec::new();
        while lines
            .iter()
            .filter(|l: &&String| l.starts_with("ACK "))
            .count()
            < ACKS_BEFORE_KILL
        {
            match receiver.recv_timeout(Duration::from_secs(60)) {
                Ok(line) => lines.push(line),
                Err(error) => panic!("cycle {cycle}: the writer stalled ({error}): {lines:?}"),
            }
        }
        std::thread::sleep(Duration::from_millis(rng.gen_range(300..2500)));
        server.kill();
        stop.store(true, Ordering::Relaxed);
        gc.join().unwrap();
        let status = writer.wait().unwrap();
        assert!(status.success(), "the writer failed: {status}");
        lines.extend(receiver.iter());
        // Each key: the last acknowledged version, plus the one in flight if any.
        let mut in_flight: BTreeMap<String, u64> = BTreeMap::new();
        let mut acknowledged = 0;
        for line in &lines {
            let fields: Vec<&str> = line.split_whitespace().collect();
            match fields.as_slice() {
                ["BEGIN", _, key, version] => {
                    let version: u64 = version.parse().unwrap();
                    next_version = next_version.max(version + 1);
                    in_flight.insert(key.to_string(), version);
                }
                ["ACK", _, key, version] => {
                    let version: u64 = version.parse().unwrap();
                    assert_eq!(in_flight.remove(*key), Some(version), "{line}");
                    model.insert(key.to_string(), vec![version]);
                    acknowledged += 1;
                }
                ["FAIL", ..] => {}
                _ => panic!("unexpected writer output {line:?}"),
            }
        }
        for (key, version) in in_flight {
            model.get_mut(&key).unwrap().push(version);
        }
        eprintln!("cycle {cycle}: {acknowledged} requests acknowledged before the kill");
        assert!(acknowledged > 0, "cycle {cycle}: nothing was acknowledged");
        // Versions of the next writer start above every one used so far (a version in
        // flight may have been stored).
        next_version += 8;
    }
    let server = Server::start(data.path(), &serve_args);
    let keys = keys.as_ref().unwrap();
    model = check(
        &server,
        keys,
        &model,
        &format!("after the kills (seed {seed})"),
    );
    let out = server.ok(&["gc", "--packs"]);
    assert!(
        out.contains("jobs failed 0") && out.contains("rewrites processing 0, failed 0"),
        "a rewrite was left unfinished: {out}"
    );
    check(
        &server,
        keys,
        &model,
        &format!("after a pack GC pass (seed {seed})"),
    );
    let rewritten = rewritten.load(Ordering::Relaxed);
    eprintln!("packs rewritten while writing: {rewritten}");
    assert!(
        rewritten > 0,
        "the pack GC never rewrote a pack: the test did not exercise it"
    );
    server.stop();
}
