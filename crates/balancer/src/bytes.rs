//! Bytes mode: PG sizes differ, so equal shard counts still leave bytes uneven. Starting from
//! the count plan (every OSD within `[floor, ceil]` of its count target, fewest moves), a local
//! search swaps shards between an over-full and an under-full OSD (a large PG's shard for a
//! small one's: counts unchanged, so the count bounds still hold) or moves one shard where the
//! count bounds leave room, while that lowers the weighted squared error
//! `sum_o (bytes_o - ideal_o)^2 / ideal_o`, `ideal_o = sum_pools bytes_pool * w_o / W_pool`.
//!
//! Stated bound: the search stops once the bytes gap (max - min of bytes / share) is at most
//! [`GAP_GOAL`] (1 %), or at a local optimum where no single move or pairwise swap
//! between the most over-full OSD and the least-full OSDs improves the error; each accepted
//! step strictly lowers it, so it terminates; movement is capped by `max_moves`. It is a
//! heuristic: no optimality claim beyond that.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use crate::balance::{build_trees, finish, Plan};

/// The search stops once every OSD's bytes lie within this fraction of its weight-proportional
/// share (max ratio - min ratio): closer costs moves for no practical gain.
pub const GAP_GOAL: f64 = 0.01;
use crate::problem::{OsdId, PgId, PoolId, Problem, ITEM_NONE};
use crate::targets::{Bounds, Targets};
use crate::BalancerError;

/// Per-PG bytes from `ceph pg dump pgs --format json`: either `{"pg_stats": [...]}` (Pacific),
/// `{"pg_map": {"pg_stats": [...]}}` or a bare array; each entry has `pgid` and
/// `stat_sum.num_bytes`.
pub fn parse_pg_stats(json: &str) -> Result<BTreeMap<PgId, u64>, BalancerError> {
    let value: Value =
        serde_json::from_str(json).map_err(|e| BalancerError::Parse(format!("pg dump: {e}")))?;
    let entries = match &value {
        Value::Array(a) => a,
        Value::Object(o) => o
            .get("pg_stats")
            .or_else(|| o.get("pg_map").and_then(|m| m.get("pg_stats")))
            .and_then(Value::as_array)
            .ok_or_else(|| BalancerError::Parse("pg dump: no pg_stats array".into()))?,
        _ => {
            return Err(BalancerError::Parse(
                "pg dump: not an array or object".into(),
            ))
        }
    };
    let mut sizes = BTreeMap::new();
    for entry in entries {
        let pgid = entry
            .get("pgid")
            .and_then(Value::as_str)
            .ok_or_else(|| BalancerError::Parse("pg dump: entry without pgid".into()))?;
        let bytes = entry
            .get("stat_sum")
            .and_then(|s| s.get("num_bytes"))
            .and_then(Value::as_u64)
            .ok_or_else(|| BalancerError::Parse(format!("pg dump: {pgid} without num_bytes")))?;
        sizes.insert(pgid.parse()?, bytes);
    }
    Ok(sizes)
}

/// Refine a count plan for bytes. `sizes` = bytes per PG (missing PGs count 0).
pub fn balance_bytes(
    problem: &Problem,
    plan: &Plan,
    sizes: &BTreeMap<PgId, u64>,
    max_moves: Option<usize>,
) -> Plan {
    // Pools whose rules have several takes are left alone here (see crate::takes).
    let single_take = problem.single_take_only();
    let problem: &Problem = &single_take;
    let mut state = State::new(problem, plan, sizes);
    let limit = max_moves.unwrap_or(usize::MAX);
    let step_limit = problem.pgs.len() * 4 + 100;
    for _ in 0..step_limit {
        if !state.improve(limit) {
            break;
        }
    }
    let targets = Targets::compute(problem);
    let trees = build_trees(problem);
    let up: BTreeMap<PgId, Vec<OsdId>> = problem
        .pgs
        .iter()
        .enumerate()
        .map(|(i, pg)| (pg.id, state.up[i].clone()))
        .collect();
    finish(problem, &targets, &trees, up, plan.stats)
}

/// Mutable placement for the local search.
struct State<'a> {
    problem: &'a Problem,
    up: Vec<Vec<OsdId>>,
    size: Vec<f64>,
    bytes: HashMap<OsdId, f64>,
    ideal: HashMap<OsdId, f64>,
    count_pool: HashMap<(PoolId, OsdId), usize>,
    count_total: HashMap<OsdId, usize>,
    /// PG indices with a shard on each OSD.
    on_osd: HashMap<OsdId, Vec<usize>>,
    targets: Targets,
    trees: BTreeMap<PoolId, crate::tree::DomainTree>,
    moved: usize,
}

impl<'a> State<'a> {
    fn new(problem: &'a Problem, plan: &Plan, sizes: &BTreeMap<PgId, u64>) -> Self {
        let targets = Targets::compute(problem);
        let mut state = Self {
            problem,
            up: problem
                .pgs
                .iter()
                .map(|pg| {
                    plan.up
                        .get(&pg.id)
                        .cloned()
                        .unwrap_or_else(|| pg.raw.clone())
                })
                .collect(),
            size: problem
                .pgs
                .iter()
                .map(|pg| sizes.get(&pg.id).copied().unwrap_or(0) as f64)
                .collect(),
            bytes: HashMap::new(),
            ideal: HashMap::new(),
            count_pool: HashMap::new(),
            count_total: HashMap::new(),
            on_osd: HashMap::new(),
            trees: build_trees(problem),
            targets,
            moved: plan.moved_after,
        };
        let mut pool_bytes: BTreeMap<PoolId, f64> = BTreeMap::new();
        for (i, pg) in problem.pgs.iter().enumerate() {
            let shards = pg.shard_count() as f64;
            *pool_bytes.entry(pg.id.pool).or_default() += state.size[i] * shards;
            for &osd in state.up[i].iter().filter(|&&o| o != ITEM_NONE) {
                *state.bytes.entry(osd).or_default() += state.size[i];
                *state.count_pool.entry((pg.id.pool, osd)).or_default() += 1;
                *state.count_total.entry(osd).or_default() += 1;
                state.on_osd.entry(osd).or_default().push(i);
            }
        }
        for (pool, per_osd) in &state.targets.per_pool {
            let shards: f64 = per_osd.values().sum();
            let bytes = pool_bytes.get(pool).copied().unwrap_or(0.0);
            for (&osd, &target) in per_osd {
                if shards > 0.0 {
                    *state.ideal.entry(osd).or_default() += bytes * target / shards;
                }
            }
        }
        state
    }

    fn error_term(&self, osd: OsdId, bytes: f64) -> f64 {
        let ideal = self.ideal.get(&osd).copied().unwrap_or(0.0).max(1.0);
        (bytes - ideal).powi(2) / ideal
    }

    fn ratio(&self, osd: OsdId) -> f64 {
        let ideal = self.ideal.get(&osd).copied().unwrap_or(0.0).max(1.0);
        self.bytes.get(&osd).copied().unwrap_or(0.0) / ideal
    }

    /// Can PG `i` have `to` instead of `from`?
    fn can_replace(&self, i: usize, from: OsdId, to: OsdId) -> bool {
        let pg = &self.problem.pgs[i];
        let Some(pool) = self.problem.pool(pg.id.pool) else {
            return false;
        };
        if self.up[i].contains(&to)
            || (!pool.rule.candidates.contains(&to) && !pg.raw.contains(&to))
        {
            return false;
        }
        let Some(tree) = self.trees.get(&pg.id.pool) else {
            return false;
        };
        let set: Vec<OsdId> = self.up[i]
            .iter()
            .map(|&o| if o == from { to } else { o })
            .collect();
        tree.respects(&set, &tree.occupancy(&pg.raw))
    }

    /// Movement change if PG `i` replaces `from` by `to` (relative to raw CRUSH).
    fn move_cost(&self, i: usize, from: OsdId, to: OsdId) -> i64 {
        let raw = &self.problem.pgs[i].raw;
        i64::from(!raw.contains(&to)) - i64::from(!raw.contains(&from))
    }

    fn count_allows(&self, pool: PoolId, from: OsdId, to: OsdId) -> bool {
        let get = |m: &HashMap<(PoolId, OsdId), usize>, o| m.get(&(pool, o)).copied().unwrap_or(0);
        let total = |o| self.count_total.get(&o).copied().unwrap_or(0);
        let pool_from = Bounds::of_target(self.targets.pool_target(pool, from));
        let pool_to = Bounds::of_target(self.targets.pool_target(pool, to));
        let total_from = Bounds::of_target(self.targets.total_target(from));
        let total_to = Bounds::of_target(self.targets.total_target(to));
        get(&self.count_pool, from) > pool_from.low as usize
            && get(&self.count_pool, to) < pool_to.high as usize
            && total(from) > total_from.low as usize
            && total(to) < total_to.high as usize
    }

    /// One improving step from the most over-full OSD; false if none.
    fn improve(&mut self, move_limit: usize) -> bool {
        let mut osds: Vec<OsdId> = self.ideal.keys().copied().collect();
        osds.sort_by(|a, b| self.ratio(*b).total_cmp(&self.ratio(*a)).then(a.cmp(b)));
        let (first, last) = (osds.first().copied(), osds.last().copied());
        if let (Some(top), Some(bottom)) = (first, last) {
            if self.ratio(top) - self.ratio(bottom) <= GAP_GOAL {
                return false;
            }
        }
        let under: Vec<OsdId> = osds.iter().rev().take(12).copied().collect();
        for &over in osds.iter().take(6) {
            if let Some(step) = self.best_step(over, &under, move_limit) {
                self.apply(step);
                return true;
            }
        }
        false
    }

    fn best_step(&self, over: OsdId, under: &[OsdId], move_limit: usize) -> Option<Step> {
        let bytes_over = self.bytes.get(&over).copied().unwrap_or(0.0);
        let mut best: Option<(f64, Step)> = None;
        let empty = Vec::new();
        for &to in under.iter().filter(|&&o| o != over) {
            let bytes_to = self.bytes.get(&to).copied().unwrap_or(0.0);
            let before = self.error_term(over, bytes_over) + self.error_term(to, bytes_to);
            for &i in self.on_osd.get(&over).unwrap_or(&empty) {
                let pool = self.problem.pgs[i].id.pool;
                if !self.can_replace(i, over, to) {
                    continue;
                }
                let cost_i = self.move_cost(i, over, to);
                // A single move, if the count bounds leave room.
                if self.count_allows(pool, over, to) && self.within(cost_i, move_limit) {
                    let delta = self.size[i];
                    let after = self.error_term(over, bytes_over - delta)
                        + self.error_term(to, bytes_to + delta);
                    consider(
                        &mut best,
                        before - after,
                        Step {
                            i,
                            j: None,
                            from: over,
                            to,
                        },
                    );
                }
                // Swaps with a smaller shard on `to` of the same pool.
                for &j in self.on_osd.get(&to).unwrap_or(&empty) {
                    if self.size[j] >= self.size[i] || self.problem.pgs[j].id.pool != pool {
                        continue;
                    }
                    let cost = cost_i + self.move_cost(j, to, over);
                    if !self.within(cost, move_limit) || !self.can_replace(j, to, over) {
                        continue;
                    }
                    let delta = self.size[i] - self.size[j];
                    let after = self.error_term(over, bytes_over - delta)
                        + self.error_term(to, bytes_to + delta);
                    consider(
                        &mut best,
                        before - after,
                        Step {
                            i,
                            j: Some(j),
                            from: over,
                            to,
                        },
                    );
                }
            }
        }
        best.filter(|(gain, _)| *gain > 1e-6).map(|(_, step)| step)
    }

    fn within(&self, cost: i64, limit: usize) -> bool {
        (self.moved as i64 + cost) <= i64::try_from(limit).unwrap_or(i64::MAX)
    }

    fn apply(&mut self, step: Step) {
        self.replace(step.i, step.from, step.to);
        if let Some(j) = step.j {
            self.replace(j, step.to, step.from);
        }
    }

    /// Replace `from` by `to` in PG `i`, keeping every raw OSD in its raw position.
    fn replace(&mut self, i: usize, from: OsdId, to: OsdId) {
        let cost = self.move_cost(i, from, to);
        self.moved = (self.moved as i64 + cost) as usize;
        let pg = &self.problem.pgs[i];
        let up = &mut self.up[i];
        let Some(slot) = up.iter().position(|&o| o == from) else {
            return;
        };
        up[slot] = to;
        if let Some(home) = pg.raw.iter().position(|&r| r == to) {
            up.swap(slot, home);
        }
        let pool = pg.id.pool;
        *self.bytes.entry(from).or_default() -= self.size[i];
        *self.bytes.entry(to).or_default() += self.size[i];
        for (osd, delta) in [(from, -1_i64), (to, 1)] {
            let c = self.count_pool.entry((pool, osd)).or_default();
            *c = (*c as i64 + delta) as usize;
            let t = self.count_total.entry(osd).or_default();
            *t = (*t as i64 + delta) as usize;
        }
        if let Some(list) = self.on_osd.get_mut(&from) {
            list.retain(|&k| k != i);
        }
        self.on_osd.entry(to).or_default().push(i);
    }
}

#[derive(Debug, Clone, Copy)]
struct Step {
    i: usize,
    j: Option<usize>,
    from: OsdId,
    to: OsdId,
}

fn consider(best: &mut Option<(f64, Step)>, gain: f64, step: Step) {
    if best.as_ref().is_none_or(|(g, _)| gain > *g) {
        *best = Some((gain, step));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::balance::{balance, check_plan, BalanceConfig};
    use crate::generate::{generate, ClusterSpec, PoolSpec};

    #[test]
    fn parses_both_pg_dump_shapes() {
        let entry = r#"{"pgid":"1.1f","stat_sum":{"num_bytes":42}}"#;
        for json in [
            format!("[{entry}]"),
            format!(r#"{{"pg_ready":true,"pg_stats":[{entry}]}}"#),
        ] {
            let sizes = parse_pg_stats(&json).expect("parse");
            assert_eq!(
                sizes.get(&PgId {
                    pool: 1,
                    seed: 0x1f
                }),
                Some(&42)
            );
        }
        assert!(parse_pg_stats("{}").is_err());
    }

    #[test]
    fn bytes_mode_lowers_the_bytes_spread_and_keeps_counts() {
        let spec = ClusterSpec {
            racks: 1,
            hosts_per_rack: 4,
            osds_per_host: 4,
            weight_spread: 0.0,
            pools: vec![PoolSpec {
                pg_count: 256,
                size: 3,
                rack_limit: None,
                class: None,
            }],
            seed: 11,
        };
        let problem = generate(&spec);
        let sizes: BTreeMap<PgId, u64> = problem
            .pgs
            .iter()
            .map(|pg| (pg.id, pg.size_bytes.unwrap_or(0)))
            .collect();
        let counted = balance(&problem, &BalanceConfig::default()).expect("balance");
        let refined = balance_bytes(&problem, &counted, &sizes, None);
        check_plan(&problem, &refined).expect("valid");
        assert!(refined.violations.is_empty());
        let spread = |plan: &Plan| {
            let mut bytes: BTreeMap<OsdId, u64> = BTreeMap::new();
            for (pg, set) in &plan.up {
                for &o in set {
                    *bytes.entry(o).or_default() += sizes.get(pg).copied().unwrap_or(0);
                }
            }
            let max = bytes.values().max().copied().unwrap_or(0);
            let min = bytes.values().min().copied().unwrap_or(0);
            max - min
        };
        assert!(
            spread(&refined) < spread(&counted) / 2,
            "{} vs {}",
            spread(&refined),
            spread(&counted)
        );
    }
}
