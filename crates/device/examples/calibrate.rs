//! Drives each emulation preset in real time at QD 1 and QD 32 with 4 KiB random reads and
//! writes, and prints what it achieved next to what the pure model predicts in virtual time,
//! plus the precise timer's lateness.
//!
//! `cargo run -p device --release --example calibrate [seconds_per_run] [preset...]`

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use device::model::{run_closed_loop, Workload};
use device::{Device, EmulatedDevice, EmulationProfile, MemoryDevice, PreciseTimer};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// An HDD's range spans the full stroke whatever its size; 256 MiB keeps memory use small.
const HDD_BYTES: u64 = 256 << 20;
/// Flash has no geometry: a small device bounds the memory random writes allocate.
const SSD_BYTES: u64 = 64 << 20;

async fn drive(
    device: Arc<EmulatedDevice>,
    workload: Workload,
    queue_depth: usize,
    run_for: Duration,
) {
    let deadline = Instant::now() + run_for;
    let mut tasks = Vec::new();
    for worker in 0..queue_depth {
        let device = Arc::clone(&device);
        tasks.push(tokio::spawn(async move {
            let mut rng = ChaCha8Rng::seed_from_u64(worker as u64);
            let slots = device.size_bytes() / workload.length_bytes;
            let mut buffer = vec![0x5Au8; workload.length_bytes as usize];
            let mut cursor = worker as u64 * slots / queue_depth as u64;
            while Instant::now() < deadline {
                let slot = if workload.random {
                    rng.gen_range(0..slots)
                } else {
                    cursor += 1;
                    (cursor - 1) % slots
                };
                let offset = slot * workload.length_bytes;
                let result = if rng.gen_bool(workload.read_fraction) {
                    device.read_at(offset, &mut buffer).await
                } else {
                    device.write_at(offset, &buffer).await
                };
                result.expect("emulated I/O over memory cannot fail");
            }
        }));
    }
    for task in tasks {
        let _ = task.await;
    }
}

/// How late sleeps of a few lengths end: at the timer thread, and as seen by the awaiting task
/// (which adds the runtime's wake-up).
async fn timer_accuracy(timer: &PreciseTimer) {
    println!("precise timer: lateness of 2000 sleeps per length (µs)");
    println!(
        "{:>10} | {:>9} {:>9} {:>9} | {:>9} {:>9} {:>9}",
        "sleep", "timer.p50", "timer.p99", "timer.max", "task.p50", "task.p99", "task.max"
    );
    for sleep_us in [20u64, 100, 500, 5000] {
        let before = timer.stats().lateness_ns;
        let mut task = device::histogram::Histogram::default();
        let rounds = if sleep_us >= 5000 { 200 } else { 2000 };
        for _ in 0..rounds {
            let deadline = Instant::now() + Duration::from_micros(sleep_us);
            timer.sleep_until(deadline).await;
            task.record(
                Instant::now()
                    .saturating_duration_since(deadline)
                    .as_nanos() as u64,
            );
        }
        let at_timer = timer.stats().lateness_ns.since(&before);
        let us = |ns: u64| ns as f64 / 1e3;
        println!(
            "{:>8}µs | {:>9.1} {:>9.1} {:>9.1} | {:>9.1} {:>9.1} {:>9.1}",
            sleep_us,
            us(at_timer.percentile(0.5)),
            us(at_timer.percentile(0.99)),
            us(at_timer.max()),
            us(task.percentile(0.5)),
            us(task.percentile(0.99)),
            us(task.max()),
        );
    }
    println!();
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let seconds: f64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(3.0);
    let mut presets: Vec<String> = args.collect();
    if presets.is_empty() {
        presets = EmulationProfile::PRESETS
            .iter()
            .map(|s| s.to_string())
            .collect();
    }
    let timer = PreciseTimer::global();
    timer_accuracy(&timer).await;
    println!(
        "{:<9} {:<9} {:>3} | {:>9} {:>9} {:>6} {:>7} | {:>9} {:>9} | {:>9} {:>9} | {:>8} {:>8}",
        "preset",
        "op",
        "qd",
        "model",
        "real",
        "ratio",
        "real",
        "mod.mean",
        "real.mean",
        "mod.p99",
        "real.p99",
        "late.p50",
        "late.p99"
    );
    println!(
        "{:<23} | {:>9} {:>9} {:>6} {:>7} | {:>9} {:>9} | {:>9} {:>9} | {:>8} {:>8}",
        "", "IOPS", "IOPS", "", "MB/s", "µs", "µs", "µs", "µs", "µs", "µs"
    );
    for name in &presets {
        let profile =
            EmulationProfile::preset(name).with_context(|| format!("unknown preset {name}"))?;
        let size_bytes = match profile {
            EmulationProfile::Hdd(_) => HDD_BYTES,
            _ => SSD_BYTES,
        };
        let sequential = |length_bytes, read_fraction| Workload {
            length_bytes,
            read_fraction,
            random: false,
        };
        let jobs = [
            ("rand-r4k", Workload::random_read_4k(), &[1usize, 32][..]),
            ("rand-w4k", Workload::random_write_4k(), &[1, 32][..]),
            ("seq-r512k", sequential(512 * 1024, 1.0), &[1][..]),
            ("seq-w512k", sequential(512 * 1024, 0.0), &[1][..]),
        ];
        for (label, workload, depths) in jobs {
            for &queue_depth in depths {
                let mut model = profile.build(size_bytes);
                let predicted =
                    run_closed_loop(model.as_mut(), size_bytes, workload, queue_depth, 20_000, 1);
                let backing = Arc::new(MemoryDevice::with_block_size("memory", size_bytes, 4096)?);
                // Touch every chunk first: page faults on fresh memory (~1 ms per 512 KiB under
                // load) would otherwise be measured as the emulated device's slowness.
                let fill = vec![0xA5u8; 1 << 20];
                for offset in (0..size_bytes).step_by(fill.len()) {
                    backing.write_at(offset, &fill).await?;
                }
                let device = Arc::new(EmulatedDevice::new(name.as_str(), backing, profile.clone()));
                let timer_before = timer.stats().lateness_ns;
                let before = device.stats();
                drive(
                    Arc::clone(&device),
                    workload,
                    queue_depth,
                    Duration::from_secs_f64(seconds),
                )
                .await;
                let period = device.stats().since(&before);
                let lateness = timer.stats().lateness_ns.since(&timer_before);
                let op = if workload.read_fraction > 0.5 {
                    &period.read
                } else {
                    &period.write
                };
                let achieved = op.ops as f64 * 1e9 / period.elapsed_ns as f64;
                println!(
                    "{:<9} {:<9} {:>3} | {:>9.0} {:>9.0} {:>6.3} {:>7.1} | {:>9.1} {:>9.1} | {:>9.1} {:>9.1} | {:>8.1} {:>8.1}",
                    name,
                    label,
                    queue_depth,
                    predicted.iops(),
                    achieved,
                    achieved / predicted.iops(),
                    op.bytes as f64 * 1e3 / period.elapsed_ns as f64,
                    predicted.latency_ns.mean() / 1e3,
                    op.latency_us_mean(),
                    predicted.latency_ns.percentile(0.99) as f64 / 1e3,
                    op.latency_us_p99(),
                    lateness.percentile(0.5) as f64 / 1e3,
                    lateness.percentile(0.99) as f64 / 1e3,
                );
            }
        }
    }
    Ok(())
}
