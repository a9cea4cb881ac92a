//! The HTTP server: hyper 1 serving s3s's service over a [`Gateway`], and the gateway's
//! background GC task.
//!
//! Every request passes the front in [`serve`] before s3s: `no_auth` (signatures taken away
//! when authentication is off), `refuse` (requests answered at once, as S3 answers them),
//! `lenient` (header fields S3 reads more leniently than s3s), `cross_origin` (CORS),
//! `region` (a credential region s3s cannot take: S3's redirect to the gateway's),
//! `form` (browser form uploads) and `body` (bodies without Content-Length, bounds on bodies
//! read whole); `reply` holds what the front writes into replies itself, `log` the log of
//! refused requests (debug, or rate-limited warnings: never one line per client mistake at
//! ERROR, as s3s writes them), `requests` the requests by operation and status with their
//! latencies (`/metrics`).

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::{Stream, StreamExt};
use hyper_util::rt::TokioIo;
use rados::Rados;
use s3s::service::S3ServiceBuilder;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

use crate::auth::{ClusterAuth, GatewayAccess};
use crate::cors;
use crate::error::{GatewayError, Result};
use crate::{Gateway, GatewayConfig};

mod body;
mod cross_origin;
mod form;
mod lenient;
mod log;
mod no_auth;
mod refuse;
mod region;
mod reply;
pub mod requests;

use body::{expects_continue_without_body, unauthenticated_whole_body_refusal, with_length};
use cross_origin::{add_cors_headers, preflight, CrossOrigin};
use form::{form_response, form_upload, prepare_form};
use refuse::{refuse_early, sigv4_signed_headers};
use reply::{carries_body, close_after, unquoted_attributes_etag};

/// Chunks buffered between a reading task and the HTTP response.
const READ_AHEAD_CHUNKS: usize = 2;

/// A response body fed by a task reading the cluster (s3s needs a `Sync` stream; the rados
/// futures are only `Send`).
pub(crate) struct ChannelStream {
    receiver: mpsc::Receiver<Result<Bytes>>,
}

impl ChannelStream {
    /// Runs `stream` on its own task, `READ_AHEAD_CHUNKS` ahead of the consumer.
    pub fn spawn<S>(stream: S) -> Self
    where
        S: Stream<Item = Result<Bytes>> + Send + 'static,
    {
        let (sender, receiver) = mpsc::channel(READ_AHEAD_CHUNKS);
        tokio::spawn(async move {
            let mut stream = Box::pin(stream);
            while let Some(item) = stream.next().await {
                let failed = item.is_err();
                if sender.send(item).await.is_err() || failed {
                    break;
                }
            }
        });
        Self { receiver }
    }
}

impl Stream for ChannelStream {
    type Item = std::result::Result<Bytes, GatewayError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.receiver.poll_recv(cx)
    }
}

/// A running S3 server.
pub struct Server {
    /// Where it listens.
    pub local_addr: SocketAddr,
    /// The gateway it serves (users, stats).
    pub gateway: Gateway,
    /// Requests by operation and status, with their latencies.
    pub requests: Arc<requests::RequestMetrics>,
    shutdown: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    /// The lifecycle worker (`service/lifecycle.rs`).
    lifecycle: worker::WorkerHandle,
}

impl Server {
    /// Stops accepting connections and the GC task; open connections finish on their own.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        self.lifecycle.stop().await;
        let _ = self.task.await;
    }
}

/// Serves S3 for the cluster `rados` on `bind_addr` (port 0: any free port).
pub async fn serve(
    rados: Arc<dyn Rados>,
    bind_addr: SocketAddr,
    config: GatewayConfig,
) -> Result<Server> {
    let gateway = Gateway::open(rados.clone(), config).await?;
    let listener = TcpListener::bind(bind_addr)
        .await
        .map_err(|e| GatewayError::InvalidArgument(format!("bind {bind_addr}: {e}")))?;
    let local_addr = listener
        .local_addr()
        .map_err(|e| GatewayError::InvalidArgument(format!("bind {bind_addr}: {e}")))?;
    let mut builder = S3ServiceBuilder::new(gateway.clone());
    if gateway.config().auth {
        builder.set_auth(ClusterAuth::new(gateway.users().clone()));
        builder.set_access(GatewayAccess::new(gateway.clone()));
    }
    let service = builder.build();
    let day_ms = gateway.config().lifecycle_day_s.max(1).saturating_mul(1000);
    let lifecycle = worker::Worker::spawn(
        "lifecycle",
        crate::service::lifecycle_period_ms(day_ms),
        Arc::new(worker::UnixClock),
        crate::service::LifecycleLoop {
            gateway: gateway.clone(),
            day_ms,
        },
    );
    let (shutdown, mut stopped) = watch::channel(false);
    let gc_gateway = gateway.clone();
    let front_gateway = gateway.clone();
    let mut gc_stopped = stopped.clone();
    let gc_rados = rados.clone();
    let refusals = Arc::new(log::RefusalLog::new());
    let request_metrics = Arc::new(requests::RequestMetrics::default());
    let served_metrics = Arc::clone(&request_metrics);
    let task = tokio::spawn(async move {
        let gc = tokio::spawn(async move {
            let config = gc_gateway.config().clone();
            let period = std::time::Duration::from_secs(config.gc_period_s.max(1));
            let check = std::time::Duration::from_secs(config.gc_fullness_check_s.max(1));
            let mut interval = tokio::time::interval(period.min(check));
            let mut last_pass: Option<tokio::time::Instant> = None;
            loop {
                tokio::select! {
                    _ = interval.tick() => {
                        // From nearfull on, every check is a pass with the short wait.
                        let level = match gc_rados.cluster_stats().await {
                            Ok(stats) => stats.full_level(),
                            Err(_) => rados::FullLevel::Ok,
                        };
                        let due = last_pass.is_none_or(|at| at.elapsed() >= period);
                        if !due && level < rados::FullLevel::Nearfull {
                            continue;
                        }
                        last_pass = Some(tokio::time::Instant::now());
                        let wait_s = crate::gc_wait_s(&config, level);
                        // Packs first: the old packs a rewrite retires join the queue
                        // the reclaim below drains once their wait is over.
                        if config.packing.enabled {
                            if let Err(error) = gc_gateway.pack_gc().await {
                                tracing::warn!(%error, "pack GC pass failed");
                            }
                        }
                        if let Err(error) = gc_gateway.reclaim_after(wait_s).await {
                            tracing::warn!(%error, "GC pass failed");
                        }
                    }
                    _ = gc_stopped.changed() => break,
                }
            }
        });
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                _ = stopped.changed() => break,
            };
            let (stream, peer) = match accepted {
                Ok(connection) => connection,
                Err(error) => {
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let service = service.clone();
            let gateway = front_gateway.clone();
            let auth = gateway.config().auth;
            let refusals = Arc::clone(&refusals);
            let metrics = Arc::clone(&served_metrics);
            tokio::spawn(async move {
                let front = hyper::service::service_fn(move |request: http::Request<_>| {
                    let service = service.clone();
                    let gateway = gateway.clone();
                    let refusals = Arc::clone(&refusals);
                    let metrics = Arc::clone(&metrics);
                    let method = request.method().clone();
                    let path = request.uri().path().to_string();
                    let operation = requests::operation(
                        &method,
                        &path,
                        request.uri().query(),
                        request.headers().contains_key("x-amz-copy-source"),
                    );
                    let arrived = std::time::Instant::now();
                    async move {
                        let response = serve_request(request, service, gateway, auth, peer).await;
                        if let Ok(response) = &response {
                            refusals.record(&method, &path, response.status());
                            metrics.record(
                                operation,
                                response.status().as_u16(),
                                arrived.elapsed().as_secs_f64(),
                            );
                        }
                        response
                    }
                });
                let connection = hyper::server::conn::http1::Builder::new()
                    .keep_alive(true)
                    .serve_connection(TokioIo::new(stream), front);
                if let Err(error) = connection.await {
                    tracing::debug!(%error, "connection ended with an error");
                }
            });
        }
        let _ = gc.await;
    });
    Ok(Server {
        local_addr,
        gateway,
        requests: request_metrics,
        shutdown,
        task,
        lifecycle,
    })
}

/// One request through the front, then s3s (see the module doc).
async fn serve_request(
    request: http::Request<hyper::body::Incoming>,
    service: s3s::service::S3Service,
    gateway: Gateway,
    auth: bool,
    peer: SocketAddr,
) -> std::result::Result<http::Response<s3s::Body>, s3s::HttpError> {
    {
        let request = if auth {
            request
        } else {
            no_auth::without_signature(request)
        };
        if let Some(refusal) = refuse_early(&request, auth) {
            return Ok::<_, s3s::HttpError>(refusal);
        }
        if auth {
            if let Some(refusal) = region::wrong_region(&request, &gateway.config().region) {
                return Ok(refusal);
            }
        }
        if !auth {
            if let Some(mut refusal) = unauthenticated_whole_body_refusal(&request) {
                close_after(&mut refusal);
                return Ok(refusal);
            }
        }
        let mut request = request;
        let signed = sigv4_signed_headers(&request).unwrap_or_default();
        lenient::ignore_malformed_range(&mut request, &signed);
        lenient::normalize_http_dates(&mut request, &signed);
        let cross_origin = CrossOrigin::of(&request);
        if request.method() == http::Method::OPTIONS {
            return Ok(preflight(&gateway, cross_origin).await);
        }
        let carries_body = carries_body(&request);
        let is_head = request.method() == http::Method::HEAD;
        let empty_expecting_continue = expects_continue_without_body(&request);
        let wants_attributes = request.method() == http::Method::GET
            && request.uri().query().is_some_and(|q| {
                q.split('&')
                    .any(|p| p == "attributes" || p == "attributes=")
            });
        let (request, form) = if form_upload(&request) {
            match prepare_form(request, auth).await {
                Ok(prepared) => prepared,
                Err(refusal) => return Ok(refusal),
            }
        } else {
            match with_length(request).await {
                Ok(request) => (request, None),
                Err(refusal) => return Ok(refusal),
            }
        };
        let header = |name: http::HeaderName| {
            request
                .headers()
                .get(name)
                .and_then(|value| value.to_str().ok())
                .map(str::to_string)
        };
        let facts = crate::service::RequestFacts {
            source_ip: Some(peer.ip()),
            referer: header(http::header::REFERER),
            user_agent: header(http::header::USER_AGENT),
        };
        let mut response = crate::service::REQUEST_FACTS
            .scope(facts, service.call(request))
            .await?;
        if let Some(form) = form {
            response = form_response(response, &form);
        }
        if wants_attributes {
            response = unquoted_attributes_etag(response);
        }
        // s3s answers a HEAD for a range or a part 200; S3 answers 206, as
        // the GET.
        if is_head
            && response.status() == http::StatusCode::OK
            && response.headers().contains_key(http::header::CONTENT_RANGE)
        {
            *response.status_mut() = http::StatusCode::PARTIAL_CONTENT;
        }
        if (carries_body && !response.status().is_success()) || empty_expecting_continue {
            close_after(&mut response);
        }
        if let Some(asked) = cross_origin {
            let rules = gateway.cors_rules(&asked.bucket).await;
            if let Some(allowed) = cors::allow(&rules, &asked.origin, &asked.method, &[]) {
                add_cors_headers(&mut response, &allowed);
            }
        }
        Ok(response)
    }
}
