//! The tiering agent's decisions (PrimaryLogPG::agent_choose_mode, agent_maybe_evict,
//! TierAgentState): flush and evict modes from dirty and full ratios with slop hysteresis, the
//! quantised evict effort, and the pow2 temperature histogram.

/// Flush mode (TierAgentState::flush_mode_t).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushMode {
    /// Below `cache_target_dirty_ratio`: no flushing.
    Idle,
    /// Above `cache_target_dirty_ratio`.
    Low,
    /// Above `cache_target_dirty_high_ratio`: flush at full agent speed.
    High,
}

/// Evict mode (TierAgentState::evict_mode_t).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvictMode {
    /// Below `cache_target_full_ratio`.
    Idle,
    /// Between the full ratio and 100%: evict cold objects with some effort.
    Some,
    /// Over 100% of the target: evict anything clean, ignoring ages and temperature.
    Full,
}

/// Ratios that drive the modes (micro units as Ceph keeps them).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Targets {
    pub dirty_micro: u64,
    pub dirty_high_micro: u64,
    pub full_micro: u64,
}

const MICRO: u64 = 1_000_000;
/// `osd_agent_slop`.
const SLOP: f64 = 0.02;
/// `osd_agent_min_evict_effort`.
const MIN_EVICT_EFFORT: f64 = 0.1;
/// `osd_agent_quantize_effort`.
const QUANTIZE_EFFORT: f64 = 0.1;

/// Chooses the flush mode from the dirty ratio (micro) with slop hysteresis.
pub(crate) fn choose_flush_mode(
    current: FlushMode,
    dirty_micro: u64,
    targets: &Targets,
    dirty_objects: usize,
) -> FlushMode {
    let mut target = targets.dirty_micro;
    let mut high = targets.dirty_high_micro;
    let slop = (target as f64 * SLOP) as u64;
    if current == FlushMode::Idle {
        target += slop;
        high += slop;
    } else {
        target -= target.min(slop);
        high -= high.min(slop);
    }
    if dirty_micro > high {
        FlushMode::High
    } else if dirty_micro > target || (target == 0 && dirty_objects > 0) {
        FlushMode::Low
    } else {
        FlushMode::Idle
    }
}

/// Chooses the evict mode and effort (micro) from the fullness (micro) with slop hysteresis.
pub(crate) fn choose_evict_mode(
    current: EvictMode,
    full_micro: u64,
    targets: &Targets,
) -> (EvictMode, u64) {
    let mut target = targets.full_micro;
    let slop = (target as f64 * SLOP) as u64;
    if current == EvictMode::Idle {
        target += slop;
    } else {
        target -= target.min(slop);
    }
    if full_micro > MICRO {
        (EvictMode::Full, MICRO)
    } else if full_micro > target {
        let over = full_micro - target;
        let span = MICRO.saturating_sub(target).max(1);
        let mut effort = (over * MICRO / span).max((MICRO as f64 * MIN_EVICT_EFFORT) as u64);
        let step = (QUANTIZE_EFFORT * MICRO as f64) as u64;
        effort -= effort % step;
        (EvictMode::Some, effort.max(step))
    } else {
        (EvictMode::Idle, 0)
    }
}

/// Ceph's `pow2_hist_t`: counts per bit length of the temperature, halved every
/// `osd_agent_hist_halflife` (1000) agent_work calls (PrimaryLogPG::agent_work's `hist_age`).
#[derive(Clone, Debug, Default)]
pub(crate) struct TemperatureHistogram {
    bins: [u64; 32],
    age: u32,
}

fn bit_length(value: u64) -> usize {
    (64 - value.leading_zeros()) as usize
}

impl TemperatureHistogram {
    pub(crate) fn add(&mut self, temperature: u64) {
        let bin = bit_length(temperature).min(31);
        self.bins[bin] += 1;
    }

    pub(crate) fn tick(&mut self) {
        self.age += 1;
        if self.age > 1000 {
            self.age = 0;
            self.bins.iter_mut().for_each(|bin| *bin /= 2);
        }
    }

    /// Fractions (micro) of recorded temperatures strictly below, and at or below, `temperature`'s
    /// bin.
    pub(crate) fn position_micro(&self, temperature: u64) -> (u64, u64) {
        let bin = bit_length(temperature).min(31);
        let total: u64 = self.bins.iter().sum();
        if total == 0 {
            return (0, 0);
        }
        let lower: u64 = self.bins[..bin].iter().sum();
        let upper = lower + self.bins[bin];
        (lower * MICRO / total, upper * MICRO / total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn targets() -> Targets {
        Targets {
            dirty_micro: 400_000,
            dirty_high_micro: 600_000,
            full_micro: 800_000,
        }
    }

    #[test]
    fn modes_follow_ratios_with_hysteresis() {
        let t = targets();
        assert_eq!(
            choose_flush_mode(FlushMode::Idle, 405_000, &t, 1),
            FlushMode::Idle
        );
        assert_eq!(
            choose_flush_mode(FlushMode::Idle, 420_000, &t, 1),
            FlushMode::Low
        );
        assert_eq!(
            choose_flush_mode(FlushMode::Low, 395_000, &t, 1),
            FlushMode::Low
        );
        assert_eq!(
            choose_flush_mode(FlushMode::Low, 700_000, &t, 1),
            FlushMode::High
        );
        assert_eq!(
            choose_evict_mode(EvictMode::Idle, 810_000, &t).0,
            EvictMode::Idle
        );
        let (mode, effort) = choose_evict_mode(EvictMode::Idle, 900_000, &t);
        assert_eq!(mode, EvictMode::Some);
        assert_eq!(effort % 100_000, 0);
        assert_eq!(
            choose_evict_mode(EvictMode::Some, 1_000_001, &t),
            (EvictMode::Full, MICRO)
        );
    }

    #[test]
    fn histogram_positions() {
        let mut histogram = TemperatureHistogram::default();
        for temperature in [0, 0, 800_000, 1_800_000] {
            histogram.add(temperature);
        }
        assert_eq!(histogram.position_micro(0), (0, 500_000));
        assert_eq!(histogram.position_micro(1_800_000), (750_000, 1_000_000));
    }
}
