//! Plain types of the API: pools, object metadata, listing, statistics.

/// A pool's numeric id (Ceph's `int64_t` pool id).
pub type PoolId = i64;

/// What to create a pool with ([`crate::Rados::pool_create`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolSpec {
    /// Name; unique in the cluster, 1..=255 bytes.
    pub name: String,
    /// Replicas per object. Default 3.
    pub size: u32,
    /// Replicas that must be available for a write to be accepted; `None`: `size - size / 2`
    /// (Ceph's default, 2 of 3).
    pub min_size: Option<u32>,
    /// Placement groups; a power of two is best. Default 32.
    pub pg_num: u32,
    /// Place only on OSDs of this device class (`ssd`, `hdd`, ...); `None` with `crush_rule`
    /// `None`: every OSD.
    pub device_class: Option<String>,
    /// Place with this CRUSH rule instead (exclusive with `device_class`).
    pub crush_rule: Option<String>,
}

impl PoolSpec {
    /// A replicated pool of 3, min_size 2, 32 PGs, on every OSD.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            size: 3,
            min_size: None,
            pg_num: 32,
            device_class: None,
            crush_rule: None,
        }
    }

    /// The same, with `size` replicas.
    pub fn with_size(mut self, size: u32) -> Self {
        self.size = size;
        self
    }

    /// The same, on one device class.
    pub fn with_device_class(mut self, class: impl Into<String>) -> Self {
        self.device_class = Some(class.into());
        self
    }

    /// The same, with `pg_num` placement groups.
    pub fn with_pg_num(mut self, pg_num: u32) -> Self {
        self.pg_num = pg_num;
        self
    }

    /// `min_size` as given or defaulted.
    pub fn effective_min_size(&self) -> u32 {
        self.min_size.unwrap_or(self.size - self.size / 2)
    }
}

/// A pool as the cluster knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolInfo {
    /// Numeric id.
    pub id: PoolId,
    /// Name.
    pub name: String,
    /// Replicas per object.
    pub size: u32,
    /// Replicas needed to accept a write.
    pub min_size: u32,
    /// Placement groups.
    pub pg_num: u32,
    /// Name of the CRUSH rule placing it.
    pub crush_rule: String,
    /// The device class that rule takes, if any.
    pub device_class: Option<String>,
    /// Whether the pool is erasure-coded (its objects keep no omap, and it cannot be a cache
    /// tier) rather than replicated.
    pub erasure_coded: bool,
}

/// An object's metadata ([`crate::IoCtx::stat`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjectStat {
    /// Logical size.
    pub size_bytes: u64,
    /// Last modification, ns since the Unix epoch.
    pub mtime_ns: u64,
    /// Version: grows with every change of the object (RADOS' user version).
    pub version: u64,
}

/// Where an object listing continues. Opaque: pass back what [`ListPage::next`] gave.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ListCursor(pub String);

impl ListCursor {
    /// The beginning of a pool.
    pub fn start() -> Self {
        Self::default()
    }
}

/// One page of an object listing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListPage {
    /// Object names; no order across pages is promised beyond the cursor's.
    pub objects: Vec<String>,
    /// Where the next page starts; `None` when the listing is complete.
    pub next: Option<ListCursor>,
}

/// One page of omap entries ([`crate::IoCtx::omap_get_vals`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OmapPage {
    /// Entries in key order.
    pub entries: Vec<(Vec<u8>, Vec<u8>)>,
    /// Whether more entries follow the last one returned.
    pub more: bool,
}

/// Space and objects of one pool.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// The pool.
    pub name: String,
    /// Objects (counted once, not per replica).
    pub objects: u64,
    /// Logical bytes stored (once, not per replica).
    pub stored_bytes: u64,
    /// Device bytes allocated to the pool over all replicas.
    pub allocated_bytes: u64,
    /// Metadata bytes (object records and omap, key + value) over all replicas.
    pub metadata_bytes: u64,
    /// Objects with fewer up-to-date replicas than the pool's size.
    pub degraded_objects: u64,
    /// How full the fullest OSD the pool can place on is (Ceph's pool flags): at
    /// [`FullLevel::Full`] writes that add data or objects to the pool are refused with
    /// [`crate::RadosError::NoSpace`].
    pub full_level: FullLevel,
}

/// How full an OSD or a pool is, by Ceph's three ratios (`nearfull_ratio`,
/// `backfillfull_ratio`, `full_ratio`), in increasing order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FullLevel {
    /// Below the nearfull ratio.
    #[default]
    Ok,
    /// At or above `nearfull_ratio`: a warning; space waiting for garbage collection should
    /// be reclaimed now.
    Nearfull,
    /// At or above `backfillfull_ratio`: recovery copies nothing more onto it.
    Backfillfull,
    /// At or above `full_ratio`: writes that add data to its pools are refused.
    Full,
}

impl FullLevel {
    /// Ceph's name of the state: `ok`, `nearfull`, `backfillfull`, `full`.
    pub fn name(self) -> &'static str {
        match self {
            FullLevel::Ok => "ok",
            FullLevel::Nearfull => "nearfull",
            FullLevel::Backfillfull => "backfillfull",
            FullLevel::Full => "full",
        }
    }
}

/// Space and health of the whole cluster ([`crate::Rados::cluster_stats`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterStats {
    /// Capacity of all OSDs.
    pub total_bytes: u64,
    /// Device bytes allocated over all OSDs (replicas included).
    pub used_bytes: u64,
    /// Free bytes over all OSDs.
    pub free_bytes: u64,
    /// Objects over all pools (once, not per replica).
    pub objects: u64,
    /// OSDs in the cluster.
    pub osds: u32,
    /// OSDs up.
    pub osds_up: u32,
    /// OSDs in.
    pub osds_in: u32,
    /// Map epoch.
    pub epoch: u64,
    /// Per pool.
    pub pools: Vec<PoolStats>,
    /// The OSDs at or past `nearfull_ratio`, with their level, in id order (empty when
    /// none is, or when the backend does not say).
    pub full_osds: Vec<(i32, FullLevel)>,
}

impl ClusterStats {
    /// The level of the fullest OSD.
    pub fn full_level(&self) -> FullLevel {
        self.full_osds
            .iter()
            .map(|(_, level)| *level)
            .max()
            .unwrap_or_default()
    }
}
