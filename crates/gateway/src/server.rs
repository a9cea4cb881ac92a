//! The HTTP server: hyper 1 serving s3s's service over a [`Gateway`], and the gateway's
//! background GC task.

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

use crate::auth::{AllowAll, ClusterAuth};
use crate::cors;
use crate::error::{GatewayError, Result};
use crate::{Gateway, GatewayConfig};

mod lenient;
mod no_auth;

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
    shutdown: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    /// Stops accepting connections and the GC task; open connections finish on their own.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        let _ = self.task.await;
    }
}

/// Longest validity of a presigned URL S3 accepts (`X-Amz-Expires`), in seconds: a week.
const PRESIGNED_EXPIRES_MAX_S: i64 = 604_800;

/// Requests answered before s3s sees them, with the status S3 gives: presigned URLs whose `X-Amz-Expires` is negative
/// (expired) or longer than a week, which s3s would answer with 400 or accept. Without
/// `auth`, `request` has had its signature taken away ([`no_auth::without_signature`]).
fn refuse_early<B>(request: &http::Request<B>, auth: bool) -> Option<http::Response<s3s::Body>> {
    if let Some(refusal) = refuse_bucket_name(request.uri().path()) {
        return Some(refusal);
    }
    // s3s decodes aws-chunked framing only while it checks a signature: an anonymous request
    // (or any request, with authentication off) would store the framing as the data.
    if (!auth || anonymous(request)) && no_auth::aws_chunked_body(request) {
        return Some(error_response(
            http::StatusCode::BAD_REQUEST,
            "InvalidRequest",
            if auth {
                no_auth::AWS_CHUNKED_ANONYMOUS_REFUSED
            } else {
                no_auth::AWS_CHUNKED_REFUSED
            },
        ));
    }
    if unannounced_put_body(request) {
        return Some(error_response(
            http::StatusCode::LENGTH_REQUIRED,
            "MissingContentLength",
            "You must provide the Content-Length HTTP header.",
        ));
    }
    if auth {
        let unsigned = unsigned_amz_headers(request);
        if !unsigned.is_empty() {
            return Some(error_response(
                http::StatusCode::FORBIDDEN,
                "AccessDenied",
                &format!(
                    "There were headers present in the request which were not signed: {}",
                    unsigned.join(", ")
                ),
            ));
        }
        if anonymous(request) && asks_response_overrides(request) {
            return Some(error_response(
                http::StatusCode::BAD_REQUEST,
                "InvalidRequest",
                "Request specific response headers cannot be used for anonymous GET requests.",
            ));
        }
    }
    let expires = query_parameter(request, "X-Amz-Expires")?;
    match expires.parse::<i64>() {
        Ok(seconds) if seconds < 0 => Some(error_response(
            http::StatusCode::FORBIDDEN,
            "AccessDenied",
            "Request has expired",
        )),
        Ok(seconds) if seconds > PRESIGNED_EXPIRES_MAX_S => Some(error_response(
            http::StatusCode::FORBIDDEN,
            "AuthorizationQueryParametersError",
            "X-Amz-Expires must be less than a week (in seconds) that is 604800",
        )),
        Ok(_) => None,
        Err(_) => Some(error_response(
            http::StatusCode::FORBIDDEN,
            "AuthorizationQueryParametersError",
            "X-Amz-Expires should be a number",
        )),
    }
}

/// The `x-amz-*` headers a SigV4 request carries but its signature does not cover (by the
/// header's `SignedHeaders`, or a presigned URL's `X-Amz-SignedHeaders`). S3 refuses such a
/// request; s3s 0.14.1 checks only the headers the signature lists, so without this anyone
/// holding a presigned PUT URL, or replaying a signed request, could add
/// `x-amz-copy-source` (turning it into a copy of anything the signer may read), `x-amz-acl`
/// or grants. Other requests (SigV2, which signs every `x-amz-*` header, POST forms,
/// anonymous ones) have none.
fn unsigned_amz_headers<B>(request: &http::Request<B>) -> Vec<String> {
    let Some(signed) = sigv4_signed_headers(request) else {
        return Vec::new();
    };
    let mut unsigned: Vec<String> = request
        .headers()
        .keys()
        .map(http::HeaderName::as_str)
        .filter(|name| name.starts_with("x-amz-") && !signed.iter().any(|s| s == name))
        .map(str::to_string)
        .collect();
    unsigned.sort();
    unsigned.dedup();
    unsigned
}

/// The lowercase names of the headers a SigV4 signature covers (the `Authorization` header's
/// `SignedHeaders`, or a presigned URL's `X-Amz-SignedHeaders`); None for a request not
/// signed with SigV4. (SigV2 covers `Content-MD5`, `Content-Type`, `Date` and `x-amz-*`.)
fn sigv4_signed_headers<B>(request: &http::Request<B>) -> Option<Vec<String>> {
    let authorization = request
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok());
    let signed: String = match authorization {
        Some(value) if value.starts_with("AWS4-HMAC-SHA256") => value
            .split(',')
            .find_map(|part| part.trim().strip_prefix("SignedHeaders="))
            .unwrap_or_default()
            .to_string(),
        Some(_) => return None,
        None => {
            let algorithm = query_parameter(request, "X-Amz-Algorithm");
            if algorithm.as_deref() != Some("AWS4-HMAC-SHA256") {
                return None;
            }
            query_parameter(request, "X-Amz-SignedHeaders").unwrap_or_default()
        }
    };
    Some(
        signed
            .split(';')
            .map(|name| name.trim().to_ascii_lowercase())
            .collect(),
    )
}

/// Whether a request carries no credentials at all (no `Authorization` header, no presigned
/// query of either signature version).
fn anonymous<B>(request: &http::Request<B>) -> bool {
    request.headers().get(http::header::AUTHORIZATION).is_none()
        && [
            "X-Amz-Algorithm",
            "X-Amz-Signature",
            "Signature",
            "AWSAccessKeyId",
        ]
        .iter()
        .all(|name| query_parameter(request, name).is_none())
}

/// The first query parameter called `name`, percent-decoded.
fn query_parameter<B>(request: &http::Request<B>, name: &str) -> Option<String> {
    request.uri().query()?.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        (key == name).then(|| {
            percent_encoding::percent_decode_str(value)
                .decode_utf8_lossy()
                .into_owned()
        })
    })
}

/// Whether a GET asks to override response headers (`response-content-type` and the like),
/// which S3 allows signed requests only: an anonymous one could otherwise have any public
/// object served as HTML from the gateway's origin.
fn asks_response_overrides<B>(request: &http::Request<B>) -> bool {
    request.method() == http::Method::GET
        && request
            .uri()
            .query()
            .unwrap_or_default()
            .split('&')
            .any(|pair| pair.starts_with("response-"))
}

/// A path-style request whose bucket name s3s refuses gets the same `InvalidBucketName`, with a
/// message saying which rule the name breaks (s3s sends none, and the aws CLI then prints
/// "Unknown").
fn refuse_bucket_name(uri_path: &str) -> Option<http::Response<s3s::Body>> {
    let decoded = percent_encoding::percent_decode_str(uri_path)
        .decode_utf8()
        .ok()?;
    match s3s::path::parse_path_style(&decoded) {
        Err(s3s::path::ParseS3PathError::InvalidBucketName) => {
            let bucket = decoded
                .trim_start_matches('/')
                .split('/')
                .next()
                .unwrap_or_default();
            Some(error_response(
                http::StatusCode::BAD_REQUEST,
                "InvalidBucketName",
                &format!(
                    "bucket name {bucket:?} is invalid: {}",
                    crate::service::convert::bucket_name_problem(bucket)
                ),
            ))
        }
        _ => None,
    }
}

/// `text` with XML's five special characters escaped.
fn xml_escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&apos;"),
            _ => escaped.push(c),
        }
    }
    escaped
}

/// A cross-origin request: its `Origin`, the method it asks for (`Access-Control-Request-Method`
/// or its own), the request headers a preflight asks for, and the bucket (path-style).
struct CrossOrigin {
    origin: String,
    method: String,
    asked_method: bool,
    headers: Vec<String>,
    bucket: String,
}

impl CrossOrigin {
    /// `None` without an `Origin` header.
    fn of<B>(request: &http::Request<B>) -> Option<Self> {
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
async fn preflight(gateway: &Gateway, asked: Option<CrossOrigin>) -> http::Response<s3s::Body> {
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

fn add_cors_headers(response: &mut http::Response<s3s::Body>, allowed: &cors::CorsAllowance) {
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

/// Whether a request announces a body (which a refusal may leave unread) or waits for
/// `100 Continue` before sending one (botocore sends `Expect: 100-continue` on every PutObject,
/// even with `Content-Length: 0`, and hyper then never returns the connection to reading the
/// next request unless the body was polled).
fn carries_body<B>(request: &http::Request<B>) -> bool {
    let headers = request.headers();
    headers.contains_key(http::header::TRANSFER_ENCODING)
        || headers.contains_key(http::header::EXPECT)
        || headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|length| length > 0)
}

/// Closes the connection after `response`. A request refused before its body was read (a 403
/// PUT, most often sent with `Expect: 100-continue`, whose client then never sends the body)
/// must not leave the connection open: hyper would take the client's next request as the
/// rest of the unread body, and the client would wait for a reply until its read timeout.
fn close_after(response: &mut http::Response<s3s::Body>) {
    response.headers_mut().insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("close"),
    );
}

/// An S3 XML error reply that closes the connection (the request body, if any, is unread).
/// The message is escaped, so it may quote what the request sent.
fn error_response(
    status: http::StatusCode,
    code: &str,
    message: &str,
) -> http::Response<s3s::Body> {
    let message = xml_escape(message);
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code><Message>{message}</Message></Error>"
    );
    let mut response = http::Response::new(s3s::Body::from(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/xml"),
    );
    headers.insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("close"),
    );
    response
}

/// Largest browser form upload (POST object) read ahead of s3s to be inspected; s3s holds the
/// whole file in memory anyway. Larger forms go to s3s unchanged.
const FORM_BODY_MAX_BYTES: usize = 64 << 20;

/// What the front learned of a browser form upload before s3s saw it.
struct FormSummary {
    /// The form is signed (`signature` or `x-amz-signature`).
    signed: bool,
}

/// Whether `request` is a browser form upload (POST multipart/form-data) small enough to read.
fn form_upload<B>(request: &http::Request<B>) -> bool {
    let headers = request.headers();
    let multipart = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().starts_with("multipart/form-data"));
    let small = headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        .is_some_and(|length| length <= FORM_BODY_MAX_BYTES);
    request.method() == http::Method::POST && multipart && small
}

/// One part of a multipart form: its field name, file name and where its value lies.
struct FormPart {
    name: String,
    filename: Option<String>,
    value: std::ops::Range<usize>,
}

/// The parts of a multipart/form-data `body` delimited by `boundary`.
fn form_parts(body: &[u8], boundary: &str) -> Vec<FormPart> {
    let delimiter = format!("--{boundary}");
    let delimiter = delimiter.as_bytes();
    let find = |from: usize, needle: &[u8]| -> Option<usize> {
        body.get(from..)?
            .windows(needle.len())
            .position(|w| w == needle)
            .map(|at| at + from)
    };
    let mut parts = Vec::new();
    let Some(mut at) = find(0, delimiter) else {
        return parts;
    };
    loop {
        let start = at + delimiter.len();
        if body.get(start..start + 2) == Some(b"--") {
            break;
        }
        let Some(headers_end) = find(start, b"\r\n\r\n") else {
            break;
        };
        let Some(next) = find(headers_end, delimiter) else {
            break;
        };
        let headers = String::from_utf8_lossy(&body[start..headers_end]);
        let attribute = |key: &str| -> Option<String> {
            let line = headers
                .lines()
                .find(|l| l.to_ascii_lowercase().starts_with("content-disposition"))?;
            let marker = format!("{key}=\"");
            let from = line.find(&marker)? + marker.len();
            let to = line[from..].find('"')? + from;
            Some(line[from..to].to_string())
        };
        if let Some(name) = attribute("name") {
            // The value ends before the CRLF that precedes the next delimiter.
            let end = next.saturating_sub(2).max(headers_end + 4);
            parts.push(FormPart {
                filename: attribute("filename"),
                name,
                value: headers_end + 4..end,
            });
        }
        at = next;
    }
    parts
}

/// Reads a browser form upload and adapts it where s3s differs from S3: a `key` of
/// `${filename}` becomes the file's name, and the `acl` field of an unsigned form (which s3s
/// reads only as `x-amz-acl`) is given as `x-amz-acl` too (a signed form's policy would have
/// to list the added field).
async fn prepare_form(
    request: http::Request<hyper::body::Incoming>,
) -> std::result::Result<(http::Request<s3s::Body>, Option<FormSummary>), http::Response<s3s::Body>>
{
    let (mut parts, body) = request.into_parts();
    let mut body = s3s::Body::from(body);
    let Ok(bytes) = body.store_all_limited(FORM_BODY_MAX_BYTES).await else {
        // Cannot happen below the Content-Length checked by form_upload; s3s reports it.
        return Ok((http::Request::from_parts(parts, body), None));
    };
    let boundary = parts
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.split(';')
                .find_map(|p| p.trim().strip_prefix("boundary="))
        })
        .map(|b| b.trim_matches('"').to_string());
    let Some(boundary) = boundary else {
        return Ok((
            http::Request::from_parts(parts, s3s::Body::from(bytes)),
            None,
        ));
    };
    let fields = form_parts(&bytes, &boundary);
    let named = |name: &str| fields.iter().find(|f| f.name.eq_ignore_ascii_case(name));
    let signed = named("signature").is_some() || named("x-amz-signature").is_some();
    if let Some(policy) = named("policy") {
        if !expiration_well_formed(&bytes[policy.value.clone()]) {
            return Err(error_response(
                http::StatusCode::BAD_REQUEST,
                "InvalidPolicyDocument",
                "the policy's expiration is not an ISO 8601 UTC time (YYYY-MM-DDThh:mm:ssZ)",
            ));
        }
    }
    let filename = named("file").and_then(|f| f.filename.clone());
    let mut rewritten: Vec<u8> = Vec::with_capacity(bytes.len() + 128);
    let mut copied = 0;
    if let (Some(key), Some(filename)) = (named("key"), filename) {
        let value = &bytes[key.value.clone()];
        if value.windows(11).any(|w| w == b"${filename}") {
            let substituted = String::from_utf8_lossy(value).replace("${filename}", &filename);
            rewritten.extend_from_slice(&bytes[..key.value.start]);
            rewritten.extend_from_slice(substituted.as_bytes());
            copied = key.value.end;
        }
    }
    let unsigned_acl = named("policy").is_none() && named("x-amz-acl").is_none();
    if let (true, Some(acl)) = (unsigned_acl, named("acl")) {
        if copied <= acl.value.end {
            let acl_value = bytes[acl.value.clone()].to_vec();
            // The added part goes right after the acl part, before its closing CRLF-delimiter.
            rewritten.extend_from_slice(&bytes[copied..acl.value.end]);
            rewritten.extend_from_slice(
                format!(
                    "\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"x-amz-acl\"\r\n\r\n"
                )
                .as_bytes(),
            );
            rewritten.extend_from_slice(&acl_value);
            copied = acl.value.end;
        }
    }
    let body = if copied == 0 {
        bytes
    } else {
        rewritten.extend_from_slice(&bytes[copied..]);
        Bytes::from(rewritten)
    };
    parts.headers.insert(
        http::header::CONTENT_LENGTH,
        http::HeaderValue::from(body.len()),
    );
    Ok((
        http::Request::from_parts(parts, s3s::Body::from(body)),
        Some(FormSummary { signed }),
    ))
}

/// Whether a form's base64 policy has its expiration as S3 requires it,
/// `YYYY-MM-DDThh:mm:ss[.fff]Z` (s3s also takes other RFC 3339 forms, which S3 refuses). A
/// policy that does not decode is left to s3s to refuse.
fn expiration_well_formed(policy: &[u8]) -> bool {
    use base64::Engine as _;
    let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(policy.trim_ascii()) else {
        return true;
    };
    let Ok(document) = serde_json::from_slice::<serde_json::Value>(&decoded) else {
        return true;
    };
    let Some(expiration) = document.get("expiration").and_then(|e| e.as_str()) else {
        return true;
    };
    let bytes = expiration.as_bytes();
    let shape = b"dddd-dd-ddTdd:dd:dd";
    bytes.len() > shape.len()
        && bytes.last() == Some(&b'Z')
        && shape.iter().zip(bytes).all(|(want, got)| match want {
            b'd' => got.is_ascii_digit(),
            other => other == got,
        })
        && bytes[shape.len()..bytes.len() - 1]
            .iter()
            .enumerate()
            .all(|(i, c)| {
                if i == 0 {
                    *c == b'.'
                } else {
                    c.is_ascii_digit()
                }
            })
}

/// Adapts s3s's reply to a browser form upload to S3's: a signed form that breaks a condition
/// of its policy is AccessDenied (403) where s3s answers InvalidPolicyDocument (400), and the
/// ETag s3s adds to a success redirect is quoted as S3 quotes it.
fn form_response(
    mut response: http::Response<s3s::Body>,
    form: &FormSummary,
) -> http::Response<s3s::Body> {
    if response.status() == http::StatusCode::SEE_OTHER {
        let location = response
            .headers()
            .get(http::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        if let Some(location) = location {
            if let Some((before, etag)) = location.rsplit_once("&etag=") {
                if !etag.starts_with("%22") && !etag.contains('&') {
                    let quoted = format!("{before}&etag=%22{etag}%22");
                    if let Ok(value) = http::HeaderValue::from_str(&quoted) {
                        response.headers_mut().insert(http::header::LOCATION, value);
                    }
                }
            }
        }
        return response;
    }
    if !form.signed || response.status() != http::StatusCode::BAD_REQUEST {
        return response;
    }
    let Some(body) = response.body().bytes() else {
        return response;
    };
    let text = String::from_utf8_lossy(&body);
    let condition_failed = text.contains("<Code>InvalidPolicyDocument</Code>")
        && (text.contains("Policy condition") || text.contains("does not match bucket"));
    if !condition_failed {
        return response;
    }
    error_response(
        http::StatusCode::FORBIDDEN,
        "AccessDenied",
        "Invalid according to Policy: Policy Condition failed",
    )
}

/// GetObjectAttributes gives the ETag without quotes in S3 (unlike every other reply); s3s
/// always quotes it, so the reply's `<ETag>` is unquoted here.
fn unquoted_attributes_etag(response: http::Response<s3s::Body>) -> http::Response<s3s::Body> {
    if response.status() != http::StatusCode::OK {
        return response;
    }
    let Some(body) = response.body().bytes() else {
        return response;
    };
    let text = String::from_utf8_lossy(&body);
    let Some(start) = text.find("<ETag>\"") else {
        return response;
    };
    let value_start = start + "<ETag>\"".len();
    let Some(length) = text[value_start..].find("\"</ETag>") else {
        return response;
    };
    let rewritten = format!(
        "{}<ETag>{}</ETag>{}",
        &text[..start],
        &text[value_start..value_start + length],
        &text[value_start + length + "\"</ETag>".len()..]
    );
    let (mut parts, _) = response.into_parts();
    parts.headers.insert(
        http::header::CONTENT_LENGTH,
        http::HeaderValue::from(rewritten.len()),
    );
    http::Response::from_parts(parts, s3s::Body::from(rewritten))
}

/// Largest body of a chunked PUT without Content-Length that is buffered to learn its length.
const UNSIZED_BODY_MAX_BYTES: usize = 64 << 20;

/// Whether `request` is an object or part upload with neither Content-Length nor
/// Transfer-Encoding. HTTP/1.1 then gives it no body, so whatever the client sends after the
/// headers is not the object: S3 and radosgw answer 411, where s3s would store an empty
/// object. Copies and sub-resource PUTs (`?acl`, ...) carry no body and pass.
fn unannounced_put_body<B>(request: &http::Request<B>) -> bool {
    let headers = request.headers();
    if request.method() != http::Method::PUT
        || headers.contains_key(http::header::CONTENT_LENGTH)
        || headers.contains_key(http::header::TRANSFER_ENCODING)
        || headers.contains_key("x-amz-copy-source")
    {
        return false;
    }
    let names_key = request
        .uri()
        .path()
        .trim_start_matches('/')
        .split_once('/')
        .is_some_and(|(_, key)| !key.is_empty());
    let data_upload = request
        .uri()
        .query()
        .is_none_or(|query| query.split('&').any(|p| p.starts_with("uploadId=")));
    names_key && data_upload
}

/// Whether `request` is a PUT whose length only the end of its body tells: HTTP/1.1
/// `Transfer-Encoding: chunked` with neither Content-Length nor the aws-chunked decoded length.
fn unsized_put<B>(request: &http::Request<B>) -> bool {
    let headers = request.headers();
    request.method() == http::Method::PUT
        && !headers.contains_key(http::header::CONTENT_LENGTH)
        && !headers.contains_key("x-amz-decoded-content-length")
        && headers
            .get(http::header::TRANSFER_ENCODING)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"))
}

/// The request with an s3s body. s3s refuses a PUT without a length (MissingContentLength)
/// where S3 and radosgw accept chunked transfer encoding, so such a body is read first (up to
/// [`UNSIZED_BODY_MAX_BYTES`]) and its length set; a longer one is refused with 413.
/// An empty body announced with `Expect: 100-continue`: hyper sends no 100 (there is no
/// body to ask for), so the client reads the final answer in its wait for a 100, and
/// botocore then keeps that answer's status line for the connection's next request, which
/// hung until its timeout (while still carried out). Such an answer closes the connection.
fn expects_continue_without_body<B>(request: &http::Request<B>) -> bool {
    let headers = request.headers();
    headers
        .get(http::header::EXPECT)
        .is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"100-continue"))
        && headers
            .get(http::header::CONTENT_LENGTH)
            .is_some_and(|length| length.as_bytes() == b"0")
}

async fn with_length(
    request: http::Request<hyper::body::Incoming>,
) -> std::result::Result<http::Request<s3s::Body>, http::Response<s3s::Body>> {
    if !unsized_put(&request) {
        return Ok(request.map(s3s::Body::from));
    }
    let (mut parts, body) = request.into_parts();
    let mut body = s3s::Body::from(body);
    match body.store_all_limited(UNSIZED_BODY_MAX_BYTES).await {
        Ok(bytes) => {
            // Transfer-Encoding stays: a signature may cover it.
            parts.headers.insert(
                http::header::CONTENT_LENGTH,
                http::HeaderValue::from(bytes.len()),
            );
            Ok(http::Request::from_parts(parts, s3s::Body::from(bytes)))
        }
        Err(error) => {
            tracing::debug!(%error, "unsized PUT body refused");
            let response = error_response(
                http::StatusCode::PAYLOAD_TOO_LARGE,
                "EntityTooLarge",
                "a PUT without Content-Length is limited to 64 MiB",
            );
            Err(response)
        }
    }
}

/// Serves S3 for the cluster `rados` on `bind_addr` (port 0: any free port).
pub async fn serve(
    rados: Arc<dyn Rados>,
    bind_addr: SocketAddr,
    config: GatewayConfig,
) -> Result<Server> {
    let gateway = Gateway::open(rados, config).await?;
    let listener = TcpListener::bind(bind_addr)
        .await
        .map_err(|e| GatewayError::InvalidArgument(format!("bind {bind_addr}: {e}")))?;
    let local_addr = listener
        .local_addr()
        .map_err(|e| GatewayError::InvalidArgument(format!("bind {bind_addr}: {e}")))?;
    let mut builder = S3ServiceBuilder::new(gateway.clone());
    if gateway.config().auth {
        builder.set_auth(ClusterAuth::new(gateway.users().clone()));
        builder.set_access(AllowAll);
    }
    let service = builder.build();
    let (shutdown, mut stopped) = watch::channel(false);
    let gc_gateway = gateway.clone();
    let front_gateway = gateway.clone();
    let gc_period = std::time::Duration::from_secs(gateway.config().gc_period_s.max(1));
    let mut gc_stopped = stopped.clone();
    let task = tokio::spawn(async move {
        let gc = tokio::spawn(async move {
            let mut interval = tokio::time::interval(gc_period);
            loop {
                tokio::select! {
                    _ = interval.tick() => {
                        if let Err(error) = gc_gateway.reclaim().await {
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
            tokio::spawn(async move {
                let front = hyper::service::service_fn(move |request| {
                    let service = service.clone();
                    let gateway = gateway.clone();
                    async move {
                        let request = if auth {
                            request
                        } else {
                            no_auth::without_signature(request)
                        };
                        if let Some(refusal) = refuse_early(&request, auth) {
                            return Ok::<_, s3s::HttpError>(refusal);
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
                            match prepare_form(request).await {
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
                        if (carries_body && !response.status().is_success())
                            || empty_expecting_continue
                        {
                            close_after(&mut response);
                        }
                        if let Some(asked) = cross_origin {
                            let rules = gateway.cors_rules(&asked.bucket).await;
                            if let Some(allowed) =
                                cors::allow(&rules, &asked.origin, &asked.method, &[])
                            {
                                add_cors_headers(&mut response, &allowed);
                            }
                        }
                        Ok(response)
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
        shutdown,
        task,
    })
}

#[cfg(test)]
mod tests {
    use super::{anonymous, asks_response_overrides, refuse_bucket_name, unsigned_amz_headers};
    use crate::service::convert::bucket_name_problem;

    /// A PUT of `uri` with `headers` (also for `no_auth`'s tests).
    pub(super) fn request(uri: &str, headers: &[(&str, &str)]) -> http::Request<()> {
        let mut builder = http::Request::builder().method("PUT").uri(uri);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(()).unwrap()
    }

    #[test]
    fn amz_headers_a_sigv4_signature_does_not_cover_are_found() {
        let header_auth = "AWS4-HMAC-SHA256 Credential=AK/20261126/us-east-1/s3/aws4_request, \
                           SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=00";
        let signed = request(
            "/b/k",
            &[
                ("authorization", header_auth),
                ("x-amz-date", "20261126T000000Z"),
                ("x-amz-content-sha256", "UNSIGNED-PAYLOAD"),
            ],
        );
        assert!(unsigned_amz_headers(&signed).is_empty());
        let added = request(
            "/b/k",
            &[
                ("authorization", header_auth),
                ("x-amz-date", "20261126T000000Z"),
                ("x-amz-copy-source", "/b/secret"),
                ("X-Amz-Acl", "public-read"),
            ],
        );
        assert_eq!(
            unsigned_amz_headers(&added),
            ["x-amz-acl", "x-amz-copy-source"]
        );
        // A presigned URL: its signed list is in the query, percent-encoded.
        let presigned = "/b/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-SignedHeaders=host%3Bx-amz-acl&X-Amz-Signature=00";
        assert!(unsigned_amz_headers(&request(presigned, &[("x-amz-acl", "private")])).is_empty());
        assert_eq!(
            unsigned_amz_headers(&request(presigned, &[("x-amz-copy-source", "/b/secret")])),
            ["x-amz-copy-source"]
        );
        // SigV2 signs every x-amz header; anonymous requests sign nothing: nothing to find.
        let v2 = request(
            "/b/k",
            &[("authorization", "AWS AK:sig"), ("x-amz-acl", "private")],
        );
        assert!(unsigned_amz_headers(&v2).is_empty());
        let none = request("/b/k", &[("x-amz-acl", "private")]);
        assert!(unsigned_amz_headers(&none).is_empty());
    }

    #[test]
    fn response_overrides_are_spotted_on_anonymous_gets() {
        let get = |uri: &str, headers: &[(&str, &str)]| {
            let mut request = request(uri, headers);
            *request.method_mut() = http::Method::GET;
            request
        };
        let plain = get("/b/k?response-content-type=text/html", &[]);
        assert!(anonymous(&plain) && asks_response_overrides(&plain));
        let presigned = get(
            "/b/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&response-content-type=text/html",
            &[],
        );
        assert!(!anonymous(&presigned));
        let v2 = get(
            "/b/k?AWSAccessKeyId=AK&Signature=s&response-content-type=x",
            &[],
        );
        assert!(!anonymous(&v2));
        let signed = get("/b/k", &[("authorization", "AWS4-HMAC-SHA256 ...")]);
        assert!(!anonymous(&signed));
        assert!(!asks_response_overrides(&get("/b/k?versionId=1", &[])));
    }

    #[test]
    fn a_bucket_name_s3s_refuses_gets_a_message_naming_the_rule() {
        let refusal = refuse_bucket_name("/b1/key").expect("a two-letter bucket is refused");
        assert_eq!(refusal.status(), http::StatusCode::BAD_REQUEST);
        let body = format!("{:?}", refusal.body());
        assert!(body.contains("InvalidBucketName"), "{body}");
        assert!(body.contains("3 to 63 characters"), "{body}");
        assert!(refuse_bucket_name("/Upper").is_some());
        // Valid names, the service root and keys with any characters pass to s3s.
        assert!(refuse_bucket_name("/bk1/some%20key<>").is_none());
        assert!(refuse_bucket_name("/").is_none());
        assert!(refuse_bucket_name("/my.bucket-1").is_none());
    }

    #[test]
    fn the_named_rule_is_one_s3s_checks() {
        let generic = bucket_name_problem("valid-name");
        for name in [
            "ab", "abc", "ABC", "a_b", "-ab", "ab-", "a..b", "10.0.0.1", "xn--ab", "a.b-c", "ab.",
        ] {
            let valid = s3s::path::check_bucket_name(name);
            assert_eq!(
                bucket_name_problem(name) == generic,
                valid,
                "{name:?}: s3s says valid = {valid}, the message says {:?}",
                bucket_name_problem(name)
            );
        }
        let long = "a".repeat(64);
        assert!(!s3s::path::check_bucket_name(&long));
        assert_eq!(
            bucket_name_problem(&long),
            "it must be 3 to 63 characters long"
        );
    }
}
