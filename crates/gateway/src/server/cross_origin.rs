//! CORS in the front: preflights (`OPTIONS`) answered from the bucket's rules, and the
//! `Access-Control-*` headers added to the reply of an allowed cross-origin request.

use super::reply::error_response;
use crate::cors;
use crate::Gateway;

/// A cross-origin request: its `Origin`, the method it asks for (`Access-Control-Request-Method`
/// or its own), the request headers a preflight asks for, and the bucket (path-style).
pub(super) struct CrossOrigin {
    pub(super) origin: String,
    pub(super) method: String,
    asked_method: bool,
    headers: Vec<String>,
    pub(super) bucket: String,
}

impl CrossOrigin {
    /// `None` without an `Origin` header.
    pub(super) fn of<B>(request: &http::Request<B>) -> Option<Self> {
        let headers = request.headers();
        let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let origin = text("origin")?.to_string();
        let asked = text("access-control-request-method");
        let bucket = request
            .uri()
            .path()
            .trim_start_matches('/')
            .split('/')
            .next()
            .unwrap_or_default()
            .to_string();
        Some(Self {
            origin,
            method: asked.unwrap_or(request.method().as_str()).to_string(),
            asked_method: asked.is_some(),
            headers: text("access-control-request-headers")
                .unwrap_or_default()
                .split(',')
                .map(|h| h.trim().to_ascii_lowercase())
                .filter(|h| !h.is_empty())
                .collect(),
            bucket,
        })
    }
}

/// Answers a CORS preflight (OPTIONS) from the bucket's rules: 400 without `Origin` or
/// `Access-Control-Request-Method`, 403 when no rule allows it.
pub(super) async fn preflight(
    gateway: &Gateway,
    asked: Option<CrossOrigin>,
) -> http::Response<s3s::Body> {
    let Some(asked) = asked.filter(|a| a.asked_method && !a.bucket.is_empty()) else {
        return error_response(
            http::StatusCode::BAD_REQUEST,
            "InvalidRequest",
            "a CORS preflight needs Origin and Access-Control-Request-Method",
        );
    };
    let rules = gateway.cors_rules(&asked.bucket).await;
    match cors::allow(&rules, &asked.origin, &asked.method, &asked.headers) {
        Some(allowed) => {
            let mut response = http::Response::new(s3s::Body::empty());
            add_cors_headers(&mut response, &allowed);
            response
        }
        None => error_response(
            http::StatusCode::FORBIDDEN,
            "AccessForbidden",
            "CORSResponse: this CORS request is not allowed",
        ),
    }
}

pub(super) fn add_cors_headers(
    response: &mut http::Response<s3s::Body>,
    allowed: &cors::CorsAllowance,
) {
    let headers = response.headers_mut();
    let mut set = |name: &'static str, value: &str| {
        if let Ok(value) = http::HeaderValue::from_str(value) {
            headers.insert(name, value);
        }
    };
    set("access-control-allow-origin", &allowed.origin);
    set("access-control-allow-methods", &allowed.method);
    if !allowed.headers.is_empty() {
        set("access-control-allow-headers", &allowed.headers.join(", "));
    }
    if !allowed.expose_headers.is_empty() {
        set(
            "access-control-expose-headers",
            &allowed.expose_headers.join(", "),
        );
    }
    if let Some(max_age_s) = allowed.max_age_s {
        set("access-control-max-age", &max_age_s.to_string());
    }
}
