//! Validation against libCacheSim's reference miss ratios (../shared/reference/cache-policies.md):
//! with 1 block = 1 object, LRU, ARC, S3-FIFO, W-TinyLFU, SIEVE, LIRS and Belady must agree within
//! 0.005 at every listed size. cloudPhysicsIO ships as a fixture; OLTP and P12 are read from
//! `$STRATA_SHARED` (default `../shared` beside the workspace) by ignored tests.

use sim::{sweep, CacheSize, RunOptions, SweepPlan, Trace};
use std::path::{Path, PathBuf};

const TOLERANCE: f64 = 0.005;
const POLICIES: [&str; 7] = [
    "lru", "arc", "s3fifo", "wtinylfu", "sieve", "lirs", "belady",
];

/// Reference rows: size (% of unique objects) and miss ratios in `POLICIES` order.
type Reference = [(f64, [f64; 7]); 3];

const CLOUD_PHYSICS: [(f64, [f64; 7]); 4] = [
    (
        1.0,
        [0.8380, 0.8275, 0.8304, 0.8473, 0.8292, 0.8315, 0.7927],
    ),
    (
        5.0,
        [0.8246, 0.8114, 0.8026, 0.8210, 0.8172, 0.8138, 0.7032],
    ),
    (
        10.0,
        [0.8049, 0.7728, 0.7525, 0.7761, 0.7907, 0.7518, 0.6290],
    ),
    (
        20.0,
        [0.7249, 0.7026, 0.6780, 0.6881, 0.7162, 0.6559, 0.5449],
    ),
];
const OLTP: Reference = [
    (
        1.0,
        [0.5837, 0.5460, 0.5353, 0.6305, 0.5971, 0.5837, 0.4024],
    ),
    (
        5.0,
        [0.3992, 0.3901, 0.3789, 0.4159, 0.4001, 0.4035, 0.2736],
    ),
    (
        10.0,
        [0.3348, 0.3273, 0.3222, 0.3619, 0.3334, 0.3434, 0.2379],
    ),
];
const P12: Reference = [
    (
        1.0,
        [0.9121, 0.8447, 0.8243, 0.8261, 0.8582, 0.8510, 0.6985],
    ),
    (
        5.0,
        [0.6451, 0.5715, 0.5502, 0.5471, 0.6000, 0.5623, 0.4184],
    ),
    (
        10.0,
        [0.4750, 0.4322, 0.4235, 0.4546, 0.4579, 0.4353, 0.3208],
    ),
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn shared() -> PathBuf {
    std::env::var_os("STRATA_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("../shared"))
}

fn check(trace: &Trace, rows: &[(f64, [f64; 7])]) {
    let plan = SweepPlan {
        policies: POLICIES.iter().map(|p| p.to_string()).collect(),
        sizes: rows.iter().map(|&(p, _)| CacheSize::Percent(p)).collect(),
        thresholds: vec![1.0],
        smoothings: vec![0.5],
        period: policy::hottable::Period::Requests(10_000),
        options: RunOptions::default(),
        seed: 42,
        jobs: 2,
        progress: false,
    };
    let results = sweep::run(trace, &plan).unwrap_or_else(|e| panic!("{e:#}"));
    let mut failures = Vec::new();
    for (p, policy) in POLICIES.iter().enumerate() {
        for (s, &(percent, expected)) in rows.iter().enumerate() {
            let result = &results[p * rows.len() + s];
            assert_eq!(result.policy, *policy);
            let delta = (result.miss_ratio - expected[p]).abs();
            eprintln!(
                "{} {policy:>9} {percent:>4}%: ours {:.4} reference {:.4}",
                trace.name, result.miss_ratio, expected[p]
            );
            if delta > TOLERANCE {
                failures.push(format!(
                    "{policy} at {percent}%: {:.4} vs {:.4}",
                    result.miss_ratio, expected[p]
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("; "));
}

#[test]
fn cloudphysics_matches_reference() {
    let path = workspace().join("fixtures/traces/cloudPhysicsIO.csv.zst");
    let trace = sim::load(&path, None, None, None).unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!((trace.requests.len(), trace.unique), (113_872, 48_974));
    check(&trace, &CLOUD_PHYSICS);
}

#[test]
#[ignore = "reads ../shared/data/traces/arc/OLTP.lis.zst (914k requests)"]
fn oltp_matches_reference() {
    let trace = sim::load(
        &shared().join("data/traces/arc/OLTP.lis.zst"),
        None,
        None,
        None,
    )
    .unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!((trace.requests.len(), trace.unique), (914_145, 186_880));
    check(&trace, &OLTP);
}

#[test]
#[ignore = "reads ../shared/data/traces/arc/P12.lis.zst (13M requests, about a minute)"]
fn p12_matches_reference() {
    let trace = sim::load(
        &shared().join("data/traces/arc/P12.lis.zst"),
        None,
        None,
        None,
    )
    .unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(
        (trace.requests.len(), trace.unique),
        (13_208_930, 3_153_310)
    );
    check(&trace, &P12);
}

#[test]
fn every_fixture_format_loads() {
    let dir = workspace().join("fixtures/traces");
    for (file, requests) in [
        ("cloudPhysicsIO-head.vscsi", 2048),
        ("OLTP-head.lis.zst", 20_000),
        ("msr-cambridge1-sample.csv", 2473),
        ("systor17-traces-sample.csv.gz", 10_466),
        ("cloud_storage-sample.bz2", 378_253),
        ("cloud_photos-sample.bz2", 10_000),
        ("request.trace.xz", 66_987),
    ] {
        let trace = sim::load(&dir.join(file), None, None, None)
            .unwrap_or_else(|e| panic!("{file}: {e:#}"));
        assert_eq!(trace.requests.len(), requests, "{file}");
        assert!(trace.unique > 0 && trace.unique <= requests, "{file}");
    }
}
