//! Ceph-compatible CRUSH, bit for bit with Ceph 16.2 (Pacific).
//!
//! Owns: the CRUSH map model ([`map`]), the rjenkins1 hash ([`hash`]), bucket choice functions,
//! the rule interpreter ([`mapper`]), the binary crushmap codec ([`codec`]: what
//! `ceph osd getcrushmap` / `crushtool -c` write) and the text format ([`text`]: `crushtool -d`).
//! Invariant: for any map Ceph accepts, [`mapper::do_rule`] returns the very OSD list Ceph's
//! `crush_do_rule` returns.

pub mod bucket;
pub mod codec;
pub mod error;
pub mod hash;
pub mod ln;
pub mod map;
pub mod mapper;
pub mod tester;
pub mod text;

pub use error::{CrushError, Result};
pub use map::*;
