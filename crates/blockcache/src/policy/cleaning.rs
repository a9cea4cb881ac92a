//! Cleaning: when the background cleaner runs and how many dirty lines it flushes.

use crate::config::CleaningConfig;

/// What the cleaner does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CleaningDecision {
    /// Nothing to do; look again after `ms`.
    Sleep {
        /// Time to sleep.
        ms: u64,
    },
    /// Flush up to `lines` dirty lines, in `order`, of those not written for `min_age_ms`.
    Clean {
        /// Most lines to flush in this round.
        lines: u32,
        /// Minimum time since a line's last write.
        min_age_ms: u64,
        /// Which dirty lines go first.
        order: CleaningOrder,
    },
}

/// The order in which a cleaning round takes dirty lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CleaningOrder {
    /// Least recently written first (alru: the lines least likely to be written again).
    OldestWrite,
    /// Ascending core address from where the previous round stopped, wrapping (acp and flush
    /// on demand, as Open-CAS): neighbouring lines merge into large sequential core writes,
    /// so an HDD core is written at its sequential bandwidth instead of one seek per line.
    CoreAddress,
}

/// Decides a cleaning round at `now_ms`, given the time of the last request and the number
/// of dirty lines.
pub fn decide(
    config: &CleaningConfig,
    now_ms: u64,
    last_io_ms: u64,
    dirty_lines: u64,
) -> CleaningDecision {
    match *config {
        CleaningConfig::Nop => CleaningDecision::Sleep { ms: 1_000 },
        _ if dirty_lines == 0 => CleaningDecision::Sleep {
            ms: wake_up_ms(config),
        },
        CleaningConfig::Alru {
            wake_up_ms,
            staleness_ms,
            flush_max_buffers,
            activity_threshold_ms,
        } => {
            let idle_ms = now_ms.saturating_sub(last_io_ms);
            if idle_ms < activity_threshold_ms {
                CleaningDecision::Sleep {
                    ms: wake_up_ms.min(activity_threshold_ms - idle_ms).max(1),
                }
            } else {
                CleaningDecision::Clean {
                    lines: flush_max_buffers,
                    min_age_ms: staleness_ms,
                    order: CleaningOrder::OldestWrite,
                }
            }
        }
        CleaningConfig::Acp {
            flush_max_buffers, ..
        } => CleaningDecision::Clean {
            lines: flush_max_buffers,
            min_age_ms: 0,
            order: CleaningOrder::CoreAddress,
        },
    }
}

/// Time between rounds.
pub fn wake_up_ms(config: &CleaningConfig) -> u64 {
    match *config {
        CleaningConfig::Alru { wake_up_ms, .. } | CleaningConfig::Acp { wake_up_ms, .. } => {
            wake_up_ms.max(1)
        }
        CleaningConfig::Nop => 1_000,
    }
}

/// After a round that flushed `flushed` of the `asked` lines: the pause before the next one.
/// A full round means more is waiting, so the cleaner goes again at once.
pub fn pause_after_round_ms(config: &CleaningConfig, flushed: u32, asked: u32) -> u64 {
    if flushed > 0 && flushed >= asked {
        0
    } else {
        wake_up_ms(config)
    }
}

/// Picks up to `lines_max` of the dirty core lines `sorted` (ascending) for an address-ordered
/// round: those at or after `cursor` first, then from the start (an elevator sweep), skipping
/// those `busy` says are in use. Returns them in the order taken.
pub fn pick_by_address(
    sorted: &std::collections::BTreeSet<u64>,
    cursor: u64,
    lines_max: u32,
    mut busy: impl FnMut(u64) -> bool,
) -> Vec<u64> {
    sorted
        .range(cursor..)
        .chain(sorted.range(..cursor))
        .copied()
        .filter(|&core_line| !busy(core_line))
        .take(lines_max as usize)
        .collect()
}

/// Picks, from dirty lines given oldest first as (line, last write ms), those to flush.
pub fn pick_stale(
    oldest_first: impl Iterator<Item = (u32, u64)>,
    now_ms: u64,
    min_age_ms: u64,
    lines_max: u32,
) -> Vec<u32> {
    oldest_first
        .take_while(|&(_, written_ms)| now_ms.saturating_sub(written_ms) >= min_age_ms)
        .take(lines_max as usize)
        .map(|(line, _)| line)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alru_waits_for_idleness_and_staleness() {
        let alru = CleaningConfig::alru();
        assert_eq!(
            decide(&alru, 100_000, 0, 0),
            CleaningDecision::Sleep { ms: 20_000 }
        );
        assert!(matches!(
            decide(&alru, 5_000, 0, 10),
            CleaningDecision::Sleep { .. }
        ));
        assert_eq!(
            decide(&alru, 15_000, 0, 10),
            CleaningDecision::Clean {
                lines: 100,
                min_age_ms: 120_000,
                order: CleaningOrder::OldestWrite,
            }
        );
        let lines = [(1, 0), (2, 10), (3, 200_000)];
        assert_eq!(
            pick_stale(lines.into_iter(), 150_000, 120_000, 10),
            vec![1, 2]
        );
        assert_eq!(pick_stale(lines.into_iter(), 150_000, 120_000, 1), vec![1]);
    }

    #[test]
    fn acp_cleans_always_and_nop_never() {
        assert_eq!(
            decide(&CleaningConfig::acp(), 5, 5, 1),
            CleaningDecision::Clean {
                lines: 128,
                min_age_ms: 0,
                order: CleaningOrder::CoreAddress,
            }
        );
        assert!(matches!(
            decide(&CleaningConfig::Nop, 1 << 40, 0, 1 << 20),
            CleaningDecision::Sleep { .. }
        ));
        assert_eq!(pause_after_round_ms(&CleaningConfig::acp(), 128, 128), 0);
        assert_eq!(pause_after_round_ms(&CleaningConfig::acp(), 5, 128), 10);
    }

    #[test]
    fn address_order_sweeps_up_from_the_cursor_and_wraps() {
        let dirty: std::collections::BTreeSet<u64> = [3, 10, 11, 12, 40, 90].into();
        assert_eq!(pick_by_address(&dirty, 11, 3, |_| false), vec![11, 12, 40]);
        assert_eq!(
            pick_by_address(&dirty, 41, 4, |_| false),
            vec![90, 3, 10, 11]
        );
        assert_eq!(
            pick_by_address(&dirty, 0, 10, |line| line == 12 || line == 3),
            vec![10, 11, 40, 90]
        );
        assert!(pick_by_address(&dirty, 5, 0, |_| false).is_empty());
        assert!(pick_by_address(&Default::default(), 5, 8, |_| false).is_empty());
    }
}
