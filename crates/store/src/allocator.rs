//! Extent allocator: free space as extents, indexed by offset and by size.
//!
//! Pure bookkeeping (no I/O). Every extent handed out or taken back is a multiple of the
//! allocation unit; `allocate` never returns bytes that are allocated (checked against the free
//! index on the way out), and `release` refuses bytes that are already free (a double free is
//! a bug: it panics rather than corrupt the free list).

use std::collections::{BTreeMap, BTreeSet};

/// A run of device bytes: `[offset_bytes, offset_bytes + length_bytes)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeviceExtent {
    /// First byte on the device.
    pub offset_bytes: u64,
    /// Length in bytes.
    pub length_bytes: u64,
}

impl DeviceExtent {
    /// One past the last byte.
    pub fn end_bytes(&self) -> u64 {
        self.offset_bytes + self.length_bytes
    }
}

/// Free space of one device.
#[derive(Clone, Debug)]
pub struct Allocator {
    unit_bytes: u64,
    capacity_bytes: u64,
    /// offset -> length of every free extent; no two touch (they are merged).
    by_offset: BTreeMap<u64, u64>,
    /// (length, offset) of every free extent, for best fit.
    by_size: BTreeSet<(u64, u64)>,
    free_bytes: u64,
}

impl Allocator {
    /// An allocator of `capacity_bytes` (rounded down to the unit), all free.
    pub fn new(capacity_bytes: u64, unit_bytes: u64) -> Self {
        assert!(
            unit_bytes.is_power_of_two(),
            "allocation unit must be a power of two"
        );
        let capacity_bytes = capacity_bytes - capacity_bytes % unit_bytes;
        let mut allocator = Self {
            unit_bytes,
            capacity_bytes,
            by_offset: BTreeMap::new(),
            by_size: BTreeSet::new(),
            free_bytes: 0,
        };
        if capacity_bytes > 0 {
            allocator.insert_free(0, capacity_bytes);
        }
        allocator
    }

    /// An allocator whose allocated space is exactly `allocated` (any order). Fails with the
    /// first extent that overlaps another, lies outside the device or is not unit-aligned:
    /// that is metadata corruption.
    pub fn from_allocated(
        capacity_bytes: u64,
        unit_bytes: u64,
        mut allocated: Vec<DeviceExtent>,
    ) -> Result<Self, DeviceExtent> {
        let mut allocator = Self::new(capacity_bytes, unit_bytes);
        allocator.by_offset.clear();
        allocator.by_size.clear();
        allocator.free_bytes = 0;
        allocated.sort_unstable();
        let mut cursor = 0u64;
        for extent in allocated {
            let aligned = extent.offset_bytes.is_multiple_of(unit_bytes)
                && extent.length_bytes.is_multiple_of(unit_bytes)
                && extent.length_bytes > 0;
            if !aligned
                || extent.offset_bytes < cursor
                || extent.end_bytes() > allocator.capacity_bytes
            {
                return Err(extent);
            }
            if extent.offset_bytes > cursor {
                allocator.insert_free(cursor, extent.offset_bytes - cursor);
            }
            cursor = extent.end_bytes();
        }
        if cursor < allocator.capacity_bytes {
            allocator.insert_free(cursor, allocator.capacity_bytes - cursor);
        }
        Ok(allocator)
    }

    /// The allocation unit.
    pub fn unit_bytes(&self) -> u64 {
        self.unit_bytes
    }

    /// Bytes managed.
    pub fn capacity_bytes(&self) -> u64 {
        self.capacity_bytes
    }

    /// Bytes free.
    pub fn free_bytes(&self) -> u64 {
        self.free_bytes
    }

    /// Bytes allocated.
    pub fn allocated_bytes(&self) -> u64 {
        self.capacity_bytes - self.free_bytes
    }

    /// Free extents, by offset.
    pub fn free_extents(&self) -> impl Iterator<Item = DeviceExtent> + '_ {
        self.by_offset
            .iter()
            .map(|(&offset_bytes, &length_bytes)| DeviceExtent {
                offset_bytes,
                length_bytes,
            })
    }

    /// Allocates `length_bytes` (rounded up to the unit): one extent by best fit (the smallest
    /// free extent that holds it, lowest offset among equals) when one exists, else pieces
    /// taken from the largest free extents. `None` (and nothing allocated) if the free space
    /// is short.
    pub fn allocate(&mut self, length_bytes: u64) -> Option<Vec<DeviceExtent>> {
        let wanted = length_bytes.div_ceil(self.unit_bytes) * self.unit_bytes;
        if wanted == 0 {
            return Some(Vec::new());
        }
        if wanted > self.free_bytes {
            return None;
        }
        let mut pieces = Vec::new();
        if let Some(&(length, offset)) = self.by_size.range((wanted, 0)..).next() {
            pieces.push(self.take(offset, length, wanted));
        } else {
            let mut remaining = wanted;
            while remaining > 0 {
                let Some(&(length, offset)) = self.by_size.iter().next_back() else {
                    unreachable!("free_bytes says {remaining} more bytes are free");
                };
                let piece = length.min(remaining);
                pieces.push(self.take(offset, length, piece));
                remaining -= piece;
            }
        }
        Some(pieces)
    }

    /// Takes `piece` bytes from the start of the free extent `(offset, length)`.
    fn take(&mut self, offset: u64, length: u64, piece: u64) -> DeviceExtent {
        debug_assert!(piece <= length && piece > 0);
        self.remove_free(offset, length);
        if piece < length {
            self.insert_free(offset + piece, length - piece);
        }
        DeviceExtent {
            offset_bytes: offset,
            length_bytes: piece,
        }
    }

    /// Returns an extent to the free space, merging it with free neighbours.
    ///
    /// # Panics
    /// If any byte of it is already free or it is not unit-aligned: a double free.
    pub fn release(&mut self, extent: DeviceExtent) {
        let DeviceExtent {
            mut offset_bytes,
            mut length_bytes,
        } = extent;
        assert!(
            offset_bytes.is_multiple_of(self.unit_bytes)
                && length_bytes.is_multiple_of(self.unit_bytes)
                && extent.end_bytes() <= self.capacity_bytes,
            "release of a misaligned or out-of-range extent {extent:?}"
        );
        if length_bytes == 0 {
            return;
        }
        assert!(
            !self.overlaps_free(extent),
            "double free: {extent:?} overlaps free space"
        );
        if let Some((&before, &before_length)) = self.by_offset.range(..offset_bytes).next_back() {
            if before + before_length == offset_bytes {
                self.remove_free(before, before_length);
                offset_bytes = before;
                length_bytes += before_length;
            }
        }
        let end = offset_bytes + length_bytes;
        if let Some(&after_length) = self.by_offset.get(&end) {
            self.remove_free(end, after_length);
            length_bytes += after_length;
        }
        self.insert_free(offset_bytes, length_bytes);
    }

    /// Whether any byte of `extent` is free.
    pub fn overlaps_free(&self, extent: DeviceExtent) -> bool {
        if let Some((&offset, &length)) = self.by_offset.range(..extent.end_bytes()).next_back() {
            return offset + length > extent.offset_bytes;
        }
        false
    }

    fn insert_free(&mut self, offset: u64, length: u64) {
        let previous = self.by_offset.insert(offset, length);
        debug_assert!(previous.is_none());
        self.by_size.insert((length, offset));
        self.free_bytes += length;
    }

    fn remove_free(&mut self, offset: u64, length: u64) {
        let removed = self.by_offset.remove(&offset);
        debug_assert_eq!(removed, Some(length));
        let removed = self.by_size.remove(&(length, offset));
        debug_assert!(removed);
        self.free_bytes -= length;
    }

    /// Checks the invariants: both indexes agree, extents are aligned, inside the device,
    /// disjoint and merged, and `free_bytes` is their sum. For tests and debug builds.
    pub fn check_invariants(&self) {
        assert_eq!(self.by_offset.len(), self.by_size.len());
        let mut sum = 0;
        let mut previous_end: Option<u64> = None;
        for (&offset, &length) in &self.by_offset {
            assert!(
                length > 0
                    && offset.is_multiple_of(self.unit_bytes)
                    && length.is_multiple_of(self.unit_bytes)
            );
            assert!(offset + length <= self.capacity_bytes);
            if let Some(end) = previous_end {
                assert!(offset > end, "free extents touch or overlap at {offset}");
            }
            assert!(self.by_size.contains(&(length, offset)));
            previous_end = Some(offset + length);
            sum += length;
        }
        assert_eq!(sum, self.free_bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const UNIT: u64 = 4096;

    fn extent(offset_bytes: u64, length_bytes: u64) -> DeviceExtent {
        DeviceExtent {
            offset_bytes,
            length_bytes,
        }
    }

    #[test]
    fn best_fit_prefers_the_smallest_hole() {
        let mut allocator = Allocator::new(100 * UNIT, UNIT);
        let all = allocator.allocate(100 * UNIT).expect("space");
        assert_eq!(all, vec![extent(0, 100 * UNIT)]);
        allocator.release(extent(10 * UNIT, 5 * UNIT));
        allocator.release(extent(50 * UNIT, 2 * UNIT));
        let got = allocator.allocate(2 * UNIT).expect("space");
        assert_eq!(got, vec![extent(50 * UNIT, 2 * UNIT)]);
        allocator.check_invariants();
    }

    #[test]
    fn fragmented_allocation_takes_pieces_and_refuses_when_short() {
        let mut allocator = Allocator::new(10 * UNIT, UNIT);
        allocator.allocate(10 * UNIT).expect("space");
        allocator.release(extent(0, UNIT));
        allocator.release(extent(5 * UNIT, 2 * UNIT));
        assert!(allocator.allocate(4 * UNIT).is_none());
        let got = allocator.allocate(3 * UNIT).expect("space");
        assert_eq!(got.iter().map(|e| e.length_bytes).sum::<u64>(), 3 * UNIT);
        assert_eq!(allocator.free_bytes(), 0);
        allocator.check_invariants();
    }

    #[test]
    #[should_panic(expected = "double free")]
    fn double_free_panics() {
        let mut allocator = Allocator::new(10 * UNIT, UNIT);
        allocator.allocate(UNIT);
        allocator.release(extent(0, UNIT));
        allocator.release(extent(0, UNIT));
    }

    #[test]
    fn from_allocated_rejects_overlap() {
        let overlapping = vec![extent(0, 2 * UNIT), extent(UNIT, UNIT)];
        assert!(Allocator::from_allocated(10 * UNIT, UNIT, overlapping).is_err());
        let fine = vec![extent(3 * UNIT, UNIT), extent(0, 2 * UNIT)];
        let allocator = Allocator::from_allocated(10 * UNIT, UNIT, fine).expect("valid");
        assert_eq!(allocator.free_bytes(), 7 * UNIT);
        allocator.check_invariants();
    }

    #[derive(Clone, Debug)]
    enum Action {
        Allocate(u64),
        Release(usize),
    }

    fn action() -> impl Strategy<Value = Action> {
        prop_oneof![
            (1u64..12).prop_map(|units| Action::Allocate(units * UNIT - 7)),
            any::<usize>().prop_map(Action::Release),
        ]
    }

    proptest! {
        /// Against a bitmap model: allocations are free in the model, releases merge back, and
        /// a rebuild from the allocated list gives the same free space.
        #[test]
        fn matches_a_bitmap_model(actions in proptest::collection::vec(action(), 1..200)) {
            const UNITS: usize = 64;
            let mut allocator = Allocator::new(UNITS as u64 * UNIT, UNIT);
            let mut used = [false; UNITS];
            let mut held: Vec<DeviceExtent> = Vec::new();
            for action in actions {
                match action {
                    Action::Allocate(length) => {
                        let units = length.div_ceil(UNIT) as usize;
                        let free = used.iter().filter(|u| !**u).count();
                        match allocator.allocate(length) {
                            Some(pieces) => {
                                prop_assert!(units <= free);
                                let total: u64 = pieces.iter().map(|p| p.length_bytes).sum();
                                prop_assert_eq!(total, units as u64 * UNIT);
                                for piece in pieces {
                                    let first = (piece.offset_bytes / UNIT) as usize;
                                    let count = (piece.length_bytes / UNIT) as usize;
                                    for (unit, slot) in used.iter_mut().enumerate().skip(first).take(count) {
                                        prop_assert!(!*slot, "unit {} handed out twice", unit);
                                        *slot = true;
                                    }
                                    held.push(piece);
                                }
                            }
                            None => prop_assert!(units > free),
                        }
                    }
                    Action::Release(index) => {
                        if held.is_empty() {
                            continue;
                        }
                        let piece = held.swap_remove(index % held.len());
                        let first = (piece.offset_bytes / UNIT) as usize;
                        let count = (piece.length_bytes / UNIT) as usize;
                        used.iter_mut().skip(first).take(count).for_each(|slot| *slot = false);
                        allocator.release(piece);
                    }
                }
                allocator.check_invariants();
                let free = used.iter().filter(|u| !**u).count() as u64 * UNIT;
                prop_assert_eq!(allocator.free_bytes(), free);
            }
            let rebuilt = Allocator::from_allocated(UNITS as u64 * UNIT, UNIT, held.clone())
                .expect("held extents are disjoint");
            rebuilt.check_invariants();
            prop_assert_eq!(
                rebuilt.free_extents().collect::<Vec<_>>(),
                allocator.free_extents().collect::<Vec<_>>()
            );
        }
    }
}
