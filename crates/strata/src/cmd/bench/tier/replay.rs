//! The `replay` scenario of `strata bench tier` (issue 37: live against simulated): one block
//! trace replayed through the live tier and through `strata sim`'s run loop, with the same
//! policy code, settings and cache size, in this process; prints both hit ratios and their
//! difference.
//!
//! The trace is loaded by the simulator's reader with its `object` mapping (`--replay-object-size`,
//! RBD's 4 MiB by default), so a key of the simulation is one rados object of the live run
//! (`replay.KEY` in the base pool, written once before the overlay is set). The live tier gets
//! what makes its decisions the simulator's:
//! - trace time: the tier runs on a virtual clock set to each request's time before it is sent,
//!   so hit set periods and the hot table's periods are the trace's, not the wall clock's;
//! - one request at a time, in the trace's order, the next sent only once the background work
//!   the policy asked for has finished ([`tier::Tier::settled`]: background promotions
//!   installed, the agent's evictions done), as the simulator applies them at once;
//! - whole-object blocks (`tier_block_bytes` = the object size): the simulator keeps whole
//!   objects, so a cached object never misses on a block it lacks;
//! - the capacity in objects (`target_max_objects`, `--cache-share` of the trace's objects).
//!
//! Each op is the request's size at offset 0 of its object (the simulator does not look at
//! offsets within an object). The cluster is 3 OSDs on memory devices without a timing model
//! and writes not made durable: only decisions are compared here, not speed.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use cluster::{Cluster, ClusterConfig, ClusterOptions, HostConfig, OsdConfig, PoolConfig};
use rados::Rados;
use serde::Serialize;
use tier::{CacheMode, TieredRados};
use worker::{Clock, VirtualClock};

use super::testbed::tier_settings;
use super::{Args, BASE, CACHE};

/// Requests a replay may leave unsettled (waited `SETTLE_SECONDS` for) before it gives up.
const SETTLE_SECONDS: f64 = 5.0;

/// The result of one policy's replay.
#[derive(Clone, Debug, Serialize)]
pub struct ReplayResult {
    pub config: String,
    pub trace: String,
    pub requests: u64,
    pub objects: u64,
    pub cache_objects: u64,
    pub live_hits: u64,
    pub live_misses: u64,
    pub live_hit_ratio: f64,
    pub simulated_hit_ratio: f64,
    /// Live minus simulated.
    pub difference: f64,
    /// Requests after which the tier did not settle within the wait (0 when comparable).
    pub unsettled: u64,
    pub seconds: f64,
}

/// The trace of the replay, as the simulator reads it.
pub fn load_trace(args: &Args) -> Result<sim::Trace> {
    let object_bytes = super::load::parse_size(&args.replay_object_size)?;
    let mut trace = sim::load(
        &args.trace,
        None,
        Some(sim::Mapping::Object { object_bytes }),
        args.replay_requests,
    )
    .with_context(|| format!("reading the trace {}", args.trace.display()))?;
    if trace.requests.is_empty() {
        bail!("{}: no requests", args.trace.display());
    }
    // Every object is one of the mapping's objects, as the live tier's policy is told
    // (`tier_object_bytes`); the reader's own guess is the largest request an object saw,
    // which made Ceph's promotion throttle (it counts promoted bytes) trip far more often in
    // the simulation than live.
    let object_bytes = u32::try_from(object_bytes).context("--replay-object-size over 4G")?;
    trace.object_bytes.fill(object_bytes);
    Ok(trace)
}

fn object_name(key: u32) -> String {
    format!("replay.{key}")
}

fn cluster_config() -> ClusterConfig {
    let mut cluster = ClusterConfig::empty();
    cluster.scrub_interval_s = 0;
    cluster.stats_period_s = 0;
    cluster.durable = false;
    for host in 0..3 {
        let name = format!("host{host}");
        cluster.hosts.push(HostConfig { name: name.clone() });
        cluster.osds.push(OsdConfig {
            id: host,
            host: name,
            device: "mem:2G".into(),
            size: None,
            class: "ssd".into(),
            weight: Some(1.0),
            min_alloc_size: 4096,
            emulation: None,
            data_cache_size: None,
        });
    }
    for name in [BASE, CACHE] {
        cluster.pools.push(PoolConfig {
            name: name.into(),
            size: 3,
            min_size: None,
            pg_num: 32,
            device_class: None,
            crush_rule: None,
            erasure: None,
        });
    }
    cluster
}

/// The tier's settings for the replay of `config`: the bench's, with the capacity in objects,
/// whole-object blocks and the periods in trace seconds.
fn replay_settings(config: &str, args: &Args, cache_objects: u64) -> Vec<(String, String)> {
    let object_bytes = super::load::parse_size(&args.replay_object_size).unwrap_or(4 << 20);
    let period = args.replay_period_s.to_string();
    let mut settings: Vec<(String, String)> = tier_settings(config, args, 0)
        .into_iter()
        .filter(|(key, _)| key != "target_max_bytes")
        .map(|(key, value)| match key.as_str() {
            "hit_set_period" | "predictive_period" => (key, period.clone()),
            _ => (key, value),
        })
        .collect();
    settings.extend([
        ("target_max_bytes".to_string(), "0".to_string()),
        ("target_max_objects".into(), cache_objects.to_string()),
        ("tier_block_bytes".into(), object_bytes.to_string()),
        ("tier_object_bytes".into(), object_bytes.to_string()),
    ]);
    settings
}

/// Replays `trace` through a live tier of `config` and through the simulator.
pub async fn replay(
    config: &str,
    trace: &sim::Trace,
    args: &Args,
    dir: PathBuf,
) -> Result<ReplayResult> {
    let began = Instant::now();
    let cluster = Arc::new(
        Cluster::create(&dir, cluster_config(), ClusterOptions::default())
            .await
            .context("creating the replay's cluster")?,
    );
    let base = cluster.io_ctx(BASE).await?;
    let seed_data = vec![7u8; 4096];
    for key in 0..trace.unique as u32 {
        base.write_full(&object_name(key), &seed_data).await?;
    }
    let clock = Arc::new(VirtualClock::new());
    let tiered =
        TieredRados::open(cluster.clone(), clock.clone(), tier::system_wall_clock()).await?;
    tiered.tier_add(BASE, CACHE, false).await?;
    tiered
        .cache_mode(CACHE, CacheMode::Writeback, false)
        .await?;
    let cache_objects = ((trace.unique as f64 * args.cache_share) as u64).max(1);
    for (key, value) in replay_settings(config, args, cache_objects) {
        tiered
            .pool_set(CACHE, &key, &value)
            .await
            .with_context(|| format!("osd pool set {CACHE} {key} {value}"))?;
    }
    tiered.set_overlay(BASE, CACHE).await?;
    let tier = tiered.overlay_of(BASE).context("the overlay's tier")?;
    let io = tiered.io_ctx(BASE).await?;
    let before = tier.stats();
    let payload = vec![
        3u8;
        trace
            .requests
            .iter()
            .map(|r| r.size_bytes)
            .max()
            .unwrap_or(0) as usize
    ];
    let mut unsettled = 0;
    let bar = indicatif::ProgressBar::new(trace.requests.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(&format!(
            "   replay {config:<10} {{bar:30}} {{pos}}/{{len}} requests"
        ))
        .expect("template"),
    );
    for request in &trace.requests {
        let now_ms = clock.now_ms();
        if request.time_ms > now_ms {
            clock.advance(request.time_ms - now_ms);
        }
        let name = object_name(request.key);
        let size = request.size_bytes as usize;
        if request.write {
            io.write(&name, 0, &payload[..size]).await?;
        } else {
            io.read(&name, 0, size as u64).await?;
        }
        if !settle(&tier).await {
            unsettled += 1;
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let after = tier.stats();
    let live_hits = after.hits - before.hits;
    let live_misses = after.misses - before.misses;
    let settings = tiered.tier_config(CACHE)?.settings;
    let mut policy = tier::policy_for(&settings, io.pool().pg_num);
    let (metrics, _) = sim::simulate(trace, None, policy.as_mut(), &sim::RunOptions::default());
    tiered.shutdown().await;
    drop(io);
    drop(tier);
    drop(tiered);
    super::super::cluster::shutdown(cluster, &dir).await?;
    let live_hit_ratio = live_hits as f64 / (live_hits + live_misses).max(1) as f64;
    let simulated_hit_ratio = metrics.hits as f64 / metrics.requests.max(1) as f64;
    Ok(ReplayResult {
        config: config.to_string(),
        trace: trace.name.clone(),
        requests: trace.requests.len() as u64,
        objects: trace.unique as u64,
        cache_objects,
        live_hits,
        live_misses,
        live_hit_ratio,
        simulated_hit_ratio,
        difference: live_hit_ratio - simulated_hit_ratio,
        unsettled,
        seconds: began.elapsed().as_secs_f64(),
    })
}

/// Waits until the tier has done what the policy asked for; false after `SETTLE_SECONDS`.
async fn settle(tier: &tier::Tier) -> bool {
    let began = Instant::now();
    let mut spins = 0u32;
    while !tier.settled() {
        if began.elapsed().as_secs_f64() > SETTLE_SECONDS {
            return false;
        }
        spins += 1;
        if spins < 200 {
            tokio::task::yield_now().await;
        } else {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    }
    true
}

/// Prints the replay's table.
pub fn print(results: &[ReplayResult]) {
    if results.is_empty() {
        return;
    }
    println!();
    println!(
        "Live against simulated ({}, {} requests over {} objects, cache {} objects):",
        results[0].trace, results[0].requests, results[0].objects, results[0].cache_objects
    );
    println!("| policy | live hit ratio | simulated | difference | unsettled |");
    println!("|---|---:|---:|---:|---:|");
    for r in results {
        println!(
            "| {} | {:.4} | {:.4} | {:+.4} | {} |",
            r.config, r.live_hit_ratio, r.simulated_hit_ratio, r.difference, r.unsettled
        );
    }
}
