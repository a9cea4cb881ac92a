//! PG distribution analysis: per-OSD shard counts per pool and in total against
//! weight-proportional targets, and the summary figures of seed 004's tables.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::problem::{OsdId, PgId, PoolId, Problem, ITEM_NONE};
use crate::targets::{Bounds, Targets};

/// Which shards a table counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    Pool(PoolId),
    Total,
}

/// One OSD's line.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub osd: OsdId,
    pub count: usize,
    pub target: f64,
    /// Bytes on the OSD (bytes mode), if PG sizes are known.
    pub bytes: Option<u64>,
}

impl Row {
    pub fn deviation(&self) -> f64 {
        self.count as f64 - self.target
    }
}

/// Summary figures of one table. Deviations are `count - target`; with equal weights the
/// target is the mean, so these are seed 004's "max dev" and "gap" figures.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Summary {
    pub osds: usize,
    pub shards: usize,
    pub min: usize,
    pub max: usize,
    pub mean: f64,
    /// Population standard deviation of `count - target`.
    pub stdev: f64,
    /// max |count - target|, in shards.
    pub max_deviation: f64,
    /// max |count - target| / target, percent.
    pub max_deviation_percent: f64,
    /// (max - min) of count / target, percent.
    pub gap_percent: f64,
    /// OSDs outside [floor(target), ceil(target)].
    pub outside_bounds: usize,
    /// Bytes mode: (max - min) of bytes / weight-proportional share of the table's bytes,
    /// percent; None without PG sizes.
    pub bytes_gap_percent: Option<f64>,
}

/// One distribution table.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub scope: Scope,
    pub rows: Vec<Row>,
    pub summary: Summary,
}

/// Tables per pool and in total (the total one last).
#[derive(Debug, Clone, PartialEq)]
pub struct Distribution {
    pub tables: Vec<Table>,
}

impl Distribution {
    /// Distribution of `up` (PG -> up set; PGs missing from it count at their raw set).
    /// `sizes` gives bytes per PG, if known.
    pub fn compute(
        problem: &Problem,
        up: &BTreeMap<PgId, Vec<OsdId>>,
        sizes: Option<&BTreeMap<PgId, u64>>,
    ) -> Self {
        let targets = Targets::compute(problem);
        let mut counts: BTreeMap<Scope, BTreeMap<OsdId, (usize, u64)>> = BTreeMap::new();
        for pool in &problem.pools {
            let table = counts.entry(Scope::Pool(pool.id)).or_default();
            for &osd in targets
                .per_pool
                .get(&pool.id)
                .into_iter()
                .flat_map(|m| m.keys())
            {
                table.entry(osd).or_default();
            }
        }
        let total = counts.entry(Scope::Total).or_default();
        for &osd in targets.total.keys() {
            total.entry(osd).or_default();
        }
        for pg in &problem.pgs {
            let set = up.get(&pg.id).unwrap_or(&pg.raw);
            let bytes = sizes.and_then(|s| s.get(&pg.id)).copied().unwrap_or(0);
            for &osd in set.iter().filter(|&&o| o != ITEM_NONE) {
                for scope in [Scope::Pool(pg.id.pool), Scope::Total] {
                    let entry = counts.entry(scope).or_default().entry(osd).or_default();
                    entry.0 += 1;
                    entry.1 += bytes;
                }
            }
        }
        let tables = counts
            .into_iter()
            .map(|(scope, per_osd)| {
                let rows: Vec<Row> = per_osd
                    .into_iter()
                    .map(|(osd, (count, bytes))| Row {
                        osd,
                        count,
                        target: match scope {
                            Scope::Pool(p) => targets.pool_target(p, osd),
                            Scope::Total => targets.total_target(osd),
                        },
                        bytes: sizes.map(|_| bytes),
                    })
                    .collect();
                let summary = summarize(&rows);
                Table {
                    scope,
                    rows,
                    summary,
                }
            })
            .collect();
        Self { tables }
    }

    pub fn total(&self) -> Option<&Table> {
        self.tables.iter().find(|t| t.scope == Scope::Total)
    }

    /// The summary lines (one per table) as text, with a header.
    pub fn summary_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<10} {:>5} {:>7} {:>5} {:>5} {:>8} {:>7} {:>8} {:>9} {:>6} {:>8}",
            "scope",
            "osds",
            "shards",
            "min",
            "max",
            "mean",
            "stdev",
            "max dev",
            "max dev%",
            "gap%",
            "outside"
        );
        let with_bytes = self
            .tables
            .iter()
            .any(|t| t.summary.bytes_gap_percent.is_some());
        if with_bytes {
            out.pop();
            out.push_str(" bytes gap%\n");
        }
        for table in &self.tables {
            let s = &table.summary;
            let scope = match table.scope {
                Scope::Pool(p) => format!("pool {p}"),
                Scope::Total => "total".to_string(),
            };
            let _ = writeln!(
                out,
                "{scope:<10} {:>5} {:>7} {:>5} {:>5} {:>8.2} {:>7.2} {:>8.2} {:>9.2} {:>6.2} {:>8}",
                s.osds,
                s.shards,
                s.min,
                s.max,
                s.mean,
                s.stdev,
                s.max_deviation,
                s.max_deviation_percent,
                s.gap_percent,
                s.outside_bounds
            );
            if let Some(gap) = s.bytes_gap_percent {
                out.pop();
                let _ = writeln!(out, " {gap:>10.2}");
            }
        }
        out
    }

    /// Per-OSD lines of the total table: osd, count, target, deviation.
    pub fn osd_text(&self) -> String {
        let mut out = String::new();
        let Some(total) = self.total() else {
            return out;
        };
        let _ = writeln!(
            out,
            "{:>6} {:>6} {:>9} {:>8}",
            "osd", "shards", "target", "dev"
        );
        for row in &total.rows {
            let _ = writeln!(
                out,
                "{:>6} {:>6} {:>9.2} {:>+8.2}",
                row.osd,
                row.count,
                row.target,
                row.deviation()
            );
        }
        out
    }
}

fn summarize(rows: &[Row]) -> Summary {
    let active: Vec<&Row> = rows
        .iter()
        .filter(|r| r.target > 0.0 || r.count > 0)
        .collect();
    if active.is_empty() {
        return Summary::default();
    }
    let n = active.len() as f64;
    let shards: usize = active.iter().map(|r| r.count).sum();
    let deviations: Vec<f64> = active.iter().map(|r| r.deviation()).collect();
    let mean_deviation = deviations.iter().sum::<f64>() / n;
    let variance = deviations
        .iter()
        .map(|d| (d - mean_deviation).powi(2))
        .sum::<f64>()
        / n;
    let ratios: Vec<f64> = active
        .iter()
        .filter(|r| r.target > 0.0)
        .map(|r| r.count as f64 / r.target)
        .collect();
    let ratio_max = ratios.iter().copied().fold(f64::MIN, f64::max);
    let ratio_min = ratios.iter().copied().fold(f64::MAX, f64::min);
    Summary {
        osds: active.len(),
        shards,
        min: active.iter().map(|r| r.count).min().unwrap_or(0),
        max: active.iter().map(|r| r.count).max().unwrap_or(0),
        mean: shards as f64 / n,
        stdev: variance.sqrt(),
        max_deviation: deviations.iter().map(|d| d.abs()).fold(0.0, f64::max),
        max_deviation_percent: active
            .iter()
            .filter(|r| r.target > 0.0)
            .map(|r| r.deviation().abs() / r.target * 100.0)
            .fold(0.0, f64::max),
        gap_percent: if ratios.is_empty() {
            0.0
        } else {
            (ratio_max - ratio_min) * 100.0
        },
        outside_bounds: active
            .iter()
            .filter(|r| !Bounds::of_target(r.target).contains(r.count))
            .count(),
        bytes_gap_percent: bytes_gap(&active),
    }
}

fn bytes_gap(rows: &[&Row]) -> Option<f64> {
    let total_bytes: u64 = rows.iter().map(|r| r.bytes).sum::<Option<u64>>()?;
    let total_target: f64 = rows.iter().map(|r| r.target).sum();
    if total_bytes == 0 || total_target <= 0.0 {
        return None;
    }
    let ratios: Vec<f64> = rows
        .iter()
        .filter(|r| r.target > 0.0)
        .map(|r| r.bytes.unwrap_or(0) as f64 / (total_bytes as f64 * r.target / total_target))
        .collect();
    let max = ratios.iter().copied().fold(f64::MIN, f64::max);
    let min = ratios.iter().copied().fold(f64::MAX, f64::min);
    Some((max - min) * 100.0)
}
