//! The dashboard (issue 44): a read-only web page on the admin endpoint. `GET /` shows it to
//! a browser holding the session cookie, or a login form asking for the admin token (no
//! cluster data without it). `POST /login` with the right token sets the cookie (the token
//! itself: `HttpOnly`, `SameSite=Lax`) and sends the browser back to `/`; `GET /logout`
//! clears it. The page is static HTML with a small dependency-free script that polls the
//! JSON API every 2 s (`/status`, `/api/osd/df`, `/api/osd/tree`, `/api/history`) and draws
//! health, the OSD tree with usage and PGs, pools, throughput and latency over time, and
//! recovery.
//!
//! ## Invariants
//! - The cookie authorizes `GET` requests only ([`cookie_authorizes`]): whatever a page of
//!   another site makes a browser send cannot change the cluster (the API's writes need the
//!   `Authorization` header, which only scripts of the same origin could add).
//! - The page builds its tables with DOM calls, never `innerHTML`: pool names and health
//!   checks are data.

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Response, StatusCode};

/// The cookie holding the admin token.
pub const COOKIE: &str = "strata_token";

const PAGE: &str = include_str!("page.html");
const LOGIN: &str = include_str!("login.html");

/// Whether the request's cookies carry `token` (compared in constant time); only for GET.
pub fn cookie_authorizes(method: &Method, headers: &hyper::HeaderMap, token: &str) -> bool {
    if method != Method::GET {
        return false;
    }
    headers
        .get_all(hyper::header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .any(|(name, value)| {
            name == COOKIE
                && crate::token::authorizes(Some(format!("Bearer {value}").as_bytes()), token)
        })
}

/// Whether `path` is one of the dashboard's own (answered by [`route`]).
pub fn is_dashboard(method: &Method, path: &str) -> bool {
    matches!(
        (method.as_str(), path),
        ("GET", "/" | "/dashboard" | "/logout") | ("POST", "/login")
    )
}

/// Answers a dashboard path: the page when `authorized` (by the cookie), else the login
/// form; `POST /login` checks the form's token against `token`.
pub fn route(
    method: &Method,
    path: &str,
    body: &[u8],
    token: &str,
    authorized: bool,
) -> Response<Full<Bytes>> {
    match (method.as_str(), path) {
        ("POST", "/login") => {
            let given = form_field(body, "token").unwrap_or_default();
            if crate::token::authorizes(Some(format!("Bearer {}", given.trim()).as_bytes()), token)
            {
                let cookie = format!("{COOKIE}={token}; Path=/; HttpOnly; SameSite=Lax");
                redirect(Some(&cookie))
            } else {
                tracing::warn!("dashboard login with a wrong token");
                login(
                    StatusCode::UNAUTHORIZED,
                    "<p class=\"error\">That is not the admin token.</p>",
                )
            }
        }
        ("GET", "/logout") => redirect(Some(&format!(
            "{COOKIE}=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0"
        ))),
        _ if authorized => html(StatusCode::OK, PAGE.to_string()),
        _ => login(StatusCode::OK, ""),
    }
}

fn login(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    html(status, LOGIN.replace("<!--MESSAGE-->", message))
}

fn html(status: StatusCode, text: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(text)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    for (name, value) in [
        ("content-type", "text/html; charset=utf-8"),
        ("cache-control", "no-store"),
        ("x-frame-options", "DENY"),
        (
            "content-security-policy",
            "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
             form-action 'self'; frame-ancestors 'none'",
        ),
    ] {
        headers.insert(name, hyper::header::HeaderValue::from_static(value));
    }
    response
}

/// 303 to `/`, setting `cookie` when given.
fn redirect(cookie: Option<&str>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = StatusCode::SEE_OTHER;
    let headers = response.headers_mut();
    headers.insert(
        hyper::header::LOCATION,
        hyper::header::HeaderValue::from_static("/"),
    );
    if let Some(value) = cookie.and_then(|cookie| hyper::header::HeaderValue::from_str(cookie).ok())
    {
        headers.insert(hyper::header::SET_COOKIE, value);
    }
    response
}

/// A field of an `application/x-www-form-urlencoded` body.
fn form_field(body: &[u8], name: &str) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    text.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=')?;
        (key == name).then(|| {
            let value = value.replace('+', " ");
            percent_encoding::percent_decode_str(&value)
                .decode_utf8_lossy()
                .into_owned()
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "0123456789abcdef0123456789abcdef";

    fn cookie(value: &str) -> hyper::HeaderMap {
        let mut headers = hyper::HeaderMap::new();
        headers.insert(hyper::header::COOKIE, value.parse().unwrap());
        headers
    }

    #[test]
    fn the_cookie_authorizes_reads_only() {
        let headers = cookie(&format!("a=b; {COOKIE}={TOKEN}"));
        assert!(cookie_authorizes(&Method::GET, &headers, TOKEN));
        assert!(!cookie_authorizes(&Method::POST, &headers, TOKEN));
        assert!(!cookie_authorizes(
            &Method::GET,
            &cookie(&format!("{COOKIE}=x")),
            TOKEN
        ));
        assert!(!cookie_authorizes(
            &Method::GET,
            &hyper::HeaderMap::new(),
            TOKEN
        ));
    }

    #[test]
    fn login_sets_the_cookie_and_a_wrong_token_shows_the_form() {
        let right = route(
            &Method::POST,
            "/login",
            format!("token={TOKEN}").as_bytes(),
            TOKEN,
            false,
        );
        assert_eq!(right.status(), StatusCode::SEE_OTHER);
        let set = right.headers()[hyper::header::SET_COOKIE].to_str().unwrap();
        assert!(
            set.starts_with(&format!("{COOKIE}={TOKEN};")) && set.contains("HttpOnly"),
            "{set}"
        );
        let wrong = route(&Method::POST, "/login", b"token=nope", TOKEN, false);
        assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
        let page = route(&Method::GET, "/", b"", TOKEN, false);
        assert_eq!(page.status(), StatusCode::OK);
        assert!(is_dashboard(&Method::GET, "/") && !is_dashboard(&Method::GET, "/api/pools"));
    }
}
