//! The rule interpreter: Ceph's `crush_do_rule` and the choose functions it calls.

use crate::map::{ChooseArgMap, CrushMap};

/// Map input `x` through rule `rule_id`, as Ceph's `crush_do_rule` does.
///
/// * `result_max`: the most OSDs to return (crushtool passes `--num-rep`; OSDMap passes pool size).
/// * `weights`: per-device reweight, 16.16 (0x10000 = in, 0 = out), indexed by device id; devices
///   beyond its end count as out (Ceph's `is_out`).
/// * `choose_args`: an optional weight-set / id remap.
///
/// Returns the OSD list; `indep` steps leave [`crate::ITEM_NONE`] holes in place.
pub fn do_rule(
    map: &CrushMap,
    rule_id: usize,
    x: u32,
    result_max: usize,
    weights: &[u32],
    choose_args: Option<&ChooseArgMap>,
) -> Vec<i32> {
    let _ = (map, rule_id, x, result_max, weights, choose_args);
    unimplemented!("crush mapper lands with the crush-core work")
}
