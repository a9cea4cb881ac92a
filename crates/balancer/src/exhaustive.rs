//! Exhaustive reference for tests: dynamic programming over PGs on the vector of per-(pool, OSD)
//! counts, trying every legal OSD set of every PG. Gives the minimum (distance outside the
//! pool bounds, distance outside the total bounds, shards moved) lexicographically, the
//! distances measured by [`crate::targets::Bounds::penalty`]: the objective [`crate::balance`]
//! minimises.

use std::collections::{BTreeMap, HashMap};

use crate::problem::{OsdId, Pg, PgId, Problem, ITEM_NONE};
use crate::targets::{Bounds, Targets};

/// (distance outside the pool bounds, outside the total bounds, shards moved) of the best
/// placement.
pub fn optimum(problem: &Problem) -> (u64, u64, usize) {
    let targets = Targets::compute(problem);
    let (osd_ids, states) = reachable(problem);
    let mut best = (u64::MAX, u64::MAX, usize::MAX);
    for (state, moves) in states {
        let (pool_distance, total_distance) = distances(problem, &targets, &osd_ids, &state, |t| {
            Bounds::of_target(t)
        });
        best = best.min((pool_distance, total_distance, moves));
    }
    best
}

/// The bounded mode's optimum ([`crate::deviation`]): lexicographically the least (distance
/// outside each pool's `[target - N, target + N]`, shards moved, distance outside the tight
/// pool bounds plus the tight total bounds).
pub fn deviation_optimum(problem: &Problem, deviation: f64) -> (u64, usize, u64) {
    let targets = Targets::compute(problem);
    let (osd_ids, states) = reachable(problem);
    let mut best = (u64::MAX, usize::MAX, u64::MAX);
    for (state, moves) in states {
        let (outer, _) = distances(problem, &targets, &osd_ids, &state, |t| {
            crate::deviation::bounds_within(t, deviation)
        });
        let (pool, total) = distances(problem, &targets, &osd_ids, &state, |t| {
            Bounds::of_target(t)
        });
        best = best.min((outer, moves, pool + total));
    }
    best
}

/// (Distance outside the pool bounds, outside the tight total bounds) of one state; `pool
/// bounds` maps a pool target to its bounds.
fn distances(
    problem: &Problem,
    targets: &Targets,
    osd_ids: &[OsdId],
    state: &[u8],
    pool_bounds: impl Fn(f64) -> Bounds,
) -> (u64, u64) {
    let n = osd_ids.len();
    let (mut pool_distance, mut total_distance) = (0, 0);
    for (i, &osd) in osd_ids.iter().enumerate() {
        let mut total = 0;
        for (p, pool) in problem.pools.iter().enumerate() {
            let count = state[p * n + i] as usize;
            total += count;
            pool_distance += pool_bounds(targets.pool_target(pool.id, osd)).penalty(count);
        }
        total_distance += Bounds::of_target(targets.total_target(osd)).penalty(total);
    }
    (pool_distance, total_distance)
}

/// Every reachable vector of per-(pool, OSD) counts with the fewest shards moved from raw
/// CRUSH that reaches it, over every legal set of every PG.
fn reachable(problem: &Problem) -> (Vec<OsdId>, HashMap<Vec<u8>, usize>) {
    let osd_ids: Vec<OsdId> = problem.osds.iter().map(|o| o.id).collect();
    let osd_index: HashMap<OsdId, usize> =
        osd_ids.iter().enumerate().map(|(i, &o)| (o, i)).collect();
    let pool_index: HashMap<i64, usize> = problem
        .pools
        .iter()
        .enumerate()
        .map(|(i, p)| (p.id, i))
        .collect();
    let n = osd_ids.len();
    let mut states: HashMap<Vec<u8>, usize> =
        HashMap::from([(vec![0; n * problem.pools.len()], 0)]);
    for pg in &problem.pgs {
        let p = pool_index[&pg.id.pool];
        let raw: Vec<OsdId> = pg.raw.iter().copied().filter(|&o| o != ITEM_NONE).collect();
        let legal: Vec<(Vec<OsdId>, usize)> = legal_sets(problem, pg)
            .into_iter()
            .map(|set| {
                let moved = set.iter().filter(|o| !raw.contains(o)).count();
                (set, moved)
            })
            .collect();
        let mut next: HashMap<Vec<u8>, usize> = HashMap::new();
        for (state, moves) in &states {
            for (set, moved) in &legal {
                let mut s = state.clone();
                for o in set {
                    s[p * n + osd_index[o]] += 1;
                }
                let total = moves + moved;
                let entry = next.entry(s).or_insert(usize::MAX);
                *entry = (*entry).min(total);
            }
        }
        states = next;
    }
    (osd_ids, states)
}

/// Every OSD set PG `pg` may have: the raw set's size, from its raw OSDs and the pool's
/// candidates of positive weight, within every level's limit (and its raw buckets where the
/// level is pinned).
fn legal_sets(problem: &Problem, pg: &Pg) -> Vec<Vec<OsdId>> {
    let Some(pool) = problem.pool(pg.id.pool) else {
        return Vec::new();
    };
    if !pool.rule.takes.is_empty() {
        return legal_multi_take_sets(problem, pool, pg);
    }
    let raw: Vec<OsdId> = pg.raw.iter().copied().filter(|&o| o != ITEM_NONE).collect();
    let allowed: Vec<OsdId> = problem
        .osds
        .iter()
        .map(|o| o.id)
        .filter(|o| raw.contains(o) || pool.rule.candidates.contains(o))
        .filter(|o| raw.contains(o) || problem.osd(*o).is_some_and(|x| x.weight > 0.0))
        .collect();
    let mut sets = Vec::new();
    combinations(&allowed, raw.len(), 0, &mut Vec::new(), &mut sets);
    sets.into_iter()
        .filter(|set| {
            pool.rule.levels.iter().filter(|l| l.pin_to_raw).all(|l| {
                let domain = |o: &OsdId| problem.osd(*o).map(|x| pool.rule.domain(x, l.type_id));
                set.iter()
                    .all(|o| raw.iter().any(|r| domain(r) == domain(o)))
            })
        })
        .filter(|set| {
            pool.rule.levels.iter().all(|l| {
                let mut count: BTreeMap<i64, u32> = BTreeMap::new();
                for o in set {
                    if let Some(osd) = problem.osd(*o) {
                        *count.entry(pool.rule.domain(osd, l.type_id)).or_default() += 1;
                    }
                }
                count.values().all(|&c| c <= l.max_per_pg)
            })
        })
        .collect()
}

/// A multi-take pool's sets: each block's legal sets for its positions (its candidates, its
/// levels), every combination of them, kept where Ceph's `verify_upmap` would keep them: at
/// every level of one shard per bucket, no two OSDs of the whole set in one bucket.
fn legal_multi_take_sets(
    problem: &Problem,
    pool: &crate::problem::Pool,
    pg: &Pg,
) -> Vec<Vec<OsdId>> {
    let mut sets: Vec<Vec<OsdId>> = vec![Vec::new()];
    for take in &pool.rule.takes {
        let end = take.positions.end.min(pg.raw.len());
        let part = Pg {
            raw: pg.raw[take.positions.start.min(end)..end].to_vec(),
            ..pg.clone()
        };
        let block = crate::problem::Pool {
            rule: crate::problem::RuleConstraints {
                candidates: take.candidates.clone(),
                levels: take.levels.clone(),
                takes: Vec::new(),
                ..pool.rule.clone()
            },
            ..pool.clone()
        };
        let mut single = Problem {
            osds: problem.osds.clone(),
            pools: vec![block],
            pgs: Vec::new(),
        };
        single.pgs.push(part.clone());
        let options = legal_sets(&single, &part);
        sets = sets
            .into_iter()
            .flat_map(|prefix| {
                options.iter().map(move |o| {
                    let mut set = prefix.clone();
                    set.extend(o);
                    set
                })
            })
            .collect();
    }
    let levels: Vec<i32> = pool
        .rule
        .takes
        .iter()
        .flat_map(|t| {
            t.levels
                .iter()
                .filter(|l| l.max_per_pg == 1)
                .map(|l| l.type_id)
        })
        .collect();
    sets.retain(|set| {
        levels.iter().all(|&type_id| {
            let mut seen = std::collections::BTreeSet::new();
            set.iter().all(|o| {
                problem
                    .osd(*o)
                    .is_some_and(|x| seen.insert(pool.rule.domain(x, type_id)))
            })
        })
    });
    sets
}

/// The bytes mode's optimum: over every legal set of every PG, the least `fills(bytes per
/// OSD)` (OSDs in the problem's order), then the fewest shards moved from the current up
/// sets, with at most `max_moves` moved.
pub fn bytes_optimum(
    problem: &Problem,
    sizes: &BTreeMap<PgId, u64>,
    max_moves: Option<usize>,
    fills: impl Fn(&[u64]) -> Vec<u64>,
) -> (Vec<u64>, usize) {
    let osd_index: HashMap<OsdId, usize> = problem
        .osds
        .iter()
        .enumerate()
        .map(|(i, o)| (o.id, i))
        .collect();
    let limit = max_moves.unwrap_or(usize::MAX);
    let mut states: HashMap<Vec<u64>, usize> = HashMap::from([(vec![0; problem.osds.len()], 0)]);
    for pg in &problem.pgs {
        let size = sizes.get(&pg.id).copied().unwrap_or(0);
        let current: Vec<OsdId> = pg.up().into_iter().filter(|&o| o != ITEM_NONE).collect();
        let mut legal: Vec<(Vec<OsdId>, usize)> = legal_sets(problem, pg)
            .into_iter()
            .map(|set| {
                let moved = set.iter().filter(|o| !current.contains(o)).count();
                (set, moved)
            })
            .collect();
        if size == 0 || !legal.iter().any(|(_, moved)| *moved == 0) {
            legal = vec![(current.clone(), 0)];
        }
        let mut next: HashMap<Vec<u64>, usize> = HashMap::new();
        for (state, moves) in &states {
            for (set, moved) in &legal {
                let total = moves + moved;
                if total > limit {
                    continue;
                }
                let mut s = state.clone();
                for o in set {
                    s[osd_index[o]] += size;
                }
                let entry = next.entry(s).or_insert(usize::MAX);
                *entry = (*entry).min(total);
            }
        }
        states = next;
    }
    states
        .into_iter()
        .map(|(state, moves)| (fills(&state), moves))
        .min()
        .unwrap_or_default()
}

fn combinations(
    items: &[OsdId],
    k: usize,
    start: usize,
    current: &mut Vec<OsdId>,
    out: &mut Vec<Vec<OsdId>>,
) {
    if current.len() == k {
        out.push(current.clone());
        return;
    }
    for i in start..items.len() {
        current.push(items[i]);
        combinations(items, k, i + 1, current, out);
        current.pop();
    }
}
