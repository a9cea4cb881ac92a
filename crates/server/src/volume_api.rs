//! `/api/volumes/...`: the volumes of the cluster's pools, as `rbd` manages images
//! (`strata volume create|ls|info|resize|rm` call these; import and export go over NBD).

use hyper::Method;
use serde::Deserialize;
use serde_json::{json, Value};
use volume::VolumeInfo;

use crate::error::{Result, ServerError};
use crate::handlers::{decode, json, Reply};
use crate::volumes::VolumeExports;

#[derive(Deserialize)]
struct CreateRequest {
    name: String,
    size_bytes: u64,
    order: Option<u8>,
    /// The pool of the data objects, when not `pool` (rbd's `--data-pool`).
    data_pool: Option<String>,
}

#[derive(Deserialize)]
struct ResizeRequest {
    size_bytes: u64,
}

/// A volume as the API reports it; `data_pool` names the pool of its data objects when
/// that is not `pool`.
pub(crate) async fn info_json(volumes: &VolumeExports, pool: &str, info: &VolumeInfo) -> Value {
    let data_pool = match info.data_pool_id {
        Some(id) => Some(
            volumes
                .pool_name(id)
                .await
                .unwrap_or_else(|| format!("pool id {id} (not found)")),
        ),
        None => None,
    };
    json!({
        "pool": pool,
        "name": info.name,
        "id": info.id,
        "size_bytes": info.size_bytes,
        "order": info.order,
        "object_size_bytes": info.object_size_bytes(),
        "object_count": info.object_count,
        "features": info.features,
        "object_prefix": info.object_prefix,
        "create_timestamp_ns": info.create_timestamp_ns,
        "data_pool": data_pool,
        "lease": info.lease.as_ref().map(|lease| json!({
            "holder": lease.holder, "expires_ns": lease.expires_ns })),
    })
}

/// Routes `/api/volumes/{rest}`.
pub(crate) async fn route(
    volumes: Option<&VolumeExports>,
    method: &Method,
    rest: &[&str],
    body: &[u8],
) -> Result<Reply> {
    let Some(volumes) = volumes else {
        return Err(ServerError::NotSupported(
            "volumes are not served yet (the server is starting)".into(),
        ));
    };
    match (method.as_str(), rest) {
        ("GET", []) => {
            let mut listed = Vec::new();
            for export in volumes.list_all().await? {
                if let Some((pool, name)) = crate::volumes::split_export_name(&export) {
                    listed.push(info_json(volumes, pool, &volumes.info(pool, name).await?).await);
                }
            }
            json(listed)
        }
        ("GET", [pool]) => {
            let catalogue = volumes.catalogue(pool).await?;
            let mut listed = Vec::new();
            for name in catalogue.list().await? {
                listed.push(info_json(volumes, pool, &catalogue.info(&name).await?).await);
            }
            json(listed)
        }
        ("POST", [pool]) => {
            let request: CreateRequest = decode(body)?;
            let order = request.order.unwrap_or(volume::ORDER_DEFAULT);
            let info = volumes
                .create(
                    pool,
                    &request.name,
                    request.size_bytes,
                    order,
                    request.data_pool.as_deref(),
                )
                .await?;
            json(info_json(volumes, pool, &info).await)
        }
        ("GET", [pool, name]) => {
            json(info_json(volumes, pool, &volumes.info(pool, name).await?).await)
        }
        ("POST", [pool, name, "resize"]) => {
            let request: ResizeRequest = decode(body)?;
            let info = volumes.resize(pool, name, request.size_bytes).await?;
            json(info_json(volumes, pool, &info).await)
        }
        ("DELETE", [pool, name]) => {
            volumes.remove(pool, name).await?;
            json(json!({ "removed": format!("{pool}/{name}") }))
        }
        _ => Err(ServerError::NoRoute {
            method: method.to_string(),
            path: format!("/api/volumes/{}", rest.join("/")),
        }),
    }
}
