//! The bounded mode of the count balancer (`BalanceConfig::deviation = Some(N)`), as Ceph's
//! `osdmaptool --upmap-deviation N` and the mgr balancer's `upmap_max_deviation` stop: every
//! OSD of every pool within `N` shards of its target, and among the plans that reach it, the
//! one with the fewest shards moved away from raw CRUSH.
//!
//! Ceph balances pool by pool and stops once no OSD of the pool is more than `N` above or below
//! its target (`fill_overfull_underfull`: overfull is `deviation > N`, underfull `deviation <
//! -N`); the total over pools is no goal of its. Here the same network as [`crate::balance`]
//! carries different costs on the bound arcs, in tiers (each unit of a tier outweighs every
//! change the lower tiers can make along one residual cycle, as [`crate::balance`]'s `Costs`):
//!
//! 1. the convex distance outside each pool's `[ceil(target - N), floor(target + N)]` (zero
//!    when the map allows it; otherwise the pool gets as close as it can, none worse than
//!    before: the current placement is one of the flows);
//! 2. the shards on non-raw OSDs (the moves): the plan is the fewest moves for that bound;
//! 3. a tie-break at no cost in moves: the convex distance outside the tight per-pool
//!    `[floor, ceil]` bounds and the tight total bounds, so among the plans with the fewest
//!    moves the one closest to every target is taken;
//! 4. the shards that differ from the current up set (existing upmaps that can stay, stay).
//!
//! On very large maps the lowest tiers are dropped where the costs would not fit (4, then 3);
//! tiers 1 and 2 always stay lexicographic.

use std::collections::BTreeMap;

use crate::balance::{Plan, Violation, ViolationReason};
use crate::flow::{Network, NodeId, CAPACITY_INFINITE};
use crate::problem::{OsdId, PoolId, Problem, ITEM_NONE};
use crate::targets::{Bounds, Targets, PENALTY_STEPS};
use crate::tree::DomainTree;

/// Bounds of a count within `deviation` shards of `target`, as Ceph's balancer stops:
/// `target - N <= count <= target + N`.
pub fn bounds_within(target: f64, deviation: f64) -> Bounds {
    const EPSILON: f64 = 1e-9;
    let n = deviation;
    let low = (target - n - EPSILON).ceil().max(0.0);
    let high = (target + n + EPSILON).floor().max(low);
    Bounds {
        low: low as u32,
        high: high as u32,
    }
}

/// Unit costs of the bounded mode's tiers (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tiers {
    /// One shard outside a pool's deviation bounds.
    pub outer: i64,
    /// One shard outside a tight bound (pool or total); 0 when dropped.
    pub inner: i64,
    /// A shard on a non-raw OSD that the current up set also has.
    pub move_kept: i64,
    /// A shard on a non-raw OSD new to the PG.
    pub move_new: i64,
    /// A raw OSD kept that the current up set does not have.
    pub change: i64,
}

/// The largest unit the tiers may reach (times the penalty steps it stays below 2^47, far
/// from the solver's `i64::MAX / 4`).
const COST_CEILING: i128 = 1 << 47;

impl Tiers {
    /// `bounded_nodes`: nodes with bound arcs (pool-OSD and total nodes), the most a simple
    /// residual cycle can cross.
    pub fn new(total_shards: usize, bounded_nodes: usize) -> Self {
        let n = total_shards as i128;
        let steps = i128::from(PENALTY_STEPS) + 1;
        let build = |with_change: bool, with_inner: bool| {
            let change = i128::from(with_change);
            // One inner unit outweighs all changes together.
            let inner = if with_inner { n * change + 1 } else { 0 };
            // One move outweighs what a cycle can gain on the inner tier.
            let step = 2 * bounded_nodes as i128 * steps * inner + change * n + 1;
            let move_new = step + change;
            // One outer unit outweighs what a cycle can gain on moves and the inner tier.
            let outer = n * move_new + 2 * bounded_nodes as i128 * steps * inner + 1;
            let tiers = Self {
                outer: outer as i64,
                inner: inner as i64,
                move_kept: step as i64,
                move_new: move_new as i64,
                change: change as i64,
            };
            (outer * steps <= COST_CEILING, tiers)
        };
        [(true, true), (false, true), (false, false)]
            .into_iter()
            .map(|(change, inner)| build(change, inner))
            .find(|(fits, _)| *fits)
            .unwrap_or_else(|| build(false, false))
            .1
    }
}

/// Marginal cost of the `k`-th unit (1-based) through a bound with the convex penalty of
/// [`Bounds::penalty`] scaled by `unit`: below `low` a unit lowers the shortfall (negative),
/// inside it costs nothing, above `high` it adds to the excess.
fn marginal(bounds: Bounds, unit: i64, k: i64) -> i64 {
    let saturated = i64::from(PENALTY_STEPS) + 1;
    let (low, high) = (i64::from(bounds.low), i64::from(bounds.high));
    if k <= low {
        -unit * (low - k + 1).min(saturated)
    } else if k <= high {
        0
    } else {
        unit * (k - high).min(saturated)
    }
}

/// Arcs `from -> to` whose cost is the sum of the convex penalties of `terms` (bounds and unit
/// each): parallel arcs, one per run of equal marginal cost, the last one unbounded. The sum
/// of convex functions is convex, so the min-cost flow takes them in order.
pub(crate) fn add_convex(network: &mut Network, from: NodeId, to: NodeId, terms: &[(Bounds, i64)]) {
    let saturated = i64::from(PENALTY_STEPS) + 1;
    let last = terms
        .iter()
        .map(|(b, _)| i64::from(b.high) + saturated)
        .max()
        .unwrap_or(0);
    let cost = |k: i64| -> i64 { terms.iter().map(|&(b, u)| marginal(b, u, k)).sum() };
    let mut start = 1;
    while start <= last {
        let c = cost(start);
        let mut end = start;
        while end < last && cost(end + 1) == c {
            end += 1;
        }
        network.add_arc(from, to, end - start + 1, c, 0);
        start = end + 1;
    }
    network.add_arc(from, to, CAPACITY_INFINITE, cost(last + 1), 0);
}

/// The OSDs of each pool outside `[target - N, target + N]` after the plan (the bounded
/// mode has no total goal): the rule's constraints left no placement within them.
pub(crate) fn violations(
    problem: &Problem,
    targets: &Targets,
    trees: &BTreeMap<PoolId, DomainTree>,
    plan: &Plan,
    deviation: f64,
) -> Vec<Violation> {
    let mut per_pool: BTreeMap<(PoolId, OsdId), usize> = BTreeMap::new();
    for (pg, set) in &plan.up {
        for &osd in set.iter().filter(|&&o| o != ITEM_NONE) {
            *per_pool.entry((pg.pool, osd)).or_default() += 1;
        }
    }
    let mut out = Vec::new();
    for pool in &problem.pools {
        let Some(tree) = trees.get(&pool.id) else {
            continue;
        };
        for &osd in tree.leaf_of.keys() {
            let count = per_pool.get(&(pool.id, osd)).copied().unwrap_or(0);
            let bounds = bounds_within(targets.pool_target(pool.id, osd), deviation);
            if !bounds.contains(count) {
                out.push(Violation {
                    osd,
                    pool: Some(pool.id),
                    count,
                    bounds,
                    reason: ViolationReason::Constraints,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::balance::{balance, check_plan, BalanceConfig};
    use crate::exhaustive;
    use crate::generate::{generate, ClusterSpec, PoolSpec};
    use crate::problem::PgId;
    use proptest::prelude::*;

    /// Per-pool counts of a placement.
    fn counts(up: &BTreeMap<PgId, Vec<OsdId>>) -> BTreeMap<(PoolId, OsdId), usize> {
        let mut out = BTreeMap::new();
        for (pg, set) in up {
            for &o in set.iter().filter(|&&o| o != ITEM_NONE) {
                *out.entry((pg.pool, o)).or_default() += 1;
            }
        }
        out
    }

    /// Per pool, the convex distance outside `[target - N, target + N]`.
    fn outer_by_pool(
        problem: &Problem,
        up: &BTreeMap<PgId, Vec<OsdId>>,
        deviation: f64,
    ) -> BTreeMap<PoolId, u64> {
        let targets = Targets::compute(problem);
        let counts = counts(up);
        let mut out = BTreeMap::new();
        for pool in &problem.pools {
            let distance = problem
                .osds
                .iter()
                .map(|o| {
                    let c = counts.get(&(pool.id, o.id)).copied().unwrap_or(0);
                    bounds_within(targets.pool_target(pool.id, o.id), deviation).penalty(c)
                })
                .sum();
            out.insert(pool.id, distance);
        }
        out
    }

    /// (outer distance, moves, tight pool + tight total distance) of a plan.
    fn objective(problem: &Problem, plan: &Plan, deviation: f64) -> (u64, usize, u64) {
        let targets = Targets::compute(problem);
        let counts = counts(&plan.up);
        let outer = outer_by_pool(problem, &plan.up, deviation).values().sum();
        let mut inner = 0;
        for osd in &problem.osds {
            let mut total = 0;
            for pool in &problem.pools {
                let c = counts.get(&(pool.id, osd.id)).copied().unwrap_or(0);
                total += c;
                inner += Bounds::of_target(targets.pool_target(pool.id, osd.id)).penalty(c);
            }
            inner += Bounds::of_target(targets.total_target(osd.id)).penalty(total);
        }
        (outer, plan.moved_after, inner)
    }

    /// Small maps, easy and hard (a pool as wide as the hosts, pools over a class or a subset
    /// of the OSDs), so the bound is sometimes out of reach.
    fn spec() -> impl Strategy<Value = ClusterSpec> {
        (
            1usize..3,
            2usize..5,
            1usize..3,
            0.0f64..3.0,
            proptest::collection::vec((2u32..8, 0u8..4, 0u8..3), 1..3),
            any::<u64>(),
        )
            .prop_map(|(racks, hosts, per_host, spread, pools, seed)| {
                let osds = (racks * hosts * per_host) as i32;
                ClusterSpec {
                    racks,
                    hosts_per_rack: hosts,
                    osds_per_host: per_host,
                    weight_spread: spread,
                    pools: pools
                        .into_iter()
                        .map(|(pg_count, shape, size)| {
                            let class = match shape {
                                1 => Some((3, 0)),
                                2 => Some((3, 1)).filter(|_| osds > 3),
                                3 => Some((osds, 0)).filter(|_| per_host > 1),
                                _ => None,
                            };
                            let size = match size {
                                0 => 2,
                                1 => 3,
                                _ => (racks * hosts) as u32,
                            };
                            PoolSpec {
                                pg_count,
                                size,
                                rack_limit: (racks > 1).then(|| size.div_ceil(2).max(1)),
                                class,
                            }
                        })
                        .collect(),
                    seed,
                }
            })
            .prop_filter("tiny", |s| {
                // The exhaustive DP's state is a count per (pool, OSD): keep it small.
                let osds = s.racks * s.hosts_per_rack * s.osds_per_host;
                let shards: u32 = s.pools.iter().map(|p| p.pg_count * p.size).sum();
                let pgs: u32 = s.pools.iter().map(|p| p.pg_count).sum();
                osds >= 3 && osds * s.pools.len() <= 8 && shards <= 18 && pgs <= 12
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]
        /// The bounded plan is the exhaustive optimum of (distance outside the deviation
        /// bounds, moves, distance from the tight targets); no pool ends further outside its
        /// deviation bounds than it started; where the bound is at least 1 and the tight plan
        /// meets every pool's tight bounds, the bounded plan moves no more than it.
        #[test]
        fn bounded_mode_matches_exhaustive_search(spec in spec(), deviation in prop_oneof![Just(1.0), Just(2.0), 0.3f64..2.5]) {
            let problem = generate(&spec);
            let config = BalanceConfig { deviation: Some(deviation), ..BalanceConfig::default() };
            let plan = balance(&problem, &config).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert!(check_plan(&problem, &plan).is_ok(), "{:?}", check_plan(&problem, &plan));
            prop_assert_eq!(
                objective(&problem, &plan, deviation),
                exhaustive::deviation_optimum(&problem, deviation)
            );
            let current: BTreeMap<PgId, Vec<OsdId>> =
                problem.pgs.iter().map(|pg| (pg.id, pg.up())).collect();
            let before = outer_by_pool(&problem, &current, deviation);
            for (pool, after) in outer_by_pool(&problem, &plan.up, deviation) {
                prop_assert!(after <= before[&pool], "pool {}: {} -> {}", pool, before[&pool], after);
            }
            let tight = balance(&problem, &BalanceConfig::default()).map_err(|e| TestCaseError::fail(e.to_string()))?;
            // A bound of at least 1 contains [floor, ceil]: the tight plan is one of its plans.
            if deviation >= 1.0 && tight.violations.iter().all(|v| v.pool.is_none()) {
                prop_assert!(plan.moved_after <= tight.moved_after);
            }
            let reached = objective(&problem, &plan, deviation).0 == 0;
            prop_assert_eq!(plan.violations.is_empty(), reached);
        }
    }

    #[test]
    fn deviation_zero_and_with_max_moves_are_refused() {
        let problem = generate(&ClusterSpec {
            racks: 1,
            hosts_per_rack: 3,
            osds_per_host: 2,
            weight_spread: 1.0,
            pools: vec![PoolSpec {
                pg_count: 16,
                size: 2,
                rack_limit: None,
                class: None,
            }],
            seed: 3,
        });
        for config in [
            BalanceConfig {
                deviation: Some(0.0),
                ..BalanceConfig::default()
            },
            BalanceConfig {
                deviation: Some(1.0),
                max_moves: Some(3),
            },
        ] {
            assert!(balance(&problem, &config).is_err());
        }
    }

    #[test]
    fn bounds_within_a_deviation() {
        assert_eq!(bounds_within(10.4, 1.0), Bounds { low: 10, high: 11 });
        assert_eq!(bounds_within(10.0, 1.0), Bounds { low: 9, high: 11 });
        assert_eq!(bounds_within(0.6, 1.0), Bounds { low: 0, high: 1 });
        assert_eq!(bounds_within(7.3, 5.0), Bounds { low: 3, high: 12 });
        // A fraction: 9 is 1.05 below 10.05.
        assert_eq!(bounds_within(10.05, 1.0), Bounds { low: 10, high: 11 });
        assert_eq!(bounds_within(10.05, 1.1), Bounds { low: 9, high: 11 });
        // No integer within: the nearest one.
        assert_eq!(bounds_within(10.5, 0.2), Bounds { low: 11, high: 11 });
    }

    #[test]
    fn convex_arcs_cost_the_sum_of_the_penalties() {
        let terms = [
            (Bounds { low: 3, high: 5 }, 100),
            (Bounds { low: 4, high: 4 }, 1),
        ];
        for k in 1..60 {
            let left = marginal(terms[0].0, 100, k) + marginal(terms[1].0, 1, k);
            let right = marginal(terms[0].0, 100, k + 1) + marginal(terms[1].0, 1, k + 1);
            assert!(left <= right, "not convex at {k}");
        }
        let penalty =
            |count: usize| -> i64 { terms.iter().map(|(b, u)| b.penalty(count) as i64 * u).sum() };
        // Cost of the first `c` units = penalty(c) - penalty(0).
        let mut sum = 0;
        for c in 1..60usize {
            sum += marginal(terms[0].0, 100, c as i64) + marginal(terms[1].0, 1, c as i64);
            assert_eq!(sum, penalty(c) - penalty(0), "count {c}");
        }
    }
}
