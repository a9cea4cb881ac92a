//! Timing models: pure functions of (state, request, virtual time) -> completion time.
//!
//! A model never reads a clock or spawns anything. The [`crate::EmulatedDevice`] executor feeds
//! it real elapsed time and sleeps until the completions it announces; the simulator feeds it
//! virtual time. Both see the same figures.
//!
//! Protocol: time is in ns from an arbitrary epoch and never goes back. Before submitting a
//! request at `now_ns`, call [`TimingModel::advance_to`]`(now_ns)`; completions come out of
//! `advance_to` in finish order.

mod hdd;
mod ssd;
mod workload;

pub use hdd::{HddModel, HddProfile, Scheduler};
pub use ssd::{SsdModel, SsdProfile};
pub use workload::{run_closed_loop, ClosedLoopReport, Workload};

use crate::OpKind;

/// One request as a model sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelRequest {
    /// Caller's identifier, returned in the completion.
    pub id: u64,
    /// What the request does.
    pub op: OpKind,
    /// First byte.
    pub offset_bytes: u64,
    /// Length (0 for flush).
    pub length_bytes: u64,
}

/// A request the model has finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The request's identifier.
    pub id: u64,
    /// Virtual time at which the device finished it.
    pub finish_ns: u64,
}

/// A device timing model (queue included): requests in, completion times out.
pub trait TimingModel: Send {
    /// A request arrives at `now_ns` (after `advance_to(now_ns)`).
    fn submit(&mut self, request: ModelRequest, now_ns: u64);

    /// When the next pending request finishes, if any is pending.
    fn next_completion_ns(&self) -> Option<u64>;

    /// Retires every request finishing at or before `now_ns`, appending them to `done` in
    /// finish order.
    fn advance_to(&mut self, now_ns: u64, done: &mut Vec<Completion>);

    /// Requests submitted and not yet retired.
    fn pending(&self) -> usize;
}

/// Checks the protocol's one rule, that time never goes back, and returns the new time.
fn tick(clock_ns: u64, now_ns: u64) -> u64 {
    assert!(
        now_ns >= clock_ns,
        "timing model: time went back from {clock_ns} to {now_ns} ns"
    );
    now_ns
}

/// A device to emulate: a named preset or explicit parameters.
#[derive(Clone, Debug, PartialEq)]
pub enum EmulationProfile {
    /// A spinning disk.
    Hdd(HddProfile),
    /// A flash device (SATA SSD or NVMe).
    Ssd(SsdProfile),
}

impl EmulationProfile {
    /// The names [`EmulationProfile::preset`] knows.
    pub const PRESETS: [&'static str; 4] = ["hdd-7200", "hdd-10k", "ssd-sata", "nvme"];

    /// A preset by name: `hdd-7200`, `hdd-10k`, `ssd-sata`, `nvme`, or `instant` (no delay).
    pub fn preset(name: &str) -> Option<EmulationProfile> {
        Some(match name {
            "hdd-7200" => EmulationProfile::Hdd(HddProfile::hdd_7200()),
            "hdd-10k" => EmulationProfile::Hdd(HddProfile::hdd_10k()),
            "ssd-sata" => EmulationProfile::Ssd(SsdProfile::ssd_sata()),
            "nvme" => EmulationProfile::Ssd(SsdProfile::nvme()),
            "instant" => EmulationProfile::instant(),
            _ => return None,
        })
    }

    /// A profile that costs no time: the emulated device behaves like its backing device.
    pub fn instant() -> EmulationProfile {
        EmulationProfile::Ssd(SsdProfile::instant())
    }

    /// A fresh model of this profile for a device of `size_bytes`.
    pub fn build(&self, size_bytes: u64) -> Box<dyn TimingModel> {
        match self {
            EmulationProfile::Hdd(profile) => Box::new(HddModel::new(profile.clone(), size_bytes)),
            EmulationProfile::Ssd(profile) => Box::new(SsdModel::new(profile.clone())),
        }
    }
}

#[cfg(test)]
mod tests;
