//! Ceph's promotion throttle, one per OSD (OSDService::promote_throttle and
//! promote_throttle_recalibrate, src/osd/OSD.h and OSD.cc).
//!
//! Each OSD counts promotion attempts (calls that passed the recency test) and finished
//! promotions (objects and their bytes). A promotion is refused:
//! - with probability `1 - promote_probability_millis / 1000` (`rand() % 1000 > prob`);
//! - or when the promoted objects counted exceed `promote_max_objects`, or their bytes
//!   `promote_max_bytes` (hard caps against stampedes).
//!
//! Every OSD tick (`OSD_TICK_INTERVAL`, 1 s) `promote_throttle_recalibrate` halves the counters
//! (`sample_and_attenuate`), sets the probability half-way towards what would have met the
//! targets over the last tick (`osd_tier_promote_max_objects_sec`, default 25, and
//! `osd_tier_promote_max_bytes_sec`, default 5 MiB, the tighter of the two), corrected by the
//! ratio of promoted to attempted, and the hard caps to twice a tick's targets. Until the first
//! tick there is no hard cap, as in Ceph (both start at 0, "no cap"). Virtual time has no
//! timer, so the ticks elapsed since the last call are run at the next call (at most 64: the
//! counters are zero and the probability back at 1000 long before).

use crate::SeededRng;

/// `OSD::OSD_TICK_INTERVAL` in milliseconds.
const TICK_MS: u64 = 1000;
/// Ticks caught up at most at one call.
const TICKS_MAX: u64 = 64;

/// One OSD's promotion throttle.
#[derive(Clone, Debug)]
pub(crate) struct PromoteThrottle {
    objects_per_s: u64,
    bytes_per_s: u64,
    probability_millis: u32,
    attempts: u64,
    objects: u64,
    bytes: u64,
    objects_max: u64,
    bytes_max: u64,
    last_tick_ms: Option<u64>,
    rng: SeededRng,
}

impl PromoteThrottle {
    /// A throttle with Ceph's targets per second (0 disables a target; both 0 disables the
    /// throttle) and a seed for its random draws.
    pub(crate) fn new(objects_per_s: u64, bytes_per_s: u64, seed: u64) -> Self {
        PromoteThrottle {
            objects_per_s,
            bytes_per_s,
            probability_millis: 1000,
            attempts: 0,
            objects: 0,
            bytes: 0,
            objects_max: 0,
            bytes_max: 0,
            last_tick_ms: None,
            rng: SeededRng::new(seed),
        }
    }

    /// Whether a promotion attempt at `now_ms` is refused (Ceph's `promote_throttle()`,
    /// true = throttled). Counts the attempt.
    pub(crate) fn throttled(&mut self, now_ms: u64) -> bool {
        self.tick(now_ms);
        self.attempts += 1;
        if (self.rng.next_u64() % 1000) as u32 > self.probability_millis {
            return true;
        }
        (self.objects_max > 0 && self.objects > self.objects_max)
            || (self.bytes_max > 0 && self.bytes > self.bytes_max)
    }

    /// A promotion of `bytes` finished (`promote_finish`).
    pub(crate) fn finish(&mut self, bytes: u64) {
        self.objects += 1;
        self.bytes += bytes;
    }

    fn tick(&mut self, now_ms: u64) {
        let last = *self.last_tick_ms.get_or_insert(now_ms);
        let ticks = now_ms.saturating_sub(last) / TICK_MS;
        if ticks == 0 {
            return;
        }
        for _ in 0..ticks.min(TICKS_MAX) {
            self.recalibrate(1.0);
        }
        self.last_tick_ms = Some(last + ticks * TICK_MS);
    }

    /// `promote_throttle_recalibrate` after `duration_s` seconds.
    fn recalibrate(&mut self, duration_s: f64) {
        let (attempts, objects, bytes) = (self.attempts, self.objects, self.bytes);
        self.attempts /= 2;
        self.objects /= 2;
        self.bytes /= 2;
        let mut new_probability = 1000u32;
        if attempts > 0 && duration_s > 0.0 {
            let average_bytes = bytes.checked_div(objects).unwrap_or(1).max(1);
            let by_objects =
                (self.objects_per_s as f64 * duration_s * 1000.0 / attempts as f64) as u32;
            let by_bytes = (self.bytes_per_s as f64 / average_bytes as f64 * duration_s * 1000.0
                / attempts as f64) as u32;
            new_probability = match (self.objects_per_s > 0, self.bytes_per_s > 0) {
                (true, true) => by_objects.min(by_bytes),
                (true, false) => by_objects,
                (false, true) => by_bytes,
                (false, false) => 1000,
            };
        }
        if attempts > 0 && objects > 0 {
            let actual = objects * 1000 / attempts;
            let ratio = actual as f64 / f64::from(self.probability_millis);
            new_probability = (f64::from(new_probability) / ratio) as u32;
        }
        let new_probability = new_probability.clamp(1, 1000);
        self.probability_millis = ((self.probability_millis + new_probability) / 2).clamp(1, 1000);
        self.objects_max = self.objects_per_s * 2;
        self.bytes_max = self.bytes_per_s * 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Offered far more than it allows (1000 attempts per second), one OSD's throttle lets
    /// through at most about its object target per second for small objects and its byte
    /// target for 4 MiB ones, once past the first second's burst (no cap before the first
    /// tick; measured over the last 80 of 100 s). Ceph's halved counters make it settle
    /// below the targets.
    fn promoted_per_s(object_bytes: u64) -> f64 {
        let mut throttle = PromoteThrottle::new(25, 5 << 20, 7);
        let mut promoted = 0u64;
        for i in 0..100_000u64 {
            if !throttle.throttled(i) {
                throttle.finish(object_bytes);
                promoted += u64::from(i >= 20_000);
            }
        }
        promoted as f64 / 80.0
    }

    #[test]
    fn the_tighter_of_the_object_and_byte_targets_binds() {
        let small = promoted_per_s(4096);
        assert!((10.0..=30.0).contains(&small), "{small} 4 KiB objects/s");
        let large = promoted_per_s(4 << 20);
        assert!((0.5..=3.0).contains(&large), "{large} 4 MiB objects/s");
    }

    #[test]
    fn an_idle_throttle_allows_everything() {
        let mut throttle = PromoteThrottle::new(25, 5 << 20, 7);
        for i in 0..20u64 {
            assert!(!throttle.throttled(i * 1000));
            throttle.finish(4096);
        }
    }
}
