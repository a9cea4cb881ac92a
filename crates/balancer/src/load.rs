//! The `load` mode: seed 000's I/O-load balancing of a (cache) pool. Pure policy: the
//! executor (the server) measures per-PG reads and writes per statistics period and each OSD's
//! capability, calls [`plan_load`] and applies the result.
//!
//! Model, per period: an OSD's read load is the reads of the PGs it leads (the primary serves
//! reads), its write load the writes of every PG it holds (each member applies each write);
//! its read and write utilisation are those loads over its capability (operations per second
//! it sustains, measured or from its device profile). One device serves both, so the OSD's
//! busy share is their sum: an OSD that serves reads (writes) is read (write) overloaded when
//! that sum passes `read_threshold` (`write_threshold`); judged apart, an OSD at 0.5 of its
//! capability in reads and 0.3 in writes was never relieved, nor kept from receiving.
//!
//! Seed 000's composite weight ranks the targets: `W = w_perf * perf + w_load * (1 - load) +
//! w_capacity * capacity`, each term normalised to [0, 1] over the OSDs (performance and free
//! capacity over their maximum, load as utilisation over the highest, entering inverted), the
//! weights configurable and summing to 1.
//!
//! Relief, most loaded OSD first: reads first by moving primaries to another member of the
//! PG (no data moved), the hottest PG first; then writes by moving the hottest PGs' shards
//! with upmap items to the candidate OSD of highest weight that keeps the failure-domain
//! limits. Hysteresis: an OSD is relieved only above its threshold, down to `(1 -
//! hysteresis)` of it, and a target may only receive while its busy share (reads and writes
//! together) stays below that lower mark,
//! so a move never makes its target overloaded; PGs moved in the last periods (the caller's
//! `cooldown`) are not moved again. Budget: at most `max_primary_changes` primaries,
//! `max_shards_moved` shards and `max_bytes_moved` bytes per period.

use std::collections::{BTreeMap, BTreeSet};

use crate::balance::{build_trees, finish, Plan, SolveStats};
use crate::problem::{OsdId, PgId, Problem, ITEM_NONE};
use crate::targets::Targets;

/// One OSD's capability and room.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OsdCapability {
    /// Reads per second it sustains.
    pub read_ops_per_s: f64,
    /// Writes per second it sustains.
    pub write_ops_per_s: f64,
    /// Free bytes.
    pub free_bytes: u64,
}

/// One PG's load in the period.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PgLoad {
    pub reads_per_s: f64,
    pub writes_per_s: f64,
    /// Bytes stored (what moving a shard copies).
    pub bytes: u64,
}

/// Knobs of the load mode.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadConfig {
    /// Read overload above this share of the read capability.
    pub read_threshold: f64,
    /// Write overload above this share of the write capability.
    pub write_threshold: f64,
    /// Relieve down to, and fill targets up to, `(1 - hysteresis)` of the threshold.
    pub hysteresis: f64,
    /// Composite weight: performance, load (inverted), free capacity; they sum to 1.
    pub weight_performance: f64,
    pub weight_load: f64,
    pub weight_capacity: f64,
    pub max_primary_changes: usize,
    pub max_shards_moved: usize,
    pub max_bytes_moved: u64,
}

impl Default for LoadConfig {
    fn default() -> Self {
        Self {
            read_threshold: 0.8,
            write_threshold: 0.8,
            hysteresis: 0.1,
            weight_performance: 0.4,
            weight_load: 0.4,
            weight_capacity: 0.2,
            max_primary_changes: usize::MAX,
            max_shards_moved: usize::MAX,
            max_bytes_moved: u64::MAX,
        }
    }
}

/// The load mode's plan for one period.
#[derive(Debug, Clone)]
pub struct LoadPlan {
    /// New primaries (PGs whose members stay).
    pub primaries: BTreeMap<PgId, OsdId>,
    /// Their full `pg_upmap` reorderings (as [`crate::read::ReadPlan::pg_upmap`]).
    pub pg_upmap: BTreeMap<PgId, Vec<OsdId>>,
    /// The shard moves, as upmap items (PGs whose primary does not change this period).
    pub moves: Plan,
    /// Bytes the moves copy.
    pub bytes_moved: u64,
    /// Per OSD (read utilisation, write utilisation) before and after, as the model predicts.
    pub before: BTreeMap<OsdId, (f64, f64)>,
    pub after: BTreeMap<OsdId, (f64, f64)>,
}

struct State<'a> {
    capability: &'a BTreeMap<OsdId, OsdCapability>,
    load: Vec<PgLoad>,
    up: Vec<Vec<OsdId>>,
    /// Index into `up[i]` of the primary.
    primary: Vec<usize>,
    read: BTreeMap<OsdId, f64>,
    write: BTreeMap<OsdId, f64>,
}

impl State<'_> {
    fn utilisation(&self, osd: OsdId) -> (f64, f64) {
        let Some(c) = self.capability.get(&osd) else {
            return (0.0, 0.0);
        };
        let r = self.read.get(&osd).copied().unwrap_or(0.0) / c.read_ops_per_s.max(1e-9);
        let w = self.write.get(&osd).copied().unwrap_or(0.0) / c.write_ops_per_s.max(1e-9);
        (r, w)
    }

    /// The device's share of time the OSD's reads and writes take together: one device serves
    /// both, so an OSD under each threshold alone may still be past its capability.
    fn busy(&self, osd: OsdId) -> f64 {
        let (r, w) = self.utilisation(osd);
        r + w
    }

    fn all_utilisation(&self) -> BTreeMap<OsdId, (f64, f64)> {
        self.capability
            .keys()
            .map(|&o| (o, self.utilisation(o)))
            .collect()
    }

    /// Seed 000's composite weight of every OSD.
    fn weights(&self, config: &LoadConfig) -> BTreeMap<OsdId, f64> {
        let max = |f: &dyn Fn(&OsdCapability) -> f64| {
            self.capability
                .values()
                .map(f)
                .fold(0.0_f64, f64::max)
                .max(1e-9)
        };
        let perf_max = max(&|c| c.read_ops_per_s + c.write_ops_per_s);
        let free_max = max(&|c| c.free_bytes as f64);
        let util = self.all_utilisation();
        let load_max = util
            .values()
            .map(|&(r, w)| r + w)
            .fold(0.0_f64, f64::max)
            .max(1e-9);
        self.capability
            .iter()
            .map(|(&o, c)| {
                let (r, w) = util[&o];
                let weight = config.weight_performance
                    * ((c.read_ops_per_s + c.write_ops_per_s) / perf_max)
                    + config.weight_load * (1.0 - (r + w) / load_max)
                    + config.weight_capacity * (c.free_bytes as f64 / free_max);
                (o, weight)
            })
            .collect()
    }
}

/// Plans one period of the load mode. `loads`: per PG (missing = idle); `capability`: per
/// OSD (an OSD missing is never a target); `cooldown`: PGs not to move this period.
pub fn plan_load(
    problem: &Problem,
    loads: &BTreeMap<PgId, PgLoad>,
    capability: &BTreeMap<OsdId, OsdCapability>,
    cooldown: &BTreeSet<PgId>,
    config: &LoadConfig,
) -> LoadPlan {
    // Pools whose rules have several takes are left alone here (see crate::takes).
    let single_take = problem.single_take_only();
    let problem: &Problem = &single_take;
    let mut state = State {
        capability,
        load: problem
            .pgs
            .iter()
            .map(|pg| loads.get(&pg.id).copied().unwrap_or_default())
            .collect(),
        up: problem.pgs.iter().map(|pg| pg.up()).collect(),
        primary: problem
            .pgs
            .iter()
            .map(|pg| pg.up().iter().position(|&o| o != ITEM_NONE).unwrap_or(0))
            .collect(),
        read: BTreeMap::new(),
        write: BTreeMap::new(),
    };
    for i in 0..problem.pgs.len() {
        let lead = state.up[i][state.primary[i]];
        *state.read.entry(lead).or_default() += state.load[i].reads_per_s;
        for &o in state.up[i].iter().filter(|&&o| o != ITEM_NONE) {
            *state.write.entry(o).or_default() += state.load[i].writes_per_s;
        }
    }
    let before = state.all_utilisation();
    let read_high = config.read_threshold;
    let read_low = config.read_threshold * (1.0 - config.hysteresis);
    let write_high = config.write_threshold;
    let write_low = config.write_threshold * (1.0 - config.hysteresis);
    let mut touched: BTreeSet<usize> = BTreeSet::new();
    let mut primaries = BTreeMap::new();
    let mut pg_upmap = BTreeMap::new();

    // Reads: primaries first (no data moved).
    let mut overloaded: Vec<(OsdId, f64)> = before
        .iter()
        .filter(|(_, &(r, w))| r > 0.0 && r + w > read_high)
        .map(|(&o, &(r, w))| (o, r + w))
        .collect();
    overloaded.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    for (osd, _) in overloaded {
        let mut led: Vec<usize> = (0..problem.pgs.len())
            .filter(|&i| state.up[i][state.primary[i]] == osd)
            .filter(|&i| movable_primary(problem, i) && !cooldown.contains(&problem.pgs[i].id))
            .collect();
        led.sort_by(|&a, &b| {
            state.load[b]
                .reads_per_s
                .total_cmp(&state.load[a].reads_per_s)
                .then(a.cmp(&b))
        });
        for i in led {
            if state.busy(osd) <= read_low || primaries.len() >= config.max_primary_changes {
                break;
            }
            let reads = state.load[i].reads_per_s;
            if reads <= 0.0 {
                break;
            }
            let weights = state.weights(config);
            let target = state.up[i]
                .iter()
                .enumerate()
                .filter(|&(_, &o)| o != ITEM_NONE && o != osd)
                .filter_map(|(slot, &o)| {
                    let c = capability.get(&o)?;
                    let after = state.busy(o) + reads / c.read_ops_per_s.max(1e-9);
                    (after <= read_low).then_some((slot, o, weights[&o]))
                })
                .max_by(|a, b| a.2.total_cmp(&b.2).then(b.1.cmp(&a.1)));
            let Some((slot, to, _)) = target else {
                continue;
            };
            *state.read.entry(osd).or_default() -= reads;
            *state.read.entry(to).or_default() += reads;
            state.primary[i] = slot;
            touched.insert(i);
            let pg = &problem.pgs[i];
            let mut raw = pg.raw.clone();
            raw.swap(0, slot);
            primaries.insert(pg.id, to);
            pg_upmap.insert(pg.id, raw);
        }
    }

    // Writes: the hottest PGs' shards to the heaviest-weighted targets.
    let trees = build_trees(problem);
    let mut shards_moved = 0;
    let mut bytes_moved = 0u64;
    let mut overloaded: Vec<(OsdId, f64)> = state
        .all_utilisation()
        .iter()
        .filter(|(_, &(_, w))| w > 0.0)
        .filter(|(_, &(r, w))| r + w > write_high)
        .map(|(&o, &(r, w))| (o, r + w))
        .collect();
    overloaded.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    for (osd, _) in overloaded {
        let mut held: Vec<usize> = (0..problem.pgs.len())
            .filter(|&i| state.up[i].contains(&osd) && !touched.contains(&i))
            .filter(|&i| !cooldown.contains(&problem.pgs[i].id))
            .collect();
        held.sort_by(|&a, &b| {
            state.load[b]
                .writes_per_s
                .total_cmp(&state.load[a].writes_per_s)
                .then(a.cmp(&b))
        });
        for i in held {
            if state.busy(osd) <= write_low || shards_moved >= config.max_shards_moved {
                break;
            }
            let load = state.load[i];
            if load.writes_per_s <= 0.0
                || bytes_moved.saturating_add(load.bytes) > config.max_bytes_moved
            {
                continue;
            }
            let pg = &problem.pgs[i];
            let (Some(pool), Some(tree)) = (problem.pool(pg.id.pool), trees.get(&pg.id.pool))
            else {
                continue;
            };
            let occupancy = tree.occupancy(&pg.raw);
            let slot = state.up[i].iter().position(|&o| o == osd).unwrap_or(0);
            let leads = slot == state.primary[i];
            let weights = state.weights(config);
            let target = pool
                .rule
                .candidates
                .iter()
                .copied()
                .filter(|o| !state.up[i].contains(o))
                .filter_map(|o| {
                    let c = capability.get(&o)?;
                    let (r, w) = state.utilisation(o);
                    let w_after = w + load.writes_per_s / c.write_ops_per_s.max(1e-9);
                    let r_after = if leads {
                        r + load.reads_per_s / c.read_ops_per_s.max(1e-9)
                    } else {
                        r
                    };
                    let mut set = state.up[i].clone();
                    set[slot] = o;
                    (w_after + r_after <= write_low && tree.respects(&set, &occupancy))
                        .then_some((o, weights[&o]))
                })
                .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)));
            let Some((to, _)) = target else {
                continue;
            };
            *state.write.entry(osd).or_default() -= load.writes_per_s;
            *state.write.entry(to).or_default() += load.writes_per_s;
            if leads {
                *state.read.entry(osd).or_default() -= load.reads_per_s;
                *state.read.entry(to).or_default() += load.reads_per_s;
            }
            state.up[i][slot] = to;
            // A raw OSD coming back goes home, as upmap items replace in place.
            if let Some(home) = pg.raw.iter().position(|&r| r == to) {
                state.up[i].swap(slot, home);
                if state.primary[i] == slot {
                    state.primary[i] = home;
                } else if state.primary[i] == home {
                    state.primary[i] = slot;
                }
            }
            touched.insert(i);
            shards_moved += 1;
            bytes_moved += load.bytes;
        }
    }
    let up: BTreeMap<PgId, Vec<OsdId>> = problem
        .pgs
        .iter()
        .enumerate()
        .map(|(i, pg)| {
            let set = if primaries.contains_key(&pg.id) {
                pg.up()
            } else {
                state.up[i].clone()
            };
            (pg.id, set)
        })
        .collect();
    let moves = finish(
        problem,
        &Targets::compute(problem),
        &trees,
        up,
        SolveStats::default(),
    );
    LoadPlan {
        primaries,
        pg_upmap,
        moves,
        bytes_moved,
        before,
        after: state.all_utilisation(),
    }
}

/// A PG whose primary may change without moving data: of a replicated pool, 2+ members.
fn movable_primary(problem: &Problem, i: usize) -> bool {
    let pg = &problem.pgs[i];
    problem
        .pool(pg.id.pool)
        .is_some_and(|pool| !pool.rule.positional)
        && pg.up().iter().filter(|&&o| o != ITEM_NONE).count() >= 2
}

/// Applies a plan to the problem, as the next period would see it: the primaries' reordered
/// sets as `pg_upmap` (the raw set) and the moves as upmap items.
pub fn apply_to_problem(problem: &mut Problem, plan: &LoadPlan) {
    for pg in &mut problem.pgs {
        if let Some(raw) = plan.pg_upmap.get(&pg.id) {
            pg.raw = raw.clone();
            pg.from_pg_upmap = true;
        } else if let Some(items) = plan.moves.items.get(&pg.id) {
            pg.upmap_items = items.clone();
        }
    }
}

#[cfg(test)]
mod tests;
