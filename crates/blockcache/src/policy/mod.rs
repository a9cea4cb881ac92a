//! Pure policy decisions: no I/O, no clock, no threads. The executor ([`crate::BlockCache`])
//! passes state and time in and carries the returned decision out.
//!
//! - [`mode`]: what a cache mode does with a read or write to a line in a given state;
//! - [`cutoff`]: sequential stream detection over many concurrent streams;
//! - [`promotion`]: always / nhit;
//! - [`eviction`]: which I/O class gives up a line;
//! - [`cleaning`]: when and how much the background cleaner flushes.

pub mod cleaning;
pub mod cutoff;
pub mod eviction;
pub mod mode;
pub mod promotion;
