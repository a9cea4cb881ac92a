//! Measures the file device's I/O engines: 4 KiB random reads and writes at QD 1 and 32, with
//! O_DIRECT, for tokio's blocking pool and dedicated pools of several sizes, and fio on the
//! same file in the same run (psync with 1 and 16 jobs, io_uring at QD 1 and 32), if installed.
//!
//! `cargo run -p device --release --example file_engines [path] [seconds_per_run] [size_mib]`
//! (default path: ./file-engines.img, removed at the end).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use device::{Device, FileDevice, FileDeviceConfig, IoEngine};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

async fn drive(
    device: Arc<FileDevice>,
    read: bool,
    queue_depth: usize,
    run_for: Duration,
) -> Result<()> {
    let deadline = Instant::now() + run_for;
    let slots = device.size_bytes() / 4096;
    let mut tasks = Vec::new();
    for worker in 0..queue_depth {
        let device = Arc::clone(&device);
        tasks.push(tokio::spawn(async move {
            let mut rng = ChaCha8Rng::seed_from_u64(worker as u64);
            let mut buffer = vec![0x5Au8; 4096];
            while Instant::now() < deadline {
                let offset = rng.gen_range(0..slots) * 4096;
                if read {
                    device.read_at(offset, &mut buffer).await?;
                } else {
                    device.write_at(offset, &buffer).await?;
                }
            }
            Ok::<(), device::DeviceError>(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let path = args.next().unwrap_or_else(|| "file-engines.img".into());
    let seconds: f64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(2.0);
    let size_mib: u64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(512);
    let size_bytes = size_mib << 20;
    {
        // Fill with data so reads hit the disk, not holes.
        let device = FileDevice::create(&path, size_bytes, FileDeviceConfig::default())?;
        println!("{path}: {size_mib} MiB, O_DIRECT {}", device.is_direct());
        let chunk = vec![0xC3u8; 1 << 20];
        for offset in (0..size_bytes).step_by(1 << 20) {
            device.write_at(offset, &chunk).await?;
        }
        device.flush().await?;
    }
    let engines = [
        ("tokio-blocking", IoEngine::TokioBlocking),
        ("threads-4", IoEngine::Threads { threads: 4 }),
        ("threads-8", IoEngine::Threads { threads: 8 }),
        ("threads-16", IoEngine::Threads { threads: 16 }),
        ("threads-32", IoEngine::Threads { threads: 32 }),
    ];
    println!(
        "{:<15} {:<5} {:>3} | {:>9} {:>9} {:>9}",
        "engine", "op", "qd", "IOPS", "mean µs", "p99 µs"
    );
    for (name, engine) in engines {
        let config = FileDeviceConfig {
            engine,
            ..FileDeviceConfig::default()
        };
        let device = Arc::new(FileDevice::open(&path, config)?);
        for read in [true, false] {
            for queue_depth in [1, 32] {
                let before = device.stats();
                drive(
                    Arc::clone(&device),
                    read,
                    queue_depth,
                    Duration::from_secs_f64(seconds),
                )
                .await?;
                let period = device.stats().since(&before);
                let op = if read { &period.read } else { &period.write };
                println!(
                    "{:<15} {:<5} {:>3} | {:>9.0} {:>9.1} {:>9.1}",
                    name,
                    if read { "read" } else { "write" },
                    queue_depth,
                    op.ops as f64 * 1e9 / period.elapsed_ns as f64,
                    op.latency_us_mean(),
                    op.latency_us_p99()
                );
            }
        }
    }
    fio_peers(&path, seconds);
    std::fs::remove_file(&path)?;
    Ok(())
}

/// fio on the same file: the limit our engines are measured against.
fn fio_peers(path: &str, seconds: f64) {
    let jobs = [
        ("fio psync x1", "psync", 1, 1),
        ("fio psync x16", "psync", 1, 16),
        ("fio io_uring", "io_uring", 1, 1),
        ("fio io_uring", "io_uring", 32, 1),
    ];
    for (name, engine, iodepth, numjobs) in jobs {
        for rw in ["randread", "randwrite"] {
            let output = std::process::Command::new("fio")
                .args([
                    "--name=peer",
                    &format!("--filename={path}"),
                    "--direct=1",
                    "--bs=4k",
                    &format!("--rw={rw}"),
                    &format!("--ioengine={engine}"),
                    &format!("--iodepth={iodepth}"),
                    &format!("--numjobs={numjobs}"),
                    "--group_reporting",
                    &format!("--runtime={seconds}"),
                    "--time_based",
                    "--output-format=terse",
                ])
                .output();
            let Ok(output) = output else {
                println!("(fio not installed: no peer figures)");
                return;
            };
            let text = String::from_utf8_lossy(&output.stdout);
            let fields: Vec<&str> = text.lines().last().unwrap_or("").split(';').collect();
            // Terse v3: field 8 is read IOPS, field 49 write IOPS (1-based).
            let iops = if rw == "randread" {
                fields.get(7)
            } else {
                fields.get(48)
            };
            println!(
                "{:<15} {:<5} {:>3} | {:>9}",
                name,
                if rw == "randread" { "read" } else { "write" },
                iodepth * numjobs,
                iops.copied().unwrap_or("?")
            );
        }
    }
}
