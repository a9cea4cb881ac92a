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

/// `strata osd pool ...`: any pool's placement settings and quotas, cache pools' settings.
#[derive(Subcommand, Debug)]
pub enum PoolCommand {
    /// Set a pool setting: size, min_size, quota_max_bytes, quota_max_objects (0: none) of any
    /// pool (pg_num is refused: no PG splitting yet), or a cache pool setting (hit_set_count,
    /// target_max_bytes, cache_target_dirty_ratio, tier_admission
    /// ceph|ceph-corrected|predictive, predictive_threshold, ...).
    ///
    /// tier_promote_granularity family|whole-object|extents: how much of an object a
    /// promotion copies into the cache and a flush writes back. whole-object is Ceph 16.2's
    /// (the whole base object, whatever the op touched); extents copies only the
    /// tier_block_bytes blocks the op touches and flushes only dirty blocks; family (the
    /// default) is whole-object for tier_admission ceph and ceph-corrected, extents for
    /// predictive.
    Set {
        /// The pool.
        pool: String,
        /// The setting.
        key: String,
        /// Its value.
        value: String,
    },
    /// Print a pool setting (size, min_size, pg_num, crush_rule, quota_max_bytes,
    /// quota_max_objects, a cache pool setting), or `all` of them.
    Get {
        /// The pool.
        pool: String,
        /// The setting, or `all`.
        key: String,
    },
    /// Cache tier I/O per second over `--interval` seconds (promote, flush, evict, hits),
    /// dirty objects and totals since the server started (`ceph osd pool stats`).
    Stats {
        /// Only this cache pool.
        pool: Option<String>,
        /// Seconds between the two samples the rates come from.
        #[arg(long, default_value_t = 1.0)]
        interval: f64,
    },
    /// The pools; with `detail`, every pool's placement and tier settings (`ceph osd pool ls
    /// detail`).
    Ls {
        /// `detail` for the settings.
        detail: Option<String>,
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
        PoolCommand::Set { pool, key, value } if is_pool_key(&key) => post(
            client,
            &format!("/api/pools/{}/set", segment(&pool)),
            json!({ "key": key, "value": value }),
        ),
        PoolCommand::Set { pool, key, value } => post(
            client,
            "/api/tiers/set",
            json!({ "pool": pool, "key": key, "value": value }),
        ),
        PoolCommand::Get { pool, key } if is_pool_key(&key) || key == "all" => {
            let path = format!("/api/pools/{}/settings", segment(&pool));
            let settings: serde_json::Map<String, Value> = client.json("GET", &path, b"")?;
            for (name, value) in &settings {
                if key == "all" || *name == key {
                    let value = value
                        .as_str()
                        .map_or_else(|| value.to_string(), str::to_string);
                    println!("{name}: {value}");
                }
            }
            Ok(())
        }
        PoolCommand::Get { pool, key } => {
            let path = format!("/api/tiers/get/{}/{}", segment(&pool), segment(&key));
            let reply: Value = client.json("GET", &path, b"")?;
            println!("{key}: {}", reply["value"].as_str().unwrap_or_default());
            Ok(())
        }
        PoolCommand::Stats { pool, interval } => {
            if !(interval > 0.0 && interval <= 3600.0) {
                anyhow::bail!("--interval must be in (0, 3600] seconds");
            }
            let before: Vec<TierEntry> = client.json("GET", "/api/tiers", b"")?;
            std::thread::sleep(std::time::Duration::from_secs_f64(interval));
            let tiers: Vec<TierEntry> = client.json("GET", "/api/tiers", b"")?;
            let mut shown = 0;
            for entry in tiers
                .iter()
                .filter(|e| pool.as_deref().is_none_or(|p| p == e.config.cache_pool))
            {
                shown += 1;
                let s = &entry.stats;
                let earlier = before
                    .iter()
                    .find(|b| b.config.cache_pool == entry.config.cache_pool)
                    .map(|b| b.stats.clone())
                    .unwrap_or_default();
                let rate = |now: u64, then: u64| now.saturating_sub(then) as f64 / interval;
                println!(
                    "pool {} (cache tier of {}, {}, admission {})",
                    s.cache_pool, s.base_pool, s.mode, s.admission
                );
                println!(
                    "  client io {:.0} rd/s {:.0} wr/s, hit ratio {:.3} in the interval",
                    rate(s.reads, earlier.reads),
                    rate(s.writes, earlier.writes),
                    {
                        let hits = s.hits.saturating_sub(earlier.hits);
                        let misses = s.misses.saturating_sub(earlier.misses);
                        hits as f64 / (hits + misses).max(1) as f64
                    }
                );
                println!(
                    "  cache tiering io {}/s flush, {}/s promote, {:.0} op/s flush, {:.0} op/s promote, {:.0} op/s evict",
                    human_bytes(rate(s.flushed_bytes, earlier.flushed_bytes) as u64),
                    human_bytes(rate(s.promoted_bytes, earlier.promoted_bytes) as u64),
                    rate(s.flushes, earlier.flushes),
                    rate(s.promotions, earlier.promotions),
                    rate(s.evictions, earlier.evictions),
                );
                println!(
                    "  objects: {} cached ({}), {} dirty, admission capacity {} objects",
                    s.objects,
                    human_bytes(s.cached_bytes),
                    s.dirty_objects,
                    s.capacity_objects
                );
                println!(
                    "  since start: {} reads, {} writes, hit ratio {:.3} ({} hits, {} misses, {} proxied); {} promotions ({}), {} throttled, {} flushes ({}), {} evictions, {} writes around a full cache, {} flush conflicts; {} client waits on the agent (longest {:.1} ms, {} over 100 ms)",
                    s.reads,
                    s.writes,
                    s.hit_ratio(),
                    s.hits,
                    s.misses,
                    s.proxied,
                    s.promotions,
                    human_bytes(s.promoted_bytes),
                    s.promotions_throttled,
                    s.flushes,
                    human_bytes(s.flushed_bytes),
                    s.evictions,
                    s.writes_around_full,
                    s.flush_conflicts,
                    s.agent_waits,
                    s.agent_wait_us_max as f64 / 1000.0,
                    s.agent_waits_over_100ms
                );
            }
            if shown == 0 {
                match pool {
                    Some(pool) => {
                        anyhow::bail!("pool '{pool}' is not a cache tier (strata osd tier ls)")
                    }
                    None => println!("no cache tiers (strata osd tier add BASE CACHE)"),
                }
            }
            Ok(())
        }
        PoolCommand::Ls { detail } => pool_ls(client, detail.as_deref()),
    }
}

/// A placement setting or quota of any pool (the server's `/api/pools/{name}/...`), not a
/// cache pool setting.
fn is_pool_key(key: &str) -> bool {
    cluster::POOL_KEYS.contains(&key) || key == "crush_rule"
}

/// `strata osd pool ls [detail]`: Ceph's one line per pool, with the tier fields.
fn pool_ls(client: &Client, detail: Option<&str>) -> Result<()> {
    let pools: Vec<server::report::PoolEntry> = client.json("GET", "/api/pools", b"")?;
    match detail {
        None => {
            for pool in pools {
                println!("{}", pool.name);
            }
            return Ok(());
        }
        Some("detail") => {}
        Some(other) => anyhow::bail!("strata osd pool ls: {other:?} is not `detail`"),
    }
    let tiers: Vec<TierEntry> = client.json("GET", "/api/tiers", b"")?;
    for pool in pools {
        let mut line = format!(
            "pool {} '{}' {} size {} min_size {} pg_num {} crush_rule {} objects {}",
            pool.id,
            pool.name,
            if pool.erasure.is_some() {
                "erasure"
            } else {
                "replicated"
            },
            pool.size,
            pool.min_size,
            pool.pg_num,
            pool.crush_rule,
            pool.objects
        );
        if pool.quota_max_bytes != 0 {
            line.push_str(&format!(" max_bytes {}", pool.quota_max_bytes));
        }
        if pool.quota_max_objects != 0 {
            line.push_str(&format!(" max_objects {}", pool.quota_max_objects));
        }
        let caches: Vec<&TierEntry> = tiers
            .iter()
            .filter(|t| t.config.base_pool == pool.name)
            .collect();
        if !caches.is_empty() {
            let names: Vec<&str> = caches
                .iter()
                .map(|t| t.config.cache_pool.as_str())
                .collect();
            line.push_str(&format!(" tiers [{}]", names.join(",")));
            if let Some(overlay) = caches.iter().find(|t| t.config.overlay) {
                line.push_str(&format!(
                    " read_tier {0} write_tier {0}",
                    overlay.config.cache_pool
                ));
            }
        }
        if let Some(tier) = tiers.iter().find(|t| t.config.cache_pool == pool.name) {
            let c = &tier.config.settings;
            line.push_str(&format!(
                " tier_of '{}' cache_mode {} target_bytes {} target_objects {} hit_set {}{{fpp {}}} {}s x{} min_read_recency_for_promote {} min_write_recency_for_promote {} cache_target_dirty_ratio {} cache_target_dirty_high_ratio {} cache_target_full_ratio {} cache_min_flush_age {} cache_min_evict_age {} tier_admission {} predictive_period {} predictive_smoothing {} predictive_threshold {} tier_block_bytes {} tier_promote_granularity {}",
                tier.config.base_pool,
                tier.config.mode.name(),
                c.target_max_bytes,
                c.target_max_objects,
                c.hit_set_type.name(),
                c.hit_set_fpp,
                c.hit_set_period,
                c.hit_set_count,
                c.min_read_recency_for_promote,
                c.min_write_recency_for_promote,
                c.cache_target_dirty_ratio,
                c.cache_target_dirty_high_ratio,
                c.cache_target_full_ratio,
                c.cache_min_flush_age,
                c.cache_min_evict_age,
                c.tier_admission.name(),
                c.predictive_period,
                c.predictive_smoothing,
                c.predictive_threshold,
                c.tier_block_bytes,
                c.tier_promote_granularity.name()
            ));
        }
        println!("{line}");
    }
    Ok(())
}
