//! Statistics for the layers above: per OSD load (device and object level) and per object
//! access counts per period (a bounded table; this feeds cache-tier admission and balancing).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use device::DeviceStats;
use osdmap::PgId;
use rados::{ClusterStats, PoolStats};

use crate::util::parse_collection;
use crate::{placement, Inner};

/// Accesses to one object in a period.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ObjectAccess {
    /// Reads (read, not stat/xattr).
    pub reads: u64,
    /// Mutations.
    pub writes: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Data bytes written.
    pub write_bytes: u64,
}

/// Per-object access counts of one period.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AccessCounts {
    /// By (pool id, object name).
    pub objects: BTreeMap<(i64, String), ObjectAccess>,
    /// Accesses to objects beyond the table's bound (counted, not attributed).
    pub untracked: ObjectAccess,
}

/// By pool, then object name: an access to an object already in the table is counted
/// without allocating its name (a `(pool, String)` key needed one per lookup, 1.9% of the CPU
/// samples of a cluster writing new 4 KiB objects). Names hash with foldhash, seeded per
/// process (clients choose them), not SipHash (1.6% of those samples).
struct AccessTable {
    objects: foldhash::HashMap<i64, foldhash::HashMap<String, ObjectAccess>>,
    /// Objects in `objects`, all pools.
    tracked: usize,
    untracked: ObjectAccess,
}

/// What happened in one statistics period.
#[derive(Clone, Debug)]
pub struct StatsPeriod {
    /// When the period began (the previous period's end, or the cluster's open), ns since the
    /// Unix epoch by the cluster's clock.
    pub start_ns: u64,
    /// When it ended.
    pub end_ns: u64,
    /// Per-OSD load in the period (device and object level, see [`OsdStats::since`]).
    pub osds: Vec<OsdStats>,
    /// Per-object accesses in the period.
    pub access: AccessCounts,
}

/// The cluster's own counters.
pub(crate) struct Stats {
    access: Mutex<AccessTable>,
    /// OSD snapshots at the end of the previous period, and when it ended (ns).
    last_period: Mutex<(Vec<OsdStats>, u64)>,
    /// The last completed period, for the admin API and metrics.
    completed: Mutex<Option<Arc<StatsPeriod>>>,
    objects_max: usize,
    read_errors: AtomicU64,
    /// Bad copies the last scrub left unrepaired, and objects it found lost.
    scrub_errors: AtomicU64,
}

impl Stats {
    /// `opened_ns`: when the first period begins.
    pub(crate) fn new(objects_max: usize, opened_ns: u64) -> Self {
        Self {
            access: Mutex::new(AccessTable {
                objects: foldhash::HashMap::default(),
                tracked: 0,
                untracked: ObjectAccess::default(),
            }),
            objects_max,
            last_period: Mutex::new((Vec::new(), opened_ns)),
            completed: Mutex::new(None),
            read_errors: AtomicU64::new(0),
            scrub_errors: AtomicU64::new(0),
        }
    }

    pub(crate) fn set_scrub_errors(&self, count: u64) {
        self.scrub_errors.store(count, Ordering::Relaxed);
    }

    pub(crate) fn scrub_errors(&self) -> u64 {
        self.scrub_errors.load(Ordering::Relaxed)
    }

    pub(crate) fn read_errors(&self, count: u64) {
        self.read_errors.fetch_add(count, Ordering::Relaxed);
    }

    pub(crate) fn replica_read_errors(&self) -> u64 {
        self.read_errors.load(Ordering::Relaxed)
    }

    pub(crate) fn record_access(&self, pool: i64, object: &str, read: bool, bytes: u64) {
        if self.objects_max == 0 {
            return;
        }
        let mut table = self.access.lock().unwrap_or_else(|e| e.into_inner());
        let AccessTable {
            objects,
            tracked,
            untracked,
        } = &mut *table;
        let full = *tracked >= self.objects_max;
        let pool_objects = objects.entry(pool).or_default();
        let entry = match pool_objects.get_mut(object) {
            Some(entry) => entry,
            None if full => untracked,
            None => {
                *tracked += 1;
                pool_objects.entry(object.to_string()).or_default()
            }
        };
        if read {
            entry.reads += 1;
            entry.read_bytes += bytes;
        } else {
            entry.writes += 1;
            entry.write_bytes += bytes;
        }
    }

    pub(crate) fn take_access_counts(&self) -> AccessCounts {
        let mut table = self.access.lock().unwrap_or_else(|e| e.into_inner());
        let objects = std::mem::take(&mut table.objects);
        table.tracked = 0;
        AccessCounts {
            objects: objects
                .into_iter()
                .flat_map(|(pool, names)| {
                    names
                        .into_iter()
                        .map(move |(name, access)| ((pool, name), access))
                })
                .collect(),
            untracked: std::mem::take(&mut table.untracked),
        }
    }
}

/// One OSD's state and load.
#[derive(Clone, Debug)]
pub struct OsdStats {
    /// Id.
    pub id: i32,
    /// Host.
    pub host: String,
    /// Device class.
    pub class: String,
    /// Serving.
    pub up: bool,
    /// Holding data.
    pub is_in: bool,
    /// The device's own statistics (ops, bytes, latency, busy time, queue depth).
    pub device: DeviceStats,
    /// Object-level operations this OSD served (reads; writes = applied transactions).
    pub ops: DeviceStats,
    /// Space and metadata of its store.
    pub statfs: store::Statfs,
    /// Its store's data cache: reads served from memory since open, and what it holds.
    pub data_cache: store::DataCacheStats,
}

impl OsdStats {
    /// The load between an earlier snapshot of the same OSD and this one (a period).
    pub fn since(&self, earlier: &OsdStats) -> OsdStats {
        OsdStats {
            device: self.device.since(&earlier.device),
            ops: self.ops.since(&earlier.ops),
            ..self.clone()
        }
    }

    /// Share of the period the device was busy, 0..=1.
    pub fn busy_fraction(&self) -> f64 {
        self.device.busy_fraction()
    }
}

pub(crate) fn osd_stats(inner: &Inner) -> Vec<OsdStats> {
    let map = inner.map();
    inner
        .osds
        .values()
        .map(|osd| OsdStats {
            id: osd.id,
            host: osd.host.clone(),
            class: osd.class.clone(),
            up: map.is_up(osd.id),
            is_in: map.is_in(osd.id),
            device: osd.device().stats(),
            ops: osd.op_stats(),
            statfs: osd.store().statfs(),
            data_cache: osd.store().data_cache_stats(),
        })
        .collect()
}

/// Ends a period: the load since the previous one, the access table taken and emptied. The
/// result is also kept as the last completed period ([`last_period`]).
pub(crate) fn take_period(inner: &Inner) -> Arc<StatsPeriod> {
    let now = osd_stats(inner);
    let end_ns = (inner.options.clock_ns)();
    let mut last = inner
        .stats
        .last_period
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let (earlier_osds, start_ns) = &*last;
    let osds = now
        .iter()
        .map(
            |current| match earlier_osds.iter().find(|earlier| earlier.id == current.id) {
                Some(earlier) => current.since(earlier),
                None => current.clone(),
            },
        )
        .collect();
    let period = Arc::new(StatsPeriod {
        start_ns: *start_ns,
        end_ns,
        osds,
        access: inner.stats.take_access_counts(),
    });
    *last = (now, end_ns);
    drop(last);
    *inner
        .stats
        .completed
        .lock()
        .unwrap_or_else(|e| e.into_inner()) = Some(Arc::clone(&period));
    period
}

/// The last completed period, if one has ended.
pub(crate) fn last_period(inner: &Inner) -> Option<Arc<StatsPeriod>> {
    inner
        .stats
        .completed
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
}

/// The PG and shard position of an erasure-coded shard collection (`1.2as3`).
fn parse_shard_collection(name: &str) -> Option<(PgId, usize)> {
    let (pool, rest) = name.split_once('.')?;
    let (seed, position) = rest.split_once('s')?;
    Some((
        PgId::new(pool.parse().ok()?, u32::from_str_radix(seed, 16).ok()?),
        position.parse().ok()?,
    ))
}

pub(crate) fn cluster_stats(inner: &Inner) -> ClusterStats {
    let map = inner.map();
    let mut stats = ClusterStats {
        epoch: inner.lock_state().epoch,
        osds: inner.osds.len() as u32,
        ..ClusterStats::default()
    };
    let mut pools: BTreeMap<i64, PoolStats> = map
        .pools()
        .values()
        .map(|pool| {
            (
                pool.id,
                PoolStats {
                    name: pool.name.clone(),
                    ..PoolStats::default()
                },
            )
        })
        .collect();
    // Erasure-coded pools: k and k + m by pool id.
    let erasure: BTreeMap<i64, (usize, usize)> = inner
        .lock_state()
        .pools
        .values()
        .filter_map(|pool| {
            let profile = pool.erasure.as_ref()?;
            Some((pool.id, (profile.k as usize, profile.size() as usize)))
        })
        .collect();
    for osd in inner.osds.values() {
        stats.osds_up += u32::from(map.is_up(osd.id));
        stats.osds_in += u32::from(map.is_in(osd.id));
        let statfs = osd.store().statfs();
        stats.total_bytes += statfs.total_bytes;
        stats.used_bytes += statfs.allocated_bytes;
        stats.free_bytes += statfs.free_bytes;
        if !map.is_up(osd.id) {
            continue;
        }
        for (collection, usage) in &statfs.collections {
            if let Some((pg, position)) = parse_shard_collection(collection) {
                let (Some(pool), Some(&(k, size))) =
                    (pools.get_mut(&pg.pool), erasure.get(&pg.pool))
                else {
                    continue;
                };
                // A shard counts where its OSD is at its position of the up set: shards
                // left at an old position (a replaced OSD that returned) are not the
                // pool's data. Space counts every shard (raw, k + m over k of the data);
                // objects and stored bytes once, on the first position up: every shard of
                // an object is as long as the others, so stored is k times that shard's
                // bytes (the data, and the zero padding of each object's last stripe).
                let up = map.pg_to_up_acting(pg).up;
                if up.get(position) != Some(&osd.id) {
                    continue;
                }
                pool.allocated_bytes += usage.allocated_bytes;
                pool.metadata_bytes += usage.metadata_bytes;
                if up.iter().position(|&id| map.is_up(id)) == Some(position) {
                    pool.objects += usage.objects;
                    pool.stored_bytes += usage.stored_bytes * k as u64;
                    let whole = up.len() >= size
                        && up[..size].iter().all(|&id| map.is_up(id) && map.is_in(id));
                    if !whole {
                        pool.degraded_objects += usage.objects;
                    }
                }
                continue;
            }
            let Some(pg) = parse_collection(collection) else {
                continue;
            };
            let Some(pool) = pools.get_mut(&pg.pool) else {
                continue;
            };
            // Space is counted on every replica (what the pool costs), objects and stored
            // bytes once, on the primary (what the pool holds), as Ceph's `df` does.
            pool.allocated_bytes += usage.allocated_bytes;
            pool.metadata_bytes += usage.metadata_bytes;
            let place = placement(&map, pg);
            if place.primary() == Some(osd.id) {
                pool.objects += usage.objects;
                pool.stored_bytes += usage.stored_bytes;
                let size = map.pool(pg.pool).map_or(0, |p| p.size as usize);
                if place.acting.len() < size {
                    pool.degraded_objects += usage.objects;
                }
            }
        }
    }
    let full = inner.full_state();
    for (id, pool) in &mut pools {
        pool.full_level = full
            .pools
            .get(id)
            .map_or_else(Default::default, |p| p.level);
    }
    stats.full_osds = full
        .osds
        .values()
        .filter(|osd| osd.level > rados::FullLevel::Ok)
        .map(|osd| (osd.id, osd.level))
        .collect();
    stats.objects = pools.values().map(|pool| pool.objects).sum();
    stats.pools = pools.into_values().collect();
    stats
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_counts_are_bounded_attributed_and_reset() {
        let stats = Stats::new(3, 0);
        stats.record_access(1, "a", true, 10);
        stats.record_access(1, "a", false, 4);
        stats.record_access(2, "a", true, 1);
        stats.record_access(1, "b", true, 2);
        // The table is full (three objects): a fourth is counted, not attributed; a known
        // object still is.
        stats.record_access(2, "c", false, 7);
        stats.record_access(1, "b", true, 3);
        let counts = stats.take_access_counts();
        assert_eq!(counts.objects.len(), 3);
        assert_eq!(
            counts.objects[&(1, "a".to_string())],
            ObjectAccess {
                reads: 1,
                writes: 1,
                read_bytes: 10,
                write_bytes: 4
            }
        );
        assert_eq!(counts.objects[&(2, "a".to_string())].read_bytes, 1);
        assert_eq!(counts.objects[&(1, "b".to_string())].reads, 2);
        assert_eq!(counts.objects[&(1, "b".to_string())].read_bytes, 5);
        assert!(!counts.objects.contains_key(&(2, "c".to_string())));
        assert_eq!(counts.untracked.writes, 1);
        assert_eq!(counts.untracked.write_bytes, 7);
        // A new period starts empty, with room for three objects again.
        stats.record_access(2, "c", false, 7);
        let next = stats.take_access_counts();
        assert_eq!(next.objects.len(), 1);
        assert_eq!(next.objects[&(2, "c".to_string())].writes, 1);
        assert_eq!(next.untracked, ObjectAccess::default());
        // A zero bound turns the table off.
        let off = Stats::new(0, 0);
        off.record_access(1, "a", true, 1);
        assert_eq!(off.take_access_counts(), AccessCounts::default());
    }
}
