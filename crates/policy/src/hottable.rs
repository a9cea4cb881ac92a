//! Seed 000's storage selection: per-object request counts per period, a one-step exponential
//! smoothing forecast `S_t = a*y_{t-1} + (1-a)*S_{t-1}` (with `S_0 = 0`), and a hot table that an
//! object enters when its forecast is above `H` and leaves when it is below `H`. A request for a
//! hot object goes to the cache pool (a hit, or a promotion into an LRU cache pool); any other
//! request goes straight to the HDD pool.

use crate::eviction::{Eviction, Lru};
use crate::{Cache, Effects, Key, Outcome, Request};

/// How a period is measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Period {
    /// A period of virtual time in milliseconds.
    Millis(u64),
    /// A period of this many requests.
    Requests(u64),
}

impl Period {
    /// Index of the period a request falls in.
    pub fn index(self, request: &Request, origin_ms: u64) -> u64 {
        match self {
            Period::Millis(ms) => request.now_ms.saturating_sub(origin_ms) / ms.max(1),
            Period::Requests(n) => request.seq / n.max(1),
        }
    }
}

/// Seed 000's hot table parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HotTableConfig {
    /// Cache pool capacity in objects.
    pub capacity: usize,
    /// Period over which requests are counted. Default one minute.
    pub period: Period,
    /// Smoothing constant `a` in `[0, 1]`. Default 0.5.
    pub smoothing: f64,
    /// Threshold `H` in requests per period. Default 0.5.
    pub threshold: f64,
}

impl HotTableConfig {
    /// Defaults for a cache of `capacity` objects.
    pub fn new(capacity: usize) -> Self {
        HotTableConfig {
            capacity,
            period: Period::Millis(60_000),
            smoothing: 0.5,
            threshold: 1.0,
        }
    }
}

/// Per-object period counts and exponentially smoothed forecasts (the predictor alone).
#[derive(Clone, Debug, Default)]
pub struct SmoothedCounts {
    counts: Vec<u32>,
    forecast: Vec<f32>,
    active: Vec<Key>,
    is_active: Vec<bool>,
}

impl SmoothedCounts {
    /// Counts one request for `key` in the current period.
    pub fn count(&mut self, key: Key) {
        let index = key as usize;
        if index >= self.counts.len() {
            let size = (index + 1).next_power_of_two();
            self.counts.resize(size, 0);
            self.forecast.resize(size, 0.0);
            self.is_active.resize(size, false);
        }
        self.counts[index] += 1;
        if !self.is_active[index] {
            self.is_active[index] = true;
            self.active.push(key);
        }
    }

    /// Requests for `key` so far in the current period.
    pub fn current(&self, key: Key) -> u32 {
        self.counts.get(key as usize).copied().unwrap_or(0)
    }

    /// Forecast for the current period.
    pub fn forecast(&self, key: Key) -> f64 {
        self.forecast.get(key as usize).copied().unwrap_or(0.0) as f64
    }

    /// Closes a period: `S = a*y + (1-a)*S` for every active key, then `visit(key, S)`.
    pub fn roll(&mut self, smoothing: f64, mut visit: impl FnMut(Key, f64)) {
        let a = smoothing as f32;
        let mut kept = Vec::with_capacity(self.active.len());
        for &key in &self.active {
            let index = key as usize;
            let forecast = a * self.counts[index] as f32 + (1.0 - a) * self.forecast[index];
            self.forecast[index] = forecast;
            self.counts[index] = 0;
            visit(key, forecast as f64);
            if forecast > 1e-3 {
                kept.push(key);
            } else {
                self.forecast[index] = 0.0;
                self.is_active[index] = false;
            }
        }
        self.active = kept;
    }
}

/// Seed 000's hot table in front of an LRU cache pool.
#[derive(Clone, Debug)]
pub struct HotTable {
    config: HotTableConfig,
    counts: SmoothedCounts,
    hot: Vec<bool>,
    pool: Lru,
    period: u64,
    origin_ms: Option<u64>,
}

impl HotTable {
    /// An empty hot table.
    pub fn new(config: HotTableConfig, key_space: usize) -> Self {
        HotTable {
            counts: SmoothedCounts::default(),
            hot: vec![false; key_space],
            pool: Lru::new(config.capacity.max(1), key_space),
            config,
            period: 0,
            origin_ms: None,
        }
    }

    /// Whether `key` is in the hot table now.
    pub fn is_hot(&self, key: Key) -> bool {
        self.hot.get(key as usize).copied().unwrap_or(false)
    }

    fn advance(&mut self, request: &Request) {
        let origin = *self.origin_ms.get_or_insert(request.now_ms);
        let period = self.config.period.index(request, origin);
        while self.period < period {
            self.period += 1;
            let threshold = self.config.threshold;
            let hot = &mut self.hot;
            self.counts.roll(self.config.smoothing, |key, forecast| {
                let index = key as usize;
                if index >= hot.len() {
                    hot.resize((index + 1).next_power_of_two(), false);
                }
                if forecast > threshold {
                    hot[index] = true;
                } else if forecast < threshold {
                    hot[index] = false;
                }
            });
        }
    }
}

impl Cache for HotTable {
    fn on_request(&mut self, request: &Request, effects: &mut Effects) -> Outcome {
        self.advance(request);
        self.counts.count(request.key);
        if !self.is_hot(request.key) {
            return Outcome::Bypassed;
        }
        if self.pool.contains(request.key) {
            self.pool.on_hit(request, &mut effects.evicted);
            Outcome::Hit
        } else {
            self.pool.insert(request, &mut effects.evicted);
            Outcome::Admitted
        }
    }
    fn len(&self) -> usize {
        self.pool.len()
    }
    fn capacity(&self) -> usize {
        self.pool.capacity()
    }
    fn contains(&self, key: Key) -> bool {
        self.pool.contains(key)
    }
    fn name(&self) -> String {
        format!(
            "hottable(a={},H={})",
            self.config.smoothing, self.config.threshold
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(key: Key, seq: u64) -> Request {
        Request {
            key,
            seq,
            now_ms: seq,
            size_bytes: 1,
            ..Request::default()
        }
    }

    #[test]
    fn object_enters_after_a_busy_period_and_leaves_after_idle_ones() {
        let config = HotTableConfig {
            capacity: 4,
            period: Period::Requests(10),
            smoothing: 0.5,
            threshold: 2.0,
        };
        let mut table = HotTable::new(config, 8);
        let mut effects = Effects::default();
        // Period 0: key 1 requested 10 times -> S_1 = 5 > 2.
        for seq in 0..10 {
            assert_eq!(
                table.on_request(&request(1, seq), &mut effects),
                Outcome::Bypassed
            );
        }
        assert_eq!(
            table.on_request(&request(1, 10), &mut effects),
            Outcome::Admitted
        );
        assert_eq!(
            table.on_request(&request(1, 11), &mut effects),
            Outcome::Hit
        );
        // Periods without key 1: S halves each period (2 hits in period 1: S_2 = 1 + 2.5 = 3.5).
        for seq in 12..40 {
            table.on_request(&request(2, seq), &mut effects);
        }
        assert!(!table.is_hot(1), "forecast {}", table.counts.forecast(1));
    }
}
