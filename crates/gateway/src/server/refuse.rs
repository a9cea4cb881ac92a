//! Requests the front refuses before s3s sees them, with the answer S3 gives, and what it
//! reads of a request's signature to decide.

use super::body::unannounced_put_body;
use super::no_auth;
use super::reply::error_response;

/// Longest validity of a presigned URL S3 accepts (`X-Amz-Expires`), in seconds: a week.
const PRESIGNED_EXPIRES_MAX_S: i64 = 604_800;

/// Requests answered before s3s sees them, with the status S3 gives: presigned URLs whose `X-Amz-Expires` is negative
/// (expired) or longer than a week, which s3s would answer with 400 or accept. Without
/// `auth`, `request` has had its signature taken away ([`no_auth::without_signature`]).
pub(super) fn refuse_early<B>(
    request: &http::Request<B>,
    auth: bool,
) -> Option<http::Response<s3s::Body>> {
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
pub(super) fn sigv4_signed_headers<B>(request: &http::Request<B>) -> Option<Vec<String>> {
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
pub(super) fn query_parameter<B>(request: &http::Request<B>, name: &str) -> Option<String> {
    request.uri().query()?.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        (key == name).then(|| {
            percent_encoding::percent_decode_str(value)
                .decode_utf8_lossy()
                .into_owned()
        })
    })
}

/// Whether a GET or HEAD asks to override response headers (`response-content-type` and the
/// like), which S3 allows signed requests only: an anonymous one could otherwise have any
/// public object served as HTML from the gateway's origin.
fn asks_response_overrides<B>(request: &http::Request<B>) -> bool {
    matches!(*request.method(), http::Method::GET | http::Method::HEAD)
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

#[cfg(test)]
pub(super) mod tests {
    use super::{anonymous, asks_response_overrides, refuse_bucket_name, unsigned_amz_headers};
    use crate::service::convert::bucket_name_problem;

    /// A PUT of `uri` with `headers` (also for `no_auth`'s tests).
    pub(in crate::server) fn request(uri: &str, headers: &[(&str, &str)]) -> http::Request<()> {
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
    fn response_overrides_are_spotted_on_anonymous_gets_and_heads() {
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
        // HEAD takes the same overrides, so the same rule; a PUT has none to take.
        let mut head = get("/b/k?response-content-type=text/html", &[]);
        *head.method_mut() = http::Method::HEAD;
        assert!(asks_response_overrides(&head));
        assert!(!asks_response_overrides(&request(
            "/b/k?response-content-type=text/html",
            &[]
        )));
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
