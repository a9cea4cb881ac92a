//! SIGKILL crash test: a real process writes self-checking objects and prints each
//! acknowledged transaction; it is killed at a random moment, the store is reopened and every
//! acknowledged write must read back intact, with no torn transaction visible. Repeated on the
//! same store, so each round also recovers from the previous crashes.

#[path = "../src/crash_format.rs"]
mod crash_format;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use device::{Device, FileDevice, FileDeviceConfig};
use rand::{Rng, SeedableRng};
use store::{Store, StoreConfig};

const ROUNDS: u64 = 50;
const IDS_PER_ROUND: u64 = 1_000_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_never_loses_an_acknowledged_write() {
    let dir = tempfile::tempdir_in("/var/tmp").expect("tempdir");
    let seed: u64 = std::env::var("STORE_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    // id -> highest acknowledged generation.
    let mut acked: BTreeMap<u64, u64> = BTreeMap::new();
    let mut total_acks = 0usize;
    for round in 1..=ROUNDS {
        let mut child = Command::new(env!("CARGO_BIN_EXE_store-crash-writer"))
            .arg(dir.path())
            .arg((round * IDS_PER_ROUND).to_string())
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
            .recv_timeout(Duration::from_secs(20))
            .expect("writer ready");
        std::thread::sleep(Duration::from_millis(rng.gen_range(5..120)));
        child.kill().expect("SIGKILL");
        child.wait().expect("reap");
        let lines = reader.join().expect("reader");
        let mut this_round = Vec::new();
        for line in lines {
            let mut parts = line.split_whitespace();
            let (Some("ack"), Some(id), Some(generation)) =
                (parts.next(), parts.next(), parts.next())
            else {
                continue; // a line cut by the kill
            };
            let (Ok(id), Ok(generation)) = (id.parse::<u64>(), generation.parse::<u64>()) else {
                continue;
            };
            let entry = acked.entry(id).or_insert(generation);
            *entry = (*entry).max(generation);
            this_round.push(id);
            total_acks += 1;
        }
        // Check this round's objects and a sample of older ones (all of them at the end).
        let mut check: Vec<u64> = this_round;
        if round == ROUNDS {
            check = acked.keys().copied().collect();
        } else if !acked.is_empty() {
            let keys: Vec<u64> = acked.keys().copied().collect();
            for _ in 0..20 {
                check.push(keys[rng.gen_range(0..keys.len())]);
            }
        }
        verify(dir.path(), &acked, &check).await;
    }
    assert!(total_acks > 0, "the writer never acknowledged anything");
    eprintln!(
        "{ROUNDS} kills, {total_acks} acknowledged transactions, {} objects, all intact",
        acked.len()
    );
}

async fn verify(dir: &std::path::Path, acked: &BTreeMap<u64, u64>, check: &[u64]) {
    let device: Arc<dyn Device> = Arc::new(
        FileDevice::open(dir.join("data.img"), FileDeviceConfig::default()).expect("device"),
    );
    let store = Store::open(device, dir.join("meta"), StoreConfig::default())
        .await
        .expect("reopen after kill");
    store
        .check_consistency()
        .expect("allocator matches metadata");
    for &id in check {
        let minimum = acked[&id];
        let (collection, name) = (crash_format::collection(id), crash_format::name(id));
        let generation_bytes = store
            .get_xattr(&collection, &name, "gen")
            .await
            .unwrap_or_else(|e| panic!("acknowledged object {id} lost: {e}"));
        let generation = u64::from_le_bytes(generation_bytes.try_into().expect("8 bytes"));
        assert!(
            generation >= minimum,
            "object {id}: generation {generation} < acknowledged {minimum}"
        );
        let data = store
            .read(&collection, &name, 0, u64::MAX / 4)
            .await
            .unwrap_or_else(|e| panic!("object {id}: {e}"));
        if data != crash_format::content(id, generation) {
            let mut found = vec![format!(
                "object {id}: {:?}",
                store.describe_onode(&collection, &name).await
            )];
            // The objects whose blocks it holds.
            for block in data.chunks(crash_format::BLOCK_BYTES) {
                if block.len() >= 8 {
                    let other = u64::from_le_bytes(block[..8].try_into().expect("8 bytes"));
                    if other != id && other != 0 {
                        let (collection, name) =
                            (crash_format::collection(other), crash_format::name(other));
                        found.push(format!(
                            "object {other} (acknowledged generation {:?}): {:?}",
                            acked.get(&other),
                            store.describe_onode(&collection, &name).await
                        ));
                    }
                }
            }
            found.dedup();
            panic!(
                "object {id}: content is not generation {generation} (torn or lost write): {}\n{}",
                describe_blocks(id, generation, &data),
                found.join("\n")
            );
        }
        if generation > 0 {
            let omap = store
                .omap_get_keys(&collection, &name, &[b"gen".to_vec()])
                .await
                .expect("omap");
            assert_eq!(
                omap.get(b"gen".as_slice()).map(Vec::as_slice),
                Some(generation.to_le_bytes().as_slice()),
                "object {id}: omap and xattr disagree (torn transaction)"
            );
        }
    }
    store.shutdown().await.expect("shutdown");
}

/// Which generation each block of an object's content holds, against the expected one: the
/// blocks describe themselves (id, index, generation), so a mismatch says what was read.
fn describe_blocks(id: u64, generation: u64, data: &[u8]) -> String {
    let expected = crash_format::content(id, generation);
    let mut parts = vec![format!(
        "{} bytes read, {} expected",
        data.len(),
        expected.len()
    )];
    for (index, block) in data.chunks(crash_format::BLOCK_BYTES).enumerate() {
        let start = index * crash_format::BLOCK_BYTES;
        let wanted = expected.get(start..start + block.len());
        let state = if wanted == Some(block) {
            "ok".to_string()
        } else if block.iter().all(|&b| b == 0) {
            "zeros".to_string()
        } else if block.len() >= 16 {
            let field = |at: usize, bytes: usize| {
                let mut value = [0u8; 8];
                value[..bytes].copy_from_slice(&block[at..at + bytes]);
                u64::from_le_bytes(value)
            };
            format!(
                "holds id {} block {} generation {}",
                field(0, 8),
                field(8, 4),
                field(12, 4)
            )
        } else {
            "short".to_string()
        };
        parts.push(format!("block {index}: {state}"));
    }
    let ranges: Vec<String> = (1..=generation)
        .map(|g| format!("{g}:{:?}", crash_format::range(id, g)))
        .collect();
    parts.push(format!("generation ranges {}", ranges.join(" ")));
    parts.join("; ")
}
