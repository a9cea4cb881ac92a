//! The semantic pass of `crushtool -c` (Ceph's `CrushCompiler::parse_crush` and friends): turns
//! parsed statements into a [`CrushMap`], checking what Ceph checks, in Ceph's order, so the same
//! texts fail; each failure names its source line.
//!
//! Where Ceph crashes, corrupts memory or allocates without bound, we refuse with an error
//! instead: uniform buckets of weight 0, tree buckets over 64 items, bucket ids below
//! -[`BUCKET_SLOTS_MAX`], rule ids from [`RULE_SLOTS_MAX`] on, device ids that overflow to negative
//! values or pass [`DEVICE_ID_MAX`] (mapping would allocate per-device tables that large).
//! Everything else Ceph accepts, we accept, even oddities such as a device id declared twice
//! (the last name wins, both names refer to the id).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::buckets::{make_bucket, BuildError, TREE_ITEMS_MAX};
use super::classes::{add_bucket_at, populate_classes, ClassBuckets};
use super::parse::{
    BucketDecl, ChooseArgsDecl, DeviceDecl, RuleDecl, Statement, StepKind, TunableDecl, TypeDecl,
};
use crate::error::{CrushError, Result};
use crate::map::{
    BucketAlgorithm, ChooseArg, ChooseArgMap, CrushMap, Rule, RuleStep, Tunables, DEVICE_ID_MAX,
};

/// The most bucket slots (`max_buckets`) a compiled map may have: ids go down to -65536.
pub const BUCKET_SLOTS_MAX: usize = 1 << 16;
/// Rule ids must be below this.
pub const RULE_SLOTS_MAX: usize = 1 << 16;
/// `CRUSH_MAX_RULES`: Ceph refuses to grow the rule array once it holds this many slots.
const CRUSH_MAX_RULES: usize = 256;
/// `CRUSH_MAX_DEVICE_WEIGHT` and `CRUSH_MAX_BUCKET_WEIGHT`, 16.16.
const DEVICE_WEIGHT_MAX: u32 = 100 * 0x10000;
const BUCKET_WEIGHT_MAX: u32 = 65535 * 0x10000;

fn error(line: usize, message: impl Into<String>) -> CrushError {
    CrushError::Parse {
        line,
        message: message.into(),
    }
}

/// `adjust_bucket_item_place`: Ceph swaps bucket blocks so that (most) buckets come after the
/// buckets they hold. It swaps by position with a stale name -> position table, so the result
/// is not always a topological order; we reproduce it exactly. Ceph tests every pair (i < j);
/// only pairs where block i holds block j's name act, so we visit just those, in the same order.
pub(crate) fn adjust_bucket_order(statements: &mut [Statement]) -> Result<()> {
    let mut names: Vec<String> = Vec::new();
    let mut position_of: HashMap<String, usize> = HashMap::new();
    let mut items_of: HashMap<String, BTreeSet<String>> = HashMap::new();
    let mut line_of: HashMap<String, usize> = HashMap::new();
    let mut indices_of: HashMap<String, Vec<usize>> = HashMap::new();
    for (position, statement) in statements.iter().enumerate() {
        if let Statement::Bucket(bucket) = statement {
            indices_of
                .entry(bucket.name.clone())
                .or_default()
                .push(names.len());
            names.push(bucket.name.clone());
            position_of.insert(bucket.name.clone(), position);
            line_of.insert(bucket.name.clone(), bucket.line);
            let items = items_of.entry(bucket.name.clone()).or_default();
            items.extend(bucket.items.iter().map(|item| item.name.clone()));
        }
    }
    let empty = BTreeSet::new();
    for (i, first) in names.iter().enumerate() {
        let first_items = items_of.get(first).unwrap_or(&empty);
        let mut held: Vec<usize> = first_items
            .iter()
            .filter_map(|item| indices_of.get(item))
            .flatten()
            .copied()
            .filter(|&j| j > i)
            .collect();
        held.sort_unstable();
        held.dedup();
        for j in held {
            let Some(second) = names.get(j) else {
                continue;
            };
            if items_of.get(second).unwrap_or(&empty).contains(first) {
                return Err(error(
                    line_of.get(first).copied().unwrap_or(0),
                    format!("bucket '{first}' and bucket '{second}' include each other"),
                ));
            }
            if let (Some(&a), Some(&b)) = (position_of.get(first), position_of.get(second)) {
                statements.swap(a, b);
            }
        }
    }
    Ok(())
}

/// Compiler state: the map being built and the name tables `CrushCompiler` keeps.
pub(crate) struct Compiler {
    pub map: CrushMap,
    item_id: HashMap<String, i32>,
    /// Ids taken or reserved (Ceph's `id_item` keys), for automatic bucket ids.
    taken_ids: BTreeSet<i32>,
    item_weight: HashMap<i32, u32>,
    type_id: HashMap<String, i32>,
    rule_id: HashMap<String, i32>,
    class_buckets: ClassBuckets,
    saw_rule: bool,
    /// Where the search for an automatic bucket id resumes: Ceph starts at -1 each time, but
    /// taken ids are never released, so everything above this is taken.
    next_auto_id: i32,
}

impl Compiler {
    /// A compiler starting from legacy tunables, as `crushtool -c` does.
    pub fn new() -> Self {
        Self {
            map: CrushMap {
                tunables: Tunables::default(),
                ..CrushMap::default()
            },
            item_id: HashMap::new(),
            taken_ids: BTreeSet::new(),
            item_weight: HashMap::new(),
            type_id: HashMap::new(),
            rule_id: HashMap::new(),
            class_buckets: ClassBuckets::new(),
            saw_rule: false,
            next_auto_id: -1,
        }
    }

    /// `parse_crush` over the (already reordered) statements, then `finalize`.
    pub fn run(mut self, statements: &[Statement]) -> Result<CrushMap> {
        // `find_used_bucket_ids`: every `id` line of every bucket, class ids included, is
        // reserved before any automatic id is handed out.
        for statement in statements {
            if let Statement::Bucket(bucket) = statement {
                self.taken_ids.extend(bucket.ids.iter().map(|line| line.id));
            }
        }
        for statement in statements {
            match statement {
                Statement::Tunable(tunable) => self.tunable(tunable)?,
                Statement::Device(device) => self.device(device)?,
                Statement::Type(type_decl) => self.type_decl(type_decl),
                Statement::Bucket(bucket) => {
                    if self.saw_rule {
                        return Err(error(bucket.line, "buckets must be defined before rules"));
                    }
                    self.bucket(bucket)?;
                }
                Statement::Rule(rule) => self.rule(rule)?,
                Statement::ChooseArgs(choose_args) => self.choose_args(choose_args)?,
            }
        }
        Ok(self.finish())
    }

    fn finish(mut self) -> CrushMap {
        let map = &mut self.map;
        let mut max_devices = 0_i32;
        for bucket in map.iter_buckets() {
            for &item in &bucket.items {
                if item >= max_devices {
                    max_devices = item.saturating_add(1);
                }
            }
        }
        if let Some((&largest, _)) = map.item_names.iter().next_back() {
            if largest >= max_devices {
                max_devices = largest.saturating_add(1);
            }
        }
        map.max_devices = max_devices;
        for args in map.choose_args.values_mut() {
            args.retain(|_, arg| !(arg.ids.is_empty() && arg.weight_set.is_empty()));
        }
        self.map
    }

    pub fn tunable(&mut self, tunable: &TunableDecl) -> Result<()> {
        let value = tunable.value;
        let tunables = &mut self.map.tunables;
        match tunable.name.as_str() {
            "choose_local_tries" => tunables.choose_local_tries = value as u32,
            "choose_local_fallback_tries" => tunables.choose_local_fallback_tries = value as u32,
            "choose_total_tries" => tunables.choose_total_tries = value as u32,
            "chooseleaf_descend_once" => tunables.chooseleaf_descend_once = value as u32,
            "chooseleaf_vary_r" => tunables.chooseleaf_vary_r = value as u8,
            "chooseleaf_stable" => tunables.chooseleaf_stable = value as u8,
            "straw_calc_version" => tunables.straw_calc_version = value as u8,
            "allowed_bucket_algs" => tunables.allowed_bucket_algs = value as u32,
            other => {
                return Err(error(
                    tunable.line,
                    format!("tunable {other} not recognized"),
                ))
            }
        }
        Ok(())
    }

    fn class_id(&mut self, name: &str) -> i32 {
        if let Some((&id, _)) = self
            .map
            .class_names
            .iter()
            .find(|(_, n)| n.as_str() == name)
        {
            return id;
        }
        let id = self
            .map
            .class_names
            .keys()
            .next_back()
            .map_or(0, |&last| last.saturating_add(1));
        self.map.class_names.insert(id, name.to_string());
        id
    }

    pub fn device(&mut self, device: &DeviceDecl) -> Result<()> {
        if device.id < 0 {
            return Err(error(
                device.line,
                format!("device id of '{}' is out of range", device.name),
            ));
        }
        if device.id > DEVICE_ID_MAX {
            return Err(error(
                device.line,
                format!(
                    "device id {} of '{}' is above {DEVICE_ID_MAX}, the highest strata maps \
                     (per-device tables are sized by the highest id)",
                    device.id, device.name
                ),
            ));
        }
        if self.item_id.contains_key(&device.name) {
            return Err(error(
                device.line,
                format!("item {} defined twice", device.name),
            ));
        }
        // A device id declared twice is accepted, as in Ceph: the last name is the id's name
        // and both names refer to the id.
        self.map.item_names.insert(device.id, device.name.clone());
        self.item_id.insert(device.name.clone(), device.id);
        self.taken_ids.insert(device.id);
        if let Some(class) = &device.class {
            let class_id = self.class_id(class);
            self.map.device_classes.insert(device.id, class_id);
        }
        Ok(())
    }

    pub fn type_decl(&mut self, type_decl: &TypeDecl) {
        self.type_id.insert(type_decl.name.clone(), type_decl.id);
        self.map
            .type_names
            .insert(type_decl.id, type_decl.name.clone());
    }

    pub fn bucket(&mut self, bucket: &BucketDecl) -> Result<()> {
        let name = &bucket.name;
        let type_id = *self.type_id.get(&bucket.type_name).ok_or_else(|| {
            error(
                bucket.line,
                format!("bucket type '{}' is not defined", bucket.type_name),
            )
        })?;
        if self.item_id.contains_key(name) {
            return Err(error(
                bucket.line,
                format!("bucket or device '{name}' is already defined"),
            ));
        }
        let mut id = 0_i32;
        let mut class_ids: BTreeMap<i32, i32> = BTreeMap::new();
        for id_line in &bucket.ids {
            match &id_line.class {
                Some(class) => {
                    let class_id = self.class_id(class);
                    if class_ids.insert(class_id, id_line.id).is_some() {
                        return Err(error(
                            id_line.line,
                            format!("duplicate device class {class} for bucket {name}"),
                        ));
                    }
                }
                None => id = id_line.id,
            }
        }
        let algorithm = match bucket.alg.as_str() {
            "uniform" => BucketAlgorithm::Uniform,
            "list" => BucketAlgorithm::List,
            "tree" => BucketAlgorithm::Tree,
            "straw" => BucketAlgorithm::Straw,
            "straw2" => BucketAlgorithm::Straw2,
            other => {
                return Err(error(
                    bucket.alg_line,
                    format!("unknown bucket alg '{other}'"),
                ))
            }
        };
        let hash = bucket.hashes.last().copied().unwrap_or(0) as u8;
        let (items, weights) = self.bucket_items(bucket, algorithm)?;
        if id == 0 {
            id = self.next_auto_id;
            while self.taken_ids.contains(&id) {
                id = id
                    .checked_sub(1)
                    .ok_or_else(|| error(bucket.line, "no bucket id left"))?;
            }
            self.next_auto_id = id;
        }
        for (class, shadow) in class_ids {
            self.class_buckets
                .entry(id)
                .or_default()
                .insert(class, shadow);
        }
        let total = weights.iter().fold(0_u32, |sum, &w| sum.wrapping_add(w));
        self.taken_ids.insert(id);
        self.item_id.insert(name.clone(), id);
        self.item_weight.insert(id, total);
        let straw_calc_version = self.map.tunables.straw_calc_version;
        let mut built = make_bucket(
            algorithm,
            hash,
            type_id as u16,
            &items,
            &weights,
            straw_calc_version,
        )
        .map_err(|e| match e {
            BuildError::UniformZeroWeight => error(
                bucket.line,
                format!("uniform bucket '{name}' has items of weight 0"),
            ),
            BuildError::TreeTooLarge => error(
                bucket.line,
                format!("tree bucket '{name}' has more than {TREE_ITEMS_MAX} items"),
            ),
            BuildError::WeightOverflow | BuildError::UniformWeightMismatch => {
                error(bucket.line, format!("bucket '{name}' weight overflows"))
            }
        })?;
        built.id = id;
        let position = add_bucket_at(&mut self.map, id, BUCKET_SLOTS_MAX).ok_or_else(|| {
            if self.map.bucket(id).is_some() {
                error(bucket.line, format!("Duplicate bucket id {id}"))
            } else {
                error(
                    bucket.line,
                    format!("bucket id {id} is out of range (ids go down to -{BUCKET_SLOTS_MAX})"),
                )
            }
        })?;
        if let Some(slot) = self.map.buckets.get_mut(position) {
            *slot = Some(built);
        }
        self.map.item_names.insert(id, name.clone());
        Ok(())
    }

    /// Both item passes of `parse_bucket`: positions, then ids and weights.
    fn bucket_items(
        &self,
        bucket: &BucketDecl,
        algorithm: BucketAlgorithm,
    ) -> Result<(Vec<i32>, Vec<u32>)> {
        let name = &bucket.name;
        let mut used_positions = BTreeSet::new();
        for item in &bucket.items {
            if let Some(position) = item.position {
                if !used_positions.insert(position) {
                    return Err(error(
                        item.line,
                        format!(
                            "item '{}' in bucket '{name}' has explicit pos {position}, which is occupied",
                            item.name
                        ),
                    ));
                }
            }
        }
        let count = i64::try_from(bucket.items.len()).unwrap_or(i64::MAX);
        let size = used_positions
            .last()
            .map_or(count, |&last| count.max(i64::from(last)));
        let mut placed: BTreeMap<i64, (i32, u32)> = BTreeMap::new();
        let mut next_free = 0_i64;
        let mut total = 0_u32;
        let mut uniform_weight: Option<u32> = None;
        for item in &bucket.items {
            let item_id = *self.item_id.get(&item.name).ok_or_else(|| {
                error(
                    item.line,
                    format!("item '{}' in bucket '{name}' is not defined", item.name),
                )
            })?;
            let mut weight = self.item_weight.get(&item_id).copied().unwrap_or(0x10000);
            if let Some(given) = item.weight {
                weight = given;
                if weight > DEVICE_WEIGHT_MAX && item_id >= 0 {
                    return Err(error(item.line, "device weight limited to 100"));
                }
                if weight > BUCKET_WEIGHT_MAX && item_id < 0 {
                    return Err(error(
                        item.line,
                        "bucket weight limited to 65535 to prevent overflow",
                    ));
                }
            }
            if algorithm == BucketAlgorithm::Uniform {
                match uniform_weight {
                    None => uniform_weight = Some(weight),
                    Some(first) if first != weight => {
                        return Err(error(
                            item.line,
                            format!(
                                "item '{}' in uniform bucket '{name}' has weight {} but previous item(s) have weight {}; uniform bucket items must all have identical weights",
                                item.name,
                                weight as f32 / 65536.0,
                                first as f32 / 65536.0
                            ),
                        ))
                    }
                    Some(_) => {}
                }
            }
            let mut position = i64::from(item.position.unwrap_or(-1));
            if position >= size {
                return Err(error(
                    item.line,
                    format!(
                        "item '{}' in bucket '{name}' has pos {position} >= size {size}",
                        item.name
                    ),
                ));
            }
            if position < 0 {
                while used_positions.contains(&(next_free as i32)) {
                    next_free += 1;
                }
                position = next_free;
                next_free += 1;
            }
            placed.insert(position, (item_id, weight));
            total = total.checked_add(weight).ok_or_else(|| {
                error(
                    item.line,
                    format!(
                        "the weights of bucket '{name}' overflow 32 bits; lower the item weights"
                    ),
                )
            })?;
        }
        // Every position below `size` is filled: `size` only exceeds the item count when some
        // explicit pos is >= the count, and that item failed above.
        let items = placed.values().map(|&(id, _)| id).collect();
        let weights = placed.values().map(|&(_, w)| w).collect();
        Ok((items, weights))
    }

    pub fn rule(&mut self, rule: &RuleDecl) -> Result<()> {
        if !self.saw_rule {
            self.saw_rule = true;
            populate_classes(&mut self.map, &self.class_buckets, BUCKET_SLOTS_MAX);
        }
        let rule_name = rule.name.clone().unwrap_or_default();
        if rule.name.is_some() && self.rule_id.contains_key(&rule_name) {
            return Err(error(
                rule.line,
                format!("rule name '{rule_name}' already defined"),
            ));
        }
        let Ok(slot) = usize::try_from(rule.id) else {
            return Err(error(
                rule.line,
                format!("unable to add rule id {} for rule '{rule_name}'", rule.id),
            ));
        };
        if self.map.rule(slot).is_some() {
            return Err(error(rule.line, format!("rule {} already exists", rule.id)));
        }
        let rule_slots = self.map.rules.len();
        if slot >= RULE_SLOTS_MAX || (slot >= rule_slots && rule_slots + 1 > CRUSH_MAX_RULES) {
            return Err(error(
                rule.line,
                format!("unable to add rule id {} for rule '{rule_name}'", rule.id),
            ));
        }
        let mut steps = Vec::with_capacity(rule.steps.len());
        for step in &rule.steps {
            steps.push(self.step(&rule_name, step.line, &step.kind)?);
        }
        if slot >= self.map.rules.len() {
            self.map.rules.resize(slot + 1, None);
        }
        if let Some(entry) = self.map.rules.get_mut(slot) {
            *entry = Some(Rule {
                ruleset: rule.id as u8,
                rule_type: rule.rule_type,
                min_size: rule.min_size as u8,
                max_size: rule.max_size as u8,
                steps,
            });
        }
        if let Some(name) = &rule.name {
            self.map.rule_names.insert(rule.id, name.clone());
            self.rule_id.insert(name.clone(), rule.id);
        }
        Ok(())
    }

    fn step(&self, rule_name: &str, line: usize, kind: &StepKind) -> Result<RuleStep> {
        Ok(match kind {
            StepKind::Take { item, class } => {
                let mut id = *self.item_id.get(item).ok_or_else(|| {
                    error(
                        line,
                        format!("in rule '{rule_name}' item '{item}' not defined"),
                    )
                })?;
                if let Some(class) = class {
                    let class_id = self
                        .map
                        .class_names
                        .iter()
                        .find(|(_, n)| n.as_str() == class)
                        .map(|(&c, _)| c)
                        .ok_or_else(|| {
                            error(
                                line,
                                format!("in rule '{rule_name}' class '{class}' is not defined"),
                            )
                        })?;
                    let by_class = self.map.class_buckets.get(&id).ok_or_else(|| {
                        error(
                            line,
                            format!(
                                "in rule '{rule_name}' step take {item} has no class information"
                            ),
                        )
                    })?;
                    id = *by_class.get(&class_id).ok_or_else(|| {
                        error(
                            line,
                            format!(
                                "in rule '{rule_name}' step take {item} no matching bucket for class {class}"
                            ),
                        )
                    })?;
                }
                RuleStep::Take { item: id }
            }
            StepKind::SetChooseTries(v) => RuleStep::SetChooseTries(*v),
            StepKind::SetChooseLocalTries(v) => RuleStep::SetChooseLocalTries(*v),
            StepKind::SetChooseLocalFallbackTries(v) => RuleStep::SetChooseLocalFallbackTries(*v),
            StepKind::SetChooseLeafTries(v) => RuleStep::SetChooseLeafTries(*v),
            StepKind::SetChooseLeafVaryR(v) => RuleStep::SetChooseLeafVaryR(*v),
            StepKind::SetChooseLeafStable(v) => RuleStep::SetChooseLeafStable(*v),
            StepKind::Choose {
                leaf,
                indep,
                count,
                type_name,
            } => {
                let type_id = *self.type_id.get(type_name).ok_or_else(|| {
                    error(
                        line,
                        format!("in rule '{rule_name}' type '{type_name}' not defined"),
                    )
                })?;
                let (count, type_id) = (*count, type_id);
                match (leaf, indep) {
                    (false, false) => RuleStep::ChooseFirstN { count, type_id },
                    (false, true) => RuleStep::ChooseIndep { count, type_id },
                    (true, false) => RuleStep::ChooseLeafFirstN { count, type_id },
                    (true, true) => RuleStep::ChooseLeafIndep { count, type_id },
                }
            }
            StepKind::Emit => RuleStep::Emit,
        })
    }

    pub fn choose_args(&mut self, decl: &ChooseArgsDecl) -> Result<()> {
        let key = i64::from(decl.index);
        if self.map.choose_args.contains_key(&key) {
            return Err(error(
                decl.line,
                format!("choose_args {} duplicated", decl.index),
            ));
        }
        let mut args = ChooseArgMap::new();
        for arg in &decl.args {
            let size = self
                .map
                .bucket(arg.bucket_id)
                .map(|b| b.items.len())
                .ok_or_else(|| {
                    error(
                        arg.line,
                        format!("bucket_id {} does not exist", arg.bucket_id),
                    )
                })?;
            let entry: &mut ChooseArg = args.entry(arg.bucket_id).or_default();
            if let Some(weight_set) = &arg.weight_set {
                for weights in weight_set {
                    if weights.len() != size {
                        return Err(error(
                            arg.line,
                            format!(
                                "bucket {} needs exactly {size} weights but got {}",
                                arg.bucket_id,
                                weights.len()
                            ),
                        ));
                    }
                }
                entry.weight_set = weight_set.clone();
            }
            if let Some(ids) = &arg.ids {
                if ids.len() != size {
                    return Err(error(
                        arg.line,
                        format!(
                            "bucket {} needs exactly {size} ids but got {}",
                            arg.bucket_id,
                            ids.len()
                        ),
                    ));
                }
                entry.ids = ids.clone();
            }
        }
        self.map.choose_args.insert(key, args);
        Ok(())
    }
}
