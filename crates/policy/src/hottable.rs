//! Seed 000's storage selection: per-object request counts per period, a one-step exponential
//! smoothing forecast `S_t = a*y_{t-1} + (1-a)*S_{t-1}` (with `S_0 = 0`), and a hot table that an
//! object enters when its forecast is above `H` and leaves when it is below `H`. A request for a
//! hot object goes to the cache pool (a hit, or a promotion into an LRU cache pool); a request
//! for an object the pool holds is a hit whatever its forecast (the cached copy may be the only
//! current one, so the op must go to the cache: an object leaves the pool only by the pool's
//! own LRU eviction, as in seed 000, not by leaving the hot table); any other request goes
//! straight to the HDD pool.

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

    /// Whether no key has a forecast left: closing a period then changes nothing.
    pub fn is_idle(&self) -> bool {
        self.active.is_empty()
    }

    /// Closes `periods` (at least 1) periods in which nothing was requested, in closed form:
    /// `S * (1-a)^periods` in double precision, then `visit(key, first, last)` with the
    /// forecast after the first of them (exact) and after the last; keys whose last forecast
    /// is at most 0.001 are forgotten, as [`SmoothedCounts::roll`] forgets them. The counts
    /// of the current period must be empty (a period has just been rolled).
    pub fn decay_idle(
        &mut self,
        smoothing: f64,
        periods: u64,
        mut visit: impl FnMut(Key, f64, f64),
    ) {
        let keep = 1.0 - smoothing as f32;
        let factor = (keep as f64).powf(periods as f64);
        let mut kept = Vec::with_capacity(self.active.len());
        for &key in &self.active {
            let index = key as usize;
            debug_assert_eq!(self.counts[index], 0, "decay_idle with requests pending");
            let first = keep * self.forecast[index];
            let last = (self.forecast[index] as f64 * factor) as f32;
            self.forecast[index] = last;
            visit(key, first as f64, last as f64);
            if last > 1e-3 {
                kept.push(key);
            } else {
                self.forecast[index] = 0.0;
                self.is_active[index] = false;
            }
        }
        self.active = kept;
    }
}

/// Periods of one time gap closed one by one, exactly as the forecast is defined, before the
/// rest of the gap is applied in closed form ([`SmoothedCounts::decay_idle`]). Forecasts of a
/// million requests per period fall below 0.001 (and are forgotten) within this many idle
/// periods for any `a` of 0.002 or more, so the closed form runs only for smaller `a`, whose
/// single-precision steps it approximates; a gap after which no forecast is left is skipped
/// at once. A gap thus costs at most this many rolls, however long: the hot table used to
/// close every period of a gap one by one (a trace with a gap of 30,000 years at one-minute
/// periods never finished).
const EXACT_ROLLS_MAX: u64 = 10_000;

/// Enters `key` in the hot table when `forecast` is above `threshold`, removes it when below.
fn mark(hot: &mut Vec<bool>, key: Key, forecast: f64, threshold: f64) {
    let index = key as usize;
    if index >= hot.len() {
        hot.resize((index + 1).next_power_of_two(), false);
    }
    if forecast > threshold {
        hot[index] = true;
    } else if forecast < threshold {
        hot[index] = false;
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
    /// [`EXACT_ROLLS_MAX`] (a test compares against the unbounded per-period loop).
    rolls_exact_max: u64,
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
            rolls_exact_max: EXACT_ROLLS_MAX,
        }
    }

    /// Whether `key` is in the hot table now.
    pub fn is_hot(&self, key: Key) -> bool {
        self.hot.get(key as usize).copied().unwrap_or(false)
    }

    /// Closes the periods up to the request's: one by one while some forecast is alive (at
    /// most [`EXACT_ROLLS_MAX`] of them, the rest in closed form), none once nothing is.
    fn advance(&mut self, request: &Request) {
        let origin = *self.origin_ms.get_or_insert(request.now_ms);
        let period = self.config.period.index(request, origin);
        let threshold = self.config.threshold;
        let mut rolls = 0u64;
        while self.period < period {
            if self.counts.is_idle() {
                self.period = period;
                break;
            }
            if rolls == self.rolls_exact_max {
                let hot = &mut self.hot;
                self.counts.decay_idle(
                    self.config.smoothing,
                    period - self.period,
                    |key, first, last| {
                        // The forecasts of an idle stretch never rise: the last decides, and
                        // on a tie with H the first (a key above H at any step entered).
                        let decisive = if last == threshold { first } else { last };
                        mark(hot, key, decisive, threshold);
                    },
                );
                self.period = period;
                break;
            }
            self.period += 1;
            rolls += 1;
            let hot = &mut self.hot;
            self.counts.roll(self.config.smoothing, |key, forecast| {
                mark(hot, key, forecast, threshold)
            });
        }
    }
}

impl Cache for HotTable {
    fn on_request(&mut self, request: &Request, effects: &mut Effects) -> Outcome {
        self.advance(request);
        self.counts.count(request.key);
        // A cached object is served from the cache whatever its forecast: its copy there may
        // be the only current one (a write made while it was hot), so a request for it cannot
        // go to the HDD pool; only admission depends on the hot table.
        if self.pool.contains(request.key) {
            self.pool.on_hit(request, &mut effects.evicted);
            return Outcome::Hit;
        }
        if !self.is_hot(request.key) {
            return Outcome::Bypassed;
        }
        self.pool.insert(request, &mut effects.evicted);
        Outcome::Admitted
    }
    fn len(&self) -> usize {
        self.pool.len()
    }
    fn capacity(&self) -> usize {
        self.pool.capacity()
    }
    fn resize(&mut self, capacity_objects: usize) {
        self.config.capacity = capacity_objects.max(1);
        self.pool.set_capacity(self.config.capacity);
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

    /// A larger capacity keeps more hot objects; a smaller one evicts down to it at the next
    /// admission, least recently used first.
    #[test]
    fn a_resized_table_holds_its_new_capacity() {
        let config = HotTableConfig {
            capacity: 2,
            period: Period::Requests(100),
            smoothing: 0.5,
            threshold: 0.0,
        };
        let mut table = HotTable::new(config, 16);
        let mut effects = Effects::default();
        let mut seq = 0;
        let mut ask = |table: &mut HotTable, key: Key, effects: &mut Effects| {
            seq += 1;
            table.on_request(&request(key, seq), effects)
        };
        // Threshold 0: every key requested once in a closed period is hot.
        for key in 0..6 {
            ask(&mut table, key, &mut effects);
        }
        for _ in 0..100 {
            ask(&mut table, 15, &mut effects);
        }
        effects.evicted.clear();
        table.resize(4);
        assert_eq!(table.capacity(), 4);
        for key in 0..4 {
            ask(&mut table, key, &mut effects);
        }
        assert_eq!(table.len(), 4);
        assert!((0..4).all(|key| table.contains(key)), "{:?}", effects);
        table.resize(2);
        assert_eq!(
            table.len(),
            4,
            "a smaller capacity waits for the next admission"
        );
        assert_eq!(ask(&mut table, 4, &mut effects), Outcome::Admitted);
        assert_eq!(table.len(), 2);
        assert!(table.contains(4) && table.contains(3));
        assert!(!table.contains(0) && !table.contains(1) && !table.contains(2));
    }

    /// An object that leaves the hot table while the pool still holds it is served from the
    /// pool (a hit), as the live tier must serve it; one the pool does not hold goes around.
    #[test]
    fn a_cached_object_is_a_hit_after_it_leaves_the_hot_table() {
        let config = HotTableConfig {
            capacity: 4,
            period: Period::Requests(10),
            smoothing: 0.5,
            threshold: 2.0,
        };
        let mut table = HotTable::new(config, 8);
        let mut effects = Effects::default();
        for seq in 0..10 {
            table.on_request(&request(1, seq), &mut effects);
            table.on_request(&request(3, seq), &mut effects);
        }
        // Both hot (S = 5); only key 1 is requested, and so admitted.
        assert_eq!(
            table.on_request(&request(1, 10), &mut effects),
            Outcome::Admitted
        );
        for seq in 11..60 {
            table.on_request(&request(2, seq), &mut effects);
        }
        assert!(!table.is_hot(1) && !table.is_hot(3));
        assert!(table.contains(1));
        assert_eq!(
            table.on_request(&request(1, 60), &mut effects),
            Outcome::Hit
        );
        assert_eq!(
            table.on_request(&request(3, 61), &mut effects),
            Outcome::Bypassed
        );
    }

    fn timed(key: Key, seq: u64, now_ms: u64) -> Request {
        Request {
            key,
            seq,
            now_ms,
            size_bytes: 1,
            ..Request::default()
        }
    }

    /// A gap of 10^15 ms (31,000 years of one-minute periods) is crossed at once: the hot table
    /// used to close its 1.7 x 10^10 periods one by one and never finished. At a = 1e-4 the
    /// forecast of 100,000 requests outlives EXACT_ROLLS_MAX periods: the closed form ends it.
    #[test]
    fn a_huge_time_gap_is_crossed_at_once() {
        for (smoothing, requests) in [(0.5, 10), (1e-4, 100_000)] {
            let config = HotTableConfig {
                capacity: 1,
                period: Period::Millis(60_000),
                smoothing,
                threshold: 0.5,
            };
            let mut table = HotTable::new(config, 4);
            let mut effects = Effects::default();
            for seq in 0..requests {
                table.on_request(&timed(1, seq, 0), &mut effects);
            }
            table.on_request(&timed(2, requests, 60_000), &mut effects);
            assert!(table.is_hot(1), "a = {smoothing}");
            table.on_request(&timed(3, requests + 1, 1_000_000_000_000_000), &mut effects);
            assert!(!table.is_hot(1), "a = {smoothing}");
            assert_eq!(table.counts.forecast(1), 0.0, "a = {smoothing}");
        }
    }

    /// The closed form decides as closing the periods one by one (here after 5 of them, over
    /// gaps of up to 2,000 periods at a = 0.01).
    #[test]
    fn the_closed_form_decides_as_closing_every_period() {
        let config = HotTableConfig {
            capacity: 8,
            period: Period::Millis(1_000),
            smoothing: 0.01,
            threshold: 1.0,
        };
        let mut closed = HotTable::new(config, 64);
        closed.rolls_exact_max = 5;
        let mut reference = HotTable::new(config, 64);
        reference.rolls_exact_max = u64::MAX;
        let mut effects = Effects::default();
        let mut now_ms = 0;
        for seq in 0..20_000u64 {
            let hash = crate::mix64(seq);
            now_ms += if hash.is_multiple_of(199) {
                hash % 2_000_000
            } else {
                hash % 30
            };
            let request = timed((hash >> 20) as u32 % 4, seq, now_ms);
            assert_eq!(
                closed.on_request(&request, &mut effects),
                reference.on_request(&request, &mut effects),
                "request {seq}"
            );
        }
    }

    /// Skipping idle periods, and closing at most EXACT_ROLLS_MAX one by one, decide every
    /// request as closing each period one by one does, over gaps of up to 300 periods.
    #[test]
    fn crossing_gaps_decides_as_closing_every_period() {
        for smoothing in [0.2, 0.5, 1.0] {
            let config = HotTableConfig {
                capacity: 8,
                period: Period::Millis(1_000),
                smoothing,
                threshold: 1.0,
            };
            let mut fast = HotTable::new(config, 64);
            let mut reference = HotTable::new(config, 64);
            reference.rolls_exact_max = u64::MAX;
            let mut effects = Effects::default();
            let mut now_ms = 0;
            for seq in 0..20_000u64 {
                let hash = crate::mix64(seq);
                now_ms += if hash.is_multiple_of(97) {
                    hash % 300_000
                } else {
                    hash % 300
                };
                let request = timed((hash >> 20) as u32 % 40, seq, now_ms);
                assert_eq!(
                    fast.on_request(&request, &mut effects),
                    reference.on_request(&request, &mut effects),
                    "a = {smoothing}, request {seq}"
                );
            }
        }
    }
}
