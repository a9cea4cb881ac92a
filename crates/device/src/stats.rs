//! Per-device statistics: ops, bytes, errors, busy time, queue depth and latency histograms.
//!
//! Every device owns a [`StatsRecorder`]; each operation takes an [`OpGuard`] on entry and
//! finishes it on exit. [`Device::stats`](crate::Device::stats) returns a [`DeviceStats`]
//! snapshot; [`DeviceStats::since`] turns two snapshots into a per-period delta.
//!
//! Why no lock: every layer of a stacked device (cache -> emulated -> file) records every
//! operation, so a mutex here was taken several times per request on the hot path. Counters
//! and histogram buckets are relaxed atomics. The in-flight count and the start of the
//! current busy period share one atomic word (count in the low [`IN_FLIGHT_BITS`] bits, start
//! in µs since the recorder was made above them), updated by compare-and-swap, so the thread
//! that ends a busy period always sees the start of that very period. A snapshot that races
//! the end of a period may miss that one period; the next snapshot has it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::histogram::{AtomicHistogram, Histogram};
use crate::{DeviceKind, OpKind};

/// Counters and histograms of one operation kind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpStats {
    /// Operations completed successfully.
    pub ops: u64,
    /// Bytes moved (read, written or discarded) by the successful operations.
    pub bytes: u64,
    /// Operations that returned an error.
    pub errors: u64,
    /// Latency of the successful operations, in ns, from entry to return.
    pub latency_ns: Histogram,
}

impl OpStats {
    /// Median latency in µs.
    pub fn latency_us_p50(&self) -> f64 {
        self.latency_ns.percentile(0.50) as f64 / 1000.0
    }

    /// 99th percentile latency in µs.
    pub fn latency_us_p99(&self) -> f64 {
        self.latency_ns.percentile(0.99) as f64 / 1000.0
    }

    /// Mean latency in µs.
    pub fn latency_us_mean(&self) -> f64 {
        self.latency_ns.mean() / 1000.0
    }

    fn since(&self, earlier: &OpStats) -> OpStats {
        OpStats {
            ops: self.ops.saturating_sub(earlier.ops),
            bytes: self.bytes.saturating_sub(earlier.bytes),
            errors: self.errors.saturating_sub(earlier.errors),
            latency_ns: self.latency_ns.since(&earlier.latency_ns),
        }
    }
}

/// A snapshot of one device's statistics (or, after [`DeviceStats::since`], of one period).
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceStats {
    /// The device's name.
    pub name: String,
    /// What kind of device it is.
    pub kind: DeviceKind,
    /// Time covered: since the device was opened, or the period's length, in ns.
    pub elapsed_ns: u64,
    /// Reads.
    pub read: OpStats,
    /// Writes.
    pub write: OpStats,
    /// Flushes (bytes stay 0).
    pub flush: OpStats,
    /// Discards.
    pub discard: OpStats,
    /// Time with at least one operation in flight, in ns.
    pub busy_ns: u64,
    /// Operations in flight when the snapshot was taken.
    pub queue_depth: u64,
    /// Queue depth seen by each arriving operation (itself included); its `max()` is the
    /// period's maximum queue depth (exact up to 15, within 12.5% above).
    pub queue_depth_at_arrival: Histogram,
}

impl DeviceStats {
    /// The statistics of the period between `earlier` and `self` (two snapshots of one device).
    /// Busy time is kept in whole microseconds and elapsed time in nanoseconds, so over a
    /// short period the busy difference can exceed the elapsed one by up to a microsecond per
    /// operation; it is capped at the period, as a snapshot caps it at the device's life.
    pub fn since(&self, earlier: &DeviceStats) -> DeviceStats {
        let elapsed_ns = self.elapsed_ns.saturating_sub(earlier.elapsed_ns);
        DeviceStats {
            name: self.name.clone(),
            kind: self.kind,
            elapsed_ns,
            read: self.read.since(&earlier.read),
            write: self.write.since(&earlier.write),
            flush: self.flush.since(&earlier.flush),
            discard: self.discard.since(&earlier.discard),
            busy_ns: self.busy_ns.saturating_sub(earlier.busy_ns).min(elapsed_ns),
            queue_depth: self.queue_depth,
            queue_depth_at_arrival: self
                .queue_depth_at_arrival
                .since(&earlier.queue_depth_at_arrival),
        }
    }

    /// Statistics of one operation kind.
    pub fn op(&self, op: OpKind) -> &OpStats {
        match op {
            OpKind::Read => &self.read,
            OpKind::Write => &self.write,
            OpKind::Flush => &self.flush,
            OpKind::Discard => &self.discard,
        }
    }

    /// Highest queue depth an operation arrived to in the covered time.
    pub fn queue_depth_max(&self) -> u64 {
        self.queue_depth_at_arrival.max()
    }

    /// Fraction of the covered time the device had work in flight (0..=1).
    pub fn busy_fraction(&self) -> f64 {
        if self.elapsed_ns == 0 {
            0.0
        } else {
            (self.busy_ns as f64 / self.elapsed_ns as f64).min(1.0)
        }
    }

    /// Successful operations of all kinds.
    pub fn ops(&self) -> u64 {
        self.read.ops + self.write.ops + self.flush.ops + self.discard.ops
    }

    /// Failed operations of all kinds.
    pub fn errors(&self) -> u64 {
        self.read.errors + self.write.errors + self.flush.errors + self.discard.errors
    }
}

impl std::fmt::Display for DeviceStats {
    /// One line: `name: read 120 ops 480.0 KiB p50 85µs p99 210µs | write ... | busy 42.0% qd 0 max 32`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:", self.name)?;
        for (label, op) in [("read", &self.read), ("write", &self.write)] {
            write!(
                f,
                " {label} {} ops {:.1} KiB p50 {:.0}µs p99 {:.0}µs",
                op.ops,
                op.bytes as f64 / 1024.0,
                op.latency_us_p50(),
                op.latency_us_p99()
            )?;
            if op.errors > 0 {
                write!(f, " ({} errors)", op.errors)?;
            }
            write!(f, " |")?;
        }
        write!(
            f,
            " flush {} discard {} | busy {:.1}% qd {} max {}",
            self.flush.ops,
            self.discard.ops,
            100.0 * self.busy_fraction(),
            self.queue_depth,
            self.queue_depth_max()
        )
    }
}

#[derive(Default, Debug)]
struct OpCounters {
    ops: AtomicU64,
    bytes: AtomicU64,
    errors: AtomicU64,
    latency_ns: AtomicHistogram,
}

impl OpCounters {
    fn snapshot(&self) -> OpStats {
        OpStats {
            ops: self.ops.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            latency_ns: self.latency_ns.snapshot(),
        }
    }
}

/// Bits of the busy word holding the in-flight count; the start of the busy period, in µs
/// since the recorder was made, takes the other 44 (wrapping after 203 days; only a single
/// busy period that long would be misread).
const IN_FLIGHT_BITS: u32 = 20;
const IN_FLIGHT_MASK: u64 = (1 << IN_FLIGHT_BITS) - 1;
const SINCE_MASK_US: u64 = u64::MAX >> IN_FLIGHT_BITS;

/// Busy-time bookkeeping without a lock (see the module doc).
#[derive(Debug, Default)]
struct Busy {
    /// In-flight count | (start of the current busy period in µs) << IN_FLIGHT_BITS.
    word: AtomicU64,
    /// Length of the busy periods ended so far, ns.
    ended_ns: AtomicU64,
}

impl Busy {
    /// Counts an arriving operation at `now_us`; returns the depth it arrived to (itself
    /// included).
    fn arrive(&self, now_us: u64) -> u64 {
        let mut current = self.word.load(Ordering::Acquire);
        loop {
            let in_flight = current & IN_FLIGHT_MASK;
            // More than a million operations in flight on one device is a bug upstream.
            assert!(in_flight < IN_FLIGHT_MASK, "in-flight count overflows");
            let next = if in_flight == 0 {
                ((now_us & SINCE_MASK_US) << IN_FLIGHT_BITS) | 1
            } else {
                current + 1
            };
            match self.word.compare_exchange_weak(
                current,
                next,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return in_flight + 1,
                Err(seen) => current = seen,
            }
        }
    }

    /// Counts a departing operation at `now_us`; closes the busy period when it was the last.
    fn depart(&self, now_us: u64) {
        let mut current = self.word.load(Ordering::Acquire);
        loop {
            let in_flight = current & IN_FLIGHT_MASK;
            debug_assert!(in_flight > 0, "an operation ended twice");
            if in_flight == 0 {
                return;
            }
            match self.word.compare_exchange_weak(
                current,
                current - 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(seen) => current = seen,
            }
        }
        if current & IN_FLIGHT_MASK == 1 {
            let since_us = current >> IN_FLIGHT_BITS;
            let length_us = now_us.wrapping_sub(since_us) & SINCE_MASK_US;
            self.ended_ns
                .fetch_add(length_us.saturating_mul(1000), Ordering::AcqRel);
        }
    }

    /// (busy ns so far, operations in flight) at `now_us`.
    fn read(&self, now_us: u64) -> (u64, u64) {
        let ended_ns = self.ended_ns.load(Ordering::Acquire);
        let word = self.word.load(Ordering::Acquire);
        let in_flight = word & IN_FLIGHT_MASK;
        let open_ns = if in_flight > 0 {
            (now_us.wrapping_sub(word >> IN_FLIGHT_BITS) & SINCE_MASK_US).saturating_mul(1000)
        } else {
            0
        };
        (ended_ns.saturating_add(open_ns), in_flight)
    }
}

/// The live statistics of one device; shared by all its operations.
#[derive(Debug)]
pub struct StatsRecorder {
    name: String,
    kind: DeviceKind,
    opened_at: Instant,
    per_op: [OpCounters; 4],
    busy: Busy,
    queue_depth_at_arrival: AtomicHistogram,
}

impl StatsRecorder {
    /// A recorder for a device called `name`.
    pub fn new(name: impl Into<String>, kind: DeviceKind) -> Self {
        let now = Instant::now();
        Self {
            name: name.into(),
            kind,
            opened_at: now,
            per_op: Default::default(),
            busy: Busy::default(),
            queue_depth_at_arrival: AtomicHistogram::default(),
        }
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Marks the start of an operation; finish the guard with its outcome.
    pub fn begin(&self, op: OpKind) -> OpGuard<'_> {
        let started = Instant::now();
        let depth = self.busy.arrive(self.since_opened_us(started));
        self.queue_depth_at_arrival.record(depth);
        OpGuard {
            recorder: self,
            op,
            started,
        }
    }

    fn since_opened_us(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.opened_at).as_micros() as u64
    }

    fn end(&self, now: Instant) {
        self.busy.depart(self.since_opened_us(now));
    }

    /// A snapshot of everything recorded so far.
    pub fn snapshot(&self) -> DeviceStats {
        let now = Instant::now();
        let elapsed_ns = now.saturating_duration_since(self.opened_at).as_nanos() as u64;
        let (busy_ns, queue_depth) = self.busy.read(self.since_opened_us(now));
        let busy_ns = busy_ns.min(elapsed_ns);
        let [read, write, flush, discard] = &self.per_op;
        DeviceStats {
            name: self.name.clone(),
            kind: self.kind,
            elapsed_ns,
            read: read.snapshot(),
            write: write.snapshot(),
            flush: flush.snapshot(),
            discard: discard.snapshot(),
            busy_ns,
            queue_depth,
            queue_depth_at_arrival: self.queue_depth_at_arrival.snapshot(),
        }
    }
}

/// One operation in flight. Call [`OpGuard::finish`] with its result; dropping the guard
/// unfinished (a cancelled future) only lowers the queue depth.
#[must_use = "finish the guard with the operation's outcome"]
pub struct OpGuard<'a> {
    recorder: &'a StatsRecorder,
    op: OpKind,
    started: Instant,
}

impl OpGuard<'_> {
    /// Records the outcome (`bytes` counts only on success) and passes `result` through.
    pub fn finish<T, E>(self, bytes: u64, result: Result<T, E>) -> Result<T, E> {
        let now = Instant::now();
        let counters = &self.recorder.per_op[self.op.index()];
        match &result {
            Ok(_) => {
                counters.ops.fetch_add(1, Ordering::Relaxed);
                counters.bytes.fetch_add(bytes, Ordering::Relaxed);
                let latency = now.saturating_duration_since(self.started).as_nanos() as u64;
                counters.latency_ns.record(latency);
            }
            Err(_) => {
                counters.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        result
    }
}

impl Drop for OpGuard<'_> {
    fn drop(&mut self) {
        self.recorder.end(Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_ops_bytes_errors_and_depth() {
        let recorder = StatsRecorder::new("t", DeviceKind::Memory);
        let first = recorder.begin(OpKind::Read);
        let second = recorder.begin(OpKind::Write);
        assert_eq!(recorder.snapshot().queue_depth, 2);
        let _ = first.finish(4096, Ok::<(), ()>(()));
        let _ = second.finish(512, Err::<(), ()>(()));
        let before = recorder.snapshot();
        assert_eq!(before.read.ops, 1);
        assert_eq!(before.read.bytes, 4096);
        assert_eq!(before.write.errors, 1);
        assert_eq!(before.write.ops, 0);
        assert_eq!(before.queue_depth, 0);
        assert_eq!(before.queue_depth_max(), 2);
        let _ = recorder.begin(OpKind::Flush).finish(0, Ok::<(), ()>(()));
        let period = recorder.snapshot().since(&before);
        assert_eq!(period.flush.ops, 1);
        assert_eq!(period.read.ops, 0);
        assert_eq!(period.queue_depth_max(), 1);
        assert!(period.busy_ns <= period.elapsed_ns);
        let line = before.to_string();
        assert!(line.starts_with("t: read 1 ops 4.0 KiB"), "{line}");
        assert!(
            line.contains("(1 errors)") && line.ends_with("max 2"),
            "{line}"
        );
    }

    #[test]
    fn busy_time_covers_overlapping_operations_once() {
        let recorder = StatsRecorder::new("t", DeviceKind::Memory);
        let first = recorder.begin(OpKind::Read);
        std::thread::sleep(std::time::Duration::from_millis(3));
        let second = recorder.begin(OpKind::Read);
        std::thread::sleep(std::time::Duration::from_millis(3));
        let _ = first.finish(0, Ok::<(), ()>(()));
        let open = recorder.snapshot();
        assert_eq!(open.queue_depth, 1);
        assert!(open.busy_ns >= 5_900_000, "{}", open.busy_ns);
        std::thread::sleep(std::time::Duration::from_millis(2));
        let _ = second.finish(0, Ok::<(), ()>(()));
        std::thread::sleep(std::time::Duration::from_millis(5));
        let done = recorder.snapshot();
        assert_eq!(done.queue_depth, 0);
        // One period of ~8 ms, counted once; the idle 5 ms after it not at all.
        assert!(done.busy_ns >= 7_900_000, "{}", done.busy_ns);
        assert!(done.busy_ns + 4_000_000 <= done.elapsed_ns, "{done:?}");
    }

    #[test]
    fn concurrent_operations_leave_no_one_in_flight() {
        let recorder = StatsRecorder::new("t", DeviceKind::Memory);
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for _ in 0..20_000 {
                        let _ = recorder.begin(OpKind::Write).finish(512, Ok::<(), ()>(()));
                    }
                });
            }
        });
        let stats = recorder.snapshot();
        assert_eq!(stats.write.ops, 80_000);
        assert_eq!(stats.write.bytes, 80_000 * 512);
        assert_eq!(stats.queue_depth, 0);
        assert!(stats.queue_depth_max() <= 4);
        assert!(stats.busy_ns <= stats.elapsed_ns);
    }
}
