//! `strata osd tier ...` and `strata osd pool set|get|stats`: cache tiering as Ceph names it.
//!
//! A cache pool (fast OSDs) serves a base pool (slow OSDs) once it is a tier of it, has a cache
//! mode and is its overlay:
//!
//! ```text
//! strata osd tier add hdd-pool ssd-pool
//! strata osd tier cache-mode ssd-pool writeback
//! strata osd tier set-overlay hdd-pool ssd-pool
//! strata osd pool set ssd-pool target_max_bytes 10000000000
//! strata osd pool set ssd-pool tier_admission predictive
//! ```
//!
//! and stops serving it the way Ceph's documentation says: `cache-mode ssd-pool proxy`,
//! `tier flush-evict-all ssd-pool`, `tier remove-overlay hdd-pool`, `tier remove hdd-pool ssd-pool`.

use anyhow::Result;
use clap::Subcommand;
use serde_json::{json, Value};
use server::tier_api::TierEntry;

use super::client::{segment, Client};
use super::human_bytes;

/// `strata osd tier ...`.
#[derive(Subcommand, Debug)]
pub enum TierCommand {
    /// Make CACHE a tier of BASE (CACHE must be empty unless --force-nonempty).
    Add {
        /// The base pool.
        base: String,
        /// The cache pool.
        cache: String,
        /// Accept a cache pool that already holds objects.
        #[arg(long)]
        force_nonempty: bool,
    },
    /// Stop CACHE being a tier of BASE (after remove-overlay).
    Remove {
        /// The base pool.
        base: String,
        /// The cache pool.
        cache: String,
    },
    /// Set the cache mode: writeback, readproxy, readonly, proxy or none.
    CacheMode {
        /// The cache pool.
        cache: String,
        /// The mode.
        mode: String,
        /// Confirms readonly (which serves stale data if the base pool is written directly).
        #[arg(long = "yes-i-really-mean-it")]
        confirmed: bool,
    },
    /// Serve BASE through CACHE: every op on BASE goes through the tier.
    SetOverlay {
        /// The base pool.
        base: String,
        /// The cache pool.
        cache: String,
    },
    /// Stop serving BASE through its cache (refused while the cache holds objects).
    RemoveOverlay {
        /// The base pool.
        base: String,
    },
    /// Flush every dirty object of CACHE and evict everything, in the background.
    FlushEvictAll {
        /// The cache pool.
        cache: String,
    },
    /// The tiers with their mode, overlay, admission and occupancy.
    Ls,
}

/// `strata osd pool ...` for cache pools.
#[derive(Subcommand, Debug)]
pub enum PoolCommand {
    /// Set a cache pool setting (hit_set_count, target_max_bytes, cache_target_dirty_ratio,
    /// tier_admission ceph|ceph-corrected|predictive, predictive_threshold, ...).
    Set {
        /// The cache pool.
        pool: String,
        /// The setting.
        key: String,
        /// Its value.
        value: String,
    },
    /// Print a cache pool setting.
    Get {
        /// The cache pool.
        pool: String,
        /// The setting.
        key: String,
    },
    /// Cache tier I/O: promote, flush and evict counts, dirty objects, hit ratio
    /// (`ceph osd pool stats`).
    Stats {
        /// Only this cache pool.
        pool: Option<String>,
    },
}

fn post(client: &Client, path: &str, body: Value) -> Result<()> {
    let reply: Value = client.json("POST", path, body.to_string().as_bytes())?;
    if let Some(message) = reply["message"].as_str() {
        println!("{message}");
    }
    Ok(())
}

/// Runs `strata osd tier ...`.
pub fn run_tier(client: &Client, command: TierCommand) -> Result<()> {
    match command {
        TierCommand::Add {
            base,
            cache,
            force_nonempty,
        } => post(
            client,
            "/api/tiers/add",
            json!({ "base": base, "cache": cache, "force_nonempty": force_nonempty }),
        ),
        TierCommand::Remove { base, cache } => post(
            client,
            "/api/tiers/remove",
            json!({ "base": base, "cache": cache }),
        ),
        TierCommand::CacheMode {
            cache,
            mode,
            confirmed,
        } => post(
            client,
            "/api/tiers/cache-mode",
            json!({ "cache": cache, "mode": mode, "confirmed": confirmed }),
        ),
        TierCommand::SetOverlay { base, cache } => post(
            client,
            "/api/tiers/set-overlay",
            json!({ "base": base, "cache": cache }),
        ),
        TierCommand::RemoveOverlay { base } => {
            post(client, "/api/tiers/remove-overlay", json!({ "base": base }))
        }
        TierCommand::FlushEvictAll { cache } => post(
            client,
            "/api/tiers/flush-evict-all",
            json!({ "cache": cache }),
        ),
        TierCommand::Ls => {
            let tiers: Vec<TierEntry> = client.json("GET", "/api/tiers", b"")?;
            if tiers.is_empty() {
                println!("no cache tiers (strata osd tier add BASE CACHE)");
            }
            println!(
                "{:<16} {:<16} {:<10} {:<8} {:<15} {:>8} {:>8} {:>10}",
                "CACHE", "BASE", "MODE", "OVERLAY", "ADMISSION", "OBJECTS", "DIRTY", "CACHED"
            );
            for entry in tiers {
                println!(
                    "{:<16} {:<16} {:<10} {:<8} {:<15} {:>8} {:>8} {:>10}",
                    entry.config.cache_pool,
                    entry.config.base_pool,
                    entry.config.mode.name(),
                    if entry.config.overlay { "yes" } else { "no" },
                    entry.config.settings.tier_admission.name(),
                    entry.stats.objects,
                    entry.stats.dirty_objects,
                    human_bytes(entry.stats.cached_bytes),
                );
            }
            Ok(())
        }
    }
}

/// Runs `strata osd pool ...`.
pub fn run_pool(client: &Client, command: PoolCommand) -> Result<()> {
    match command {
        PoolCommand::Set { pool, key, value } => post(
            client,
            "/api/tiers/set",
            json!({ "pool": pool, "key": key, "value": value }),
        ),
        PoolCommand::Get { pool, key } => {
            let path = format!("/api/tiers/get/{}/{}", segment(&pool), segment(&key));
            let reply: Value = client.json("GET", &path, b"")?;
            println!("{key}: {}", reply["value"].as_str().unwrap_or_default());
            Ok(())
        }
        PoolCommand::Stats { pool } => {
            let tiers: Vec<TierEntry> = client.json("GET", "/api/tiers", b"")?;
            for entry in tiers
                .iter()
                .filter(|e| pool.as_deref().is_none_or(|p| p == e.config.cache_pool))
            {
                let s = &entry.stats;
                println!(
                    "pool {} (cache tier of {}, {}, admission {})",
                    s.cache_pool, s.base_pool, s.mode, s.admission
                );
                println!(
                    "  client io: {} reads, {} writes, hit ratio {:.3} ({} hits, {} misses, {} proxied)",
                    s.reads,
                    s.writes,
                    s.hit_ratio(),
                    s.hits,
                    s.misses,
                    s.proxied
                );
                println!(
                    "  cache tiering io: {} promotions ({}), {} throttled, {} flushes ({}), {} evictions, {} writes around a full cache, {} flush conflicts",
                    s.promotions,
                    human_bytes(s.promoted_bytes),
                    s.promotions_throttled,
                    s.flushes,
                    human_bytes(s.flushed_bytes),
                    s.evictions,
                    s.writes_around_full,
                    s.flush_conflicts
                );
                println!(
                    "  objects: {} cached ({}), {} dirty, admission capacity {} objects",
                    s.objects,
                    human_bytes(s.cached_bytes),
                    s.dirty_objects,
                    s.capacity_objects
                );
            }
            Ok(())
        }
    }
}
