//! Weight-proportional targets and the integer bounds the balancer aims for.
//!
//! A pool's target on OSD `o` is `shards(pool) * weight(o) / weight(candidates of the pool's
//! rule)`; the total target is the sum over pools. The bounds are `floor(target)` and
//! `ceil(target)`: the tightest integers, and always reachable together per pool and in total
//! when failure domains do not interfere (controlled rounding of a two-way table).

use std::collections::BTreeMap;

use crate::problem::{OsdId, PoolId, Problem};

/// Steps of the convex penalty: the j-th shard outside the bounds costs `min(j, STEPS + 1)`.
pub const PENALTY_STEPS: u32 = 32;

/// Slack for floating-point noise when a target is an integer.
const EPSILON: f64 = 1e-9;

/// Inclusive integer bounds on a shard count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    pub low: u32,
    pub high: u32,
}

impl Bounds {
    pub fn of_target(target: f64) -> Self {
        let low = (target + EPSILON).floor().max(0.0);
        let high = (target - EPSILON).ceil().max(low);
        Self {
            low: low as u32,
            high: high as u32,
        }
    }

    pub fn contains(&self, count: usize) -> bool {
        (self.low as usize..=self.high as usize).contains(&count)
    }

    /// How far `count` lies outside the bounds (0 inside).
    pub fn excess(&self, count: usize) -> usize {
        let count = count as i64;
        let (low, high) = (i64::from(self.low), i64::from(self.high));
        (low - count).max(count - high).max(0) as usize
    }

    /// Convex penalty of `count`: the j-th shard outside the bounds costs `min(j, STEPS + 1)`,
    /// so one OSD 4 shards out (1+2+3+4) costs more than four OSDs 1 shard out each. The
    /// balancer minimises the sum of these before it minimises moves.
    pub fn penalty(&self, count: usize) -> u64 {
        let steps = u64::from(PENALTY_STEPS);
        (1..=self.excess(count) as u64)
            .map(|j| j.min(steps + 1))
            .sum()
    }
}

/// Targets per pool and in total.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Targets {
    /// Pool -> OSD -> target shards (candidates with weight > 0 only).
    pub per_pool: BTreeMap<PoolId, BTreeMap<OsdId, f64>>,
    /// OSD -> sum of its pool targets.
    pub total: BTreeMap<OsdId, f64>,
}

impl Targets {
    pub fn compute(problem: &Problem) -> Self {
        let weight: BTreeMap<OsdId, f64> = problem.osds.iter().map(|o| (o.id, o.weight)).collect();
        let mut shards: BTreeMap<PoolId, usize> = BTreeMap::new();
        for pg in &problem.pgs {
            *shards.entry(pg.id.pool).or_default() += pg.shard_count();
        }
        let mut targets = Self::default();
        // Rules with several takes: each block's shards over its own candidates.
        if let Some(expanded) = crate::takes::expand(problem) {
            let inner = Self::compute(&expanded.problem);
            for (pool, per_osd) in inner.per_pool {
                let real = targets
                    .per_pool
                    .entry(expanded.real_pool(pool))
                    .or_default();
                for (osd, target) in per_osd {
                    *real.entry(osd).or_default() += target;
                }
            }
            targets.total = inner.total;
            return targets;
        }
        for pool in &problem.pools {
            let usable: Vec<(OsdId, f64)> = pool
                .rule
                .candidates
                .iter()
                .map(|&o| (o, weight.get(&o).copied().unwrap_or(0.0)))
                .filter(|&(_, w)| w > 0.0)
                .collect();
            let total_weight: f64 = usable.iter().map(|&(_, w)| w).sum();
            let pool_shards = shards.get(&pool.id).copied().unwrap_or(0) as f64;
            let per_osd = targets.per_pool.entry(pool.id).or_default();
            for (osd, w) in usable {
                let target = pool_shards * w / total_weight;
                per_osd.insert(osd, target);
                *targets.total.entry(osd).or_default() += target;
            }
        }
        targets
    }

    pub fn pool_target(&self, pool: PoolId, osd: OsdId) -> f64 {
        self.per_pool
            .get(&pool)
            .and_then(|m| m.get(&osd))
            .copied()
            .unwrap_or(0.0)
    }

    pub fn total_target(&self, osd: OsdId) -> f64 {
        self.total.get(&osd).copied().unwrap_or(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_of_targets() {
        assert_eq!(
            Bounds::of_target(102.4),
            Bounds {
                low: 102,
                high: 103
            }
        );
        assert_eq!(
            Bounds::of_target(100.0),
            Bounds {
                low: 100,
                high: 100
            }
        );
        assert_eq!(
            Bounds::of_target(99.999_999_999_9),
            Bounds {
                low: 100,
                high: 100
            }
        );
        assert_eq!(Bounds::of_target(0.0), Bounds { low: 0, high: 0 });
        assert_eq!(Bounds { low: 2, high: 3 }.excess(5), 2);
        assert_eq!(Bounds { low: 2, high: 3 }.excess(0), 2);
    }
}
