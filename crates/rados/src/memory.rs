//! [`MemoryRados`]: the reference model of the contract, in memory.
//!
//! Every pool is a `BTreeMap` of objects behind one mutex, and every [`WriteOp`] is applied to a
//! copy of its object that replaces the original only when every step succeeded: that is the
//! whole of atomicity here. It is written to be read next to the crate's "Contract every
//! implementation keeps", not to be fast; the layers above may use it for quick tests.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use async_trait::async_trait;

use crate::{
    validate_object_name, validate_xattr_name, ClusterStats, IoCtx, ListCursor, ListPage,
    ObjectStat, OmapPage, Op, PoolId, PoolInfo, PoolSpec, PoolStats, Rados, RadosError, Result,
    WriteOp,
};

/// Clock in ns since the Unix epoch, injected so tests can pin mtimes.
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// The capacity [`MemoryRados`] reports in [`ClusterStats::total_bytes`] (1 TiB).
pub const MEMORY_CAPACITY_BYTES: u64 = 1 << 40;

/// The CRUSH rule name the model reports for every pool.
const RULE: &str = "replicated_rule";

/// A cluster held in memory: one OSD, no device classes, no failures.
pub struct MemoryRados {
    state: Mutex<State>,
    clock: Clock,
    versions: Arc<AtomicU64>,
}

#[derive(Default)]
struct State {
    pools: BTreeMap<String, Arc<Pool>>,
    next_pool_id: PoolId,
}

struct Pool {
    info: PoolInfo,
    objects: Mutex<BTreeMap<String, Object>>,
}

/// One object: what the contract says an object is.
#[derive(Clone, Debug, Default)]
struct Object {
    data: Vec<u8>,
    xattrs: BTreeMap<String, Vec<u8>>,
    omap: BTreeMap<Vec<u8>, Vec<u8>>,
    mtime_ns: u64,
    version: u64,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves a consistent map (objects are replaced whole).
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Default for MemoryRados {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryRados {
    /// An empty cluster whose mtimes come from the system clock.
    pub fn new() -> Self {
        Self::with_clock(Arc::new(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.as_nanos() as u64)
        }))
    }

    /// An empty cluster whose mtimes come from `clock`.
    pub fn with_clock(clock: Clock) -> Self {
        Self {
            state: Mutex::new(State {
                pools: BTreeMap::new(),
                next_pool_id: 1,
            }),
            clock,
            versions: Arc::new(AtomicU64::new(0)),
        }
    }

    fn pool(&self, name: &str) -> Result<Arc<Pool>> {
        lock(&self.state)
            .pools
            .get(name)
            .cloned()
            .ok_or_else(|| RadosError::NotFound(format!("pool {name:?}")))
    }
}

fn check_spec(spec: &PoolSpec) -> Result<()> {
    let invalid = |why: String| Err(RadosError::InvalidArgument(why));
    if spec.name.is_empty() || spec.name.len() > 255 || spec.name.contains('\0') {
        return invalid(format!("pool name {:?} must be 1..=255 bytes", spec.name));
    }
    if spec.size == 0 || spec.size > 10 {
        return invalid(format!("pool size {} must be 1..=10", spec.size));
    }
    let min_size = spec.effective_min_size();
    if min_size == 0 || min_size > spec.size {
        return invalid(format!("min_size {min_size} must be 1..=size"));
    }
    if spec.pg_num == 0 {
        return invalid("pg_num must be at least 1".into());
    }
    if let Some(class) = &spec.device_class {
        return invalid(format!("no OSD of device class {class:?}"));
    }
    match &spec.crush_rule {
        Some(rule) if rule != RULE => invalid(format!("no CRUSH rule {rule:?}")),
        _ => Ok(()),
    }
}

#[async_trait]
impl Rados for MemoryRados {
    async fn pool_create(&self, spec: PoolSpec) -> Result<PoolInfo> {
        check_spec(&spec)?;
        let mut state = lock(&self.state);
        if state.pools.contains_key(&spec.name) {
            return Err(RadosError::Exists(format!("pool {:?}", spec.name)));
        }
        let info = PoolInfo {
            id: state.next_pool_id,
            name: spec.name.clone(),
            size: spec.size,
            min_size: spec.effective_min_size(),
            pg_num: spec.pg_num,
            crush_rule: RULE.into(),
            device_class: None,
            erasure_coded: false,
        };
        state.next_pool_id += 1;
        let pool = Pool {
            info: info.clone(),
            objects: Mutex::new(BTreeMap::new()),
        };
        state.pools.insert(spec.name, Arc::new(pool));
        Ok(info)
    }

    async fn pool_delete(&self, name: &str) -> Result<()> {
        match lock(&self.state).pools.remove(name) {
            Some(_) => Ok(()),
            None => Err(RadosError::NotFound(format!("pool {name:?}"))),
        }
    }

    async fn pool_list(&self) -> Result<Vec<PoolInfo>> {
        let mut pools: Vec<PoolInfo> = lock(&self.state)
            .pools
            .values()
            .map(|pool| pool.info.clone())
            .collect();
        pools.sort_by_key(|pool| pool.id);
        Ok(pools)
    }

    async fn pool_lookup(&self, name: &str) -> Result<PoolInfo> {
        Ok(self.pool(name)?.info.clone())
    }

    async fn cluster_stats(&self) -> Result<ClusterStats> {
        let pools: Vec<Arc<Pool>> = lock(&self.state).pools.values().cloned().collect();
        let pools: Vec<PoolStats> = pools
            .iter()
            .map(|pool| {
                let objects = lock(&pool.objects);
                let stored_bytes: u64 = objects.values().map(|o| o.data.len() as u64).sum();
                let metadata_bytes: u64 = objects
                    .values()
                    .flat_map(|o| o.omap.iter())
                    .map(|(k, v)| (k.len() + v.len()) as u64)
                    .sum();
                PoolStats {
                    name: pool.info.name.clone(),
                    objects: objects.len() as u64,
                    stored_bytes,
                    allocated_bytes: stored_bytes * u64::from(pool.info.size),
                    metadata_bytes: metadata_bytes * u64::from(pool.info.size),
                    degraded_objects: 0,
                    ..PoolStats::default()
                }
            })
            .collect();
        let used_bytes: u64 = pools
            .iter()
            .map(|p| p.allocated_bytes + p.metadata_bytes)
            .sum();
        Ok(ClusterStats {
            total_bytes: MEMORY_CAPACITY_BYTES,
            used_bytes,
            free_bytes: MEMORY_CAPACITY_BYTES.saturating_sub(used_bytes),
            objects: pools.iter().map(|p| p.objects).sum(),
            osds: 1,
            osds_up: 1,
            osds_in: 1,
            epoch: 1,
            pools,
            ..ClusterStats::default()
        })
    }

    async fn io_ctx(&self, pool: &str) -> Result<Arc<dyn IoCtx>> {
        let pool = self.pool(pool)?;
        Ok(Arc::new(MemoryIoCtx {
            info: pool.info.clone(),
            pool: Arc::downgrade(&pool),
            clock: self.clock.clone(),
            versions: self.versions.clone(),
        }))
    }
}

/// The [`IoCtx`] of a [`MemoryRados`] pool. Once the pool is deleted, every call fails with
/// `NotFound`.
pub struct MemoryIoCtx {
    info: PoolInfo,
    pool: Weak<Pool>,
    clock: Clock,
    versions: Arc<AtomicU64>,
}

impl MemoryIoCtx {
    fn pool(&self) -> Result<Arc<Pool>> {
        self.pool
            .upgrade()
            .ok_or_else(|| RadosError::NotFound(format!("pool {:?} was deleted", self.info.name)))
    }

    fn missing(&self, object: &str) -> RadosError {
        RadosError::NotFound(format!("{}/{object}", self.info.name))
    }

    /// A copy of `object` (validating its name).
    fn get(&self, object: &str) -> Result<Object> {
        validate_object_name(object)?;
        let pool = self.pool()?;
        let objects = lock(&pool.objects);
        objects
            .get(object)
            .cloned()
            .ok_or_else(|| self.missing(object))
    }
}

/// Checks every guard of `op` against `before`, the object as it was before the op.
fn check_guards(pool: &str, object: &str, before: Option<&Object>, op: &WriteOp) -> Result<()> {
    let missing = || RadosError::NotFound(format!("{pool}/{object}"));
    for step in op.ops() {
        match step {
            Op::AssertExists => {
                before.ok_or_else(missing)?;
            }
            Op::CompareXattr {
                name,
                comparison,
                value,
            } => {
                validate_xattr_name(name)?;
                let stored = before.ok_or_else(missing)?.xattrs.get(name);
                if !comparison.holds(stored.map_or(&[][..], Vec::as_slice), value) {
                    return Err(RadosError::CompareFailed(format!(
                        "xattr {name:?} of {pool}/{object}"
                    )));
                }
            }
            Op::CompareOmap { key, value } => {
                if value.as_ref().is_some_and(Vec::is_empty) {
                    return Err(RadosError::InvalidArgument(
                        "an omap value is never empty: compare with None for absence".into(),
                    ));
                }
                let stored = before.and_then(|o| o.omap.get(key));
                if stored != value.as_ref() {
                    return Err(RadosError::CompareFailed(format!(
                        "omap key {:?} of {pool}/{object}",
                        String::from_utf8_lossy(key)
                    )));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Applies one mutating step to `current` (`None`: the object does not exist).
fn apply(pool: &str, object: &str, current: &mut Option<Object>, step: Op) -> Result<()> {
    let missing = || RadosError::NotFound(format!("{pool}/{object}"));
    match step {
        Op::AssertExists | Op::CompareXattr { .. } | Op::CompareOmap { .. } => {}
        Op::Create { exclusive } => {
            if exclusive && current.is_some() {
                return Err(RadosError::Exists(format!("{pool}/{object}")));
            }
            current.get_or_insert_with(Object::default);
        }
        Op::WriteFull(data) => current.get_or_insert_with(Object::default).data = data.to_vec(),
        Op::Write { offset_bytes, data } => {
            let target = current.get_or_insert_with(Object::default);
            write_at(&mut target.data, offset_bytes, &data)?;
        }
        Op::Append(data) => current
            .get_or_insert_with(Object::default)
            .data
            .extend_from_slice(&data),
        Op::Truncate { size_bytes } => {
            if let Some(target) = current.as_mut() {
                target.data.resize(to_index(size_bytes)?, 0);
            }
        }
        Op::Zero {
            offset_bytes,
            length_bytes,
        } => {
            if let Some(target) = current.as_mut() {
                zero(&mut target.data, offset_bytes, length_bytes);
            }
        }
        Op::Remove => {
            current.take().ok_or_else(missing)?;
        }
        Op::SetXattr { name, value } => {
            validate_xattr_name(&name)?;
            current
                .get_or_insert_with(Object::default)
                .xattrs
                .insert(name, value);
        }
        Op::RemoveXattr { name } => {
            validate_xattr_name(&name)?;
            current.as_mut().ok_or_else(missing)?.xattrs.remove(&name);
        }
        Op::OmapSet(entries) => {
            if entries.iter().any(|(_, value)| value.is_empty()) {
                return Err(RadosError::InvalidArgument(
                    "omap values must not be empty".into(),
                ));
            }
            current
                .get_or_insert_with(Object::default)
                .omap
                .extend(entries);
        }
        Op::OmapRemoveKeys(keys) => {
            let target = current.as_mut().ok_or_else(missing)?;
            for key in keys {
                target.omap.remove(&key);
            }
        }
        Op::OmapClear => current.as_mut().ok_or_else(missing)?.omap.clear(),
    }
    Ok(())
}

fn to_index(bytes: u64) -> Result<usize> {
    usize::try_from(bytes)
        .map_err(|_| RadosError::InvalidArgument(format!("offset {bytes} is out of range")))
}

fn write_at(data: &mut Vec<u8>, offset_bytes: u64, bytes: &[u8]) -> Result<()> {
    let start = to_index(offset_bytes)?;
    let end = start
        .checked_add(bytes.len())
        .ok_or_else(|| RadosError::InvalidArgument("write beyond 2^64".into()))?;
    if data.len() < end {
        data.resize(end, 0);
    }
    data[start..end].copy_from_slice(bytes);
    Ok(())
}

/// Ceph's zero: never creates or extends; a range reaching the end truncates to its start.
fn zero(data: &mut Vec<u8>, offset_bytes: u64, length_bytes: u64) {
    let size = data.len() as u64;
    if length_bytes == 0 || offset_bytes >= size {
        return;
    }
    // offset < size fits in usize; so does the end of the range when it is below the size.
    let start = offset_bytes as usize;
    match offset_bytes.checked_add(length_bytes) {
        Some(end) if end < size => data[start..end as usize].fill(0),
        _ => data.truncate(start),
    }
}

#[async_trait]
impl IoCtx for MemoryIoCtx {
    fn pool(&self) -> &PoolInfo {
        &self.info
    }

    async fn operate(&self, object: &str, op: WriteOp) -> Result<()> {
        validate_object_name(object)?;
        let pool = self.pool()?;
        let mut objects = lock(&pool.objects);
        let before = objects.get(object);
        check_guards(&self.info.name, object, before, &op)?;
        let mut current = before.cloned();
        let exists_before = current.is_some();
        if current.is_none() && op.ops().iter().any(|s| matches!(s, Op::CompareOmap { .. })) {
            // librados compares omap only on an existing object: the contract creates it.
            current = Some(Object::default());
        }
        let mutates = op.ops().iter().any(|step| !step.is_guard());
        for step in op.into_ops() {
            apply(&self.info.name, object, &mut current, step)?;
        }
        match current {
            Some(mut object_now) => {
                if mutates || !exists_before {
                    object_now.version = self.versions.fetch_add(1, Ordering::Relaxed) + 1;
                    object_now.mtime_ns = (self.clock)();
                }
                objects.insert(object.to_string(), object_now);
            }
            None => {
                objects.remove(object);
            }
        }
        Ok(())
    }

    async fn read(&self, object: &str, offset_bytes: u64, length_bytes: u64) -> Result<Vec<u8>> {
        let data = self.get(object)?.data;
        let start = offset_bytes.min(data.len() as u64) as usize;
        let end = offset_bytes
            .saturating_add(length_bytes)
            .min(data.len() as u64) as usize;
        Ok(data[start..end].to_vec())
    }

    async fn stat(&self, object: &str) -> Result<ObjectStat> {
        let found = self.get(object)?;
        Ok(ObjectStat {
            size_bytes: found.data.len() as u64,
            mtime_ns: found.mtime_ns,
            version: found.version,
        })
    }

    async fn get_xattr(&self, object: &str, name: &str) -> Result<Vec<u8>> {
        validate_xattr_name(name)?;
        self.get(object)?
            .xattrs
            .remove(name)
            .ok_or_else(|| RadosError::NotFound(format!("xattr {name:?} of {object}")))
    }

    async fn get_xattrs(&self, object: &str) -> Result<BTreeMap<String, Vec<u8>>> {
        Ok(self.get(object)?.xattrs)
    }

    async fn omap_get_vals(
        &self,
        object: &str,
        start_after: Option<&[u8]>,
        prefix: &[u8],
        max: usize,
    ) -> Result<OmapPage> {
        let found = self.get(object)?;
        let mut matching = found
            .omap
            .into_iter()
            .filter(|(key, _)| start_after.is_none_or(|after| key.as_slice() > after))
            .filter(|(key, _)| key.starts_with(prefix));
        let entries: Vec<(Vec<u8>, Vec<u8>)> = matching.by_ref().take(max).collect();
        let more = matching.next().is_some();
        Ok(OmapPage { entries, more })
    }

    async fn omap_get_vals_by_keys(
        &self,
        object: &str,
        keys: &[Vec<u8>],
    ) -> Result<BTreeMap<Vec<u8>, Vec<u8>>> {
        let mut found = self.get(object)?;
        Ok(keys
            .iter()
            .filter_map(|key| found.omap.remove_entry(key))
            .collect())
    }

    async fn list(&self, cursor: &ListCursor, max: usize) -> Result<ListPage> {
        let pool = self.pool()?;
        let objects = lock(&pool.objects);
        let mut names = objects
            .keys()
            .filter(|name| cursor.0.is_empty() || name.as_str() > cursor.0.as_str());
        let page: Vec<String> = names.by_ref().take(max).cloned().collect();
        let next = match (names.next(), page.last()) {
            (Some(_), Some(last)) => Some(ListCursor(last.clone())),
            (Some(_), None) => Some(cursor.clone()),
            (None, _) => None,
        };
        Ok(ListPage {
            objects: page,
            next,
        })
    }
}
