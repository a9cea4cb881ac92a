//! The balancer's error type.

/// Errors of the balancer library. Programmer errors are assertions, not variants.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BalancerError {
    /// The problem is inconsistent (unknown OSD or pool, repeated OSD in a raw set, ...).
    #[error("invalid problem: {0}")]
    Invalid(String),
    /// Input text (PG ids, pg dump JSON) could not be parsed.
    #[error("parse error: {0}")]
    Parse(String),
    /// A CRUSH rule the balancer cannot express.
    #[error("unsupported rule: {0}")]
    UnsupportedRule(String),
    /// An internal invariant failed; a bug.
    #[error("internal error: {0}")]
    Internal(String),
}
