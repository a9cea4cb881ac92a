//! Builds any policy from its command-line name: `NAME[+ADMISSION]`, where NAME is one of
//! [`POLICY_NAMES`] and ADMISSION (for the eviction policies) one of `second-hit`, `bloom`,
//! `prob<P>` (e.g. `prob0.25`), `tinylfu` or `budget` (second hit within a write allowance set
//! by an owner: the miniature-simulation selector).

use crate::admission::{
    AdmitAll, BloomAdmission, Budget, Filtered, Probabilistic, SecondHit, TinyLfu,
};
use crate::ceph::{CephTier, CephTierConfig, TemperatureEviction};
use crate::eviction::{Arc, Belady, Eviction, Fifo, Lirs, Lru, S3Fifo, Sieve, TwoQ, WTinyLfu};
use crate::hottable::{HotTable, HotTableConfig, Period};
use crate::miniature::{Miniature, MiniatureConfig};
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
    "lirs",
    "belady",
    "ceph",
    "ceph-seed003",
    "ceph-corrected",
    "ceph-fast",
    "hottable",
    "strata",
    "mini",
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
    /// Capacity in bytes, when the cache size was given in bytes (Ceph's tier then sets
    /// `target_max_bytes` to it, beside `target_max_objects` = `capacity`). Default none.
    pub capacity_bytes: Option<u64>,
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
            capacity_bytes: None,
            key_space,
            period: Period::Millis(60_000),
            smoothing: 0.5,
            threshold: 0.5,
            seed: 42,
            ceph: None,
        }
    }
}

fn with_admission<E: Eviction + Clone + 'static>(
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
        Some("budget") => Box::new(Filtered::new(eviction, Budget::new(4 * capacity as u64))),
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
                    reason: format!(
                        "`{other}`: expected second-hit, bloom, tinylfu, budget or prob<P> with P \
                         in [0, 1] (e.g. prob0.25)"
                    ),
                })
            }
        },
    })
}

/// What a knob accepts.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Accepts {
    /// 0 (off) or 1 (on).
    Flag,
    /// A whole number in `[min, max]`.
    Whole(f64, f64),
    /// A number in `[min, max]` (`max` may be infinite).
    Real(f64, f64),
}

impl Accepts {
    fn admits(self, number: f64) -> bool {
        match self {
            Accepts::Flag => number == 0.0 || number == 1.0,
            Accepts::Whole(min, max) => number.fract() == 0.0 && (min..=max).contains(&number),
            Accepts::Real(min, max) => (min..=max).contains(&number),
        }
    }

    fn describe(self) -> String {
        match self {
            Accepts::Flag => "0 or 1".into(),
            Accepts::Whole(min, max) => format!("a whole number in [{min}, {max}]"),
            Accepts::Real(min, max) => format!("a number in [{min}, {max}]"),
        }
    }
}

/// `strata`'s knobs and their ranges (each a field of [`StrataConfig`], which documents it).
/// The ranges are what the policy means by the knob (shares of the capacity below 0.9, 8-bit
/// thresholds and caps, bit sets of the trials there are); the upper limits of counts keep a
/// knob from asking for more than a trace can hold (keys are 32-bit; `epoch_min` at most 10^9
/// requests). `budget=inf` runs without a write budget.
const STRATA_KNOBS: &[(&str, Accepts)] = &[
    ("small", Accepts::Real(0.0, 0.9)),
    ("threshold", Accepts::Whole(0.0, 255.0)),
    ("ghost", Accepts::Real(0.0, 100.0)),
    ("gate", Accepts::Flag),
    ("gate_shapes", Accepts::Flag),
    ("adapt", Accepts::Flag),
    ("follow", Accepts::Whole(0.0, 2.0)),
    ("follow_small", Accepts::Real(0.0, 0.9)),
    ("margin", Accepts::Real(0.0, 1.0)),
    ("epoch_min", Accepts::Whole(1.0, 1e9)),
    ("learn", Accepts::Flag),
    ("sample", Accepts::Whole(0.0, 4294967296.0)),
    ("unhit", Accepts::Flag),
    ("epoch", Accepts::Real(0.0, 1e6)),
    ("decay", Accepts::Real(0.0, 1.0)),
    ("budget", Accepts::Real(0.0, f64::INFINITY)),
    ("split", Accepts::Flag),
    ("persist", Accepts::Whole(1.0, 1e6)),
    ("switch_cost", Accepts::Real(0.0, 1e6)),
    ("shadow_budget", Accepts::Flag),
    ("reset", Accepts::Real(0.0, 1e6)),
    ("dwell", Accepts::Whole(0.0, 1e6)),
    ("split_shapes", Accepts::Flag),
    ("split_max", Accepts::Real(0.0, 0.9)),
    ("split_min", Accepts::Real(0.0, 0.9)),
    ("main_ghost_admit", Accepts::Flag),
    ("trials", Accepts::Whole(0.0, 4294967295.0)),
    ("adopt", Accepts::Flag),
    ("fixed_trial", Accepts::Flag),
    ("trials_margin", Accepts::Real(0.0, 1.0)),
    ("tiny", Accepts::Whole(0.0, 4294967296.0)),
    ("tiny_small", Accepts::Real(0.0, 0.9)),
    ("tiny_candidate", Accepts::Real(0.0, 0.9)),
    ("tiny_shapes", Accepts::Flag),
    ("trials_decay", Accepts::Real(0.0, 1.0)),
    ("lru_buffer", Accepts::Flag),
    ("lru_trial", Accepts::Whole(0.0, 3.0)),
    ("lru_trial_margin", Accepts::Real(0.0, 1.0)),
    ("lru_trial_margin_sampled", Accepts::Real(0.0, 1.0)),
    ("lru_shadows", Accepts::Flag),
    ("lru_below", Accepts::Real(0.0, 1.0)),
    ("main_frequency_cap", Accepts::Whole(1.0, 255.0)),
    ("lru_frequency_cap", Accepts::Whole(0.0, 255.0)),
    ("lru_frequency_cap_tiny", Accepts::Flag),
    ("lru_trial_threshold", Accepts::Whole(0.0, 255.0)),
    ("lru_trial_threshold_sampled", Accepts::Flag),
    ("scan_trial", Accepts::Whole(0.0, 3.0)),
    ("scan_start", Accepts::Whole(0.0, 2.0)),
    ("scan_trial_margin", Accepts::Real(0.0, 1.0)),
    ("scan_leave_margin", Accepts::Real(-1.0, 1.0)),
    ("scan_adopt", Accepts::Flag),
    ("scan_watch", Accepts::Flag),
    ("scan_below", Accepts::Whole(0.0, 4294967296.0)),
    ("dram_only", Accepts::Flag),
    ("trials_z", Accepts::Real(0.0, 1e6)),
    ("trials_z_min", Accepts::Whole(0.0, 1e12)),
    ("trials_adopt", Accepts::Flag),
    ("trials_z_sampled", Accepts::Flag),
    ("trials_shape", Accepts::Flag),
    ("trials_converge", Accepts::Flag),
    ("never_frequency_cap", Accepts::Whole(0.0, 255.0)),
];

/// `strata` takes its knobs after a colon: `strata:small=0.1/threshold=2/gate=0/adapt=1/budget=0.33`.
/// A knob outside [`STRATA_KNOBS`], or a value outside its range (NaN included), is refused.
fn strata_config(spec: &PolicySpec) -> Result<StrataConfig, PolicyError> {
    let mut config = StrataConfig::new(spec.capacity);
    let Some((_, knobs)) = spec.name.split_once(':') else {
        return Ok(config);
    };
    for knob in knobs.split('/').filter(|k| !k.is_empty()) {
        let (key, value) = knob.split_once('=').unwrap_or((knob, ""));
        let Some(&(_, accepts)) = STRATA_KNOBS.iter().find(|(name, _)| *name == key) else {
            let known: Vec<&str> = STRATA_KNOBS.iter().map(|(name, _)| *name).collect();
            return Err(PolicyError::InvalidParameter {
                name: "strata",
                reason: format!("unknown knob `{knob}` (known: {})", known.join(", ")),
            });
        };
        let number = value.parse::<f64>().ok().filter(|&n| accepts.admits(n));
        let Some(number) = number else {
            return Err(PolicyError::InvalidParameter {
                name: "strata",
                reason: format!("knob `{knob}`: {key} takes {}", accepts.describe()),
            });
        };
        if !set_knob(&mut config, key, number) {
            return Err(PolicyError::InvalidParameter {
                name: "strata",
                reason: format!("knob `{key}` is listed but has no setter (a bug)"),
            });
        }
    }
    Ok(config)
}

/// The miniature-simulation selector's knobs (each a field of [`MiniatureConfig`], which
/// documents it): `mini:rate=0.05/min_objects=512/window=2/window_min=1000/decay=0.5/margin=0.02/budget=inf/z=0`.
const MINI_KNOBS: &[(&str, Accepts)] = &[
    ("rate", Accepts::Real(0.0, 1.0)),
    ("min_objects", Accepts::Whole(1.0, 4294967296.0)),
    ("window", Accepts::Real(0.0, 1e6)),
    ("window_min", Accepts::Whole(1.0, 1e12)),
    ("decay", Accepts::Real(0.0, 1.0)),
    ("margin", Accepts::Real(0.0, 1.0)),
    ("full_window", Accepts::Real(0.0, 1e6)),
    ("full_window_min", Accepts::Whole(1.0, 1e12)),
    ("full_decay", Accepts::Real(0.0, 1.0)),
    ("budget", Accepts::Real(0.0, f64::INFINITY)),
    ("seed", Accepts::Whole(0.0, 1e15)),
    ("set", Accepts::Whole(1.0, 1023.0)),
    ("z", Accepts::Real(0.0, 1e6)),
];

/// `mini` takes its knobs after a colon, as `strata` does.
fn mini_config(spec: &PolicySpec, knobs: Option<&str>) -> Result<MiniatureConfig, PolicyError> {
    let mut config = MiniatureConfig::new(spec.capacity);
    for knob in knobs.unwrap_or("").split('/').filter(|k| !k.is_empty()) {
        let (key, value) = knob.split_once('=').unwrap_or((knob, ""));
        let Some(&(_, accepts)) = MINI_KNOBS.iter().find(|(name, _)| *name == key) else {
            let known: Vec<&str> = MINI_KNOBS.iter().map(|(name, _)| *name).collect();
            return Err(PolicyError::InvalidParameter {
                name: "mini",
                reason: format!("unknown knob `{knob}` (known: {})", known.join(", ")),
            });
        };
        let Some(number) = value.parse::<f64>().ok().filter(|&n| accepts.admits(n)) else {
            return Err(PolicyError::InvalidParameter {
                name: "mini",
                reason: format!("knob `{knob}`: {key} takes {}", accepts.describe()),
            });
        };
        match key {
            "rate" => config.rate = number,
            "min_objects" => config.min_objects = number as usize,
            "window" => config.window = number,
            "window_min" => config.window_min = number as u64,
            "decay" => config.decay = number,
            "margin" => config.margin = number,
            "budget" => config.budget = number,
            "z" => config.z = number,
            "full_window" => config.full_window = number,
            "full_window_min" => config.full_window_min = number as u64,
            "full_decay" => config.full_decay = number,
            "set" => {
                // A bit set over the default candidates (bit 0: the first).
                config.candidates = crate::miniature::DEFAULT_CANDIDATES
                    .iter()
                    .enumerate()
                    .filter(|&(i, _)| (number as u64) & (1 << i) != 0)
                    .map(|(_, name)| name.to_string())
                    .collect();
            }
            _ => config.seed = number as u64,
        }
    }
    Ok(config)
}

/// Knobs of Ceph's tier (pool options, named as Ceph names them), each a field of
/// [`CephTierConfig`], which documents it. `pg_num` up to `mon_max_pool_pg_num` (65536).
const CEPH_KNOBS: &[(&str, Accepts)] = &[("pg_num", Accepts::Whole(1.0, 65536.0))];

/// Ceph's tier takes its pool options after a colon: `ceph:pg_num=256`. An option outside
/// [`CEPH_KNOBS`], or a value outside its range, is refused.
fn ceph_knobs(config: &mut CephTierConfig, knobs: &str) -> Result<(), PolicyError> {
    for knob in knobs.split('/').filter(|k| !k.is_empty()) {
        let (key, value) = knob.split_once('=').unwrap_or((knob, ""));
        let Some(&(_, accepts)) = CEPH_KNOBS.iter().find(|(name, _)| *name == key) else {
            let known: Vec<&str> = CEPH_KNOBS.iter().map(|(name, _)| *name).collect();
            return Err(PolicyError::InvalidParameter {
                name: "ceph",
                reason: format!("unknown knob `{knob}` (known: {})", known.join(", ")),
            });
        };
        let Some(number) = value.parse::<f64>().ok().filter(|&n| accepts.admits(n)) else {
            return Err(PolicyError::InvalidParameter {
                name: "ceph",
                reason: format!("knob `{knob}`: {key} takes {}", accepts.describe()),
            });
        };
        match key {
            "pg_num" => config.pg_count = number as u32,
            _ => {
                return Err(PolicyError::InvalidParameter {
                    name: "ceph",
                    reason: format!("knob `{key}` is listed but has no setter (a bug)"),
                })
            }
        }
    }
    Ok(())
}

/// Sets one knob of [`STRATA_KNOBS`] to a value within its range; false for any other name.
fn set_knob(config: &mut StrataConfig, key: &str, number: f64) -> bool {
    match key {
        "small" => config.small = number,
        "threshold" => config.threshold = number as u8,
        "ghost" => config.ghost = number,
        "gate" => config.gate = number != 0.0,
        "gate_shapes" => config.gate_shapes = number != 0.0,
        "adapt" => config.adapt = number != 0.0,
        "follow" => {
            config.follow = number != 0.0;
            config.follow_frequency = number >= 2.0;
        }
        "follow_small" => config.follow_small = number,
        "margin" => config.switch_margin = number,
        "epoch_min" => config.epoch_min = number as u64,
        "learn" => config.learn = number != 0.0,
        "sample" => config.sample_objects = number as usize,
        "unhit" => config.admit_unhit = number != 0.0,
        "epoch" => config.epoch = number,
        "decay" => config.decay = number,
        "budget" => config.budget = number,
        "split" => config.split = number != 0.0,
        "persist" => config.persist = number as u32,
        "switch_cost" => config.switch_cost = number,
        "shadow_budget" => config.shadow_budget = number != 0.0,
        "reset" => config.reset = number,
        "dwell" => config.dwell = number as u32,
        "split_shapes" => config.split_shapes = number != 0.0,
        "split_max" => config.split_max = number,
        "split_min" => config.split_min = number,
        "main_ghost_admit" => config.main_ghost_admit = number != 0.0,
        "trials" => config.trials = number as u32,
        "adopt" => config.adopt = number != 0.0,
        "fixed_trial" => config.fixed_trial = number != 0.0,
        "trials_margin" => config.trials_margin = number,
        "tiny" => config.tiny = number as usize,
        "tiny_small" => config.tiny_small = number,
        "tiny_candidate" => config.tiny_candidate = number,
        "tiny_shapes" => config.tiny_shapes = number != 0.0,
        "trials_decay" => config.trials_decay = number,
        "lru_buffer" => config.lru_buffer = number != 0.0,
        "lru_trial" => config.lru_trial = number as u32,
        "lru_trial_margin" => config.lru_trial_margin = number,
        "lru_trial_margin_sampled" => config.lru_trial_margin_sampled = number,
        "lru_shadows" => config.lru_shadows = number != 0.0,
        "lru_below" => config.lru_below = number,
        "main_frequency_cap" => config.main_frequency_cap = number as u8,
        "lru_frequency_cap" => config.lru_frequency_cap = number as u8,
        "lru_frequency_cap_tiny" => config.lru_frequency_cap_tiny = number != 0.0,
        "lru_trial_threshold" => config.lru_trial_threshold = number as u8,
        "lru_trial_threshold_sampled" => config.lru_trial_threshold_sampled = number != 0.0,
        "scan_trial" => config.scan_trial = number as u32,
        "scan_start" => config.scan_start = number as u8,
        "scan_trial_margin" => config.scan_trial_margin = number,
        "scan_leave_margin" => config.scan_leave_margin = number,
        "scan_adopt" => config.scan_adopt = number != 0.0,
        "scan_watch" => config.scan_watch = number != 0.0,
        "scan_below" => config.scan_below = number as usize,
        "dram_only" => config.dram_only = number != 0.0,
        "trials_z" => config.trials_z = number,
        "trials_z_min" => config.trials_z_min = number as u64,
        "trials_adopt" => config.trials_adopt = number != 0.0,
        "trials_z_sampled" => config.trials_z_sampled = number != 0.0,
        "trials_shape" => config.trials_shape = number != 0.0,
        "trials_converge" => config.trials_converge = number != 0.0,
        "never_frequency_cap" => config.never_frequency_cap = number as u8,
        _ => return false,
    }
    true
}

/// The hot table's parameters: `a` in (0, 1] (0 would never forecast anything), `H` finite and
/// at least 0, a period of at least 1 ms or 1 request. NaN used to pass (a NaN forecast is
/// never above `H`: a miss ratio of 1 and no cache writes).
fn check_hot_table(spec: &PolicySpec) -> Result<(), PolicyError> {
    if !(spec.smoothing > 0.0 && spec.smoothing <= 1.0) {
        return Err(PolicyError::InvalidParameter {
            name: "smoothing",
            reason: format!("a = {} is outside (0, 1]", spec.smoothing),
        });
    }
    if !(spec.threshold.is_finite() && spec.threshold >= 0.0) {
        return Err(PolicyError::InvalidParameter {
            name: "threshold",
            reason: format!("H = {} must be a finite number >= 0", spec.threshold),
        });
    }
    if matches!(spec.period, Period::Millis(0) | Period::Requests(0)) {
        return Err(PolicyError::InvalidParameter {
            name: "period",
            reason: "must be at least 1 ms or 1 request".into(),
        });
    }
    Ok(())
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
    let (lowered, knobs) = match lowered.split_once(':') {
        Some((name, knobs)) => (name.to_string(), Some(knobs)),
        None => (lowered.clone(), None),
    };
    let (base, admission) = match lowered.split_once('+') {
        Some((base, admission)) => (base, Some(admission)),
        None => (lowered.as_str(), None),
    };
    let ceph = matches!(
        base,
        "ceph" | "ceph-seed003" | "ceph-corrected" | "ceph-fast"
    );
    if knobs.is_some()
        && base != "strata"
        && base != "mini"
        && !ceph
        && POLICY_NAMES.contains(&base)
    {
        // Knobs after a name that takes none used to be dropped: `lru:small=0.5` ran plain LRU.
        return Err(PolicyError::InvalidParameter {
            name: "knobs",
            reason: format!(
                "`{}`: only strata takes knobs after a colon (and Ceph's tier its pool \
                 options: ceph:pg_num=128)",
                spec.name
            ),
        });
    }
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
        "lirs" => with_admission(Lirs::new(capacity, keys), admission, spec),
        "belady" => with_admission(Belady::new(capacity, keys), admission, spec),
        "ceph" | "ceph-seed003" | "ceph-corrected" | "ceph-fast" => {
            let mut config = spec
                .ceph
                .clone()
                .unwrap_or_else(|| CephTierConfig::seed003(capacity));
            config.capacity = capacity;
            config.target_max_objects = capacity;
            config.target_max_bytes = spec.capacity_bytes.unwrap_or(0);
            if base == "ceph-corrected" {
                config.temperature = TemperatureEviction::Corrected;
            }
            if base == "ceph-fast" {
                // Seed 003's tier with one-minute hit sets (seed 000's period), so that recency
                // can be earned within a short trace; ages unchanged.
                config.hit_set_period_s = 60;
            }
            ceph_knobs(&mut config, knobs.unwrap_or(""))?;
            standalone(Box::new(CephTier::new(config, keys)))
        }
        "hottable" => {
            check_hot_table(spec)?;
            let config = HotTableConfig {
                capacity,
                period: spec.period,
                smoothing: spec.smoothing,
                threshold: spec.threshold,
            };
            standalone(Box::new(HotTable::new(config, keys)))
        }
        "strata" => standalone(Box::new(Strata::new(strata_config(spec)?, keys))),
        "mini" => standalone(Box::new(Miniature::new(mini_config(spec, knobs)?, keys)?)),
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
                    object_bytes: 0,
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

    /// `ceph:pg_num=N` sets the cache pool's PG count; seed 003's preset has Ceph's default 32.
    #[test]
    fn ceph_takes_its_pg_num_after_a_colon() {
        let mut config = CephTierConfig::seed003(16);
        assert_eq!(config.pg_count, 32);
        ceph_knobs(&mut config, "pg_num=128").unwrap();
        assert_eq!(config.pg_count, 128);
        ceph_knobs(&mut config, "").unwrap();
        assert_eq!(config.pg_count, 128);
    }

    fn refusal(name: &str) -> String {
        match build(&PolicySpec::new(name, 16, 16)) {
            Ok(_) => panic!("{name} was accepted"),
            Err(e) => e.to_string(),
        }
    }

    /// Knobs and parameters outside their range, NaN included, and knobs after a name that
    /// takes none, are refused with the range named (they used to be clamped or dropped).
    #[test]
    fn bad_knobs_and_parameters_are_refused_with_their_range() {
        for (name, expected) in [
            ("strata:epoch_min=1e12", "[1, 1000000000]"),
            ("strata:epoch_min=inf", "[1, 1000000000]"),
            ("strata:small=NaN", "[0, 0.9]"),
            ("strata:decay=NaN", "[0, 1]"),
            ("strata:budget=NaN", "[0, inf]"),
            ("strata:small=2", "[0, 0.9]"),
            ("strata:threshold=2.5", "whole number"),
            ("strata:gate=2", "0 or 1"),
            ("strata:nope=1", "unknown knob"),
            ("lru:small=0.5", "only strata takes knobs"),
            ("arc:garbage", "only strata takes knobs"),
            ("ceph:pg_num=0", "[1, 65536]"),
            ("ceph-corrected:pg_num=2.5", "whole number"),
            ("ceph:hit_set_count=1", "unknown knob"),
            ("lru+prob2", "P in [0, 1]"),
            ("lru+probNaN", "P in [0, 1]"),
        ] {
            let error = refusal(name);
            assert!(error.contains(expected), "{name}: {error}");
        }
        for (smoothing, threshold) in [(2.0, 1.0), (-1.0, 1.0), (0.0, 1.0), (f64::NAN, 1.0)]
            .into_iter()
            .chain([(0.5, f64::NAN), (0.5, -1.0), (0.5, f64::INFINITY)])
        {
            let mut spec = PolicySpec::new("hottable", 16, 16);
            spec.smoothing = smoothing;
            spec.threshold = threshold;
            assert!(build(&spec).is_err(), "a={smoothing} H={threshold}");
        }
        let mut spec = PolicySpec::new("hottable", 16, 16);
        spec.period = Period::Millis(0);
        assert!(build(&spec).is_err());
        for &(name, accepts) in STRATA_KNOBS {
            let value = match accepts {
                Accepts::Flag => 1.0,
                Accepts::Whole(min, _) | Accepts::Real(min, _) => min,
            };
            let mut config = StrataConfig::new(16);
            assert!(set_knob(&mut config, name, value), "{name} has no setter");
        }
        assert!(build(&PolicySpec::new(
            "strata:budget=inf/small=0.2/follow=2",
            16,
            16
        ))
        .is_ok());
        assert!(build(&PolicySpec::new("ceph-fast", 16, 16)).is_ok());
        assert!(build(&PolicySpec::new("ceph:pg_num=256", 16, 16)).is_ok());
        assert!(build(&PolicySpec::new("ceph-fast:pg_num=1", 16, 16)).is_ok());
        assert!(refusal("mru").contains("ceph-fast"));
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
