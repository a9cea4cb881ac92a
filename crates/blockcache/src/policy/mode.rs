//! Cache-mode semantics per line, as Open-CAS defines them.

use crate::config::CacheMode;

/// What the cache holds for one core line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineState {
    /// Not cached.
    Miss,
    /// Cached, equal to the core.
    Clean,
    /// Cached, newer than the core.
    Dirty,
}

/// Where a read of one line is served from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadAction {
    /// The cache line.
    Cache,
    /// The core, then the line is promoted into the cache.
    CoreAndPromote,
    /// The core only.
    Core,
}

/// Where a write of one line goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteAction {
    /// The cache only, leaving the line dirty (allocating it on a miss).
    CacheDirty,
    /// Cache and core (allocating a clean line on a miss); a dirty line stays dirty.
    CacheAndCore,
    /// The core only (a miss).
    Core,
    /// The core, and the clean cached copy is dropped.
    CoreAndInvalidate,
}

/// A read of a line in `state`. `bypass` is set for cut-off streams and classes that are not
/// cached; `promote` is the promotion policy's verdict for a miss.
pub fn read_action(mode: CacheMode, state: LineState, bypass: bool, promote: bool) -> ReadAction {
    match state {
        // Dirty data exists only in the cache: every mode must read it from there.
        LineState::Dirty => ReadAction::Cache,
        LineState::Clean if bypass || mode == CacheMode::Pt => ReadAction::Core,
        LineState::Clean => ReadAction::Cache,
        LineState::Miss => {
            if bypass || !promote || matches!(mode, CacheMode::Pt | CacheMode::Wo) {
                ReadAction::Core
            } else {
                ReadAction::CoreAndPromote
            }
        }
    }
}

/// A write of a line in `state` (see [`read_action`] for the flags).
///
/// A write that meets a dirty line updates it in place in every mode (the newer data must not
/// be overtaken by the older dirty copy being cleaned later); wt also writes the core.
pub fn write_action(mode: CacheMode, state: LineState, bypass: bool, promote: bool) -> WriteAction {
    let writes_back = mode.writes_back() && !bypass;
    match state {
        LineState::Dirty if mode == CacheMode::Wt && !bypass => WriteAction::CacheAndCore,
        LineState::Dirty => WriteAction::CacheDirty,
        LineState::Clean if writes_back => WriteAction::CacheDirty,
        LineState::Clean if !bypass && matches!(mode, CacheMode::Wt | CacheMode::Wa) => {
            WriteAction::CacheAndCore
        }
        LineState::Clean => WriteAction::CoreAndInvalidate,
        LineState::Miss if writes_back && promote => WriteAction::CacheDirty,
        LineState::Miss if !bypass && promote && mode == CacheMode::Wt => WriteAction::CacheAndCore,
        LineState::Miss => WriteAction::Core,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use CacheMode::*;

    #[test]
    fn open_cas_mode_table() {
        use LineState::*;
        // Reads.
        for mode in [Wt, Wb, Wa, Wi] {
            assert_eq!(
                read_action(mode, Miss, false, true),
                ReadAction::CoreAndPromote
            );
            assert_eq!(read_action(mode, Clean, false, true), ReadAction::Cache);
        }
        assert_eq!(read_action(Wo, Miss, false, true), ReadAction::Core);
        assert_eq!(read_action(Pt, Miss, false, true), ReadAction::Core);
        assert_eq!(read_action(Pt, Clean, false, true), ReadAction::Core);
        for mode in [Wt, Wb, Wa, Wi, Wo, Pt] {
            assert_eq!(read_action(mode, Dirty, true, false), ReadAction::Cache);
            assert_eq!(read_action(mode, Miss, true, true), ReadAction::Core);
            assert_eq!(read_action(mode, Miss, false, false), ReadAction::Core);
        }
        // Writes.
        assert_eq!(write_action(Wb, Miss, false, true), WriteAction::CacheDirty);
        assert_eq!(
            write_action(Wo, Clean, false, true),
            WriteAction::CacheDirty
        );
        assert_eq!(
            write_action(Wt, Miss, false, true),
            WriteAction::CacheAndCore
        );
        assert_eq!(
            write_action(Wt, Clean, false, true),
            WriteAction::CacheAndCore
        );
        assert_eq!(write_action(Wa, Miss, false, true), WriteAction::Core);
        assert_eq!(
            write_action(Wa, Clean, false, true),
            WriteAction::CacheAndCore
        );
        assert_eq!(
            write_action(Wi, Clean, false, true),
            WriteAction::CoreAndInvalidate
        );
        assert_eq!(
            write_action(Pt, Clean, false, true),
            WriteAction::CoreAndInvalidate
        );
        assert_eq!(write_action(Pt, Miss, false, true), WriteAction::Core);
        assert_eq!(
            write_action(Wb, Clean, true, true),
            WriteAction::CoreAndInvalidate
        );
        assert_eq!(write_action(Wb, Miss, true, true), WriteAction::Core);
        assert_eq!(write_action(Wb, Miss, false, false), WriteAction::Core);
        for mode in [Wb, Wa, Wi, Wo, Pt] {
            assert_eq!(
                write_action(mode, Dirty, true, true),
                WriteAction::CacheDirty
            );
        }
        assert_eq!(
            write_action(Wt, Dirty, false, true),
            WriteAction::CacheAndCore
        );
    }
}
