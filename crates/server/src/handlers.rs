//! Routing of admin requests to cluster calls. Path segments are percent-decoded after the
//! path is split on `/`, so object names may hold any byte the API allows (`%2F` for `/`).
//! Every request but `GET /status` and `GET /metrics` needs the admin token ([`is_public`],
//! checked in `admin.rs` on the path as this router reads it): in the `Authorization`
//! header, or for a GET in the dashboard's session cookie ([`crate::dashboard`]).
//!
//! | Method and path                        | Does                                   |
//! |----------------------------------------|----------------------------------------|
//! | `GET /status`                          | [`report::Status`]                     |
//! | `GET /metrics`                         | Prometheus text                        |
//! | `GET /api/osd/tree`, `/api/osd/df`     | OSD tree, per-OSD usage                |
//! | `POST /api/osd/{id}/{down,up,out,in}`  | marks the OSD, returns the new epoch   |
//! | `POST /api/osd/{id}/reweight` (`{"weight":0.5}`) | its override weight, 0..=1   |
//! | `POST /api/osd/crush/{set,rm}-device-class` (`{"class":"ssd","ids":[1,2]}`) | device classes (set refuses an OSD with another class) |
//! | `GET /api/pools`, `POST /api/pools`    | list, create (`{"name","size",...}`)   |
//! | `POST /api/pools/{name}/set`           | `{"key","value"}`: size, min_size, pg_num, quotas |
//! | `GET /api/pools/{name}/settings`       | those settings and crush_rule          |
//! | `DELETE /api/pools/{name}`             | removes a pool and its objects (not the S3 gateway's while S3 is served) |
//! | `GET /api/df`                          | [`report::Usage`], pools, the S3 GC backlog (`gc`) |
//! | `GET /api/history`                    | [`crate::rates::Rates`] between neighbouring samples, oldest first (10 minutes) |
//! | `GET /api/stats?top=N`                 | [`report::PeriodReport`]: the last statistics period, its N (20) most accessed objects |
//! | `GET /api/objects/{pool}`              | object names                           |
//! | `PUT/GET/DELETE /api/objects/{pool}/{object}` | write whole, read, remove (a striped object with its pieces) |
//! | `PUT /api/objects/{pool}/{object}?tag=T&size_bytes=N&piece_bytes=N&pieces=N` | a striped object's head ([`crate::striped`]) |
//! | `GET /api/stat/{pool}/{object}`        | size, mtime, version, placement, `striped` manifest |
//! | `POST /api/scrub?pool=P&repair=true`   | deep scrub, returns the report         |
//! | `GET /api/pg`, `GET /api/pg/{pgid}`    | every PG (or one): sets, state, unfound objects |
//! | `POST /api/pg/{pgid}/mark-unfound-lost?how=revert\|delete` | resolves its unfound objects |
//! | `GET /api/balancer`                    | the balancer's status (`balancer::BalancerStatus`) |
//! | `POST /api/balancer/{on,off}`, `POST /api/balancer/mode/{mode}` | switch it, set its mode |
//! | `POST /api/balancer/config?period_s=S&target_max_misplaced_ratio=R` | its period and budget |
//! | `GET /api/balancer/eval[/{plan}]`      | scores per pool and in total, now or after a plan |
//! | `POST /api/balancer/optimize/{plan}`, `GET/DELETE /api/balancer/plans/{plan}`, `POST /api/balancer/execute/{plan}` | named plans |
//! | `PUT /api/pg/{pgid}/upmap-items` (`{"items":[[from,to],...]}`), `DELETE` | set or remove a PG's pg_upmap_items |
//! | `GET /api/osd/map`                     | the OSD map, Ceph's binary encoding    |
//! | `GET /api/users`, `POST /api/users`    | S3 users: list, create (`{"uid",...}`) |
//! | `GET/DELETE /api/users/{uid}`          | one user's keys, remove it             |
//! | `POST /api/gc?grace_s=S&dry_run=true&force=true` | S3 orphan collection, returns the report |
//! | `GET /api/volumes`, `GET /api/volumes/{pool}` | volumes (`volume_api`)       |
//! | `POST /api/volumes/{pool}`             | create (`{"name","size_bytes","order"}`) |
//! | `GET/DELETE /api/volumes/{pool}/{name}` | describe, remove                      |
//! | `POST /api/volumes/{pool}/{name}/resize` | resize (`{"size_bytes"}`)            |
//! | `GET /api/tiers`, `POST /api/tiers/...` | cache tiers: list with statistics, commands (`tier_api`) |

use bytes::Bytes;
use hyper::{Method, Uri};
use percent_encoding::percent_decode_str;
use rados::{PoolSpec, RadosError};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::backend::{Backend, OsdAction};
use crate::balancer::BalancerRequest;
use crate::error::{Result, ServerError};

/// A successful reply.
pub(crate) enum Reply {
    Json(Value),
    Text(String),
    Bytes(Bytes),
}

pub(crate) fn json(value: impl serde::Serialize) -> Result<Reply> {
    serde_json::to_value(value)
        .map(Reply::Json)
        .map_err(|e| ServerError::Shutdown(format!("encoding reply: {e}")))
}

/// The services besides the backend a request may need, when they run.
#[derive(Clone, Copy)]
pub(crate) struct Services<'a> {
    /// The S3 gateway.
    pub(crate) gateway: Option<&'a gateway::Gateway>,
    /// The volumes.
    pub(crate) volumes: Option<&'a crate::volumes::VolumeExports>,
    /// The cache tiers (and the object API through their overlays).
    pub(crate) tiers: Option<&'a std::sync::Arc<tier::TieredRados>>,
    /// The S3 front's request counters.
    pub(crate) requests: Option<&'a gateway::RequestMetrics>,
    /// The sampled rates.
    pub(crate) history: &'a std::sync::Mutex<crate::rates::History>,
}

/// The object API as clients see it: through the tiers' overlays when they run.
fn objects(backend: &dyn Backend, services: Services<'_>) -> std::sync::Arc<dyn rados::Rados> {
    match services.tiers {
        Some(tiers) => tiers.clone(),
        None => backend.rados(),
    }
}

impl Services<'_> {
    /// The rates over the last seconds, as `status` reports them.
    fn recent_rates(&self) -> Option<crate::rates::Rates> {
        self.history
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .recent(crate::rates::STATUS_WINDOW_MS)
    }
}

/// Routes one request.
pub(crate) async fn route(
    backend: &dyn Backend,
    services: Services<'_>,
    method: &Method,
    uri: &Uri,
    body: Bytes,
) -> Result<Reply> {
    let gateway = services.gateway;
    let segments = segments(uri.path())?;
    let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
    if let ["api", "tiers", rest @ ..] = segments.as_slice() {
        return crate::tier_api::route(services.tiers, method, rest, &body).await;
    }
    if let ["api", "volumes", rest @ ..] = segments.as_slice() {
        return crate::volume_api::route(services.volumes, method, rest, &body).await;
    }
    if let ("POST", ["api", "gc"]) = (method.as_str(), segments.as_slice()) {
        return collect_orphans(gateway, uri).await;
    }
    if let ["api", "gc", "packs"] = segments.as_slice() {
        return pack_gc(gateway, method).await;
    }
    if let ["api", "balancer", rest @ ..] = segments.as_slice() {
        let request = balancer_request(method, rest, uri)?;
        return json(backend.balancer(request).await?);
    }
    if let ["api", "users", rest @ ..] = segments.as_slice() {
        return route_users(gateway.map(gateway::Gateway::users), method, rest, &body).await;
    }
    let no_route = || ServerError::NoRoute {
        method: method.to_string(),
        path: uri.path().to_string(),
    };
    match (method.as_str(), segments.as_slice()) {
        ("GET", ["status"]) => {
            let mut status = backend.status().await?;
            status.io = services.recent_rates();
            if let Some(tiers) = services.tiers {
                status.tiers = crate::tier_api::entries(tiers);
            }
            json(status)
        }
        ("GET", ["metrics"]) => {
            let mut text = backend
                .metrics(gateway.map(gateway::Gateway::stats))
                .await?;
            if let Some(requests) = services.requests {
                text.push_str(&crate::metrics::render_requests(&requests.snapshot()));
            }
            if let Some(tiers) = services.tiers {
                text.push_str(&crate::metrics::render_tiers(&crate::tier_api::entries(
                    tiers,
                )));
            }
            Ok(Reply::Text(text))
        }
        ("GET", ["api", "history"]) => {
            let series = services
                .history
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .series();
            json(json!({ "period_ms": crate::rates::SAMPLE_PERIOD_MS, "rates": series }))
        }
        ("GET", ["api", "osd", "tree"]) => json(backend.osd_tree().await?),
        ("GET", ["api", "osd", "df"]) => json(backend.osd_usage().await?),
        ("GET", ["api", "osd", "map"]) => Ok(Reply::Bytes(backend.osd_getmap().await?)),
        ("PUT", ["api", "pg", pg, "upmap-items"]) => {
            let request: UpmapRequest = decode(&body)?;
            if request.items.is_empty() {
                return Err(ServerError::BadRequest(
                    "no items: give [[from, to], ...] (DELETE removes a PG's items)".into(),
                ));
            }
            let epoch = backend.set_pg_upmap_items(pg, request.items).await?;
            json(json!({ "pg": pg, "epoch": epoch }))
        }
        ("DELETE", ["api", "pg", pg, "upmap-items"]) => {
            let epoch = backend.set_pg_upmap_items(pg, Vec::new()).await?;
            json(json!({ "pg": pg, "epoch": epoch }))
        }
        ("POST", ["api", "osd", "crush", command @ ("set-device-class" | "rm-device-class")]) => {
            let request: DeviceClassRequest = decode(&body)?;
            if request.ids.is_empty() {
                return Err(ServerError::BadRequest(
                    "no OSD ids (\"ids\": [1, 2])".into(),
                ));
            }
            let class = match (*command, request.class.as_deref()) {
                ("set-device-class", Some(class)) => Some(class),
                ("set-device-class", None) => {
                    return Err(ServerError::BadRequest("no \"class\"".into()))
                }
                _ => None,
            };
            let epoch = backend.osd_device_class(class, &request.ids).await?;
            json(json!({ "ids": request.ids, "class": class, "epoch": epoch }))
        }
        ("POST", ["api", "osd", id, "reweight"]) => {
            let id = osd_id(id)?;
            let request: ReweightRequest = decode(&body)?;
            let epoch = backend.osd_reweight(id, request.weight).await?;
            json(json!({ "osd": id, "weight": request.weight, "epoch": epoch }))
        }
        ("POST", ["api", "osd", id, action]) => {
            let id: i32 = id.strip_prefix("osd.").unwrap_or(id).parse().map_err(|_| {
                ServerError::BadRequest(format!(
                    "OSD id {id:?} is not a number from 0 to 65535 (N or osd.N)"
                ))
            })?;
            let action = OsdAction::parse(action).ok_or_else(no_route)?;
            let epoch = backend.mark_osd(id, action).await?;
            json(json!({ "osd": id, "action": action.as_str(), "epoch": epoch }))
        }
        ("GET", ["api", "pools"]) => json(backend.pools().await?),
        ("POST", ["api", "pools"]) => {
            let request: PoolRequest = decode(&body)?;
            if let Some(profile) = &request.erasure {
                let pg_num = request.pg_num.unwrap_or(32);
                let info = backend
                    .erasure_pool_create(&request.name, profile, pg_num)
                    .await?;
                return json(json!({ "id": info.id, "name": info.name, "size": info.size,
                    "min_size": info.min_size, "pg_num": info.pg_num,
                    "crush_rule": info.crush_rule, "device_class": info.device_class,
                    "erasure": profile }));
            }
            let mut spec = PoolSpec::new(&request.name);
            spec.size = request.size.unwrap_or(spec.size);
            spec.pg_num = request.pg_num.unwrap_or(spec.pg_num);
            spec.min_size = request.min_size;
            spec.device_class = request.device_class;
            spec.crush_rule = request.crush_rule;
            let info = backend.rados().pool_create(spec).await?;
            json(json!({ "id": info.id, "name": info.name, "size": info.size,
                "min_size": info.min_size, "pg_num": info.pg_num,
                "crush_rule": info.crush_rule, "device_class": info.device_class }))
        }
        ("POST", ["api", "pools", name, "set"]) => {
            let request: PoolSetRequest = decode(&body)?;
            let epoch = backend.pool_set(name, &request.key, &request.value).await?;
            json(
                json!({ "message": format!("set pool '{name}' {} to {}", request.key,
                request.value), "epoch": epoch }),
            )
        }
        ("GET", ["api", "pools", name, "settings"]) => json(backend.pool_get(name).await?),
        ("DELETE", ["api", "pools", name]) => {
            crate::tier_api::refuse_pool_delete(services.tiers.map(|t| &**t), name)?;
            backend.pool_delete(name).await?;
            json(json!({ "removed": name }))
        }
        ("GET", ["api", "df"]) => {
            let pools = backend.pools().await?;
            let usage = backend.usage().await?;
            // Replaced S3 data still held until the GC removes it (none without S3).
            let gc = match gateway {
                Some(gateway) => Some(
                    gateway
                        .gc_backlog()
                        .await
                        .map_err(|e| ServerError::Gateway(format!("GC queue: {e}")))?,
                ),
                None => None,
            };
            // Dead pack ranges awaiting the pack GC, and rewrites under way.
            let packs = match gateway {
                Some(gateway) => Some(
                    gateway
                        .pack_gc_status()
                        .await
                        .map_err(|e| ServerError::Gateway(format!("pack GC log: {e}")))?,
                ),
                None => None,
            };
            json(json!({ "usage": usage, "pools": pools, "gc": gc, "packs": packs }))
        }
        ("GET", ["api", "stats"]) => {
            let mut top = 20;
            for (name, value) in query(uri)? {
                match name.as_str() {
                    "top" => {
                        top = value.parse().map_err(|_| {
                            ServerError::BadRequest(format!("top {value:?} is not a count"))
                        })?
                    }
                    other => {
                        return Err(ServerError::BadRequest(format!(
                            "unknown parameter {other:?} (top)"
                        )))
                    }
                }
            }
            json(backend.stats_period(top).await?)
        }
        ("GET", ["api", "objects", pool]) => {
            let io = objects(backend, services).io_ctx(pool).await?;
            let mut names = io.list_all().await?;
            names.sort();
            json(json!({ "pool": pool, "objects": names }))
        }
        ("PUT", ["api", "objects", pool, object]) => {
            let io = objects(backend, services).io_ctx(pool).await?;
            let striped = striped_manifest(uri)?;
            // The request body moves into the op (no copy here).
            crate::striped::put(&*io, object, body, striped.as_ref()).await?;
            let stat = io.stat(object).await?;
            json(
                json!({ "pool": pool, "object": object, "size_bytes": stat.size_bytes,
                "version": stat.version }),
            )
        }
        ("GET", ["api", "objects", pool, object]) => {
            let io = objects(backend, services).io_ctx(pool).await?;
            Ok(Reply::Bytes(Bytes::from(io.read_full(object).await?)))
        }
        ("DELETE", ["api", "objects", pool, object]) => {
            let io = objects(backend, services).io_ctx(pool).await?;
            crate::striped::remove(&*io, object).await?;
            json(json!({ "removed": object }))
        }
        ("GET", ["api", "stat", pool, object]) => {
            let io = objects(backend, services).io_ctx(pool).await?;
            let stat = io.stat(object).await?;
            let striped = crate::striped::manifest(&*io, object).await?;
            let place = backend.locate(pool, object).await?;
            json(
                json!({ "pool": pool, "object": object, "size_bytes": stat.size_bytes,
                "mtime_ns": stat.mtime_ns, "version": stat.version,
                "pg": place.pg, "up": place.up, "acting": place.acting,
                "striped": striped }),
            )
        }
        ("POST", ["api", "scrub"]) => {
            let query = query(uri)?;
            let pool = query
                .iter()
                .find(|(k, _)| k == "pool")
                .map(|(_, v)| v.as_str());
            let repair = query
                .iter()
                .any(|(k, v)| k == "repair" && (v == "true" || v == "1"));
            json(backend.scrub(pool, repair).await?)
        }
        ("GET", ["api", "pg"]) => json(backend.pg_list().await?),
        ("GET", ["api", "pg", pg]) => {
            let info = backend
                .pg_list()
                .await?
                .into_iter()
                .find(|info| info["pg"] == *pg)
                .ok_or_else(|| RadosError::NotFound(format!("pg {pg:?}")))?;
            json(info)
        }
        ("POST", ["api", "pg", pg, "mark-unfound-lost"]) => {
            let how = query(uri)?
                .into_iter()
                .find(|(k, _)| k == "how")
                .map(|(_, v)| v)
                .unwrap_or_default();
            let resolved = backend.mark_unfound_lost(pg, &how).await?;
            json(json!({ "pg": pg, "resolved": resolved }))
        }
        _ => Err(no_route()),
    }
}

/// `POST /api/gc?grace_s=S&dry_run=true`: the S3 gateway's orphan collection (data objects no
/// index entry or part refers to, older than the grace period; default one hour).
async fn collect_orphans(gateway: Option<&gateway::Gateway>, uri: &Uri) -> Result<Reply> {
    let Some(gateway) = gateway else {
        return Err(ServerError::BadRequest(
            "S3 is not served (strata serve --no-s3), so there is no S3 data to collect".into(),
        ));
    };
    let mut grace_s: u64 = 3600;
    let mut dry_run = false;
    let mut force = false;
    for (name, value) in query(uri)? {
        match name.as_str() {
            "grace_s" => {
                grace_s = value.parse().map_err(|_| {
                    ServerError::BadRequest(format!(
                        "grace_s {value:?} is not a whole number of seconds"
                    ))
                })?
            }
            "dry_run" => dry_run = value == "true" || value == "1",
            "force" => force = value == "true" || value == "1",
            other => {
                return Err(ServerError::BadRequest(format!(
                    "unknown parameter {other:?} (grace_s, dry_run, force)"
                )))
            }
        }
    }
    // Uploads running longer than the grace period are fenced (they fail with 500): a short
    // one breaks ordinary slow uploads, so it takes force=true (a dry run changes nothing).
    if grace_s < gateway::ORPHAN_GRACE_S_MIN && !dry_run && !force {
        return Err(ServerError::BadRequest(format!(
            "grace_s {grace_s} is shorter than {} s: every upload still running after it \
             would be failed; pass force=true (strata gc --force) to do it anyway",
            gateway::ORPHAN_GRACE_S_MIN
        )));
    }
    let grace_ns = grace_s.saturating_mul(1_000_000_000);
    let report = gateway
        .collect_orphans(grace_ns, dry_run)
        .await
        .map_err(user_error)?;
    json(report)
}

/// `POST /api/gc/packs`: one pass of the pack GC now (packs whose logged dead share passed
/// `--packing-gc-dead-percent` are rewritten without their dead ranges), as the gateway's
/// own GC loop runs it each period; `GET` shows what the log holds.
async fn pack_gc(gateway: Option<&gateway::Gateway>, method: &Method) -> Result<Reply> {
    let Some(gateway) = gateway else {
        return Err(ServerError::BadRequest(
            "S3 is not served (strata serve --no-s3), so there are no packs to collect".into(),
        ));
    };
    match method.as_str() {
        "POST" if !gateway.config().packing.enabled => Err(ServerError::BadRequest(
            "packing is off (strata serve --packing on): there are no packs to rewrite".into(),
        )),
        "POST" => json(gateway.pack_gc().await.map_err(user_error)?),
        "GET" => json(gateway.pack_gc_status().await.map_err(user_error)?),
        other => Err(ServerError::BadRequest(format!(
            "{other} /api/gc/packs: use POST to run a pass or GET for the log's state"
        ))),
    }
}

/// `/api/users...`: the gateway's user table, as `radosgw-admin user` manages it.
async fn route_users(
    users: Option<&gateway::Users>,
    method: &Method,
    rest: &[&str],
    body: &[u8],
) -> Result<Reply> {
    let Some(users) = users else {
        return Err(ServerError::BadRequest(
            "S3 is not served (strata serve --no-s3), so there are no S3 users".into(),
        ));
    };
    let no_user = |uid: &str| ServerError::Rados(RadosError::NotFound(format!("user {uid}")));
    match (method.as_str(), rest) {
        ("GET", []) => json(users.list().await.map_err(user_error)?),
        ("POST", []) => {
            let request: UserRequest = decode(body)?;
            let keys = match (request.access_key, request.secret_key) {
                (Some(access), Some(secret)) => Some((access, secret)),
                (None, None) => None,
                _ => {
                    return Err(ServerError::BadRequest(
                        "give both access_key and secret_key, or neither".into(),
                    ))
                }
            };
            let display_name = request.display_name.unwrap_or_else(|| request.uid.clone());
            let email = request.email.unwrap_or_default();
            let user = users
                .create(&request.uid, &display_name, &email, keys)
                .await
                .map_err(user_error)?;
            json(user)
        }
        ("GET", [uid]) => match users.info(uid).await.map_err(user_error)? {
            Some(user) => json(user),
            None => Err(no_user(uid)),
        },
        ("DELETE", [uid]) => {
            if !users.remove(uid).await.map_err(user_error)? {
                return Err(no_user(uid));
            }
            json(json!({ "removed": uid }))
        }
        _ => Err(ServerError::NoRoute {
            method: method.to_string(),
            path: format!("/api/users/{}", rest.join("/")),
        }),
    }
}

/// A gateway error as the admin API reports it: 409 for a taken uid or key, 400 for a bad
/// argument, the cluster's status otherwise.
fn user_error(error: gateway::GatewayError) -> ServerError {
    match error {
        gateway::GatewayError::UserExists(what) => {
            ServerError::Rados(RadosError::Exists(format!("user {what}")))
        }
        gateway::GatewayError::InvalidArgument(message) => ServerError::BadRequest(message),
        gateway::GatewayError::Rados(error) => ServerError::Rados(error),
        other => ServerError::Gateway(other.to_string()),
    }
}

/// `PUT /api/pg/{pgid}/upmap-items` body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpmapRequest {
    items: Vec<(i32, i32)>,
}

/// The balancer command a `/api/balancer/...` request names.
fn balancer_request(method: &Method, rest: &[&str], uri: &Uri) -> Result<BalancerRequest> {
    let plan = |name: &str| name.to_string();
    Ok(match (method.as_str(), rest) {
        ("GET", []) => BalancerRequest::Status,
        ("POST", ["on"]) => BalancerRequest::Activate(true),
        ("POST", ["off"]) => BalancerRequest::Activate(false),
        ("POST", ["mode", mode]) => BalancerRequest::Mode(plan(mode)),
        ("POST", ["config"]) => {
            let mut period_s = None;
            let mut target_max_misplaced_ratio = None;
            let mut load = Vec::new();
            for (name, value) in query(uri)? {
                match name.as_str() {
                    "period_s" => {
                        period_s = Some(value.parse().map_err(|_| {
                            ServerError::BadRequest(format!(
                                "period_s {value:?} is not a whole number of seconds"
                            ))
                        })?)
                    }
                    "target_max_misplaced_ratio" => {
                        target_max_misplaced_ratio = Some(value.parse().map_err(|_| {
                            ServerError::BadRequest(format!(
                                "target_max_misplaced_ratio {value:?} is not a number"
                            ))
                        })?)
                    }
                    knob if crate::balancer::LOAD_KNOBS.contains(&knob) => {
                        let number = value.parse().map_err(|_| {
                            ServerError::BadRequest(format!("{knob} {value:?} is not a number"))
                        })?;
                        load.push((knob.to_string(), number));
                    }
                    other => {
                        return Err(ServerError::BadRequest(format!(
                        "unknown parameter {other:?} (period_s, target_max_misplaced_ratio, {})",
                        crate::balancer::LOAD_KNOBS.join(", ")
                    )))
                    }
                }
            }
            BalancerRequest::Configure {
                period_s,
                target_max_misplaced_ratio,
                load,
            }
        }
        ("GET", ["eval"]) => BalancerRequest::Eval(None),
        ("GET", ["eval", name]) => BalancerRequest::Eval(Some(plan(name))),
        ("POST", ["optimize", name]) => BalancerRequest::Optimize(plan(name)),
        ("GET", ["plans", name]) => BalancerRequest::Show(plan(name)),
        ("DELETE", ["plans", name]) => BalancerRequest::Remove(plan(name)),
        ("POST", ["execute", name]) => BalancerRequest::Execute(plan(name)),
        _ => {
            return Err(ServerError::NoRoute {
                method: method.to_string(),
                path: uri.path().to_string(),
            })
        }
    })
}

/// `POST /api/users` body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UserRequest {
    uid: String,
    display_name: Option<String>,
    email: Option<String>,
    access_key: Option<String>,
    secret_key: Option<String>,
}

/// `POST /api/pools/{name}/set` body.
#[derive(Deserialize)]
struct PoolSetRequest {
    key: String,
    value: String,
}

/// `POST /api/pools` body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PoolRequest {
    name: String,
    size: Option<u32>,
    min_size: Option<u32>,
    pg_num: Option<u32>,
    device_class: Option<String>,
    crush_rule: Option<String>,
    /// An erasure-code profile: creates an erasure-coded pool instead.
    #[serde(default)]
    erasure: Option<String>,
}

/// An OSD id of a path, `N` or `osd.N`.
fn osd_id(id: &str) -> Result<i32> {
    id.strip_prefix("osd.").unwrap_or(id).parse().map_err(|_| {
        ServerError::BadRequest(format!(
            "OSD id {id:?} is not a number from 0 to 65535 (N or osd.N)"
        ))
    })
}

/// `POST /api/osd/{id}/reweight`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReweightRequest {
    weight: f64,
}

/// `POST /api/osd/crush/{set,rm}-device-class`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DeviceClassRequest {
    #[serde(default)]
    class: Option<String>,
    ids: Vec<i32>,
}

pub(crate) fn decode<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T> {
    serde_json::from_slice(body).map_err(|e| ServerError::BadRequest(format!("JSON body: {e}")))
}

fn decode_segment(segment: &str) -> Result<String> {
    percent_decode_str(segment)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| ServerError::BadRequest(format!("path segment {segment:?} is not UTF-8")))
}

/// Whether a request may go without the admin token: monitoring only (`GET /status` and
/// `GET /metrics`). Decided on the path as [`route`] reads it (leading slashes dropped,
/// segments percent-decoded), so no other spelling of an API path (`//api/pools`,
/// `/%61pi/pools`) reaches the API without the token; every other request needs it, unknown
/// and malformed paths included.
/// A striped head's manifest from `PUT ...?size_bytes=N&piece_bytes=N&pieces=N&tag=T`
/// ([`crate::striped`]); `None` without `tag`.
fn striped_manifest(uri: &Uri) -> Result<Option<crate::striped::Manifest>> {
    let pairs = query(uri)?;
    let get = |name: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let Some(tag) = get("tag") else {
        return Ok(None);
    };
    let number = |name: &str| -> Result<u64> {
        get(name)
            .and_then(|value| value.parse().ok())
            .ok_or_else(|| ServerError::BadRequest(format!("a striped PUT needs {name}=N")))
    };
    Ok(Some(crate::striped::Manifest {
        size_bytes: number("size_bytes")?,
        piece_bytes: number("piece_bytes")?,
        pieces: number("pieces")?,
        tag,
    }))
}

pub(crate) fn is_public(method: &Method, path: &str) -> bool {
    method == Method::GET
        && segments(path).is_ok_and(|segments| {
            matches!(segments.as_slice(), [only] if only == "status" || only == "metrics")
        })
}

fn segments(path: &str) -> Result<Vec<String>> {
    path.trim_start_matches('/')
        .trim_end_matches('/')
        .split('/')
        .map(decode_segment)
        .collect()
}

fn query(uri: &Uri) -> Result<Vec<(String, String)>> {
    let Some(query) = uri.query() else {
        return Ok(Vec::new());
    };
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            Ok((decode_segment(key)?, decode_segment(value)?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_monitoring_is_public_however_the_path_is_spelled() {
        for path in ["/status", "/metrics", "//status", "/metrics/", "/%73tatus"] {
            assert!(is_public(&Method::GET, path), "{path}");
        }
        let guarded = [
            "/api/pools",
            "//api/pools",
            "/%61pi/pools",
            "/api%2Fpools",
            "/api",
            "/",
            "/nowhere",
            "/status/x",
            "/%FF",
        ];
        for path in guarded {
            assert!(!is_public(&Method::GET, path), "{path}");
        }
        assert!(!is_public(&Method::POST, "/status"));
    }

    #[test]
    fn segments_are_decoded_after_splitting() {
        assert_eq!(
            segments("/api/objects/p/a%2Fb%20c").unwrap(),
            ["api", "objects", "p", "a/b c"]
        );
        assert!(segments("/api/objects/p/%FF").is_err());
    }
}
