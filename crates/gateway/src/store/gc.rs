//! When the GC reclaims replaced data early, and how much waits for it.
//!
//! Data an overwrite or delete replaced waits `gc_min_wait_s` (300 s) in the GC queue, so a
//! GET that started on the old version can finish. On a cluster whose fullest OSD is at or
//! past `nearfull_ratio` that space is wanted back now (a full pool refuses writes until it
//! is), so the wait shrinks to `gc_nearfull_min_wait_s` ([`gc_wait_s`], pure) and the GC task
//! asks the cluster how full it is every `gc_fullness_check_s` ([`crate::server`]).

use rados::{FullLevel, RadosError};

use super::Store;
use crate::error::Result;
use crate::layout;
use crate::GatewayConfig;

/// Seconds queued data waits before the GC removes it, with the cluster's fullest OSD at
/// `level`: `gc_nearfull_min_wait_s` from nearfull on (never longer than the usual wait),
/// else `gc_min_wait_s`. Pure.
pub fn gc_wait_s(config: &GatewayConfig, level: FullLevel) -> u64 {
    if level >= FullLevel::Nearfull {
        config.gc_nearfull_min_wait_s.min(config.gc_min_wait_s)
    } else {
        config.gc_min_wait_s
    }
}

/// Data objects in the GC queue and their bytes (what `strata df` shows as awaiting GC).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GcBacklog {
    /// Queued data objects (those already gone count, with no bytes).
    pub objects: u64,
    /// Their logical bytes (once, not per replica).
    pub bytes: u64,
}

impl Store {
    /// The GC queue's objects and their sizes (one stat per queued object).
    pub async fn gc_backlog(&self) -> Result<GcBacklog> {
        let queue = self.omap_all(&self.meta, layout::GC_OBJECT).await?;
        let mut backlog = GcBacklog::default();
        for (key, _) in queue {
            backlog.objects += 1;
            let oid = String::from_utf8_lossy(&key);
            match self.data.stat(&oid).await {
                Ok(stat) => backlog.bytes += stat.size_bytes,
                Err(RadosError::NotFound(_)) => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(backlog)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_shrinks_from_nearfull_on() {
        let config = GatewayConfig {
            gc_min_wait_s: 300,
            gc_nearfull_min_wait_s: 5,
            ..GatewayConfig::default()
        };
        assert_eq!(gc_wait_s(&config, FullLevel::Ok), 300);
        for level in [
            FullLevel::Nearfull,
            FullLevel::Backfillfull,
            FullLevel::Full,
        ] {
            assert_eq!(gc_wait_s(&config, level), 5);
        }
        // Never longer than the usual wait.
        let immediate = GatewayConfig {
            gc_min_wait_s: 0,
            ..config
        };
        assert_eq!(gc_wait_s(&immediate, FullLevel::Full), 0);
    }
}
