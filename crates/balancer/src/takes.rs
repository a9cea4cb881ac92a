//! Rules with several `take ... emit` blocks (e.g. the first replica from class ssd, the rest
//! from hdd): each block becomes a pool of its own for the count balancer, its PGs the
//! positions the block fills, so each block's shards are counted against its own OSDs and
//! moved only among them.
//!
//! This is exact, not an approximation: the blocks have disjoint candidates (the adapter
//! refuses others) and each block's OSDs sit in the block's own buckets (Ceph's
//! `get_parent_of_type` looks parents up under the rule's takes, and a class take's buckets
//! are its shadow buckets), so no failure domain is shared between blocks and the blocks'
//! placements are independent. Ceph's `verify_upmap` checks every chooseleaf level over the
//! whole up set and each emit's positions against its take's subtree; both hold when every
//! block holds its own.

use std::collections::{BTreeMap, BTreeSet};

use crate::problem::{OsdId, Pg, PgId, Pool, PoolId, Problem, RuleConstraints};

/// A problem with every multi-take pool split into one pool per block.
#[derive(Debug, Clone)]
pub(crate) struct Expanded {
    pub problem: Problem,
    /// Block pool id -> (real pool id, the block's positions).
    origin: BTreeMap<PoolId, (PoolId, std::ops::Range<usize>)>,
}

/// Split the multi-take pools, or None if there are none.
pub(crate) fn expand(problem: &Problem) -> Option<Expanded> {
    if !problem.has_multi_take() {
        return None;
    }
    let mut next_id = problem.pools.iter().map(|p| p.id).max().unwrap_or(0) + 1;
    let mut out = Problem {
        osds: problem.osds.clone(),
        pools: Vec::new(),
        pgs: Vec::new(),
    };
    let mut origin = BTreeMap::new();
    // Real pool -> its blocks' (pool id, positions).
    let mut blocks: BTreeMap<PoolId, Vec<(PoolId, std::ops::Range<usize>)>> = BTreeMap::new();
    for pool in &problem.pools {
        if pool.rule.takes.is_empty() {
            out.pools.push(pool.clone());
            continue;
        }
        for (index, take) in pool.rule.takes.iter().enumerate() {
            let id = next_id;
            next_id += 1;
            let ancestors = pool
                .rule
                .ancestors
                .iter()
                .filter(|(o, _)| take.candidates.contains(o))
                .map(|(&o, a)| (o, a.clone()))
                .collect();
            out.pools.push(Pool {
                id,
                name: format!("{}/take{index}", pool.name),
                size: take.positions.len() as u32,
                rule: RuleConstraints {
                    candidates: take.candidates.clone(),
                    levels: take.levels.clone(),
                    positional: pool.rule.positional,
                    ancestors,
                    takes: Vec::new(),
                },
            });
            origin.insert(id, (pool.id, take.positions.clone()));
            blocks
                .entry(pool.id)
                .or_default()
                .push((id, take.positions.clone()));
        }
    }
    for pg in &problem.pgs {
        let Some(list) = blocks.get(&pg.id.pool) else {
            out.pgs.push(pg.clone());
            continue;
        };
        for (id, positions) in list {
            let raw = slice(&pg.raw, positions);
            let items = pg
                .upmap_items
                .iter()
                .filter(|(from, _)| raw.contains(from))
                .copied()
                .collect();
            out.pgs.push(Pg {
                id: PgId {
                    pool: *id,
                    seed: pg.id.seed,
                },
                raw,
                upmap_items: items,
                size_bytes: pg.size_bytes,
                from_pg_upmap: pg.from_pg_upmap,
            });
        }
    }
    Some(Expanded {
        problem: out,
        origin,
    })
}

fn slice(set: &[OsdId], positions: &std::ops::Range<usize>) -> Vec<OsdId> {
    let end = positions.end.min(set.len());
    set.get(positions.start.min(end)..end)
        .map(<[OsdId]>::to_vec)
        .unwrap_or_default()
}

impl Expanded {
    /// The real pool a pool of the expanded problem stands for.
    pub fn real_pool(&self, id: PoolId) -> PoolId {
        self.origin.get(&id).map_or(id, |(real, _)| *real)
    }

    /// Up sets of the expanded problem joined back into the real PGs' up sets.
    pub fn join(&self, up: &BTreeMap<PgId, Vec<OsdId>>) -> BTreeMap<PgId, Vec<OsdId>> {
        let mut out: BTreeMap<PgId, Vec<(usize, Vec<OsdId>)>> = BTreeMap::new();
        for (id, set) in up {
            match self.origin.get(&id.pool) {
                Some((real, positions)) => out
                    .entry(PgId {
                        pool: *real,
                        seed: id.seed,
                    })
                    .or_default()
                    .push((positions.start, set.clone())),
                None => out.entry(*id).or_default().push((0, set.clone())),
            }
        }
        out.into_iter()
            .map(|(id, mut parts)| {
                parts.sort_by_key(|(start, _)| *start);
                (id, parts.into_iter().flat_map(|(_, set)| set).collect())
            })
            .collect()
    }

    /// Real PGs' up sets split into the expanded problem's PGs.
    pub fn split(&self, up: &BTreeMap<PgId, Vec<OsdId>>) -> BTreeMap<PgId, Vec<OsdId>> {
        let mut by_real: BTreeMap<PoolId, Vec<(PoolId, &std::ops::Range<usize>)>> = BTreeMap::new();
        for (id, (real, positions)) in &self.origin {
            by_real.entry(*real).or_default().push((*id, positions));
        }
        let mut out = BTreeMap::new();
        for (id, set) in up {
            match by_real.get(&id.pool) {
                Some(list) => {
                    for (block, positions) in list {
                        let key = PgId {
                            pool: *block,
                            seed: id.seed,
                        };
                        out.insert(key, slice(set, positions));
                    }
                }
                None => {
                    out.insert(*id, set.clone());
                }
            }
        }
        out
    }
}

/// Every OSD a multi-take pool's blocks can choose, checked disjoint.
pub(crate) fn disjoint(takes: &[crate::problem::Take]) -> bool {
    let mut seen: BTreeSet<OsdId> = BTreeSet::new();
    takes
        .iter()
        .all(|t| t.candidates.iter().all(|&o| seen.insert(o)))
}

#[cfg(test)]
mod tests;
