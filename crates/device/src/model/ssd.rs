//! The SSD/NVMe timing model: a controller gate for the IOPS and bandwidth ceilings, then
//! `channels` flash units in parallel, each serving one request at a time.
//!
//! A request arriving at `t`:
//! 1. passes the controller gate at `admit = max(t, gate_free)`, which then stays shut for
//!    `max(1 s / iops_max, length / bandwidth)` of its kind: the ceilings;
//! 2. takes the earliest free channel at `start = max(admit, channel_free)`;
//! 3. finishes at `start + latency(op) + length / bandwidth(op)`: a single large request is
//!    striped over the whole device, so it transfers at the full bandwidth.
//!
//! Requests are served in arrival order (flash has no positioning to optimise). At QD 1 the
//! figures are latency-bound; at high QD they reach `min(iops_max, channels / latency)`.
//! A ceiling or bandwidth of 0 means unlimited; [`SsdProfile::instant`] costs nothing.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::{Completion, ModelRequest, TimingModel};
use crate::OpKind;

/// Parameters of an emulated flash device.
#[derive(Clone, Debug, PartialEq)]
pub struct SsdProfile {
    /// Service latency of a read at QD 1 (before transfer), in µs.
    pub read_latency_us: u32,
    /// Service latency of a write (into the device's protected write buffer), in µs.
    pub write_latency_us: u32,
    /// Latency of a flush, in µs.
    pub flush_latency_us: u32,
    /// Latency of a discard, in µs.
    pub discard_latency_us: u32,
    /// Requests served in parallel (flash channels / dies), >= 1.
    pub channels: u32,
    /// Read IOPS ceiling (0: none).
    pub read_iops_max: u32,
    /// Write IOPS ceiling (0: none).
    pub write_iops_max: u32,
    /// Read bandwidth in MB/s (0: unlimited).
    pub read_mb_per_s: u32,
    /// Write bandwidth in MB/s (0: unlimited).
    pub write_mb_per_s: u32,
}

impl SsdProfile {
    /// A SATA SSD: ~90 µs read at QD 1, 98k/90k IOPS, 550/520 MB/s (the SATA link).
    pub fn ssd_sata() -> Self {
        Self {
            read_latency_us: 90,
            write_latency_us: 45,
            flush_latency_us: 200,
            discard_latency_us: 50,
            channels: 16,
            read_iops_max: 98_000,
            write_iops_max: 90_000,
            read_mb_per_s: 550,
            write_mb_per_s: 520,
        }
    }

    /// A data-centre NVMe drive (P4510-like): 77/18 µs, 637k/111k IOPS, 3200/2000 MB/s.
    pub fn nvme() -> Self {
        Self {
            read_latency_us: 77,
            write_latency_us: 18,
            flush_latency_us: 5,
            discard_latency_us: 10,
            channels: 32,
            read_iops_max: 637_000,
            write_iops_max: 111_000,
            read_mb_per_s: 3_200,
            write_mb_per_s: 2_000,
        }
    }

    /// No latency, no ceilings: every request completes when it arrives.
    pub fn instant() -> Self {
        Self {
            read_latency_us: 0,
            write_latency_us: 0,
            flush_latency_us: 0,
            discard_latency_us: 0,
            channels: 1,
            read_iops_max: 0,
            write_iops_max: 0,
            read_mb_per_s: 0,
            write_mb_per_s: 0,
        }
    }

    fn latency_ns(&self, op: OpKind) -> u64 {
        1000 * u64::from(match op {
            OpKind::Read => self.read_latency_us,
            OpKind::Write => self.write_latency_us,
            OpKind::Flush => self.flush_latency_us,
            OpKind::Discard => self.discard_latency_us,
        })
    }

    fn transfer_ns(&self, op: OpKind, length_bytes: u64) -> u64 {
        let rate = match op {
            OpKind::Read => self.read_mb_per_s,
            OpKind::Write => self.write_mb_per_s,
            OpKind::Flush | OpKind::Discard => 0,
        };
        if rate == 0 {
            0
        } else {
            length_bytes * 1000 / u64::from(rate)
        }
    }

    fn gate_ns(&self, op: OpKind, length_bytes: u64) -> u64 {
        let iops = match op {
            OpKind::Read => self.read_iops_max,
            OpKind::Write => self.write_iops_max,
            OpKind::Flush | OpKind::Discard => 0,
        };
        let per_op = if iops == 0 {
            0
        } else {
            1_000_000_000 / u64::from(iops)
        };
        per_op.max(self.transfer_ns(op, length_bytes))
    }
}

/// The state of one emulated flash device.
#[derive(Debug)]
pub struct SsdModel {
    profile: SsdProfile,
    gate_free_ns: u64,
    /// Time each channel becomes free (min-heap).
    channels: BinaryHeap<Reverse<u64>>,
    /// Requests in flight by finish time, then submission order.
    in_flight: BinaryHeap<Reverse<(u64, u64, u64)>>,
    sequence: u64,
    /// Latest time seen; time never goes back.
    clock_ns: u64,
}

impl SsdModel {
    /// A fresh device.
    pub fn new(profile: SsdProfile) -> Self {
        let channels = (0..profile.channels.max(1)).map(|_| Reverse(0)).collect();
        Self {
            profile,
            gate_free_ns: 0,
            channels,
            in_flight: BinaryHeap::new(),
            sequence: 0,
            clock_ns: 0,
        }
    }

    /// When a request arriving at `now_ns` would finish, updating the device state.
    fn serve(&mut self, request: &ModelRequest, now_ns: u64) -> u64 {
        let admit = now_ns.max(self.gate_free_ns);
        self.gate_free_ns = admit + self.profile.gate_ns(request.op, request.length_bytes);
        let channel_free = self.channels.pop().map_or(0, |Reverse(t)| t);
        let start = admit.max(channel_free);
        let finish = start
            + self.profile.latency_ns(request.op)
            + self.profile.transfer_ns(request.op, request.length_bytes);
        self.channels.push(Reverse(finish));
        finish
    }
}

impl TimingModel for SsdModel {
    fn submit(&mut self, request: ModelRequest, now_ns: u64) {
        self.clock_ns = super::tick(self.clock_ns, now_ns);
        let finish = self.serve(&request, now_ns);
        self.in_flight
            .push(Reverse((finish, self.sequence, request.id)));
        self.sequence += 1;
    }

    fn next_completion_ns(&self) -> Option<u64> {
        self.in_flight.peek().map(|Reverse((finish, _, _))| *finish)
    }

    fn advance_to(&mut self, now_ns: u64, done: &mut Vec<Completion>) {
        self.clock_ns = super::tick(self.clock_ns, now_ns);
        while let Some(Reverse((finish_ns, _, id))) = self.in_flight.peek().copied() {
            if finish_ns > now_ns {
                break;
            }
            self.in_flight.pop();
            done.push(Completion { id, finish_ns });
        }
    }

    fn pending(&self) -> usize {
        self.in_flight.len()
    }
}
