//! `strata bench balance --multi-pool`: issue 38's figure. Multi-pool maps built with Ceph's
//! own tools (the CRUSH map compiled by `crushtool -c` with device classes and the rules, the
//! osdmap made by `osdmaptool --createsimple` and `--import-crush`, the pools added by the
//! `osdmap` crate's encoder, which osdmaptool reads), including the hard cases: an EC pool as
//! wide as the hosts, device classes of unequal size, a pool over one rack, a rule with two
//! takes (first replica from ssd, the rest from hdd). On each map, per pool and in total, the
//! max deviation from target and the shards moved: raw CRUSH, `osdmaptool --upmap
//! --upmap-deviation N --upmap-max 100000` and three strata plans, all run here on the same map:
//! the bounded mode at the same N (moves compared at Ceph's bound), the bounded mode per pool at
//! the max deviation osdmaptool's plan reached on that pool (moves compared at equal balance),
//! and the tightest plan. Each plan's items are written into the map; `osdmaptool
//! --upmap-cleanup` (Ceph's `verify_upmap`) must keep every one of them and `osdmaptool
//! --test-map-pgs-dump` (Ceph's own mapping, upmaps applied) must map every PG as strata says.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use balancer::analysis::Scope;
use balancer::problem::{apply_upmap_items, moved_shards};
use balancer::{BalanceConfig, Distribution, PgId, Problem};
use osdmap::{Pool as MapPool, PoolType};

/// One pool of a built map.
struct PoolCase {
    id: i64,
    name: &'static str,
    rule: usize,
    erasure: bool,
    size: u32,
    pg_num: u32,
}

/// One map: hosts in racks, `ssd_per_host` SSDs then HDDs in each host, rules and pools.
struct MapCase {
    name: &'static str,
    racks: usize,
    hosts_per_rack: usize,
    ssd_per_host: usize,
    hdd_per_host: usize,
    rules: Vec<(&'static str, &'static str)>,
    pools: Vec<PoolCase>,
}

fn cases() -> Vec<MapCase> {
    let hdd_rep = (
        "hdd_rep",
        "step take default class hdd\n\tstep chooseleaf firstn 0 type host\n\tstep emit",
    );
    let hdd_ec = (
        "hdd_ec",
        "step take default class hdd\n\tstep chooseleaf indep 0 type host\n\tstep emit",
    );
    let ssd_rep = (
        "ssd_rep",
        "step take default class ssd\n\tstep chooseleaf firstn 0 type host\n\tstep emit",
    );
    let ssd_first = (
        "ssd_first",
        "step take default class ssd\n\tstep chooseleaf firstn 1 type host\n\tstep emit\n\
         \tstep take default class hdd\n\tstep chooseleaf firstn -1 type host\n\tstep emit",
    );
    let rack0 = (
        "rack0_rep",
        "step take rack0\n\tstep chooseleaf firstn 0 type host\n\tstep emit",
    );
    let any = (
        "any_rep",
        "step take default\n\tstep chooseleaf firstn 0 type host\n\tstep emit",
    );
    let pool = |id, name, rule, erasure, size, pg_num| PoolCase {
        id,
        name,
        rule,
        erasure,
        size,
        pg_num,
    };
    vec![
        MapCase {
            name: "classes-ec-wide",
            racks: 2,
            hosts_per_rack: 3,
            ssd_per_host: 1,
            hdd_per_host: 4,
            rules: vec![hdd_rep, hdd_ec, ssd_rep, ssd_first, rack0],
            pools: vec![
                pool(1, "hdd-rep3", 0, false, 3, 256),
                pool(2, "hdd-ec4+2", 1, true, 6, 64),
                pool(3, "ssd-rep2", 2, false, 2, 64),
                pool(4, "ssd-first", 3, false, 3, 128),
                pool(5, "rack0-rep2", 4, false, 2, 64),
            ],
        },
        MapCase {
            name: "mixed-weights",
            racks: 2,
            hosts_per_rack: 4,
            ssd_per_host: 0,
            hdd_per_host: 4,
            rules: vec![any, hdd_ec, rack0],
            pools: vec![
                pool(1, "rep3", 0, false, 3, 512),
                pool(2, "ec6+2", 1, true, 8, 128),
                pool(3, "rack0-rep3", 2, false, 3, 128),
            ],
        },
    ]
}

/// OSD weight in CRUSH units: HDDs 1-4 TiB, SSDs 0.5-1, by a fixed pattern.
fn weight(osd: usize, ssd: bool) -> f64 {
    if ssd {
        [0.5, 1.0, 0.75][osd % 3]
    } else {
        [1.0, 2.0, 4.0, 3.0, 1.0, 2.0, 3.0][osd % 7]
    }
}

/// The CRUSH map's text (compiled by crushtool).
fn crush_text(case: &MapCase) -> String {
    let per_host = case.ssd_per_host + case.hdd_per_host;
    let hosts = case.racks * case.hosts_per_rack;
    let mut text = String::from(
        "tunable choose_local_tries 0\ntunable choose_local_fallback_tries 0\n\
         tunable choose_total_tries 50\ntunable chooseleaf_descend_once 1\n\
         tunable chooseleaf_vary_r 1\ntunable chooseleaf_stable 1\ntunable straw_calc_version 1\n\
         tunable allowed_bucket_algs 54\n\n",
    );
    for osd in 0..hosts * per_host {
        let class = if osd % per_host < case.ssd_per_host {
            "ssd"
        } else {
            "hdd"
        };
        let _ = writeln!(text, "device {osd} osd.{osd} class {class}");
    }
    text.push_str("\ntype 0 osd\ntype 1 host\ntype 3 rack\ntype 11 root\n\n");
    let mut host_weight = vec![0.0; hosts];
    for (host, total) in host_weight.iter_mut().enumerate() {
        let _ = writeln!(
            text,
            "host host{host} {{\n\tid {}\n\talg straw2\n\thash 0",
            -2 - host as i32
        );
        for slot in 0..per_host {
            let osd = host * per_host + slot;
            let w = weight(osd, slot < case.ssd_per_host);
            *total += w;
            let _ = writeln!(text, "\titem osd.{osd} weight {w:.3}");
        }
        text.push_str("}\n");
    }
    let mut rack_weight = vec![0.0; case.racks];
    for (rack, total) in rack_weight.iter_mut().enumerate() {
        let _ = writeln!(
            text,
            "rack rack{rack} {{\n\tid {}\n\talg straw2\n\thash 0",
            -100 - rack as i32
        );
        let first = rack * case.hosts_per_rack;
        for (host, w) in host_weight
            .iter()
            .enumerate()
            .skip(first)
            .take(case.hosts_per_rack)
        {
            *total += w;
            let _ = writeln!(text, "\titem host{host} weight {w:.3}");
        }
        text.push_str("}\n");
    }
    text.push_str("root default {\n\tid -1\n\talg straw2\n\thash 0\n");
    for (rack, w) in rack_weight.iter().enumerate() {
        let _ = writeln!(text, "\titem rack{rack} weight {w:.3}");
    }
    text.push_str("}\n\n");
    for (id, (name, steps)) in case.rules.iter().enumerate() {
        let erasure = case.pools.iter().any(|p| p.rule == id && p.erasure);
        let _ = writeln!(
            text,
            "rule {name} {{\n\tid {id}\n\ttype {}\n\tmin_size 1\n\tmax_size 10\n\t{steps}\n}}",
            if erasure { "erasure" } else { "replicated" }
        );
    }
    text
}

fn run_tool(program: &Path, args: &[&str]) -> anyhow::Result<String> {
    let output = super::peer_command(program)
        .args(args)
        .output()
        .with_context(|| format!("running {}", program.display()))?;
    anyhow::ensure!(
        output.status.success(),
        "{} {}: {}",
        program.display(),
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Build the case's osdmap in `dir` with crushtool and osdmaptool; returns its path.
fn build_map(case: &MapCase, dir: &Path, tools: &Tools) -> anyhow::Result<PathBuf> {
    let text_path = dir.join(format!("{}.crush.txt", case.name));
    let crush_path = dir.join(format!("{}.crush.bin", case.name));
    let map_path = dir.join(format!("{}.osdmap.bin", case.name));
    std::fs::write(&text_path, crush_text(case))?;
    let path = |p: &Path| p.to_string_lossy().into_owned();
    run_tool(
        &tools.crushtool,
        &["-c", &path(&text_path), "-o", &path(&crush_path)],
    )?;
    let osds = case.racks * case.hosts_per_rack * (case.ssd_per_host + case.hdd_per_host);
    run_tool(
        &tools.osdmaptool,
        &[
            "--createsimple",
            &osds.to_string(),
            "--clobber",
            &path(&map_path),
        ],
    )?;
    run_tool(
        &tools.osdmaptool,
        &[&path(&map_path), "--import-crush", &path(&crush_path)],
    )?;
    let mut map = osdmap::OsdMap::decode(&std::fs::read(&map_path)?)
        .with_context(|| format!("decoding {}", map_path.display()))?;
    for existing in map.pools().keys().copied().collect::<Vec<_>>() {
        if !case.pools.iter().any(|p| p.id == existing) {
            anyhow::bail!("osdmaptool --createsimple made pool {existing}, not replaced");
        }
    }
    // --createsimple leaves the OSDs absent: make them exist, up and in.
    for osd in 0..osds as i32 {
        map.set_osd_state(osd, osdmap::map::OSD_EXISTS | osdmap::map::OSD_UP);
        map.set_osd_weight(osd, 0x10000);
    }
    for pool in &case.pools {
        let kind = if pool.erasure {
            PoolType::Erasure
        } else {
            PoolType::Replicated
        };
        let mut entry = MapPool::new(pool.id, pool.name, kind, pool.size, pool.pg_num);
        entry.crush_rule = pool.rule as i32;
        map.insert_pool(entry);
    }
    std::fs::write(&map_path, map.encode())?;
    Ok(map_path)
}

/// osdmaptool and crushtool binaries.
pub struct Tools {
    pub osdmaptool: PathBuf,
    pub crushtool: PathBuf,
}

/// Per pool (and `None` = total): max |count - target| and shards moved from raw CRUSH.
type Figures = BTreeMap<Option<i64>, (f64, usize)>;

fn figures(problem: &Problem, up: &BTreeMap<PgId, Vec<i32>>) -> Figures {
    let distribution = Distribution::compute(problem, up, None);
    let mut out: Figures = BTreeMap::new();
    for table in &distribution.tables {
        let key = match table.scope {
            Scope::Pool(id) => Some(id),
            Scope::Total => None,
        };
        out.entry(key).or_default().0 = table.summary.max_deviation;
    }
    for pg in &problem.pgs {
        let set = up.get(&pg.id).unwrap_or(&pg.raw);
        let moved = moved_shards(&pg.raw, set);
        out.entry(Some(pg.id.pool)).or_default().1 += moved;
        out.entry(None).or_default().1 += moved;
    }
    out
}

/// osdmaptool's plan on `map`, as up sets.
fn peer_up(
    problem: &Problem,
    map: &Path,
    dir: &Path,
    tools: &Tools,
    deviation: u32,
) -> anyhow::Result<BTreeMap<PgId, Vec<i32>>> {
    let out = dir.join("peer-upmaps.txt");
    let path = |p: &Path| p.to_string_lossy().into_owned();
    run_tool(
        &tools.osdmaptool,
        &[
            &path(map),
            "--upmap",
            &path(&out),
            "--upmap-deviation",
            &deviation.to_string(),
            "--upmap-max",
            "100000",
        ],
    )?;
    let items = parse_commands(&std::fs::read_to_string(&out)?)?;
    Ok(problem
        .pgs
        .iter()
        .map(|pg| {
            let list = items.get(&pg.id).map_or(&[][..], Vec::as_slice);
            (pg.id, apply_upmap_items(&pg.raw, list))
        })
        .collect())
}

fn parse_commands(text: &str) -> anyhow::Result<BTreeMap<PgId, Vec<(i32, i32)>>> {
    let mut items = BTreeMap::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if let ["ceph", "osd", "pg-upmap-items", pgid, pairs @ ..] = words.as_slice() {
            let numbers: Vec<i32> = pairs.iter().map(|w| w.parse()).collect::<Result<_, _>>()?;
            let list = numbers.chunks_exact(2).map(|c| (c[0], c[1])).collect();
            items.insert(pgid.parse::<PgId>()?, list);
        }
    }
    Ok(items)
}

/// Ceph's own mapping of `map` (upmaps applied): `osdmaptool --test-map-pgs-dump`, one line
/// `POOL.SEED\t[OSD,...]\tPRIMARY` per PG, parsed into up sets.
pub fn ceph_up_sets(map: &Path, osdmaptool: &Path) -> anyhow::Result<BTreeMap<PgId, Vec<i32>>> {
    let path = map.to_string_lossy().into_owned();
    let text = run_tool(osdmaptool, &[&path, "--test-map-pgs-dump"])?;
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let mut fields = line.split('\t');
        let (Some(pg), Some(set)) = (fields.next(), fields.next()) else {
            continue;
        };
        let (Ok(pg), Some(set)) = (
            pg.parse::<PgId>(),
            set.strip_prefix('[').and_then(|s| s.strip_suffix(']')),
        ) else {
            continue;
        };
        let osds = set
            .split(',')
            .filter(|w| !w.is_empty())
            .map(str::parse)
            .collect::<Result<Vec<i32>, _>>()
            .with_context(|| format!("osdmaptool --test-map-pgs-dump line {line:?}"))?;
        out.insert(pg, osds);
    }
    Ok(out)
}

/// Per OSD, the shards of `up` on it (holes left out).
pub fn osd_counts(up: &BTreeMap<PgId, Vec<i32>>) -> BTreeMap<i32, usize> {
    let mut out = BTreeMap::new();
    for &osd in up.values().flatten() {
        if osd != balancer::ITEM_NONE {
            *out.entry(osd).or_default() += 1;
        }
    }
    out
}

/// Strata's up sets against Ceph's mapping of the map with strata's items: the PGs whose up
/// set differs (0 = osdmaptool agrees with strata on every PG and so on every OSD's count).
fn disagreements(
    with_items: &Path,
    up: &BTreeMap<PgId, Vec<i32>>,
    tools: &Tools,
) -> anyhow::Result<usize> {
    let ceph = ceph_up_sets(with_items, &tools.osdmaptool)?;
    anyhow::ensure!(
        ceph.len() == up.len(),
        "osdmaptool mapped {} PGs, strata {}",
        ceph.len(),
        up.len()
    );
    let differ = up
        .iter()
        .filter(|(pg, set)| ceph.get(pg) != Some(set))
        .count();
    if differ == 0 {
        anyhow::ensure!(osd_counts(&ceph) == osd_counts(up), "per-OSD counts differ");
    }
    Ok(differ)
}

/// Write strata's items into a copy of `map`; returns its path and the number of PGs with
/// items.
fn write_items(
    map: &Path,
    items: &BTreeMap<PgId, Vec<(i32, i32)>>,
    dir: &Path,
) -> anyhow::Result<(PathBuf, usize)> {
    let mut osdmap = osdmap::OsdMap::decode(&std::fs::read(map)?)?;
    let mut written = 0;
    for (pg, list) in items.iter().filter(|(_, l)| !l.is_empty()) {
        let id = osdmap::PgId::new(pg.pool, pg.seed);
        osdmap.set_pg_upmap_items(id, Some(list.clone()));
        written += 1;
    }
    let with_items = dir.join("strata-upmaps.osdmap.bin");
    std::fs::write(&with_items, osdmap.encode())?;
    Ok((with_items, written))
}

/// Count strata's items in `with_items` that `osdmaptool --upmap-cleanup` would remove or
/// change (Ceph's verify_upmap); 0 means every upmap is valid for Ceph.
fn cleanup_rejects(with_items: &Path, dir: &Path, tools: &Tools) -> anyhow::Result<usize> {
    let out = dir.join("cleanup.txt");
    let path = |p: &Path| p.to_string_lossy().into_owned();
    run_tool(
        &tools.osdmaptool,
        &[&path(with_items), "--upmap-cleanup", &path(&out)],
    )?;
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    let rejected = text
        .lines()
        .filter(|l| l.contains("rm-pg-upmap-items") || l.contains("pg-upmap-items"))
        .count();
    Ok(rejected)
}

/// One map's results, for the table and the chart.
pub struct MapResult {
    pub name: String,
    pub pool_names: BTreeMap<i64, String>,
    pub raw: Figures,
    pub peer: Figures,
    /// Strata's bounded mode at osdmaptool's deviation (moves compared like for like).
    pub bounded: Figures,
    /// Strata's bounded mode per pool at the max deviation osdmaptool reached on that pool
    /// (moves compared at equal quality).
    pub iso: Figures,
    /// Strata's tightest plan (its best deviation).
    pub ours: Figures,
    pub upmaps_written: usize,
    pub upmaps_rejected: usize,
    /// PGs whose up set under strata's items `osdmaptool --test-map-pgs-dump` maps otherwise
    /// than strata (both plans).
    pub ceph_disagrees: usize,
    pub pgs_checked: usize,
}

/// Strata's bounded mode, pool by pool, at the max deviation osdmaptool's plan reached on
/// that pool (where it reached 0, the tightest bounds): the fewest moves for a balance at
/// least as good as osdmaptool's, pool by pool. One plan for the map.
fn at_peer_deviation(problem: &Problem, peer: &Figures) -> anyhow::Result<Placement> {
    let mut up = BTreeMap::new();
    for pool in &problem.pools {
        let single = Problem {
            osds: problem.osds.clone(),
            pools: vec![pool.clone()],
            pgs: problem
                .pgs
                .iter()
                .filter(|pg| pg.id.pool == pool.id)
                .cloned()
                .collect(),
        };
        let reached = peer.get(&Some(pool.id)).map_or(0.0, |f| f.0);
        let config = BalanceConfig {
            deviation: (reached > 0.0).then_some(reached),
            ..BalanceConfig::default()
        };
        up.extend(balancer::balance(&single, &config)?.up);
    }
    let items = problem
        .pgs
        .iter()
        .map(|pg| {
            let set = up.get(&pg.id).unwrap_or(&pg.raw);
            let items = pg
                .raw
                .iter()
                .zip(set)
                .filter(|(r, n)| r != n)
                .map(|(&r, &n)| (r, n))
                .collect();
            (pg.id, items)
        })
        .collect();
    Ok(Placement { up, items })
}

/// Up sets and the pg_upmap_items that make them.
struct Placement {
    up: BTreeMap<PgId, Vec<i32>>,
    items: BTreeMap<PgId, Vec<(i32, i32)>>,
}

/// Build every case, balance it both ways and check strata's upmaps with Ceph.
pub fn measure(tools: &Tools, deviation: u32) -> anyhow::Result<Vec<MapResult>> {
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let mut results = Vec::new();
    for case in cases() {
        let map = build_map(&case, dir.path(), tools)?;
        let (problem, skipped) = crate::cmd::balance::load(&map, &[])?;
        anyhow::ensure!(
            skipped.is_empty(),
            "{}: pools skipped: {skipped:?}",
            case.name
        );
        let raw_up: BTreeMap<PgId, Vec<i32>> = problem
            .pgs
            .iter()
            .map(|pg| (pg.id, pg.raw.clone()))
            .collect();
        let peer = peer_up(&problem, &map, dir.path(), tools, deviation)?;
        let plan = balancer::balance(&problem, &BalanceConfig::default())?;
        balancer::balance::check_plan(&problem, &plan)?;
        let bounded_config = BalanceConfig {
            deviation: Some(f64::from(deviation)),
            ..BalanceConfig::default()
        };
        let bounded = balancer::balance(&problem, &bounded_config)?;
        balancer::balance::check_plan(&problem, &bounded)?;
        let peer_figures = figures(&problem, &peer);
        let iso = at_peer_deviation(&problem, &peer_figures)?;
        let (mut upmaps_written, mut upmaps_rejected) = (0, 0);
        let (mut ceph_disagrees, mut pgs_checked) = (0, 0);
        let placements = [
            (&plan.up, &plan.items),
            (&bounded.up, &bounded.items),
            (&iso.up, &iso.items),
        ];
        for (up, items) in placements {
            let (with_items, written) = write_items(&map, items, dir.path())?;
            upmaps_written += written;
            upmaps_rejected += cleanup_rejects(&with_items, dir.path(), tools)?;
            ceph_disagrees += disagreements(&with_items, up, tools)?;
            pgs_checked += up.len();
        }
        results.push(MapResult {
            name: case.name.to_string(),
            pool_names: case
                .pools
                .iter()
                .map(|p| (p.id, p.name.to_string()))
                .collect(),
            raw: figures(&problem, &raw_up),
            peer: peer_figures,
            bounded: figures(&problem, &bounded.up),
            iso: figures(&problem, &iso.up),
            ours: figures(&problem, &plan.up),
            upmaps_written,
            upmaps_rejected,
            ceph_disagrees,
            pgs_checked,
        });
    }
    Ok(results)
}

/// The table: per map, per pool and total.
pub fn table(results: &[MapResult], deviation: u32) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| map | pool | raw max dev | osdmaptool max dev | strata dev {deviation} max dev | strata at osdmaptool's dev max dev | strata best max dev | osdmaptool moved | strata dev {deviation} moved | strata at osdmaptool's dev moved | strata best moved |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|");
    for result in results {
        for (key, ours) in &result.ours {
            let name = key.map_or_else(
                || "total".to_string(),
                |id| {
                    format!(
                        "{id} {}",
                        result.pool_names.get(&id).map_or("", String::as_str)
                    )
                },
            );
            let get = |f: &Figures| f.get(key).copied().unwrap_or_default();
            let (raw, peer, bounded, iso) = (
                get(&result.raw),
                get(&result.peer),
                get(&result.bounded),
                get(&result.iso),
            );
            let _ = writeln!(
                out,
                "| {} | {name} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {} | {} | {} | {} |",
                result.name,
                raw.0,
                peer.0,
                bounded.0,
                iso.0,
                ours.0,
                peer.1,
                bounded.1,
                iso.1,
                ours.1
            );
        }
        for (what, count, of) in [
            (
                "upmaps kept by `osdmaptool --upmap-cleanup` (three plans)",
                result.upmaps_written - result.upmaps_rejected,
                result.upmaps_written,
            ),
            (
                "PGs mapped as strata says by `osdmaptool --test-map-pgs-dump` (three plans)",
                result.pgs_checked - result.ceph_disagrees,
                result.pgs_checked,
            ),
        ] {
            let _ = writeln!(
                out,
                "| {} | {what} | | | {count} of {of} | | | | | | |",
                result.name
            );
        }
    }
    out
}

/// Per strata plan, the rows where it is worse than osdmaptool in max deviation or in moves
/// (1e-9 slack for equal deviations).
pub fn worse(results: &[MapResult], deviation: u32) -> Vec<String> {
    let mut out = Vec::new();
    for result in results {
        for key in result.ours.keys() {
            let peer = result.peer.get(key).copied().unwrap_or_default();
            let row = format!(
                "{} {}",
                result.name,
                key.map_or_else(|| "total".to_string(), |id| format!("pool {id}"))
            );
            let plans = [
                (format!("strata dev {deviation}"), &result.bounded),
                ("strata at osdmaptool's dev".to_string(), &result.iso),
                ("strata best".to_string(), &result.ours),
            ];
            for (who, figures) in plans {
                let ours = figures.get(key).copied().unwrap_or_default();
                if ours.1 > peer.1 {
                    out.push(format!("{who}, {row}: moves {} > {}", ours.1, peer.1));
                }
                if ours.0 > peer.0 + 1e-9 {
                    out.push(format!(
                        "{who}, {row}: max deviation {:.2} > {:.2}",
                        ours.0, peer.0
                    ));
                }
            }
        }
    }
    out
}

/// Two panels of grouped bars per map, pool and total: max deviation, then shards moved;
/// osdmaptool (red), strata at the same deviation bound (green), strata at the deviation
/// osdmaptool reached (orange), strata's best (blue).
pub fn chart(results: &[MapResult], deviation: u32) -> String {
    type Pick = fn(&(f64, usize)) -> f64;
    let panels: [(&str, Pick); 2] = [
        ("max deviation from target (shards)", |f| f.0),
        ("shards moved from raw CRUSH", |f| f.1 as f64),
    ];
    let labels: Vec<(String, [(f64, usize); 4])> = results
        .iter()
        .flat_map(|r| {
            r.ours.iter().map(move |(key, ours)| {
                let label = format!(
                    "{} {}",
                    r.name,
                    key.map_or_else(|| "total".to_string(), |id| format!("pool {id}"))
                );
                let peer = r.peer.get(key).copied().unwrap_or_default();
                let bounded = r.bounded.get(key).copied().unwrap_or_default();
                let iso = r.iso.get(key).copied().unwrap_or_default();
                (label, [peer, bounded, iso, *ours])
            })
        })
        .collect();
    let (left, top, bar, gap, width) = (220.0, 50.0, 7.0, 8.0, 700.0);
    let panel_height = labels.len() as f64 * (4.0 * bar + gap) + 60.0;
    let height = top + 2.0 * panel_height;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="1000" height="{height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r##"<text x="500" y="20" text-anchor="middle" font-size="14">osdmaptool --upmap-deviation {deviation} (red), strata --deviation {deviation} (green), strata at osdmaptool's deviation (orange), strata best (blue)</text>"##
    );
    let colors = ["#c0504d", "#9bbb59", "#f79646", "#4f81bd"];
    for (panel, (title, pick)) in panels.iter().enumerate() {
        let origin = top + panel as f64 * panel_height;
        let limit = labels
            .iter()
            .flat_map(|(_, f)| f.iter().map(pick))
            .fold(1.0_f64, f64::max)
            .ceil();
        let _ = writeln!(
            svg,
            r#"<text x="{left}" y="{}" font-size="13">{title}</text>"#,
            origin - 8.0
        );
        for (index, (label, figures)) in labels.iter().enumerate() {
            let y = origin + index as f64 * (4.0 * bar + gap);
            let _ = writeln!(
                svg,
                r#"<text x="{}" y="{}" text-anchor="end">{label}</text>"#,
                left - 6.0,
                y + 2.0 * bar + 3.0
            );
            for (k, (figure, color)) in figures.iter().zip(colors).enumerate() {
                let value = pick(figure);
                let shown = if panel == 0 {
                    format!("{value:.2}")
                } else {
                    format!("{value:.0}")
                };
                let _ = writeln!(
                    svg,
                    r#"<rect x="{left}" y="{}" width="{:.1}" height="{bar}" fill="{color}"/><text x="{:.1}" y="{}" font-size="9">{shown}</text>"#,
                    y + k as f64 * bar,
                    value / limit * width,
                    left + value / limit * width + 4.0,
                    y + k as f64 * bar + bar - 1.0
                );
            }
        }
        let axis = origin + labels.len() as f64 * (4.0 * bar + gap) + 4.0;
        let _ = writeln!(
            svg,
            r#"<line x1="{left}" y1="{axis}" x2="{}" y2="{axis}" stroke="black"/><text x="{left}" y="{}">0</text><text x="{}" y="{}" text-anchor="end">{limit:.0}</text>"#,
            left + width,
            axis + 14.0,
            left + width,
            axis + 14.0
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// `strata bench balance --multi-pool [--deviation N] [--svg FILE]`.
pub fn run(tools: &Tools, svg: Option<&Path>, deviation: u32) -> anyhow::Result<ExitCode> {
    let results = measure(tools, deviation)?;
    print!("{}", table(&results, deviation));
    for line in worse(&results, deviation) {
        println!("worse than osdmaptool: {line}");
    }
    if let Some(path) = svg {
        std::fs::write(path, chart(&results, deviation))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let disagree: usize = results.iter().map(|r| r.ceph_disagrees).sum();
    anyhow::ensure!(
        disagree == 0,
        "osdmaptool --test-map-pgs-dump maps {disagree} PGs otherwise than strata"
    );
    let rejected: usize = results.iter().map(|r| r.upmaps_rejected).sum();
    anyhow::ensure!(
        rejected == 0,
        "osdmaptool --upmap-cleanup rejected {rejected} of strata's upmaps"
    );
    Ok(ExitCode::SUCCESS)
}
