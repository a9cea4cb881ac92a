//! A hand-written SVG chart of per-OSD deviation from target, before and after balancing:
//! one bar per OSD (by OSD id), two panels sharing the y scale, axis labels and a zero line.

use std::fmt::Write as _;

use crate::analysis::Table;

const WIDTH: f64 = 1000.0;
const PANEL_HEIGHT: f64 = 260.0;
const MARGIN_LEFT: f64 = 70.0;
const MARGIN_RIGHT: f64 = 20.0;
const MARGIN_TOP: f64 = 40.0;
const GAP: f64 = 70.0;

/// SVG of `before` and `after` (e.g. the total tables), deviation = count - target in shards.
pub fn deviation_chart(title: &str, before: &Table, after: &Table) -> String {
    let limit = before
        .rows
        .iter()
        .chain(&after.rows)
        .map(|r| r.deviation().abs())
        .fold(1.0_f64, f64::max)
        .ceil();
    let height = MARGIN_TOP + 2.0 * PANEL_HEIGHT + GAP + 40.0;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="16">{}</text>"#,
        WIDTH / 2.0,
        escape(title)
    );
    let panels = [("before", before, "#c0504d"), ("after", after, "#4f81bd")];
    for (index, (label, table, color)) in panels.iter().enumerate() {
        let top = MARGIN_TOP + index as f64 * (PANEL_HEIGHT + GAP);
        panel(&mut svg, label, table, color, top, limit);
    }
    svg.push_str("</svg>\n");
    svg
}

fn panel(svg: &mut String, label: &str, table: &Table, color: &str, top: f64, limit: f64) {
    let plot_width = WIDTH - MARGIN_LEFT - MARGIN_RIGHT;
    let middle = top + PANEL_HEIGHT / 2.0;
    let scale = (PANEL_HEIGHT / 2.0) / limit;
    let n = table.rows.len().max(1) as f64;
    let bar = plot_width / n;
    let s = &table.summary;
    let _ = writeln!(
        svg,
        r#"<text x="{MARGIN_LEFT}" y="{}" font-size="13">{label}: min {} max {} stdev {:.2} max dev {:.2} ({:.1}%)</text>"#,
        top - 6.0,
        s.min,
        s.max,
        s.stdev,
        s.max_deviation,
        s.max_deviation_percent
    );
    // Axes, ticks and the zero line.
    let _ = writeln!(
        svg,
        r#"<line x1="{MARGIN_LEFT}" y1="{top}" x2="{MARGIN_LEFT}" y2="{}" stroke="black"/>"#,
        top + PANEL_HEIGHT
    );
    for tick in [-limit, -limit / 2.0, 0.0, limit / 2.0, limit] {
        let y = middle - tick * scale;
        let _ = writeln!(
            svg,
            r##"<line x1="{MARGIN_LEFT}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="{}"/><text x="{}" y="{:.1}" text-anchor="end">{tick:+.1}</text>"##,
            WIDTH - MARGIN_RIGHT,
            if tick == 0.0 { "black" } else { "#dddddd" },
            MARGIN_LEFT - 6.0,
            y + 4.0
        );
    }
    let _ = writeln!(
        svg,
        r#"<text transform="translate(18 {middle:.1}) rotate(-90)" text-anchor="middle">shards - target</text>"#
    );
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">OSD (by id)</text>"#,
        MARGIN_LEFT + plot_width / 2.0,
        top + PANEL_HEIGHT + 32.0
    );
    let label_every = (table.rows.len() / 20).max(1);
    for (i, row) in table.rows.iter().enumerate() {
        let deviation = row.deviation();
        let x = MARGIN_LEFT + i as f64 * bar;
        let (y, h) = if deviation >= 0.0 {
            (middle - deviation * scale, deviation * scale)
        } else {
            (middle, -deviation * scale)
        };
        let _ = writeln!(
            svg,
            r#"<rect x="{:.2}" y="{y:.2}" width="{:.2}" height="{h:.2}" fill="{color}"><title>osd.{} {} shards, target {:.2}</title></rect>"#,
            x + bar * 0.1,
            bar * 0.8,
            row.osd,
            row.count,
            row.target
        );
        if i % label_every == 0 {
            let _ = writeln!(
                svg,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="10">{}</text>"#,
                x + bar / 2.0,
                top + PANEL_HEIGHT + 14.0,
                row.osd
            );
        }
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
