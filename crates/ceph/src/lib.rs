//! # ceph-backend: strata's `rados` traits on a real Ceph cluster, through librados
//!
//! Owns a thin, hand-written binding of librados' C API (`ffi`, Ceph 16.2's `librados.h`),
//! loaded at run time from `librados.so.2` so that building strata, and running it on the
//! embedded cluster, needs no Ceph package; only connecting does (the error then names the
//! package, `librados2`). On it: [`CephRados`] (`rados::Rados`: pools, CRUSH rules per device
//! class and statistics through monitor commands) and [`CephIoCtx`] (`rados::IoCtx`: every
//! object operation as a librados aio operation whose completion wakes a future).
//!
//! ## Invariants
//! - Whatever librados writes into (read buffers, result slots, iterators) is owned by the
//!   operation's completion until librados calls it back, even if the awaiting future is
//!   dropped (`completion`).
//! - An object's version comes from its own operation's completion (`rados_aio_get_version`),
//!   never from the shared ioctx.
//! - No operation blocks forever: `rados_osd_op_timeout` (and the monitor timeout) are set from
//!   [`CephConfig::op_timeout_s`]; a timed-out operation is a retryable `RadosError::TimedOut`.
//! - Writes are sent with `LIBRADOS_OPERATION_FULL_TRY`: on a full pool or cluster the OSD
//!   answers ENOSPC (`RadosError::NoSpace`) at once instead of the client parking the op until
//!   space returns (or the op timeout).
//! - librados is never shut down from its own threads: a completion hands the connection's
//!   reference back to the awaiting task, or to a thread of its own when the task is gone.
//! - Every librados errno becomes a `RadosError` in one place (`error::from_errno`).
//!
//! ## Where librados differs from the `rados` contract, and what is done
//! - `omap_cmp` reads a missing key as an empty value and fails on a missing object, and
//!   `cmpxattr` compares `given <op> stored` and fails on a missing object even after a create
//!   step: a `WriteOp`'s guards run first, after a create step (an existence assertion when
//!   the op removes the object), with empty omap values refused and cmpxattr's operator
//!   mirrored; an ENOENT is then decided against an empty object (`write_op`).
//! - `omap_get_vals2` takes `start_after` and the prefix as C strings: omap keys are stored with
//!   an order-preserving escape that keeps NUL out (`omap_key`); pages of more than 1024
//!   entries take several requests.
//! - Listing is in hash order (bit-reversed, so PG after PG) and the C API cannot print a
//!   cursor: the cursor is the last name, resumed by seeking to its hash and skipping what sorts
//!   up to it (`listing`).
//! - A length of 0 reads the whole object in librados: `read(.., 0)` only checks existence.
//! - Followed as Ceph does them (the contract agrees): `zero` never creates or extends an
//!   object and shrinks one when it reaches the end; `truncate` of a missing object creates
//!   nothing; removing xattrs or omap keys of a missing object is `NotFound`; object names are
//!   at most 2048 bytes (`osd_max_object_name_len`); `stat`'s mtime has whole seconds.

// This crate is the FFI boundary to librados: calling C and handing it buffers needs `unsafe`.
// Every unsafe block says why it is sound; no other crate of the workspace allows unsafe code.
#![allow(unsafe_code)]

use std::sync::Arc;

use async_trait::async_trait;
use rados::{ClusterStats, IoCtx, PoolInfo, PoolSpec, Rados, RadosError, Result};
use serde_json::json;

mod cluster;
mod completion;
mod error;
mod ffi;
mod ioctx;
mod listing;
pub mod minicluster;
mod omap_key;
mod pools;
mod write_op;

pub use cluster::{CephConfig, MonReply};
pub use completion::{op_times, OpTimes};
pub use error::{from_errno, CephError};
pub use ioctx::CephIoCtx;

use cluster::ClusterHandle;
use ioctx::IoctxHandle;

/// A connection to a Ceph cluster, implementing [`rados::Rados`]. Cheap to clone.
#[derive(Clone)]
pub struct CephRados {
    cluster: Arc<ClusterHandle>,
    config: Arc<CephConfig>,
}

impl std::fmt::Debug for CephRados {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("CephRados")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl CephRados {
    /// Loads librados, reads the configuration and connects (bounded by `op_timeout_s`).
    pub async fn connect(config: CephConfig) -> Result<Self, CephError> {
        let for_connect = config.clone();
        let cluster = tokio::task::spawn_blocking(move || ClusterHandle::connect(&for_connect))
            .await
            .map_err(|error| CephError::Config(format!("connect task: {error}")))??;
        Ok(Self {
            cluster: Arc::new(cluster),
            config: Arc::new(config),
        })
    }

    /// The configuration connected with.
    pub fn config(&self) -> &CephConfig {
        &self.config
    }

    /// Sends one monitor command, a JSON object such as
    /// `{"prefix": "osd pool ls", "format": "json"}`, and returns its output buffer and status
    /// string; a refused command is [`CephError::Call`] with the monitor's message.
    pub async fn mon_command(&self, command: &str) -> Result<MonReply, CephError> {
        let cluster = self.cluster.clone();
        let command = command.to_string();
        tokio::task::spawn_blocking(move || cluster.mon_command(&command))
            .await
            .map_err(|error| CephError::Config(format!("monitor command task: {error}")))?
    }

    /// The concrete pool handle (the trait's [`Rados::io_ctx`] returns it boxed).
    pub async fn ceph_io_ctx(&self, pool: &str) -> Result<CephIoCtx> {
        let info = self.pool_lookup(pool).await?;
        let cluster = self.cluster.clone();
        let name = pool.to_string();
        let handle = tokio::task::spawn_blocking(move || {
            if cluster.pool_id(&name)?.is_none() {
                // Created by another client after our last map: fetch the latest.
                cluster.wait_for_latest_osdmap()?;
            }
            IoctxHandle::open(cluster, &name)
        })
        .await
        .map_err(|error| RadosError::Io(format!("open pool {pool}: {error}")))??;
        Ok(CephIoCtx::new(self.cluster.api, handle, info))
    }

    async fn wait_for_latest_osdmap(&self) -> Result<()> {
        let cluster = self.cluster.clone();
        tokio::task::spawn_blocking(move || cluster.wait_for_latest_osdmap())
            .await
            .map_err(|error| RadosError::Io(format!("osdmap wait: {error}")))??;
        Ok(())
    }
}

#[async_trait]
impl Rados for CephRados {
    async fn pool_create(&self, spec: PoolSpec) -> Result<PoolInfo> {
        pools::validate_spec(&spec)?;
        if self
            .pools()
            .await?
            .iter()
            .any(|pool| pool.name == spec.name)
        {
            return Err(RadosError::Exists(format!("pool {}", spec.name)));
        }
        let osds = self.osds_for(&spec).await?;
        if u64::from(spec.size) > osds {
            return Err(RadosError::InvalidArgument(format!(
                "pool {}: size {} is more than the {osds} OSDs it can place on",
                spec.name, spec.size
            )));
        }
        let rule = match (&spec.device_class, &spec.crush_rule) {
            (Some(class), _) => Some(self.rule_for_class(class).await?),
            (None, Some(rule)) => {
                let dump = self
                    .command(json!({"prefix": "osd crush rule dump"}))
                    .await?;
                if !pools::parse_rules(&dump)?
                    .values()
                    .any(|(name, _)| name == rule)
                {
                    return Err(RadosError::InvalidArgument(format!(
                        "no CRUSH rule {rule:?}"
                    )));
                }
                Some(rule.clone())
            }
            (None, None) => None,
        };
        let mut create = json!({
            "prefix": "osd pool create", "pool": spec.name, "pg_num": spec.pg_num,
            "pgp_num": spec.pg_num, "pool_type": "replicated", "autoscale_mode": "off",
        });
        if let Some(rule) = &rule {
            create["rule"] = json!(rule);
        }
        self.command(create).await?;
        for (variable, value) in [("size", spec.size), ("min_size", spec.effective_min_size())] {
            self.command(json!({
                "prefix": "osd pool set", "pool": spec.name, "var": variable,
                "val": value.to_string(), "yes_i_really_mean_it": true,
            }))
            .await?;
        }
        self.command(json!({
            "prefix": "osd pool application enable", "pool": spec.name,
            "app": self.config.application, "yes_i_really_mean_it": true,
        }))
        .await?;
        self.wait_for_latest_osdmap().await?;
        self.pool_lookup(&spec.name).await
    }

    async fn pool_delete(&self, name: &str) -> Result<()> {
        self.pool_lookup(name).await?;
        self.command(json!({
            "prefix": "osd pool delete", "pool": name, "pool2": name,
            "yes_i_really_really_mean_it": true,
        }))
        .await?;
        self.wait_for_latest_osdmap().await
    }

    async fn pool_list(&self) -> Result<Vec<PoolInfo>> {
        Ok(self.pools().await?)
    }

    async fn pool_lookup(&self, name: &str) -> Result<PoolInfo> {
        self.pools()
            .await?
            .into_iter()
            .find(|pool| pool.name == name)
            .ok_or_else(|| RadosError::NotFound(format!("pool {name}")))
    }

    async fn cluster_stats(&self) -> Result<ClusterStats> {
        let df = self
            .command(json!({"prefix": "df", "detail": "detail"}))
            .await?;
        let osd_stat = self.command(json!({"prefix": "osd stat"})).await?;
        let pool_stats = self.command(json!({"prefix": "osd pool stats"})).await?;
        let osd_dump = self.command(json!({"prefix": "osd dump"})).await?;
        Ok(pools::parse_stats(&df, &osd_stat, &pool_stats, &osd_dump))
    }

    async fn io_ctx(&self, pool: &str) -> Result<Arc<dyn IoCtx>> {
        Ok(Arc::new(self.ceph_io_ctx(pool).await?))
    }
}
