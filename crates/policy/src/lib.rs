//! `policy`: pure cache policies for an SSD cache pool in front of an HDD pool.
//!
//! Owns: the [`Cache`] trait every policy implements, modern evictions (one file each under
//! [`eviction`]), admission filters composable with any eviction ([`admission`]), Belady's offline
//! optimum, Ceph 16.2's cache tier ([`ceph`]), seed 000's predictive hot table ([`hottable`]) and
//! our own combination ([`strata`]), and the selector that follows whichever of them does best
//! in miniature simulations over sampled keys ([`miniature`]). [`catalog`] builds any of them
//! from a command-line name.
//!
//! Invariants:
//! - Pure: no I/O, no clock, no threads, no global RNG. Time arrives in [`Request::now_ms`];
//!   randomness comes from a seed in the config.
//! - Keys are dense ids (`0..n`) assigned by the caller; the per-key arrays grow on demand.
//! - `len() <= capacity()` after every call to [`Cache::on_request`] (Ceph's tier keeps its own
//!   target below the capacity).

pub mod admission;
pub mod catalog;
pub mod ceph;
pub mod eviction;
pub mod hottable;
mod list;
pub mod miniature;
mod sketch;
pub mod strata;

pub use catalog::{build, PolicySpec, POLICY_NAMES};

/// Dense object id, assigned by the caller (the simulator remaps trace ids at load time).
pub type Key = u32;

/// One request as a policy sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Request {
    /// Object requested.
    pub key: Key,
    /// Bytes of the request (the object's size for whole-object traces).
    pub size_bytes: u32,
    /// Bytes of the whole object the request falls in (what a promotion copies: 4 MiB for an
    /// RBD-like object read 4 KiB at a time); 0 when the caller does not know, read as
    /// `size_bytes`. Ceph's tier counts it against its byte targets and promotion throttle.
    pub object_bytes: u32,
    /// Virtual time of the request in milliseconds.
    pub now_ms: u64,
    /// Sequence number of the request in the trace (0-based).
    pub seq: u64,
    /// Whether the request writes.
    pub write: bool,
    /// Sequence number of the next request for the same key, `u64::MAX` if none.
    /// Only offline policies (Belady) read it; online policies must ignore it.
    pub next_seq: u64,
}

/// What happened to one request. The variants say where the data went, so that an executor
/// (or the simulator's cost model) charges every policy the same for the same movement: a miss
/// that keeps the object, in flash or in DRAM, read the whole object from the backing pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Served from the cache's flash tier.
    Hit,
    /// Served from a DRAM buffer that is part of the cache's capacity (`strata`'s probation
    /// buffer): no flash read; a write there is written through to the backing pool.
    BufferHit,
    /// Missed and the object was written into the cache (a promotion: one SSD write).
    Admitted,
    /// Missed; the object was read from the backing pool into a DRAM buffer that is part of
    /// the capacity, without a flash write (it may be written to flash later, reported in
    /// [`Effects::promoted`]). A write request is written through to the backing pool.
    Buffered,
    /// Missed and served by the backing pool without entering the cache.
    Bypassed,
    /// Missed; served by the backing pool as [`Outcome::Bypassed`] is (the request read from
    /// it or written to it), and the object was then copied into the cache's flash tier
    /// *clean*, a write included: Ceph's writeback tier proxies a miss (`do_proxy_read`,
    /// `do_proxy_write`) and then promotes (`maybe_promote`), and `finish_promote` never sets
    /// the dirty flag. The bypass's HDD op plus an admission's HDD read of the object and SSD
    /// write.
    AdmittedAfterProxy,
}

impl Request {
    /// [`Request::object_bytes`], or the request's size when it is not known.
    pub fn object_bytes_or_size(&self) -> u64 {
        if self.object_bytes > 0 {
            u64::from(self.object_bytes)
        } else {
            u64::from(self.size_bytes)
        }
    }
}

impl Outcome {
    /// Whether the request was served from the cache (flash or DRAM buffer).
    pub fn is_hit(self) -> bool {
        matches!(self, Outcome::Hit | Outcome::BufferHit)
    }
}

/// Side effects of one request that an executor must carry out (the simulator counts them).
#[derive(Clone, Debug, Default)]
pub struct Effects {
    /// Objects removed from the cache (a dirty one must be written back first).
    pub evicted: Vec<Key>,
    /// Objects written back to the backing pool and now clean, still cached.
    pub flushed: Vec<Key>,
    /// Objects written into the cache's flash tier during this request other than the requested
    /// object's own admission: promotions from a DRAM buffer that is part of the capacity
    /// (`strata`). Each is one cache (SSD) write.
    pub promoted: Vec<Key>,
}

impl Effects {
    /// Empties both lists, keeping their allocations.
    pub fn clear(&mut self) {
        self.evicted.clear();
        self.flushed.clear();
        self.promoted.clear();
    }
}

/// A cache policy: decides hits, admissions and evictions. Pure.
pub trait Cache: Send {
    /// Handles one request; evictions and flushes go to `effects`.
    fn on_request(&mut self, request: &Request, effects: &mut Effects) -> Outcome;
    /// Handles `requests` in order, exactly as one [`Cache::on_request`] each, appending one
    /// outcome a request to `outcomes`; the effects of all of them accumulate in `effects`.
    /// One dynamic call for a whole batch: the loop inside is compiled per policy, so an owner
    /// replaying the same requests on many policies (the miniature-simulation selector) pays
    /// no dynamic dispatch a request.
    fn on_requests(
        &mut self,
        requests: &[Request],
        effects: &mut Effects,
        outcomes: &mut Vec<Outcome>,
    ) {
        for request in requests {
            let outcome = self.on_request(request, effects);
            outcomes.push(outcome);
        }
    }
    /// Objects cached now.
    fn len(&self) -> usize;
    /// Whether no object is cached.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Maximum objects cached.
    fn capacity(&self) -> usize;
    /// Whether `key` is cached.
    fn contains(&self, key: Key) -> bool;
    /// Display name including the main parameters.
    fn name(&self) -> String;
    /// The policy's own counters worth reporting beside the simulator's (name, value); none by
    /// default. Ceph's tier reports its forced evictions here, which are not Ceph's behaviour.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
    /// Takes over `request.key`, an object the executor already holds in flash (a switch
    /// between policies hands the old one's contents to the new one, oldest first), as the most
    /// recently requested object. Nothing is read or written: the caller reports nothing of
    /// it, and an object the policy drops again is in `effects.evicted`. By default one request
    /// through [`Cache::on_request`]; a policy whose misses enter a DRAM buffer places it in
    /// flash directly (`strata`).
    fn hand_over(&mut self, request: &Request, effects: &mut Effects) {
        self.on_request(request, effects);
    }
    /// The cache writes (flash admissions and promotions) still allowed from now on, set
    /// before each request by an owner that keeps a write budget for this policy (the
    /// miniature-simulation selector); ignored by policies without a budgeted admission
    /// ([`admission::Budget`], `strata`).
    fn allow_writes(&mut self, _remaining: f64) {}
    /// Drops `key` without a write-back decision (the caller knows the object is not where the
    /// policy thinks: a copied policy claims an object the executor never held); returns
    /// whether it was cached. By default the policy cannot and returns false.
    fn invalidate(&mut self, _key: Key) -> bool {
        false
    }
    /// Changes how many objects the policy may hold (an executor whose capacity is a byte
    /// target and whose objects are cached in part recomputes it as their sizes change). A
    /// smaller capacity takes effect at the next admission, which evicts down to it. By
    /// default the policy keeps its capacity (its own targets decide, as Ceph's tier's do).
    fn resize(&mut self, _capacity_objects: usize) {}
    /// A copy of the policy with all its state, for policies that can be copied (the
    /// miniature-simulation selector adopts a full-scale miniature this way).
    fn clone_box(&self) -> Option<Box<dyn Cache>> {
        None
    }
}

/// Errors of this crate: bad names or parameters.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum PolicyError {
    /// The policy name is not one of [`POLICY_NAMES`].
    #[error("unknown policy `{0}` (known: {known})", known = POLICY_NAMES.join(", "))]
    UnknownPolicy(String),
    /// A parameter is out of range.
    #[error("invalid parameter {name}: {reason}")]
    InvalidParameter {
        /// Parameter name.
        name: &'static str,
        /// Why it is rejected.
        reason: String,
    },
}

/// A deterministic 64-bit mixer (splitmix64 finaliser), the crate's only hash.
#[inline]
pub fn mix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A small seeded generator (splitmix64 stream) for policies that draw random numbers.
#[derive(Clone, Debug)]
pub struct SeededRng {
    state: u64,
}

impl SeededRng {
    /// A generator whose whole stream is fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        SeededRng { state: seed }
    }
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix64(self.state)
    }
    /// Uniform in `[0, 1)`.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}
