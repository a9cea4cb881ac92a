//! `strata` (our policy) against every other online policy ([`sim::compare`]): cache writes
//! within a third of admit-all LRU's on the cloudPhysicsIO fixture, at most 0.005 above the
//! best other's miss ratio in every cell of that fixture (a tuning trace) and at or below it in
//! most (issue 41's criterion: since LIRS is among the others, it leads at 10% by .0006). The ignored test replays
//! any traces listed in `$STRATA_TRACES` (comma-separated paths) with the policy variants in
//! `$STRATA_VARIANTS` (default `strata`) and prints the scorecard.

use sim::compare::{self, Cell};
use sim::CacheSize;
use std::path::Path;

const SIZES: [CacheSize; 3] = [
    CacheSize::Percent(1.0),
    CacheSize::Percent(5.0),
    CacheSize::Percent(10.0),
];

fn fixture_cells() -> Vec<Cell> {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/traces/cloudPhysicsIO.csv.zst");
    let trace = sim::load(&path, None, None, None).unwrap_or_else(|e| panic!("{e:#}"));
    compare::cells(&trace, &SIZES, &["strata".to_string()], true, 2)
        .unwrap_or_else(|e| panic!("{e:#}"))
}

#[test]
fn strata_on_cloudphysics_writes_a_third_of_lru_and_misses_least() {
    let cells = fixture_cells();
    eprint!("{}", compare::report(&cells));
    let (wins, ties, _) = compare::tally(&cells, 0);
    assert!(
        (wins + ties) * 2 > cells.len(),
        "at or below the best in {wins} + {ties} cells"
    );
    for cell in &cells {
        let score = &cell.scores[0];
        assert!(
            score.writes_per_lru <= 1.0 / 3.0,
            "{} {}: writes/LRU {:.3}",
            cell.trace,
            cell.size_label,
            score.writes_per_lru
        );
        assert!(
            score.margin <= 0.005,
            "{} {}: strata {:.4} vs {} {:.4}",
            cell.trace,
            cell.size_label,
            score.miss_ratio,
            cell.best_other.0,
            cell.best_other.1
        );
    }
}

#[test]
#[ignore = "replays the traces in $STRATA_TRACES"]
fn strata_on_listed_traces() {
    let variants: Vec<String> = std::env::var("STRATA_VARIANTS")
        .unwrap_or_else(|_| "strata".into())
        .split(',')
        .map(str::to_string)
        .collect();
    let paths: Vec<std::path::PathBuf> = std::env::var("STRATA_TRACES")
        .unwrap_or_default()
        .split(',')
        .filter(|p| !p.is_empty())
        .map(Into::into)
        .collect();
    let cells =
        compare::run_all(&paths, false, &SIZES, &variants, 2).unwrap_or_else(|e| panic!("{e:#}"));
    eprint!("{}", compare::report(&cells));
}
