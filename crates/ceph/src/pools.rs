//! The control plane through monitor commands: pools, CRUSH rules per device class,
//! statistics. Parsing of the monitors' JSON is pure and kept here.

use std::collections::BTreeMap;

use rados::{ClusterStats, FullLevel, PoolInfo, PoolSpec, PoolStats, RadosError, Result};
use serde_json::{json, Value};

use crate::error::CephError;
use crate::CephRados;

/// Longest pool name Ceph takes.
const POOL_NAME_BYTES_MAX: usize = 255;

fn reply_error(command: &str, reason: impl Into<String>) -> CephError {
    CephError::Reply {
        command: command.to_string(),
        reason: reason.into(),
    }
}

fn field_u64(value: &Value, name: &str) -> u64 {
    value.get(name).and_then(Value::as_u64).unwrap_or(0)
}

/// CRUSH rules by id: (name, device class of its `take` step).
pub(crate) fn parse_rules(
    dump: &Value,
) -> Result<BTreeMap<u64, (String, Option<String>)>, CephError> {
    let rules = dump
        .as_array()
        .ok_or_else(|| reply_error("osd crush rule dump", "not a list"))?;
    let mut by_id = BTreeMap::new();
    for rule in rules {
        let id = rule
            .get("rule_id")
            .and_then(Value::as_u64)
            .ok_or_else(|| reply_error("osd crush rule dump", "a rule without rule_id"))?;
        let name = rule
            .get("rule_name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let class = rule
            .get("steps")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|step| step.get("op").and_then(Value::as_str) == Some("take"))
            .filter_map(|step| step.get("item_name").and_then(Value::as_str))
            .find_map(|item| item.split_once('~').map(|(_, class)| class.to_string()));
        by_id.insert(id, (name.to_string(), class));
    }
    Ok(by_id)
}

/// The failure-domain type of a rule's `chooseleaf`/`choose` step (`host`, `osd`...).
pub(crate) fn failure_domain(dump: &Value, rule_name: &str) -> Option<String> {
    dump.as_array()?
        .iter()
        .find(|rule| rule.get("rule_name").and_then(Value::as_str) == Some(rule_name))?
        .get("steps")?
        .as_array()?
        .iter()
        .filter(|step| {
            step.get("op")
                .and_then(Value::as_str)
                .is_some_and(|op| op.starts_with("choose"))
        })
        .find_map(|step| step.get("type").and_then(Value::as_str).map(str::to_string))
}

/// Pools from `osd pool ls detail -f json` and the rules they use.
pub(crate) fn parse_pools(
    detail: &Value,
    rules: &BTreeMap<u64, (String, Option<String>)>,
) -> Result<Vec<PoolInfo>, CephError> {
    let pools = detail
        .as_array()
        .ok_or_else(|| reply_error("osd pool ls detail", "not a list"))?;
    let mut infos = Vec::with_capacity(pools.len());
    for pool in pools {
        let id = pool
            .get("pool_id")
            .and_then(Value::as_i64)
            .ok_or_else(|| reply_error("osd pool ls detail", "a pool without pool_id"))?;
        let rule_id = field_u64(pool, "crush_rule");
        let (crush_rule, device_class) = rules
            .get(&rule_id)
            .cloned()
            .unwrap_or_else(|| (rule_id.to_string(), None));
        let as_u32 = |name: &str| u32::try_from(field_u64(pool, name)).unwrap_or(u32::MAX);
        infos.push(PoolInfo {
            id,
            name: pool
                .get("pool_name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            size: as_u32("size"),
            min_size: as_u32("min_size"),
            pg_num: as_u32("pg_num"),
            crush_rule,
            device_class,
            // `type` 1 is replicated, 3 erasure (pg_pool_t::TYPE_*).
            erasure_coded: field_u64(pool, "type") == 3,
        });
    }
    infos.sort_by_key(|pool| pool.id);
    Ok(infos)
}

/// The fullest of Ceph's space states among `names` (an OSD's `state` list, a pool's flags).
fn full_level_of<'a>(names: impl IntoIterator<Item = &'a str>) -> FullLevel {
    names
        .into_iter()
        .map(|name| match name.trim() {
            // `full_quota`: the pool reached its own quota; writes to it are refused as full.
            "full" | "full_quota" => FullLevel::Full,
            "backfillfull" => FullLevel::Backfillfull,
            "nearfull" => FullLevel::Nearfull,
            _ => FullLevel::Ok,
        })
        .max()
        .unwrap_or_default()
}

/// From `osd dump`: the OSDs past `nearfull_ratio` with their level (the monitors set the
/// `nearfull`/`backfillfull`/`full` states from the OSDs' reports, by the cluster's ratios), in
/// id order, and each pool's level (its `nearfull`/`backfillfull`/`full`/`full_quota` flags).
pub(crate) fn parse_full(osd_dump: &Value) -> (Vec<(i32, FullLevel)>, BTreeMap<String, FullLevel>) {
    let mut osds: Vec<(i32, FullLevel)> = osd_dump
        .get("osds")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|osd| {
            let id = i32::try_from(osd.get("osd")?.as_i64()?).ok()?;
            let states = osd
                .get("state")?
                .as_array()?
                .iter()
                .filter_map(Value::as_str);
            let level = full_level_of(states);
            (level > FullLevel::Ok).then_some((id, level))
        })
        .collect();
    osds.sort_unstable();
    let pools = osd_dump
        .get("pools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|pool| {
            let name = pool.get("pool_name")?.as_str()?.to_string();
            let flags = pool
                .get("flags_names")
                .and_then(Value::as_str)
                .unwrap_or("");
            Some((name, full_level_of(flags.split(','))))
        })
        .collect();
    (osds, pools)
}

/// Cluster statistics from `df detail`, `osd stat`, `osd pool stats` and `osd dump` (all `-f
/// json`).
pub(crate) fn parse_stats(
    df: &Value,
    osd_stat: &Value,
    pool_stats: &Value,
    osd_dump: &Value,
) -> ClusterStats {
    let (full_osds, pool_levels) = parse_full(osd_dump);
    let totals = df.get("stats").cloned().unwrap_or(Value::Null);
    // Pacific nests `osd stat`'s counts under "osdmap" in some outputs.
    let osd_stat = osd_stat.get("osdmap").unwrap_or(osd_stat);
    let degraded: BTreeMap<String, u64> = pool_stats
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|pool| {
            let name = pool.get("pool_name")?.as_str()?.to_string();
            let objects = pool
                .get("recovery")
                .map_or(0, |recovery| field_u64(recovery, "degraded_objects"));
            Some((name, objects))
        })
        .collect();
    let pools: Vec<PoolStats> = df
        .get("pools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|pool| {
            let name = pool
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let stats = pool.get("stats").cloned().unwrap_or(Value::Null);
            PoolStats {
                degraded_objects: degraded.get(&name).copied().unwrap_or(0),
                full_level: pool_levels.get(&name).copied().unwrap_or_default(),
                name,
                objects: field_u64(&stats, "objects"),
                stored_bytes: field_u64(&stats, "stored"),
                allocated_bytes: field_u64(&stats, "bytes_used"),
                metadata_bytes: field_u64(&stats, "omap_bytes_used"),
            }
        })
        .collect();
    let as_u32 = |name: &str| u32::try_from(field_u64(osd_stat, name)).unwrap_or(u32::MAX);
    ClusterStats {
        total_bytes: field_u64(&totals, "total_bytes"),
        used_bytes: field_u64(&totals, "total_used_raw_bytes"),
        free_bytes: field_u64(&totals, "total_avail_bytes"),
        objects: pools.iter().map(|pool| pool.objects).sum(),
        osds: as_u32("num_osds"),
        osds_up: as_u32("num_up_osds"),
        osds_in: as_u32("num_in_osds"),
        epoch: field_u64(osd_stat, "epoch"),
        pools,
        full_osds,
    }
}

/// Checks what Ceph would accept silently but the contract refuses.
pub(crate) fn validate_spec(spec: &PoolSpec) -> Result<()> {
    let invalid = |reason: String| Err(RadosError::InvalidArgument(reason));
    if spec.name.is_empty() || spec.name.len() > POOL_NAME_BYTES_MAX || spec.name.contains('\0') {
        return invalid(format!("pool name {:?} must be 1..=255 bytes", spec.name));
    }
    if spec.size == 0 || spec.pg_num == 0 {
        return invalid(format!(
            "pool {}: size {} and pg_num {} must be at least 1",
            spec.name, spec.size, spec.pg_num
        ));
    }
    let min_size = spec.effective_min_size();
    if min_size == 0 || min_size > spec.size {
        return invalid(format!(
            "pool {}: min_size {min_size} must be 1..=size {}",
            spec.name, spec.size
        ));
    }
    if spec.device_class.is_some() && spec.crush_rule.is_some() {
        return invalid(format!(
            "pool {}: give a device class or a CRUSH rule, not both",
            spec.name
        ));
    }
    Ok(())
}

impl CephRados {
    /// Runs a monitor command given as JSON fields, asking for JSON output, and parses it.
    pub(crate) async fn command(&self, mut fields: Value) -> Result<Value, CephError> {
        let prefix = fields
            .get("prefix")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        fields["format"] = json!("json");
        let reply = self.mon_command(&fields.to_string()).await?;
        if reply.outbuf.iter().all(u8::is_ascii_whitespace) {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&reply.outbuf)
            .map_err(|error| reply_error(&prefix, error.to_string()))
    }

    /// Every pool with its rule's name and device class.
    pub(crate) async fn pools(&self) -> Result<Vec<PoolInfo>, CephError> {
        let rules = self
            .command(json!({"prefix": "osd crush rule dump"}))
            .await?;
        let detail = self
            .command(json!({"prefix": "osd pool ls", "detail": "detail"}))
            .await?;
        parse_pools(&detail, &parse_rules(&rules)?)
    }

    /// The CRUSH rule for a device class, created if missing (`strata-CLASS`, with the failure
    /// domain of the cluster's default rule, `host` if it has none).
    pub(crate) async fn rule_for_class(&self, class: &str) -> Result<String> {
        let classes = self
            .command(json!({"prefix": "osd crush class ls"}))
            .await?;
        let known = classes
            .as_array()
            .into_iter()
            .flatten()
            .any(|known| known.as_str() == Some(class));
        if !known {
            return Err(RadosError::InvalidArgument(format!(
                "no OSD has device class {class:?}"
            )));
        }
        let rule = format!("strata-{class}");
        let dump = self
            .command(json!({"prefix": "osd crush rule dump"}))
            .await?;
        if parse_rules(&dump)?.values().any(|(name, _)| *name == rule) {
            return Ok(rule);
        }
        let domain = failure_domain(&dump, "replicated_rule").unwrap_or_else(|| "host".into());
        self.command(json!({
            "prefix": "osd crush rule create-replicated",
            "name": rule, "root": "default", "type": domain, "class": class,
        }))
        .await?;
        Ok(rule)
    }

    /// How many OSDs a pool of this spec can place on.
    pub(crate) async fn osds_for(&self, spec: &PoolSpec) -> Result<u64> {
        if let Some(class) = &spec.device_class {
            let osds = self
                .command(json!({"prefix": "osd crush class ls-osd", "class": class}))
                .await?;
            return Ok(osds.as_array().map_or(0, |osds| osds.len() as u64));
        }
        let stat = self.command(json!({"prefix": "osd stat"})).await?;
        Ok(field_u64(stat.get("osdmap").unwrap_or(&stat), "num_osds"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_take_their_rules_name_and_class() {
        let rules = json!([
            {"rule_id": 0, "rule_name": "replicated_rule", "steps": [
                {"op": "take", "item": -1, "item_name": "default"},
                {"op": "chooseleaf_firstn", "num": 0, "type": "osd"}, {"op": "emit"}]},
            {"rule_id": 1, "rule_name": "strata-ssd", "steps": [
                {"op": "take", "item": -2, "item_name": "default~ssd"},
                {"op": "chooseleaf_firstn", "num": 0, "type": "osd"}, {"op": "emit"}]}
        ]);
        let detail = json!([
            {"pool_id": 2, "pool_name": "fast", "type": 1, "size": 3, "min_size": 2, "pg_num": 32, "crush_rule": 1},
            {"pool_id": 1, "pool_name": "any", "type": 1, "size": 1, "min_size": 1, "pg_num": 8, "crush_rule": 0},
            {"pool_id": 3, "pool_name": "ec", "type": 3, "size": 3, "min_size": 2, "pg_num": 8, "crush_rule": 0}
        ]);
        let pools = parse_pools(&detail, &parse_rules(&rules).expect("rules")).expect("pools");
        assert_eq!(pools[0].name, "any");
        assert_eq!(pools[0].device_class, None);
        assert_eq!(pools[1].crush_rule, "strata-ssd");
        assert_eq!(pools[1].device_class.as_deref(), Some("ssd"));
        assert_eq!(pools[1].pg_num, 32);
        assert!(!pools[0].erasure_coded && !pools[1].erasure_coded);
        assert!(pools[2].erasure_coded, "type 3 is erasure-coded");
        assert_eq!(
            failure_domain(&rules, "replicated_rule").as_deref(),
            Some("osd")
        );
    }

    #[test]
    fn stats_add_up_pools() {
        let df = json!({"stats": {"total_bytes": 100, "total_avail_bytes": 60, "total_used_raw_bytes": 40},
            "pools": [{"name": "a", "id": 1, "stats": {"stored": 10, "objects": 2, "bytes_used": 30, "omap_bytes_used": 3}},
                      {"name": "b", "id": 2, "stats": {"stored": 1, "objects": 1, "bytes_used": 3}}]});
        let osd = json!({"epoch": 9, "num_osds": 3, "num_up_osds": 2, "num_in_osds": 3});
        let pool_stats = json!([{"pool_name": "a", "recovery": {"degraded_objects": 2}}]);
        let dump = json!({"osds": [
                {"osd": 0, "state": ["exists", "up"]},
                {"osd": 2, "state": ["exists", "up", "full"]},
                {"osd": 1, "state": ["exists", "up", "nearfull"]}],
            "pools": [{"pool_name": "a", "flags_names": "hashpspool,nearfull"},
                      {"pool_name": "b", "flags_names": "hashpspool,full_quota"}]});
        let stats = parse_stats(&df, &osd, &pool_stats, &dump);
        assert_eq!(
            (stats.total_bytes, stats.used_bytes, stats.free_bytes),
            (100, 40, 60)
        );
        assert_eq!(
            (stats.objects, stats.osds, stats.osds_up, stats.epoch),
            (3, 3, 2, 9)
        );
        assert_eq!(stats.pools[0].degraded_objects, 2);
        assert_eq!(stats.pools[0].metadata_bytes, 3);
        assert_eq!(
            stats.full_osds,
            vec![(1, FullLevel::Nearfull), (2, FullLevel::Full)]
        );
        assert_eq!(stats.full_level(), FullLevel::Full);
        assert_eq!(
            (stats.pools[0].full_level, stats.pools[1].full_level),
            (FullLevel::Nearfull, FullLevel::Full)
        );
        let empty = parse_stats(&df, &osd, &pool_stats, &json!({}));
        assert!(empty.full_osds.is_empty());
        assert_eq!(empty.pools[0].full_level, FullLevel::Ok);
    }

    #[test]
    fn impossible_specs_are_refused() {
        assert!(validate_spec(&PoolSpec::new("p")).is_ok());
        assert!(validate_spec(&PoolSpec::new("")).is_err());
        assert!(validate_spec(&PoolSpec::new("p").with_size(0)).is_err());
        let mut both = PoolSpec::new("p").with_device_class("ssd");
        both.crush_rule = Some("r".into());
        assert!(validate_spec(&both).is_err());
    }
}
