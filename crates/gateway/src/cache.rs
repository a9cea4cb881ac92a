//! A gateway's short-lived copies of metadata records (users by access key, buckets by name),
//! so a request does not read them from the cluster each time.
//!
//! Coherence: a copy is used for at most `ttl_ns` after it was read ([`crate::GatewayConfig::
//! metadata_cache_ms`]); this gateway's own changes replace or drop it at once. What must
//! never be stale (a deleted bucket taking writes, a write missing a versioning change) is
//! not left to the bound: the write path checks it in the cluster (see `store::index`).

use std::collections::HashMap;
use std::sync::Mutex;

use crate::store::Clock;

/// Most records kept; past it the copies are dropped and read again (a bound on memory, not
/// a policy: a gateway serves few users and buckets at once).
const ENTRIES_MAX: usize = 4096;

/// Copies of records of type `V` by name, each valid `ttl_ns` from when it was read.
pub(crate) struct RecordCache<V> {
    ttl_ns: u64,
    clock: Clock,
    entries: Mutex<HashMap<String, (V, u64)>>,
}

impl<V: Clone> RecordCache<V> {
    /// A cache whose copies live `ttl_ns` (0: nothing is kept).
    pub fn new(ttl_ns: u64, clock: Clock) -> Self {
        Self {
            ttl_ns,
            clock,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The copy of `name` if it was read less than `ttl_ns` ago.
    pub fn get(&self, name: &str) -> Option<V> {
        if self.ttl_ns == 0 {
            return None;
        }
        let now_ns = (self.clock)();
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        match entries.get(name) {
            Some((value, read_ns)) if now_ns.saturating_sub(*read_ns) < self.ttl_ns => {
                Some(value.clone())
            }
            _ => None,
        }
    }

    /// Keeps `value` as the copy of `name`, read now.
    pub fn put(&self, name: &str, value: V) {
        if self.ttl_ns == 0 {
            return;
        }
        let now_ns = (self.clock)();
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= ENTRIES_MAX && !entries.contains_key(name) {
            entries.clear();
        }
        entries.insert(name.to_string(), (value, now_ns));
    }

    /// Drops the copy of `name` (changed or removed).
    pub fn forget(&self, name: &str) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.remove(name);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    use super::*;

    #[test]
    fn a_copy_lives_its_ttl_and_a_change_drops_it() {
        let now = Arc::new(AtomicU64::new(1_000));
        let clock: Clock = {
            let now = now.clone();
            Arc::new(move || now.load(Ordering::Relaxed))
        };
        let cache = RecordCache::new(100, clock.clone());
        cache.put("a", 1u32);
        assert_eq!(cache.get("a"), Some(1));
        now.store(1_099, Ordering::Relaxed);
        assert_eq!(cache.get("a"), Some(1));
        now.store(1_100, Ordering::Relaxed);
        assert_eq!(cache.get("a"), None, "stale after ttl");
        cache.put("a", 2);
        cache.forget("a");
        assert_eq!(cache.get("a"), None);
        let off = RecordCache::new(0, clock);
        off.put("a", 3u32);
        assert_eq!(off.get("a"), None, "ttl 0 keeps nothing");
    }
}
