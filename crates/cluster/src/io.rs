//! The data path: [`PoolHandle`] (the cluster's [`rados::IoCtx`]) and the [`rados::Rados`]
//! implementation of [`crate::Cluster`]. See the crate docs for the write and read paths.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};

use async_trait::async_trait;
use rados::{
    validate_object_name, validate_xattr_name, ClusterStats, IoCtx, ListCursor, ListPage,
    ObjectStat, OmapPage, Op, PoolInfo, PoolSpec, Rados, RadosError, Result, WriteOp,
    RESERVED_XATTR_PREFIX,
};
use store::{ObjectId, StoreError, Transaction};

use crate::error::store_to_rados;
use crate::osd::{decode_version, Osd, VERSION_XATTR};
use crate::util::{collection_name, join_all};
use crate::{placement, Cluster, Inner, Placement};

/// A handle on one pool of an embedded cluster. Holds the cluster weakly: after
/// [`Cluster::shutdown`] every call fails with [`RadosError::Shutdown`].
#[derive(Clone)]
pub struct PoolHandle {
    inner: Weak<Inner>,
    info: PoolInfo,
}

/// Payloads larger than this are copied once into memory aligned for O_DIRECT before they go
/// to the replicas (see [`for_devices`]); smaller ones are left to the stores' committers,
/// which gather a batch's small writes into aligned memory anyway (the stores' default
/// `write_behind_bytes_max`).
const ALIGNED_PAYLOAD_BYTES_MIN: usize = 64 * 1024;

/// Alignment of the copy [`for_devices`] makes: a multiple of every device block size.
const PAYLOAD_ALIGNMENT_BYTES: usize = 4096;

/// A write's payload as the replicas' stores take it: a large one in memory aligned for
/// O_DIRECT, copied there once for all replicas unless it already is (so no device makes a
/// bounce copy of its own), a small one as it is.
fn for_devices(data: rados::Bytes) -> store::Bytes {
    if data.len() > ALIGNED_PAYLOAD_BYTES_MIN {
        store::aligned_copy(&data, PAYLOAD_ALIGNMENT_BYTES)
    } else {
        data
    }
}

/// What a [`WriteOp`] becomes after its guards were checked against the primary's copy.
struct Plan {
    ops: Vec<store::Op>,
    /// Whether the object existed, if the plan had to look (guards, appends, removals).
    exists_before: Option<bool>,
    exists_after: bool,
    data_bytes: u64,
    /// Steps writing data (each may allocate a partial unit more).
    data_steps: u64,
}

impl Plan {
    /// Whether the write adds data or an object: what a full pool refuses (as Ceph's
    /// `PrimaryLogPG` refuses ops growing `num_bytes` or `num_objects` at `FULL`), while
    /// removals and metadata changes of existing objects go on. `None`: a change of
    /// metadata only, to an object the plan did not look up (it adds one if it is new).
    fn grows(&self) -> Option<bool> {
        if self.data_bytes > 0 {
            return Some(true);
        }
        if !self.exists_after {
            return Some(false);
        }
        self.exists_before.map(|existed| !existed)
    }
}

impl PoolHandle {
    pub(crate) fn new(inner: Arc<Inner>, info: PoolInfo) -> Self {
        Self {
            inner: Arc::downgrade(&inner),
            info,
        }
    }

    fn inner(&self) -> Result<Arc<Inner>> {
        let inner = self.inner.upgrade().ok_or(RadosError::Shutdown)?;
        inner.check_open()?;
        Ok(inner)
    }

    /// The placement and collection of an object now.
    fn route(&self, inner: &Inner, object: &str) -> Result<(Placement, String)> {
        validate_object_name(object)?;
        let map = inner.map();
        let pg = map
            .object_to_pg(self.info.id, object)
            .map_err(|_| RadosError::NotFound(format!("pool {:?} was deleted", self.info.name)))?;
        Ok((inner.placement_cached(&map, pg), collection_name(pg)))
    }

    fn degraded(&self, placement: &Placement) -> RadosError {
        RadosError::Degraded {
            pg: collection_name(placement.pg),
            available: placement.acting.len() as u32,
            min_size: self
                .inner
                .upgrade()
                .map_or(self.info.min_size, |inner| self.min_size(&inner)),
        }
    }

    /// The pool's `min_size` in the current map (`strata osd pool set` changes it while
    /// handles are open), else as the handle was opened.
    fn min_size(&self, inner: &Inner) -> u32 {
        inner
            .map()
            .pool(self.info.id)
            .map_or(self.info.min_size, |pool| pool.min_size)
    }

    /// Tries `read` on each acting OSD, primary first; returns the first success, the OSDs that
    /// failed with a checksum or device error, and which one served.
    async fn read_around<'a, T, F, Fut>(
        &self,
        inner: &'a Inner,
        placement: &Placement,
        read: F,
    ) -> Result<(T, Vec<i32>, i32)>
    where
        F: Fn(&'a Osd) -> Fut,
        Fut: std::future::Future<Output = std::result::Result<T, StoreError>>,
    {
        if placement.acting.is_empty() {
            return Err(self.degraded(placement));
        }
        inner.ensure_peered(placement.pg).await;
        let mut bad = Vec::new();
        let mut checksum_errors = 0;
        let mut last = None;
        // Set when the primary lacks the object while its PG is not known clean: the other
        // replicas are asked too, and the first that holds it serves.
        let mut missing: Option<RadosError> = None;
        for &id in &placement.acting {
            let Some(osd) = inner.osds.get(&id) else {
                continue;
            };
            let result = read(osd).await;
            inner.note_osd_result(id, &result);
            match result {
                Ok(value) => {
                    inner.stats.read_errors(bad.len() as u64);
                    if missing.is_some() {
                        tracing::warn!(
                            osd = id,
                            pg = %collection_name(placement.pg),
                            "the primary lacks an object a replica holds; served from the replica, PG queued for repair"
                        );
                        inner.mark_dirty(placement.pg);
                    }
                    return Ok((value, bad, id));
                }
                Err(error @ StoreError::NotFound { .. }) if bad.is_empty() => {
                    let ask_others = missing.is_some()
                        || (Some(id) == placement.primary() && !inner.pg_known_clean(placement.pg));
                    if !ask_others {
                        return Err(store_to_rados(id, &error));
                    }
                    missing.get_or_insert_with(|| store_to_rados(id, &error));
                }
                Err(error) => {
                    if matches!(error, StoreError::Checksum { .. }) {
                        checksum_errors += 1;
                    }
                    tracing::warn!(osd = id, %error, "replica read failed; trying another");
                    bad.push(id);
                    last = Some(store_to_rados(id, &error));
                }
            }
        }
        inner.stats.read_errors(bad.len() as u64);
        if let (Some(missing), true) = (missing, bad.is_empty()) {
            return Err(missing);
        }
        if checksum_errors == bad.len() && checksum_errors > 0 {
            return Err(RadosError::Checksum(format!(
                "{} replicas of {}: {}",
                checksum_errors,
                collection_name(placement.pg),
                last.map(|e| e.to_string()).unwrap_or_default()
            )));
        }
        Err(last.unwrap_or_else(|| self.degraded(placement)))
    }

    /// Rewrites the bad copies of an object from a good replica (under the PG lock, shared,
    /// and the object's lock).
    async fn repair(&self, inner: &Inner, object: &str, good: i32, bad: &[i32]) {
        let Ok((placement, collection)) = self.route(inner, object) else {
            return;
        };
        let _pg_guard = inner.pg_lock(placement.pg).read().await;
        let _object_guard = inner.object_lock(self.info.id, object).lock().await;
        let repaired = crate::recovery::copy_object(inner, &collection, object, good, bad).await;
        match repaired {
            Ok(count) => inner.recovery.add_repaired(count),
            Err(error) => {
                tracing::warn!(%error, object, "repair failed; PG queued for scrub repair");
                inner.mark_dirty(placement.pg);
            }
        }
    }

    /// Checks the guards of `op` against the primary's copy and turns it into store ops.
    async fn plan(
        &self,
        primary: &Osd,
        collection: &str,
        object: &str,
        op: WriteOp,
    ) -> Result<Plan> {
        let store = primary.store();
        let failed = |error: StoreError| store_to_rados(primary.id, &error);
        // Only guards and the steps whose effect depends on the object's existence or size
        // read what the object holds now; a plan of other steps (a write_full, the usual
        // case) skips the lookup, which for a new object was a metadata database read (the
        // store's own preparation looks it up anyway).
        let reads_state = op.ops().iter().any(|step| {
            !matches!(
                step,
                Op::Create { exclusive: false }
                    | Op::WriteFull(_)
                    | Op::Write { .. }
                    | Op::SetXattr { .. }
                    | Op::OmapSet(_)
            )
        });
        let mut xattrs = if reads_state {
            match store.get_xattrs(collection, object).await {
                Ok(xattrs) => Some(xattrs),
                Err(StoreError::NotFound { .. }) => None,
                Err(error) => return Err(failed(error)),
            }
        } else {
            None
        };
        let needs_size = op
            .ops()
            .iter()
            .any(|o| matches!(o, Op::Append(_) | Op::Zero { .. }));
        let mut size_bytes = match (&xattrs, needs_size) {
            (Some(_), true) => {
                store
                    .stat(collection, object)
                    .await
                    .map_err(failed)?
                    .size_bytes
            }
            _ => 0,
        };
        let exists_before = xattrs.is_some();
        self.check_guards(primary, collection, object, xattrs.as_ref(), &op)
            .await?;
        let missing = || RadosError::NotFound(format!("{}/{object}", self.info.name));
        let mut plan = Plan {
            ops: Vec::new(),
            exists_before: reads_state.then_some(exists_before),
            exists_after: xattrs.is_some(),
            data_bytes: 0,
            data_steps: 0,
        };
        let created = |xattrs: &mut Option<BTreeMap<String, Vec<u8>>>| {
            xattrs.get_or_insert_with(BTreeMap::new);
        };
        if xattrs.is_none() && op.ops().iter().any(|o| matches!(o, Op::CompareOmap { .. })) {
            // The contract: an op holding CompareOmap leaves a missing object created (the
            // librados backend must create it for `omap_cmp` to run).
            created(&mut xattrs);
            plan.ops.push(store::Op::Create { exclusive: false });
        }
        for step in op.into_ops() {
            let exists = xattrs.is_some();
            match step {
                Op::AssertExists | Op::CompareXattr { .. } | Op::CompareOmap { .. } => {}
                Op::Create { exclusive } => {
                    if exclusive && exists {
                        return Err(RadosError::Exists(format!("{}/{object}", self.info.name)));
                    }
                    created(&mut xattrs);
                    plan.ops.push(store::Op::Create { exclusive: false });
                }
                Op::WriteFull(data) => {
                    created(&mut xattrs);
                    size_bytes = data.len() as u64;
                    plan.data_bytes += size_bytes;
                    plan.data_steps += 1;
                    plan.ops.push(store::Op::WriteFull {
                        data: for_devices(data),
                    });
                }
                Op::Write { offset_bytes, data } => {
                    created(&mut xattrs);
                    size_bytes = size_bytes.max(offset_bytes.saturating_add(data.len() as u64));
                    plan.data_bytes += data.len() as u64;
                    plan.data_steps += 1;
                    plan.ops.push(store::Op::Write {
                        offset_bytes,
                        data: for_devices(data),
                    });
                }
                Op::Append(data) => {
                    created(&mut xattrs);
                    let offset_bytes = size_bytes;
                    size_bytes += data.len() as u64;
                    plan.data_bytes += data.len() as u64;
                    plan.data_steps += 1;
                    plan.ops.push(store::Op::Write {
                        offset_bytes,
                        data: for_devices(data),
                    });
                }
                Op::Truncate { size_bytes: size } => {
                    // Ceph: truncating a missing object does nothing.
                    if exists {
                        size_bytes = size;
                        plan.ops.push(store::Op::Truncate { size_bytes: size });
                    }
                }
                Op::Zero {
                    offset_bytes,
                    length_bytes,
                } => {
                    // Ceph: never creates or extends; a range reaching the end truncates.
                    if !exists || length_bytes == 0 || offset_bytes >= size_bytes {
                        continue;
                    }
                    if offset_bytes.saturating_add(length_bytes) >= size_bytes {
                        size_bytes = offset_bytes;
                        plan.ops.push(store::Op::Truncate {
                            size_bytes: offset_bytes,
                        });
                    } else {
                        plan.ops.push(store::Op::Zero {
                            offset_bytes,
                            length_bytes,
                        });
                    }
                }
                Op::Remove => {
                    if !exists {
                        return Err(missing());
                    }
                    xattrs = None;
                    size_bytes = 0;
                    plan.ops.push(store::Op::Remove);
                }
                Op::SetXattr { name, value } => {
                    validate_xattr_name(&name)?;
                    xattrs
                        .get_or_insert_with(BTreeMap::new)
                        .insert(name.clone(), value.clone());
                    plan.ops.push(store::Op::SetXattr { key: name, value });
                }
                Op::RemoveXattr { name } => {
                    validate_xattr_name(&name)?;
                    xattrs.as_mut().ok_or_else(missing)?.remove(&name);
                    plan.ops.push(store::Op::RemoveXattr { key: name });
                }
                Op::OmapSet(entries) => {
                    if entries.iter().any(|(_, value)| value.is_empty()) {
                        return Err(RadosError::InvalidArgument(
                            "omap values must not be empty".into(),
                        ));
                    }
                    created(&mut xattrs);
                    plan.ops.push(store::Op::OmapSet { entries });
                }
                Op::OmapRemoveKeys(keys) => {
                    if !exists {
                        return Err(missing());
                    }
                    plan.ops.push(store::Op::OmapRemove { keys });
                }
                Op::OmapClear => {
                    if !exists {
                        return Err(missing());
                    }
                    plan.ops.push(store::Op::OmapClear);
                }
                other => {
                    return Err(RadosError::NotSupported(format!("{other:?}")));
                }
            }
        }
        plan.exists_after = xattrs.is_some();
        Ok(plan)
    }

    /// Checks the guards of an op against the object as it is before it (`xattrs`: its
    /// xattrs, `None` when it does not exist), under the object's lock held by the caller.
    async fn check_guards(
        &self,
        primary: &Osd,
        collection: &str,
        object: &str,
        xattrs: Option<&BTreeMap<String, Vec<u8>>>,
        op: &WriteOp,
    ) -> Result<()> {
        let missing = || RadosError::NotFound(format!("{}/{object}", self.info.name));
        for step in op.ops() {
            match step {
                Op::AssertExists => {
                    xattrs.ok_or_else(missing)?;
                }
                Op::CompareXattr {
                    name,
                    comparison,
                    value,
                } => {
                    validate_xattr_name(name)?;
                    let stored = xattrs.ok_or_else(missing)?.get(name);
                    if !comparison.holds(stored.map_or(&[][..], Vec::as_slice), value) {
                        return Err(RadosError::CompareFailed(format!(
                            "xattr {name:?} of {}/{object}",
                            self.info.name
                        )));
                    }
                }
                Op::CompareOmap { key, value } => {
                    if value.as_ref().is_some_and(Vec::is_empty) {
                        return Err(RadosError::InvalidArgument(
                            "an omap value is never empty: compare with None for absence".into(),
                        ));
                    }
                    let stored = match xattrs {
                        Some(_) => primary
                            .store()
                            .omap_get_keys(collection, object, std::slice::from_ref(key))
                            .await
                            .map_err(|error| store_to_rados(primary.id, &error))?
                            .remove(key),
                        None => None,
                    };
                    if stored.as_ref() != value.as_ref() {
                        return Err(RadosError::CompareFailed(format!(
                            "omap key {:?} of {}/{object}",
                            String::from_utf8_lossy(key),
                            self.info.name
                        )));
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    async fn operate_locked(&self, inner: &Inner, object: &str, op: WriteOp) -> Result<()> {
        let (placement, collection) = self.route(inner, object)?;
        if (placement.acting.len() as u32) < self.min_size(inner) {
            return Err(self.degraded(&placement));
        }
        let primary_id = placement
            .primary()
            .ok_or_else(|| self.degraded(&placement))?;
        let primary = inner
            .osds
            .get(&primary_id)
            .ok_or_else(|| RadosError::Io(format!("osd.{primary_id} is not open")))?;
        let plan = self.plan(primary, &collection, object, op).await?;
        if plan.ops.is_empty() {
            return Ok(());
        }
        // Held until every replica applied the write (see `full`).
        let admit = || {
            inner.admit_growth(
                &self.info,
                &placement.acting,
                plan.data_bytes,
                plan.data_steps,
            )
        };
        let _reservation = match plan.grows() {
            Some(true) => Some(admit()?),
            Some(false) => None,
            // Looked up only when the pool is full: an omap or xattr change of an existing
            // object (the S3 index's, its GC queue's) goes on; one that creates it does not.
            None => match admit() {
                Ok(reservation) => Some(reservation),
                Err(refused) => match primary.store().exists(&collection, object).await {
                    Ok(true) => None,
                    Ok(false) => return Err(refused),
                    Err(error) => return Err(store_to_rados(primary_id, &error)),
                },
            },
        };
        let id = ObjectId::new(collection.as_str(), object);
        let mut transaction = Transaction::new((inner.options.clock_ns)());
        for step in plan.ops {
            transaction.push(&id, step);
        }
        if plan.exists_after {
            let version = inner.new_version()?;
            transaction.set_xattr(&id, VERSION_XATTR, version.to_le_bytes().to_vec());
        }
        let osds: Vec<_> = placement
            .acting
            .iter()
            .filter_map(|osd_id| inner.osds.get(osd_id))
            .collect();
        // One transaction per replica: the clones share the payload's buffers (`Bytes`),
        // so no replica copies the data.
        let mut copies: Vec<Transaction> = (1..osds.len()).map(|_| transaction.clone()).collect();
        copies.push(transaction);
        let writes = osds
            .iter()
            .zip(copies)
            .map(|(osd, transaction)| async move {
                (osd.id, osd.apply(transaction, plan.data_bytes).await)
            });
        let results = join_all(writes.collect()).await;
        for (osd, result) in &results {
            inner.note_osd_result(*osd, result);
        }
        inner
            .stats
            .record_access(self.info.id, object, false, plan.data_bytes);
        let holders: Vec<i32> = results
            .iter()
            .filter(|(_, result)| result.is_ok())
            .map(|(osd, _)| *osd)
            .collect();
        let Some(error) = results
            .iter()
            .find_map(|(osd, r)| r.as_ref().err().map(|e| store_to_rados(*osd, e)))
        else {
            self.note_acknowledged(&placement, object, holders.len());
            return Ok(());
        };
        if let Some((full, _)) = results
            .iter()
            .find(|(_, r)| matches!(r, Err(StoreError::NoSpace { .. })))
        {
            // A replica out of space fails the write rather than lowering its redundancy:
            // the copies that committed go back to what that replica still holds.
            self.roll_back(inner, &placement, &collection, object, *full, &holders)
                .await;
            return Err(RadosError::NoSpace(format!(
                "{error}; the write was refused (not applied on fewer replicas than the \
                 pool's size)"
            )));
        }
        let durable = holders.len() as u32 >= self.min_size(inner);
        if durable {
            let mut failed: Vec<i32> = results
                .iter()
                .filter(|(_, result)| result.is_err())
                .map(|(osd, _)| *osd)
                .collect();
            if !holders.contains(&primary_id) {
                // The primary, which serves reads, did not commit: copy the new version onto
                // it now (we hold the object's lock), keeping it in the acting set.
                let repaired = crate::recovery::copy_object(
                    inner,
                    &collection,
                    object,
                    holders[0],
                    &[primary_id],
                )
                .await;
                match repaired {
                    Ok(_) => {
                        tracing::warn!(%error, "primary write failed; repaired from a replica");
                        inner.recovery.add_repaired(1);
                        failed.retain(|&osd| osd != primary_id);
                    }
                    Err(repair) => {
                        tracing::warn!(%error, %repair, "primary write failed and could not be repaired");
                    }
                }
            }
            if failed.is_empty() {
                self.note_acknowledged(&placement, object, holders.len() + 1);
                return Ok(());
            }
            // The OSDs that failed no longer hold the PG's latest data: out of its acting set
            // (durably) before the write is acknowledged, so they neither serve it nor become
            // a source of recovery, which refills them.
            inner
                .exclude_from_acting(placement.pg, &failed)
                .map_err(|exclusion| {
                    inner.mark_dirty(placement.pg);
                    RadosError::Io(format!(
                        "{error}; the write committed on {} but {} could not be taken out \
                         of the PG's acting set ({exclusion}): its PG is queued for repair, \
                         which keeps the copy most replicas hold; read back before retrying \
                         a non-idempotent operation",
                        osd_list(&holders),
                        osd_list(&failed)
                    ))
                })?;
            tracing::warn!(%error, failed = %osd_list(&failed), "write failed on some replicas; they leave the acting set until recovered");
            self.note_acknowledged(&placement, object, placement.acting.len() - failed.len());
            return Ok(());
        }
        if !holders.is_empty() {
            inner.mark_dirty(placement.pg);
            tracing::warn!(
                %error,
                holders = %osd_list(&holders),
                "write committed below min_size; PG queued for repair"
            );
        }
        Err(error)
    }

    /// Says (one warning with a fixed message, which `strata bench soak` counts) when a write
    /// is acknowledged on fewer replicas than the pool's size: an undersized PG or a replica
    /// whose device failed, as Ceph acknowledges at `min_size`. A full OSD never causes it
    /// (the write is refused instead).
    fn note_acknowledged(&self, placement: &Placement, object: &str, replicas: usize) {
        if (replicas as u32) < self.info.size {
            tracing::warn!(
                pool = %self.info.name,
                object,
                replicas,
                size = self.info.size,
                acting = %osd_list(&placement.acting),
                "write acknowledged on fewer replicas than the pool's size"
            );
        }
    }

    /// Undoes a write on the replicas that committed it (`holders`) by copying the object
    /// back from `refused`, a replica whose store refused the whole transaction (so it still
    /// holds the object as it was); if that fails, the PG is queued for repair.
    async fn roll_back(
        &self,
        inner: &Inner,
        placement: &Placement,
        collection: &str,
        object: &str,
        refused: i32,
        holders: &[i32],
    ) {
        if holders.is_empty() {
            return;
        }
        let restored =
            crate::recovery::copy_object_within(inner, collection, object, refused, holders, 1.0)
                .await;
        match restored {
            Ok(_) => tracing::warn!(
                osd = refused,
                object,
                "a replica had no space: the write was rolled back on {}",
                osd_list(holders)
            ),
            Err(error) => {
                tracing::warn!(osd = refused, object, %error, "a replica had no space and the write could not be rolled back; PG queued for repair");
                inner.mark_dirty(placement.pg);
            }
        }
    }

    /// Up to `max` omap entries of one replica after `start_after` that start with `prefix`.
    async fn omap_scan(
        &self,
        osd: &Osd,
        collection: &str,
        object: &str,
        start_after: Option<&[u8]>,
        prefix: &[u8],
        max: usize,
    ) -> std::result::Result<OmapPage, StoreError> {
        let store = osd.store();
        let mut entries = Vec::new();
        // Keys > `after` are scanned; the prefix itself (the smallest key with that prefix) is
        // looked up exactly when the scan would start before it.
        let mut after: Option<Vec<u8>> = start_after.map(<[u8]>::to_vec);
        if !prefix.is_empty() && start_after.is_none_or(|s| s < prefix) {
            let exact = store
                .omap_get_keys(collection, object, &[prefix.to_vec()])
                .await?;
            entries.extend(exact);
            after = Some(prefix.to_vec());
        }
        loop {
            let page = store
                .omap_get_range(collection, object, after.as_deref(), max + 1)
                .await?;
            let done = page.len() < max + 1;
            after = page.last().map(|(key, _)| key.clone());
            for (key, value) in page {
                if !key.starts_with(prefix) {
                    return Ok(OmapPage {
                        entries,
                        more: false,
                    });
                }
                entries.push((key, value));
                if entries.len() > max {
                    entries.truncate(max);
                    return Ok(OmapPage {
                        entries,
                        more: true,
                    });
                }
            }
            if done {
                return Ok(OmapPage {
                    entries,
                    more: false,
                });
            }
        }
    }
}

#[async_trait]
impl IoCtx for PoolHandle {
    fn pool(&self) -> &PoolInfo {
        &self.info
    }

    async fn operate(&self, object: &str, op: WriteOp) -> Result<()> {
        let inner = self.inner()?;
        let _busy = crate::poll::Poller::busy(&inner.poller);
        validate_object_name(object)?;
        // Only the PG is needed for its lock (a hash, no CRUSH): the placement is computed
        // under the lock, where it cannot change under the write.
        let pg = inner
            .map()
            .object_to_pg(self.info.id, object)
            .map_err(|_| RadosError::NotFound(format!("pool {:?} was deleted", self.info.name)))?;
        inner.ensure_peered(pg).await;
        let _pg_guard = inner.pg_lock(pg).read().await;
        let _object_guard = inner.object_lock(self.info.id, object).lock().await;
        // The map may have changed while waiting: route again under the lock.
        let result = self.operate_locked(&inner, object, op).await;
        if result.is_ok() {
            // A write over an unfound object makes it found (a removal forgets it).
            inner.peering.found(pg, object);
        }
        result
    }

    async fn read(&self, object: &str, offset_bytes: u64, length_bytes: u64) -> Result<Vec<u8>> {
        let inner = self.inner()?;
        let _busy = crate::poll::Poller::busy(&inner.poller);
        let (placement, collection) = self.route(&inner, object)?;
        let (data, bad, good) = self
            .read_around(&inner, &placement, |osd| {
                osd.read(&collection, object, offset_bytes, length_bytes)
            })
            .await?;
        if !bad.is_empty() {
            self.repair(&inner, object, good, &bad).await;
        }
        inner
            .stats
            .record_access(self.info.id, object, true, data.len() as u64);
        Ok(data)
    }

    async fn stat(&self, object: &str) -> Result<ObjectStat> {
        let inner = self.inner()?;
        let _busy = crate::poll::Poller::busy(&inner.poller);
        let (placement, collection) = self.route(&inner, object)?;
        let ((stat, xattrs), _, _) = self
            .read_around(&inner, &placement, |osd| {
                let collection = &collection;
                async move {
                    let stat = osd.store().stat(collection, object).await?;
                    let xattrs = osd.store().get_xattrs(collection, object).await?;
                    Ok((stat, xattrs))
                }
            })
            .await?;
        Ok(ObjectStat {
            size_bytes: stat.size_bytes,
            mtime_ns: stat.mtime_ns,
            version: xattrs.get(VERSION_XATTR).map_or(0, |v| decode_version(v)),
        })
    }

    async fn get_xattr(&self, object: &str, name: &str) -> Result<Vec<u8>> {
        validate_xattr_name(name)?;
        let inner = self.inner()?;
        let _busy = crate::poll::Poller::busy(&inner.poller);
        let (placement, collection) = self.route(&inner, object)?;
        let (value, _, _) = self
            .read_around(&inner, &placement, |osd| {
                osd.store().get_xattr(&collection, object, name)
            })
            .await?;
        Ok(value)
    }

    async fn get_xattrs(&self, object: &str) -> Result<BTreeMap<String, Vec<u8>>> {
        let inner = self.inner()?;
        let _busy = crate::poll::Poller::busy(&inner.poller);
        let (placement, collection) = self.route(&inner, object)?;
        let (mut xattrs, _, _) = self
            .read_around(&inner, &placement, |osd| {
                osd.store().get_xattrs(&collection, object)
            })
            .await?;
        xattrs.retain(|name, _| !name.starts_with(RESERVED_XATTR_PREFIX));
        Ok(xattrs)
    }

    async fn omap_get_vals(
        &self,
        object: &str,
        start_after: Option<&[u8]>,
        prefix: &[u8],
        max: usize,
    ) -> Result<OmapPage> {
        let inner = self.inner()?;
        let _busy = crate::poll::Poller::busy(&inner.poller);
        let (placement, collection) = self.route(&inner, object)?;
        let (page, _, _) = self
            .read_around(&inner, &placement, |osd| {
                self.omap_scan(osd, &collection, object, start_after, prefix, max)
            })
            .await?;
        Ok(page)
    }

    async fn omap_get_vals_by_keys(
        &self,
        object: &str,
        keys: &[Vec<u8>],
    ) -> Result<BTreeMap<Vec<u8>, Vec<u8>>> {
        let inner = self.inner()?;
        let _busy = crate::poll::Poller::busy(&inner.poller);
        let (placement, collection) = self.route(&inner, object)?;
        let (values, _, _) = self
            .read_around(&inner, &placement, |osd| {
                osd.store().omap_get_keys(&collection, object, keys)
            })
            .await?;
        Ok(values)
    }

    async fn list(&self, cursor: &ListCursor, max: usize) -> Result<ListPage> {
        let inner = self.inner()?;
        let _busy = crate::poll::Poller::busy(&inner.poller);
        let map = inner.map();
        let pool = map
            .pool(self.info.id)
            .ok_or_else(|| RadosError::NotFound(format!("pool {:?}", self.info.name)))?;
        let (mut seed, mut after) = parse_cursor(cursor)?;
        let mut objects = Vec::new();
        while seed < pool.pg_num {
            let placement = placement(&map, osdmap::PgId::new(self.info.id, seed));
            let collection = collection_name(placement.pg);
            let want = max.saturating_sub(objects.len());
            if want == 0 {
                let last = objects.last().cloned().unwrap_or_default();
                return Ok(ListPage {
                    objects,
                    next: Some(make_cursor(seed, &last)),
                });
            }
            let (names, _, _) = self
                .read_around(&inner, &placement, |osd| {
                    osd.store().list(&collection, after.as_deref(), want)
                })
                .await?;
            let full = names.len() == want;
            objects.extend(names);
            if full {
                let last = objects.last().cloned().unwrap_or_default();
                return Ok(ListPage {
                    objects,
                    next: Some(make_cursor(seed, &last)),
                });
            }
            seed += 1;
            after = None;
        }
        Ok(ListPage {
            objects,
            next: None,
        })
    }
}

/// `osd.1, osd.2`.
fn osd_list(osds: &[i32]) -> String {
    osds.iter()
        .map(|osd| format!("osd.{osd}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn make_cursor(seed: u32, after: &str) -> ListCursor {
    ListCursor(format!("{seed:08x}/{after}"))
}

fn parse_cursor(cursor: &ListCursor) -> Result<(u32, Option<String>)> {
    if cursor.0.is_empty() {
        return Ok((0, None));
    }
    let bad = || RadosError::InvalidArgument(format!("list cursor {:?}", cursor.0));
    let (seed, after) = cursor.0.split_once('/').ok_or_else(bad)?;
    let seed = u32::from_str_radix(seed, 16).map_err(|_| bad())?;
    Ok((seed, (!after.is_empty()).then(|| after.to_string())))
}

#[async_trait]
impl Rados for Cluster {
    async fn pool_create(&self, spec: PoolSpec) -> Result<PoolInfo> {
        self.inner.check_open()?;
        self.inner.create_pool(spec)
    }

    async fn pool_delete(&self, name: &str) -> Result<()> {
        self.inner.check_open()?;
        self.inner.delete_pool(name)
    }

    async fn pool_list(&self) -> Result<Vec<PoolInfo>> {
        let names: Vec<String> = self
            .inner
            .lock_state()
            .pools
            .values()
            .map(|pool| pool.name.clone())
            .collect();
        names
            .iter()
            .map(|name| self.inner.pool_info(name))
            .collect()
    }

    async fn pool_lookup(&self, name: &str) -> Result<PoolInfo> {
        self.inner.pool_info(name)
    }

    async fn cluster_stats(&self) -> Result<ClusterStats> {
        Ok(crate::stats::cluster_stats(&self.inner))
    }

    async fn io_ctx(&self, pool: &str) -> Result<Arc<dyn IoCtx>> {
        if let Some(profile) = self.erasure_profile(pool) {
            let info = self.inner.pool_info(pool)?;
            return Ok(Arc::new(crate::ec::EcPoolHandle::new(
                &self.inner,
                info,
                profile,
            )));
        }
        Ok(Arc::new(self.pool(pool).map_err(RadosError::from)?))
    }
}
