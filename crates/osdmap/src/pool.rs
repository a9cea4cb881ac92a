//! Pools (`pg_pool_t`): the fields placement needs, their PG arithmetic, and what
//! `osdmaptool --print` shows.

use std::collections::BTreeMap;

use crate::pg::{stable_mod, stable_mod_mask, ObjectHash, PgId};

/// Pool types with Ceph's codes (equal to the CRUSH rule types).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolType {
    /// 1: whole copies; the acting set shifts left over missing OSDs.
    Replicated,
    /// 3: erasure coded; positions are shard ids, missing OSDs leave holes.
    Erasure,
    /// Anything else Ceph might write.
    Unknown(u8),
}

impl PoolType {
    pub fn from_code(code: u8) -> Self {
        match code {
            1 => Self::Replicated,
            3 => Self::Erasure,
            other => Self::Unknown(other),
        }
    }
    pub fn code(self) -> u8 {
        match self {
            Self::Replicated => 1,
            Self::Erasure => 3,
            Self::Unknown(code) => code,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Self::Replicated => "replicated",
            Self::Erasure => "erasure",
            Self::Unknown(_) => "???",
        }
    }
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "replicated" => Some(Self::Replicated),
            "erasure" => Some(Self::Erasure),
            _ => None,
        }
    }
}

/// `pg_pool_t::FLAG_*` bits with the names `ceph osd dump` prints, in Ceph's order.
pub const POOL_FLAG_NAMES: &[(u64, &str)] = &[
    (1 << 0, "hashpspool"),
    (1 << 1, "full"),
    (1 << 2, "ec_overwrites"),
    (1 << 3, "incomplete_clones"),
    (1 << 4, "nodelete"),
    (1 << 5, "nopgchange"),
    (1 << 6, "nosizechange"),
    (1 << 7, "write_fadvise_dontneed"),
    (1 << 8, "noscrub"),
    (1 << 9, "nodeep-scrub"),
    (1 << 10, "full_quota"),
    (1 << 11, "nearfull"),
    (1 << 12, "backfillfull"),
    (1 << 13, "selfmanaged_snaps"),
    (1 << 14, "pool_snaps"),
    (1 << 15, "creating"),
    (1 << 16, "eio"),
    (1 << 17, "bulk"),
];

/// `pg_autoscale_mode_t::UNKNOWN`: printed as nothing.
pub const AUTOSCALE_MODE_UNKNOWN: u8 = u8::MAX;

/// `FLAG_HASHPSPOOL`: placement seeds are hashed with the pool id (so pools do not overlap).
pub const FLAG_HASHPSPOOL: u64 = 1;

/// One pool. Fields are Ceph's `pg_pool_t` fields of the same name; only those that placement
/// or `--print` need are kept, the rest are skipped by the decoder.
#[derive(Debug, Clone, PartialEq)]
pub struct Pool {
    pub id: i64,
    pub name: String,
    pub pool_type: PoolType,
    /// Replicas (replicated) or k+m shards (erasure).
    pub size: u32,
    pub min_size: u32,
    /// The CRUSH rule id (`crush_rule`, a ruleset id in pre-luminous maps).
    pub crush_rule: i32,
    pub object_hash: ObjectHash,
    pub pg_num: u32,
    pub pgp_num: u32,
    /// `FLAG_*` bits; see [`POOL_FLAG_NAMES`].
    pub flags: u64,
    pub last_change: u32,
    pub stripe_width: u32,
    pub erasure_code_profile: String,
    /// Application name -> key/value metadata (`application rbd`).
    pub application_metadata: BTreeMap<String, BTreeMap<String, String>>,
    pub pg_num_target: u32,
    pub pgp_num_target: u32,
    pub pg_num_pending: u32,
    /// 0 = off, 1 = warn, 2 = on, 255 = unknown ([`AUTOSCALE_MODE_UNKNOWN`]).
    pub pg_autoscale_mode: u8,
    /// Printed fields the mapping does not use, kept so `--print` matches osdmaptool.
    pub extra: PoolExtra,
}

/// Less-used `pg_pool_t` fields, kept for `osdmaptool --print` compatibility.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PoolExtra {
    pub auid: u64,
    pub quota_max_bytes: u64,
    pub quota_max_objects: u64,
    pub tiers: Vec<u64>,
    pub tier_of: i64,
    pub read_tier: i64,
    pub write_tier: i64,
    pub cache_mode: u8,
    pub target_max_bytes: u64,
    pub target_max_objects: u64,
    pub min_read_recency_for_promote: i32,
    pub min_write_recency_for_promote: i32,
    pub expected_num_objects: u64,
    pub fast_read: bool,
    pub last_force_op_resend: u32,
    pub last_force_op_resend_prenautilus: u32,
    pub last_force_op_resend_preluminous: u32,
    /// `hit_set_params` type; 0 = none.
    pub hit_set_type: u8,
}

impl Pool {
    /// A pool with Ceph's defaults for everything but what placement needs.
    pub fn new(id: i64, name: &str, pool_type: PoolType, size: u32, pg_num: u32) -> Self {
        Self {
            id,
            name: name.to_string(),
            pool_type,
            size,
            min_size: size - size / 2,
            crush_rule: 0,
            object_hash: ObjectHash::Rjenkins,
            pg_num,
            pgp_num: pg_num,
            flags: FLAG_HASHPSPOOL,
            last_change: 0,
            stripe_width: 0,
            erasure_code_profile: String::new(),
            application_metadata: BTreeMap::new(),
            pg_num_target: pg_num,
            pgp_num_target: pg_num,
            pg_num_pending: pg_num,
            pg_autoscale_mode: AUTOSCALE_MODE_UNKNOWN,
            extra: PoolExtra {
                tier_of: -1,
                read_tier: -1,
                write_tier: -1,
                ..PoolExtra::default()
            },
        }
    }

    pub fn is_hashpspool(&self) -> bool {
        self.flags & FLAG_HASHPSPOOL != 0
    }

    /// Replicated pools shift OSDs left over holes; erasure pools keep positions.
    pub fn can_shift_osds(&self) -> bool {
        match self.pool_type {
            PoolType::Replicated => true,
            PoolType::Erasure | PoolType::Unknown(_) => false,
        }
    }

    pub fn pg_num_mask(&self) -> u32 {
        stable_mod_mask(self.pg_num)
    }

    pub fn pgp_num_mask(&self) -> u32 {
        stable_mod_mask(self.pgp_num)
    }

    /// All PG ids of the pool, in order.
    pub fn pgs(&self) -> impl Iterator<Item = PgId> + '_ {
        (0..self.pg_num).map(move |seed| PgId::new(self.id, seed))
    }

    /// `raw_pg_to_pg`: fold a raw seed (a name hash) into `[0, pg_num)`.
    pub fn raw_pg_to_pg(&self, pg: PgId) -> PgId {
        PgId::new(
            pg.pool,
            stable_mod(pg.seed, self.pg_num, self.pg_num_mask()),
        )
    }

    /// `raw_pg_to_pps`: the CRUSH input (placement seed) of a PG.
    pub fn raw_pg_to_pps(&self, pg: PgId) -> u32 {
        let folded = stable_mod(pg.seed, self.pgp_num, self.pgp_num_mask());
        // Ceph passes the 64-bit pool id where a 32-bit word is expected: it truncates.
        let pool_word = pg.pool as u32;
        if self.is_hashpspool() {
            crush::hash::crush_hash32_2(folded, pool_word)
        } else {
            folded.wrapping_add(pool_word)
        }
    }

    /// `hash_key`: the raw seed of an object name (and namespace).
    pub fn hash_key(&self, key: &str, namespace: &str) -> u32 {
        if namespace.is_empty() {
            return self.object_hash.hash(key.as_bytes());
        }
        // Ceph hashes "<namespace>\x1f<key>".
        let mut buffer = Vec::with_capacity(namespace.len() + 1 + key.len());
        buffer.extend_from_slice(namespace.as_bytes());
        buffer.push(0x1f);
        buffer.extend_from_slice(key.as_bytes());
        self.object_hash.hash(&buffer)
    }

    /// The flags as `ceph osd dump` prints them (`hashpspool,nodelete`).
    pub fn flags_string(&self) -> String {
        POOL_FLAG_NAMES
            .iter()
            .filter(|(bit, _)| self.flags & bit != 0)
            .map(|(_, name)| *name)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// `pg_autoscale_mode` as its name.
    pub fn autoscale_mode_name(&self) -> Option<&'static str> {
        match self.pg_autoscale_mode {
            0 => Some("off"),
            1 => Some("warn"),
            2 => Some("on"),
            _ => None,
        }
    }

    pub fn autoscale_mode_from_name(name: &str) -> u8 {
        match name {
            "off" => 0,
            "warn" => 1,
            "on" => 2,
            _ => AUTOSCALE_MODE_UNKNOWN,
        }
    }
}
