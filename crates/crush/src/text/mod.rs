//! The text crushmap format (`crushtool -d` writes it, `crushtool -c` reads it).

use crate::error::Result;
use crate::map::CrushMap;

/// Compile crushmap source text into a map, as `crushtool -c` does.
pub fn compile(source: &str) -> Result<CrushMap> {
    let _ = source;
    Err(crate::error::CrushError::Invalid("text compiler not implemented yet".into()))
}

/// Decompile a map into text, byte-identical to `crushtool -d`.
pub fn decompile(map: &CrushMap) -> String {
    let _ = map;
    String::new()
}
