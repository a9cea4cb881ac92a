//! In-memory metadata: the core-line -> cache-line map, per-line state, the lists and the
//! policies' state. Guarded by one mutex in the executor; nothing here does I/O.

use std::collections::BTreeSet;

use crate::config::CacheConfig;
use crate::hash::FastMap;
use crate::ioclass::IoClasses;
use crate::layout::{Entry, Layout, ENTRIES_PER_BLOCK, FLAG_DIRTY, FLAG_VALID};
use crate::lists::Lists;
use crate::policy::cutoff::SeqCutoff;
use crate::policy::eviction::{pick_victim_class, ClassView};
use crate::policy::mode::LineState;
use crate::policy::promotion::Promotion;

/// No core line.
pub const UNMAPPED: u64 = u64::MAX;
/// List of free lines.
pub const FREE_LIST: u16 = 0;
/// List of dirty lines, least recently written first.
pub const DIRTY_LIST: u16 = 1;
/// Clean LRU of class `c` is list `CLEAN_LISTS + c`.
pub const CLEAN_LISTS: u16 = 2;
/// How far down a clean LRU eviction looks for an unpinned line.
const EVICTION_SCAN_MAX: usize = 64;

/// One cache line.
#[derive(Clone, Copy, Debug)]
pub struct Line {
    /// Core line it holds, or `UNMAPPED`.
    pub core_line: u64,
    /// Holds its core line's data (false while being filled).
    pub valid: bool,
    /// Newer than the core.
    pub dirty: bool,
    /// I/O class index.
    pub class: u8,
    /// Requests or cleaner rounds using the line; a pinned line is never evicted or cleaned
    /// by someone else.
    pub pins: u16,
    /// Bumped by every write, so the cleaner can tell whether a line changed while flushed.
    pub write_seq: u32,
    /// Time of the last write, ms.
    pub written_ms: u64,
    /// Generation of its metadata block when its entry last changed.
    pub metadata_gen: u64,
}

impl Line {
    const EMPTY: Line = Line {
        core_line: UNMAPPED,
        valid: false,
        dirty: false,
        class: 0,
        pins: 0,
        write_seq: 0,
        written_ms: 0,
        metadata_gen: 0,
    };

    /// The entry persisted for this line: a line being filled is not valid on disk yet.
    pub fn entry(&self) -> Entry {
        let mapped = self.core_line != UNMAPPED && self.valid;
        let mut flags = 0;
        if mapped {
            flags |= FLAG_VALID;
            if self.dirty {
                flags |= FLAG_DIRTY;
            }
        }
        Entry {
            core_line: if mapped { self.core_line } else { UNMAPPED },
            flags,
            class: self.class,
        }
    }
}

/// Everything the mutex guards.
pub struct State {
    pub config: CacheConfig,
    pub classes: IoClasses,
    pub lines: Vec<Line>,
    pub map: FastMap<u64, u32>,
    pub lists: Lists,
    /// Lines held per class.
    pub class_lines: Vec<u64>,
    /// Current generation per metadata block.
    pub metadata_gen: Vec<u64>,
    pub cutoff: SeqCutoff,
    pub promotion: Promotion,
    pub last_io_ms: u64,
    /// Core lines of the dirty lines, in address order (address-ordered cleaning).
    pub dirty_core_lines: BTreeSet<u64>,
    /// Where the next address-ordered cleaning round starts.
    pub cleaning_cursor: u64,
}

impl State {
    pub fn new(layout: &Layout, config: CacheConfig, classes: IoClasses) -> Self {
        let lines = layout.lines as usize;
        let list_count = usize::from(CLEAN_LISTS) + crate::ioclass::CLASSES_MAX;
        let mut lists = Lists::new(lines, list_count);
        for line in 0..lines as u32 {
            lists.push_back(FREE_LIST, line);
        }
        Self {
            config,
            classes,
            lines: vec![Line::EMPTY; lines],
            map: FastMap::default(),
            lists,
            class_lines: vec![0; crate::ioclass::CLASSES_MAX],
            metadata_gen: vec![1; layout.metadata_blocks as usize],
            cutoff: SeqCutoff::new(),
            promotion: Promotion::new(lines.max(1024)),
            last_io_ms: 0,
            dirty_core_lines: BTreeSet::new(),
            cleaning_cursor: 0,
        }
    }

    /// The state of `core_line`, and its cache line when mapped and valid.
    pub fn lookup(&self, core_line: u64) -> (LineState, Option<u32>) {
        match self.map.get(&core_line) {
            Some(&line) => {
                let meta = &self.lines[line as usize];
                if !meta.valid {
                    (LineState::Miss, None)
                } else if meta.dirty {
                    (LineState::Dirty, Some(line))
                } else {
                    (LineState::Clean, Some(line))
                }
            }
            None => (LineState::Miss, None),
        }
    }

    /// Whether `core_line` is mapped at all (valid or being filled).
    pub fn is_mapped(&self, core_line: u64) -> bool {
        self.map.contains_key(&core_line)
    }

    pub fn occupancy_percent(&self) -> u32 {
        let total = self.lines.len() as u64;
        let used = total - self.lists.len(FREE_LIST);
        (used * 100 / total.max(1)) as u32
    }

    pub fn free_lines(&self) -> u64 {
        self.lists.len(FREE_LIST)
    }

    pub fn dirty_lines(&self) -> u64 {
        self.lists.len(DIRTY_LIST)
    }

    fn touch_metadata(&mut self, line: u32) {
        let block = (u64::from(line) / ENTRIES_PER_BLOCK) as usize;
        self.metadata_gen[block] += 1;
        self.lines[line as usize].metadata_gen = self.metadata_gen[block];
    }

    /// Allocates a line for `core_line` in class `class`, evicting a clean line if needed;
    /// the line comes back mapped, not valid, pinned once. `None`: no line can be had.
    pub fn allocate(&mut self, core_line: u64, class: usize) -> Option<u32> {
        debug_assert!(!self.map.contains_key(&core_line));
        let limit = self.class_limit(class);
        if limit == 0 {
            return None;
        }
        let line = if self.class_lines[class] < limit {
            self.lists.iter(FREE_LIST).next()
        } else {
            None
        };
        let line = match line {
            Some(line) => line,
            None => self.evict(class)?,
        };
        let meta = &mut self.lines[line as usize];
        assert_eq!(meta.core_line, UNMAPPED, "allocating a mapped line");
        assert_eq!(meta.pins, 0, "allocating a pinned line");
        *meta = Line {
            core_line,
            class: class as u8,
            pins: 1,
            ..Line::EMPTY
        };
        self.lists.remove(line);
        self.map.insert(core_line, line);
        self.class_lines[class] += 1;
        Some(line)
    }

    fn class_limit(&self, class: usize) -> u64 {
        let allocation = self
            .classes
            .classes()
            .get(class)
            .map_or(0.0, |c| c.allocation);
        (allocation * self.lines.len() as f64).round() as u64
    }

    /// Frees a clean unpinned line of the class eviction picks; returns it unlisted.
    fn evict(&mut self, requester: usize) -> Option<u32> {
        let views: Vec<ClassView> = self
            .classes
            .classes()
            .iter()
            .enumerate()
            .map(|(index, class)| ClassView {
                priority: class.eviction_priority,
                lines: self.class_lines[index],
                limit_lines: self.class_limit(index),
                evictable: self.lists.len(CLEAN_LISTS + index as u16),
            })
            .collect();
        let victim_class = pick_victim_class(&views, requester)?;
        let list = CLEAN_LISTS + victim_class as u16;
        let line = self
            .lists
            .iter(list)
            .take(EVICTION_SCAN_MAX)
            .find(|&line| self.lines[line as usize].pins == 0)?;
        self.unmap(line);
        Some(line)
    }

    /// Drops a clean line's mapping and puts it on the free list.
    pub fn unmap(&mut self, line: u32) {
        let meta = self.lines[line as usize];
        assert!(!meta.dirty || !meta.valid, "unmapping a dirty line");
        assert_eq!(meta.pins, 0, "unmapping a pinned line");
        if meta.core_line != UNMAPPED {
            self.map.remove(&meta.core_line);
            self.dirty_core_lines.remove(&meta.core_line);
            self.class_lines[usize::from(meta.class)] -= 1;
        }
        self.lines[line as usize] = Line::EMPTY;
        self.touch_metadata(line);
        self.lists.push_back(FREE_LIST, line);
    }

    /// Drops a clean line's data: freed now when unpinned, else marked invalid (lookups miss)
    /// and freed by the last unpin ([`State::free_if_invalid`]).
    pub fn invalidate(&mut self, line: u32) {
        let meta = &mut self.lines[line as usize];
        assert!(!meta.dirty, "invalidating a dirty line");
        if meta.pins == 0 {
            self.unmap(line);
        } else {
            meta.valid = false;
            self.touch_metadata(line);
        }
    }

    /// Frees an unpinned mapped line left invalid by [`State::invalidate`].
    pub fn free_if_invalid(&mut self, line: u32) {
        let meta = self.lines[line as usize];
        if meta.pins == 0
            && !meta.valid
            && meta.core_line != UNMAPPED
            && self.lists.owner(line) != crate::lists::UNLISTED
        {
            self.unmap(line);
        }
    }

    /// A pinned line's fill or clean write completed: valid, clean, most recently used.
    pub fn mark_clean_valid(&mut self, line: u32) {
        let meta = &mut self.lines[line as usize];
        meta.valid = true;
        meta.dirty = false;
        let (class, core_line) = (meta.class, meta.core_line);
        self.dirty_core_lines.remove(&core_line);
        self.touch_metadata(line);
        self.lists.push_back(CLEAN_LISTS + u16::from(class), line);
    }

    /// A write landed (or is about to land) in a line: dirty, most recently written.
    /// Returns whether its persisted entry changed.
    pub fn mark_dirty(&mut self, line: u32, now_ms: u64) -> bool {
        let meta = &mut self.lines[line as usize];
        let changed = !meta.dirty || !meta.valid;
        meta.dirty = true;
        meta.valid = true;
        meta.write_seq = meta.write_seq.wrapping_add(1);
        meta.written_ms = now_ms;
        if changed {
            let core_line = meta.core_line;
            self.dirty_core_lines.insert(core_line);
            self.touch_metadata(line);
        }
        self.lists.push_back(DIRTY_LIST, line);
        changed
    }

    /// A clean hit: most recently used.
    pub fn touch_clean(&mut self, line: u32) {
        let meta = &self.lines[line as usize];
        if meta.valid && !meta.dirty {
            let class = meta.class;
            self.lists.push_back(CLEAN_LISTS + u16::from(class), line);
        }
    }

    pub fn pin(&mut self, line: u32) {
        self.lines[line as usize].pins += 1;
    }

    pub fn unpin(&mut self, line: u32) {
        let meta = &mut self.lines[line as usize];
        assert!(meta.pins > 0, "unpinning an unpinned line");
        meta.pins -= 1;
    }

    /// Entries of metadata block `block`.
    pub fn metadata_entries(&self, block: u64) -> Vec<Entry> {
        let first = (block * ENTRIES_PER_BLOCK) as usize;
        let last = (first + ENTRIES_PER_BLOCK as usize).min(self.lines.len());
        self.lines[first..last].iter().map(Line::entry).collect()
    }

    /// Installs a line loaded from disk.
    pub fn restore(&mut self, line: u32, entry: Entry) {
        let class = usize::from(entry.class).min(self.classes.classes().len().saturating_sub(1));
        let dirty = entry.flags & FLAG_DIRTY != 0;
        self.lines[line as usize] = Line {
            core_line: entry.core_line,
            valid: true,
            dirty,
            class: class as u8,
            ..Line::EMPTY
        };
        self.map.insert(entry.core_line, line);
        if dirty {
            self.dirty_core_lines.insert(entry.core_line);
        }
        self.class_lines[class] += 1;
        let list = if dirty {
            DIRTY_LIST
        } else {
            CLEAN_LISTS + class as u16
        };
        self.lists.push_back(list, line);
    }

    /// Checks the bookkeeping (tests and debug): lists, map and counts agree.
    pub fn check_invariants(&self) {
        let mut per_class = vec![0u64; self.class_lines.len()];
        for (index, meta) in self.lines.iter().enumerate() {
            let line = index as u32;
            let owner = self.lists.owner(line);
            if meta.core_line == UNMAPPED {
                assert_eq!(owner, FREE_LIST, "unmapped line {line} not free");
                continue;
            }
            per_class[usize::from(meta.class)] += 1;
            assert_eq!(
                self.map.get(&meta.core_line),
                Some(&line),
                "map disagrees on {line}"
            );
            assert_eq!(
                self.dirty_core_lines.contains(&meta.core_line),
                meta.valid && meta.dirty,
                "address index disagrees on line {line}"
            );
            if meta.valid && meta.dirty {
                assert_eq!(owner, DIRTY_LIST, "dirty line {line}");
            } else if meta.valid {
                assert_eq!(
                    owner,
                    CLEAN_LISTS + u16::from(meta.class),
                    "clean line {line}"
                );
            }
        }
        assert_eq!(per_class, self.class_lines);
        assert_eq!(self.dirty_core_lines.len() as u64, self.dirty_lines());
        assert_eq!(
            self.map.len() as u64,
            self.lines.len() as u64 - self.free_lines()
        );
    }
}
