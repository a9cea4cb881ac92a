use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::balance::{balance, check_plan, BalanceConfig};
use crate::exhaustive;
use crate::problem::{Level, Osd, OsdId, Pg, PgId, Pool, Problem, RuleConstraints, Take};
use crate::targets::{Bounds, Targets};

const TYPE_HOST: i32 = 1;

/// Hosts with `ssd_per_host` SSDs then `hdd_per_host` HDDs each; pool 1 (size `size`) takes
/// its first replica from the SSDs and the rest from the HDDs, each class in its own shadow
/// host buckets as Ceph's class takes see them; pool 2 (if `plain_pgs > 0`) is a plain size-2
/// pool over the HDDs.
#[derive(Debug, Clone)]
struct Shape {
    hosts: usize,
    ssd_per_host: usize,
    hdd_per_host: usize,
    size: usize,
    pgs: u32,
    plain_pgs: u32,
    spread: f64,
    seed: u64,
}

fn host_level() -> Vec<Level> {
    vec![Level {
        type_id: TYPE_HOST,
        max_per_pg: 1,
        pin_to_raw: false,
    }]
}

fn two_take_problem(shape: &Shape) -> Problem {
    let mut rng = ChaCha8Rng::seed_from_u64(shape.seed);
    let mut problem = Problem::default();
    let mut ssd = BTreeSet::new();
    let mut hdd = BTreeSet::new();
    let mut ancestors = BTreeMap::new();
    let mut id: OsdId = 0;
    for host in 0..shape.hosts as i32 {
        for index in 0..shape.ssd_per_host + shape.hdd_per_host {
            let is_ssd = index < shape.ssd_per_host;
            let weight = 1.0 + shape.spread * rng.gen::<f64>();
            problem.osds.push(Osd {
                id,
                weight,
                ancestors: BTreeMap::from([(TYPE_HOST, -2 - host)]),
                class: Some(if is_ssd { "ssd" } else { "hdd" }.into()),
            });
            // Shadow hosts: host~ssd and host~hdd are different buckets.
            let shadow = if is_ssd { -100 - host } else { -200 - host };
            ancestors.insert(id, BTreeMap::from([(TYPE_HOST, shadow)]));
            if is_ssd {
                ssd.insert(id);
            } else {
                hdd.insert(id);
            }
            id += 1;
        }
    }
    let takes = vec![
        Take {
            positions: 0..1,
            candidates: ssd.clone(),
            levels: host_level(),
        },
        Take {
            positions: 1..shape.size,
            candidates: hdd.clone(),
            levels: host_level(),
        },
    ];
    problem.pools.push(Pool {
        id: 1,
        name: "ssd-primary".into(),
        size: shape.size as u32,
        rule: RuleConstraints {
            candidates: ssd.union(&hdd).copied().collect(),
            levels: host_level(),
            positional: false,
            ancestors: ancestors.clone(),
            takes,
        },
    });
    let osds = problem.osds.clone();
    let draw = |rng: &mut ChaCha8Rng, from: &BTreeSet<OsdId>, count: usize| {
        let mut set: Vec<OsdId> = Vec::new();
        for _ in 0..count {
            let allowed: Vec<&Osd> = osds
                .iter()
                .filter(|o| from.contains(&o.id))
                .filter(|o| {
                    !set.iter()
                        .any(|s| osds[*s as usize].ancestors == o.ancestors)
                })
                .collect();
            let total: f64 = allowed.iter().map(|o| o.weight).sum();
            let mut pick = rng.gen::<f64>() * total;
            let Some(mut chosen) = allowed.last().map(|o| o.id) else {
                break;
            };
            for o in &allowed {
                if pick < o.weight {
                    chosen = o.id;
                    break;
                }
                pick -= o.weight;
            }
            set.push(chosen);
        }
        set
    };
    for seed in 0..shape.pgs {
        let mut raw = draw(&mut rng, &ssd, 1);
        raw.extend(draw(&mut rng, &hdd, shape.size - 1));
        problem.pgs.push(pg(1, seed, raw));
    }
    if shape.plain_pgs > 0 {
        problem.pools.push(Pool {
            id: 2,
            name: "hdd".into(),
            size: 2,
            rule: RuleConstraints {
                candidates: hdd.clone(),
                levels: host_level(),
                positional: false,
                ancestors: BTreeMap::new(),
                takes: Vec::new(),
            },
        });
        for seed in 0..shape.plain_pgs {
            let raw = draw(&mut rng, &hdd, 2);
            problem.pgs.push(pg(2, seed, raw));
        }
    }
    problem
}

fn pg(pool: i64, seed: u32, raw: Vec<OsdId>) -> Pg {
    Pg {
        id: PgId { pool, seed },
        raw,
        upmap_items: Vec::new(),
        size_bytes: None,
        from_pg_upmap: false,
    }
}

/// (pool distance, total distance, shards moved) of a plan, with the take-aware targets.
fn objective(
    problem: &Problem,
    up: &BTreeMap<PgId, Vec<OsdId>>,
    moved: usize,
) -> (u64, u64, usize) {
    let targets = Targets::compute(problem);
    let mut per_pool: BTreeMap<(i64, OsdId), usize> = BTreeMap::new();
    let mut total: BTreeMap<OsdId, usize> = BTreeMap::new();
    for (id, set) in up {
        for &o in set {
            *per_pool.entry((id.pool, o)).or_default() += 1;
            *total.entry(o).or_default() += 1;
        }
    }
    let (mut pool_distance, mut total_distance) = (0, 0);
    for osd in &problem.osds {
        for pool in &problem.pools {
            let c = per_pool.get(&(pool.id, osd.id)).copied().unwrap_or(0);
            pool_distance += Bounds::of_target(targets.pool_target(pool.id, osd.id)).penalty(c);
        }
        let c = total.get(&osd.id).copied().unwrap_or(0);
        total_distance += Bounds::of_target(targets.total_target(osd.id)).penalty(c);
    }
    (pool_distance, total_distance, moved)
}

fn shape() -> impl Strategy<Value = Shape> {
    (
        2usize..5,
        1usize..3,
        0u32..5,
        0u32..4,
        0.0f64..2.0,
        any::<u64>(),
    )
        .prop_map(
            |(hosts, hdd_per_host, pgs, plain_pgs, spread, seed)| Shape {
                hosts,
                ssd_per_host: 1,
                hdd_per_host,
                size: 2 + usize::from(hosts > 2 && seed % 2 == 0),
                pgs: pgs + 1,
                plain_pgs,
                spread,
                seed,
            },
        )
        .prop_filter("tiny", |s| {
            let osds = s.hosts * (s.ssd_per_host + s.hdd_per_host);
            let pools = 1 + usize::from(s.plain_pgs > 0);
            osds * pools <= 12 && s.pgs as usize * s.size + s.plain_pgs as usize * 2 <= 14
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]
    /// Two-take rules: the plan is valid, every shard stays within its own block's OSDs,
    /// and it reaches the exhaustive optimum of (pool distance, total distance, moves).
    #[test]
    fn two_take_rules_match_exhaustive_search(shape in shape()) {
        let problem = two_take_problem(&shape);
        let plan = balance(&problem, &BalanceConfig::default())
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(check_plan(&problem, &plan).is_ok(), "{:?}", check_plan(&problem, &plan));
        let pool = &problem.pools[0];
        for (id, set) in plan.up.iter().filter(|(id, _)| id.pool == 1) {
            for take in &pool.rule.takes {
                for &osd in &set[take.positions.clone()] {
                    prop_assert!(take.candidates.contains(&osd), "{} {:?}", id, set);
                }
            }
        }
        prop_assert_eq!(
            objective(&problem, &plan.up, plan.moved_after),
            exhaustive::optimum(&problem)
        );
    }
}

/// On a larger map the SSD replica's OSDs reach their own bounds, counted apart from the
/// HDD replicas', and the items are in place (position 0 stays an SSD).
#[test]
fn each_take_is_balanced_on_its_own_osds() {
    let shape = Shape {
        hosts: 6,
        ssd_per_host: 1,
        hdd_per_host: 3,
        size: 3,
        pgs: 256,
        plain_pgs: 128,
        spread: 1.0,
        seed: 7,
    };
    let problem = two_take_problem(&shape);
    let plan = balance(&problem, &BalanceConfig::default()).expect("balance");
    check_plan(&problem, &plan).expect("valid plan");
    assert!(plan.moved_after > 0);
    assert!(plan.violations.is_empty(), "{:?}", plan.violations);
    let ssd = &problem.pools[0].rule.takes[0].candidates;
    for set in plan
        .up
        .iter()
        .filter(|(id, _)| id.pool == 1)
        .map(|(_, s)| s)
    {
        assert!(ssd.contains(&set[0]));
        assert!(set[1..].iter().all(|o| !ssd.contains(o)));
    }
    // The SSD replica's shards per SSD within [floor, ceil] of 256 x weight share.
    let weight: f64 = ssd.iter().map(|&o| problem.osds[o as usize].weight).sum();
    for &o in ssd {
        let count = plan.up.values().filter(|s| s[0] == o).count();
        let target = 256.0 * problem.osds[o as usize].weight / weight;
        assert!(
            Bounds::of_target(target).contains(count),
            "osd.{o}: {count} vs {target}"
        );
    }
}
