use super::*;
use crate::Outcome;

fn request(key: Key, seq: u64) -> Request {
    Request {
        key,
        seq,
        now_ms: seq,
        size_bytes: 1,
        next_seq: u64::MAX,
        ..Request::default()
    }
}

/// Misses of `cache` over `keys`, and its cache writes (admissions and promotions).
fn run(cache: &mut dyn Cache, keys: &[Key]) -> (u64, u64) {
    let mut effects = Effects::default();
    let (mut misses, mut writes) = (0, 0);
    for (seq, &key) in keys.iter().enumerate() {
        effects.clear();
        let outcome = cache.on_request(&request(key, seq as u64), &mut effects);
        misses += u64::from(!outcome.is_hit());
        writes += u64::from(matches!(
            outcome,
            Outcome::Admitted | Outcome::AdmittedAfterProxy
        )) + effects.promoted.len() as u64;
        assert!(cache.len() <= cache.capacity());
    }
    (misses, writes)
}

/// A phase of random requests over a small hot set, then a loop a little larger than the
/// cache (LRU and FIFO miss all of it, LIRS keeps most of it).
fn phases(capacity: usize) -> Vec<Key> {
    let hot = (0..20_000u64).map(|i| (mix64(i) % (capacity as u64 / 2)) as Key);
    let looped = (0..30).flat_map(|_| 1_000..1_000 + (capacity as Key * 6 / 5));
    hot.chain(looped).collect()
}

fn build_named(name: &str, capacity: usize) -> Box<dyn Cache> {
    build(&PolicySpec::new(name, capacity, 4_096)).expect("builds")
}

/// On the loop the selector changes to a loop-resistant candidate and ends far below LRU,
/// within a few percent of the best candidate run alone.
#[test]
fn follows_the_best_candidate_through_a_change_of_workload() {
    let capacity = 1_000;
    let keys = phases(capacity);
    // Windows of 2 x capacity sampled requests: the loop phase spans 18 of them.
    let mut config = MiniatureConfig::new(capacity);
    config.window = 2.0;
    let mut mini = Miniature::new(config, 4_096).expect("builds");
    let (mini_misses, _) = run(&mut mini, &keys);
    let best = DEFAULT_CANDIDATES
        .iter()
        .map(|name| run(build_named(name, capacity).as_mut(), &keys).0)
        .min()
        .expect("candidates");
    let lru = run(build_named("lru", capacity).as_mut(), &keys).0;
    assert!(mini.switches >= 1, "{mini:?}");
    assert!(
        (mini_misses as f64) < best as f64 * 1.10 + 200.0,
        "mini {mini_misses}, best {best}"
    );
    assert!(mini_misses * 2 < lru, "mini {mini_misses}, lru {lru}");
}

/// A change hands the old contents to the new policy: the cache is as full right after the
/// switch as before it, and nothing was written for it.
#[test]
fn a_switch_hands_over_the_contents() {
    let capacity = 600;
    let mut config = MiniatureConfig::new(capacity);
    config.candidates = vec!["fifo".into(), "lirs".into()];
    let mut mini = Miniature::new(config, 4_096).expect("builds");
    let keys: Vec<Key> = (0..40).flat_map(|_| 0..(capacity as Key * 6 / 5)).collect();
    let mut effects = Effects::default();
    for (seq, &key) in keys.iter().enumerate() {
        effects.clear();
        let before = mini.len();
        let switches = mini.switches;
        mini.on_request(&request(key, seq as u64), &mut effects);
        if mini.switches > switches {
            assert_eq!(mini.leader(), "lirs");
            assert!(
                mini.len() + 1 >= before,
                "{} after, {before} before",
                mini.len()
            );
            assert!(
                effects.evicted.len() <= 1,
                "the hand-over dropped {} objects",
                effects.evicted.len()
            );
            return;
        }
    }
    panic!("never switched to LIRS on a loop: {mini:?}");
}

/// With `budget`, every candidate's admission keeps the writes within it (here the sample is
/// every key, so the estimate of LRU's writes is exact).
#[test]
fn the_budget_bounds_the_writes_of_every_candidate() {
    let capacity = 500;
    let keys: Vec<Key> = (0..60_000u64)
        .map(|i| {
            let x = mix64(i);
            if x.is_multiple_of(3) {
                (x % 200) as Key
            } else {
                (200 + x % 3_000) as Key
            }
        })
        .collect();
    let (lru_misses, _) = run(build_named("lru", capacity).as_mut(), &keys);
    for budget in [0.33, 0.1] {
        let mut config = MiniatureConfig::new(capacity);
        config.budget = budget;
        let mut mini = Miniature::new(config, 4_096).expect("builds");
        let (_, writes) = run(&mut mini, &keys);
        assert!(
            writes as f64 <= budget * lru_misses as f64 + 1.0,
            "budget {budget}: {writes} writes, LRU {lru_misses}"
        );
    }
}

/// The sample is spatial: a key is always in it or always out, at about the rate.
#[test]
fn the_sample_is_a_fixed_share_of_the_keys() {
    let mut config = MiniatureConfig::new(100_000);
    config.rate = 0.05;
    let mut mini = Miniature::new(config, 1 << 16).expect("builds");
    let first: Vec<bool> = (0..20_000).map(|k| mini.sampled_id(k).is_some()).collect();
    let again: Vec<bool> = (0..20_000).map(|k| mini.sampled_id(k).is_some()).collect();
    assert_eq!(first, again);
    let share = first.iter().filter(|&&s| s).count() as f64 / 20_000.0;
    assert!((share - 0.05).abs() < 0.01, "{share}");
}

/// The paired test keeps the live cache where two candidates are tied: on uniformly random
/// keys LRU and FIFO miss alike, and the rule of the scores alone (no margin) follows every
/// fluctuation of the sample, while the test at 3 standard deviations switches far less.
#[test]
fn the_paired_test_does_not_switch_on_a_tie() {
    let capacity = 300;
    let keys: Vec<Key> = (0..200_000u64).map(|i| (mix64(i) % 1_000) as Key).collect();
    let switches = |z: f64| {
        let mut config = MiniatureConfig::new(capacity);
        config.candidates = vec!["lru".into(), "fifo".into()];
        config.full_window = 1.0;
        config.full_window_min = 100;
        config.margin = 0.0;
        config.z = z;
        let mut mini = Miniature::new(config, 4_096).expect("builds");
        run(&mut mini, &keys);
        mini.switches
    };
    let (free, tested) = (switches(0.0), switches(3.0));
    assert!(free >= 20, "without the test: {free} switches");
    assert!(tested * 5 <= free, "with the test {tested}, without {free}");
}

/// The test still lets a real lead through: on the loop the selector changes to a
/// loop-resistant candidate with `z` = 2 as without it.
#[test]
fn the_paired_test_follows_a_real_lead() {
    let capacity = 1_000;
    let keys = phases(capacity);
    let mut config = MiniatureConfig::new(capacity);
    config.window = 2.0;
    config.z = 2.0;
    let mut mini = Miniature::new(config, 4_096).expect("builds");
    let (mini_misses, _) = run(&mut mini, &keys);
    let lru = run(build_named("lru", capacity).as_mut(), &keys).0;
    assert!(mini.switches >= 1, "{mini:?}");
    assert!(mini_misses * 2 < lru, "mini {mini_misses}, lru {lru}");
}

/// A cache of a few dozen objects is simulated whole and decided every `full_window_min`
/// requests: on a 1,000-request loop a little larger than the cache the selector leaves LRU
/// (which misses every request) for LIRS within the trace, which windows of `window_min`
/// sampled requests never did.
#[test]
fn full_replicas_are_decided_within_a_short_trace() {
    let capacity = 20;
    let keys: Vec<Key> = (0..1_000).map(|i| i % 24).collect();
    let mut config = MiniatureConfig::new(capacity);
    config.candidates = vec!["lru".into(), "lirs".into()];
    let mut mini = Miniature::new(config, 64).expect("builds");
    let (misses, _) = run(&mut mini, &keys);
    assert_eq!(mini.leader(), "lirs");
    assert!(misses < 500, "{misses} misses of 1,000");
}

/// A batch through [`Cache::on_requests`] is the same requests one by one, for every
/// candidate: the miniatures replay batches, the live cache single requests.
#[test]
fn a_batch_is_the_same_requests_one_by_one() {
    let keys = phases(300);
    let requests: Vec<Request> = keys
        .iter()
        .enumerate()
        .map(|(seq, &key)| request(key, seq as u64))
        .collect();
    for name in DEFAULT_CANDIDATES.iter().chain(&["lru+budget"]) {
        let mut single = build_named(name, 300);
        let mut batched = build_named(name, 300);
        let (mut one_effects, mut batch_effects) = (Effects::default(), Effects::default());
        let mut one_outcomes = Vec::new();
        for request in &requests {
            one_outcomes.push(single.on_request(request, &mut one_effects));
        }
        let mut batch_outcomes = Vec::new();
        for chunk in requests.chunks(BATCH) {
            batched.on_requests(chunk, &mut batch_effects, &mut batch_outcomes);
        }
        assert_eq!(one_outcomes, batch_outcomes, "{name}");
        assert_eq!(one_effects.evicted, batch_effects.evicted, "{name}");
        assert_eq!(one_effects.promoted, batch_effects.promoted, "{name}");
    }
}

/// Windows that end in the middle of a batch are scored on every request up to their end:
/// the selector with a 100-request window (not a multiple of the batch) on full replicas makes
/// the same decisions whatever the batch boundaries, so it switches to the loop-resistant
/// candidate within the loop as before.
#[test]
fn a_window_ending_inside_a_batch_is_decided_on_all_its_requests() {
    let mut config = MiniatureConfig::new(300);
    config.full_window_min = 100;
    config.full_window = 0.1;
    let mut mini = Miniature::new(config, 4_096).expect("builds");
    let keys = phases(300);
    run(&mut mini, &keys[..20_000 + 100]);
    // 201 windows of 100 ended: every sampled request was replayed and scored.
    assert_eq!(mini.sampled_requests, 20_100);
    assert!(mini.batch.is_empty(), "{} queued", mini.batch.len());
    run(&mut mini, &keys[20_100..20_150]);
    assert_eq!(mini.batch.len(), 50);
    run(&mut mini, &keys[20_150..]);
    assert!(mini.switches >= 1);
    assert_ne!(mini.leader(), "lru");
}
