//! Eviction policies, one file each. Every one implements [`Eviction`]; wrap it in
//! [`crate::admission::Filtered`] with any admission filter to get a [`crate::Cache`].
//!
//! Capacities count objects. Parameters follow libCacheSim's defaults so the validation against
//! the reference table compares like with like.

mod arc;
mod belady;
mod fifo;
mod lirs;
mod lru;
mod s3fifo;
mod sieve;
mod two_q;
mod wtinylfu;

pub use arc::Arc;
pub use belady::Belady;
pub use fifo::Fifo;
pub use lirs::Lirs;
pub use lru::Lru;
pub use s3fifo::{S3Fifo, S3FifoConfig};
pub use sieve::Sieve;
pub use two_q::TwoQ;
pub use wtinylfu::{WTinyLfu, WTinyLfuConfig};

use crate::{Key, Request};

/// Which object leaves when space is needed. Pure; capacities in objects.
pub trait Eviction: Send {
    /// Whether `key` is cached (ghost entries do not count).
    fn contains(&self, key: Key) -> bool;
    /// Updates state for a hit on a cached key. Some policies evict on a hit (SLRU cooling).
    fn on_hit(&mut self, request: &Request, evicted: &mut Vec<Key>);
    /// Inserts a key that is not cached, evicting first while full.
    fn insert(&mut self, request: &Request, evicted: &mut Vec<Key>);
    /// The key the next insert would evict, when the policy can tell without changing state.
    fn victim(&self) -> Option<Key>;
    /// Removes a cached key (invalidation); returns whether it was cached.
    fn remove(&mut self, key: Key) -> bool;
    /// Objects cached.
    fn len(&self) -> usize;
    /// Whether nothing is cached.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Maximum objects cached.
    fn capacity(&self) -> usize;
    /// Display name.
    fn name(&self) -> String;
}
