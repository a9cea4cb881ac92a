//! `strata` (our policy) against every other online policy: cache writes within a third of
//! admit-all LRU's, and the miss ratios printed next to the best other policy's. The ignored
//! test replays any traces listed in `$STRATA_TRACES` (comma-separated paths) with the policy
//! variants in `$STRATA_VARIANTS` (default `strata`).

use sim::{sweep, CacheSize, RunOptions, RunResult, SweepPlan, Trace};
use std::path::Path;

const OTHERS: [&str; 7] = ["lru", "fifo", "arc", "2q", "s3fifo", "wtinylfu", "sieve"];

fn compare(trace: &Trace, variants: &[String]) -> Vec<RunResult> {
    let sizes = [1.0, 5.0, 10.0];
    let policies: Vec<String> = OTHERS
        .iter()
        .map(|p| p.to_string())
        .chain(variants.iter().cloned())
        .collect();
    let plan = SweepPlan {
        policies: policies.clone(),
        sizes: sizes.iter().map(|&p| CacheSize::Percent(p)).collect(),
        thresholds: vec![1.0],
        smoothings: vec![0.5],
        period: policy::hottable::Period::Requests(10_000),
        options: RunOptions::default(),
        seed: 42,
        jobs: 2,
        progress: false,
    };
    let results = sweep::run(trace, &plan).unwrap_or_else(|e| panic!("{e:#}"));
    for s in 0..sizes.len() {
        let at = |p: usize| &results[p * sizes.len() + s];
        let best = (0..OTHERS.len())
            .min_by(|&a, &b| at(a).miss_ratio.total_cmp(&at(b).miss_ratio))
            .unwrap_or(0);
        let lru_writes = at(0).cache_writes.max(1) as f64;
        for (v, variant) in variants.iter().enumerate() {
            let ours = at(OTHERS.len() + v);
            eprintln!(
                "{} {:>7} {variant}: {:.4} vs {} {:.4} ({}) writes/LRU {:.3}",
                trace.name,
                ours.cache_size_objects,
                ours.miss_ratio,
                OTHERS[best],
                at(best).miss_ratio,
                if ours.miss_ratio <= at(best).miss_ratio {
                    "wins"
                } else {
                    "LOSES"
                },
                ours.cache_writes as f64 / lru_writes
            );
        }
    }
    results
}

#[test]
fn strata_writes_at_most_a_third_of_lru_on_cloudphysics() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/traces/cloudPhysicsIO.csv.zst");
    let trace = sim::load(&path, None, None, None).unwrap_or_else(|e| panic!("{e:#}"));
    let results = compare(&trace, &["strata".to_string()]);
    for s in 0..3 {
        let lru = &results[s];
        let ours = &results[OTHERS.len() * 3 + s];
        assert_eq!(ours.policy, "strata");
        assert!(
            ours.cache_writes * 3 <= lru.cache_writes,
            "{} vs LRU {}",
            ours.cache_writes,
            lru.cache_writes
        );
    }
}

#[test]
#[ignore = "replays the traces in $STRATA_TRACES"]
fn strata_on_listed_traces() {
    let variants: Vec<String> = std::env::var("STRATA_VARIANTS")
        .unwrap_or_else(|_| "strata".into())
        .split(',')
        .map(str::to_string)
        .collect();
    for path in std::env::var("STRATA_TRACES")
        .unwrap_or_default()
        .split(',')
    {
        if path.is_empty() {
            continue;
        }
        let trace =
            sim::load(Path::new(path), None, None, None).unwrap_or_else(|e| panic!("{e:#}"));
        compare(&trace, &variants);
    }
}
