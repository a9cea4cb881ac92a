//! Seed 000's Figure 9 in simulation: a cache pool on 3 NVMe-like OSDs (capability 2) and 3
//! SATA-like OSDs (capability 1, twice the capacity, so CRUSH weight 2), 128 PGs of 3
//! replicas, a skewed (Zipf 0.8) request mix of 70 % reads and 30 % writes. Reads load the
//! primary, writes every member; an OSD's busy fraction is its load over its capability,
//! capped at 1. For each request rate: the variance of the busy fractions under CRUSH only,
//! after the count balancer (`upmap`) and after the load mode's periods have settled
//! (`load`, from CRUSH's placement, 5 % of the shards per period), the throughput served
//! (the offered rate while no OSD is saturated, else scaled down by the busiest), and the
//! data the load mode moved. Pure model, no I/O: `cargo run --release -p balancer --example
//! load_figure [SVG]` prints the table and writes the chart.

use std::collections::{BTreeMap, BTreeSet};

use balancer::load::{self, LoadConfig, OsdCapability, PgLoad};
use balancer::problem::{Level, Osd, OsdId, Pg, PgId, Pool, Problem, RuleConstraints};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const OSDS: i32 = 6;
const PGS: u32 = 128;
const PG_BYTES: u64 = 1 << 30;

fn capability(osd: OsdId) -> f64 {
    if osd < 3 {
        2000.0
    } else {
        1000.0
    }
}

fn problem(rng: &mut ChaCha8Rng) -> Problem {
    let osds: Vec<Osd> = (0..OSDS)
        .map(|id| Osd {
            id,
            weight: if id < 3 { 1.0 } else { 2.0 },
            ancestors: BTreeMap::from([(1, -2 - id)]),
            class: None,
        })
        .collect();
    let rule = RuleConstraints {
        candidates: (0..OSDS).collect(),
        levels: vec![Level {
            type_id: 1,
            max_per_pg: 1,
            pin_to_raw: false,
        }],
        positional: false,
        ancestors: BTreeMap::new(),
        takes: Vec::new(),
    };
    let pgs = (0..PGS)
        .map(|seed| {
            // Weighted draws without replacement, as straw2 places replicas.
            let mut raw = Vec::new();
            while raw.len() < 3 {
                let total: f64 = osds
                    .iter()
                    .filter(|o| !raw.contains(&o.id))
                    .map(|o| o.weight)
                    .sum();
                let mut pick = rng.gen::<f64>() * total;
                for o in osds.iter().filter(|o| !raw.contains(&o.id)) {
                    pick -= o.weight;
                    if pick <= 0.0 {
                        raw.push(o.id);
                        break;
                    }
                }
            }
            Pg {
                id: PgId { pool: 1, seed },
                raw,
                upmap_items: Vec::new(),
                size_bytes: Some(PG_BYTES),
                from_pg_upmap: false,
            }
        })
        .collect();
    Problem {
        osds,
        pools: vec![Pool {
            id: 1,
            name: "cache".into(),
            size: 3,
            rule,
        }],
        pgs,
    }
}

/// Per-PG share of the requests: Zipf(0.8) over a random order of the PGs.
fn shares(rng: &mut ChaCha8Rng) -> Vec<f64> {
    let mut order: Vec<usize> = (0..PGS as usize).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.gen_range(0..=i));
    }
    let raw: Vec<f64> = (0..PGS as usize)
        .map(|rank| 1.0 / ((rank + 1) as f64).powf(0.8))
        .collect();
    let total: f64 = raw.iter().sum();
    let mut shares = vec![0.0; PGS as usize];
    for (rank, &pg) in order.iter().enumerate() {
        shares[pg] = raw[rank] / total;
    }
    shares
}

fn loads(problem: &Problem, shares: &[f64], rate: f64) -> BTreeMap<PgId, PgLoad> {
    problem
        .pgs
        .iter()
        .zip(shares)
        .map(|(pg, &s)| {
            (
                pg.id,
                PgLoad {
                    reads_per_s: 0.7 * rate * s,
                    writes_per_s: 0.3 * rate * s,
                    bytes: PG_BYTES,
                },
            )
        })
        .collect()
}

/// Uncapped utilisation per OSD of the problem's current up sets.
fn utilisation(problem: &Problem, loads: &BTreeMap<PgId, PgLoad>) -> Vec<f64> {
    let mut load = vec![0.0; OSDS as usize];
    for pg in &problem.pgs {
        let up = pg.up();
        let l = loads[&pg.id];
        load[up[0] as usize] += l.reads_per_s;
        for &o in &up {
            load[o as usize] += l.writes_per_s;
        }
    }
    (0..OSDS)
        .map(|o| load[o as usize] / capability(o))
        .collect()
}

fn variance(values: &[f64]) -> f64 {
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / values.len() as f64
}

struct Row {
    rate: f64,
    variance: [f64; 3],
    served: [f64; 3],
    periods: usize,
    moved_share: f64,
    primaries: usize,
}

fn main() {
    let svg_path = std::env::args().nth(1);
    let mut rng = ChaCha8Rng::seed_from_u64(2026);
    let crush = problem(&mut rng);
    let shares = shares(&mut rng);
    let upmap = {
        let plan = balancer::balance(&crush, &balancer::BalanceConfig::default()).expect("balance");
        let mut p = crush.clone();
        for pg in &mut p.pgs {
            pg.upmap_items = plan.items.get(&pg.id).cloned().unwrap_or_default();
        }
        p
    };
    let capability_map: BTreeMap<OsdId, OsdCapability> = (0..OSDS)
        .map(|o| {
            (
                o,
                OsdCapability {
                    read_ops_per_s: capability(o),
                    write_ops_per_s: capability(o),
                    free_bytes: if o < 3 { 1 << 40 } else { 2 << 40 },
                },
            )
        })
        .collect();
    let shards = PGS as usize * 3;
    let mut rows = Vec::new();
    for step in 1..=10 {
        let rate = 400.0 * f64::from(step);
        let demand = loads(&crush, &shares, rate);
        // The load mode's periods, from CRUSH's placement, until one changes nothing.
        let mut balanced = crush.clone();
        let mut cooldown = BTreeSet::new();
        let (mut periods, mut moved, mut primaries) = (0, 0u64, 0);
        // Reads and writes share one device: the thresholds split 0.8 of its capability by
        // the mix (0.7 : 0.3), so below both thresholds an OSD is below 0.8 busy.
        let config = LoadConfig {
            read_threshold: 0.8 * 0.7,
            write_threshold: 0.8 * 0.3,
            max_shards_moved: shards / 20,
            max_primary_changes: shards / 20,
            max_bytes_moved: (shards as u64 * PG_BYTES) / 20,
            ..LoadConfig::default()
        };
        for _ in 0..50 {
            let plan = load::plan_load(&balanced, &demand, &capability_map, &cooldown, &config);
            if plan.primaries.is_empty() && plan.moves.changes.is_empty() {
                break;
            }
            periods += 1;
            moved += plan.bytes_moved;
            primaries += plan.primaries.len();
            cooldown = plan
                .primaries
                .keys()
                .copied()
                .chain(plan.moves.changes.iter().map(|c| match c {
                    balancer::UpmapChange::Set { pg, .. }
                    | balancer::UpmapChange::Remove { pg } => *pg,
                }))
                .collect();
            load::apply_to_problem(&mut balanced, &plan);
        }
        let mut variance_row = [0.0; 3];
        let mut served = [0.0; 3];
        for (k, p) in [&crush, &upmap, &balanced].into_iter().enumerate() {
            let util = utilisation(p, &demand);
            let busy: Vec<f64> = util.iter().map(|u| u.min(1.0)).collect();
            variance_row[k] = variance(&busy);
            let peak = util.iter().copied().fold(0.0, f64::max);
            served[k] = rate / peak.max(1.0);
        }
        rows.push(Row {
            rate,
            variance: variance_row,
            served,
            periods,
            moved_share: moved as f64 / (shards as u64 * PG_BYTES) as f64,
            primaries,
        });
    }
    println!(
        "{:>6} {:>10} {:>10} {:>10} {:>8} {:>8} {:>8} {:>7} {:>9} {:>9}",
        "rate",
        "var crush",
        "var upmap",
        "var load",
        "tp crush",
        "tp upmap",
        "tp load",
        "periods",
        "moved %",
        "primaries"
    );
    for r in &rows {
        println!(
            "{:>6.0} {:>10.5} {:>10.5} {:>10.5} {:>8.0} {:>8.0} {:>8.0} {:>7} {:>9.2} {:>9}",
            r.rate,
            r.variance[0],
            r.variance[1],
            r.variance[2],
            r.served[0],
            r.served[1],
            r.served[2],
            r.periods,
            r.moved_share * 100.0,
            r.primaries
        );
    }
    if let Some(path) = svg_path {
        std::fs::write(&path, chart(&rows)).expect("write the chart");
        println!("chart: {path}");
    }
}

/// Busy-fraction variance against the request rate, one line per placement.
fn chart(rows: &[Row]) -> String {
    let (width, height, margin) = (640.0, 360.0, 50.0);
    let x_max = rows.last().map_or(1.0, |r| r.rate);
    let y_max = rows
        .iter()
        .flat_map(|r| r.variance)
        .fold(1e-9_f64, f64::max);
    let x = |v: f64| margin + v / x_max * (width - 2.0 * margin);
    let y = |v: f64| height - margin - v / y_max * (height - 2.0 * margin);
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{}\" y=\"20\" text-anchor=\"middle\">Variance of per-OSD busy fraction (seed 000 Fig. 9, simulated)</text>\n\
         <line x1=\"{margin}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n\
         <line x1=\"{margin}\" y1=\"{margin}\" x2=\"{margin}\" y2=\"{}\" stroke=\"black\"/>\n\
         <text x=\"{}\" y=\"{}\" text-anchor=\"middle\">requests/s</text>\n\
         <text x=\"{margin}\" y=\"{}\" text-anchor=\"middle\">{y_max:.3}</text>\n",
        width / 2.0,
        height - margin,
        width - margin,
        height - margin,
        height - margin,
        width / 2.0,
        height - 10.0,
        margin - 8.0,
    );
    for r in rows {
        svg.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{:.0}</text>\n",
            x(r.rate),
            height - margin + 15.0,
            r.rate
        ));
    }
    for (k, (name, color)) in [
        ("CRUSH only", "#d62728"),
        ("upmap", "#1f77b4"),
        ("load", "#2ca02c"),
    ]
    .into_iter()
    .enumerate()
    {
        let points: Vec<String> = rows
            .iter()
            .map(|r| format!("{:.1},{:.1}", x(r.rate), y(r.variance[k])))
            .collect();
        svg.push_str(&format!(
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"/>\n\
             <text x=\"{}\" y=\"{}\" fill=\"{color}\">{name}</text>\n",
            points.join(" "),
            width - margin - 90.0,
            margin + 15.0 * k as f64,
        ));
    }
    svg.push_str("</svg>\n");
    svg
}
