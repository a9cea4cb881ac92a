//! What the front writes or changes in a reply itself: S3 XML errors, closing a connection
//! whose request body was left unread, and the GetObjectAttributes ETag as S3 writes it.

/// `text` with XML's five special characters escaped.
pub(super) fn xml_escape(text: &str) -> String {
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

/// Whether a request announces a body (which a refusal may leave unread) or waits for
/// `100 Continue` before sending one (botocore sends `Expect: 100-continue` on every PutObject,
/// even with `Content-Length: 0`, and hyper then never returns the connection to reading the
/// next request unless the body was polled).
pub(super) fn carries_body<B>(request: &http::Request<B>) -> bool {
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
pub(super) fn close_after(response: &mut http::Response<s3s::Body>) {
    response.headers_mut().insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("close"),
    );
}

/// An S3 XML error reply that closes the connection (the request body, if any, is unread).
/// The message is escaped, so it may quote what the request sent.
pub(super) fn error_response(
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

/// GetObjectAttributes gives the ETag without quotes in S3 (unlike every other reply); s3s
/// always quotes it, so the reply's `<ETag>` is unquoted here.
pub(super) fn unquoted_attributes_etag(
    response: http::Response<s3s::Body>,
) -> http::Response<s3s::Body> {
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
