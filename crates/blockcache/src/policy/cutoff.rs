//! Sequential cut-off: detects sequential streams among many concurrent ones.
//!
//! A stream is a run of requests each starting where the previous one ended, in one
//! direction. New streams enter a small candidate table; after `promotion_count` sequential
//! requests a stream is promoted to the main table of `streams_max` streams, so a storm of
//! random requests (each a one-request "stream") churns only the candidates and never evicts
//! the established sequential streams. Both tables replace their least recently used entry.
//! A request is cut off when it continues a stream and the stream's bytes, this request
//! included, reach the threshold.

use std::collections::VecDeque;

use crate::hash::FastMap;

use crate::config::{SeqCutoffConfig, SeqCutoffPolicy};

#[derive(Clone, Copy, Debug)]
struct Stream {
    bytes: u64,
    requests: u32,
    used: u64,
}

/// Streams keyed by (next expected offset, direction).
type Key = (u64, bool);

/// The detector's state.
#[derive(Clone, Debug, Default)]
pub struct SeqCutoff {
    candidates: FastMap<Key, Stream>,
    /// Candidate keys in insertion order with their stamp; stale pairs are skipped lazily.
    candidate_order: VecDeque<(Key, u64)>,
    streams: FastMap<Key, Stream>,
    tick: u64,
}

/// What the detector says about one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CutoffVerdict {
    /// The request goes around the cache.
    pub cut_off: bool,
    /// The request continued a known stream.
    pub sequential: bool,
}

impl SeqCutoff {
    /// An empty detector.
    pub fn new() -> Self {
        Self::default()
    }

    /// Streams in the main table (for tests and stats).
    pub fn streams(&self) -> usize {
        self.streams.len()
    }

    /// Records a request and says whether it is cut off. `cache_full` matters to the `full`
    /// policy only.
    pub fn check(
        &mut self,
        config: &SeqCutoffConfig,
        offset_bytes: u64,
        length_bytes: u64,
        write: bool,
        cache_full: bool,
    ) -> CutoffVerdict {
        self.tick += 1;
        let tick = self.tick;
        let key = (offset_bytes, write);
        let next = (offset_bytes.saturating_add(length_bytes), write);
        let (sequential, bytes) = if let Some(mut stream) = self.streams.remove(&key) {
            stream.bytes += length_bytes;
            stream.requests = stream.requests.saturating_add(1);
            stream.used = tick;
            self.streams.insert(next, stream);
            (true, stream.bytes)
        } else if let Some(mut stream) = self.candidates.remove(&key) {
            stream.bytes += length_bytes;
            stream.requests = stream.requests.saturating_add(1);
            stream.used = tick;
            if stream.requests >= config.promotion_count {
                self.promote(next, stream, config.streams_max);
            } else {
                self.add_candidate(next, stream, config.streams_max);
            }
            (true, stream.bytes)
        } else {
            let stream = Stream {
                bytes: length_bytes,
                requests: 1,
                used: tick,
            };
            if config.promotion_count <= 1 {
                self.promote(next, stream, config.streams_max);
            } else {
                self.add_candidate(next, stream, config.streams_max);
            }
            (false, length_bytes)
        };
        let applies = match config.policy {
            SeqCutoffPolicy::Always => true,
            SeqCutoffPolicy::Full => cache_full,
            SeqCutoffPolicy::Never => false,
        };
        CutoffVerdict {
            cut_off: applies && sequential && bytes >= config.threshold_bytes,
            sequential,
        }
    }

    fn promote(&mut self, key: Key, stream: Stream, capacity: usize) {
        if self.streams.len() >= capacity {
            let oldest = self
                .streams
                .iter()
                .min_by_key(|(_, s)| s.used)
                .map(|(k, _)| *k);
            if let Some(oldest) = oldest {
                self.streams.remove(&oldest);
            }
        }
        self.streams.insert(key, stream);
    }

    /// Candidates are bounded to four times the main table, oldest first out.
    fn add_candidate(&mut self, key: Key, stream: Stream, streams_max: usize) {
        let capacity = 4 * streams_max.max(16);
        while self.candidates.len() >= capacity {
            let Some((old, stamp)) = self.candidate_order.pop_front() else {
                break;
            };
            if self.candidates.get(&old).is_some_and(|s| s.used == stamp) {
                self.candidates.remove(&old);
            }
        }
        self.candidates.insert(key, stream);
        self.candidate_order.push_back((key, stream.used));
        if self.candidate_order.len() > 8 * capacity {
            let candidates = &self.candidates;
            self.candidate_order
                .retain(|(k, stamp)| candidates.get(k).is_some_and(|s| s.used == *stamp));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(policy: SeqCutoffPolicy) -> SeqCutoffConfig {
        SeqCutoffConfig {
            policy,
            threshold_bytes: 16 << 10,
            promotion_count: 8,
            streams_max: 64,
        }
    }

    #[test]
    fn cuts_off_a_stream_once_it_passes_the_threshold() {
        let config = config(SeqCutoffPolicy::Always);
        let mut detector = SeqCutoff::new();
        let verdicts: Vec<bool> = (0..6)
            .map(|i| {
                detector
                    .check(&config, i * 4096, 4096, false, false)
                    .cut_off
            })
            .collect();
        // 4, 8, 12 KiB stay cached; from 16 KiB on the stream is cut off.
        assert_eq!(verdicts, [false, false, false, true, true, true]);
        // A write at the same place is another stream.
        assert!(!detector.check(&config, 6 * 4096, 4096, true, false).cut_off);
    }

    #[test]
    fn random_requests_do_not_displace_established_streams() {
        let config = config(SeqCutoffPolicy::Always);
        let mut detector = SeqCutoff::new();
        let streams = 32u64;
        let mut next = vec![0u64; streams as usize];
        let mut random = 12345u64;
        for round in 0..20u64 {
            for s in 0..streams {
                let offset = (s << 40) + next[s as usize];
                let verdict = detector.check(&config, offset, 65536, false, false);
                next[s as usize] += 65536;
                if round >= 1 {
                    assert!(verdict.cut_off, "stream {s} round {round}");
                }
                // Interleave 5 random 4 KiB requests per stream request.
                for _ in 0..5 {
                    random = random.wrapping_mul(6364136223846793005).wrapping_add(1);
                    let offset = (random >> 20) / 4096 * 4096;
                    assert!(!detector.check(&config, offset, 4096, false, false).cut_off);
                }
            }
        }
        assert_eq!(detector.streams(), streams as usize);
    }

    #[test]
    fn full_and_never_policies() {
        let mut detector = SeqCutoff::new();
        let full = config(SeqCutoffPolicy::Full);
        for i in 0..8 {
            assert!(
                !detector
                    .check(&full, i * 65536, 65536, false, false)
                    .cut_off
            );
        }
        assert!(detector.check(&full, 8 * 65536, 65536, false, true).cut_off);
        let never = config(SeqCutoffPolicy::Never);
        assert!(
            !detector
                .check(&never, 9 * 65536, 65536, false, true)
                .cut_off
        );
    }
}
