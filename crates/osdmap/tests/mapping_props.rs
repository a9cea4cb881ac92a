//! Invariants of the mapping pipeline under random OSD states, reweights, affinities and
//! upmap items (the exact values are pinned by the osdmaptool fixtures; these pin the shape).

use osdmap::{OsdMap, PgId, ITEM_NONE};
use proptest::prelude::*;

const EC_MAP: &[u8] = include_bytes!("../../../fixtures/osdmap/om_ec.bin");

#[derive(Debug, Clone)]
enum Edit {
    Down(i32),
    Up(i32),
    Reweight(i32, u32),
    Affinity(i32, u32),
    UpmapItem(u32, i32, i32),
}

fn edit() -> impl Strategy<Value = Edit> {
    let osd = 0_i32..64; // includes ids past max_osd (60)
    prop_oneof![
        osd.clone().prop_map(Edit::Down),
        osd.clone().prop_map(Edit::Up),
        (
            osd.clone(),
            prop_oneof![Just(0_u32), Just(0x10000), 0_u32..0x10000]
        )
            .prop_map(|(o, w)| Edit::Reweight(o, w)),
        (
            osd.clone(),
            prop_oneof![Just(0_u32), Just(0x10000), 0_u32..0x10000]
        )
            .prop_map(|(o, a)| Edit::Affinity(o, a)),
        (0_u32..64, osd.clone(), osd).prop_map(|(s, f, t)| Edit::UpmapItem(s, f, t)),
    ]
}

fn apply(map: &mut OsdMap, edits: &[Edit]) {
    for e in edits {
        match *e {
            Edit::Down(o) => map.set_osd_up(o, false),
            Edit::Up(o) => map.set_osd_up(o, true),
            Edit::Reweight(o, w) => map.set_osd_weight(o, w),
            Edit::Affinity(o, a) => map.set_primary_affinity(o, a),
            Edit::UpmapItem(seed, from, to) => {
                for pool in [1, 2] {
                    map.set_pg_upmap_items(PgId::new(pool, seed), Some(vec![(from, to)]));
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn up_and_acting_have_the_shape_ceph_guarantees(edits in proptest::collection::vec(edit(), 0..40)) {
        let mut map = OsdMap::decode(EC_MAP).expect("fixture decodes");
        apply(&mut map, &edits);
        for (&id, pool) in map.pools() {
            for seed in 0..64 {
                let pg = PgId::new(id, seed);
                let m = map.pg_to_up_acting(pg);
                prop_assert!(m.up.len() <= pool.size as usize);
                if pool.can_shift_osds() {
                    // Replicated: no holes, no duplicates, only live OSDs.
                    prop_assert!(m.up.iter().all(|&o| o != ITEM_NONE && map.is_up(o)), "{pg} {m:?}");
                    let mut sorted = m.up.clone();
                    sorted.sort_unstable();
                    sorted.dedup();
                    prop_assert_eq!(sorted.len(), m.up.len());
                    prop_assert!(m.up_primary == m.up.first().copied().unwrap_or(-1), "{pg} {m:?}");
                } else {
                    // Erasure: positions kept, holes for anything not up.
                    prop_assert_eq!(m.up.len(), m.raw.len());
                    prop_assert!(m.up.iter().all(|&o| o == ITEM_NONE || map.is_up(o)), "{pg} {m:?}");
                    prop_assert!(m.up_primary == -1 || m.up.contains(&m.up_primary));
                }
                if !map.pg_temp().contains_key(&pg) && !map.primary_temp().contains_key(&pg) {
                    prop_assert_eq!(&m.acting, &m.up);
                    prop_assert_eq!(m.acting_primary, m.up_primary);
                }
            }
        }
    }
}
