//! `strata bench volume`'s results: medians and ranges over the rounds, same-round ratios, the
//! table, the SVG bar chart and the JSON report.

use serde_json::Value;

use super::{load, Args, Figures, Job};

/// One target's figures: `rounds[round][job]`.
#[derive(serde::Serialize)]
pub(super) struct Measured {
    pub(super) target: String,
    pub(super) rounds: Vec<Vec<Figures>>,
}

impl Measured {
    fn median(&self, job: usize, value: impl Fn(&Figures) -> f64) -> f64 {
        let mut values: Vec<f64> = self.rounds.iter().map(|round| value(&round[job])).collect();
        values.sort_by(f64::total_cmp);
        match values.len() {
            0 => f64::NAN,
            n if n % 2 == 1 => values[n / 2],
            n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
        }
    }

    /// The lowest and highest of one figure over the rounds.
    fn spread(&self, job: usize, value: impl Fn(&Figures) -> f64) -> (f64, f64) {
        self.rounds
            .iter()
            .fold((f64::INFINITY, 0.0_f64), |(low, high), round| {
                (low.min(value(&round[job])), high.max(value(&round[job])))
            })
    }
}

/// The figure a job's cell shows: IOPS for random jobs, MB/s for sequential ones.
pub(super) fn headline(job: &Job) -> fn(&Figures) -> f64 {
    if job.random() {
        |f| f.iops
    } else {
        |f| f.mb_per_s
    }
}

/// The ratios the issue asks for, as (label, numerator target, denominator target).
const RATIOS: [(&str, &str, &str); 4] = [
    ("strata/rbd", "strata", "rbd"),
    ("strata-ceph/rbd", "strata-ceph", "rbd"),
    ("cached/nvme", "cached", "nvme"),
    ("cached/hdd", "cached", "hdd"),
];

pub(super) fn print_table(measured: &[Measured], jobs: &[Job], args: &Args) {
    println!(
        "\nvolume: {} replicas, {} volumes, embedded OSDs' data cache {}, {} s per job, {} round(s) (median; range over rounds in brackets); load average at the end {}",
        args.replicas,
        args.volume_size,
        args.data_cache_size.as_deref().unwrap_or("256M (default)"),
        args.runtime_s,
        args.rounds,
        load::load_average()
    );
    let mut header = format!("{:<16}", "job");
    for entry in measured {
        header.push_str(&format!(" | {:>30}", entry.target));
    }
    let ratios: Vec<_> = RATIOS
        .iter()
        .filter(|(_, a, b)| {
            measured.iter().any(|m| m.target == *a) && measured.iter().any(|m| m.target == *b)
        })
        .collect();
    for (label, _, _) in &ratios {
        header.push_str(&format!(" | {label:>15}"));
    }
    println!("{header}");
    println!("{}", "-".repeat(header.chars().count()));
    for (index, job) in jobs.iter().enumerate() {
        let mut line = format!("{:<16}", job.name);
        let value = headline(job);
        for entry in measured {
            let median = entry.median(index, value);
            let p99 = entry.median(index, |f| f.latency_us_p99);
            let (low, high) = entry.spread(index, value);
            let cell = if job.random() {
                format!("{median:.0} IOPS p99 {p99:.0}µs")
            } else {
                format!("{median:.0} MB/s p99 {p99:.0}µs")
            };
            let cell = if args.rounds > 1 {
                format!("{cell} [{low:.0}-{high:.0}]")
            } else {
                cell
            };
            line.push_str(&format!(" | {cell:>30}"));
        }
        for (_, a, b) in &ratios {
            let ratio = ratio_median(measured, a, b, index, value);
            line.push_str(&format!(" | {ratio:>14.2}x"));
        }
        println!("{line}");
    }
    if args.rounds > 1 {
        println!("\nper round (IOPS for random jobs, MB/s for sequential ones; ratios of the same round):");
        for (index, job) in jobs.iter().enumerate() {
            for (label, a, b) in &ratios {
                let per_round = round_ratios(measured, a, b, index, headline(job));
                let listed: Vec<String> = per_round
                    .iter()
                    .map(|(ours, theirs)| format!("{:.2}x ({ours:.0}/{theirs:.0})", ours / theirs))
                    .collect();
                println!("  {:<16} {label:<16} {}", job.name, listed.join(", "));
            }
        }
    }
}

/// `(a, b)` of one job's figure in every round both targets ran.
fn round_ratios(
    measured: &[Measured],
    a: &str,
    b: &str,
    job: usize,
    value: fn(&Figures) -> f64,
) -> Vec<(f64, f64)> {
    let rounds = |target: &str| {
        measured
            .iter()
            .find(|m| m.target == target)
            .map(|m| m.rounds.iter().map(|round| value(&round[job])).collect())
            .unwrap_or_else(Vec::new)
    };
    rounds(a).into_iter().zip(rounds(b)).collect()
}

/// The median over rounds of the ratio `a / b` within each round (both ran on the same
/// machine state), NaN when either target did not run.
fn ratio_median(
    measured: &[Measured],
    a: &str,
    b: &str,
    job: usize,
    value: fn(&Figures) -> f64,
) -> f64 {
    let mut ratios: Vec<f64> = round_ratios(measured, a, b, job, value)
        .iter()
        .map(|(ours, theirs)| ours / theirs)
        .collect();
    ratios.sort_by(f64::total_cmp);
    match ratios.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => ratios[n / 2],
        n => (ratios[n / 2 - 1] + ratios[n / 2]) / 2.0,
    }
}

const COLORS: [&str; 6] = [
    "#1f77b4", "#d62728", "#ff7f0e", "#7f7f7f", "#2ca02c", "#9467bd",
];

/// Grouped bars, one group per job and one bar per target, on a log scale (HDDs and NVMe
/// differ a hundredfold): IOPS for random jobs, MB/s for sequential ones.
pub(super) fn svg(measured: &[Measured], jobs: &[Job]) -> String {
    use std::fmt::Write;
    let (width, height, margin, legend) = (900.0, 460.0, 60.0, 120.0);
    let values: Vec<Vec<f64>> = measured
        .iter()
        .map(|entry| {
            (0..jobs.len())
                .map(|index| entry.median(index, headline(&jobs[index])))
                .collect()
        })
        .collect();
    let top = values
        .iter()
        .flatten()
        .copied()
        .filter(|v| v.is_finite())
        .fold(1.0_f64, f64::max);
    let log_top = top.log10().ceil().max(1.0);
    let plot_height = height - 2.0 * margin;
    let y = |value: f64| {
        let value = value.max(1.0);
        height - margin - value.log10() / log_top * plot_height
    };
    let group = (width - margin - legend) / jobs.len().max(1) as f64;
    let bar = group * 0.8 / measured.len().max(1) as f64;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11"><rect width="100%" height="100%" fill="white"/>"#
    );
    let _ = writeln!(
        out,
        r#"<text x="{margin}" y="20" font-size="14">strata bench volume: IOPS (random jobs) and MB/s (sequential), log scale; medians, whiskers span the rounds</text>"#
    );
    for decade in 0..=log_top as i32 {
        let value = 10f64.powi(decade);
        let _ = writeln!(
            out,
            r##"<line x1="{margin}" y1="{y:.1}" x2="{x2}" y2="{y:.1}" stroke="#ddd"/><text x="5" y="{ty:.1}">{value}</text>"##,
            y = y(value),
            x2 = width - legend,
            ty = y(value) + 4.0
        );
    }
    for (index, job) in jobs.iter().enumerate() {
        let left = margin + index as f64 * group + group * 0.1;
        for (target, row) in values.iter().enumerate() {
            let value = row[index];
            if !value.is_finite() {
                continue;
            }
            let x = left + target as f64 * bar;
            let top = y(value);
            let _ = writeln!(
                out,
                r#"<rect x="{x:.1}" y="{top:.1}" width="{w:.1}" height="{h:.1}" fill="{color}"><title>{value:.0}</title></rect>"#,
                w = bar * 0.95,
                h = height - margin - top,
                color = COLORS[target % COLORS.len()]
            );
            // The range over the rounds, as a whisker.
            let (low, high) = measured[target].spread(index, headline(job));
            if measured[target].rounds.len() > 1 && low.is_finite() {
                let _ = writeln!(
                    out,
                    r#"<line x1="{cx:.1}" y1="{y1:.1}" x2="{cx:.1}" y2="{y2:.1}" stroke="black"/>"#,
                    cx = x + bar * 0.475,
                    y1 = y(low),
                    y2 = y(high)
                );
            }
        }
        let _ = writeln!(
            out,
            r#"<text x="{x:.1}" y="{ty:.1}" text-anchor="middle" font-size="9">{name}</text>"#,
            x = left + group * 0.4,
            ty = height - margin + 14.0,
            name = job.name
        );
    }
    for (target, entry) in measured.iter().enumerate() {
        let ly = margin + target as f64 * 18.0;
        let _ = writeln!(
            out,
            r#"<rect x="{x}" y="{ly}" width="12" height="12" fill="{color}"/><text x="{tx}" y="{ty}">{name}</text>"#,
            x = width - legend + 10.0,
            tx = width - legend + 28.0,
            ty = ly + 10.0,
            color = COLORS[target % COLORS.len()],
            name = entry.target
        );
    }
    out.push_str("</svg>\n");
    out
}

/// Every round's figures and each cell's medians, as JSON.
pub(super) fn report_json(measured: &[Measured], jobs: &[Job], args: &Args) -> Value {
    let medians: Vec<Value> = measured
        .iter()
        .map(|entry| {
            let per_job: Vec<Value> = (0..jobs.len())
                .map(|index| {
                    serde_json::json!({
                        "job": jobs[index].name,
                        "iops": entry.median(index, |f| f.iops),
                        "mb_per_s": entry.median(index, |f| f.mb_per_s),
                        "latency_us_mean": entry.median(index, |f| f.latency_us_mean),
                        "latency_us_p99": entry.median(index, |f| f.latency_us_p99),
                    })
                })
                .collect();
            serde_json::json!({"target": entry.target, "jobs": per_job})
        })
        .collect();
    serde_json::json!({
        "bench": "volume", "replicas": args.replicas, "volume_size": args.volume_size,
        "runtime_s": args.runtime_s, "rounds": args.rounds, "jobs": args.jobs,
        "data_cache_size": args.data_cache_size,
        "load_average": load::load_average(), "medians": medians, "targets": measured,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_pair_rounds() {
        let figures = |iops: f64| Figures {
            iops,
            ..Figures::default()
        };
        let measured = [
            Measured {
                target: "strata".into(),
                rounds: vec![
                    vec![figures(30.0)],
                    vec![figures(10.0)],
                    vec![figures(90.0)],
                ],
            },
            Measured {
                target: "rbd".into(),
                rounds: vec![
                    vec![figures(10.0)],
                    vec![figures(10.0)],
                    vec![figures(10.0)],
                ],
            },
        ];
        // Ratios 3, 1 and 9 within rounds: their median is 3, and the spread is 10-90.
        assert_eq!(ratio_median(&measured, "strata", "rbd", 0, |f| f.iops), 3.0);
        assert_eq!(measured[0].spread(0, |f| f.iops), (10.0, 90.0));
        assert!(ratio_median(&measured, "strata", "nvme", 0, |f| f.iops).is_nan());
    }
}
