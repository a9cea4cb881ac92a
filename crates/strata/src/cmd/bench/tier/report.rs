//! `strata bench tier`'s tables (medians over rounds, with the spread) and SVG figures.

use std::path::Path;

use anyhow::{Context, Result};

use super::{Args, Step};

fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(|a, b| a.total_cmp(b));
    let middle = values.len() / 2;
    if values.len() % 2 == 1 {
        values[middle]
    } else {
        (values[middle - 1] + values[middle]) / 2.0
    }
}

/// The steps of one cell (scenario, configuration, x) over the rounds.
fn cell<'a>(steps: &'a [Step], scenario: &str, config: &str, x: f64) -> Vec<&'a Step> {
    steps
        .iter()
        .filter(|s| s.scenario == scenario && s.config == config && s.x == x)
        .collect()
}

fn median_of(cell: &[&Step], value: impl Fn(&Step) -> f64) -> f64 {
    median(cell.iter().map(|s| value(s)).collect())
}

fn spread(cell: &[&Step], value: impl Fn(&Step) -> f64) -> String {
    if cell.len() < 2 {
        return String::new();
    }
    let values: Vec<f64> = cell.iter().map(|s| value(s)).collect();
    let low = values.iter().copied().fold(f64::MAX, f64::min);
    let high = values.iter().copied().fold(f64::MIN, f64::max);
    format!(" ({low:.0}-{high:.0})")
}

/// Bytes written to the NVMe devices per cache hit, if there were hits.
fn ssd_bytes_per_hit(step: &Step) -> f64 {
    if step.hits == 0 {
        f64::NAN
    } else {
        step.ssd_bytes_written as f64 / step.hits as f64
    }
}

fn xs(steps: &[Step], scenario: &str) -> Vec<f64> {
    let mut xs: Vec<f64> = steps
        .iter()
        .filter(|s| s.scenario == scenario)
        .map(|s| s.x)
        .collect();
    xs.sort_by(|a, b| a.total_cmp(b));
    xs.dedup();
    xs
}

fn configs(steps: &[Step], scenario: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for step in steps.iter().filter(|s| s.scenario == scenario) {
        if !out.contains(&step.config) {
            out.push(step.config.clone());
        }
    }
    out.sort_by_key(|c| super::CONFIGS.iter().position(|k| k == c));
    out
}

fn describe(scenario: &str, args: &Args) -> String {
    let skew = format!(
        "Zipf {} over each volume's objects, hot set redrawn every {} s",
        args.zipf, args.shift_seconds
    );
    match scenario {
        "ramp" => format!("seed 003's ramp: clients 1 volume each, {skew}"),
        "uniform" => "uniform over the working set (what cannot be cached)".into(),
        "threshold" => format!("seed 000: the predictive tier's threshold H, {skew}"),
        _ => format!("seed 000: cache size as a share of the working set, {skew}"),
    }
}

fn x_label(scenario: &str) -> &'static str {
    match scenario {
        "ramp" | "uniform" => "clients",
        "threshold" => "H",
        _ => "cache share",
    }
}

/// Prints one table per scenario and the ratios the goals name.
pub fn print(steps: &[Step], args: &Args) {
    for scenario in super::SCENARIOS {
        let xs = xs(steps, scenario);
        if xs.is_empty() {
            continue;
        }
        println!(
            "\n{scenario}: {}; 4 KiB ops, {}% reads, {} per client in flight; cache {} of the working set; medians of {} round(s) (spread)",
            describe(scenario, args),
            args.read_percent,
            args.iodepth,
            args.cache_share,
            args.rounds
        );
        println!(
            "{:>11} {:<10} {:>18} {:>9} {:>7} {:>11} {:>10} {:>10} {:>8} {:>9} {:>14}",
            x_label(scenario),
            "config",
            "IOPS",
            "p99 ms",
            "hit",
            "SSD B/hit",
            "promo MB",
            "flush MB",
            "evicted",
            "around",
            "agent wait ms"
        );
        for x in &xs {
            for config in configs(steps, scenario) {
                let cell = cell(steps, scenario, &config, *x);
                if cell.is_empty() {
                    continue;
                }
                let iops = median_of(&cell, |s| s.iops);
                let hit = median_of(&cell, |s| s.hit_ratio.unwrap_or(f64::NAN));
                let agent_wait_ms = cell
                    .iter()
                    .map(|s| s.agent_wait_us_max as f64 / 1000.0)
                    .fold(0.0, f64::max);
                let over: u64 = cell
                    .iter()
                    .map(|s| s.agent_waits_over_100ms)
                    .max()
                    .unwrap_or(0);
                println!(
                    "{:>11} {:<10} {:>18} {:>9.1} {:>7} {:>11} {:>10.1} {:>10.1} {:>8.0} {:>9.0} {:>14}",
                    format!("{x}"),
                    config,
                    format!("{iops:.0}{}", spread(&cell, |s| s.iops)),
                    median_of(&cell, |s| s.latency_us_p99) / 1000.0,
                    if hit.is_nan() { "-".to_string() } else { format!("{hit:.3}") },
                    {
                        let per_hit = median_of(&cell, ssd_bytes_per_hit);
                        if per_hit.is_nan() { "-".to_string() } else { format!("{per_hit:.0}") }
                    },
                    median_of(&cell, |s| s.promoted_bytes as f64) / 1e6,
                    median_of(&cell, |s| s.flushed_bytes as f64) / 1e6,
                    median_of(&cell, |s| s.evictions as f64),
                    median_of(&cell, |s| s.writes_around_full as f64),
                    if config == "ceph" || config == "predictive" {
                        format!("{agent_wait_ms:.1} ({over} >100)")
                    } else {
                        "-".to_string()
                    },
                );
            }
        }
        ratios(steps, scenario, &xs);
    }
}

fn ratios(steps: &[Step], scenario: &str, xs: &[f64]) {
    let iops = |config: &str, x: f64| median_of(&cell(steps, scenario, config, x), |s| s.iops);
    let ratio = |a: f64, b: f64| {
        if a.is_nan() || b.is_nan() || b == 0.0 {
            "-".to_string()
        } else {
            format!("{:.2}x", a / b)
        }
    };
    match scenario {
        "ramp" | "uniform" => {
            let Some(x) = xs.last() else { return };
            let predictive = iops("predictive", *x);
            println!(
                "at {x} clients, predictive: {} no tier, {} the ceph tier, {} all-NVMe; SSD bytes written per hit {} the ceph tier's",
                ratio(predictive, iops("none", *x)),
                ratio(predictive, iops("ceph", *x)),
                ratio(predictive, iops("nvme", *x)),
                ratio(
                    median_of(&cell(steps, scenario, "predictive", *x), ssd_bytes_per_hit),
                    median_of(&cell(steps, scenario, "ceph", *x), ssd_bytes_per_hit)
                ),
            );
        }
        "size" => {
            for x in xs {
                let hit = |config: &str| {
                    median_of(&cell(steps, scenario, config, *x), |s| {
                        s.hit_ratio.unwrap_or(f64::NAN)
                    })
                };
                println!(
                    "cache share {x}: hit ratio predictive {:.3} vs ceph {:.3} ({:+.3})",
                    hit("predictive"),
                    hit("ceph"),
                    hit("predictive") - hit("ceph")
                );
            }
        }
        _ => {}
    }
}

fn series(
    steps: &[Step],
    scenario: &str,
    value: impl Fn(&Step) -> f64 + Copy,
) -> Vec<(String, Vec<(f64, f64)>)> {
    configs(steps, scenario)
        .into_iter()
        .map(|config| {
            let points = xs(steps, scenario)
                .into_iter()
                .filter_map(|x| {
                    let cell = cell(steps, scenario, &config, x);
                    (!cell.is_empty()).then(|| (x, median_of(&cell, value)))
                })
                .collect();
            (config, points)
        })
        .collect()
}

fn sibling(path: &Path, suffix: &str) -> std::path::PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "tier".into());
    path.with_file_name(format!("{stem}-{suffix}.svg"))
}

/// The ramp's IOPS at `path`; its p99, the threshold and size sweeps beside it.
pub fn write_svgs(steps: &[Step], path: &Path) -> Result<()> {
    let figures: Vec<(std::path::PathBuf, String)> = vec![
        (
            path.to_path_buf(),
            sim::report::svg_lines(
                &series(steps, "ramp", |s| s.iops),
                "seed 003 live: 4 KiB IOPS against clients",
                "clients",
                "IOPS",
            ),
        ),
        (
            sibling(path, "p99"),
            sim::report::svg_lines(
                &series(steps, "ramp", |s| s.latency_us_p99 / 1000.0),
                "seed 003 live: p99 latency against clients",
                "clients",
                "p99 ms",
            ),
        ),
        (
            sibling(path, "threshold"),
            sim::report::svg_lines(
                &series(steps, "threshold", |s| s.iops),
                "seed 000 live: IOPS against the threshold H",
                "H (predicted requests per period)",
                "IOPS",
            ),
        ),
        (
            sibling(path, "size"),
            sim::report::svg_lines(
                &series(steps, "size", |s| s.hit_ratio.unwrap_or(f64::NAN)),
                "seed 000 live: hit ratio against cache size",
                "cache share of the working set",
                "hit ratio",
            ),
        ),
    ];
    for (file, svg) in figures {
        let scenario_missing = svg.matches("<polyline").count() == 0;
        if scenario_missing {
            continue;
        }
        std::fs::write(&file, svg).with_context(|| format!("writing {}", file.display()))?;
        eprintln!("wrote {}", file.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_even_and_odd_counts() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(Vec::new()).is_nan());
    }
}
