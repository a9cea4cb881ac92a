//! Fault injection over any device, reproducible from a seed.
//!
//! Two ways to fault:
//! - **random**: per-operation probabilities ([`FaultConfig`]) of EIO, torn writes, silent bit
//!   flips and latency spikes, drawn from a ChaCha RNG seeded by `FaultConfig::seed`, so a seed
//!   replays the same faults for the same sequence of operations;
//! - **scripted**: [`FaultRule`]s (fail the Nth read, flip bits in reads of a range, crash on the
//!   3rd write...) for deterministic tests. Rules are checked first, in order; the first that
//!   fires decides.
//!
//! Faults can be switched off and on at run time ([`FaultyDevice::set_enabled`]) and the
//! configuration replaced ([`FaultyDevice::set_config`]). A **crash** (a rule, a torn write
//! with `crash`, or [`FaultyDevice::crash`]) makes every operation fail with
//! [`DeviceError::Crashed`] until [`FaultyDevice::restart`]; with
//! `FaultConfig::unflushed_loss_probability > 0`, each block written since the last successful
//! flush independently reverts to its content at that flush, as a volatile write cache losing
//! power would leave it. A flush makes durable what was written before it started, not what
//! is written while it runs (its latency spike included), and a flush still running when the
//! device crashes fails: the store runs several flushes at once and relies on exactly that.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::stats::StatsRecorder;
use crate::timer::PreciseTimer;
use crate::{check_request, Device, DeviceError, DeviceKind, DeviceStats, OpKind};

/// What a fault does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// The operation fails with EIO and does nothing.
    Error,
    /// A write stores only its first `blocks_written` blocks (a random number below the
    /// request's block count when `None`), then fails: with EIO, or by crashing the device.
    TornWrite {
        /// Whole blocks that reach the medium.
        blocks_written: Option<u64>,
        /// Crash the device instead of returning EIO.
        crash: bool,
    },
    /// One random bit of the data is flipped, silently (on a read: in the caller's buffer; on
    /// a write: in what is stored).
    BitFlip,
    /// The operation is delayed by `duration_us`, then served normally.
    LatencySpike {
        /// Extra delay in µs.
        duration_us: u64,
    },
    /// The device crashes before serving the operation.
    Crash,
}

/// When a scripted rule fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultTrigger {
    /// On the Nth (0-based) operation the rule's filter matches (operations served while
    /// injection is switched off are not counted).
    NthOp(u64),
    /// On every matching operation overlapping `[start_bytes, end_bytes)`.
    OffsetRange {
        /// First byte of the range.
        start_bytes: u64,
        /// End of the range (exclusive).
        end_bytes: u64,
    },
    /// On every matching operation.
    Always,
}

/// A scripted fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultRule {
    /// Operation kind it applies to; `None`: reads and writes.
    pub op: Option<OpKind>,
    /// When it fires.
    pub trigger: FaultTrigger,
    /// What it does.
    pub fault: FaultKind,
    /// How many times it may fire; `None`: no limit.
    pub times: Option<u64>,
}

impl FaultRule {
    /// Fails the Nth (0-based) operation of kind `op` with EIO.
    pub fn fail_nth(op: OpKind, n: u64) -> Self {
        Self {
            op: Some(op),
            trigger: FaultTrigger::NthOp(n),
            fault: FaultKind::Error,
            times: None,
        }
    }

    /// Fails every read and write overlapping `[start_bytes, end_bytes)` with EIO.
    pub fn fail_range(start_bytes: u64, end_bytes: u64) -> Self {
        Self {
            op: None,
            trigger: FaultTrigger::OffsetRange {
                start_bytes,
                end_bytes,
            },
            fault: FaultKind::Error,
            times: None,
        }
    }
}

/// Random faults and scripted rules. Probabilities are per operation, 0..=1; all default to 0.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FaultConfig {
    /// Seed of the fault RNG.
    pub seed: u64,
    /// Probability a read fails with EIO.
    pub read_error_probability: f64,
    /// Probability a write fails with EIO (nothing written).
    pub write_error_probability: f64,
    /// Probability a write is torn (a prefix of its blocks written, then EIO).
    pub torn_write_probability: f64,
    /// Probability a read returns one flipped bit.
    pub read_bit_flip_probability: f64,
    /// Probability a write stores one flipped bit.
    pub write_bit_flip_probability: f64,
    /// Probability an operation is delayed by `latency_spike_us`.
    pub latency_spike_probability: f64,
    /// Length of a latency spike in µs.
    pub latency_spike_us: u64,
    /// On a crash, probability that each block written since the last flush reverts to its
    /// content at that flush (0: no tracking, nothing reverts).
    pub unflushed_loss_probability: f64,
    /// Scripted faults, checked before the random ones.
    pub rules: Vec<FaultRule>,
}

/// How many faults of each kind have fired.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultCounts {
    /// EIO returned.
    pub errors: u64,
    /// Writes torn.
    pub torn_writes: u64,
    /// Bits flipped.
    pub bit_flips: u64,
    /// Operations delayed.
    pub latency_spikes: u64,
    /// Crashes.
    pub crashes: u64,
    /// Blocks reverted by crashes.
    pub blocks_lost: u64,
}

struct State {
    config: FaultConfig,
    rng: ChaCha8Rng,
    /// Per rule: matching operations seen, times fired.
    rule_counts: Vec<(u64, u64)>,
    /// Block index -> (content at the last flush, number of the last write to it), for
    /// blocks written since.
    unflushed: BTreeMap<u64, (Vec<u8>, u64)>,
    /// Writes remembered in `unflushed` so far (numbers them).
    writes: u64,
    counts: FaultCounts,
}

impl State {
    /// Numbers a write remembered in `unflushed`.
    fn next_write(&mut self) -> u64 {
        self.writes += 1;
        self.writes
    }
}

/// A device that injects faults into the operations on `inner`.
pub struct FaultyDevice {
    inner: Arc<dyn Device>,
    enabled: AtomicBool,
    crashed: AtomicBool,
    state: Mutex<State>,
    operations: AtomicU64,
    stats: StatsRecorder,
}

/// The decision for one operation.
enum Decision {
    Pass,
    Fault(FaultKind),
}

impl FaultyDevice {
    /// Wraps `inner`, faults enabled.
    pub fn new(name: impl Into<String>, inner: Arc<dyn Device>, config: FaultConfig) -> Self {
        Self {
            inner,
            enabled: AtomicBool::new(true),
            crashed: AtomicBool::new(false),
            state: Mutex::new(Self::fresh_state(config)),
            operations: AtomicU64::new(0),
            stats: StatsRecorder::new(name, DeviceKind::Faulty),
        }
    }

    fn fresh_state(config: FaultConfig) -> State {
        State {
            rng: ChaCha8Rng::seed_from_u64(config.seed),
            rule_counts: vec![(0, 0); config.rules.len()],
            unflushed: BTreeMap::new(),
            writes: 0,
            counts: FaultCounts::default(),
            config,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Turns fault injection on or off (a crashed device stays crashed).
    pub fn set_enabled(&self, enabled: bool) {
        self.enabled.store(enabled, Ordering::Release);
    }

    /// Replaces the configuration: reseeds the RNG and resets the rule counters.
    pub fn set_config(&self, config: FaultConfig) {
        let mut state = self.lock();
        let counts = state.counts;
        let unflushed = std::mem::take(&mut state.unflushed);
        *state = Self::fresh_state(config);
        state.counts = counts;
        state.unflushed = unflushed;
    }

    /// Adds a scripted rule.
    pub fn add_rule(&self, rule: FaultRule) {
        let mut state = self.lock();
        state.config.rules.push(rule);
        state.rule_counts.push((0, 0));
    }

    /// Crashes the device now (as a power loss would).
    pub async fn crash(&self) -> Result<(), DeviceError> {
        self.crash_now().await
    }

    /// Brings a crashed device back; what survived the crash is on `inner`.
    pub fn restart(&self) {
        self.crashed.store(false, Ordering::Release);
    }

    /// Whether the device is crashed.
    pub fn is_crashed(&self) -> bool {
        self.crashed.load(Ordering::Acquire)
    }

    /// Faults fired so far.
    pub fn fault_counts(&self) -> FaultCounts {
        self.lock().counts
    }

    /// The wrapped device.
    pub fn inner(&self) -> &Arc<dyn Device> {
        &self.inner
    }

    async fn crash_now(&self) -> Result<(), DeviceError> {
        if self.crashed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let reverts: Vec<(u64, Vec<u8>)> = {
            let mut state = self.lock();
            state.counts.crashes += 1;
            let probability = state.config.unflushed_loss_probability.clamp(0.0, 1.0);
            let unflushed = std::mem::take(&mut state.unflushed);
            let mut reverts = Vec::new();
            for (block, (content, _)) in unflushed {
                if state.rng.gen_bool(probability) {
                    reverts.push((block, content));
                }
            }
            state.counts.blocks_lost += reverts.len() as u64;
            reverts
        };
        let block = self.inner.block_size_bytes();
        for (index, content) in reverts {
            self.inner.write_at(index * block, &content).await?;
        }
        Ok(())
    }

    /// Decides what happens to one operation.
    fn decide(&self, op: OpKind, offset_bytes: u64, length_bytes: u64) -> Decision {
        self.operations.fetch_add(1, Ordering::Relaxed);
        if !self.enabled.load(Ordering::Acquire) {
            return Decision::Pass;
        }
        let mut state = self.lock();
        let State {
            config,
            rng,
            rule_counts,
            ..
        } = &mut *state;
        for (rule, (seen, fired)) in config.rules.iter().zip(rule_counts.iter_mut()) {
            let matches_op = match rule.op {
                Some(kind) => kind == op,
                None => matches!(op, OpKind::Read | OpKind::Write),
            };
            if !matches_op {
                continue;
            }
            let index = *seen;
            *seen += 1;
            if rule.times.is_some_and(|times| *fired >= times) {
                continue;
            }
            let fires = match rule.trigger {
                FaultTrigger::NthOp(n) => index == n,
                FaultTrigger::OffsetRange {
                    start_bytes,
                    end_bytes,
                } => offset_bytes < end_bytes && start_bytes < offset_bytes + length_bytes.max(1),
                FaultTrigger::Always => true,
            };
            if fires {
                *fired += 1;
                return Decision::Fault(rule.fault);
            }
        }
        let roll = |rng: &mut ChaCha8Rng, p: f64| p > 0.0 && rng.gen_bool(p.min(1.0));
        if roll(rng, config.latency_spike_probability) {
            return Decision::Fault(FaultKind::LatencySpike {
                duration_us: config.latency_spike_us,
            });
        }
        let kind = match op {
            OpKind::Read if roll(rng, config.read_error_probability) => FaultKind::Error,
            OpKind::Read if roll(rng, config.read_bit_flip_probability) => FaultKind::BitFlip,
            OpKind::Write if roll(rng, config.write_error_probability) => FaultKind::Error,
            OpKind::Write if roll(rng, config.torn_write_probability) => FaultKind::TornWrite {
                blocks_written: None,
                crash: false,
            },
            OpKind::Write if roll(rng, config.write_bit_flip_probability) => FaultKind::BitFlip,
            _ => return Decision::Pass,
        };
        Decision::Fault(kind)
    }

    fn flip_one_bit(&self, data: &mut [u8]) {
        if data.is_empty() {
            return;
        }
        let mut state = self.lock();
        let bit = state.rng.gen_range(0..data.len() * 8);
        data[bit / 8] ^= 1 << (bit % 8);
        state.counts.bit_flips += 1;
    }

    fn count(&self, update: impl FnOnce(&mut FaultCounts)) {
        update(&mut self.lock().counts);
    }

    fn injected(&self, what: &str) -> DeviceError {
        self.count(|c| c.errors += 1);
        DeviceError::Injected { what: what.into() }
    }

    /// Saves the flushed content of the blocks a write is about to change.
    async fn remember_unflushed(
        &self,
        offset_bytes: u64,
        length_bytes: u64,
    ) -> Result<(), DeviceError> {
        if self.lock().config.unflushed_loss_probability <= 0.0 || length_bytes == 0 {
            return Ok(());
        }
        let block = self.inner.block_size_bytes();
        for index in offset_bytes / block..(offset_bytes + length_bytes) / block {
            {
                let mut state = self.lock();
                let write = state.next_write();
                if let Some(entry) = state.unflushed.get_mut(&index) {
                    entry.1 = write;
                    continue;
                }
            }
            let mut content = vec![0u8; block as usize];
            self.inner.read_at(index * block, &mut content).await?;
            let mut state = self.lock();
            let write = state.next_write();
            state
                .unflushed
                .entry(index)
                .and_modify(|entry| entry.1 = write)
                .or_insert((content, write));
        }
        Ok(())
    }

    async fn spike(&self, duration_us: u64) {
        self.count(|c| c.latency_spikes += 1);
        // The precise timer works under any async runtime, unlike tokio's sleep.
        let deadline = Instant::now() + Duration::from_micros(duration_us);
        PreciseTimer::global().sleep_until(deadline).await;
    }

    async fn read(&self, offset_bytes: u64, buffer: &mut [u8]) -> Result<(), DeviceError> {
        check_request(
            offset_bytes,
            buffer.len() as u64,
            self.size_bytes(),
            self.block_size_bytes(),
        )?;
        if self.is_crashed() {
            return Err(DeviceError::Crashed);
        }
        match self.decide(OpKind::Read, offset_bytes, buffer.len() as u64) {
            Decision::Pass => self.inner.read_at(offset_bytes, buffer).await,
            Decision::Fault(FaultKind::Error | FaultKind::TornWrite { .. }) => {
                Err(self.injected("read EIO"))
            }
            Decision::Fault(FaultKind::Crash) => {
                self.crash_now().await?;
                Err(DeviceError::Crashed)
            }
            Decision::Fault(FaultKind::BitFlip) => {
                self.inner.read_at(offset_bytes, buffer).await?;
                self.flip_one_bit(buffer);
                Ok(())
            }
            Decision::Fault(FaultKind::LatencySpike { duration_us }) => {
                self.spike(duration_us).await;
                self.inner.read_at(offset_bytes, buffer).await
            }
        }
    }

    async fn write(&self, offset_bytes: u64, data: &[u8]) -> Result<(), DeviceError> {
        let length_bytes = data.len() as u64;
        check_request(
            offset_bytes,
            length_bytes,
            self.size_bytes(),
            self.block_size_bytes(),
        )?;
        if self.is_crashed() {
            return Err(DeviceError::Crashed);
        }
        let decision = self.decide(OpKind::Write, offset_bytes, length_bytes);
        if matches!(decision, Decision::Fault(FaultKind::Error)) {
            return Err(self.injected("write EIO"));
        }
        if matches!(decision, Decision::Fault(FaultKind::Crash)) {
            self.crash_now().await?;
            return Err(DeviceError::Crashed);
        }
        self.remember_unflushed(offset_bytes, length_bytes).await?;
        match decision {
            Decision::Fault(FaultKind::TornWrite {
                blocks_written,
                crash,
            }) => {
                let block = self.block_size_bytes();
                let blocks = length_bytes / block;
                let written = match blocks_written {
                    Some(count) => count.min(blocks.saturating_sub(1)),
                    None if blocks > 0 => self.lock().rng.gen_range(0..blocks),
                    None => 0,
                };
                let prefix = (written * block) as usize;
                self.inner.write_at(offset_bytes, &data[..prefix]).await?;
                self.count(|c| c.torn_writes += 1);
                if crash {
                    self.crash_now().await?;
                    Err(DeviceError::Crashed)
                } else {
                    Err(self.injected("torn write"))
                }
            }
            Decision::Fault(FaultKind::BitFlip) => {
                let mut corrupted = data.to_vec();
                self.flip_one_bit(&mut corrupted);
                self.inner.write_at(offset_bytes, &corrupted).await
            }
            Decision::Fault(FaultKind::LatencySpike { duration_us }) => {
                self.spike(duration_us).await;
                self.inner.write_at(offset_bytes, data).await
            }
            _ => self.inner.write_at(offset_bytes, data).await,
        }
    }

    async fn flush_inner(&self) -> Result<(), DeviceError> {
        if self.is_crashed() {
            return Err(DeviceError::Crashed);
        }
        // What this flush covers: the blocks written before it started.
        let covered: Vec<(u64, u64)> = self
            .lock()
            .unflushed
            .iter()
            .map(|(&block, &(_, write))| (block, write))
            .collect();
        match self.decide(OpKind::Flush, 0, 0) {
            Decision::Fault(
                FaultKind::Error | FaultKind::TornWrite { .. } | FaultKind::BitFlip,
            ) => Err(self.injected("flush EIO")),
            Decision::Fault(FaultKind::Crash) => {
                self.crash_now().await?;
                Err(DeviceError::Crashed)
            }
            Decision::Fault(FaultKind::LatencySpike { duration_us }) => {
                self.spike(duration_us).await;
                self.flush_now(covered).await
            }
            Decision::Pass => self.flush_now(covered).await,
        }
    }

    async fn flush_now(&self, covered: Vec<(u64, u64)>) -> Result<(), DeviceError> {
        self.inner.flush().await?;
        let mut state = self.lock();
        // Checked under the state's lock, which a crash takes to revert blocks: a flush that
        // ends after a power loss never reports success.
        if self.is_crashed() {
            return Err(DeviceError::Crashed);
        }
        for (block, write) in covered {
            // A block written again since the flush started keeps its older content as the
            // one a crash reverts to (pessimistic: the flush may have made the first write
            // durable, never the second).
            if state
                .unflushed
                .get(&block)
                .is_some_and(|entry| entry.1 == write)
            {
                state.unflushed.remove(&block);
            }
        }
        Ok(())
    }
}

#[async_trait]
impl Device for FaultyDevice {
    async fn read_at(&self, offset_bytes: u64, buffer: &mut [u8]) -> Result<(), DeviceError> {
        let guard = self.stats.begin(OpKind::Read);
        let length_bytes = buffer.len() as u64;
        let result = self.read(offset_bytes, buffer).await;
        guard.finish(length_bytes, result)
    }

    async fn write_at(&self, offset_bytes: u64, data: &[u8]) -> Result<(), DeviceError> {
        let guard = self.stats.begin(OpKind::Write);
        let result = self.write(offset_bytes, data).await;
        guard.finish(data.len() as u64, result)
    }

    async fn flush(&self) -> Result<(), DeviceError> {
        let guard = self.stats.begin(OpKind::Flush);
        let result = self.flush_inner().await;
        guard.finish(0, result)
    }

    async fn discard(&self, offset_bytes: u64, length_bytes: u64) -> Result<(), DeviceError> {
        let guard = self.stats.begin(OpKind::Discard);
        let result = async {
            check_request(
                offset_bytes,
                length_bytes,
                self.size_bytes(),
                self.block_size_bytes(),
            )?;
            if self.is_crashed() {
                return Err(DeviceError::Crashed);
            }
            match self.decide(OpKind::Discard, offset_bytes, length_bytes) {
                Decision::Pass => {}
                Decision::Fault(FaultKind::Crash) => {
                    self.crash_now().await?;
                    return Err(DeviceError::Crashed);
                }
                Decision::Fault(FaultKind::LatencySpike { duration_us }) => {
                    self.spike(duration_us).await
                }
                Decision::Fault(_) => return Err(self.injected("discard EIO")),
            }
            self.remember_unflushed(offset_bytes, length_bytes).await?;
            self.inner.discard(offset_bytes, length_bytes).await
        }
        .await;
        guard.finish(length_bytes, result)
    }

    /// The inner device's: faults are injected into I/O, not into what the device stores.
    async fn allocation(
        &self,
        offset_bytes: u64,
        length_bytes: u64,
    ) -> Result<Vec<crate::AllocationExtent>, DeviceError> {
        self.inner.allocation(offset_bytes, length_bytes).await
    }

    fn allocation_is_cheap(&self) -> bool {
        self.inner.allocation_is_cheap()
    }

    fn discard_zeroes(&self) -> bool {
        self.inner.discard_zeroes()
    }

    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }

    fn block_size_bytes(&self) -> u64 {
        self.inner.block_size_bytes()
    }

    fn name(&self) -> &str {
        self.stats.name()
    }

    fn kind(&self) -> DeviceKind {
        DeviceKind::Faulty
    }

    fn interrupt_cpus(&self) -> Option<Vec<usize>> {
        self.inner.interrupt_cpus()
    }

    fn stats(&self) -> DeviceStats {
        self.stats.snapshot()
    }
}
