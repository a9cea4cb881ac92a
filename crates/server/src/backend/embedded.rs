//! The embedded cluster as a [`Backend`]: every call goes to [`cluster::Cluster`], held
//! weakly ([`WeakCluster`]) so that shutdown can take the only strong handle back and flush
//! every store; calls after that fail with `Shutdown`, never touch a closed store.

use std::sync::{Arc, Weak};

use async_trait::async_trait;
use cluster::Cluster;
use rados::{ClusterStats, IoCtx, PoolInfo, PoolSpec, Rados, RadosError};
use serde_json::{json, Value};

use super::{Backend, OsdAction, Placement};
use crate::balancer::{BalancerRequest, BalancerService};
use crate::error::Result;
use crate::report::{self, OsdEntry, OsdUsage, PeriodReport, PoolEntry, Status, Usage};

/// The embedded cluster, held weakly.
pub struct EmbeddedBackend {
    cluster: WeakCluster,
    balancer: Arc<BalancerService>,
}

impl EmbeddedBackend {
    /// A backend over `cluster`; the caller keeps the strong handle and shuts it down. Fails
    /// when the data directory's balancer settings cannot be read.
    pub fn new(cluster: &Arc<Cluster>) -> Result<Self> {
        Ok(Self {
            cluster: WeakCluster(Arc::downgrade(cluster)),
            balancer: Arc::new(BalancerService::open(cluster)?),
        })
    }

    fn get(&self) -> rados::Result<Arc<Cluster>> {
        self.cluster.get()
    }
}

#[async_trait]
impl Backend for EmbeddedBackend {
    fn kind(&self) -> &'static str {
        "embedded"
    }

    fn rados(&self) -> Arc<dyn Rados> {
        Arc::new(self.cluster.clone())
    }

    async fn status(&self) -> Result<Status> {
        let mut status = report::status(&*self.get()?).await?;
        status.balancer = Some(self.balancer.status());
        Ok(status)
    }

    async fn balancer(&self, request: BalancerRequest) -> Result<Value> {
        self.balancer.handle(request)
    }

    fn workers(&self) -> Vec<(&'static str, Box<dyn worker::Step>)> {
        vec![(
            "balancer",
            Box::new(crate::balancer::BalancerLoop(self.balancer.clone())),
        )]
    }

    async fn osd_getmap(&self) -> Result<bytes::Bytes> {
        Ok(bytes::Bytes::from(self.get()?.osd_map().encode()))
    }

    async fn set_pg_upmap_items(&self, pg: &str, items: Vec<(i32, i32)>) -> Result<u64> {
        let cluster = self.get()?;
        let id: osdmap::PgId = pg.parse().map_err(|_| {
            crate::ServerError::BadRequest(format!("pg id {pg:?} is not POOL.SEED (hex)"))
        })?;
        let exists = cluster
            .osd_map()
            .pool(id.pool)
            .is_some_and(|pool| id.seed < pool.pg_num);
        if !exists {
            return Err(RadosError::NotFound(format!("pg {pg}")).into());
        }
        Ok(cluster.set_pg_upmap_items(id, items)?)
    }

    async fn osd_tree(&self) -> Result<Vec<OsdEntry>> {
        Ok(report::osd_tree(&*self.get()?))
    }

    async fn osd_usage(&self) -> Result<Vec<OsdUsage>> {
        let cluster = self.get()?;
        Ok(report::osd_usage(
            &cluster.osd_stats(),
            &report::pgs_per_osd(&cluster),
        ))
    }

    async fn mark_osd(&self, osd: i32, action: OsdAction) -> Result<u64> {
        let cluster = self.get()?;
        Ok(match action {
            OsdAction::Down => cluster.mark_down(osd)?,
            OsdAction::Up => cluster.mark_up(osd)?,
            OsdAction::Out => cluster.mark_out(osd)?,
            OsdAction::In => cluster.mark_in(osd)?,
        })
    }

    async fn osd_reweight(&self, osd: i32, weight: f64) -> Result<u64> {
        Ok(self.get()?.reweight(osd, weight)?)
    }

    async fn osd_device_class(&self, class: Option<&str>, osds: &[i32]) -> Result<u64> {
        let cluster = self.get()?;
        Ok(match class {
            Some(class) => cluster.set_device_class(class, osds)?,
            None => cluster.rm_device_class(osds)?,
        })
    }

    async fn pools(&self) -> Result<Vec<PoolEntry>> {
        Ok(report::pools(&*self.get()?).await?)
    }

    async fn pool_set(&self, pool: &str, key: &str, value: &str) -> Result<u64> {
        Ok(self.get()?.pool_set(pool, key, value)?)
    }

    async fn pool_get(&self, pool: &str) -> Result<serde_json::Map<String, Value>> {
        match serde_json::to_value(self.get()?.pool_settings(pool)?) {
            Ok(Value::Object(settings)) => Ok(settings),
            _ => Err(crate::ServerError::Backend(format!(
                "the settings of pool {pool:?} are not a JSON object"
            ))),
        }
    }

    async fn usage(&self) -> Result<Usage> {
        let cluster = self.get()?;
        let pools = report::pools(&cluster).await?;
        let objects = pools.iter().map(|p| p.objects).sum();
        Ok(report::usage(&cluster.osd_stats(), objects))
    }

    async fn pool_delete(&self, name: &str) -> Result<()> {
        Ok(self.get()?.pool_delete(name).await?)
    }

    async fn erasure_pool_create(
        &self,
        name: &str,
        profile: &str,
        pg_num: u32,
    ) -> Result<rados::PoolInfo> {
        let profile = cluster::ec::ErasureProfile::parse(profile)
            .map_err(crate::error::ServerError::BadRequest)?;
        Ok(self.get()?.create_erasure_pool(name, &profile, pg_num)?)
    }

    fn protect_pool(&self, pool: &str, user: &str) {
        if let Ok(cluster) = self.get() {
            cluster.protect_pool(pool, user);
        }
    }

    async fn stats_period(&self, top: usize) -> Result<PeriodReport> {
        Ok(report::period(&*self.get()?, top))
    }

    fn end_stats_period(&self) {
        if let Ok(cluster) = self.get() {
            let _ = cluster.take_stats_period();
        }
    }

    fn stats_period_s(&self) -> u64 {
        self.get()
            .map_or(0, |cluster| cluster.config().stats_period_s)
    }

    async fn locate(&self, pool: &str, object: &str) -> Result<Placement> {
        let place = self.get()?.locate(pool, object)?;
        Ok(Placement {
            pg: format!("{}.{:x}", place.pg.pool, place.pg.seed),
            up: place.up,
            acting: place.acting,
        })
    }

    async fn pg_list(&self) -> Result<Vec<Value>> {
        Ok(self.get()?.pg_list().into_iter().map(pg_json).collect())
    }

    async fn mark_unfound_lost(&self, pg: &str, how: &str) -> Result<u64> {
        let how: cluster::UnfoundResolution = how.parse()?;
        Ok(self.get()?.mark_unfound_lost(pg, how).await?)
    }

    async fn scrub(&self, pool: Option<&str>, repair: bool) -> Result<Value> {
        let report = self.get()?.scrub(pool, repair).await?;
        let inconsistencies: Vec<Value> = report
            .inconsistencies
            .iter()
            .map(|i| {
                json!({ "pg": i.pg, "object": i.object, "osd": i.osd,
                    "kind": i.kind, "repaired": i.repaired })
            })
            .collect();
        Ok(json!({ "pgs": report.pgs, "objects": report.objects,
            "clean": report.is_clean(), "inconsistencies": inconsistencies,
            "lost": report.lost }))
    }

    async fn metrics(&self, gateway: Option<gateway::GatewayStats>) -> Result<String> {
        Ok(crate::metrics::render(&*self.get()?, gateway).await?)
    }

    fn io_counters(&self) -> Option<crate::rates::Counters> {
        let cluster = self.get().ok()?;
        let mut counters = crate::rates::Counters::default();
        for osd in cluster.osd_stats() {
            counters.read_ops += osd.ops.read.ops;
            counters.read_bytes += osd.ops.read.bytes;
            counters.write_ops += osd.ops.write.ops;
            counters.write_bytes += osd.ops.write.bytes;
        }
        let recovery = cluster.recovery_progress();
        counters.recovery_objects = recovery.objects_copied;
        counters.recovery_bytes = recovery.bytes_copied;
        Some(counters)
    }

    async fn gateway_pool_size(&self) -> Result<u32> {
        let hosts = self.get()?.config().hosts_with_class(None) as u32;
        Ok(hosts.clamp(1, 3))
    }

    async fn shutdown(&self) -> Result<()> {
        // The strong handle is the server's (`Running`), which shuts the cluster down.
        Ok(())
    }
}

/// One PG as `/api/pg` shows it.
fn pg_json(info: cluster::PgInfo) -> Value {
    let unfound: Vec<Value> = info
        .unfound
        .iter()
        .map(|(object, version)| json!({ "object": object, "version": version }))
        .collect();
    json!({ "pg": info.pg, "up": info.up, "acting": info.acting, "state": info.state,
        "unfound": unfound })
}

/// The cluster held weakly: what the admin API and the gateway use, so that shutdown can take
/// the only strong handle back. Every call fails with `Shutdown` once the cluster is gone.
#[derive(Clone)]
pub struct WeakCluster(Weak<Cluster>);

impl WeakCluster {
    /// `cluster`, held weakly.
    pub fn new(cluster: &Arc<Cluster>) -> Self {
        Self(Arc::downgrade(cluster))
    }

    /// The cluster, while it is served.
    pub fn get(&self) -> rados::Result<Arc<Cluster>> {
        self.0.upgrade().ok_or(RadosError::Shutdown)
    }
}

#[async_trait]
impl Rados for WeakCluster {
    async fn pool_create(&self, spec: PoolSpec) -> rados::Result<PoolInfo> {
        self.get()?.pool_create(spec).await
    }

    async fn pool_delete(&self, name: &str) -> rados::Result<()> {
        self.get()?.pool_delete(name).await
    }

    async fn pool_list(&self) -> rados::Result<Vec<PoolInfo>> {
        self.get()?.pool_list().await
    }

    async fn pool_lookup(&self, name: &str) -> rados::Result<PoolInfo> {
        self.get()?.pool_lookup(name).await
    }

    async fn cluster_stats(&self) -> rados::Result<ClusterStats> {
        self.get()?.cluster_stats().await
    }

    async fn io_ctx(&self, pool: &str) -> rados::Result<Arc<dyn IoCtx>> {
        self.get()?.io_ctx(pool).await
    }

    async fn pg_acting_sets(&self, pool: &str) -> rados::Result<Vec<Vec<i32>>> {
        let cluster = self.get()?;
        let info = cluster.pool_lookup(pool).await?;
        let map = cluster.osd_map();
        Ok((0..info.pg_num)
            .map(|seed| cluster::placement(&map, osdmap::pg::PgId::new(info.id, seed)).acting)
            .collect())
    }
}
