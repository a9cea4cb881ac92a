//! When the GC reclaims replaced data early, and how much waits for it.
//!
//! Data an overwrite or delete replaced waits `gc_min_wait_s` (300 s) in the GC queue, so a
//! GET that started on the old version can finish. On a cluster whose fullest OSD is at or
//! past `nearfull_ratio` that space is wanted back now (a full pool refuses writes until it
//! is), so the wait shrinks to `gc_nearfull_min_wait_s` ([`gc_wait_s`], pure) and the GC task
//! asks the cluster how full it is every `gc_fullness_check_s` ([`crate::server`]).

use std::sync::atomic::Ordering;

use rados::{FullLevel, RadosError};

use super::Store;
use crate::error::Result;
use crate::layout::{self, Piece};
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
    /// Data a committed change replaced: queued for the GC, which removes it once
    /// `gc_min_wait_s` has passed, so reads that started on the old version finish (removed
    /// now when the wait is 0, or when it cannot be queued).
    /// Ranges of pack objects are logged for the pack GC instead (`pack_gc.rs`).
    /// Returns how many whole pieces were removed now (the others are queued).
    pub async fn retire_pieces(&self, pieces: Vec<Piece>) -> u64 {
        let (packed, pieces): (Vec<Piece>, Vec<Piece>) =
            pieces.into_iter().partition(|p| p.pack_offset.is_some());
        self.log_dead_ranges(&packed).await;
        if pieces.is_empty() {
            return 0;
        }
        if self.config.gc_min_wait_s == 0 {
            return self.remove_pieces(pieces).await;
        }
        let now = self.now_ns().to_string().into_bytes();
        let entries = pieces
            .iter()
            .map(|piece| (piece.oid.clone().into_bytes(), now.clone()))
            .collect();
        match self.meta.omap_set(layout::GC_OBJECT, entries).await {
            Ok(()) => {
                self.counters
                    .pieces_retired
                    .fetch_add(pieces.len() as u64, Ordering::Relaxed);
                0
            }
            Err(error) => {
                tracing::warn!(%error, "cannot queue replaced data for the GC; removing it now");
                self.remove_pieces(pieces).await
            }
        }
    }

    /// Removes data pieces; a failed removal goes to the GC queue. Ranges of pack objects
    /// are logged for the pack GC instead (`pack_gc.rs`). Returns how many whole pieces are
    /// gone (removed, or already missing).
    pub async fn remove_pieces(&self, pieces: Vec<Piece>) -> u64 {
        let (packed, pieces): (Vec<Piece>, Vec<Piece>) =
            pieces.into_iter().partition(|p| p.pack_offset.is_some());
        self.log_dead_ranges(&packed).await;
        let mut removed = 0;
        for piece in pieces {
            match self.data.remove(&piece.oid).await {
                Ok(()) | Err(RadosError::NotFound(_)) => {
                    self.counters.pieces_removed.fetch_add(1, Ordering::Relaxed);
                    removed += 1;
                }
                Err(error) => {
                    tracing::warn!(oid = %piece.oid, %error, "removal failed; queued for GC");
                    let entry = (
                        piece.oid.into_bytes(),
                        self.now_ns().to_string().into_bytes(),
                    );
                    if self
                        .meta
                        .omap_set(layout::GC_OBJECT, vec![entry])
                        .await
                        .is_ok()
                    {
                        self.counters.gc_enqueued.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
        removed
    }

    /// One GC pass: removes the queued data objects that have waited `gc_min_wait_s`;
    /// returns how many were reclaimed.
    pub async fn reclaim(&self) -> Result<u64> {
        self.reclaim_after(self.config.gc_min_wait_s).await
    }

    /// One GC pass removing the queued data objects that have waited `wait_s` (see `gc`).
    pub async fn reclaim_after(&self, wait_s: u64) -> Result<u64> {
        let wait_ns = wait_s.saturating_mul(1_000_000_000);
        let now_ns = self.now_ns();
        let queue = self.omap_all(&self.meta, layout::GC_OBJECT).await?;
        let mut done = Vec::new();
        for (key, queued) in queue {
            let queued_ns: u64 = String::from_utf8_lossy(&queued).parse().unwrap_or(0);
            if queued_ns.saturating_add(wait_ns) > now_ns {
                continue; // a read may still be on it
            }
            let oid = String::from_utf8_lossy(&key).into_owned();
            match self.data.remove(&oid).await {
                Ok(()) | Err(RadosError::NotFound(_)) => done.push(key),
                Err(error) => tracing::warn!(%oid, %error, "GC removal failed; retrying later"),
            }
        }
        let reclaimed = done.len() as u64;
        for chunk in done.chunks(1000) {
            self.meta
                .omap_remove_keys(layout::GC_OBJECT, chunk.to_vec())
                .await?;
        }
        self.counters
            .gc_reclaimed
            .fetch_add(reclaimed, Ordering::Relaxed);
        Ok(reclaimed)
    }

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
