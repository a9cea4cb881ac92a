//! SIGKILL during partial overwrites of an erasure-coded pool: a real process
//! (`ec-crash-writer`) overwrites ranges of a few objects one write at a time and prints each
//! write before it starts and once it is acknowledged; it is killed at a random moment, the
//! cluster is reopened here, and every object must read as the acknowledged writes made it,
//! or with the one write in flight applied whole: never a mix of versions.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use cluster::{Cluster, ClusterOptions};
use rados::{Rados, RadosError};
use rand::{Rng, SeedableRng};

const NAMES: [&str; 4] = ["o0", "o1", "o2", "o3"];
const ROUNDS: u64 = 8;

fn pattern(generation: u64, length: usize) -> Vec<u8> {
    let mut state = generation.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..length)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

fn apply(object: &mut Option<Vec<u8>>, generation: u64, offset: usize, length: usize) {
    let data = object.get_or_insert_with(Vec::new);
    if data.len() < offset + length {
        data.resize(offset + length, 0);
    }
    data[offset..offset + length].copy_from_slice(&pattern(generation, length));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_partial_overwrites_never_mixes_versions() {
    let dir = tempfile::tempdir_in("/var/tmp").expect("tempdir");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0xec45);
    let mut model: BTreeMap<&str, Option<Vec<u8>>> = NAMES.iter().map(|n| (*n, None)).collect();
    let mut acknowledged = 0;
    for round in 1..=ROUNDS {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ec-crash-writer"))
            .arg(dir.path())
            .arg((round * 1_000_000).to_string())
            .arg(rng.gen::<u64>().to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn writer");
        let stdout = child.stdout.take().expect("stdout");
        let (ready_tx, ready_rx) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut lines = Vec::new();
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line == "ready" {
                    let _ = ready_tx.send(());
                } else {
                    lines.push(line);
                }
            }
            lines
        });
        ready_rx
            .recv_timeout(Duration::from_secs(60))
            .expect("writer ready");
        std::thread::sleep(Duration::from_millis(rng.gen_range(50..600)));
        child.kill().expect("SIGKILL");
        child.wait().expect("wait");
        let lines = reader.join().expect("reader");
        // Replay: acknowledged writes into the model; the last begun one may be in flight.
        let mut in_flight: Option<(String, u64, usize, usize)> = None;
        for line in &lines {
            let words: Vec<&str> = line.split(' ').collect();
            match words[..] {
                ["begin", name, generation, offset, length] => {
                    in_flight = Some((
                        name.to_string(),
                        generation.parse().unwrap(),
                        offset.parse().unwrap(),
                        length.parse().unwrap(),
                    ));
                }
                ["ack", name, generation] => {
                    let (begun, g, offset, length) = in_flight.take().expect("ack without begin");
                    assert_eq!((begun.as_str(), g), (name, generation.parse().unwrap()));
                    let key = NAMES.iter().find(|n| **n == name).expect("name");
                    apply(model.get_mut(key).unwrap(), g, offset, length);
                    acknowledged += 1;
                }
                _ => panic!("unexpected line {line:?}"),
            }
        }
        let cluster = Cluster::open(
            dir.path(),
            ClusterOptions {
                background: false,
                ..ClusterOptions::default()
            },
        )
        .await
        .expect("reopen");
        let io = cluster.io_ctx("ec").await.expect("io_ctx");
        for name in NAMES {
            let got = match io.read_full(name).await {
                Ok(data) => Some(data),
                Err(RadosError::NotFound(_)) => None,
                Err(error) => panic!("round {round}: {name}: {error}"),
            };
            let expected = model[name].clone();
            if got == expected {
                continue;
            }
            let (flying, g, offset, length) = in_flight
                .clone()
                .unwrap_or_else(|| panic!("round {round}: {name} differs, nothing in flight"));
            assert_eq!(
                flying, name,
                "round {round}: {name} differs from its acknowledged writes"
            );
            let mut with = expected;
            apply(&mut with, g, offset, length);
            assert!(
                got == with,
                "round {round}: {name} is neither before nor after the write in flight"
            );
            // The write in flight took effect whole: it is the state from now on.
            *model.get_mut(name).unwrap() = with;
        }
        cluster.shutdown().await.expect("shutdown");
    }
    assert!(
        acknowledged > ROUNDS,
        "only {acknowledged} writes acknowledged"
    );
}
