//! Requests to a gateway serving without authentication (`strata serve --s3-no-auth`).
//!
//! s3s answers any signed request with NotImplemented when it has no authentication provider,
//! and the aws CLI and boto3 always sign. As radosgw with authentication disabled, the
//! gateway then serves a signed request as an anonymous one: the front takes its signature
//! away (the `Authorization` header, a presigned URL's query parameters) before s3s sees it;
//! a browser form upload's signature fields are taken out of its body in `form`.
//! A body framed as aws-chunked (`x-amz-content-sha256: STREAMING-...`) is the one thing this
//! cannot serve: s3s decodes that framing only while it checks the signatures, so without
//! them the framing would be stored as the object's data. Such a request is refused.

/// Query parameters that carry a presigned URL's SigV4 signature.
const SIGV4_QUERY: [&str; 7] = [
    "X-Amz-Algorithm",
    "X-Amz-Credential",
    "X-Amz-Date",
    "X-Amz-Expires",
    "X-Amz-SignedHeaders",
    "X-Amz-Signature",
    "X-Amz-Security-Token",
];

/// Query parameters that carry a presigned URL's SigV2 signature (when `Signature` is one).
const SIGV2_QUERY: [&str; 3] = ["Signature", "AWSAccessKeyId", "Expires"];

/// `request` without its signature: no `Authorization` header, no presigned query parameters.
/// Everything else, the other query parameters' order and encoding included, is kept.
pub(super) fn without_signature<B>(mut request: http::Request<B>) -> http::Request<B> {
    request.headers_mut().remove(http::header::AUTHORIZATION);
    let Some(query) = request.uri().query() else {
        return request;
    };
    let name_of = |pair: &str| -> String {
        let name = pair.split_once('=').map_or(pair, |(name, _)| name);
        percent_encoding::percent_decode_str(name)
            .decode_utf8_lossy()
            .into_owned()
    };
    let sigv2 = query.split('&').any(|pair| name_of(pair) == "Signature");
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| {
            let name = name_of(pair);
            let signature = SIGV4_QUERY.contains(&name.as_str())
                || (sigv2 && SIGV2_QUERY.contains(&name.as_str()));
            !signature
        })
        .collect();
    if kept.len() == query.split('&').count() {
        return request;
    }
    let path = request.uri().path();
    let path_and_query = if kept.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{}", kept.join("&"))
    };
    let mut parts = request.uri().clone().into_parts();
    // Built from a valid URI's own path and query pairs: still valid.
    parts.path_and_query = path_and_query.parse().ok();
    if let Ok(uri) = http::Uri::from_parts(parts) {
        *request.uri_mut() = uri;
    }
    request
}

/// Whether `request`'s body is framed as aws-chunked (signed chunks, or unsigned ones with a
/// trailer), which only s3s's signature check decodes.
pub(super) fn aws_chunked_body<B>(request: &http::Request<B>) -> bool {
    let headers = request.headers();
    let streaming = headers
        .get("x-amz-content-sha256")
        .is_some_and(|value| value.as_bytes().starts_with(b"STREAMING-"));
    let encoded = headers
        .get_all(http::header::CONTENT_ENCODING)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|coding| coding.trim().eq_ignore_ascii_case("aws-chunked"));
    streaming || encoded
}

/// What a request with an aws-chunked body is told when authentication is off.
pub(super) const AWS_CHUNKED_REFUSED: &str =
    "aws-chunked request bodies (x-amz-content-sha256: STREAMING-...) are not accepted while S3 \
     authentication is off: their framing is decoded only with the signature check. Send the \
     body unchunked (a SigV4 payload hash or UNSIGNED-PAYLOAD).";

/// What an anonymous request with an aws-chunked body is told (authentication on).
pub(super) const AWS_CHUNKED_ANONYMOUS_REFUSED: &str =
    "aws-chunked request bodies (x-amz-content-sha256: STREAMING-...) are accepted only on \
     signed requests: their framing is decoded with the signature check. Sign the request, or \
     send the body unchunked.";

#[cfg(test)]
mod tests {
    use super::super::refuse::tests::request;
    use super::{aws_chunked_body, without_signature};

    #[test]
    fn a_signature_is_taken_away_and_nothing_else() {
        let signed = request(
            "/b/k?partNumber=2&uploadId=a%2Bb",
            &[
                ("authorization", "AWS4-HMAC-SHA256 Credential=AK/..."),
                ("x-amz-acl", "private"),
            ],
        );
        let anonymous = without_signature(signed);
        assert!(anonymous.headers().get("authorization").is_none());
        assert_eq!(anonymous.headers()["x-amz-acl"], "private");
        assert_eq!(anonymous.uri(), "/b/k?partNumber=2&uploadId=a%2Bb");

        let presigned = request(
            "/b/k?versionId=v1&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AK%2F2026\
             &X-Amz-Date=20261127T000000Z&X-Amz-Expires=-10&X-Amz-SignedHeaders=host\
             &X-Amz-Signature=00",
            &[],
        );
        assert_eq!(without_signature(presigned).uri(), "/b/k?versionId=v1");
        let sigv2 = request("/b/k?AWSAccessKeyId=AK&Expires=1&Signature=x%3D", &[]);
        assert_eq!(without_signature(sigv2).uri(), "/b/k");
        // `Expires` is a signature's only beside `Signature`.
        let listing = request("/b?prefix=a&Expires=1", &[]);
        assert_eq!(without_signature(listing).uri(), "/b?prefix=a&Expires=1");
    }

    #[test]
    fn aws_chunked_bodies_are_recognised() {
        for headers in [
            &[("x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD")][..],
            &[("x-amz-content-sha256", "STREAMING-UNSIGNED-PAYLOAD-TRAILER")][..],
            &[("content-encoding", "gzip, aws-chunked")][..],
        ] {
            assert!(aws_chunked_body(&request("/b/k", headers)), "{headers:?}");
        }
        for headers in [
            &[("x-amz-content-sha256", "UNSIGNED-PAYLOAD")][..],
            &[("content-encoding", "gzip")][..],
            &[][..],
        ] {
            assert!(!aws_chunked_body(&request("/b/k", headers)), "{headers:?}");
        }
    }
}
