//! Tests of Ceph's cache tier model: each behaviour with the Ceph function it follows.
use super::*;
use osdmap::pg::stable_mod as ceph_stable_mod;

fn sized(key: Key, seq: u64, now_ms: u64, write: bool, object_bytes: u32) -> Request {
    Request {
        object_bytes,
        ..request(key, seq, now_ms, write)
    }
}

/// A tier of one PG that promotes on first access, to test what follows a promotion.
fn eager(capacity: usize) -> CephTierConfig {
    let mut config = CephTierConfig::seed003(capacity);
    config.pg_count = 1;
    config.osd_count = 1;
    config.target_max_objects = capacity;
    config.target_max_bytes = 0;
    config.hit_set = HitSetKind::Explicit;
    config.min_read_recency_for_promote = 0;
    config.min_write_recency_for_promote = 0;
    config.agent_start = AgentStart::RangeStart;
    config
}

/// Promotions per second of a tier offered 200 new objects per second for 60 s.
fn promoted_per_s(config: CephTierConfig, object_bytes: u32) -> f64 {
    let mut tier = CephTier::new(config, 1 << 14);
    let mut effects = Effects::default();
    let mut promoted = 0;
    for seq in 0..12_000u64 {
        effects.clear();
        let outcome = tier.on_request(
            &sized(seq as Key, seq, seq * 5, false, object_bytes),
            &mut effects,
        );
        promoted += u32::from(outcome == Outcome::AdmittedAfterProxy && seq >= 2_000);
    }
    // After the first 10 s (the first second has no cap yet).
    f64::from(promoted) / 50.0
}

/// Ceph throttles promotions per OSD, at 25 objects or 5 MiB per second, the tighter
/// binding: one OSD promotes about 25 small objects per second but only 1-2 of 4 MiB; 24
/// OSDs about 24 times that. The pool-wide 150 objects/s it replaced let 4 MiB objects
/// through at 150/s.
#[test]
fn promotions_are_throttled_per_osd_by_objects_and_bytes() {
    let one = eager(1 << 14);
    let small = promoted_per_s(one.clone(), 4096);
    assert!((10.0..=30.0).contains(&small), "{small} small objects/s");
    let large = promoted_per_s(one, 4 << 20);
    assert!((0.8..=3.0).contains(&large), "{large} 4 MiB objects/s");
    let mut pool = eager(1 << 14);
    pool.pg_count = 96;
    pool.osd_count = 24;
    let large = promoted_per_s(pool, 4 << 20);
    assert!(
        (20.0..=72.0).contains(&large),
        "{large} 4 MiB objects/s on 24 OSDs"
    );
}

/// agent_choose_mode takes the larger of the byte and object ratios: 90 objects of 4 MiB
/// against 100 x 4 MiB of target_max_bytes put the PG past its full ratio although they
/// are 9% of target_max_objects.
#[test]
fn the_byte_target_drives_the_agent_when_it_is_the_fuller() {
    let mut config = eager(1000);
    config.target_max_objects = 1000;
    config.target_max_bytes = 100 << 22;
    let mut tier = CephTier::new(config, 1 << 10);
    let mut effects = Effects::default();
    for seq in 0..90u64 {
        tier.on_request(&sized(seq as Key, seq, seq, false, 4 << 20), &mut effects);
    }
    assert_eq!(tier.len(), 90);
    assert_eq!(tier.evict_mode(0), EvictMode::Some);
    assert_eq!(tier.ratios_micro(0).1, 900_064);
}

/// finish_promote leaves local_mtime unset, so an object promoted by a read counts its
/// age from its last write: never written, it is old enough to evict at once. A promotion
/// stamped with its own time waited cache_min_evict_age (1800 s) first.
#[test]
fn a_read_promoted_object_ages_from_its_last_write() {
    let mut config = eager(10);
    config.cache_min_evict_age_s = 1800;
    let mut tier = CephTier::new(config, 64);
    let mut effects = Effects::default();
    let start_ms = 3_600_000;
    for seq in 0..9u64 {
        tier.on_request(
            &request(seq as Key, seq, start_ms + seq, false),
            &mut effects,
        );
    }
    assert_eq!(tier.evict_mode(0), EvictMode::Some);
    for seq in 9..40u64 {
        tier.on_request(&request(0, seq, start_ms + seq, false), &mut effects);
    }
    assert!(tier.stats.evicted > 0, "{:?}", tier.stats);
    assert_eq!(tier.stats.forced, 0);
    // A written object is young: written and promoted now, it stays.
    let mut tier = CephTier::new(eager(10), 64);
    for seq in 0..9u64 {
        tier.on_request(
            &request(seq as Key, seq, start_ms + seq, true),
            &mut effects,
        );
    }
    for seq in 9..40u64 {
        tier.on_request(&request(0, seq, start_ms + seq, false), &mut effects);
    }
    assert_eq!(tier.stats.evicted, 0, "{:?}", tier.stats);
}

/// readproxy writes and readonly reads call promote_object directly (no recency test, no
/// throttle); a readonly write to a cached object runs on it (dirty, still cached); with
/// no hit sets writeback promotes every miss.
#[test]
fn cache_modes_promote_as_maybe_handle_cache_detail_does() {
    let mut effects = Effects::default();
    let mut config = CephTierConfig::seed003(100);
    config.mode = CacheMode::ReadProxy;
    let mut tier = CephTier::new(config.clone(), 16);
    assert_eq!(
        tier.on_request(&request(1, 0, 0, false), &mut effects),
        Outcome::Bypassed
    );
    assert_eq!(
        tier.on_request(&request(2, 1, 1, true), &mut effects),
        Outcome::Admitted
    );
    config.mode = CacheMode::ReadOnly;
    let mut tier = CephTier::new(config.clone(), 16);
    assert_eq!(
        tier.on_request(&request(2, 0, 0, true), &mut effects),
        Outcome::Bypassed
    );
    assert_eq!(
        tier.on_request(&request(1, 1, 1, false), &mut effects),
        Outcome::Admitted
    );
    assert_eq!(
        tier.on_request(&request(1, 2, 2, true), &mut effects),
        Outcome::Hit
    );
    assert!(tier.contains(1));
    config.mode = CacheMode::Writeback;
    config.hit_set_count = 0;
    let mut tier = CephTier::new(config, 16);
    assert_eq!(
        tier.on_request(&request(1, 0, 0, false), &mut effects),
        Outcome::Admitted
    );
    assert_eq!(
        tier.on_request(&request(2, 1, 1, true), &mut effects),
        Outcome::Admitted
    );
}

/// Evictions forced by the pool's hard capacity are not Ceph's: they are counted apart
/// and reported. In `full` evict mode writeback proxies misses without promoting.
#[test]
fn forced_evictions_are_counted_apart_and_a_full_pg_does_not_promote() {
    let mut effects = Effects::default();
    let mut config = eager(10);
    config.agent_max_ops = 0;
    let mut tier = CephTier::new(config.clone(), 64);
    for seq in 0..30u64 {
        tier.on_request(&request(seq as Key, seq, seq, false), &mut effects);
    }
    assert_eq!(tier.len(), 10);
    assert_eq!(tier.stats.forced, 20);
    assert!(tier.counters().contains(&("forced_evictions", 20)));
    config.target_max_objects = 5;
    let mut tier = CephTier::new(config, 64);
    for seq in 0..6u64 {
        tier.on_request(&request(seq as Key, seq, seq, false), &mut effects);
    }
    assert_eq!(tier.evict_mode(0), EvictMode::Full);
    assert_eq!(
        tier.on_request(&request(7, 6, 6, false), &mut effects),
        Outcome::Bypassed
    );
    assert_eq!(tier.stats.forced, 0);
}

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
    // The calls' timing against the agent's 5 s delays after empty passes depends on where
    // the first pass begins; this test is about what a write miss promotes.
    config.agent_start = AgentStart::RangeStart;
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
    config.target_max_objects = 50;
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

/// A tier of one PG holding `dirty` objects written at 1 s, old enough at `now_ms` to be
/// flushed and evicted, with the agent stopped until the caller sets its budget.
fn written_then_idle(objects: u64, target_max_objects: usize) -> CephTier {
    let mut config = eager(64);
    config.agent_max_ops = 0;
    let mut tier = CephTier::new(config, 64);
    let mut effects = Effects::default();
    for key in 0..objects {
        let outcome = tier.on_request(&request(key as Key, key, 0, false), &mut effects);
        assert_eq!(outcome, Outcome::AdmittedAfterProxy);
        let outcome = tier.on_request(&request(key as Key, key, 1000, true), &mut effects);
        assert_eq!(outcome, Outcome::Hit);
    }
    tier.config.target_max_objects = target_max_objects;
    tier
}

/// PrimaryLogPG::agent_work tries agent_maybe_evict first, which skips a dirty object, then
/// agent_maybe_flush; when the flush completes, try_flush_mark_clean calls
/// agent_maybe_evict(obc, true) while the evict mode is not idle, so an old dirty object is
/// flushed and then evicted in one visit. With the evict mode idle it is only flushed.
#[test]
fn an_old_dirty_object_is_flushed_then_evicted_when_its_flush_completes() {
    let now_ms = 1000 + 1_801_000;
    // 8 objects against a target of 4: full ratio 200% (evict mode full until 4 are left),
    // dirty ratio 200% (flush mode high).
    let mut tier = written_then_idle(8, 4);
    tier.config.agent_max_ops = 4;
    let mut effects = Effects::default();
    let outcome = tier.on_request(&request(60, 100, now_ms, false), &mut effects);
    assert_eq!(effects.flushed.len(), 4, "{effects:?}");
    assert_eq!(effects.evicted, effects.flushed);
    assert_eq!((tier.stats.flushed, tier.stats.evicted), (4, 4));
    // The evictions came after the call's closing agent_choose_mode (8 of 4: full), which
    // try_flush_mark_clean does not repeat, so the miss is proxied without promotion, as
    // after do_op's agent_choose_mode (also 8 of 4) in Ceph.
    assert_eq!(tier.evict_mode(0), EvictMode::Full);
    assert_eq!(outcome, Outcome::Bypassed);
    assert_eq!(tier.len(), 4);
    // 4 objects against a target of 40: evict mode idle, dirty ratio 10% (flush mode idle
    // until the dirty target is lowered, then low: 2 flushes, osd_agent_max_low_ops): flushed
    // and kept, clean.
    let mut tier = written_then_idle(4, 40);
    tier.config.agent_max_ops = 4;
    tier.config.cache_target_dirty_ratio = 0.05;
    let mut effects = Effects::default();
    tier.on_request(&request(60, 100, now_ms, false), &mut effects);
    assert_eq!(effects.flushed.len(), 2, "{effects:?}");
    assert!(effects.evicted.is_empty());
    assert_eq!(tier.len(), 4 + 1);
}

/// Keys `0..objects` in the agent's scan order (hobject_t order, see `scan`).
fn scan_order(objects: Key) -> Vec<Key> {
    let mut order: Vec<Key> = (0..objects).collect();
    order.sort_by_key(|&key| scan::scan_key(key));
    order
}

/// A tier of one PG whose objects `0..objects` were promoted clean at 0 s, those in `dirty`
/// then written at 1 s; the agent is stopped until the caller sets its budget.
fn promoted_then_written(objects: u64, dirty: &[Key]) -> CephTier {
    let mut config = eager(64);
    config.agent_max_ops = 0;
    let mut tier = CephTier::new(config, 64);
    let mut effects = Effects::default();
    for key in 0..objects {
        tier.on_request(&request(key as Key, key, 0, false), &mut effects);
    }
    for &key in dirty {
        tier.on_request(&request(key, u64::from(key), 1000, true), &mut effects);
    }
    assert_eq!(tier.len(), objects as usize);
    tier
}

/// PrimaryLogPG::agent_work lists `osd_pool_default_cache_max_evict_check_size` (10) objects
/// and stops once `start_max` (`osd_agent_max_ops`, 4) of them were flushed or evicted; while
/// no PG of the OSD flushes in high mode, OSDService::agent_entry gives it a flush quota of
/// `osd_agent_max_low_ops` (2). Clean objects cost nothing, so the agent reaches dirty ones
/// behind them in the same call. The agent used to examine 4 objects (2 in low flush mode)
/// whatever it did with them: it flushed nothing in the first case and 2 in the second.
#[test]
fn the_agent_lists_ten_objects_and_stops_after_four_flushed_or_evicted() {
    let now_ms = 1000 + 601_000;
    // Low flush mode (dirty 10% of 40 against a 5% target), evict idle: the first 4 objects
    // in scan order clean.
    let order = scan_order(8);
    let mut tier = promoted_then_written(8, &order[4..]);
    tier.config.target_max_objects = 40;
    tier.config.cache_target_dirty_ratio = 0.05;
    tier.config.agent_max_ops = 4;
    let mut effects = Effects::default();
    tier.on_request(&request(60, 100, now_ms, false), &mut effects);
    assert_eq!(effects.flushed, order[4..6]);
    // High flush mode (dirty 20% of 40 against a 10% high target): the first 2 clean.
    let order = scan_order(10);
    let mut tier = promoted_then_written(10, &order[2..]);
    tier.config.target_max_objects = 40;
    tier.config.cache_target_dirty_ratio = 0.05;
    tier.config.cache_target_dirty_high_ratio = 0.1;
    tier.config.agent_max_ops = 4;
    let mut effects = Effects::default();
    tier.on_request(&request(60, 100, now_ms, false), &mut effects);
    assert_eq!(effects.flushed, order[2..6]);
    assert!(effects.evicted.is_empty());
}

/// A tier of one PG holding `objects` clean objects promoted by reads at 0 s (never written,
/// so their ages count from 0), its agent stopped while they come in, then given `target`
/// objects as `target_max_objects` and Ceph's budget (`osd_agent_max_ops` 4).
fn read_then_targeted(objects: u64, target: usize, min_evict_age_s: u64) -> CephTier {
    read_then_targeted_from(eager(64), objects, target, min_evict_age_s)
}

/// [`read_then_targeted`] from `config` instead of `eager(64)`.
fn read_then_targeted_from(
    mut config: CephTierConfig,
    objects: u64,
    target: usize,
    min_evict_age_s: u64,
) -> CephTier {
    config.agent_max_ops = 0;
    config.cache_min_evict_age_s = min_evict_age_s;
    let mut tier = CephTier::new(config, 64);
    let mut effects = Effects::default();
    for key in 0..objects {
        let outcome = tier.on_request(&request(key as Key, key, 0, false), &mut effects);
        assert_eq!(outcome, Outcome::AdmittedAfterProxy);
    }
    assert_eq!(tier.len(), objects as usize);
    tier.config.target_max_objects = target;
    tier.config.agent_max_ops = 4;
    tier
}

/// PrimaryLogPG::agent_work keeps the modes it began with for the whole call: an eviction
/// (agent_maybe_evict's delete) changes the PG's stats, but agent_choose_mode runs only at
/// the call's end. 6 objects against a target of 4 are 150% full: evict mode full, where age
/// does not count, so one call evicts `osd_agent_max_ops` (4) young objects. The model used
/// to recompute the modes after each eviction: at 4 of 4 (100%, not over) the mode fell to
/// `some`, where the rest were too young (cache_min_evict_age 1800 s), and it evicted 2.
#[test]
fn the_agent_keeps_its_modes_for_the_whole_call() {
    let mut tier = read_then_targeted(6, 4, 1800);
    let mut effects = Effects::default();
    tier.on_request(&request(60, 100, 1000, false), &mut effects);
    assert_eq!(effects.evicted.len(), 4, "{effects:?}");
    assert_eq!((tier.stats.evicted, tier.stats.forced), (4, 0));
    // The call's closing agent_choose_mode sees 2 of 4 (50%): idle.
    assert_eq!(tier.evict_mode(0), EvictMode::Idle);
    assert_eq!(tier.len(), 2 + usize::from(tier.contains(60)));
}

/// OSDService::agent_entry delays a PG for `osd_agent_delay_time` (5 s) when its agent_work
/// returns false: a pass over the PG's objects (from TierAgentState::start round to it
/// again) that flushed and evicted nothing. Meanwhile the agent skips the PG, and
/// agent_choose_mode ignores calls, until AgentTimeoutCB's agent_choose_mode_restart.
/// Here 8 objects against a target of 9 (89%, evict mode `some`) are too young to evict
/// until 3 s (cache_min_evict_age 3 s): the call at 1 s lists all 8, the one at 2 s lists
/// them again and completes the pass with nothing done, so the agent waits until 7 s. The
/// model used to evict at 4 s.
#[test]
fn a_pass_that_finds_nothing_to_do_delays_the_agent_five_seconds() {
    let mut tier = read_then_targeted(8, 9, 3);
    let mut effects = Effects::default();
    let mut evicted_at = Vec::new();
    for (seq, now_ms) in [1000, 2000, 4000, 6999, 7000].into_iter().enumerate() {
        effects.clear();
        tier.on_request(&request(0, 100 + seq as u64, now_ms, false), &mut effects);
        evicted_at.push((now_ms, effects.evicted.len()));
    }
    assert_eq!(
        evicted_at[..4],
        [(1000, 0), (2000, 0), (4000, 0), (6999, 0)]
    );
    assert!(evicted_at[4].1 > 0, "{evicted_at:?}");
}

/// PrimaryLogPG::agent_work lists the PG's objects with objects_list_partial in hobject_t
/// order (the bit-reversed hash, then the name; see `scan`) from TierAgentState::position,
/// which then moves to the first object after those the call examined. 16 objects against a
/// target of 8 (200%, then 150%: evict mode full, where age does not count): the first call
/// evicts the first 4 in that order, the second the next 4. The model used to list
/// `Pg::objects` in insertion order, an evicted object's slot taken by the last one: it
/// evicted 0, 15, 14, 13, then 12, 11, 10, 9.
#[test]
fn the_agent_lists_objects_in_hash_order_from_its_position() {
    let mut tier = read_then_targeted(16, 8, 1800);
    let order = scan_order(16);
    assert_ne!(order[..4], [0, 1, 2, 3]);
    let mut effects = Effects::default();
    // A read of the last object in scan order: a hit, so nothing is promoted meanwhile.
    let last = order[15];
    let outcome = tier.on_request(&request(last, 100, 1000, false), &mut effects);
    assert_eq!(effects.evicted, order[..4]);
    assert_eq!(outcome, Outcome::Hit);
    effects.clear();
    let outcome = tier.on_request(&request(last, 101, 2000, false), &mut effects);
    assert_eq!(effects.evicted, order[4..8]);
    assert_eq!(outcome, Outcome::Hit);
    assert_eq!((tier.stats.evicted, tier.stats.forced), (8, 0));
    assert_eq!(tier.len(), 8);
}

/// A flush completes after the agent_work call that started it: C_Flush's finish takes the
/// PG lock agent_work holds, so finish_flush -> try_flush_mark_clean runs after the call's
/// closing agent_choose_mode, and checks the evict mode (and agent_maybe_evict(obc, true) the
/// effort) the PG has then; until then the object counts as dirty. 11 objects against a
/// target of 10 (110%: evict mode full; dirty 10% against a 5% target: low): the call evicts
/// the first 3 in scan order (full: age does not count) and flushes the 4th, written 700 s
/// ago (past cache_min_flush_age 600 s, short of cache_min_evict_age 1800 s). The closing
/// agent_choose_mode sees 8 of 10 (80%): `some`, where the flushed object is too young to
/// evict, so it stays, clean. The model used to ask with the call's `full` and evict it.
#[test]
fn a_completed_flush_evicts_by_the_mode_the_pg_has_when_it_completes() {
    let order = scan_order(11);
    let mut tier = promoted_then_written(11, &order[3..4]);
    tier.config.target_max_objects = 10;
    tier.config.cache_target_dirty_ratio = 0.05;
    tier.config.agent_max_ops = 4;
    let mut effects = Effects::default();
    let now_ms = 1000 + 700_000;
    let outcome = tier.on_request(&request(order[10], 100, now_ms, false), &mut effects);
    assert_eq!(effects.evicted, order[..3]);
    assert_eq!(effects.flushed, order[3..4]);
    assert_eq!(outcome, Outcome::Hit);
    assert_eq!(tier.evict_mode(0), EvictMode::Some);
    assert!(tier.contains(order[3]));
    assert!(!tier.dirty[order[3] as usize]);
    assert_eq!(tier.pgs[0].dirty, 0);
    assert_eq!((tier.stats.flushed, tier.stats.evicted), (1, 3));
    assert_eq!(tier.len(), 8);
}

/// PGs are `ceph_stable_mod(hash, pg_num, pg_num_mask)`, which is `hash % pg_num` only for a
/// power of two: with 12 PGs (mask 15) a hash ending in 13 maps to 13 & 7 = 5, where the
/// model's old `% 12` gave 45 % 12 = 9 for hash 45.
#[test]
fn objects_map_to_pgs_by_ceph_stable_mod() {
    assert_eq!(ceph_stable_mod(45, 12, 15), 5);
    assert_eq!(ceph_stable_mod(11, 12, 15), 11);
    assert_eq!(ceph_stable_mod(45, 32, 31), 45 % 32);
    let mut config = CephTierConfig::seed003(16);
    config.pg_count = 12;
    assert_eq!(config.pg_num_mask(), 15);
    let tier = CephTier::new(config, 1 << 10);
    let mut differs = 0;
    for key in 0..1000 {
        let hash = scan::object_hash(key) as u32;
        let pg = tier.pg_of(key);
        assert_eq!(pg as u32, ceph_stable_mod(hash, 12, 15));
        assert!(pg < 12);
        differs += usize::from(pg as u32 != hash % 12);
    }
    assert!(
        differs > 100,
        "{differs} of 1000 objects differ from hash % 12"
    );
}

/// Ceph's own test of get_random_pg_position (src/test/osd/types.cc): the position it draws
/// maps back to its PG, for any pg_num.
#[test]
fn a_random_pg_position_maps_back_to_its_pg() {
    let mut draws = SeededRng::new(3);
    for pg_num in 1..=300u32 {
        let mask = osdmap::pg::stable_mod_mask(pg_num);
        for _ in 0..20 {
            let pg = (draws.next_u64() % u64::from(pg_num)) as u32;
            let position = random_pg_position(pg, pg_num, mask, draws.next_u64() as u32);
            assert_eq!(
                ceph_stable_mod(position, pg_num, mask),
                pg,
                "pg_num {pg_num}"
            );
        }
    }
}

/// agent_setup starts a PG's agent at a random position in its hash range: the first call
/// evicts the first objects in scan order at or after it, then wraps. With `RangeStart` (the
/// model before) it evicted `order[..4]`.
#[test]
fn the_agent_begins_at_the_position_agent_setup_draws() {
    let seed = 7;
    let mut config = eager(64);
    config.agent_start = AgentStart::Random { seed };
    let mut tier = read_then_targeted_from(config, 16, 8, 1800);
    let mut effects = Effects::default();
    let start = ScanPosition::of_hash(random_pg_position(
        0,
        1,
        0,
        SeededRng::new(seed).next_u64() as u32,
    ));
    let order = scan_order(16);
    let first = order
        .iter()
        .position(|&key| ScanPosition::of(key) >= start)
        .unwrap_or(0);
    assert_ne!(first, 0, "the draw starts before every object");
    let mut rotated = order[first..].to_vec();
    rotated.extend_from_slice(&order[..first]);
    effects.clear();
    let last = rotated[15];
    let outcome = tier.on_request(&request(last, 100, 1000, false), &mut effects);
    assert_eq!(outcome, Outcome::Hit);
    assert_eq!(effects.evicted, rotated[..4]);
    assert_ne!(effects.evicted, order[..4]);
}
