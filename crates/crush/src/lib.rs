//! Ceph-compatible CRUSH, bit for bit with Ceph 16.2 (Pacific).
//!
//! Owns: the CRUSH map model ([`map`]), the rjenkins1 hash, bucket choice functions, the rule
//! interpreter, the binary crushmap codec (what `ceph osd getcrushmap` / `crushtool -c` write) and
//! the text format (`crushtool -d`). Invariant: for any map Ceph accepts, [`mapper`] returns the
//! very OSD list Ceph's `crush_do_rule` returns.

pub mod map;
pub mod mapper;

pub use map::*;
