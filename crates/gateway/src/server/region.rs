//! A SigV4 credential scope naming a region s3s cannot take (issue 44): s3cmd signs with its
//! default `bucket_location`, `US`, which s3s 0.14.1 refuses as an invalid region (400
//! InvalidRequest), and s3cmd gives up. S3 answers a request signed for another region with
//! 400 `AuthorizationHeaderMalformed` naming the region to use in `<Region>`; s3cmd (as the
//! AWS SDKs) then signs again for that region. So does the front, for the regions s3s would
//! refuse: names outside `[a-z0-9-]`. Valid names it leaves to s3s as before (it verifies
//! the signature with whatever region the client chose).

/// The region of the request's SigV4 credential (the `Authorization` header's, or a
/// presigned URL's `X-Amz-Credential`), when it is signed with SigV4.
fn credential_region<B>(request: &http::Request<B>) -> Option<String> {
    let authorization = request
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok());
    let credential = match authorization {
        Some(value) if value.starts_with("AWS4-HMAC-SHA256") => value
            .split([',', ' '])
            .find_map(|part| part.trim().strip_prefix("Credential="))?
            .to_string(),
        Some(_) => return None,
        None => super::refuse::query_parameter(request, "X-Amz-Credential")?,
    };
    // ACCESS_KEY/DATE/REGION/SERVICE/aws4_request
    credential.split('/').nth(2).map(str::to_string)
}

/// Whether s3s takes `region` (non-empty, `[a-z0-9-]` only; an empty one it ignores).
fn acceptable(region: &str) -> bool {
    region.is_empty()
        || region
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// S3's answer to a request signed for a region s3s cannot take: 400
/// `AuthorizationHeaderMalformed` with the gateway's `region` in `<Region>`.
pub(super) fn wrong_region<B>(
    request: &http::Request<B>,
    region: &str,
) -> Option<http::Response<s3s::Body>> {
    let asked = credential_region(request)?;
    if acceptable(&asked) {
        return None;
    }
    let message = super::reply::xml_escape(&format!(
        "The authorization header is malformed; the region '{asked}' is wrong; expecting '{region}'"
    ));
    let region = super::reply::xml_escape(region);
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>AuthorizationHeaderMalformed</Code><Message>{message}</Message><Region>{region}</Region></Error>"
    );
    let mut response = http::Response::new(s3s::Body::from(body));
    *response.status_mut() = http::StatusCode::BAD_REQUEST;
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/xml"),
    );
    headers.insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("close"),
    );
    Some(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signed(region: &str) -> http::Request<()> {
        http::Request::builder()
            .uri("/bucket")
            .header(
                "authorization",
                format!(
                    "AWS4-HMAC-SHA256 Credential=AKID/20261128/{region}/s3/aws4_request, \
                     SignedHeaders=host;x-amz-date, Signature=00"
                ),
            )
            .body(())
            .unwrap()
    }

    #[test]
    fn s3cmds_default_region_is_sent_to_the_gateways() {
        let refusal = wrong_region(&signed("US"), "us-east-1").expect("refused");
        assert_eq!(refusal.status(), http::StatusCode::BAD_REQUEST);
        assert!(wrong_region(&signed("us-east-1"), "us-east-1").is_none());
        assert!(
            wrong_region(&signed("eu-west-3"), "us-east-1").is_none(),
            "s3s decides"
        );
        let presigned = http::Request::builder()
            .uri("/b/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKID%2F20261128%2FUS%2Fs3%2Faws4_request")
            .body(())
            .unwrap();
        assert!(wrong_region(&presigned, "us-east-1").is_some());
        let unsigned = http::Request::builder().uri("/b").body(()).unwrap();
        assert!(wrong_region(&unsigned, "us-east-1").is_none());
    }
}
