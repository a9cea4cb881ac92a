//! Erasure-coded pools: Reed-Solomon `k + m` ([`ErasureProfile`], [`Codec`]), placed by an
//! erasure CRUSH rule (`chooseleaf indep`, so a failed OSD's position is refilled alone and
//! the others keep theirs), with the object API of [`EcPoolHandle`].
//!
//! ## Layout
//! Shard `i` of an object of PG `p.s` lives on the OSD at position `i` of the PG's up set, in
//! collection `<pool>.<seed>s<i>` ([`object::shard_collection`], as Ceph names `1.2as3`), under the object's
//! name: chunk `i` of every stripe, end to end (stripes of `k` chunks of `stripe_unit`; the
//! last one zero-padded). Every shard carries the object's version (`_strata.v`), logical size
//! (`_strata.ec.size`) and user xattrs; omap is refused (`NotSupported`, Ceph's EOPNOTSUPP).
//!
//! ## Writes and torn writes
//! A write resolves the object first, then re-encodes the stripes it touches (read-modify-write
//! of partial stripes) and sends each available shard one store transaction: its chunks, the
//! new version, and an undo record (`_strata.ec.undo`: the previous version, size, xattrs and
//! the shard bytes the write replaced). It needs `min_size = k + 1` positions available and is
//! acknowledged once at least `k + 1` shards committed (all available ones, unless some failed
//! after the others committed: those are then stale and rebuilt). A write cut short by a crash
//! leaves some shards at the new version: the next access (or recovery) decides per object
//! ([`object::decide`]): a version at least `k` shards hold (counting shards whose undo goes
//! back to it) wins; newer shards roll back with their undo, older or missing ones are rebuilt
//! from `k` good ones. When the newest version has fewer than `k` shards but the unavailable
//! positions could hold more, the object answers `Degraded` until they return: never a mix of
//! versions. An object fewer than `k` shards hold with every position answering never existed
//! (a create or removal cut short) and its leftover shards are removed.
//!
//! ## Recovery and scrub ([`repair`])
//! A PG whose up set changes in a map change, or where a write or read found a shard missing
//! or failing, is queued (the cluster's dirty PGs); recovery resolves each of its objects,
//! rebuilding the shards of positions that lack them. Deep scrub reads every shard whole and
//! checks the parity against the data.
//!
//! ## Known limits
//! - No PG log: recovery of a PG lists and resolves every object in it.
//! - Shards left on an OSD that is no longer at their position (a failed OSD replaced by
//!   CRUSH, then returned) are not removed.
//! - Every operation (reads too) takes the object's lock and probes every shard's metadata.
//! - Undo records keep the bytes a write replaced: an overwrite of a whole existing object
//!   reads and rewrites the old shards' bytes into the record (the price of rollback without
//!   copy-on-write clones in the store).

mod admin;
mod codec;
pub(crate) mod io;
pub mod object;
mod profile;
pub(crate) mod repair;
pub mod shard;

pub use codec::Codec;
pub use io::EcPoolHandle;
pub use profile::{ErasureProfile, SHARDS_MAX, STRIPE_UNIT_DEFAULT_BYTES};

use rados::PoolInfo;

use crate::state::{ClusterState, PoolState, RuleState};

/// Adds an erasure-coded pool to `state`, with its own erasure rule named after it (as
/// `ceph osd pool create NAME erasure PROFILE` makes one).
pub(crate) fn add_pool(
    state: &mut ClusterState,
    name: &str,
    profile: &ErasureProfile,
    pg_num: u32,
) -> PoolInfo {
    if !state.rules.iter().any(|rule| rule.name == name) {
        state.rules.push(RuleState {
            name: name.to_string(),
            class: profile.device_class.clone(),
            erasure: true,
        });
    }
    let id = state.next_pool_id;
    state.next_pool_id += 1;
    state.pools.insert(
        id,
        PoolState {
            id,
            name: name.to_string(),
            size: profile.size(),
            min_size: profile.min_size(),
            pg_num,
            rule: name.to_string(),
            erasure: Some(profile.clone()),
            quota_max_bytes: 0,
            quota_max_objects: 0,
        },
    );
    PoolInfo {
        id,
        name: name.to_string(),
        size: profile.size(),
        min_size: profile.min_size(),
        pg_num,
        crush_rule: name.to_string(),
        device_class: profile.device_class.clone(),
        erasure_coded: true,
    }
}
