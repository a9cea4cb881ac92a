//! CORS: a bucket's rules and the decision for one cross-origin request. Pure functions, no
//! I/O; the HTTP layer ([`crate::server`]) answers preflights and adds the headers.

use serde::{Deserialize, Serialize};

/// One CORS rule of a bucket (S3's CORSRule).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorsRule {
    /// Rule id, if given.
    pub id: Option<String>,
    /// Origins, each with at most one `*` wildcard.
    pub allowed_origins: Vec<String>,
    /// Methods (GET, PUT, POST, DELETE, HEAD).
    pub allowed_methods: Vec<String>,
    /// Request headers a preflight may ask for (`*` wildcards allowed).
    pub allowed_headers: Vec<String>,
    /// Response headers the browser may expose.
    pub expose_headers: Vec<String>,
    /// How long a preflight answer may be cached, in seconds.
    pub max_age_s: Option<i32>,
}

/// What to answer a cross-origin request with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CorsAllowance {
    /// `Access-Control-Allow-Origin`.
    pub origin: String,
    /// `Access-Control-Allow-Methods`: the method asked for.
    pub method: String,
    /// `Access-Control-Allow-Headers`: the headers asked for (preflight).
    pub headers: Vec<String>,
    /// `Access-Control-Expose-Headers`.
    pub expose_headers: Vec<String>,
    /// `Access-Control-Max-Age`.
    pub max_age_s: Option<i32>,
}

/// `pattern` with at most one `*` matching any run of characters, case-sensitively.
fn wildcard_match(pattern: &str, value: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == value,
        Some((prefix, suffix)) => {
            value.len() >= prefix.len() + suffix.len()
                && value.starts_with(prefix)
                && value.ends_with(suffix)
        }
    }
}

/// The first rule allowing `origin` to use `method` with request `headers` (lower case), as
/// its answer; `None` when no rule does.
pub fn allow(
    rules: &[CorsRule],
    origin: &str,
    method: &str,
    headers: &[String],
) -> Option<CorsAllowance> {
    let rule = rules.iter().find(|rule| {
        rule.allowed_origins
            .iter()
            .any(|o| wildcard_match(o, origin))
            && rule.allowed_methods.iter().any(|m| m == method)
            && headers.iter().all(|h| {
                rule.allowed_headers
                    .iter()
                    .any(|allowed| wildcard_match(&allowed.to_ascii_lowercase(), h))
            })
    })?;
    let any_origin = rule.allowed_origins.iter().any(|o| o == "*");
    Some(CorsAllowance {
        origin: if any_origin {
            "*".into()
        } else {
            origin.into()
        },
        method: method.to_string(),
        headers: headers.to_vec(),
        expose_headers: rule.expose_headers.clone(),
        max_age_s: rule.max_age_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(origins: &[&str], methods: &[&str]) -> CorsRule {
        CorsRule {
            allowed_origins: origins.iter().map(|s| s.to_string()).collect(),
            allowed_methods: methods.iter().map(|s| s.to_string()).collect(),
            ..CorsRule::default()
        }
    }

    #[test]
    fn origins_match_with_one_wildcard() {
        let rules = [
            rule(&["*suffix"], &["GET"]),
            rule(&["start*end"], &["GET"]),
            rule(&["*.put"], &["PUT"]),
        ];
        let origin = |o: &str, m: &str| allow(&rules, o, m, &[]).map(|a| a.origin);
        assert_eq!(origin("foo.suffix", "GET").as_deref(), Some("foo.suffix"));
        assert_eq!(origin("startend", "GET").as_deref(), Some("startend"));
        assert_eq!(origin("0start12end", "GET"), None);
        assert_eq!(origin("foo.suffix.get", "GET"), None);
        assert_eq!(origin("foo.put", "GET"), None);
        assert_eq!(origin("foo.put", "PUT").as_deref(), Some("foo.put"));
    }

    #[test]
    fn headers_must_be_allowed_and_star_origin_answers_star() {
        let mut open = rule(&["*"], &["GET"]);
        assert!(allow(&[open.clone()], "x", "GET", &["x-amz-meta-a".into()]).is_none());
        open.allowed_headers = vec!["x-amz-*".into()];
        let allowed = allow(&[open], "x", "GET", &["x-amz-meta-a".into()]).unwrap();
        assert_eq!(allowed.origin, "*");
    }
}
