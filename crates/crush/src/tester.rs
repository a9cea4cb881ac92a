//! `crushtool --test`: map a range of inputs through rules and print what crushtool prints
//! (Ceph 16.2's `CrushTester::test`), byte for byte: `--show-mappings` lines
//! (`CRUSH rule R x X [a,b,c]`), `--show-statistics` / `--show-utilization` summaries and
//! `--show-bad-mappings`.
//!
//! Semantics kept from crushtool: every device present in some bucket weighs 0x10000, others 0;
//! `--weight d w` sets device d to `(int)(w * 0x10000)` clamped to [0, 0x10000]; `--pool-id p`
//! maps `crush_hash32_2(x, p)` instead of `x`; choose_args set 0 is used, else set -1, else none;
//! utilization "expected" figures are computed in `float` as crushtool does.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Write};

use crate::hash::crush_hash32_2;
use crate::map::{CrushMap, RuleStep, ITEM_NONE};
use crate::mapper::Mapper;

/// What to test and print; defaults are crushtool's.
#[derive(Debug, Clone, Default)]
pub struct TestConfig {
    /// `--rule R`: only this rule (default: every rule).
    pub rule: Option<i32>,
    /// `--num-rep N` (or `--min-rep`/`--max-rep`): replica counts to try; default: each rule's
    /// min_size..=max_size.
    pub num_rep: Option<(i32, i32)>,
    /// `--min-x` / `--max-x`, inclusive; default 0..=1023 (crushtool's, used when either is
    /// negative or absent).
    pub x_range: Option<(i32, i32)>,
    /// `--weight DEV W`: device reweights as given (0.0..=1.0).
    pub device_weights: BTreeMap<i32, f32>,
    /// `--pool-id P`: hash inputs with the pool id, as PG placement seeds are.
    pub pool_id: Option<i32>,
    /// `--show-mappings`.
    pub show_mappings: bool,
    /// `--show-statistics`.
    pub show_statistics: bool,
    /// `--show-utilization` (implies statistics, as in crushtool).
    pub show_utilization: bool,
    /// `--show-utilization-all` (implies statistics).
    pub show_utilization_all: bool,
    /// `--show-bad-mappings`: results shorter than num_rep or holding ITEM_NONE.
    pub show_bad_mappings: bool,
}

/// crushtool's `set_device_weight`: `(int)(w * 0x10000)` in float, clamped to [0, 0x10000].
pub fn device_weight_16_16(weight: f32) -> u32 {
    let scaled = (weight * 65536.0_f32) as i32;
    scaled.clamp(0, 0x10000) as u32
}

/// The device weight vector crushtool maps with: index = device id, `max_devices` long.
pub fn device_weights(map: &CrushMap, overrides: &BTreeMap<i32, f32>) -> Vec<u32> {
    let mut present = vec![false; usize::try_from(map.max_devices).unwrap_or(0)];
    for bucket in map.iter_buckets() {
        for &item in &bucket.items {
            if let Some(slot) = usize::try_from(item).ok().and_then(|i| present.get_mut(i)) {
                *slot = true;
            }
        }
    }
    present
        .iter()
        .enumerate()
        .map(
            |(device, &is_present)| match overrides.get(&(device as i32)) {
                Some(&w) => device_weight_16_16(w),
                None if is_present => 0x10000,
                None => 0,
            },
        )
        .collect()
}

/// crushtool's choice of choose_args for `--test`: set 0, else the default set -1, else none.
pub fn test_choose_args(map: &CrushMap) -> Option<&crate::map::ChooseArgMap> {
    map.choose_args.get(&0).or_else(|| map.choose_args.get(&-1))
}

/// Run `crushtool --test` on `map` and write to `out` what crushtool writes to stdout.
pub fn run(map: &CrushMap, config: &TestConfig, out: &mut dyn Write) -> io::Result<()> {
    run_split(map, config, out, &mut io::sink())
}

/// [`run`], also writing to `err` what crushtool writes to stderr (the weight vector of
/// `--show-utilization-all`).
pub fn run_split(
    map: &CrushMap,
    config: &TestConfig,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> io::Result<()> {
    let statistics =
        config.show_statistics || config.show_utilization || config.show_utilization_all;
    let max_rules = map.rules.len() as i32;
    let (min_rule, max_rule) = match config.rule {
        Some(r) if r >= 0 => (r, r),
        _ => (0, max_rules - 1),
    };
    let (min_x, max_x) = match config.x_range {
        Some((a, b)) if a >= 0 && b >= 0 => (a, b),
        _ => (0, 1023),
    };
    let weights = device_weights(map, &config.device_weights);
    if config.show_utilization_all {
        let hex: Vec<String> = weights.iter().map(|w| format!("{w:x}")).collect();
        writeln!(err, "devices weights (hex): [{}]", hex.join(","))?;
    }
    let mut mapper = Mapper::new(map, test_choose_args(map));
    let mut result = Vec::new();
    let mut line = String::new();
    let mut rule_id = min_rule;
    while rule_id < max_rules && rule_id <= max_rule {
        let r = rule_id;
        rule_id += 1;
        let Some(rule) = map.rule(r as usize) else {
            if statistics {
                writeln!(out, "rule {r} dne")?;
            }
            continue;
        };
        let name = map.rule_names.get(&r).map_or("", String::as_str);
        let (min_rep, max_rep) = match config.num_rep {
            Some((a, b)) if a >= 0 && b >= 0 => (a, b),
            _ => (i32::from(rule.min_size), i32::from(rule.max_size)),
        };
        if statistics {
            writeln!(
                out,
                "rule {r} ({name}), x = {min_x}..{max_x}, numrep = {min_rep}..{max_rep}"
            )?;
        }
        for nr in min_rep..=max_rep {
            let mut per = vec![0_i64; weights.len()];
            let mut sizes: BTreeMap<usize, i64> = BTreeMap::new();
            let num_objects = max_x - min_x + 1;
            let total_weight = weights.iter().fold(0_i32, |s, &w| s.wrapping_add(w as i32));
            if total_weight == 0 {
                continue;
            }
            let expected_objects = (nr
                .min(maximum_affected_by_rule(map, r))
                .wrapping_mul(num_objects)) as f32;
            let result_max = usize::try_from(nr).unwrap_or(0);
            for x in min_x..=max_x {
                let input = match config.pool_id {
                    Some(pool) => crush_hash32_2(x as u32, pool as u32),
                    None => x as u32,
                };
                mapper.do_rule_into(r as usize, input, result_max, &weights, &mut result);
                line.clear();
                if config.show_mappings || config.show_bad_mappings {
                    line.push('[');
                    for (i, item) in result.iter().enumerate() {
                        let _ = write!(line, "{}{item}", if i == 0 { "" } else { "," });
                    }
                    line.push(']');
                }
                if config.show_mappings {
                    writeln!(out, "CRUSH rule {r} x {x} {line}")?;
                }
                let mut has_none = false;
                for &item in &result {
                    if item == ITEM_NONE {
                        has_none = true;
                    } else if let Some(count) =
                        usize::try_from(item).ok().and_then(|i| per.get_mut(i))
                    {
                        *count += 1;
                    }
                }
                *sizes.entry(result.len()).or_default() += 1;
                if config.show_bad_mappings && (result.len() != result_max || has_none) {
                    writeln!(out, "bad mapping rule {r} x {x} num_rep {nr} result {line}")?;
                }
            }
            if statistics {
                for (size, count) in &sizes {
                    writeln!(
                        out,
                        "rule {r} ({name}) num_rep {nr} result size == {size}:\t{count}/{num_objects}"
                    )?;
                }
                for (device, (&stored, &weight)) in per.iter().zip(&weights).enumerate() {
                    let proportional = weight as f32 / total_weight as f32;
                    let expected = proportional * expected_objects;
                    let show = if config.show_utilization {
                        expected > 0.0 && stored > 0
                    } else {
                        config.show_utilization_all
                    };
                    if show {
                        writeln!(
                            out,
                            "  device {device}:\t\t stored : {stored}\t expected : {}",
                            format_float(expected)
                        )?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// crushtool's `get_maximum_affected_by_rule`: the fewest buckets of any type a rule's choose
/// steps name (capped by the requested count), else max(max_buckets, max_devices). Quirks kept:
/// every step with opcode >= 2 except emit counts (set_* steps count as type 0), a type named
/// twice is counted twice, and buckets are counted through the name map (shadow buckets too).
pub fn maximum_affected_by_rule(map: &CrushMap, rule_id: i32) -> i32 {
    let Some(rule) = map.rule(rule_id as usize) else {
        return 0;
    };
    let mut affected_types = Vec::new();
    let mut replications_by_type: BTreeMap<i32, i32> = BTreeMap::new();
    for step in &rule.steps {
        let (op, arg1, arg2) = step.to_raw();
        if op >= 2 && op != RuleStep::OP_EMIT {
            affected_types.push(arg2);
            replications_by_type.insert(arg2, arg1);
        }
    }
    let mut max_of_type: BTreeMap<i32, i32> = BTreeMap::new();
    for &type_id in &affected_types {
        for &id in map.item_names.keys() {
            // Ceph's get_bucket_type: -ENOENT (never a type) for devices and missing buckets.
            let bucket_type = map.bucket(id).map_or(-2, |b| i32::from(b.type_id));
            if bucket_type == type_id {
                *max_of_type.entry(type_id).or_default() += 1;
            }
        }
    }
    for &type_id in &affected_types {
        let wanted = replications_by_type.get(&type_id).copied().unwrap_or(0);
        let have = max_of_type.entry(type_id).or_default();
        if wanted > 0 && wanted < *have {
            *have = wanted;
        }
    }
    let mut max_affected = (map.buckets.len() as i32).max(map.max_devices);
    for &type_id in &affected_types {
        let have = max_of_type.get(&type_id).copied().unwrap_or(0);
        if have > 0 && have < max_affected {
            max_affected = have;
        }
    }
    max_affected
}

/// A float as C++ `ostream << float` prints it: `%g` with 6 significant digits.
pub fn format_float(value: f32) -> String {
    let v = f64::from(value);
    if v == 0.0 {
        return "0".to_string();
    }
    if !v.is_finite() {
        return if v.is_nan() {
            "nan".into()
        } else if v > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    // Round to 6 significant digits first; the exponent after rounding picks the style.
    let scientific = format!("{v:.5e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if !(-4..6).contains(&exponent) {
        let mantissa = trim_zeros(mantissa);
        let sign = if exponent < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exponent.abs());
    }
    let decimals = (5 - exponent).max(0) as usize;
    trim_zeros(&format!("{v:.decimals$}")).to_string()
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_like_ostream() {
        assert_eq!(format_float(5.555_556), "5.55556");
        assert_eq!(format_float(18.75), "18.75");
        assert_eq!(format_float(0.9375), "0.9375");
        assert_eq!(format_float(3.0), "3");
        assert_eq!(format_float(1_875.0), "1875");
        assert_eq!(format_float(1_234_567.0), "1.23457e+06");
        assert_eq!(format_float(999_999.5), "1e+06");
        assert_eq!(format_float(0.000_012_5), "1.25e-05");
    }

    #[test]
    fn reweights_truncate_and_clamp() {
        assert_eq!(device_weight_16_16(0.3), 19_660);
        assert_eq!(device_weight_16_16(0.7), 45_875);
        assert_eq!(device_weight_16_16(1.5), 0x10000);
        assert_eq!(device_weight_16_16(-1.0), 0);
    }
}
