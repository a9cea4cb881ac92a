//! `strata bench sim`: simulator throughput, requests per second per policy on one core, with
//! the adaptive policies' speed as a share of the best fixed policy's (issue 41) and a textbook
//! peer measured in the same run (an LRU over a `HashMap` of raw ids and a
//! `BTreeMap` recency index, the way a simulator without dense ids would do it).

use anyhow::{bail, Result};
use policy::PolicySpec;
use sim::CacheSize;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// Measure cache simulator throughput.
#[derive(clap::Args)]
pub struct Args {
    /// Trace (default: the project's cloudPhysicsIO fixture, looked up from the current
    /// directory, then from the project root).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Policies to time.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "lru,fifo,sieve,arc,2q,s3fifo,wtinylfu,lirs,belady,ceph,hottable,strata,mini"
    )]
    pub policy: Vec<String>,
    /// Cache size.
    #[arg(long, default_value = "10%")]
    pub cache_size: String,
    /// Replays per policy, at least 1 (the best is reported).
    #[arg(long, default_value_t = 3)]
    pub repeat: u32,
}

fn best_of(repeat: u32, mut run: impl FnMut() -> u64) -> (f64, u64) {
    let mut best = f64::MAX;
    let mut hits = 0;
    for _ in 0..repeat {
        let start = Instant::now();
        hits = run();
        best = best.min(start.elapsed().as_secs_f64());
    }
    (best, hits)
}

/// The peer: LRU keyed by the original ids through a hash map, recency in an ordered map.
fn peer_lru(keys: &[u64], capacity: usize) -> u64 {
    let mut stamp_of: HashMap<u64, u64> = HashMap::new();
    let mut by_stamp: BTreeMap<u64, u64> = BTreeMap::new();
    let mut hits = 0;
    for (stamp, &key) in keys.iter().enumerate() {
        let stamp = stamp as u64;
        if let Some(old) = stamp_of.insert(key, stamp) {
            by_stamp.remove(&old);
            hits += 1;
        } else if stamp_of.len() > capacity {
            if let Some((_, victim)) = by_stamp.pop_first() {
                stamp_of.remove(&victim);
            }
        }
        by_stamp.insert(stamp, key);
    }
    hits
}

pub fn run(args: Args) -> Result<ExitCode> {
    if args.repeat == 0 {
        bail!("--repeat 0 measures nothing: give at least 1");
    }
    let path = match args.trace {
        Some(path) => path,
        None => crate::cmd::sim::default_trace(&["fixtures/traces/cloudPhysicsIO.csv.zst"])?,
    };
    let size = CacheSize::parse(&args.cache_size)?;
    let trace = sim::load(&path, None, None, None)?;
    if trace.requests.is_empty() {
        // Rates over no requests are 0/0: NaN and inf rows.
        bail!("{}: no requests to replay", path.display());
    }
    let capacity = size.objects(&trace)?;
    let next_seq = trace.next_seq();
    let n = trace.requests.len() as f64;
    println!(
        "trace {} ({} requests, {} objects), cache {capacity} objects, best of {}",
        trace.name,
        trace.requests.len(),
        trace.unique,
        args.repeat
    );
    println!(
        "{:>16}  {:>12}  {:>10}  {:>8}",
        "policy", "requests/s", "ns/request", "miss"
    );
    let mut rows: Vec<(String, f64, f64)> = Vec::new();
    for name in &args.policy {
        let spec = PolicySpec::new(name, capacity, trace.unique);
        policy::build(&spec)?;
        let (seconds, hits) = best_of(args.repeat, || {
            let mut cache = policy::build(&spec).map(Some).unwrap_or(None);
            cache
                .as_mut()
                .map_or(0, |c| sim::replay(&trace, Some(&next_seq), c.as_mut()))
        });
        println!(
            "{name:>16}  {:>12.0}  {:>10.1}  {:>8.4}",
            n / seconds,
            seconds * 1e9 / n,
            1.0 - hits as f64 / n
        );
        rows.push((name.clone(), n / seconds, 1.0 - hits as f64 / n));
    }
    // Issue 41: the adaptive policies' speed against the best fixed policy of this run (the
    // fixed policy with the lowest miss ratio, as `sim compare` picks it).
    let fixed = |name: &str| sim::compare::OTHERS.contains(&name);
    let best = rows
        .iter()
        .filter(|(name, ..)| fixed(name))
        .min_by(|a, b| a.2.total_cmp(&b.2));
    if let Some((best_name, best_rate, best_miss)) = best {
        let adaptive = |name: &str| name.starts_with("mini") || name.starts_with("strata");
        for (name, rate, miss) in rows.iter().filter(|(name, ..)| adaptive(name)) {
            println!(
                "{name}: {:.2}x the requests/s of the best fixed policy here ({best_name}, miss \
                 {best_miss:.4}; {name} miss {miss:.4})",
                rate / best_rate
            );
        }
    }
    // The peer sees scattered 64-bit ids, as a simulator without the dense remap would.
    let raw: Vec<u64> = trace
        .requests
        .iter()
        .map(|r| policy::mix64(r.key as u64))
        .collect();
    let (seconds, hits) = best_of(args.repeat, || peer_lru(&raw, capacity));
    println!(
        "{:>16}  {:>12.0}  {:>10.1}  {:>8.4}",
        "peer:hashmap-lru",
        n / seconds,
        seconds * 1e9 / n,
        1.0 - hits as f64 / n
    );
    Ok(ExitCode::SUCCESS)
}
