//! `sim`: the trace-driven cache simulator. Owns trace readers ([`trace`]), the run loop with its
//! metrics and SSD/HDD timing model ([`run`]), sweeps ([`sweep`]), reports (table, CSV, JSON,
//! SVG; [`report`]), issue 5's policy scorecard ([`compare`]), seed 003's multi-client workload generator ([`generator`]) and the seed
//! experiments ([`experiments`]).
//!
//! Invariants: virtual time only (request times come from the trace or from the request index);
//! a run is a pure function of the trace, the policy spec and the seed; the policy code is the
//! `policy` crate's, unchanged.

pub mod compare;
pub mod experiments;
pub mod generator;
pub mod report;
pub mod run;
pub mod sweep;
pub mod trace;

pub use run::{replay, simulate, Metrics, RunOptions, RunResult, Timing};
pub use sweep::{CacheSize, SweepPlan};
pub use trace::{load, Format, Mapping, Trace};

use anyhow::{bail, Result};

/// Parses a byte count: `4096`, `4K`, `4KiB`, `4M`, `1.5G`, `2T` (powers of 1024). A count that
/// is not a whole number of bytes (`1.5`, `1.1K`) is refused rather than rounded.
pub fn parse_bytes(text: &str) -> Result<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| anyhow::anyhow!("bad size `{text}`"))?;
    let multiplier = match unit
        .trim()
        .to_ascii_lowercase()
        .trim_end_matches("ib")
        .trim_end_matches('b')
    {
        "" => 1u64,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        "t" => 1 << 40,
        _ => bail!("bad size unit in `{text}`"),
    };
    let bytes = value * multiplier as f64;
    if bytes.fract() != 0.0 || bytes >= u64::MAX as f64 {
        bail!("`{text}` is not a whole number of bytes below 2^64");
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    #[test]
    fn byte_sizes_parse() {
        assert_eq!(super::parse_bytes("4K").ok(), Some(4096));
        assert_eq!(super::parse_bytes("4MiB").ok(), Some(4 << 20));
        assert_eq!(super::parse_bytes("1.5G").ok(), Some(3 << 29));
        assert_eq!(super::parse_bytes("512").ok(), Some(512));
        assert!(super::parse_bytes("3 parsecs").is_err());
        assert!(super::parse_bytes("1.5").is_err());
        assert!(super::parse_bytes("1.1K").is_err());
    }
}
