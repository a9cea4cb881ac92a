//! The candidates `strata`'s shadows try and the shadow caches that replay them.

use super::{Strata, StrataConfig};
use crate::eviction::{Arc, Eviction, Fifo, Lru, Sieve, TwoQ, WTinyLfu};
use crate::{Cache, Effects, Key, Request};

/// A policy a shadow cache runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Candidate {
    /// Our own queues with this buffer share and promotion threshold (an S3-FIFO shape): the live
    /// cache copies the shape exactly.
    Shape {
        /// Buffer share of the capacity.
        small: f64,
        /// Hits in the buffer needed to be promoted.
        threshold: u8,
        /// Whether the frequency gate is on: an object leaving the buffer unpromoted is still
        /// written to flash when its long-term frequency (a TinyLFU-style sketch) beats that of
        /// main's next victim.
        gate: bool,
        /// Whether the buffer's share adapts request by request, as ARC's recency target does
        /// (`small` is then only the starting share; see [`super::StrataConfig::split`]).
        split: bool,
    },
    /// Another policy, followed by membership: the live cache promotes and keeps what it holds.
    Follow(Foreign),
}

/// The other policies a shadow can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Foreign {
    /// Admit-all LRU.
    Lru,
    /// ARC.
    Arc,
    /// 2Q.
    TwoQ,
    /// W-TinyLFU (1% window).
    WTinyLfu,
    /// SIEVE.
    Sieve,
    /// FIFO.
    Fifo,
}

/// Candidate shapes the shadows try: our queues at several (buffer share, threshold), then the
/// recency- and frequency-style policies followed by membership.
pub const CANDIDATES: &[Candidate] = &[
    Candidate::Shape {
        small: 0.01,
        threshold: 1,
        gate: false,
        split: false,
    },
    Candidate::Shape {
        small: 0.05,
        threshold: 1,
        gate: false,
        split: false,
    },
    Candidate::Shape {
        small: 0.10,
        threshold: 1,
        gate: false,
        split: false,
    },
    Candidate::Shape {
        small: 0.25,
        threshold: 1,
        gate: false,
        split: false,
    },
    Candidate::Shape {
        small: 0.40,
        threshold: 1,
        gate: false,
        split: false,
    },
    Candidate::Shape {
        small: 0.01,
        threshold: 2,
        gate: false,
        split: false,
    },
    Candidate::Shape {
        small: 0.05,
        threshold: 2,
        gate: false,
        split: false,
    },
    Candidate::Shape {
        small: 0.10,
        threshold: 2,
        gate: false,
        split: false,
    },
    Candidate::Shape {
        small: 0.25,
        threshold: 2,
        gate: false,
        split: false,
    },
    Candidate::Shape {
        small: 0.40,
        threshold: 2,
        gate: false,
        split: false,
    },
    Candidate::Shape {
        small: 0.01,
        threshold: 1,
        gate: true,
        split: false,
    },
    Candidate::Shape {
        small: 0.10,
        threshold: 1,
        gate: false,
        split: true,
    },
    Candidate::Shape {
        small: 0.10,
        threshold: 2,
        gate: false,
        split: true,
    },
    Candidate::Shape {
        small: 0.01,
        threshold: 0,
        gate: false,
        split: false,
    },
    Candidate::Shape {
        small: 0.10,
        threshold: 0,
        gate: false,
        split: false,
    },
    Candidate::Shape {
        small: 0.25,
        threshold: 0,
        gate: false,
        split: false,
    },
    // Tiny caches only (`StrataConfig::tiny`): buffers of 80% of the capacity.
    Candidate::Shape {
        small: 0.80,
        threshold: 1,
        gate: false,
        split: false,
    },
    Candidate::Shape {
        small: 0.80,
        threshold: 2,
        gate: false,
        split: false,
    },
    Candidate::Follow(Foreign::Lru),
    Candidate::Follow(Foreign::Arc),
    Candidate::Follow(Foreign::TwoQ),
    Candidate::Follow(Foreign::WTinyLfu),
    Candidate::Follow(Foreign::Sieve),
    Candidate::Follow(Foreign::Fifo),
];

/// One shadow cache (ids only).
#[derive(Clone, Debug)]
pub(super) enum Shadow {
    /// One of our shapes: a non-adaptive copy of the live algorithm without a write budget, so
    /// that its misses are exactly what the live cache would have in that shape.
    Queues(Box<Strata>, Effects),
    Lru(Lru),
    Arc(Arc),
    TwoQ(TwoQ),
    WTinyLfu(WTinyLfu),
    Sieve(Sieve),
    Fifo(Fifo),
}

impl Shadow {
    pub(super) fn new(
        candidate: Candidate,
        capacity: usize,
        key_space: usize,
        live: &StrataConfig,
    ) -> Shadow {
        match candidate {
            Candidate::Shape {
                small,
                threshold,
                gate,
                split,
            } => {
                let mut config = StrataConfig::fixed_shape(live, capacity, small, threshold, gate);
                config.split = live.split || split;
                config.split_max = live.split_max;
                config.split_min = live.split_min;
                config.main_ghost_admit = live.main_ghost_admit;
                Shadow::Queues(Box::new(Strata::new(config, key_space)), Effects::default())
            }
            Candidate::Follow(Foreign::Lru) => Shadow::Lru(Lru::new(capacity, key_space)),
            Candidate::Follow(Foreign::Arc) => Shadow::Arc(Arc::new(capacity, key_space)),
            Candidate::Follow(Foreign::TwoQ) => Shadow::TwoQ(TwoQ::new(capacity, key_space)),
            Candidate::Follow(Foreign::WTinyLfu) => {
                Shadow::WTinyLfu(WTinyLfu::new(capacity, key_space, Default::default()))
            }
            Candidate::Follow(Foreign::Sieve) => Shadow::Sieve(Sieve::new(capacity, key_space)),
            Candidate::Follow(Foreign::Fifo) => Shadow::Fifo(Fifo::new(capacity, key_space)),
        }
    }

    fn eviction(&mut self) -> Option<&mut dyn Eviction> {
        Some(match self {
            Shadow::Queues(..) => return None,
            Shadow::Lru(e) => e,
            Shadow::Arc(e) => e,
            Shadow::TwoQ(e) => e,
            Shadow::WTinyLfu(e) => e,
            Shadow::Sieve(e) => e,
            Shadow::Fifo(e) => e,
        })
    }

    /// Caps the flash writes of our shapes' shadows at `writes` so far (see
    /// `StrataConfig::shadow_budget`).
    pub(super) fn allow_writes(&mut self, writes: f64) {
        if let Shadow::Queues(e, _) = self {
            e.write_allowance = writes;
        }
    }

    /// The buffer's target share of the capacity, for our shapes.
    pub(super) fn buffer_share(&self) -> Option<f64> {
        match self {
            Shadow::Queues(e, _) => Some(e.small_target as f64 / e.config.capacity as f64),
            _ => None,
        }
    }

    pub(super) fn contains(&self, key: Key) -> bool {
        match self {
            Shadow::Queues(e, _) => e.contains(key),
            Shadow::Lru(e) => e.contains(key),
            Shadow::Arc(e) => e.contains(key),
            Shadow::TwoQ(e) => e.contains(key),
            Shadow::WTinyLfu(e) => e.contains(key),
            Shadow::Sieve(e) => e.contains(key),
            Shadow::Fifo(e) => e.contains(key),
        }
    }

    /// Replays one request; returns whether it hit. Evicted keys go to `evicted`.
    pub(super) fn replay(&mut self, request: &Request, evicted: &mut Vec<Key>) -> bool {
        if let Shadow::Queues(strata, effects) = self {
            effects.clear();
            return strata.on_request(request, effects).is_hit();
        }
        let Some(eviction) = self.eviction() else {
            return false;
        };
        if eviction.contains(request.key) {
            eviction.on_hit(request, evicted);
            true
        } else {
            eviction.insert(request, evicted);
            false
        }
    }
}
