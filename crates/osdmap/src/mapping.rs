//! PG -> OSD mapping, step for step as Ceph 16.2's `OSDMap::_pg_to_up_acting_osds`:
//!
//! 1. `raw`: CRUSH (`do_rule` on the placement seed, pool size, reweights, the pool's
//!    choose_args or the default set), minus OSDs that do not exist (replicated pools drop them,
//!    erasure pools leave [`ITEM_NONE`] holes);
//! 2. `pg_upmap` (ignored if any target is marked out), then `pg_upmap_items`;
//! 3. `up`: minus down OSDs (holes for erasure pools), primary = first OSD, then primary
//!    affinity may elect another (and, for replicated pools, move it to the front);
//! 4. `acting`: `pg_temp` / `primary_temp` if set, else `up`.

use crate::error::{OsdMapError, Result};
use crate::map::{OsdMap, DEFAULT_PRIMARY_AFFINITY, ITEM_NONE};
use crate::pg::PgId;
use crate::pool::Pool;

/// The mapping of one PG at every stage. Primaries are -1 when there is none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpActing {
    /// CRUSH output minus nonexistent OSDs (before upmap).
    pub raw: Vec<i32>,
    /// First OSD of `raw` (`pg_to_raw_osds`' primary).
    pub raw_primary: i32,
    /// After upmap, minus down OSDs, with primary affinity applied.
    pub up: Vec<i32>,
    pub up_primary: i32,
    /// What serves I/O: `pg_temp` if set, else `up`.
    pub acting: Vec<i32>,
    pub acting_primary: i32,
}

/// First OSD that is not a hole (`_pick_primary`), or -1.
fn pick_primary(osds: &[i32]) -> i32 {
    osds.iter()
        .copied()
        .find(|&osd| osd != ITEM_NONE)
        .unwrap_or(-1)
}

impl OsdMap {
    /// The CRUSH rule a pool maps with (`CrushWrapper::find_rule`): the first rule whose
    /// ruleset, type and size range match.
    pub fn find_rule(&self, pool: &Pool) -> Option<usize> {
        let size = i64::from(pool.size);
        let ruleset = i64::from(pool.crush_rule);
        self.crush.rules.iter().position(|rule| {
            rule.as_ref().is_some_and(|rule| {
                i64::from(rule.ruleset) == ruleset
                    && rule.rule_type == pool.pool_type.code()
                    && i64::from(rule.min_size) <= size
                    && i64::from(rule.max_size) >= size
            })
        })
    }

    /// `_pg_to_raw_osds`: CRUSH output minus nonexistent OSDs, and the placement seed.
    fn raw_osds(&self, pool: &Pool, pg: PgId) -> (Vec<i32>, u32) {
        let pps = pool.raw_pg_to_pps(pg);
        let size = pool.size as usize;
        let mut osds = match self.find_rule(pool) {
            Some(rule) => {
                let choose_args = self
                    .crush
                    .choose_args
                    .get(&pg.pool)
                    .or_else(|| self.crush.choose_args.get(&-1));
                crush::mapper::do_rule(&self.crush, rule, pps, size, &self.osd_weight, choose_args)
            }
            None => Vec::new(),
        };
        if pool.can_shift_osds() {
            osds.retain(|&osd| self.exists(osd));
        } else {
            for osd in &mut osds {
                if !self.exists(*osd) {
                    *osd = ITEM_NONE;
                }
            }
        }
        (osds, pps)
    }

    /// Is `osd` a valid id whose reweight is 0? (`_apply_upmap`'s "marked out" test.)
    fn is_marked_out_target(&self, osd: i32) -> bool {
        osd != ITEM_NONE && osd >= 0 && osd < self.max_osd && self.osd_weight(osd) == 0
    }

    /// `_apply_upmap`: explicit `pg_upmap`, then `pg_upmap_items` replacements.
    fn apply_upmap(&self, pool: &Pool, raw_pg: PgId, raw: &mut Vec<i32>) {
        let pg = pool.raw_pg_to_pg(raw_pg);
        if let Some(targets) = self.pg_upmap.get(&pg) {
            // A target marked out voids the whole explicit mapping (and skips the items: Ceph
            // returns early).
            if targets.iter().any(|&osd| self.is_marked_out_target(osd)) {
                return;
            }
            raw.clone_from(targets);
        }
        let Some(items) = self.pg_upmap_items.get(&pg) else {
            return;
        };
        for &(from, to) in items {
            let mut target_present = false;
            let mut position = None;
            for (i, &osd) in raw.iter().enumerate() {
                if osd == to {
                    target_present = true;
                    break;
                }
                if osd == from && position.is_none() && !self.is_marked_out_target(to) {
                    position = Some(i);
                }
            }
            if let (false, Some(i)) = (target_present, position) {
                if let Some(slot) = raw.get_mut(i) {
                    *slot = to;
                }
            }
        }
    }

    /// `_raw_to_up_osds`: drop (replicated) or hole (erasure) OSDs that are down or gone.
    fn raw_to_up(&self, pool: &Pool, raw: &[i32]) -> Vec<i32> {
        if pool.can_shift_osds() {
            raw.iter()
                .copied()
                .filter(|&osd| self.exists(osd) && self.is_up(osd))
                .collect()
        } else {
            raw.iter()
                .map(|&osd| {
                    if self.exists(osd) && self.is_up(osd) {
                        osd
                    } else {
                        ITEM_NONE
                    }
                })
                .collect()
        }
    }

    /// `_apply_primary_affinity`: an OSD with affinity `a` < 1 declines to be primary for a
    /// hash-chosen `1 - a` share of PGs; the first OSD that accepts (or failing all, the first
    /// that declined) becomes primary and, in replicated pools, moves to the front.
    fn apply_primary_affinity(&self, pps: u32, pool: &Pool, osds: &mut [i32], primary: &mut i32) {
        let Some(affinity) = &self.osd_primary_affinity else {
            return;
        };
        let affinity_of = |osd: i32| {
            usize::try_from(osd)
                .ok()
                .and_then(|i| affinity.get(i))
                .copied()
                .unwrap_or(DEFAULT_PRIMARY_AFFINITY)
        };
        let any = osds
            .iter()
            .any(|&osd| osd != ITEM_NONE && affinity_of(osd) != DEFAULT_PRIMARY_AFFINITY);
        if !any {
            return;
        }
        let mut chosen = None;
        for (i, &osd) in osds.iter().enumerate() {
            if osd == ITEM_NONE {
                continue;
            }
            let a = affinity_of(osd);
            if a < DEFAULT_PRIMARY_AFFINITY
                && (crush::hash::crush_hash32_2(pps, osd as u32) >> 16) >= a
            {
                // Declined: remember as a fallback, keep looking.
                if chosen.is_none() {
                    chosen = Some(i);
                }
            } else {
                chosen = Some(i);
                break;
            }
        }
        let Some(position) = chosen else { return };
        let Some(&new_primary) = osds.get(position) else {
            return;
        };
        *primary = new_primary;
        if pool.can_shift_osds() && position > 0 {
            if let Some(prefix) = osds.get_mut(..=position) {
                prefix.rotate_right(1);
            }
        }
    }

    /// `_get_temp_osds`: the pg_temp set (minus down/gone OSDs) and the temp primary.
    fn temp_osds(&self, pool: &Pool, raw_pg: PgId) -> (Vec<i32>, i32) {
        let pg = pool.raw_pg_to_pg(raw_pg);
        let mut temp = Vec::new();
        if let Some(osds) = self.pg_temp.get(&pg) {
            for &osd in osds {
                if !self.exists(osd) || self.is_down(osd) {
                    if !pool.can_shift_osds() {
                        temp.push(ITEM_NONE);
                    }
                } else {
                    temp.push(osd);
                }
            }
        }
        let primary = match self.primary_temp.get(&pg) {
            Some(&osd) => osd,
            None => pick_primary(&temp),
        };
        (temp, primary)
    }

    /// `pg_to_raw_osds`: CRUSH output minus nonexistent OSDs, and its first OSD.
    pub fn pg_to_raw_osds(&self, pg: PgId) -> (Vec<i32>, i32) {
        let Some(pool) = self.pools.get(&pg.pool) else {
            return (Vec::new(), -1);
        };
        let (raw, _) = self.raw_osds(pool, pg);
        let primary = pick_primary(&raw);
        (raw, primary)
    }

    /// `pg_to_raw_upmap`: the raw set with upmap applied (before dropping down OSDs).
    pub fn pg_to_raw_upmap(&self, pg: PgId) -> Vec<i32> {
        let Some(pool) = self.pools.get(&pg.pool) else {
            return Vec::new();
        };
        let (mut raw, _) = self.raw_osds(pool, pg);
        self.apply_upmap(pool, pg, &mut raw);
        raw
    }

    /// Map a PG through every stage (`pg_to_raw_osds` + `pg_to_up_acting_osds`). A PG of an
    /// unknown pool maps to empty sets and primaries -1. Seeds beyond `pg_num` are folded for
    /// the upmap/temp tables as Ceph does.
    pub fn pg_to_up_acting(&self, pg: PgId) -> UpActing {
        let Some(pool) = self.pools.get(&pg.pool) else {
            return UpActing {
                raw_primary: -1,
                up_primary: -1,
                acting_primary: -1,
                ..UpActing::default()
            };
        };
        let (raw, pps) = self.raw_osds(pool, pg);
        let raw_primary = pick_primary(&raw);
        let mut upmapped = raw.clone();
        self.apply_upmap(pool, pg, &mut upmapped);
        let mut up = self.raw_to_up(pool, &upmapped);
        let mut up_primary = pick_primary(&up);
        self.apply_primary_affinity(pps, pool, &mut up, &mut up_primary);
        let (mut acting, mut acting_primary) = self.temp_osds(pool, pg);
        if acting.is_empty() {
            acting.clone_from(&up);
            if acting_primary == -1 {
                acting_primary = up_primary;
            }
        }
        UpActing {
            raw,
            raw_primary,
            up,
            up_primary,
            acting,
            acting_primary,
        }
    }

    /// The PG an object name maps to in a pool (`object_locator_to_pg` + `raw_pg_to_pg`).
    pub fn object_to_pg(&self, pool: i64, name: &str) -> Result<PgId> {
        self.object_to_pg_in_namespace(pool, name, "")
    }

    /// Like [`OsdMap::object_to_pg`], for an object in a RADOS namespace.
    pub fn object_to_pg_in_namespace(
        &self,
        pool: i64,
        name: &str,
        namespace: &str,
    ) -> Result<PgId> {
        let pool_info = self.pools.get(&pool).ok_or(OsdMapError::NoPool(pool))?;
        let raw = PgId::new(pool, pool_info.hash_key(name, namespace));
        Ok(pool_info.raw_pg_to_pg(raw))
    }
}

#[cfg(test)]
mod tests {
    use crate::decode::{decode_without_crush, CrcCheck};
    use crate::pg::PgId;

    const MAP_1920: &[u8] =
        include_bytes!("../../../fixtures/crush-vectors/osdmap/om_c5x12_pool1_pg1920_pgp960.bin");
    const OBJECTS_1920: &str = include_str!(
        "../../../fixtures/crush-vectors/osdmap/om_c5x12_pool1_pg1920_pgp960.objects.txt"
    );

    /// ` object 'NAME' -> PGID -> [OSDS]` lines of `osdmaptool --test-map-object`.
    fn parse_object_line(line: &str) -> Option<(&str, PgId)> {
        let rest = line.trim_start().strip_prefix("object '")?;
        let (name, rest) = rest.split_once("' -> ")?;
        let (pg, _) = rest.split_once(" -> ")?;
        Some((name, pg.parse().ok()?))
    }

    #[test]
    fn object_names_hash_to_osdmaptools_pgs_on_a_non_power_of_two_pool() {
        let (map, _) = decode_without_crush(MAP_1920, CrcCheck::Verify).expect("decodes");
        let pool = map.pool(1).expect("pool 1");
        assert_eq!((pool.pg_num, pool.pgp_num), (1920, 960));
        let mut checked = 0;
        for line in OBJECTS_1920.lines().filter(|l| !l.trim().is_empty()) {
            let (name, expected) = parse_object_line(line).expect("fixture line parses");
            assert_eq!(
                map.object_to_pg(1, name).ok(),
                Some(expected),
                "object {name}"
            );
            checked += 1;
        }
        assert_eq!(checked, 200);
    }

    #[test]
    fn unknown_pool_maps_to_nothing() {
        let (map, _) = decode_without_crush(MAP_1920, CrcCheck::Verify).expect("decodes");
        let m = map.pg_to_up_acting(PgId::new(9, 0));
        assert!(m.up.is_empty() && m.acting.is_empty());
        assert_eq!((m.up_primary, m.acting_primary), (-1, -1));
        assert!(map.object_to_pg(9, "x").is_err());
    }
}
