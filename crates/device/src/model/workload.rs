//! A closed-loop load generator in virtual time: what a model predicts for fio-like jobs.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{ModelRequest, TimingModel};
use crate::histogram::Histogram;
use crate::OpKind;

/// A fio-like job.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Workload {
    /// Size of each request in bytes.
    pub length_bytes: u64,
    /// Fraction of requests that are reads (0..=1); the rest are writes.
    pub read_fraction: f64,
    /// Random offsets (aligned to `length_bytes`) or one sequential stream per queue slot.
    pub random: bool,
}

impl Workload {
    /// 4 KiB random reads.
    pub fn random_read_4k() -> Self {
        Self {
            length_bytes: 4096,
            read_fraction: 1.0,
            random: true,
        }
    }

    /// 4 KiB random writes.
    pub fn random_write_4k() -> Self {
        Self {
            read_fraction: 0.0,
            ..Self::random_read_4k()
        }
    }
}

/// What a closed-loop run measured, in virtual time.
#[derive(Clone, Debug)]
pub struct ClosedLoopReport {
    /// Requests completed.
    pub ops: u64,
    /// Virtual time from the first submission to the last completion, in ns.
    pub elapsed_ns: u64,
    /// Per-request latency (submission to completion), in ns.
    pub latency_ns: Histogram,
}

impl ClosedLoopReport {
    /// Requests per second of virtual time.
    pub fn iops(&self) -> f64 {
        if self.elapsed_ns == 0 {
            return f64::INFINITY;
        }
        self.ops as f64 * 1e9 / self.elapsed_ns as f64
    }
}

/// Keeps `queue_depth` requests of `workload` in flight on `model` (over a device of
/// `size_bytes`) until `ops` have completed; a completed request is replaced at its finish
/// time. Deterministic for a given `seed`.
pub fn run_closed_loop(
    model: &mut dyn TimingModel,
    size_bytes: u64,
    workload: Workload,
    queue_depth: usize,
    ops: u64,
    seed: u64,
) -> ClosedLoopReport {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let slots = (size_bytes / workload.length_bytes).max(1);
    let mut next_id = 0u64;
    let mut submitted_at = std::collections::HashMap::new();
    let mut cursors: Vec<u64> = (0..queue_depth as u64)
        .map(|stream| stream * slots / queue_depth.max(1) as u64)
        .collect();
    let mut new_request = |rng: &mut ChaCha8Rng, stream: usize, id: u64| {
        let slot = if workload.random {
            rng.gen_range(0..slots)
        } else {
            let cursor = &mut cursors[stream];
            let slot = *cursor % slots;
            *cursor += 1;
            slot
        };
        let op = if rng.gen_bool(workload.read_fraction.clamp(0.0, 1.0)) {
            OpKind::Read
        } else {
            OpKind::Write
        };
        ModelRequest {
            id,
            op,
            offset_bytes: slot * workload.length_bytes,
            length_bytes: workload.length_bytes,
        }
    };
    let mut latency_ns = Histogram::default();
    let mut completed = 0;
    let mut now = 0;
    let mut done = Vec::new();
    for stream in 0..queue_depth.max(1) {
        let request = new_request(&mut rng, stream, next_id);
        submitted_at.insert(next_id, (now, stream));
        next_id += 1;
        model.submit(request, now);
    }
    while completed < ops {
        let Some(next) = model.next_completion_ns() else {
            break;
        };
        now = next;
        done.clear();
        model.advance_to(now, &mut done);
        for completion in &done {
            let Some((start, stream)) = submitted_at.remove(&completion.id) else {
                continue;
            };
            latency_ns.record(completion.finish_ns - start);
            completed += 1;
            let request = new_request(&mut rng, stream, next_id);
            submitted_at.insert(next_id, (now, stream));
            next_id += 1;
            model.submit(request, now);
        }
    }
    ClosedLoopReport {
        ops: completed,
        elapsed_ns: now,
        latency_ns,
    }
}
