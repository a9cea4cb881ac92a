//! Header fields S3 reads more leniently than s3s 0.14.1, made acceptable to s3s before it
//! sees them.
//!
//! s3s answers 400 InvalidArgument to a GET or HEAD whose `Range` it cannot parse and to an
//! `If-Modified-Since` or `If-Unmodified-Since` that is not an IMF-fixdate. S3, as RFC 9110
//! allows, ignores a malformed `Range` (200 and the whole object; only a valid but
//! unsatisfiable range is 416 InvalidRange), and RFC 9110 has every recipient accept all
//! three HTTP-date forms and ignore a conditional date that is not one of them.
//!
//! A header a SigV4 signature covers is left as it came: changed, it would no longer match
//! the signature, and s3s 0.14.1 parses the operation's headers right after checking it,
//! with no hook in between. So a client that signs its `Range` (boto3 and the aws CLI sign
//! every header) still gets s3s's 400 for a malformed one; anonymous requests, presigned
//! URLs (which sign `host` only) and everything with authentication off get S3's answers.

use std::time::SystemTime;

/// `request` with a malformed `Range` removed, unless a signature covers it (`signed`: the
/// lowercase names of the headers the request's signature covers). Only GET and HEAD read
/// a `Range`. A range s3s parses stays, unsatisfiable or not.
pub(super) fn ignore_malformed_range<B>(request: &mut http::Request<B>, signed: &[String]) {
    if !reads_conditions(request) || covered(signed, &http::header::RANGE) {
        return;
    }
    let values = request.headers().get_all(http::header::RANGE);
    let mut values = values.iter();
    let Some(first) = values.next() else {
        return;
    };
    let parses = values.next().is_none()
        && first
            .to_str()
            .is_ok_and(|text| !text.is_empty() && s3s::dto::Range::parse(text).is_ok());
    if !parses {
        request.headers_mut().remove(http::header::RANGE);
    }
}

/// `request` with its `If-Modified-Since` and `If-Unmodified-Since` in the form s3s parses:
/// an RFC 850 or asctime date becomes the same instant as an IMF-fixdate, a value that is no
/// HTTP-date (or several values) is removed, as RFC 9110 has a recipient ignore it. Headers
/// a signature covers are left alone.
pub(super) fn normalize_http_dates<B>(request: &mut http::Request<B>, signed: &[String]) {
    if !reads_conditions(request) {
        return;
    }
    for name in [
        http::header::IF_MODIFIED_SINCE,
        http::header::IF_UNMODIFIED_SINCE,
    ] {
        if covered(signed, &name) {
            continue;
        }
        let values = request.headers().get_all(&name);
        let mut values = values.iter();
        let Some(first) = values.next() else {
            continue;
        };
        let single = values.next().is_none();
        let replacement = match first.to_str() {
            Ok(text) if single => imf_fixdate(text),
            _ => None,
        };
        match replacement {
            Some(Normalized::AsIs) => {}
            Some(Normalized::Rewritten(value)) => {
                request.headers_mut().insert(name, value);
            }
            None => {
                request.headers_mut().remove(name);
            }
        }
    }
}

/// What becomes of one HTTP-date.
#[derive(Debug, PartialEq, Eq)]
enum Normalized {
    /// s3s parses it already.
    AsIs,
    /// The same instant as an IMF-fixdate.
    Rewritten(http::HeaderValue),
}

/// `text` as an IMF-fixdate s3s parses, or None if it is no HTTP-date.
fn imf_fixdate(text: &str) -> Option<Normalized> {
    if s3s::dto::Timestamp::parse(s3s::dto::TimestampFormat::HttpDate, text).is_ok() {
        return Some(Normalized::AsIs);
    }
    // httpdate reads all three forms (an RFC 850 two-digit year below 70 as 20xx) and checks
    // the weekday against the date.
    let instant: SystemTime = httpdate::parse_http_date(text).ok()?;
    let fixdate = httpdate::fmt_http_date(instant);
    // What httpdate writes is always the IMF-fixdate s3s reads.
    s3s::dto::Timestamp::parse(s3s::dto::TimestampFormat::HttpDate, &fixdate).ok()?;
    http::HeaderValue::from_str(&fixdate)
        .ok()
        .map(Normalized::Rewritten)
}

/// Whether s3s reads the request's `Range` and conditional dates (GetObject, HeadObject).
fn reads_conditions<B>(request: &http::Request<B>) -> bool {
    request.method() == http::Method::GET || request.method() == http::Method::HEAD
}

fn covered(signed: &[String], name: &http::HeaderName) -> bool {
    signed.iter().any(|signed| signed == name.as_str())
}

#[cfg(test)]
mod tests {
    use super::{ignore_malformed_range, imf_fixdate, normalize_http_dates, Normalized};

    fn get(headers: &[(&str, &str)]) -> http::Request<()> {
        let mut builder = http::Request::get("/bucket/key");
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(()).expect("request")
    }

    #[test]
    fn a_range_s3s_cannot_parse_is_dropped_and_a_parsed_one_kept() {
        for kept in ["bytes=0-4", "bytes=5-", "bytes=-3", "bytes=1000000-"] {
            let mut request = get(&[("range", kept)]);
            ignore_malformed_range(&mut request, &[]);
            assert_eq!(request.headers()["range"], kept);
        }
        for dropped in ["bytes=abc", "bytes=5-2", "bytes=0-1,3-4", "items=0-1", ""] {
            let mut request = get(&[("range", dropped)]);
            ignore_malformed_range(&mut request, &[]);
            assert!(request.headers().get("range").is_none(), "{dropped}");
        }
    }

    #[test]
    fn a_signed_range_is_left_alone() {
        let mut request = get(&[("range", "bytes=abc")]);
        ignore_malformed_range(&mut request, &["host".into(), "range".into()]);
        assert_eq!(request.headers()["range"], "bytes=abc");
    }

    #[test]
    fn every_http_date_form_becomes_an_imf_fixdate() {
        let fixdate = "Sun, 06 Nov 1994 08:49:37 GMT";
        assert_eq!(imf_fixdate(fixdate), Some(Normalized::AsIs));
        for other in ["Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"] {
            assert_eq!(
                imf_fixdate(other),
                Some(Normalized::Rewritten(http::HeaderValue::from_static(
                    fixdate
                ))),
                "{other}"
            );
        }
        for invalid in ["yesterday", "Sun, 32 Nov 1994 08:49:37 GMT", ""] {
            assert_eq!(imf_fixdate(invalid), None, "{invalid}");
        }
    }

    #[test]
    fn conditional_dates_are_rewritten_or_dropped_unless_signed() {
        let mut request = get(&[
            ("if-modified-since", "Sun Nov  6 08:49:37 1994"),
            ("if-unmodified-since", "not a date"),
        ]);
        normalize_http_dates(&mut request, &[]);
        assert_eq!(
            request.headers()["if-modified-since"],
            "Sun, 06 Nov 1994 08:49:37 GMT"
        );
        assert!(request.headers().get("if-unmodified-since").is_none());
        let mut request = get(&[("if-modified-since", "Sun Nov  6 08:49:37 1994")]);
        normalize_http_dates(&mut request, &["if-modified-since".into()]);
        assert_eq!(
            request.headers()["if-modified-since"],
            "Sun Nov  6 08:49:37 1994"
        );
    }
}
