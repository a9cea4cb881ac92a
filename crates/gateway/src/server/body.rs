//! Request bodies whose framing s3s takes differently from S3: a PUT without Content-Length
//! (chunked: read to learn its length; neither length nor chunked: 411), an empty body
//! announced with `Expect: 100-continue`, and, with authentication off (when s3s runs no
//! access hook), the bound on bodies s3s reads whole ([`crate::auth::XML_BODY_MAX_BYTES`]).

use super::reply::error_response;

/// Largest body of a chunked PUT without Content-Length that is buffered to learn its length.
const UNSIZED_BODY_MAX_BYTES: usize = 64 << 20;

/// Whether `request` is an object or part upload with neither Content-Length nor
/// Transfer-Encoding. HTTP/1.1 then gives it no body, so whatever the client sends after the
/// headers is not the object: S3 and radosgw answer 411, where s3s would store an empty
/// object. Copies and sub-resource PUTs (`?acl`, ...) carry no body and pass.
pub(super) fn unannounced_put_body<B>(request: &http::Request<B>) -> bool {
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
pub(super) fn expects_continue_without_body<B>(request: &http::Request<B>) -> bool {
    let headers = request.headers();
    headers
        .get(http::header::EXPECT)
        .is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"100-continue"))
        && headers
            .get(http::header::CONTENT_LENGTH)
            .is_some_and(|length| length.as_bytes() == b"0")
}

pub(super) async fn with_length(
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

/// Whether s3s reads the body of `request` whole (an XML document): DeleteObjects,
/// CompleteMultipartUpload, restores and selects (POST), bucket creation and configuration,
/// object ACLs, tags, holds and retention (PUT). Browser form uploads are not.
fn whole_body<B>(request: &http::Request<B>) -> bool {
    let query = request.uri().query().unwrap_or_default();
    let has = |name: &str| {
        query
            .split('&')
            .any(|pair| pair.split('=').next() == Some(name))
    };
    let names_key = request
        .uri()
        .path()
        .trim_start_matches('/')
        .split_once('/')
        .is_some_and(|(_, key)| !key.is_empty());
    match *request.method() {
        http::Method::POST => has("delete") || has("uploadId") || has("restore") || has("select"),
        http::Method::PUT => {
            !names_key || has("acl") || has("tagging") || has("legal-hold") || has("retention")
        }
        _ => false,
    }
}

/// With authentication off, the refusal of a body s3s would read whole and that is too long
/// or has no length (with authentication, [`crate::auth::GatewayAccess`] refuses it after
/// the signature check).
pub(super) fn unauthenticated_whole_body_refusal<B>(
    request: &http::Request<B>,
) -> Option<http::Response<s3s::Body>> {
    if !whole_body(request) {
        return None;
    }
    let refusal = crate::auth::whole_body_refusal(request.headers())?;
    let status = refusal
        .status_code()
        .unwrap_or(http::StatusCode::BAD_REQUEST);
    Some(error_response(
        status,
        refusal.code().as_str(),
        refusal.message().unwrap_or_default(),
    ))
}
