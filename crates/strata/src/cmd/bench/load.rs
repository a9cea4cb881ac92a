//! The load generator shared by `strata bench cluster` and `strata bench s3`: a phase runs C
//! concurrent tasks doing numbered operations until a deadline (or an op count), records every
//! operation's latency, and becomes a [`Row`]; the rows of every system measured in one run
//! print as one table with the ratios of strata to each peer.
//!
//! Phases are time-bounded like `rados bench` (`SECS write`, `SECS rand`), so the strata and
//! Ceph figures come from the same rule. Progress goes to stderr, the table to stdout.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::Serialize;

/// When a phase stops.
#[derive(Clone, Copy, Debug)]
pub struct Limit {
    /// Wall seconds.
    pub duration_s: f64,
    /// At most this many operations (smoke tests); `None`: only the duration counts.
    pub ops_max: Option<u64>,
}

/// One measured (system, object size, operation).
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Who was measured: `strata`, `ceph (rados bench)`, `fio`, `radosgw`...
    pub system: String,
    /// Object (or block) size.
    pub size_bytes: u64,
    /// `write`, `read`, `PUT`, `GET`.
    pub op: String,
    /// Operations completed.
    pub ops: u64,
    /// Wall time of the phase.
    pub elapsed_s: f64,
    /// Mean latency.
    pub latency_ms_mean: f64,
    /// Median latency, when the tool reports it (rados bench does not).
    pub latency_ms_p50: Option<f64>,
    /// 99th percentile latency, when the tool reports it.
    pub latency_ms_p99: Option<f64>,
}

impl Row {
    pub fn ops_per_s(&self) -> f64 {
        if self.elapsed_s > 0.0 {
            self.ops as f64 / self.elapsed_s
        } else {
            0.0
        }
    }

    /// Decimal megabytes (10^6) per second, for every system alike.
    pub fn mb_per_s(&self) -> f64 {
        self.ops_per_s() * self.size_bytes as f64 / 1e6
    }
}

/// Latencies of one phase, in microseconds.
pub struct Phase {
    pub latencies_us: Vec<u64>,
    pub elapsed: Duration,
}

impl Phase {
    /// The phase as a table row.
    pub fn row(mut self, system: &str, size_bytes: u64, op: &str) -> Row {
        self.latencies_us.sort_unstable();
        let ops = self.latencies_us.len() as u64;
        let percentile_ms = |fraction: f64| {
            let index = ((ops as f64 * fraction) as usize).min(self.latencies_us.len().max(1) - 1);
            self.latencies_us.get(index).map(|&us| us as f64 / 1000.0)
        };
        let sum_us: u64 = self.latencies_us.iter().sum();
        Row {
            system: system.to_string(),
            size_bytes,
            op: op.to_string(),
            ops,
            elapsed_s: self.elapsed.as_secs_f64(),
            latency_ms_mean: sum_us as f64 / ops.max(1) as f64 / 1000.0,
            latency_ms_p50: percentile_ms(0.5),
            latency_ms_p99: percentile_ms(0.99),
        }
    }
}

/// A spinner on stderr showing the ops done so far and the rate.
fn progress(label: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "  {spinner} {prefix:<28} {pos:>9} ops {per_sec:>14} {elapsed}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    bar.set_prefix(label.to_string());
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// Runs `concurrency` tasks; each repeatedly takes the next operation number and awaits
/// `operation(worker, number)` until the limit. The first error stops the phase and is
/// returned (a benchmark that hides failures measures nothing).
pub async fn run_phase<F, Fut>(
    label: &str,
    concurrency: usize,
    limit: Limit,
    operation: F,
) -> Result<Phase>
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<()>> + Send,
{
    let operation = Arc::new(operation);
    let next = Arc::new(AtomicU64::new(0));
    let bar = progress(label);
    let started = Instant::now();
    let deadline = started
        + Duration::try_from_secs_f64(limit.duration_s)
            .map_err(|e| anyhow::anyhow!("phase length {} s: {e}", limit.duration_s))?;
    let ops_max = limit.ops_max.unwrap_or(u64::MAX);
    let mut workers = Vec::with_capacity(concurrency);
    for worker in 0..concurrency.max(1) {
        let operation = Arc::clone(&operation);
        let next = Arc::clone(&next);
        let bar = bar.clone();
        workers.push(tokio::spawn(async move {
            let mut latencies_us = Vec::new();
            while Instant::now() < deadline {
                let number = next.fetch_add(1, Ordering::Relaxed);
                if number >= ops_max {
                    break;
                }
                let begun = Instant::now();
                operation(worker, number).await?;
                latencies_us.push(begun.elapsed().as_micros() as u64);
                bar.inc(1);
            }
            anyhow::Ok(latencies_us)
        }));
    }
    let mut latencies_us = Vec::new();
    let mut failure = None;
    for worker in workers {
        match worker.await {
            Ok(Ok(done)) => latencies_us.extend(done),
            Ok(Err(error)) => failure = failure.or(Some(error)),
            Err(error) => failure = failure.or(Some(error.into())),
        }
    }
    let elapsed = started.elapsed();
    bar.finish_and_clear();
    if let Some(error) = failure {
        return Err(error.context(format!("{label} failed")));
    }
    Ok(Phase {
        latencies_us,
        elapsed,
    })
}

/// Whether `seconds` is a usable phase length: positive, finite, at most 10^6.
pub fn valid_seconds(seconds: f64) -> bool {
    seconds > 0.0 && seconds <= 1e6
}

/// `4K`, `4M`, `1536`: the size as the table shows it.
pub fn size_label(size_bytes: u64) -> String {
    if size_bytes >= 1 << 20 && size_bytes.is_multiple_of(1 << 20) {
        format!("{}M", size_bytes >> 20)
    } else if size_bytes >= 1 << 10 && size_bytes.is_multiple_of(1 << 10) {
        format!("{}K", size_bytes >> 10)
    } else {
        size_bytes.to_string()
    }
}

/// Parses `4K`, `4k`, `4KiB`, `4M`, `1G` or a byte count (binary units).
pub fn parse_size(text: &str) -> Result<u64> {
    let trimmed = text.trim();
    let digits_end = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (digits, unit) = trimmed.split_at(digits_end);
    let number: u64 = digits
        .parse()
        .map_err(|_| anyhow::anyhow!("size {text:?}: expected a number with K, M or G"))?;
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => anyhow::bail!("size {text:?}: unknown unit {unit:?} (K, M or G)"),
    };
    let bytes = number
        .checked_mul(1 << shift)
        .filter(|&b| b > 0)
        .ok_or_else(|| anyhow::anyhow!("size {text:?} must be between 1 byte and 2^64"))?;
    Ok(bytes)
}

/// The 1, 5 and 15 minute load averages (the machine is shared: every table says how busy
/// it was).
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "unknown".into())
}

/// CPU time the hypervisor gave other guests (`steal` in /proc/stat) since `start`, as a
/// share of all CPU time: on a shared virtual machine a run with much steal measures the
/// neighbours as much as the system, so every table says how much there was.
pub struct StealMeter {
    start: Option<(u64, u64)>,
}

impl StealMeter {
    pub fn start() -> Self {
        Self { start: cpu_times() }
    }

    /// "12.3%", or "unknown" without /proc/stat.
    pub fn percent(&self) -> String {
        match (self.start, cpu_times()) {
            (Some((steal_start, total_start)), Some((steal, total))) if total > total_start => {
                let share = (steal - steal_start) as f64 / (total - total_start) as f64;
                format!("{:.1}%", share * 100.0)
            }
            _ => "unknown".into(),
        }
    }
}

/// (steal, total) jiffies of all CPUs from /proc/stat's `cpu` line.
fn cpu_times() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().find(|line| line.starts_with("cpu "))?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|field| field.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice, inside user/nice]
    let steal = *fields.get(7)?;
    let total = fields.iter().take(8).sum();
    Some((steal, total))
}

fn optional_ms(value: Option<f64>) -> String {
    value.map_or_else(|| "-".into(), |ms| format!("{ms:.2}"))
}

/// Prints the table: one line per row, grouped by (size, op) in the order first seen; the
/// strata row of each group carries `strata/<peer>` ops/s ratios for every peer in `peers`
/// (`(column title, system name)`).
pub fn print_table(rows: &[Row], peers: &[(&str, &str)]) {
    let mut header = format!(
        "{:<6} {:<6} {:<22} {:>10} {:>9} {:>9} {:>9} {:>9} {:>8}",
        "size", "op", "system", "ops/s", "MB/s", "mean ms", "p50 ms", "p99 ms", "ops"
    );
    for (title, _) in peers {
        header.push_str(&format!(" {title:>12}"));
    }
    println!("{header}");
    let mut groups: Vec<(u64, String)> = Vec::new();
    for row in rows {
        let key = (row.size_bytes, row.op.clone());
        if !groups.contains(&key) {
            groups.push(key);
        }
    }
    for (size_bytes, op) in &groups {
        let group: Vec<&Row> = rows
            .iter()
            .filter(|r| r.size_bytes == *size_bytes && &r.op == op)
            .collect();
        let strata = group.iter().find(|r| r.system == "strata");
        for row in &group {
            let mut line = format!(
                "{:<6} {:<6} {:<22} {:>10.0} {:>9.1} {:>9.2} {:>9} {:>9} {:>8}",
                size_label(row.size_bytes),
                row.op,
                row.system,
                row.ops_per_s(),
                row.mb_per_s(),
                row.latency_ms_mean,
                optional_ms(row.latency_ms_p50),
                optional_ms(row.latency_ms_p99),
                row.ops
            );
            if row.system == "strata" {
                for (_, peer) in peers {
                    let ratio = strata
                        .zip(group.iter().find(|r| r.system == *peer))
                        .and_then(|(ours, theirs)| {
                            (theirs.ops_per_s() > 0.0)
                                .then(|| ours.ops_per_s() / theirs.ops_per_s())
                        });
                    line.push_str(&format!(
                        " {:>12}",
                        ratio.map_or_else(|| "-".into(), |r| format!("{r:.2}x"))
                    ));
                }
            }
            println!("{line}");
        }
    }
}

/// Writes the rows and the run's settings as JSON.
pub fn write_json(path: &std::path::Path, settings: serde_json::Value, rows: &[Row]) -> Result<()> {
    let document = serde_json::json!({
        "settings": settings,
        "load_average_end": load_average(),
        "rows": rows,
    });
    std::fs::write(path, serde_json::to_vec_pretty(&document)?)
        .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))
}

/// What both object benchmarks (`cluster`, `s3`) set up before measuring: checked settings,
/// parsed sizes, a temporary directory under `dir` (removed when dropped) and a runtime.
pub struct Setup {
    pub sizes_bytes: Vec<u64>,
    pub temp: tempfile::TempDir,
    pub runtime: tokio::runtime::Runtime,
    /// The cluster should poll while busy (`cluster::runtime`).
    pub poll_while_busy: bool,
}

/// Checks the shared flags, creates the run's temporary directory and runtime, and prints the
/// settings line on stderr (`name` is the subcommand: "cluster" or "s3").
pub fn setup(
    name: &str,
    sizes: &[String],
    concurrency: usize,
    replicas: u32,
    seconds: f64,
    dir: &std::path::Path,
    poll_while_busy: bool,
) -> Result<Setup> {
    if replicas == 0 || concurrency == 0 || !valid_seconds(seconds) {
        bail!("--replicas and --concurrency must be > 0, --seconds in (0, 1e6]");
    }
    let sizes_bytes = sizes
        .iter()
        .map(|s| parse_size(s))
        .collect::<Result<Vec<u64>>>()?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let parent = dir
        .canonicalize()
        .with_context(|| format!("resolving {}", dir.display()))?;
    let temp = tempfile::Builder::new()
        .prefix(&format!("strata-bench-{name}-"))
        .tempdir_in(&parent)
        .with_context(|| format!("temporary directory under {}", dir.display()))?;
    // The runtime `strata serve` would use on this data directory's device.
    let serving = cluster::runtime::serving_runtime(temp.path(), poll_while_busy)?;
    let layout = match (&serving.worker_cpus, poll_while_busy) {
        (Some(cpus), _) => format!("runtime workers on CPUs {cpus:?}, polling while busy"),
        (None, true) => "tokio's default runtime (no single interrupt CPU to keep off)".into(),
        (None, false) => "tokio's default runtime".into(),
    };
    let poll_while_busy = serving.poll_while_busy();
    let runtime = serving.runtime;
    eprintln!(
        "strata bench {name}: sizes {}, concurrency {concurrency}, replicas {replicas}, {seconds} s per phase, data in {} (load {}); {layout}",
        sizes.join(","),
        temp.path().display(),
        load_average()
    );
    Ok(Setup {
        sizes_bytes,
        temp,
        runtime,
        poll_while_busy,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steal_is_a_share_of_cpu_time() {
        let (steal, total) = cpu_times().expect("/proc/stat on Linux");
        assert!(steal <= total, "steal {steal} of {total}");
        let meter = StealMeter::start();
        let spin = std::time::Instant::now();
        while spin.elapsed() < std::time::Duration::from_millis(60) {}
        let percent = meter.percent();
        let value: f64 = percent
            .strip_suffix('%')
            .and_then(|number| number.parse().ok())
            .unwrap_or_else(|| panic!("{percent}"));
        assert!((0.0..=100.0).contains(&value), "{percent}");
    }

    #[test]
    fn sizes_parse_and_print() {
        assert_eq!(parse_size("4K").unwrap(), 4096);
        assert_eq!(parse_size("4MiB").unwrap(), 4 << 20);
        assert_eq!(parse_size("100").unwrap(), 100);
        assert!(parse_size("0").is_err());
        assert!(parse_size("4X").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("99999999999G").is_err());
        assert_eq!(size_label(4096), "4K");
        assert_eq!(size_label(4 << 20), "4M");
        assert_eq!(size_label(1000), "1000");
        assert!(valid_seconds(0.5));
        assert!(!valid_seconds(0.0));
        assert!(!valid_seconds(f64::NAN));
        assert!(!valid_seconds(f64::INFINITY));
    }

    #[test]
    fn a_row_summarizes_latencies() {
        let phase = Phase {
            latencies_us: (1..=100).rev().map(|ms| ms * 1000).collect(),
            elapsed: Duration::from_secs(2),
        };
        let row = phase.row("strata", 4096, "write");
        assert_eq!(row.ops, 100);
        assert!((row.ops_per_s() - 50.0).abs() < 1e-9);
        assert_eq!(row.latency_ms_p50, Some(51.0));
        assert_eq!(row.latency_ms_p99, Some(100.0));
        assert!((row.latency_ms_mean - 50.5).abs() < 1e-9);
    }

    #[test]
    fn an_empty_phase_has_no_percentiles_and_no_division_by_zero() {
        let phase = Phase {
            latencies_us: Vec::new(),
            elapsed: Duration::ZERO,
        };
        let row = phase.row("strata", 4096, "read");
        assert_eq!(row.ops_per_s(), 0.0);
        assert_eq!(row.latency_ms_p50, None);
    }
}
