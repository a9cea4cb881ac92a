//! The admin HTTP endpoint: hyper 1 over HTTP/1.1, one task per connection, every request
//! routed by [`crate::handlers`] (the dashboard's pages by [`crate::dashboard`]); a sampler
//! task keeps the rates of [`crate::rates`]. Shutdown stops accepting and aborts idle connections.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::backend::Backend;
use crate::dashboard;
use crate::error::{Result, ServerError};
use crate::handlers::{self, Reply};
use crate::rates::{self, History};
use crate::volumes::VolumeExports;

/// A running admin endpoint.
pub struct AdminServer {
    /// Where it listens.
    pub local_addr: SocketAddr,
    /// The S3 gateway (its users for `/api/users`, its counters for `/metrics`), set once it
    /// runs; the admin endpoint starts first so that a failing gateway can still be diagnosed.
    gateway: Arc<OnceLock<gateway::Gateway>>,
    /// The volumes (`/api/volumes/...`), set once the NBD endpoints run.
    volumes: Arc<OnceLock<Arc<VolumeExports>>>,
    /// The cache tiers (`/api/tiers/...`), set once the server's object API runs through them.
    tiers: Arc<OnceLock<Arc<tier::TieredRados>>>,
    /// The S3 front's request counters (`/metrics`, rates), set once the gateway runs.
    requests: Arc<OnceLock<Arc<gateway::RequestMetrics>>>,
    shutdown: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl AdminServer {
    /// Binds `addr` and serves the admin API for `backend`.
    /// `/api/...` requests must carry `token` ([`crate::token`]).
    pub async fn start(
        addr: SocketAddr,
        backend: Arc<dyn Backend>,
        object_bytes_max: usize,
        token: String,
    ) -> Result<Self> {
        let token: Arc<str> = token.into();
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ServerError::Bind { addr, source })?;
        let local_addr = listener
            .local_addr()
            .map_err(|source| ServerError::Bind { addr, source })?;
        let (shutdown, mut stopped) = watch::channel(false);
        let gateway: Arc<OnceLock<gateway::Gateway>> = Arc::default();
        let served_gateway = gateway.clone();
        let volumes: Arc<OnceLock<Arc<VolumeExports>>> = Arc::default();
        let served_volumes = volumes.clone();
        let tiers: Arc<OnceLock<Arc<tier::TieredRados>>> = Arc::default();
        let served_tiers = tiers.clone();
        let requests: Arc<OnceLock<Arc<gateway::RequestMetrics>>> = Arc::default();
        let served_requests = requests.clone();
        let history: Arc<Mutex<History>> = Arc::default();
        let sampler = tokio::spawn(sample(
            Arc::clone(&backend),
            requests.clone(),
            Arc::clone(&history),
            stopped.clone(),
        ));
        let task = tokio::spawn(async move {
            let mut connections = JoinSet::new();
            loop {
                let accepted = tokio::select! {
                    accepted = listener.accept() => accepted,
                    _ = stopped.changed() => break,
                    Some(_) = connections.join_next(), if !connections.is_empty() => continue,
                };
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(error) => {
                        tracing::warn!(%error, "admin accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let backend = Arc::clone(&backend);
                let gateway = served_gateway.clone();
                let volumes = served_volumes.clone();
                let tiers = served_tiers.clone();
                let requests = served_requests.clone();
                let history = Arc::clone(&history);
                let token = Arc::clone(&token);
                connections.spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let backend = Arc::clone(&backend);
                        let gateway = gateway.clone();
                        let volumes = volumes.clone();
                        let tiers = tiers.clone();
                        let requests = requests.clone();
                        let history = Arc::clone(&history);
                        let token = Arc::clone(&token);
                        async move {
                            let services = handlers::Services {
                                gateway: gateway.get(),
                                volumes: volumes.get().map(|volumes| &**volumes),
                                tiers: tiers.get(),
                                requests: requests.get().map(|requests| &**requests),
                                history: &history,
                            };
                            Ok::<_, Infallible>(
                                handle(&*backend, services, &token, request, object_bytes_max)
                                    .await,
                            )
                        }
                    });
                    if let Err(error) = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await
                    {
                        tracing::debug!(%error, "admin connection ended with an error");
                    }
                });
            }
            // Give requests in flight a moment, then drop idle keep-alive connections.
            let grace = tokio::time::sleep(std::time::Duration::from_millis(500));
            tokio::pin!(grace);
            loop {
                tokio::select! {
                    next = connections.join_next() => if next.is_none() { break },
                    _ = &mut grace => { connections.abort_all(); break; }
                }
            }
            while connections.join_next().await.is_some() {}
            let _ = sampler.await;
        });
        Ok(Self {
            local_addr,
            gateway,
            volumes,
            tiers,
            requests,
            shutdown,
            task,
        })
    }

    /// Serves `/api/users` from the S3 gateway's user table, and its counters in `/metrics`,
    /// from now on.
    pub fn set_gateway(&self, gateway: gateway::Gateway) {
        let _ = self.gateway.set(gateway);
    }

    /// Counts the S3 front's requests in `/metrics` and the rates from now on.
    pub fn set_requests(&self, requests: Arc<gateway::RequestMetrics>) {
        let _ = self.requests.set(requests);
    }

    /// Serves `/api/volumes/...` from now on.
    pub fn set_volumes(&self, volumes: Arc<VolumeExports>) {
        let _ = self.volumes.set(volumes);
    }

    /// Serves `/api/tiers/...` and routes object requests through the tiers from now on.
    pub fn set_tiers(&self, tiers: Arc<tier::TieredRados>) {
        let _ = self.tiers.set(tiers);
    }

    /// Stops serving.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        let _ = self.task.await;
    }
}

/// Samples the backend's and the S3 front's counters into `history` every
/// [`rates::SAMPLE_PERIOD_MS`] until `stopped` changes.
async fn sample(
    backend: Arc<dyn Backend>,
    requests: Arc<OnceLock<Arc<gateway::RequestMetrics>>>,
    history: Arc<Mutex<History>>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut interval =
        tokio::time::interval(std::time::Duration::from_millis(rates::SAMPLE_PERIOD_MS));
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            _ = stopped.changed() => return,
        }
        let mut counters = match backend.io_counters() {
            Some(counters) => counters,
            None if requests.get().is_some() => rates::Counters::default(),
            None => continue,
        };
        if let Some(requests) = requests.get() {
            let stats = requests.snapshot();
            counters.s3_requests = stats.total();
            counters.s3_server_errors = stats.server_errors();
            counters.s3_latency_sum_s = stats.latency_sum_s();
        }
        let at_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_millis() as u64);
        history
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(rates::Sample { at_ms, counters });
    }
}

async fn handle(
    backend: &dyn Backend,
    services: handlers::Services<'_>,
    token: &str,
    request: Request<Incoming>,
    object_bytes_max: usize,
) -> Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    let guarded = !crate::handlers::is_public(&parts.method, parts.uri.path());
    let header = parts
        .headers
        .get(hyper::header::AUTHORIZATION)
        .map(|value| value.as_bytes());
    let by_cookie = dashboard::cookie_authorizes(&parts.method, &parts.headers, token);
    if dashboard::is_dashboard(&parts.method, parts.uri.path()) {
        // The login form's body is one short field.
        let body = match Limited::new(body, 4096).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(_) => Bytes::new(),
        };
        return dashboard::route(&parts.method, parts.uri.path(), &body, token, by_cookie);
    }
    if guarded && !by_cookie && !crate::token::authorizes(header, token) {
        tracing::warn!(method = %parts.method, uri = %parts.uri, "admin request without a valid token");
        return respond(Err(ServerError::Unauthorized {
            token_file: crate::token::ADMIN_TOKEN_FILE,
        }));
    }
    let body = match Limited::new(body, object_bytes_max).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(error) => {
            let failure = if error.is::<http_body_util::LengthLimitError>() {
                ServerError::TooLarge {
                    limit_bytes: object_bytes_max,
                }
            } else {
                ServerError::BadRequest(format!("reading the body: {error}"))
            };
            return respond(Err(failure));
        }
    };
    let started = std::time::Instant::now();
    let reply = handlers::route(backend, services, &parts.method, &parts.uri, body).await;
    tracing::debug!(method = %parts.method, uri = %parts.uri, elapsed_us = started.elapsed().as_micros() as u64, ok = reply.is_ok(), "admin request");
    respond(reply)
}

fn respond(reply: Result<Reply>) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match reply {
        Ok(Reply::Json(value)) => (200, "application/json", Bytes::from(value.to_string())),
        Ok(Reply::Text(text)) => (200, "text/plain; version=0.0.4", Bytes::from(text)),
        Ok(Reply::Bytes(bytes)) => (200, "application/octet-stream", bytes),
        Err(error) => {
            let (status, _) = error.status();
            if status >= 500 {
                tracing::warn!(%error, "admin request failed");
            }
            (
                status,
                "application/json",
                Bytes::from(error.to_json().to_string()),
            )
        }
    };
    let mut response = Response::new(Full::new(body));
    *response.status_mut() =
        hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(value) = hyper::header::HeaderValue::from_str(content_type) {
        response
            .headers_mut()
            .insert(hyper::header::CONTENT_TYPE, value);
    }
    response
}
