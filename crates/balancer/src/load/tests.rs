use super::*;
use crate::balance::check_plan;
use crate::generate::{generate, ClusterSpec, PoolSpec};
use proptest::prelude::*;

/// Six hosts of one OSD, 48 PGs of 3 replicas: OSDs 0-2 fast (NVMe-like), 3-5 slow with twice
/// the space (SATA-like), as seed 000's Figure 9 cluster.
fn cluster() -> (Problem, BTreeMap<OsdId, OsdCapability>) {
    let problem = generate(&ClusterSpec {
        racks: 1,
        hosts_per_rack: 6,
        osds_per_host: 1,
        weight_spread: 0.0,
        pools: vec![PoolSpec {
            pg_count: 48,
            size: 3,
            rack_limit: None,
            class: None,
        }],
        seed: 17,
    });
    let capability = (0..6)
        .map(|o| {
            let fast = o < 3;
            (
                o,
                OsdCapability {
                    read_ops_per_s: if fast { 3000.0 } else { 1000.0 },
                    write_ops_per_s: if fast { 1500.0 } else { 500.0 },
                    free_bytes: if fast { 100 << 30 } else { 200 << 30 },
                },
            )
        })
        .collect();
    (problem, capability)
}

fn uniform(problem: &Problem, reads: f64, writes: f64) -> BTreeMap<PgId, PgLoad> {
    problem
        .pgs
        .iter()
        .map(|pg| {
            (
                pg.id,
                PgLoad {
                    reads_per_s: reads,
                    writes_per_s: writes,
                    bytes: 1 << 20,
                },
            )
        })
        .collect()
}

fn max_util(util: &BTreeMap<OsdId, (f64, f64)>) -> (f64, f64) {
    util.values()
        .fold((0.0_f64, 0.0_f64), |(r, w), &(a, b)| (r.max(a), w.max(b)))
}

#[test]
fn reads_are_relieved_by_primaries_without_moving_data() {
    let (problem, capability) = cluster();
    // 48 PGs x 60 reads/s = 2880 reads/s: a slow OSD leading 8 PGs runs at 0.48, one
    // leading 16 at 0.96; the fast ones have room.
    let loads = uniform(&problem, 60.0, 0.0);
    let plan = plan_load(
        &problem,
        &loads,
        &capability,
        &BTreeSet::new(),
        &LoadConfig {
            read_threshold: 0.4,
            ..LoadConfig::default()
        },
    );
    assert!(max_util(&plan.before).0 > 0.4, "{:?}", plan.before);
    assert!(!plan.primaries.is_empty());
    assert!(plan.moves.changes.is_empty(), "reads must not move data");
    assert_eq!(plan.bytes_moved, 0);
    assert!(max_util(&plan.after).0 <= 0.4, "{:?}", plan.after);
    for (pg, raw) in &plan.pg_upmap {
        let original = problem.pgs.iter().find(|p| p.id == *pg).unwrap();
        let mut a = raw.clone();
        let mut b = original.raw.clone();
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b, "members of {pg} changed");
        assert_eq!(raw[0], plan.primaries[pg]);
    }
}

#[test]
fn writes_are_relieved_by_moving_the_hottest_pgs() {
    let (problem, capability) = cluster();
    // Writes land on every member: 6 to 18 writes/s per PG, 1728/s in all, within the
    // OSDs' room below the lower mark (2700/s) but over 0.5 on a slow OSD with 24 shards.
    let mut loads = uniform(&problem, 0.0, 6.0);
    for (k, load) in loads.values_mut().enumerate() {
        load.writes_per_s += (k % 4) as f64 * 4.0;
    }
    let config = LoadConfig {
        write_threshold: 0.5,
        ..LoadConfig::default()
    };
    let plan = plan_load(&problem, &loads, &capability, &BTreeSet::new(), &config);
    assert!(max_util(&plan.before).1 > 0.5, "{:?}", plan.before);
    assert!(plan.moves.shards_changed > 0);
    check_plan(&problem, &plan.moves).expect("valid moves");
    assert!(max_util(&plan.after).1 <= 0.5, "{:?}", plan.after);
    // Every OSD that received stays below the lower mark.
    for (osd, &(_, w)) in &plan.after {
        if w > plan.before[osd].1 {
            assert!(w <= 0.5 * 0.9 + 1e-9, "osd.{osd} filled to {w}");
        }
    }
}

#[test]
fn the_budget_and_the_cooldown_hold() {
    let (problem, capability) = cluster();
    let loads = uniform(&problem, 60.0, 14.0);
    let cooldown: BTreeSet<PgId> = problem.pgs.iter().take(10).map(|pg| pg.id).collect();
    let plan = plan_load(
        &problem,
        &loads,
        &capability,
        &cooldown,
        &LoadConfig {
            read_threshold: 0.4,
            write_threshold: 0.5,
            max_primary_changes: 2,
            max_shards_moved: 3,
            max_bytes_moved: 2 << 20,
            ..LoadConfig::default()
        },
    );
    assert!(plan.primaries.len() <= 2);
    assert!(
        plan.moves.shards_changed <= 2,
        "two 1 MiB PGs fit the bytes budget"
    );
    assert!(plan.bytes_moved <= 2 << 20);
    for change in &plan.moves.changes {
        let pg = match change {
            crate::UpmapChange::Set { pg, .. } | crate::UpmapChange::Remove { pg } => pg,
        };
        assert!(!cooldown.contains(pg));
    }
    assert!(plan.primaries.keys().all(|pg| !cooldown.contains(pg)));
}

#[test]
fn nothing_moves_below_the_thresholds() {
    let (problem, capability) = cluster();
    let plan = plan_load(
        &problem,
        &uniform(&problem, 10.0, 2.0),
        &capability,
        &BTreeSet::new(),
        &LoadConfig::default(),
    );
    assert!(plan.primaries.is_empty() && plan.moves.changes.is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// Periods on their own results: the highest utilisation never rises, a PG is never moved
    /// in two consecutive periods, and the periods stop changing anything (no oscillation).
    #[test]
    fn periods_settle_without_oscillation(
        reads in proptest::collection::vec(0.0f64..150.0, 48),
        writes in proptest::collection::vec(0.0f64..30.0, 48),
        threshold in 0.3f64..0.9,
    ) {
        let (mut problem, capability) = cluster();
        let loads: BTreeMap<PgId, PgLoad> = problem
            .pgs
            .iter()
            .enumerate()
            .map(|(k, pg)| (pg.id, PgLoad { reads_per_s: reads[k], writes_per_s: writes[k], bytes: 1 << 20 }))
            .collect();
        let config = LoadConfig { read_threshold: threshold, write_threshold: threshold, ..LoadConfig::default() };
        let mut cooldown = BTreeSet::new();
        let mut settled = false;
        for _ in 0..20 {
            let plan = plan_load(&problem, &loads, &capability, &cooldown, &config);
            let (rb, wb) = max_util(&plan.before);
            let (ra, wa) = max_util(&plan.after);
            prop_assert!(ra <= rb + 1e-9 && wa <= wb + 1e-9, "{:?} -> {:?}", (rb, wb), (ra, wa));
            let moved: BTreeSet<PgId> = plan
                .primaries
                .keys()
                .copied()
                .chain(plan.moves.changes.iter().map(|c| match c {
                    crate::UpmapChange::Set { pg, .. } | crate::UpmapChange::Remove { pg } => *pg,
                }))
                .collect();
            prop_assert!(moved.is_disjoint(&cooldown));
            if moved.is_empty() {
                settled = true;
                break;
            }
            apply_to_problem(&mut problem, &plan);
            cooldown = moved;
        }
        prop_assert!(settled, "still moving after 20 periods");
    }
}

/// One device serves an OSD's reads and writes: an OSD under each threshold alone but past it
/// in all (reads at 0.54, writes at 0.19 of a slow OSD's capability, threshold 0.6) is
/// relieved, reads first by primaries, and every OSD that received stays below the lower mark
/// in all. Judging reads and writes apart, nothing moved while the slow OSDs ran at 0.73.
#[test]
fn reads_and_writes_together_overload_one_device() {
    let (problem, capability) = cluster();
    let loads = uniform(&problem, 54.0, 4.5);
    let config = LoadConfig {
        read_threshold: 0.6,
        write_threshold: 0.6,
        hysteresis: 0.2,
        ..LoadConfig::default()
    };
    let plan = plan_load(&problem, &loads, &capability, &BTreeSet::new(), &config);
    let busiest = |util: &BTreeMap<OsdId, (f64, f64)>| {
        util.values().map(|&(r, w)| r + w).fold(0.0_f64, f64::max)
    };
    let (r, w) = max_util(&plan.before);
    assert!(r < 0.6 && w < 0.6, "each alone under: {:?}", plan.before);
    assert!(busiest(&plan.before) > 0.6, "{:?}", plan.before);
    assert!(!plan.primaries.is_empty(), "reads relieved first");
    assert!(
        busiest(&plan.after) < busiest(&plan.before),
        "{:?} -> {:?}",
        plan.before,
        plan.after
    );
    for (osd, &(r, w)) in &plan.after {
        let (r0, w0) = plan.before[osd];
        if r + w > r0 + w0 + 1e-9 {
            assert!(r + w <= 0.6 * 0.8 + 1e-9, "osd.{osd} filled to {}", r + w);
        }
    }
    check_plan(&problem, &plan.moves).expect("valid moves");
}
