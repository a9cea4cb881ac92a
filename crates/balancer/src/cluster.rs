//! Adapter from a cluster description (a CRUSH map, OSD states, pools, PG raw sets) to the
//! balancer's [`Problem`]: candidate sets, failure-domain levels and effective weights are
//! derived from the CRUSH rules and hierarchy the way Ceph's `verify_upmap` reads them.

use std::collections::{BTreeMap, BTreeSet};

use crush::{CrushMap, RuleStep, WEIGHT_ONE};

use crate::problem::{Level, Osd, OsdId, Pg, Pool, PoolId, Problem, RuleConstraints, TYPE_OSD};
use crate::BalancerError;

/// One OSD as the OSD map knows it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OsdState {
    pub id: OsdId,
    pub exists: bool,
    pub up: bool,
    /// Reweight, 1.0 = fully in, 0.0 = out.
    pub reweight: f64,
}

/// One pool as the OSD map knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolInfo {
    pub id: PoolId,
    pub name: String,
    pub size: u32,
    pub rule_id: usize,
    /// Erasure-coded pool.
    pub erasure: bool,
}

/// A pool the adapter could not express, with the reason.
#[derive(Debug, Clone, PartialEq)]
pub struct SkippedPool {
    pub id: PoolId,
    pub reason: String,
}

/// Build the problem. Pools whose rules cannot be expressed are skipped (their PGs too) and
/// listed with the reason.
pub fn build_problem(
    crush: &CrushMap,
    osd_states: &[OsdState],
    pools: &[PoolInfo],
    pgs: Vec<Pg>,
) -> (Problem, Vec<SkippedPool>) {
    let hierarchy = Hierarchy::new(crush);
    let mut problem = Problem::default();
    for state in osd_states.iter().filter(|s| s.exists) {
        let crush_weight = hierarchy
            .device_weight
            .get(&state.id)
            .copied()
            .unwrap_or(0.0);
        let class = crush
            .device_classes
            .get(&state.id)
            .and_then(|c| crush.class_names.get(c))
            .cloned();
        problem.osds.push(Osd {
            id: state.id,
            weight: crush_weight * state.reweight,
            ancestors: hierarchy.ancestors(state.id),
            class,
        });
    }
    let weights: BTreeMap<OsdId, f64> = problem.osds.iter().map(|o| (o.id, o.weight)).collect();
    let mut skipped = Vec::new();
    for info in pools {
        match rule_constraints(crush, info, &weights) {
            Ok(rule) => problem.pools.push(Pool {
                id: info.id,
                name: info.name.clone(),
                size: info.size,
                rule,
            }),
            Err(error) => skipped.push(SkippedPool {
                id: info.id,
                reason: error.to_string(),
            }),
        }
    }
    let kept: BTreeSet<PoolId> = problem.pools.iter().map(|p| p.id).collect();
    problem.pgs = pgs
        .into_iter()
        .filter(|pg| kept.contains(&pg.id.pool))
        .collect();
    (problem, skipped)
}

/// Parent links and device weights of the real (non-shadow) hierarchy. A bucket linked under
/// two parents keeps its first one here; rules read their own hierarchy ([`take_hierarchy`]).
struct Hierarchy {
    parent: BTreeMap<i32, i32>,
    bucket_type: BTreeMap<i32, i32>,
    device_weight: BTreeMap<OsdId, f64>,
    /// Buckets in the map: no acyclic chain of parents is longer.
    bucket_count: usize,
}

impl Hierarchy {
    fn new(crush: &CrushMap) -> Self {
        let mut hierarchy = Self {
            parent: BTreeMap::new(),
            bucket_type: BTreeMap::new(),
            device_weight: BTreeMap::new(),
            bucket_count: crush.iter_buckets().count(),
        };
        for bucket in crush.iter_buckets() {
            if crush.is_shadow_bucket(bucket.id) {
                continue;
            }
            hierarchy
                .bucket_type
                .insert(bucket.id, i32::from(bucket.type_id));
            for (position, &item) in bucket.items.iter().enumerate() {
                hierarchy.parent.entry(item).or_insert(bucket.id);
                if item >= 0 {
                    let weight = f64::from(bucket.item_weight(position)) / f64::from(WEIGHT_ONE);
                    hierarchy.device_weight.insert(item, weight);
                }
            }
        }
        hierarchy
    }

    /// The nearest ancestor of each type. The walk is bounded by the bucket count, so a cycle
    /// (which `CrushMap::validate` refuses anyway) ends it instead of looping forever; any
    /// acyclic depth is fine.
    fn ancestors(&self, osd: OsdId) -> BTreeMap<i32, i32> {
        let mut out = BTreeMap::new();
        let mut item = osd;
        for _ in 0..=self.bucket_count {
            let Some(&parent) = self.parent.get(&item) else {
                break;
            };
            if let Some(&type_id) = self.bucket_type.get(&parent) {
                out.entry(type_id).or_insert(parent);
            }
            item = parent;
        }
        out
    }
}

/// What a rule sees under its `take`: the devices it can choose and their ancestry.
struct TakeHierarchy {
    /// Devices reachable from the take through items of positive weight.
    candidates: BTreeSet<OsdId>,
    /// Each device's nearest ancestor per bucket type on its first path from the take (Ceph's
    /// `get_parent_of_type` with a rule likewise returns the first bucket of the type under
    /// the take that holds the device). Shadow (per-class) buckets are named by their original
    /// bucket, so domains read the same with or without a device class, except in rules of
    /// several takes, where each take keeps its own buckets as Ceph reads them.
    ancestors: BTreeMap<OsdId, BTreeMap<i32, i32>>,
}

/// Walk the hierarchy under `take` depth first without recursion (any depth), walking each
/// bucket at most twice: once when first reached, and once more if that was through a zero
/// weight and a path of positive weights reaches it later (its devices are then candidates).
fn take_hierarchy(crush: &CrushMap, take: i32, keep_shadow: bool) -> TakeHierarchy {
    let original: BTreeMap<i32, i32> = crush
        .class_buckets
        .iter()
        .filter(|_| !keep_shadow)
        .flat_map(|(&id, by_class)| by_class.values().map(move |&shadow| (shadow, id)))
        .collect();
    let mut out = TakeHierarchy {
        candidates: BTreeSet::new(),
        ancestors: BTreeMap::new(),
    };
    if take >= 0 {
        out.candidates.insert(take);
        out.ancestors.insert(take, BTreeMap::new());
        return out;
    }
    let mut reached = BTreeSet::from([take]);
    let mut reached_weighted = BTreeSet::from([take]);
    // The path from the take: (bucket, next item index, reached through positive weights).
    let mut path: Vec<(&crush::Bucket, usize, bool)> = Vec::new();
    if let Some(bucket) = crush.bucket(take) {
        path.push((bucket, 0, true));
    }
    while let Some(&mut (bucket, ref mut next, weighted)) = path.last_mut() {
        let Some(&item) = bucket.items.get(*next) else {
            path.pop();
            continue;
        };
        let weighted = weighted && bucket.item_weight(*next) > 0;
        *next += 1;
        if item >= 0 {
            if weighted {
                out.candidates.insert(item);
            }
            out.ancestors.entry(item).or_insert_with(|| {
                let mut ancestors = BTreeMap::new();
                for (parent, _, _) in path.iter().rev() {
                    let id = original.get(&parent.id).copied().unwrap_or(parent.id);
                    ancestors.entry(i32::from(parent.type_id)).or_insert(id);
                }
                ancestors
            });
            continue;
        }
        let first = reached.insert(item);
        let first_weighted = weighted && reached_weighted.insert(item);
        if let (Some(child), true) = (crush.bucket(item), first || first_weighted) {
            path.push((child, 0, weighted));
        }
    }
    out
}

/// Candidates and separation levels of a pool's rule: one `take` followed by choose or
/// chooseleaf steps and `emit` (`count <= 0` means "size + count"), or several such blocks
/// of one step each (e.g. the first replica from class ssd, the rest from hdd; see
/// [`crate::takes`]) whose candidates are disjoint.
pub fn rule_constraints(
    crush: &CrushMap,
    info: &PoolInfo,
    weights: &BTreeMap<OsdId, f64>,
) -> Result<RuleConstraints, BalancerError> {
    let rule = crush
        .rule(info.rule_id)
        .ok_or_else(|| BalancerError::UnsupportedRule(format!("rule {} missing", info.rule_id)))?;
    let unsupported = |what: &str| {
        BalancerError::UnsupportedRule(format!("pool {} rule {}: {what}", info.id, info.rule_id))
    };
    let mut blocks: Vec<Block> = Vec::new();
    for step in &rule.steps {
        match *step {
            RuleStep::Take { item } => {
                if blocks.last().is_some_and(|b| !b.2) {
                    return Err(unsupported("a take before the previous block's emit"));
                }
                blocks.push((item, Vec::new(), false));
            }
            RuleStep::ChooseFirstN { count, type_id }
            | RuleStep::ChooseIndep { count, type_id } => {
                let block = blocks.last_mut().ok_or_else(|| unsupported("no take"))?;
                block.1.push((i64::from(count), type_id, false));
            }
            RuleStep::ChooseLeafFirstN { count, type_id }
            | RuleStep::ChooseLeafIndep { count, type_id } => {
                let block = blocks.last_mut().ok_or_else(|| unsupported("no take"))?;
                block.1.push((i64::from(count), type_id, true));
            }
            RuleStep::Emit => {
                let block = blocks.last_mut().ok_or_else(|| unsupported("no take"))?;
                if block.2 || block.1.is_empty() {
                    return Err(unsupported("expected one take, choose steps, one emit"));
                }
                block.2 = true;
            }
            _ => {}
        }
    }
    if blocks.is_empty() {
        return Err(unsupported("no take"));
    }
    if blocks.iter().any(|b| !b.2) {
        return Err(unsupported("expected one take, choose steps, one emit"));
    }
    let size = i64::from(info.size);
    if let [(take, steps, _)] = blocks.as_slice() {
        let (candidates, levels, ancestors) =
            block_constraints(crush, *take, steps, size, weights, false).map_err(unsupported)?;
        return Ok(RuleConstraints {
            candidates,
            levels,
            positional: info.erasure,
            ancestors,
            takes: Vec::new(),
        });
    }
    // Several blocks: each fills the next positions, in its own buckets (shadow buckets
    // kept, as Ceph's get_parent_of_type under the rule's takes finds them).
    let mut takes = Vec::new();
    let mut all_ancestors = BTreeMap::new();
    let mut cursor = 0_usize;
    for (take, steps, _) in &blocks {
        if steps.len() != 1 {
            return Err(unsupported(
                "a block of several choose steps in a rule of several takes",
            ));
        }
        let (count, _, _) = steps[0];
        let count = if count <= 0 { size + count } else { count };
        let end = (cursor + usize::try_from(count.max(0)).unwrap_or(0)).min(info.size as usize);
        let (candidates, levels, ancestors) =
            block_constraints(crush, *take, steps, count, weights, true).map_err(unsupported)?;
        takes.push(crate::problem::Take {
            positions: cursor..end,
            candidates,
            levels,
        });
        for (osd, a) in ancestors {
            all_ancestors.entry(osd).or_insert(a);
        }
        cursor = end;
    }
    if cursor < info.size as usize {
        return Err(unsupported(
            "the takes fill fewer positions than the pool's size",
        ));
    }
    if !crate::takes::disjoint(&takes) {
        return Err(unsupported("two takes can choose the same OSD"));
    }
    // Blocks must not share a failure domain: their placements are then independent.
    let mut owner: BTreeMap<(i32, i64), usize> = BTreeMap::new();
    for (index, take) in takes.iter().enumerate() {
        for level in &take.levels {
            for &osd in &take.candidates {
                let domain = all_ancestors
                    .get(&osd)
                    .and_then(|a: &BTreeMap<i32, i32>| a.get(&level.type_id))
                    .map_or(i64::from(osd), |&b| i64::from(b));
                if *owner.entry((level.type_id, domain)).or_insert(index) != index {
                    return Err(unsupported("two takes share a failure domain"));
                }
            }
        }
    }
    let candidates = takes
        .iter()
        .flat_map(|t| t.candidates.iter().copied())
        .collect();
    let levels = takes.last().map(|t| t.levels.clone()).unwrap_or_default();
    Ok(RuleConstraints {
        candidates,
        levels,
        positional: info.erasure,
        ancestors: all_ancestors,
        takes,
    })
}

/// One `take ... emit` block being read: (take, steps as (count, type, leaf), emitted).
type Block = (i32, Vec<(i64, i32, bool)>, bool);

/// Candidates, levels and ancestry of one `take ... emit` block placing `size` shards.
type BlockConstraints = (
    BTreeSet<OsdId>,
    Vec<Level>,
    BTreeMap<OsdId, BTreeMap<i32, i32>>,
);

fn block_constraints(
    crush: &CrushMap,
    take: i32,
    steps: &[(i64, i32, bool)],
    size: i64,
    weights: &BTreeMap<OsdId, f64>,
    keep_shadow: bool,
) -> Result<BlockConstraints, &'static str> {
    let counts: Vec<i64> = steps
        .iter()
        .map(|&(c, _, _)| if c <= 0 { (size + c).max(1) } else { c })
        .collect();
    let mut levels = Vec::new();
    for (index, &(_, type_id, leaf)) in steps.iter().enumerate() {
        // Shards of one PG under one bucket of this step's type: the product of the later
        // steps' counts (a chooseleaf puts one OSD under each chosen bucket).
        let below: i64 = counts[index + 1..].iter().product();
        let max = if leaf { below.max(1) } else { below };
        let max = if index + 1 == steps.len() { 1 } else { max };
        if type_id == TYPE_OSD && index + 1 != steps.len() {
            return Err("choose of osds before the last step");
        }
        // `choose N type T` with N below the size: Ceph's verify_upmap allows at most N
        // distinct T buckets; keeping each PG in its raw T buckets satisfies that.
        let pin_to_raw = !leaf && type_id != TYPE_OSD && counts[index] < size;
        levels.push(Level {
            type_id,
            max_per_pg: u32::try_from(max.min(size)).unwrap_or(1),
            pin_to_raw,
        });
    }
    let last = steps.last().map_or(TYPE_OSD, |s| s.1);
    let last_leaf = steps.last().is_some_and(|s| s.2);
    if last != TYPE_OSD && !last_leaf {
        return Err("the last step chooses buckets, not OSDs");
    }
    let TakeHierarchy {
        mut candidates,
        ancestors,
    } = take_hierarchy(crush, take, keep_shadow);
    candidates.retain(|o| weights.get(o).is_some_and(|&w| w > 0.0));
    Ok((candidates, levels, ancestors))
}

/// The problem of an OSD map: every pool (or only `only_pools` if not empty), every PG's raw
/// CRUSH set (or its full `pg_upmap`, if any) and existing pg_upmap_items. Pools whose rules cannot be expressed are skipped.
pub fn from_osdmap(map: &osdmap::OsdMap, only_pools: &[PoolId]) -> (Problem, Vec<SkippedPool>) {
    let osd_states: Vec<OsdState> = (0..map.max_osd())
        .filter(|&osd| map.exists(osd))
        .map(|osd| OsdState {
            id: osd,
            exists: true,
            up: map.is_up(osd),
            reweight: f64::from(map.osd_weight(osd)) / f64::from(WEIGHT_ONE),
        })
        .collect();
    let mut pools = Vec::new();
    let mut pgs = Vec::new();
    let mut skipped = Vec::new();
    for (&id, pool) in map.pools() {
        if !only_pools.is_empty() && !only_pools.contains(&id) {
            continue;
        }
        let Some(rule_id) = map.find_rule(pool) else {
            skipped.push(SkippedPool {
                id,
                reason: "no CRUSH rule matches the pool".into(),
            });
            continue;
        };
        pools.push(PoolInfo {
            id,
            name: pool.name.clone(),
            size: pool.size,
            rule_id,
            erasure: pool.pool_type == osdmap::PoolType::Erasure,
        });
        for pg in pool.pgs() {
            let (mut raw, _) = map.pg_to_raw_osds(pg);
            // A full pg_upmap replaces the CRUSH set before items apply (Ceph skips it if it
            // names an out OSD); the balancer treats it as the PG's raw set, so its items
            // stay relative to it, as Ceph applies them.
            let mut from_pg_upmap = false;
            if let Some(set) = map.pg_upmap().get(&pg) {
                let usable = |o: &i32| *o == osdmap::ITEM_NONE || map.osd_weight(*o) != 0;
                if set.iter().all(usable) {
                    raw.clone_from(set);
                    from_pg_upmap = true;
                }
            }
            let upmap_items = map.pg_upmap_items().get(&pg).cloned().unwrap_or_default();
            pgs.push(Pg {
                id: crate::problem::PgId {
                    pool: id,
                    seed: pg.seed,
                },
                raw,
                upmap_items,
                size_bytes: None,
                from_pg_upmap,
            });
        }
    }
    let (problem, mut more) = build_problem(map.crush(), &osd_states, &pools, pgs);
    skipped.append(&mut more);
    (problem, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::Osd;

    fn fixture(name: &str) -> CrushMap {
        let path = format!(
            "{}/../../fixtures/crush-vectors/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let bytes = std::fs::read(&path).unwrap_or_default();
        crush::codec::decode(&bytes).unwrap_or_default()
    }

    fn constraints(
        map: &CrushMap,
        rule_id: usize,
        size: u32,
    ) -> Result<RuleConstraints, BalancerError> {
        let weights: BTreeMap<OsdId, f64> = (0..map.max_devices).map(|o| (o, 1.0)).collect();
        let info = PoolInfo {
            id: 1,
            name: "p".into(),
            size,
            rule_id,
            erasure: false,
        };
        rule_constraints(map, &info, &weights)
    }

    fn levels(list: &[(i32, u32)]) -> Vec<Level> {
        list.iter()
            .map(|&(type_id, max_per_pg)| Level {
                pin_to_raw: false,
                type_id,
                max_per_pg,
            })
            .collect()
    }

    #[test]
    fn multi_level_rules_become_nested_limits() {
        let map = fixture("hier3x4_mixed.bin");
        let host = map.type_id_by_name("host").unwrap_or(-1);
        let rack = map.type_id_by_name("rack").unwrap_or(-1);
        let rule = |id, size| constraints(&map, id, size).map(|c| c.levels).ok();
        assert_eq!(rule(0, 3), Some(levels(&[(host, 1)])));
        assert_eq!(rule(1, 4), Some(levels(&[(rack, 2), (host, 1)])));
        let mut pinned = levels(&[(rack, 2), (host, 1)]);
        pinned[0].pin_to_raw = true;
        assert_eq!(
            rule(3, 6),
            Some(pinned),
            "choose indep 3 rack < size 6: racks pinned"
        );
        assert_eq!(rule(4, 3), Some(levels(&[(rack, 1)])));
        // Two take/emit blocks (rack0 for the first replica, rack1 for the rest): one block
        // per take, each in its own rack's hosts.
        let two = constraints(&map, 5, 3).expect("rule 5");
        assert_eq!(two.levels, levels(&[(host, 1)]));
        let blocks: Vec<_> = two.takes.iter().map(|t| t.positions.clone()).collect();
        assert_eq!(blocks, vec![0..1, 1..3]);
        assert!(two.takes[0]
            .candidates
            .is_disjoint(&two.takes[1].candidates));
        assert!(!two.takes[0].candidates.is_empty() && !two.takes[1].candidates.is_empty());
    }

    #[test]
    fn class_rules_take_only_their_class() {
        let map = fixture("classes_ssd_hdd.bin");
        let ssd = constraints(&map, 1, 3)
            .map(|c| c.candidates)
            .unwrap_or_default();
        assert!(!ssd.is_empty());
        let ssd_class = map
            .class_names
            .iter()
            .find(|(_, n)| *n == "ssd")
            .map(|(&id, _)| id);
        assert!(ssd
            .iter()
            .all(|o| map.device_classes.get(o).copied() == ssd_class));
        let osd_rule = constraints(&map, 3, 3).map(|c| c.levels).ok();
        assert_eq!(osd_rule, Some(levels(&[(TYPE_OSD, 1)])));
    }

    /// Review finding 2: a valid hierarchy 1200 levels deep (hosts nested in hosts) made
    /// `Hierarchy::ancestors` panic on a "cycle" guard. Any acyclic depth now works.
    #[test]
    fn a_hierarchy_deeper_than_a_thousand_levels_builds() {
        let levels = 1200;
        let mut text = String::from("device 0 osd.0\ndevice 1 osd.1\ndevice 2 osd.2\n");
        text.push_str("type 0 osd\ntype 1 host\ntype 2 root\n");
        for i in 0..levels {
            let items = if i == 0 {
                (0..3)
                    .map(|d| format!("\titem osd.{d} weight 1.0\n"))
                    .collect()
            } else {
                format!("\titem z{} weight 3.0\n", i - 1)
            };
            text.push_str(&format!(
                "host z{i} {{\n\tid {}\n\talg straw2\n\thash 0\n{items}}}\n",
                -1 - i
            ));
        }
        text.push_str(&format!(
            "root top {{\n\tid {}\n\talg straw2\n\thash 0\n\titem z{} weight 3.0\n}}\n",
            -1 - levels,
            levels - 1
        ));
        text.push_str("rule r {\n\tid 0\n\ttype replicated\n\tmin_size 1\n\tmax_size 10\n");
        text.push_str("\tstep take top\n\tstep choose firstn 0 type osd\n\tstep emit\n}\n");
        let crush = crush::text::compile(&text).expect("compile");
        let states: Vec<OsdState> = (0..3)
            .map(|id| OsdState {
                id,
                exists: true,
                up: true,
                reweight: 1.0,
            })
            .collect();
        let pool = PoolInfo {
            id: 1,
            name: "p".into(),
            size: 3,
            rule_id: 0,
            erasure: false,
        };
        let (problem, skipped) = build_problem(&crush, &states, &[pool], Vec::new());
        assert!(skipped.is_empty(), "{skipped:?}");
        let candidates = &problem.pools[0].rule.candidates;
        assert_eq!(
            candidates.iter().copied().collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
        assert_eq!(problem.osds[0].ancestors.get(&1), Some(&-1), "nearest host");
    }

    /// Review finding 1: a host linked under a rack of the rule's root and also under another
    /// root has its rack in the rule's hierarchy, whichever parent comes last.
    #[test]
    fn failure_domains_are_read_under_the_rule_s_take() {
        let path = format!(
            "{}/tests/fixtures/crush_two_parents.txt",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let map = crush::text::compile(&text).expect("compile");
        let rack = map.type_id_by_name("rack").unwrap_or(-1);
        let r0 = map.item_id_by_name("r0").unwrap_or(0);
        let rule = constraints(&map, 0, 3).expect("rule 0");
        let osd = Osd {
            id: 0,
            weight: 1.0,
            ancestors: BTreeMap::new(),
            class: None,
        };
        assert_eq!(
            rule.domain(&osd, rack),
            i64::from(r0),
            "osd.0 is in h0, in r0"
        );
    }
}
