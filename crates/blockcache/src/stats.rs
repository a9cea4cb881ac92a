//! Statistics in the manner of `casadm -P`: usage, request classes, blocks, errors.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

/// Counters bumped by the executor.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub read_hits: AtomicU64,
    pub read_partial_misses: AtomicU64,
    pub read_full_misses: AtomicU64,
    pub read_pass_through: AtomicU64,
    pub write_hits: AtomicU64,
    pub write_partial_misses: AtomicU64,
    pub write_full_misses: AtomicU64,
    pub write_pass_through: AtomicU64,
    pub core_read_bytes: AtomicU64,
    pub core_write_bytes: AtomicU64,
    pub cache_read_bytes: AtomicU64,
    pub cache_write_bytes: AtomicU64,
    pub exported_read_bytes: AtomicU64,
    pub exported_write_bytes: AtomicU64,
    pub core_errors: AtomicU64,
    pub cache_errors: AtomicU64,
    pub cleaned_lines: AtomicU64,
}

pub(crate) fn add(counter: &AtomicU64, value: u64) {
    counter.fetch_add(value, Ordering::Relaxed);
}

fn get(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

/// Requests of one direction by outcome.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RequestStats {
    /// Every line was cached.
    pub hits: u64,
    /// Some lines were cached.
    pub partial_misses: u64,
    /// No line was cached.
    pub full_misses: u64,
    /// Went around the cache (mode pt, cut-off, class not cached).
    pub pass_through: u64,
}

impl RequestStats {
    /// All requests.
    pub fn total(&self) -> u64 {
        self.hits + self.partial_misses + self.full_misses + self.pass_through
    }
}

/// A snapshot of a cache's statistics.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CacheStats {
    /// Cache mode.
    pub mode: String,
    /// Cleaning policy.
    pub cleaning: String,
    /// Line size in bytes.
    pub line_size_bytes: u64,
    /// Lines in the cache.
    pub lines: u64,
    /// Lines holding data.
    pub occupied_lines: u64,
    /// Free lines.
    pub free_lines: u64,
    /// Lines equal to the core.
    pub clean_lines: u64,
    /// Lines newer than the core.
    pub dirty_lines: u64,
    /// Read requests.
    pub reads: RequestStats,
    /// Write requests.
    pub writes: RequestStats,
    /// Bytes read from / written to the core device.
    pub core_read_bytes: u64,
    /// See `core_read_bytes`.
    pub core_write_bytes: u64,
    /// Bytes read from / written to the cache device (data lines only).
    pub cache_read_bytes: u64,
    /// See `cache_read_bytes`.
    pub cache_write_bytes: u64,
    /// Bytes read from / written to the exported device.
    pub exported_read_bytes: u64,
    /// See `exported_read_bytes`.
    pub exported_write_bytes: u64,
    /// Failed core / cache device operations.
    pub core_errors: u64,
    /// See `core_errors`.
    pub cache_errors: u64,
    /// Dirty lines flushed to the core so far.
    pub cleaned_lines: u64,
}

impl Counters {
    pub(crate) fn fill(&self, stats: &mut CacheStats) {
        stats.reads = RequestStats {
            hits: get(&self.read_hits),
            partial_misses: get(&self.read_partial_misses),
            full_misses: get(&self.read_full_misses),
            pass_through: get(&self.read_pass_through),
        };
        stats.writes = RequestStats {
            hits: get(&self.write_hits),
            partial_misses: get(&self.write_partial_misses),
            full_misses: get(&self.write_full_misses),
            pass_through: get(&self.write_pass_through),
        };
        stats.core_read_bytes = get(&self.core_read_bytes);
        stats.core_write_bytes = get(&self.core_write_bytes);
        stats.cache_read_bytes = get(&self.cache_read_bytes);
        stats.cache_write_bytes = get(&self.cache_write_bytes);
        stats.exported_read_bytes = get(&self.exported_read_bytes);
        stats.exported_write_bytes = get(&self.exported_write_bytes);
        stats.core_errors = get(&self.core_errors);
        stats.cache_errors = get(&self.cache_errors);
        stats.cleaned_lines = get(&self.cleaned_lines);
    }
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

impl CacheStats {
    /// casadm-like tables; block counts are in 4 KiB blocks.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        let line = self.line_size_bytes / 1024;
        let _ = writeln!(out, "Cache mode              {}", self.mode);
        let _ = writeln!(out, "Cleaning policy         {}", self.cleaning);
        let _ = writeln!(out, "Cache line size         {line} KiB");
        let _ = writeln!(out, "\n Usage statistics | Count | % | Units");
        for (name, value) in [
            ("Occupancy", self.occupied_lines),
            ("Free", self.free_lines),
            ("Clean", self.clean_lines),
            ("Dirty", self.dirty_lines),
        ] {
            let _ = writeln!(
                out,
                " {name:<16} | {value:>10} | {:>6.1} | lines",
                percent(value, self.lines)
            );
        }
        for (label, requests) in [("Read", &self.reads), ("Write", &self.writes)] {
            let _ = writeln!(out, "\n {label} requests | Count | % | Units");
            let total = requests.total();
            for (name, value) in [
                ("hits", requests.hits),
                ("partial misses", requests.partial_misses),
                ("full misses", requests.full_misses),
                ("pass-through", requests.pass_through),
                ("total", total),
            ] {
                let _ = writeln!(
                    out,
                    " {name:<16} | {value:>10} | {:>6.1} | requests",
                    percent(value, total)
                );
            }
        }
        let _ = writeln!(out, "\n Block statistics | Reads | Writes | Units");
        for (name, read, write) in [
            ("Core", self.core_read_bytes, self.core_write_bytes),
            ("Cache", self.cache_read_bytes, self.cache_write_bytes),
            (
                "Exported object",
                self.exported_read_bytes,
                self.exported_write_bytes,
            ),
        ] {
            let _ = writeln!(
                out,
                " {name:<16} | {:>10} | {:>10} | 4KiB blocks",
                read / 4096,
                write / 4096
            );
        }
        let _ = writeln!(out, "\n Error statistics | Count");
        let _ = writeln!(out, " Core             | {:>10}", self.core_errors);
        let _ = writeln!(out, " Cache            | {:>10}", self.cache_errors);
        let _ = writeln!(out, " Cleaned lines    | {:>10}", self.cleaned_lines);
        out
    }
}
