//! Ceph 16.2's cache tier as a pure policy (src/osd/PrimaryLogPG.cc: maybe_promote, agent_work,
//! agent_choose_mode, agent_maybe_flush/evict, agent_estimate_temp; HitSet.h; TierAgentState.h).
//!
//! Objects hash to PGs; each PG keeps hit sets, a dirty count and an agent that scans its
//! objects in hash order (not recency order), flushing dirty objects older than
//! `cache_min_flush_age` and evicting clean ones older than `cache_min_evict_age` whose
//! temperature passes the histogram test. The agent runs `agent_ops_per_request` steps on the PG
//! of each request (virtual time has no background threads). If the pool reaches its hard
//! capacity the PG is forced to evict, as a full OSD blocks writes until the agent frees room.

mod agent;
mod hitset;

pub use agent::{EvictMode, FlushMode};
pub use hitset::HitSetKind;

use crate::list::NIL;
use crate::{mix64, Cache, Effects, Key, Outcome, Request};
use agent::{choose_evict_mode, choose_flush_mode, Targets, TemperatureHistogram};
use hitset::HitSetHistory;

/// Cache modes of a Ceph cache tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheMode {
    /// Reads and writes promote (subject to recency); writes dirty the cached copy.
    Writeback,
    /// Reads are proxied to the base pool; writes promote as in writeback.
    ReadProxy,
    /// Reads promote; writes go to the base pool and invalidate the cached copy.
    ReadOnly,
    /// Everything missing is proxied; nothing is promoted.
    Proxy,
}

/// How the agent uses the temperature histogram when evicting in `some` mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TemperatureEviction {
    /// As Ceph 16.2 compares: skip unless `1e6 - upper < effort`, i.e. evict the *hottest*
    /// `effort` fraction.
    Faithful,
    /// Evict the coldest `effort` fraction: skip unless `lower < effort`.
    Corrected,
}

/// Parameters of the tier; names follow Ceph's pool options.
#[derive(Clone, Debug, PartialEq)]
pub struct CephTierConfig {
    /// Hard capacity of the cache pool in objects.
    pub capacity: usize,
    /// `target_max_objects`; default the capacity.
    pub target_max_objects: usize,
    /// PGs of the cache pool. Default 32.
    pub pg_count: u32,
    /// Cache mode. Default writeback.
    pub mode: CacheMode,
    /// `hit_set_type` (bloom with `hit_set_fpp` 0.05 by default).
    pub hit_set: HitSetKind,
    /// `hit_set_count`: archived hit sets kept. Default 12.
    pub hit_set_count: u32,
    /// `hit_set_period` in seconds. Default 14400.
    pub hit_set_period_s: u64,
    /// `hit_set_grade_decay_rate` in percent. Default 20.
    pub hit_set_grade_decay_rate: u32,
    /// `hit_set_search_last_n`. Default 1.
    pub hit_set_search_last_n: u32,
    /// `min_read_recency_for_promote`. Default 2.
    pub min_read_recency_for_promote: u32,
    /// `min_write_recency_for_promote`. Default 2.
    pub min_write_recency_for_promote: u32,
    /// `cache_target_dirty_ratio`. Default 0.4.
    pub cache_target_dirty_ratio: f64,
    /// `cache_target_dirty_high_ratio`. Default 0.6.
    pub cache_target_dirty_high_ratio: f64,
    /// `cache_target_full_ratio`. Default 0.8.
    pub cache_target_full_ratio: f64,
    /// `cache_min_flush_age` in seconds. Default 600.
    pub cache_min_flush_age_s: u64,
    /// `cache_min_evict_age` in seconds. Default 1800.
    pub cache_min_evict_age_s: u64,
    /// Promotion throttle for the whole pool, objects per second
    /// (`osd_tier_promote_max_objects_sec` 25 x OSDs). Default 150 (6 OSDs).
    pub promote_max_objects_per_s: f64,
    /// Agent steps (objects examined) per request in high flush or evict mode; low flush mode
    /// uses half (`osd_agent_max_low_ops` 2 vs `osd_agent_max_ops` 4). Default 4.
    pub agent_ops_per_request: u32,
    /// Temperature test. Default faithful.
    pub temperature: TemperatureEviction,
}

impl CephTierConfig {
    /// Seed 003's settings (the Ambedded benchmark's cache tier) for a pool of `capacity`
    /// objects: writeback, bloom hit sets 12 x 4 h, recency 2/2, dirty 0.4/0.6, full 0.8,
    /// min flush age 600 s, min evict age 1800 s.
    pub fn seed003(capacity: usize) -> Self {
        CephTierConfig {
            capacity,
            target_max_objects: capacity,
            pg_count: 32,
            mode: CacheMode::Writeback,
            hit_set: HitSetKind::Bloom { fpp: 0.05 },
            hit_set_count: 12,
            hit_set_period_s: 14_400,
            hit_set_grade_decay_rate: 20,
            hit_set_search_last_n: 1,
            min_read_recency_for_promote: 2,
            min_write_recency_for_promote: 2,
            cache_target_dirty_ratio: 0.4,
            cache_target_dirty_high_ratio: 0.6,
            cache_target_full_ratio: 0.8,
            cache_min_flush_age_s: 600,
            cache_min_evict_age_s: 1800,
            promote_max_objects_per_s: 150.0,
            agent_ops_per_request: 4,
            temperature: TemperatureEviction::Faithful,
        }
    }
}

#[derive(Clone, Debug)]
struct Pg {
    hit_sets: HitSetHistory,
    objects: Vec<Key>,
    cursor: usize,
    dirty: usize,
    flush_mode: FlushMode,
    evict_mode: EvictMode,
    evict_effort_micro: u64,
    histogram: TemperatureHistogram,
}

/// Counters of the tier's own activity.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CephTierStats {
    /// Promotions refused by the throttle.
    pub throttled: u64,
    /// Promotions refused by the recency test.
    pub recency_refused: u64,
    /// Objects flushed by the agent.
    pub flushed: u64,
    /// Objects evicted by the agent (any mode).
    pub evicted: u64,
    /// Objects evicted because the pool reached its hard capacity.
    pub forced: u64,
}

/// Ceph's cache tier.
#[derive(Clone, Debug)]
pub struct CephTier {
    config: CephTierConfig,
    pgs: Vec<Pg>,
    position: Vec<u32>,
    dirty: Vec<bool>,
    mtime_ms: Vec<u64>,
    grades: Vec<u64>,
    len: usize,
    tokens: f64,
    last_ms: Option<u64>,
    /// Activity counters.
    pub stats: CephTierStats,
}

impl CephTier {
    /// An empty tier.
    pub fn new(config: CephTierConfig, key_space: usize) -> Self {
        assert!(config.capacity > 0 && config.pg_count > 0);
        let period_ms = config.hit_set_period_s.max(1) * 1000;
        let pgs = (0..config.pg_count)
            .map(|_| Pg {
                hit_sets: HitSetHistory::new(
                    config.hit_set,
                    config.hit_set_count as usize,
                    period_ms,
                    0,
                ),
                objects: Vec::new(),
                cursor: 0,
                dirty: 0,
                flush_mode: FlushMode::Idle,
                evict_mode: EvictMode::Idle,
                evict_effort_micro: 0,
                histogram: TemperatureHistogram::default(),
            })
            .collect();
        let mut grade = 1_000_000u64;
        let grades = (0..config.hit_set_count.max(1))
            .map(|_| {
                grade =
                    (grade as f64 * (1.0 - config.hit_set_grade_decay_rate as f64 / 100.0)) as u64;
                grade
            })
            .collect();
        CephTier {
            tokens: config.promote_max_objects_per_s,
            config,
            pgs,
            position: vec![NIL; key_space],
            dirty: vec![false; key_space],
            mtime_ms: vec![0; key_space],
            grades,
            len: 0,
            last_ms: None,
            stats: CephTierStats::default(),
        }
    }

    fn pg_of(&self, key: Key) -> usize {
        (mix64(key as u64 ^ 0xCE9) % self.config.pg_count as u64) as usize
    }

    fn grow(&mut self, key: Key) {
        let index = key as usize;
        if index >= self.position.len() {
            let size = (index + 1).next_power_of_two();
            self.position.resize(size, NIL);
            self.dirty.resize(size, false);
            self.mtime_ms.resize(size, 0);
        }
    }

    fn cached(&self, key: Key) -> bool {
        self.position.get(key as usize).is_some_and(|&p| p != NIL)
    }

    /// Ceph's maybe_promote recency test: in the current set and in each of the N-1 newest
    /// archived sets.
    fn recency_allows(&self, pg: usize, key: Key, in_hit_set: bool, recency: u32) -> bool {
        match recency {
            0 => true,
            1 => in_hit_set,
            _ => {
                let mut count = in_hit_set as u32;
                if count > 0 {
                    for set in self.pgs[pg].hit_sets.newest_first() {
                        if !set.contains(key) {
                            break;
                        }
                        count += 1;
                        if count >= recency {
                            break;
                        }
                    }
                }
                count >= recency
            }
        }
    }

    fn throttle_allows(&mut self, now_ms: u64) -> bool {
        let rate = self.config.promote_max_objects_per_s;
        if rate <= 0.0 {
            return true;
        }
        let last = self.last_ms.replace(now_ms).unwrap_or(now_ms);
        self.tokens =
            (self.tokens + rate * now_ms.saturating_sub(last) as f64 / 1000.0).min(rate.max(1.0));
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    fn targets(&self) -> Targets {
        let micro = |ratio: f64| (ratio * 1e6) as u64;
        Targets {
            dirty_micro: micro(self.config.cache_target_dirty_ratio),
            dirty_high_micro: micro(self.config.cache_target_dirty_high_ratio),
            full_micro: micro(self.config.cache_target_full_ratio),
        }
    }

    fn choose_mode(&mut self, pg: usize) {
        let per_pg_target =
            (self.config.target_max_objects as u64 / self.config.pg_count as u64).max(1);
        let targets = self.targets();
        let state = &mut self.pgs[pg];
        let dirty_micro = state.dirty as u64 * 1_000_000 / per_pg_target;
        let full_micro = state.objects.len() as u64 * 1_000_000 / per_pg_target;
        state.flush_mode = choose_flush_mode(state.flush_mode, dirty_micro, &targets, state.dirty);
        let (mode, effort) = choose_evict_mode(state.evict_mode, full_micro, &targets);
        state.evict_mode = mode;
        state.evict_effort_micro = effort;
    }

    fn temperature(&self, pg: usize, key: Key) -> u64 {
        let sets = &self.pgs[pg].hit_sets;
        let mut temperature = if sets.current.contains(key) {
            1_000_000
        } else {
            0
        };
        let mut last_n = self.config.hit_set_search_last_n;
        for (i, set) in sets.newest_first().enumerate() {
            if last_n == 0 {
                break;
            }
            if set.contains(key) {
                temperature += self.grades.get(i).copied().unwrap_or(0);
                last_n -= 1;
            }
        }
        temperature
    }

    fn insert_object(&mut self, pg: usize, key: Key, dirty: bool, now_ms: u64) {
        self.grow(key);
        let state = &mut self.pgs[pg];
        self.position[key as usize] = state.objects.len() as u32;
        state.objects.push(key);
        self.dirty[key as usize] = dirty;
        if dirty {
            state.dirty += 1;
        }
        self.mtime_ms[key as usize] = now_ms;
        self.len += 1;
    }

    fn remove_object(&mut self, pg: usize, key: Key, effects: &mut Effects) {
        let index = self.position[key as usize] as usize;
        let state = &mut self.pgs[pg];
        state.objects.swap_remove(index);
        if let Some(&moved) = state.objects.get(index) {
            self.position[moved as usize] = index as u32;
        }
        self.position[key as usize] = NIL;
        if self.dirty[key as usize] {
            self.dirty[key as usize] = false;
            state.dirty -= 1;
        }
        self.len -= 1;
        effects.evicted.push(key);
    }

    fn flush_object(&mut self, pg: usize, key: Key, effects: &mut Effects) {
        if self.dirty[key as usize] {
            self.dirty[key as usize] = false;
            self.pgs[pg].dirty -= 1;
            self.stats.flushed += 1;
            effects.flushed.push(key);
        }
    }

    /// Whether the agent evicts `key` now (agent_maybe_evict).
    fn agent_should_evict(&mut self, pg: usize, key: Key, now_ms: u64) -> bool {
        if self.dirty[key as usize] {
            return false;
        }
        let state = &self.pgs[pg];
        if state.evict_mode == EvictMode::Full {
            return true;
        }
        if self.mtime_ms[key as usize] + self.config.cache_min_evict_age_s * 1000 > now_ms {
            return false;
        }
        let temperature = self.temperature(pg, key);
        let state = &mut self.pgs[pg];
        state.histogram.add(temperature);
        let (lower, upper) = state.histogram.position_micro(temperature);
        match self.config.temperature {
            TemperatureEviction::Faithful => 1_000_000 - upper < state.evict_effort_micro,
            TemperatureEviction::Corrected => lower < state.evict_effort_micro,
        }
    }

    /// agent_work on one PG: examine a few objects in scan order.
    fn agent_work(&mut self, pg: usize, now_ms: u64, effects: &mut Effects) {
        self.choose_mode(pg);
        let state = &self.pgs[pg];
        if state.flush_mode == FlushMode::Idle && state.evict_mode == EvictMode::Idle {
            return;
        }
        let mut ops = self.config.agent_ops_per_request;
        if state.flush_mode == FlushMode::Low && state.evict_mode == EvictMode::Idle {
            ops = ops.div_ceil(2);
        }
        for _ in 0..ops {
            let state = &mut self.pgs[pg];
            if state.objects.is_empty() {
                break;
            }
            if state.cursor >= state.objects.len() {
                state.cursor = 0;
            }
            let key = state.objects[state.cursor];
            state.cursor += 1;
            state.histogram.tick();
            let (flush_mode, evict_mode) = (state.flush_mode, state.evict_mode);
            if flush_mode != FlushMode::Idle
                && self.dirty[key as usize]
                && (evict_mode == EvictMode::Full
                    || self.mtime_ms[key as usize] + self.config.cache_min_flush_age_s * 1000
                        <= now_ms)
            {
                self.flush_object(pg, key, effects);
            }
            if evict_mode != EvictMode::Idle && self.agent_should_evict(pg, key, now_ms) {
                self.remove_object(pg, key, effects);
                self.stats.evicted += 1;
                let state = &mut self.pgs[pg];
                state.cursor = state.cursor.saturating_sub(1);
                self.choose_mode(pg);
            }
        }
    }

    /// Frees one slot when the pool is at its hard capacity: the first clean object in scan
    /// order, else the object under the cursor after flushing it.
    fn force_evict(&mut self, pg: usize, effects: &mut Effects) {
        let pg = if self.pgs[pg].objects.is_empty() {
            match (0..self.pgs.len()).max_by_key(|&p| self.pgs[p].objects.len()) {
                Some(p) => p,
                None => return,
            }
        } else {
            pg
        };
        let n = self.pgs[pg].objects.len();
        let start = self.pgs[pg].cursor.min(n.saturating_sub(1));
        let clean = (0..n)
            .map(|i| self.pgs[pg].objects[(start + i) % n])
            .find(|&k| !self.dirty[k as usize]);
        let key = match clean {
            Some(key) => key,
            None => {
                let key = self.pgs[pg].objects[start];
                self.flush_object(pg, key, effects);
                key
            }
        };
        self.remove_object(pg, key, effects);
        self.stats.forced += 1;
    }

    /// The evict mode of PG `pg` (for tests and reports).
    pub fn evict_mode(&self, pg: usize) -> EvictMode {
        self.pgs[pg].evict_mode
    }
}

impl Cache for CephTier {
    fn on_request(&mut self, request: &Request, effects: &mut Effects) -> Outcome {
        let key = request.key;
        let now_ms = request.now_ms;
        let pg = self.pg_of(key);
        let in_hit_set = self.pgs[pg].hit_sets.record(key, now_ms);
        self.agent_work(pg, now_ms, effects);
        if self.cached(key) {
            if request.write {
                if self.config.mode == CacheMode::ReadOnly {
                    self.remove_object(pg, key, effects);
                    return Outcome::Bypassed;
                }
                if !self.dirty[key as usize] {
                    self.dirty[key as usize] = true;
                    self.pgs[pg].dirty += 1;
                }
                self.mtime_ms[key as usize] = now_ms;
            }
            return Outcome::Hit;
        }
        let promotes = match self.config.mode {
            CacheMode::Proxy => false,
            CacheMode::ReadProxy => request.write,
            CacheMode::ReadOnly => !request.write,
            CacheMode::Writeback => true,
        };
        if !promotes {
            return Outcome::Bypassed;
        }
        let recency = if request.write {
            self.config.min_write_recency_for_promote
        } else {
            self.config.min_read_recency_for_promote
        };
        if !self.recency_allows(pg, key, in_hit_set, recency) {
            self.stats.recency_refused += 1;
            return Outcome::Bypassed;
        }
        if !self.throttle_allows(now_ms) {
            self.stats.throttled += 1;
            return Outcome::Bypassed;
        }
        while self.len >= self.config.capacity {
            self.force_evict(pg, effects);
        }
        if self.config.mode == CacheMode::Writeback {
            // maybe_handle_cache_detail proxied the request to the base pool before
            // maybe_promote; finish_promote copies the object in clean.
            self.insert_object(pg, key, false, now_ms);
            self.choose_mode(pg);
            return Outcome::AdmittedAfterProxy;
        }
        // promote_object with the op: the op waits for the copy, then runs on it (a write
        // dirties it).
        self.insert_object(pg, key, request.write, now_ms);
        self.choose_mode(pg);
        Outcome::Admitted
    }
    fn len(&self) -> usize {
        self.len
    }
    fn capacity(&self) -> usize {
        self.config.capacity
    }
    fn contains(&self, key: Key) -> bool {
        self.cached(key)
    }
    fn name(&self) -> String {
        let temperature = match self.config.temperature {
            TemperatureEviction::Faithful => "",
            TemperatureEviction::Corrected => ",corrected",
        };
        format!(
            "ceph(r{}w{}{})",
            self.config.min_read_recency_for_promote,
            self.config.min_write_recency_for_promote,
            temperature
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(key: Key, seq: u64, now_ms: u64, write: bool) -> Request {
        Request {
            key,
            seq,
            now_ms,
            write,
            size_bytes: 4096,
            object_bytes: 0,
            next_seq: u64::MAX,
        }
    }

    #[test]
    fn recency_two_needs_current_and_previous_set() {
        let mut config = CephTierConfig::seed003(100);
        config.hit_set = HitSetKind::Explicit;
        config.hit_set_period_s = 10;
        config.pg_count = 1;
        let mut tier = CephTier::new(config, 16);
        let mut effects = Effects::default();
        // First access: not in any set -> proxied.
        assert_eq!(
            tier.on_request(&request(1, 0, 0, false), &mut effects),
            Outcome::Bypassed
        );
        // Same period again: in current set, but the archive is empty -> still proxied.
        assert_eq!(
            tier.on_request(&request(1, 1, 1000, false), &mut effects),
            Outcome::Bypassed
        );
        // After the period the set rotates lazily, after this access is recorded: the access is
        // in the (old) current set and in the newest archive -> promoted, as Ceph does.
        assert_eq!(
            tier.on_request(&request(1, 2, 11_000, false), &mut effects),
            Outcome::AdmittedAfterProxy
        );
        assert_eq!(
            tier.on_request(&request(1, 3, 12_000, false), &mut effects),
            Outcome::Hit
        );
        // A new object seen once in the new period is not promoted.
        assert_eq!(
            tier.on_request(&request(2, 4, 13_000, false), &mut effects),
            Outcome::Bypassed
        );
    }

    /// A writeback write miss that passes recency is proxied to the base pool and the object
    /// promoted clean (do_proxy_write, then maybe_promote; finish_promote sets no dirty flag):
    /// nothing to flush. It used to be inserted dirty, absorbing the write.
    #[test]
    fn a_writeback_write_miss_is_proxied_and_promoted_clean() {
        let mut config = CephTierConfig::seed003(100);
        config.min_write_recency_for_promote = 0;
        config.cache_min_flush_age_s = 0;
        config.cache_target_dirty_ratio = 0.0;
        config.pg_count = 1;
        let mut tier = CephTier::new(config, 16);
        let mut effects = Effects::default();
        assert_eq!(
            tier.on_request(&request(1, 0, 0, true), &mut effects),
            Outcome::AdmittedAfterProxy
        );
        assert!(tier.contains(1));
        // A dirty ratio target of 0 flushes any dirty object the agent meets: none is dirty.
        for seq in 1..20 {
            tier.on_request(&request(1, seq, seq * 1000, false), &mut effects);
        }
        assert!(effects.flushed.is_empty());
        assert_eq!(tier.stats.flushed, 0);
        // A write hit dirties the copy, which the agent then flushes.
        assert_eq!(
            tier.on_request(&request(1, 20, 20_000, true), &mut effects),
            Outcome::Hit
        );
        tier.on_request(&request(1, 21, 21_000, false), &mut effects);
        assert_eq!(tier.stats.flushed, 1);
    }

    /// Seed 003's tier (bloom sets, 4 h period, recency 2) over few objects per PG, as
    /// `--mapping object` gives: the sets fill after 1000 accesses each, so an object read
    /// again is promoted well within a 2 h trace. Counting only new keys, no set ever filled and
    /// nothing was promoted.
    #[test]
    fn few_hot_objects_are_promoted_once_their_pg_has_1000_accesses() {
        let mut config = CephTierConfig::seed003(100);
        config.pg_count = 1;
        let mut tier = CephTier::new(config, 16);
        let mut effects = Effects::default();
        let mut admitted = 0;
        for seq in 0..3000u64 {
            let outcome = tier.on_request(
                &request((seq % 10) as Key, seq, seq * 1000, false),
                &mut effects,
            );
            admitted += (outcome == Outcome::AdmittedAfterProxy) as u32;
        }
        assert_eq!(admitted, 10, "each of the 10 objects promoted once");
        assert_eq!(tier.len(), 10);
    }

    #[test]
    fn pool_never_exceeds_capacity_and_flushes_dirty_objects() {
        let mut config = CephTierConfig::seed003(50);
        config.min_read_recency_for_promote = 0;
        config.min_write_recency_for_promote = 0;
        config.cache_min_flush_age_s = 0;
        config.cache_min_evict_age_s = 0;
        config.pg_count = 4;
        let mut tier = CephTier::new(config, 1024);
        let mut effects = Effects::default();
        let mut flushed = 0;
        for seq in 0..5000u64 {
            effects.clear();
            let key = (mix64(seq) % 500) as Key;
            tier.on_request(&request(key, seq, seq * 10, seq % 3 == 0), &mut effects);
            flushed += effects.flushed.len();
            assert!(tier.len() <= 50);
        }
        assert!(flushed > 0);
    }
}
