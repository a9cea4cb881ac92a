//! Builds any policy from its command-line name: `NAME[+ADMISSION]`, where NAME is one of
//! [`POLICY_NAMES`] and ADMISSION (for the eviction policies) one of `second-hit`, `bloom`,
//! `prob<P>` (e.g. `prob0.25`) or `tinylfu`.

use crate::admission::{AdmitAll, BloomAdmission, Filtered, Probabilistic, SecondHit, TinyLfu};
use crate::ceph::{CephTier, CephTierConfig, TemperatureEviction};
use crate::eviction::{Arc, Belady, Eviction, Fifo, Lru, S3Fifo, Sieve, TwoQ, WTinyLfu};
use crate::hottable::{HotTable, HotTableConfig, Period};
use crate::strata::{Strata, StrataConfig};
use crate::{Cache, PolicyError};

/// Policy names accepted by [`build`].
pub const POLICY_NAMES: &[&str] = &[
    "lru",
    "fifo",
    "arc",
    "2q",
    "s3fifo",
    "wtinylfu",
    "sieve",
    "belady",
    "ceph",
    "ceph-corrected",
    "hottable",
    "strata",
];

/// Largest capacity [`build`] accepts: keys are 32-bit, so a larger cache could never fill.
/// Capacities up to it cost memory in proportion to the key space, not to the capacity (the
/// sketches sized from the capacity store only the slots their keys write, see
/// `sketch::Slots`), so a cache far larger than its trace simulates exactly as given.
pub const CAPACITY_MAX_OBJECTS: u64 = 1 << 32;

/// Everything needed to build a policy.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicySpec {
    /// `NAME[+ADMISSION]`.
    pub name: String,
    /// Capacity in objects.
    pub capacity: usize,
    /// Number of distinct keys expected (presizes arrays; keys beyond it still work).
    pub key_space: usize,
    /// Hot table period. Default one minute.
    pub period: Period,
    /// Hot table smoothing constant `a`. Default 0.5.
    pub smoothing: f64,
    /// Hot table threshold `H`. Default 0.5.
    pub threshold: f64,
    /// Seed for randomised policies. Default 42.
    pub seed: u64,
    /// Ceph tier settings (capacity is overwritten); default the `ceph-seed003` preset.
    pub ceph: Option<CephTierConfig>,
}

impl PolicySpec {
    /// Defaults for `name` at `capacity` objects.
    pub fn new(name: &str, capacity: usize, key_space: usize) -> Self {
        PolicySpec {
            name: name.to_string(),
            capacity,
            key_space,
            period: Period::Millis(60_000),
            smoothing: 0.5,
            threshold: 0.5,
            seed: 42,
            ceph: None,
        }
    }
}

fn with_admission<E: Eviction + 'static>(
    eviction: E,
    admission: Option<&str>,
    spec: &PolicySpec,
) -> Result<Box<dyn Cache>, PolicyError> {
    let capacity = spec.capacity;
    Ok(match admission {
        None => Box::new(Filtered::new(eviction, AdmitAll)),
        Some("second-hit") => {
            Box::new(Filtered::new(eviction, SecondHit::new(4 * capacity as u64)))
        }
        Some("bloom") => Box::new(Filtered::new(
            eviction,
            BloomAdmission::new(2 * capacity, 0.01, spec.key_space),
        )),
        Some("tinylfu") => Box::new(Filtered::new(
            eviction,
            TinyLfu::new(capacity, spec.key_space),
        )),
        Some(other) => match other.strip_prefix("prob").map(str::parse::<f64>) {
            Some(Ok(p)) if (0.0..=1.0).contains(&p) => {
                Box::new(Filtered::new(eviction, Probabilistic::new(p, spec.seed)))
            }
            _ => {
                return Err(PolicyError::InvalidParameter {
                    name: "admission",
                    reason: format!("`{other}`: expected second-hit, bloom, tinylfu or prob<P>"),
                })
            }
        },
    })
}

/// `strata` takes its knobs after a colon: `strata:small=0.1/threshold=2/gate=0/adapt=1/budget=0.33`.
fn strata_config(spec: &PolicySpec, _admission: Option<&str>) -> Result<StrataConfig, PolicyError> {
    let mut config = StrataConfig::new(spec.capacity);
    let Some((_, knobs)) = spec.name.split_once(':') else {
        return Ok(config);
    };
    for knob in knobs.split('/').filter(|k| !k.is_empty()) {
        let (key, value) = knob.split_once('=').unwrap_or((knob, ""));
        let bad = || PolicyError::InvalidParameter {
            name: "strata",
            reason: format!("bad knob `{knob}`"),
        };
        let number: f64 = value.parse().map_err(|_| bad())?;
        match key {
            "small" => config.small = number.clamp(0.0, 0.9),
            "threshold" => config.threshold = number.clamp(0.0, 255.0) as u8,
            "ghost" => config.ghost = number.max(0.0),
            "gate" => config.gate = number != 0.0,
            "gate_shapes" => config.gate_shapes = number != 0.0,
            "adapt" => config.adapt = number != 0.0,
            "follow" => {
                config.follow = number != 0.0;
                config.follow_frequency = number >= 2.0;
            }
            "follow_small" => config.follow_small = number.clamp(0.0, 0.9),
            "margin" => config.switch_margin = number.clamp(0.0, 1.0),
            "epoch_min" => config.epoch_min = number.clamp(1.0, 1e12) as u64,
            "learn" => config.learn = number != 0.0,
            "sample" => config.sample_objects = number.clamp(0.0, 1e12) as usize,
            "unhit" => config.admit_unhit = number != 0.0,
            "epoch" => config.epoch = number.max(0.0),
            "decay" => config.decay = number.clamp(0.0, 1.0),
            "budget" => config.budget = number.max(0.0),
            "split" => config.split = number != 0.0,
            "persist" => config.persist = number.clamp(1.0, 1e6) as u32,
            "switch_cost" => config.switch_cost = number.max(0.0),
            "shadow_budget" => config.shadow_budget = number != 0.0,
            "reset" => config.reset = number.max(0.0),
            "dwell" => config.dwell = number.clamp(0.0, 1e6) as u32,
            "split_shapes" => config.split_shapes = number != 0.0,
            "split_max" => config.split_max = number.clamp(0.0, 0.9),
            "split_min" => config.split_min = number.clamp(0.0, 0.9),
            "main_ghost_admit" => config.main_ghost_admit = number != 0.0,
            "trials" => config.trials = number.clamp(0.0, 1e9) as u32,
            "adopt" => config.adopt = number != 0.0,
            "fixed_trial" => config.fixed_trial = number != 0.0,
            "trials_margin" => config.trials_margin = number.clamp(0.0, 1.0),
            "tiny" => config.tiny = number.clamp(0.0, 1e12) as usize,
            "tiny_small" => config.tiny_small = number.clamp(0.0, 0.9),
            "tiny_candidate" => config.tiny_candidate = number.clamp(0.0, 0.9),
            "tiny_shapes" => config.tiny_shapes = number != 0.0,
            "trials_decay" => config.trials_decay = number.clamp(0.0, 1.0),
            "lru_buffer" => config.lru_buffer = number != 0.0,
            "lru_trial" => config.lru_trial = number.clamp(0.0, 3.0) as u32,
            "lru_trial_margin" => config.lru_trial_margin = number.clamp(0.0, 1.0),
            "lru_trial_margin_sampled" => config.lru_trial_margin_sampled = number.clamp(0.0, 1.0),
            "lru_shadows" => config.lru_shadows = number != 0.0,
            "lru_below" => config.lru_below = number.clamp(0.0, 1.0),
            "main_frequency_cap" => config.main_frequency_cap = number.clamp(1.0, 255.0) as u8,
            "lru_frequency_cap" => config.lru_frequency_cap = number.clamp(0.0, 255.0) as u8,
            "lru_frequency_cap_tiny" => config.lru_frequency_cap_tiny = number != 0.0,
            "lru_trial_threshold" => config.lru_trial_threshold = number.clamp(0.0, 255.0) as u8,
            "lru_trial_threshold_sampled" => config.lru_trial_threshold_sampled = number != 0.0,
            "scan_trial" => config.scan_trial = number.clamp(0.0, 3.0) as u32,
            "scan_start" => config.scan_start = number.clamp(0.0, 2.0) as u8,
            "scan_trial_margin" => config.scan_trial_margin = number.clamp(0.0, 1.0),
            "scan_leave_margin" => config.scan_leave_margin = number.min(1.0),
            "scan_adopt" => config.scan_adopt = number != 0.0,
            "scan_watch" => config.scan_watch = number != 0.0,
            "scan_below" => config.scan_below = number.clamp(0.0, 1e12) as usize,
            "dram_only" => config.dram_only = number != 0.0,
            "trials_z" => config.trials_z = number.max(0.0),
            "trials_z_min" => config.trials_z_min = number.clamp(0.0, 1e12) as u64,
            "trials_adopt" => config.trials_adopt = number != 0.0,
            "trials_z_sampled" => config.trials_z_sampled = number != 0.0,
            "trials_shape" => config.trials_shape = number != 0.0,
            "trials_converge" => config.trials_converge = number != 0.0,
            "never_frequency_cap" => config.never_frequency_cap = number.clamp(0.0, 255.0) as u8,
            _ => return Err(bad()),
        }
    }
    Ok(config)
}

/// Builds the policy named by `spec.name`.
pub fn build(spec: &PolicySpec) -> Result<Box<dyn Cache>, PolicyError> {
    if spec.capacity == 0 {
        return Err(PolicyError::InvalidParameter {
            name: "capacity",
            reason: "must be at least 1 object".into(),
        });
    }
    if spec.capacity as u64 > CAPACITY_MAX_OBJECTS {
        return Err(PolicyError::InvalidParameter {
            name: "capacity",
            reason: format!(
                "{} objects is more than the {CAPACITY_MAX_OBJECTS} distinct keys a policy can \
                 see (keys are 32-bit)",
                spec.capacity
            ),
        });
    }
    let lowered = spec.name.to_ascii_lowercase();
    let lowered = lowered.split(':').next().unwrap_or_default().to_string();
    let (base, admission) = match lowered.split_once('+') {
        Some((base, admission)) => (base, Some(admission)),
        None => (lowered.as_str(), None),
    };
    let (capacity, keys) = (spec.capacity, spec.key_space);
    let standalone = |cache: Box<dyn Cache>| -> Result<Box<dyn Cache>, PolicyError> {
        match admission {
            None => Ok(cache),
            Some(_) => Err(PolicyError::InvalidParameter {
                name: "admission",
                reason: format!("`{base}` has its own admission; use it without +ADMISSION"),
            }),
        }
    };
    match base {
        "lru" => with_admission(Lru::new(capacity, keys), admission, spec),
        "fifo" => with_admission(Fifo::new(capacity, keys), admission, spec),
        "arc" => with_admission(Arc::new(capacity, keys), admission, spec),
        "2q" => with_admission(TwoQ::new(capacity, keys), admission, spec),
        "s3fifo" => with_admission(
            S3Fifo::new(capacity, keys, Default::default()),
            admission,
            spec,
        ),
        "wtinylfu" => with_admission(
            WTinyLfu::new(capacity, keys, Default::default()),
            admission,
            spec,
        ),
        "sieve" => with_admission(Sieve::new(capacity, keys), admission, spec),
        "belady" => with_admission(Belady::new(capacity, keys), admission, spec),
        "ceph" | "ceph-seed003" | "ceph-corrected" | "ceph-fast" => {
            let mut config = spec
                .ceph
                .clone()
                .unwrap_or_else(|| CephTierConfig::seed003(capacity));
            config.capacity = capacity;
            config.target_max_objects = capacity;
            if base == "ceph-corrected" {
                config.temperature = TemperatureEviction::Corrected;
            }
            if base == "ceph-fast" {
                // Seed 003's tier with one-minute hit sets (seed 000's period), so that recency
                // can be earned within a short trace; ages unchanged.
                config.hit_set_period_s = 60;
            }
            standalone(Box::new(CephTier::new(config, keys)))
        }
        "hottable" => {
            let config = HotTableConfig {
                capacity,
                period: spec.period,
                smoothing: spec.smoothing,
                threshold: spec.threshold,
            };
            standalone(Box::new(HotTable::new(config, keys)))
        }
        "strata" => standalone(Box::new(Strata::new(strata_config(spec, admission)?, keys))),
        _ => Err(PolicyError::UnknownPolicy(spec.name.clone())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Effects, Request};

    #[test]
    fn every_name_builds_and_respects_capacity() {
        for name in POLICY_NAMES.iter().copied().chain([
            "lru+second-hit",
            "sieve+tinylfu",
            "arc+bloom",
            "fifo+prob0.5",
        ]) {
            let mut spec = PolicySpec::new(name, 16, 256);
            spec.period = Period::Requests(50);
            let mut cache = build(&spec).unwrap_or_else(|e| panic!("{name}: {e}"));
            let mut effects = Effects::default();
            let mut next = vec![u64::MAX; 256];
            let keys: Vec<u32> = (0..4000u64)
                .map(|i| (crate::mix64(i) % 97) as u32)
                .collect();
            let mut next_seq = vec![u64::MAX; keys.len()];
            for (i, &k) in keys.iter().enumerate().rev() {
                next_seq[i] = next[k as usize];
                next[k as usize] = i as u64;
            }
            for (i, &key) in keys.iter().enumerate() {
                effects.clear();
                let request = Request {
                    key,
                    seq: i as u64,
                    now_ms: i as u64 * 1000,
                    size_bytes: 1,
                    write: i % 4 == 0,
                    next_seq: next_seq[i],
                };
                let outcome = cache.on_request(&request, &mut effects);
                assert!(cache.len() <= cache.capacity(), "{name}");
                if outcome == crate::Outcome::Hit || outcome == crate::Outcome::Admitted {
                    assert!(
                        cache.contains(key)
                            || name.starts_with("ceph")
                            || name.starts_with("wtinylfu"),
                        "{name} lost {key}"
                    );
                }
            }
        }
        assert!(matches!(
            build(&PolicySpec::new("nope", 1, 1)),
            Err(PolicyError::UnknownPolicy(_))
        ));
    }

    /// A cache of 4 billion objects over 1,000 keys: every policy builds and runs in memory
    /// proportional to the keys (the sketches sized from the capacity used to allocate
    /// hundreds of gigabytes and abort), and nothing is evicted.
    #[test]
    fn a_cache_far_larger_than_its_keys_runs_in_little_memory() {
        for name in POLICY_NAMES.iter().copied().chain([
            "lru+bloom",
            "lru+tinylfu",
            "lru+second-hit",
            "strata:epoch_min=1000000000",
        ]) {
            let spec = PolicySpec::new(name, 4_000_000_000, 1_000);
            let mut cache = build(&spec).unwrap_or_else(|e| panic!("{name}: {e}"));
            let mut effects = Effects::default();
            for seq in 0..20_000u64 {
                let request = Request {
                    key: (crate::mix64(seq) % 1_000) as u32,
                    seq,
                    now_ms: seq,
                    size_bytes: 1,
                    ..Request::default()
                };
                cache.on_request(&request, &mut effects);
            }
            assert!(effects.evicted.is_empty(), "{name}");
        }
        let too_large = PolicySpec::new("lru", (CAPACITY_MAX_OBJECTS + 1) as usize, 1);
        assert!(build(&too_large).is_err());
    }
}
