//! The in-memory OSD map: pools, OSD states and weights, the CRUSH map and the exception
//! tables (pg_temp, primary_temp, pg_upmap, pg_upmap_items) that placement reads.
//!
//! Fields are private; accessors answer with Ceph's semantics (`exists`, `is_up`, `is_in`),
//! and the few mutators are what tests and the balancer need to model changes.

use std::collections::BTreeMap;

use crush::CrushMap;

use crate::addr::AddrVec;
use crate::pg::PgId;
use crate::pool::Pool;

/// `CEPH_OSD_EXISTS`.
pub const OSD_EXISTS: u32 = 1;
/// `CEPH_OSD_UP`.
pub const OSD_UP: u32 = 2;
/// `CEPH_OSD_IN`: reweight 1.0 in 16.16.
pub const WEIGHT_IN: u32 = 0x10000;
/// `CEPH_OSD_OUT`.
pub const WEIGHT_OUT: u32 = 0;
/// `CEPH_OSD_DEFAULT_PRIMARY_AFFINITY` (= the maximum), 16.16.
pub const DEFAULT_PRIMARY_AFFINITY: u32 = 0x10000;
/// `CRUSH_ITEM_NONE`: a hole in an erasure-coded set.
pub const ITEM_NONE: i32 = crush::ITEM_NONE;

/// The most OSD slots a decoded map may have (2^20): a bound on what a corrupt input can make
/// us allocate; real clusters stay far below it.
pub const MAX_OSD_LIMIT: i32 = 1 << 20;

/// OSD state bit names as `osdmaptool --print` lists them (`exists,up`).
pub const OSD_STATE_NAMES: &[(u32, &str)] = &[
    (1 << 0, "exists"),
    (1 << 1, "up"),
    (1 << 2, "autoout"),
    (1 << 3, "new"),
    (1 << 4, "full"),
    (1 << 5, "nearfull"),
    (1 << 6, "backfillfull"),
    (1 << 7, "destroyed"),
    (1 << 8, "noup"),
    (1 << 9, "nodown"),
    (1 << 10, "noin"),
    (1 << 11, "noout"),
    (1 << 12, "stop"),
];

/// A time as Ceph encodes it (`utime_t`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct UTime {
    pub seconds: u32,
    pub nanoseconds: u32,
}

/// Per-OSD history (`osd_info_t`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OsdInfo {
    pub last_clean_begin: u32,
    pub last_clean_end: u32,
    pub up_from: u32,
    pub up_thru: u32,
    pub down_at: u32,
    pub lost_at: u32,
}

/// Cluster-wide settings `--print` shows; none of them affects placement.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClusterInfo {
    pub fsid: [u8; 16],
    pub created: UTime,
    pub modified: UTime,
    pub last_up_change: UTime,
    pub last_in_change: UTime,
    /// `CEPH_OSDMAP_*` flag bits.
    pub flags: u32,
    pub pool_max: i32,
    pub crush_version: i32,
    pub nearfull_ratio: f32,
    pub full_ratio: f32,
    pub backfillfull_ratio: f32,
    /// `ceph_release_t` codes (12 = luminous, 16 = pacific), 0 = unset.
    pub require_min_compat_client: u8,
    pub require_osd_release: u8,
    pub cluster_snapshot: String,
    pub stretch_mode_enabled: bool,
}

/// An OSD map. Build it with [`OsdMap::decode`] (binary, as `ceph osd getmap` writes it) or
/// [`OsdMap::from_dump_json`] (`ceph osd dump --format json` plus a binary crushmap).
#[derive(Debug, Clone)]
pub struct OsdMap {
    pub(crate) epoch: u32,
    pub(crate) info: ClusterInfo,
    pub(crate) pools: BTreeMap<i64, Pool>,
    pub(crate) max_osd: i32,
    pub(crate) osd_state: Vec<u32>,
    pub(crate) osd_weight: Vec<u32>,
    /// `None` when every OSD has the default affinity (Ceph drops the vector then).
    pub(crate) osd_primary_affinity: Option<Vec<u32>>,
    pub(crate) osd_info: Vec<OsdInfo>,
    pub(crate) osd_uuid: Vec<[u8; 16]>,
    pub(crate) osd_public_addrs: Vec<AddrVec>,
    pub(crate) osd_cluster_addrs: Vec<AddrVec>,
    pub(crate) pg_temp: BTreeMap<PgId, Vec<i32>>,
    pub(crate) primary_temp: BTreeMap<PgId, i32>,
    pub(crate) pg_upmap: BTreeMap<PgId, Vec<i32>>,
    pub(crate) pg_upmap_items: BTreeMap<PgId, Vec<(i32, i32)>>,
    pub(crate) erasure_code_profiles: BTreeMap<String, BTreeMap<String, String>>,
    pub(crate) crush: CrushMap,
}

impl OsdMap {
    /// An empty map around a CRUSH map: `max_osd` slots, none existing, no pools.
    pub fn new(crush: CrushMap, max_osd: i32) -> Self {
        let slots = usize::try_from(max_osd).unwrap_or(0);
        Self {
            epoch: 0,
            info: ClusterInfo::default(),
            pools: BTreeMap::new(),
            max_osd: max_osd.max(0),
            osd_state: vec![0; slots],
            osd_weight: vec![WEIGHT_OUT; slots],
            osd_primary_affinity: None,
            osd_info: vec![OsdInfo::default(); slots],
            osd_uuid: vec![[0; 16]; slots],
            osd_public_addrs: vec![AddrVec::default(); slots],
            osd_cluster_addrs: vec![AddrVec::default(); slots],
            pg_temp: BTreeMap::new(),
            primary_temp: BTreeMap::new(),
            pg_upmap: BTreeMap::new(),
            pg_upmap_items: BTreeMap::new(),
            erasure_code_profiles: BTreeMap::new(),
            crush,
        }
    }

    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// Cluster-wide settings (fsid, flags, ratios, ...).
    pub fn cluster_info(&self) -> &ClusterInfo {
        &self.info
    }

    /// Pools by id, in id order.
    pub fn pools(&self) -> &BTreeMap<i64, Pool> {
        &self.pools
    }

    pub fn pool(&self, id: i64) -> Option<&Pool> {
        self.pools.get(&id)
    }

    /// The pool named `name`.
    pub fn pool_by_name(&self, name: &str) -> Option<&Pool> {
        self.pools.values().find(|pool| pool.name == name)
    }

    /// Add or replace a pool.
    pub fn insert_pool(&mut self, pool: Pool) {
        self.pools.insert(pool.id, pool);
    }

    pub fn crush(&self) -> &CrushMap {
        &self.crush
    }

    /// One more than the highest OSD id the map has a slot for.
    pub fn max_osd(&self) -> i32 {
        self.max_osd
    }

    fn slot(&self, osd: i32) -> Option<usize> {
        usize::try_from(osd)
            .ok()
            .filter(|&i| i < self.osd_state.len())
    }

    /// The raw `CEPH_OSD_*` state bits; 0 for ids without a slot.
    pub fn osd_state(&self, osd: i32) -> u32 {
        self.slot(osd)
            .and_then(|i| self.osd_state.get(i))
            .copied()
            .unwrap_or(0)
    }

    /// `exists`: the id has a slot and its EXISTS bit is set.
    pub fn exists(&self, osd: i32) -> bool {
        self.osd_state(osd) & OSD_EXISTS != 0
    }

    /// `is_up`: exists and up.
    pub fn is_up(&self, osd: i32) -> bool {
        self.exists(osd) && self.osd_state(osd) & OSD_UP != 0
    }

    pub fn is_down(&self, osd: i32) -> bool {
        !self.is_up(osd)
    }

    /// `is_in`: exists and reweight is not 0.
    pub fn is_in(&self, osd: i32) -> bool {
        self.exists(osd) && self.osd_weight(osd) != WEIGHT_OUT
    }

    pub fn is_out(&self, osd: i32) -> bool {
        !self.is_in(osd)
    }

    /// Reweight (`ceph osd reweight`), 16.16: 0x10000 = in, 0 = out.
    pub fn osd_weight(&self, osd: i32) -> u32 {
        self.slot(osd)
            .and_then(|i| self.osd_weight.get(i))
            .copied()
            .unwrap_or(WEIGHT_OUT)
    }

    /// All reweights indexed by OSD id, as CRUSH takes them.
    pub fn osd_weights(&self) -> &[u32] {
        &self.osd_weight
    }

    /// Primary affinity, 16.16 (0x10000 = default = always eligible).
    pub fn primary_affinity(&self, osd: i32) -> u32 {
        match (&self.osd_primary_affinity, self.slot(osd)) {
            (Some(affinity), Some(i)) => {
                affinity.get(i).copied().unwrap_or(DEFAULT_PRIMARY_AFFINITY)
            }
            _ => DEFAULT_PRIMARY_AFFINITY,
        }
    }

    pub fn osd_info(&self, osd: i32) -> OsdInfo {
        self.slot(osd)
            .and_then(|i| self.osd_info.get(i))
            .copied()
            .unwrap_or_default()
    }

    pub fn osd_uuid(&self, osd: i32) -> [u8; 16] {
        self.slot(osd)
            .and_then(|i| self.osd_uuid.get(i))
            .copied()
            .unwrap_or([0; 16])
    }

    /// Public (client-facing) addresses of an OSD; empty if unknown.
    pub fn osd_public_addrs(&self, osd: i32) -> AddrVec {
        self.slot(osd)
            .and_then(|i| self.osd_public_addrs.get(i))
            .cloned()
            .unwrap_or_default()
    }

    /// Cluster (replication) addresses of an OSD; empty if unknown.
    pub fn osd_cluster_addrs(&self, osd: i32) -> AddrVec {
        self.slot(osd)
            .and_then(|i| self.osd_cluster_addrs.get(i))
            .cloned()
            .unwrap_or_default()
    }

    /// Ids of existing OSDs, ascending.
    pub fn osds(&self) -> impl Iterator<Item = i32> + '_ {
        (0..self.max_osd).filter(move |&osd| self.exists(osd))
    }

    /// Grow or shrink the OSD slots (`set_max_osd`); new slots do not exist.
    pub fn set_max_osd(&mut self, max_osd: i32) {
        let slots = usize::try_from(max_osd).unwrap_or(0);
        self.max_osd = max_osd.max(0);
        self.osd_state.resize(slots, 0);
        self.osd_weight.resize(slots, WEIGHT_OUT);
        self.osd_info.resize(slots, OsdInfo::default());
        self.osd_uuid.resize(slots, [0; 16]);
        self.osd_public_addrs.resize(slots, AddrVec::default());
        self.osd_cluster_addrs.resize(slots, AddrVec::default());
        if let Some(affinity) = &mut self.osd_primary_affinity {
            affinity.resize(slots, DEFAULT_PRIMARY_AFFINITY);
        }
    }

    /// Set the raw state bits of an OSD (ignored for ids without a slot).
    pub fn set_osd_state(&mut self, osd: i32, state: u32) {
        if let Some(s) = self.slot(osd).and_then(|i| self.osd_state.get_mut(i)) {
            *s = state;
        }
    }

    /// Mark an existing OSD up or down.
    pub fn set_osd_up(&mut self, osd: i32, up: bool) {
        let state = self.osd_state(osd);
        self.set_osd_state(osd, if up { state | OSD_UP } else { state & !OSD_UP });
    }

    /// Set the reweight (16.16); 0 marks the OSD out.
    pub fn set_osd_weight(&mut self, osd: i32, weight: u32) {
        if let Some(w) = self.slot(osd).and_then(|i| self.osd_weight.get_mut(i)) {
            *w = weight;
        }
    }

    /// Set the primary affinity (16.16).
    pub fn set_primary_affinity(&mut self, osd: i32, affinity: u32) {
        let Some(i) = self.slot(osd) else { return };
        let slots = self.osd_state.len();
        let table = self
            .osd_primary_affinity
            .get_or_insert_with(|| vec![DEFAULT_PRIMARY_AFFINITY; slots]);
        if let Some(a) = table.get_mut(i) {
            *a = affinity;
        }
    }

    /// `pg_temp`: PG -> acting set override.
    pub fn pg_temp(&self) -> &BTreeMap<PgId, Vec<i32>> {
        &self.pg_temp
    }

    pub fn set_pg_temp(&mut self, pg: PgId, osds: Vec<i32>) {
        if osds.is_empty() {
            self.pg_temp.remove(&pg);
        } else {
            self.pg_temp.insert(pg, osds);
        }
    }

    /// `primary_temp`: PG -> acting primary override.
    pub fn primary_temp(&self) -> &BTreeMap<PgId, i32> {
        &self.primary_temp
    }

    pub fn set_primary_temp(&mut self, pg: PgId, osd: Option<i32>) {
        match osd {
            Some(osd) => self.primary_temp.insert(pg, osd),
            None => self.primary_temp.remove(&pg),
        };
    }

    /// `pg_upmap`: PG -> explicit raw OSD list.
    pub fn pg_upmap(&self) -> &BTreeMap<PgId, Vec<i32>> {
        &self.pg_upmap
    }

    pub fn set_pg_upmap(&mut self, pg: PgId, osds: Option<Vec<i32>>) {
        match osds {
            Some(osds) => self.pg_upmap.insert(pg, osds),
            None => self.pg_upmap.remove(&pg),
        };
    }

    /// `pg_upmap_items`: PG -> (from, to) OSD replacements.
    pub fn pg_upmap_items(&self) -> &BTreeMap<PgId, Vec<(i32, i32)>> {
        &self.pg_upmap_items
    }

    /// Set (Some) or remove (None) the upmap items of a PG, as `ceph osd pg-upmap-items` and
    /// `rm-pg-upmap-items` do.
    pub fn set_pg_upmap_items(&mut self, pg: PgId, items: Option<Vec<(i32, i32)>>) {
        match items {
            Some(items) => self.pg_upmap_items.insert(pg, items),
            None => self.pg_upmap_items.remove(&pg),
        };
    }

    pub fn erasure_code_profiles(&self) -> &BTreeMap<String, BTreeMap<String, String>> {
        &self.erasure_code_profiles
    }

    /// The CRUSH weight of a device (16.16) as `CrushWrapper::get_item_weight` finds it: its
    /// weight in the first bucket (by bucket index) that holds it; `None` if no bucket does.
    pub fn crush_item_weight(&self, osd: i32) -> Option<u32> {
        self.crush.iter_buckets().find_map(|bucket| {
            bucket
                .items
                .iter()
                .position(|&item| item == osd)
                .map(|position| bucket.item_weight(position))
        })
    }
}
