//! PGs the balancer leaves where they are: their raw set is one the flow cannot express, so
//! moving their shards would be a guess. The raw set of such a PG comes from a hand-made full
//! `pg_upmap` (CRUSH itself produces neither case): an OSD named twice or unknown, or more
//! shards in one failure domain than the rule allows. The caller balances the other PGs and
//! reports these with the reason, so the operator can fix the entry.

use std::collections::BTreeSet;

use crate::balance::build_trees;
use crate::problem::{Pg, PgId, Problem, ITEM_NONE};
use crate::tree::DomainTree;

/// One PG left as it is, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetAside {
    pub pg: PgId,
    pub reason: String,
}

/// Split `problem` into the PGs the balancer can move and those it must leave as they are.
/// The returned problem has the same OSDs and pools and only the movable PGs.
pub fn set_aside(problem: &Problem) -> (Problem, Vec<SetAside>) {
    let aside = find(problem);
    let ids: BTreeSet<PgId> = aside.iter().map(|a| a.pg).collect();
    let movable = Problem {
        osds: problem.osds.clone(),
        pools: problem.pools.clone(),
        pgs: problem
            .pgs
            .iter()
            .filter(|pg| !ids.contains(&pg.id))
            .cloned()
            .collect(),
    };
    (movable, aside)
}

/// The PGs [`set_aside`] would leave as they are, with the reasons.
pub fn find(problem: &Problem) -> Vec<SetAside> {
    // Rules with several takes: each block's positions against the block's own rule.
    if let Some(expanded) = crate::takes::expand(problem) {
        let mut aside: Vec<SetAside> = find(&expanded.problem)
            .into_iter()
            .map(|mut a| {
                a.pg.pool = expanded.real_pool(a.pg.pool);
                a
            })
            .collect();
        aside.dedup_by_key(|a| a.pg);
        return aside;
    }
    let osds: BTreeSet<i32> = problem.osds.iter().map(|o| o.id).collect();
    let trees = build_trees(problem);
    let mut aside = Vec::new();
    for pg in &problem.pgs {
        let reason = bad_osd(pg, &osds).or_else(|| {
            let tree = trees.get(&pg.id.pool)?;
            over_limit(pg, tree)
        });
        if let Some(reason) = reason {
            aside.push(SetAside { pg: pg.id, reason });
        }
    }
    aside
}

/// What the raw set is called in messages.
fn source(pg: &Pg) -> String {
    if pg.from_pg_upmap {
        format!("pg_upmap {} {:?}", pg.id, pg.raw)
    } else {
        format!("pg {}: raw CRUSH set {:?}", pg.id, pg.raw)
    }
}

/// An OSD the raw set repeats or that the map does not have.
fn bad_osd(pg: &Pg, osds: &BTreeSet<i32>) -> Option<String> {
    let mut seen = BTreeSet::new();
    for &osd in pg.raw.iter().filter(|&&o| o != ITEM_NONE) {
        if !osds.contains(&osd) {
            return Some(format!(
                "{} names osd.{osd}, which does not exist",
                source(pg)
            ));
        }
        if !seen.insert(osd) {
            return Some(format!("{} names osd.{osd} twice", source(pg)));
        }
    }
    None
}

/// A failure domain holding more shards of the raw set than the rule allows per PG.
fn over_limit(pg: &Pg, tree: &DomainTree) -> Option<String> {
    let occupancy = tree.occupancy(&pg.raw);
    let mut over: Vec<(usize, u32)> = occupancy
        .into_iter()
        .filter(|&(d, n)| n > tree.max_per_pg[tree.domains[d].level])
        .collect();
    over.sort_unstable();
    let &(d, count) = over.first()?;
    let domain = &tree.domains[d];
    let level = domain.level;
    Some(format!(
        "{} puts {count} shards under bucket {} (CRUSH type {}), where the rule allows {}",
        source(pg),
        domain.key,
        tree.type_ids[level],
        tree.max_per_pg[level]
    ))
}
