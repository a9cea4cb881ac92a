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
//!
//! ```
//! use osdmap::{OsdMap, PgId};
//! let bytes = include_bytes!("../../../fixtures/crush-vectors/osdmap/om_c5x12_pool1_pg2048.bin");
//! let map = OsdMap::decode(bytes)?;
//! let pool = map.pool(1).expect("pool 1");
//! assert_eq!((pool.name.as_str(), pool.pg_num), ("rbd", 2048));
//! let pg: PgId = "1.0".parse()?;
//! let mapping = map.pg_to_up_acting(pg);
//! assert_eq!((mapping.acting, mapping.acting_primary), (vec![34, 52, 16], 34));
//! assert_eq!(map.object_to_pg(1, "foo")?.to_string(), "1.406");
//! # Ok::<(), osdmap::OsdMapError>(())
//! ```

pub mod addr;
pub mod decode;
pub mod encode;
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
    /// Ceph 16.2's binary encoding of this map ([`encode`]), as `ceph osd getmap` writes it.
    pub fn encode(&self) -> Vec<u8> {
        encode::encode(self)
    }

    pub fn decode(bytes: &[u8]) -> Result<Self> {
        decode::decode(bytes)
    }
}
