//! Placement invariants on the fixture maps, over random inputs and reweights: results never
//! exceed result_max; firstn never repeats an OSD; a chooseleaf-by-host rule never puts two
//! replicas in one host; reweighted-out OSDs are never chosen; a reused `Mapper` answers exactly
//! like a fresh one.

use std::path::Path;

use crush::mapper::{do_rule, Mapper};
use crush::{CrushMap, RuleStep, ITEM_NONE};
use proptest::prelude::*;

fn load(name: &str) -> CrushMap {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/crush-vectors")
        .join(format!("{name}.bin"));
    crush::codec::decode(&std::fs::read(path).expect("fixture")).expect("decode")
}

/// The host (type 1 bucket) holding `osd` in the map's primary hierarchy (shadow trees skipped).
fn host_of(map: &CrushMap, osd: i32) -> Option<i32> {
    map.iter_buckets()
        .filter(|b| b.type_id == 1 && !map.is_shadow_bucket(b.id))
        .find(|b| b.items.contains(&osd))
        .map(|b| b.id)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn placements_respect_their_rules(
        which in 0usize..4,
        first_x in any::<u32>(),
        out_osds in proptest::collection::btree_set(0i32..60, 0..6),
    ) {
        let name = ["c5x12_jewel", "c5x12_argonaut", "hier3x4_mixed", "classes_ssd_hdd"][which];
        let map = load(name);
        let mut weights = vec![0x10000_u32; map.max_devices as usize];
        for &osd in &out_osds {
            if let Some(w) = weights.get_mut(osd as usize) {
                *w = 0;
            }
        }
        let mut mapper = Mapper::new(&map, None);
        let mut out = Vec::new();
        for rule_id in 0..map.rules.len() {
            let Some(rule) = map.rule(rule_id) else { continue };
            let firstn = rule.steps.iter().all(|s| !matches!(s,
                RuleStep::ChooseIndep { .. } | RuleStep::ChooseLeafIndep { .. }));
            let by_host = rule.steps.iter().any(|s| matches!(s,
                RuleStep::ChooseLeafFirstN { type_id: 1, .. } | RuleStep::ChooseLeafIndep { type_id: 1, .. }));
            let emits = rule.steps.iter().filter(|s| matches!(s, RuleStep::Emit)).count();
            for x in first_x..first_x.saturating_add(50) {
                mapper.do_rule_into(rule_id, x, 3, &weights, &mut out);
                prop_assert!(out.len() <= 3);
                prop_assert_eq!(&out, &do_rule(&map, rule_id, x, 3, &weights, None));
                let osds: Vec<i32> = out.iter().copied().filter(|&o| o != ITEM_NONE).collect();
                for &osd in &osds {
                    prop_assert!(osd >= 0 && weights[osd as usize] == 0x10000, "{name} r{rule_id} x{x}: {out:?}");
                }
                if firstn && emits == 1 {
                    let mut unique = osds.clone();
                    unique.sort_unstable();
                    unique.dedup();
                    prop_assert_eq!(unique.len(), osds.len(), "{} r{} x{}: {:?}", name, rule_id, x, out);
                }
                if by_host && emits == 1 {
                    let mut hosts: Vec<Option<i32>> = osds.iter().map(|&o| host_of(&map, o)).collect();
                    hosts.sort_unstable();
                    hosts.dedup();
                    prop_assert_eq!(hosts.len(), osds.len(), "{} r{} x{}: {:?}", name, rule_id, x, out);
                }
            }
        }
    }
}
