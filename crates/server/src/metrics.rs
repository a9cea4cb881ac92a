//! `GET /metrics`: the cluster in Prometheus text exposition format (version 0.0.4).
//!
//! Counters are cumulative since the server opened the cluster (Prometheus computes rates);
//! OSD latencies are summaries (quantiles, `_sum`, `_count`) of the same cumulative
//! histograms, S3 request latencies histograms by operation ([`render_requests`]). Health is
//! `strata_health_status` (0 OK, 1 WARN, 2 ERR, as Ceph's exporter). The output passes
//! `promtool check metrics` (tested in `tests/metrics.rs`). The
//! `strata_osd_period_*` and `strata_stats_period_*` gauges are the last completed statistics
//! period's (`stats_period_s`): per-OSD ops, bytes, busy ratio, queue depth and latency
//! quantiles of that period alone; absent before the first period ends.

use std::fmt::Write;

use cluster::{Cluster, OsdStats};
use device::OpStats;

use crate::report;

/// Renders every metric (the S3 gateway's counters when it runs).
pub async fn render(
    cluster: &Cluster,
    gateway: Option<gateway::GatewayStats>,
) -> rados::Result<String> {
    let stats = cluster.osd_stats();
    let pools = report::pools(cluster).await?;
    let pgs = report::pg_summary(cluster);
    let recovery = report::recovery(cluster);
    let status = report::status(cluster).await?;
    let mut out = Text::default();
    render_health(&mut out, &status);
    out.family(
        "strata_scrub_errors",
        "gauge",
        "Bad copies the last scrub found and did not repair.",
    );
    out.sample("strata_scrub_errors", &[], cluster.scrub_errors() as f64);
    out.family(
        "strata_objects_unfound",
        "gauge",
        "Objects no replica can provide (OBJECT_UNFOUND).",
    );
    out.sample(
        "strata_objects_unfound",
        &[],
        cluster.unfound_objects().len() as f64,
    );
    out.family("strata_pgs_peering", "gauge", "PGs peering.");
    out.sample("strata_pgs_peering", &[], cluster.pgs_peering() as f64);

    out.family("strata_cluster_epoch", "gauge", "Cluster map epoch.");
    out.sample("strata_cluster_epoch", &[], cluster.epoch() as f64);

    out.family("strata_osd_up", "gauge", "1 if the OSD is up.");
    for osd in &stats {
        out.sample(
            "strata_osd_up",
            &osd_labels(osd),
            f64::from(u8::from(osd.up)),
        );
    }
    out.family("strata_osd_in", "gauge", "1 if the OSD is in.");
    for osd in &stats {
        out.sample(
            "strata_osd_in",
            &osd_labels(osd),
            f64::from(u8::from(osd.is_in)),
        );
    }
    render_device_ops(&mut out, &stats);
    out.family(
        "strata_osd_busy_seconds_total",
        "counter",
        "Time the OSD's device had at least one operation in flight.",
    );
    for osd in &stats {
        out.sample(
            "strata_osd_busy_seconds_total",
            &id_label(osd),
            osd.device.busy_ns as f64 / 1e9,
        );
    }
    out.family(
        "strata_osd_busy_ratio",
        "gauge",
        "Share of time since open the OSD's device was busy.",
    );
    for osd in &stats {
        out.sample("strata_osd_busy_ratio", &id_label(osd), osd.busy_fraction());
    }
    out.family(
        "strata_osd_queue_depth",
        "gauge",
        "Operations in flight on the OSD's device.",
    );
    for osd in &stats {
        out.sample(
            "strata_osd_queue_depth",
            &id_label(osd),
            osd.device.queue_depth as f64,
        );
    }
    render_space(&mut out, &stats);
    render_data_cache(&mut out, &stats);

    out.family(
        "strata_pool_objects",
        "gauge",
        "Objects in the pool (once).",
    );
    for pool in &pools {
        out.sample(
            "strata_pool_objects",
            &[("pool", pool.name.clone())],
            pool.objects as f64,
        );
    }
    out.family(
        "strata_pool_degraded_objects",
        "gauge",
        "Objects of the pool with fewer up-to-date replicas than its size.",
    );
    for pool in &pools {
        out.sample(
            "strata_pool_degraded_objects",
            &[("pool", pool.name.clone())],
            pool.degraded_objects as f64,
        );
    }

    out.family("strata_pgs", "gauge", "PGs by state.");
    for (state, count) in &pgs.states {
        out.sample("strata_pgs", &[("state", state.clone())], *count as f64);
    }
    out.family("strata_pgs_all", "gauge", "PGs over all pools.");
    out.sample("strata_pgs_all", &[], pgs.total as f64);
    out.family(
        "strata_pgs_degraded",
        "gauge",
        "PGs with fewer acting replicas than their pool's size.",
    );
    out.sample("strata_pgs_degraded", &[], pgs.degraded as f64);

    out.family(
        "strata_recovery_pgs_pending",
        "gauge",
        "PGs waiting for recovery after the last pass.",
    );
    out.sample(
        "strata_recovery_pgs_pending",
        &[],
        recovery.pgs_pending as f64,
    );
    let recovery_counters = [
        (
            "strata_recovery_pgs_recovered_total",
            recovery.pgs_recovered,
            "PGs brought to their up set.",
        ),
        (
            "strata_recovery_objects_copied_total",
            recovery.objects_copied,
            "Object copies written by recovery, backfill and repairs (read, scrub, write).",
        ),
        (
            "strata_recovery_bytes_copied_total",
            recovery.bytes_copied,
            "Data bytes of the copies counted in strata_recovery_objects_copied_total.",
        ),
        (
            "strata_recovery_objects_repaired_total",
            recovery.objects_repaired,
            "Bad copies repaired.",
        ),
        (
            "strata_recovery_errors_total",
            recovery.errors,
            "Recovery failures (retried).",
        ),
    ];
    counters(&mut out, &recovery_counters);
    if let Some(period) = cluster.last_stats_period() {
        render_period(&mut out, &period);
    }
    if let Some(gateway) = gateway {
        render_gateway(&mut out, gateway);
    }
    Ok(out.0)
}

/// The metrics a backend without the embedded cluster's per-OSD internals can give, from its
/// status and OSD usage (the same metric names as [`render`]).
pub fn render_summary(
    status: &report::Status,
    usage: &[report::OsdUsage],
    gateway: Option<gateway::GatewayStats>,
) -> String {
    let mut out = Text::default();
    render_health(&mut out, status);
    out.family("strata_cluster_epoch", "gauge", "Cluster map epoch.");
    out.sample("strata_cluster_epoch", &[], status.epoch as f64);
    let labels = |osd: &report::OsdEntry| {
        vec![
            ("osd", osd.id.to_string()),
            ("host", osd.host.clone()),
            ("class", osd.class.clone()),
        ]
    };
    out.family("strata_osd_up", "gauge", "1 if the OSD is up.");
    for osd in &status.osds {
        out.sample("strata_osd_up", &labels(osd), f64::from(u8::from(osd.up)));
    }
    out.family("strata_osd_in", "gauge", "1 if the OSD is in.");
    for osd in &status.osds {
        out.sample(
            "strata_osd_in",
            &labels(osd),
            f64::from(u8::from(osd.is_in)),
        );
    }
    out.family(
        "strata_pool_objects",
        "gauge",
        "Objects in the pool (once).",
    );
    for pool in &status.pools {
        out.sample(
            "strata_pool_objects",
            &[("pool", pool.name.clone())],
            pool.objects as f64,
        );
    }
    out.family(
        "strata_pool_degraded_objects",
        "gauge",
        "Objects of the pool with fewer up-to-date replicas than its size.",
    );
    for pool in &status.pools {
        out.sample(
            "strata_pool_degraded_objects",
            &[("pool", pool.name.clone())],
            pool.degraded_objects as f64,
        );
    }
    out.family("strata_pgs", "gauge", "PGs by state.");
    for (state, count) in &status.pgs.states {
        out.sample("strata_pgs", &[("state", state.clone())], *count as f64);
    }
    out.family("strata_osd_total_bytes", "gauge", "Device capacity.");
    for osd in usage {
        out.sample(
            "strata_osd_total_bytes",
            &[("osd", osd.id.to_string())],
            osd.total_bytes as f64,
        );
    }
    out.family("strata_osd_free_bytes", "gauge", "Free device bytes.");
    for osd in usage {
        out.sample(
            "strata_osd_free_bytes",
            &[("osd", osd.id.to_string())],
            osd.free_bytes as f64,
        );
    }
    if let Some(gateway) = gateway {
        render_gateway(&mut out, gateway);
    }
    out.0
}

/// Health as a number (0 `HEALTH_OK`, 1 `HEALTH_WARN`, 2 `HEALTH_ERR`), its checks, the PGs
/// waiting for recovery and the degraded ones.
fn render_health(out: &mut Text, status: &report::Status) {
    out.family(
        "strata_health_status",
        "gauge",
        "Cluster health: 0 HEALTH_OK, 1 HEALTH_WARN, 2 HEALTH_ERR.",
    );
    let level = match status.health.as_str() {
        "HEALTH_OK" => 0.0,
        "HEALTH_WARN" => 1.0,
        _ => 2.0,
    };
    out.sample("strata_health_status", &[], level);
    out.family(
        "strata_health_checks",
        "gauge",
        "Health checks failing (the reasons `strata status` lists).",
    );
    out.sample("strata_health_checks", &[], status.checks.len() as f64);
    out.family(
        "strata_pgs_remapped",
        "gauge",
        "PGs whose acting set differs from their up set (recovering).",
    );
    out.sample("strata_pgs_remapped", &[], status.pgs.remapped as f64);
}

/// The S3 front's requests: a counter by operation and status, and a latency histogram by
/// operation.
pub fn render_requests(stats: &gateway::RequestStats) -> String {
    let mut out = Text::default();
    out.family(
        "strata_s3_requests_total",
        "counter",
        "S3 requests answered, by operation and HTTP status.",
    );
    for ((operation, status), count) in &stats.requests {
        let labels = [
            ("operation", operation.to_string()),
            ("status", status.to_string()),
        ];
        out.sample("strata_s3_requests_total", &labels, *count as f64);
    }
    let name = "strata_s3_request_duration_seconds";
    out.family(
        name,
        "histogram",
        "S3 request latency from arrival to the response's headers, by operation.",
    );
    for (operation, histogram) in &stats.latency {
        let mut cumulative = 0;
        let bounds = gateway::LATENCY_BUCKETS_S
            .iter()
            .map(|bound| bound.to_string())
            .chain(std::iter::once("+Inf".to_string()));
        for (bound, count) in bounds.zip(histogram.buckets) {
            cumulative += count;
            let labels = [("operation", operation.to_string()), ("le", bound)];
            out.sample(&format!("{name}_bucket"), &labels, cumulative as f64);
        }
        let labels = [("operation", operation.to_string())];
        out.sample(&format!("{name}_sum"), &labels, histogram.sum_s);
        out.sample(&format!("{name}_count"), &labels, histogram.count as f64);
    }
    out.0
}

/// The cache tiers: client ops, hits and misses, promotion, flush and eviction counters (as
/// `ceph osd pool stats` shows them, rates by `rate()`), and the cache's occupancy, labelled
/// by cache and base pool.
pub fn render_tiers(entries: &[crate::tier_api::TierEntry]) -> String {
    let mut out = Text::default();
    if entries.is_empty() {
        return out.0;
    }
    type Field = fn(&tier::TierStats) -> u64;
    let counters: [(&str, &str, Field); 12] = [
        (
            "strata_tier_reads_total",
            "Client ops on the base pool that read.",
            |s| s.reads,
        ),
        (
            "strata_tier_writes_total",
            "Client ops on the base pool that wrote.",
            |s| s.writes,
        ),
        (
            "strata_tier_hits_total",
            "Ops served by the cache without reading the base pool.",
            |s| s.hits,
        ),
        (
            "strata_tier_misses_total",
            "Ops on objects the cache did not hold.",
            |s| s.misses,
        ),
        (
            "strata_tier_proxied_total",
            "Ops sent to the base pool as they were.",
            |s| s.proxied,
        ),
        (
            "strata_tier_promotions_total",
            "Promotions (an object or blocks of it copied in).",
            |s| s.promotions,
        ),
        (
            "strata_tier_promoted_bytes_total",
            "Bytes promoted into the cache.",
            |s| s.promoted_bytes,
        ),
        (
            "strata_tier_flushes_total",
            "Dirty objects written back to the base pool.",
            |s| s.flushes,
        ),
        (
            "strata_tier_flushed_bytes_total",
            "Bytes flushed to the base pool.",
            |s| s.flushed_bytes,
        ),
        (
            "strata_tier_evictions_total",
            "Objects evicted from the cache.",
            |s| s.evictions,
        ),
        (
            "strata_tier_writes_around_full_total",
            "Writes sent around a full cache to the base pool.",
            |s| s.writes_around_full,
        ),
        (
            "strata_tier_agent_waits_total",
            "Client ops that waited for an object the agent or a background promotion held.",
            |s| s.agent_waits,
        ),
    ];
    let labels = |entry: &crate::tier_api::TierEntry| {
        [
            ("cache_pool", entry.config.cache_pool.clone()),
            ("base_pool", entry.config.base_pool.clone()),
        ]
    };
    for (name, help, field) in counters {
        out.family(name, "counter", help);
        for entry in entries {
            out.sample(name, &labels(entry), field(&entry.stats) as f64);
        }
    }
    let gauges: [(&str, &str, Field); 4] = [
        (
            "strata_tier_objects",
            "Objects in the cache (whiteouts included).",
            |s| s.objects,
        ),
        (
            "strata_tier_dirty_objects",
            "Dirty objects in the cache.",
            |s| s.dirty_objects,
        ),
        (
            "strata_tier_cached_bytes",
            "Bytes of blocks present in the cache.",
            |s| s.cached_bytes,
        ),
        (
            "strata_tier_capacity_objects",
            "The admission policy's capacity in objects.",
            |s| s.capacity_objects,
        ),
    ];
    for (name, help, field) in gauges {
        out.family(name, "gauge", help);
        for entry in entries {
            out.sample(name, &labels(entry), field(&entry.stats) as f64);
        }
    }
    let name = "strata_tier_agent_wait_max_seconds";
    out.family(
        name,
        "gauge",
        "The longest wait of a client op for an object held by background work.",
    );
    for entry in entries {
        out.sample(
            name,
            &labels(entry),
            entry.stats.agent_wait_us_max as f64 / 1e6,
        );
    }
    out.0
}

/// The S3 gateway's data reclamation: what overwrites and deletes freed, what went through
/// the GC queue, and how often an index commit lost a race with another gateway.
fn render_gateway(out: &mut Text, stats: gateway::GatewayStats) {
    let gateway_counters = [
        (
            "strata_s3_pieces_removed_total",
            stats.pieces_removed,
            "Data objects removed because an overwrite, delete or abort made them unreachable.",
        ),
        (
            "strata_s3_gc_enqueued_total",
            stats.gc_enqueued,
            "Data objects whose removal failed and went to the GC queue.",
        ),
        (
            "strata_s3_pieces_retired_total",
            stats.pieces_retired,
            "Data objects an overwrite or delete replaced, queued for removal after the GC's wait.",
        ),
        (
            "strata_s3_gc_reclaimed_total",
            stats.gc_reclaimed,
            "Data objects removed by GC passes.",
        ),
        (
            "strata_s3_orphans_removed_total",
            stats.orphans_removed,
            "Unreferenced data objects removed by orphan collection (strata gc).",
        ),
        (
            "strata_s3_index_races_total",
            stats.index_races,
            "Index commits that found the entry changed by another gateway and were retried.",
        ),
        (
            "strata_s3_packs_written_total",
            stats.packs_written,
            "Pack objects written by small-object packing.",
        ),
        (
            "strata_s3_objects_packed_total",
            stats.objects_packed,
            "Small objects written into pack objects.",
        ),
        (
            "strata_s3_pack_ranges_logged_total",
            stats.pack_ranges_logged,
            "Dead ranges of packs logged for the pack GC (deletes and overwrites of packed objects).",
        ),
        (
            "strata_s3_packs_rewritten_total",
            stats.packs_rewritten,
            "Packs the pack GC rewrote without their dead ranges.",
        ),
        (
            "strata_s3_pack_bytes_reclaimed_total",
            stats.pack_bytes_reclaimed,
            "Dead bytes of the packs the pack GC rewrote.",
        ),
    ];
    counters(out, &gateway_counters);
}

/// Unlabelled counters: (name, value, help) each.
fn counters(out: &mut Text, rows: &[(&str, u64, &str)]) {
    for &(name, value, help) in rows {
        out.family(name, "counter", help);
        out.sample(name, &[], value as f64);
    }
}

fn render_device_ops(out: &mut Text, stats: &[OsdStats]) {
    type Pick = fn(&OsdStats) -> [(&'static str, &OpStats); 4];
    let device: Pick = |osd| {
        [
            ("read", &osd.device.read),
            ("write", &osd.device.write),
            ("flush", &osd.device.flush),
            ("discard", &osd.device.discard),
        ]
    };
    out.family(
        "strata_osd_device_ops_total",
        "counter",
        "Device operations completed.",
    );
    for osd in stats {
        for (op, ops) in device(osd) {
            out.sample(
                "strata_osd_device_ops_total",
                &op_labels(osd, op),
                ops.ops as f64,
            );
        }
    }
    out.family(
        "strata_osd_device_bytes_total",
        "counter",
        "Device bytes moved.",
    );
    for osd in stats {
        for (op, ops) in device(osd) {
            out.sample(
                "strata_osd_device_bytes_total",
                &op_labels(osd, op),
                ops.bytes as f64,
            );
        }
    }
    out.family(
        "strata_osd_device_errors_total",
        "counter",
        "Device operations that failed.",
    );
    for osd in stats {
        for (op, ops) in device(osd) {
            out.sample(
                "strata_osd_device_errors_total",
                &op_labels(osd, op),
                ops.errors as f64,
            );
        }
    }
    out.family(
        "strata_osd_device_latency_seconds",
        "summary",
        "Device latency since open.",
    );
    for osd in stats {
        for (op, ops) in device(osd).into_iter().take(2) {
            out.summary("strata_osd_device_latency_seconds", op_labels(osd, op), ops);
        }
    }
    out.family(
        "strata_osd_ops_total",
        "counter",
        "Object operations the OSD served (reads; writes = applied transactions).",
    );
    for osd in stats {
        for (op, ops) in [("read", &osd.ops.read), ("write", &osd.ops.write)] {
            out.sample("strata_osd_ops_total", &op_labels(osd, op), ops.ops as f64);
        }
    }
    out.family(
        "strata_osd_op_latency_seconds",
        "summary",
        "Object operation latency since open.",
    );
    for osd in stats {
        for (op, ops) in [("read", &osd.ops.read), ("write", &osd.ops.write)] {
            out.summary("strata_osd_op_latency_seconds", op_labels(osd, op), ops);
        }
    }
}

/// The last completed statistics period, as gauges.
fn render_period(out: &mut Text, period: &cluster::StatsPeriod) {
    out.family(
        "strata_stats_period_seconds",
        "gauge",
        "Length of the last completed statistics period.",
    );
    let length_ns = period.end_ns.saturating_sub(period.start_ns);
    out.sample("strata_stats_period_seconds", &[], length_ns as f64 / 1e9);
    out.family(
        "strata_stats_period_end_seconds",
        "gauge",
        "When the last completed statistics period ended (Unix time).",
    );
    out.sample(
        "strata_stats_period_end_seconds",
        &[],
        period.end_ns as f64 / 1e9,
    );
    out.family(
        "strata_stats_period_objects_accessed",
        "gauge",
        "Objects with accesses attributed to them in the last period.",
    );
    out.sample(
        "strata_stats_period_objects_accessed",
        &[],
        period.access.objects.len() as f64,
    );
    out.family(
        "strata_stats_period_untracked_accesses",
        "gauge",
        "Accesses in the last period to objects beyond the access table's bound.",
    );
    let untracked = &period.access.untracked;
    out.sample(
        "strata_stats_period_untracked_accesses",
        &[],
        (untracked.reads + untracked.writes) as f64,
    );
    let osds: Vec<report::OsdPeriod> = period.osds.iter().map(report::osd_period).collect();
    type Field = fn(&report::OsdPeriod) -> [(&'static str, f64); 2];
    let per_op: [(&str, &str, Field); 3] = [
        (
            "strata_osd_period_device_ops",
            "Device reads and writes in the last period.",
            |o| [("read", o.read_ops as f64), ("write", o.write_ops as f64)],
        ),
        (
            "strata_osd_period_device_bytes",
            "Device bytes read and written in the last period.",
            |o| {
                [
                    ("read", o.read_bytes as f64),
                    ("write", o.write_bytes as f64),
                ]
            },
        ),
        (
            "strata_osd_period_ops",
            "Object reads and applied transactions in the last period.",
            |o| {
                [
                    ("read", o.object_read_ops as f64),
                    ("write", o.object_write_ops as f64),
                ]
            },
        ),
    ];
    for (name, help, field) in per_op {
        out.family(name, "gauge", help);
        for osd in &osds {
            for (op, value) in field(osd) {
                let labels = vec![("osd", osd.id.to_string()), ("op", op.to_string())];
                out.sample(name, &labels, value);
            }
        }
    }
    out.family(
        "strata_osd_period_device_latency_seconds",
        "summary",
        "Device latency quantiles in the last period.",
    );
    for osd in &osds {
        for (op, quantile, value_us) in [
            ("read", "0.5", osd.read_latency_us_p50),
            ("read", "0.99", osd.read_latency_us_p99),
            ("write", "0.5", osd.write_latency_us_p50),
            ("write", "0.99", osd.write_latency_us_p99),
        ] {
            let labels = vec![
                ("osd", osd.id.to_string()),
                ("op", op.to_string()),
                ("quantile", quantile.to_string()),
            ];
            out.sample(
                "strata_osd_period_device_latency_seconds",
                &labels,
                value_us / 1e6,
            );
        }
    }
    type Single = fn(&report::OsdPeriod) -> f64;
    let single: [(&str, &str, Single); 3] = [
        (
            "strata_osd_period_busy_ratio",
            "Share of the last period the OSD's device was busy.",
            |o| o.busy_fraction,
        ),
        (
            "strata_osd_period_queue_depth",
            "Operations in flight on the OSD's device when the last period ended.",
            |o| o.queue_depth as f64,
        ),
        (
            "strata_osd_period_queue_depth_max",
            "Largest queue depth an operation found on arrival in the last period.",
            |o| o.queue_depth_max as f64,
        ),
    ];
    for (name, help, field) in single {
        out.family(name, "gauge", help);
        for osd in &osds {
            out.sample(name, &[("osd", osd.id.to_string())], field(osd));
        }
    }
}

fn render_data_cache(out: &mut Text, stats: &[OsdStats]) {
    type Field = fn(&store::DataCacheStats) -> u64;
    let fields: [(&str, &str, &str, Field); 3] = [
        (
            "strata_osd_data_cache_hits_total",
            "counter",
            "Small reads the store's data cache served from memory.",
            |c| c.hits,
        ),
        (
            "strata_osd_data_cache_misses_total",
            "counter",
            "Small reads that went to the device.",
            |c| c.misses,
        ),
        (
            "strata_osd_data_cache_bytes",
            "gauge",
            "Memory the store's data cache holds.",
            |c| c.bytes,
        ),
    ];
    for (name, kind, help, field) in fields {
        out.family(name, kind, help);
        for osd in stats {
            out.sample(name, &id_label(osd), field(&osd.data_cache) as f64);
        }
    }
}

fn render_space(out: &mut Text, stats: &[OsdStats]) {
    type Field = fn(&store::Statfs) -> u64;
    let fields: [(&str, &str, Field); 6] = [
        ("strata_osd_total_bytes", "Device capacity.", |s| {
            s.total_bytes
        }),
        ("strata_osd_free_bytes", "Device bytes free.", |s| {
            s.free_bytes
        }),
        (
            "strata_osd_allocated_bytes",
            "Device bytes allocated to object data.",
            |s| s.allocated_bytes,
        ),
        ("strata_osd_stored_bytes", "Object bytes stored.", |s| {
            s.stored_bytes
        }),
        ("strata_osd_metadata_bytes", "Onode and omap bytes.", |s| {
            s.onode_bytes + s.omap_bytes
        }),
        ("strata_osd_objects", "Objects (replicas) held.", |s| {
            s.objects
        }),
    ];
    for (name, help, field) in fields {
        out.family(name, "gauge", help);
        for osd in stats {
            out.sample(name, &id_label(osd), field(&osd.statfs) as f64);
        }
    }
}

fn id_label(osd: &OsdStats) -> Vec<(&'static str, String)> {
    vec![("osd", osd.id.to_string())]
}

fn osd_labels(osd: &OsdStats) -> Vec<(&'static str, String)> {
    vec![
        ("osd", osd.id.to_string()),
        ("host", osd.host.clone()),
        ("class", osd.class.clone()),
    ]
}

fn op_labels(osd: &OsdStats, op: &str) -> Vec<(&'static str, String)> {
    vec![("osd", osd.id.to_string()), ("op", op.to_string())]
}

/// The exposition text being built.
#[derive(Default)]
struct Text(String);

impl Text {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}");
        let _ = writeln!(self.0, "# TYPE {name} {kind}");
    }

    /// A summary's samples for one label set: median and 99th percentile, sum and count.
    fn summary(&mut self, name: &str, labels: Vec<(&str, String)>, ops: &OpStats) {
        for (quantile, value_us) in [
            ("0.5", ops.latency_us_p50()),
            ("0.99", ops.latency_us_p99()),
        ] {
            let mut labels = labels.clone();
            labels.push(("quantile", quantile.to_string()));
            self.sample(name, &labels, value_us / 1e6);
        }
        let count = ops.latency_ns.count();
        let sum_s = ops.latency_us_mean() * count as f64 / 1e6;
        self.sample(&format!("{name}_sum"), &labels, sum_s);
        self.sample(&format!("{name}_count"), &labels, count as f64);
    }

    fn sample(&mut self, name: &str, labels: &[(&str, String)], value: f64) {
        self.0.push_str(name);
        if !labels.is_empty() {
            self.0.push('{');
            for (index, (key, value)) in labels.iter().enumerate() {
                if index > 0 {
                    self.0.push(',');
                }
                let escaped = value
                    .replace('\\', "\\\\")
                    .replace('"', "\\\"")
                    .replace('\n', "\\n");
                let _ = write!(self.0, "{key}=\"{escaped}\"");
            }
            self.0.push('}');
        }
        let _ = writeln!(self.0, " {value}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_escape_labels() {
        let mut text = Text::default();
        text.family("m", "gauge", "help");
        text.sample("m", &[("pool", "a\"b".to_string())], 1.5);
        assert_eq!(
            text.0,
            "# HELP m help\n# TYPE m gauge\nm{pool=\"a\\\"b\"} 1.5\n"
        );
    }
}
