//! The order in which the tiering agent lists a PG's objects: Ceph's hobject_t order
//! (src/common/hobject.h). Within one pool and namespace hobject_t sorts by the object's
//! 32-bit hash with its bits reversed (`get_bitwise_key_u32`), then by name; here the hash is
//! the low 32 bits of the one that maps the object to its PG ([`object_hash`]) and the name is
//! the key. PrimaryLogPG::agent_work lists from `TierAgentState::position` with
//! `objects_list_partial`, which returns objects at or after the position in this order and the
//! first object it did not return (`next`), or `hobject_t::get_max()` at the PG's end.

use std::collections::BTreeSet;

use crate::{mix64, Key};

/// The object's hash: its low 32 bits are Ceph's hobject_t hash, which maps it to its PG
/// (`ceph_stable_mod`) and orders the scan.
pub(crate) fn object_hash(key: Key) -> u64 {
    mix64(u64::from(key) ^ 0xCE9)
}

/// The object's place in its PG's scan order: the bit-reversed 32-bit hash, then the key.
pub(crate) fn scan_key(key: Key) -> u64 {
    let hash = object_hash(key) as u32;
    (u64::from(hash.reverse_bits()) << 32) | u64::from(key)
}

fn key_of(scan_key: u64) -> Key {
    scan_key as Key
}

/// A position in a PG's scan order (TierAgentState::position and start).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum ScanPosition {
    /// `hobject_t()`: before every object (it sorts before any object of the pool); where
    /// the agent lists from after it reached the PG's end.
    Min,
    /// The first object whose scan key is at or after this one.
    At(u64),
    /// `hobject_t::get_max()`: after every object.
    Max,
}

impl ScanPosition {
    /// The start of the PG's hash range, where the agent begins with
    /// [`super::AgentStart::RangeStart`].
    pub(crate) const START: ScanPosition = ScanPosition::At(0);

    /// The position of the object `key` (it lists `key` first).
    pub(crate) fn of(key: Key) -> Self {
        ScanPosition::At(scan_key(key))
    }

    /// The position `hobject_t` with this 32-bit hash and an empty name: before every object
    /// with that hash.
    pub(crate) fn of_hash(hash: u32) -> Self {
        ScanPosition::At(u64::from(hash.reverse_bits()) << 32)
    }

    fn lower_bound(self) -> Option<u64> {
        match self {
            ScanPosition::Min => Some(0),
            ScanPosition::At(scan_key) => Some(scan_key),
            ScanPosition::Max => None,
        }
    }
}

/// A PG's objects in scan order.
#[derive(Clone, Debug, Default)]
pub(crate) struct PgObjects {
    scan_keys: BTreeSet<u64>,
}

impl PgObjects {
    pub(crate) fn len(&self) -> usize {
        self.scan_keys.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.scan_keys.is_empty()
    }

    pub(crate) fn insert(&mut self, key: Key) {
        let inserted = self.scan_keys.insert(scan_key(key));
        assert!(inserted, "object {key} inserted twice");
    }

    pub(crate) fn remove(&mut self, key: Key) {
        let removed = self.scan_keys.remove(&scan_key(key));
        assert!(removed, "object {key} removed but not held");
    }

    /// objects_list_partial: up to `count` objects from `position` into `listed` (cleared
    /// first), and the position of the first object after them (`Max` at the PG's end).
    pub(crate) fn list(
        &self,
        position: ScanPosition,
        count: usize,
        listed: &mut Vec<Key>,
    ) -> ScanPosition {
        listed.clear();
        let Some(lower) = position.lower_bound() else {
            return ScanPosition::Max;
        };
        let mut objects = self.scan_keys.range(lower..);
        listed.extend(objects.by_ref().take(count).map(|&k| key_of(k)));
        match objects.next() {
            Some(&next) => ScanPosition::At(next),
            None => ScanPosition::Max,
        }
    }

    /// Every object once, in scan order from `position`, wrapping round at the PG's end.
    pub(crate) fn from(&self, position: ScanPosition) -> impl Iterator<Item = Key> + '_ {
        let lower = position.lower_bound().unwrap_or(u64::MAX);
        let (before, after) = (..lower, lower..);
        self.scan_keys
            .range(after)
            .chain(self.scan_keys.range(before))
            .map(|&k| key_of(k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// hobject_t order: by the bit-reversed hash, ties by name; a listing returns the first
    /// object it left out as `next`, and `Max` once it reached the end.
    #[test]
    fn objects_are_listed_by_their_bit_reversed_hash() {
        let mut objects = PgObjects::default();
        let keys: Vec<Key> = (0..20).collect();
        keys.iter().for_each(|&key| objects.insert(key));
        let mut sorted = keys.clone();
        sorted.sort_by_key(|&key| ((object_hash(key) as u32).reverse_bits(), key));
        assert_ne!(sorted, keys);
        let mut listed = Vec::new();
        let next = objects.list(ScanPosition::Min, 8, &mut listed);
        assert_eq!(listed, sorted[..8]);
        assert_eq!(next, ScanPosition::of(sorted[8]));
        let next = objects.list(next, 8, &mut listed);
        assert_eq!(listed, sorted[8..16]);
        let next = objects.list(next, 8, &mut listed);
        assert_eq!(listed, sorted[16..]);
        assert_eq!(next, ScanPosition::Max);
        let next = objects.list(next, 8, &mut listed);
        assert!(listed.is_empty());
        assert_eq!(next, ScanPosition::Max);
        let wrapped: Vec<Key> = objects.from(ScanPosition::of(sorted[5])).collect();
        assert_eq!(wrapped[..15], sorted[5..]);
        assert_eq!(wrapped[15..], sorted[..5]);
    }

    #[test]
    fn the_positions_order_as_hobjects_do() {
        assert!(ScanPosition::Min < ScanPosition::START);
        assert!(ScanPosition::START <= ScanPosition::of(0));
        assert!(ScanPosition::of(Key::MAX - 1) < ScanPosition::Max);
    }
}
