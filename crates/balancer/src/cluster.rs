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

/// Parent links and device weights of the real (non-shadow) hierarchy.
struct Hierarchy {
    parent: BTreeMap<i32, i32>,
    bucket_type: BTreeMap<i32, i32>,
    device_weight: BTreeMap<OsdId, f64>,
}

impl Hierarchy {
    fn new(crush: &CrushMap) -> Self {
        let mut hierarchy = Self {
            parent: BTreeMap::new(),
            bucket_type: BTreeMap::new(),
            device_weight: BTreeMap::new(),
        };
        for bucket in crush.iter_buckets() {
            if crush.is_shadow_bucket(bucket.id) {
                continue;
            }
            hierarchy
                .bucket_type
                .insert(bucket.id, i32::from(bucket.type_id));
            for (position, &item) in bucket.items.iter().enumerate() {
                hierarchy.parent.insert(item, bucket.id);
                if item >= 0 {
                    let weight = f64::from(bucket.item_weight(position)) / f64::from(WEIGHT_ONE);
                    hierarchy.device_weight.insert(item, weight);
                }
            }
        }
        hierarchy
    }

    fn ancestors(&self, osd: OsdId) -> BTreeMap<i32, i32> {
        let mut out = BTreeMap::new();
        let mut item = osd;
        let mut guard = 0;
        while let Some(&parent) = self.parent.get(&item) {
            if let Some(&type_id) = self.bucket_type.get(&parent) {
                out.entry(type_id).or_insert(parent);
            }
            item = parent;
            guard += 1;
            assert!(guard < 1000, "cycle in the CRUSH hierarchy");
        }
        out
    }
}

/// Devices under `item` (any bucket, shadow buckets included) with positive CRUSH weight.
fn devices_under(crush: &CrushMap, item: i32, out: &mut BTreeSet<OsdId>) {
    if item >= 0 {
        out.insert(item);
        return;
    }
    if let Some(bucket) = crush.bucket(item) {
        for (position, &child) in bucket.items.iter().enumerate() {
            if bucket.item_weight(position) > 0 {
                devices_under(crush, child, out);
            }
        }
    }
}

/// Candidates and separation levels of a pool's rule. Supports one `take` followed by
/// choose/chooseleaf steps and `emit`; `count <= 0` means "size + count".
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
    let mut take = None;
    let mut steps: Vec<(i64, i32, bool)> = Vec::new(); // (count, type, leaf)
    let mut emits = 0;
    for step in &rule.steps {
        match *step {
            RuleStep::Take { item } => {
                if take.is_some() {
                    return Err(unsupported("more than one take"));
                }
                take = Some(item);
            }
            RuleStep::ChooseFirstN { count, type_id }
            | RuleStep::ChooseIndep { count, type_id } => {
                steps.push((i64::from(count), type_id, false));
            }
            RuleStep::ChooseLeafFirstN { count, type_id }
            | RuleStep::ChooseLeafIndep { count, type_id } => {
                steps.push((i64::from(count), type_id, true));
            }
            RuleStep::Emit => emits += 1,
            _ => {}
        }
    }
    let take = take.ok_or_else(|| unsupported("no take"))?;
    if emits != 1 || steps.is_empty() {
        return Err(unsupported("expected one take, choose steps, one emit"));
    }
    let size = i64::from(info.size);
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
            return Err(unsupported("choose of osds before the last step"));
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
        return Err(unsupported("the last step chooses buckets, not OSDs"));
    }
    let mut candidates = BTreeSet::new();
    devices_under(crush, take, &mut candidates);
    candidates.retain(|o| weights.get(o).is_some_and(|&w| w > 0.0));
    Ok(RuleConstraints {
        candidates,
        levels,
        positional: info.erasure,
    })
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
            if let Some(set) = map.pg_upmap().get(&pg) {
                let usable = |o: &i32| *o == osdmap::ITEM_NONE || map.osd_weight(*o) != 0;
                if set.iter().all(usable) {
                    raw.clone_from(set);
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
        assert!(
            rule(5, 3).is_none(),
            "two take/emit blocks are refused, not guessed"
        );
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
}
