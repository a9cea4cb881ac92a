//! The binary codec against Ceph 16.2's own maps: every fixture decodes, re-encodes to the very
//! same bytes, agrees with `crushtool --dump`, and corrupt input never panics the decoder.

use std::path::{Path, PathBuf};

use crush::codec::{decode, encode};
use crush::{CrushError, CrushMap, RuleStep};
use proptest::prelude::*;
use serde_json::Value;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/crush-vectors")
}

fn fixture_maps() -> Vec<(String, Vec<u8>)> {
    let mut maps: Vec<(String, Vec<u8>)> = std::fs::read_dir(fixtures())
        .expect("fixture dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "bin"))
        .map(|p| {
            let name = p.file_stem().expect("stem").to_string_lossy().into_owned();
            (name, std::fs::read(&p).expect("read map"))
        })
        .collect();
    maps.sort();
    assert!(
        maps.len() >= 10,
        "expected the fixture maps, found {}",
        maps.len()
    );
    maps
}

#[test]
fn every_fixture_round_trips_byte_identical() {
    let maps = fixture_maps();
    for (name, bytes) in &maps {
        let map = decode(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(&encode(&map), bytes, "{name}: encode(decode(bin)) != bin");
    }
    println!(
        "codec round trip: {}/{} maps byte-identical",
        maps.len(),
        maps.len()
    );
}

fn step_matches(step: &RuleStep, json: &Value, map: &CrushMap) -> bool {
    let op = json["op"].as_str().unwrap_or_default();
    let num = json["num"].as_i64().unwrap_or(i64::MIN);
    let type_id = |t: &Value| t.as_str().and_then(|n| map.type_id_by_name(n));
    match *step {
        RuleStep::Take { item } => op == "take" && json["item"].as_i64() == Some(i64::from(item)),
        RuleStep::Emit => op == "emit",
        RuleStep::ChooseFirstN { count, type_id: t } => {
            op == "choose_firstn" && num == i64::from(count) && type_id(&json["type"]) == Some(t)
        }
        RuleStep::ChooseIndep { count, type_id: t } => {
            op == "choose_indep" && num == i64::from(count) && type_id(&json["type"]) == Some(t)
        }
        RuleStep::ChooseLeafFirstN { count, type_id: t } => {
            op == "chooseleaf_firstn"
                && num == i64::from(count)
                && type_id(&json["type"]) == Some(t)
        }
        RuleStep::ChooseLeafIndep { count, type_id: t } => {
            op == "chooseleaf_indep" && num == i64::from(count) && type_id(&json["type"]) == Some(t)
        }
        RuleStep::SetChooseTries(n) => op == "set_choose_tries" && num == i64::from(n),
        RuleStep::SetChooseLeafTries(n) => op == "set_chooseleaf_tries" && num == i64::from(n),
        _ => false,
    }
}

/// Structure check against `crushtool --dump` (devices, types, buckets with item weights, rules,
/// tunables, choose_args).
#[test]
fn decoded_maps_agree_with_crushtool_dump() {
    for (name, bytes) in fixture_maps() {
        let map = decode(&bytes).expect("decode");
        let dump: Value = serde_json::from_slice(
            &std::fs::read(fixtures().join(format!("{name}.json"))).expect("json"),
        )
        .expect("parse json");
        for device in dump["devices"].as_array().expect("devices") {
            let id = device["id"].as_i64().expect("id") as i32;
            assert_eq!(
                map.item_names.get(&id).map(String::as_str),
                device["name"].as_str()
            );
        }
        for t in dump["types"].as_array().expect("types") {
            let id = t["type_id"].as_i64().expect("type id") as i32;
            assert_eq!(
                map.type_names.get(&id).map(String::as_str),
                t["name"].as_str()
            );
        }
        let buckets = dump["buckets"].as_array().expect("buckets");
        assert_eq!(
            buckets.len(),
            map.iter_buckets().count(),
            "{name}: bucket count"
        );
        for b in buckets {
            let id = b["id"].as_i64().expect("bucket id") as i32;
            let bucket = map
                .bucket(id)
                .unwrap_or_else(|| panic!("{name}: bucket {id}"));
            assert_eq!(
                map.item_names.get(&id).map(String::as_str),
                b["name"].as_str()
            );
            assert_eq!(
                i64::from(bucket.type_id),
                b["type_id"].as_i64().expect("type")
            );
            assert_eq!(
                i64::from(bucket.weight),
                b["weight"].as_i64().expect("weight")
            );
            assert_eq!(bucket.algorithm.name(), b["alg"].as_str().expect("alg"));
            let items = b["items"].as_array().expect("items");
            assert_eq!(items.len(), bucket.items.len(), "{name}: bucket {id} size");
            for item in items {
                let pos = item["pos"].as_u64().expect("pos") as usize;
                assert_eq!(
                    i64::from(bucket.items[pos]),
                    item["id"].as_i64().expect("item")
                );
                assert_eq!(
                    i64::from(bucket.item_weight(pos)),
                    item["weight"].as_i64().expect("item weight"),
                    "{name}: bucket {id} pos {pos}"
                );
            }
        }
        for r in dump["rules"].as_array().expect("rules") {
            let id = r["rule_id"].as_u64().expect("rule id") as usize;
            let rule = map.rule(id).expect("rule");
            assert_eq!(
                map.rule_names.get(&(id as i32)).map(String::as_str),
                r["rule_name"].as_str()
            );
            assert_eq!(
                i64::from(rule.ruleset),
                r["ruleset"].as_i64().expect("ruleset")
            );
            assert_eq!(i64::from(rule.rule_type), r["type"].as_i64().expect("type"));
            assert_eq!(
                i64::from(rule.min_size),
                r["min_size"].as_i64().expect("min")
            );
            assert_eq!(
                i64::from(rule.max_size),
                r["max_size"].as_i64().expect("max")
            );
            let steps = r["steps"].as_array().expect("steps");
            assert_eq!(steps.len(), rule.steps.len());
            for (step, json) in rule.steps.iter().zip(steps) {
                assert!(
                    step_matches(step, json, &map),
                    "{name}: rule {id}: {step:?} vs {json}"
                );
            }
        }
        let t = &dump["tunables"];
        let tun = &map.tunables;
        for (field, ours) in [
            ("choose_local_tries", tun.choose_local_tries),
            (
                "choose_local_fallback_tries",
                tun.choose_local_fallback_tries,
            ),
            ("choose_total_tries", tun.choose_total_tries),
            ("chooseleaf_descend_once", tun.chooseleaf_descend_once),
            ("chooseleaf_vary_r", tun.chooseleaf_vary_r.into()),
            ("chooseleaf_stable", tun.chooseleaf_stable.into()),
            ("straw_calc_version", tun.straw_calc_version.into()),
            ("allowed_bucket_algs", tun.allowed_bucket_algs),
        ] {
            assert_eq!(Some(u64::from(ours)), t[field].as_u64(), "{name}: {field}");
        }
        let dumped_sets = dump["choose_args"].as_object().expect("choose_args");
        assert_eq!(
            dumped_sets.len(),
            map.choose_args.len(),
            "{name}: choose_args sets"
        );
        for (index, args) in dumped_sets {
            let ours = &map.choose_args[&index.parse::<i64>().expect("index")];
            let args = args.as_array().expect("args");
            assert_eq!(args.len(), ours.len());
            for arg in args {
                let bucket_id = arg["bucket_id"].as_i64().expect("bucket_id") as i32;
                let our = &ours[&bucket_id];
                let sets = arg["weight_set"].as_array().map_or(&[][..], |v| v);
                assert_eq!(sets.len(), our.weight_set.len());
                for (set, our_set) in sets.iter().zip(&our.weight_set) {
                    for (w, &our_w) in set.as_array().expect("weights").iter().zip(our_set) {
                        let w = w.as_f64().expect("weight");
                        // The dump prints 16.16 weights as doubles with limited digits.
                        assert_eq!(
                            (w * 65536.0).round(),
                            f64::from(our_w),
                            "{name}: {bucket_id}"
                        );
                    }
                }
                let ids: Vec<i32> = arg["ids"]
                    .as_array()
                    .map(|v| v.iter().map(|i| i.as_i64().expect("id") as i32).collect())
                    .unwrap_or_default();
                assert_eq!(ids, our.ids);
            }
        }
    }
}

#[test]
fn truncation_anywhere_is_a_named_error() {
    let (_, bytes) = fixture_maps()
        .into_iter()
        .find(|(n, _)| n == "hier3x4_weightset")
        .expect("fixture");
    // Every proper prefix that ends inside a mandatory field must fail cleanly; prefixes that
    // end exactly at an optional trailing section may decode.
    for len in 0..bytes.len() {
        match decode(&bytes[..len]) {
            Ok(map) => assert!(map.validate().is_ok()),
            Err(CrushError::Decode { offset, field, .. }) => {
                assert!(offset <= len, "offset {offset} past the end {len}");
                assert!(!field.is_empty());
            }
            Err(other) => assert!(matches!(other, CrushError::Invalid(_)), "{other}"),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 2000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Random byte edits and truncations of real maps: decode returns an error or a map that
    /// validates (and re-encodes without panicking); it never panics.
    #[test]
    fn mutated_maps_never_panic_the_decoder(
        which in 0usize..10,
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in proptest::option::of(any::<prop::sample::Index>()),
    ) {
        let maps = fixture_maps();
        let (_, original) = &maps[which % maps.len()];
        let mut bytes = original.clone();
        for (at, value) in edits {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        if let Some(cut) = cut {
            bytes.truncate(cut.index(bytes.len() + 1));
        }
        if let Ok(mut map) = decode(&bytes) {
            prop_assert!(map.validate().is_ok());
            let _ = encode(&map);
            // A validated map must map without panicking. Bound the retry budgets first: a
            // corrupt budget of 2^32 tries is legal, merely slow.
            let t = &mut map.tunables;
            t.choose_total_tries = t.choose_total_tries.min(60);
            t.choose_local_tries = t.choose_local_tries.min(5);
            t.choose_local_fallback_tries = t.choose_local_fallback_tries.min(5);
            for rule in map.rules.iter_mut().flatten() {
                for step in &mut rule.steps {
                    if let RuleStep::SetChooseTries(n) | RuleStep::SetChooseLeafTries(n)
                    | RuleStep::SetChooseLocalTries(n) | RuleStep::SetChooseLocalFallbackTries(n) = step {
                        *n = (*n).min(60);
                    }
                    // firstn walks every rank up to the step's count even when each one fails,
                    // as Ceph does: a corrupt count of 2^31 is legal, merely slow.
                    if let RuleStep::ChooseFirstN { count, .. }
                    | RuleStep::ChooseLeafFirstN { count, .. } = step {
                        *count = (*count).min(8);
                    }
                }
            }
            let weights = vec![0x10000_u32; 64];
            let args = map.choose_args.get(&0);
            let mut mapper = crush::mapper::Mapper::new(&map, args);
            let mut out = Vec::new();
            for rule in 0..map.rules.len() {
                for x in 0..8 {
                    mapper.do_rule_into(rule, x, 4, &weights, &mut out);
                    prop_assert!(out.len() <= 4);
                }
            }
        }
    }
}
