//! osdmap: Ceph's OSD map, bit-exact with Ceph 16.2 (Pacific).
//!
//! Owns: decoding osdmaps (binary, as `ceph osd getmap` writes them, and `ceph osd dump
//! --format json` plus a binary crushmap), the pool/PG arithmetic (`pg_t`, `ceph_stable_mod`,
//! object-name hashing) and the PG -> OSD mapping pipeline of `OSDMap::_pg_to_up_acting_osds`:
//! CRUSH -> drop nonexistent -> pg_upmap / pg_upmap_items -> drop down -> primary affinity ->
//! pg_temp / primary_temp. Also the text `osdmaptool` prints for the same questions.
//!
//! Invariants: decoding never panics on any input (errors name the byte offset and field);
//! for any map Ceph accepts, [`OsdMap::pg_to_up_acting`] returns what Ceph's
//! `pg_to_up_acting_osds` returns.

pub mod addr;
pub mod decode;
pub mod error;
pub mod json;
pub mod map;
pub mod mapping;
pub mod pg;
pub mod pool;
pub mod tool;

pub use error::{OsdMapError, Result};
pub use map::{OsdMap, ITEM_NONE};
pub use mapping::UpActing;
pub use pg::PgId;
pub use pool::{Pool, PoolType};

impl OsdMap {
    /// Decode a binary osdmap (`ceph osd getmap -o FILE`, `osdmaptool --save`); checks the crc.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        decode::decode(bytes)
    }
}
