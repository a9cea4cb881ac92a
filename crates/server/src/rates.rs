//! Client I/O, recovery and S3 rates over time, as `ceph -s` shows them under `io:` and the
//! dashboard draws them (issue 44).
//!
//! The admin endpoint samples cumulative counters every [`SAMPLE_PERIOD_MS`] and keeps the
//! last [`HISTORY_SAMPLES_MAX`] samples here; a rate is the difference of two samples over
//! their distance. Pure: the caller passes the time of each sample.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

/// Time between two samples, in ms.
pub const SAMPLE_PERIOD_MS: u64 = 2_000;
/// Samples kept (10 minutes at the default period).
pub const HISTORY_SAMPLES_MAX: usize = 300;
/// `ceph -s` rates are over the last few seconds: the window `status` reports, in ms.
pub const STATUS_WINDOW_MS: u64 = 10_000;

/// Cumulative counters at one moment (each only grows while the server runs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Counters {
    /// Object reads the OSDs served.
    pub read_ops: u64,
    /// Bytes of those reads.
    pub read_bytes: u64,
    /// Object writes the OSDs applied (each replica counts).
    pub write_ops: u64,
    /// Bytes of those writes.
    pub write_bytes: u64,
    /// Object copies recovery, backfill and repairs wrote.
    pub recovery_objects: u64,
    /// Bytes of those copies.
    pub recovery_bytes: u64,
    /// S3 requests answered.
    pub s3_requests: u64,
    /// S3 requests answered with a 5xx.
    pub s3_server_errors: u64,
    /// Sum of the S3 requests' latencies, in seconds.
    pub s3_latency_sum_s: f64,
}

/// Rates between two samples.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Rates {
    /// When the later sample was taken (Unix time, ms).
    pub at_ms: u64,
    /// Length of the interval, in seconds.
    pub interval_s: f64,
    /// Object reads per second.
    pub read_ops_per_s: f64,
    /// Bytes read per second.
    pub read_bytes_per_s: f64,
    /// Object writes per second (replicas included).
    pub write_ops_per_s: f64,
    /// Bytes written per second (replicas included).
    pub write_bytes_per_s: f64,
    /// Recovery copies per second.
    pub recovery_objects_per_s: f64,
    /// Recovery bytes per second.
    pub recovery_bytes_per_s: f64,
    /// S3 requests per second.
    pub s3_requests_per_s: f64,
    /// S3 5xx answers per second.
    pub s3_server_errors_per_s: f64,
    /// Mean latency of the S3 requests of the interval, in ms (0 without requests).
    pub s3_latency_ms_mean: f64,
}

impl Rates {
    /// The rates from `earlier` to `later`; `None` unless `later` is later.
    pub fn between(earlier: &Sample, later: &Sample) -> Option<Self> {
        if later.at_ms <= earlier.at_ms {
            return None;
        }
        let interval_s = (later.at_ms - earlier.at_ms) as f64 / 1000.0;
        let (a, b) = (&earlier.counters, &later.counters);
        let per_s = |before: u64, after: u64| after.saturating_sub(before) as f64 / interval_s;
        let requests = b.s3_requests.saturating_sub(a.s3_requests);
        Some(Self {
            at_ms: later.at_ms,
            interval_s,
            read_ops_per_s: per_s(a.read_ops, b.read_ops),
            read_bytes_per_s: per_s(a.read_bytes, b.read_bytes),
            write_ops_per_s: per_s(a.write_ops, b.write_ops),
            write_bytes_per_s: per_s(a.write_bytes, b.write_bytes),
            recovery_objects_per_s: per_s(a.recovery_objects, b.recovery_objects),
            recovery_bytes_per_s: per_s(a.recovery_bytes, b.recovery_bytes),
            s3_requests_per_s: per_s(a.s3_requests, b.s3_requests),
            s3_server_errors_per_s: per_s(a.s3_server_errors, b.s3_server_errors),
            s3_latency_ms_mean: if requests == 0 {
                0.0
            } else {
                1000.0 * (b.s3_latency_sum_s - a.s3_latency_sum_s).max(0.0) / requests as f64
            },
        })
    }
}

/// Counters and when they were read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Unix time, ms.
    pub at_ms: u64,
    /// The counters.
    pub counters: Counters,
}

/// The last samples, oldest first.
#[derive(Debug, Default)]
pub struct History {
    samples: VecDeque<Sample>,
}

impl History {
    /// Adds a sample, forgetting the oldest past [`HISTORY_SAMPLES_MAX`]. A sample not later
    /// than the last one (a clock stepped back) replaces the history: rates across it would
    /// mean nothing.
    pub fn push(&mut self, sample: Sample) {
        if self
            .samples
            .back()
            .is_some_and(|last| last.at_ms >= sample.at_ms)
        {
            self.samples.clear();
        }
        self.samples.push_back(sample);
        while self.samples.len() > HISTORY_SAMPLES_MAX {
            self.samples.pop_front();
        }
    }

    /// The rates over (about) the last `window_ms`: from the newest sample at least that old
    /// (the oldest one when none is) to the newest. `None` with fewer than two samples.
    pub fn recent(&self, window_ms: u64) -> Option<Rates> {
        let newest = self.samples.back()?;
        let start = self
            .samples
            .iter()
            .rev()
            .find(|s| newest.at_ms.saturating_sub(s.at_ms) >= window_ms)
            .or_else(|| self.samples.front())?;
        Rates::between(start, newest)
    }

    /// The rates between each pair of neighbouring samples, oldest first.
    pub fn series(&self) -> Vec<Rates> {
        self.samples
            .iter()
            .zip(self.samples.iter().skip(1))
            .filter_map(|(a, b)| Rates::between(a, b))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at_ms: u64, read_bytes: u64, s3_requests: u64, s3_latency_sum_s: f64) -> Sample {
        Sample {
            at_ms,
            counters: Counters {
                read_bytes,
                s3_requests,
                s3_latency_sum_s,
                ..Counters::default()
            },
        }
    }

    #[test]
    fn rates_are_differences_over_time() {
        let mut history = History::default();
        assert_eq!(history.recent(STATUS_WINDOW_MS), None);
        history.push(sample(1_000, 0, 0, 0.0));
        assert_eq!(history.recent(STATUS_WINDOW_MS), None, "one sample");
        history.push(sample(3_000, 4_000, 10, 0.05));
        let rates = history.recent(STATUS_WINDOW_MS).expect("two samples");
        assert_eq!(rates.interval_s, 2.0);
        assert_eq!(rates.read_bytes_per_s, 2_000.0);
        assert_eq!(rates.s3_requests_per_s, 5.0);
        assert!((rates.s3_latency_ms_mean - 5.0).abs() < 1e-9);
        assert_eq!(history.series().len(), 1);
    }

    #[test]
    fn the_window_starts_at_the_newest_sample_old_enough() {
        let mut history = History::default();
        for index in 0..20u64 {
            history.push(sample(index * 2_000, index * 100, 0, 0.0));
        }
        let rates = history.recent(10_000).expect("samples");
        assert_eq!(rates.interval_s, 10.0);
        assert_eq!(rates.read_bytes_per_s, 50.0);
    }

    #[test]
    fn history_is_bounded_and_survives_a_clock_step_back() {
        let mut history = History::default();
        for index in 0..(HISTORY_SAMPLES_MAX as u64 + 10) {
            history.push(sample(index * 1_000, index, 0, 0.0));
        }
        assert_eq!(history.series().len(), HISTORY_SAMPLES_MAX - 1);
        history.push(sample(5, 0, 0, 0.0));
        assert_eq!(history.series().len(), 0, "a step back starts over");
    }
}
