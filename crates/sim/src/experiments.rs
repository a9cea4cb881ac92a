//! Seed experiments as ready-made plans.
//! - Seed 000: hot table hit ratio and throughput against `H` for four cache sizes (5, 10, 15,
//!   20% of unique objects, as 4/8/12/16 GB over the paper's 80 GB), one-minute periods, against
//!   Ceph's native tier (faithful and corrected) and LRU at the same sizes.
//! - Seed 003: a ramp of 1..=N clients of [`ClientWorkload`] against a fixed cache pool, with
//!   HDD only, Ceph's tier (`ceph-seed003`), the hot table and `strata`.

use crate::generator::ClientWorkload;
use crate::run::{RunOptions, RunResult};
use crate::sweep::{self, CacheSize, SweepPlan};
use crate::trace::Trace;
use anyhow::Result;
use policy::hottable::Period;
use serde::Serialize;

/// Seed 000's sweep over `trace`.
pub fn seed000_plan(thresholds: Vec<f64>, smoothings: Vec<f64>, jobs: usize) -> SweepPlan {
    SweepPlan {
        policies: ["hottable", "ceph", "ceph-corrected", "ceph-fast", "lru"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        sizes: [5.0, 10.0, 15.0, 20.0]
            .iter()
            .map(|&p| CacheSize::Percent(p))
            .collect(),
        thresholds,
        smoothings,
        period: Period::Millis(60_000),
        options: RunOptions::default(),
        seed: 42,
        jobs,
        progress: true,
    }
}

/// One point of seed 003's ramp.
#[derive(Clone, Debug, Serialize)]
pub struct RampPoint {
    /// Clients.
    pub clients: u32,
    /// The run.
    #[serde(flatten)]
    pub run: RunResult,
}

/// Seed 003's ramp: `1..=max_clients` clients, `cache_objects` cache objects, given policies
/// (`hdd-only` means no cache).
pub fn seed003_ramp(
    base: &ClientWorkload,
    max_clients: u32,
    cache_objects: u64,
    policies: &[String],
    jobs: usize,
) -> Result<Vec<RampPoint>> {
    let mut points = Vec::new();
    for clients in 1..=max_clients {
        let workload = ClientWorkload {
            clients,
            ..base.clone()
        };
        let trace: Trace = workload.generate();
        let names: Vec<String> = policies
            .iter()
            .map(|p| {
                if p == "hdd-only" {
                    "lru+prob0".to_string()
                } else {
                    p.clone()
                }
            })
            .collect();
        let plan = SweepPlan {
            policies: names,
            sizes: vec![CacheSize::Objects(cache_objects)],
            thresholds: vec![0.5],
            smoothings: vec![0.5],
            period: Period::Millis(60_000),
            options: RunOptions::default(),
            seed: 42,
            jobs,
            progress: false,
        };
        for (mut run, name) in sweep::run(&trace, &plan)?.into_iter().zip(policies) {
            run.policy = name.clone();
            points.push(RampPoint { clients, run });
        }
    }
    Ok(points)
}
