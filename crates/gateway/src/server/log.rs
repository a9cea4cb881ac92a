//! Refused requests in the log, without letting clients flood it (issue 43: s3s wrote every
//! refusal at ERROR, some twice, so any unauthenticated client could fill the disk).
//!
//! A client error (4xx) is a debug line: it is the client's business, and visible with
//! `RUST_LOG=gateway=debug`. A server error (5xx) is a warning, at most
//! [`WARNINGS_PER_WINDOW_MAX`] per [`WINDOW_MS`]; the rest are counted and the count is said
//! with the next warning that passes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Length of a rate-limiting window, in ms.
const WINDOW_MS: u64 = 60_000;
/// Warnings written per window.
const WARNINGS_PER_WINDOW_MAX: u64 = 10;

/// The front's log of refused requests.
pub(super) struct RefusalLog {
    started: std::time::Instant,
    /// (start of the current window in ms, warnings written in it).
    window: Mutex<(u64, u64)>,
    /// Warnings left out since the last one written.
    suppressed: AtomicU64,
}

impl RefusalLog {
    pub(super) fn new() -> Self {
        Self {
            started: std::time::Instant::now(),
            window: Mutex::new((0, 0)),
            suppressed: AtomicU64::new(0),
        }
    }

    /// Logs the answer `status` to `method path`, if it is a refusal.
    pub(super) fn record(&self, method: &http::Method, path: &str, status: http::StatusCode) {
        if status.is_client_error() {
            tracing::debug!(%method, path, status = status.as_u16(), "request refused");
        } else if status.is_server_error() {
            let now_ms = self.started.elapsed().as_millis() as u64;
            if self.admit_warning(now_ms) {
                let suppressed = self.suppressed.swap(0, Ordering::Relaxed);
                tracing::warn!(
                    %method,
                    path,
                    status = status.as_u16(),
                    suppressed,
                    "request failed (suppressed: failures not logged since the last line)"
                );
            } else {
                self.suppressed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Whether a warning at `now_ms` fits in its window.
    fn admit_warning(&self, now_ms: u64) -> bool {
        let mut window = self.window.lock().unwrap_or_else(|e| e.into_inner());
        admit(&mut window, now_ms)
    }
}

/// The rate limit itself (pure): `window` is (window start ms, warnings in it).
fn admit(window: &mut (u64, u64), now_ms: u64) -> bool {
    if now_ms.saturating_sub(window.0) >= WINDOW_MS {
        *window = (now_ms, 0);
    }
    if window.1 < WARNINGS_PER_WINDOW_MAX {
        window.1 += 1;
        true
    } else {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_the_maximum_per_window() {
        let mut window = (0, 0);
        let admitted = (0..100).filter(|&i| admit(&mut window, i * 10)).count();
        assert_eq!(admitted as u64, WARNINGS_PER_WINDOW_MAX);
        assert!(admit(&mut window, WINDOW_MS + 1), "a new window");
    }
}
