//! Device-class shadow trees, as Ceph's `CrushWrapper::populate_classes` and
//! `device_class_clone` build them.
//!
//! For every root that is not itself a shadow bucket (ascending id) and every class (ascending
//! class id), the root is cloned depth-first into `NAME~CLASS` buckets that keep only the
//! devices of that class. Shadow ids come from the source's `id -N class C` lines when present,
//! otherwise the lowest free id that no such line reserves. A clone that Ceph cannot build (a
//! uniform bucket gaining an item whose weight differs from the clone's 0, a weight overflow, an
//! id clash) stops the whole population silently, leaving what was built so far: the compiler
//! ignores `populate_classes`' return value, and we reproduce the resulting map.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::buckets::{add_item, make_bucket};
use crate::map::{Bucket, CrushMap};

/// Original bucket id -> (class id -> shadow id), as written in the source.
pub(crate) type ClassBuckets = BTreeMap<i32, BTreeMap<i32, i32>>;

/// Why a clone stopped (the reason is not reported, as in Ceph).
struct CloneFailed;

/// Slots past this many are refused (see `compiler::BUCKET_SLOTS_MAX`).
pub(crate) fn add_bucket_at(map: &mut CrushMap, id: i32, slots_max: usize) -> Option<usize> {
    let position = usize::try_from(-1_i64 - i64::from(id)).ok()?;
    if position >= slots_max {
        return None;
    }
    while position >= map.buckets.len() {
        let grown = if map.buckets.is_empty() {
            8
        } else {
            map.buckets.len() * 2
        };
        map.buckets.resize(grown.min(slots_max.max(8)), None);
    }
    match map.buckets.get(position) {
        Some(None) => Some(position),
        _ => None,
    }
}

/// Build every shadow tree (`populate_classes`).
pub(crate) fn populate_classes(
    map: &mut CrushMap,
    old_class_buckets: &ClassBuckets,
    slots_max: usize,
) {
    let used_ids: BTreeSet<i32> = old_class_buckets
        .values()
        .flat_map(|by_class| by_class.values().copied())
        .collect();
    let roots = nonshadow_roots(map);
    let classes: Vec<i32> = map.class_names.keys().copied().collect();
    let mut names: HashMap<String, i32> = map
        .item_names
        .iter()
        .map(|(&id, name)| (name.clone(), id))
        .collect();
    let mut cloner = Cloner {
        map,
        old_class_buckets,
        used_ids: &used_ids,
        names: &mut names,
        slots_max,
        next_free: -1,
    };
    for root in roots {
        for &class in &classes {
            if cloner.clone_tree(root, class).is_err() {
                return;
            }
        }
    }
}

/// Buckets no other bucket holds, that are not shadows, ascending by id.
fn nonshadow_roots(map: &CrushMap) -> Vec<i32> {
    let held: BTreeSet<i32> = map
        .iter_buckets()
        .flat_map(|b| b.items.iter().copied())
        .collect();
    let mut roots: Vec<i32> = map
        .iter_buckets()
        .map(|b| b.id)
        .filter(|id| !held.contains(id))
        .filter(|id| {
            !map.item_names
                .get(id)
                .is_some_and(|name| name.contains('~'))
        })
        .collect();
    roots.sort_unstable();
    roots
}

/// One bucket being cloned: the copy so far and the next item of the original to look at.
struct Frame {
    original_id: i32,
    copy_name: String,
    copy: Bucket,
    next_item: usize,
}

struct Cloner<'a> {
    map: &'a mut CrushMap,
    old_class_buckets: &'a ClassBuckets,
    used_ids: &'a BTreeSet<i32>,
    names: &'a mut HashMap<String, i32>,
    slots_max: usize,
    /// Ceph searches for a free shadow id from -1 every time; ids are only ever taken here, so
    /// the search can resume where the last one ended.
    next_free: i32,
}

/// What entering a bucket gave: an existing clone, or a fresh frame to fill.
enum Entered {
    Existing(i32),
    Fresh(Frame),
}

impl Cloner<'_> {
    /// `device_class_clone(original_id, class)`, depth-first with an explicit stack so deep
    /// hierarchies cannot overflow the call stack.
    fn clone_tree(&mut self, root: i32, class: i32) -> Result<i32, CloneFailed> {
        let mut stack = match self.enter(root, class)? {
            Entered::Existing(id) => return Ok(id),
            Entered::Fresh(frame) => vec![frame],
        };
        let straw_calc_version = self.map.tunables.straw_calc_version;
        loop {
            let Some(frame) = stack.last_mut() else {
                return Err(CloneFailed);
            };
            let original = self.map.bucket(frame.original_id).ok_or(CloneFailed)?;
            if let Some(&item) = original.items.get(frame.next_item) {
                let weight = original.item_weight(frame.next_item);
                frame.next_item += 1;
                if item >= 0 {
                    if self.map.device_classes.get(&item) == Some(&class) {
                        add_item(&mut frame.copy, item, weight, straw_calc_version)
                            .map_err(|_| CloneFailed)?;
                    }
                    continue;
                }
                match self.enter(item, class)? {
                    Entered::Existing(child) => {
                        let child_weight = self.map.bucket(child).ok_or(CloneFailed)?.weight;
                        add_item(&mut frame.copy, child, child_weight, straw_calc_version)
                            .map_err(|_| CloneFailed)?;
                    }
                    Entered::Fresh(child_frame) => stack.push(child_frame),
                }
                continue;
            }
            let Some(done) = stack.pop() else {
                return Err(CloneFailed);
            };
            let (id, weight) = self.finish(done, class)?;
            match stack.last_mut() {
                Some(parent) => add_item(&mut parent.copy, id, weight, straw_calc_version)
                    .map_err(|_| CloneFailed)?,
                None => return Ok(id),
            }
        }
    }

    /// The checks at the top of `device_class_clone`, then an empty copy.
    fn enter(&mut self, original_id: i32, class: i32) -> Result<Entered, CloneFailed> {
        let item_name = self.map.item_names.get(&original_id).ok_or(CloneFailed)?;
        let class_name = self.map.class_names.get(&class).ok_or(CloneFailed)?;
        let copy_name = format!("{item_name}~{class_name}");
        if let Some(&existing) = self.names.get(&copy_name) {
            return Ok(Entered::Existing(existing));
        }
        let original = self.map.bucket(original_id).ok_or(CloneFailed)?;
        let copy = make_bucket(
            original.algorithm,
            original.hash,
            original.type_id,
            &[],
            &[],
            0,
        )
        .map_err(|_| CloneFailed)?;
        Ok(Entered::Fresh(Frame {
            original_id,
            copy_name,
            copy,
            next_item: 0,
        }))
    }

    /// Pick the shadow id, add the copy to the map and record its name and class.
    fn finish(&mut self, frame: Frame, class: i32) -> Result<(i32, u32), CloneFailed> {
        let preset = self
            .old_class_buckets
            .get(&frame.original_id)
            .and_then(|by_class| by_class.get(&class))
            .copied();
        let id = match preset {
            Some(id) => id,
            None => {
                let mut id = self.next_free;
                while self.map.bucket(id).is_some() || self.used_ids.contains(&id) {
                    id = id.checked_sub(1).ok_or(CloneFailed)?;
                }
                self.next_free = id;
                id
            }
        };
        let position = add_bucket_at(self.map, id, self.slots_max).ok_or(CloneFailed)?;
        let mut copy = frame.copy;
        copy.id = id;
        let weight = copy.weight;
        if let Some(slot) = self.map.buckets.get_mut(position) {
            *slot = Some(copy);
        }
        self.map.device_classes.insert(id, class);
        self.map.item_names.insert(id, frame.copy_name.clone());
        self.names.insert(frame.copy_name, id);
        self.map
            .class_buckets
            .entry(frame.original_id)
            .or_default()
            .insert(class, id);
        Ok((id, weight))
    }
}
