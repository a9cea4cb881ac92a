//! Ceph 16.2 golden vectors: every PG of the fixture osdmaps must map exactly as `osdmaptool`
//! mapped it (fixtures/crush-vectors/osdmap, see its README).

use osdmap::{OsdMap, PgId};

const DIR: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../fixtures/crush-vectors/osdmap"
);

fn load(name: &str) -> OsdMap {
    let bytes = std::fs::read(format!("{DIR}/{name}")).expect("fixture readable");
    OsdMap::decode(&bytes).expect("fixture decodes")
}

fn read(name: &str) -> String {
    std::fs::read_to_string(format!("{DIR}/{name}")).expect("fixture readable")
}

fn parse_osds(text: &str) -> Vec<i32> {
    let inner = text.trim().trim_start_matches('[').trim_end_matches(']');
    if inner.is_empty() {
        return Vec::new();
    }
    inner
        .split(',')
        .map(|s| s.trim().parse().expect("osd id"))
        .collect()
}

/// `pgid \t [osds] \t primary` lines (`--test-map-pgs-dump`); returns rows matched / total.
fn check_pgs_tsv(map: &OsdMap, tsv: &str) -> (usize, usize) {
    let mut matched = 0;
    let mut total = 0;
    for line in tsv.lines().filter(|l| !l.is_empty()) {
        let mut fields = line.split('\t');
        let pg: PgId = fields.next().and_then(|s| s.parse().ok()).expect("pgid");
        let osds = parse_osds(fields.next().expect("osds"));
        let primary: i32 = fields.next().and_then(|s| s.parse().ok()).expect("primary");
        let m = map.pg_to_up_acting(pg);
        total += 1;
        if m.acting == osds && m.acting_primary == primary {
            matched += 1;
        } else if total - matched <= 5 {
            eprintln!(
                "{pg}: expected {osds:?} p{primary}, got {:?} p{}",
                m.acting, m.acting_primary
            );
        }
    }
    (matched, total)
}

#[test]
fn pool1_pg2048_all_pgs_match_osdmaptool() {
    let map = load("om_c5x12_pool1_pg2048.bin");
    let (matched, total) = check_pgs_tsv(&map, &read("om_c5x12_pool1_pg2048.pgs.tsv"));
    assert_eq!((matched, total), (2048, 2048));
}

#[test]
fn pool1_pg1920_pgp960_all_pgs_match_osdmaptool() {
    let map = load("om_c5x12_pool1_pg1920_pgp960.bin");
    let (matched, total) = check_pgs_tsv(&map, &read("om_c5x12_pool1_pg1920_pgp960.pgs.tsv"));
    assert_eq!((matched, total), (1920, 1920));
}

#[test]
fn pool1_pg1920_objects_map_to_osdmaptools_osds() {
    let map = load("om_c5x12_pool1_pg1920_pgp960.bin");
    let text = read("om_c5x12_pool1_pg1920_pgp960.objects.txt");
    let mut checked = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let rest = line
            .trim_start()
            .strip_prefix("object '")
            .expect("object line");
        let (name, rest) = rest.split_once("' -> ").expect("name");
        let (pg, osds) = rest.split_once(" -> ").expect("pg");
        let pg: PgId = pg.parse().expect("pgid");
        assert_eq!(map.object_to_pg(1, name).expect("pool 1"), pg, "{name}");
        assert_eq!(map.pg_to_up_acting(pg).acting, parse_osds(osds), "{name}");
        checked += 1;
    }
    assert_eq!(checked, 200);
}

#[test]
fn upmap_items_fixture_raw_up_acting_match_osdmaptool() {
    let map = load("om_c5x12_pool1_pg2048_upmap_dev1.bin");
    assert_eq!(map.pg_upmap_items().len(), 240);
    let text = read("om_c5x12_pool1_pg2048_upmap_dev1.pgs_raw_up_acting.txt");
    let mut matched = 0;
    let mut total = 0;
    for line in text.lines().filter(|l| !l.is_empty()) {
        let pg: PgId = line
            .split(' ')
            .next()
            .and_then(|s| s.parse().ok())
            .expect("pgid");
        let m = map.pg_to_up_acting(pg);
        let ours = osdmap::tool::format::osd_list(&m.raw);
        let expected_line = format!(
            "{pg} raw ({ours}, p{}) up ({}, p{}) acting ({}, p{})",
            m.raw_primary,
            osdmap::tool::format::osd_list(&m.up),
            m.up_primary,
            osdmap::tool::format::osd_list(&m.acting),
            m.acting_primary
        );
        total += 1;
        if expected_line == line {
            matched += 1;
        } else if total - matched <= 5 {
            eprintln!("want {line}\n got {expected_line}");
        }
    }
    assert_eq!((matched, total), (2048, 2048));
}

#[test]
fn pgs_dump_text_matches_osdmaptool_stdout() {
    let map = load("om_c5x12_pool1_pg2048.bin");
    let ours = osdmap::tool::test_map_pgs(&map, Some(1), osdmap::tool::PgListing::Acting)
        .expect("pool 1 exists");
    let pg_lines: Vec<&str> = ours.lines().skip(1).take(2048).collect();
    let expected: Vec<&str> = read("om_c5x12_pool1_pg2048.pgs.tsv")
        .leak()
        .lines()
        .collect();
    assert_eq!(pg_lines, expected);
    assert!(ours.starts_with("pool 1 pg_num 2048\n"));
    assert!(ours.contains("#osd\tcount\tfirst\tprimary\tc wt\twt\n"));
}
