//! Deep scrub: compare every replica of every object of a PG (an xxh3 of data, xattrs, omap;
//! the version), report inconsistencies, and repair them from the authoritative copy: among
//! the replicas that hold the object, the value most agree on; on a tie, the primary's, then
//! the highest version (a replica that cannot be read has no vote).
//!
//! Why a replica without the object has no vote against one that has it: there is no PG log
//! telling a deletion from a loss, and an acknowledged deletion never leaves a copy behind in
//! the acting set (a member that failed it leaves the acting set before the acknowledgement,
//! and an OSD that returns gets its strays removed by recovery before it rejoins). A copy
//! that only a minority holds is therefore an acknowledged write some replicas lost, or an
//! unacknowledged write or deletion that went part of the way, which may go either way. As
//! Ceph's scrub picks its authoritative copy among the shards that have the object, so does
//! this one. Before, "missing" outvoted a present copy: in a pool of size 2 a primary that
//! lost an object (its store reopened without it) made scrub delete the last copy.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use osdmap::PgId;
use rados::RadosError;

use crate::error::{store_to_rados, Result};
use crate::util::collection_name;
use crate::{placement, Inner};

/// One replica that differs from the authoritative copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inconsistency {
    /// The PG (`1.1f`).
    pub pg: String,
    /// The object.
    pub object: String,
    /// The OSD holding the bad copy.
    pub osd: i32,
    /// What is wrong: `missing`, `unexpected`, `differs` (data, xattrs, omap or version),
    /// `unreadable` (checksum or device error).
    pub kind: &'static str,
    /// Whether it was repaired.
    pub repaired: bool,
}

/// What a scrub found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScrubReport {
    /// PGs scrubbed.
    pub pgs: u64,
    /// Objects compared.
    pub objects: u64,
    /// Bad copies found.
    pub inconsistencies: Vec<Inconsistency>,
    /// Objects no replica could read (lost).
    pub lost: Vec<String>,
}

impl ScrubReport {
    fn merge(&mut self, other: ScrubReport) {
        self.pgs += other.pgs;
        self.objects += other.objects;
        self.inconsistencies.extend(other.inconsistencies);
        self.lost.extend(other.lost);
    }

    /// Whether every replica agreed.
    pub fn is_clean(&self) -> bool {
        self.inconsistencies.is_empty() && self.lost.is_empty()
    }
}

/// Scrubs every PG of `pool` (every pool with `None`).
pub(crate) async fn scrub(inner: &Inner, pool: Option<&str>, repair: bool) -> Result<ScrubReport> {
    let map = inner.map();
    let pools: Vec<_> = match pool {
        Some(name) => vec![map
            .pool_by_name(name)
            .ok_or_else(|| RadosError::NotFound(format!("pool {name:?}")))?
            .clone()],
        None => map.pools().values().cloned().collect(),
    };
    let mut report = ScrubReport::default();
    for pool in pools {
        if let Some(profile) = inner.erasure_profile_of(pool.id) {
            for pg in pool.pgs() {
                report.merge(inner.scrub_erasure_pg(pg, &profile, repair).await?);
            }
            continue;
        }
        for pg in pool.pgs() {
            report.merge(scrub_pg(inner, pg, repair).await?);
        }
    }
    Ok(report)
}

/// What one replica holds of an object: its (version, digest), nothing, or unreadable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Copy {
    Missing,
    Present { version: u64, digest: u64 },
}

/// Scrubs one PG under its lock.
pub(crate) async fn scrub_pg(inner: &Inner, pg: PgId, repair: bool) -> Result<ScrubReport> {
    inner.ensure_peered(pg).await;
    let _guard = inner.pg_lock(pg).write().await;
    let map = inner.map();
    let place = placement(&map, pg);
    let collection = collection_name(pg);
    let mut report = ScrubReport {
        pgs: 1,
        ..ScrubReport::default()
    };
    let mut names = BTreeSet::new();
    for &id in &place.acting {
        let osd = inner.osd(id)?;
        names.extend(
            osd.list_all(&collection)
                .await
                .map_err(|e| store_to_rados(id, &e))?,
        );
    }
    let mut lost = BTreeMap::new();
    for name in names {
        report.objects += 1;
        let mut copies: BTreeMap<i32, Option<Copy>> = BTreeMap::new();
        for &id in &place.acting {
            let copy = match inner.osd(id)?.image(&collection, &name).await {
                Ok(Some(image)) => Some(Copy::Present {
                    version: image.version(),
                    digest: image.digest(),
                }),
                Ok(None) => Some(Copy::Missing),
                Err(_) => None,
            };
            copies.insert(id, copy);
        }
        let Some(authoritative) = authoritative(&copies, place.primary()) else {
            lost.insert(name.clone(), 0);
            report.lost.push(name.clone());
            continue;
        };
        let source = copies
            .iter()
            .find(|(_, copy)| **copy == Some(authoritative))
            .map(|(&id, _)| id);
        for (&id, copy) in &copies {
            if *copy == Some(authoritative) {
                continue;
            }
            let kind = match (copy, authoritative) {
                (None, _) => "unreadable",
                (Some(Copy::Missing), _) => "missing",
                (_, Copy::Missing) => "unexpected",
                _ => "differs",
            };
            let mut repaired = false;
            if let (true, Some(source)) = (repair, source) {
                match crate::recovery::copy_object(inner, &collection, &name, source, &[id]).await {
                    Ok(count) => {
                        inner.recovery.add_repaired(count);
                        repaired = true;
                    }
                    Err(error) => tracing::warn!(%error, osd = id, "scrub repair failed"),
                }
            }
            report.inconsistencies.push(Inconsistency {
                pg: collection.clone(),
                object: name.clone(),
                osd: id,
                kind,
                repaired,
            });
        }
    }
    inner.peering.set_unfound(pg, lost);
    if !repair && !report.inconsistencies.is_empty() {
        // Not known clean any more: reads of an object its primary lacks ask the other
        // replicas (instead of answering NotFound while a replica holds it), and recovery
        // repairs the PG, as after a write that failed on a replica.
        inner.mark_dirty(pg);
    }
    Ok(report)
}

/// The copy most readable replicas holding the object agree on; ties go to the primary's, then
/// to the highest version. [`Copy::Missing`] only when every replica was read and none holds
/// it; `None` (lost) when none that could be read holds it and some could not be read.
fn authoritative(copies: &BTreeMap<i32, Option<Copy>>, primary: Option<i32>) -> Option<Copy> {
    let mut votes: BTreeMap<Copy, usize> = BTreeMap::new();
    for copy in copies.values().flatten() {
        if *copy != Copy::Missing {
            *votes.entry(*copy).or_default() += 1;
        }
    }
    let Some(&most) = votes.values().max() else {
        let every_replica_read = copies.values().all(Option::is_some);
        return every_replica_read.then_some(Copy::Missing);
    };
    let primary_copy = primary.and_then(|id| copies.get(&id).copied().flatten());
    if let Some(copy) = primary_copy.filter(|copy| votes.get(copy) == Some(&most)) {
        return Some(copy);
    }
    votes
        .into_iter()
        .filter(|(_, count)| *count == most)
        .map(|(copy, _)| copy)
        .max()
}

/// Where the last scrub's error count is kept, so that a restart does not turn HEALTH_ERR
/// back into HEALTH_OK without a repair.
const ERRORS_FILE: &str = "scrub_errors";

/// Records what `report` leaves wrong (bad copies not repaired, objects lost) as the count
/// `strata status` reports, in memory and in the data directory.
pub(crate) fn record_errors(inner: &Inner, report: &ScrubReport) {
    let unrepaired = report
        .inconsistencies
        .iter()
        .filter(|inconsistency| !inconsistency.repaired)
        .count();
    let count = (unrepaired + report.lost.len()) as u64;
    if count == inner.stats.scrub_errors() {
        return;
    }
    inner.stats.set_scrub_errors(count);
    let path = inner.data_dir.join(ERRORS_FILE);
    if let Err(error) = crate::write_durably(&path, format!("{count}\n").as_bytes()) {
        tracing::warn!(%error, "cannot record the scrub error count");
    }
}

/// The count [`record_errors`] last kept in `data_dir` (0 without one).
pub(crate) fn recorded_errors(data_dir: &std::path::Path) -> u64 {
    std::fs::read_to_string(data_dir.join(ERRORS_FILE))
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(0)
}

/// The periodic scrub task.
pub(crate) async fn run(inner: Arc<Inner>) {
    let interval = Duration::from_secs(inner.config().scrub_interval_s.max(1));
    loop {
        tokio::time::sleep(interval).await;
        if inner.closed.load(Ordering::Acquire) {
            return;
        }
        let result = scrub(&inner, None, true).await;
        if let Ok(report) = &result {
            record_errors(&inner, report);
        }
        match result {
            Ok(report) if !report.is_clean() => {
                tracing::warn!(
                    inconsistencies = report.inconsistencies.len(),
                    lost = report.lost.len(),
                    "periodic scrub found problems"
                );
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "periodic scrub failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn majority_wins_and_ties_go_to_the_primary() {
        let good = Copy::Present {
            version: 5,
            digest: 1,
        };
        let bad = Copy::Present {
            version: 5,
            digest: 2,
        };
        let copies = BTreeMap::from([(0, Some(bad)), (1, Some(good)), (2, Some(good))]);
        assert_eq!(authoritative(&copies, Some(0)), Some(good));
        let tie = BTreeMap::from([(0, Some(bad)), (1, Some(good)), (2, None)]);
        assert_eq!(authoritative(&tie, Some(0)), Some(bad));
        let lost = BTreeMap::from([(0, None), (1, None)]);
        assert_eq!(authoritative(&lost, Some(0)), None);
    }

    #[test]
    fn a_replica_without_the_object_never_outvotes_one_that_has_it() {
        let held = Copy::Present {
            version: 7,
            digest: 3,
        };
        // Two of three lost it, the primary among them: the one copy left wins.
        let copies = BTreeMap::from([
            (0, Some(Copy::Missing)),
            (1, Some(held)),
            (2, Some(Copy::Missing)),
        ]);
        assert_eq!(authoritative(&copies, Some(0)), Some(held));
        // Size 2, the primary lost it: the replica's copy wins the tie.
        let pair = BTreeMap::from([(0, Some(Copy::Missing)), (1, Some(held))]);
        assert_eq!(authoritative(&pair, Some(0)), Some(held));
        // Nobody readable holds it but a replica could not be read: lost, not deleted.
        let unread = BTreeMap::from([(0, Some(Copy::Missing)), (1, None)]);
        assert_eq!(authoritative(&unread, Some(0)), None);
        // Every replica read and none holds it.
        let gone = BTreeMap::from([(0, Some(Copy::Missing)), (1, Some(Copy::Missing))]);
        assert_eq!(authoritative(&gone, Some(0)), Some(Copy::Missing));
    }
}
