//! Admission filters: on a miss, whether the object is written into the cache at all. Each one
//! composes with any [`Eviction`] through [`Filtered`]. Filtering is how an SSD tier keeps its
//! write budget: every admission is a flash write.

use crate::eviction::Eviction;
use crate::sketch::{Bloom, CountingBloom};
use crate::{Cache, Effects, Key, Outcome, Request, SeededRng};

/// Decides whether a missed object enters the cache. Pure.
pub trait Admission: Send {
    /// Observes every request (hits and misses) before any decision.
    fn record(&mut self, request: &Request);
    /// Whether to admit the missed object; `victim` is what the eviction would evict, if known.
    fn admit(&mut self, request: &Request, victim: Option<Key>) -> bool;
    /// Display name.
    fn name(&self) -> String;
    /// The writes still allowed from now on, for a filter that keeps a write budget
    /// ([`Budget`]).
    fn allow_writes(&mut self, _remaining: f64) {}
}

/// Admits every miss (the classic cache).
#[derive(Clone, Copy, Debug, Default)]
pub struct AdmitAll;

impl Admission for AdmitAll {
    fn record(&mut self, _request: &Request) {}
    fn admit(&mut self, _request: &Request, _victim: Option<Key>) -> bool {
        true
    }
    fn name(&self) -> String {
        String::new()
    }
}

/// Admits an object on its second miss within a window: an exact bitmap over dense keys, cleared
/// every `window_requests` requests (two generations, so the memory spans 1-2 windows).
#[derive(Clone, Debug)]
pub struct SecondHit {
    current: Vec<u64>,
    previous: Vec<u64>,
    window_requests: u64,
    seen: u64,
}

impl SecondHit {
    /// A filter remembering first misses for `window_requests` requests (> 0).
    pub fn new(window_requests: u64) -> Self {
        assert!(window_requests > 0);
        SecondHit {
            current: Vec::new(),
            previous: Vec::new(),
            window_requests,
            seen: 0,
        }
    }

    fn test(bits: &[u64], key: Key) -> bool {
        bits.get(key as usize / 64)
            .is_some_and(|word| word & (1 << (key % 64)) != 0)
    }
}

impl Admission for SecondHit {
    fn record(&mut self, _request: &Request) {
        self.seen += 1;
        if self.seen >= self.window_requests {
            self.seen = 0;
            self.previous = std::mem::take(&mut self.current);
        }
    }
    fn admit(&mut self, request: &Request, _victim: Option<Key>) -> bool {
        let key = request.key;
        if Self::test(&self.current, key) || Self::test(&self.previous, key) {
            return true;
        }
        let word = key as usize / 64;
        if word >= self.current.len() {
            self.current.resize(word + 1, 0);
        }
        self.current[word] |= 1 << (key % 64);
        false
    }
    fn name(&self) -> String {
        "+second-hit".into()
    }
}

/// Second-hit admission through two rotating bloom filters (for key spaces too large for a
/// bitmap): admits if the key is in either generation, otherwise records it.
#[derive(Clone, Debug)]
pub struct BloomAdmission {
    current: Bloom,
    previous: Bloom,
    entries: usize,
    fpp: f64,
    generation: u64,
    key_space: usize,
}

impl BloomAdmission {
    /// Filters sized for `entries` distinct keys per generation at false-positive rate `fpp`,
    /// for a key space of about `key_space` keys (it sizes memory only; more keys still work).
    pub fn new(entries: usize, fpp: f64, key_space: usize) -> Self {
        BloomAdmission {
            current: Bloom::new(entries, fpp, 1, key_space),
            previous: Bloom::new(entries, fpp, 1, key_space),
            entries,
            fpp,
            generation: 1,
            key_space,
        }
    }
}

impl Admission for BloomAdmission {
    fn record(&mut self, _request: &Request) {}
    fn admit(&mut self, request: &Request, _victim: Option<Key>) -> bool {
        let key = request.key as u64;
        if self.current.contains(key) || self.previous.contains(key) {
            return true;
        }
        self.current.insert(key);
        if self.current.unique_inserts() as usize >= self.entries {
            self.generation += 1;
            let fresh = Bloom::new(self.entries, self.fpp, 1, self.key_space);
            self.previous = std::mem::replace(&mut self.current, fresh);
        }
        false
    }
    fn name(&self) -> String {
        "+bloom".into()
    }
}

/// Admits each miss with a fixed probability, from a seeded stream.
#[derive(Clone, Debug)]
pub struct Probabilistic {
    probability: f64,
    rng: SeededRng,
}

impl Probabilistic {
    /// Admits with `probability` in `[0, 1]`; `seed` fixes the stream.
    pub fn new(probability: f64, seed: u64) -> Self {
        Probabilistic {
            probability: probability.clamp(0.0, 1.0),
            rng: SeededRng::new(seed),
        }
    }
}

impl Admission for Probabilistic {
    fn record(&mut self, _request: &Request) {}
    fn admit(&mut self, _request: &Request, _victim: Option<Key>) -> bool {
        self.rng.next_f64() < self.probability
    }
    fn name(&self) -> String {
        format!("+prob{}", self.probability)
    }
}

/// TinyLFU admission: a counting sketch of all requests, halved every `10 x capacity` requests;
/// admits when the candidate's estimate beats the eviction victim's (or when there is no victim).
#[derive(Clone, Debug)]
pub struct TinyLfu {
    sketch: CountingBloom,
    requests: usize,
    reset_interval: usize,
}

impl TinyLfu {
    /// A sketch for a cache of `capacity` objects over about `key_space` keys (it sizes memory
    /// only; more keys still work).
    pub fn new(capacity: usize, key_space: usize) -> Self {
        TinyLfu {
            sketch: CountingBloom::new(capacity.max(16), 0.01, key_space),
            requests: 0,
            reset_interval: 10 * capacity.max(16),
        }
    }
}

impl Admission for TinyLfu {
    fn record(&mut self, request: &Request) {
        self.sketch.add(request.key as u64);
        self.requests += 1;
        if self.requests >= self.reset_interval {
            self.requests = 0;
            self.sketch.decay();
        }
    }
    fn admit(&mut self, request: &Request, victim: Option<Key>) -> bool {
        match victim {
            None => self.sketch.estimate(request.key as u64) > 1,
            Some(victim) => {
                self.sketch.estimate(request.key as u64) > self.sketch.estimate(victim as u64)
            }
        }
    }
    fn name(&self) -> String {
        "+tinylfu".into()
    }
}

/// The flash-write budget as an admission filter, composable with any eviction: admits a miss
/// on its second miss within a window (as [`SecondHit`]; one-time objects are never written)
/// and only while its owner allows at least one more write ([`Admission::allow_writes`]: the
/// miniature-simulation selector allows `budget` x admit-all LRU's estimated writes less those
/// made). Without an owner the allowance is unlimited.
#[derive(Clone, Debug)]
pub struct Budget {
    second_hit: SecondHit,
    /// Writes still allowed.
    allowance: f64,
}

impl Budget {
    /// A budget remembering first misses for `window_requests` requests (> 0).
    pub fn new(window_requests: u64) -> Self {
        Budget {
            second_hit: SecondHit::new(window_requests),
            allowance: f64::INFINITY,
        }
    }
}

impl Admission for Budget {
    fn record(&mut self, request: &Request) {
        self.second_hit.record(request);
    }
    fn admit(&mut self, request: &Request, victim: Option<Key>) -> bool {
        let admit = self.second_hit.admit(request, victim) && self.allowance >= 1.0;
        if admit {
            self.allowance -= 1.0;
        }
        admit
    }
    fn name(&self) -> String {
        "+budget".into()
    }
    fn allow_writes(&mut self, remaining: f64) {
        self.allowance = remaining;
    }
}

/// Any eviction with any admission filter: a complete [`Cache`].
#[derive(Clone, Debug)]
pub struct Filtered<E, A> {
    /// The eviction policy.
    pub eviction: E,
    /// The admission filter consulted on misses.
    pub admission: A,
}

impl<E: Eviction, A: Admission> Filtered<E, A> {
    /// Composes `eviction` with `admission`.
    pub fn new(eviction: E, admission: A) -> Self {
        Filtered {
            eviction,
            admission,
        }
    }
}

impl<E: Eviction + Clone + 'static, A: Admission + Clone + 'static> Cache for Filtered<E, A> {
    #[inline]
    fn on_request(&mut self, request: &Request, effects: &mut Effects) -> Outcome {
        self.admission.record(request);
        if self.eviction.contains(request.key) {
            self.eviction.on_hit(request, &mut effects.evicted);
            return Outcome::Hit;
        }
        let victim = self.eviction.victim();
        if self.admission.admit(request, victim) {
            self.eviction.insert(request, &mut effects.evicted);
            Outcome::Admitted
        } else {
            Outcome::Bypassed
        }
    }
    fn len(&self) -> usize {
        self.eviction.len()
    }
    fn capacity(&self) -> usize {
        self.eviction.capacity()
    }
    fn contains(&self, key: Key) -> bool {
        self.eviction.contains(key)
    }
    fn name(&self) -> String {
        format!("{}{}", self.eviction.name(), self.admission.name())
    }
    fn allow_writes(&mut self, remaining: f64) {
        self.admission.allow_writes(remaining);
    }
    fn invalidate(&mut self, key: Key) -> bool {
        self.eviction.remove(key)
    }
    fn clone_box(&self) -> Option<Box<dyn Cache>> {
        Some(Box::new(self.clone()))
    }
}
