//! The balancer's own input model: OSDs, pools with their rule constraints, and PGs with their
//! raw CRUSH sets and existing upmap items. Pure data, independent of how it was decoded
//! (see [`crate::cluster`] for the adapter from a CRUSH map and an OSD map).

use std::collections::{BTreeMap, BTreeSet};

use crate::BalancerError;

/// An OSD id (`osd.N`).
pub type OsdId = i32;
/// A pool id.
pub type PoolId = i64;
/// CRUSH's `CRUSH_ITEM_NONE`: a hole in an erasure-coded (indep) raw set.
pub const ITEM_NONE: OsdId = 0x7fff_ffff;
/// The CRUSH type id of devices (`type 0 osd`).
pub const TYPE_OSD: i32 = 0;

/// One OSD.
#[derive(Debug, Clone, PartialEq)]
pub struct Osd {
    pub id: OsdId,
    /// Effective weight: CRUSH weight times reweight; 0 for an OSD that is out.
    pub weight: f64,
    /// Ancestor bucket id at each CRUSH type id (`1 -> host bucket`, `3 -> rack bucket`, ...),
    /// through the OSD's first parent. A pool's failure domains come from
    /// [`RuleConstraints::ancestors`] instead where the rule's hierarchy knows the OSD: a bucket
    /// linked under two parents has a different ancestry in each root.
    pub ancestors: BTreeMap<i32, i32>,
    /// Device class name, if any.
    pub class: Option<String>,
}

impl Osd {
    /// The failure domain of this OSD at CRUSH type `type_id` (the OSD itself at type 0).
    /// An OSD with no ancestor of that type is its own domain.
    pub fn domain(&self, type_id: i32) -> i64 {
        if type_id == TYPE_OSD {
            return i64::from(self.id);
        }
        self.ancestors
            .get(&type_id)
            .map_or(i64::from(self.id), |&bucket| i64::from(bucket))
    }
}

/// One level of a rule's separation structure: at most `max_per_pg` shards of a PG may share
/// a bucket of this type. Levels go from the outermost (e.g. rack) to the innermost (e.g.
/// host); the innermost level always has `max_per_pg == 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Level {
    pub type_id: i32,
    pub max_per_pg: u32,
    /// The PG must stay in the buckets of this type its raw set uses (a `choose N type`
    /// step with N below the pool size: Ceph's `verify_upmap` allows at most N distinct
    /// buckets, and staying inside the raw ones guarantees it).
    pub pin_to_raw: bool,
}

/// One `take ... emit` block of a rule with several (e.g. the first replica from class ssd,
/// the rest from hdd): the positions of the up set it fills and what it may choose there.
#[derive(Debug, Clone, PartialEq)]
pub struct Take {
    pub positions: std::ops::Range<usize>,
    /// OSDs this block can choose; disjoint from the other blocks' candidates.
    pub candidates: BTreeSet<OsdId>,
    /// This block's separation levels, outermost first (the last has `max_per_pg == 1`).
    /// Domains are read through [`RuleConstraints::ancestors`], where each block's OSDs have
    /// the block's own buckets (Ceph's `get_parent_of_type` under the rule's takes).
    pub levels: Vec<Level>,
}

/// What a pool's CRUSH rule allows, as the balancer uses it.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleConstraints {
    /// OSDs the rule can choose (under its `take`, of its device class, weight > 0).
    pub candidates: BTreeSet<OsdId>,
    /// Separation levels, outermost first; the last one has `max_per_pg == 1`.
    pub levels: Vec<Level>,
    /// Erasure-coded (indep): positions matter; a shard changes OSD in place. Replicated pools
    /// also change in place (upmap items replace an OSD where it stands), so this only reports.
    pub positional: bool,
    /// Ancestor bucket per CRUSH type of each OSD under the rule's `take`, as the rule's
    /// hierarchy nests them (Ceph's `verify_upmap` looks parents up from the take root). Needed
    /// because a bucket may sit under two parents (`ceph osd crush link`): its rack in the
    /// rule's root is not its rack in another root. OSDs absent here use [`Osd::ancestors`].
    pub ancestors: BTreeMap<OsdId, BTreeMap<i32, i32>>,
    /// A rule with several `take ... emit` blocks: one entry per block, in position order
    /// (`candidates` is then their union and `levels` the last block's). Empty for a rule
    /// with one take. The count balancer balances each block on its own OSDs
    /// ([`crate::takes`]); the other modes leave such pools alone.
    pub takes: Vec<Take>,
}

impl RuleConstraints {
    /// The failure domain of `osd` at CRUSH type `type_id` in this rule's hierarchy (the OSD
    /// itself at type 0, or when it has no ancestor of that type).
    pub fn domain(&self, osd: &Osd, type_id: i32) -> i64 {
        match self.ancestors.get(&osd.id) {
            Some(ancestors) if type_id != TYPE_OSD => ancestors
                .get(&type_id)
                .map_or(i64::from(osd.id), |&bucket| i64::from(bucket)),
            _ => osd.domain(type_id),
        }
    }
}

/// One pool.
#[derive(Debug, Clone, PartialEq)]
pub struct Pool {
    pub id: PoolId,
    pub name: String,
    pub size: u32,
    pub rule: RuleConstraints,
}

/// A placement group id `pool.seed` (printed as `1.7f`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PgId {
    pub pool: PoolId,
    pub seed: u32,
}

impl std::fmt::Display for PgId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{:x}", self.pool, self.seed)
    }
}

impl std::str::FromStr for PgId {
    type Err = BalancerError;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || BalancerError::Parse(format!("bad pg id {text:?}"));
        let (pool, seed) = text.split_once('.').ok_or_else(bad)?;
        Ok(Self {
            pool: pool.parse().map_err(|_| bad())?,
            seed: u32::from_str_radix(seed, 16).map_err(|_| bad())?,
        })
    }
}

/// One PG.
#[derive(Debug, Clone, PartialEq)]
pub struct Pg {
    pub id: PgId,
    /// The raw CRUSH set, by position; [`ITEM_NONE`] marks a hole.
    pub raw: Vec<OsdId>,
    /// Existing `pg_upmap_items` (from, to) pairs.
    pub upmap_items: Vec<(OsdId, OsdId)>,
    /// Bytes stored (bytes mode), if known.
    pub size_bytes: Option<u64>,
    /// `raw` is the PG's full `pg_upmap` entry, which Ceph uses in place of the CRUSH set;
    /// messages about a bad raw set then name that entry as its source.
    pub from_pg_upmap: bool,
}

impl Pg {
    /// The up set: `raw` with `upmap_items` applied the way Ceph applies them (in place, an item
    /// is skipped if its target is already in the set).
    pub fn up(&self) -> Vec<OsdId> {
        apply_upmap_items(&self.raw, &self.upmap_items)
    }

    /// Shards in the raw set (holes excluded).
    pub fn shard_count(&self) -> usize {
        self.raw.iter().filter(|&&o| o != ITEM_NONE).count()
    }
}

/// Ceph's `OSDMap::_apply_upmap` for `pg_upmap_items` (without the out-OSD check, which the
/// caller does by keeping out OSDs out of candidate sets).
pub fn apply_upmap_items(raw: &[OsdId], items: &[(OsdId, OsdId)]) -> Vec<OsdId> {
    let mut up = raw.to_vec();
    for &(from, to) in items {
        if up.contains(&to) {
            continue;
        }
        if let Some(slot) = up.iter_mut().find(|o| **o == from) {
            *slot = to;
        }
    }
    up
}

/// Shards of `up` that are not where raw CRUSH put them.
pub fn moved_shards(raw: &[OsdId], up: &[OsdId]) -> usize {
    up.iter()
        .filter(|&&o| o != ITEM_NONE && !raw.contains(&o))
        .count()
}

/// The whole balancing problem.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Problem {
    pub osds: Vec<Osd>,
    pub pools: Vec<Pool>,
    pub pgs: Vec<Pg>,
}

impl Problem {
    /// Check references and the raw sets' basic sanity.
    pub fn validate(&self) -> Result<(), BalancerError> {
        let osds: BTreeSet<OsdId> = self.osds.iter().map(|o| o.id).collect();
        if osds.len() != self.osds.len() {
            return Err(BalancerError::Invalid("duplicate OSD id".into()));
        }
        let pools: BTreeMap<PoolId, &Pool> = self.pools.iter().map(|p| (p.id, p)).collect();
        for pool in &self.pools {
            let last = pool.rule.levels.last();
            if last.is_none_or(|l| l.max_per_pg != 1) {
                return Err(BalancerError::Invalid(format!(
                    "pool {}: innermost separation level must allow 1 shard per PG",
                    pool.id
                )));
            }
            if let Some(o) = pool.rule.candidates.iter().find(|o| !osds.contains(o)) {
                return Err(BalancerError::Invalid(format!(
                    "pool {}: unknown candidate osd.{o}",
                    pool.id
                )));
            }
        }
        for pg in &self.pgs {
            if !pools.contains_key(&pg.id.pool) {
                return Err(BalancerError::Invalid(format!(
                    "pg {}: unknown pool",
                    pg.id
                )));
            }
            let mut seen = BTreeSet::new();
            for &o in pg.raw.iter().filter(|&&o| o != ITEM_NONE) {
                if !osds.contains(&o) || !seen.insert(o) {
                    return Err(BalancerError::Invalid(format!(
                        "pg {}: raw set {:?} names an unknown or repeated OSD",
                        pg.id, pg.raw
                    )));
                }
            }
        }
        Ok(())
    }

    /// Whether some pool's rule has several `take` blocks.
    pub fn has_multi_take(&self) -> bool {
        self.pools.iter().any(|p| !p.rule.takes.is_empty())
    }

    /// This problem, or without its pools whose rules have several `take` blocks if it has
    /// any ([`Problem::single_take`]): what the modes that balance one take per pool work on.
    pub fn single_take_only(&self) -> std::borrow::Cow<'_, Problem> {
        if self.has_multi_take() {
            std::borrow::Cow::Owned(self.single_take())
        } else {
            std::borrow::Cow::Borrowed(self)
        }
    }

    /// The problem without the pools whose rules have several `take` blocks (and their PGs),
    /// for the modes that balance one take per pool.
    pub fn single_take(&self) -> Self {
        let pools: Vec<Pool> = self
            .pools
            .iter()
            .filter(|p| p.rule.takes.is_empty())
            .cloned()
            .collect();
        let kept: BTreeSet<PoolId> = pools.iter().map(|p| p.id).collect();
        Self {
            osds: self.osds.clone(),
            pools,
            pgs: self
                .pgs
                .iter()
                .filter(|pg| kept.contains(&pg.id.pool))
                .cloned()
                .collect(),
        }
    }

    pub fn pool(&self, id: PoolId) -> Option<&Pool> {
        self.pools.iter().find(|p| p.id == id)
    }

    pub fn osd(&self, id: OsdId) -> Option<&Osd> {
        self.osds.iter().find(|o| o.id == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pg_id_round_trips() {
        let id: PgId = "3.1f".parse().unwrap_or(PgId { pool: 0, seed: 0 });
        assert_eq!(
            id,
            PgId {
                pool: 3,
                seed: 0x1f
            }
        );
        assert_eq!(id.to_string(), "3.1f");
    }

    #[test]
    fn upmap_items_apply_in_place_and_skip_present_targets() {
        assert_eq!(apply_upmap_items(&[1, 2, 3], &[(2, 7)]), vec![1, 7, 3]);
        assert_eq!(apply_upmap_items(&[1, 2, 3], &[(2, 3)]), vec![1, 2, 3]);
        assert_eq!(
            apply_upmap_items(&[1, ITEM_NONE, 3], &[(3, 9), (1, 8)]),
            vec![8, ITEM_NONE, 9]
        );
        assert_eq!(moved_shards(&[1, 2, 3], &[8, 2, 9]), 2);
    }
}
