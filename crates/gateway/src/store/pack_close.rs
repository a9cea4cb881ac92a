//! When an open pack group closes (issue 39): a pure policy, with time passed in.
//!
//! A group is worth holding open only while a PUT bound for its OSD is on its way to it: a
//! small PUT announces itself to its group's target before its write intent
//! ([`super::pack`]'s `Arrival`), so the packer knows how many PUTs are *expected* (announced
//! and not yet joined). A group closes
//! - on its count or size limit (it cannot take more),
//! - as soon as nobody is expected and no member joined within `linger_ns` (batching would
//!   gain nothing more: waiting longer only delays its members),
//! - or at the latest `wait_max_ns` after it opened (an expected PUT may be slow to come: a
//!   client still sending its body, an intent write queued behind others).
//!
//! With a fixed wait alone, every member of a group paid the whole wait whenever the count
//! limit was out of reach (16 clients over 3 OSDs put about 5 PUTs in a group), which cost
//! 16 clients a third of their PUT rate at 2 ms and more at longer waits, while 64 clients
//! needed 5 ms or more to fill packs (BENCHMARKS.md, pack39d). Closing on "nobody expected"
//! gives each load the group it has: the PUTs in flight for one OSD meet in one group and
//! none waits for a PUT that is not coming.

/// The limits a group closes on (from [`crate::PackingConfig`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CloseLimits {
    /// Members that fill a group.
    pub count_max: usize,
    /// Bytes that fill a group.
    pub bytes_max: u64,
    /// The longest a group stays open after its first member joined, in ns.
    pub wait_max_ns: u64,
    /// How long a group with nobody expected stays open after its last member joined, in
    /// ns (0: it closes at once).
    pub linger_ns: u64,
}

/// What the packer knows of one open group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupState {
    pub members: usize,
    pub bytes: u64,
    /// When its first member joined, in ns.
    pub opened_ns: u64,
    /// When its last member joined, in ns.
    pub joined_last_ns: u64,
    /// PUTs announced to its target that have not joined yet.
    pub expected: usize,
}

/// Why a group closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Closed {
    /// It reached `count_max` members.
    Count,
    /// It reached `bytes_max` bytes.
    Bytes,
    /// Nobody was expected any more.
    Idle,
    /// It reached `wait_max_ns`.
    Wait,
}

/// The policy's answer for one group at one time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupDecision {
    /// Write it now.
    Close(Closed),
    /// Keep it open; decide again at `deadline_ns` at the latest (or when an expected PUT
    /// joins or gives up).
    Hold { deadline_ns: u64 },
}

/// Whether the group `state` closes at `now_ns`.
pub fn decide(state: &GroupState, limits: &CloseLimits, now_ns: u64) -> GroupDecision {
    debug_assert!(state.members > 0, "an open group has a member");
    let wait_end_ns = state.opened_ns.saturating_add(limits.wait_max_ns);
    if state.members >= limits.count_max.max(1) {
        return GroupDecision::Close(Closed::Count);
    }
    if state.bytes >= limits.bytes_max {
        return GroupDecision::Close(Closed::Bytes);
    }
    if now_ns >= wait_end_ns {
        return GroupDecision::Close(Closed::Wait);
    }
    if state.expected == 0 {
        let linger_end_ns = state.joined_last_ns.saturating_add(limits.linger_ns);
        if now_ns >= linger_end_ns {
            return GroupDecision::Close(Closed::Idle);
        }
        return GroupDecision::Hold {
            deadline_ns: linger_end_ns.min(wait_end_ns),
        };
    }
    GroupDecision::Hold {
        deadline_ns: wait_end_ns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: CloseLimits = CloseLimits {
        count_max: 4,
        bytes_max: 1000,
        wait_max_ns: 10_000,
        linger_ns: 0,
    };

    fn group(members: usize, expected: usize) -> GroupState {
        GroupState {
            members,
            bytes: 10 * members as u64,
            opened_ns: 1_000,
            joined_last_ns: 2_000,
            expected,
        }
    }

    #[test]
    fn a_group_nobody_else_is_coming_to_closes_at_once() {
        assert_eq!(
            decide(&group(1, 0), &LIMITS, 2_000),
            GroupDecision::Close(Closed::Idle)
        );
        assert_eq!(
            decide(&group(3, 0), &LIMITS, 2_000),
            GroupDecision::Close(Closed::Idle)
        );
    }

    #[test]
    fn a_group_waits_for_the_puts_announced_to_it_until_its_cap() {
        assert_eq!(
            decide(&group(2, 1), &LIMITS, 5_000),
            GroupDecision::Hold {
                deadline_ns: 11_000
            }
        );
        assert_eq!(
            decide(&group(2, 1), &LIMITS, 10_999),
            GroupDecision::Hold {
                deadline_ns: 11_000
            }
        );
        assert_eq!(
            decide(&group(2, 1), &LIMITS, 11_000),
            GroupDecision::Close(Closed::Wait)
        );
        // The announced PUT joins (or gives up): nobody expected, it closes.
        assert_eq!(
            decide(&group(3, 0), &LIMITS, 6_000),
            GroupDecision::Close(Closed::Idle)
        );
    }

    #[test]
    fn limits_close_a_group_whatever_is_expected() {
        assert_eq!(
            decide(&group(4, 9), &LIMITS, 1_000),
            GroupDecision::Close(Closed::Count)
        );
        let heavy = GroupState {
            bytes: 1000,
            ..group(2, 9)
        };
        assert_eq!(
            decide(&heavy, &LIMITS, 1_000),
            GroupDecision::Close(Closed::Bytes)
        );
        // A count limit of 0 means 1: every member alone.
        let one = CloseLimits {
            count_max: 0,
            ..LIMITS
        };
        assert_eq!(
            decide(&group(1, 9), &one, 1_000),
            GroupDecision::Close(Closed::Count)
        );
    }

    #[test]
    fn a_linger_keeps_an_idle_group_open_a_little_within_the_cap() {
        let limits = CloseLimits {
            linger_ns: 500,
            ..LIMITS
        };
        assert_eq!(
            decide(&group(2, 0), &limits, 2_100),
            GroupDecision::Hold { deadline_ns: 2_500 }
        );
        assert_eq!(
            decide(&group(2, 0), &limits, 2_500),
            GroupDecision::Close(Closed::Idle)
        );
        // The cap wins over the linger.
        let late = GroupState {
            joined_last_ns: 10_900,
            ..group(2, 0)
        };
        assert_eq!(
            decide(&late, &limits, 10_950),
            GroupDecision::Hold {
                deadline_ns: 11_000
            }
        );
        assert_eq!(
            decide(&late, &limits, 11_000),
            GroupDecision::Close(Closed::Wait)
        );
    }
}
