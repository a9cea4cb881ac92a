//! Down / out / reweighted OSDs, primary affinity and the exception tables, applied to a decoded
//! map in code, must map as osdmaptool mapped the same edits (fixtures/osdmap/om_states.bin was
//! made from the base map with exactly these edits; its expected text came from osdmaptool).
//! Also: the JSON input (`ceph osd dump --format json` + crushmap) maps like the binary one.

use osdmap::tool::{self, PgListing};
use osdmap::{OsdMap, PgId};

const VECTORS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../fixtures/crush-vectors/osdmap"
);
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/osdmap");
const JSON: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/osdmap-json");

fn read(path: &str) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn pg(text: &str) -> PgId {
    text.parse().expect("pgid")
}

/// The edits of make_fixtures.sh's om_states.bin, through the public mutators.
fn edited_base() -> OsdMap {
    let bytes = read(&format!("{VECTORS}/om_c5x12_pool1_pg1920_pgp960.bin"));
    let mut map = OsdMap::decode(&bytes).expect("base decodes");
    map.set_osd_up(3, false);
    map.set_osd_up(17, false);
    map.set_osd_weight(8, 0);
    map.set_osd_weight(22, 0x8000);
    map.set_osd_weight(30, 6554);
    for (osd, affinity) in [(5, 0), (12, 0x4000), (40, 0x8000), (41, 0), (56, 0xc000)] {
        map.set_primary_affinity(osd, affinity);
    }
    map.set_pg_temp(pg("1.0"), vec![1, 2, 3]);
    map.set_pg_temp(pg("1.5"), vec![10, 20]);
    map.set_pg_temp(pg("1.6"), vec![3, 17]);
    map.set_primary_temp(pg("1.5"), Some(20));
    map.set_primary_temp(pg("1.7"), Some(44));
    map.set_pg_upmap(pg("1.9"), Some(vec![0, 13, 26]));
    map.set_pg_upmap(pg("1.a"), Some(vec![8, 13, 26]));
    map.set_pg_upmap(pg("1.b"), Some(vec![3, 13, 26]));
    map.set_pg_upmap_items(pg("1.c"), Some(vec![(0, 2)]));
    map.set_pg_upmap_items(pg("1.d"), Some(vec![(34, 8)]));
    map.set_pg_upmap_items(pg("1.e"), Some(vec![(52, 50), (34, 36)]));
    map.set_pg_upmap_items(pg("1.9"), Some(vec![(13, 14)]));
    map.set_pg_upmap_items(pg("1.a"), Some(vec![(13, 15)]));
    map
}

fn expected_dump_all(name: &str) -> String {
    let path = format!("{FIXTURES}/{name}.pgs_dump_all.txt");
    String::from_utf8(read(&path)).expect("utf-8")
}

/// Rows of `--test-map-pgs-dump-all` that match, of all PG rows.
fn matched_rows(ours: &str, theirs: &str) -> (usize, usize) {
    let is_row = |l: &&str| l.contains(" raw (");
    let a: Vec<&str> = ours.lines().filter(is_row).collect();
    let b: Vec<&str> = theirs.lines().filter(is_row).collect();
    assert_eq!(a.len(), b.len());
    let matched = a.iter().zip(&b).filter(|(x, y)| x == y).count();
    for (x, y) in a.iter().zip(&b).filter(|(x, y)| x != y).take(5) {
        eprintln!("ours   {x}\ntheirs {y}");
    }
    (matched, b.len())
}

#[test]
fn edits_in_code_map_like_osdmaptool() {
    let map = edited_base();
    let ours = tool::test_map_pgs(&map, None, PgListing::All).expect("maps");
    let theirs = expected_dump_all("om_states");
    assert_eq!(matched_rows(&ours, &theirs), (1920, 1920));
    // The statistics too (same per-OSD counts, weights and summary lines).
    assert_eq!(ours, theirs);
}

#[test]
fn specific_rules_hold() {
    let map = edited_base();
    // pg_upmap with a target marked out (osd.8) is ignored whole, its items (13 -> 15) too:
    // up is CRUSH's raw set minus down OSDs.
    let m = map.pg_to_up_acting(pg("1.a"));
    let raw_up: Vec<i32> = m
        .raw
        .iter()
        .copied()
        .filter(|&osd| map.is_up(osd))
        .collect();
    assert_eq!(m.up, raw_up);
    assert!(!m.up.contains(&15) || m.raw.contains(&15));
    // pg_upmap_items to a marked-out OSD is ignored.
    let m = map.pg_to_up_acting(pg("1.d"));
    assert!(!m.up.contains(&8));
    // pg_upmap then items: [0,13,26] with 13 -> 14.
    assert_eq!(map.pg_to_up_acting(pg("1.9")).up, vec![0, 14, 26]);
    // pg_temp drops down OSDs; primary_temp wins.
    let m = map.pg_to_up_acting(pg("1.5"));
    assert_eq!(
        (m.acting.as_slice(), m.acting_primary),
        ([10, 20].as_slice(), 20)
    );
    let m = map.pg_to_up_acting(pg("1.6"));
    assert!(m.acting == m.up, "an all-down pg_temp falls back to up");
}

#[test]
fn erasure_pool_keeps_positions() {
    let map = OsdMap::decode(&read(&format!("{FIXTURES}/om_ec.bin"))).expect("decodes");
    let ours = tool::test_map_pgs(&map, None, PgListing::All).expect("maps");
    let theirs = expected_dump_all("om_ec");
    assert_eq!(matched_rows(&ours, &theirs), (3840, 3840));
    let m = map.pg_to_up_acting(pg("2.0"));
    assert_eq!(m.up.len(), 4);
    assert_eq!(m.acting, vec![osdmap::ITEM_NONE, 4, 5, 6]);
}

#[test]
fn dump_json_input_maps_like_the_binary_map() {
    for name in ["om_states", "om_ec"] {
        let json = String::from_utf8(read(&format!("{JSON}/{name}.dump.json"))).expect("utf-8");
        let crush = read(&format!("{JSON}/{name}.crush.bin"));
        let from_json = OsdMap::from_dump_json(&json, &crush).expect("json decodes");
        let binary = OsdMap::decode(&read(&format!("{FIXTURES}/{name}.bin"))).expect("decodes");
        assert_eq!(from_json.pools().len(), binary.pools().len());
        assert_eq!(
            from_json.pg_upmap_items(),
            binary.pg_upmap_items(),
            "{name}"
        );
        assert_eq!(from_json.pg_upmap(), binary.pg_upmap(), "{name}");
        assert_eq!(from_json.pg_temp(), binary.pg_temp(), "{name}");
        assert_eq!(from_json.primary_temp(), binary.primary_temp(), "{name}");
        for osd in 0..binary.max_osd() {
            assert_eq!(
                from_json.osd_weight(osd),
                binary.osd_weight(osd),
                "{name} osd.{osd}"
            );
            assert_eq!(
                from_json.primary_affinity(osd),
                binary.primary_affinity(osd),
                "{name} osd.{osd}"
            );
            assert_eq!(from_json.is_up(osd), binary.is_up(osd), "{name} osd.{osd}");
        }
        let ours = tool::test_map_pgs(&from_json, None, PgListing::All).expect("maps");
        let theirs = expected_dump_all(name);
        let (matched, total) = matched_rows(&ours, &theirs);
        assert_eq!(matched, total, "{name}");
        assert_eq!(ours, theirs, "{name}");
    }
}
