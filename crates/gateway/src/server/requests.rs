//! S3 requests by operation and status, with latency histograms, counted at the front (issue
//! 44), so `/metrics` shows what clients asked and how long the answers took.
//!
//! The operation is read from the request line as S3 names it (`GetObject`, `PutObject`,
//! `ListObjectsV2`, ...; path-style addressing, which is what the gateway serves). The latency
//! runs from the request's arrival at the front to the response's headers: a GET's body still
//! streams after that, so a large GET's transfer time is not in it.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// Upper bounds of the latency buckets, in seconds (Prometheus `le`); `+Inf` is implied.
pub const LATENCY_BUCKETS_S: [f64; 14] = [
    0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// One operation's latency histogram (cumulative since the gateway started).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LatencyHistogram {
    /// Requests per bucket of [`LATENCY_BUCKETS_S`] (not cumulative); the last element
    /// counts those slower than every bound.
    pub buckets: [u64; LATENCY_BUCKETS_S.len() + 1],
    /// Sum of the latencies, in seconds.
    pub sum_s: f64,
    /// Requests.
    pub count: u64,
}

impl LatencyHistogram {
    fn record(&mut self, latency_s: f64) {
        let index = LATENCY_BUCKETS_S
            .iter()
            .position(|&bound| latency_s <= bound)
            .unwrap_or(LATENCY_BUCKETS_S.len());
        self.buckets[index] += 1;
        self.sum_s += latency_s;
        self.count += 1;
    }
}

/// What the front counted, as of one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RequestStats {
    /// Requests by (operation, HTTP status).
    pub requests: BTreeMap<(&'static str, u16), u64>,
    /// Latency by operation.
    pub latency: BTreeMap<&'static str, LatencyHistogram>,
}

impl RequestStats {
    /// Requests over all operations and statuses.
    pub fn total(&self) -> u64 {
        self.requests.values().sum()
    }

    /// Sum of all latencies, in seconds.
    pub fn latency_sum_s(&self) -> f64 {
        self.latency.values().map(|h| h.sum_s).sum()
    }

    /// Requests answered with a 5xx.
    pub fn server_errors(&self) -> u64 {
        self.requests
            .iter()
            .filter(|((_, status), _)| *status >= 500)
            .map(|(_, count)| count)
            .sum()
    }
}

/// The counters the front updates on every request.
#[derive(Debug, Default)]
pub struct RequestMetrics {
    stats: Mutex<RequestStats>,
}

impl RequestMetrics {
    /// Counts one answered request.
    pub fn record(&self, operation: &'static str, status: u16, latency_s: f64) {
        let mut stats = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        *stats.requests.entry((operation, status)).or_insert(0) += 1;
        stats
            .latency
            .entry(operation)
            .or_default()
            .record(latency_s);
    }

    /// A copy of the counters.
    pub fn snapshot(&self) -> RequestStats {
        self.stats.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The S3 operation a request line asks for (path-style addressing). `x-amz-copy-source`
/// tells a copy from a plain PUT.
pub fn operation(
    method: &http::Method,
    path: &str,
    query: Option<&str>,
    copy: bool,
) -> &'static str {
    let trimmed = path.trim_start_matches('/');
    let (bucket, key) = match trimmed.split_once('/') {
        Some((bucket, key)) => (bucket, key),
        None => (trimmed, ""),
    };
    let params: Vec<&str> = query
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').map_or(p, |(name, _)| name))
        .collect();
    let has = |name: &str| params.contains(&name);
    let method = method.as_str();
    if method == "OPTIONS" {
        return "Options";
    }
    if bucket.is_empty() {
        return if method == "GET" {
            "ListBuckets"
        } else {
            "Other"
        };
    }
    if key.is_empty() {
        return bucket_operation(method, &has);
    }
    match method {
        "GET" if has("uploadId") => "ListParts",
        "GET" if has("acl") => "GetObjectAcl",
        "GET" if has("attributes") => "GetObjectAttributes",
        "GET" if has("tagging") => "GetObjectTagging",
        "GET" => "GetObject",
        "HEAD" => "HeadObject",
        "PUT" if has("partNumber") && copy => "UploadPartCopy",
        "PUT" if has("partNumber") => "UploadPart",
        "PUT" if has("acl") => "PutObjectAcl",
        "PUT" if has("tagging") => "PutObjectTagging",
        "PUT" if copy => "CopyObject",
        "PUT" => "PutObject",
        "POST" if has("uploads") => "CreateMultipartUpload",
        "POST" if has("uploadId") => "CompleteMultipartUpload",
        "DELETE" if has("uploadId") => "AbortMultipartUpload",
        "DELETE" if has("tagging") => "DeleteObjectTagging",
        "DELETE" => "DeleteObject",
        _ => "Other",
    }
}

fn bucket_operation(method: &str, has: &dyn Fn(&str) -> bool) -> &'static str {
    let sub = [
        "location",
        "versioning",
        "acl",
        "policy",
        "cors",
        "uploads",
        "versions",
        "tagging",
        "lifecycle",
        "publicAccessBlock",
    ]
    .into_iter()
    .find(|name| has(name));
    match (method, sub) {
        ("GET", Some("location")) => "GetBucketLocation",
        ("GET", Some("versioning")) => "GetBucketVersioning",
        ("GET", Some("acl")) => "GetBucketAcl",
        ("GET", Some("policy")) => "GetBucketPolicy",
        ("GET", Some("cors")) => "GetBucketCors",
        ("GET", Some("uploads")) => "ListMultipartUploads",
        ("GET", Some("versions")) => "ListObjectVersions",
        ("GET", Some(_)) => "GetBucketOther",
        ("GET", None) if has("list-type") => "ListObjectsV2",
        ("GET", None) => "ListObjects",
        ("HEAD", _) => "HeadBucket",
        ("PUT", None) => "CreateBucket",
        ("PUT", Some("versioning")) => "PutBucketVersioning",
        ("PUT", Some("acl")) => "PutBucketAcl",
        ("PUT", Some("policy")) => "PutBucketPolicy",
        ("PUT", Some("cors")) => "PutBucketCors",
        ("PUT", Some(_)) => "PutBucketOther",
        ("DELETE", None) => "DeleteBucket",
        ("DELETE", Some("policy")) => "DeleteBucketPolicy",
        ("DELETE", Some("cors")) => "DeleteBucketCors",
        ("DELETE", Some(_)) => "DeleteBucketOther",
        ("POST", _) if has("delete") => "DeleteObjects",
        ("POST", _) => "PostObject",
        _ => "Other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    #[test]
    fn operations_are_named_as_s3_names_them() {
        let cases = [
            (Method::GET, "/", None, false, "ListBuckets"),
            (Method::PUT, "/b", None, false, "CreateBucket"),
            (
                Method::GET,
                "/b",
                Some("list-type=2&prefix=a"),
                false,
                "ListObjectsV2",
            ),
            (Method::GET, "/b", None, false, "ListObjects"),
            (
                Method::GET,
                "/b",
                Some("location"),
                false,
                "GetBucketLocation",
            ),
            (Method::POST, "/b", Some("delete"), false, "DeleteObjects"),
            (Method::GET, "/b/k/x", None, false, "GetObject"),
            (Method::PUT, "/b/k", None, false, "PutObject"),
            (Method::PUT, "/b/k", None, true, "CopyObject"),
            (
                Method::PUT,
                "/b/k",
                Some("partNumber=1&uploadId=u"),
                false,
                "UploadPart",
            ),
            (
                Method::POST,
                "/b/k",
                Some("uploads"),
                false,
                "CreateMultipartUpload",
            ),
            (
                Method::POST,
                "/b/k",
                Some("uploadId=u"),
                false,
                "CompleteMultipartUpload",
            ),
            (Method::DELETE, "/b/k", None, false, "DeleteObject"),
            (Method::HEAD, "/b/k", None, false, "HeadObject"),
        ];
        for (method, path, query, copy, expected) in cases {
            assert_eq!(
                operation(&method, path, query, copy),
                expected,
                "{method} {path} {query:?}"
            );
        }
    }

    #[test]
    fn latencies_fall_into_their_buckets() {
        let metrics = RequestMetrics::default();
        metrics.record("GetObject", 200, 0.000_1);
        metrics.record("GetObject", 200, 0.003);
        metrics.record("GetObject", 404, 60.0);
        let stats = metrics.snapshot();
        assert_eq!(stats.requests[&("GetObject", 200)], 2);
        assert_eq!(stats.requests[&("GetObject", 404)], 1);
        let histogram = &stats.latency["GetObject"];
        assert_eq!(histogram.count, 3);
        assert_eq!(histogram.buckets[0], 1);
        assert_eq!(histogram.buckets[3], 1, "0.003 s is in the 0.005 bucket");
        assert_eq!(
            histogram.buckets[LATENCY_BUCKETS_S.len()],
            1,
            "past every bound"
        );
        assert!((histogram.sum_s - 60.0031).abs() < 1e-9);
    }
}
