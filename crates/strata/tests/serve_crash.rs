//! Crash tests: processes writing to the cluster are SIGKILLed at random points; after every
//! restart each acknowledged object must read back intact.
//!
//! - 50 kills of `strata debug crash-writer` (the embedded cluster writing numbered objects
//!   and printing `ack N` once object N is durable; a restart first verifies 0..acked).
//! - A few kills of the real `strata serve` while the CLI `put`s objects; every `put` that
//!   succeeded must `get` back after the restart.
//! - The same with every OSD on a write-back cache (`cache:mode=wb,...:FAST|SLOW`) of an
//!   emulated NVMe file over an emulated 10k-rpm HDD file, as seed 001's OSDs on Open-CAS.

mod serve_common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use serve_common::{strata, Server};

const WRITER_KILLS: usize = 50;
const SERVER_KILLS: usize = 3;

fn seed() -> u64 {
    std::env::var("STRATA_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::thread_rng().gen())
}

/// One crash-writer run: verifies 0..acked, writes from acked; returns the child and a channel
/// of its stdout lines.
fn spawn_writer(
    data: &std::path::Path,
    verify_from: u64,
    acked: u64,
) -> (std::process::Child, mpsc::Receiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["debug", "crash-writer", "--data"])
        .arg(data)
        .args(["--verify-from", &verify_from.to_string()])
        .args([
            "--verify",
            &acked.to_string(),
            "--start",
            &acked.to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    (child, receiver)
}

#[test]
fn acknowledged_writes_survive_sigkill_of_the_writer() {
    let seed = seed();
    eprintln!("STRATA_CRASH_SEED={seed}");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let data = tempfile::tempdir().unwrap();
    let mut acked = 0u64;
    // Each run re-verifies what the previous run acknowledged; the last run verifies all.
    let mut previous = 0u64;
    for cycle in 0..WRITER_KILLS {
        let (mut child, lines) = spawn_writer(data.path(), previous, acked);
        previous = acked;
        // The first run creates the cluster: let creation finish (see the report on
        // crash-consistent creation). Later runs are killed anywhere, opening included.
        let wait_verified = cycle == 0 || rng.gen_bool(0.7);
        if wait_verified {
            let line = lines.recv_timeout(Duration::from_secs(30));
            match line {
                Ok(line) if line.starts_with("verified") => {}
                other => {
                    let _ = child.kill();
                    let output = child.wait_with_output().unwrap();
                    panic!(
                        "cycle {cycle} (seed {seed}): writer failed before writing: {other:?} {}",
                        String::from_utf8_lossy(&output.stderr)
                    );
                }
            }
            std::thread::sleep(Duration::from_millis(rng.gen_range(0..60)));
        } else {
            std::thread::sleep(Duration::from_millis(rng.gen_range(0..120)));
        }
        if let Ok(Some(status)) = child.try_wait() {
            let output = child.wait_with_output().unwrap();
            panic!(
                "cycle {cycle} (seed {seed}): writer exited on its own with {status}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        child.kill().unwrap();
        child.wait().unwrap();
        for line in lines.iter() {
            if let Some(n) = line.strip_prefix("ack ") {
                let n: u64 = n.parse().unwrap();
                assert_eq!(n, acked, "acks are sequential");
                acked = n + 1;
            }
        }
    }
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["debug", "crash-writer", "--data"])
        .arg(data.path())
        .args(["--verify", &acked.to_string(), "--count", "0"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "seed {seed}: after {WRITER_KILLS} kills, {acked} acknowledged objects do not all read back: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(acked > 0, "some writes were acknowledged");
    eprintln!("{WRITER_KILLS} kills, {acked} acknowledged objects verified");
}

#[test]
fn acknowledged_puts_survive_sigkill_of_the_server() {
    let seed = seed();
    eprintln!("STRATA_CRASH_SEED={seed}");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let data = tempfile::tempdir().unwrap();
    let payload_dir = tempfile::tempdir().unwrap();
    let mut acked: Vec<(String, Vec<u8>)> = Vec::new();
    let mut next = 0u64;
    for cycle in 0..SERVER_KILLS {
        // Every other server lays its runtime out for small objects (polling while busy):
        // acknowledged writes must survive a kill either way.
        let layout: &[&str] = if cycle % 2 == 1 {
            &["--no-s3", "--poll-while-busy"]
        } else {
            &["--no-s3"]
        };
        let server = Server::start(data.path(), layout);
        for (name, bytes) in &acked {
            let out = strata(&server.args(&["get", "default", name]));
            assert!(
                out.status.success() && &out.stdout == bytes,
                "cycle {cycle} (seed {seed}): acknowledged {name} lost: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let stop = Arc::new(AtomicBool::new(false));
        let (admin, data_text) = (server.admin.clone(), server.data.clone());
        let dir = payload_dir.path().to_path_buf();
        let writer_stop = Arc::clone(&stop);
        let start = next;
        let writer = std::thread::spawn(move || {
            let mut done = Vec::new();
            let mut n = start;
            while !writer_stop.load(Ordering::Relaxed) {
                let name = format!("put-{n}");
                let bytes: Vec<u8> = format!("object {n} ")
                    .repeat(1 + (n as usize % 300))
                    .into_bytes();
                let file = dir.join(&name);
                std::fs::write(&file, &bytes).unwrap();
                let out = strata(&[
                    "put",
                    "default",
                    &name,
                    &file.display().to_string(),
                    "--admin",
                    &admin,
                    "--data",
                    &data_text,
                ]);
                n += 1;
                if !out.status.success() {
                    break;
                }
                done.push((name, bytes));
            }
            (done, n)
        });
        std::thread::sleep(Duration::from_millis(rng.gen_range(300..900)));
        server.kill();
        stop.store(true, Ordering::Relaxed);
        let (done, n) = writer.join().unwrap();
        next = n;
        acked.extend(done);
    }
    let server = Server::start(data.path(), &["--no-s3"]);
    for (name, bytes) in &acked {
        let out = strata(&server.args(&["get", "default", name]));
        assert!(
            out.status.success() && &out.stdout == bytes,
            "seed {seed}: acknowledged {name} lost after the last kill"
        );
    }
    assert!(!acked.is_empty());
    server.stop();
}

/// Issue 36 item 5: a cluster whose OSDs sit on write-back caches (no background cleaning,
/// so acknowledged data is on the caches' fast files only) keeps every acknowledged `put`
/// through kill -9 of `strata serve`, twice.
#[test]
fn acknowledged_puts_survive_sigkill_of_a_server_on_cached_osds() {
    let data = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mut toml = String::from("scrub_interval_s = 0\n");
    for id in 0..3 {
        toml.push_str(&format!(
            "[[host]]\nname = \"host{id}\"\n[[osd]]\nid = {id}\nhost = \"host{id}\"\n\
             device = \"cache:mode=wb,cleaning=nop:nvme@file:osd.{id}.cache:64M|hdd-10k@file:osd.{id}.img:1G\"\n\
             class = \"hdd\"\n"
        ));
    }
    toml.push_str("[[pool]]\nname = \"default\"\nsize = 3\npg_num = 16\n");
    let config = work.path().join("cluster.toml");
    std::fs::write(&config, toml).unwrap();
    let config_text = config.display().to_string();
    let mut acked: Vec<(String, Vec<u8>)> = Vec::new();
    for cycle in 0..3 {
        let server = Server::start(data.path(), &["--no-s3", "--config", &config_text]);
        for (name, bytes) in &acked {
            let out = strata(&server.args(&["get", "default", name]));
            assert!(
                out.status.success() && &out.stdout == bytes,
                "cycle {cycle}: acknowledged {name} lost: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        if cycle == 2 {
            server.stop();
            break;
        }
        for index in 0..8 {
            let name = format!("cached-{cycle}-{index}");
            let bytes: Vec<u8> = format!("object {cycle}/{index} ")
                .repeat(1 + index * 700)
                .into_bytes();
            let file = work.path().join(&name);
            std::fs::write(&file, &bytes).unwrap();
            let file_text = file.display().to_string();
            let out = strata(&server.args(&["put", "default", &name, &file_text]));
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            acked.push((name, bytes));
        }
        server.kill();
    }
    assert!(data.path().join("osd.0.cache").exists());
}
