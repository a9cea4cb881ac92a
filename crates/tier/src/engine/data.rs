//! Client ops through the tier: reads and metadata reads (cache, promote, proxy), compound
//! writes translated onto the cache object with the state that describes them, and listing.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rados::{Bytes, ListCursor, ListPage, ObjectStat, OmapPage, Op, RadosError, WriteOp};

use super::{Route, Tier};
use crate::config::CacheMode;
use crate::error::{Result, TierError};
use crate::state::{
    decode_u64, ObjectState, OBJECT_PREFIX, RESERVED_PREFIX, STATE_XATTR, VERSION_XATTR,
};
use crate::stats::Counters;

fn reserved(name: &str) -> bool {
    name.starts_with(RESERVED_PREFIX)
}

fn refuse_reserved(name: &str) -> Result<()> {
    if reserved(name) {
        return Err(TierError::Rados(RadosError::InvalidArgument(format!(
            "xattr name {name:?}: names starting with {RESERVED_PREFIX:?} are the cache tier's"
        ))));
    }
    Ok(())
}

fn missing(name: &str) -> TierError {
    TierError::Rados(RadosError::NotFound(format!("object {name:?}")))
}

/// Blocks `[offset, offset + length)` spans.
pub(crate) fn blocks_of(block_bytes: u64, offset: u64, length: u64) -> Vec<u64> {
    if length == 0 {
        return Vec::new();
    }
    (offset / block_bytes..=(offset + length - 1) / block_bytes).collect()
}

/// How long a client op sleeps before it runs again after finding a background flush of its
/// object in flight, and how many times it may ([`Tier::retry_while_flushing`]): 10 s in all.
const FLUSH_WAIT_MS: u64 = 2;
const FLUSH_WAIT_ATTEMPTS: u32 = 5000;

impl Tier {
    /// Runs a client op (which takes its object's lock itself) again while it stops on a
    /// background flush of its object in flight: going around a full cache evicts the object
    /// under the op's lock, and the flush needs that lock to record its result, so the op
    /// lets go of it and waits for the flush instead of failing.
    async fn retry_while_flushing<T, F, Attempt>(&self, mut attempt: F) -> Result<T>
    where
        F: FnMut() -> Attempt,
        Attempt: std::future::Future<Output = Result<T>>,
    {
        let mut attempts = 0;
        loop {
            match attempt().await {
                Err(TierError::FlushInFlight { .. }) if attempts < FLUSH_WAIT_ATTEMPTS => {
                    attempts += 1;
                    tokio::time::sleep(Duration::from_millis(FLUSH_WAIT_MS)).await;
                }
                other => return other,
            }
        }
    }

    fn spawn_promotion(self: &Arc<Self>, name: &str, range: (u64, u64)) {
        let Some(slot) = self.promotion_slot() else {
            return;
        };
        let tier = self.clone();
        let name = name.to_string();
        tokio::spawn(async move {
            let _slot = slot;
            if let Err(error) = tier.promote_in_background(&name, range).await {
                if matches!(error, TierError::Rados(RadosError::NoSpace(_))) {
                    tier.note_cache_refusal();
                }
                tracing::debug!(object = %name, %error, "background promotion failed");
            }
        });
    }

    /// The cached state of an object the op must run on in the cache, promoting it (its
    /// metadata) when the route says so; `None` when the base pool has no such object.
    async fn state_for(&self, name: &str, route: Route) -> Result<Option<ObjectState>> {
        match route {
            Route::Cache => Ok(self.cached_state(name)),
            _ => self.promote_object(name, (0, 0)).await,
        }
    }

    /// Reads `length_bytes` from `offset_bytes`.
    pub async fn read(
        self: &Arc<Self>,
        name: &str,
        offset_bytes: u64,
        length_bytes: u64,
    ) -> Result<Vec<u8>> {
        Counters::bump(&self.counters.reads);
        self.retry_while_flushing(|| self.read_once(name, offset_bytes, length_bytes))
            .await
    }

    async fn read_once(
        self: &Arc<Self>,
        name: &str,
        offset_bytes: u64,
        length_bytes: u64,
    ) -> Result<Vec<u8>> {
        let _guard = self.lock(name).await;
        let route = self.route(name, false, length_bytes.min(1 << 30)).await;
        match route {
            Route::Proxy | Route::ProxyThenPromote => {
                Counters::bump(&self.counters.proxied);
                let data = self.base.read(name, offset_bytes, length_bytes).await?;
                if route == Route::ProxyThenPromote {
                    self.spawn_promotion(name, (offset_bytes, data.len() as u64));
                }
                Ok(data)
            }
            Route::Cache | Route::Promote => {
                match self
                    .read_in_cache(name, route, offset_bytes, length_bytes)
                    .await
                {
                    Err(error) if super::is_no_space(&error) => {
                        // The cache pool refused the promotion for space: read around it.
                        self.go_around_full_cache(name, &error).await?;
                        Ok(self.base.read(name, offset_bytes, length_bytes).await?)
                    }
                    other => other,
                }
            }
        }
    }

    /// A read the route sends to the cache (promoting what it needs first).
    async fn read_in_cache(
        self: &Arc<Self>,
        name: &str,
        route: Route,
        offset_bytes: u64,
        length_bytes: u64,
    ) -> Result<Vec<u8>> {
        let hit = route == Route::Cache;
        let mut state = match route {
            Route::Cache => self.cached_state(name).ok_or_else(|| missing(name))?,
            _ => {
                match self
                    .promote_object(name, (offset_bytes, length_bytes))
                    .await?
                {
                    Some(state) => state,
                    None => return Err(missing(name)),
                }
            }
        };
        if !state.exists {
            return Err(missing(name));
        }
        let end = offset_bytes
            .saturating_add(length_bytes)
            .min(state.size_bytes);
        if offset_bytes >= end {
            return Ok(Vec::new());
        }
        let blocks = blocks_of(state.block_bytes, offset_bytes, end - offset_bytes);
        let complete = blocks.iter().all(|b| state.present.contains(*b));
        if !complete {
            self.promote_blocks(name, &mut state, &blocks).await?;
        }
        // A cached object whose blocks had to be read from the base pool is a miss.
        match (hit, complete) {
            (true, true) => Counters::bump(&self.counters.hits),
            (true, false) => Counters::bump(&self.counters.misses),
            _ => {}
        }
        let mut data = self
            .cache
            .read(name, offset_bytes, end - offset_bytes)
            .await?;
        data.resize((end - offset_bytes) as usize, 0);
        Ok(data)
    }

    /// Where metadata reads go: the cached state, or `None` to read the base pool.
    async fn metadata_route(self: &Arc<Self>, name: &str) -> Result<Option<ObjectState>> {
        Counters::bump(&self.counters.reads);
        let route = self.route(name, false, 1).await;
        match route {
            Route::Proxy => {
                Counters::bump(&self.counters.proxied);
                Ok(None)
            }
            Route::ProxyThenPromote => {
                Counters::bump(&self.counters.proxied);
                self.spawn_promotion(name, (0, 0));
                Ok(None)
            }
            Route::Cache | Route::Promote => {
                if route == Route::Cache {
                    Counters::bump(&self.counters.hits);
                }
                match self.state_for(name, route).await {
                    Ok(Some(state)) if state.exists => Ok(Some(state)),
                    Ok(_) => Err(missing(name)),
                    Err(error) if super::is_no_space(&error) => {
                        // The cache pool refused the promotion for space: read around it.
                        self.go_around_full_cache(name, &error).await?;
                        Ok(None)
                    }
                    Err(error) => Err(error),
                }
            }
        }
    }

    /// Size, mtime and version.
    pub async fn stat(self: &Arc<Self>, name: &str) -> Result<ObjectStat> {
        self.retry_while_flushing(|| self.stat_once(name)).await
    }

    async fn stat_once(self: &Arc<Self>, name: &str) -> Result<ObjectStat> {
        let _guard = self.lock(name).await;
        match self.metadata_route(name).await? {
            Some(state) => Ok(ObjectStat {
                size_bytes: state.size_bytes,
                mtime_ns: state.mtime_ns,
                version: state.version,
            }),
            None => {
                let stat = self.base.stat(name).await?;
                let version_base = match self.base.get_xattr(name, VERSION_XATTR).await {
                    Ok(bytes) => decode_u64(&bytes),
                    Err(RadosError::NotFound(_)) => 0,
                    Err(e) => return Err(e.into()),
                };
                Ok(ObjectStat {
                    version: stat.version + version_base,
                    ..stat
                })
            }
        }
    }

    /// One xattr.
    pub async fn get_xattr(self: &Arc<Self>, name: &str, xattr: &str) -> Result<Vec<u8>> {
        if reserved(xattr) {
            return Err(TierError::Rados(RadosError::NotFound(format!(
                "xattr {xattr:?} of {name:?}"
            ))));
        }
        self.retry_while_flushing(|| async move {
            let _guard = self.lock(name).await;
            let io = match self.metadata_route(name).await? {
                Some(_) => &self.cache,
                None => &self.base,
            };
            Ok(io.get_xattr(name, xattr).await?)
        })
        .await
    }

    /// Every user xattr.
    pub async fn get_xattrs(self: &Arc<Self>, name: &str) -> Result<BTreeMap<String, Vec<u8>>> {
        self.retry_while_flushing(|| async move {
            let _guard = self.lock(name).await;
            let io = match self.metadata_route(name).await? {
                Some(_) => &self.cache,
                None => &self.base,
            };
            let mut xattrs = io.get_xattrs(name).await?;
            xattrs.retain(|key, _| !reserved(key));
            Ok(xattrs)
        })
        .await
    }

    /// A page of omap entries.
    pub async fn omap_get_vals(
        self: &Arc<Self>,
        name: &str,
        start_after: Option<&[u8]>,
        prefix: &[u8],
        max: usize,
    ) -> Result<OmapPage> {
        self.retry_while_flushing(|| async move {
            let _guard = self.lock(name).await;
            let io = match self.metadata_route(name).await? {
                Some(_) => &self.cache,
                None => &self.base,
            };
            Ok(io.omap_get_vals(name, start_after, prefix, max).await?)
        })
        .await
    }

    /// The values of those of `keys` that are set.
    pub async fn omap_get_vals_by_keys(
        self: &Arc<Self>,
        name: &str,
        keys: &[Vec<u8>],
    ) -> Result<BTreeMap<Vec<u8>, Vec<u8>>> {
        self.retry_while_flushing(|| async move {
            let _guard = self.lock(name).await;
            let io = match self.metadata_route(name).await? {
                Some(_) => &self.cache,
                None => &self.base,
            };
            Ok(io.omap_get_vals_by_keys(name, keys).await?)
        })
        .await
    }

    /// Applies a compound write.
    pub async fn operate(self: &Arc<Self>, name: &str, op: WriteOp) -> Result<()> {
        for step in op.ops() {
            match step {
                Op::SetXattr { name, .. }
                | Op::RemoveXattr { name }
                | Op::CompareXattr { name, .. } => refuse_reserved(name)?,
                _ => {}
            }
        }
        if op.is_empty() {
            return Ok(());
        }
        let mutates = op.ops().iter().any(|step| !step.is_guard());
        if mutates {
            Counters::bump(&self.counters.writes);
        } else {
            Counters::bump(&self.counters.reads);
        }
        let size_bytes: u64 = op
            .ops()
            .iter()
            .map(|step| match step {
                Op::WriteFull(data) | Op::Append(data) | Op::Write { data, .. } => {
                    data.len() as u64
                }
                _ => 0,
            })
            .sum();
        self.retry_while_flushing(|| self.operate_once(name, op.clone(), mutates, size_bytes))
            .await
    }

    async fn operate_once(
        self: &Arc<Self>,
        name: &str,
        op: WriteOp,
        mutates: bool,
        size_bytes: u64,
    ) -> Result<()> {
        let _guard = self.lock(name).await;
        if mutates && self.mode() == CacheMode::Readonly && self.cached_state(name).is_some() {
            // Readonly: writes go to the base pool; the cached copy goes first.
            self.evict_locked(name).await?;
            self.policy_forget(name);
        }
        let route = self.route(name, mutates, size_bytes.max(1)).await;
        match route {
            Route::Proxy | Route::ProxyThenPromote => {
                Counters::bump(&self.counters.proxied);
                self.base.operate(name, op).await?;
                if route == Route::ProxyThenPromote {
                    self.spawn_promotion(name, (0, 0));
                }
                Ok(())
            }
            Route::Cache | Route::Promote => {
                match self.write_in_cache(name, route, op.clone()).await {
                    Err(error) if super::is_no_space(&error) => {
                        // The cache pool refused the write (or the promotion ahead of it) for
                        // space, before applying it: the op goes around it to the base pool.
                        self.go_around_full_cache(name, &error).await?;
                        Counters::bump(&self.counters.writes_around_full);
                        Ok(self.base.operate(name, op).await?)
                    }
                    other => other,
                }
            }
        }
    }

    /// A write the route sends to the cache (promoting what it needs first).
    async fn write_in_cache(&self, name: &str, route: Route, op: WriteOp) -> Result<()> {
        let state = match self.state_for(name, route).await? {
            Some(state) => state,
            None => ObjectState {
                exists: false,
                base_exists: false,
                block_bytes: self.settings().tier_block_bytes,
                version: (self.wall)() / 1000,
                ..Default::default()
            },
        };
        let promoted = self.apply_in_cache(name, state, op).await?;
        // A write to a cached object that needed blocks from the base pool is a miss.
        if route == Route::Cache {
            if promoted {
                Counters::bump(&self.counters.misses);
            } else {
                Counters::bump(&self.counters.hits);
            }
        }
        Ok(())
    }

    /// Applies a write in the cache; returns whether blocks had to be promoted for it.
    async fn apply_in_cache(
        &self,
        name: &str,
        mut state: ObjectState,
        op: WriteOp,
    ) -> Result<bool> {
        let mut promoted = false;
        for _ in 0..3 {
            let plan = self.translate(name, &state, &op).await?;
            match plan {
                Plan::NeedBlocks(blocks) => {
                    self.promote_blocks(name, &mut state, &blocks).await?;
                    promoted = true;
                }
                Plan::Nothing => return Ok(promoted),
                Plan::Apply(physical, next) => {
                    let was_cached = self.cached_state(name).is_some();
                    let physical = if was_cached {
                        physical
                    } else {
                        let mut steps = vec![Op::Create { exclusive: false }];
                        steps.extend(physical.into_ops());
                        steps.into_iter().fold(WriteOp::new(), WriteOp::push)
                    };
                    let physical = physical.set_xattr(STATE_XATTR, next.encode());
                    self.cache.operate(name, physical).await?;
                    self.set_cached_state(name, Some(next));
                    if self.dirty_over_target() {
                        self.agent_wake.notify_one();
                    }
                    return Ok(promoted);
                }
            }
        }
        Err(TierError::Invalid(format!(
            "write to {name:?}: blocks kept missing after promotion"
        )))
    }

    fn dirty_over_target(&self) -> bool {
        let settings = self.settings();
        let capacity = self.capacity_objects() as f64;
        self.dirty_objects() as f64 > capacity * settings.cache_target_dirty_ratio
    }

    /// The physical op on the cache object and the state after it, or the blocks that must be
    /// promoted first (a partial write of a block the cache lacks and the base pool has).
    async fn translate(&self, name: &str, state: &ObjectState, op: &WriteOp) -> Result<Plan> {
        let block_bytes = state.block_bytes;
        let mut next = state.clone();
        let mut physical = WriteOp::new();
        let mut need: Vec<u64> = Vec::new();
        let mut changed = false;
        let mut user_xattrs: Option<Vec<String>> = None;
        // A block the op covers only partly needs its old bytes if the cache lacks them and
        // the base pool has them.
        let needs_old = |next: &ObjectState, block: u64| {
            !next.present.contains(block)
                && next.base_exists
                && block * block_bytes < next.base_valid_bytes
        };
        let initially_exists = state.exists;
        for step in op.ops() {
            match step {
                Op::AssertExists => {
                    if !initially_exists {
                        return Err(missing(name));
                    }
                }
                Op::CompareXattr { .. } => {
                    if !initially_exists {
                        return Err(missing(name));
                    }
                    physical = physical.push(step.clone());
                }
                Op::CompareOmap { .. } => physical = physical.push(step.clone()),
                Op::Create { exclusive } => {
                    if next.exists && *exclusive {
                        return Err(TierError::Rados(RadosError::Exists(format!(
                            "object {name:?}"
                        ))));
                    }
                    if !next.exists {
                        next.exists = true;
                        next.shape_dirty = true;
                    }
                    changed = true;
                }
                Op::WriteFull(data) => {
                    let length = data.len() as u64;
                    physical = physical.truncate(0).write(0, data.clone());
                    next.exists = true;
                    next.size_bytes = length;
                    next.present.clear();
                    next.dirty.clear();
                    let blocks = length.div_ceil(block_bytes);
                    next.present.insert_range(0, blocks);
                    next.dirty.insert_range(0, blocks);
                    next.base_valid_bytes = 0;
                    next.shape_dirty = true;
                    changed = true;
                }
                Op::Write { .. } | Op::Append(_) => {
                    let (offset, data) = match step {
                        Op::Write { offset_bytes, data } => (*offset_bytes, data.clone()),
                        Op::Append(data) => (next.size_bytes, data.clone()),
                        _ => unreachable!("matched above"),
                    };
                    let length = data.len() as u64;
                    let end = offset.checked_add(length).ok_or_else(|| {
                        TierError::Rados(RadosError::InvalidArgument("write beyond 2^64".into()))
                    })?;
                    if length > 0 {
                        let first = offset / block_bytes;
                        let last = (end - 1) / block_bytes;
                        if offset % block_bytes != 0 && needs_old(&next, first) {
                            need.push(first);
                        }
                        if end % block_bytes != 0 && end < next.size_bytes && needs_old(&next, last)
                        {
                            need.push(last);
                        }
                        next.present.insert_range(first, last + 1);
                        next.dirty.insert_range(first, last + 1);
                    }
                    physical = physical.write(offset, data);
                    if !next.exists {
                        next.shape_dirty = true;
                    }
                    next.exists = true;
                    if end > next.size_bytes {
                        next.size_bytes = end;
                        next.shape_dirty = true;
                    }
                    changed = true;
                }
                Op::Truncate { size_bytes } => {
                    if !next.exists {
                        continue;
                    }
                    let size = *size_bytes;
                    if size % block_bytes != 0 && size < next.size_bytes {
                        let block = size / block_bytes;
                        if needs_old(&next, block) {
                            need.push(block);
                        }
                    }
                    physical = physical.truncate(size);
                    next.present.truncate(size.div_ceil(block_bytes));
                    next.dirty.truncate(size.div_ceil(block_bytes));
                    if size < next.size_bytes && size % block_bytes != 0 {
                        next.dirty.insert(size / block_bytes);
                        next.present.insert(size / block_bytes);
                    }
                    next.base_valid_bytes = next.base_valid_bytes.min(size);
                    next.size_bytes = size;
                    next.shape_dirty = true;
                    changed = true;
                }
                Op::Zero {
                    offset_bytes,
                    length_bytes,
                } => {
                    let (offset, length) = (*offset_bytes, *length_bytes);
                    if !next.exists || length == 0 || offset >= next.size_bytes {
                        continue;
                    }
                    if offset.saturating_add(length) >= next.size_bytes {
                        // Ceph's zero reaching the end truncates.
                        if offset % block_bytes != 0 && needs_old(&next, offset / block_bytes) {
                            need.push(offset / block_bytes);
                        }
                        physical = physical.truncate(offset);
                        next.present.truncate(offset.div_ceil(block_bytes));
                        next.dirty.truncate(offset.div_ceil(block_bytes));
                        if offset % block_bytes != 0 {
                            next.dirty.insert(offset / block_bytes);
                            next.present.insert(offset / block_bytes);
                        }
                        next.base_valid_bytes = next.base_valid_bytes.min(offset);
                        next.size_bytes = offset;
                        next.shape_dirty = true;
                    } else {
                        let end = offset + length;
                        let first = offset / block_bytes;
                        let last = (end - 1) / block_bytes;
                        if offset % block_bytes != 0 && needs_old(&next, first) {
                            need.push(first);
                        }
                        if end % block_bytes != 0 && needs_old(&next, last) {
                            need.push(last);
                        }
                        physical = physical.write(offset, Bytes::from(vec![0u8; length as usize]));
                        next.present.insert_range(first, last + 1);
                        next.dirty.insert_range(first, last + 1);
                    }
                    changed = true;
                }
                Op::Remove => {
                    if !next.exists {
                        return Err(missing(name));
                    }
                    if user_xattrs.is_none() {
                        let names = match self.cache.get_xattrs(name).await {
                            Ok(all) => all.into_keys().filter(|k| !reserved(k)).collect(),
                            Err(RadosError::NotFound(_)) => Vec::new(),
                            Err(e) => return Err(e.into()),
                        };
                        user_xattrs = Some(names);
                    }
                    physical = physical.truncate(0).omap_clear();
                    for xattr in user_xattrs.as_deref().unwrap_or(&[]) {
                        physical = physical.remove_xattr(xattr.clone());
                    }
                    next.exists = false;
                    next.size_bytes = 0;
                    next.present.clear();
                    next.dirty.clear();
                    next.base_valid_bytes = 0;
                    next.shape_dirty = true;
                    next.meta_dirty = true;
                    changed = true;
                }
                Op::SetXattr { .. } | Op::OmapSet(_) => {
                    physical = physical.push(step.clone());
                    if !next.exists {
                        next.exists = true;
                        next.shape_dirty = true;
                    }
                    next.meta_dirty = true;
                    changed = true;
                }
                Op::RemoveXattr { .. } | Op::OmapRemoveKeys(_) | Op::OmapClear => {
                    if !next.exists {
                        return Err(missing(name));
                    }
                    physical = physical.push(step.clone());
                    next.meta_dirty = true;
                    changed = true;
                }
                other => {
                    return Err(TierError::Rados(RadosError::NotSupported(format!(
                        "{other:?} through the cache tier"
                    ))))
                }
            }
        }
        if !need.is_empty() {
            need.sort_unstable();
            need.dedup();
            return Ok(Plan::NeedBlocks(need));
        }
        if !changed {
            if physical.is_empty() || self.cached_state(name).is_none() {
                // Guards alone on an object the cache does not hold: they passed or failed
                // above, and an omap guard on a missing object sees no keys.
                if let Some(failed) = physical.ops().iter().find_map(|step| match step {
                    Op::CompareOmap { value: Some(_), .. } if !state.exists => Some(()),
                    _ => None,
                }) {
                    let () = failed;
                    return Err(TierError::Rados(RadosError::CompareFailed(format!(
                        "omap guard on missing object {name:?}"
                    ))));
                }
                return Ok(Plan::Nothing);
            }
            self.cache.operate(name, physical).await?;
            return Ok(Plan::Nothing);
        }
        if !next.exists && !state.exists && self.cached_state(name).is_none() {
            return Ok(Plan::Nothing);
        }
        next.version += 1;
        next.mtime_ns = (self.wall)();
        next.last_write_ms = self.clock.now_ms().max(1);
        Ok(Plan::Apply(physical, next))
    }

    /// A page of the base pool's objects as clients see them through the tier: first the
    /// objects only the cache holds, then the base pool's without the cache's whiteouts.
    pub async fn list(&self, cursor: &ListCursor, max: usize) -> Result<ListPage> {
        let (mut phase, mut inner) = match cursor.0.split_once(':') {
            Some(("b", inner)) => ("b", inner.to_string()),
            Some(("c", inner)) => ("c", inner.to_string()),
            None if cursor.0.is_empty() => ("c", String::new()),
            _ => {
                return Err(TierError::Rados(RadosError::InvalidArgument(format!(
                    "listing cursor {:?} is not the tier's",
                    cursor.0
                ))))
            }
        };
        let mut objects = Vec::new();
        loop {
            let io = if phase == "c" {
                &self.cache
            } else {
                &self.base
            };
            let page = io
                .list(&ListCursor(inner.clone()), max - objects.len())
                .await?;
            {
                let index = self.index.lock().expect("index lock");
                objects.extend(
                    page.objects
                        .into_iter()
                        .filter(|name| !name.starts_with(OBJECT_PREFIX))
                        .filter(|name| match (phase, index.get(name)) {
                            ("c", Some(state)) => state.exists && !state.base_exists,
                            ("c", None) => false,
                            (_, Some(state)) => state.exists,
                            (_, None) => true,
                        }),
                );
            }
            match (phase, page.next) {
                (_, Some(next)) => {
                    return Ok(ListPage {
                        objects,
                        next: Some(ListCursor(format!("{phase}:{}", next.0))),
                    })
                }
                ("c", None) if objects.len() < max => {
                    phase = "b";
                    inner = String::new();
                }
                ("c", None) => {
                    return Ok(ListPage {
                        objects,
                        next: Some(ListCursor("b:".into())),
                    })
                }
                (_, None) => {
                    return Ok(ListPage {
                        objects,
                        next: None,
                    })
                }
            }
        }
    }
}

/// What a compound write becomes on the cache object.
enum Plan {
    /// Promote these blocks, then translate again.
    NeedBlocks(Vec<u64>),
    /// Nothing to write.
    Nothing,
    /// This physical op, then this state.
    Apply(WriteOp, ObjectState),
}
