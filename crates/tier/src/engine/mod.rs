//! One cache pool serving one base pool: the routing of each client op (cache, promote,
//! proxy), the per-object serialization, the in-memory mirror of the cache pool's object
//! states, and the admission policy.
//!
//! Every client op holds its object's lock (a slot of a hashed table) from its routing
//! decision to its last write, so the tier's view of an object (cached or not, its block map,
//! its dirty state) never changes under an op. Background work (the agent's flushes, background
//! promotions) reads the slow pool without the lock and takes it only to read the cache and to
//! record its result, checking the object did not change meanwhile. The in-memory index mirrors
//! the state xattr of every cache object; it is rebuilt from the cache pool when the tier opens.

mod data;
mod movement;

use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use policy::ceph::{CephTier, CephTierConfig, TemperatureEviction};
use policy::hottable::{HotTable, HotTableConfig, Period};
use policy::{Cache, Effects, Key, Outcome, Request};
use rados::{IoCtx, ListCursor, RadosError};
use worker::Clock;

use crate::config::{AdmissionFamily, CacheMode, HitSetType, TierConfig, TierSettings};
use crate::error::Result;
use crate::state::{ObjectState, OBJECT_PREFIX, STATE_XATTR};
use crate::stats::{Counters, TierStats};

const LOCK_SLOTS: usize = 1024;

/// Nanoseconds since the Unix epoch, for the logical mtime of writes (injected).
pub type WallClock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// The wall clock of the system.
pub fn system_wall_clock() -> WallClock {
    Arc::new(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    })
}

/// Where one op goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// The object is in the cache: the op runs there.
    Cache,
    /// Copy the object in (what the op needs of it), then run the op there.
    Promote,
    /// Run the op on the base pool, then copy the object in in the background.
    ProxyThenPromote,
    /// Run the op on the base pool.
    Proxy,
}

struct PolicyState {
    cache: Box<dyn Cache>,
    keys: HashMap<String, Key>,
    names: Vec<String>,
    effects: Effects,
    seq: u64,
    /// The object size the policy is told (`tier_object_bytes`): Ceph's promotion throttle
    /// counts a promoted object's whole size, and the simulator gives the policy each
    /// object's size too.
    object_bytes: u32,
}

impl PolicyState {
    /// The policy's request for one op on `name` (its key assigned on first sight).
    fn request(&mut self, name: &str, size_bytes: u64, write: bool, now_ms: u64) -> Request {
        let request = Request {
            key: self.key(name),
            size_bytes: size_bytes.clamp(1, u64::from(u32::MAX)) as u32,
            object_bytes: self.object_bytes,
            now_ms,
            seq: self.seq,
            write,
            next_seq: u64::MAX,
        };
        self.seq += 1;
        request
    }

    /// Gives the policy an object the cache already holds.
    fn hand_over(&mut self, name: &str, now_ms: u64) {
        let request = self.request(name, 4096, false, now_ms);
        self.effects.clear();
        self.cache.hand_over(&request, &mut self.effects);
    }

    fn key(&mut self, name: &str) -> Key {
        if let Some(key) = self.keys.get(name) {
            return *key;
        }
        let key = self.names.len() as Key;
        self.names.push(name.to_string());
        self.keys.insert(name.to_string(), key);
        key
    }
}

/// Work the agent has been asked to do.
#[derive(Default)]
pub(crate) struct Queues {
    pub(crate) evict: VecDeque<String>,
    pub(crate) flush: VecDeque<String>,
    pub(crate) flush_evict_all: bool,
}

/// A cache pool over a base pool.
pub struct Tier {
    config: RwLock<TierConfig>,
    pub(crate) base: Arc<dyn IoCtx>,
    pub(crate) cache: Arc<dyn IoCtx>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) wall: WallClock,
    locks: Vec<tokio::sync::Mutex<()>>,
    /// Per lock slot: whether background work (the agent, a background promotion) holds it,
    /// so a client op that waits for it can count the wait as one on the agent.
    background_holds: Vec<std::sync::atomic::AtomicBool>,
    pub(crate) index: Mutex<HashMap<String, ObjectState>>,
    /// Dirty objects in `index`, kept with it (the write path checks the dirty ratio).
    dirty_count: AtomicU64,
    policy: Mutex<PolicyState>,
    pub(crate) queues: Mutex<Queues>,
    pub(crate) promotions_running: AtomicU32,
    /// Objects whose background flush is writing the base pool now (without their lock).
    pub(crate) flushing: Mutex<std::collections::HashSet<String>>,
    pub(crate) counters: Counters,
    pub(crate) agent_wake: Arc<tokio::sync::Notify>,
    /// Until when (the clock's ms) the cache pool counts as full after it refused a write for
    /// space: new objects go around it meanwhile instead of each trying it again.
    cache_refused_until_ms: AtomicU64,
    /// The policy's capacity in objects now ([`TierSettings::capacity_objects_holding`]),
    /// recomputed by the agent from what the cache holds.
    capacity_objects: AtomicUsize,
    /// Bytes of the blocks the cache held when the agent last looked.
    cached_bytes: AtomicU64,
}

/// How long a cache pool that refused a write for space counts as full before a new object
/// tries it again.
const CACHE_REFUSED_RETRY_MS: u64 = 1000;

/// Whether an error is the cache pool refusing a write for space, or the cache being over
/// its byte target: either way the op goes around the cache.
pub(crate) fn is_no_space(error: &crate::error::TierError) -> bool {
    matches!(
        error,
        crate::error::TierError::Rados(RadosError::NoSpace(_))
            | crate::error::TierError::OverTarget { .. }
    )
}

fn build_policy(settings: &TierSettings, pg_count: u32, capacity: usize) -> Box<dyn Cache> {
    match settings.tier_admission {
        AdmissionFamily::Ceph | AdmissionFamily::CephCorrected => {
            let mut config = CephTierConfig::seed003(capacity);
            config.capacity = capacity;
            config.target_max_objects = settings.target_max_objects as usize;
            config.target_max_bytes = settings.target_max_bytes;
            if config.target_max_objects == 0 && config.target_max_bytes == 0 {
                config.target_max_objects = capacity;
            }
            config.pg_count = pg_count.max(1);
            config.mode = policy::ceph::CacheMode::Writeback;
            config.hit_set = match settings.hit_set_type {
                HitSetType::Bloom => policy::ceph::HitSetKind::Bloom {
                    fpp: settings.hit_set_fpp,
                },
                _ => policy::ceph::HitSetKind::Explicit,
            };
            config.hit_set_count = settings.hit_set_count;
            config.hit_set_period_s = settings.hit_set_period;
            config.min_read_recency_for_promote = settings.min_read_recency_for_promote;
            config.min_write_recency_for_promote = settings.min_write_recency_for_promote;
            config.cache_target_dirty_ratio = settings.cache_target_dirty_ratio;
            config.cache_target_dirty_high_ratio = settings.cache_target_dirty_high_ratio;
            config.cache_target_full_ratio = settings.cache_target_full_ratio;
            config.cache_min_flush_age_s = settings.cache_min_flush_age;
            config.cache_min_evict_age_s = settings.cache_min_evict_age;
            config.osd_count = 3;
            if settings.tier_admission == AdmissionFamily::CephCorrected {
                config.temperature = TemperatureEviction::Corrected;
            }
            Box::new(CephTier::new(config, 1024))
        }
        AdmissionFamily::Predictive => {
            let config = HotTableConfig {
                capacity,
                period: Period::Millis(settings.predictive_period.max(1) * 1000),
                smoothing: settings.predictive_smoothing,
                threshold: settings.predictive_threshold,
            };
            Box::new(HotTable::new(config, 1024))
        }
    }
}

/// The admission policy a tier with `settings` runs (its capacity from the settings), for
/// running the same code outside the tier: `strata bench tier`'s replay gives it to the
/// simulator to compare the live hit ratio with the simulated one.
pub fn policy_for(settings: &TierSettings, pg_count: u32) -> Box<dyn Cache> {
    build_policy(settings, pg_count, settings.capacity_objects())
}

/// The object size a tier with `settings` tells its policy.
fn policy_object_bytes(settings: &TierSettings) -> u32 {
    settings.tier_object_bytes.clamp(1, u64::from(u32::MAX)) as u32
}

impl Tier {
    /// Opens the tier of `config` over `base` and `cache`, loading the state of every object
    /// the cache pool holds (a restart finds its dirty objects there).
    pub async fn open(
        config: TierConfig,
        base: Arc<dyn IoCtx>,
        cache: Arc<dyn IoCtx>,
        clock: Arc<dyn Clock>,
        wall: WallClock,
    ) -> Result<Arc<Tier>> {
        let capacity = config.settings.capacity_objects();
        let policy = build_policy(&config.settings, cache.pool().pg_num, capacity);
        let object_bytes = policy_object_bytes(&config.settings);
        let tier = Arc::new(Tier {
            config: RwLock::new(config),
            base,
            cache,
            clock,
            wall,
            locks: (0..LOCK_SLOTS)
                .map(|_| tokio::sync::Mutex::new(()))
                .collect(),
            background_holds: (0..LOCK_SLOTS)
                .map(|_| std::sync::atomic::AtomicBool::new(false))
                .collect(),
            index: Mutex::new(HashMap::new()),
            dirty_count: AtomicU64::new(0),
            policy: Mutex::new(PolicyState {
                cache: policy,
                keys: HashMap::new(),
                names: Vec::new(),
                effects: Effects::default(),
                seq: 0,
                object_bytes,
            }),
            queues: Mutex::new(Queues::default()),
            promotions_running: AtomicU32::new(0),
            flushing: Mutex::new(std::collections::HashSet::new()),
            counters: Counters::default(),
            agent_wake: Arc::new(tokio::sync::Notify::new()),
            cache_refused_until_ms: AtomicU64::new(0),
            capacity_objects: AtomicUsize::new(capacity),
            cached_bytes: AtomicU64::new(0),
        });
        tier.load_index().await?;
        tier.refresh_capacity();
        Ok(tier)
    }

    async fn load_index(&self) -> Result<()> {
        let mut cursor = ListCursor::start();
        let mut loaded = Vec::new();
        loop {
            let page = self.cache.list(&cursor, 1000).await?;
            for name in page.objects {
                if name.starts_with(OBJECT_PREFIX) {
                    continue;
                }
                match self.cache.get_xattr(&name, STATE_XATTR).await {
                    Ok(bytes) => loaded.push((name.clone(), ObjectState::decode(&name, &bytes)?)),
                    Err(RadosError::NotFound(_)) => {
                        tracing::warn!(object = %name, "cache pool object without tier state: ignored")
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            match page.next {
                Some(next) => cursor = next,
                None => break,
            }
        }
        let now_ms = self.clock.now_ms();
        let mut policy = self.policy.lock().expect("policy lock");
        let mut index = self.index.lock().expect("index lock");
        for (name, state) in loaded {
            policy.hand_over(&name, now_ms);
            if state.is_dirty() {
                self.dirty_count.fetch_add(1, Ordering::SeqCst);
            }
            index.insert(name, state);
        }
        Ok(())
    }

    /// The configuration.
    pub fn config(&self) -> TierConfig {
        self.config.read().expect("config lock").clone()
    }

    /// Replaces the configuration (mode and settings; a new admission family or capacity
    /// rebuilds the policy, which then learns again).
    pub fn reconfigure(&self, config: TierConfig) {
        let rebuild = {
            let old = self.config.read().expect("config lock");
            old.settings != config.settings
        };
        if rebuild {
            let (objects, bytes) = self.cached_objects_and_bytes();
            let capacity = config.settings.capacity_objects_holding(objects, bytes);
            self.capacity_objects.store(capacity, Ordering::Release);
            self.cached_bytes.store(bytes, Ordering::Release);
            let mut policy = self.policy.lock().expect("policy lock");
            policy.cache = build_policy(&config.settings, self.cache.pool().pg_num, capacity);
            policy.object_bytes = policy_object_bytes(&config.settings);
            let now_ms = self.clock.now_ms();
            let names: Vec<String> = self
                .index
                .lock()
                .expect("index lock")
                .keys()
                .cloned()
                .collect();
            for name in names {
                policy.hand_over(&name, now_ms);
            }
        }
        *self.config.write().expect("config lock") = config;
        self.agent_wake.notify_one();
    }

    pub(crate) fn mode(&self) -> CacheMode {
        self.config.read().expect("config lock").mode
    }

    pub(crate) fn settings(&self) -> TierSettings {
        self.config.read().expect("config lock").settings.clone()
    }

    fn slot(name: &str) -> usize {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        name.hash(&mut hasher);
        (hasher.finish() % LOCK_SLOTS as u64) as usize
    }

    /// Takes an object's lock for a client op. A wait on background work that holds it is
    /// counted (`agent_waits`, the longest, and those over 100 ms).
    pub(crate) async fn lock(&self, name: &str) -> ObjectGuard<'_> {
        let slot = Self::slot(name);
        if let Ok(guard) = self.locks[slot].try_lock() {
            return ObjectGuard {
                _guard: guard,
                background: None,
            };
        }
        let behind_background = self.background_holds[slot].load(Ordering::SeqCst);
        let started = std::time::Instant::now();
        let guard = self.locks[slot].lock().await;
        if behind_background {
            let waited_us = started.elapsed().as_micros() as u64;
            Counters::bump(&self.counters.agent_waits);
            self.counters
                .agent_wait_us_max
                .fetch_max(waited_us, Ordering::Relaxed);
            if waited_us > 100_000 {
                Counters::bump(&self.counters.agent_waits_over_100ms);
            }
        }
        ObjectGuard {
            _guard: guard,
            background: None,
        }
    }

    /// Takes an object's lock for background work (the agent's flushes and evictions, a
    /// background promotion).
    pub(crate) async fn lock_for_background(&self, name: &str) -> ObjectGuard<'_> {
        let slot = Self::slot(name);
        let guard = self.locks[slot].lock().await;
        self.background_holds[slot].store(true, Ordering::SeqCst);
        ObjectGuard {
            _guard: guard,
            background: Some(&self.background_holds[slot]),
        }
    }

    pub(crate) fn cached_state(&self, name: &str) -> Option<ObjectState> {
        self.index.lock().expect("index lock").get(name).cloned()
    }

    pub(crate) fn set_cached_state(&self, name: &str, state: Option<ObjectState>) {
        let mut index = self.index.lock().expect("index lock");
        let now_dirty = state.as_ref().is_some_and(ObjectState::is_dirty);
        let was_dirty = match state {
            Some(state) => index.insert(name.to_string(), state),
            None => index.remove(name),
        }
        .is_some_and(|old| old.is_dirty());
        match (was_dirty, now_dirty) {
            (false, true) => self.dirty_count.fetch_add(1, Ordering::SeqCst),
            (true, false) => self.dirty_count.fetch_sub(1, Ordering::SeqCst),
            _ => 0,
        };
    }

    /// Asks the policy about one request, queues what it evicts or flushes, and decides where
    /// the op goes. Call with the object's lock held.
    ///
    /// When the policy evicts the requested object itself while it handles the request (Ceph's
    /// agent works the object's PG before the op, so the op finds the object gone), the object
    /// is evicted here first (flushed if dirty) and the op routed as the miss the policy saw;
    /// if that eviction cannot be done now (a background flush of it is in flight), the op
    /// is served from the cache. Serving such ops from the cache made the live tier hit where
    /// the policy, and the simulator running it, missed (0.59 against 0.29 on cloudPhysicsIO).
    pub(crate) async fn route(&self, name: &str, write: bool, size_bytes: u64) -> Route {
        let (cached, outcome, self_evicted) = self.decide(name, write, size_bytes);
        if cached {
            if !self_evicted {
                return Route::Cache;
            }
            if let Err(error) = self.evict_locked(name).await {
                tracing::debug!(object = %name, %error, "tier: eviction ahead of the op deferred");
                return Route::Cache;
            }
            if self.cached_state(name).is_some() {
                return Route::Cache;
            }
        }
        self.route_miss(outcome, write)
    }

    /// The policy's outcome for one request: whether the object was cached before it, the
    /// outcome, and whether the policy evicted the object itself meanwhile.
    fn decide(&self, name: &str, write: bool, size_bytes: u64) -> (bool, Outcome, bool) {
        let cached = self.index.lock().expect("index lock").contains_key(name);
        let (outcome, self_evicted) = {
            let now_ms = self.clock.now_ms();
            let mut policy = self.policy.lock().expect("policy lock");
            let request = policy.request(name, size_bytes, write, now_ms);
            let PolicyState {
                cache,
                effects,
                names,
                ..
            } = &mut *policy;
            effects.clear();
            let outcome = cache.on_request(&request, effects);
            let self_evicted =
                effects.evicted.contains(&request.key) && !cache.contains(request.key);
            if !effects.evicted.is_empty() || !effects.flushed.is_empty() {
                let mut queues = self.queues.lock().expect("queue lock");
                for key in &effects.evicted {
                    queues.evict.push_back(names[*key as usize].clone());
                }
                for key in &effects.flushed {
                    queues.flush.push_back(names[*key as usize].clone());
                }
                drop(queues);
                self.agent_wake.notify_one();
            }
            (outcome, self_evicted)
        };
        (cached, outcome, self_evicted)
    }

    /// Where an op on an object the cache does not hold goes.
    fn route_miss(&self, outcome: Outcome, write: bool) -> Route {
        let mode = self.mode();
        Counters::bump(&self.counters.misses);
        let admitted = match outcome {
            Outcome::Hit | Outcome::BufferHit | Outcome::Admitted => Route::Promote,
            Outcome::AdmittedAfterProxy => Route::ProxyThenPromote,
            Outcome::Buffered | Outcome::Bypassed => Route::Proxy,
        };
        let route = match mode {
            CacheMode::None | CacheMode::Proxy => Route::Proxy,
            CacheMode::Readonly if write => Route::Proxy,
            CacheMode::Readonly => admitted,
            CacheMode::Readproxy if write => Route::Promote,
            CacheMode::Readproxy => Route::Proxy,
            CacheMode::Writeback => admitted,
        };
        if route != Route::Proxy && self.is_full() {
            if write {
                Counters::bump(&self.counters.writes_around_full);
            }
            return Route::Proxy;
        }
        route
    }

    /// Whether the cache holds as many objects as its hard capacity (the policy's capacity
    /// over the full ratio: room for the evictions the agent has not done yet) or, with a
    /// byte target, as many bytes as the target over the full ratio (when the agent last
    /// counted them), or its pool refused a write for space within the last
    /// [`CACHE_REFUSED_RETRY_MS`]: new objects then go around it.
    pub(crate) fn is_full(&self) -> bool {
        if self.clock.now_ms() < self.cache_refused_until_ms.load(Ordering::Acquire) {
            return true;
        }
        let settings = self.settings();
        let full_ratio = settings.cache_target_full_ratio.max(0.01);
        let capacity = self.capacity_objects() as f64;
        let objects = self.index.lock().expect("index lock").len() as f64;
        if objects >= capacity.max(1.0) / full_ratio {
            return true;
        }
        settings.target_max_bytes > 0
            && self.cached_bytes.load(Ordering::Acquire) as f64
                >= settings.target_max_bytes as f64 / full_ratio
    }

    /// Whether the cache holds its byte target over the full ratio (as counted by the agent,
    /// plus what was promoted since): blocks are then not promoted into cached objects.
    pub(crate) fn over_byte_target(&self) -> bool {
        let settings = self.settings();
        settings.target_max_bytes > 0
            && self.cached_bytes.load(Ordering::Acquire) as f64
                >= settings.target_max_bytes as f64 / settings.cache_target_full_ratio.max(0.01)
    }

    /// Counts `bytes` newly promoted into the cache until the agent counts again.
    pub(crate) fn note_promoted_bytes(&self, bytes: u64) {
        self.cached_bytes.fetch_add(bytes, Ordering::AcqRel);
    }

    /// The policy's capacity in objects now.
    pub fn capacity_objects(&self) -> usize {
        self.capacity_objects.load(Ordering::Acquire)
    }

    /// Objects the cache holds and the bytes of their present blocks.
    pub(crate) fn cached_objects_and_bytes(&self) -> (u64, u64) {
        let index = self.index.lock().expect("index lock");
        let bytes = index
            .values()
            .map(|s| s.present.count() * s.block_bytes)
            .sum();
        (index.len() as u64, bytes)
    }

    /// Counts what the cache holds and recomputes the policy's capacity from it (a byte
    /// target counts the blocks objects hold), telling the policy when it changed. Returns the
    /// objects and bytes counted.
    pub(crate) fn refresh_capacity(&self) -> (u64, u64) {
        let (objects, bytes) = self.cached_objects_and_bytes();
        self.cached_bytes.store(bytes, Ordering::Release);
        let capacity = self.settings().capacity_objects_holding(objects, bytes);
        if self.capacity_objects.swap(capacity, Ordering::AcqRel) != capacity {
            self.policy
                .lock()
                .expect("policy lock")
                .cache
                .resize(capacity);
        }
        (objects, bytes)
    }

    /// Records that the cache pool refused a write for space (its OSDs at their full ratio):
    /// new objects go around it for a while.
    pub(crate) fn note_cache_refusal(&self) {
        Counters::bump(&self.counters.cache_refusals_full);
        self.cache_refused_until_ms.store(
            self.clock.now_ms().saturating_add(CACHE_REFUSED_RETRY_MS),
            Ordering::Release,
        );
        self.agent_wake.notify_one();
    }

    /// After the cache pool refused an op's write for space: the object leaves the cache
    /// (flushed first when dirty, so the base pool holds its newest data) and the policy
    /// forgets it, so the op can run on the base pool instead of failing (counted as
    /// proxied). Removals are allowed in a full pool. Call with the object's lock held.
    pub(crate) async fn go_around_full_cache(
        &self,
        name: &str,
        error: &crate::error::TierError,
    ) -> Result<()> {
        if !matches!(error, crate::error::TierError::OverTarget { .. }) {
            self.note_cache_refusal();
        }
        self.evict_locked(name).await?;
        self.policy_forget(name);
        Counters::bump(&self.counters.proxied);
        Ok(())
    }

    /// Tells the policy an object left the cache for reasons of the executor's own.
    pub(crate) fn policy_forget(&self, name: &str) {
        let mut policy = self.policy.lock().expect("policy lock");
        if let Some(key) = policy.keys.get(name).copied() {
            policy.cache.invalidate(key);
        }
    }

    /// Whether the policy holds the object now.
    pub(crate) fn policy_holds(&self, name: &str) -> bool {
        let policy = self.policy.lock().expect("policy lock");
        policy
            .keys
            .get(name)
            .is_some_and(|key| policy.cache.contains(*key))
    }

    /// Counters and gauges.
    pub fn stats(&self) -> TierStats {
        let config = self.config();
        let mut stats = TierStats {
            cache_pool: config.cache_pool.clone(),
            base_pool: config.base_pool.clone(),
            mode: config.mode.name().to_string(),
            admission: config.settings.tier_admission.name().to_string(),
            capacity_objects: self.capacity_objects() as u64,
            ..Default::default()
        };
        stats.fill(&self.counters);
        (stats.objects, stats.cached_bytes) = self.cached_objects_and_bytes();
        stats.dirty_objects = self.dirty_objects();
        stats
    }

    /// Whether the base pool keeps omap: an erasure-coded pool refuses omap writes
    /// (`NotSupported`), so flushes then write no omap and refuse objects that have some. The
    /// pool says what it is: a read cannot tell (Ceph answers omap reads on an erasure-coded
    /// pool, with nothing).
    pub(crate) fn base_keeps_omap(&self) -> bool {
        !self.base.pool().erasure_coded
    }

    /// Dirty objects now.
    pub fn dirty_objects(&self) -> u64 {
        self.dirty_count.load(Ordering::SeqCst)
    }

    /// Objects in the cache now.
    pub fn cached_objects(&self) -> u64 {
        self.index.lock().expect("index lock").len() as u64
    }

    /// Background promotions running now.
    pub fn promotions_running(&self) -> u32 {
        self.promotions_running.load(Ordering::SeqCst)
    }

    /// Whether the background work the policy asked for is done: no promotion running, the
    /// agent's queues empty, no flush in flight, and every cached object one the policy holds
    /// (an eviction the agent took off its queue has finished). A replay that waits for this
    /// between ops sees the cache the policy decided on, as the simulator does.
    pub fn settled(&self) -> bool {
        if self.promotions_running() > 0 || !self.flushing.lock().expect("flushing lock").is_empty()
        {
            return false;
        }
        {
            let queues = self.queues.lock().expect("queue lock");
            if !queues.evict.is_empty() || !queues.flush.is_empty() {
                return false;
            }
        }
        let names: Vec<String> = self
            .index
            .lock()
            .expect("index lock")
            .keys()
            .cloned()
            .collect();
        names.iter().all(|name| self.policy_holds(name))
    }

    /// Asks the agent to flush every dirty object and evict everything.
    pub fn request_flush_evict_all(&self) {
        self.queues.lock().expect("queue lock").flush_evict_all = true;
        self.agent_wake.notify_one();
    }

    pub(crate) fn promotion_slot(self: &Arc<Self>) -> Option<PromotionSlot> {
        let max = self.settings().tier_promote_max_inflight;
        let running = self.promotions_running.fetch_add(1, Ordering::SeqCst);
        if running >= max {
            self.promotions_running.fetch_sub(1, Ordering::SeqCst);
            Counters::bump(&self.counters.promotions_throttled);
            return None;
        }
        Some(PromotionSlot { tier: self.clone() })
    }
}

/// An object's lock, held by a client op or by background work.
pub(crate) struct ObjectGuard<'a> {
    _guard: tokio::sync::MutexGuard<'a, ()>,
    background: Option<&'a std::sync::atomic::AtomicBool>,
}

impl Drop for ObjectGuard<'_> {
    fn drop(&mut self) {
        if let Some(flag) = self.background {
            flag.store(false, Ordering::SeqCst);
        }
    }
}

/// One running background promotion (released on drop).
pub(crate) struct PromotionSlot {
    tier: Arc<Tier>,
}

impl Drop for PromotionSlot {
    fn drop(&mut self) {
        self.tier.promotions_running.fetch_sub(1, Ordering::SeqCst);
    }
}
