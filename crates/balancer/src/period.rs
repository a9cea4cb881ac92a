//! The continuous balancer's decision for one period, as Ceph's mgr balancer makes it in
//! `upmap` mode: nothing while recovery is behind (moves would pile on data still moving),
//! else the count flow's plan limited to a movement budget, a share of all shards
//! (`target_max_misplaced_ratio`, Ceph's option of the same name, default 0.05). Pure: the
//! executor (the server) reads the cluster's map and PG states, calls [`decide`] and applies
//! the plan's changes.
//!
//! The budget goes through [`crate::limit`], so a period applies the best part of the optimal
//! plan and never leaves the cluster worse; the next period plans again from there. [`score`]
//! is `eval`'s figure: per pool and in total, the share of shards away from a perfect balance.

use std::collections::BTreeMap;

use crate::analysis::{Distribution, Scope};
use crate::balance::{balance, BalanceConfig, Plan};
use crate::problem::{Pg, Problem};
use crate::BalancerError;

/// Ceph's default `target_max_misplaced_ratio`.
pub const TARGET_MAX_MISPLACED_RATIO_DEFAULT: f64 = 0.05;

/// Knobs of one period.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PeriodConfig {
    /// At most this share of all shards changes OSD in one period (0 < ratio <= 1). Default
    /// [`TARGET_MAX_MISPLACED_RATIO_DEFAULT`].
    pub target_max_misplaced_ratio: f64,
}

impl Default for PeriodConfig {
    fn default() -> Self {
        Self {
            target_max_misplaced_ratio: TARGET_MAX_MISPLACED_RATIO_DEFAULT,
        }
    }
}

/// What a period does.
#[derive(Debug, Clone, PartialEq)]
pub enum PeriodDecision {
    /// Recovery is behind: `pgs_not_clean` PGs are degraded, recovering or peering.
    Wait { pgs_not_clean: usize },
    /// No change improves the balance.
    Balanced,
    /// Apply the plan's changes; at most `budget_shards` shards change OSD.
    Apply { plan: Plan, budget_shards: usize },
}

/// The most shards one period may move: the ratio of all shards, at least one.
pub fn budget_shards(problem: &Problem, target_max_misplaced_ratio: f64) -> usize {
    assert!(
        target_max_misplaced_ratio > 0.0 && target_max_misplaced_ratio <= 1.0,
        "target_max_misplaced_ratio {target_max_misplaced_ratio} outside (0, 1]"
    );
    let shards: usize = problem.pgs.iter().map(Pg::shard_count).sum();
    ((shards as f64 * target_max_misplaced_ratio).floor() as usize).max(1)
}

/// Decides one period. `problem` is the movable part of the map (see
/// [`crate::aside::set_aside`]); `pgs_not_clean` counts the PGs not `active+clean`.
pub fn decide(
    problem: &Problem,
    pgs_not_clean: usize,
    config: &PeriodConfig,
) -> Result<PeriodDecision, BalancerError> {
    if pgs_not_clean > 0 {
        return Ok(PeriodDecision::Wait { pgs_not_clean });
    }
    let budget_shards = budget_shards(problem, config.target_max_misplaced_ratio);
    let plan = balance(
        problem,
        &BalanceConfig {
            max_moves: Some(budget_shards),
            ..BalanceConfig::default()
        },
    )?;
    if plan.changes.is_empty() {
        return Ok(PeriodDecision::Balanced);
    }
    Ok(PeriodDecision::Apply {
        plan,
        budget_shards,
    })
}

/// `eval`'s figure of one table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Score {
    pub scope: Scope,
    /// Shards that would have to change OSD to reach every OSD's exact target, as a share of
    /// the table's shards: sum of |count - target| / 2 / shards. 0 is perfect.
    pub score: f64,
    /// max |count - target|, shards.
    pub max_deviation: f64,
    /// OSDs outside [floor(target), ceil(target)].
    pub outside_bounds: usize,
}

/// The score of every table (per pool, then the total).
pub fn score(distribution: &Distribution) -> Vec<Score> {
    distribution
        .tables
        .iter()
        .map(|table| {
            let distance: f64 = table.rows.iter().map(|r| r.deviation().abs()).sum();
            let shards = table.summary.shards.max(1) as f64;
            Score {
                scope: table.scope,
                score: distance / 2.0 / shards,
                max_deviation: table.summary.max_deviation,
                outside_bounds: table.summary.outside_bounds,
            }
        })
        .collect()
}

/// The scores of the problem's current up sets.
pub fn score_current(problem: &Problem) -> Vec<Score> {
    let up: BTreeMap<_, _> = problem.pgs.iter().map(|pg| (pg.id, pg.up())).collect();
    score(&Distribution::compute(problem, &up, None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate;

    fn problem() -> Problem {
        generate::generate(&generate::ClusterSpec {
            racks: 1,
            hosts_per_rack: 5,
            osds_per_host: 3,
            weight_spread: 0.5,
            pools: vec![
                generate::PoolSpec {
                    pg_count: 64,
                    size: 3,
                    rack_limit: None,
                    class: None,
                },
                generate::PoolSpec {
                    pg_count: 32,
                    size: 2,
                    rack_limit: None,
                    class: None,
                },
            ],
            seed: 7,
        })
    }

    #[test]
    fn waits_while_recovery_is_behind() {
        let decision = decide(&problem(), 3, &PeriodConfig::default()).unwrap();
        assert_eq!(decision, PeriodDecision::Wait { pgs_not_clean: 3 });
    }

    #[test]
    fn periods_converge_within_budget_to_the_unlimited_plan() {
        let mut problem = problem();
        let full = balance(&problem, &BalanceConfig::default()).unwrap();
        let config = PeriodConfig {
            target_max_misplaced_ratio: 0.02,
        };
        let before = score_current(&problem);
        let mut periods = 0;
        loop {
            periods += 1;
            assert!(periods < 200, "no convergence");
            match decide(&problem, 0, &config).unwrap() {
                PeriodDecision::Apply {
                    plan,
                    budget_shards,
                } => {
                    assert!(plan.shards_changed <= budget_shards);
                    assert!(plan.shards_changed > 0);
                    for pg in &mut problem.pgs {
                        pg.upmap_items = plan.items.get(&pg.id).cloned().unwrap_or_default();
                    }
                }
                PeriodDecision::Balanced => break,
                PeriodDecision::Wait { .. } => unreachable!(),
            }
        }
        assert!(periods > 2, "the budget should have split the plan");
        let after = score_current(&problem);
        let total = |scores: &[Score]| {
            scores
                .iter()
                .find(|s| s.scope == Scope::Total)
                .map(|s| s.outside_bounds)
                .unwrap()
        };
        assert!(total(&after) <= total(&before));
        let full_outside = Distribution::compute(&problem, &full.up, None)
            .total()
            .unwrap()
            .summary
            .outside_bounds;
        assert_eq!(total(&after), full_outside);
    }
}
