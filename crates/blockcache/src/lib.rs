//! # blockcache: an Open-CAS-style cached block device
//!
//! Owns [`BlockCache`]: a fast *cache* [`device::Device`] in front of a slow *core* device,
//! itself a `Device` (so it can be exported over NBD or sit under an OSD). Parity with
//! Open-CAS: cache lines of 4-64 KiB fixed at creation; modes wt, wb, wa, wi, wo, pt switchable
//! at run time; promotion always / nhit; sequential cut-off always / full / never over many
//! concurrent streams; I/O classes by request size from casadm's CSV with eviction priority
//! and allocation share; cleaning alru / acp / nop in the background and flush on demand;
//! `casadm -P`-like statistics; metadata on the cache device with a clean-shutdown flag so a
//! clean stop loads warm and a crash in wb loses no acknowledged write.
//!
//! [`LayeredSpec`] names a cached device in one string (`cache:OPTIONS:FAST|SLOW`) and opens
//! it, for `cluster.toml`'s OSDs and every command that takes a device.
//!
//! Layout: [`policy`] decides (pure: no I/O, no clock), [`state`] keeps the in-memory
//! metadata, [`layout`] is the on-disk format, `cache` is the executor.
//!
//! ## Invariants
//! - Every line is on exactly one list: free, dirty, or the clean LRU of its class; the map
//!   and the lines agree ([`BlockCache::check_invariants`]).
//! - A clean line equals its core line; dirty data exists only in the cache and is read from
//!   there in every mode.
//! - A write-back write is acknowledged only after its data and its line's metadata entry are
//!   on the cache device (see the `cache` module for the ordering argument).
//! - A line whose on-disk entry may say dirty is never reused before a clean entry is durable.
//! - Offsets and lengths are multiples of the larger of the two devices' block sizes.

mod cache;
pub mod config;
pub mod cores;
pub mod error;
mod hash;
pub mod ioclass;
pub mod layout;
mod lists;
pub mod policy;
pub mod spec;
mod state;
pub mod stats;

pub use cache::{BlockCache, StartMode, STRIPES, STRIPE_LINES};
pub use config::{
    CacheConfig, CacheMode, CleaningConfig, PromotionConfig, SeqCutoffConfig, SeqCutoffPolicy,
};
pub use cores::{CoreSet, CoreView, CORE_ALIGN_BYTES};
pub use error::CacheError;
pub use ioclass::IoClasses;
pub use spec::{CachedSpec, LayeredSpec};
pub use stats::{CacheStats, RequestStats};
