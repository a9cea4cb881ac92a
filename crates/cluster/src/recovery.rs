//! Recovery and backfill: bringing every PG's up set to hold its latest data.
//!
//! A pass ([`recover_once`]) does, for every PG with a `pg_temp` (its acting set differs from
//! its up set), under the PG lock: copy each object whose version differs from the primary's
//! to the up members outside the acting set, remove objects they should not have, then clear
//! the `pg_temp` (a new epoch). PGs queued as dirty (a replica failed a write or a repair) are
//! deep-scrubbed and repaired. Finally copies on OSDs outside a PG's up and acting sets (after
//! an OSD went out, a pool was deleted, an upmap moved the PG) are removed. The background
//! task runs a pass whenever the map changes, and while work remains every second, backing
//! off to every 30 s (Ceph's `osd_backfill_retry_interval`) while passes make no progress.
//!
//! A PG is backfilled only when each new member can take it: its data (the primary's
//! allocation for it) is reserved on each, and a member that would pass `backfillfull_ratio`
//! leaves the PG waiting, `backfill_toofull` in `status`, as Ceph's backfill reservation
//! does, until space is freed. A failure is logged once per PG and reason, not every pass.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use osdmap::PgId;
use rados::RadosError;

use crate::ec::object::parse_shard_collection;
use crate::error::{store_to_rados, ClusterError, Result};
use crate::util::{collection_name, join_all, parse_collection};
use crate::{placement, Inner};

/// Recovery counters, cumulative since open.
#[derive(Debug, Default)]
pub struct RecoveryProgress {
    passes: AtomicU64,
    pgs_recovered: AtomicU64,
    pgs_pending: AtomicU64,
    objects_copied: AtomicU64,
    bytes_copied: AtomicU64,
    objects_removed: AtomicU64,
    objects_repaired: AtomicU64,
    errors: AtomicU64,
    /// PGs waiting because a new member is past `backfillfull_ratio`.
    toofull: std::sync::Mutex<BTreeSet<PgId>>,
    /// The last failure logged for each PG (the same one is not logged again).
    reported: std::sync::Mutex<BTreeMap<PgId, String>>,
}

/// A snapshot of [`RecoveryProgress`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecoverySnapshot {
    /// Recovery passes run.
    pub passes: u64,
    /// PGs brought to their up set (pg_temp cleared).
    pub pgs_recovered: u64,
    /// PGs waiting for recovery at the end of the last pass.
    pub pgs_pending: u64,
    /// Object copies written to another OSD: by recovery and backfill to new or stale
    /// members, and by repairs (read repair, scrub repair, a write's repair of its primary).
    pub objects_copied: u64,
    /// Data bytes of those same copies.
    pub bytes_copied: u64,
    /// Copies removed from OSDs that should not hold them.
    pub objects_removed: u64,
    /// Bad copies rewritten by read repair or scrub repair.
    pub objects_repaired: u64,
    /// Failures during recovery (retried on the next pass).
    pub errors: u64,
    /// PGs waiting for space: a new member is past `backfillfull_ratio` (Ceph's
    /// `backfill_toofull`).
    pub pgs_backfill_toofull: u64,
}

impl RecoveryProgress {
    /// The counters now.
    pub fn snapshot(&self) -> RecoverySnapshot {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        RecoverySnapshot {
            passes: get(&self.passes),
            pgs_recovered: get(&self.pgs_recovered),
            pgs_pending: get(&self.pgs_pending),
            objects_copied: get(&self.objects_copied),
            bytes_copied: get(&self.bytes_copied),
            objects_removed: get(&self.objects_removed),
            objects_repaired: get(&self.objects_repaired),
            errors: get(&self.errors),
            pgs_backfill_toofull: self.lock_toofull().len() as u64,
        }
    }

    /// The PGs waiting because a new member is past `backfillfull_ratio`.
    pub fn backfill_toofull(&self) -> Vec<PgId> {
        self.lock_toofull().iter().copied().collect()
    }

    fn lock_toofull(&self) -> std::sync::MutexGuard<'_, BTreeSet<PgId>> {
        self.toofull.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Work done so far: a pass that changes none of it made no progress.
    fn progress(&self) -> [u64; 4] {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        [
            get(&self.pgs_recovered),
            get(&self.objects_copied),
            get(&self.objects_removed),
            get(&self.objects_repaired),
        ]
    }

    /// Logs a PG's failure unless it is the one logged last for that PG.
    fn report(&self, pg: PgId, what: &str, error: &dyn std::fmt::Display) {
        let text = error.to_string();
        let mut reported = self.reported.lock().unwrap_or_else(|e| e.into_inner());
        if reported.get(&pg) == Some(&text) {
            tracing::debug!(pg = %collection_name(pg), error = %text, "{what}; will retry");
            return;
        }
        tracing::warn!(pg = %collection_name(pg), error = %text, "{what}; will retry (logged once)");
        reported.insert(pg, text);
    }

    /// Forgets a PG's logged failure (it succeeded).
    fn reported_ok(&self, pg: PgId) {
        self.reported
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&pg);
    }

    pub(crate) fn add_repaired(&self, count: u64) {
        self.objects_repaired.fetch_add(count, Ordering::Relaxed);
    }
}

/// Copies `object` from OSD `source` over its copies on `targets` (removing them when the
/// source has none). Returns the number of copies written. Every copy written counts in
/// `objects_copied` and its data in `bytes_copied`, whoever asked (recovery, read or scrub
/// repair), so the two count the same copies. Call under the PG lock.
pub(crate) async fn copy_object(
    inner: &Inner,
    collection: &str,
    object: &str,
    source: i32,
    targets: &[i32],
) -> std::result::Result<u64, RadosError> {
    copy_object_within(
        inner,
        collection,
        object,
        source,
        targets,
        inner.config().full_ratio,
    )
    .await
}

/// [`copy_object`], refused with `NoSpace` when a copy would take a target past `ratio`
/// (1.0 for a write's roll-back, which restores what was there; recovery reserved the
/// PG's space beforehand).
pub(crate) async fn copy_object_within(
    inner: &Inner,
    collection: &str,
    object: &str,
    source: i32,
    targets: &[i32],
    ratio: f64,
) -> std::result::Result<u64, RadosError> {
    let osd = |id: i32| {
        inner
            .osds
            .get(&id)
            .ok_or_else(|| RadosError::Io(format!("osd.{id} is not open")))
    };
    let image = osd(source)?
        .image(collection, object)
        .await
        .map_err(|e| store_to_rados(source, &e))?;
    install_image_within(inner, collection, object, image.as_ref(), targets, ratio).await
}

/// Copies `object` from the first of `sources` that can read it over its copies on
/// `targets`; `Ok(false)` when none could (the object is unfound on them), an error when a
/// target failed. Refused with `NoSpace` past `ratio` (as [`copy_object_within`]). Call
/// under the PG lock.
pub(crate) async fn copy_from_any(
    inner: &Inner,
    collection: &str,
    object: &str,
    sources: &[i32],
    targets: &[i32],
    ratio: f64,
) -> std::result::Result<bool, RadosError> {
    for &source in sources {
        let Ok(osd) = inner.osd(source) else {
            continue;
        };
        match osd.image(collection, object).await {
            Ok(image) => {
                install_image_within(inner, collection, object, image.as_ref(), targets, ratio)
                    .await?;
                return Ok(true);
            }
            Err(error) => {
                tracing::warn!(osd = source, object, %error, "cannot read a copy; trying another replica");
            }
        }
    }
    Ok(false)
}

/// Writes `image` (or the object's removal) on `targets`; returns the copies written.
/// Refused with `NoSpace` when a copy would take a target past `full_ratio`.
pub(crate) async fn install_image(
    inner: &Inner,
    collection: &str,
    object: &str,
    image: Option<&crate::osd::ObjectImage>,
    targets: &[i32],
) -> std::result::Result<u64, RadosError> {
    install_image_within(
        inner,
        collection,
        object,
        image,
        targets,
        inner.config().full_ratio,
    )
    .await
}

/// [`install_image`] within `ratio`.
pub(crate) async fn install_image_within(
    inner: &Inner,
    collection: &str,
    object: &str,
    image: Option<&crate::osd::ObjectImage>,
    targets: &[i32],
    ratio: f64,
) -> std::result::Result<u64, RadosError> {
    let osd = |id: i32| {
        inner
            .osds
            .get(&id)
            .ok_or_else(|| RadosError::Io(format!("osd.{id} is not open")))
    };
    let data_bytes = image.map_or(0, |image| image.data.len() as u64);
    let _reservation = inner.reserve_space(targets, data_bytes, 1, ratio, false)?;
    let mut written = 0;
    for &target in targets {
        osd(target)?
            .install(collection, object, image)
            .await
            .map_err(|e| store_to_rados(target, &e))?;
        written += 1;
        if let Some(image) = image {
            inner
                .recovery
                .objects_copied
                .fetch_add(1, Ordering::Relaxed);
            inner
                .recovery
                .bytes_copied
                .fetch_add(image.data.len() as u64, Ordering::Relaxed);
        }
    }
    Ok(written)
}

/// One recovery pass; returns whether the cluster is clean afterwards (no pg_temp but the
/// settled ones that keep undersized up sets at the pool's size, no dirty PG, no stray copies
/// found).
pub(crate) async fn recover_once(inner: &Inner) -> Result<bool> {
    inner.recovery.passes.fetch_add(1, Ordering::Relaxed);
    crate::peering::peer_all(inner).await;
    let map = inner.map();
    let pending: Vec<PgId> = map
        .pg_temp()
        .keys()
        .copied()
        .filter(|&pg| !crate::is_settled(&map, pg))
        .collect();
    inner
        .recovery
        .lock_toofull()
        .retain(|pg| pending.contains(pg));
    let mut clean = true;
    for pg in pending {
        match recover_pg(inner, pg).await {
            Ok(true) => {}
            Ok(false) => clean = false,
            Err(error) => {
                clean = false;
                inner.recovery.errors.fetch_add(1, Ordering::Relaxed);
                inner.recovery.report(pg, "recovery failed", &error);
            }
        }
    }
    let dirty: Vec<PgId> = std::mem::take(&mut *inner.lock_dirty())
        .into_iter()
        .collect();
    for pg in dirty {
        if let Some(profile) = inner.erasure_profile_of(pg.pool) {
            match crate::ec::repair::recover_pg(inner, pg, &profile).await {
                Ok(true) => {}
                Ok(false) => {
                    clean = false;
                    inner.lock_dirty().insert(pg);
                }
                Err(error) => {
                    clean = false;
                    inner.lock_dirty().insert(pg);
                    inner
                        .recovery
                        .report(pg, "erasure-coded recovery failed", &error);
                }
            }
            continue;
        }
        if let Err(error) = crate::scrub::scrub_pg(inner, pg, true).await {
            clean = false;
            inner.mark_dirty(pg);
            inner.recovery.errors.fetch_add(1, Ordering::Relaxed);
            inner.recovery.report(pg, "repair failed", &error);
        }
    }
    if remove_strays(inner).await? > 0 {
        clean = false;
    }
    let map = inner.map();
    let unsettled = map
        .pg_temp()
        .keys()
        .filter(|&&pg| !crate::is_settled(&map, pg))
        .count();
    let left = unsettled as u64 + inner.lock_dirty().len() as u64;
    inner.recovery.pgs_pending.store(left, Ordering::Relaxed);
    Ok(clean && left == 0)
}

/// Recovers one PG with a pg_temp; returns whether its pg_temp was cleared.
async fn recover_pg(inner: &Inner, pg: PgId) -> Result<bool> {
    let _guard = inner.pg_lock(pg).write().await;
    let map = inner.map();
    if crate::is_settled(&map, pg) {
        return Ok(true);
    }
    let place = placement(&map, pg);
    let Some(primary) = place.primary() else {
        return Ok(false); // every holder is down: nothing to copy from
    };
    let collection = collection_name(pg);
    let targets: Vec<i32> = place
        .up
        .iter()
        .copied()
        .filter(|osd| !place.acting.contains(osd))
        .collect();
    // Backfill reservation: the PG's data must fit on every new member below
    // backfillfull_ratio, held while it is copied.
    let source = inner.osd(primary)?;
    let pg_bytes = source
        .store()
        .statfs()
        .collections
        .get(&collection)
        .map_or(0, |usage| usage.allocated_bytes);
    let _reservation = match inner.reserve_space(
        &targets,
        pg_bytes,
        1,
        inner.config().backfillfull_ratio,
        false,
    ) {
        Ok(reservation) => {
            if inner.recovery.lock_toofull().remove(&pg) {
                tracing::info!(pg = %collection, "backfill_toofull cleared: backfilling");
            }
            reservation
        }
        Err(error) => {
            if inner.recovery.lock_toofull().insert(pg) {
                tracing::warn!(pg = %collection, %error, "backfill_toofull: the PG waits for space");
            }
            return Ok(false);
        }
    };
    let names = source
        .list_all(&collection)
        .await
        .map_err(|e| store_to_rados(primary, &e))?;
    let wanted: BTreeSet<&str> = names.iter().map(String::as_str).collect();
    // The primary first, then the other holders, for objects the primary cannot read.
    let sources: Vec<i32> = place.acting.clone();
    let mut unfound = 0;
    for &target in &targets {
        let osd = inner.osd(target)?;
        let present = osd
            .list_all(&collection)
            .await
            .map_err(|e| store_to_rados(target, &e))?;
        for name in present
            .iter()
            .filter(|name| !wanted.contains(name.as_str()))
        {
            osd.install(&collection, name, None)
                .await
                .map_err(|e| store_to_rados(target, &e))?;
            inner
                .recovery
                .objects_removed
                .fetch_add(1, Ordering::Relaxed);
        }
        for name in &names {
            let versions = join_all(vec![
                source.version(&collection, name),
                osd.version(&collection, name),
            ])
            .await;
            let same = match (&versions[0], &versions[1]) {
                (Ok(a), Ok(b)) => a == b,
                _ => false,
            };
            if same {
                continue;
            }
            if copy_from_any(inner, &collection, name, &sources, &[target], 1.0).await? {
                inner.peering.found(pg, name);
            } else {
                // No holder can read it: unfound. The rest of the PG goes on; the PG keeps
                // its pg_temp until `mark_unfound_lost` resolves it (or a copy reads again).
                let version = versions[0].as_ref().ok().copied().flatten().unwrap_or(0);
                inner.peering.note_unfound(pg, name, version);
                unfound += 1;
            }
        }
    }
    if unfound > 0 {
        tracing::warn!(pg = %collection, unfound, "objects unfound: no replica can provide them; `strata pg mark-unfound-lost` resolves them");
        return Ok(false);
    }
    let settled = crate::settled_pg_temp(&map, pg, &place.up, &place.acting);
    // The map may have changed while the objects were copied (an OSD out, a failed replica
    // taken out of the acting set): the data went to the old up set, and the change already
    // gave this PG the pg_temp it needs; try again with the new map rather than overwrite it.
    let mut moved = false;
    inner
        .change_map(|state| {
            let now = placement(&inner.map(), pg);
            if now.up != place.up || now.acting != place.acting {
                moved = true;
                return Err(ClusterError::State(format!(
                    "{collection} moved during recovery"
                )));
            }
            state.set_pg_temp(pg, settled);
            Ok(())
        })
        .or_else(|error| if moved { Ok(0) } else { Err(error) })?;
    if moved {
        return Ok(false);
    }
    inner.recovery.pgs_recovered.fetch_add(1, Ordering::Relaxed);
    inner.recovery.reported_ok(pg);
    Ok(true)
}

/// Removes copies from up OSDs that are neither up nor acting members of their PG; returns
/// how many PGs had strays.
async fn remove_strays(inner: &Inner) -> Result<u64> {
    let mut found = 0;
    for osd in inner.osds.values() {
        if !inner.map().is_up(osd.id) {
            continue;
        }
        for collection in osd.store().list_collections().into_keys() {
            let Some(pg) = parse_collection(&collection) else {
                if let Some((pg, position)) = parse_shard_collection(&collection) {
                    found += remove_stray_shards(inner, osd, &collection, pg, position).await?;
                }
                continue;
            };
            let _guard = inner.pg_lock(pg).write().await;
            let map = inner.map();
            let place = placement(&map, pg);
            let member = map.pool(pg.pool).is_some()
                && (place.up.contains(&osd.id)
                    || place.acting.contains(&osd.id)
                    || map
                        .pg_temp()
                        .get(&pg)
                        .is_some_and(|temp| temp.contains(&osd.id)));
            if member {
                continue;
            }
            found += 1;
            empty_collection(inner, osd, &collection).await?;
        }
    }
    Ok(found)
}

/// Removes every object of `collection` from `osd` (a collection it no longer holds), each
/// counted among recovery's removals.
async fn empty_collection(inner: &Inner, osd: &crate::osd::Osd, collection: &str) -> Result<()> {
    for name in osd
        .list_all(collection)
        .await
        .map_err(|e| store_to_rados(osd.id, &e))?
    {
        osd.install(collection, &name, None)
            .await
            .map_err(|e| store_to_rados(osd.id, &e))?;
        inner
            .recovery
            .objects_removed
            .fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

/// Removes shard collection `collection` (the shards of `pg` at `position`) from `osd` once
/// `osd` no longer serves that position and the PG has been recovered whole at its current
/// positions (until then this copy may be one of the `k` a read or a rebuild needs), or at
/// once when its pool is gone. Returns 1 when it removed it: the shards an OSD kept from
/// before a move (it was out, or CRUSH gave it another position) otherwise stay for ever.
async fn remove_stray_shards(
    inner: &Inner,
    osd: &crate::osd::Osd,
    collection: &str,
    pg: PgId,
    position: usize,
) -> Result<u64> {
    let serves = |inner: &Inner| {
        let map = inner.map();
        map.pool(pg.pool).is_some() && map.pg_to_up_acting(pg).up.get(position) == Some(&osd.id)
    };
    if serves(inner) {
        return Ok(0);
    }
    if let Some(profile) = inner.erasure_profile_of(pg.pool) {
        if !crate::ec::repair::recover_pg(inner, pg, &profile).await? {
            return Ok(0);
        }
    }
    let _guard = inner.pg_lock(pg).write().await;
    if serves(inner) {
        return Ok(0); // the map changed back meanwhile
    }
    empty_collection(inner, osd, collection).await?;
    tracing::info!(
        osd = osd.id,
        collection,
        "removed shards left from an old position"
    );
    Ok(1)
}

/// Seconds between passes while work remains, at first and at most (backing off while
/// passes make no progress).
const RETRY_S: (u64, u64) = (1, 30);

/// The wait before the next pass while work remains: back to the first after progress,
/// else doubled up to the bound. Pure.
pub fn next_retry_s(previous_s: u64, progressed: bool) -> u64 {
    if progressed {
        RETRY_S.0
    } else {
        previous_s.saturating_mul(2).clamp(RETRY_S.0, RETRY_S.1)
    }
}

/// The background task: a pass at every map change, and while unclean every second, backing
/// off (see [`next_retry_s`]) while passes make no progress.
pub(crate) async fn run(inner: Arc<Inner>) {
    let mut retry_s = RETRY_S.0;
    loop {
        let before = inner.recovery.progress();
        let clean = match recover_once(&inner).await {
            Ok(clean) => clean,
            Err(error) => {
                tracing::warn!(%error, "recovery pass failed");
                false
            }
        };
        if inner.closed.load(Ordering::Acquire) {
            return;
        }
        if clean {
            retry_s = RETRY_S.0;
            inner.recovery_wakeup.notified().await;
        } else {
            let waited = tokio::time::timeout(
                Duration::from_secs(retry_s),
                inner.recovery_wakeup.notified(),
            )
            .await;
            // A map change (or a write queueing a repair) starts over at the shortest wait.
            let progressed = waited.is_ok() || inner.recovery.progress() != before;
            retry_s = next_retry_s(retry_s, progressed);
        }
    }
}

impl Inner {
    pub(crate) fn osd(&self, id: i32) -> Result<&crate::Osd> {
        self.osds
            .get(&id)
            .ok_or_else(|| ClusterError::State(format!("osd.{id} is not open")))
    }

    pub(crate) fn lock_dirty(&self) -> std::sync::MutexGuard<'_, BTreeSet<PgId>> {
        self.dirty_pgs.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn mark_dirty(&self, pg: PgId) {
        self.lock_dirty().insert(pg);
        self.recovery_wakeup.notify_one();
    }
}
