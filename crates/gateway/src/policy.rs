//! Bucket policies: the JSON documents of PutBucketPolicy, checked when they are put and
//! evaluated on every access check alongside the ACL.
//!
//! The bucket keeps the document as the client sent it (GetBucketPolicy returns it
//! unchanged); it is parsed again at each check, which costs far less than the cluster round
//! trip that loaded the bucket. Evaluation follows AWS: an explicit Deny wins, then an Allow
//! grants, else the ACL decides.
//!
//! Supported: `Effect` Allow/Deny, `Principal` (`"*"`, `{"AWS": "*"}`, user ARNs or uids),
//! `Action`/`NotAction` and `Resource`/`NotResource` with `*` and `?` wildcards, and the
//! condition operators `StringEquals`, `StringNotEquals`, `StringLike`, `StringNotLike` (with
//! `...IgnoreCase` forms), `IpAddress`/`NotIpAddress`, `Bool` and `Null` (each also with the set
//! qualifiers `ForAnyValue:` / `ForAllValues:` for multi-valued keys), on the keys the
//! gateway fills in ([`CONDITION_KEYS`]: the client's address, the transport, `Referer`,
//! `User-Agent`, the listing's prefix; the object's tags and the tags a write sets). A document with any other operator or key is refused
//! when it is put: a condition that can never hold would make a Deny do nothing, which is
//! wider access than its author wrote.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::acl::Requester;
use crate::error::{GatewayError, Result};

/// What a policy says about one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// A statement allows it (and none denies it).
    Allow,
    /// A statement denies it: refused whatever the ACL says.
    Deny,
    /// No statement applies: the ACL decides.
    Unspecified,
}

/// What separates the values of a multi-valued condition key in a [`Context`] value
/// (`s3:RequestObjectTagKeys`; tag keys never contain it).
pub const MULTI_VALUE_SEPARATOR: char = '\n';

/// The set qualifiers a condition operator may carry, for multi-valued keys.
const SET_QUALIFIERS: [&str; 2] = ["ForAnyValue:", "ForAllValues:"];

/// Values of the request that conditions test (`s3:prefix`, `aws:Referer`, ...), by key.
pub type Context = BTreeMap<String, String>;

/// The condition operators evaluated.
const CONDITION_OPERATORS: [&str; 10] = [
    "StringEquals",
    "StringNotEquals",
    "StringEqualsIgnoreCase",
    "StringNotEqualsIgnoreCase",
    "StringLike",
    "StringNotLike",
    "IpAddress",
    "NotIpAddress",
    "Bool",
    "Null",
];

/// The condition keys the gateway fills in: `aws:SourceIp` (the client's address),
/// `aws:SecureTransport` (`false`: plain HTTP), `aws:Referer` and `aws:UserAgent` (the
/// request's headers, when it has them) for every request, `s3:prefix` for listings (empty
/// when none is given) and object requests on a missing key; besides these, object
/// requests carry the object's tags as `s3:ExistingObjectTag/<key>` and writes the tags
/// they set as `s3:RequestObjectTag/<key>` and `s3:RequestObjectTagKeys`
/// ([`crate::tagging::EXISTING_TAG_KEY_PREFIX`]), and PutObject the encryption it asks for
/// (`s3:x-amz-server-side-encryption`, `s3:x-amz-server-side-encryption-customer-algorithm`:
/// the request's headers, when it has them).
pub const CONDITION_KEYS: [&str; 7] = [
    "aws:SourceIp",
    "aws:SecureTransport",
    "aws:Referer",
    "aws:UserAgent",
    "s3:prefix",
    "s3:x-amz-server-side-encryption",
    "s3:x-amz-server-side-encryption-customer-algorithm",
];

/// One statement of a parsed policy.
#[derive(Clone, Debug)]
struct Statement {
    allow: bool,
    /// `None`: every principal (`"*"`).
    principals: Option<Vec<String>>,
    actions: Vec<String>,
    not_actions: Vec<String>,
    resources: Vec<String>,
    not_resources: Vec<String>,
    /// (operator, key, values).
    conditions: Vec<(String, String, Vec<String>)>,
}

/// A parsed bucket policy.
#[derive(Clone, Debug)]
pub struct Policy {
    statements: Vec<Statement>,
}

fn malformed(why: impl Into<String>) -> GatewayError {
    GatewayError::MalformedPolicy(why.into())
}

/// A string or a list of strings, as policies write them.
fn strings(value: &Value, field: &str) -> Result<Vec<String>> {
    match value {
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Array(items) => items
            .iter()
            .map(|item| {
                item.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| malformed(format!("{field} holds a non-string")))
            })
            .collect(),
        _ => Err(malformed(format!("{field} is not a string or a list"))),
    }
}

fn principals(value: &Value) -> Result<Option<Vec<String>>> {
    match value {
        Value::String(s) if s == "*" => Ok(None),
        Value::Object(map) => {
            let mut all = Vec::new();
            for (kind, ids) in map {
                let ids = strings(ids, "Principal")?;
                if kind == "AWS" && ids.iter().any(|id| id == "*") {
                    return Ok(None);
                }
                all.extend(ids);
            }
            Ok(Some(all))
        }
        _ => Err(malformed("Principal must be \"*\" or an object")),
    }
}

impl Policy {
    /// Parses and checks a policy document; MalformedPolicy says what is wrong.
    pub fn parse(text: &str) -> Result<Policy> {
        let document: Value =
            serde_json::from_str(text).map_err(|e| malformed(format!("not JSON: {e}")))?;
        let statements = match document.get("Statement") {
            Some(Value::Array(items)) => items.clone(),
            Some(item @ Value::Object(_)) => vec![item.clone()],
            _ => return Err(malformed("no Statement")),
        };
        let mut parsed = Vec::new();
        for statement in &statements {
            let allow = match statement.get("Effect").and_then(Value::as_str) {
                Some("Allow") => true,
                Some("Deny") => false,
                _ => return Err(malformed("Effect must be Allow or Deny")),
            };
            if statement.get("NotPrincipal").is_some() {
                // AWS refuses NotPrincipal with Allow; radosgw does not evaluate it at all.
                return Err(malformed("NotPrincipal is not supported"));
            }
            let principals = match statement.get("Principal") {
                Some(value) => principals(value)?,
                None => return Err(malformed("a statement has no Principal")),
            };
            let list = |field: &str| -> Result<Vec<String>> {
                statement
                    .get(field)
                    .map(|value| strings(value, field))
                    .unwrap_or(Ok(Vec::new()))
            };
            let actions = list("Action")?;
            let not_actions = list("NotAction")?;
            if actions.is_empty() && not_actions.is_empty() {
                return Err(malformed("a statement has no Action"));
            }
            let resources = list("Resource")?;
            let not_resources = list("NotResource")?;
            if resources.is_empty() && not_resources.is_empty() {
                return Err(malformed("a statement has no Resource"));
            }
            for resource in resources.iter().chain(&not_resources) {
                if resource != "*" && !resource.starts_with("arn:aws:s3:::") {
                    return Err(malformed(format!("resource {resource} is not an S3 ARN")));
                }
            }
            let mut conditions = Vec::new();
            if let Some(condition) = statement.get("Condition") {
                let Value::Object(operators) = condition else {
                    return Err(malformed("Condition is not an object"));
                };
                for (operator, tests) in operators {
                    let Value::Object(tests) = tests else {
                        return Err(malformed(format!("condition {operator} is not an object")));
                    };
                    let bare = SET_QUALIFIERS
                        .iter()
                        .find_map(|qualifier| operator.strip_prefix(*qualifier))
                        .unwrap_or(operator.as_str());
                    if !CONDITION_OPERATORS.contains(&bare) {
                        return Err(malformed(format!(
                            "condition operator {operator} is not supported (supported: {})",
                            CONDITION_OPERATORS.join(", ")
                        )));
                    }
                    for (key, values) in tests {
                        let has_prefix = |wanted: &str| {
                            key.get(..wanted.len())
                                .is_some_and(|prefix| prefix.eq_ignore_ascii_case(wanted))
                        };
                        let tag_key = has_prefix(crate::tagging::EXISTING_TAG_KEY_PREFIX)
                            || has_prefix(crate::tagging::REQUEST_TAG_KEY_PREFIX)
                            || key.eq_ignore_ascii_case(crate::tagging::REQUEST_TAG_KEYS);
                        if !tag_key && !CONDITION_KEYS.iter().any(|k| k.eq_ignore_ascii_case(key)) {
                            return Err(malformed(format!(
                                "condition key {key} is not supported (supported: {})",
                                CONDITION_KEYS.join(", ")
                            )));
                        }
                        conditions.push((operator.clone(), key.clone(), strings(values, key)?));
                    }
                }
            }
            parsed.push(Statement {
                allow,
                principals,
                actions,
                not_actions,
                resources,
                not_resources,
                conditions,
            });
        }
        Ok(Policy { statements: parsed })
    }

    /// Whether the policy grants anything to everyone without a condition (what
    /// GetBucketPolicyStatus and BlockPublicPolicy call public).
    pub fn is_public(&self) -> bool {
        self.statements
            .iter()
            .any(|s| s.allow && s.principals.is_none() && s.conditions.is_empty())
    }

    /// What the policy says about `requester` doing `action` (`s3:GetObject`) on `resource`
    /// (`arn:aws:s3:::bucket/key`).
    pub fn evaluate(
        &self,
        requester: &Requester,
        action: &str,
        resource: &str,
        context: &Context,
    ) -> Decision {
        let mut decision = Decision::Unspecified;
        for statement in &self.statements {
            if !statement.matches(requester, action, resource, context) {
                continue;
            }
            if !statement.allow {
                return Decision::Deny;
            }
            decision = Decision::Allow;
        }
        decision
    }
}

impl Statement {
    fn matches(
        &self,
        requester: &Requester,
        action: &str,
        resource: &str,
        context: &Context,
    ) -> bool {
        let principal = match &self.principals {
            None => true,
            Some(ids) => requester
                .uid()
                .is_some_and(|uid| ids.iter().any(|id| principal_names(id, uid))),
        };
        let action_matches = if self.actions.is_empty() {
            !self
                .not_actions
                .iter()
                .any(|a| wildcard(&a.to_ascii_lowercase(), &action.to_ascii_lowercase()))
        } else {
            self.actions
                .iter()
                .any(|a| wildcard(&a.to_ascii_lowercase(), &action.to_ascii_lowercase()))
        };
        let resource_matches = if self.resources.is_empty() {
            !self.not_resources.iter().any(|r| wildcard(r, resource))
        } else {
            self.resources.iter().any(|r| wildcard(r, resource))
        };
        principal
            && action_matches
            && resource_matches
            && self
                .conditions
                .iter()
                .all(|(operator, key, values)| condition_holds(operator, key, values, context))
    }
}

/// Whether the principal `id` (a uid, `arn:aws:iam::<tenant>:user/<uid>`) names `uid`.
fn principal_names(id: &str, uid: &str) -> bool {
    if id == uid {
        return true;
    }
    match id.strip_prefix("arn:aws:iam::") {
        Some(rest) => {
            let (tenant, user) = rest.split_once(':').unwrap_or(("", rest));
            let Some(name) = user.strip_prefix("user/") else {
                return false;
            };
            if tenant.is_empty() {
                name == uid
            } else {
                uid == format!("{tenant}${name}")
            }
        }
        None => false,
    }
}

fn condition_holds(operator: &str, key: &str, values: &[String], context: &Context) -> bool {
    let lookup = context
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(_, v)| v.as_str());
    // `Null: true` holds where the request does not carry the key, `Null: false` where it
    // does.
    if operator == "Null" {
        return values
            .iter()
            .any(|v| v.eq_ignore_ascii_case("true") == lookup.is_none());
    }
    // A set operator tests each of a multi-valued key's values (AWS: ForAllValues holds
    // for no values at all, ForAnyValue does not).
    if let Some(bare) = operator.strip_prefix("ForAnyValue:") {
        return lookup.is_some_and(|all| {
            all.split(MULTI_VALUE_SEPARATOR)
                .any(|one| value_holds(bare, one, values))
        });
    }
    if let Some(bare) = operator.strip_prefix("ForAllValues:") {
        return lookup.is_none_or(|all| {
            all.split(MULTI_VALUE_SEPARATOR)
                .all(|one| value_holds(bare, one, values))
        });
    }
    let Some(actual) = lookup else {
        // A key the request does not carry: only the negated operators hold.
        return matches!(operator, "StringNotEquals" | "StringNotLike");
    };
    value_holds(operator, actual, values)
}

/// Whether `operator` holds between the request's value `actual` and the policy's `values`.
fn value_holds(operator: &str, actual: &str, values: &[String]) -> bool {
    let lower = actual.to_ascii_lowercase();
    match operator {
        "StringEquals" => values.iter().any(|v| v == actual),
        "StringNotEquals" => !values.iter().any(|v| v == actual),
        "StringEqualsIgnoreCase" => values.iter().any(|v| v.to_ascii_lowercase() == lower),
        "StringNotEqualsIgnoreCase" => !values.iter().any(|v| v.to_ascii_lowercase() == lower),
        "StringLike" => values.iter().any(|v| wildcard(v, actual)),
        "StringNotLike" => !values.iter().any(|v| wildcard(v, actual)),
        "Bool" => values.iter().any(|v| v.to_ascii_lowercase() == lower),
        "IpAddress" => values.iter().any(|v| in_network(v, actual)),
        "NotIpAddress" => !values.iter().any(|v| in_network(v, actual)),
        _ => false,
    }
}

/// Whether IPv4 `address` is in `network` (`a.b.c.d/n` or one address).
fn in_network(network: &str, address: &str) -> bool {
    let (base, bits) = network.split_once('/').unwrap_or((network, "32"));
    let (Ok(base), Ok(address), Ok(bits)) = (
        base.parse::<std::net::Ipv4Addr>(),
        address.parse::<std::net::Ipv4Addr>(),
        bits.parse::<u32>(),
    ) else {
        return false;
    };
    if bits > 32 {
        return false;
    }
    let mask = if bits == 0 {
        0
    } else {
        u32::MAX << (32 - bits)
    };
    u32::from(base) & mask == u32::from(address) & mask
}

/// Whether `text` matches `pattern`, where `*` is any run of characters and `?` one.
pub fn wildcard(pattern: &str, text: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = text.chars().collect();
    let (mut p, mut t) = (0, 0);
    // The last `*` seen and the text position it was tried at, to backtrack to.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == '?' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == '*' {
            star = Some((p, t));
            p += 1;
        } else if let Some((star_p, star_t)) = star {
            p = star_p + 1;
            t = star_t + 1;
            star = Some((star_p, star_t + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|c| *c == '*')
}

/// The ARN of a bucket, or of one of its objects.
pub fn arn(bucket: &str, key: Option<&str>) -> String {
    match key {
        Some(key) => format!("arn:aws:s3:::{bucket}/{key}"),
        None => format!("arn:aws:s3:::{bucket}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(uid: &str) -> Requester {
        Requester::User(uid.into())
    }

    #[test]
    fn wildcards_match_runs_and_single_characters() {
        assert!(wildcard("arn:aws:s3:::b/*", "arn:aws:s3:::b/x/y"));
        assert!(wildcard("public/*", "public/object"));
        assert!(!wildcard("public/*", "private/object"));
        assert!(wildcard("a?c", "abc"));
        assert!(!wildcard("a?c", "ac"));
        assert!(wildcard("*a*b", "xxaxxb"));
        assert!(!wildcard("*a*b", "xxaxxbc"));
    }

    #[test]
    fn deny_wins_over_allow_and_conditions_narrow() {
        let policy = Policy::parse(
            r#"{"Version":"2012-10-17","Statement":[
              {"Effect":"Allow","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::b/*"},
              {"Effect":"Deny","Principal":{"AWS":"arn:aws:iam:::user/bob"},
               "Action":"s3:GetObject","Resource":"arn:aws:s3:::b/secret*"},
              {"Effect":"Allow","Principal":{"AWS":"*"},"Action":"s3:ListBucket",
               "Resource":"arn:aws:s3:::b","Condition":{"StringLike":{"s3:prefix":"pub/*"}}}]}"#,
        )
        .unwrap();
        let none = Context::new();
        assert_eq!(
            policy.evaluate(&user("bob"), "s3:GetObject", "arn:aws:s3:::b/x", &none),
            Decision::Allow
        );
        assert_eq!(
            policy.evaluate(
                &user("bob"),
                "s3:GetObject",
                "arn:aws:s3:::b/secret1",
                &none
            ),
            Decision::Deny
        );
        assert_eq!(
            policy.evaluate(
                &user("ann"),
                "s3:GetObject",
                "arn:aws:s3:::b/secret1",
                &none
            ),
            Decision::Allow
        );
        assert_eq!(
            policy.evaluate(&user("ann"), "s3:ListBucket", "arn:aws:s3:::b", &none),
            Decision::Unspecified
        );
        let prefix = Context::from([("s3:prefix".to_string(), "pub/a".to_string())]);
        assert_eq!(
            policy.evaluate(
                &Requester::Anonymous,
                "s3:ListBucket",
                "arn:aws:s3:::b",
                &prefix
            ),
            Decision::Allow
        );
        assert!(policy.is_public());
    }

    #[test]
    fn address_and_transport_conditions_hold_on_the_filled_keys() {
        let policy = Policy::parse(
            r#"{"Statement":[
              {"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::b/*",
               "Condition":{"NotIpAddress":{"aws:SourceIp":"10.0.0.0/8"}}},
              {"Effect":"Deny","Principal":"*","Action":"s3:PutObject","Resource":"*",
               "Condition":{"Bool":{"aws:SecureTransport":"false"}}}]}"#,
        )
        .unwrap();
        let from = |ip: &str| {
            Context::from([
                ("aws:SourceIp".to_string(), ip.to_string()),
                ("aws:SecureTransport".to_string(), "false".to_string()),
            ])
        };
        let get = |ip| policy.evaluate(&user("ann"), "s3:GetObject", "arn:aws:s3:::b/k", &from(ip));
        assert_eq!(get("127.0.0.1"), Decision::Deny);
        assert_eq!(get("10.1.2.3"), Decision::Unspecified);
        assert_eq!(
            policy.evaluate(
                &user("ann"),
                "s3:PutObject",
                "arn:aws:s3:::c/k",
                &from("10.1.2.3")
            ),
            Decision::Deny
        );
    }

    #[test]
    fn null_tests_whether_the_request_carries_a_key() {
        let policy = Policy::parse(
            r#"{"Statement":[
              {"Effect":"Deny","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::b/*",
               "Condition":{"Null":{"s3:x-amz-server-side-encryption":"true"}}}]}"#,
        )
        .unwrap();
        let put = |context: &Context| {
            policy.evaluate(&user("ann"), "s3:PutObject", "arn:aws:s3:::b/k", context)
        };
        assert_eq!(put(&Context::new()), Decision::Deny);
        let encrypted = Context::from([(
            "s3:x-amz-server-side-encryption".to_string(),
            "AES256".to_string(),
        )]);
        assert_eq!(put(&encrypted), Decision::Unspecified);
    }

    #[test]
    fn request_tags_and_their_keys_are_tested() {
        let policy = Policy::parse(
            r#"{"Version":"2012-10-17","Statement":[
              {"Effect":"Allow","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::b/*",
               "Condition":{"StringEquals":{"s3:RequestObjectTag/team":"blue"},
                            "ForAllValues:StringEquals":{"s3:RequestObjectTagKeys":["team","cost"]}}},
              {"Effect":"Deny","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::b/*",
               "Condition":{"ForAnyValue:StringLike":{"s3:RequestObjectTagKeys":"secret*"}}}]}"#,
        )
        .unwrap();
        let tag = |key: &str, value: &str| crate::tagging::Tag {
            key: key.into(),
            value: value.into(),
        };
        let decide = |tags: &[crate::tagging::Tag]| {
            let context = crate::tagging::request_tags_context(tags);
            policy.evaluate(&user("ann"), "s3:PutObject", "arn:aws:s3:::b/k", &context)
        };
        assert_eq!(decide(&[tag("team", "blue")]), Decision::Allow);
        assert_eq!(
            decide(&[tag("team", "blue"), tag("cost", "1")]),
            Decision::Allow
        );
        assert_eq!(decide(&[tag("team", "red")]), Decision::Unspecified);
        // A key outside the allowed set fails ForAllValues.
        assert_eq!(
            decide(&[tag("team", "blue"), tag("x", "1")]),
            Decision::Unspecified
        );
        assert_eq!(
            decide(&[tag("team", "blue"), tag("secret-a", "1")]),
            Decision::Deny
        );
        assert_eq!(decide(&[]), Decision::Unspecified);
    }

    #[test]
    fn malformed_documents_are_refused() {
        for text in [
            "not json",
            r#"{"Statement":[{"Effect":"Maybe","Principal":"*","Action":"s3:*","Resource":"*"}]}"#,
            r#"{"Statement":[{"Effect":"Allow","NotPrincipal":{"AWS":"x"},"Action":"s3:*","Resource":"*"}]}"#,
            r#"{"Statement":[{"Effect":"Allow","Principal":"*","Resource":"*"}]}"#,
            // A condition the gateway cannot evaluate would leave a Deny doing nothing.
            r#"{"Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"*",
                "Condition":{"DateLessThan":{"aws:CurrentTime":"2030-01-01T00:00:00Z"}}}]}"#,
            r#"{"Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"*",
                "Condition":{"StringEquals":{"aws:PrincipalOrgID":"o-1"}}}]}"#,
        ] {
            assert!(
                matches!(Policy::parse(text), Err(GatewayError::MalformedPolicy(_))),
                "{text}"
            );
        }
    }
}
