//! The tier agent: flushes and evicts in the background, driven by the policy's decisions
//! (what it evicts or flushes), the dirty ratio with `cache_min_flush_age`, the full ratio
//! with `cache_min_evict_age`, and the cache mode (`none` empties the cache). It runs as a
//! [`worker::Worker`] on the tier's clock, a bounded number of object moves per step, each
//! holding only its own object's lock, so client ops never wait on a whole pass.

use std::sync::{Arc, Weak};

use async_trait::async_trait;
use worker::{Next, Step, Worker, WorkerHandle};

use crate::config::CacheMode;
use crate::engine::Tier;

/// Object moves one agent step may make before yielding.
const MOVES_PER_STEP: usize = 64;

/// How often the agent looks when nothing wakes it.
pub const AGENT_PERIOD_MS: u64 = 1000;

struct Agent {
    tier: Weak<Tier>,
}

#[async_trait]
impl Step for Agent {
    async fn step(&mut self, now_ms: u64) -> Next {
        match self.tier.upgrade() {
            Some(tier) => tier.agent_step(now_ms).await,
            None => Next::SleepMs(u64::MAX / 4),
        }
    }
}

/// Starts the agent of `tier`.
pub fn start(tier: &Arc<Tier>) -> WorkerHandle {
    let name = format!("tier-agent {}", tier.config().cache_pool);
    Worker::spawn_with_wake(
        name,
        AGENT_PERIOD_MS,
        tier.clock.clone(),
        tier.agent_wake.clone(),
        Agent {
            tier: Arc::downgrade(tier),
        },
    )
}

impl Tier {
    /// One step of the agent: returns whether work is left.
    pub async fn agent_step(&self, now_ms: u64) -> Next {
        let mut moves = 0;
        let mode = self.mode();
        let settings = self.settings();
        // Emptying: mode none, or flush-evict-all asked for.
        let empty_all =
            mode == CacheMode::None || self.queues.lock().expect("queue lock").flush_evict_all;
        if empty_all {
            let names: Vec<String> = self
                .index
                .lock()
                .expect("index lock")
                .keys()
                .take(MOVES_PER_STEP)
                .cloned()
                .collect();
            let mut evicted = 0;
            for name in &names {
                match self.evict(name).await {
                    Ok(()) => evicted += 1,
                    Err(error) => {
                        tracing::warn!(object = %name, %error, "tier agent: evict failed")
                    }
                }
            }
            if self.cached_objects() == 0 {
                self.queues.lock().expect("queue lock").flush_evict_all = false;
                return Next::Sleep;
            }
            return if evicted == 0 {
                Next::Sleep
            } else {
                Next::Again
            };
        }
        // The policy's evictions (an object leaving its table, dirty or not) and flushes.
        while moves < MOVES_PER_STEP {
            let next = self.queues.lock().expect("queue lock").evict.pop_front();
            let Some(name) = next else { break };
            if self.policy_holds(&name) || self.cached_state(&name).is_none() {
                continue;
            }
            moves += 1;
            // A dirty object is flushed first without holding its lock over the base write;
            // if it was written again meanwhile it stays for a later pass.
            if let Err(error) = self.flush(&name).await {
                tracing::warn!(object = %name, %error, "tier agent: flush before evict failed");
                continue;
            }
            let _guard = self.lock_for_background(&name).await;
            if self.cached_state(&name).is_some_and(|s| s.is_dirty()) {
                self.queues
                    .lock()
                    .expect("queue lock")
                    .evict
                    .push_back(name.clone());
                continue;
            }
            if let Err(error) = self.evict_locked(&name).await {
                tracing::warn!(object = %name, %error, "tier agent: evict failed");
            }
        }
        while moves < MOVES_PER_STEP {
            let next = self.queues.lock().expect("queue lock").flush.pop_front();
            let Some(name) = next else { break };
            moves += 1;
            if let Err(error) = self.flush(&name).await {
                tracing::warn!(object = %name, %error, "tier agent: flush failed");
            }
        }
        // Dirty ratio: flush the oldest writes old enough.
        let (cached_objects, cached_bytes) = self.refresh_capacity();
        let capacity = self.capacity_objects() as f64;
        let dirty_target = (capacity * settings.cache_target_dirty_ratio) as usize;
        let min_flush_age_ms = settings.cache_min_flush_age * 1000;
        let dirty: Vec<(u64, String)> = {
            let index = self.index.lock().expect("index lock");
            let mut dirty: Vec<(u64, String)> = index
                .iter()
                .filter(|(_, s)| s.is_dirty())
                .map(|(name, s)| (s.last_write_ms, name.clone()))
                .collect();
            dirty.sort_unstable();
            dirty
        };
        let excess = dirty.len().saturating_sub(dirty_target);
        for (last_write_ms, name) in dirty.into_iter().take(excess) {
            if moves >= MOVES_PER_STEP {
                break;
            }
            if last_write_ms.saturating_add(min_flush_age_ms) > now_ms {
                break;
            }
            moves += 1;
            if let Err(error) = self.flush(&name).await {
                tracing::warn!(object = %name, %error, "tier agent: flush failed");
            }
        }
        // Full ratio, in objects and, with a byte target, in bytes: evict clean objects the
        // policy no longer holds, then the oldest clean.
        let full_target = (capacity * settings.cache_target_full_ratio).max(1.0) as usize;
        let min_evict_age_ms = settings.cache_min_evict_age * 1000;
        let objects = self.cached_objects() as usize;
        let excess = over_full_target(
            &settings,
            full_target,
            objects,
            cached_objects,
            cached_bytes,
        );
        if excess > 0 {
            let mut clean: Vec<(bool, u64, String)> = {
                let index = self.index.lock().expect("index lock");
                index
                    .iter()
                    .filter(|(_, s)| !s.is_dirty())
                    .map(|(name, s)| (true, s.last_write_ms, name.clone()))
                    .collect()
            };
            for entry in &mut clean {
                entry.0 = self.policy_holds(&entry.2);
            }
            clean.sort_unstable();
            for (_, last_write_ms, name) in clean.into_iter().take(excess) {
                if moves >= MOVES_PER_STEP {
                    break;
                }
                if last_write_ms.saturating_add(min_evict_age_ms) > now_ms && last_write_ms > 0 {
                    continue;
                }
                moves += 1;
                if let Err(error) = self.evict(&name).await {
                    tracing::warn!(object = %name, %error, "tier agent: evict failed");
                }
            }
        }
        if moves >= MOVES_PER_STEP {
            Next::Again
        } else {
            Next::Sleep
        }
    }
}

/// Objects to evict for the full ratio: those past `full_target` objects, or, with a byte
/// target, as many objects of the average size (`counted_bytes` over `counted_objects`, as
/// the agent last counted) as the cache holds past `target_max_bytes` times the full ratio.
fn over_full_target(
    settings: &crate::config::TierSettings,
    full_target: usize,
    objects: usize,
    counted_objects: u64,
    counted_bytes: u64,
) -> usize {
    let by_objects = objects.saturating_sub(full_target);
    if settings.target_max_bytes == 0 || counted_objects == 0 {
        return by_objects;
    }
    let byte_target =
        (settings.target_max_bytes as f64 * settings.cache_target_full_ratio).max(1.0) as u64;
    let over_bytes = counted_bytes.saturating_sub(byte_target);
    let per_object_bytes = (counted_bytes / counted_objects).max(1);
    by_objects.max(over_bytes.div_ceil(per_object_bytes) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TierSettings;

    #[test]
    fn the_full_ratio_counts_objects_and_bytes() {
        let mut settings = TierSettings {
            target_max_bytes: 100 << 20,
            cache_target_full_ratio: 0.8,
            ..TierSettings::default()
        };
        // Under both targets: nothing.
        assert_eq!(over_full_target(&settings, 20, 20, 20, 40 << 20), 0);
        // Over the object target only.
        assert_eq!(over_full_target(&settings, 20, 25, 25, 50 << 20), 5);
        // 90 MiB in 30 objects of 3 MiB over a byte target of 80 MiB: 4 objects.
        assert_eq!(over_full_target(&settings, 40, 30, 30, 90 << 20), 4);
        // Without a byte target only the count matters.
        settings.target_max_bytes = 0;
        assert_eq!(over_full_target(&settings, 40, 30, 30, 90 << 20), 0);
    }
}
