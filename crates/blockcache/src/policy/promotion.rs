//! Promotion: which misses earn a cache line (always, or on the n-th access).

use std::collections::{HashMap, VecDeque};

use crate::config::PromotionConfig;

/// Access counts of recently missed core lines, bounded (oldest forgotten first).
#[derive(Clone, Debug)]
pub struct Promotion {
    counts: HashMap<u64, u32>,
    order: VecDeque<u64>,
    capacity: usize,
}

impl Promotion {
    /// A counter remembering at most `capacity` core lines.
    pub fn new(capacity: usize) -> Self {
        Self {
            counts: HashMap::new(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    /// Counts an access to `core_line` (a miss) and says whether to promote it.
    pub fn promote(
        &mut self,
        config: &PromotionConfig,
        core_line: u64,
        occupancy_percent: u32,
    ) -> bool {
        let PromotionConfig::Nhit {
            threshold,
            trigger_percent,
        } = *config
        else {
            return true;
        };
        if occupancy_percent < trigger_percent {
            return true;
        }
        let count = self.counts.entry(core_line).or_insert_with(|| {
            self.order.push_back(core_line);
            0
        });
        *count += 1;
        if *count >= threshold {
            self.counts.remove(&core_line);
            return true;
        }
        while self.counts.len() > self.capacity {
            match self.order.pop_front() {
                Some(old) => {
                    self.counts.remove(&old);
                }
                None => break,
            }
        }
        // Entries removed on promotion leave stale keys in `order`; trim them lazily.
        if self.order.len() > 2 * self.capacity {
            let counts = &self.counts;
            self.order.retain(|line| counts.contains_key(line));
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nhit_promotes_on_the_nth_access_above_the_trigger() {
        let nhit = PromotionConfig::Nhit {
            threshold: 3,
            trigger_percent: 80,
        };
        let mut promotion = Promotion::new(100);
        assert!(promotion.promote(&nhit, 7, 50), "below the trigger: always");
        assert!(!promotion.promote(&nhit, 7, 90));
        assert!(!promotion.promote(&nhit, 7, 90));
        assert!(promotion.promote(&nhit, 7, 90));
        assert!(
            !promotion.promote(&nhit, 7, 90),
            "count restarts after promotion"
        );
        assert!(promotion.promote(&PromotionConfig::Always, 8, 100));
    }

    #[test]
    fn forgets_the_oldest_lines_beyond_capacity() {
        let nhit = PromotionConfig::Nhit {
            threshold: 2,
            trigger_percent: 0,
        };
        let mut promotion = Promotion::new(4);
        for line in 0..10 {
            assert!(!promotion.promote(&nhit, line, 100));
        }
        assert!(!promotion.promote(&nhit, 0, 100), "line 0 was forgotten");
        assert!(promotion.promote(&nhit, 9, 100));
    }
}
