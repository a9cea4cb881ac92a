//! A small log-bucket histogram (no dependency), for latencies in ns and queue depths.
//!
//! Values below 16 have a bucket each; above, every power of two is split into 8 buckets, so a
//! bucket's width is at most 1/8 of its lower bound (percentiles within 12.5%).

use std::sync::atomic::{AtomicU64, Ordering};

const EXACT: usize = 16;
const SUB_BITS: u32 = 3;
const SUB: usize = 1 << SUB_BITS;
/// Number of buckets: 16 exact, then 8 per power of two from 2^4 to 2^63.
pub const BUCKETS: usize = EXACT + (64 - 4) * SUB;

/// The bucket holding `value`.
pub fn bucket_of(value: u64) -> usize {
    if value < EXACT as u64 {
        return value as usize;
    }
    let msb = 63 - value.leading_zeros();
    let sub = ((value >> (msb - SUB_BITS)) as usize) & (SUB - 1);
    EXACT + (msb as usize - 4) * SUB + sub
}

/// The smallest value of bucket `index`.
pub fn bucket_lower(index: usize) -> u64 {
    if index < EXACT {
        return index as u64;
    }
    let msb = ((index - EXACT) / SUB) as u32 + 4;
    let sub = ((index - EXACT) % SUB) as u64;
    (1u64 << msb) | (sub << (msb - SUB_BITS))
}

/// The largest value of bucket `index`.
pub fn bucket_upper(index: usize) -> u64 {
    if index + 1 >= BUCKETS {
        return u64::MAX;
    }
    bucket_lower(index + 1) - 1
}

/// A histogram many threads record into without locks.
pub struct AtomicHistogram {
    counts: Box<[AtomicU64]>,
    sum: AtomicU64,
}

impl Default for AtomicHistogram {
    fn default() -> Self {
        Self {
            counts: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
        }
    }
}

impl std::fmt::Debug for AtomicHistogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.snapshot().fmt(f)
    }
}

impl AtomicHistogram {
    /// Adds one observation.
    pub fn record(&self, value: u64) {
        if let Some(count) = self.counts.get(bucket_of(value)) {
            count.fetch_add(1, Ordering::Relaxed);
        }
        self.sum.fetch_add(value, Ordering::Relaxed);
    }

    /// A consistent-enough copy (each bucket is read atomically, the set is not).
    pub fn snapshot(&self) -> Histogram {
        Histogram {
            counts: self
                .counts
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .collect(),
            sum: self.sum.load(Ordering::Relaxed),
        }
    }
}

/// A plain histogram: a snapshot, a per-period delta, or one filled by a single thread.
#[derive(Clone, PartialEq, Eq)]
pub struct Histogram {
    counts: Vec<u64>,
    sum: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self {
            counts: vec![0; BUCKETS],
            sum: 0,
        }
    }
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("count", &self.count())
            .field("mean", &self.mean())
            .field("p50", &self.percentile(0.5))
            .field("p99", &self.percentile(0.99))
            .field("max", &self.max())
            .finish()
    }
}

impl Histogram {
    /// Adds one observation.
    pub fn record(&mut self, value: u64) {
        if let Some(count) = self.counts.get_mut(bucket_of(value)) {
            *count += 1;
        }
        self.sum = self.sum.saturating_add(value);
    }

    /// Number of observations.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Sum of the observations.
    pub fn sum(&self) -> u64 {
        self.sum
    }

    /// Mean observation, 0 when empty.
    pub fn mean(&self) -> f64 {
        let count = self.count();
        if count == 0 {
            0.0
        } else {
            self.sum as f64 / count as f64
        }
    }

    /// The value below which a fraction `quantile` (0..=1) of observations lie: the midpoint of
    /// the bucket holding that rank. 0 when empty.
    pub fn percentile(&self, quantile: f64) -> u64 {
        let count = self.count();
        if count == 0 {
            return 0;
        }
        let rank = ((quantile.clamp(0.0, 1.0) * count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (index, bucket_count) in self.counts.iter().enumerate() {
            seen += bucket_count;
            if seen >= rank {
                let lower = bucket_lower(index);
                return lower + (bucket_upper(index) - lower) / 2;
            }
        }
        0
    }

    /// Upper bound of the highest non-empty bucket, 0 when empty.
    pub fn max(&self) -> u64 {
        self.counts
            .iter()
            .rposition(|&c| c > 0)
            .map_or(0, bucket_upper)
    }

    /// The observations made after `earlier` (a snapshot of the same histogram).
    pub fn since(&self, earlier: &Histogram) -> Histogram {
        Histogram {
            counts: self
                .counts
                .iter()
                .zip(&earlier.counts)
                .map(|(now, then)| now.saturating_sub(*then))
                .collect(),
            sum: self.sum.saturating_sub(earlier.sum),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_values_in_order() {
        let mut previous = 0;
        for index in 1..BUCKETS {
            let lower = bucket_lower(index);
            assert!(lower > previous, "bucket {index}");
            assert_eq!(bucket_of(lower), index);
            assert_eq!(bucket_of(bucket_upper(index - 1)), index - 1);
            previous = lower;
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn percentiles_are_within_an_eighth() {
        let mut histogram = Histogram::default();
        for value in 1..=10_000u64 {
            histogram.record(value * 1000);
        }
        let p50 = histogram.percentile(0.5) as f64;
        let p99 = histogram.percentile(0.99) as f64;
        assert!((p50 / 5_000_000.0 - 1.0).abs() < 0.125, "{p50}");
        assert!((p99 / 9_900_000.0 - 1.0).abs() < 0.125, "{p99}");
        assert_eq!(histogram.count(), 10_000);
        assert!((histogram.mean() - 5_000_500.0).abs() < 1.0);
    }

    #[test]
    fn delta_subtracts_an_earlier_snapshot() {
        let atomic = AtomicHistogram::default();
        atomic.record(3);
        let earlier = atomic.snapshot();
        atomic.record(100);
        let delta = atomic.snapshot().since(&earlier);
        assert_eq!(delta.count(), 1);
        assert_eq!(delta.sum(), 100);
        assert_eq!(Histogram::default().percentile(0.5), 0);
    }
}
