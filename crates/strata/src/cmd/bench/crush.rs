//! `strata bench crush`: CRUSH mapping throughput, ours against Ceph's `crushtool` on the same
//! map, rule and inputs, measured in the same run.
//!
//! crushtool is timed with `--test --show-statistics` (every input is mapped, only a summary is
//! printed, so output formatting does not dominate); its fixed start-up cost is measured with a
//! one-input run and reported separately. Ours is timed single-threaded and with T threads
//! (each thread owns a `Mapper` and a contiguous slice of inputs). Before timing, the first
//! inputs are checked to map identically in both.

use std::path::PathBuf;
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use crush::mapper::Mapper;
use crush::tester;

/// Time CRUSH mappings: strata vs crushtool.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Binary crushmap to map through.
    #[arg(long, default_value = "fixtures/crush-vectors/c5x12_jewel.bin")]
    pub map: PathBuf,
    /// Number of inputs (x = 0..N-1).
    #[arg(long, default_value_t = 1_000_000)]
    pub inputs: u32,
    /// Threads for the multi-threaded run of ours (default: available parallelism).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Rule id to map with.
    #[arg(long, default_value_t = 0)]
    pub rule: usize,
    /// Replicas per mapping (result_max).
    #[arg(long = "num-rep", default_value_t = 3)]
    pub num_rep: usize,
    /// crushtool binary to compare against (skipped with a note if missing).
    #[arg(long, default_value = "/usr/bin/crushtool")]
    pub crushtool: PathBuf,
}

pub fn run(mut args: Args) -> anyhow::Result<ExitCode> {
    if !args.map.exists() && args.map.is_relative() {
        // Run from anywhere: fall back to the path relative to the workspace root.
        let rooted = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join(&args.map);
        if rooted.exists() {
            args.map = rooted;
        }
    }
    let bytes =
        std::fs::read(&args.map).with_context(|| format!("reading {}", args.map.display()))?;
    let map = crush::codec::decode(&bytes).context("decoding the map")?;
    if map.rule(args.rule).is_none() {
        bail!("rule {} not in the map", args.rule);
    }
    if args.inputs == 0 {
        bail!("--inputs must be at least 1");
    }
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let weights = tester::device_weights(&map, &Default::default());
    let choose_args = tester::test_choose_args(&map);

    let have_crushtool = args.crushtool.exists();
    if have_crushtool {
        check_identical(&args, &map)?;
    }

    // Ours, single-threaded.
    let (single, checksum_single) = time_ours(&map, &args, &weights, choose_args, 1);
    // Ours, T threads.
    let (multi, checksum_multi) = time_ours(&map, &args, &weights, choose_args, threads);
    if checksum_single != checksum_multi {
        bail!("threaded run mapped differently ({checksum_single:#x} vs {checksum_multi:#x})");
    }

    let n = f64::from(args.inputs);
    println!(
        "map {} rule {} num_rep {} inputs {}",
        args.map.display(),
        args.rule,
        args.num_rep,
        args.inputs
    );
    println!(
        "{:<34} {:>8} {:>12} {:>8} {:>14} {:>9}",
        "engine", "wall_s", "mappings/s", "cpu_s", "mappings/cpu_s", "ratio"
    );
    let rate = |t: &Timing| n / t.elapsed.as_secs_f64().max(1e-9);
    let cpu_rate = |t: &Timing| t.cpu_s.filter(|&c| c > 0.0).map(|c| n / c);
    let print_row = |label: &str, t: &Timing, ratio: &str| {
        println!(
            "{label:<34} {:>8.3} {:>12.0} {:>8} {:>14} {:>9}",
            t.elapsed.as_secs_f64(),
            rate(t),
            t.cpu_s.map_or("-".into(), |c| format!("{c:.2}")),
            cpu_rate(t).map_or("-".into(), |r| format!("{r:.0}")),
            ratio
        );
    };
    // The peer's figures: (wall rate, cpu rate) with its start-up subtracted.
    let peer = if have_crushtool {
        let startup = time_crushtool(&args, 1)?;
        let total = time_crushtool(&args, args.inputs)?;
        let net = Timing {
            elapsed: total
                .elapsed
                .saturating_sub(startup.elapsed)
                .max(Duration::from_micros(1)),
            cpu_s: total
                .cpu_s
                .zip(startup.cpu_s)
                .map(|(a, b)| (a - b).max(0.001)),
        };
        print_row("crushtool --test (process total)", &total, "-");
        print_row("crushtool --test (minus start-up)", &net, "1.00x");
        Some((rate(&net), cpu_rate(&net)))
    } else {
        println!(
            "(crushtool not found at {}: peer skipped)",
            args.crushtool.display()
        );
        None
    };
    for (label, timing) in [
        ("strata, 1 thread".to_string(), single),
        (format!("strata, {threads} threads"), multi),
    ] {
        // Ratio of wall rates; with CPU figures also the ratio of per-CPU-second rates.
        let ratio = match peer {
            Some((wall, cpu)) => {
                let wall_ratio = rate(&timing) / wall;
                match (cpu, cpu_rate(&timing)) {
                    (Some(c), Some(ours)) => format!("{wall_ratio:.2}x/{:.2}x", ours / c),
                    _ => format!("{wall_ratio:.2}x"),
                }
            }
            None => "-".to_string(),
        };
        print_row(&label, &timing, &ratio);
    }
    println!("ratio = ours / crushtool by wall time / by CPU time");
    Ok(ExitCode::SUCCESS)
}

/// Map every input with `threads` workers; returns the elapsed time and an order-independent
/// checksum of the results (so the threaded run can be checked against the single one).
fn time_ours(
    map: &crush::CrushMap,
    args: &Args,
    weights: &[u32],
    choose_args: Option<&crush::ChooseArgMap>,
    threads: usize,
) -> (Timing, u64) {
    let chunk = args.inputs.div_ceil(threads as u32).max(1);
    let cpu_start = cpu_seconds();
    let start = Instant::now();
    let checksum = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads as u32)
            .map(|t| {
                let first = t.saturating_mul(chunk).min(args.inputs);
                let last = first.saturating_add(chunk).min(args.inputs);
                scope.spawn(move || {
                    let mut mapper = Mapper::new(map, choose_args);
                    let mut out = Vec::with_capacity(args.num_rep);
                    let mut sum = 0_u64;
                    for x in first..last {
                        mapper.do_rule_into(args.rule, x, args.num_rep, weights, &mut out);
                        for (i, &osd) in out.iter().enumerate() {
                            sum = sum.wrapping_add(
                                u64::from(x ^ osd as u32).wrapping_mul(i as u64 * 2 + 1),
                            );
                        }
                    }
                    sum
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or(0))
            .fold(0_u64, u64::wrapping_add)
    });
    let elapsed = start.elapsed();
    let cpu = cpu_seconds()
        .zip(cpu_start)
        .map(|((u1, _), (u0, _))| u1 - u0);
    (
        Timing {
            elapsed,
            cpu_s: cpu,
        },
        checksum,
    )
}

/// Wall time and, where /proc allows, CPU seconds (user + system) of a run.
#[derive(Debug, Clone, Copy)]
struct Timing {
    elapsed: Duration,
    cpu_s: Option<f64>,
}

/// (this process's CPU seconds, its waited-for children's CPU seconds) from /proc/self/stat;
/// CPU time is what a loaded machine does not inflate, so the table reports both.
fn cpu_seconds() -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // Fields 14..=17 of proc(5) (utime, stime, cutime, cstime), counted after the comm.
    let tick = |i: usize| fields.get(i - 3)?.parse::<f64>().ok();
    const TICKS_PER_S: f64 = 100.0;
    Some((
        (tick(14)? + tick(15)?) / TICKS_PER_S,
        (tick(16)? + tick(17)?) / TICKS_PER_S,
    ))
}

fn time_crushtool(args: &Args, inputs: u32) -> anyhow::Result<Timing> {
    let cpu_start = cpu_seconds();
    let start = Instant::now();
    let status = super::peer_command(&args.crushtool)
        .arg("-i")
        .arg(&args.map)
        .args(["--test", "--show-statistics", "--rule"])
        .arg(args.rule.to_string())
        .arg("--num-rep")
        .arg(args.num_rep.to_string())
        .args(["--min-x", "0", "--max-x"])
        .arg((inputs - 1).to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .context("running crushtool")?;
    let elapsed = start.elapsed();
    if !status.success() {
        bail!("crushtool failed: {status}");
    }
    let cpu_s = cpu_seconds()
        .zip(cpu_start)
        .map(|((_, c1), (_, c0))| c1 - c0);
    Ok(Timing { elapsed, cpu_s })
}

/// The first (up to) 10,000 inputs must map identically in both before we time anything.
fn check_identical(args: &Args, map: &crush::CrushMap) -> anyhow::Result<()> {
    let n = args.inputs.min(10_000);
    let output = super::peer_command(&args.crushtool)
        .arg("-i")
        .arg(&args.map)
        .args(["--test", "--show-mappings", "--rule"])
        .arg(args.rule.to_string())
        .arg("--num-rep")
        .arg(args.num_rep.to_string())
        .args(["--min-x", "0", "--max-x"])
        .arg((n - 1).to_string())
        .stderr(Stdio::null())
        .output()
        .context("running crushtool")?;
    let config = tester::TestConfig {
        rule: Some(args.rule as i32),
        num_rep: Some((args.num_rep as i32, args.num_rep as i32)),
        x_range: Some((0, n as i32 - 1)),
        show_mappings: true,
        ..Default::default()
    };
    let mut ours = Vec::new();
    tester::run(map, &config, &mut ours)?;
    if ours != output.stdout {
        bail!("strata and crushtool disagree on the first {n} mappings; not timing");
    }
    Ok(())
}
