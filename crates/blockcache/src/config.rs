//! Cache configuration: modes and policy parameters, with Open-CAS's names and defaults.

use serde::{Deserialize, Serialize};

use crate::error::CacheError;

/// How reads and writes use the cache (Open-CAS cache modes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheMode {
    /// Write-through: writes go to cache and core; read misses are promoted.
    Wt,
    /// Write-back: writes go to the cache only (dirty); read misses are promoted.
    Wb,
    /// Write-around: write hits update cache and core, write misses go to core only.
    Wa,
    /// Write-invalidate: writes go to core and invalidate the cached copy; reads as wt.
    Wi,
    /// Write-only: writes as wb; reads are served but never promoted.
    Wo,
    /// Pass-through: everything goes to core (dirty data is still read from the cache).
    Pt,
}

impl CacheMode {
    /// Parses `wt`, `wb`, `wa`, `wi`, `wo`, `pt`.
    pub fn parse(text: &str) -> Result<Self, CacheError> {
        Ok(match text.to_ascii_lowercase().as_str() {
            "wt" => Self::Wt,
            "wb" => Self::Wb,
            "wa" => Self::Wa,
            "wi" => Self::Wi,
            "wo" => Self::Wo,
            "pt" => Self::Pt,
            _ => {
                return Err(CacheError::InvalidConfig(format!(
                    "unknown cache mode {text:?}"
                )))
            }
        })
    }

    /// The short name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Wt => "wt",
            Self::Wb => "wb",
            Self::Wa => "wa",
            Self::Wi => "wi",
            Self::Wo => "wo",
            Self::Pt => "pt",
        }
    }

    /// Whether writes may leave dirty data in the cache.
    pub fn writes_back(self) -> bool {
        matches!(self, Self::Wb | Self::Wo)
    }

    pub(crate) fn code(self) -> u8 {
        self as u8
    }

    pub(crate) fn from_code(code: u8) -> Option<Self> {
        [Self::Wt, Self::Wb, Self::Wa, Self::Wi, Self::Wo, Self::Pt]
            .get(usize::from(code))
            .copied()
    }
}

/// When the sequential cut-off applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SeqCutoffPolicy {
    /// Always cut off detected sequential streams.
    Always,
    /// Only when the cache is full (no free line).
    Full,
    /// Never.
    Never,
}

/// Sequential cut-off parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeqCutoffConfig {
    /// When to cut off. Default: full.
    pub policy: SeqCutoffPolicy,
    /// Bytes a stream must have moved (this request included) to be cut off. Default: 1 MiB.
    pub threshold_bytes: u64,
    /// Sequential requests a stream must have made before it can be cut off. Default: 8.
    pub promotion_count: u32,
    /// Streams tracked at once (least recently used replaced). Default: 256.
    pub streams_max: usize,
}

impl Default for SeqCutoffConfig {
    fn default() -> Self {
        Self {
            policy: SeqCutoffPolicy::Full,
            threshold_bytes: 1 << 20,
            promotion_count: 8,
            streams_max: 256,
        }
    }
}

/// Promotion policy: which misses get a cache line.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "policy")]
pub enum PromotionConfig {
    /// Every miss is promoted (default).
    Always,
    /// A core line is promoted on its `threshold`-th access (2..=1000, default 3), but only
    /// once occupancy reaches `trigger_percent` (default 80); below it, always.
    Nhit {
        /// Accesses before promotion.
        threshold: u32,
        /// Occupancy (percent of lines) from which the threshold applies.
        trigger_percent: u32,
    },
}

/// Cleaning policy and its parameters (times in ms).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "policy")]
pub enum CleaningConfig {
    /// Approximately-LRU: every `wake_up_ms` (default 20 s), if the cache has been idle for
    /// `activity_threshold_ms` (default 10 s), flush up to `flush_max_buffers` (default 100)
    /// dirty lines not written for `staleness_ms` (default 120 s), oldest first.
    Alru {
        /// Sleep between rounds.
        wake_up_ms: u64,
        /// Minimum age of a line to clean.
        staleness_ms: u64,
        /// Lines per round.
        flush_max_buffers: u32,
        /// Idle time required before cleaning.
        activity_threshold_ms: u64,
    },
    /// Aggressive: every `wake_up_ms` (default 10 ms) flush up to `flush_max_buffers` (default
    /// 128) dirty lines, regardless of age or activity.
    Acp {
        /// Sleep between rounds.
        wake_up_ms: u64,
        /// Lines per round.
        flush_max_buffers: u32,
    },
    /// No background cleaning: dirty lines are flushed on demand only.
    Nop,
}

impl CleaningConfig {
    /// Open-CAS's alru defaults.
    pub fn alru() -> Self {
        Self::Alru {
            wake_up_ms: 20_000,
            staleness_ms: 120_000,
            flush_max_buffers: 100,
            activity_threshold_ms: 10_000,
        }
    }

    /// Open-CAS's acp defaults.
    pub fn acp() -> Self {
        Self::Acp {
            wake_up_ms: 10,
            flush_max_buffers: 128,
        }
    }
}

/// Everything a cache is started with. Line size is fixed at creation; the rest can change
/// while running.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CacheConfig {
    /// Cache line size in bytes: 4, 8, 16, 32 or 64 KiB. Default: 4 KiB.
    pub line_size_bytes: u64,
    /// Cache mode. Default: wt.
    pub mode: CacheMode,
    /// Sequential cut-off.
    pub seq_cutoff: SeqCutoffConfig,
    /// Promotion policy. Default: always.
    pub promotion: PromotionConfig,
    /// Cleaning policy. Default: alru with Open-CAS's parameters.
    pub cleaning: CleaningConfig,
    /// Flush dirty data when stopping. Default: true.
    pub flush_on_stop: bool,
}

impl Default for CacheConfig {
    fn default() -> Self {
        Self {
            line_size_bytes: 4096,
            mode: CacheMode::Wt,
            seq_cutoff: SeqCutoffConfig::default(),
            promotion: PromotionConfig::Always,
            cleaning: CleaningConfig::alru(),
            flush_on_stop: true,
        }
    }
}

/// The line sizes Open-CAS allows.
pub const LINE_SIZES_BYTES: [u64; 5] = [4096, 8192, 16384, 32768, 65536];

impl CacheConfig {
    /// Checks every field's range.
    pub fn validate(&self) -> Result<(), CacheError> {
        let invalid = |why: String| Err(CacheError::InvalidConfig(why));
        if !LINE_SIZES_BYTES.contains(&self.line_size_bytes) {
            return invalid(format!(
                "line size {} (allowed: 4, 8, 16, 32, 64 KiB)",
                self.line_size_bytes
            ));
        }
        if let PromotionConfig::Nhit {
            threshold,
            trigger_percent,
        } = self.promotion
        {
            if !(2..=1000).contains(&threshold) || trigger_percent > 100 {
                return invalid(format!(
                    "nhit threshold {threshold} (2..=1000) or trigger {trigger_percent}% (0..=100)"
                ));
            }
        }
        if self.seq_cutoff.streams_max == 0 {
            return invalid("seq cutoff streams_max is 0".into());
        }
        Ok(())
    }
}
