//! What `osdmaptool` prints, line for line, for the questions this crate answers:
//! `--test-map-pgs-dump` (and `--test-map-pgs`, `--test-map-pgs-dump-all`), `--test-map-pg`,
//! `--test-map-object` and `--print`. Pure functions from a map to text; the CLI only writes it.

pub mod format;

use std::fmt::Write as _;

use crate::error::{OsdMapError, Result};
use crate::map::{OsdMap, DEFAULT_PRIMARY_AFFINITY, ITEM_NONE, OSD_STATE_NAMES};
use crate::pg::PgId;
use format::{g6, g6_f32, osd_list};

/// Which per-PG lines `--test-map-pgs*` prints before the statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PgListing {
    /// `--test-map-pgs`: statistics only.
    None,
    /// `--test-map-pgs-dump`: `pgid \t [acting] \t primary`.
    Acting,
    /// `--test-map-pgs-dump-all`: `pgid raw (...) up (...) acting (...)`.
    All,
}

fn raw_up_acting_line(pg: PgId, m: &crate::mapping::UpActing) -> String {
    format!(
        "{pg} raw ({}, p{}) up ({}, p{}) acting ({}, p{})",
        osd_list(&m.raw),
        m.raw_primary,
        osd_list(&m.up),
        m.up_primary,
        osd_list(&m.acting),
        m.acting_primary
    )
}

/// `osdmaptool MAP --test-map-pgs[-dump[-all]] [--pool P]`: stdout text.
pub fn test_map_pgs(map: &OsdMap, pool: Option<i64>, listing: PgListing) -> Result<String> {
    if let Some(id) = pool {
        if map.pool(id).is_none() {
            return Err(OsdMapError::NoPool(id));
        }
    }
    let n = usize::try_from(map.max_osd()).unwrap_or(0);
    let mut count = vec![0_i64; n];
    let mut first_count = vec![0_i64; n];
    let mut primary_count = vec![0_i64; n];
    let mut sizes = vec![0_u64; 30];
    let mut max_size = 0_usize;
    let mut out = String::new();
    for (id, pool_info) in map.pools() {
        if pool.is_some_and(|p| p != *id) {
            continue;
        }
        let _ = writeln!(out, "pool {id} pg_num {}", pool_info.pg_num);
        for pg in pool_info.pgs() {
            let m = map.pg_to_up_acting(pg);
            let (osds, primary) = (&m.acting, m.acting_primary);
            if let Some(slot) = sizes.get_mut(osds.len()) {
                *slot += 1;
            }
            max_size = max_size.max(osds.len());
            match listing {
                PgListing::Acting => {
                    let _ = writeln!(out, "{pg}\t{}\t{primary}", osd_list(osds));
                }
                PgListing::All => {
                    let _ = writeln!(out, "{}", raw_up_acting_line(pg, &m));
                }
                PgListing::None => {}
            }
            let index = |osd: i32| usize::try_from(osd).ok().filter(|&i| i < n);
            for &osd in osds {
                if osd != ITEM_NONE {
                    if let Some(i) = index(osd) {
                        count[i] += 1;
                    }
                }
            }
            if let Some(i) = osds
                .first()
                .copied()
                .filter(|&o| o != ITEM_NONE)
                .and_then(index)
            {
                first_count[i] += 1;
            }
            if let Some(i) = index(primary) {
                primary_count[i] += 1;
            }
        }
    }
    out.push_str("#osd\tcount\tfirst\tprimary\tc wt\twt\n");
    let listed: Vec<usize> = (0..n)
        .filter(|&i| {
            let osd = i as i32;
            map.is_in(osd)
                && map
                    .crush_item_weight(osd)
                    .is_some_and(|w| w > 0 && w <= i32::MAX as u32)
        })
        .collect();
    let mut total = 0_u64;
    let (mut min_osd, mut max_osd): (Option<usize>, Option<usize>) = (None, None);
    for &i in &listed {
        let osd = i as i32;
        let crush_weight = map.crush_item_weight(osd).unwrap_or(0) as f32 / 65536.0_f32;
        let reweight = map.osd_weight(osd) as f32 / 65536.0_f32;
        let _ = writeln!(
            out,
            "osd.{i}\t{}\t{}\t{}\t{}\t{}",
            count[i],
            first_count[i],
            primary_count[i],
            g6_f32(crush_weight),
            g6_f32(reweight)
        );
        total = total.wrapping_add(count[i] as u64);
        if count[i] != 0 && min_osd.is_none_or(|m| count[i] < count[m]) {
            min_osd = Some(i);
        }
        if count[i] != 0 && max_osd.is_none_or(|m| count[i] > count[m]) {
            max_osd = Some(i);
        }
    }
    let osds_in = listed.len() as u64;
    let avg = total.checked_div(osds_in).unwrap_or(0);
    // Ceph squares (u64 avg - int count) in unsigned 64-bit arithmetic.
    let mut deviation = listed.iter().fold(0.0_f64, |sum, &i| {
        let d = avg.wrapping_sub(count[i] as u64);
        sum + d.wrapping_mul(d) as f64
    });
    deviation /= osds_in as f64;
    deviation = deviation.sqrt();
    let in_f = osds_in as f64;
    let expected = (total as f64 / in_f * (1.0 - 1.0 / in_f)).sqrt();
    let _ = writeln!(out, " in {osds_in}");
    let _ = writeln!(
        out,
        " avg {avg} stddev {} ({}x) (expected {} {}x))",
        g6(deviation),
        g6(deviation / avg as f64),
        g6(expected),
        g6(expected / avg as f64)
    );
    if let Some(i) = min_osd {
        let _ = writeln!(out, " min osd.{i} {}", count[i]);
    }
    if let Some(i) = max_osd {
        let _ = writeln!(out, " max osd.{i} {}", count[i]);
    }
    for (size, &pgs) in sizes.iter().enumerate().take(max_size + 1) {
        if pgs != 0 {
            let _ = writeln!(out, "size {size}\t{pgs}");
        }
    }
    Ok(out)
}

/// `osdmaptool MAP --test-map-pg PGID`.
pub fn test_map_pg(map: &OsdMap, text: &str) -> Result<String> {
    let pg: PgId = text.parse()?;
    let m = map.pg_to_up_acting(pg);
    Ok(format!(
        " parsed '{text}' -> {pg}\n{}\n",
        raw_up_acting_line(pg, &m)
    ))
}

/// `osdmaptool MAP --test-map-object NAME [--pool P]` (pool 1 when not given, with a notice).
pub fn test_map_object(map: &OsdMap, name: &str, pool: Option<i64>) -> Result<String> {
    let mut out = String::new();
    let pool = pool.unwrap_or_else(|| {
        out.push_str("osdmaptool: assuming pool 1 (use --pool to override)\n");
        1
    });
    let pg = map.object_to_pg(pool, name)?;
    let acting = map.pg_to_up_acting(pg).acting;
    let _ = writeln!(out, " object '{name}' -> {pg} -> {}", osd_list(&acting));
    Ok(out)
}

/// `CEPH_OSDMAP_*` flag names in `get_flag_string` order.
const MAP_FLAG_NAMES: &[(u32, &str)] = &[
    (1 << 0, "nearfull"),
    (1 << 1, "full"),
    (1 << 2, "pauserd"),
    (1 << 3, "pausewr"),
    (1 << 4, "pauserec"),
    (1 << 5, "noup"),
    (1 << 6, "nodown"),
    (1 << 7, "noout"),
    (1 << 8, "noin"),
    (1 << 9, "nobackfill"),
    (1 << 14, "norebalance"),
    (1 << 10, "norecover"),
    (1 << 11, "noscrub"),
    (1 << 12, "nodeep-scrub"),
    (1 << 13, "notieragent"),
    (1 << 21, "nosnaptrim"),
    (1 << 15, "sortbitwise"),
    (1 << 16, "require_jewel_osds"),
    (1 << 17, "require_kraken_osds"),
    (1 << 18, "require_luminous_osds"),
    (1 << 19, "recovery_deletes"),
    (1 << 20, "purged_snapdirs"),
    (1 << 22, "pglog_hardlimit"),
    (1 << 23, "noautoscale"),
];

/// `ceph_release_name`.
fn release_name(release: u8) -> &'static str {
    const NAMES: [&str; 18] = [
        "unknown",
        "argonaut",
        "bobtail",
        "cuttlefish",
        "dumpling",
        "emperor",
        "firefly",
        "giant",
        "hammer",
        "infernalis",
        "jewel",
        "kraken",
        "luminous",
        "mimic",
        "nautilus",
        "octopus",
        "pacific",
        "quincy",
    ];
    NAMES
        .get(usize::from(release))
        .copied()
        .unwrap_or("unknown")
}

/// `OSDMap::get_min_compat_client`: the oldest client release that can use this map.
pub fn min_compat_client(map: &OsdMap) -> u8 {
    let crush = map.crush();
    let tunables = &crush.tunables;
    let rules_with = |wanted: fn(&crush::RuleStep) -> bool| {
        map.pools().values().any(|pool| {
            usize::try_from(pool.crush_rule)
                .ok()
                .and_then(|id| crush.rule(id))
                .is_some_and(|rule| rule.steps.iter().any(wanted))
        })
    };
    let incompat_choose_args = match crush.choose_args.len() {
        0 => false,
        1 => crush.choose_args.iter().any(|(&index, args)| {
            index != -1
                || args
                    .values()
                    .any(|a| a.weight_set.len() > 1 || !a.ids.is_empty())
        }),
        _ => true,
    };
    if !map.pg_upmap().is_empty() || !map.pg_upmap_items().is_empty() || incompat_choose_args {
        return 12; // luminous
    }
    if tunables.chooseleaf_stable != 0
        || rules_with(|s| matches!(s, crush::RuleStep::SetChooseLeafStable(_)))
    {
        return 10; // jewel
    }
    if crush
        .iter_buckets()
        .any(|b| b.algorithm == crush::BucketAlgorithm::Straw2)
    {
        return 8; // hammer
    }
    let affinity = map
        .osds()
        .any(|osd| map.primary_affinity(osd) != DEFAULT_PRIMARY_AFFINITY);
    let tiers = map
        .pools()
        .values()
        .any(|p| !p.extra.tiers.is_empty() || p.extra.tier_of >= 0);
    if affinity
        || tiers
        || tunables.chooseleaf_vary_r != 0
        || rules_with(|s| matches!(s, crush::RuleStep::SetChooseLeafVaryR(_)))
    {
        return 6; // firefly
    }
    if tunables.chooseleaf_descend_once != 0 || map.pools().values().any(|p| p.is_hashpspool()) {
        return 4; // dumpling
    }
    1 // argonaut
}

fn pool_line(pool: &crate::pool::Pool) -> String {
    let profile = if pool.pool_type == crate::pool::PoolType::Erasure {
        format!(" profile {}", pool.erasure_code_profile)
    } else {
        String::new()
    };
    let mut out = format!(
        "pool {} '{}' {}{profile} size {} min_size {} crush_rule {} object_hash {} pg_num {} pgp_num {}",
        pool.id,
        pool.name,
        pool.pool_type.name(),
        pool.size,
        pool.min_size,
        pool.crush_rule,
        pool.object_hash.name(),
        pool.pg_num,
        pool.pgp_num
    );
    if pool.pg_num_target != pool.pg_num {
        let _ = write!(out, " pg_num_target {}", pool.pg_num_target);
    }
    if pool.pgp_num_target != pool.pgp_num {
        let _ = write!(out, " pgp_num_target {}", pool.pgp_num_target);
    }
    if pool.pg_num_pending != pool.pg_num {
        let _ = write!(out, " pg_num_pending {}", pool.pg_num_pending);
    }
    if let Some(mode) = pool.autoscale_mode_name() {
        let _ = write!(out, " autoscale_mode {mode}");
    }
    let _ = write!(out, " last_change {}", pool.last_change);
    let e = &pool.extra;
    if e.last_force_op_resend != 0
        || e.last_force_op_resend_prenautilus != 0
        || e.last_force_op_resend_preluminous != 0
    {
        let _ = write!(
            out,
            " lfor {}/{}/{}",
            e.last_force_op_resend,
            e.last_force_op_resend_prenautilus,
            e.last_force_op_resend_preluminous
        );
    }
    if e.auid != 0 {
        let _ = write!(out, " owner {}", e.auid);
    }
    if pool.flags != 0 {
        let _ = write!(out, " flags {}", pool.flags_string());
    }
    if e.quota_max_bytes != 0 {
        let _ = write!(out, " max_bytes {}", e.quota_max_bytes);
    }
    if e.quota_max_objects != 0 {
        let _ = write!(out, " max_objects {}", e.quota_max_objects);
    }
    if !e.tiers.is_empty() {
        let tiers: Vec<String> = e.tiers.iter().map(u64::to_string).collect();
        let _ = write!(out, " tiers {}", tiers.join(","));
    }
    if e.tier_of >= 0 {
        let _ = write!(out, " tier_of {}", e.tier_of);
    }
    if e.read_tier >= 0 {
        let _ = write!(out, " read_tier {}", e.read_tier);
    }
    if e.write_tier >= 0 {
        let _ = write!(out, " write_tier {}", e.write_tier);
    }
    if e.target_max_bytes != 0 {
        let _ = write!(out, " target_bytes {}", e.target_max_bytes);
    }
    if e.target_max_objects != 0 {
        let _ = write!(out, " target_objects {}", e.target_max_objects);
    }
    if e.min_read_recency_for_promote != 0 {
        let _ = write!(
            out,
            " min_read_recency_for_promote {}",
            e.min_read_recency_for_promote
        );
    }
    if e.min_write_recency_for_promote != 0 {
        let _ = write!(
            out,
            " min_write_recency_for_promote {}",
            e.min_write_recency_for_promote
        );
    }
    let _ = write!(out, " stripe_width {}", pool.stripe_width);
    if e.expected_num_objects != 0 {
        let _ = write!(out, " expected_num_objects {}", e.expected_num_objects);
    }
    if e.fast_read {
        out.push_str(" fast_read 1");
    }
    if !pool.application_metadata.is_empty() {
        let apps: Vec<&str> = pool
            .application_metadata
            .keys()
            .map(String::as_str)
            .collect();
        let _ = write!(out, " application {}", apps.join(","));
    }
    out
}

/// `osdmaptool MAP --print` (`OSDMap::print`). Known gaps: pool snapshots, removed snaps,
/// cache-tier hit sets, blocklist entries and stretch-mode details are not printed.
pub fn print(map: &OsdMap) -> String {
    let info = map.cluster_info();
    let mut out = String::new();
    let flags: Vec<&str> = MAP_FLAG_NAMES
        .iter()
        .filter(|(bit, _)| info.flags & bit != 0)
        .map(|(_, name)| *name)
        .collect();
    let _ = writeln!(out, "epoch {}", map.epoch());
    let _ = writeln!(out, "fsid {}", format::uuid(&info.fsid));
    let _ = writeln!(out, "created {}", format::utime(info.created));
    let _ = writeln!(out, "modified {}", format::utime(info.modified));
    let _ = writeln!(out, "flags {}", flags.join(","));
    let _ = writeln!(out, "crush_version {}", info.crush_version);
    let _ = writeln!(out, "full_ratio {}", g6_f32(info.full_ratio));
    let _ = writeln!(
        out,
        "backfillfull_ratio {}",
        g6_f32(info.backfillfull_ratio)
    );
    let _ = writeln!(out, "nearfull_ratio {}", g6_f32(info.nearfull_ratio));
    if info.require_min_compat_client > 0 {
        let _ = writeln!(
            out,
            "require_min_compat_client {}",
            release_name(info.require_min_compat_client)
        );
    }
    let _ = writeln!(
        out,
        "min_compat_client {}",
        release_name(min_compat_client(map))
    );
    if info.require_osd_release > 0 {
        let _ = writeln!(
            out,
            "require_osd_release {}",
            release_name(info.require_osd_release)
        );
    }
    if !info.cluster_snapshot.is_empty() {
        let _ = writeln!(out, "cluster_snapshot {}", info.cluster_snapshot);
    }
    let _ = writeln!(out, "stretch_mode_enabled {}", info.stretch_mode_enabled);
    out.push('\n');
    for pool in map.pools().values() {
        let _ = writeln!(out, "{}", pool_line(pool));
    }
    out.push('\n');
    let _ = writeln!(out, "max_osd {}", map.max_osd());
    for osd in map.osds() {
        let state = map.osd_state(osd);
        let mut names: Vec<&str> = OSD_STATE_NAMES
            .iter()
            .filter(|(bit, _)| state & bit != 0)
            .map(|(_, n)| *n)
            .collect();
        names.sort_unstable();
        let info = map.osd_info(osd);
        let _ = write!(
            out,
            "osd.{osd}{}{} weight {}",
            if map.is_up(osd) { " up  " } else { " down" },
            if map.is_in(osd) { " in " } else { " out" },
            g6_f32(map.osd_weight(osd) as f32 / 65536.0_f32)
        );
        let affinity = map.primary_affinity(osd);
        if affinity != DEFAULT_PRIMARY_AFFINITY {
            let _ = write!(
                out,
                " primary_affinity {}",
                g6_f32(affinity as f32 / 65536.0_f32)
            );
        }
        let _ = write!(
            out,
            " up_from {} up_thru {} down_at {} last_clean_interval [{},{})",
            info.up_from, info.up_thru, info.down_at, info.last_clean_begin, info.last_clean_end
        );
        if info.lost_at != 0 {
            let _ = write!(out, " lost_at {}", info.lost_at);
        }
        let _ = write!(
            out,
            " {} {} {}",
            map.osd_public_addrs(osd),
            map.osd_cluster_addrs(osd),
            names.join(",")
        );
        let uuid = map.osd_uuid(osd);
        if uuid != [0; 16] {
            let _ = write!(out, " {}", format::uuid(&uuid));
        }
        out.push('\n');
    }
    out.push('\n');
    for (pg, osds) in map.pg_upmap() {
        let _ = writeln!(out, "pg_upmap {pg} {}", osd_list(osds));
    }
    for (pg, items) in map.pg_upmap_items() {
        let flat: Vec<i32> = items.iter().flat_map(|&(from, to)| [from, to]).collect();
        let _ = writeln!(out, "pg_upmap_items {pg} {}", osd_list(&flat));
    }
    for (pg, osds) in map.pg_temp() {
        let _ = writeln!(out, "pg_temp {pg} {}", osd_list(osds));
    }
    for (pg, osd) in map.primary_temp() {
        let _ = writeln!(out, "primary_temp {pg} {osd}");
    }
    out
}
