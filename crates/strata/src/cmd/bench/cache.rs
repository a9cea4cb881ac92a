//! `strata bench cache`: seed 001's jobs through fio's nbd engine against the emulated HDD
//! alone (baseline), our cache in the seed's configuration, the raw fast device (the limit)
//! and nbdkit's memory plugin (the NBD transport limit), in one run; prints IOPS, bandwidth,
//! mean latency and the ratios, with Open-CAS's reference figures on this machine.
//!
//! Each row also shows the server's CPU time per request (user + system of the server
//! process over the job, from /proc) and the load average when the job ended: on a shared
//! 2-core machine the wall rates move with the load, the CPU cost per request much less.
//!
//! Rounds: every target is started and prefilled first; then each round runs every job on
//! every target back to back (job by job, so the cache's and the fast device's run of a job
//! are seconds apart), and the table reports each figure's median over the rounds and each
//! ratio as the median of the ratios measured within a round. On a shared disk whose speed
//! swings from minute to minute, a ratio between rows measured minutes apart carries the
//! swing; two rows measured seconds apart, repeated, do not.
//!
//! The fast devices are emulated NVMe; on a file of this machine's one (virtual) disk they
//! run at the disk's speed of the moment, not the profile's. The seed's experiment, an NVMe
//! over an HDD: `strata bench cache --dir /var/tmp/bc --fast-dir /dev/shm/bc` (HDD and core
//! on the disk, cache and fast device on tmpfs at the NVMe profile's speed). The `wt` target
//! stays on raw files in --dir, as Open-CAS's reference run was.
//! Quick variant for iteration:
//! `strata bench cache --rounds 1 --runtime-s 3 --jobs randread,randwrite --targets cache,fast`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::Value;

/// Open-CAS (OCF) through the same NBD path on this machine, wt, 4 KiB QD32 (reference doc).
const OPEN_CAS_RANDREAD_IOPS: f64 = 19_700.0;
const OPEN_CAS_RANDWRITE_IOPS: f64 = 16_400.0;

/// Run seed 001's benchmark.
#[derive(clap::Args)]
pub struct Args {
    /// Directory for the device files (sparse).
    #[arg(long, default_value = "/tmp/strata-bench-cache")]
    pub dir: PathBuf,
    /// Directory of the fast devices' files (the cache device and the raw fast device);
    /// default: --dir. Both are emulated NVMe, whose timing model is only a floor: on a file
    /// of this machine's disk they run at whatever the disk does at that moment (its random
    /// 4 KiB speed swings several-fold from minute to minute here). On tmpfs (/dev/shm) they
    /// run at the profile's speed, as an NVMe would, and the HDD and core stay in --dir.
    #[arg(long)]
    pub fast_dir: Option<PathBuf>,
    /// Seconds per job.
    #[arg(long, default_value_t = 10)]
    pub runtime_s: u32,
    /// Rounds of every job on every target; figures are medians over the rounds.
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
    /// Queue depth of the 4 KiB random jobs.
    #[arg(long, default_value_t = 32)]
    pub iodepth: u32,
    /// Queue depth of the 512 KiB sequential jobs.
    #[arg(long, default_value_t = 8)]
    pub seq_iodepth: u32,
    /// Size of the HDD (baseline and core). The HDD model spreads its full stroke over any
    /// size, so the random region below, its first half, seeks over half the stroke.
    #[arg(long, default_value = "1G")]
    pub hdd_size: String,
    /// Region of the random jobs, from offset 0 (cached entirely before they run).
    #[arg(long, default_value = "512M")]
    pub random_size: String,
    /// Region of the sequential jobs, right after the random region (so they measure the
    /// pass-through path, as the seed does, not cached data).
    #[arg(long, default_value = "512M")]
    pub seq_size: String,
    /// HDD preset of the core and of the baseline.
    #[arg(long, default_value = "hdd-10k")]
    pub hdd: String,
    /// Preset of the fast device (cache and limit).
    #[arg(long, default_value = "nvme")]
    pub fast: String,
    /// Targets to run: hdd (the baseline), cache (seed 001's configuration), fast (the
    /// limit), nbdkit (the transport limit), wt (our cache as Open-CAS's reference run was
    /// set up: wt, 4 KiB lines, Open-CAS's default cut-off, raw files in --dir without any
    /// emulation; the Open-CAS ratios use it).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "hdd,cache,fast,nbdkit,wt"
    )]
    pub targets: Vec<String>,
    /// Jobs to run, by fio rw name (randread, randwrite, randrw, read, write).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "randread,randwrite,randrw,read,write"
    )]
    pub jobs: Vec<String>,
}

#[derive(Clone, Copy)]
struct Job {
    name: &'static str,
    rw: &'static str,
    block: &'static str,
    sequential: bool,
    mix_read_percent: Option<u32>,
}

const JOBS: [Job; 5] = [
    Job {
        name: "4k randread (100% hit)",
        rw: "randread",
        block: "4k",
        sequential: false,
        mix_read_percent: None,
    },
    Job {
        name: "4k randwrite",
        rw: "randwrite",
        block: "4k",
        sequential: false,
        mix_read_percent: None,
    },
    Job {
        name: "4k randrw 70/30",
        rw: "randrw",
        block: "4k",
        sequential: false,
        mix_read_percent: Some(70),
    },
    Job {
        name: "512k seq read",
        rw: "read",
        block: "512k",
        sequential: true,
        mix_read_percent: None,
    },
    Job {
        name: "512k seq write",
        rw: "write",
        block: "512k",
        sequential: true,
        mix_read_percent: None,
    },
];

#[derive(Clone, Copy, Default)]
struct Figures {
    /// The job ran (it was selected with --jobs).
    ran: bool,
    iops: f64,
    mb_per_s: f64,
    latency_us: f64,
    /// Server CPU time (user + system) per request, µs; NaN when unknown (nbdkit's forks).
    cpu_us_per_op: f64,
    /// 1-minute load average when the job ended.
    load: f64,
}

/// User + system CPU time of process `pid` so far, in clock ticks (/proc/PID/stat).
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let user: u64 = fields.get(11)?.parse().ok()?;
    let system: u64 = fields.get(12)?.parse().ok()?;
    Some(user + system)
}

/// Clock ticks per second (USER_HZ; 100 on Linux for every architecture strata runs on).
const TICKS_PER_S: f64 = 100.0;

fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// A server under test.
struct Target {
    name: String,
    child: Child,
    socket: PathBuf,
    control: Option<PathBuf>,
}

impl Drop for Target {
    fn drop(&mut self) {
        if let Some(control) = &self.control {
            let _ = super::peer_command(std::env::current_exe().unwrap_or_default())
                .args(["cache", "stop", "--control"])
                .arg(control)
                .output();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_for_socket(child: &mut Child, socket: &Path) -> Result<()> {
    let started = Instant::now();
    while !socket.exists() {
        if let Some(status) = child.try_wait()? {
            bail!("server exited early: {status}");
        }
        if started.elapsed() > Duration::from_secs(60) {
            bail!("server did not open {}", socket.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

fn spawn(
    name: &str,
    mut command: Command,
    socket: PathBuf,
    control: Option<PathBuf>,
) -> Result<Target> {
    let _ = std::fs::remove_file(&socket);
    let mut child = command
        .stdout(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {name}"))?;
    wait_for_socket(&mut child, &socket)?;
    Ok(Target {
        name: name.into(),
        child,
        socket,
        control,
    })
}

fn strata_command() -> Result<Command> {
    Ok(super::peer_command(std::env::current_exe()?))
}

/// `strata cache start --force` in `mode` with 4 KiB lines over `cache` and `core` (device
/// specs), exported on `socket`, controlled on `control`; the caller adds the tuning.
fn cache_start(
    mode: &str,
    cache: &str,
    core: &str,
    socket: &Path,
    control: &Path,
) -> Result<Command> {
    let mut command = strata_command()?;
    command
        .args([
            "cache",
            "start",
            "--force",
            "--mode",
            mode,
            "--line-size",
            "4k",
        ])
        .args(["--cache", cache, "--core", core])
        .arg("--socket")
        .arg(socket)
        .arg("--control")
        .arg(control);
    Ok(command)
}

fn start_target(args: &Args, which: &str) -> Result<Option<Target>> {
    let dir = &args.dir;
    let socket = dir.join(format!("{which}.sock"));
    let file = |name: &str, size: &str| format!("file:{}:{size}", dir.join(name).display());
    let fast_dir = args.fast_dir.as_deref().unwrap_or(dir);
    let fast_file =
        |name: &str, size: &str| format!("file:{}:{size}", fast_dir.join(name).display());
    Ok(Some(match which {
        "hdd" => {
            let mut command = strata_command()?;
            command
                .args([
                    "nbd",
                    "serve",
                    "--device",
                    &format!("{}@{}", args.hdd, file("hdd.img", &args.hdd_size)),
                    "--socket",
                ])
                .arg(&socket);
            spawn("HDD alone", command, socket, None)?
        }
        "fast" => {
            let mut command = strata_command()?;
            command
                .args([
                    "nbd",
                    "serve",
                    "--device",
                    &format!("{}@{}", args.fast, fast_file("fast.img", "4G")),
                    "--socket",
                ])
                .arg(&socket);
            spawn("fast device alone", command, socket, None)?
        }
        "cache" => {
            let classes = dir.join("ioclass-config.csv");
            std::fs::write(
                &classes,
                "IO class id,IO class name,Eviction priority,Allocation\n0,unclassified,22,0.00\n1,request_size:le:131072&done,1,1.00\n",
            )?;
            let control = dir.join("cache.ctl");
            let mut command = cache_start(
                "wb",
                &format!("{}@{}", args.fast, fast_file("cache.img", "2G")),
                &format!("{}@{}", args.hdd, file("core.img", &args.hdd_size)),
                &socket,
                &control,
            )?;
            command
                .args(["--seq-cutoff", "always", "--seq-cutoff-threshold", "16k"])
                .args([
                    "--cleaning",
                    "alru",
                    "--activity-threshold-ms",
                    "1000",
                    "--wake-up-ms",
                    "1000",
                    "--staleness-ms",
                    "5000",
                ])
                .arg("--io-class")
                .arg(&classes);
            spawn("cache (wb, seed 001)", command, socket, Some(control))?
        }
        "nbdkit" => {
            if super::peer_command("nbdkit")
                .arg("--version")
                .output()
                .is_err()
            {
                eprintln!("note: nbdkit not installed; skipping the transport limit");
                return Ok(None);
            }
            let mut command = super::peer_command("nbdkit");
            command
                .arg("-U")
                .arg(&socket)
                .args(["--foreground", "memory", &args.hdd_size]);
            spawn("nbdkit memory", command, socket, None)?
        }
        "wt" => {
            let control = dir.join("wt.ctl");
            let command = cache_start(
                "wt",
                &file("wt-cache.img", "2G"),
                &file("wt-core.img", &args.hdd_size),
                &socket,
                &control,
            )?;
            spawn("cache (wt, raw files)", command, socket, Some(control))?
        }
        other => bail!("unknown target {other:?} (hdd, cache, fast, nbdkit, wt)"),
    }))
}

fn fio(socket: &Path, dir: &Path, extra: &[String]) -> Result<Value> {
    super::fio_report(
        super::peer_command("fio")
            .current_dir(dir)
            .args([
                "--name=job",
                "--ioengine=nbd",
                "--output-format=json",
                "--direct=1",
            ])
            .arg(format!("--uri=nbd+unix:///?socket={}", socket.display()))
            .args(extra),
    )
}

fn figures(report: &Value) -> Figures {
    let job = &report["jobs"][0];
    let mut out = Figures {
        ran: true,
        ..Figures::default()
    };
    let mut ops = 0.0;
    let mut weighted = 0.0;
    for side in ["read", "write"] {
        let iops = job[side]["iops"].as_f64().unwrap_or(0.0);
        out.iops += iops;
        out.mb_per_s += job[side]["bw_bytes"].as_f64().unwrap_or(0.0) / 1e6;
        weighted += iops * job[side]["lat_ns"]["mean"].as_f64().unwrap_or(0.0) / 1000.0;
        ops += iops;
    }
    out.latency_us = if ops > 0.0 { weighted / ops } else { 0.0 };
    out
}

fn run_job(args: &Args, target: &Target, job: &Job) -> Result<Figures> {
    let iodepth = if job.sequential {
        args.seq_iodepth
    } else {
        args.iodepth
    };
    let size = if job.sequential {
        &args.seq_size
    } else {
        &args.random_size
    };
    let mut extra = vec![
        format!("--rw={}", job.rw),
        format!("--bs={}", job.block),
        format!("--iodepth={iodepth}"),
        format!("--size={size}"),
        format!(
            "--offset={}",
            if job.sequential {
                args.random_size.as_str()
            } else {
                "0"
            }
        ),
        "--time_based=1".into(),
        format!("--runtime={}", args.runtime_s),
        "--ramp_time=1".into(),
    ];
    if let Some(percent) = job.mix_read_percent {
        extra.push(format!("--rwmixread={percent}"));
    }
    if !job.sequential {
        // Offsets drawn with replacement. fio's default random map serves every block once
        // per pass and, as the map fills, takes the next free block after a used one: runs
        // of adjacent 4 KiB requests that the cache's sequential cut-off (16 KiB) rightly
        // sends to the HDD (about 0.4% of a 2-pass read job), which no random workload has.
        extra.push("--norandommap".into());
    }
    let pid = target.child.id();
    let before = cpu_ticks(pid);
    let report = fio(&target.socket, &args.dir, &extra)?;
    let after = cpu_ticks(pid);
    let mut figures = figures(&report);
    let ops: f64 = ["read", "write"]
        .iter()
        .map(|side| report["jobs"][0][side]["total_ios"].as_f64().unwrap_or(0.0))
        .sum();
    figures.cpu_us_per_op = match (before, after, target.name.starts_with("nbdkit")) {
        (Some(before), Some(after), false) if ops > 0.0 => {
            (after - before) as f64 / TICKS_PER_S * 1e6 / ops
        }
        _ => f64::NAN,
    };
    figures.load = load_average();
    Ok(figures)
}

/// Writes every block of the random region once, so reads hit real data everywhere (a
/// sparse hole reads faster than data) and the cache holds the whole region (4 KiB random
/// writes are cached in wb; elsewhere a sequential 1 MiB pass is enough). A cache target
/// (`seq_cutoff_after` given) fills with the sequential cut-off off: a few hundred of the
/// random writes happen to be adjacent, look like a 16 KiB stream and would go to the HDD,
/// and the "100% hit" read job would then wait ~75 ms on each of those misses. The cut-off
/// policy `seq_cutoff_after` is then set, and the dirty lines flushed, before the jobs.
fn prefill(args: &Args, target: &Target, seq_cutoff_after: Option<&str>) -> Result<()> {
    let cached = seq_cutoff_after.is_some();
    let started = Instant::now();
    if cached {
        set_seq_cutoff(target, "never")?;
    }
    let pattern: [String; 3] = if cached {
        [
            "--rw=randwrite".into(),
            "--bs=4k".into(),
            "--iodepth=32".into(),
        ]
    } else {
        ["--rw=write".into(), "--bs=1m".into(), "--iodepth=4".into()]
    };
    let mut extra = pattern.to_vec();
    extra.push(format!("--size={}", args.random_size));
    fio(&target.socket, &args.dir, &extra)?;
    eprintln!(
        "  prefilled {} in {:.1} s",
        args.random_size,
        started.elapsed().as_secs_f64()
    );
    if let Some(policy) = seq_cutoff_after {
        set_seq_cutoff(target, policy)?;
        flush_cache(target, "after the prefill")?;
    }
    Ok(())
}

/// Runs `strata cache ARGS --control SOCKET` against a cache target (nothing for the others).
fn cache_control(target: &Target, args: &[&str]) -> Result<()> {
    let Some(control) = &target.control else {
        return Ok(());
    };
    let status = super::peer_command(std::env::current_exe()?)
        .arg("cache")
        .args(args)
        .arg("--control")
        .arg(control)
        .stdout(Stdio::null())
        .status()?;
    if !status.success() {
        bail!("strata cache {} failed ({status})", args.join(" "));
    }
    Ok(())
}

/// Sets a cache target's sequential cut-off policy (`strata cache set --seq-cutoff`).
fn set_seq_cutoff(target: &Target, policy: &str) -> Result<()> {
    cache_control(target, &["set", "--seq-cutoff", policy])
}

/// Writes a cache target's dirty lines to its core (`strata cache flush`) and says how long
/// it took; nothing for the other targets. Used after the prefill, so the read job measures
/// hits and not hits beside the cleaner writing the prefill's 512 MiB back to the HDD
/// (Open-CAS's reference figures are in wt, which has nothing to clean), and before the
/// sequential jobs, which seed 001 measures as their own test, not while the cache is still
/// cleaning the random-write jobs' lines onto the same HDD.
fn flush_cache(target: &Target, when: &str) -> Result<()> {
    if target.control.is_none() {
        return Ok(());
    }
    let started = Instant::now();
    cache_control(target, &["flush"])?;
    eprintln!(
        "  flushed dirty lines {when} in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Removes the device files and sockets the run made (several GB of sparse files, and RAM
/// when --fast-dir is on tmpfs); the directories stay.
fn remove_files(args: &Args) {
    let fast_dir = args.fast_dir.as_deref().unwrap_or(&args.dir);
    for name in ["cache.img", "fast.img"] {
        let _ = std::fs::remove_file(fast_dir.join(name));
    }
    for name in [
        "hdd.img",
        "core.img",
        "wt-cache.img",
        "wt-core.img",
        "ioclass-config.csv",
        "cache.ctl",
        "wt.ctl",
    ] {
        let _ = std::fs::remove_file(args.dir.join(name));
    }
    for which in &args.targets {
        let _ = std::fs::remove_file(args.dir.join(format!("{which}.sock")));
    }
}

/// One target's figures: `rounds[round][job]` (a job left out with --jobs is not `ran`).
struct Measured {
    which: String,
    name: String,
    rounds: Vec<Vec<Figures>>,
}

impl Measured {
    /// The median of `value` over the rounds in which job `index` ran; None if it never ran.
    fn median(&self, index: usize, value: impl Fn(&Figures) -> f64) -> Option<f64> {
        median(
            self.rounds
                .iter()
                .filter(|round| round[index].ran)
                .map(|round| value(&round[index]))
                .collect(),
        )
    }

    /// Job `index` as reported: the median of each figure over the rounds.
    fn summary(&self, index: usize) -> Figures {
        let Some(iops) = self.median(index, |f| f.iops) else {
            return Figures::default();
        };
        Figures {
            ran: true,
            iops,
            mb_per_s: self.median(index, |f| f.mb_per_s).unwrap_or(0.0),
            latency_us: self.median(index, |f| f.latency_us).unwrap_or(0.0),
            cpu_us_per_op: self.median(index, |f| f.cpu_us_per_op).unwrap_or(f64::NAN),
            load: self.median(index, |f| f.load).unwrap_or(f64::NAN),
        }
    }

    /// Lowest and highest IOPS of job `index` over the rounds.
    fn iops_range(&self, index: usize) -> (f64, f64) {
        self.rounds
            .iter()
            .filter(|round| round[index].ran)
            .fold((f64::INFINITY, 0.0_f64), |(low, high), round| {
                (low.min(round[index].iops), high.max(round[index].iops))
            })
    }
}

/// The median of `values` (the mean of the middle two for an even count); None when empty.
/// NaN values (unknown CPU time) are left out.
fn median(mut values: Vec<f64>) -> Option<f64> {
    values.retain(|value| !value.is_nan());
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    Some(if values.len() % 2 == 1 {
        values[middle]
    } else {
        (values[middle - 1] + values[middle]) / 2.0
    })
}

pub fn run(args: Args) -> Result<ExitCode> {
    std::fs::create_dir_all(&args.dir)?;
    if let Some(fast_dir) = &args.fast_dir {
        std::fs::create_dir_all(fast_dir)?;
    }
    eprintln!(
        "HDD and core files in {}, cache and fast device files in {}",
        args.dir.display(),
        args.fast_dir.as_deref().unwrap_or(&args.dir).display()
    );
    for name in &args.jobs {
        if !JOBS.iter().any(|job| job.rw == name) {
            bail!("unknown job {name:?} (randread, randwrite, randrw, read, write)");
        }
    }
    if args.rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    let mut targets = Vec::new();
    for which in &args.targets {
        let Some(target) = start_target(&args, which)? else {
            continue;
        };
        eprintln!("== {} ({which}): started", target.name);
        // Caches get their cut-off back after the prefill: the seed's for its cache,
        // Open-CAS's default for the wt target.
        let seq_cutoff_after = match which.as_str() {
            "cache" => Some("always"),
            "wt" => Some("full"),
            _ => None,
        };
        prefill(&args, &target, seq_cutoff_after)?;
        targets.push((which.clone(), target));
    }
    let mut results: Vec<Measured> = targets
        .iter()
        .map(|(which, target)| Measured {
            which: which.clone(),
            name: target.name.clone(),
            rounds: Vec::new(),
        })
        .collect();
    for round in 0..args.rounds {
        eprintln!("== round {} of {}", round + 1, args.rounds);
        for measured in &mut results {
            measured.rounds.push(vec![Figures::default(); JOBS.len()]);
        }
        for (index, job) in JOBS.iter().enumerate() {
            if !args.jobs.iter().any(|name| name == job.rw) {
                continue;
            }
            for ((_, target), measured) in targets.iter().zip(&mut results) {
                if job.sequential {
                    flush_cache(target, "before the sequential job")?;
                }
                let figures = run_job(&args, target, job)?;
                eprintln!(
                    "  {:<24} {:<22} {:>9.0} IOPS {:>8.1} MB/s {:>9.0} µs {:>6.1} µs CPU/op load {:.1}",
                    job.name,
                    target.name,
                    figures.iops,
                    figures.mb_per_s,
                    figures.latency_us,
                    figures.cpu_us_per_op,
                    figures.load
                );
                measured.rounds[round as usize][index] = figures;
            }
        }
    }
    for (_, target) in &targets {
        if let Some(control) = &target.control {
            let stats = super::peer_command(std::env::current_exe()?)
                .args(["cache", "stats", "--control"])
                .arg(control)
                .output()?;
            eprintln!("{}", String::from_utf8_lossy(&stats.stdout));
        }
    }
    drop(targets);
    remove_files(&args);
    print_table(&results, args.rounds);
    Ok(ExitCode::SUCCESS)
}

fn print_table(results: &[Measured], rounds: u32) {
    println!(
        "\nmedians over {rounds} round(s); IOPS range = lowest..highest round\n{:<24} {:<22} {:>10} {:>17} {:>10} {:>10} {:>11} {:>6}",
        "job", "target", "IOPS", "IOPS range", "MB/s", "lat µs", "CPU µs/op", "load"
    );
    for (index, job) in JOBS.iter().enumerate() {
        for measured in results {
            let f = measured.summary(index);
            if !f.ran {
                continue;
            }
            let (low, high) = measured.iops_range(index);
            println!(
                "{:<24} {:<22} {:>10.0} {:>17} {:>10.1} {:>10.0} {:>11.1} {:>6.1}",
                job.name,
                measured.name,
                f.iops,
                format!("{low:.0}..{high:.0}"),
                f.mb_per_s,
                f.latency_us,
                f.cpu_us_per_op,
                f.load
            );
        }
    }
    let find = |which: &str| results.iter().find(|measured| measured.which == which);
    // Open-CAS's reference run: wt, 4 KiB lines, raw files on this disk, NBD, fio QD32.
    // The `wt` target is set up the same way; without it, the seed's cache stands in.
    if let Some(peer) = find("wt").or_else(|| find("cache")) {
        let read = peer.summary(0);
        let write = peer.summary(1);
        if read.ran || write.ran {
            println!(
                "\n{} vs Open-CAS's engine on this machine (wt, raw files, QD32 via NBD: 19.7k randread, 16.4k randwrite): randread {:.2}x, randwrite {:.2}x (target >= 1.5x)",
                peer.name,
                read.iops / OPEN_CAS_RANDREAD_IOPS,
                write.iops / OPEN_CAS_RANDWRITE_IOPS
            );
        }
    }
    let Some(cache) = find("cache") else {
        return;
    };
    // A ratio is the median over rounds of the ratio within each round (rows seconds apart).
    let ratio = |other: Option<&Measured>, index: usize, bandwidth: bool| -> Option<f64> {
        let other = other?;
        median(
            cache
                .rounds
                .iter()
                .zip(&other.rounds)
                .filter(|(mine, theirs)| mine[index].ran && theirs[index].ran)
                .map(|(mine, theirs)| {
                    let (a, b) = if bandwidth {
                        (mine[index].mb_per_s, theirs[index].mb_per_s)
                    } else {
                        (mine[index].iops, theirs[index].iops)
                    };
                    if b > 0.0 {
                        a / b
                    } else {
                        0.0
                    }
                })
                .collect(),
        )
    };
    let hdd = find("hdd");
    println!("\nratios (cache over ..., median of per-round ratios)  vs HDD    vs fast   vs nbdkit   target");
    for (index, job) in JOBS.iter().enumerate() {
        if !cache.summary(index).ran {
            continue;
        }
        let show = |value: Option<f64>| value.map_or("-".to_string(), |v| format!("{v:.2}x"));
        let target = match index {
            0 => ">=100x HDD, >=0.80x fast",
            1 => ">=80x HDD",
            3 => "loss <= 2.8%",
            4 => "loss <= 5.6%",
            _ => "",
        };
        let bandwidth = job.sequential;
        println!(
            "{:<51} {:>9} {:>9} {:>9}   {target}",
            job.name,
            show(ratio(hdd, index, bandwidth)),
            show(ratio(find("fast"), index, bandwidth)),
            show(ratio(find("nbdkit"), index, bandwidth)),
        );
    }
    for (index, label) in [(3, "read"), (4, "write")] {
        if let Some(ratio) = ratio(hdd, index, true) {
            println!(
                "sequential {label} bandwidth loss vs HDD alone: {:.1}% (median of per-round losses)",
                100.0 * (1.0 - ratio)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn median_of_odd_even_and_unknown_values() {
        assert_eq!(median(vec![]), None);
        assert_eq!(median(vec![f64::NAN]), None);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(vec![5.0, f64::NAN, 1.0]), Some(3.0));
    }
}
