//! balancer: PG distribution analysis and the minimal-movement upmap balancer. Pure: no I/O,
//! no clock, no global randomness; the CLI reads maps and writes commands.
//!
//! Owns:
//! - [`problem`]: the balancer's own input model (OSDs with weights and failure-domain
//!   ancestors, pools with rule constraints, PGs with raw CRUSH sets and existing upmap items);
//! - [`targets`]: weight-proportional targets and their `[floor, ceil]` bounds;
//! - [`analysis`]: per-OSD distribution tables (seed 004's figures) and [`svg`] charts;
//! - [`flow`]: an exact min-cost flow solver;
//! - [`aside`]: PGs whose raw set (a hand-made `pg_upmap`) the balancer cannot move safely;
//! - [`balance`]: the count balancer, one min-cost flow over all pools at once;
//! - [`deviation`]: the count balancer's bounded mode, as Ceph's `--upmap-deviation N`: every
//!   OSD of every pool within N shards of its target with the fewest moves;
//! - [`takes`]: rules with several `take` blocks, each balanced as a pool of its own;
//! - [`limit`]: `max_moves`, at most N shard changes per run, never worse than before;
//! - [`period`]: the continuous balancer's decision for one period (wait for recovery, a
//!   movement budget) and `eval`'s score;
//! - [`bytes`]: the older bytes refinement (swaps on top of the count plan, `strata balance
//!   --mode bytes`);
//! - [`bytes_exact`]: the `bytes` mode's planner, exact on per-PG bytes (leximax of the OSDs'
//!   fills, then fewest moves, within a move budget; branch and bound, proven or flagged);
//! - [`read`]: the `read` mode, primaries spread by weight with no data moved (one exact
//!   min-cost flow over the members of each replicated PG);
//! - [`load`]: the `load` mode, seed 000's I/O-load balancing (read relief by primaries,
//!   write relief by moving the hottest PGs, composite weight, hysteresis, budget);
//! - [`cluster`]: the adapter from a CRUSH map plus OSD/pool/PG data to a [`Problem`];
//! - [`generate`]: seeded synthetic clusters for tests and benches.
//!
//! Invariants (asserted in [`balance::check_plan`]): a plan never puts two shards of a PG in one
//! failure domain beyond the rule's limit, only adds shards to candidate OSDs of the pool, and
//! changes OSDs in place (position `i` of the up set replaces position `i` of the raw set).

pub mod analysis;
pub mod aside;
pub mod balance;
pub mod bytes;
pub mod bytes_exact;
pub mod cluster;
pub mod deviation;
pub mod error;
pub mod flow;
pub mod generate;
pub mod limit;
pub mod load;
pub mod period;
pub mod problem;
pub mod read;
pub mod svg;
pub mod takes;
pub mod targets;
pub mod tree;

#[cfg(test)]
mod exhaustive;

pub use analysis::{Distribution, Scope, Summary, Table};
pub use aside::{set_aside, SetAside};
pub use balance::{balance, BalanceConfig, Plan, UpmapChange, Violation, ViolationReason};
pub use error::BalancerError;
pub use problem::{
    Level, Osd, OsdId, Pg, PgId, Pool, PoolId, Problem, RuleConstraints, Take, ITEM_NONE,
};
pub use targets::{Bounds, Targets};
