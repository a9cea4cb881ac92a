//! 4 KiB object write_full and read ops/s of the store on a file device, at several queue
//! depths, each point followed by fio's random 4 KiB writes/reads on the same filesystem.
//!
//! `cargo run -p store --release --example bench_store [-- SECONDS [DIR]]`
//! (default 3 s per point, a temporary directory under /var/tmp).

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use device::{Device, FileDevice, FileDeviceConfig};
use store::{ObjectId, Store, StoreConfig, Transaction};

const OBJECT_BYTES: usize = 4096;
/// The data file, written in full first (as fio lays out its file), so the flushes measure
/// data, not the filesystem allocating blocks of a sparse file.
const DEVICE_BYTES: u64 = 1 << 30;
const DEPTHS: [usize; 4] = [1, 16, 64, 256];

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let seconds: f64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(3.0);
    let base = args.next().unwrap_or_else(|| "/var/tmp".into());
    let dir = tempfile::tempdir_in(&base).context("temporary directory")?;
    let duration = Duration::from_secs_f64(seconds);
    let data_path = dir.path().join("data.img");
    prefill(&data_path)?;
    let device: Arc<dyn Device> =
        Arc::new(FileDevice::open(&data_path, FileDeviceConfig::default())?);
    let store = Arc::new(
        Store::create(
            Arc::clone(&device),
            dir.path().join("meta"),
            StoreConfig::default(),
        )
        .await?,
    );
    println!("store on {} ({}s per point)", dir.path().display(), seconds);
    println!(
        "{:<28} {:>6} {:>12} {:>12}",
        "workload", "QD", "ops/s", "mean µs"
    );
    let next = Arc::new(AtomicU64::new(0));
    for depth in DEPTHS {
        let (ops, elapsed) = run(depth, duration, {
            let store = Arc::clone(&store);
            let next = Arc::clone(&next);
            move || {
                let store = Arc::clone(&store);
                let id = next.fetch_add(1, Ordering::Relaxed);
                async move {
                    let object = ObjectId::new("1.0", format!("obj{id:010}"));
                    let mut t = Transaction::new(id);
                    t.write_full(&object, vec![(id % 251) as u8; OBJECT_BYTES]);
                    store.apply(t).await
                }
            }
        })
        .await?;
        report("store 4K write_full", depth, ops, elapsed);
        fio_row(
            dir.path(),
            "fio 4K randwrite",
            depth,
            seconds,
            &["--rw=randwrite"],
        );
        fio_row(
            dir.path(),
            "fio 4K randwrite fdatasync",
            depth,
            seconds,
            &["--rw=randwrite", "--fdatasync=1"],
        );
    }
    let written = next.load(Ordering::Relaxed).max(1);
    let probe = Arc::new(AtomicU64::new(0x9e37_79b9));
    for depth in DEPTHS {
        let (ops, elapsed) = run(depth, duration, {
            let store = Arc::clone(&store);
            let probe = Arc::clone(&probe);
            move || {
                let store = Arc::clone(&store);
                let id = probe.fetch_add(0x9e37_79b9, Ordering::Relaxed) % written;
                async move {
                    let data = store
                        .read("1.0", &format!("obj{id:010}"), 0, OBJECT_BYTES as u64)
                        .await?;
                    assert_eq!(data.len(), OBJECT_BYTES);
                    Ok(())
                }
            }
        })
        .await?;
        report("store 4K read", depth, ops, elapsed);
        fio_row(
            dir.path(),
            "fio 4K randread",
            depth,
            seconds,
            &["--rw=randread"],
        );
    }
    let statfs = store.statfs();
    println!(
        "objects {} stored {} B allocated {} B data-hole {:.1}% onode+omap {:.0} B/object, metadata file {:.0} B/object",
        statfs.objects,
        statfs.stored_bytes,
        statfs.allocated_bytes,
        statfs.data_hole_ratio() * 100.0,
        statfs.metadata_bytes_per_object(),
        statfs.metadata_file_bytes_per_object()
    );
    Arc::try_unwrap(store)
        .map_err(|_| anyhow::anyhow!("store still shared"))?
        .shutdown()
        .await?;
    Ok(())
}

fn prefill(path: &Path) -> anyhow::Result<()> {
    use std::io::Write;
    let mut file = std::fs::File::create(path)?;
    let chunk = vec![0u8; 8 << 20];
    for _ in 0..DEVICE_BYTES / chunk.len() as u64 {
        file.write_all(&chunk)?;
    }
    file.sync_all()?;
    Ok(())
}

/// Runs fio right after the store's point, so both see the same disk weather.
fn fio_row(dir: &Path, label: &str, depth: usize, seconds: f64, extra: &[&str]) {
    match fio(dir, depth, seconds, extra) {
        Some(iops) => report(label, depth, iops * seconds, seconds_duration(seconds)),
        None => println!("{label:<28} {depth:>6} (fio unavailable)"),
    }
}

fn seconds_duration(seconds: f64) -> Duration {
    Duration::from_secs_f64(seconds)
}

fn report(label: &str, depth: usize, ops: f64, elapsed: Duration) {
    let rate = ops / elapsed.as_secs_f64();
    let mean_us = depth as f64 * 1e6 / rate.max(1e-9);
    println!("{label:<28} {depth:>6} {rate:>12.0} {mean_us:>12.0}");
}

/// Runs `depth` concurrent loops of `op` for `duration`; returns completed ops and the time.
async fn run<F, Fut>(depth: usize, duration: Duration, op: F) -> anyhow::Result<(f64, Duration)>
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = store::Result<()>> + Send,
{
    let start = Instant::now();
    let deadline = start + duration;
    let mut tasks = Vec::new();
    for _ in 0..depth {
        let op = op.clone();
        tasks.push(tokio::spawn(async move {
            let mut done = 0u64;
            while Instant::now() < deadline {
                op().await?;
                done += 1;
            }
            Ok::<u64, store::StoreError>(done)
        }));
    }
    let mut total = 0;
    for task in tasks {
        total += task.await??;
    }
    Ok((total as f64, start.elapsed()))
}

/// fio's IOPS for 4 KiB random I/O on a 1 GiB file at `depth` (libaio, O_DIRECT).
fn fio(dir: &Path, depth: usize, seconds: f64, extra: &[&str]) -> Option<f64> {
    let output = Command::new("fio")
        .args([
            "--name=peer",
            &format!("--filename={}", dir.join("fio.img").display()),
            "--size=1G",
            "--bs=4k",
            &format!("--iodepth={depth}"),
            "--ioengine=libaio",
            "--direct=1",
            &format!("--runtime={}", seconds.ceil() as u64),
            "--time_based",
            "--output-format=json",
        ])
        .args(extra)
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&output.stdout);
    // Sum "iops" of the read and write sections without a JSON dependency.
    let mut iops = 0.0;
    for section in ["\"read\"", "\"write\""] {
        let at = text.find(section)?;
        let rest = &text[at..];
        let key = rest.find("\"iops\"")?;
        let value = rest[key + 6..].trim_start_matches([' ', ':']);
        let end = value.find([',', '\n'])?;
        iops += value[..end].trim().parse::<f64>().ok()?;
    }
    Some(iops)
}
