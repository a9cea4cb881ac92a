//! Reports of a sweep: an aligned text table, CSV, JSON and an SVG plot of miss ratio against
//! cache size (one line per policy).

use crate::run::RunResult;
use std::fmt::Write as _;

fn fmt_opt(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_string(), |v| format!("{v}"))
}

/// An aligned text table, one row per run.
pub fn table(results: &[RunResult]) -> String {
    let header = [
        "trace",
        "policy",
        "objects",
        "H",
        "a",
        "requests",
        "miss",
        "byte_miss",
        "cache_writes",
        "writes/uniq",
        "hdd_ops",
        "hdd_busy_s",
        "rps",
    ];
    let rows: Vec<Vec<String>> = results
        .iter()
        .map(|r| {
            vec![
                r.trace.clone(),
                r.policy.clone(),
                r.cache_size_objects.to_string(),
                fmt_opt(r.threshold),
                fmt_opt(r.smoothing),
                r.requests.to_string(),
                format!("{:.4}", r.miss_ratio),
                format!("{:.4}", r.byte_miss_ratio),
                r.cache_writes.to_string(),
                format!("{:.3}", r.cache_writes_per_unique),
                (r.hdd_reads + r.hdd_writes).to_string(),
                format!("{:.1}", r.hdd_busy_s),
                format!("{:.0}", r.throughput_rps),
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].len())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    let line = |cells: Vec<&str>, out: &mut String| {
        let text: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:>w$}"))
            .collect();
        let _ = writeln!(out, "{}", text.join("  ").trim_end());
    };
    line(header.to_vec(), &mut out);
    for row in &rows {
        line(row.iter().map(String::as_str).collect(), &mut out);
    }
    // Evictions a policy forced outside its own rules (Ceph's tier at the pool's hard
    // capacity, which Ceph's agent never does) are said under the table.
    for r in results {
        if let Some(&forced) = r
            .policy_counters
            .get("forced_evictions")
            .filter(|&&n| n > 0)
        {
            let evicted = r.policy_counters.get("evicted").copied().unwrap_or(0);
            let _ = writeln!(
                out,
                "note: {} at {} objects: {forced} of {evicted} evictions forced by the pool's hard capacity (not Ceph's behaviour)",
                r.policy, r.cache_size_objects
            );
        }
    }
    out
}

/// The columns of [`csv`].
pub const CSV_HEADER: &str = "trace,policy,cache_size_objects,threshold,smoothing,requests,miss_ratio,byte_miss_ratio,cache_writes,cache_write_bytes,ssd_writes,hdd_reads,hdd_writes,hdd_busy_s,ssd_busy_s,throughput_rps";

/// CSV with a header line.
pub fn csv(results: &[RunResult]) -> String {
    let mut out = format!("{CSV_HEADER}\n");
    for r in results {
        let _ = writeln!(out, "{}", csv_row(r));
    }
    out
}

/// One run as a [`csv`] row (no line end).
pub fn csv_row(r: &RunResult) -> String {
    format!(
        "{},{},{},{},{},{},{:.6},{:.6},{},{},{},{},{},{:.3},{:.3},{:.1}",
        csv_field(&r.trace),
        csv_field(&r.policy),
        r.cache_size_objects,
        r.threshold.map_or(String::new(), |v| v.to_string()),
        r.smoothing.map_or(String::new(), |v| v.to_string()),
        r.requests,
        r.miss_ratio,
        r.byte_miss_ratio,
        r.cache_writes,
        r.cache_write_bytes,
        r.ssd_writes,
        r.hdd_reads,
        r.hdd_writes,
        r.hdd_busy_s,
        r.ssd_busy_s,
        r.throughput_rps
    )
}

/// Per-period metrics as CSV (`--per-period --csv`): one row per run and period that had
/// requests, the run's identifying columns first. A separate layout from [`csv`]'s, so that
/// the output stays one valid CSV (the per-period text tables used to follow the CSV).
pub fn periods_csv(results: &[RunResult]) -> String {
    let mut out = String::from(
        "trace,policy,cache_size_objects,threshold,smoothing,period,requests,miss_ratio,cache_writes,hdd_ops,hdd_busy_s,throughput_rps\n",
    );
    for r in results {
        for p in &r.periods {
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{},{:.6},{},{},{:.3},{:.1}",
                csv_field(&r.trace),
                csv_field(&r.policy),
                r.cache_size_objects,
                r.threshold.map_or(String::new(), |v| v.to_string()),
                r.smoothing.map_or(String::new(), |v| v.to_string()),
                p.period,
                p.requests,
                p.miss_ratio,
                p.cache_writes,
                p.hdd_ops,
                p.hdd_busy_s,
                p.throughput_rps
            );
        }
    }
    out
}

/// A CSV field, quoted when it holds a comma, a quote or a line end (trace file names may).
fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// JSON array of runs.
pub fn json(results: &[RunResult]) -> anyhow::Result<String> {
    Ok(serde_json::to_string_pretty(results)?)
}

const COLORS: [&str; 12] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#000000", "#aa3377",
];

/// An SVG line plot of `y(result)` against cache size, one line per policy label.
pub fn svg(
    results: &[RunResult],
    title: &str,
    y_label: &str,
    y: impl Fn(&RunResult) -> f64,
) -> String {
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for r in results {
        let label = match r.threshold {
            Some(h) => format!("{} H={h} a={}", r.policy, r.smoothing.unwrap_or(0.0)),
            None => r.policy.clone(),
        };
        let point = (r.cache_size_objects as f64, y(r));
        match series.iter_mut().find(|(l, _)| *l == label) {
            Some((_, points)) => points.push(point),
            None => series.push((label, vec![point])),
        }
    }
    svg_lines(&series, title, "cache size (objects)", y_label)
}

/// Text for SVG: `&`, `<`, `>` and quotes escaped (a trace named `msr&<test>.csv` made the
/// plot invalid XML).
fn xml(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}

/// An SVG line plot of labelled series of `(x, y)` points.
pub fn svg_lines(
    series: &[(String, Vec<(f64, f64)>)],
    title: &str,
    x_label: &str,
    y_label: &str,
) -> String {
    let (width, height, margin) = (720.0, 440.0, 60.0);
    let finite = |v: &f64| v.is_finite();
    let xs = series.iter().flat_map(|(_, p)| p.iter().map(|q| q.0));
    let ys = series.iter().flat_map(|(_, p)| p.iter().map(|q| q.1));
    let (x_min, x_max) = xs
        .filter(finite)
        .fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(x), b.max(x)));
    let (y_min, y_max) = ys
        .filter(finite)
        .fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)));
    let (y_min, y_max) = if y_max > y_min {
        (y_min, y_max)
    } else if y_max == y_min {
        (y_min - 0.5, y_min + 0.5)
    } else {
        (0.0, 1.0)
    };
    let (x_min, x_max) = if x_max > x_min {
        (x_min, x_max)
    } else if x_max == x_min {
        (x_min - 1.0, x_min + 1.0)
    } else {
        (0.0, 1.0)
    };
    let px = |x: f64| margin + (x - x_min) / (x_max - x_min) * (width - 2.0 * margin - 140.0);
    let py = |v: f64| height - margin - (v - y_min) / (y_max - y_min) * (height - 2.0 * margin);
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(
        out,
        r#"<rect width="100%" height="100%" fill="white"/><text x="{}" y="20" font-size="14">{}</text>"#,
        margin,
        xml(title)
    );
    let _ = writeln!(
        out,
        r#"<line x1="{m}" y1="{b}" x2="{r}" y2="{b}" stroke="black"/><line x1="{m}" y1="{t}" x2="{m}" y2="{b}" stroke="black"/>"#,
        m = margin,
        b = height - margin,
        r = width - margin - 140.0,
        t = margin
    );
    for i in 0..=4 {
        let v = y_min + (y_max - y_min) * i as f64 / 4.0;
        let x = x_min + (x_max - x_min) * i as f64 / 4.0;
        let _ = writeln!(out, r#"<text x="5" y="{:.1}">{v:.3}</text>"#, py(v) + 4.0);
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{}">{x:.0}</text>"#,
            px(x) - 10.0,
            height - margin + 16.0
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}">{}</text>"#,
        width / 2.0 - 80.0,
        height - 12.0,
        xml(x_label)
    );
    let _ = writeln!(
        out,
        r#"<text x="5" y="{}">{}</text>"#,
        margin - 12.0,
        xml(y_label)
    );
    for (i, (label, points)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let points: Vec<(f64, f64)> = points
            .iter()
            .copied()
            .filter(|(x, v)| x.is_finite() && v.is_finite())
            .collect();
        let path: Vec<String> = points
            .iter()
            .map(|&(x, v)| format!("{:.1},{:.1}", px(x), py(v)))
            .collect();
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
            path.join(" ")
        );
        for &(x, v) in &points {
            let _ = writeln!(
                out,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{color}"/>"#,
                px(x),
                py(v)
            );
        }
        let ly = margin + 14.0 * i as f64;
        let _ = writeln!(
            out,
            r#"<rect x="{}" y="{}" width="10" height="10" fill="{color}"/><text x="{}" y="{}">{}</text>"#,
            width - 190.0,
            ly - 9.0,
            width - 175.0,
            ly,
            xml(label)
        );
    }
    out.push_str("</svg>\n");
    out
}

/// JSON of any serialisable value (used for experiment records).
pub fn json_value<T: serde::Serialize + ?Sized>(value: &T) -> anyhow::Result<String> {
    Ok(serde_json::to_string_pretty(value)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names from file names are escaped in SVG and quoted in CSV when they need it.
    #[test]
    fn names_are_escaped_for_svg_and_csv() {
        let series = vec![("lru & <co>".to_string(), vec![(1.0, 0.5), (2.0, 0.25)])];
        let svg = svg_lines(&series, "msr&<test>: miss", "x", "y");
        assert!(svg.contains("msr&amp;&lt;test&gt;: miss"), "{svg}");
        assert!(svg.contains("lru &amp; &lt;co&gt;"), "{svg}");
        assert!(!svg.contains("msr&<"), "{svg}");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("plain"), "plain");
    }
}
