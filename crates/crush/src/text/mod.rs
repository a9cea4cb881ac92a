//! The text crushmap format (`crushtool -d` writes it, `crushtool -c` reads it), Ceph 16.2.
//!
//! * [`compile`] parses the source grammar and builds the map exactly as `crushtool -c` does:
//!   same automatic ids, same weights (parsed with `strtof` in single precision), same straw
//!   lengths and tree node weights, same device-class shadow trees and shadow ids, so that the
//!   result encodes to the bytes crushtool writes and maps identically.
//! * [`decompile`] writes the text `crushtool -d` prints, byte for byte.
//! * [`MapBuilder`] builds the same map from code, for the embedded cluster.
//!
//! Layout: `lexer` prepares the source and offers Spirit-like scanner primitives, `parse` is
//! the grammar, `compiler` the semantic pass, `classes` the shadow trees, [`buckets`] the bucket
//! construction of Ceph's builder.c, `print` the decompiler, [`builder`] the map builder.
//!
//! Known differences from Ceph, all where Ceph misbehaves: errors name the line of the
//! offending token (crushtool names the end of the last good statement); inputs that crash or
//! exhaust crushtool are refused with an error (see `compiler`); the shadow copy of a tree
//! bucket gets zeroed new node slots where Ceph leaves heap garbage.
//!
//! Errors are [`CrushError::Parse`](crate::CrushError::Parse) with the 1-based source line;
//! nothing here panics on any input.

pub mod buckets;
pub mod builder;
mod classes;
mod compiler;
pub(crate) mod lexer;
pub(crate) mod parse;
mod print;

pub use builder::MapBuilder;

use crate::error::Result;
use crate::map::CrushMap;

/// Compile crushmap source text into a map, as `crushtool -c` does.
pub fn compile(source: &str) -> Result<CrushMap> {
    let mut statements = parse::parse(source)?;
    compiler::adjust_bucket_order(&mut statements)?;
    compiler::Compiler::new().run(&statements)
}

/// Decompile a map into text, byte-identical to `crushtool -d`.
pub fn decompile(map: &CrushMap) -> String {
    print::decompile(map)
}
