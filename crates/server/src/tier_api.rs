//! `/api/tiers/...`: the cache tiers of the running server, as `ceph osd tier ...` and `ceph osd
//! pool set|get|stats` name them.
//!
//! | Method and path                          | Does                                        |
//! |------------------------------------------|---------------------------------------------|
//! | `GET /api/tiers`                         | every tier: configuration and statistics    |
//! | `POST /api/tiers/add`                    | `{"base","cache","force_nonempty"}`         |
//! | `POST /api/tiers/remove`                 | `{"base","cache"}`                          |
//! | `POST /api/tiers/cache-mode`             | `{"cache","mode","confirmed"}`              |
//! | `POST /api/tiers/set-overlay`            | `{"base","cache"}`                          |
//! | `POST /api/tiers/remove-overlay`         | `{"base"}`                                  |
//! | `POST /api/tiers/flush-evict-all`        | `{"cache"}`: the agent empties the cache    |
//! | `POST /api/tiers/set`                    | `{"pool","key","value"}`: a cache pool setting |
//! | `GET /api/tiers/get/{pool}/{key}`        | one setting's value                         |

use bytes::Bytes;
use hyper::Method;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tier::{CacheMode, TierConfig, TierStats, TieredRados};

use crate::error::{Result, ServerError};
use crate::handlers::{json, Reply};

/// One tier as `GET /api/tiers` lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TierEntry {
    /// Its configuration.
    pub config: TierConfig,
    /// Its counters (zero while it is not an overlay).
    pub stats: TierStats,
}

#[derive(Deserialize)]
struct Request {
    base: Option<String>,
    cache: Option<String>,
    mode: Option<String>,
    #[serde(default)]
    confirmed: bool,
    #[serde(default)]
    force_nonempty: bool,
    pool: Option<String>,
    key: Option<String>,
    value: Option<String>,
}

fn field(value: Option<String>, name: &str) -> Result<String> {
    value.ok_or_else(|| ServerError::BadRequest(format!("the request needs \"{name}\"")))
}

/// Refuses to delete a pool that is a tier or has one.
pub(crate) fn refuse_pool_delete(tiers: Option<&TieredRados>, pool: &str) -> Result<()> {
    let Some(tiers) = tiers else { return Ok(()) };
    for config in tiers.tiers() {
        if config.cache_pool == pool || config.base_pool == pool {
            return Err(ServerError::Busy(format!(
                "pool {pool:?} is in the cache tier {} over {}: remove the tier first \
                 (strata osd tier remove {} {})",
                config.cache_pool, config.base_pool, config.base_pool, config.cache_pool
            )));
        }
    }
    Ok(())
}

/// Every tier with its counters.
pub fn entries(tiers: &TieredRados) -> Vec<TierEntry> {
    let stats = tiers.stats();
    tiers
        .tiers()
        .into_iter()
        .map(|config| TierEntry {
            stats: stats
                .iter()
                .find(|s| s.cache_pool == config.cache_pool)
                .cloned()
                .unwrap_or_default(),
            config,
        })
        .collect()
}

/// Routes `/api/tiers/{rest}`.
pub(crate) async fn route(
    tiers: Option<&std::sync::Arc<TieredRados>>,
    method: &Method,
    rest: &[&str],
    body: &Bytes,
) -> Result<Reply> {
    let tiers = tiers.ok_or_else(|| {
        ServerError::Shutdown("the cache tiers are not running (starting or stopping)".into())
    })?;
    let request = || -> Result<Request> {
        serde_json::from_slice(body)
            .map_err(|e| ServerError::BadRequest(format!("tier request: {e}")))
    };
    match (method.as_str(), rest) {
        ("GET", []) => json(entries(tiers)),
        ("POST", ["add"]) => {
            let r = request()?;
            let (base, cache) = (field(r.base, "base")?, field(r.cache, "cache")?);
            tiers.tier_add(&base, &cache, r.force_nonempty).await?;
            json(
                json!({ "message": format!("pool '{cache}' is now (or already was) a tier of '{base}'") }),
            )
        }
        ("POST", ["remove"]) => {
            let r = request()?;
            let (base, cache) = (field(r.base, "base")?, field(r.cache, "cache")?);
            tiers.tier_remove(&base, &cache).await?;
            json(
                json!({ "message": format!("pool '{cache}' is now (or already was) not a tier of '{base}'") }),
            )
        }
        ("POST", ["cache-mode"]) => {
            let r = request()?;
            let cache = field(r.cache, "cache")?;
            let mode = CacheMode::parse(&field(r.mode, "mode")?)?;
            tiers.cache_mode(&cache, mode, r.confirmed).await?;
            json(
                json!({ "message": format!("set cache-mode for pool '{cache}' to {}", mode.name()) }),
            )
        }
        ("POST", ["set-overlay"]) => {
            let r = request()?;
            let (base, cache) = (field(r.base, "base")?, field(r.cache, "cache")?);
            tiers.set_overlay(&base, &cache).await?;
            json(
                json!({ "message": format!("overlay for '{base}' is now (or already was) '{cache}'") }),
            )
        }
        ("POST", ["remove-overlay"]) => {
            let r = request()?;
            let base = field(r.base, "base")?;
            tiers.remove_overlay(&base).await?;
            json(
                json!({ "message": format!("there is now (or already was) no overlay for '{base}'") }),
            )
        }
        ("POST", ["flush-evict-all"]) => {
            let r = request()?;
            let cache = field(r.cache, "cache")?;
            tiers.flush_evict_all(&cache)?;
            json(
                json!({ "message": format!("flushing and evicting every object of '{cache}' in the background (strata osd pool stats shows the progress)") }),
            )
        }
        ("POST", ["set"]) => {
            let r = request()?;
            let (pool, key, value) = (
                field(r.pool, "pool")?,
                field(r.key, "key")?,
                field(r.value, "value")?,
            );
            tiers.pool_set(&pool, &key, &value).await?;
            json(json!({ "message": format!("set pool '{pool}' {key} to {value}") }))
        }
        ("GET", ["get", pool, key]) => {
            let value = tiers.pool_get(pool, key)?;
            json(json!({ "pool": pool, "key": key, "value": value }))
        }
        _ => Err(ServerError::NoRoute {
            method: method.to_string(),
            path: format!("/api/tiers/{}", rest.join("/")),
        }),
    }
}
