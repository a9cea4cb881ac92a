//! Our osdmaptool-compatible text, compared byte for byte with what Ceph 16.2.15's osdmaptool
//! printed for the same maps (fixtures/osdmap, made by its make_fixtures.sh).

use osdmap::tool::{self, PgListing};
use osdmap::OsdMap;

const VECTORS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../fixtures/crush-vectors/osdmap"
);
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/osdmap");

fn load(path: &str) -> OsdMap {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    OsdMap::decode(&bytes).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn expected(name: &str) -> String {
    let path = format!("{FIXTURES}/{name}");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Compare line by line so a failure names the first differing line.
fn assert_same_text(ours: &str, theirs: &str, what: &str) {
    let (a, b): (Vec<&str>, Vec<&str>) = (ours.lines().collect(), theirs.lines().collect());
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_eq!(x, y, "{what}: line {} differs", i + 1);
    }
    assert_eq!(a.len(), b.len(), "{what}: line counts differ");
    assert_eq!(ours, theirs, "{what}: trailing bytes differ");
}

const MAPS: &[(&str, &str)] = &[
    (VECTORS, "om_c5x12_pool1_pg2048"),
    (VECTORS, "om_c5x12_pool1_pg1920_pgp960"),
    (VECTORS, "om_c5x12_pool1_pg2048_upmap_dev1"),
    (FIXTURES, "om_states"),
    (FIXTURES, "om_ec"),
    (FIXTURES, "om_choose_args"),
    (FIXTURES, "om_addrs"),
];

#[test]
fn print_matches_osdmaptool() {
    for (dir, name) in MAPS {
        let map = load(&format!("{dir}/{name}.bin"));
        assert_same_text(
            &tool::print(&map),
            &expected(&format!("{name}.print.txt")),
            name,
        );
    }
}

#[test]
fn test_map_pgs_dump_matches_osdmaptool() {
    for (dir, name) in MAPS {
        let map = load(&format!("{dir}/{name}.bin"));
        let ours = tool::test_map_pgs(&map, None, PgListing::Acting).expect("maps");
        assert_same_text(&ours, &expected(&format!("{name}.pgs_dump.txt")), name);
    }
}

#[test]
fn test_map_pgs_dump_all_and_stats_match_osdmaptool() {
    for name in ["om_states", "om_ec", "om_choose_args"] {
        let map = load(&format!("{FIXTURES}/{name}.bin"));
        let ours = tool::test_map_pgs(&map, None, PgListing::All).expect("maps");
        assert_same_text(&ours, &expected(&format!("{name}.pgs_dump_all.txt")), name);
        let ours = tool::test_map_pgs(&map, Some(1), PgListing::None).expect("pool 1");
        assert_same_text(&ours, &expected(&format!("{name}.pgs_pool1.txt")), name);
    }
    let map = load(&format!("{FIXTURES}/om_ec.bin"));
    let ours = tool::test_map_pgs(&map, Some(2), PgListing::Acting).expect("pool 2");
    assert_same_text(&ours, &expected("om_ec.pgs_dump_pool2.txt"), "om_ec pool 2");
}

#[test]
fn test_map_object_and_pg_match_osdmaptool() {
    let map = load(&format!("{FIXTURES}/om_ec.bin"));
    let mut ours = String::new();
    for i in 0..20 {
        for pool in [1, 2] {
            ours.push_str(
                &tool::test_map_object(&map, &format!("obj_{i}"), Some(pool)).expect("pool"),
            );
        }
    }
    assert_same_text(&ours, &expected("om_ec.objects.txt"), "objects");
    let ours = tool::test_map_pg(&map, "2.0").expect("pgid");
    assert_same_text(&ours, &expected("om_ec.map_pg_2.0.txt"), "map pg");
}
