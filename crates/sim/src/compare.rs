//! Issue 5's scorecard: our policy variants against the best of the other online policies, cell
//! by cell (trace x cache size), with cache writes as a share of admit-all LRU's.
//!
//! A *cell* is one trace at one cache size. In each cell the best other policy is the one with the
//! lowest miss ratio among [`OTHERS`]; a variant *wins* a cell when its miss ratio is strictly
//! lower, *ties* when equal within [`TIE_MISS_RATIO`], and *loses* otherwise. Traces named in
//! `tuned` are marked so that a report keeps the traces a policy was tuned on apart from the
//! hold-outs.

use crate::generator::ClientWorkload;
use crate::run::{RunOptions, RunResult};
use crate::sweep::{self, CacheSize, SweepPlan};
use crate::trace::Trace;
use anyhow::Result;
use policy::hottable::Period;
use std::fmt::Write as _;

/// The online policies a variant is scored against (Belady is offline; Ceph's tier and the hot
/// table are not contenders on miss ratio).
pub const OTHERS: [&str; 8] = [
    "lru", "fifo", "arc", "2q", "s3fifo", "wtinylfu", "sieve", "lirs",
];

/// Miss-ratio difference counted as a tie: well below one request in the smallest trace here
/// (1/2,473 = 0.0004), so a tie means "the same misses up to rounding".
pub const TIE_MISS_RATIO: f64 = 1e-6;

/// One variant in one cell.
#[derive(Clone, Debug)]
pub struct Score {
    /// Variant name as given (`strata`, `strata:adapt=0`, ...).
    pub variant: String,
    /// Its miss ratio.
    pub miss_ratio: f64,
    /// Its cache writes divided by admit-all LRU's in the same cell.
    pub writes_per_lru: f64,
    /// Its miss ratio minus the best other's (negative: it wins).
    pub margin: f64,
}

/// One trace at one cache size.
#[derive(Clone, Debug)]
pub struct Cell {
    /// Trace name.
    pub trace: String,
    /// Whether the variants were tuned on this trace.
    pub tuned: bool,
    /// Cache size as given (`1%`).
    pub size_label: String,
    /// Cache size in objects.
    pub size_objects: u64,
    /// The best other policy and its miss ratio.
    pub best_other: (String, f64),
    /// Every other policy's miss ratio, in [`OTHERS`] order.
    pub others: Vec<f64>,
    /// The variants' scores, in the order given.
    pub scores: Vec<Score>,
}

/// Runs [`OTHERS`] and `variants` on `trace` at `sizes` and scores each cell.
pub fn cells(
    trace: &Trace,
    sizes: &[CacheSize],
    variants: &[String],
    tuned: bool,
    jobs: usize,
) -> Result<Vec<Cell>> {
    let policies: Vec<String> = OTHERS
        .iter()
        .map(|p| p.to_string())
        .chain(variants.iter().cloned())
        .collect();
    let plan = SweepPlan {
        policies,
        sizes: sizes.to_vec(),
        thresholds: vec![1.0],
        smoothings: vec![0.5],
        period: Period::Requests(10_000),
        options: RunOptions::default(),
        seed: 42,
        jobs,
        progress: true,
    };
    let results = sweep::run(trace, &plan)?;
    let at = |policy: usize, size: usize| -> &RunResult { &results[policy * sizes.len() + size] };
    let mut cells = Vec::with_capacity(sizes.len());
    for (s, size) in sizes.iter().enumerate() {
        let others: Vec<f64> = (0..OTHERS.len()).map(|p| at(p, s).miss_ratio).collect();
        let best = (0..OTHERS.len())
            .min_by(|&a, &b| others[a].total_cmp(&others[b]))
            .unwrap_or(0);
        let lru_writes = at(0, s).cache_writes.max(1) as f64;
        let scores = variants
            .iter()
            .enumerate()
            .map(|(v, variant)| {
                let ours = at(OTHERS.len() + v, s);
                Score {
                    variant: variant.clone(),
                    miss_ratio: ours.miss_ratio,
                    writes_per_lru: ours.cache_writes as f64 / lru_writes,
                    margin: ours.miss_ratio - others[best],
                }
            })
            .collect();
        cells.push(Cell {
            trace: trace.name.clone(),
            tuned,
            size_label: size.label(),
            size_objects: at(0, s).cache_size_objects,
            best_other: (OTHERS[best].to_string(), others[best]),
            others,
            scores,
        });
    }
    Ok(cells)
}

/// Synthetic hold-out traces from seed 003's generator, mapped to 4 MiB objects: (clients, Zipf
/// exponent, seed) chosen before any `strata` variant was run on them, never used for tuning.
pub const SYNTHETIC: [(u32, f64, u64); 4] =
    [(2, 1.0, 21), (4, 0.8, 22), (8, 1.2, 23), (14, 1.0, 24)];

/// The [`SYNTHETIC`] traces.
pub fn synthetic_traces() -> Vec<Trace> {
    SYNTHETIC
        .iter()
        .map(|&(clients, zipf_exponent, seed)| {
            let mut trace = ClientWorkload {
                clients,
                zipf_exponent,
                seed,
                ..ClientWorkload::default()
            }
            .generate();
            trace.name = format!("synthetic-{clients}c-zipf{zipf_exponent}-seed{seed}");
            trace
        })
        .collect()
}

/// Late synthetic hold-outs, (clients, Zipf exponent, seed, popularity shift in seconds),
/// reported apart from [`SYNTHETIC`]; they vary the shift period, which the first four keep at
/// 60 s. Seeds 31-33 were picked in session 3 of issue 5 before the frequency gate was measured
/// anywhere, and first run with the gate's sketch period at 10 x capacity; seeds 41-42 were
/// picked before its floor at `epoch_min` (prompted by seeds 21-24 and 31-33) was run anywhere.
pub const SYNTHETIC_LATE: [(u32, f64, u64, u64); 5] = [
    (3, 0.9, 31, 60),
    (6, 1.1, 32, 20),
    (10, 0.7, 33, 300),
    (5, 1.0, 41, 120),
    (12, 0.9, 42, 30),
];

/// The [`SYNTHETIC_LATE`] traces.
pub fn late_synthetic_traces() -> Vec<Trace> {
    SYNTHETIC_LATE
        .iter()
        .map(|&(clients, zipf_exponent, seed, shift_every_s)| {
            let mut trace = ClientWorkload {
                clients,
                zipf_exponent,
                seed,
                shift_every_s,
                ..ClientWorkload::default()
            }
            .generate();
            trace.name =
                format!("late-{clients}c-zipf{zipf_exponent}-shift{shift_every_s}s-seed{seed}");
            trace
        })
        .collect()
}

/// Wins, ties and losses of variant `v` over `cells`.
pub fn tally(cells: &[Cell], v: usize) -> (usize, usize, usize) {
    let (mut wins, mut ties, mut losses) = (0, 0, 0);
    for cell in cells {
        let margin = cell.scores[v].margin;
        if margin.abs() <= TIE_MISS_RATIO {
            ties += 1;
        } else if margin < 0.0 {
            wins += 1;
        } else {
            losses += 1;
        }
    }
    (wins, ties, losses)
}

/// `1 tie`, `2 ties`.
fn counted(count: usize, one: &str, many: &str) -> String {
    format!("{count} {}", if count == 1 { one } else { many })
}

/// A Markdown table of every cell, then a summary per variant (tuning traces and hold-outs apart).
pub fn report(cells: &[Cell]) -> String {
    let mut out = String::new();
    let variants: Vec<&str> = cells
        .first()
        .map(|c| c.scores.iter().map(|s| s.variant.as_str()).collect())
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "| trace | size | best other | {} |",
        variants
            .iter()
            .map(|v| format!("{v} miss | writes/LRU | margin"))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let _ = writeln!(
        out,
        "|---|---|---|{}",
        "---|---|---|".repeat(variants.len())
    );
    for cell in cells {
        let name = if cell.tuned {
            format!("{} (tuned)", cell.trace)
        } else {
            cell.trace.clone()
        };
        let mut line = format!(
            "| {name} | {} ({}) | {} {:.4} |",
            cell.size_label, cell.size_objects, cell.best_other.0, cell.best_other.1
        );
        for score in &cell.scores {
            let verdict = if score.margin.abs() <= TIE_MISS_RATIO {
                "tie".to_string()
            } else if score.margin < 0.0 {
                format!("wins by {:.5}", -score.margin)
            } else {
                format!("**loses by {:.5}**", score.margin)
            };
            let _ = write!(
                line,
                " {:.4} | {:.3} | {verdict} |",
                score.miss_ratio, score.writes_per_lru
            );
        }
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(out);
    for (v, variant) in variants.iter().enumerate() {
        for (label, tuned) in [("tuning traces", true), ("hold-outs", false)] {
            let group: Vec<Cell> = cells.iter().filter(|c| c.tuned == tuned).cloned().collect();
            if group.is_empty() {
                continue;
            }
            let (wins, ties, losses) = tally(&group, v);
            let worst = group
                .iter()
                .map(|c| c.scores[v].margin)
                .fold(f64::NEG_INFINITY, f64::max);
            let writes = group
                .iter()
                .map(|c| c.scores[v].writes_per_lru)
                .fold(0.0, f64::max);
            let _ = writeln!(
                out,
                "{variant} on {label}: {}, {}, {} of {}; worst margin {worst:+.5}; cache writes \
                 at most {writes:.3} of LRU's",
                counted(wins, "win", "wins"),
                counted(ties, "tie", "ties"),
                counted(losses, "loss", "losses"),
                counted(group.len(), "cell", "cells"),
            );
        }
    }
    out
}

/// The traces of issue 5's table under the shared data directory (`../shared/data/traces` from
/// the workspace root), in the table's order; the second field says whether `strata` was tuned
/// on it (cloudPhysicsIO and OLTP only).
pub const SHARED_TRACES: [(&str, bool); 9] = [
    ("cloudphysics/cloudPhysicsIO.csv", true),
    ("arc/OLTP.lis.zst", true),
    ("arc/P12.lis.zst", false),
    ("snia/msr-cambridge1-sample.csv", false),
    ("snia/systor17-traces-sample.csv.gz", false),
    ("snia/systor17-additional-sample.csv.gz", false),
    ("snia/cloud_storage-sample.bz2", false),
    ("objects/cloud_photos-sample.bz2", false),
    ("objects/request.trace.xz", false),
];

/// Whether `strata` was tuned on the trace named `name` (a loaded trace's name, its file name
/// up to the first dot): the tuning traces of [`SHARED_TRACES`], wherever the file lies.
pub fn is_tuning_trace(name: &str) -> bool {
    SHARED_TRACES.iter().any(|&(path, tuned)| {
        tuned
            && path
                .rsplit('/')
                .next()
                .and_then(|file| file.split('.').next())
                == Some(name)
    })
}

/// Loads each path, adds the synthetic hold-outs when asked, and scores every cell. A trace is
/// marked tuned by its name ([`is_tuning_trace`]), so `--trace .../cloudPhysicsIO.csv` is
/// labelled as with `--traces DIR` (it was reported as a hold-out).
pub fn run_all(
    paths: &[std::path::PathBuf],
    synthetic: bool,
    sizes: &[CacheSize],
    variants: &[String],
    jobs: usize,
) -> Result<Vec<Cell>> {
    let mut all = Vec::new();
    for path in paths {
        let trace = crate::load(path, None, None, None)?;
        let is_tuned = is_tuning_trace(&trace.name);
        all.extend(cells(&trace, sizes, variants, is_tuned, jobs)?);
    }
    if synthetic {
        for trace in synthetic_traces() {
            all.extend(cells(&trace, sizes, variants, false, jobs)?);
        }
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_variant_equal_to_an_other_ties_and_lru_loses_on_a_scan() {
        // A hot set of 20 keys interleaved with a scan of never-repeated keys: LRU lets the scan
        // flush the hot set, S3-FIFO and LIRS keep it (LIRS best: it is the best other).
        let parts = (0..20_000u64).map(|i| {
            let key = if i % 2 == 0 { i % 40 / 2 } else { 1_000 + i };
            (key, 4096, i, false)
        });
        let trace = Trace::from_parts("scan", parts, false);
        let variants = ["lirs".to_string(), "lru".to_string()];
        let sizes = [CacheSize::Objects(30)];
        let cells = cells(&trace, &sizes, &variants, false, 1).expect("runs");
        assert_eq!(cells.len(), 1);
        assert_eq!(tally(&cells, 0), (0, 1, 0), "{:?}", cells[0]);
        assert_eq!(tally(&cells, 1), (0, 0, 1), "{:?}", cells[0]);
        assert!((cells[0].scores[1].writes_per_lru - 1.0).abs() < 1e-9);
        let text = report(&cells);
        assert!(text.contains("| scan | 30 (30) |"), "{text}");
        assert!(text.contains("**loses by"), "{text}");
        assert!(
            text.contains("0 wins, 1 tie, 0 losses of 1 cell;"),
            "{text}"
        );
    }

    /// The tuning traces are known by name wherever their file lies (`compare --trace` of
    /// cloudPhysicsIO was labelled a hold-out; only `--traces DIR` marked it).
    #[test]
    fn tuning_traces_are_known_by_name() {
        assert!(is_tuning_trace("cloudPhysicsIO"));
        assert!(is_tuning_trace("OLTP"));
        assert!(!is_tuning_trace("P12"));
        assert!(!is_tuning_trace("msr-cambridge1-sample"));
    }
}
