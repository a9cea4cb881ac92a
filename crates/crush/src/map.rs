//! The in-memory CRUSH map: the same information Ceph's `crush_map` plus `CrushWrapper` hold
//! (buckets, rules, tunables, names, device classes and their shadow trees, choose_args).
//!
//! Fields are public and plain on purpose: the binary codec, the text compiler and the mapper
//! all read and write them, and Ceph's own structures are the specification. Invariants the
//! mapper relies on are checked by [`CrushMap::validate`], which every decoder calls.

use std::collections::BTreeMap;

/// The highest device id a map may use. Mapping sizes per-device vectors by the highest id
/// (as Ceph does), so an id like 2147483647 would need gigabytes; real clusters number their
/// OSDs densely from 0, and a million is far beyond any of them.
pub const DEVICE_ID_MAX: i32 = (1 << 20) - 1;
/// `CRUSH_ITEM_NONE`: a hole in an `indep` result (printed as 2147483647 by crushtool).
pub const ITEM_NONE: i32 = 0x7fff_ffff;
/// `CRUSH_ITEM_UNDEF`: an internal marker of the indep chooser (never returned).
pub const ITEM_UNDEF: i32 = 0x7fff_fffe;
/// 1.0 in CRUSH's 16.16 fixed point.
pub const WEIGHT_ONE: u32 = 0x10000;

/// Bucket algorithms, with Ceph's numeric codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum BucketAlgorithm {
    Uniform = 1,
    List = 2,
    Tree = 3,
    Straw = 4,
    Straw2 = 5,
}

impl BucketAlgorithm {
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            1 => Some(Self::Uniform),
            2 => Some(Self::List),
            3 => Some(Self::Tree),
            4 => Some(Self::Straw),
            5 => Some(Self::Straw2),
            _ => None,
        }
    }
    pub fn code(self) -> u8 {
        self as u8
    }
    /// The name used in the text format (`alg straw2`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Uniform => "uniform",
            Self::List => "list",
            Self::Tree => "tree",
            Self::Straw => "straw",
            Self::Straw2 => "straw2",
        }
    }
}

/// Per-algorithm data of a bucket, as Ceph keeps it (weights in 16.16 fixed point).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BucketData {
    /// Every item has the same weight.
    Uniform {
        item_weight: u32,
    },
    /// `sum_weights[i]` = sum of `item_weights[0..=i]`.
    List {
        item_weights: Vec<u32>,
        sum_weights: Vec<u32>,
    },
    /// Binary tree of node weights; leaves at odd indices (`node_weights.len()` = `1 << num_nodes`-ish
    /// as Ceph computes it: `num_nodes` is the depth-derived node count).
    Tree {
        num_nodes: u8,
        node_weights: Vec<u32>,
    },
    /// `straws[i]` are precomputed by `straw_calc_version` at build time and stored in the map.
    Straw {
        item_weights: Vec<u32>,
        straws: Vec<u32>,
    },
    Straw2 {
        item_weights: Vec<u32>,
    },
}

/// One bucket (an interior node of the hierarchy). Its id is negative.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bucket {
    pub id: i32,
    /// Type id (see [`CrushMap::type_names`]), e.g. 1 = host.
    pub type_id: u16,
    pub algorithm: BucketAlgorithm,
    /// Hash function code; 0 = rjenkins1, the only one Ceph defines.
    pub hash: u8,
    /// Total weight, 16.16.
    pub weight: u32,
    /// Child items: devices (>= 0) or buckets (< 0).
    pub items: Vec<i32>,
    pub data: BucketData,
}

impl Bucket {
    pub fn size(&self) -> usize {
        self.items.len()
    }

    /// The weight of the item at `position`, 16.16, whatever the algorithm stores.
    pub fn item_weight(&self, position: usize) -> u32 {
        match &self.data {
            BucketData::Uniform { item_weight } => *item_weight,
            BucketData::List { item_weights, .. }
            | BucketData::Straw { item_weights, .. }
            | BucketData::Straw2 { item_weights } => {
                item_weights.get(position).copied().unwrap_or(0)
            }
            BucketData::Tree { node_weights, .. } => {
                // Leaves sit at node index 2*i+1.
                node_weights.get(2 * position + 1).copied().unwrap_or(0)
            }
        }
    }
}

/// Rule step opcodes with Ceph's numeric codes (`CRUSH_RULE_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleStep {
    Noop,
    /// `step take <item>` (arg1).
    Take {
        item: i32,
    },
    ChooseFirstN {
        count: i32,
        type_id: i32,
    },
    ChooseIndep {
        count: i32,
        type_id: i32,
    },
    Emit,
    ChooseLeafFirstN {
        count: i32,
        type_id: i32,
    },
    ChooseLeafIndep {
        count: i32,
        type_id: i32,
    },
    SetChooseTries(i32),
    SetChooseLeafTries(i32),
    SetChooseLocalTries(i32),
    SetChooseLocalFallbackTries(i32),
    SetChooseLeafVaryR(i32),
    SetChooseLeafStable(i32),
}

impl RuleStep {
    pub const OP_NOOP: u32 = 0;
    pub const OP_TAKE: u32 = 1;
    pub const OP_CHOOSE_FIRSTN: u32 = 2;
    pub const OP_CHOOSE_INDEP: u32 = 3;
    pub const OP_EMIT: u32 = 4;
    pub const OP_CHOOSELEAF_FIRSTN: u32 = 6;
    pub const OP_CHOOSELEAF_INDEP: u32 = 7;
    pub const OP_SET_CHOOSE_TRIES: u32 = 8;
    pub const OP_SET_CHOOSELEAF_TRIES: u32 = 9;
    pub const OP_SET_CHOOSE_LOCAL_TRIES: u32 = 10;
    pub const OP_SET_CHOOSE_LOCAL_FALLBACK_TRIES: u32 = 11;
    pub const OP_SET_CHOOSELEAF_VARY_R: u32 = 12;
    pub const OP_SET_CHOOSELEAF_STABLE: u32 = 13;

    /// Decode Ceph's `(op, arg1, arg2)` triple. `None` for an unknown opcode.
    pub fn from_raw(op: u32, arg1: i32, arg2: i32) -> Option<Self> {
        Some(match op {
            Self::OP_NOOP => Self::Noop,
            Self::OP_TAKE => Self::Take { item: arg1 },
            Self::OP_CHOOSE_FIRSTN => Self::ChooseFirstN {
                count: arg1,
                type_id: arg2,
            },
            Self::OP_CHOOSE_INDEP => Self::ChooseIndep {
                count: arg1,
                type_id: arg2,
            },
            Self::OP_EMIT => Self::Emit,
            Self::OP_CHOOSELEAF_FIRSTN => Self::ChooseLeafFirstN {
                count: arg1,
                type_id: arg2,
            },
            Self::OP_CHOOSELEAF_INDEP => Self::ChooseLeafIndep {
                count: arg1,
                type_id: arg2,
            },
            Self::OP_SET_CHOOSE_TRIES => Self::SetChooseTries(arg1),
            Self::OP_SET_CHOOSELEAF_TRIES => Self::SetChooseLeafTries(arg1),
            Self::OP_SET_CHOOSE_LOCAL_TRIES => Self::SetChooseLocalTries(arg1),
            Self::OP_SET_CHOOSE_LOCAL_FALLBACK_TRIES => Self::SetChooseLocalFallbackTries(arg1),
            Self::OP_SET_CHOOSELEAF_VARY_R => Self::SetChooseLeafVaryR(arg1),
            Self::OP_SET_CHOOSELEAF_STABLE => Self::SetChooseLeafStable(arg1),
            _ => return None,
        })
    }

    /// Encode to Ceph's `(op, arg1, arg2)` triple.
    pub fn to_raw(self) -> (u32, i32, i32) {
        match self {
            Self::Noop => (Self::OP_NOOP, 0, 0),
            Self::Take { item } => (Self::OP_TAKE, item, 0),
            Self::ChooseFirstN { count, type_id } => (Self::OP_CHOOSE_FIRSTN, count, type_id),
            Self::ChooseIndep { count, type_id } => (Self::OP_CHOOSE_INDEP, count, type_id),
            Self::Emit => (Self::OP_EMIT, 0, 0),
            Self::ChooseLeafFirstN { count, type_id } => {
                (Self::OP_CHOOSELEAF_FIRSTN, count, type_id)
            }
            Self::ChooseLeafIndep { count, type_id } => (Self::OP_CHOOSELEAF_INDEP, count, type_id),
            Self::SetChooseTries(v) => (Self::OP_SET_CHOOSE_TRIES, v, 0),
            Self::SetChooseLeafTries(v) => (Self::OP_SET_CHOOSELEAF_TRIES, v, 0),
            Self::SetChooseLocalTries(v) => (Self::OP_SET_CHOOSE_LOCAL_TRIES, v, 0),
            Self::SetChooseLocalFallbackTries(v) => {
                (Self::OP_SET_CHOOSE_LOCAL_FALLBACK_TRIES, v, 0)
            }
            Self::SetChooseLeafVaryR(v) => (Self::OP_SET_CHOOSELEAF_VARY_R, v, 0),
            Self::SetChooseLeafStable(v) => (Self::OP_SET_CHOOSELEAF_STABLE, v, 0),
        }
    }
}

/// Rule types (`crush_rule_mask.type`).
pub const RULE_TYPE_REPLICATED: u8 = 1;
pub const RULE_TYPE_ERASURE: u8 = 3;

/// One placement rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// `ruleset` in the mask (in Pacific it equals the rule id for maps made by modern tools).
    pub ruleset: u8,
    /// 1 = replicated, 3 = erasure.
    pub rule_type: u8,
    pub min_size: u8,
    pub max_size: u8,
    pub steps: Vec<RuleStep>,
}

/// Tunables, with Ceph's field names. Defaults are the "legacy" (argonaut) values, as in
/// `crush_create()`; named profiles are in [`Tunables::profile`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tunables {
    pub choose_local_tries: u32,
    pub choose_local_fallback_tries: u32,
    pub choose_total_tries: u32,
    pub chooseleaf_descend_once: u32,
    pub chooseleaf_vary_r: u8,
    pub chooseleaf_stable: u8,
    pub straw_calc_version: u8,
    /// Bit mask of allowed bucket algorithms (1 << alg).
    pub allowed_bucket_algs: u32,
}

/// `CRUSH_LEGACY_ALLOWED_BUCKET_ALGS`: uniform, list, straw.
pub const LEGACY_ALLOWED_BUCKET_ALGS: u32 = (1 << 1) | (1 << 2) | (1 << 4);

impl Default for Tunables {
    fn default() -> Self {
        Self::profile("legacy").unwrap_or(Self {
            choose_local_tries: 2,
            choose_local_fallback_tries: 5,
            choose_total_tries: 19,
            chooseleaf_descend_once: 0,
            chooseleaf_vary_r: 0,
            chooseleaf_stable: 0,
            straw_calc_version: 0,
            allowed_bucket_algs: LEGACY_ALLOWED_BUCKET_ALGS,
        })
    }
}

impl Tunables {
    /// Ceph's named tunables profiles (`ceph osd crush tunables NAME`): legacy, argonaut, bobtail,
    /// firefly, hammer, jewel, optimal (= jewel in 16.2), default (= jewel).
    pub fn profile(name: &str) -> Option<Self> {
        let argonaut = Self {
            choose_local_tries: 2,
            choose_local_fallback_tries: 5,
            choose_total_tries: 19,
            chooseleaf_descend_once: 0,
            chooseleaf_vary_r: 0,
            chooseleaf_stable: 0,
            straw_calc_version: 0,
            allowed_bucket_algs: LEGACY_ALLOWED_BUCKET_ALGS,
        };
        let bobtail = Self {
            choose_local_tries: 0,
            choose_local_fallback_tries: 0,
            choose_total_tries: 50,
            chooseleaf_descend_once: 1,
            ..argonaut
        };
        let firefly = Self {
            chooseleaf_vary_r: 1,
            ..bobtail
        };
        let hammer = Self {
            allowed_bucket_algs: LEGACY_ALLOWED_BUCKET_ALGS | (1 << 5),
            ..firefly
        };
        let jewel = Self {
            chooseleaf_stable: 1,
            ..hammer
        };
        match name {
            "legacy" | "argonaut" => Some(argonaut),
            "bobtail" => Some(bobtail),
            "firefly" => Some(firefly),
            "hammer" => Some(hammer),
            "jewel" | "optimal" | "default" => Some(jewel),
            _ => None,
        }
    }
}

/// One bucket's entry in a choose_args set (`crush_choose_arg`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChooseArg {
    /// Replacement ids used for hashing (empty = use the bucket's own items).
    pub ids: Vec<i32>,
    /// One weight vector per position (16.16); empty = use the bucket's weights.
    pub weight_set: Vec<Vec<u32>>,
}

/// A choose_args map: bucket id -> its arguments. Ceph stores it as an array indexed by
/// `-1 - bucket_id`; we keep only buckets that have arguments.
pub type ChooseArgMap = BTreeMap<i32, ChooseArg>;

/// The whole CRUSH map.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CrushMap {
    /// Buckets indexed by `-1 - id`; `None` for unused slots (Ceph's NULL entries).
    pub buckets: Vec<Option<Bucket>>,
    /// Rules indexed by rule id; `None` for unused slots.
    pub rules: Vec<Option<Rule>>,
    /// One more than the highest device id.
    pub max_devices: i32,
    pub tunables: Tunables,
    /// Type id -> name (`type 1 host`).
    pub type_names: BTreeMap<i32, String>,
    /// Item id -> name, for devices and buckets.
    pub item_names: BTreeMap<i32, String>,
    /// Rule id -> name.
    pub rule_names: BTreeMap<i32, String>,
    /// Device id -> class id.
    pub device_classes: BTreeMap<i32, i32>,
    /// Class id -> class name.
    pub class_names: BTreeMap<i32, String>,
    /// Original bucket id -> (class id -> shadow bucket id).
    pub class_buckets: BTreeMap<i32, BTreeMap<i32, i32>>,
    /// choose_args sets by index (crushtool --test uses index 0 if present, else -1... see mapper).
    pub choose_args: BTreeMap<i64, ChooseArgMap>,
}

impl CrushMap {
    /// The bucket with this (negative) id, if present.
    pub fn bucket(&self, id: i32) -> Option<&Bucket> {
        if id >= 0 {
            return None;
        }
        let index = usize::try_from(-1_i64 - i64::from(id)).ok()?;
        self.buckets.get(index).and_then(|b| b.as_ref())
    }

    /// `max_buckets` as Ceph counts it: the length of the bucket array.
    pub fn max_buckets(&self) -> usize {
        self.buckets.len()
    }

    /// The rule with this id, if present.
    pub fn rule(&self, id: usize) -> Option<&Rule> {
        self.rules.get(id).and_then(|r| r.as_ref())
    }

    /// Iterate over present buckets.
    pub fn iter_buckets(&self) -> impl Iterator<Item = &Bucket> {
        self.buckets.iter().flatten()
    }

    /// The rule id whose name is `name`.
    pub fn rule_id_by_name(&self, name: &str) -> Option<i32> {
        self.rule_names
            .iter()
            .find(|(_, n)| n.as_str() == name)
            .map(|(id, _)| *id)
    }

    /// The item id whose name is `name`.
    pub fn item_id_by_name(&self, name: &str) -> Option<i32> {
        self.item_names
            .iter()
            .find(|(_, n)| n.as_str() == name)
            .map(|(id, _)| *id)
    }

    /// The type id whose name is `name`.
    pub fn type_id_by_name(&self, name: &str) -> Option<i32> {
        self.type_names
            .iter()
            .find(|(_, n)| n.as_str() == name)
            .map(|(id, _)| *id)
    }

    /// Is `id` a shadow bucket (a per-class copy of a bucket)?
    pub fn is_shadow_bucket(&self, id: i32) -> bool {
        self.class_buckets
            .values()
            .any(|by_class| by_class.values().any(|&shadow| shadow == id))
    }
}

impl CrushMap {
    /// Check the invariants the mapper relies on (so a decoded map can be mapped without panics or
    /// endless loops): every bucket sits at slot `-1 - id`; per-algorithm data matches the item
    /// count; every bucket item names a present bucket; the hierarchy has no cycle; choose_args
    /// refer to present buckets and their vectors match the bucket size.
    pub fn validate(&self) -> crate::error::Result<()> {
        use crate::error::CrushError;
        let invalid = |message: String| Err(CrushError::Invalid(message));
        let device_ids = self.iter_buckets().flat_map(|b| b.items.iter().copied());
        let named_ids = self.item_names.keys().copied();
        if let Some(id) = device_ids.chain(named_ids).find(|&id| id > DEVICE_ID_MAX) {
            return invalid(format!(
                "device id {id} is above {DEVICE_ID_MAX}, the highest this tool maps (per-device \
                 tables are sized by the highest id)"
            ));
        }
        for (slot, bucket) in self.buckets.iter().enumerate() {
            let Some(bucket) = bucket else { continue };
            if i64::from(bucket.id) != -1 - slot as i64 {
                return invalid(format!("bucket id {} stored in slot {slot}", bucket.id));
            }
            let size = bucket.items.len();
            let data_ok = match &bucket.data {
                BucketData::Uniform { .. } => true,
                BucketData::List {
                    item_weights,
                    sum_weights,
                } => item_weights.len() == size && sum_weights.len() == size,
                BucketData::Straw {
                    item_weights,
                    straws,
                } => item_weights.len() == size && straws.len() == size,
                BucketData::Straw2 { item_weights } => item_weights.len() == size,
                BucketData::Tree {
                    num_nodes,
                    node_weights,
                } => {
                    node_weights.len() == usize::from(*num_nodes)
                        && (size == 0 || 2 * size <= usize::from(*num_nodes))
                }
            };
            if !data_ok {
                return invalid(format!(
                    "bucket {}: {} data does not match its {size} items",
                    bucket.id,
                    bucket.algorithm.name()
                ));
            }
            for &item in &bucket.items {
                if item < 0 && self.bucket(item).is_none() {
                    return invalid(format!("bucket {} holds missing bucket {item}", bucket.id));
                }
            }
        }
        // Cycle check: depth-first over buckets, colouring 1 = on the stack, 2 = done.
        let mut colour = vec![0_u8; self.buckets.len()];
        for start in 0..self.buckets.len() {
            if colour[start] != 0 || self.buckets[start].is_none() {
                continue;
            }
            let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
            colour[start] = 1;
            while let Some(&mut (slot, ref mut next)) = stack.last_mut() {
                let items = self.buckets[slot]
                    .as_ref()
                    .map_or(&[][..], |b| &b.items[..]);
                if let Some(&item) = items.get(*next) {
                    *next += 1;
                    if item >= 0 {
                        continue;
                    }
                    let child = (-1_i64 - i64::from(item)) as usize;
                    match colour[child] {
                        0 => {
                            colour[child] = 1;
                            stack.push((child, 0));
                        }
                        1 => return invalid(format!("bucket {item} contains itself (cycle)")),
                        _ => {}
                    }
                } else {
                    colour[slot] = 2;
                    stack.pop();
                }
            }
        }
        for (index, args) in &self.choose_args {
            for (&bucket_id, arg) in args {
                let Some(bucket) = self.bucket(bucket_id) else {
                    return invalid(format!("choose_args {index}: missing bucket {bucket_id}"));
                };
                let size = bucket.items.len();
                if !arg.ids.is_empty() && arg.ids.len() != size {
                    return invalid(format!(
                        "choose_args {index}: bucket {bucket_id}: {} ids for {size} items",
                        arg.ids.len()
                    ));
                }
                if let Some(weights) = arg.weight_set.iter().find(|w| w.len() != size) {
                    return invalid(format!(
                        "choose_args {index}: bucket {bucket_id}: {} weights for {size} items",
                        weights.len()
                    ));
                }
            }
        }
        Ok(())
    }
}
