//! Issue 38 item 4: the OSD map encoding `strata osd getmap` writes (the `osdmap` crate's
//! encoder, which the embedded backend uses) carries `pg_upmap` and `pg_upmap_items` so that
//! Ceph's own `osdmaptool --print` lists exactly the entries set, here a balancer plan's items
//! plus a full `pg_upmap`. Skips when osdmaptool is not installed.

use std::collections::BTreeSet;
use std::process::Command;

#[test]
fn osdmaptool_lists_the_encoded_upmaps_identically() {
    if Command::new("osdmaptool").arg("--help").output().is_err() {
        eprintln!("skipping: osdmaptool not installed");
        return;
    }
    let fixture = format!(
        "{}/../../fixtures/crush-vectors/osdmap/om_c5x12_pool1_pg2048.bin",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut map =
        osdmap::OsdMap::decode(&std::fs::read(&fixture).expect("fixture")).expect("decode fixture");
    let (problem, skipped) = balancer::cluster::from_osdmap(&map, &[]);
    assert!(skipped.is_empty());
    let plan = balancer::balance(&problem, &balancer::BalanceConfig::default()).expect("plan");
    let mut expected = BTreeSet::new();
    for (pg, items) in plan.items.iter().filter(|(_, items)| !items.is_empty()) {
        map.set_pg_upmap_items(osdmap::PgId::new(pg.pool, pg.seed), Some(items.clone()));
        let flat: Vec<String> = items
            .iter()
            .flat_map(|(from, to)| [from.to_string(), to.to_string()])
            .collect();
        expected.insert(format!("pg_upmap_items {pg} [{}]", flat.join(",")));
    }
    assert!(
        expected.len() > 100,
        "a plan of many items: {}",
        expected.len()
    );
    map.set_pg_upmap(osdmap::PgId::new(1, 0x7ff), Some(vec![0, 13, 26]));
    expected.insert("pg_upmap 1.7ff [0,13,26]".to_string());
    let path =
        std::env::temp_dir().join(format!("strata-upmap-readback-{}.bin", std::process::id()));
    std::fs::write(&path, map.encode()).expect("write map");
    let output = Command::new("osdmaptool")
        .arg(&path)
        .arg("--print")
        .output()
        .expect("osdmaptool");
    let _ = std::fs::remove_file(&path);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let listed: BTreeSet<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|l| l.starts_with("pg_upmap"))
        .map(str::to_string)
        .collect();
    assert_eq!(listed, expected);
}
