//! A real Ceph cluster as a [`Backend`]: objects through librados ([`ceph_backend::CephRados`]),
//! the control plane through monitor commands (`status`, `osd tree`, `osd df`, `df detail`,
//! `osd map`, `osd down|out|in`), answered in the admin API's own types so the CLI shows a
//! Ceph cluster as it shows the embedded one.
//!
//! What Ceph's daemons keep to themselves is refused with 501 naming the Ceph command that
//! does it: statistics periods and per-object access counts (the embedded cluster's),
//! marking an OSD up (an OSD marks itself up), and deep scrub on demand (Ceph's OSDs scrub
//! on their own schedule; `ceph pg deep-scrub` starts one, asynchronously).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, RwLock};

use async_trait::async_trait;
use ceph_backend::{CephConfig, CephRados};
use rados::{Rados, RadosError};
use serde_json::{json, Value};

use super::{not_supported, Backend, OsdAction, Placement};
use crate::error::{Result, ServerError};
use crate::report::{
    OsdEntry, OsdUsage, PeriodReport, PgSummary, PoolEntry, Recovery, Status, Usage,
};

const KIND: &str = "ceph";

/// A Ceph cluster reached through librados.
pub struct CephBackend {
    /// `None` once shut down.
    rados: RwLock<Option<CephRados>>,
    /// Pools whose deletion is refused, with who needs them.
    protected: Mutex<BTreeMap<String, String>>,
}

impl CephBackend {
    /// Loads librados and connects with `config` (ceph.conf, client id, keyring).
    pub async fn connect(config: CephConfig) -> Result<Self> {
        let rados = CephRados::connect(config)
            .await
            .map_err(|error| ServerError::Backend(format!("connecting to Ceph: {error}")))?;
        Ok(Self {
            rados: RwLock::new(Some(rados)),
            protected: Mutex::default(),
        })
    }

    fn get(&self) -> rados::Result<CephRados> {
        self.rados
            .read()
            .map_err(|_| RadosError::Shutdown)?
            .clone()
            .ok_or(RadosError::Shutdown)
    }

    /// Runs a monitor command (a JSON object) and decodes its JSON output.
    async fn mon_json(&self, command: Value) -> Result<Value> {
        let reply = self
            .get()?
            .mon_command(&command.to_string())
            .await
            .map_err(|error| mon_error(&command, &error.to_string()))?;
        if reply.outbuf.is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&reply.outbuf).map_err(|error| {
            ServerError::Backend(format!(
                "monitor command {command}: output is not JSON ({error})"
            ))
        })
    }

    async fn osd_tree_json(&self) -> Result<Value> {
        self.mon_json(json!({"prefix": "osd tree", "format": "json"}))
            .await
    }

    async fn epoch(&self) -> Result<u64> {
        let stat = self
            .mon_json(json!({"prefix": "osd stat", "format": "json"}))
            .await?;
        Ok(u64_at(&stat, "epoch"))
    }
}

fn mon_error(command: &Value, detail: &str) -> ServerError {
    let prefix = command["prefix"].as_str().unwrap_or("?");
    if detail.contains("ENOENT") || detail.contains("does not exist") {
        return ServerError::Rados(RadosError::NotFound(format!("ceph {prefix}: {detail}")));
    }
    if detail.contains("EINVAL") {
        return ServerError::BadRequest(format!("ceph {prefix}: {detail}"));
    }
    ServerError::Backend(format!("ceph {prefix}: {detail}"))
}

fn u64_at(value: &Value, key: &str) -> u64 {
    value[key]
        .as_u64()
        .or_else(|| value[key].as_f64().map(|f| f.max(0.0) as u64))
        .unwrap_or(0)
}

/// Every OSD of `osd tree` with its host (the bucket of type `host` holding it).
fn osd_entries(tree: &Value) -> Vec<OsdEntry> {
    let nodes = tree["nodes"].as_array().cloned().unwrap_or_default();
    let mut host_of = BTreeMap::new();
    for node in &nodes {
        if node["type"] == "host" {
            for child in node["children"].as_array().into_iter().flatten() {
                if let Some(id) = child.as_i64() {
                    host_of.insert(id, node["name"].as_str().unwrap_or("").to_string());
                }
            }
        }
    }
    let mut osds: Vec<OsdEntry> = nodes
        .iter()
        .filter(|node| node["type"] == "osd")
        .filter_map(|node| {
            let id = node["id"].as_i64()?;
            Some(OsdEntry {
                id: i32::try_from(id).ok()?,
                host: host_of.get(&id).cloned().unwrap_or_default(),
                class: node["device_class"].as_str().unwrap_or("").to_string(),
                up: node["status"] == "up",
                is_in: node["reweight"].as_f64().unwrap_or(0.0) > 0.0,
                weight: node["crush_weight"].as_f64().unwrap_or(0.0),
                reweight: node["reweight"].as_f64().unwrap_or(0.0),
            })
        })
        .collect();
    osds.sort_by_key(|osd| osd.id);
    osds
}

/// PG states from `status`'s `pgmap.pgs_by_state`, counted as the embedded cluster counts
/// them (degraded, inactive, remapped).
fn pg_summary(pgmap: &Value) -> PgSummary {
    let mut summary = PgSummary::default();
    for state in pgmap["pgs_by_state"].as_array().into_iter().flatten() {
        let name = state["state_name"]
            .as_str()
            .unwrap_or("unknown")
            .to_string();
        let count = u64_at(state, "count");
        let words: BTreeSet<&str> = name.split('+').collect();
        if words.contains("degraded") || words.contains("undersized") {
            summary.degraded += count;
        }
        if !words.contains("active") {
            summary.inactive += count;
        }
        if words.contains("remapped") || words.contains("backfilling") {
            summary.remapped += count;
        }
        summary.total += count;
        *summary.states.entry(name).or_default() += count;
    }
    summary
}

fn usage_of(df: &Value, objects: u64) -> Usage {
    let stats = &df["stats"];
    let total_bytes = u64_at(stats, "total_bytes");
    let free_bytes = u64_at(stats, "total_avail_bytes");
    let used_bytes = u64_at(stats, "total_used_raw_bytes").max(u64_at(stats, "total_used_bytes"));
    let mut stored_bytes = 0;
    let mut metadata_bytes = 0;
    for pool in df["pools"].as_array().into_iter().flatten() {
        let pool_stats = &pool["stats"];
        stored_bytes += u64_at(pool_stats, "stored");
        metadata_bytes += u64_at(pool_stats, "omap_bytes_used");
    }
    Usage {
        total_bytes,
        allocated_bytes: used_bytes,
        stored_bytes,
        free_bytes,
        data_hole_fraction: 0.0,
        metadata_bytes,
        metadata_file_bytes: 0,
        objects,
        object_replicas: 0,
    }
}

#[async_trait]
impl Backend for CephBackend {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn rados(&self) -> Arc<dyn Rados> {
        match self.get() {
            Ok(rados) => Arc::new(rados),
            Err(_) => Arc::new(Closed),
        }
    }

    async fn status(&self) -> Result<Status> {
        let status = self
            .mon_json(json!({"prefix": "status", "format": "json"}))
            .await?;
        let osds = osd_entries(&self.osd_tree_json().await?);
        let pools = self.pools().await?;
        let objects = pools.iter().map(|p| p.objects).sum();
        let usage = self.usage_with(objects).await?;
        let health = status["health"]["status"]
            .as_str()
            .unwrap_or("HEALTH_UNKNOWN")
            .to_string();
        let mut checks = Vec::new();
        if let Some(found) = status["health"]["checks"].as_object() {
            for (name, check) in found {
                let message = check["summary"]["message"].as_str().unwrap_or("");
                checks.push(format!("{name}: {message}"));
            }
        }
        // Pacific nests the osdmap's counters one level deeper than later releases.
        let osdmap = if status["osdmap"]["osdmap"].is_object() {
            &status["osdmap"]["osdmap"]
        } else {
            &status["osdmap"]
        };
        Ok(Status {
            health,
            checks,
            epoch: u64_at(osdmap, "epoch"),
            osds,
            pools,
            pgs: pg_summary(&status["pgmap"]),
            usage,
            recovery: Recovery::default(),
            balancer: None,
            tiers: Vec::new(),
            io: None,
        })
    }

    async fn set_pg_upmap_items(&self, pg: &str, items: Vec<(i32, i32)>) -> Result<u64> {
        let command = if items.is_empty() {
            json!({"prefix": "osd rm-pg-upmap-items", "pgid": pg})
        } else {
            let ids: Vec<String> = items
                .iter()
                .flat_map(|&(from, to)| [from.to_string(), to.to_string()])
                .collect();
            json!({"prefix": "osd pg-upmap-items", "pgid": pg, "id": ids})
        };
        self.mon_json(command).await?;
        self.epoch().await
    }

    async fn osd_getmap(&self) -> Result<bytes::Bytes> {
        let command = json!({"prefix": "osd getmap"});
        let reply = self
            .get()?
            .mon_command(&command.to_string())
            .await
            .map_err(|error| mon_error(&command, &error.to_string()))?;
        Ok(bytes::Bytes::from(reply.outbuf))
    }

    async fn osd_tree(&self) -> Result<Vec<OsdEntry>> {
        Ok(osd_entries(&self.osd_tree_json().await?))
    }

    async fn osd_usage(&self) -> Result<Vec<OsdUsage>> {
        let df = self
            .mon_json(json!({"prefix": "osd df", "format": "json"}))
            .await?;
        let hosts: BTreeMap<i32, String> = osd_entries(&self.osd_tree_json().await?)
            .into_iter()
            .map(|osd| (osd.id, osd.host))
            .collect();
        let kib = |node: &Value, key: &str| u64_at(node, key).saturating_mul(1024);
        let mut usage: Vec<OsdUsage> = df["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|node| {
                let id = i32::try_from(node["id"].as_i64()?).ok()?;
                Some(OsdUsage {
                    id,
                    host: hosts.get(&id).cloned().unwrap_or_default(),
                    class: node["device_class"].as_str().unwrap_or("").to_string(),
                    total_bytes: kib(node, "kb"),
                    allocated_bytes: kib(node, "kb_used_data"),
                    stored_bytes: kib(node, "kb_used_data"),
                    free_bytes: kib(node, "kb_avail"),
                    metadata_bytes: kib(node, "kb_used_omap") + kib(node, "kb_used_meta"),
                    objects: 0,
                    pgs: u64_at(node, "pgs"),
                    device_ops: 0,
                    busy_fraction: 0.0,
                })
            })
            .collect();
        usage.sort_by_key(|osd| osd.id);
        Ok(usage)
    }

    async fn mark_osd(&self, osd: i32, action: OsdAction) -> Result<u64> {
        let prefix = match action {
            OsdAction::Down => "osd down",
            OsdAction::Out => "osd out",
            OsdAction::In => "osd in",
            OsdAction::Up => {
                return Err(not_supported(
                    KIND,
                    "marking an OSD up (a Ceph OSD marks itself up when its daemon runs)",
                ))
            }
        };
        self.mon_json(json!({"prefix": prefix, "ids": [osd.to_string()]}))
            .await?;
        self.epoch().await
    }

    async fn osd_reweight(&self, osd: i32, weight: f64) -> Result<u64> {
        self.mon_json(json!({"prefix": "osd reweight", "id": osd, "weight": weight}))
            .await?;
        self.epoch().await
    }

    async fn osd_device_class(&self, class: Option<&str>, osds: &[i32]) -> Result<u64> {
        let ids: Vec<String> = osds.iter().map(i32::to_string).collect();
        let command = match class {
            Some(class) => {
                json!({"prefix": "osd crush set-device-class", "class": class, "ids": ids})
            }
            None => json!({"prefix": "osd crush rm-device-class", "ids": ids}),
        };
        self.mon_json(command).await?;
        self.epoch().await
    }

    async fn pool_set(&self, pool: &str, key: &str, value: &str) -> Result<u64> {
        let command = match key.strip_prefix("quota_") {
            // Ceph sets quotas with their own command (`osd pool set-quota POOL max_bytes N`).
            Some(field) => {
                json!({"prefix": "osd pool set-quota", "pool": pool, "field": field, "val": value})
            }
            None => json!({"prefix": "osd pool set", "pool": pool, "var": key, "val": value}),
        };
        self.mon_json(command).await?;
        self.epoch().await
    }

    async fn pool_get(&self, pool: &str) -> Result<serde_json::Map<String, Value>> {
        let mut settings = serde_json::Map::new();
        let all = self
            .mon_json(
                json!({"prefix": "osd pool get", "pool": pool, "var": "all", "format": "json"}),
            )
            .await?;
        for key in ["size", "min_size", "pg_num", "crush_rule"] {
            if let Some(value) = all.get(key) {
                settings.insert(key.to_string(), value.clone());
            }
        }
        let quota = self
            .mon_json(json!({"prefix": "osd pool get-quota", "pool": pool, "format": "json"}))
            .await?;
        settings.insert(
            "quota_max_bytes".into(),
            json!(u64_at(&quota, "quota_max_bytes")),
        );
        settings.insert(
            "quota_max_objects".into(),
            json!(u64_at(&quota, "quota_max_objects")),
        );
        Ok(settings)
    }

    async fn pools(&self) -> Result<Vec<PoolEntry>> {
        let rados = self.get()?;
        let stats = rados.cluster_stats().await?;
        Ok(crate::report::pool_entries(
            rados.pool_list().await?,
            &stats,
        ))
    }

    async fn usage(&self) -> Result<Usage> {
        let objects = self.pools().await?.iter().map(|p| p.objects).sum();
        self.usage_with(objects).await
    }

    async fn pool_delete(&self, name: &str) -> Result<()> {
        let user = self
            .protected
            .lock()
            .map_err(|_| ServerError::Backend("pool protection lock poisoned".into()))?
            .get(name)
            .cloned();
        if let Some(user) = user {
            return Err(ServerError::Rados(RadosError::InvalidArgument(format!(
                "pool {name} is in use by {user}"
            ))));
        }
        Ok(self.get()?.pool_delete(name).await?)
    }

    fn protect_pool(&self, pool: &str, user: &str) {
        if let Ok(mut protected) = self.protected.lock() {
            protected.insert(pool.to_string(), user.to_string());
        }
    }

    async fn stats_period(&self, _top: usize) -> Result<PeriodReport> {
        Err(not_supported(
            KIND,
            "statistics periods and per-object access counts (see `ceph osd perf` and \
             `ceph osd pool stats`)",
        ))
    }

    fn end_stats_period(&self) {}

    fn stats_period_s(&self) -> u64 {
        0
    }

    async fn locate(&self, pool: &str, object: &str) -> Result<Placement> {
        let map = self
            .mon_json(json!({"prefix": "osd map", "pool": pool, "object": object,
                "format": "json"}))
            .await?;
        let ids = |key: &str| -> Vec<i32> {
            map[key]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|id| id.as_i64().and_then(|id| i32::try_from(id).ok()))
                .collect()
        };
        Ok(Placement {
            pg: map["pgid"].as_str().unwrap_or("").to_string(),
            up: ids("up"),
            acting: ids("acting"),
        })
    }

    async fn pg_list(&self) -> Result<Vec<Value>> {
        let listing = self
            .mon_json(json!({"prefix": "pg ls", "format": "json"}))
            .await?;
        // Pacific answers {"pg_stats": [...]}; older releases a bare array.
        let stats = listing["pg_stats"]
            .as_array()
            .or_else(|| listing.as_array())
            .cloned()
            .unwrap_or_default();
        Ok(stats
            .iter()
            .map(|pg| {
                json!({ "pg": pg["pgid"], "up": pg["up"], "acting": pg["acting"],
                    "state": pg["state"], "unfound": [],
                    "unfound_count": pg["stat_sum"]["num_objects_unfound"] })
            })
            .collect())
    }

    async fn mark_unfound_lost(&self, pg: &str, how: &str) -> Result<u64> {
        Err(not_supported(
            KIND,
            &format!(
                "mark-unfound-lost through strata (it is an OSD command: `ceph pg {pg} \
                 mark_unfound_lost {how}`)"
            ),
        ))
    }

    async fn scrub(&self, _pool: Option<&str>, _repair: bool) -> Result<Value> {
        Err(not_supported(
            KIND,
            "scrub on demand (Ceph's OSDs deep-scrub on their schedule; `ceph osd pool \
             deep-scrub POOL` starts one and `ceph health detail` reports what it finds)",
        ))
    }

    async fn metrics(&self, gateway: Option<gateway::GatewayStats>) -> Result<String> {
        let status = self.status().await?;
        let usage = self.osd_usage().await?;
        Ok(crate::metrics::render_summary(&status, &usage, gateway))
    }

    async fn gateway_pool_size(&self) -> Result<u32> {
        let tree = osd_entries(&self.osd_tree_json().await?);
        let hosts: BTreeSet<&str> = tree.iter().map(|osd| osd.host.as_str()).collect();
        // Ceph's default rule separates replicas by host; a one-host test cluster separates
        // them by OSD (`osd_crush_chooseleaf_type = 0`), so count OSDs when there is one host.
        let domains = if hosts.len() > 1 {
            hosts.len()
        } else {
            tree.len()
        };
        Ok((domains as u32).clamp(1, 3))
    }

    async fn shutdown(&self) -> Result<()> {
        if let Ok(mut rados) = self.rados.write() {
            rados.take();
        }
        Ok(())
    }
}

impl CephBackend {
    async fn usage_with(&self, objects: u64) -> Result<Usage> {
        let df = self
            .mon_json(json!({"prefix": "df", "detail": "detail", "format": "json"}))
            .await?;
        Ok(usage_of(&df, objects))
    }
}

/// The object API after shutdown: every call fails with `Shutdown`.
struct Closed;

#[async_trait]
impl Rados for Closed {
    async fn pool_create(&self, _spec: rados::PoolSpec) -> rados::Result<rados::PoolInfo> {
        Err(RadosError::Shutdown)
    }

    async fn pool_delete(&self, _name: &str) -> rados::Result<()> {
        Err(RadosError::Shutdown)
    }

    async fn pool_list(&self) -> rados::Result<Vec<rados::PoolInfo>> {
        Err(RadosError::Shutdown)
    }

    async fn pool_lookup(&self, _name: &str) -> rados::Result<rados::PoolInfo> {
        Err(RadosError::Shutdown)
    }

    async fn cluster_stats(&self) -> rados::Result<rados::ClusterStats> {
        Err(RadosError::Shutdown)
    }

    async fn io_ctx(&self, _pool: &str) -> rados::Result<Arc<dyn rados::IoCtx>> {
        Err(RadosError::Shutdown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn osd_tree_gives_hosts_and_states() {
        let tree = json!({"nodes": [
            {"id": -1, "name": "default", "type": "root", "children": [-3]},
            {"id": -3, "name": "node1", "type": "host", "children": [1, 0]},
            {"id": 0, "name": "osd.0", "type": "osd", "device_class": "ssd",
             "crush_weight": 0.5, "status": "up", "reweight": 1.0},
            {"id": 1, "name": "osd.1", "type": "osd", "device_class": "hdd",
             "crush_weight": 1.0, "status": "down", "reweight": 0.0}
        ]});
        let osds = osd_entries(&tree);
        assert_eq!(osds.len(), 2);
        assert_eq!(
            (osds[0].id, osds[0].host.as_str(), osds[0].up, osds[0].is_in),
            (0, "node1", true, true)
        );
        assert_eq!(
            (osds[1].class.as_str(), osds[1].up, osds[1].is_in),
            ("hdd", false, false)
        );
    }

    #[test]
    fn pg_states_are_counted_as_the_embedded_cluster_counts_them() {
        let pgmap = json!({"pgs_by_state": [
            {"state_name": "active+clean", "count": 30},
            {"state_name": "active+undersized+degraded", "count": 2},
            {"state_name": "peering", "count": 1}
        ]});
        let summary = pg_summary(&pgmap);
        assert_eq!(summary.total, 33);
        assert_eq!(summary.degraded, 2);
        assert_eq!(summary.inactive, 1);
        assert_eq!(summary.states["active+clean"], 30);
    }
}
