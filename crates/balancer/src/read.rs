//! The `read` mode: primaries spread so each OSD leads its weight's share of a pool's PGs,
//! with no data moved (what Ceph Reef's read balancer does with `pg_upmap_primary`).
//!
//! Only replicated pools: every member of a clean replicated PG holds the same data, so any
//! member can lead it; an erasure-coded PG's primary is its shard 0, and changing it moves data.
//! An OSD's target in a pool is `pgs(pool) * weight(o) / weight(candidates)`, its total target
//! the sum over pools; the bounds are `[floor, ceil]` of each, as the count balancer's.
//!
//! Method: one min-cost flow, PG -> (pool, OSD) -> OSD -> sink, a PG's arcs going to the
//! members of its up set (cost 1 to a member that is not its primary now), the convex
//! [`Bounds::penalty`] on the pool and the total arcs, weighted so that the pool penalties come
//! first, then the total penalties, then the primaries changed. The optimum is exact (checked
//! against exhaustive search on small maps). With a budget (`max_changes`), the optimum's
//! changes are applied best-first while each lowers that objective, so a limited run is never
//! worse than before.
//!
//! 16.2's osdmap has no `pg_upmap_primary`; the executor makes a new primary lead by
//! reordering the PG's set (see [`ReadPlan::pg_upmap`]).

use std::collections::BTreeMap;

use crate::analysis::Scope;
use crate::flow::{Network, CAPACITY_INFINITE};
use crate::problem::{OsdId, PgId, PoolId, Problem, ITEM_NONE};
use crate::targets::{Bounds, PENALTY_STEPS};
use crate::BalancerError;

/// How far the primaries of one scope are from their targets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReadScore {
    pub scope: Scope,
    /// max |primaries - target| over the OSDs.
    pub max_deviation: f64,
    /// OSDs outside `[floor, ceil]` of their target.
    pub outside_bounds: usize,
}

/// The read mode's plan.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadPlan {
    /// The new primary of each PG whose primary changes.
    pub primaries: BTreeMap<PgId, OsdId>,
    /// Per changed PG, the full `pg_upmap` that makes the new primary lead: its current raw
    /// set (CRUSH's, or its `pg_upmap`) with the new primary's position swapped to the front;
    /// its `pg_upmap_items` stay and still replace in place, so the members are unchanged.
    pub pg_upmap: BTreeMap<PgId, Vec<OsdId>>,
    pub before: Vec<ReadScore>,
    pub after: Vec<ReadScore>,
}

/// Targets of primaries: per pool and in total, over the replicated pools' PGs.
struct PrimaryTargets {
    per_pool: BTreeMap<PoolId, BTreeMap<OsdId, f64>>,
    total: BTreeMap<OsdId, f64>,
}

impl PrimaryTargets {
    fn compute(problem: &Problem, pgs: &[usize]) -> Self {
        let mut count: BTreeMap<PoolId, usize> = BTreeMap::new();
        for &i in pgs {
            *count.entry(problem.pgs[i].id.pool).or_default() += 1;
        }
        let mut targets = Self {
            per_pool: BTreeMap::new(),
            total: BTreeMap::new(),
        };
        for pool in &problem.pools {
            let Some(&n) = count.get(&pool.id) else {
                continue;
            };
            let usable: Vec<(OsdId, f64)> = pool
                .rule
                .candidates
                .iter()
                .filter_map(|&o| problem.osd(o).map(|x| (o, x.weight)))
                .filter(|&(_, w)| w > 0.0)
                .collect();
            let weight: f64 = usable.iter().map(|&(_, w)| w).sum();
            let per_osd = targets.per_pool.entry(pool.id).or_default();
            for (osd, w) in usable {
                let target = n as f64 * w / weight;
                per_osd.insert(osd, target);
                *targets.total.entry(osd).or_default() += target;
            }
        }
        targets
    }

    fn pool(&self, pool: PoolId, osd: OsdId) -> f64 {
        self.per_pool
            .get(&pool)
            .and_then(|m| m.get(&osd))
            .copied()
            .unwrap_or(0.0)
    }

    fn total(&self, osd: OsdId) -> f64 {
        self.total.get(&osd).copied().unwrap_or(0.0)
    }
}

/// The PGs read mode may change: of replicated pools, with at least two members.
fn eligible(problem: &Problem) -> Vec<usize> {
    problem
        .pgs
        .iter()
        .enumerate()
        .filter(|(_, pg)| {
            problem
                .pool(pg.id.pool)
                .is_some_and(|pool| !pool.rule.positional)
                && pg.up().iter().filter(|&&o| o != ITEM_NONE).count() >= 2
        })
        .map(|(i, _)| i)
        .collect()
}

/// (pool penalties, total penalties) of primaries `primary[k]` of PGs `pgs[k]`.
fn penalties(
    problem: &Problem,
    targets: &PrimaryTargets,
    pgs: &[usize],
    primary: &[OsdId],
) -> (u64, u64) {
    let (per_pool, total) = counts(problem, pgs, primary);
    let mut pool_penalty = 0;
    for (pool, osds) in &targets.per_pool {
        for &osd in osds.keys() {
            let c = per_pool.get(&(*pool, osd)).copied().unwrap_or(0);
            pool_penalty += Bounds::of_target(targets.pool(*pool, osd)).penalty(c);
        }
    }
    let mut total_penalty = 0;
    let osds: std::collections::BTreeSet<OsdId> = targets
        .total
        .keys()
        .copied()
        .chain(total.keys().copied())
        .collect();
    for osd in osds {
        let c = total.get(&osd).copied().unwrap_or(0);
        total_penalty += Bounds::of_target(targets.total(osd)).penalty(c);
    }
    (pool_penalty, total_penalty)
}

type Counts = (BTreeMap<(PoolId, OsdId), usize>, BTreeMap<OsdId, usize>);

fn counts(problem: &Problem, pgs: &[usize], primary: &[OsdId]) -> Counts {
    let mut per_pool: BTreeMap<(PoolId, OsdId), usize> = BTreeMap::new();
    let mut total: BTreeMap<OsdId, usize> = BTreeMap::new();
    for (k, &i) in pgs.iter().enumerate() {
        *per_pool
            .entry((problem.pgs[i].id.pool, primary[k]))
            .or_default() += 1;
        *total.entry(primary[k]).or_default() += 1;
    }
    (per_pool, total)
}

fn scores(
    problem: &Problem,
    targets: &PrimaryTargets,
    pgs: &[usize],
    primary: &[OsdId],
) -> Vec<ReadScore> {
    let (per_pool, total) = counts(problem, pgs, primary);
    let mut out = Vec::new();
    let score = |scope, rows: Vec<(f64, usize)>| {
        let mut s = ReadScore {
            scope,
            max_deviation: 0.0,
            outside_bounds: 0,
        };
        for (target, count) in rows {
            s.max_deviation = s.max_deviation.max((count as f64 - target).abs());
            s.outside_bounds += usize::from(!Bounds::of_target(target).contains(count));
        }
        s
    };
    for (pool, osds) in &targets.per_pool {
        let rows = osds
            .iter()
            .map(|(&o, &t)| (t, per_pool.get(&(*pool, o)).copied().unwrap_or(0)))
            .collect();
        out.push(score(Scope::Pool(*pool), rows));
    }
    let rows = targets
        .total
        .iter()
        .map(|(&o, &t)| (t, total.get(&o).copied().unwrap_or(0)))
        .collect();
    out.push(score(Scope::Total, rows));
    out
}

/// Adds the convex penalty of `bounds` on flow from `from` to `to`, scaled by `unit`.
fn penalty_arcs(network: &mut Network, from: u32, to: u32, bounds: Bounds, unit: i64) {
    let steps = i64::from(PENALTY_STEPS);
    let low = i64::from(bounds.low);
    // The u-th unit (1-based) below `low` saves min(low - u + 1, steps + 1) units.
    if low > steps {
        network.add_arc(from, to, low - steps, -(steps + 1) * unit, 0);
    }
    for u in (low - steps + 1).max(1)..=low {
        network.add_arc(from, to, 1, -(low - u + 1).min(steps + 1) * unit, 0);
    }
    network.add_arc(from, to, i64::from(bounds.high - bounds.low), 0, 0);
    for j in 1..=steps {
        network.add_arc(from, to, 1, j * unit, 0);
    }
    network.add_arc(from, to, CAPACITY_INFINITE, (steps + 1) * unit, 0);
}

/// Plans read mode; `max_changes` limits the primaries changed.
pub fn plan_read(problem: &Problem, max_changes: Option<usize>) -> Result<ReadPlan, BalancerError> {
    // Pools whose rules have several takes are left alone here (see crate::takes).
    let single_take = problem.single_take_only();
    let problem: &Problem = &single_take;
    problem.validate()?;
    let pgs = eligible(problem);
    let targets = PrimaryTargets::compute(problem, &pgs);
    let ups: Vec<Vec<OsdId>> = pgs
        .iter()
        .map(|&i| {
            problem.pgs[i]
                .up()
                .into_iter()
                .filter(|&o| o != ITEM_NONE)
                .collect()
        })
        .collect();
    let current: Vec<OsdId> = ups.iter().map(|up| up[0]).collect();
    let n = pgs.len() as i64;
    let steps = i64::from(PENALTY_STEPS);
    // Lexicographic: any pool penalty unit outweighs every total penalty and every change.
    let total_unit = n + 1;
    let pool_unit = total_unit * (steps + 1) * (2 * n + 2) + n + 1;

    let mut network = Network::new();
    let sink = network.add_node();
    let mut osd_node: BTreeMap<OsdId, u32> = BTreeMap::new();
    let mut pool_osd_node: BTreeMap<(PoolId, OsdId), u32> = BTreeMap::new();
    let mut member_arcs: Vec<Vec<(OsdId, u32)>> = Vec::with_capacity(pgs.len());
    for (k, &i) in pgs.iter().enumerate() {
        let pool = problem.pgs[i].id.pool;
        let pg_node = network.add_node();
        network.add_supply(pg_node, 1);
        network.add_supply(sink, -1);
        let mut arcs = Vec::new();
        for &osd in &ups[k] {
            let node = match pool_osd_node.get(&(pool, osd)) {
                Some(&node) => node,
                None => {
                    let node = network.add_node();
                    pool_osd_node.insert((pool, osd), node);
                    node
                }
            };
            let changed = i64::from(osd != current[k]);
            arcs.push((osd, network.add_arc(pg_node, node, 1, changed, changed)));
        }
        member_arcs.push(arcs);
    }
    for (&(pool, osd), &node) in &pool_osd_node {
        let total = *osd_node.entry(osd).or_insert_with(|| network.add_node());
        penalty_arcs(
            &mut network,
            node,
            total,
            Bounds::of_target(targets.pool(pool, osd)),
            pool_unit,
        );
    }
    for (&osd, &node) in &osd_node {
        penalty_arcs(
            &mut network,
            node,
            sink,
            Bounds::of_target(targets.total(osd)),
            total_unit,
        );
    }
    network.solve(None);
    if network.unrouted() != 0 {
        return Err(BalancerError::Internal(
            "read flow left PGs without a primary".into(),
        ));
    }
    let optimal: Vec<OsdId> = member_arcs
        .iter()
        .zip(&current)
        .map(|(arcs, &now)| {
            arcs.iter()
                .find(|&&(_, arc)| network.flow(arc) == 1)
                .map_or(now, |&(osd, _)| osd)
        })
        .collect();
    let chosen = match max_changes {
        Some(limit) if changed(&current, &optimal) > limit => {
            best_first(problem, &targets, &pgs, &current, &optimal, limit)
        }
        _ => optimal,
    };
    let mut plan = ReadPlan {
        primaries: BTreeMap::new(),
        pg_upmap: BTreeMap::new(),
        before: scores(problem, &targets, &pgs, &current),
        after: scores(problem, &targets, &pgs, &chosen),
    };
    for (k, &i) in pgs.iter().enumerate() {
        if chosen[k] == current[k] {
            continue;
        }
        let pg = &problem.pgs[i];
        let position = pg
            .up()
            .iter()
            .position(|&o| o == chosen[k])
            .ok_or_else(|| {
                BalancerError::Internal(format!("pg {}: new primary not a member", pg.id))
            })?;
        let mut raw = pg.raw.clone();
        raw.swap(0, position);
        plan.primaries.insert(pg.id, chosen[k]);
        plan.pg_upmap.insert(pg.id, raw);
    }
    Ok(plan)
}

fn changed(a: &[OsdId], b: &[OsdId]) -> usize {
    a.iter().zip(b).filter(|(x, y)| x != y).count()
}

/// At most `limit` of the optimum's changes, the most improving first, each strictly
/// lowering (pool penalties, total penalties).
fn best_first(
    problem: &Problem,
    targets: &PrimaryTargets,
    pgs: &[usize],
    current: &[OsdId],
    optimal: &[OsdId],
    limit: usize,
) -> Vec<OsdId> {
    let mut chosen = current.to_vec();
    let mut now = penalties(problem, targets, pgs, &chosen);
    for _ in 0..limit {
        let mut best: Option<((u64, u64), usize)> = None;
        let pending: Vec<usize> = (0..pgs.len())
            .filter(|&k| chosen[k] != optimal[k])
            .collect();
        for k in pending {
            let old = chosen[k];
            chosen[k] = optimal[k];
            let value = penalties(problem, targets, pgs, &chosen);
            chosen[k] = old;
            if value < now && best.is_none_or(|(b, _)| value < b) {
                best = Some((value, k));
            }
        }
        let Some((value, k)) = best else {
            break;
        };
        chosen[k] = optimal[k];
        now = value;
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{generate, ClusterSpec, PoolSpec};
    use proptest::prelude::*;

    /// (pool penalties, total penalties, changes) of the best assignment, by enumeration.
    fn exhaustive(problem: &Problem) -> (u64, u64, usize) {
        let pgs = eligible(problem);
        let targets = PrimaryTargets::compute(problem, &pgs);
        let ups: Vec<Vec<OsdId>> = pgs.iter().map(|&i| problem.pgs[i].up()).collect();
        let current: Vec<OsdId> = ups.iter().map(|up| up[0]).collect();
        let mut choice = vec![0usize; pgs.len()];
        let mut best = (u64::MAX, u64::MAX, usize::MAX);
        loop {
            let primary: Vec<OsdId> = choice.iter().zip(&ups).map(|(&c, up)| up[c]).collect();
            let (p, t) = penalties(problem, &targets, &pgs, &primary);
            best = best.min((p, t, changed(&current, &primary)));
            let mut k = 0;
            loop {
                if k == choice.len() {
                    return best;
                }
                choice[k] += 1;
                if choice[k] < ups[k].len() {
                    break;
                }
                choice[k] = 0;
                k += 1;
            }
        }
    }

    fn objective(problem: &Problem, plan: &ReadPlan) -> (u64, u64, usize) {
        let pgs = eligible(problem);
        let targets = PrimaryTargets::compute(problem, &pgs);
        let primary: Vec<OsdId> = pgs
            .iter()
            .map(|&i| {
                let pg = &problem.pgs[i];
                plan.primaries.get(&pg.id).copied().unwrap_or(pg.up()[0])
            })
            .collect();
        let (p, t) = penalties(problem, &targets, &pgs, &primary);
        (p, t, plan.primaries.len())
    }

    fn small_spec() -> impl Strategy<Value = ClusterSpec> {
        (
            2usize..5,
            1usize..3,
            0.0f64..2.0,
            proptest::collection::vec((1u32..6, 2u32..4), 1..3),
            any::<u64>(),
        )
            .prop_map(|(hosts, per_host, spread, pools, seed)| ClusterSpec {
                racks: 1,
                hosts_per_rack: hosts,
                osds_per_host: per_host,
                weight_spread: spread,
                pools: pools
                    .into_iter()
                    .map(|(pg_count, size)| PoolSpec {
                        pg_count,
                        size: size.min(hosts as u32),
                        rack_limit: None,
                        class: None,
                    })
                    .collect(),
                seed,
            })
            .prop_filter("tiny", |s| {
                let product: f64 = s
                    .pools
                    .iter()
                    .map(|p| f64::from(p.size).powi(p.pg_count as i32))
                    .product();
                product <= 5e4
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]
        /// The flow's primaries reach the exhaustive optimum: pool penalties, then total, then
        /// fewest changes; the members never change.
        #[test]
        fn matches_exhaustive_search(spec in small_spec()) {
            let problem = generate(&spec);
            let plan = plan_read(&problem, None).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(objective(&problem, &plan), exhaustive(&problem));
            for pg in &problem.pgs {
                if let Some(raw) = plan.pg_upmap.get(&pg.id) {
                    let mut reordered = crate::problem::apply_upmap_items(raw, &pg.upmap_items);
                    prop_assert_eq!(reordered[0], plan.primaries[&pg.id]);
                    let mut members = pg.up();
                    reordered.sort_unstable();
                    members.sort_unstable();
                    prop_assert_eq!(reordered, members);
                }
            }
        }

        /// A budget applies at most that many changes and never makes the spread worse.
        #[test]
        fn a_budget_never_makes_it_worse(spec in small_spec(), limit in 0usize..3) {
            let problem = generate(&spec);
            let plan = plan_read(&problem, Some(limit)).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert!(plan.primaries.len() <= limit);
            let pgs = eligible(&problem);
            let targets = PrimaryTargets::compute(&problem, &pgs);
            let current: Vec<OsdId> = pgs.iter().map(|&i| problem.pgs[i].up()[0]).collect();
            let (p, t, _) = objective(&problem, &plan);
            prop_assert!((p, t) <= penalties(&problem, &targets, &pgs, &current));
        }
    }

    #[test]
    fn primaries_follow_weight_on_a_generated_cluster() {
        let problem = generate(&ClusterSpec {
            racks: 1,
            hosts_per_rack: 4,
            osds_per_host: 3,
            weight_spread: 1.0,
            pools: vec![PoolSpec {
                pg_count: 128,
                size: 3,
                rack_limit: None,
                class: None,
            }],
            seed: 21,
        });
        let plan = plan_read(&problem, None).expect("plan");
        let total = |scores: &[ReadScore]| {
            scores
                .iter()
                .find(|s| s.scope == Scope::Total)
                .copied()
                .expect("total")
        };
        assert!(total(&plan.before).outside_bounds > 0);
        assert!(
            total(&plan.after).max_deviation < 1.0,
            "{:?}",
            total(&plan.after)
        );
    }
}
