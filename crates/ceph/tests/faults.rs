//! Faults on Ceph: an OSD of a size-3 pool stops (SIGSTOP) during a stream of writes through
//! the backend. Every write succeeds or fails with a clear, retryable error within the op
//! timeout; nothing acknowledged is lost or changed once the OSD is back; the backend keeps
//! serving.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use rados::{PoolSpec, Rados, RadosError};

/// The op timeout this test connects with.
const OP_TIMEOUT_S: u64 = 5;

/// Resumes a stopped daemon even if the test fails.
struct Resume(u32);

impl Drop for Resume {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-CONT", &self.0.to_string()])
            .status();
    }
}

fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .args([format!("-{name}"), pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{name} {pid}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_osd_fails_writes_in_time_and_loses_nothing_acknowledged() {
    let Some(cluster) = common::cluster() else {
        return;
    };
    let rados = cluster
        .connect_with(OP_TIMEOUT_S)
        .await
        .expect("connect to the minicluster");
    rados
        .pool_create(PoolSpec::new("faults").with_pg_num(8))
        .await
        .expect("pool");
    let io = rados.io_ctx("faults").await.expect("open");
    let started = Instant::now();
    let osd = cluster.pid("osd.1").expect("osd.1's pid");
    let _resume = Resume(osd);
    let mut acknowledged = Vec::new();
    let mut failed = 0u32;
    let mut stopped_at: Option<Instant> = None;
    let mut marked_down = false;
    let mut acknowledged_while_stopped = 0u32;
    // osd.1 stops after 2 s. Its PGs block (the failures below) until it is marked down; the
    // minicluster's heartbeat grace is 20 s, so the test marks it down after 8 s as the
    // monitor would later, then its PGs serve with 2 of 3 replicas for 17 s more. (Marked
    // down at 12 s of 20, only the one write issued after the mark had the chance to land,
    // and a peering slower than its 5 s timeout failed the test.)
    let mut index = 0u32;
    loop {
        let now = Instant::now();
        match stopped_at {
            None if started.elapsed() > Duration::from_secs(2) => {
                signal(osd, "STOP");
                stopped_at = Some(now);
            }
            Some(at) if !marked_down && now - at > Duration::from_secs(8) => {
                rados
                    .mon_command(r#"{"prefix": "osd down", "ids": ["1"]}"#)
                    .await
                    .expect("mark osd.1 down");
                marked_down = true;
            }
            Some(at) if now - at > Duration::from_secs(25) => break,
            _ => {}
        }
        let name = format!("object-{index}");
        let value = format!("value of {index}").into_bytes();
        let begun = Instant::now();
        let result = io.write_full(&name, &value).await;
        let took = begun.elapsed();
        // A hang bound, not a speed threshold: the op timeout plus the client's retry slack.
        assert!(
            took < Duration::from_secs(3 * OP_TIMEOUT_S),
            "write {index} took {took:?}"
        );
        match result {
            Ok(()) => {
                if stopped_at.is_some() {
                    acknowledged_while_stopped += 1;
                }
                acknowledged.push((name, value));
            }
            Err(error) => {
                assert!(
                    matches!(error, RadosError::TimedOut(_)) && error.is_retryable(),
                    "write {index}: {error}"
                );
                assert!(error.to_string().contains("op timeout"), "{error}");
                failed += 1;
            }
        }
        index += 1;
        // A steady stream, not a flood: what is acknowledged is all read back below.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    signal(osd, "CONT");
    println!(
        "{} writes acknowledged ({acknowledged_while_stopped} while osd.1 was stopped), {failed} \
         failed with a timeout",
        acknowledged.len()
    );
    assert!(
        failed > 0,
        "a stopped OSD delays some writes past the op timeout"
    );
    assert!(
        acknowledged_while_stopped > 0,
        "the backend kept serving once osd.1 was marked down"
    );
    // Once osd.1 is back up, every acknowledged write reads back as written.
    let deadline = Instant::now() + Duration::from_secs(60);
    while rados.cluster_stats().await.map_or(0, |stats| stats.osds_up) < 3 {
        assert!(Instant::now() < deadline, "osd.1 did not come back up");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let mut readers = Vec::new();
    for chunk in acknowledged.chunks(acknowledged.len().div_ceil(8).max(1)) {
        let chunk = chunk.to_vec();
        let io = io.clone();
        readers.push(tokio::spawn(async move {
            for (name, value) in chunk {
                let deadline = Instant::now() + Duration::from_secs(60);
                loop {
                    match io.read_full(&name).await {
                        Ok(read) => {
                            assert_eq!(read, value, "{name}");
                            break;
                        }
                        Err(error) if error.is_retryable() && Instant::now() < deadline => {
                            tokio::time::sleep(Duration::from_millis(200)).await;
                        }
                        Err(error) => panic!("{name}: {error}"),
                    }
                }
            }
        }));
    }
    for reader in readers {
        reader.await.expect("every acknowledged write reads back");
    }
    io.write_full("after", b"back")
        .await
        .expect("write after the OSD came back");
    assert_eq!(io.read_full("after").await.expect("read"), b"back");
}
