//! Peering: after a start, a PG's acting replicas agree on every object's version before the
//! PG serves; OSDs whose metadata log was damaged are refilled from their peers; objects no
//! replica can provide are tracked as unfound.
//!
//! ## Why a version scan, not a PG log
//! Every replica keeps each object's version (`_strata.v`, cluster-wide and monotonic across
//! restarts), so comparing the acting replicas' versions object by object finds what a
//! crash left half-applied, without a second write per operation (a PG log entry) on the
//! write path. What a scan cannot tell is a creation that reached some replicas from a
//! removal that reached the others; here that never matters: an acknowledged write or
//! removal is on every acting replica (a replica that failed it leaves the acting set, durably,
//! before the acknowledgement; an OSD that returns is refilled from the primary, its extra
//! objects removed), so an object the acting replicas disagree on was in flight at the crash,
//! and either outcome is allowed, as an unacknowledged write in Ceph may or may not survive.
//! The newest version any acting replica holds wins (a present copy over a missing one), as
//! Ceph's peering picks the newest log; the cost is a scan of every PG at a start, done in
//! the background and, for a PG a client touches first, right then (under its lock).
//!
//! ## Damaged metadata logs
//! Stores are mounted with `salvage_damaged_log`: a store whose log was damaged after it was
//! durable mounts what it can prove and says so ([`store::Store::log_damage`]). Its OSD then
//! leaves the acting set of its PGs (a `pg_temp` of the other holders, persisted before the
//! store's note is cleared), so it serves nothing it may have lost, and recovery refills it
//! from the others, removing what it should not have.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use osdmap::{OsdMap, PgId};
use rados::RadosError;

use crate::error::{store_to_rados, Result};
use crate::state::ClusterState;
use crate::util::collection_name;
use crate::{placement, Inner};

/// PGs that must peer before they serve, and objects recovery found unfound.
#[derive(Default)]
pub(crate) struct Peering {
    pending: Mutex<BTreeSet<PgId>>,
    /// `pending.len()`, read without the lock on every operation.
    pending_count: AtomicUsize,
    /// Per PG, objects no replica could provide (name -> the newest version seen, 0 if none).
    unfound: Mutex<BTreeMap<PgId, BTreeMap<String, u64>>>,
    /// `unfound.len()`, read without the lock on every write.
    unfound_pgs: AtomicUsize,
}

impl Peering {
    /// Every PG of `map` pending.
    pub(crate) fn all_of(map: &OsdMap) -> Self {
        // Erasure-coded PGs resolve each object as it is accessed (see `ec`).
        let pending: BTreeSet<PgId> = map
            .pools()
            .values()
            .filter(|pool| pool.can_shift_osds())
            .flat_map(|pool| pool.pgs())
            .collect();
        Self {
            pending_count: AtomicUsize::new(pending.len()),
            pending: Mutex::new(pending),
            unfound: Mutex::default(),
            unfound_pgs: AtomicUsize::new(0),
        }
    }

    fn lock_pending(&self) -> std::sync::MutexGuard<'_, BTreeSet<PgId>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn lock_unfound(
        &self,
    ) -> std::sync::MutexGuard<'_, BTreeMap<PgId, BTreeMap<String, u64>>> {
        self.unfound.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `pg` has yet to peer.
    pub(crate) fn is_pending(&self, pg: PgId) -> bool {
        self.pending_count.load(Ordering::Acquire) != 0 && self.lock_pending().contains(&pg)
    }

    fn finish(&self, pg: PgId) {
        let mut pending = self.lock_pending();
        pending.remove(&pg);
        self.pending_count.store(pending.len(), Ordering::Release);
    }

    /// PGs yet to peer.
    pub(crate) fn pending_pgs(&self) -> Vec<PgId> {
        self.lock_pending().iter().copied().collect()
    }

    /// Notes an unfound object of `pg` (recovery could read it nowhere).
    pub(crate) fn note_unfound(&self, pg: PgId, object: &str, version: u64) {
        let mut unfound = self.lock_unfound();
        let entry = unfound.entry(pg).or_default();
        let known = entry.entry(object.to_string()).or_insert(version);
        *known = (*known).max(version);
        self.unfound_pgs.store(unfound.len(), Ordering::Release);
    }

    /// Sets what a whole pass over `pg` (a scrub) found unfound.
    pub(crate) fn set_unfound(&self, pg: PgId, objects: BTreeMap<String, u64>) {
        let mut unfound = self.lock_unfound();
        if objects.is_empty() {
            unfound.remove(&pg);
        } else {
            unfound.insert(pg, objects);
        }
        self.unfound_pgs.store(unfound.len(), Ordering::Release);
    }

    /// Forgets an unfound object (found again, written, or resolved).
    pub(crate) fn found(&self, pg: PgId, object: &str) {
        if self.unfound_pgs.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut unfound = self.lock_unfound();
        if let Some(objects) = unfound.get_mut(&pg) {
            objects.remove(object);
            if objects.is_empty() {
                unfound.remove(&pg);
            }
        }
        self.unfound_pgs.store(unfound.len(), Ordering::Release);
    }
}

impl Inner {
    /// Peers `pg` if it has yet to (call before taking its lock). A failure is logged and
    /// leaves the PG to scrub's repair rather than blocking its clients.
    pub(crate) async fn ensure_peered(&self, pg: PgId) {
        if !self.peering.is_pending(pg) {
            return;
        }
        if let Err(error) = peer_pg(self, pg).await {
            tracing::warn!(pg = %collection_name(pg), %error, "peering failed; PG queued for repair");
            self.peering.finish(pg);
            self.mark_dirty(pg);
        }
    }

    /// Whether `pg` is known to have every acting replica in agreement: peered, not queued
    /// for repair, and not waiting for recovery. Reads of a PG that is not fall back to the
    /// other replicas when the primary lacks an object.
    pub(crate) fn pg_known_clean(&self, pg: PgId) -> bool {
        if self.peering.is_pending(pg) || self.lock_dirty().contains(&pg) {
            return false;
        }
        let map = self.map();
        map.pg_temp().get(&pg).is_none() || crate::is_settled(&map, pg)
    }
}

/// Peers every PG still pending.
pub(crate) async fn peer_all(inner: &Inner) {
    for pg in inner.peering.pending_pgs() {
        inner.ensure_peered(pg).await;
    }
}

/// Brings `pg`'s acting replicas to the newest version any of them holds of each object,
/// under the PG's lock; returns the copies written.
async fn peer_pg(inner: &Inner, pg: PgId) -> Result<u64> {
    let _guard = inner.pg_lock(pg).write().await;
    if !inner.peering.is_pending(pg) {
        return Ok(0);
    }
    let place = placement(&inner.map(), pg);
    let collection = collection_name(pg);
    // object -> (OSD -> version); a replica without the object has no entry.
    let mut versions: BTreeMap<String, BTreeMap<i32, u64>> = BTreeMap::new();
    for &id in &place.acting {
        let osd = inner.osd(id)?;
        for name in osd
            .list_all(&collection)
            .await
            .map_err(|e| store_to_rados(id, &e))?
        {
            if let Some(version) = osd
                .version(&collection, &name)
                .await
                .map_err(|e| store_to_rados(id, &e))?
            {
                versions.entry(name).or_default().insert(id, version);
            }
        }
    }
    let mut copies = 0;
    for (name, held) in versions {
        let Some(&newest) = held.values().max() else {
            continue;
        };
        let stale: Vec<i32> = place
            .acting
            .iter()
            .copied()
            .filter(|id| held.get(id) != Some(&newest))
            .collect();
        if stale.is_empty() {
            continue;
        }
        // The primary's copy first when it has the newest version, then the others.
        let mut sources: Vec<i32> = place
            .acting
            .iter()
            .copied()
            .filter(|id| held.get(id) == Some(&newest))
            .collect();
        sources.sort_by_key(|&id| Some(id) != place.primary());
        let mut copied = Err(RadosError::NotFound(name.clone()));
        for source in sources {
            copied = crate::recovery::copy_object(inner, &collection, &name, source, &stale).await;
            if copied.is_ok() {
                break;
            }
        }
        copies += copied?;
        tracing::info!(pg = %collection, object = %name, version = newest, stale = ?stale, "peering: replicas brought to the newest version");
    }
    inner.peering.finish(pg);
    Ok(copies)
}

/// Takes `damaged` OSDs (whose stores lost acknowledged writes) out of the acting set of
/// every PG of `map` they serve, as a `pg_temp` of the other acting members, in `state`
/// (a new epoch when anything changed). A PG that only they hold keeps them: nothing better
/// can serve it. Returns the PGs changed.
pub(crate) fn exclude_damaged(
    state: &mut ClusterState,
    map: &OsdMap,
    damaged: &BTreeSet<i32>,
) -> usize {
    let mut changed = 0;
    for pool in map.pools().values().filter(|pool| pool.can_shift_osds()) {
        for pg in pool.pgs() {
            let acting = placement(map, pg).acting;
            let kept: Vec<i32> = acting
                .iter()
                .copied()
                .filter(|osd| !damaged.contains(osd))
                .collect();
            if kept.is_empty() || kept.len() == acting.len() {
                continue;
            }
            state.set_pg_temp(pg, Some(kept));
            changed += 1;
        }
    }
    if changed > 0 {
        state.epoch += 1;
    }
    changed
}

/// An object no replica can provide ([`crate::Cluster::unfound_objects`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnfoundObject {
    /// Its PG (`1.1f`).
    pub pg: String,
    /// Its name.
    pub object: String,
    /// The newest version a replica's metadata names (0 when none could be read).
    pub version: u64,
}

/// How [`crate::Cluster::mark_unfound_lost`] resolves unfound objects, as Ceph's
/// `ceph pg PGID mark_unfound_lost revert|delete`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnfoundResolution {
    /// Roll back to the newest readable copy any OSD holds (an older version), else delete.
    Revert,
    /// Forget the object: removed from every OSD of the PG.
    Delete,
}

impl std::str::FromStr for UnfoundResolution {
    type Err = RadosError;
    fn from_str(text: &str) -> std::result::Result<Self, RadosError> {
        match text {
            "revert" => Ok(Self::Revert),
            "delete" => Ok(Self::Delete),
            other => Err(RadosError::InvalidArgument(format!(
                "{other:?}: expected revert or delete"
            ))),
        }
    }
}

/// One PG as `strata pg ls` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PgInfo {
    /// `1.1f`.
    pub pg: String,
    /// Up set.
    pub up: Vec<i32>,
    /// Acting set.
    pub acting: Vec<i32>,
    /// Ceph-style state: `peering`, `active+clean`, `active+recovering`,
    /// `active+recovery_unfound`, `active+undersized`, `active+repair`, `inactive`.
    pub state: String,
    /// Its unfound objects (name, version).
    pub unfound: Vec<(String, u64)>,
}

/// Every PG's [`PgInfo`].
pub(crate) fn pg_list(inner: &Inner) -> Vec<PgInfo> {
    let map = inner.map();
    let unfound = inner.peering.lock_unfound().clone();
    let dirty = inner.lock_dirty().clone();
    let mut list = Vec::new();
    for pool in map.pools().values() {
        for pg in pool.pgs() {
            let place = placement(&map, pg);
            let objects: Vec<(String, u64)> = unfound
                .get(&pg)
                .map(|objects| objects.iter().map(|(k, v)| (k.clone(), *v)).collect())
                .unwrap_or_default();
            let state = if inner.peering.is_pending(pg) {
                "peering"
            } else if (place.acting.len() as u32) < pool.min_size.max(1) {
                "inactive"
            } else if !objects.is_empty() {
                "active+recovery_unfound"
            } else if !crate::is_settled(&map, pg) {
                "active+recovering"
            } else if dirty.contains(&pg) {
                "active+repair"
            } else if (place.acting.len() as u32) < pool.size {
                "active+undersized"
            } else {
                "active+clean"
            };
            list.push(PgInfo {
                pg: collection_name(pg),
                up: place.up,
                acting: place.acting,
                state: state.to_string(),
                unfound: objects,
            });
        }
    }
    list
}

/// Resolves the unfound objects of `pg` (see [`UnfoundResolution`]) under its lock; returns
/// how many were resolved.
pub(crate) async fn mark_unfound_lost(
    inner: &Inner,
    pg: PgId,
    how: UnfoundResolution,
) -> Result<u64> {
    let _guard = inner.pg_lock(pg).write().await;
    let names: Vec<String> = inner
        .peering
        .lock_unfound()
        .get(&pg)
        .map(|objects| objects.keys().cloned().collect())
        .unwrap_or_default();
    let map = inner.map();
    let place = placement(&map, pg);
    let collection = collection_name(pg);
    // Every member of the PG's sets, and for a revert every other up OSD too (an older copy
    // may be left on an OSD the PG moved away from).
    let mut targets: Vec<i32> = place.acting.clone();
    for osd in &place.up {
        if !targets.contains(osd) {
            targets.push(*osd);
        }
    }
    let mut resolved = 0;
    for name in names {
        let mut image = None;
        if how == UnfoundResolution::Revert {
            for osd in inner.osds.values().filter(|osd| map.is_up(osd.id)) {
                if let Ok(Some(copy)) = osd.image(&collection, &name).await {
                    if image.as_ref().is_none_or(|best: &crate::osd::ObjectImage| {
                        copy.version() > best.version()
                    }) {
                        image = Some(copy);
                    }
                }
            }
        }
        crate::recovery::install_image(inner, &collection, &name, image.as_ref(), &targets).await?;
        tracing::warn!(
            pg = %collection,
            object = %name,
            reverted_to = image.as_ref().map(|copy| copy.version()),
            "unfound object marked lost"
        );
        inner.peering.found(pg, &name);
        resolved += 1;
    }
    inner.recovery_wakeup.notify_one();
    Ok(resolved)
}
