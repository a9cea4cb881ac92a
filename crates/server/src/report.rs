//! What the admin API reports, as plain serializable types (the CLI decodes the same types),
//! and how they are computed from a [`Cluster`]: OSD tree and usage, pools, PG states, space.

use std::collections::BTreeMap;

use cluster::{placement, Cluster, OsdStats};
use serde::{Deserialize, Serialize};

/// One OSD as `osd tree` shows it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct OsdEntry {
    /// Id.
    pub id: i32,
    /// Host (failure domain).
    pub host: String,
    /// Device class.
    pub class: String,
    /// Serving.
    pub up: bool,
    /// Holding data (CRUSH places on it).
    pub is_in: bool,
    /// CRUSH weight (TiB by convention).
    pub weight: f64,
    /// Override weight, 0..=1: the share of its CRUSH placements the OSD keeps (0 when out;
    /// `strata osd reweight`).
    #[serde(default = "full_reweight")]
    pub reweight: f64,
}

fn full_reweight() -> f64 {
    1.0
}

/// One OSD's space and load, as `osd df` shows it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct OsdUsage {
    /// Id.
    pub id: i32,
    /// Host.
    pub host: String,
    /// Device class.
    pub class: String,
    /// Device capacity.
    pub total_bytes: u64,
    /// Device bytes allocated to data.
    pub allocated_bytes: u64,
    /// Object bytes stored.
    pub stored_bytes: u64,
    /// Free bytes.
    pub free_bytes: u64,
    /// Metadata (onodes + omap) bytes.
    pub metadata_bytes: u64,
    /// Objects (replicas counted where they are).
    pub objects: u64,
    /// PGs mapped to it by the current map (in their up or acting set), as `ceph osd df`
    /// counts them.
    pub pgs: u64,
    /// Device reads and writes since open.
    pub device_ops: u64,
    /// Share of time the device was busy since open, 0..=1.
    pub busy_fraction: f64,
}

/// One pool.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PoolEntry {
    /// Id.
    pub id: i64,
    /// Name.
    pub name: String,
    /// Replicas.
    pub size: u32,
    /// Replicas needed to write.
    pub min_size: u32,
    /// PGs.
    pub pg_num: u32,
    /// CRUSH rule.
    pub crush_rule: String,
    /// Device class the rule takes.
    pub device_class: Option<String>,
    /// Objects (once, not per replica).
    pub objects: u64,
    /// Objects with fewer up-to-date replicas than `size`.
    pub degraded_objects: u64,
    /// Object bytes stored (once, not per replica).
    pub stored_bytes: u64,
    /// Device bytes allocated over all replicas.
    pub allocated_bytes: u64,
    /// `1 - stored × size / allocated` (for an erasure-coded pool `stored × (k + m) / k`):
    /// allocated space holding no data (allocation-unit padding), redundancy factored out.
    pub data_hole_fraction: f64,
    /// Metadata bytes (object records and omap) over all replicas.
    pub metadata_bytes: u64,
    /// The erasure-code profile of an erasure-coded pool (`size` is then k+m; `erasure` when
    /// the backend does not give the profile); absent for a replicated one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub erasure: Option<String>,
    /// Bytes the pool may store (`osd pool set POOL quota_max_bytes`); 0: no quota.
    #[serde(default)]
    pub quota_max_bytes: u64,
    /// Objects the pool may hold; 0: no quota.
    #[serde(default)]
    pub quota_max_objects: u64,
}

/// Cluster-wide space, as `df` shows it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Usage {
    /// Capacity of all OSDs.
    pub total_bytes: u64,
    /// Device bytes allocated to data over all OSDs (replicas included).
    pub allocated_bytes: u64,
    /// Object bytes stored over all OSDs (replicas included).
    pub stored_bytes: u64,
    /// Free bytes.
    pub free_bytes: u64,
    /// `1 - stored / allocated`: allocated space holding no data.
    pub data_hole_fraction: f64,
    /// Metadata bytes: onodes + omap (key + value) over all OSDs.
    pub metadata_bytes: u64,
    /// Metadata database files over all OSDs.
    pub metadata_file_bytes: u64,
    /// Objects once (not per replica).
    pub objects: u64,
    /// Object replicas over all OSDs.
    pub object_replicas: u64,
}

/// Counts of PGs by state (`active+clean`, `active+undersized+degraded`, `remapped`,
/// `inactive`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct PgSummary {
    /// PGs over all pools.
    pub total: u64,
    /// By state.
    pub states: BTreeMap<String, u64>,
    /// PGs with fewer acting replicas than the pool's size.
    pub degraded: u64,
    /// PGs below min_size (no writes).
    pub inactive: u64,
    /// PGs waiting for recovery (acting differs from up).
    pub remapped: u64,
    /// PGs for which CRUSH finds fewer OSDs than the pool's size, kept at that size on OSDs
    /// that held them before (`active+clean+remapped`, as Ceph shows them).
    #[serde(default)]
    pub short_up: u64,
    /// PGs whose backfill waits because a new member is past `backfillfull_ratio`
    /// (`backfill_toofull`).
    #[serde(default)]
    pub backfill_toofull: u64,
}

/// Recovery counters.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Recovery {
    /// PGs waiting for recovery after the last pass.
    pub pgs_pending: u64,
    /// PGs recovered since start.
    pub pgs_recovered: u64,
    /// Object copies written to another OSD by recovery, backfill and repairs (read,
    /// scrub, a write's repair of its primary).
    pub objects_copied: u64,
    /// Data bytes of those copies.
    pub bytes_copied: u64,
    /// Copies removed from OSDs that no longer hold the PG.
    pub objects_removed: u64,
    /// Bad copies repaired.
    pub objects_repaired: u64,
    /// Errors (retried).
    pub errors: u64,
}

/// `GET /status`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Status {
    /// `HEALTH_OK`, `HEALTH_WARN` (an OSD nearly full among others), or `HEALTH_ERR` when the
    /// last scrub left errors or an OSD is full (reasons in `checks`, Ceph's check names
    /// `OSD_NEARFULL` and `OSD_FULL` first).
    pub health: String,
    /// Why the cluster is not healthy.
    pub checks: Vec<String>,
    /// Map epoch.
    pub epoch: u64,
    /// OSDs.
    pub osds: Vec<OsdEntry>,
    /// Pools.
    pub pools: Vec<PoolEntry>,
    /// PG states.
    pub pgs: PgSummary,
    /// Space.
    pub usage: Usage,
    /// Recovery.
    pub recovery: Recovery,
    /// The balancer, where the backend has strata's (the embedded cluster).
    #[serde(default)]
    pub balancer: Option<crate::balancer::BalancerStatus>,
    /// The cache tiers: configuration and counters (filled by the admin endpoint).
    #[serde(default)]
    pub tiers: Vec<crate::tier_api::TierEntry>,
    /// Client I/O, recovery and S3 rates over the last seconds (`ceph -s`'s `io:`), once the
    /// admin endpoint has two samples ([`crate::rates`]).
    #[serde(default)]
    pub io: Option<crate::rates::Rates>,
}

/// The OSD tree.
pub fn osd_tree(cluster: &Cluster) -> Vec<OsdEntry> {
    let map = cluster.osd_map();
    cluster
        .config()
        .osds
        .iter()
        .map(|osd| OsdEntry {
            id: osd.id,
            host: osd.host.clone(),
            class: osd.class.clone(),
            up: map.is_up(osd.id),
            is_in: map.is_in(osd.id),
            weight: map
                .crush_item_weight(osd.id)
                .map_or(0.0, |w| f64::from(w) / 65536.0),
            reweight: f64::from(map.osd_weight(osd.id)) / 65536.0,
        })
        .collect()
}

/// PGs of every pool each OSD is in the up or acting set of (once per PG).
pub fn pgs_per_osd(cluster: &Cluster) -> BTreeMap<i32, u64> {
    let map = cluster.osd_map();
    let mut counts = BTreeMap::new();
    for pool in map.pools().values() {
        for pg in pool.pgs() {
            let place = placement(&map, pg);
            let mut members: Vec<i32> = place.up.iter().chain(&place.acting).copied().collect();
            members.sort_unstable();
            members.dedup();
            for osd in members {
                *counts.entry(osd).or_default() += 1;
            }
        }
    }
    counts
}

/// Per-OSD space and load; `pgs` from [`pgs_per_osd`].
pub fn osd_usage(stats: &[OsdStats], pgs: &BTreeMap<i32, u64>) -> Vec<OsdUsage> {
    stats
        .iter()
        .map(|osd| {
            let statfs = &osd.statfs;
            OsdUsage {
                id: osd.id,
                host: osd.host.clone(),
                class: osd.class.clone(),
                total_bytes: statfs.total_bytes,
                allocated_bytes: statfs.allocated_bytes,
                stored_bytes: statfs.stored_bytes,
                free_bytes: statfs.free_bytes,
                metadata_bytes: statfs.onode_bytes + statfs.omap_bytes,
                objects: statfs.objects,
                pgs: pgs.get(&osd.id).copied().unwrap_or(0),
                device_ops: osd.device.read.ops + osd.device.write.ops,
                busy_fraction: osd.busy_fraction(),
            }
        })
        .collect()
}

/// Cluster-wide space from per-OSD statistics; `objects` is counted once (from the pools).
pub fn usage(stats: &[OsdStats], objects: u64) -> Usage {
    let mut usage = Usage {
        objects,
        ..Usage::default()
    };
    for osd in stats {
        let statfs = &osd.statfs;
        usage.total_bytes += statfs.total_bytes;
        usage.allocated_bytes += statfs.allocated_bytes;
        usage.stored_bytes += statfs.stored_bytes;
        usage.free_bytes += statfs.free_bytes;
        usage.metadata_bytes += statfs.onode_bytes + statfs.omap_bytes;
        usage.metadata_file_bytes += statfs.metadata_file_bytes;
        usage.object_replicas += statfs.objects;
    }
    usage.data_hole_fraction = hole_fraction(usage.stored_bytes, usage.allocated_bytes);
    usage
}

/// `1 - stored / allocated`, 0 when nothing is allocated; never below 0 (a degraded pool's
/// primary copies may outnumber its allocated replicas).
fn hole_fraction(stored_bytes: u64, allocated_bytes: u64) -> f64 {
    if allocated_bytes == 0 {
        return 0.0;
    }
    (1.0 - stored_bytes as f64 / allocated_bytes as f64).max(0.0)
}

/// PG states over every pool.
pub fn pg_summary(cluster: &Cluster) -> PgSummary {
    let map = cluster.osd_map();
    let toofull: std::collections::BTreeSet<_> = cluster.backfill_toofull().into_iter().collect();
    let mut summary = PgSummary::default();
    for pool in map.pools().values() {
        for pg in pool.pgs() {
            let place = placement(&map, pg);
            let size = pool.size as usize;
            let min_size = pool.min_size as usize;
            let mut state = Vec::new();
            if place.acting.len() < min_size.max(1) {
                state.push("inactive");
                summary.inactive += 1;
            } else {
                state.push("active");
            }
            if place.acting.len() < size {
                state.push("undersized+degraded");
                summary.degraded += 1;
            }
            let short_up = place.up.len() < size && place.acting.len() >= size;
            if place.acting != place.up && !short_up {
                state.push("remapped");
                summary.remapped += 1;
            }
            if toofull.contains(&pg) {
                state.push("backfill_toofull");
                summary.backfill_toofull += 1;
            }
            if state == ["active"] {
                state.push("clean");
            }
            if short_up && place.acting != place.up {
                state.push("remapped");
                summary.short_up += 1;
            }
            summary.total += 1;
            *summary.states.entry(state.join("+")).or_default() += 1;
        }
    }
    summary
}

/// Pools with their object counts.
pub async fn pools(cluster: &Cluster) -> rados::Result<Vec<PoolEntry>> {
    use rados::Rados;
    let stats = cluster.cluster_stats().await?;
    let mut entries = pool_entries(cluster.pool_list().await?, &stats);
    for entry in &mut entries {
        if let Ok(settings) = cluster.pool_settings(&entry.name) {
            entry.quota_max_bytes = settings.quota_max_bytes;
            entry.quota_max_objects = settings.quota_max_objects;
        }
        let Some(profile) = cluster.erasure_profile(&entry.name) else {
            continue;
        };
        // The data and parity of k + m shards over k of data: the ideal raw share.
        entry.data_hole_fraction = hole_fraction(
            entry.stored_bytes.saturating_mul(u64::from(profile.size())) / u64::from(profile.k),
            entry.allocated_bytes,
        );
        entry.erasure = Some(profile.to_string());
    }
    Ok(entries)
}

/// Each pool of `infos` with its usage from `stats` (any backend's).
pub fn pool_entries(infos: Vec<rados::PoolInfo>, stats: &rados::ClusterStats) -> Vec<PoolEntry> {
    let by_name: BTreeMap<&str, &rados::PoolStats> =
        stats.pools.iter().map(|p| (p.name.as_str(), p)).collect();
    infos
        .into_iter()
        .map(|info| {
            let stats = by_name.get(info.name.as_str());
            let stored_bytes = stats.map_or(0, |s| s.stored_bytes);
            let allocated_bytes = stats.map_or(0, |s| s.allocated_bytes);
            let erasure = info.erasure_coded.then(|| "erasure".to_string());
            PoolEntry {
                objects: stats.map_or(0, |s| s.objects),
                degraded_objects: stats.map_or(0, |s| s.degraded_objects),
                stored_bytes,
                allocated_bytes,
                data_hole_fraction: hole_fraction(
                    stored_bytes.saturating_mul(u64::from(info.size)),
                    allocated_bytes,
                ),
                metadata_bytes: stats.map_or(0, |s| s.metadata_bytes),
                id: info.id,
                name: info.name,
                size: info.size,
                min_size: info.min_size,
                pg_num: info.pg_num,
                crush_rule: info.crush_rule,
                device_class: info.device_class,
                erasure,
                quota_max_bytes: 0,
                quota_max_objects: 0,
            }
        })
        .collect()
}

/// Recovery counters.
pub fn recovery(cluster: &Cluster) -> Recovery {
    let progress = cluster.recovery_progress();
    Recovery {
        pgs_pending: progress.pgs_pending,
        pgs_recovered: progress.pgs_recovered,
        objects_copied: progress.objects_copied,
        bytes_copied: progress.bytes_copied,
        objects_removed: progress.objects_removed,
        objects_repaired: progress.objects_repaired,
        errors: progress.errors,
    }
}

/// Ceph's space health checks from the cluster's full state: `OSD_FULL` (HEALTH_ERR),
/// `OSD_BACKFILLFULL`, `OSD_NEARFULL` and `POOL_FULL` (HEALTH_WARN; the OSD_FULL behind it
/// is the error), each OSD counted at its own level only. Returns the checks and whether
/// one is an error.
fn space_checks(cluster: &Cluster) -> (Vec<String>, bool) {
    use cluster::full::FullLevel;
    let state = cluster.full_state();
    let config = cluster.config();
    let mut checks = Vec::new();
    for (level, check, ratio) in [
        (FullLevel::Full, "OSD_FULL", config.full_ratio),
        (
            FullLevel::Backfillfull,
            "OSD_BACKFILLFULL",
            config.backfillfull_ratio,
        ),
        (FullLevel::Nearfull, "OSD_NEARFULL", config.nearfull_ratio),
    ] {
        let osds = state.osds_at(level);
        if osds.is_empty() {
            continue;
        }
        let named: Vec<String> = osds
            .iter()
            .map(|osd| format!("osd.{} ({:.2}%)", osd.id, 100.0 * osd.used_ratio))
            .collect();
        checks.push(format!(
            "{check}: {} {} osd(s) (used >= {}_ratio {ratio}): {}",
            osds.len(),
            level.name(),
            level.name(),
            named.join(", ")
        ));
    }
    let full_pools = state.pools_at(FullLevel::Full);
    if !full_pools.is_empty() {
        let named: Vec<String> = full_pools
            .iter()
            .map(|pool| {
                let osd = pool
                    .worst_osd
                    .map_or_else(String::new, |osd| format!(", osd.{osd}"));
                format!("pool '{}' is full (no space{osd})", pool.name)
            })
            .collect();
        checks.push(format!(
            "POOL_FULL: {} pool(s) full: writes adding data are refused, reads and removals \
             work: {}",
            full_pools.len(),
            named.join("; ")
        ));
    }
    let error = !state.osds_at(FullLevel::Full).is_empty();
    (checks, error)
}

/// The whole status.
pub async fn status(cluster: &Cluster) -> rados::Result<Status> {
    let osds = osd_tree(cluster);
    let pools = pools(cluster).await?;
    let pgs = pg_summary(cluster);
    let objects = pools.iter().map(|p| p.objects).sum();
    let osd_stats = cluster.osd_stats();
    let usage = usage(&osd_stats, objects);
    let (mut checks, full) = space_checks(cluster);
    let down = osds.iter().filter(|o| !o.up).count();
    if down > 0 {
        checks.push(format!("{down} osds down"));
    }
    let out = osds.iter().filter(|o| !o.is_in).count();
    if out > 0 {
        checks.push(format!("{out} osds out"));
    }
    if pgs.degraded > 0 {
        checks.push(format!("{} pgs degraded", pgs.degraded));
    }
    if pgs.inactive > 0 {
        checks.push(format!("{} pgs inactive", pgs.inactive));
    }
    if pgs.backfill_toofull > 0 {
        checks.push(format!(
            "PG_BACKFILL_FULL: {} pgs backfill_toofull (a new member is past \
             backfillfull_ratio {}: the PG waits for space)",
            pgs.backfill_toofull,
            cluster.config().backfillfull_ratio
        ));
    }
    if pgs.remapped > 0 {
        checks.push(format!("{} pgs remapped (recovering)", pgs.remapped));
    }
    if pgs.short_up > 0 {
        checks.push(format!(
            "{} pgs for which CRUSH finds fewer OSDs than the pool's size (kept on their \
             earlier holders; check weights and out OSDs)",
            pgs.short_up
        ));
    }
    // Settings of cluster.toml an OSD's store does not follow (its min_alloc_size).
    for osd in cluster
        .config()
        .osds
        .iter()
        .filter_map(|o| cluster.osd(o.id))
    {
        if let Some(warning) = osd.config_warning() {
            checks.push(warning.to_string());
        }
    }
    // As Ceph's OBJECT_UNFOUND: objects no replica can provide.
    let unfound = cluster.unfound_objects();
    if !unfound.is_empty() {
        let pgs: std::collections::BTreeSet<&str> =
            unfound.iter().map(|object| object.pg.as_str()).collect();
        checks.push(format!(
            "OBJECT_UNFOUND: {} unfound objects in {} pgs ({}): `strata pg ls` lists them, \
             `strata pg mark-unfound-lost revert|delete PGID` resolves them",
            unfound.len(),
            pgs.len(),
            pgs.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    let peering = cluster.pgs_peering();
    if peering > 0 {
        checks.push(format!("{peering} pgs peering"));
    }
    // As Ceph: copies a scrub found bad and did not repair are possible data damage.
    let scrub_errors = cluster.scrub_errors();
    if scrub_errors > 0 {
        checks.push(format!(
            "{scrub_errors} scrub errors: possible data damage (strata scrub --repair)"
        ));
    }
    Ok(Status {
        health: if scrub_errors > 0 || full {
            "HEALTH_ERR".into()
        } else if checks.is_empty() {
            "HEALTH_OK".into()
        } else {
            "HEALTH_WARN".into()
        },
        checks,
        epoch: cluster.epoch(),
        osds,
        pools,
        pgs,
        usage,
        recovery: recovery(cluster),
        balancer: None,
        tiers: Vec::new(),
        io: None,
    })
}

/// One OSD's load in the last completed statistics period (`GET /api/stats`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct OsdPeriod {
    /// Id.
    pub id: i32,
    /// Device reads in the period.
    pub read_ops: u64,
    /// Device writes in the period.
    pub write_ops: u64,
    /// Device bytes read.
    pub read_bytes: u64,
    /// Device bytes written.
    pub write_bytes: u64,
    /// Median device read latency, µs.
    pub read_latency_us_p50: f64,
    /// 99th percentile device read latency, µs.
    pub read_latency_us_p99: f64,
    /// Median device write latency, µs.
    pub write_latency_us_p50: f64,
    /// 99th percentile device write latency, µs.
    pub write_latency_us_p99: f64,
    /// Share of the period the device had an operation in flight, 0..=1.
    pub busy_fraction: f64,
    /// Operations in flight on the device at the period's end.
    pub queue_depth: u64,
    /// Largest queue depth an operation found on arrival in the period.
    pub queue_depth_max: u64,
    /// Object reads the OSD served.
    pub object_read_ops: u64,
    /// Transactions the OSD applied.
    pub object_write_ops: u64,
    /// Median object read latency, µs.
    pub object_read_latency_us_p50: f64,
    /// Median transaction latency, µs.
    pub object_write_latency_us_p50: f64,
}

/// One object's accesses in the last completed period.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ObjectPeriod {
    /// Pool name (the pool id when the pool is gone).
    pub pool: String,
    /// Object name.
    pub object: String,
    /// Reads.
    pub reads: u64,
    /// Mutations.
    pub writes: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Data bytes written.
    pub write_bytes: u64,
}

/// `GET /api/stats`: the last completed statistics period (`stats_period_s` of the cluster
/// config), or none before the first has ended.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PeriodReport {
    /// The configured period length, s (0: periods are off).
    pub stats_period_s: u64,
    /// The last completed period.
    pub period: Option<PeriodStats>,
}

/// One completed period.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PeriodStats {
    /// Start, ns since the Unix epoch.
    pub start_ns: u64,
    /// End, ns since the Unix epoch.
    pub end_ns: u64,
    /// Per-OSD load.
    pub osds: Vec<OsdPeriod>,
    /// Objects the access table attributed accesses to in the period.
    pub objects_tracked: u64,
    /// The most accessed objects (reads + writes), at most the `top` asked for.
    pub objects: Vec<ObjectPeriod>,
    /// Accesses to objects beyond the table's bound (`access_objects_max`): reads.
    pub untracked_reads: u64,
    /// Accesses to objects beyond the table's bound: writes.
    pub untracked_writes: u64,
}

/// Per-OSD figures of one period.
pub fn osd_period(osd: &OsdStats) -> OsdPeriod {
    let device = &osd.device;
    OsdPeriod {
        id: osd.id,
        read_ops: device.read.ops,
        write_ops: device.write.ops,
        read_bytes: device.read.bytes,
        write_bytes: device.write.bytes,
        read_latency_us_p50: device.read.latency_us_p50(),
        read_latency_us_p99: device.read.latency_us_p99(),
        write_latency_us_p50: device.write.latency_us_p50(),
        write_latency_us_p99: device.write.latency_us_p99(),
        busy_fraction: osd.busy_fraction(),
        queue_depth: device.queue_depth,
        queue_depth_max: device.queue_depth_at_arrival.max(),
        object_read_ops: osd.ops.read.ops,
        object_write_ops: osd.ops.write.ops,
        object_read_latency_us_p50: osd.ops.read.latency_us_p50(),
        object_write_latency_us_p50: osd.ops.write.latency_us_p50(),
    }
}

/// The last completed period with its `top` most accessed objects.
pub fn period(cluster: &Cluster, top: usize) -> PeriodReport {
    let stats_period_s = cluster.config().stats_period_s;
    let Some(period) = cluster.last_stats_period() else {
        return PeriodReport {
            stats_period_s,
            period: None,
        };
    };
    let map = cluster.osd_map();
    let pool_name = |id: i64| {
        map.pools()
            .get(&id)
            .map_or_else(|| id.to_string(), |pool| pool.name.clone())
    };
    let mut ranked: Vec<_> = period.access.objects.iter().collect();
    ranked.sort_by(|(a_key, a), (b_key, b)| {
        (b.reads + b.writes)
            .cmp(&(a.reads + a.writes))
            .then_with(|| a_key.cmp(b_key))
    });
    let objects = ranked
        .into_iter()
        .take(top)
        .map(|((pool, object), access)| ObjectPeriod {
            pool: pool_name(*pool),
            object: object.clone(),
            reads: access.reads,
            writes: access.writes,
            read_bytes: access.read_bytes,
            write_bytes: access.write_bytes,
        })
        .collect();
    PeriodReport {
        stats_period_s,
        period: Some(PeriodStats {
            start_ns: period.start_ns,
            end_ns: period.end_ns,
            osds: period.osds.iter().map(osd_period).collect(),
            objects_tracked: period.access.objects.len() as u64,
            objects,
            untracked_reads: period.access.untracked.reads,
            untracked_writes: period.access.untracked.writes,
        }),
    }
}
