//! Seeded synthetic clusters for tests and benches: racks > hosts > OSDs with optional weight
//! spread, pools whose "raw" sets are drawn as CRUSH would (weighted, without replacement, one
//! shard per host and at most `rack_limit` per rack). A seed reproduces a cluster exactly.

use std::collections::{BTreeMap, BTreeSet};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::problem::{Level, Osd, OsdId, Pg, PgId, Pool, Problem, RuleConstraints};

/// CRUSH type ids used by generated clusters.
pub const TYPE_HOST: i32 = 1;
pub const TYPE_RACK: i32 = 3;

/// One generated pool.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolSpec {
    pub pg_count: u32,
    pub size: u32,
    /// At most this many shards of a PG per rack (None = no rack level).
    pub rack_limit: Option<u32>,
    /// Only OSDs with `id % modulus == remainder` are candidates (a device class), if set.
    pub class: Option<(i32, i32)>,
}

/// A generated cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterSpec {
    pub racks: usize,
    pub hosts_per_rack: usize,
    pub osds_per_host: usize,
    /// OSD weights are drawn uniformly from `[1, 1 + weight_spread]`.
    pub weight_spread: f64,
    pub pools: Vec<PoolSpec>,
    pub seed: u64,
}

/// Build the problem described by `spec`.
pub fn generate(spec: &ClusterSpec) -> Problem {
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
    let mut problem = Problem::default();
    let mut id: OsdId = 0;
    for rack in 0..spec.racks {
        for host in 0..spec.hosts_per_rack {
            let host_bucket = -2 - (rack * spec.hosts_per_rack + host) as i32;
            for _ in 0..spec.osds_per_host {
                let weight = 1.0 + spec.weight_spread * rng.gen::<f64>();
                let ancestors =
                    BTreeMap::from([(TYPE_HOST, host_bucket), (TYPE_RACK, -1000 - rack as i32)]);
                problem.osds.push(Osd {
                    id,
                    weight,
                    ancestors,
                    class: None,
                });
                id += 1;
            }
        }
    }
    for (index, spec_pool) in spec.pools.iter().enumerate() {
        let pool_id = index as i64 + 1;
        let candidates: BTreeSet<OsdId> = problem
            .osds
            .iter()
            .filter(|o| spec_pool.class.is_none_or(|(m, r)| o.id % m == r))
            .map(|o| o.id)
            .collect();
        let mut levels = Vec::new();
        if let Some(limit) = spec_pool.rack_limit {
            levels.push(Level {
                type_id: TYPE_RACK,
                max_per_pg: limit,
                pin_to_raw: false,
            });
        }
        levels.push(Level {
            type_id: TYPE_HOST,
            max_per_pg: 1,
            pin_to_raw: false,
        });
        let pool = Pool {
            id: pool_id,
            name: format!("pool{pool_id}"),
            size: spec_pool.size,
            rule: RuleConstraints {
                candidates,
                levels,
                positional: false,
                // Every generated OSD has one parent per level: `Osd::ancestors` is the rule's.
                ancestors: BTreeMap::new(),
                takes: Vec::new(),
            },
        };
        for seed in 0..spec_pool.pg_count {
            let raw = draw(&mut rng, &problem.osds, &pool);
            problem.pgs.push(Pg {
                id: PgId {
                    pool: pool_id,
                    seed,
                },
                raw,
                upmap_items: Vec::new(),
                size_bytes: Some(rng.gen_range(1_u64 << 30..4_u64 << 30)),
                from_pg_upmap: false,
            });
        }
        problem.pools.push(pool);
    }
    problem
}

/// Draw one raw set: weighted without replacement, respecting every level's limit.
fn draw(rng: &mut ChaCha8Rng, osds: &[Osd], pool: &Pool) -> Vec<OsdId> {
    let mut set: Vec<OsdId> = Vec::new();
    let mut used: BTreeMap<(i32, i64), u32> = BTreeMap::new();
    for _ in 0..pool.size {
        let allowed: Vec<&Osd> = osds
            .iter()
            .filter(|o| pool.rule.candidates.contains(&o.id) && o.weight > 0.0)
            .filter(|o| {
                pool.rule.levels.iter().all(|l| {
                    used.get(&(l.type_id, o.domain(l.type_id)))
                        .copied()
                        .unwrap_or(0)
                        < l.max_per_pg
                })
            })
            .collect();
        let total: f64 = allowed.iter().map(|o| o.weight).sum();
        if allowed.is_empty() || total <= 0.0 {
            break;
        }
        let mut pick = rng.gen::<f64>() * total;
        let mut chosen = allowed[allowed.len() - 1];
        for osd in &allowed {
            if pick < osd.weight {
                chosen = osd;
                break;
            }
            pick -= osd.weight;
        }
        for l in &pool.rule.levels {
            *used
                .entry((l.type_id, chosen.domain(l.type_id)))
                .or_default() += 1;
        }
        set.push(chosen.id);
    }
    set
}
