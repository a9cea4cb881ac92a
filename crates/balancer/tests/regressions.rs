//! Named regressions from the review of `strata balance` (each failed before its fix).

use std::collections::BTreeSet;
use std::path::PathBuf;

use balancer::balance::check_plan;
use balancer::cluster::from_osdmap;
use balancer::{balance, set_aside, BalanceConfig, BalancerError, Problem};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn problem_of(name: &str) -> Problem {
    let bytes = std::fs::read(fixture(name)).unwrap_or_default();
    let map = osdmap::OsdMap::decode(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
    let (problem, skipped) = from_osdmap(&map, &[]);
    assert!(skipped.is_empty(), "{skipped:?}");
    problem
}

/// Review finding 1: hosts h0 and h3 sit in rack r0/r1 under root `default` and also in root
/// `other`. The rule takes `default` and separates racks, so every PG must keep its three
/// shards in three racks (rack = osd / 6 in this map), as Ceph's verify_upmap requires.
#[test]
fn a_host_in_two_roots_keeps_the_rule_s_rack_separation() {
    let problem = problem_of("om_two_parents.bin");
    let plan = balance(&problem, &BalanceConfig::default()).expect("balance");
    check_plan(&problem, &plan).expect("valid plan");
    assert!(plan.moved_after > 0, "the map needs balancing");
    for (pg, up) in &plan.up {
        let racks: BTreeSet<i32> = up.iter().map(|o| o / 6).collect();
        assert_eq!(racks.len(), up.len(), "pg {pg}: {up:?} shares a rack");
    }
}

/// Review finding 4: `pg_upmap 1.0 [0,1,3]` puts two shards in host 0 (the rule allows one).
/// The balancer failed with "internal error: aggregate decomposition failed"; now 1.0 is set
/// aside with the reason, the other PGs are balanced, and `balance` given the PG says why.
#[test]
fn a_pg_upmap_over_the_rule_is_set_aside_and_the_rest_balanced() {
    let problem = problem_of("om_pg_upmap_two_in_host.bin");
    match balance(&problem, &BalanceConfig::default()) {
        Err(BalancerError::Invalid(message)) => {
            assert!(message.contains("pg_upmap 1.0"), "{message}")
        }
        other => panic!("expected an Invalid error naming pg_upmap 1.0, got {other:?}"),
    }
    let (movable, aside) = set_aside(&problem);
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert_eq!(aside[0].pg.to_string(), "1.0");
    assert!(
        aside[0].reason.contains("2 shards under bucket"),
        "{}",
        aside[0].reason
    );
    assert_eq!(movable.pgs.len(), problem.pgs.len() - 1);
    let plan = balance(&movable, &BalanceConfig::default()).expect("balance the rest");
    check_plan(&movable, &plan).expect("valid plan");
}

/// Review finding 5: a pg_upmap naming an OSD twice refused the whole run, blaming the "raw
/// set". Now the PG is set aside naming its pg_upmap entry, and the rest is balanced.
#[test]
fn a_pg_upmap_repeating_an_osd_is_set_aside_naming_the_entry() {
    let mut problem = problem_of("om_pg_upmap_two_in_host.bin");
    let pg = problem.pgs.iter_mut().find(|p| p.id.to_string() == "1.1");
    let pg = pg.expect("pg 1.1");
    pg.raw = vec![0, 0, 4];
    pg.from_pg_upmap = true;
    let (movable, aside) = set_aside(&problem);
    let reasons: Vec<&str> = aside.iter().map(|a| a.reason.as_str()).collect();
    assert!(
        reasons.contains(&"pg_upmap 1.1 [0, 0, 4] names osd.0 twice"),
        "{reasons:?}"
    );
    let plan = balance(&movable, &BalanceConfig::default()).expect("balance the rest");
    check_plan(&movable, &plan).expect("valid plan");
}
