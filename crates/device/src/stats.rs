//! Per-device statistics: ops, bytes, errors, busy time, queue depth and latency histograms.
//!
//! Every device owns a [`StatsRecorder`]; each operation takes an [`OpGuard`] on entry and
//! finishes it on exit. [`Device::stats`](crate::Device::stats) returns a [`DeviceStats`]
//! snapshot; [`DeviceStats::since`] turns two snapshots into a per-period delta.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
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
    pub fn since(&self, earlier: &DeviceStats) -> DeviceStats {
        DeviceStats {
            name: self.name.clone(),
            kind: self.kind,
            elapsed_ns: self.elapsed_ns.saturating_sub(earlier.elapsed_ns),
            read: self.read.since(&earlier.read),
            write: self.write.since(&earlier.write),
            flush: self.flush.since(&earlier.flush),
            discard: self.discard.since(&earlier.discard),
            busy_ns: self.busy_ns.saturating_sub(earlier.busy_ns),
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

#[derive(Debug)]
struct Busy {
    in_flight: u64,
    busy_since: Instant,
    busy_ns: u64,
}

/// The live statistics of one device; shared by all its operations.
#[derive(Debug)]
pub struct StatsRecorder {
    name: String,
    kind: DeviceKind,
    opened_at: Instant,
    per_op: [OpCounters; 4],
    busy: Mutex<Busy>,
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
            busy: Mutex::new(Busy {
                in_flight: 0,
                busy_since: now,
                busy_ns: 0,
            }),
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
        let depth = {
            let mut busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
            if busy.in_flight == 0 {
                busy.busy_since = started;
            }
            busy.in_flight += 1;
            busy.in_flight
        };
        self.queue_depth_at_arrival.record(depth);
        OpGuard {
            recorder: self,
            op,
            started,
        }
    }

    fn end(&self, now: Instant) {
        let mut busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        busy.in_flight = busy.in_flight.saturating_sub(1);
        if busy.in_flight == 0 {
            busy.busy_ns += now.saturating_duration_since(busy.busy_since).as_nanos() as u64;
        }
    }

    /// A snapshot of everything recorded so far.
    pub fn snapshot(&self) -> DeviceStats {
        let now = Instant::now();
        let (busy_ns, queue_depth) = {
            let busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
            let running = if busy.in_flight > 0 {
                now.saturating_duration_since(busy.busy_since).as_nanos() as u64
            } else {
                0
            };
            (busy.busy_ns + running, busy.in_flight)
        };
        let [read, write, flush, discard] = &self.per_op;
        DeviceStats {
            name: self.name.clone(),
            kind: self.kind,
            elapsed_ns: now.saturating_duration_since(self.opened_at).as_nanos() as u64,
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
}
