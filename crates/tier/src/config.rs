//! A cache pool's tier configuration, as Ceph names it (`ceph osd tier ...`, `ceph osd pool set
//! CACHE KEY VALUE`), with Ceph's rules and strata's admission settings, and its encoding.

use serde::{Deserialize, Serialize};

use crate::error::{Result, TierError};

/// How the cache pool serves the base pool (`ceph osd tier cache-mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheMode {
    /// No caching: every op goes to the base pool, except those on objects still in the
    /// cache, which the agent flushes and evicts.
    None,
    /// Reads and writes are cached; misses promote as the admission says.
    Writeback,
    /// Reads of uncached objects are proxied (never promoted); writes promote.
    Readproxy,
    /// Reads promote; writes go to the base pool, and a cached copy is dropped first.
    Readonly,
    /// Every miss is proxied to the base pool; cached objects are still served from the cache.
    Proxy,
}

impl CacheMode {
    /// Parses Ceph's name.
    pub fn parse(name: &str) -> Result<Self> {
        Ok(match name {
            "none" => CacheMode::None,
            "writeback" => CacheMode::Writeback,
            "readproxy" => CacheMode::Readproxy,
            "readonly" => CacheMode::Readonly,
            "proxy" => CacheMode::Proxy,
            "forward" | "readforward" => {
                return Err(TierError::Invalid(format!(
                    "cache mode {name:?} was removed from Ceph (use proxy or readproxy)"
                )))
            }
            other => {
                return Err(TierError::Invalid(format!(
                    "unknown cache mode {other:?}: expected none, writeback, readproxy, readonly or proxy"
                )))
            }
        })
    }

    /// Ceph's name.
    pub fn name(self) -> &'static str {
        match self {
            CacheMode::None => "none",
            CacheMode::Writeback => "writeback",
            CacheMode::Readproxy => "readproxy",
            CacheMode::Readonly => "readonly",
            CacheMode::Proxy => "proxy",
        }
    }

    /// Whether objects may become dirty in this mode.
    pub fn may_dirty(self) -> bool {
        matches!(self, CacheMode::Writeback | CacheMode::Readproxy)
    }
}

/// Which admission family decides what the cache pool holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AdmissionFamily {
    /// Ceph 16.2's tier: hit sets, recency for promote, the promotion throttle, its agent.
    Ceph,
    /// Ceph's tier with the corrected temperature test.
    CephCorrected,
    /// Seed 000: per-object counts per period, exponential smoothing, threshold H, hot table.
    Predictive,
}

impl AdmissionFamily {
    /// Parses the setting's value.
    pub fn parse(name: &str) -> Result<Self> {
        Ok(match name {
            "ceph" => AdmissionFamily::Ceph,
            "ceph-corrected" => AdmissionFamily::CephCorrected,
            "predictive" => AdmissionFamily::Predictive,
            other => {
                return Err(TierError::Invalid(format!(
                    "unknown tier_admission {other:?}: expected ceph, ceph-corrected or predictive"
                )))
            }
        })
    }

    /// The setting's value.
    pub fn name(self) -> &'static str {
        match self {
            AdmissionFamily::Ceph => "ceph",
            AdmissionFamily::CephCorrected => "ceph-corrected",
            AdmissionFamily::Predictive => "predictive",
        }
    }

    /// The `policy` crate's name of the policy that runs it.
    pub fn policy_name(self) -> &'static str {
        match self {
            AdmissionFamily::Ceph => "ceph",
            AdmissionFamily::CephCorrected => "ceph-corrected",
            AdmissionFamily::Predictive => "hottable",
        }
    }
}

/// How much of an object a promotion copies into the cache (`tier_promote_granularity`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PromoteGranularity {
    /// The admission family's own: whole objects for `ceph` and `ceph-corrected`, extents
    /// for `predictive`.
    Family,
    /// Ceph 16.2's: a promotion copies the whole base object, a flush writes the whole
    /// object back.
    WholeObject,
    /// strata's: a promotion copies the `tier_block_bytes` blocks the op touches, a flush
    /// writes the dirty blocks.
    Extents,
}

impl PromoteGranularity {
    /// Parses the setting's value.
    pub fn parse(name: &str) -> Result<Self> {
        Ok(match name {
            "family" => PromoteGranularity::Family,
            "whole-object" => PromoteGranularity::WholeObject,
            "extents" => PromoteGranularity::Extents,
            other => {
                return Err(TierError::Invalid(format!(
                    "unknown tier_promote_granularity {other:?}: expected family, whole-object \
                     or extents"
                )))
            }
        })
    }

    /// The setting's value.
    pub fn name(self) -> &'static str {
        match self {
            PromoteGranularity::Family => "family",
            PromoteGranularity::WholeObject => "whole-object",
            PromoteGranularity::Extents => "extents",
        }
    }
}

/// `hit_set_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HitSetType {
    /// A bloom filter with `hit_set_fpp`.
    Bloom,
    /// Exact hashes.
    ExplicitHash,
    /// Exact objects.
    ExplicitObject,
}

impl HitSetType {
    /// The setting's value.
    pub fn name(self) -> &'static str {
        match self {
            HitSetType::Bloom => "bloom",
            HitSetType::ExplicitHash => "explicit_hash",
            HitSetType::ExplicitObject => "explicit_object",
        }
    }
}

/// The settings of a cache pool (`strata osd pool set CACHE KEY VALUE`), with the defaults
/// Ceph 16.2's `osd tier add` gives a new tier (`osd_tier_default_cache_*`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TierSettings {
    /// `hit_set_type`.
    pub hit_set_type: HitSetType,
    /// `hit_set_count`: hit sets kept (0 disables them).
    pub hit_set_count: u32,
    /// `hit_set_period`, seconds (0 disables hit sets).
    pub hit_set_period: u64,
    /// `hit_set_fpp`: the bloom filter's false-positive rate.
    pub hit_set_fpp: f64,
    /// `min_read_recency_for_promote`.
    pub min_read_recency_for_promote: u32,
    /// `min_write_recency_for_promote`.
    pub min_write_recency_for_promote: u32,
    /// `target_max_bytes` (0 unset).
    pub target_max_bytes: u64,
    /// `target_max_objects` (0 unset).
    pub target_max_objects: u64,
    /// `cache_target_dirty_ratio`.
    pub cache_target_dirty_ratio: f64,
    /// `cache_target_dirty_high_ratio`.
    pub cache_target_dirty_high_ratio: f64,
    /// `cache_target_full_ratio`.
    pub cache_target_full_ratio: f64,
    /// `cache_min_flush_age`, seconds.
    pub cache_min_flush_age: u64,
    /// `cache_min_evict_age`, seconds.
    pub cache_min_evict_age: u64,
    /// strata: the admission family.
    pub tier_admission: AdmissionFamily,
    /// strata (predictive): the statistics period, seconds.
    pub predictive_period: u64,
    /// strata (predictive): the exponential smoothing constant in (0, 1].
    pub predictive_smoothing: f64,
    /// strata (predictive): the threshold H, requests per period a forecast must reach.
    pub predictive_threshold: f64,
    /// strata: bytes of a promotion block (a 4 KiB miss on a 4 MiB object copies one block).
    pub tier_block_bytes: u64,
    /// strata: whole objects or extents per promotion and flush (`family`: whole objects for
    /// the ceph families, extents for predictive).
    pub tier_promote_granularity: PromoteGranularity,
    /// strata: the object size assumed to turn `target_max_bytes` into a count of objects for
    /// the admission policy.
    pub tier_object_bytes: u64,
    /// strata: promotions running at once (more are skipped: the promotion throttle).
    pub tier_promote_max_inflight: u32,
}

impl Default for TierSettings {
    fn default() -> Self {
        TierSettings {
            hit_set_type: HitSetType::Bloom,
            hit_set_count: 4,
            hit_set_period: 1200,
            hit_set_fpp: 0.05,
            min_read_recency_for_promote: 1,
            min_write_recency_for_promote: 1,
            target_max_bytes: 0,
            target_max_objects: 0,
            cache_target_dirty_ratio: 0.4,
            cache_target_dirty_high_ratio: 0.6,
            cache_target_full_ratio: 0.8,
            cache_min_flush_age: 0,
            cache_min_evict_age: 0,
            tier_admission: AdmissionFamily::Ceph,
            predictive_period: 60,
            predictive_smoothing: 0.5,
            predictive_threshold: 2.0,
            tier_block_bytes: 64 << 10,
            tier_promote_granularity: PromoteGranularity::Family,
            tier_object_bytes: 4 << 20,
            tier_promote_max_inflight: 8,
        }
    }
}

/// How many times [`TierSettings::capacity_objects`] the capacity may grow when cached
/// objects hold less than `tier_object_bytes` each.
pub const CAPACITY_GROWTH_MAX: usize = 4;

/// Objects the cache must hold before their average size sets the capacity.
pub const CAPACITY_SAMPLE_MIN: u64 = 8;

/// Every key `strata osd pool set` takes for a cache pool.
pub const SETTING_NAMES: &[&str] = &[
    "hit_set_type",
    "hit_set_count",
    "hit_set_period",
    "hit_set_fpp",
    "min_read_recency_for_promote",
    "min_write_recency_for_promote",
    "target_max_bytes",
    "target_max_objects",
    "cache_target_dirty_ratio",
    "cache_target_dirty_high_ratio",
    "cache_target_full_ratio",
    "cache_min_flush_age",
    "cache_min_evict_age",
    "tier_admission",
    "predictive_period",
    "predictive_smoothing",
    "predictive_threshold",
    "tier_block_bytes",
    "tier_promote_granularity",
    "tier_object_bytes",
    "tier_promote_max_inflight",
];

fn number<T: std::str::FromStr>(key: &str, value: &str) -> Result<T> {
    value.parse().map_err(|_| {
        TierError::Invalid(format!(
            "{key}: {value:?} is not a {}",
            std::any::type_name::<T>()
        ))
    })
}

/// A count with an optional unit, as Ceph's `osd pool set` takes them: `target_max_bytes`
/// in IEC units (`100M`, `100Mi`, `100MiB`: powers of 1024), `target_max_objects` in SI ones
/// (`10k`: powers of 1000); `unit` is 1024 or 1000.
fn quantity(key: &str, value: &str, unit: u64) -> Result<u64> {
    let invalid = || {
        let example = if unit == 1024 {
            "1073741824 or 1G"
        } else {
            "100000 or 100k"
        };
        TierError::Invalid(format!(
            "{key}: {value:?} is not a whole number (for example {example})"
        ))
    };
    let text = value.trim();
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, suffix) = text.split_at(digits_end);
    let number: u64 = digits.parse().map_err(|_| invalid())?;
    let suffix = suffix.strip_suffix('B').unwrap_or(suffix);
    let suffix = suffix.strip_suffix('i').unwrap_or(suffix);
    let power = match suffix {
        "" => 0,
        "k" | "K" => 1,
        "M" => 2,
        "G" => 3,
        "T" => 4,
        "P" => 5,
        _ => return Err(invalid()),
    };
    number
        .checked_mul(unit.pow(power))
        .ok_or_else(|| TierError::Invalid(format!("{key}: {value:?} is too large")))
}

fn ratio(key: &str, value: &str) -> Result<f64> {
    let parsed: f64 = number(key, value)?;
    if !(0.0..=1.0).contains(&parsed) {
        return Err(TierError::Invalid(format!(
            "{key}: {value} must be between 0 and 1"
        )));
    }
    Ok(parsed)
}

impl TierSettings {
    /// Sets `key` to `value` as `ceph osd pool set` does, refusing a value out of range or one
    /// that contradicts another setting.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let mut next = self.clone();
        match key {
            "hit_set_type" => {
                next.hit_set_type = match value {
                    "bloom" => HitSetType::Bloom,
                    "explicit_hash" => HitSetType::ExplicitHash,
                    "explicit_object" => HitSetType::ExplicitObject,
                    other => {
                        return Err(TierError::Invalid(format!(
                            "hit_set_type: {other:?} is not bloom, explicit_hash or explicit_object"
                        )))
                    }
                }
            }
            "hit_set_count" => next.hit_set_count = number(key, value)?,
            "hit_set_period" => next.hit_set_period = number(key, value)?,
            "hit_set_fpp" => {
                let fpp: f64 = number(key, value)?;
                if !(fpp > 0.0 && fpp < 1.0) {
                    return Err(TierError::Invalid(format!(
                        "hit_set_fpp: {value} must be in (0, 1)"
                    )));
                }
                if next.hit_set_type != HitSetType::Bloom {
                    return Err(TierError::Invalid(
                        "hit_set_fpp applies only to hit_set_type bloom".into(),
                    ));
                }
                next.hit_set_fpp = fpp;
            }
            "min_read_recency_for_promote" => {
                next.min_read_recency_for_promote = number(key, value)?
            }
            "min_write_recency_for_promote" => {
                next.min_write_recency_for_promote = number(key, value)?
            }
            "target_max_bytes" => next.target_max_bytes = quantity(key, value, 1024)?,
            "target_max_objects" => next.target_max_objects = quantity(key, value, 1000)?,
            "cache_target_dirty_ratio" => next.cache_target_dirty_ratio = ratio(key, value)?,
            "cache_target_dirty_high_ratio" => {
                next.cache_target_dirty_high_ratio = ratio(key, value)?
            }
            "cache_target_full_ratio" => next.cache_target_full_ratio = ratio(key, value)?,
            "cache_min_flush_age" => next.cache_min_flush_age = number(key, value)?,
            "cache_min_evict_age" => next.cache_min_evict_age = number(key, value)?,
            "tier_admission" => next.tier_admission = AdmissionFamily::parse(value)?,
            "predictive_period" => {
                next.predictive_period = number(key, value)?;
                if next.predictive_period == 0 {
                    return Err(TierError::Invalid(
                        "predictive_period must be at least 1 second".into(),
                    ));
                }
            }
            "predictive_smoothing" => {
                let smoothing: f64 = number(key, value)?;
                if !(smoothing > 0.0 && smoothing <= 1.0) {
                    return Err(TierError::Invalid(format!(
                        "predictive_smoothing: {value} must be in (0, 1]"
                    )));
                }
                next.predictive_smoothing = smoothing;
            }
            "predictive_threshold" => {
                let threshold: f64 = number(key, value)?;
                if !(threshold >= 0.0 && threshold.is_finite()) {
                    return Err(TierError::Invalid(format!(
                        "predictive_threshold: {value} must be a number >= 0"
                    )));
                }
                next.predictive_threshold = threshold;
            }
            "tier_block_bytes" => {
                let bytes = quantity(key, value, 1024)?;
                if !(4096..=(64 << 20)).contains(&bytes) || !bytes.is_power_of_two() {
                    return Err(TierError::Invalid(format!(
                        "tier_block_bytes: {value} must be a power of two from 4096 to 64 MiB"
                    )));
                }
                next.tier_block_bytes = bytes;
            }
            "tier_promote_granularity" => {
                next.tier_promote_granularity = PromoteGranularity::parse(value)?
            }
            "tier_object_bytes" => {
                next.tier_object_bytes = quantity(key, value, 1024)?;
                if next.tier_object_bytes == 0 {
                    return Err(TierError::Invalid("tier_object_bytes must be > 0".into()));
                }
            }
            "tier_promote_max_inflight" => next.tier_promote_max_inflight = number(key, value)?,
            other => {
                return Err(TierError::Invalid(format!(
                    "unknown cache pool setting {other:?} (known: {})",
                    SETTING_NAMES.join(", ")
                )))
            }
        }
        if next.cache_target_dirty_ratio > next.cache_target_dirty_high_ratio {
            return Err(TierError::Invalid(format!(
                "cache_target_dirty_ratio ({}) must be <= cache_target_dirty_high_ratio ({})",
                next.cache_target_dirty_ratio, next.cache_target_dirty_high_ratio
            )));
        }
        *self = next;
        Ok(())
    }

    /// The value of `key` as `ceph osd pool get` prints it.
    pub fn get(&self, key: &str) -> Result<String> {
        let value = serde_json::to_value(self).map_err(|e| TierError::Invalid(e.to_string()))?;
        match value.get(key) {
            Some(serde_json::Value::String(text)) => Ok(text.clone()),
            Some(other) => Ok(other.to_string()),
            None => Err(TierError::Invalid(format!(
                "unknown cache pool setting {key:?}"
            ))),
        }
    }

    /// Whether promotions copy whole objects and flushes write whole objects back (Ceph's
    /// data path) rather than the blocks an op touches.
    pub fn promotes_whole_objects(&self) -> bool {
        match self.tier_promote_granularity {
            PromoteGranularity::WholeObject => true,
            PromoteGranularity::Extents => false,
            PromoteGranularity::Family => matches!(
                self.tier_admission,
                AdmissionFamily::Ceph | AdmissionFamily::CephCorrected
            ),
        }
    }

    /// The admission policy's capacity in objects when the cache holds `cached_objects`
    /// objects of `cached_bytes` bytes in all. A byte target (`target_max_bytes`) counts the
    /// bytes the cache holds, as Ceph's agent does: objects cached in part (extent
    /// promotions) leave room for more of them, so the capacity is the target over the bytes
    /// an object holds on average. It never falls below [`TierSettings::capacity_objects`]
    /// (whole objects of `tier_object_bytes`), grows at most [`CAPACITY_GROWTH_MAX`] times
    /// past it, never passes `target_max_objects` when that is set, and stays at
    /// [`TierSettings::capacity_objects`] until the cache holds [`CAPACITY_SAMPLE_MIN`]
    /// objects to average over.
    pub fn capacity_objects_holding(&self, cached_objects: u64, cached_bytes: u64) -> usize {
        let base = self.capacity_objects();
        if self.target_max_bytes == 0 || cached_objects < CAPACITY_SAMPLE_MIN {
            return base;
        }
        let per_object_bytes = (cached_bytes / cached_objects).max(self.tier_block_bytes.max(1));
        let by_bytes = (self.target_max_bytes / per_object_bytes).min(1 << 31) as usize;
        let mut capacity = by_bytes.clamp(base, base.saturating_mul(CAPACITY_GROWTH_MAX));
        if self.target_max_objects > 0 {
            capacity = capacity.min(self.target_max_objects.min(1 << 31) as usize);
        }
        capacity.max(1)
    }

    /// The admission policy's capacity in objects, counting each object as
    /// `tier_object_bytes` against `target_max_bytes` (the capacity of an empty cache).
    pub fn capacity_objects(&self) -> usize {
        let by_objects = self.target_max_objects;
        let by_bytes = self.target_max_bytes / self.tier_object_bytes.max(1);
        let capacity = match (by_objects, by_bytes) {
            (0, 0) => 1024,
            (0, bytes) => bytes,
            (objects, 0) => objects,
            (objects, bytes) => objects.min(bytes),
        };
        capacity.clamp(1, 1 << 31) as usize
    }
}

/// One cache pool's tier: what it caches and how.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TierConfig {
    /// The cache pool.
    pub cache_pool: String,
    /// The base pool it is a tier of (`tier_of`).
    pub base_pool: String,
    /// The cache mode.
    pub mode: CacheMode,
    /// Whether it is the base pool's overlay (its read and write tier).
    pub overlay: bool,
    /// Its settings.
    pub settings: TierSettings,
}

impl TierConfig {
    /// A new tier in mode none with default settings, not an overlay.
    pub fn new(base_pool: &str, cache_pool: &str) -> Self {
        TierConfig {
            cache_pool: cache_pool.to_string(),
            base_pool: base_pool.to_string(),
            mode: CacheMode::None,
            overlay: false,
            settings: TierSettings::default(),
        }
    }

    /// Encodes for the cache pool's configuration object.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(self).expect("a tier config encodes")
    }

    /// Decodes [`TierConfig::encode`]'s bytes.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        serde_json::from_slice(bytes)
            .map_err(|e| TierError::Invalid(format!("tier configuration is unreadable: {e}")))
    }

    /// Checks a change of cache mode as Ceph's monitor does (`osd tier cache-mode`): leaving a
    /// mode that may hold dirty objects for one that cannot write them back needs the cache to
    /// be clean; readonly needs the caller's confirmation.
    pub fn check_mode_change(
        &self,
        mode: CacheMode,
        dirty_objects: u64,
        confirmed: bool,
    ) -> Result<()> {
        if mode == CacheMode::Readonly && !confirmed {
            return Err(TierError::Invalid(
                "readonly cache mode serves stale data if the base pool is written directly; \
                 pass --yes-i-really-mean-it to set it"
                    .into(),
            ));
        }
        if self.mode.may_dirty()
            && !mode.may_dirty()
            && mode != CacheMode::Proxy
            && dirty_objects > 0
        {
            return Err(TierError::Busy(format!(
                "unable to set cache-mode {:?} on pool {:?}: {dirty_objects} dirty objects \
                 found; set cache-mode proxy and flush them first (strata osd tier \
                 flush-evict-all {})",
                mode.name(),
                self.cache_pool,
                self.cache_pool
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_take_units_as_ceph_does() {
        let mut settings = TierSettings::default();
        for (value, bytes) in [("100M", 100 << 20), ("100Mi", 100 << 20), ("2GiB", 2 << 30)] {
            settings.set("target_max_bytes", value).unwrap();
            assert_eq!(settings.target_max_bytes, bytes, "{value}");
        }
        settings.set("target_max_bytes", "4096").unwrap();
        assert_eq!(settings.target_max_bytes, 4096);
        settings.set("target_max_objects", "10k").unwrap();
        assert_eq!(settings.target_max_objects, 10_000);
        settings.set("tier_block_bytes", "64K").unwrap();
        assert_eq!(settings.tier_block_bytes, 65536);
        for bad in ["", "M", "1.5G", "10X", "-1", "99999999999999999999"] {
            let error = settings
                .set("target_max_bytes", bad)
                .unwrap_err()
                .to_string();
            assert!(error.contains("target_max_bytes"), "{bad}: {error}");
        }
        assert_eq!(
            settings.target_max_bytes, 4096,
            "a refused value changes nothing"
        );
    }

    #[test]
    fn a_byte_target_counts_the_bytes_objects_hold() {
        let mut settings = TierSettings {
            target_max_bytes: 256 << 20,
            ..TierSettings::default()
        };
        // 64 objects of 4 MiB before anything is cached, and while objects are whole.
        assert_eq!(settings.capacity_objects(), 64);
        assert_eq!(settings.capacity_objects_holding(0, 0), 64);
        assert_eq!(settings.capacity_objects_holding(7, 7 << 20), 64);
        assert_eq!(settings.capacity_objects_holding(60, 60 * (4 << 20)), 64);
        // Objects holding 2 MiB on average: room for 128.
        assert_eq!(settings.capacity_objects_holding(80, 80 * (2 << 20)), 128);
        // Objects larger than tier_object_bytes do not shrink it; tiny ones grow it 4x at most.
        assert_eq!(settings.capacity_objects_holding(40, 40 * (8 << 20)), 64);
        assert_eq!(settings.capacity_objects_holding(100, 100 * 4096), 256);
        // target_max_objects caps it.
        settings.target_max_objects = 100;
        assert_eq!(settings.capacity_objects_holding(80, 80 * (2 << 20)), 100);
        // Without a byte target the count is the target.
        settings.target_max_bytes = 0;
        assert_eq!(settings.capacity_objects_holding(80, 80 * 4096), 100);
    }

    #[test]
    fn settings_are_checked() {
        let mut settings = TierSettings::default();
        settings.set("hit_set_count", "12").unwrap();
        assert_eq!(settings.hit_set_count, 12);
        assert!(settings.set("hit_set_count", "-1").is_err());
        assert!(settings.set("cache_target_dirty_ratio", "1.5").is_err());
        assert!(settings.set("cache_target_dirty_ratio", "0.7").is_err());
        settings
            .set("cache_target_dirty_high_ratio", "0.8")
            .unwrap();
        settings.set("cache_target_dirty_ratio", "0.7").unwrap();
        assert!(settings.set("no_such_key", "1").is_err());
        assert!(settings.set("tier_block_bytes", "1000").is_err());
        settings.set("tier_admission", "predictive").unwrap();
        assert_eq!(settings.get("tier_admission").unwrap(), "predictive");
        assert_eq!(settings.get("hit_set_count").unwrap(), "12");
        settings.set("hit_set_type", "explicit_hash").unwrap();
        assert!(settings.set("hit_set_fpp", "0.1").is_err());
    }

    #[test]
    fn promotion_granularity_follows_the_family_unless_set() {
        let mut settings = TierSettings::default();
        assert_eq!(settings.get("tier_promote_granularity").unwrap(), "family");
        assert!(settings.promotes_whole_objects());
        settings.set("tier_admission", "ceph-corrected").unwrap();
        assert!(settings.promotes_whole_objects());
        settings.set("tier_admission", "predictive").unwrap();
        assert!(!settings.promotes_whole_objects());
        settings
            .set("tier_promote_granularity", "whole-object")
            .unwrap();
        assert!(settings.promotes_whole_objects());
        settings.set("tier_admission", "ceph").unwrap();
        settings.set("tier_promote_granularity", "extents").unwrap();
        assert!(!settings.promotes_whole_objects());
        assert!(settings.set("tier_promote_granularity", "blocks").is_err());
        assert_eq!(
            settings.tier_promote_granularity,
            PromoteGranularity::Extents
        );
    }

    #[test]
    fn mode_changes_follow_ceph() {
        let mut config = TierConfig::new("base", "cache");
        config.mode = CacheMode::Writeback;
        assert!(config.check_mode_change(CacheMode::None, 3, false).is_err());
        assert!(config.check_mode_change(CacheMode::Proxy, 3, false).is_ok());
        assert!(config.check_mode_change(CacheMode::None, 0, false).is_ok());
        assert!(config
            .check_mode_change(CacheMode::Readonly, 0, false)
            .is_err());
        assert!(config
            .check_mode_change(CacheMode::Readonly, 0, true)
            .is_ok());
        assert!(CacheMode::parse("forward").is_err());
        let decoded = TierConfig::decode(&config.encode()).unwrap();
        assert_eq!(decoded, config);
    }
}
