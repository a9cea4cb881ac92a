//! A pool's failure-domain tree: the buckets of each separation level that hold the pool's
//! candidate or raw OSDs, nested outermost to innermost (e.g. rack > host).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::problem::{Osd, OsdId, Pool, ITEM_NONE};

/// One failure domain (bucket) of one level.
#[derive(Debug, Clone, PartialEq)]
pub struct Domain {
    pub level: usize,
    /// Bucket id (or OSD id at the OSD level).
    pub key: i64,
    pub parent: Option<usize>,
    pub children: Vec<usize>,
    /// Candidate OSDs (innermost level only).
    pub candidates: Vec<OsdId>,
}

/// All domains of one pool, with each OSD's innermost domain.
#[derive(Debug, Clone, PartialEq)]
pub struct DomainTree {
    pub domains: Vec<Domain>,
    pub roots: Vec<usize>,
    /// OSD -> innermost domain index.
    pub leaf_of: BTreeMap<OsdId, usize>,
    /// Per level, the maximum shards of one PG in one domain.
    pub max_per_pg: Vec<u32>,
    /// Per level, the CRUSH type id.
    pub type_ids: Vec<i32>,
    /// Per level, whether a PG must stay in its raw buckets of that level.
    pub pinned: Vec<bool>,
}

impl DomainTree {
    /// Build over the pool's candidates plus every OSD in `raw_osds` (raw sets may name OSDs
    /// the balancer must not add shards to, e.g. an OSD being drained).
    pub fn build(pool: &Pool, osds: &BTreeMap<OsdId, &Osd>, raw_osds: &BTreeSet<OsdId>) -> Self {
        let levels = &pool.rule.levels;
        let mut tree = Self {
            domains: Vec::new(),
            roots: Vec::new(),
            leaf_of: BTreeMap::new(),
            max_per_pg: levels.iter().map(|l| l.max_per_pg).collect(),
            type_ids: levels.iter().map(|l| l.type_id).collect(),
            pinned: levels.iter().map(|l| l.pin_to_raw).collect(),
        };
        let mut index: HashMap<(usize, i64, Option<usize>), usize> = HashMap::new();
        let members = pool.rule.candidates.union(raw_osds).copied();
        for osd_id in members.filter(|&o| o != ITEM_NONE) {
            let Some(osd) = osds.get(&osd_id) else {
                continue;
            };
            let mut parent = None;
            for (level, l) in levels.iter().enumerate() {
                let key = pool.rule.domain(osd, l.type_id);
                let next = tree.domains.len();
                let id = *index.entry((level, key, parent)).or_insert(next);
                if id == next {
                    tree.domains.push(Domain {
                        level,
                        key,
                        parent,
                        children: Vec::new(),
                        candidates: Vec::new(),
                    });
                    match parent {
                        Some(p) => tree.domains[p].children.push(id),
                        None => tree.roots.push(id),
                    }
                }
                parent = Some(id);
            }
            if let Some(leaf) = parent {
                tree.leaf_of.insert(osd_id, leaf);
                if pool.rule.candidates.contains(&osd_id) && osd.weight > 0.0 {
                    tree.domains[leaf].candidates.push(osd_id);
                }
            }
        }
        tree
    }

    /// Domain indices from the root to `leaf`.
    pub fn path(&self, leaf: usize) -> Vec<usize> {
        let mut path = vec![leaf];
        let mut node = leaf;
        while let Some(parent) = self.domains[node].parent {
            path.push(parent);
            node = parent;
        }
        path.reverse();
        path
    }

    /// Shards of `set` per domain index.
    pub fn occupancy(&self, set: &[OsdId]) -> HashMap<usize, u32> {
        let mut count = HashMap::new();
        for osd in set.iter().filter(|&&o| o != ITEM_NONE) {
            if let Some(&leaf) = self.leaf_of.get(osd) {
                for d in self.path(leaf) {
                    *count.entry(d).or_insert(0) += 1;
                }
            }
        }
        count
    }

    /// The most shards of one PG domain `d` may hold, given the PG's raw occupancy: the
    /// level's limit (or the raw count, if the raw set already exceeds it), and 0 for a
    /// domain outside the raw set at a pinned level.
    pub fn limit(&self, d: usize, raw: &HashMap<usize, u32>) -> u32 {
        let level = self.domains[d].level;
        let in_raw = raw.get(&d).copied().unwrap_or(0);
        if self.pinned[level] && in_raw == 0 {
            return 0;
        }
        self.max_per_pg[level].max(in_raw)
    }

    /// Does `set` respect every level's limit, given the raw set's occupancy `raw`?
    pub fn respects(&self, set: &[OsdId], raw: &HashMap<usize, u32>) -> bool {
        self.occupancy(set)
            .iter()
            .all(|(&d, &n)| n <= self.limit(d, raw))
    }
}
