//! Ceph 16.2's cache tier as a pure policy (src/osd/PrimaryLogPG.cc: maybe_promote, agent_work,
//! agent_choose_mode, agent_maybe_flush/evict, agent_estimate_temp; HitSet.h; TierAgentState.h).
//!
//! Objects hash to PGs; each PG keeps hit sets, a dirty count and an agent that scans its
//! objects in Ceph's hobject_t order (by the bit-reversed 32-bit hash, then name: `scan`; not
//! recency order) from where its last call stopped (the first call from a random position in
//! the PG's hash range, as agent_setup draws it: [`AgentStart`]), flushing dirty objects older than
//! `cache_min_flush_age` and evicting clean ones older than `cache_min_evict_age` whose
//! temperature passes the histogram test. The agent runs one agent_work call on the PG of each
//! request (virtual time has no background threads): it examines up to
//! `agent_evict_check_size` objects and stops once it has flushed or evicted `agent_max_ops`,
//! with the modes the call began with (agent_choose_mode runs before the call, as do_op does
//! for each request, and at the call's end). A pass over the PG that flushed and evicted
//! nothing delays its agent for `osd_agent_delay_time` (5 s), during which the PG keeps its
//! modes (OSDService::agent_entry, agent_delay, agent_choose_mode_restart).
//!
//! A flush completes after the call that started it, never within: C_Flush's completion takes
//! the PG lock that agent_work holds. So try_flush_mark_clean's `agent_maybe_evict(obc, true)`
//! (evict the flushed object, if the evict mode is not idle) sees the modes and effort of the
//! call's closing agent_choose_mode, which still counted the object dirty; the model
//! completes the call's flushes right after it, in that state.
//!
//! Ceph's budget per call is `osd_agent_max_ops` (and `osd_agent_max_low_ops` for flushes)
//! less the OSD's agent operations in flight (`agent_ops`: agent_start_op for a flush until
//! its completion, agent_start_evict_op for an eviction until its delete finishes). Here an
//! eviction completes within the call that starts it and a flush right after that call (the
//! simulator has no flush duration: it charges the flush's HDD write to the device busy
//! time, and nothing waits for it), so `agent_ops` is 0 whenever a call begins and every call
//! gets the whole budget; the
//! subtraction cannot change a decision of this model. What it bounds in Ceph, the agent's
//! rate (about `agent_max_ops` per flush latency per OSD), is replaced here by one call per
//! request to the PG.
//!
//! What a miss does follows `maybe_handle_cache_detail`, by cache mode:
//! - writeback: the request is proxied to the base pool (`do_proxy_read`, `do_proxy_write`),
//!   then `maybe_promote` checks recency in the hit sets and the promotion throttle and copies
//!   the object in; `finish_promote` never sets the dirty flag, so the copy is clean even after
//!   a write miss ([`Outcome::AdmittedAfterProxy`]: the simulator charges the proxied request
//!   and the promotion). With no hit sets (`hit_set_count` or `hit_set_period` 0,
//!   `hit_set_setup` clears them) every miss calls `promote_object` at once, the op waiting for
//!   the copy and then running on it (a write dirties it). While the PG's agent is in `full`
//!   evict mode, reads are proxied without promotion and writes wait for room
//!   (`block_write_on_full_cache`); here they are proxied without promotion (virtual time has
//!   no waiting; Ceph would proxy them once room is made, and maybe promote);
//! - readproxy: reads are proxied; writes call `promote_object` directly: no recency test, no
//!   throttle;
//! - readonly: read misses call `promote_object` directly; write misses are redirected to the
//!   base pool (`do_cache_redirect`); a write to a cached object is a hit (`NOOP` before the
//!   mode switch), runs on the cached copy and dirties it (`make_writeable` sets the dirty flag
//!   in any mode), which is not invalidated;
//! - proxy: every miss is proxied.
//!
//! The promotion throttle is Ceph's, one per OSD (`OSDService::promote_throttle`, see
//! `throttle`): the pool's `osd_count` OSDs each take the PGs whose primary they are (PG `p`
//! on OSD `p % osd_count`) and let through about `osd_tier_promote_max_objects_sec` (25)
//! objects or `osd_tier_promote_max_bytes_sec` (5 MiB) per second, whichever binds first: a
//! 4 MiB object counts its 4 MiB ([`Request::object_bytes`]).
//!
//! The agent's ratios (`agent_choose_mode`) are the larger of the byte ratio (the PG's bytes,
//! plus BlueStore's estimated 300 bytes per object, over `target_max_bytes / pg_num`) and the
//! object ratio (objects over `target_max_objects / pg_num`); a target of 0 is unset.
//!
//! Ages (`agent_maybe_flush`, `agent_maybe_evict`) count from the object's `local_mtime`, set
//! when a write runs on the cached copy, else from its `mtime`: `finish_promote` copies the
//! base object's `mtime` (its last write) and leaves `local_mtime` unset, so an object promoted
//! by a read and not written for `cache_min_evict_age` may be evicted at once. The tier keeps
//! each object's last write time for this (0, long ago, for an object the trace never wrote).
//!
//! Not Ceph: if the pool reaches its hard capacity (objects) anyway, one object is forced out
//! (clean first, in scan order, ignoring ages and temperature) so the simulator's bound
//! `len() <= capacity()` holds; Ceph's agent never does that (an OSD that fills up blocks
//! writes instead). These evictions are counted apart ([`CephTierStats::forced`], reported by
//! [`Cache::counters`]).

mod agent;
mod hitset;
mod scan;
mod throttle;

pub use agent::{EvictMode, FlushMode};
pub use hitset::HitSetKind;

use crate::{mix64, Cache, Effects, Key, Outcome, Request, SeededRng};
use agent::{choose_evict_mode, choose_flush_mode, Targets, TemperatureHistogram};
use hitset::HitSetHistory;
use scan::{object_hash, PgObjects, ScanPosition};
use throttle::PromoteThrottle;

/// BlueStore's `estimate_objects_overhead`: 300 bytes per object, added to a PG's bytes.
const OBJECT_OVERHEAD_BYTES: u64 = 300;

/// Cache modes of a Ceph cache tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheMode {
    /// Misses are proxied, then promoted clean subject to recency and the throttle; writes to
    /// cached objects dirty them.
    Writeback,
    /// Reads are proxied to the base pool; write misses promote at once (no recency test, no
    /// throttle) and dirty the copy.
    ReadProxy,
    /// Read misses promote at once; write misses go to the base pool; writes to cached objects
    /// run on (and dirty) the cached copy.
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
    /// `target_max_objects`, 0 unset. Seed 003: 1,000,000 (the catalog sets the capacity).
    pub target_max_objects: usize,
    /// `target_max_bytes`, 0 unset. Seed 003: 2 TiB (the catalog sets the capacity in bytes
    /// when the cache size is given in bytes, else 0).
    pub target_max_bytes: u64,
    /// `pg_num` of the cache pool: objects hash to PGs, and each PG has its own hit sets
    /// (archived after at least 1000 accesses to it), agent, modes and share
    /// (`target_max_* / pg_num`) of the targets; PG `p`'s primary is OSD `p % osd_count`.
    /// Seed 003 does not say; [`CephTierConfig::seed003`] keeps Ceph's default 32 (see there for
    /// why not the autoscaler's 128). Command line: `ceph:pg_num=N`.
    pub pg_count: u32,
    /// Cache mode. Default writeback.
    pub mode: CacheMode,
    /// `hit_set_type` (bloom with `hit_set_fpp` 0.05 by default).
    pub hit_set: HitSetKind,
    /// `hit_set_count`: archived hit sets kept; 0 disables hit sets. Default 12.
    pub hit_set_count: u32,
    /// `hit_set_period` in seconds; 0 disables hit sets. Default 14400.
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
    /// OSDs of the cache pool, each with its own promotion throttle. Seed 003: 24 (3 hosts of
    /// 8 NVMe OSDs).
    pub osd_count: u32,
    /// `osd_tier_promote_max_objects_sec` per OSD, 0 unset. Default 25.
    pub promote_max_objects_per_s: u64,
    /// `osd_tier_promote_max_bytes_sec` per OSD, 0 unset. Default 5 MiB.
    pub promote_max_bytes_per_s: u64,
    /// `osd_agent_max_ops`: objects one agent_work call may flush or evict (its `start_max`);
    /// 0 stops the agent. Default 4. Ceph subtracts the OSD's agent operations still in
    /// flight (`agent_ops`: flushes and evictions), which here complete within the call that
    /// starts them, so every call gets the whole budget (see the module's header).
    pub agent_max_ops: u32,
    /// `osd_agent_max_low_ops`: flushes one call may start (`agent_flush_quota`) while no PG
    /// of the OSD is in high flush mode (then `agent_max_ops`); 0 stops the agent while none
    /// is, as OSDService::agent_entry skips agent_work without a quota. Default 2.
    pub agent_max_low_ops: u32,
    /// `osd_agent_delay_time` in milliseconds: after an agent_work call completes a pass over
    /// its PG that flushed and evicted nothing, the PG leaves the agent's queue and keeps its
    /// modes for this long (`agent_delay`), until the timer's `agent_choose_mode_restart`.
    /// Default 5000 (Ceph's 5 s).
    pub agent_delay_time_ms: u64,
    /// `osd_pool_default_cache_max_evict_check_size`: objects one call lists and examines, from
    /// the scan position to the end of the PG at most. Default 10.
    pub agent_evict_check_size: u32,
    /// Temperature test. Default faithful.
    pub temperature: TemperatureEviction,
    /// Where each PG's agent begins its first pass. Default [`AgentStart::Random`] with seed 0.
    pub agent_start: AgentStart,
}

/// Where a PG's agent begins listing its objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgentStart {
    /// As Ceph: PrimaryLogPG::agent_setup, finding the position unset, sets it to
    /// `pg_pool_t::get_random_pg_position(pgid, rand())`: a random 32-bit hash whose low bits
    /// are the PG's own, so a pass begins somewhere inside the PG's hash range. Each PG's draw
    /// comes from this seed (Ceph's `rand()` is the OSD's), so a run is reproducible.
    Random {
        /// Seed of the PGs' draws.
        seed: u64,
    },
    /// At the start of the PG's hash range (the model before it drew a position; tests that
    /// need a known order).
    RangeStart,
}

impl CephTierConfig {
    /// Seed 003's settings (the Ambedded benchmark's cache tier) for a pool of `capacity`
    /// objects: writeback, bloom hit sets 12 x 4 h, recency 2/2, `target_max_bytes` 2 TiB,
    /// `target_max_objects` 1 million, dirty 0.4/0.6, full 0.8, min flush age 600 s, min evict
    /// age 1800 s, 24 NVMe OSDs with Ceph's default promotion throttle.
    ///
    /// `pg_num` 32, `osd_pool_default_pg_num`, the pool as `ceph osd pool create` makes it.
    /// The seed gives none, and Ceph 16.2's PG autoscaler (on by default) would take the
    /// seed's pool to 128: filled past 0.8 of `target_max_bytes` (2 TiB) with 3 replicas on
    /// 24 x 960 GB OSDs, a capacity ratio of 0.23, and 0.23 x `mon_target_pg_per_osd` (100)
    /// x 24 / 3 = 183 -> 128, more than 3 x 32. It is not the default here because the
    /// simulated pool is a scaled-down one: a bloom hit set is archived after 1000 accesses to
    /// its PG, and a shared trace gives a PG about a hundredth of the accesses the seed's pool
    /// (about 7,800 objects per PG) gives it, so at 128 PGs the hit sets rarely fill, recency
    /// 2 is rarely earned and the tier hardly promotes (cloudPhysicsIO: miss .97 with about
    /// 300 cache writes at every size): an artefact of the scale that would make Ceph a
    /// strawman. At 32 its hit sets fill and it is the stronger peer; `ceph:pg_num=128` shows
    /// the autoscaled pool.
    pub fn seed003(capacity: usize) -> Self {
        CephTierConfig {
            capacity,
            target_max_objects: 1_000_000,
            target_max_bytes: 2 << 40,
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
            osd_count: 24,
            promote_max_objects_per_s: 25,
            promote_max_bytes_per_s: 5 << 20,
            agent_max_ops: 4,
            agent_max_low_ops: 2,
            agent_delay_time_ms: 5000,
            agent_evict_check_size: 10,
            temperature: TemperatureEviction::Faithful,
            agent_start: AgentStart::Random { seed: 0 },
        }
    }

    /// `pg_num_mask` (pg_pool_t::calc_pg_masks), as the osdmap crate computes it.
    fn pg_num_mask(&self) -> u32 {
        osdmap::pg::stable_mod_mask(self.pg_count)
    }
}

/// `pg_pool_t::get_random_pg_position(pg, random)`: `random`'s bits above the PG's, its own
/// below, a hash that `ceph_stable_mod` (`osdmap::pg::stable_mod`) maps back to `pg`.
fn random_pg_position(pg: u32, pg_num: u32, pg_num_mask: u32, random: u32) -> u32 {
    let high = if pg_num == pg_num_mask + 1 {
        random & !pg_num_mask
    } else {
        let smaller_mask = pg_num_mask >> 1;
        if pg & smaller_mask < pg_num & smaller_mask {
            random & !pg_num_mask
        } else {
            random & !smaller_mask
        }
    };
    high | pg
}

#[derive(Clone, Debug)]
struct Pg {
    hit_sets: HitSetHistory,
    /// The PG's objects in Ceph's hobject_t order (see `scan`).
    objects: PgObjects,
    /// Where the next agent_work call lists from (TierAgentState::position).
    position: ScanPosition,
    /// Where the current pass over the PG began (TierAgentState::start): at first the
    /// position agent_setup drew ([`AgentStart`]).
    pass_start: ScanPosition,
    /// Objects flushed or evicted since `pass_start` (TierAgentState::started).
    pass_started: u32,
    /// While `Some`, the agent is delayed (TierAgentState::delaying) until that time: the PG
    /// is out of the agent's queue and agent_choose_mode ignores calls.
    delayed_until_ms: Option<u64>,
    dirty: usize,
    flush_mode: FlushMode,
    evict_mode: EvictMode,
    evict_effort_micro: u64,
    histogram: TemperatureHistogram,
    /// Bytes of the PG's objects.
    bytes: u64,
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
    /// Objects evicted (by the agent in any mode, or forced).
    pub evicted: u64,
    /// Objects evicted because the pool reached its hard capacity (not Ceph's behaviour: the
    /// simulator's bound; included in `evicted`).
    pub forced: u64,
}

/// Ceph's cache tier.
#[derive(Clone, Debug)]
pub struct CephTier {
    config: CephTierConfig,
    pgs: Vec<Pg>,
    cached: Vec<bool>,
    dirty: Vec<bool>,
    /// Ceph's `local_mtime` if set, else `mtime`, of cached objects: what ages count from.
    mtime_ms: Vec<u64>,
    /// Last write of each object, wherever it went (0: not written in the trace).
    last_write_ms: Vec<u64>,
    /// Bytes of each cached object.
    size_bytes: Vec<u64>,
    grades: Vec<u64>,
    len: usize,
    hit_sets_enabled: bool,
    throttles: Vec<PromoteThrottle>,
    /// The objects one agent_work call listed (reused between calls).
    listed: Vec<Key>,
    /// The objects one agent_work call started flushing, completed after it (reused).
    flushing: Vec<Key>,
    /// Activity counters.
    pub stats: CephTierStats,
}

impl CephTier {
    /// An empty tier.
    pub fn new(config: CephTierConfig, key_space: usize) -> Self {
        assert!(config.capacity > 0 && config.pg_count > 0 && config.osd_count > 0);
        let period_ms = config.hit_set_period_s.max(1) * 1000;
        let mask = config.pg_num_mask();
        let mut draws = match config.agent_start {
            AgentStart::Random { seed } => Some(SeededRng::new(seed)),
            AgentStart::RangeStart => None,
        };
        let pgs = (0..config.pg_count)
            .map(|pg| {
                let start = match &mut draws {
                    Some(draws) => ScanPosition::of_hash(random_pg_position(
                        pg,
                        config.pg_count,
                        mask,
                        draws.next_u64() as u32,
                    )),
                    None => ScanPosition::START,
                };
                Pg {
                    hit_sets: HitSetHistory::new(
                        config.hit_set,
                        config.hit_set_count as usize,
                        period_ms,
                        0,
                    ),
                    objects: PgObjects::default(),
                    position: start,
                    pass_start: start,
                    pass_started: 0,
                    delayed_until_ms: None,
                    dirty: 0,
                    flush_mode: FlushMode::Idle,
                    evict_mode: EvictMode::Idle,
                    evict_effort_micro: 0,
                    histogram: TemperatureHistogram::default(),
                    bytes: 0,
                }
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
        let throttles = (0..config.osd_count)
            .map(|osd| {
                PromoteThrottle::new(
                    config.promote_max_objects_per_s,
                    config.promote_max_bytes_per_s,
                    mix64(0x7410_7713 ^ u64::from(osd)),
                )
            })
            .collect();
        CephTier {
            hit_sets_enabled: config.hit_set_count > 0 && config.hit_set_period_s > 0,
            throttles,
            config,
            pgs,
            cached: vec![false; key_space],
            dirty: vec![false; key_space],
            mtime_ms: vec![0; key_space],
            last_write_ms: vec![0; key_space],
            size_bytes: vec![0; key_space],
            grades,
            len: 0,
            listed: Vec::new(),
            flushing: Vec::new(),
            stats: CephTierStats::default(),
        }
    }

    /// The object's PG: `ceph_stable_mod` of its 32-bit hash, as pg_pool_t::raw_hash_to_pg.
    fn pg_of(&self, key: Key) -> usize {
        let hash = object_hash(key) as u32;
        osdmap::pg::stable_mod(hash, self.config.pg_count, self.config.pg_num_mask()) as usize
    }

    fn grow(&mut self, key: Key) {
        let index = key as usize;
        if index >= self.cached.len() {
            let size = (index + 1).next_power_of_two();
            self.cached.resize(size, false);
            self.dirty.resize(size, false);
            self.mtime_ms.resize(size, 0);
            self.last_write_ms.resize(size, 0);
            self.size_bytes.resize(size, 0);
        }
    }

    fn cached(&self, key: Key) -> bool {
        self.cached.get(key as usize).copied().unwrap_or(false)
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

    /// The promotion throttle of the PG's primary OSD.
    fn throttle_of(&mut self, pg: usize) -> &mut PromoteThrottle {
        let osd = pg % self.throttles.len();
        &mut self.throttles[osd]
    }

    fn targets(&self) -> Targets {
        let micro = |ratio: f64| (ratio * 1e6) as u64;
        Targets {
            dirty_micro: micro(self.config.cache_target_dirty_ratio),
            dirty_high_micro: micro(self.config.cache_target_dirty_high_ratio),
            full_micro: micro(self.config.cache_target_full_ratio),
        }
    }

    /// The PG's dirty and full ratios (micro): the larger of the byte and object ratios, as
    /// agent_choose_mode computes them.
    fn ratios_micro(&self, pg: usize) -> (u64, u64) {
        let divisor = u128::from(self.config.pg_count);
        let state = &self.pgs[pg];
        let objects = state.objects.len() as u128;
        let dirty = state.dirty as u128;
        let (mut dirty_micro, mut full_micro) = (0u128, 0u128);
        if self.config.target_max_bytes > 0 && objects > 0 {
            let bytes = u128::from(state.bytes) + u128::from(OBJECT_OVERHEAD_BYTES) * objects;
            let average = bytes / objects;
            let target = (u128::from(self.config.target_max_bytes) / divisor).max(1);
            dirty_micro = dirty * average * 1_000_000 / target;
            full_micro = objects * average * 1_000_000 / target;
        }
        if self.config.target_max_objects > 0 {
            let target = (self.config.target_max_objects as u128 / divisor).max(1);
            dirty_micro = dirty_micro.max(dirty * 1_000_000 / target);
            full_micro = full_micro.max(objects * 1_000_000 / target);
        }
        let clamp = |micro: u128| u64::try_from(micro).unwrap_or(u64::MAX);
        (clamp(dirty_micro), clamp(full_micro))
    }

    /// agent_choose_mode: the PG's modes from its ratios, with slop hysteresis from its
    /// current modes, or as if idle on a `restart` after a delay. Ignored while the agent is
    /// delayed ("let delay play out").
    fn choose_mode(&mut self, pg: usize, restart: bool) {
        if self.pgs[pg].delayed_until_ms.is_some() {
            return;
        }
        let (dirty_micro, full_micro) = self.ratios_micro(pg);
        let targets = self.targets();
        let state = &mut self.pgs[pg];
        let (flush_from, evict_from) = if restart {
            (FlushMode::Idle, EvictMode::Idle)
        } else {
            (state.flush_mode, state.evict_mode)
        };
        state.flush_mode = choose_flush_mode(flush_from, dirty_micro, &targets, state.dirty);
        let (mode, effort) = choose_evict_mode(evict_from, full_micro, &targets);
        state.evict_mode = mode;
        state.evict_effort_micro = effort;
    }

    fn temperature(&self, pg: usize, key: Key) -> u64 {
        if !self.hit_sets_enabled {
            // agent_maybe_evict estimates a temperature only `if (hit_set)`.
            return 0;
        }
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

    /// Copies `key` in (finish_promote). Its ages count from its last write (`mtime`), or
    /// from now when the op that waited for the promotion writes it (`local_mtime`).
    fn insert_object(&mut self, pg: usize, key: Key, bytes: u64, dirty: bool, now_ms: u64) {
        self.grow(key);
        let state = &mut self.pgs[pg];
        self.cached[key as usize] = true;
        state.objects.insert(key);
        state.bytes += bytes;
        self.size_bytes[key as usize] = bytes;
        self.dirty[key as usize] = dirty;
        if dirty {
            state.dirty += 1;
            self.mtime_ms[key as usize] = now_ms;
        } else {
            self.mtime_ms[key as usize] = self.last_write_ms[key as usize];
        }
        self.len += 1;
    }

    fn remove_object(&mut self, pg: usize, key: Key, effects: &mut Effects) {
        let state = &mut self.pgs[pg];
        state.objects.remove(key);
        self.cached[key as usize] = false;
        state.bytes -= self.size_bytes[key as usize];
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

    /// agent_maybe_evict: whether the agent evicts `key` now, by the PG's evict mode and effort
    /// as they are at the time of asking. A dirty object is skipped unless `after_flush`:
    /// try_flush_mark_clean asks (`agent_maybe_evict(obc, true)`) once the agent's flush of it
    /// has completed, before its dirty flag is cleared.
    fn agent_maybe_evict(&mut self, pg: usize, key: Key, now_ms: u64, after_flush: bool) -> bool {
        if !after_flush && self.dirty[key as usize] {
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

    /// agent_maybe_flush: whether the agent starts flushing `key`: dirty and at least
    /// `cache_min_flush_age` old, at any age while the PG's evict mode is full.
    fn agent_maybe_flush(&self, pg: usize, key: Key, now_ms: u64) -> bool {
        if !self.dirty[key as usize] {
            return false;
        }
        self.pgs[pg].evict_mode == EvictMode::Full
            || self.mtime_ms[key as usize] + self.config.cache_min_flush_age_s * 1000 <= now_ms
    }

    /// The agent starts flushing `key` (agent_maybe_flush's start_flush): the flush is
    /// written out now, but the object stays dirty until `agent_finish_flushes`.
    fn agent_start_flush(&mut self, key: Key, effects: &mut Effects) {
        assert!(self.dirty[key as usize], "flush of clean object {key}");
        self.stats.flushed += 1;
        effects.flushed.push(key);
        self.flushing.push(key);
    }

    /// The agent's flushes of the call complete (finish_flush -> try_flush_mark_clean), after
    /// the call, in the order started: each object is evicted if the PG's evict mode *now* is
    /// not idle and agent_maybe_evict(obc, true) agrees, else its dirty flag is cleared.
    fn agent_finish_flushes(&mut self, pg: usize, now_ms: u64, effects: &mut Effects) {
        let mut flushing = std::mem::take(&mut self.flushing);
        for &key in &flushing {
            assert!(self.cached(key) && self.dirty[key as usize]);
            if self.pgs[pg].evict_mode != EvictMode::Idle
                && self.agent_maybe_evict(pg, key, now_ms, true)
            {
                self.agent_evict(pg, key, effects);
            } else {
                self.dirty[key as usize] = false;
                self.pgs[pg].dirty -= 1;
            }
        }
        flushing.clear();
        self.flushing = flushing;
    }

    /// The agent evicts `key` (agent_maybe_evict's delete). The PG's stats change at once, but
    /// its modes stay until agent_work's agent_choose_mode at the end of the call.
    fn agent_evict(&mut self, pg: usize, key: Key, effects: &mut Effects) {
        self.remove_object(pg, key, effects);
        self.stats.evicted += 1;
    }

    /// AgentTimeoutCB -> agent_choose_mode_restart: once `osd_agent_delay_time` has passed
    /// since a delay began, the delay ends and the modes are chosen afresh (as from idle); the
    /// PG is back in the agent's queue if they are not idle. Virtual time has no timer, so the
    /// restart happens at the PG's first request at or after its time.
    fn agent_restart_if_due(&mut self, pg: usize, now_ms: u64) {
        match self.pgs[pg].delayed_until_ms {
            Some(until_ms) if until_ms <= now_ms => {
                self.pgs[pg].delayed_until_ms = None;
                self.choose_mode(pg, true);
            }
            _ => {}
        }
    }

    /// Whether any PG whose primary is `pg`'s OSD is in high flush mode (OSDService's
    /// `flush_mode_high_count` above 0), which lifts the flush quota to `agent_max_ops`.
    fn osd_flushes_high(&self, pg: usize) -> bool {
        let osds = self.throttles.len();
        (pg % osds..self.pgs.len())
            .step_by(osds)
            .any(|p| self.pgs[p].flush_mode == FlushMode::High)
    }

    /// One agent_work call on a PG (OSDService::agent_entry's `agent_work(max,
    /// agent_flush_quota)`), unless the PG is idle or its agent delayed: list up to
    /// `agent_evict_check_size` objects in hobject_t order from the PG's position
    /// (objects_list_partial, see `scan`) and handle each as
    /// PrimaryLogPG::agent_work does (Ceph 16.2): evict it if the evict mode is not idle and
    /// agent_maybe_evict(obc, false) agrees (never a dirty object); else, if the flush mode is
    /// not idle, the flush quota is not spent and agent_maybe_flush agrees, flush it. Each
    /// eviction or flush counts as started; the call stops at `agent_max_ops` started.
    ///
    /// The modes are those the call began with: an eviction changes the PG's stats at once,
    /// but nothing in the loop calls agent_choose_mode; the call ends with it (agent_work's
    /// last step), unless the call delays the agent (below). The position then moves to the
    /// first object after those examined (the listing's `next`, or the next listed object
    /// when the call stops early); past the PG's last object it returns to `hobject_t()`,
    /// before the first.
    ///
    /// A flush the call starts completes right after it (virtual time has no flush latency,
    /// but in Ceph the completion, C_Flush, needs the PG lock the call holds, so it never
    /// runs inside the call): until then the object counts as dirty (the closing
    /// agent_choose_mode sees it so); then finish_flush -> try_flush_mark_clean evicts it if
    /// the PG's evict mode at that time, the one the closing agent_choose_mode chose, is not
    /// idle and agent_maybe_evict(obc, true) agrees, else clears its dirty flag. The
    /// temperature histogram ages once per call (`hist_age`).
    ///
    /// Passes (TierAgentState::start, started): when a call's listing goes past the pass's
    /// start position having wrapped round, a pass is complete; if no call of the pass flushed
    /// or evicted anything, agent_work returns false (agent_delay: the agent keeps its modes
    /// and skips the PG for `agent_delay_time_ms`, see `agent_restart_if_due`), else the count
    /// starts again (the crossing call's own count is dropped, as Ceph does). The next pass
    /// starts where the crossing call stopped.
    fn agent_work(&mut self, pg: usize, now_ms: u64, effects: &mut Effects) {
        let state = &self.pgs[pg];
        let idle = state.flush_mode == FlushMode::Idle && state.evict_mode == EvictMode::Idle;
        if idle || state.delayed_until_ms.is_some() {
            return;
        }
        let (flush_mode, evict_mode, position) =
            (state.flush_mode, state.evict_mode, state.position);
        let start_max = self.config.agent_max_ops;
        let mut flush_quota = if self.osd_flushes_high(pg) {
            start_max
        } else {
            self.config.agent_max_low_ops
        };
        if start_max == 0 || flush_quota == 0 {
            return;
        }
        let mut listed = std::mem::take(&mut self.listed);
        let check_size = self.config.agent_evict_check_size as usize;
        let mut next = self.pgs[pg].objects.list(position, check_size, &mut listed);
        let mut started = 0;
        for (index, &key) in listed.iter().enumerate() {
            if evict_mode != EvictMode::Idle && self.agent_maybe_evict(pg, key, now_ms, false) {
                self.agent_evict(pg, key, effects);
                started += 1;
            } else if flush_mode != FlushMode::Idle
                && flush_quota > 0
                && self.agent_maybe_flush(pg, key, now_ms)
            {
                self.agent_start_flush(key, effects);
                started += 1;
                flush_quota -= 1;
            }
            if started >= start_max {
                // Finishing early, the next call starts at the next listed object.
                if let Some(&following) = listed.get(index + 1) {
                    next = ScanPosition::of(following);
                }
                break;
            }
        }
        self.listed = listed;
        self.pgs[pg].histogram.tick();
        if self.agent_advance(pg, position, next, started) {
            self.pgs[pg].delayed_until_ms = Some(now_ms + self.config.agent_delay_time_ms);
        } else {
            self.choose_mode(pg, false);
        }
        self.agent_finish_flushes(pg, now_ms, effects);
    }

    /// agent_work's bookkeeping after a call that listed from `position` up to `next` and
    /// started `started` operations: moves the PG's position and counts the pass; true when
    /// the call completed a pass in which nothing was started (`need_delay`).
    fn agent_advance(
        &mut self,
        pg: usize,
        position: ScanPosition,
        next: ScanPosition,
        started: u32,
    ) -> bool {
        let state = &mut self.pgs[pg];
        let mut pass_started = state.pass_started + started;
        let mut delay = false;
        if position < state.pass_start && next >= state.pass_start {
            if pass_started == 0 {
                delay = true;
            } else {
                pass_started = 0;
            }
            state.pass_start = next;
        }
        state.pass_started = pass_started;
        state.position = if next == ScanPosition::Max {
            ScanPosition::Min
        } else {
            next
        };
        delay
    }

    /// Frees one slot when the pool is at its hard capacity: the first clean object in scan
    /// order from the agent's position, else the object there after flushing it.
    fn force_evict(&mut self, pg: usize, effects: &mut Effects) {
        let pg = if self.pgs[pg].objects.is_empty() {
            match (0..self.pgs.len()).max_by_key(|&p| self.pgs[p].objects.len()) {
                Some(p) => p,
                None => return,
            }
        } else {
            pg
        };
        let state = &self.pgs[pg];
        let mut objects = state.objects.from(state.position);
        let Some(first) = objects.next() else {
            return;
        };
        let clean = std::iter::once(first)
            .chain(objects)
            .find(|&k| !self.dirty[k as usize]);
        let key = match clean {
            Some(key) => key,
            None => {
                self.flush_object(pg, first, effects);
                first
            }
        };
        self.remove_object(pg, key, effects);
        self.stats.evicted += 1;
        self.stats.forced += 1;
    }

    /// The evict mode of PG `pg` (for tests and reports).
    pub fn evict_mode(&self, pg: usize) -> EvictMode {
        self.pgs[pg].evict_mode
    }
}

impl CephTier {
    /// maybe_promote's recency test and the OSD's throttle; promotes clean after a proxied
    /// request (writeback).
    fn maybe_promote(
        &mut self,
        pg: usize,
        request: &Request,
        in_hit_set: bool,
        effects: &mut Effects,
    ) -> Outcome {
        let recency = if request.write {
            self.config.min_write_recency_for_promote
        } else {
            self.config.min_read_recency_for_promote
        };
        if !self.recency_allows(pg, request.key, in_hit_set, recency) {
            self.stats.recency_refused += 1;
            return Outcome::Bypassed;
        }
        if self.throttle_of(pg).throttled(request.now_ms) {
            self.stats.throttled += 1;
            return Outcome::Bypassed;
        }
        // The proxied write reached the base object before the copy (it was sent first):
        // the copy's mtime is the write's.
        self.promote_object(pg, request, false, effects);
        Outcome::AdmittedAfterProxy
    }

    /// promote_object and finish_promote: the object is copied in (clean); `dirty` when the op
    /// that waited for the copy then writes it.
    fn promote_object(&mut self, pg: usize, request: &Request, dirty: bool, effects: &mut Effects) {
        while self.len >= self.config.capacity {
            self.force_evict(pg, effects);
        }
        let bytes = request.object_bytes_or_size();
        self.throttle_of(pg).finish(bytes);
        self.insert_object(pg, request.key, bytes, dirty, request.now_ms);
        self.choose_mode(pg, false);
    }

    /// A miss, by cache mode (maybe_handle_cache_detail).
    fn miss(
        &mut self,
        pg: usize,
        request: &Request,
        in_hit_set: bool,
        effects: &mut Effects,
    ) -> Outcome {
        let full = self.pgs[pg].evict_mode == EvictMode::Full;
        match self.config.mode {
            CacheMode::Writeback if full => Outcome::Bypassed,
            CacheMode::Writeback if !self.hit_sets_enabled => {
                self.promote_object(pg, request, request.write, effects);
                Outcome::Admitted
            }
            CacheMode::Writeback => self.maybe_promote(pg, request, in_hit_set, effects),
            CacheMode::ReadProxy if request.write && !full => {
                self.promote_object(pg, request, true, effects);
                Outcome::Admitted
            }
            CacheMode::ReadOnly if !request.write => {
                self.promote_object(pg, request, false, effects);
                Outcome::Admitted
            }
            CacheMode::ReadProxy | CacheMode::ReadOnly | CacheMode::Proxy => Outcome::Bypassed,
        }
    }
}

impl Cache for CephTier {
    fn on_request(&mut self, request: &Request, effects: &mut Effects) -> Outcome {
        let key = request.key;
        let now_ms = request.now_ms;
        let pg = self.pg_of(key);
        let in_hit_set = self.hit_sets_enabled && self.pgs[pg].hit_sets.record(key, now_ms);
        self.agent_restart_if_due(pg, now_ms);
        // do_op's agent_choose_mode, then the agent's call on the PG.
        self.choose_mode(pg, false);
        self.agent_work(pg, now_ms, effects);
        if request.write {
            self.grow(key);
            self.last_write_ms[key as usize] = now_ms;
        }
        if self.cached(key) {
            if request.write {
                // make_writeable dirties the copy in any mode (readonly's too) and the write
                // sets its local_mtime.
                if !self.dirty[key as usize] {
                    self.dirty[key as usize] = true;
                    self.pgs[pg].dirty += 1;
                }
                self.mtime_ms[key as usize] = now_ms;
            }
            return Outcome::Hit;
        }
        self.miss(pg, request, in_hit_set, effects)
    }
    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("recency_refused", self.stats.recency_refused),
            ("throttled", self.stats.throttled),
            ("flushed", self.stats.flushed),
            ("evicted", self.stats.evicted),
            ("forced_evictions", self.stats.forced),
        ]
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
mod tests;
