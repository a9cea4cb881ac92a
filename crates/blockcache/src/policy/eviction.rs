//! Eviction across I/O classes: which class gives up a clean line to a requester.
//!
//! Within a class, lines are evicted least recently used first (the executor keeps one LRU
//! list of clean lines per class). Across classes: a class at or over its allocation evicts
//! from itself; otherwise the victim is a class over its allocation if any, else the class of
//! lowest priority (highest priority number) that is not more important than the requester.

/// One class as eviction sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassView {
    /// Eviction priority: 0 is the most important (evicted last), 255 the least.
    pub priority: u8,
    /// Lines the class holds.
    pub lines: u64,
    /// Lines the class may hold (its allocation share of the cache).
    pub limit_lines: u64,
    /// Clean, unpinned lines it could give up now.
    pub evictable: u64,
}

/// The class (index into `classes`) to evict a line from for `requester`, or `None` when no
/// line can be taken (the request then bypasses the cache).
pub fn pick_victim_class(classes: &[ClassView], requester: usize) -> Option<usize> {
    let own = classes.get(requester)?;
    if own.lines >= own.limit_lines {
        return (own.evictable > 0).then_some(requester);
    }
    let overflowing = classes
        .iter()
        .enumerate()
        .filter(|(_, c)| c.lines > c.limit_lines && c.evictable > 0)
        .max_by_key(|(_, c)| c.lines - c.limit_lines);
    if let Some((index, _)) = overflowing {
        return Some(index);
    }
    classes
        .iter()
        .enumerate()
        .filter(|(_, c)| c.evictable > 0 && c.priority >= own.priority)
        .max_by_key(|(_, c)| (c.priority, c.lines))
        .map(|(index, _)| index)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(priority: u8, lines: u64, limit_lines: u64, evictable: u64) -> ClassView {
        ClassView {
            priority,
            lines,
            limit_lines,
            evictable,
        }
    }

    #[test]
    fn lowest_priority_gives_way_and_important_classes_are_kept() {
        let classes = [
            class(10, 50, 100, 50),
            class(1, 40, 100, 40),
            class(200, 10, 100, 10),
        ];
        assert_eq!(pick_victim_class(&classes, 1), Some(2));
        // Class 2 (priority 200) may not evict more important classes.
        let starved = [class(10, 50, 100, 50), class(200, 0, 100, 0)];
        assert_eq!(pick_victim_class(&starved, 1), None);
    }

    #[test]
    fn a_class_at_its_allocation_evicts_from_itself_and_overflow_goes_first() {
        let classes = [class(1, 100, 100, 3), class(5, 10, 100, 10)];
        assert_eq!(pick_victim_class(&classes, 0), Some(0));
        let classes = [class(1, 100, 100, 0), class(5, 10, 100, 10)];
        assert_eq!(pick_victim_class(&classes, 0), None);
        let classes = [
            class(1, 10, 100, 10),
            class(0, 150, 100, 5),
            class(50, 10, 100, 10),
        ];
        assert_eq!(pick_victim_class(&classes, 0), Some(1));
    }
}
