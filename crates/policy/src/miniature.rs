//! Selection by miniature simulation (Waldspurger et al., USENIX ATC 2017, after SHARDS, FAST
//! 2015): the live cache runs whichever candidate policy misses least on the trace's own recent
//! requests, measured by simulating every candidate on a spatially hashed sample of the keys
//! with the cache scaled by the same fraction.
//!
//! **Candidates** ([`DEFAULT_CANDIDATES`]): the fixed policies (LRU, FIFO, ARC, 2Q, S3-FIFO,
//! SIEVE, W-TinyLFU, LIRS) and `strata`'s own fixed shapes (10% DRAM buffer with threshold 2;
//! 1% buffer with threshold 1 and the frequency gate), each built by the catalog: the miniature
//! and the live cache run the same code, only the capacity and the key ids differ.
//!
//! **Sampling** (`rate`, `min_objects`): a key is simulated when the top 32 bits of its hash
//! (`mix64(key ^ seed)`) fall below `rate` x 2^32, so a key is always in or always out of the
//! sample. The miniatures hold `rate` x capacity objects; where that is below `min_objects` the
//! rate rises to `min_objects / capacity` (up to 1, every key), since a miniature of a few dozen
//! objects ranks policies by noise. Sampled keys get dense ids of their own, so a miniature's
//! arrays span the sampled keys only.
//!
//! **Scoring and switching** (`window`, `window_min`, `decay`, `margin`, `z`): every `window` x the
//! miniature capacity sampled requests (at least `window_min`), each candidate's misses in the
//! window are folded into a score decayed by `decay` per window. Where every key is simulated
//! (a cache of at most `min_objects`) the window is `full_window` x the capacity (at least
//! `full_window_min`) with `full_decay`: the same memory in requests, decided ten times as
//! often, because a switch there adopts a full replica (no cold start, no sampling noise),
//! while a sampled selector that switched as often lost up to .026 on P12 (each switch hands
//! over the contents but not the new policy's history). The live cache changes to the
//! candidate with the lowest score when it beats the current one's by more than `margin`
//! (relative); with `z` > 0 it must also win McNemar's paired test against the live one over
//! the sampled requests since the live one was chosen (hits the challenger has and the live one
//! lacks, against the reverse), so a lead within the sample's noise does not cause a switch.
//! A change does not start cold: the new policy is built at full capacity and the
//! old one's contents are handed over, least recently requested first ([`Cache::hand_over`]),
//! so it starts with what is in flash and nothing is read or written; what it does not keep is
//! reported evicted on the request that triggered the change.
//!
//! **Flash-write budget** (`budget`, default off): with a finite budget every candidate's
//! admission includes it, in the miniatures as in the live cache: the eviction policies take
//! [`crate::admission::Budget`] (second miss within 4 x capacity requests, and admissions below
//! the allowance), `strata`'s shapes their own budget. The allowance is `budget` x admit-all
//! LRU's writes, which a hidden sampled LRU estimates (its misses / the rate) for the live
//! cache, and counts exactly for the miniatures.
//!
//! **Cost.** Per request: one hash test and one write to the per-key last-request array; the
//! live cache is one policy, called once. Sampled requests are queued and replayed on the
//! miniatures 64 at a time, one candidate after the other ([`Cache::on_requests`]: one dynamic
//! call per candidate and batch, the candidate's state stays in the processor's cache for the
//! batch), and always at a window's end before the scores are read, so the selector decides
//! exactly as if each had been replayed at once (with a budget, a miniature's allowance is set
//! per batch, from the reference's misses before it). About `rate` x candidates policy
//! requests per request, on caches `rate` times smaller.
//! Memory: per key 8 bytes (last request, for the hand-over) and 4 bytes (sampled id); the
//! miniatures' arrays span `rate` x the keys. [`Cache::counters`] reports switches, sampled
//! requests and the sampled capacity.

use crate::catalog::{build, PolicySpec};
use crate::{mix64, Cache, Effects, Key, Outcome, PolicyError, Request};

/// The candidates by default, in catalog names (the first is the live policy at the start).
pub const DEFAULT_CANDIDATES: &[&str] = &[
    "s3fifo",
    "lru",
    "fifo",
    "arc",
    "2q",
    "sieve",
    "wtinylfu",
    "lirs",
    "strata:adapt=0",
    "strata:adapt=0/small=0.01/threshold=1/gate=1",
];

/// Sampled requests replayed on the miniatures together.
const BATCH: usize = 64;

/// No sampled id yet (a key's entry holds 1 + its sampled id, so a fresh array is zeroed).
const UNSAMPLED: u32 = 0;

/// Settings of [`Miniature`]; `mini:KNOB=VALUE/...` on the command line.
#[derive(Clone, Debug, PartialEq)]
pub struct MiniatureConfig {
    /// Capacity of the live cache, in objects.
    pub capacity: usize,
    /// Candidate policies, catalog names without admission (see [`DEFAULT_CANDIDATES`]).
    pub candidates: Vec<String>,
    /// Share of the keys simulated. Default 0.05.
    pub rate: f64,
    /// Smallest miniature capacity in objects (the rate rises to reach it, up to 1). Default
    /// 512.
    pub min_objects: usize,
    /// Scoring window in multiples of the miniature capacity, counted in sampled requests.
    /// Default 10 (chosen on the shared traces: 2 lost every tuning cell, by up to .009).
    pub window: f64,
    /// Fewest sampled requests per window. Default 1,000.
    pub window_min: u64,
    /// Weight of the past windows' score at each window's end. Default 0.5.
    pub decay: f64,
    /// Relative lead a candidate's score needs over the live one's to take over. Default 0.02.
    pub margin: f64,
    /// Scoring window where every key is simulated (the miniatures are full-scale replicas, a
    /// switch adopts one whole, and there is no sampling noise), in multiples of the capacity.
    /// Default 1: a switch costs little there, so the selector decides ten times as often as
    /// with `window`.
    pub full_window: f64,
    /// Fewest requests per window of full-scale replicas. Default 100 (a 1,000-request trace
    /// of a 19-object cache is decided ten times, not never).
    pub full_window_min: u64,
    /// Weight of the past at each full-scale window's end. Default 0.933 = 0.5^(1/10): the same
    /// memory, counted in requests, as `decay` per `window` at the defaults.
    pub full_decay: f64,
    /// Cache writes at most this times admit-all LRU's; infinite (default) for no budget.
    pub budget: f64,
    /// Paired switching test (0: off, the `margin` rule alone). When positive, a candidate
    /// takes over only when, over the sampled requests since the live one was chosen (decayed
    /// as the scores are), the requests it hit and the live one missed (`gained`) exceed those
    /// it missed and the live one hit (`lost`) by `z` standard deviations of a tie
    /// (McNemar's test: `gained - lost > z x sqrt(gained + lost)`), and its score leads by
    /// `margin`. Requests both hit or both missed say nothing about which is better, so a
    /// difference the sample cannot resolve does not cause a switch (and its cold start).
    pub z: f64,
    /// Salt of the sampling hash. Default 0.
    pub seed: u64,
}

impl MiniatureConfig {
    /// Defaults for a cache of `capacity` objects.
    pub fn new(capacity: usize) -> Self {
        MiniatureConfig {
            capacity,
            candidates: DEFAULT_CANDIDATES.iter().map(|c| c.to_string()).collect(),
            rate: 0.05,
            min_objects: 512,
            window: 10.0,
            window_min: 1_000,
            decay: 0.5,
            margin: 0.02,
            full_window: 1.0,
            full_window_min: 100,
            full_decay: 0.933,
            budget: f64::INFINITY,
            z: 0.0,
            seed: 0,
        }
    }

    /// The catalog name of candidate `name` with the budget as part of its admission.
    fn budgeted(&self, name: &str) -> String {
        if self.budget.is_infinite() {
            if name.starts_with("strata") {
                return join_knob(name, "budget=inf");
            }
            return name.to_string();
        }
        if name.starts_with("strata") {
            join_knob(name, &format!("budget={}", self.budget))
        } else {
            format!("{name}+budget")
        }
    }
}

/// `strata` + `knob`, or `strata:a=1` + `knob` as `strata:a=1/knob`.
fn join_knob(name: &str, knob: &str) -> String {
    if name.contains(':') {
        format!("{name}/{knob}")
    } else {
        format!("{name}:{knob}")
    }
}

/// The live cache and its miniatures.
pub struct Miniature {
    config: MiniatureConfig,
    /// Catalog names of the candidates as built (with the budget).
    names: Vec<String>,
    live: Box<dyn Cache>,
    leader: usize,
    minis: Vec<Box<dyn Cache>>,
    /// Admit-all LRU in miniature, for the budget's allowance (only with a budget).
    reference: Option<Box<dyn Cache>>,
    reference_misses: u64,
    scratch: Effects,
    mini_capacity: usize,
    rate: f64,
    sample_below: u64,
    sampled_ids: Vec<u32>,
    sampled_keys: u32,
    window_misses: Vec<u64>,
    scores: Vec<f64>,
    /// Per candidate, sampled requests it hit and the live one's candidate missed, and the
    /// reverse, since the live one was chosen (decayed per window): the paired test's counts.
    gained: Vec<f64>,
    lost: Vec<f64>,
    /// Sampled requests not yet replayed on the miniatures (at most [`BATCH`]; replayed at
    /// the latest at a window's end, before any decision).
    batch: Vec<Request>,
    /// Outcomes of one miniature on the batch (reused).
    outcomes: Vec<Outcome>,
    /// Per request of the batch, bit `i` set when candidate `i` hit it (the paired test's
    /// input).
    hit_bits: Vec<u64>,
    window_len: u64,
    window_left: u64,
    /// Per key: 1 + the sequence number of its last request (0: never requested).
    last_seen: Vec<u64>,
    pending: Option<usize>,
    /// Cache writes of the live cache so far, and of each miniature.
    writes: u64,
    mini_writes: Vec<u64>,
    /// Whether every key is simulated (the miniatures are full-scale replicas on the real keys).
    full: bool,
    switches: u64,
    sampled_requests: u64,
    key_space: usize,
}

impl std::fmt::Debug for Miniature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Miniature")
            .field("leader", &self.names[self.leader])
            .field("mini_capacity", &self.mini_capacity)
            .field("rate", &self.rate)
            .field("switches", &self.switches)
            .finish()
    }
}

impl Miniature {
    /// The selector with `config.candidates[0]` live at the start.
    pub fn new(config: MiniatureConfig, key_space: usize) -> Result<Self, PolicyError> {
        let capacity = config.capacity;
        if config.candidates.is_empty() {
            return Err(PolicyError::InvalidParameter {
                name: "candidates",
                reason: "at least one".into(),
            });
        }
        if config.candidates.len() > 64 {
            return Err(PolicyError::InvalidParameter {
                name: "candidates",
                reason: "at most 64".into(),
            });
        }
        if config.candidates.iter().any(|c| c.starts_with("mini")) {
            return Err(PolicyError::InvalidParameter {
                name: "candidates",
                reason: "a miniature cannot select among miniatures".into(),
            });
        }
        let rate = config
            .rate
            .max(config.min_objects as f64 / capacity as f64)
            .min(1.0);
        let mini_capacity = ((capacity as f64 * rate).round() as usize).max(1);
        let mini_keys = if rate >= 1.0 {
            key_space
        } else {
            ((key_space as f64 * rate) as usize).max(16)
        };
        let names: Vec<String> = config
            .candidates
            .iter()
            .map(|c| config.budgeted(c))
            .collect();
        let minis = names
            .iter()
            .map(|name| build(&PolicySpec::new(name, mini_capacity, mini_keys)))
            .collect::<Result<Vec<_>, _>>()?;
        let reference = if config.budget.is_finite() {
            Some(build(&PolicySpec::new("lru", mini_capacity, mini_keys))?)
        } else {
            None
        };
        let live = build(&PolicySpec::new(&names[0], capacity, key_space))?;
        let full = rate >= 1.0;
        let (window, window_min) = if full {
            (config.full_window, config.full_window_min)
        } else {
            (config.window, config.window_min)
        };
        let window_len = ((window * mini_capacity as f64) as u64).max(window_min.max(1));
        let count = names.len();
        Ok(Miniature {
            sample_below: (rate * (1u64 << 32) as f64) as u64,
            names,
            live,
            leader: 0,
            minis,
            reference,
            reference_misses: 0,
            scratch: Effects::default(),
            mini_capacity,
            rate,
            // Presized to the expected keys (zeroed pages from the allocator): grown by
            // doubling a request at a time they cost a copy and a page fault per page, a
            // quarter of the selector's time on a 114,000-request trace.
            sampled_ids: if full {
                Vec::new()
            } else {
                vec![UNSAMPLED; key_space]
            },
            sampled_keys: 0,
            window_misses: vec![0; count],
            scores: vec![0.0; count],
            gained: vec![0.0; count],
            lost: vec![0.0; count],
            batch: Vec::with_capacity(BATCH),
            outcomes: Vec::with_capacity(BATCH),
            hit_bits: Vec::with_capacity(BATCH),
            window_len,
            window_left: window_len,
            last_seen: vec![0; key_space],
            pending: None,
            writes: 0,
            mini_writes: vec![0; count],
            full,
            switches: 0,
            sampled_requests: 0,
            key_space,
            config,
        })
    }

    /// The candidate the live cache runs now (its catalog name).
    pub fn leader(&self) -> &str {
        &self.names[self.leader]
    }

    /// The sampled id of `key`, if the key is in the sample.
    fn sampled_id(&mut self, key: Key) -> Option<Key> {
        if self.full {
            return Some(key);
        }
        if mix64(u64::from(key) ^ self.config.seed) >> 32 >= self.sample_below {
            return None;
        }
        let index = key as usize;
        if index >= self.sampled_ids.len() {
            self.sampled_ids
                .resize((index + 1).next_power_of_two(), UNSAMPLED);
        }
        if self.sampled_ids[index] == UNSAMPLED {
            self.sampled_keys += 1;
            self.sampled_ids[index] = self.sampled_keys;
        }
        Some(self.sampled_ids[index] - 1)
    }

    /// Queues a sampled request for the miniatures; at a window's end replays the queue and
    /// scores them.
    fn simulate(&mut self, request: &Request, id: Key) {
        self.batch.push(Request {
            key: id,
            next_seq: u64::MAX,
            seq: self.sampled_requests,
            ..*request
        });
        self.sampled_requests += 1;
        self.window_left -= 1;
        if self.window_left == 0 {
            self.window_left = self.window_len;
            self.replay_batch();
            self.end_window();
        } else if self.batch.len() == BATCH {
            self.replay_batch();
        }
    }

    /// Replays the queued sampled requests on every miniature, one candidate after another
    /// (one dynamic call per candidate and batch, and each candidate's state stays in the
    /// processor's cache while it runs).
    fn replay_batch(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.batch);
        // The budget's allowance as of the batch's start: the reference's misses so far. Each
        // budgeted admission spends from it, so no miniature exceeds it within the batch.
        let allowance = self.config.budget * self.reference_misses as f64;
        if let Some(reference) = &mut self.reference {
            self.scratch.clear();
            self.outcomes.clear();
            reference.on_requests(&batch, &mut self.scratch, &mut self.outcomes);
            self.reference_misses += self.outcomes.iter().filter(|o| !o.is_hit()).count() as u64;
        }
        self.hit_bits.clear();
        self.hit_bits.resize(batch.len(), 0);
        for (i, mini) in self.minis.iter_mut().enumerate() {
            self.scratch.clear();
            self.outcomes.clear();
            if self.reference.is_some() {
                mini.allow_writes(allowance - self.mini_writes[i] as f64);
            }
            mini.on_requests(&batch, &mut self.scratch, &mut self.outcomes);
            let mut misses = 0;
            let mut admissions = 0;
            for (bits, outcome) in self.hit_bits.iter_mut().zip(&self.outcomes) {
                let hit = outcome.is_hit();
                misses += u64::from(!hit);
                admissions += u64::from(matches!(
                    outcome,
                    Outcome::Admitted | Outcome::AdmittedAfterProxy
                ));
                *bits |= u64::from(hit) << i;
            }
            self.window_misses[i] += misses;
            self.mini_writes[i] += admissions + self.scratch.promoted.len() as u64;
        }
        if self.config.z > 0.0 {
            let leader = self.leader;
            for &bits in &self.hit_bits {
                let leader_hit = bits >> leader & 1 == 1;
                for (i, (gained, lost)) in self.gained.iter_mut().zip(&mut self.lost).enumerate() {
                    let hit = bits >> i & 1 == 1;
                    *gained += f64::from(u8::from(hit && !leader_hit));
                    *lost += f64::from(u8::from(!hit && leader_hit));
                }
            }
        }
        self.batch = batch;
        self.batch.clear();
    }

    fn end_window(&mut self) {
        let decay = if self.full {
            self.config.full_decay
        } else {
            self.config.decay
        };
        for (score, misses) in self.scores.iter_mut().zip(&mut self.window_misses) {
            *score = *score * decay + std::mem::take(misses) as f64;
        }
        for (gained, lost) in self.gained.iter_mut().zip(&mut self.lost) {
            *gained *= decay;
            *lost *= decay;
        }
        let best = (0..self.scores.len())
            .min_by(|&a, &b| self.scores[a].total_cmp(&self.scores[b]))
            .unwrap_or(self.leader);
        let z = self.config.z;
        let significant = z <= 0.0 || {
            let (gained, lost) = (self.gained[best], self.lost[best]);
            gained - lost > z * (gained + lost).sqrt()
        };
        if best != self.leader
            && significant
            && self.scores[best] < self.scores[self.leader] * (1.0 - self.config.margin)
        {
            self.pending = Some(best);
        }
    }

    /// Builds candidate `index` at full capacity and hands it the live contents.
    fn switch_to(&mut self, index: usize, request: &Request, effects: &mut Effects) {
        let Ok(fresh) = build(&PolicySpec::new(
            &self.names[index],
            self.config.capacity,
            self.key_space,
        )) else {
            return;
        };
        let adopted = if self.full {
            self.minis[index].clone_box()
        } else {
            None
        };
        let adopting = adopted.is_some();
        let old = std::mem::replace(&mut self.live, adopted.unwrap_or(fresh));
        let mut held: Vec<(u64, Key)> = self
            .last_seen
            .iter()
            .enumerate()
            .filter(|&(key, &seen)| seen != 0 && old.contains(key as Key))
            .map(|(key, &seen)| (seen, key as Key))
            .collect();
        held.sort_unstable();
        if adopting {
            // The replica's state is the policy's own (ghosts, frequencies, queues): it keeps
            // it, less the objects it holds that the executor does not.
            for key in 0..self.last_seen.len() as Key {
                if self.live.contains(key) && !old.contains(key) {
                    self.live.invalidate(key);
                }
            }
            effects.evicted.extend(
                held.iter()
                    .map(|&(_, key)| key)
                    .filter(|&k| !self.live.contains(k)),
            );
            self.leader = index;
            self.switches += 1;
            self.restart_paired_counts();
            return;
        }
        if let Some(allowance) = self.live_allowance() {
            self.live.allow_writes(allowance);
        }
        for &(seen, key) in &held {
            self.scratch.clear();
            let handed = Request {
                key,
                seq: seen - 1,
                next_seq: u64::MAX,
                write: false,
                ..*request
            };
            self.live.hand_over(&handed, &mut self.scratch);
        }
        effects.evicted.extend(
            held.iter()
                .map(|&(_, key)| key)
                .filter(|&k| !self.live.contains(k)),
        );
        self.leader = index;
        self.switches += 1;
        self.restart_paired_counts();
    }

    /// The paired test compares with the live candidate: a new one starts it afresh.
    fn restart_paired_counts(&mut self) {
        self.gained.iter_mut().for_each(|g| *g = 0.0);
        self.lost.iter_mut().for_each(|l| *l = 0.0);
    }

    /// The live cache's remaining writes: `budget` x admit-all LRU's estimated writes, less
    /// those made.
    fn live_allowance(&self) -> Option<f64> {
        self.reference.as_ref().map(|_| {
            self.config.budget * self.reference_misses as f64 / self.rate - self.writes as f64
        })
    }
}

impl Cache for Miniature {
    fn on_request(&mut self, request: &Request, effects: &mut Effects) -> Outcome {
        let index = request.key as usize;
        if index >= self.last_seen.len() {
            self.last_seen.resize((index + 1).next_power_of_two(), 0);
        }
        self.last_seen[index] = request.seq + 1;
        if let Some(id) = self.sampled_id(request.key) {
            self.simulate(request, id);
        }
        if let Some(allowance) = self.live_allowance() {
            self.live.allow_writes(allowance);
        }
        let promoted = effects.promoted.len();
        let outcome = self.live.on_request(request, effects);
        self.writes += (effects.promoted.len() - promoted) as u64
            + u64::from(matches!(
                outcome,
                Outcome::Admitted | Outcome::AdmittedAfterProxy
            ));
        if let Some(index) = self.pending.take() {
            self.switch_to(index, request, effects);
        }
        outcome
    }
    fn len(&self) -> usize {
        self.live.len()
    }
    fn capacity(&self) -> usize {
        self.config.capacity
    }
    fn contains(&self, key: Key) -> bool {
        self.live.contains(key)
    }
    fn name(&self) -> String {
        format!(
            "mini(rate={:.4},objects={},budget={})",
            self.rate, self.mini_capacity, self.config.budget
        )
    }
    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("switches", self.switches),
            ("sampled_requests", self.sampled_requests),
            ("mini_capacity_objects", self.mini_capacity as u64),
            ("candidates", self.minis.len() as u64),
        ]
    }
}

#[cfg(test)]
mod tests;
