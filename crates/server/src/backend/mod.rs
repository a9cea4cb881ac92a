//! What `strata serve` needs from the storage under it, as one trait ([`Backend`]), so the
//! admin API, `/metrics`, the CLI and the S3 gateway run on the embedded cluster
//! ([`embedded::EmbeddedBackend`]) or on a real Ceph cluster through librados alike.
//!
//! The object API itself is the `rados` traits ([`Backend::rados`]); this trait adds the
//! control plane: health and status, OSDs, pools with their usage, placement of an object,
//! scrub, statistics periods and metrics. What a backend does not offer fails with
//! [`ServerError::NotSupported`] naming the backend, which the admin API answers with 501, so
//! a CLI command says plainly that it has no meaning there instead of showing zeros.

pub mod ceph;
pub mod embedded;

use std::sync::Arc;

use async_trait::async_trait;
use rados::Rados;
use serde::{Deserialize, Serialize};

use crate::error::{Result, ServerError};
use crate::report::{OsdEntry, OsdUsage, PeriodReport, PoolEntry, Status, Usage};

/// A change of an OSD's state (`strata osd down|up|out|in N`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OsdAction {
    /// Stops serving (Ceph: `osd down`; the OSD may mark itself up again).
    Down,
    /// Serves again.
    Up,
    /// Takes no more data: CRUSH places elsewhere and recovery moves its PGs.
    Out,
    /// Takes data again.
    In,
}

impl OsdAction {
    /// Parses `down`, `up`, `out` or `in`.
    pub fn parse(word: &str) -> Option<Self> {
        match word {
            "down" => Some(Self::Down),
            "up" => Some(Self::Up),
            "out" => Some(Self::Out),
            "in" => Some(Self::In),
            _ => None,
        }
    }

    /// The word, as parsed.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Down => "down",
            Self::Up => "up",
            Self::Out => "out",
            Self::In => "in",
        }
    }
}

/// Where an object lives: its PG and the OSDs holding it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Placement {
    /// The PG, as `pool.seed` in hex (`1.2a`).
    pub pg: String,
    /// OSDs CRUSH (and upmaps) choose, primary first.
    pub up: Vec<i32>,
    /// OSDs serving it now, primary first.
    pub acting: Vec<i32>,
}

/// The storage `strata serve` runs on: the object API plus its control plane.
#[async_trait]
pub trait Backend: Send + Sync {
    /// `embedded` or `ceph`: named in errors and in `/status`.
    fn kind(&self) -> &'static str;

    /// The object API, for the S3 gateway and the object routes. Fails with `Shutdown` once
    /// the backend is shut down.
    fn rados(&self) -> Arc<dyn Rados>;

    /// Health, OSDs, pools, PG states, space and recovery (`GET /status`).
    async fn status(&self) -> Result<Status>;

    /// The OSD tree.
    async fn osd_tree(&self) -> Result<Vec<OsdEntry>>;

    /// Per-OSD space and load.
    async fn osd_usage(&self) -> Result<Vec<OsdUsage>>;

    /// Marks an OSD down, up, out or in; returns the new map epoch.
    async fn mark_osd(&self, osd: i32, action: OsdAction) -> Result<u64>;

    /// Sets an OSD's override weight, 0..=1 (`ceph osd reweight`); returns the new epoch.
    async fn osd_reweight(&self, osd: i32, weight: f64) -> Result<u64>;

    /// Sets (`Some`) or removes (`None`) the device class of OSDs (`ceph osd crush
    /// set-device-class|rm-device-class`); setting refuses an OSD bound to another class.
    /// Returns the new epoch.
    async fn osd_device_class(&self, class: Option<&str>, osds: &[i32]) -> Result<u64>;

    /// Every pool with its usage.
    async fn pools(&self) -> Result<Vec<PoolEntry>>;

    /// Sets `key` (one of [`cluster::POOL_KEYS`]: size, min_size, pg_num, quota_max_bytes,
    /// quota_max_objects) of `pool` to `value`, as `ceph osd pool set` (quotas: `ceph osd
    /// pool set-quota`); returns the new epoch.
    async fn pool_set(&self, pool: &str, key: &str, value: &str) -> Result<u64>;

    /// Every key of [`cluster::POOL_KEYS`] (and `crush_rule`) of `pool` with its value, as
    /// `ceph osd pool get POOL all` (quotas: `ceph osd pool get-quota`).
    async fn pool_get(&self, pool: &str) -> Result<serde_json::Map<String, serde_json::Value>>;

    /// Cluster-wide space.
    async fn usage(&self) -> Result<Usage>;

    /// Deletes a pool and its objects, unless [`Backend::protect_pool`] protects it.
    async fn pool_delete(&self, name: &str) -> Result<()>;

    /// Creates an erasure-coded pool with `profile` (`k=4,m=2[,failure-domain=host]
    /// [,device-class=hdd][,stripe-unit=4K]`). Only the embedded cluster does; on Ceph,
    /// `ceph osd erasure-code-profile set` and `ceph osd pool create NAME erasure` do it.
    async fn erasure_pool_create(
        &self,
        name: &str,
        profile: &str,
        pg_num: u32,
    ) -> Result<rados::PoolInfo> {
        let _ = (name, profile, pg_num);
        Err(crate::error::ServerError::NotSupported(format!(
            "erasure-coded pools are created here on the embedded cluster only; on the {} \
             backend use ceph osd erasure-code-profile set and ceph osd pool create NAME \
             erasure PROFILE",
            self.kind()
        )))
    }

    /// Refuses the deletion of `pool` while `user` (named in the error) needs it.
    fn protect_pool(&self, pool: &str, user: &str);

    /// The last completed statistics period with its `top` most accessed objects.
    async fn stats_period(&self, top: usize) -> Result<PeriodReport>;

    /// Ends a statistics period now (the server calls it every [`Backend::stats_period_s`]).
    fn end_stats_period(&self);

    /// How often statistics periods end, s; 0 when the backend has none.
    fn stats_period_s(&self) -> u64;

    /// The PG and OSDs of an object.
    async fn locate(&self, pool: &str, object: &str) -> Result<Placement>;

    /// Every PG: `pg`, `up`, `acting`, `state` and its `unfound` objects (`object`,
    /// `version`).
    async fn pg_list(&self) -> Result<Vec<serde_json::Value>>;

    /// Resolves the unfound objects of `pg`: `how` is `revert` (the newest older version a
    /// replica holds, else removed) or `delete`; returns how many were resolved.
    async fn mark_unfound_lost(&self, pg: &str, how: &str) -> Result<u64>;

    /// Deep scrub of one pool or all, repairing when asked; the report as JSON.
    async fn scrub(&self, pool: Option<&str>, repair: bool) -> Result<serde_json::Value>;

    /// Every metric in Prometheus text, the gateway's counters included when it runs.
    async fn metrics(&self, gateway: Option<gateway::GatewayStats>) -> Result<String>;

    /// The cumulative client I/O and recovery counters [`crate::rates`] samples (the S3
    /// fields left 0: the admin endpoint fills them); `None` when the backend has none.
    fn io_counters(&self) -> Option<crate::rates::Counters> {
        None
    }

    /// Replicas for the S3 gateway's pools when none are configured: the failure domains
    /// the cluster has, at most 3.
    async fn gateway_pool_size(&self) -> Result<u32>;

    /// Answers a `strata balancer` command. Default: not offered (Ceph has its own: `ceph
    /// balancer`).
    async fn balancer(
        &self,
        request: crate::balancer::BalancerRequest,
    ) -> Result<serde_json::Value> {
        let _ = request;
        Err(not_supported(
            self.kind(),
            "strata's balancer (use `ceph balancer` there)",
        ))
    }

    /// The background work the server runs for this backend while it serves (the balancer's
    /// periods). Default: none.
    fn workers(&self) -> Vec<(&'static str, Box<dyn worker::Step>)> {
        Vec::new()
    }

    /// Sets the `pg_upmap_items` of `pg` (`1.2a`) to `items`, or removes them when empty,
    /// as `ceph osd pg-upmap-items` / `rm-pg-upmap-items`; returns the new map epoch.
    async fn set_pg_upmap_items(&self, pg: &str, items: Vec<(i32, i32)>) -> Result<u64>;

    /// The current OSD map in Ceph 16.2's binary encoding (`ceph osd getmap`).
    async fn osd_getmap(&self) -> Result<bytes::Bytes> {
        Err(not_supported(self.kind(), "osd getmap"))
    }

    /// Stops the backend: flushes and closes what it holds. Calls after it fail with
    /// `Shutdown`.
    async fn shutdown(&self) -> Result<()>;
}

/// The error for what `backend` does not offer.
pub fn not_supported(backend: &str, what: &str) -> ServerError {
    ServerError::NotSupported(format!("{what} is not available on the {backend} backend"))
}
