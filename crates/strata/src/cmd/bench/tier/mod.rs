//! `strata bench tier` (issue 37; seeds 003 and 000, live): block volumes on an HDD base pool
//! served through a live cache tier on NVMe, against the same pool with no tier, Ceph's tier
//! semantics (`ceph` admission with seed 003's tunables) and an all-NVMe pool (the ceiling).
//!
//! Each configuration gets its own embedded cluster in this process: 3 hosts of 1 emulated
//! NVMe and 2 emulated 7200-rpm HDD OSDs (sparse memory devices with the `device` crate's timing
//! models), replica 3, durable writes, and no OSD data cache (`--data-cache-size`), so the
//! devices and not RAM serve reads. The base pool is on the HDDs (on the NVMe OSDs for
//! `nvme`), the cache pool on the NVMe OSDs. Every client has its own RBD-format volume
//! (4 MiB objects), written once in full before the tier is attached; its ops are 4 KiB at
//! `--iodepth`, `--read-percent` reads, on objects drawn by `workload`. The cache's
//! `target_max_bytes` is `--cache-share` of all volumes (the working set).
//!
//! Scenarios (`--scenarios`), run in this order on each configuration's cluster, each after
//! `--warmup-seconds` of the same load:
//! - `ramp` (seed 003): 1..8 clients (`--clients`), Zipf objects whose hot set is redrawn every
//!   `--shift-seconds`; every configuration.
//! - `uniform`: the largest client count, uniform over the working set (4x the cache by
//!   default: what cannot be cached); `none`, `ceph`, `predictive`.
//! - `threshold` (seed 000): `predictive` at each H of `--thresholds`.
//! - `size` (seed 000): `ceph` and `predictive` at each cache share of `--cache-shares`.
//! - `replay` (live against simulated): `--trace` through a live tier and through `strata
//!   sim`'s run loop with the same policy code and cache size, for `ceph` and `predictive`
//!   (`replay`: its own small cluster on a virtual clock, see there).
//!
//! Configurations alternate their order over `--rounds`; the tables give medians and the
//! spread. `ceph` promotes and flushes whole objects as Ceph 16.2 does (the ceph family's
//! `tier_promote_granularity`), `predictive` the 64 KiB blocks ops touch. Ceph's tunables
//! are seed 003's (hit_set_count 12, recency 2/2, dirty 0.4/0.6, full 0.8) with its times (hit_set_period 14400 s, min flush age 600 s, min evict age 1800 s)
//! divided by `--time-scale` (1440: its 4-hour hit set period becomes the predictive tier's
//! 10 s period), as the bench's seconds stand for the seed's hours.
//!
//! Run (about 15 minutes per round with the defaults):
//! ```text
//! strata bench tier [--scenarios ramp,uniform] [--configs none,ceph,predictive,nvme]
//!                   [--clients 1,2,4,8] [--volume-size 256M] [--step-seconds 15] [--rounds 1]
//!                   [--svg tier.svg] [--json tier.json]
//! ```

mod replay;
mod report;
mod testbed;
pub mod workload;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde::Serialize;
use tier::TierStats;

use super::load;
use testbed::build;
use workload::Skew;

/// Block volumes through a live cache tier against no tier, Ceph's tier and all-NVMe.
#[derive(clap::Args, Clone)]
pub struct Args {
    /// Scenarios, comma separated: ramp, uniform, threshold, size, replay.
    #[arg(long, value_delimiter = ',', default_value = "ramp,uniform")]
    pub scenarios: Vec<String>,
    /// Configurations, comma separated: none (HDD pool only), ceph (the tier with Ceph's
    /// admission and seed 003's tunables), predictive (seed 000's hot table), nvme (an
    /// all-NVMe pool, the ceiling).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "none,ceph,predictive,nvme"
    )]
    pub configs: Vec<String>,
    /// Client counts of the ramp, ascending; the largest is every other scenario's.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    pub clients: Vec<usize>,
    /// Size of each client's volume (K, M, G suffixes); all of them are the working set.
    #[arg(long, default_value = "256M")]
    pub volume_size: String,
    /// The cache's target_max_bytes as a share of the working set.
    #[arg(long, default_value_t = 0.25)]
    pub cache_share: f64,
    /// Cache shares of the `size` scenario.
    #[arg(long, value_delimiter = ',', default_value = "0.125,0.25,0.5,0.75")]
    pub cache_shares: Vec<f64>,
    /// Thresholds H (predicted requests per period) of the `threshold` scenario.
    #[arg(long, value_delimiter = ',', default_value = "0,5,10,18,20")]
    pub thresholds: Vec<f64>,
    /// The predictive tier's threshold H elsewhere.
    #[arg(long, default_value_t = 2.0)]
    pub threshold: f64,
    /// The predictive tier's statistics period in seconds.
    #[arg(long, default_value_t = 10)]
    pub predictive_period_s: u64,
    /// Seed 003's times (hit set period, flush and evict ages) are divided by this; the
    /// default makes Ceph's hit set period the predictive tier's period (10 s).
    #[arg(long, default_value_t = 1440.0)]
    pub time_scale: f64,
    /// Zipf exponent of the skewed scenarios.
    #[arg(long, default_value_t = 0.9)]
    pub zipf: f64,
    /// Seconds between redraws of the hot set.
    #[arg(long, default_value_t = 60.0)]
    pub shift_seconds: f64,
    /// Share of ops that read, in percent.
    #[arg(long, default_value_t = 70)]
    pub read_percent: u32,
    /// Ops in flight per client.
    #[arg(long, default_value_t = 4)]
    pub iodepth: usize,
    /// Seconds measured per step.
    #[arg(long, default_value_t = 15.0)]
    pub step_seconds: f64,
    /// Seconds of load before each scenario (and each step of `threshold` and `size`).
    #[arg(long, default_value_t = 15.0)]
    pub warmup_seconds: f64,
    /// Each embedded OSD's data cache (K, M, G; 0: none, the devices serve every read).
    #[arg(long, default_value = "0")]
    pub data_cache_size: String,
    /// The block trace of the `replay` scenario (any format `strata sim` reads).
    #[arg(long, default_value = "fixtures/traces/cloudPhysicsIO.csv.zst")]
    pub trace: PathBuf,
    /// The replay's object size: the trace's blocks map to objects of this size (K, M, G).
    #[arg(long, default_value = "4M")]
    pub replay_object_size: String,
    /// Replay only the trace's first requests (after the mapping).
    #[arg(long)]
    pub replay_requests: Option<usize>,
    /// The replay's hit set period (`ceph`) and statistics period (`predictive`), in trace
    /// seconds.
    #[arg(long, default_value_t = 60)]
    pub replay_period_s: u64,
    /// Rounds; configurations alternate their order, tables give medians.
    #[arg(long, default_value_t = 1)]
    pub rounds: u32,
    /// Seed of the clients' generators.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Parent of the run's temporary directory (removed at the end).
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    /// Also draw the figures as SVG: this file (the ramp) and siblings named
    /// `-uniform`, `-threshold`, `-size` after its stem.
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Also write every measured step as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

const CONFIGS: [&str; 4] = ["none", "ceph", "predictive", "nvme"];
const SCENARIOS: [&str; 5] = ["ramp", "uniform", "threshold", "size", "replay"];
const BASE: &str = "base";
const CACHE: &str = "cache";
const OBJECT_BYTES: u64 = 4 << 20;
const BLOCK_BYTES: u64 = 4096;
const HOSTS: i32 = 3;

/// One measured step.
#[derive(Clone, Debug, Serialize)]
pub struct Step {
    scenario: String,
    config: String,
    round: u32,
    /// The step's variable: clients (ramp, uniform), H (threshold), cache share (size).
    x: f64,
    clients: usize,
    ops: u64,
    seconds: f64,
    iops: f64,
    latency_us_mean: f64,
    latency_us_p99: f64,
    /// Tier hits over hits and misses in the step (None without a tier).
    hit_ratio: Option<f64>,
    /// Bytes written to the NVMe OSDs' devices in the step.
    ssd_bytes_written: u64,
    hits: u64,
    promoted_bytes: u64,
    flushed_bytes: u64,
    evictions: u64,
    writes_around_full: u64,
    /// Client ops that waited on the agent since the tier opened, the longest wait and those
    /// over 100 ms (cumulative, not per step).
    agent_waits: u64,
    agent_wait_us_max: u64,
    agent_waits_over_100ms: u64,
    /// Objects in the cache and bytes of their present blocks at the step's end.
    cached_objects: u64,
    cached_bytes: u64,
    /// The fullest NVMe OSD's share of its data region in use at the step's end, and the
    /// cache pool's refusals of writes for space in the step (the ops then went around it).
    cache_osd_used_max: f64,
    cache_refusals_full: u64,
}

/// One step to run.
#[derive(Clone, Debug)]
struct Plan {
    scenario: &'static str,
    x: f64,
    clients: usize,
    skew: Skew,
    threshold: Option<f64>,
    cache_share: Option<f64>,
    warm_up: bool,
}

fn check(args: &Args) -> Result<()> {
    for config in &args.configs {
        if !CONFIGS.contains(&config.as_str()) {
            bail!("--configs: {config:?} is not one of {}", CONFIGS.join(", "));
        }
    }
    for scenario in &args.scenarios {
        if !SCENARIOS.contains(&scenario.as_str()) {
            bail!(
                "--scenarios: {scenario:?} is not one of {}",
                SCENARIOS.join(", ")
            );
        }
    }
    if args.clients.is_empty() || args.clients.contains(&0) {
        bail!("--clients: give client counts above 0");
    }
    if !args.clients.windows(2).all(|w| w[0] < w[1]) {
        bail!("--clients: give the counts in ascending order");
    }
    let share_ok = |s: f64| s > 0.0 && s <= 1.0;
    if !share_ok(args.cache_share) || !args.cache_shares.iter().all(|s| share_ok(*s)) {
        bail!("--cache-share and --cache-shares must be in (0, 1]");
    }
    if args.iodepth == 0 || !(0..=100).contains(&args.read_percent) {
        bail!("--iodepth must be > 0 and --read-percent in 0..=100");
    }
    let warmup_ok = (0.0..=1e6).contains(&args.warmup_seconds);
    if !(load::valid_seconds(args.step_seconds)
        && warmup_ok
        && load::valid_seconds(args.shift_seconds))
    {
        bail!("--step-seconds and --shift-seconds in (0, 1e6], --warmup-seconds in [0, 1e6]");
    }
    let scale_ok = args.time_scale.is_finite() && args.time_scale >= 1.0;
    if !scale_ok || args.zipf.is_nan() || args.zipf < 0.0 || args.predictive_period_s == 0 {
        bail!("--time-scale must be >= 1, --zipf >= 0, --predictive-period-s > 0");
    }
    if args.replay_period_s == 0 || load::parse_size(&args.replay_object_size).is_err() {
        bail!("--replay-period-s must be > 0 and --replay-object-size a size like 4M");
    }
    if args.rounds == 0 {
        bail!("--rounds must be > 0");
    }
    let volume_bytes = load::parse_size(&args.volume_size)?;
    if volume_bytes < OBJECT_BYTES || volume_bytes % OBJECT_BYTES != 0 {
        bail!("--volume-size must be a multiple of 4M");
    }
    if device::parse_size_bytes(&args.data_cache_size).is_none() {
        bail!(
            "--data-cache-size: {:?} is not a size like 64M or 0",
            args.data_cache_size
        );
    }
    Ok(())
}

/// The steps of every scenario `config` takes part in, in order.
fn plans(args: &Args, config: &str) -> Vec<Plan> {
    let clients_max = *args.clients.last().expect("checked");
    let zipf = Skew::Zipf {
        exponent: args.zipf,
        shift_ms: (args.shift_seconds * 1000.0) as u64,
    };
    let tiered = config == "ceph" || config == "predictive";
    let mut out = Vec::new();
    for scenario in SCENARIOS {
        if !args.scenarios.iter().any(|s| s == scenario) {
            continue;
        }
        match scenario {
            "ramp" => {
                for (i, clients) in args.clients.iter().enumerate() {
                    out.push(Plan {
                        scenario,
                        x: *clients as f64,
                        clients: *clients,
                        skew: zipf.clone(),
                        threshold: None,
                        cache_share: None,
                        warm_up: i == 0,
                    });
                }
            }
            "uniform" if config != "nvme" => out.push(Plan {
                scenario,
                x: clients_max as f64,
                clients: clients_max,
                skew: Skew::Uniform,
                threshold: None,
                cache_share: None,
                warm_up: true,
            }),
            "threshold" if config == "predictive" => {
                for h in &args.thresholds {
                    out.push(Plan {
                        scenario,
                        x: *h,
                        clients: clients_max,
                        skew: zipf.clone(),
                        threshold: Some(*h),
                        cache_share: None,
                        warm_up: true,
                    });
                }
            }
            "size" if tiered => {
                for share in &args.cache_shares {
                    out.push(Plan {
                        scenario,
                        x: *share,
                        clients: clients_max,
                        skew: zipf.clone(),
                        // Back to the configured H after the threshold sweep.
                        threshold: (config == "predictive").then_some(args.threshold),
                        cache_share: Some(*share),
                        warm_up: true,
                    });
                }
            }
            _ => {}
        }
    }
    out
}

async fn run_config(config: &str, round: u32, dir: &Path, args: &Args) -> Result<Vec<Step>> {
    let cluster_dir = dir.join(format!("{config}-round{round}"));
    eprintln!("== round {round}: {config}");
    let testbed = build(config, &cluster_dir, args).await?;
    let mut steps = Vec::new();
    let mut scenario_started = Instant::now();
    let mut last_scenario = "";
    for plan in plans(args, config) {
        if plan.scenario != last_scenario {
            scenario_started = Instant::now();
            last_scenario = plan.scenario;
        }
        testbed.apply(&plan).await?;
        if plan.warm_up && args.warmup_seconds > 0.0 {
            testbed
                .load(&plan, args, args.warmup_seconds, scenario_started)
                .await?;
        }
        let tier_before = testbed.tier_stats();
        let ssd_before = testbed.ssd_bytes_written();
        let (ops, seconds, latencies) = testbed
            .load(&plan, args, args.step_seconds, scenario_started)
            .await?;
        let tier_after = testbed.tier_stats();
        let ssd_bytes_written = testbed.ssd_bytes_written().saturating_sub(ssd_before);
        let delta = |f: fn(&TierStats) -> u64| match (&tier_before, &tier_after) {
            (Some(b), Some(a)) => f(a).saturating_sub(f(b)),
            _ => 0,
        };
        let hits = delta(|s| s.hits);
        let misses = delta(|s| s.misses);
        let step = Step {
            scenario: plan.scenario.into(),
            config: config.into(),
            round,
            x: plan.x,
            clients: plan.clients,
            ops,
            seconds,
            iops: ops as f64 / seconds,
            latency_us_mean: latencies.mean() / 1000.0,
            latency_us_p99: latencies.percentile(0.99) as f64 / 1000.0,
            hit_ratio: tier_after
                .as_ref()
                .map(|_| hits as f64 / (hits + misses).max(1) as f64),
            ssd_bytes_written,
            hits,
            promoted_bytes: delta(|s| s.promoted_bytes),
            flushed_bytes: delta(|s| s.flushed_bytes),
            evictions: delta(|s| s.evictions),
            writes_around_full: delta(|s| s.writes_around_full),
            agent_waits: tier_after.as_ref().map_or(0, |s| s.agent_waits),
            agent_wait_us_max: tier_after.as_ref().map_or(0, |s| s.agent_wait_us_max),
            agent_waits_over_100ms: tier_after.as_ref().map_or(0, |s| s.agent_waits_over_100ms),
            cached_objects: tier_after.as_ref().map_or(0, |s| s.objects),
            cached_bytes: tier_after.as_ref().map_or(0, |s| s.cached_bytes),
            cache_osd_used_max: testbed.nvme_used_max(),
            cache_refusals_full: delta(|s| s.cache_refusals_full),
        };
        eprintln!(
            "   {:<9} {:<10} x={:<6} {:>8.0} IOPS  p99 {:>8.1} ms  hit {}  cached {} objects, {} MB, \
             fullest NVMe OSD {:.0}% used, {} refused for space",
            step.scenario,
            config,
            step.x,
            step.iops,
            step.latency_us_p99 / 1000.0,
            step.hit_ratio
                .map_or("-".to_string(), |h| format!("{h:.3}")),
            step.cached_objects,
            step.cached_bytes >> 20,
            step.cache_osd_used_max * 100.0,
            step.cache_refusals_full,
        );
        steps.push(step);
    }
    testbed.shutdown(&cluster_dir).await?;
    Ok(steps)
}

/// The configurations of `round`: as given in even rounds, reversed in odd ones.
fn round_order(configs: &[String], round: u32) -> Vec<&str> {
    let mut order: Vec<&str> = configs.iter().map(String::as_str).collect();
    if round % 2 == 1 {
        order.reverse();
    }
    order
}

pub fn run(args: Args) -> Result<ExitCode> {
    check(&args)?;
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("creating {}", args.dir.display()))?;
    let temp = tempfile::Builder::new()
        .prefix("strata-bench-tier-")
        .tempdir_in(&args.dir)
        .with_context(|| format!("temporary directory under {}", args.dir.display()))?;
    eprintln!(
        "strata bench tier: scenarios {}, configurations {}, clients {:?}, volumes of {} ({} rounds); load {}",
        args.scenarios.join(","),
        args.configs.join(","),
        args.clients,
        args.volume_size,
        args.rounds,
        load::load_average()
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut steps = Vec::new();
    let live_scenarios = args.scenarios.iter().any(|s| s != "replay");
    for round in 0..args.rounds {
        if !live_scenarios {
            break;
        }
        for config in round_order(&args.configs, round) {
            let measured = runtime.block_on(run_config(config, round, temp.path(), &args))?;
            steps.extend(measured);
        }
    }
    let mut replays = Vec::new();
    if args.scenarios.iter().any(|s| s == "replay") {
        let trace = replay::load_trace(&args)?;
        for config in ["ceph", "predictive"] {
            if !args.configs.iter().any(|c| c == config) {
                continue;
            }
            let dir = temp.path().join(format!("replay-{config}"));
            let result = runtime.block_on(replay::replay(config, &trace, &args, dir))?;
            eprintln!(
                "   replay    {config:<10} live hit {:.4}  simulated {:.4}  difference {:+.4}  ({:.0} s)",
                result.live_hit_ratio, result.simulated_hit_ratio, result.difference, result.seconds
            );
            replays.push(result);
        }
    }
    report::print(&steps, &args);
    replay::print(&replays);
    if let Some(path) = &args.svg {
        report::write_svgs(&steps, path)?;
    }
    if let Some(path) = &args.json {
        let json = serde_json::json!({
            "settings": {
                "scenarios": args.scenarios, "configs": args.configs, "clients": args.clients,
                "volume_size": args.volume_size, "cache_share": args.cache_share,
                "zipf": args.zipf, "shift_seconds": args.shift_seconds,
                "read_percent": args.read_percent, "iodepth": args.iodepth,
                "step_seconds": args.step_seconds, "warmup_seconds": args.warmup_seconds,
                "time_scale": args.time_scale, "threshold": args.threshold,
                "predictive_period_s": args.predictive_period_s, "rounds": args.rounds,
                "load_average_end": load::load_average(),
            },
            "steps": steps,
            "replay": replays,
        });
        std::fs::write(path, serde_json::to_string_pretty(&json)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::testbed::{cluster_config, tier_settings};
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn args(extra: &[&str]) -> Args {
        let mut argv = vec!["bench-tier"];
        argv.extend_from_slice(extra);
        Cli::parse_from(argv).args
    }

    #[test]
    fn plans_give_each_configuration_its_scenarios() {
        let all = args(&["--scenarios", "ramp,uniform,threshold,size"]);
        let names = |config: &str| {
            plans(&all, config)
                .iter()
                .map(|p| format!("{}:{}", p.scenario, p.x))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names("nvme"),
            ["ramp:1", "ramp:2", "ramp:4", "ramp:8"].map(String::from)
        );
        assert_eq!(names("none").len(), 5);
        assert_eq!(names("ceph").len(), 4 + 1 + 4);
        assert_eq!(names("predictive").len(), 4 + 1 + 5 + 4);
        let ramp = plans(&all, "none");
        assert!(ramp[0].warm_up && !ramp[1].warm_up);
    }

    #[test]
    fn bad_arguments_are_named() {
        for (extra, expected) in [
            (vec!["--configs", "none,fast"], "fast"),
            (vec!["--scenarios", "ramp,zig"], "zig"),
            (vec!["--clients", "4,2"], "ascending"),
            (vec!["--cache-share", "0"], "--cache-share"),
            (vec!["--volume-size", "5M"], "4M"),
            (vec!["--rounds", "0"], "--rounds"),
        ] {
            let error = check(&args(&extra)).expect_err("refused").to_string();
            assert!(error.contains(expected), "{error}");
        }
        check(&args(&[])).expect("defaults are valid");
    }

    #[test]
    fn ceph_settings_are_seed_003s_scaled_and_the_cache_is_a_share_of_the_working_set() {
        let a = args(&[]);
        let ws = 8 * (256 << 20);
        let settings = tier_settings("ceph", &a, ws);
        let get = |k: &str| {
            settings
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.clone())
                .expect(k)
        };
        assert_eq!(get("hit_set_period"), "10");
        assert_eq!(get("cache_min_evict_age"), "1");
        assert_eq!(get("target_max_bytes"), (ws / 4).to_string());
        let config = cluster_config("predictive", &a).expect("config");
        assert_eq!(config.osds.len(), 9);
        assert_eq!(config.pools.len(), 2);
        assert_eq!(config.osds.iter().filter(|o| o.class == "nvme").count(), 3);
    }
}
