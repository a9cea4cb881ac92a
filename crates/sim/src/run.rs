//! One simulation run: feeds a trace to a policy and counts what an SSD cache pool in front of
//! an HDD pool would do, overall and per period.
//!
//! Accounting per request (sizes in bytes; an "object" is the trace object's largest request,
//! or the mapping's object size), by [`Outcome`]:
//! - hit (flash): one SSD read, or one SSD write that dirties the cached copy;
//! - buffer hit (a DRAM buffer inside the capacity, `strata`'s): no device op for a read (the
//!   model has no DRAM time); a write is written through: one HDD write of the request, the
//!   copy stays clean. It is not an SSD write;
//! - admitted (promotion): one HDD read of the object and one SSD write of it (a *cache write*);
//!   a write request leaves it dirty;
//! - buffered (the object kept in the DRAM buffer): one HDD read of the object, as for an
//!   admission, since the whole object then serves later hits (with 4 MiB objects it was
//!   charged the 4 KiB request, so a policy keeping misses in DRAM looked 4x faster than LRU
//!   with the same misses); a write request is also written through (one HDD write of it);
//! - bypassed (nothing kept): one HDD read or HDD write of the request;
//! - admitted after proxy (Ceph's writeback: the miss is proxied to the HDD pool, then the
//!   object is promoted): the bypass's HDD read or write of the request, plus the admission's
//!   HDD read of the object and SSD write of it; the copy is clean, a write's too (it went to
//!   the HDD pool). Before, Ceph's write misses were charged as admissions that absorbed the
//!   write into a dirty copy, with no HDD write;
//! - promotion from the DRAM buffer ([`Effects::promoted`]): one SSD write of the object;
//! - flush, or eviction of a dirty object: one HDD write of the object.
//!
//! Timing model: each op costs `latency + bytes / bandwidth` on its pool; a pool's busy time is
//! the sum over its ops divided by its device count; estimated throughput is requests divided by
//! the busier pool's busy time (the bottleneck), i.e. a saturated closed-loop system.

use crate::trace::Trace;
use policy::hottable::Period;
use policy::{Cache, Effects, Outcome, Request};
use serde::Serialize;
use std::collections::BTreeMap;

/// SSD and HDD pool timing.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Timing {
    /// SSD per-op latency in microseconds. Default 100.
    pub ssd_op_us: f64,
    /// SSD bandwidth in bytes per second. Default 500 MB/s.
    pub ssd_bytes_per_s: f64,
    /// SSDs in the cache pool. Default 6 (seed 000's cluster).
    pub ssd_devices: u32,
    /// HDD per-op latency (seek + rotation) in microseconds. Default 8000.
    pub hdd_op_us: f64,
    /// HDD bandwidth in bytes per second. Default 150 MB/s.
    pub hdd_bytes_per_s: f64,
    /// HDDs in the backing pool. Default 6.
    pub hdd_devices: u32,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            ssd_op_us: 100.0,
            ssd_bytes_per_s: 500e6,
            ssd_devices: 6,
            hdd_op_us: 8000.0,
            hdd_bytes_per_s: 150e6,
            hdd_devices: 6,
        }
    }
}

impl Timing {
    /// Refuses latencies and bandwidths that are negative, zero (bandwidths) or not finite: a
    /// negative `hdd_op_us` gave a negative HDD busy time and NaN printed as `null`.
    pub fn check(&self) -> anyhow::Result<()> {
        for (name, value) in [("ssd_op_us", self.ssd_op_us), ("hdd_op_us", self.hdd_op_us)] {
            if !(value.is_finite() && value >= 0.0) {
                anyhow::bail!("{name} = {value}: a latency must be a finite number >= 0");
            }
        }
        for (name, value) in [
            ("ssd_bytes_per_s", self.ssd_bytes_per_s),
            ("hdd_bytes_per_s", self.hdd_bytes_per_s),
        ] {
            if !(value.is_finite() && value > 0.0) {
                anyhow::bail!("{name} = {value}: a bandwidth must be a finite number > 0");
            }
        }
        if self.ssd_devices == 0 || self.hdd_devices == 0 {
            anyhow::bail!("a pool needs at least one device");
        }
        Ok(())
    }

    fn ssd_us(&self, bytes: u64) -> f64 {
        self.ssd_op_us + bytes as f64 / self.ssd_bytes_per_s * 1e6
    }
    fn hdd_us(&self, bytes: u64) -> f64 {
        self.hdd_op_us + bytes as f64 / self.hdd_bytes_per_s * 1e6
    }
}

/// Counters of one run or one period.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Metrics {
    /// Requests.
    pub requests: u64,
    /// Requests served by the cache.
    pub hits: u64,
    /// Bytes requested.
    pub bytes: u64,
    /// Bytes served by the cache.
    pub hit_bytes: u64,
    /// Objects written into the cache by promotion (SSD writes of new objects).
    pub cache_writes: u64,
    /// Bytes written into the cache by promotion.
    pub cache_write_bytes: u64,
    /// All SSD write ops (promotions and write hits).
    pub ssd_writes: u64,
    /// HDD read ops (misses and promotions).
    pub hdd_reads: u64,
    /// HDD write ops (bypassed and written-through writes, flushes, dirty evictions).
    pub hdd_writes: u64,
    /// Bytes read from the HDD pool.
    pub hdd_read_bytes: u64,
    /// Bytes written to the HDD pool.
    pub hdd_write_bytes: u64,
    /// Evictions.
    pub evictions: u64,
    /// SSD pool busy time per device, seconds.
    pub ssd_busy_s: f64,
    /// HDD pool busy time per device, seconds.
    pub hdd_busy_s: f64,
}

impl Metrics {
    /// Misses / requests.
    pub fn miss_ratio(&self) -> f64 {
        if self.requests == 0 {
            0.0
        } else {
            1.0 - self.hits as f64 / self.requests as f64
        }
    }
    /// Missed bytes / requested bytes.
    pub fn byte_miss_ratio(&self) -> f64 {
        if self.bytes == 0 {
            0.0
        } else {
            1.0 - self.hit_bytes as f64 / self.bytes as f64
        }
    }
    /// Requests per second with the busier pool as the bottleneck.
    pub fn throughput_rps(&self) -> f64 {
        let busy = self.ssd_busy_s.max(self.hdd_busy_s);
        if busy <= 0.0 {
            0.0
        } else {
            self.requests as f64 / busy
        }
    }
}

/// Options of one run.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Timing model.
    pub timing: Timing,
    /// Period for per-period metrics; `None` disables them.
    pub period: Option<Period>,
}

/// Result of one run (the `--json` record).
#[derive(Clone, Debug, Serialize)]
pub struct RunResult {
    /// Trace name.
    pub trace: String,
    /// Policy name as given.
    pub policy: String,
    /// Policy's own description.
    pub policy_detail: String,
    /// Cache capacity in objects.
    pub cache_size_objects: u64,
    /// Requests simulated.
    pub requests: u64,
    /// Misses / requests.
    pub miss_ratio: f64,
    /// Missed bytes / requested bytes.
    pub byte_miss_ratio: f64,
    /// Objects written into the cache.
    pub cache_writes: u64,
    /// Bytes written into the cache.
    pub cache_write_bytes: u64,
    /// Cache writes / unique objects of the trace.
    pub cache_writes_per_unique: f64,
    /// All SSD write ops.
    pub ssd_writes: u64,
    /// HDD read ops.
    pub hdd_reads: u64,
    /// HDD write ops.
    pub hdd_writes: u64,
    /// Bytes read from the HDD pool.
    pub hdd_read_bytes: u64,
    /// Bytes written to the HDD pool.
    pub hdd_write_bytes: u64,
    /// HDD busy time per device, seconds.
    pub hdd_busy_s: f64,
    /// SSD busy time per device, seconds.
    pub ssd_busy_s: f64,
    /// Estimated throughput, requests per second.
    pub throughput_rps: f64,
    /// Hot table smoothing constant `a`, when it applies.
    pub smoothing: Option<f64>,
    /// Hot table threshold `H`, when it applies.
    pub threshold: Option<f64>,
    /// Per-period metrics, when asked for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub periods: Vec<PeriodResult>,
    /// The policy's own counters ([`Cache::counters`]; Ceph's tier: its forced evictions).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub policy_counters: BTreeMap<String, u64>,
}

/// Metrics of one period.
#[derive(Clone, Debug, Serialize)]
pub struct PeriodResult {
    /// Period index from the first request's time.
    pub period: u64,
    /// Requests.
    pub requests: u64,
    /// Misses / requests.
    pub miss_ratio: f64,
    /// Cache writes.
    pub cache_writes: u64,
    /// HDD reads + writes.
    pub hdd_ops: u64,
    /// HDD busy time per device, seconds.
    pub hdd_busy_s: f64,
    /// Estimated throughput, requests per second.
    pub throughput_rps: f64,
}

/// Runs `cache` over `trace`. `next_seq` (from [`Trace::next_seq`]) is needed by Belady only.
/// Returns the totals and, when `options.period` is set, the metrics of every period that had
/// requests, by period index counted from the first request's time (as the hot table counts
/// its periods). Only periods with requests are kept, so a trace whose times leap (one record
/// at time 0, the rest 40 years later) costs no memory for the empty periods between: one
/// slot per period from time 0 used to need 20 GB there.
pub fn simulate(
    trace: &Trace,
    next_seq: Option<&[u64]>,
    cache: &mut dyn Cache,
    options: &RunOptions,
) -> (Metrics, Vec<(u64, Metrics)>) {
    simulate_reporting(trace, next_seq, cache, options, &mut |_| {})
}

/// Requests between two calls of [`simulate_reporting`]'s `progress`: often enough for a
/// progress bar to move several times a second on the slowest policy (strata, about 200,000
/// requests/s), rarely enough to cost nothing on the fastest.
pub const PROGRESS_REQUESTS: u64 = 1 << 16;

/// [`simulate`], calling `progress` with the requests replayed since its previous call every
/// [`PROGRESS_REQUESTS`] requests and once at the end (a sweep's progress bar counts
/// requests, so a long run moves it while it runs, not only when it ends).
pub fn simulate_reporting(
    trace: &Trace,
    next_seq: Option<&[u64]>,
    cache: &mut dyn Cache,
    options: &RunOptions,
    progress: &mut dyn FnMut(u64),
) -> (Metrics, Vec<(u64, Metrics)>) {
    let timing = options.timing;
    let (ssd_devices, hdd_devices) = (
        timing.ssd_devices.max(1) as f64,
        timing.hdd_devices.max(1) as f64,
    );
    let mut dirty = vec![false; trace.unique];
    let mut total = Metrics::default();
    let mut periods: BTreeMap<u64, Metrics> = BTreeMap::new();
    let origin_ms = trace.requests.first().map_or(0, |r| r.time_ms);
    let mut effects = Effects::default();
    for (seq, r) in trace.requests.iter().enumerate() {
        if seq > 0 && (seq as u64).is_multiple_of(PROGRESS_REQUESTS) {
            progress(PROGRESS_REQUESTS);
        }
        let request = Request {
            key: r.key,
            size_bytes: r.size_bytes,
            object_bytes: trace.object_bytes[r.key as usize],
            now_ms: r.time_ms,
            seq: seq as u64,
            write: r.write,
            next_seq: next_seq.map_or(u64::MAX, |n| n[seq]),
        };
        effects.clear();
        let outcome = cache.on_request(&request, &mut effects);
        let mut m = Metrics {
            requests: 1,
            bytes: r.size_bytes as u64,
            ..Metrics::default()
        };
        let size = r.size_bytes as u64;
        let object = trace.object_bytes[r.key as usize] as u64;
        let (mut ssd_us, mut hdd_us) = (0.0, 0.0);
        let mut hdd_read = |m: &mut Metrics, bytes: u64| {
            m.hdd_reads += 1;
            m.hdd_read_bytes += bytes;
            hdd_us += timing.hdd_us(bytes);
        };
        let mut hdd_write_ops = Vec::new();
        match outcome {
            Outcome::Hit => {
                m.hits = 1;
                m.hit_bytes = size;
                ssd_us += timing.ssd_us(size);
                if r.write {
                    m.ssd_writes += 1;
                    dirty[r.key as usize] = true;
                }
            }
            Outcome::BufferHit => {
                m.hits = 1;
                m.hit_bytes = size;
                if r.write {
                    hdd_write_ops.push(size);
                }
            }
            Outcome::Admitted => {
                m.cache_writes = 1;
                m.cache_write_bytes = object;
                m.ssd_writes += 1;
                hdd_read(&mut m, object);
                ssd_us += timing.ssd_us(object);
                dirty[r.key as usize] = r.write;
            }
            Outcome::Buffered => {
                hdd_read(&mut m, object);
                if r.write {
                    hdd_write_ops.push(size);
                }
                dirty[r.key as usize] = false;
            }
            Outcome::Bypassed => {
                if r.write {
                    hdd_write_ops.push(size);
                } else {
                    hdd_read(&mut m, size);
                }
            }
            Outcome::AdmittedAfterProxy => {
                if r.write {
                    hdd_write_ops.push(size);
                } else {
                    hdd_read(&mut m, size);
                }
                m.cache_writes = 1;
                m.cache_write_bytes = object;
                m.ssd_writes += 1;
                hdd_read(&mut m, object);
                ssd_us += timing.ssd_us(object);
                dirty[r.key as usize] = false;
            }
        }
        for &key in &effects.promoted {
            let object = trace.object_bytes[key as usize] as u64;
            m.cache_writes += 1;
            m.cache_write_bytes += object;
            m.ssd_writes += 1;
            ssd_us += timing.ssd_us(object);
        }
        for &key in effects.flushed.iter().chain(&effects.evicted) {
            if std::mem::take(&mut dirty[key as usize]) {
                hdd_write_ops.push(trace.object_bytes[key as usize] as u64);
            }
        }
        m.evictions += effects.evicted.len() as u64;
        for bytes in hdd_write_ops {
            m.hdd_writes += 1;
            m.hdd_write_bytes += bytes;
            hdd_us += timing.hdd_us(bytes);
        }
        m.ssd_busy_s = ssd_us / ssd_devices / 1e6;
        m.hdd_busy_s = hdd_us / hdd_devices / 1e6;
        add(&mut total, &m);
        if let Some(period) = options.period {
            add(
                periods
                    .entry(period.index(&request, origin_ms))
                    .or_default(),
                &m,
            );
        }
    }
    let replayed = trace.requests.len() as u64;
    if replayed > 0 {
        // What the calls above did not count: the requests after the last multiple.
        progress(replayed - (replayed - 1) / PROGRESS_REQUESTS * PROGRESS_REQUESTS);
    }
    (total, periods.into_iter().collect())
}

fn add(total: &mut Metrics, m: &Metrics) {
    total.requests += m.requests;
    total.hits += m.hits;
    total.bytes += m.bytes;
    total.hit_bytes += m.hit_bytes;
    total.cache_writes += m.cache_writes;
    total.cache_write_bytes += m.cache_write_bytes;
    total.ssd_writes += m.ssd_writes;
    total.hdd_reads += m.hdd_reads;
    total.hdd_writes += m.hdd_writes;
    total.hdd_read_bytes += m.hdd_read_bytes;
    total.hdd_write_bytes += m.hdd_write_bytes;
    total.evictions += m.evictions;
    total.ssd_busy_s += m.ssd_busy_s;
    total.hdd_busy_s += m.hdd_busy_s;
}

impl RunResult {
    /// Assembles the record of one run.
    pub fn new(
        trace: &Trace,
        policy: &str,
        cache: &dyn Cache,
        total: &Metrics,
        periods: &[(u64, Metrics)],
    ) -> RunResult {
        RunResult {
            trace: trace.name.clone(),
            policy: policy.to_string(),
            policy_detail: cache.name(),
            cache_size_objects: cache.capacity() as u64,
            requests: total.requests,
            miss_ratio: total.miss_ratio(),
            byte_miss_ratio: total.byte_miss_ratio(),
            cache_writes: total.cache_writes,
            cache_write_bytes: total.cache_write_bytes,
            cache_writes_per_unique: total.cache_writes as f64 / trace.unique.max(1) as f64,
            ssd_writes: total.ssd_writes,
            hdd_reads: total.hdd_reads,
            hdd_writes: total.hdd_writes,
            hdd_read_bytes: total.hdd_read_bytes,
            hdd_write_bytes: total.hdd_write_bytes,
            hdd_busy_s: total.hdd_busy_s,
            ssd_busy_s: total.ssd_busy_s,
            throughput_rps: total.throughput_rps(),
            smoothing: None,
            threshold: None,
            policy_counters: cache
                .counters()
                .into_iter()
                .map(|(name, value)| (name.to_string(), value))
                .collect(),
            periods: periods
                .iter()
                .filter(|(_, m)| m.requests > 0)
                .map(|&(period, ref m)| PeriodResult {
                    period,
                    requests: m.requests,
                    miss_ratio: m.miss_ratio(),
                    cache_writes: m.cache_writes,
                    hdd_ops: m.hdd_reads + m.hdd_writes,
                    hdd_busy_s: m.hdd_busy_s,
                    throughput_rps: m.throughput_rps(),
                })
                .collect(),
        }
    }
}

/// Replays `trace` through `cache` with no accounting (for throughput measurements); returns hits.
pub fn replay(trace: &Trace, next_seq: Option<&[u64]>, cache: &mut dyn Cache) -> u64 {
    let mut effects = Effects::default();
    let mut hits = 0;
    for (seq, r) in trace.requests.iter().enumerate() {
        let request = Request {
            key: r.key,
            size_bytes: r.size_bytes,
            object_bytes: trace.object_bytes[r.key as usize],
            now_ms: r.time_ms,
            seq: seq as u64,
            write: r.write,
            next_seq: next_seq.map_or(u64::MAX, |n| n[seq]),
        };
        effects.clear();
        hits += cache.on_request(&request, &mut effects).is_hit() as u64;
    }
    hits
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::TraceRequest;

    fn run(
        trace: &Trace,
        name: &str,
        capacity: usize,
        options: &RunOptions,
    ) -> (Metrics, Vec<(u64, Metrics)>) {
        let spec = policy::PolicySpec::new(name, capacity, trace.unique);
        let mut cache = policy::build(&spec).unwrap_or_else(|e| panic!("{name}: {e}"));
        simulate(trace, None, cache.as_mut(), options)
    }

    /// A sweep's progress bar counts requests: the reports of a run add up to its requests,
    /// whatever the trace's length against [`PROGRESS_REQUESTS`], and an empty trace reports
    /// nothing.
    #[test]
    fn progress_reports_add_up_to_the_requests_replayed() {
        let step = PROGRESS_REQUESTS as usize;
        for length in [0, 1, step - 1, step, step + 1, 3 * step, 3 * step + 7] {
            let parts = (0..length as u64).map(|i| (i % 50, 4096, i, false));
            let trace = Trace::from_parts("t", parts, true);
            let spec = policy::PolicySpec::new("lru", 10, trace.unique.max(1));
            let mut cache = policy::build(&spec).unwrap();
            let mut reports = Vec::new();
            simulate_reporting(
                &trace,
                None,
                cache.as_mut(),
                &RunOptions::default(),
                &mut |n| reports.push(n),
            );
            assert_eq!(reports.iter().sum::<u64>(), length as u64, "{length}");
            assert!(
                reports.iter().all(|&n| n > 0 && n <= PROGRESS_REQUESTS),
                "{length}"
            );
            assert_eq!(reports.len(), length.div_ceil(step), "{length}");
        }
    }

    /// 4 KiB requests over 20 objects of 4 MiB, every object fits: LRU and strata miss the
    /// same 20 first requests and must read the same 20 whole objects from the HDD pool
    /// (strata, which keeps its misses in its DRAM buffer, was charged 20 x 4 KiB). Writes
    /// into the DRAM buffer are written through to the HDD pool, not SSD writes.
    #[test]
    fn a_miss_kept_in_dram_costs_the_hdd_read_of_a_miss_kept_in_flash() {
        let object_bytes = 4u32 << 20;
        let parts = (0..2_000u64).map(|i| (i % 20, 4096, i, i % 3 == 0));
        let mut trace = Trace::from_parts("objects", parts, true);
        trace
            .object_bytes
            .iter_mut()
            .for_each(|b| *b = object_bytes);
        let options = RunOptions::default();
        let (lru, _) = run(&trace, "lru", 100, &options);
        let (strata, _) = run(&trace, "strata", 100, &options);
        assert_eq!((lru.hits, strata.hits), (1_980, 1_980));
        assert_eq!(lru.hdd_reads, 20);
        assert_eq!(lru.hdd_read_bytes, 20 * u64::from(object_bytes));
        assert_eq!(strata.hdd_read_bytes, lru.hdd_read_bytes);
        // Nothing is promoted to flash: strata writes nothing to SSD; its 667 writes go
        // through to the HDD pool (LRU's stay dirty in flash, never evicted).
        assert_eq!(strata.cache_writes, 0);
        assert_eq!(strata.ssd_writes, 0);
        assert_eq!(strata.hdd_writes, 667);
        assert_eq!(lru.hdd_writes, 0);
        // Reads only: the same HDD time.
        let reads = Trace {
            requests: trace
                .requests
                .iter()
                .map(|r| TraceRequest { write: false, ..*r })
                .collect(),
            ..trace.clone()
        };
        let (lru, _) = run(&reads, "lru", 100, &options);
        let (strata, _) = run(&reads, "strata", 100, &options);
        assert_eq!(strata.hdd_busy_s, lru.hdd_busy_s);
        assert!(
            strata.ssd_busy_s < lru.ssd_busy_s,
            "DRAM hits cost no SSD time"
        );
    }

    /// Ceph's writeback write miss: the 4 KiB write goes to the HDD pool (do_proxy_write) and
    /// the 4 MiB object is promoted clean (one HDD read of it, one SSD write), so nothing is
    /// left to flush. It used to be an admission that absorbed the write into a dirty copy:
    /// no HDD write at all.
    #[test]
    fn a_ceph_write_miss_is_charged_the_proxied_write_and_the_promotion() {
        let object_bytes = 4u32 << 20;
        let parts = (0..10u64).map(|i| (0, 4096, i * 1000, i == 0));
        let mut trace = Trace::from_parts("one", parts, true);
        trace
            .object_bytes
            .iter_mut()
            .for_each(|b| *b = object_bytes);
        let mut spec = policy::PolicySpec::new("ceph", 10, trace.unique);
        let mut config = policy::ceph::CephTierConfig::seed003(10);
        config.min_write_recency_for_promote = 0;
        spec.ceph = Some(config);
        let mut cache = policy::build(&spec).unwrap();
        let (m, _) = simulate(&trace, None, cache.as_mut(), &RunOptions::default());
        assert_eq!(m.hits, 9);
        assert_eq!((m.hdd_writes, m.hdd_write_bytes), (1, 4096));
        assert_eq!(
            (m.hdd_reads, m.hdd_read_bytes),
            (1, u64::from(object_bytes))
        );
        assert_eq!((m.cache_writes, m.ssd_writes), (1, 1));
    }

    /// Periods count from the first request and only periods with requests take memory: one
    /// request at time 0 and the rest 4 x 10^11 minutes later used to allocate 20 GB of slots.
    #[test]
    fn per_period_metrics_cost_only_the_periods_with_requests() {
        let late = 12_816_638_529_551; // ms: an MSR filetime / 10,000
        let parts = [(7, 4096, 0, false)]
            .into_iter()
            .chain((0..100u64).map(|i| (i % 10, 4096, late + i * 1_000, false)));
        let trace = Trace::from_parts("leap", parts, true);
        let options = RunOptions {
            period: Some(Period::Millis(60_000)),
            ..RunOptions::default()
        };
        let (total, periods) = run(&trace, "lru", 5, &options);
        assert_eq!(total.requests, 101);
        let indices: Vec<u64> = periods.iter().map(|(i, _)| *i).collect();
        assert_eq!(indices, vec![0, late / 60_000, late / 60_000 + 1]);
        assert_eq!(periods.iter().map(|(_, m)| m.requests).sum::<u64>(), 101);
        // A trace whose first request is not its earliest: the later periods count from it.
        let parts = [
            (1, 1, 120_000, false),
            (2, 1, 0, false),
            (3, 1, 240_000, false),
        ];
        let trace = Trace::from_parts("unsorted", parts, true);
        let (_, periods) = run(&trace, "lru", 1, &options);
        let indices: Vec<u64> = periods.iter().map(|(i, _)| *i).collect();
        assert_eq!(indices, vec![0, 2]);
    }
}
