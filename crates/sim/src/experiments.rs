//! Seed experiments as ready-made plans.
//! - Seed 000: hot table hit ratio and throughput against `H` for four cache sizes (5, 10, 15,
//!   20% of unique objects, as 4/8/12/16 GB over the paper's 80 GB), one-minute periods, against
//!   Ceph's native tier (faithful and corrected) and LRU at the same sizes.
//! - Seed 003: a ramp of 1..=N clients of [`ClientWorkload`] against a fixed cache pool, with
//!   HDD only, Ceph's tier (`ceph-seed003`), the hot table and `strata`.

use crate::generator::ClientWorkload;
use crate::report;
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

/// Seed 003's ramp as CSV: a `clients` column, then [`report::csv`]'s columns.
pub fn ramp_csv(points: &[RampPoint]) -> String {
    let mut out = format!("clients,{}\n", report::CSV_HEADER);
    for point in points {
        out.push_str(&format!(
            "{},{}\n",
            point.clients,
            report::csv_row(&point.run)
        ));
    }
    out
}

/// Seed 003's ramp as an SVG plot: estimated requests per second against clients, one line
/// per policy.
pub fn ramp_svg(points: &[RampPoint], title: &str) -> String {
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for point in points {
        let xy = (f64::from(point.clients), point.run.throughput_rps);
        match series
            .iter_mut()
            .find(|(label, _)| *label == point.run.policy)
        {
            Some((_, line)) => line.push(xy),
            None => series.push((point.run.policy.clone(), vec![xy])),
        }
    }
    report::svg_lines(&series, title, "clients", "est. requests/s")
}

/// Seed 003's ramp: `1..=max_clients` clients, `cache_objects` cache objects, given policies
/// (`hdd-only` means no cache). Zero clients, requests or cache objects are refused (0
/// requests printed a miss ratio of 0; 0 objects printed "0 objects" and simulated 1).
pub fn seed003_ramp(
    base: &ClientWorkload,
    max_clients: u32,
    cache_objects: u64,
    policies: &[String],
    jobs: usize,
) -> Result<Vec<RampPoint>> {
    if max_clients == 0 || base.requests_per_client == 0 || cache_objects == 0 {
        anyhow::bail!(
            "seed 003 needs at least 1 client, 1 request per client and 1 cache object (got \
             {max_clients}, {}, {cache_objects})",
            base.requests_per_client
        );
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_ramp_is_refused_and_a_ramp_writes_csv_and_svg() {
        let base = ClientWorkload {
            requests_per_client: 500,
            ..ClientWorkload::default()
        };
        let policies = ["lru".to_string(), "strata".to_string()];
        assert!(seed003_ramp(&base, 0, 10, &policies, 1).is_err());
        assert!(seed003_ramp(&base, 2, 0, &policies, 1).is_err());
        let none = ClientWorkload {
            requests_per_client: 0,
            ..base.clone()
        };
        assert!(seed003_ramp(&none, 2, 10, &policies, 1).is_err());
        let points = seed003_ramp(&base, 2, 10, &policies, 1).expect("runs");
        let csv = ramp_csv(&points);
        assert_eq!(csv.lines().count(), 1 + 4, "{csv}");
        assert!(csv.starts_with("clients,trace,policy,"), "{csv}");
        assert!(csv
            .lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("1,seed003-1clients,lru,")));
        let svg = ramp_svg(&points, "seed 003");
        assert_eq!(svg.matches("<polyline").count(), 2, "{svg}");
    }
}
