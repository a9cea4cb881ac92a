//! Seed 000's claim on cloudPhysicsIO (the project's fixture, the whole trace): the hot table
//! beats Ceph's native tier (the faithful `ceph-seed003` model) on hit ratio and on SSD writes
//! at each of the seed's four cache sizes, at a threshold H below one access per period.
//! A deterministic simulation, so the figures are exact; see `RESULTS.md` for the table.

use std::path::PathBuf;

use sim::experiments::seed000_plan;
use sim::sweep;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn the_hot_table_beats_cephs_tier_on_hits_and_ssd_writes_at_every_size() {
    let trace = sim::load(
        &workspace().join("fixtures/traces/cloudPhysicsIO.csv.zst"),
        None,
        None,
        None,
    )
    .unwrap_or_else(|e| panic!("{e:#}"));
    let mut plan = seed000_plan(vec![0.2], vec![0.5], 2);
    plan.policies = vec!["hottable".into(), "ceph".into()];
    plan.progress = false;
    let results = sweep::run(&trace, &plan).unwrap_or_else(|e| panic!("{e:#}"));
    let sizes = plan.sizes.len();
    assert_eq!(results.len(), 2 * sizes);
    for (hot, ceph) in results[..sizes].iter().zip(&results[sizes..]) {
        assert_eq!(
            (hot.policy.as_str(), ceph.policy.as_str()),
            ("hottable", "ceph")
        );
        assert_eq!(hot.cache_size_objects, ceph.cache_size_objects);
        assert!(
            hot.miss_ratio < ceph.miss_ratio && hot.cache_writes < ceph.cache_writes,
            "{} objects: hot table miss {:.4} with {} cache writes, Ceph {:.4} with {}",
            hot.cache_size_objects,
            hot.miss_ratio,
            hot.cache_writes,
            ceph.miss_ratio,
            ceph.cache_writes
        );
    }
}
