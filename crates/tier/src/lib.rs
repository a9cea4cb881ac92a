//! # tier: a live cache tier over any `rados` backend
//!
//! Owns the cache tier of the running system (seeds 000 and 003, live): a cache pool (fast
//! devices) in front of a base pool (slow ones), configured as Ceph names it (`osd tier add`,
//! `cache-mode`, `set-overlay`, `osd pool set CACHE ...`: [`config`]), persisted in the cache
//! pool itself, and served by an overlay: [`TieredRados::io_ctx`] of a base pool with an overlay
//! is an [`OverlayIoCtx`], so every layer above (S3 gateway, volumes) runs on a tiered pool
//! unchanged, on the embedded cluster or on Ceph.
//!
//! The data path ([`engine`]): each op asks the admission policy (the `policy` crate's Ceph
//! tier or seed 000's hot table, the code the simulator runs) and goes to the cache when the
//! object is cached (always: so no read returns older data than the last acknowledged write,
//! whatever the policy now thinks), is promoted (its metadata and the blocks the op touches,
//! or the whole object at Ceph's granularity, `tier_promote_granularity whole-object`), or
//! is proxied to the base pool (and maybe promoted in the background, throttled). A cached object's state (present and dirty blocks, whiteout, the
//! base object's flush generation) is an xattr written in the same atomic op as its data;
//! flushes write the dirty blocks and metadata back guarded by that generation, so an older
//! copy never overwrites a newer one, and a restart finds every dirty object in the cache pool.
//! The [`agent`] flushes and evicts in the background on a [`worker::Worker`].
//!
//! Invariant: every change of an object's cached state holds that object's lock in this
//! process (background flushes and promotions take it only around their cache-side steps, not
//! over the base pool's I/O); one process serves a tier (as one `strata serve` serves a data
//! directory).

pub mod agent;
pub mod config;
pub mod engine;
pub mod error;
pub mod overlay;
pub mod registry;
pub mod state;
pub mod stats;

pub use config::{AdmissionFamily, CacheMode, PromoteGranularity, TierConfig, TierSettings};
pub use engine::{policy_for, system_wall_clock, Tier, WallClock};
pub use error::{Result, TierError};
pub use overlay::OverlayIoCtx;
pub use registry::{TieredRados, CONFIG_OBJECT};
pub use stats::TierStats;
