//! `crushtool -d`: the text form of a map, byte for byte as Ceph 16.2's
//! `CrushCompiler::decompile` writes it.
//!
//! Buckets are written depth first (children before parents) walking ids -1, -2, ...; shadow
//! buckets (names with '~') are walked but not written, their ids appear as `id -N class C`
//! lines of the bucket they copy. Weights are `%.3f` of `(float)w / (float)0x10000` with `w`
//! read as a signed int, as Ceph does.

use std::collections::BTreeSet;
use std::fmt::Write;

use crate::map::{Bucket, BucketAlgorithm, CrushMap, RuleStep, LEGACY_ALLOWED_BUCKET_ALGS};
use crate::map::{RULE_TYPE_ERASURE, RULE_TYPE_REPLICATED};

/// `print_fixedpoint`.
fn fixed_point(weight: u32) -> String {
    let value = (weight as i32) as f32 / 65536.0_f32;
    format!("{:.3}", f64::from(value))
}

fn type_name(map: &CrushMap, type_id: i32) -> String {
    match map.type_names.get(&type_id) {
        Some(name) => name.clone(),
        None if type_id == 0 => "device".to_string(),
        None => format!("type{type_id}"),
    }
}

fn item_name(map: &CrushMap, item: i32) -> String {
    match map.item_names.get(&item) {
        Some(name) => name.clone(),
        None if item >= 0 => format!("device{item}"),
        None => format!("bucket{}", -1_i64 - i64::from(item)),
    }
}

/// Ceph's `is_valid_crush_name`: shadow names (with '~') are not valid and are not printed.
fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Decompile a map into text, byte-identical to `crushtool -d`.
pub(crate) fn decompile(map: &CrushMap) -> String {
    let mut out = String::new();
    out.push_str("# begin crush map\n");
    tunables(map, &mut out);
    out.push_str("\n# devices\n");
    for (&id, name) in map.item_names.range(0..map.max_devices.max(0)) {
        let _ = write!(out, "device {id} {name}");
        if let Some(class) = map
            .device_classes
            .get(&id)
            .and_then(|c| map.class_names.get(c))
        {
            let _ = write!(out, " class {class}");
        }
        out.push('\n');
    }
    out.push_str("\n# types\n");
    if !map.type_names.is_empty() && !map.type_names.contains_key(&0) {
        out.push_str("type 0 osd\n");
    }
    for (id, name) in map.type_names.range(0..) {
        let _ = writeln!(out, "type {id} {name}");
    }
    out.push_str("\n# buckets\n");
    buckets(map, &mut out);
    out.push_str("\n# rules\n");
    for (id, rule) in map.rules.iter().enumerate() {
        if let Some(rule) = rule {
            write_rule(map, id, rule, &mut out);
        }
    }
    if !map.choose_args.is_empty() {
        out.push_str("\n# choose_args\n");
        let mut keys: Vec<i64> = map.choose_args.keys().copied().collect();
        keys.sort_by_key(|&k| k as u64);
        for key in keys {
            if let Some(args) = map.choose_args.get(&key) {
                let _ = writeln!(out, "choose_args {} {{", key as u64);
                for (&bucket_id, arg) in args.iter().rev() {
                    if arg.ids.is_empty() && arg.weight_set.is_empty() {
                        continue;
                    }
                    let _ = writeln!(out, "  {{\n    bucket_id {bucket_id}");
                    if !arg.weight_set.is_empty() {
                        out.push_str("    weight_set [\n");
                        for weights in &arg.weight_set {
                            out.push_str("      [ ");
                            for &weight in weights {
                                let _ = write!(out, "{} ", fixed_point(weight));
                            }
                            out.push_str("]\n");
                        }
                        out.push_str("    ]\n");
                    }
                    if !arg.ids.is_empty() {
                        out.push_str("    ids [ ");
                        for id in &arg.ids {
                            let _ = write!(out, "{id} ");
                        }
                        out.push_str("]\n");
                    }
                    out.push_str("  }\n");
                }
                out.push_str("}\n");
            }
        }
    }
    out.push_str("\n# end crush map\n");
    out
}

/// Only tunables that differ from the legacy values are written, as C `int`s.
fn tunables(map: &CrushMap, out: &mut String) {
    let t = &map.tunables;
    let lines: [(&str, u32, u32); 8] = [
        ("choose_local_tries", t.choose_local_tries, 2),
        (
            "choose_local_fallback_tries",
            t.choose_local_fallback_tries,
            5,
        ),
        ("choose_total_tries", t.choose_total_tries, 19),
        ("chooseleaf_descend_once", t.chooseleaf_descend_once, 0),
        ("chooseleaf_vary_r", t.chooseleaf_vary_r.into(), 0),
        ("chooseleaf_stable", t.chooseleaf_stable.into(), 0),
        ("straw_calc_version", t.straw_calc_version.into(), 0),
        (
            "allowed_bucket_algs",
            t.allowed_bucket_algs,
            LEGACY_ALLOWED_BUCKET_ALGS,
        ),
    ];
    for (name, value, default) in lines {
        if value != default {
            let _ = writeln!(out, "tunable {name} {}", value as i32);
        }
    }
}

/// Walk ids -1, -2, ... writing each bucket after its children (`decompile_bucket`), with an
/// explicit stack; a bucket met again while in progress (a cycle) is skipped.
fn buckets(map: &CrushMap, out: &mut String) {
    let mut done: BTreeSet<i32> = BTreeSet::new();
    let mut in_progress: BTreeSet<i32> = BTreeSet::new();
    for bucket in map.iter_buckets() {
        if done.contains(&bucket.id) {
            continue;
        }
        // (bucket, index of the next child to visit)
        let mut stack: Vec<(&Bucket, usize)> = vec![(bucket, 0)];
        in_progress.insert(bucket.id);
        while let Some((current, next)) = stack.last_mut() {
            let current: &Bucket = current;
            if let Some(&child) = current.items.get(*next) {
                *next += 1;
                if child < 0 && !done.contains(&child) && !in_progress.contains(&child) {
                    if let Some(child_bucket) = map.bucket(child) {
                        in_progress.insert(child);
                        stack.push((child_bucket, 0));
                    }
                }
                continue;
            }
            write_bucket(map, current, out);
            in_progress.remove(&current.id);
            done.insert(current.id);
            stack.pop();
        }
    }
}

fn write_bucket(map: &CrushMap, bucket: &Bucket, out: &mut String) {
    let id = bucket.id;
    if map
        .item_names
        .get(&id)
        .is_some_and(|name| !is_valid_name(name))
    {
        return;
    }
    let _ = writeln!(
        out,
        "{} {} {{",
        type_name(map, i32::from(bucket.type_id)),
        item_name(map, id)
    );
    let _ = writeln!(out, "\tid {id}\t\t# do not change unnecessarily");
    if let Some(by_class) = map.class_buckets.get(&id) {
        for (class, shadow) in by_class {
            let class_name = map.class_names.get(class).map_or("", String::as_str);
            let _ = writeln!(
                out,
                "\tid {shadow} class {class_name}\t\t# do not change unnecessarily"
            );
        }
    }
    let _ = writeln!(out, "\t# weight {}", fixed_point(bucket.weight));
    let size = bucket.items.len();
    let _ = write!(out, "\talg {}", bucket.algorithm.name());
    let with_positions = match bucket.algorithm {
        BucketAlgorithm::Uniform => {
            let _ = write!(out, "\t# do not change bucket size ({size}) unnecessarily");
            true
        }
        BucketAlgorithm::List => {
            out.push_str("\t# add new items at the end; do not change order unnecessarily");
            false
        }
        BucketAlgorithm::Tree => {
            out.push_str("\t# do not change pos for existing items unnecessarily");
            true
        }
        BucketAlgorithm::Straw | BucketAlgorithm::Straw2 => false,
    };
    out.push('\n');
    let hash_name = if bucket.hash == 0 {
        "rjenkins1"
    } else {
        "unknown"
    };
    let _ = writeln!(out, "\thash {}\t# {hash_name}", bucket.hash);
    for (position, &item) in bucket.items.iter().enumerate() {
        let _ = write!(
            out,
            "\titem {} weight {}",
            item_name(map, item),
            fixed_point(bucket.item_weight(position))
        );
        if with_positions {
            let _ = write!(out, " pos {position}");
        }
        out.push('\n');
    }
    out.push_str("}\n");
}

fn write_rule(map: &CrushMap, id: usize, rule: &crate::map::Rule, out: &mut String) {
    out.push_str("rule ");
    if let Some(name) = i32::try_from(id).ok().and_then(|i| map.rule_names.get(&i)) {
        out.push_str(name);
    }
    out.push_str(" {\n");
    let _ = writeln!(out, "\tid {id}");
    if id != usize::from(rule.ruleset) {
        let _ = writeln!(
            out,
            "\t# WARNING: ruleset {} != id {id}; this will not recompile to the same map",
            rule.ruleset
        );
    }
    match rule.rule_type {
        RULE_TYPE_REPLICATED => out.push_str("\ttype replicated\n"),
        RULE_TYPE_ERASURE => out.push_str("\ttype erasure\n"),
        other => {
            let _ = writeln!(out, "\ttype {other}");
        }
    }
    let _ = writeln!(out, "\tmin_size {}", rule.min_size);
    let _ = writeln!(out, "\tmax_size {}", rule.max_size);
    for step in &rule.steps {
        write_step(map, *step, out);
    }
    out.push_str("}\n");
}

fn write_step(map: &CrushMap, step: RuleStep, out: &mut String) {
    let choose = |out: &mut String, what: &str, count: i32, type_id: i32| {
        let _ = writeln!(
            out,
            "\tstep {what} {count} type {}",
            type_name(map, type_id)
        );
    };
    match step {
        RuleStep::Noop => out.push_str("\tstep noop\n"),
        RuleStep::Take { item } => {
            out.push_str("\tstep take ");
            match split_shadow(map, item) {
                Some((original, class)) => {
                    out.push_str(&item_name(map, original));
                    match map.class_names.get(&class) {
                        Some(name) => {
                            let _ = write!(out, " class {name}");
                        }
                        None => {
                            let _ = write!(out, " # unexpected class {class}");
                        }
                    }
                }
                None => out.push_str(&item_name(map, item)),
            }
            out.push('\n');
        }
        RuleStep::Emit => out.push_str("\tstep emit\n"),
        RuleStep::SetChooseTries(v) => {
            let _ = writeln!(out, "\tstep set_choose_tries {v}");
        }
        RuleStep::SetChooseLocalTries(v) => {
            let _ = writeln!(out, "\tstep set_choose_local_tries {v}");
        }
        RuleStep::SetChooseLocalFallbackTries(v) => {
            let _ = writeln!(out, "\tstep set_choose_local_fallback_tries {v}");
        }
        RuleStep::SetChooseLeafTries(v) => {
            let _ = writeln!(out, "\tstep set_chooseleaf_tries {v}");
        }
        RuleStep::SetChooseLeafVaryR(v) => {
            let _ = writeln!(out, "\tstep set_chooseleaf_vary_r {v}");
        }
        RuleStep::SetChooseLeafStable(v) => {
            let _ = writeln!(out, "\tstep set_chooseleaf_stable {v}");
        }
        RuleStep::ChooseFirstN { count, type_id } => choose(out, "choose firstn", count, type_id),
        RuleStep::ChooseIndep { count, type_id } => choose(out, "choose indep", count, type_id),
        RuleStep::ChooseLeafFirstN { count, type_id } => {
            choose(out, "chooseleaf firstn", count, type_id)
        }
        RuleStep::ChooseLeafIndep { count, type_id } => {
            choose(out, "chooseleaf indep", count, type_id)
        }
    }
}

/// `split_id_class`: a shadow bucket `NAME~CLASS` -> (id of NAME, class id).
fn split_shadow(map: &CrushMap, item: i32) -> Option<(i32, i32)> {
    let name = map.item_names.get(&item)?;
    let (base, class) = name.split_once('~')?;
    let original = map
        .item_names
        .iter()
        .find(|(_, n)| n.as_str() == base)
        .map(|(&id, _)| id)?;
    let class = map
        .class_names
        .iter()
        .find(|(_, n)| n.as_str() == class)
        .map(|(&id, _)| id)?;
    Some((original, class))
}
