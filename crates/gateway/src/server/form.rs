//! Browser form uploads (POST object), read ahead of s3s and adapted where s3s differs from
//! S3: `${filename}` keys, the `acl` field, 403 for broken policy conditions, the success
//! redirect's quoted ETag.

use bytes::Bytes;

use super::reply::error_response;

/// Largest browser form upload (POST object) read ahead of s3s to be inspected; s3s holds the
/// whole file in memory anyway. Larger forms go to s3s unchanged.
const FORM_BODY_MAX_BYTES: usize = 64 << 20;

/// What the front learned of a browser form upload before s3s saw it.
pub(super) struct FormSummary {
    /// The form is signed (`signature` or `x-amz-signature`).
    signed: bool,
}

/// Whether `request` is a browser form upload (POST multipart/form-data) small enough to read.
pub(super) fn form_upload<B>(request: &http::Request<B>) -> bool {
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
    /// The whole part, from its delimiter to the next one's.
    whole: std::ops::Range<usize>,
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
                whole: at..next,
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
pub(super) async fn prepare_form(
    request: http::Request<hyper::body::Incoming>,
    auth: bool,
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
    let body = if auth || !signed {
        body
    } else {
        without_signature_fields(body, &boundary)
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

/// The fields that carry a form's signature (SigV2, SigV4).
const SIGNATURE_FIELDS: [&str; 2] = ["signature", "x-amz-signature"];

/// A form's `body` without its signature fields. With authentication off s3s answers a form
/// carrying one with NotImplemented (it has no authentication provider to check it with), so
/// the form is served as an unsigned one, as a signed request is ([`super::no_auth`]). The
/// other fields stay: s3s still checks the policy's expiration and conditions.
fn without_signature_fields(body: Bytes, boundary: &str) -> Bytes {
    let dropped: Vec<std::ops::Range<usize>> = form_parts(&body, boundary)
        .into_iter()
        .filter(|part| {
            SIGNATURE_FIELDS
                .iter()
                .any(|name| part.name.eq_ignore_ascii_case(name))
        })
        .map(|part| part.whole)
        .collect();
    if dropped.is_empty() {
        return body;
    }
    let mut kept = Vec::with_capacity(body.len());
    let mut from = 0;
    for part in dropped {
        kept.extend_from_slice(&body[from..part.start]);
        from = part.end;
    }
    kept.extend_from_slice(&body[from..]);
    Bytes::from(kept)
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
pub(super) fn form_response(
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
