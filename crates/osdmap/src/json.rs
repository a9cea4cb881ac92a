//! The alternative input: `ceph osd dump --format json` (or `osdmaptool MAP --dump json`, the
//! same `OSDMap::dump`) plus the binary crushmap (`ceph osd getcrushmap`), since the JSON dump
//! has no CRUSH map. Builds the same [`OsdMap`] as the binary decoder for everything placement
//! reads: pools, OSD existence/up/in/reweight/primary affinity, pg_temp, primary_temp,
//! pg_upmap, pg_upmap_items.

use serde_json::Value;

use crate::error::{OsdMapError, Result};
use crate::map::{OsdMap, OSD_STATE_NAMES, WEIGHT_IN};
use crate::pg::{ObjectHash, PgId};
use crate::pool::{Pool, PoolType};

fn err(message: impl Into<String>) -> OsdMapError {
    OsdMapError::Json(message.into())
}

fn field<'a>(object: &'a Value, name: &str) -> Result<&'a Value> {
    object
        .get(name)
        .ok_or_else(|| err(format!("missing field {name:?}")))
}

/// An integer that Ceph may print as a number or as a string (`"last_change": "0"`).
fn int(object: &Value, name: &str) -> Result<i64> {
    let value = field(object, name)?;
    value
        .as_i64()
        .or_else(|| value.as_u64().map(|v| v as i64))
        .or_else(|| value.as_str().and_then(|s| s.parse().ok()))
        .ok_or_else(|| err(format!("field {name:?} is not an integer: {value}")))
}

fn int_or(object: &Value, name: &str, default: i64) -> Result<i64> {
    if object.get(name).is_some() {
        int(object, name)
    } else {
        Ok(default)
    }
}

fn u32_field(object: &Value, name: &str) -> Result<u32> {
    let v = int(object, name)?;
    u32::try_from(v).map_err(|_| err(format!("field {name:?} out of range: {v}")))
}

/// A 0..1 float as 16.16 fixed point (`get_weightf` inverted).
fn fixed_16_16(object: &Value, name: &str) -> Result<u32> {
    let value = field(object, name)?;
    let f = value
        .as_f64()
        .ok_or_else(|| err(format!("field {name:?} is not a number")))?;
    if !(0.0..=65536.0).contains(&f) {
        return Err(err(format!("field {name:?} out of range: {f}")));
    }
    Ok((f * f64::from(WEIGHT_IN)).round() as u32)
}

fn array<'a>(object: &'a Value, name: &str) -> Result<&'a Vec<Value>> {
    field(object, name)?
        .as_array()
        .ok_or_else(|| err(format!("field {name:?} is not an array")))
}

fn pgid(value: &Value) -> Result<PgId> {
    let text = value
        .as_str()
        .ok_or_else(|| err(format!("pgid is not a string: {value}")))?;
    text.parse()
}

fn osd_id(value: &Value) -> Result<i32> {
    value
        .as_i64()
        .and_then(|v| i32::try_from(v).ok())
        .ok_or_else(|| err(format!("osd id is not an integer: {value}")))
}

fn string_map(value: &Value) -> std::collections::BTreeMap<String, String> {
    value
        .as_object()
        .map(|object| {
            object
                .iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.as_str().map_or_else(|| v.to_string(), str::to_string),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn pool_from_json(value: &Value) -> Result<Pool> {
    let id = int(value, "pool")?;
    let name = field(value, "pool_name")?.as_str().unwrap_or_default();
    let type_code = u8::try_from(int(value, "type")?).map_err(|_| err("pool type out of range"))?;
    let size = u32_field(value, "size")?;
    let pg_num = u32_field(value, "pg_num")?;
    let mut pool = Pool::new(id, name, PoolType::from_code(type_code), size, pg_num);
    pool.min_size = u32_field(value, "min_size")?;
    pool.crush_rule =
        i32::try_from(int(value, "crush_rule")?).map_err(|_| err("crush_rule out of range"))?;
    pool.object_hash = ObjectHash::from_code(
        u8::try_from(int(value, "object_hash")?).map_err(|_| err("object_hash out of range"))?,
    );
    pool.pgp_num = u32_field(value, "pg_placement_num")?;
    pool.flags = u64::try_from(int(value, "flags")?).map_err(|_| err("pool flags out of range"))?;
    pool.last_change = u32::try_from(int_or(value, "last_change", 0)?).unwrap_or(0);
    pool.stripe_width = u32::try_from(int_or(value, "stripe_width", 0)?).unwrap_or(0);
    pool.pg_num_target =
        u32::try_from(int_or(value, "pg_num_target", i64::from(pg_num))?).unwrap_or(pg_num);
    pool.pgp_num_target = u32::try_from(int_or(
        value,
        "pg_placement_num_target",
        i64::from(pool.pgp_num),
    )?)
    .unwrap_or(pool.pgp_num);
    pool.pg_num_pending =
        u32::try_from(int_or(value, "pg_num_pending", i64::from(pg_num))?).unwrap_or(pg_num);
    pool.erasure_code_profile = value
        .get("erasure_code_profile")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    pool.pg_autoscale_mode = Pool::autoscale_mode_from_name(
        value
            .get("pg_autoscale_mode")
            .and_then(Value::as_str)
            .unwrap_or(""),
    );
    if let Some(apps) = value.get("application_metadata").and_then(Value::as_object) {
        pool.application_metadata = apps
            .iter()
            .map(|(k, v)| (k.clone(), string_map(v)))
            .collect();
    }
    Ok(pool)
}

impl OsdMap {
    /// Build a map from `ceph osd dump --format json` output and a binary crushmap.
    pub fn from_dump_json(json: &str, crush_bytes: &[u8]) -> Result<Self> {
        let crush = crush::codec::decode(crush_bytes)?;
        Self::from_dump_json_with_crush(json, crush)
    }

    /// Like [`OsdMap::from_dump_json`] with an already decoded CRUSH map.
    pub fn from_dump_json_with_crush(json: &str, crush: crush::CrushMap) -> Result<Self> {
        let dump: Value = serde_json::from_str(json).map_err(|e| err(e.to_string()))?;
        let max_osd =
            i32::try_from(int(&dump, "max_osd")?).map_err(|_| err("max_osd out of range"))?;
        if !(0..=crate::map::MAX_OSD_LIMIT).contains(&max_osd) {
            return Err(err(format!("max_osd {max_osd} out of range")));
        }
        let mut map = OsdMap::new(crush, max_osd);
        map.epoch = u32::try_from(int(&dump, "epoch")?).map_err(|_| err("epoch out of range"))?;
        map.info.flags = u32::try_from(int_or(&dump, "flags_num", 0)?).unwrap_or(0);
        map.info.crush_version = i32::try_from(int_or(&dump, "crush_version", 0)?).unwrap_or(0);
        map.info.pool_max = i32::try_from(int_or(&dump, "pool_max", 0)?).unwrap_or(0);
        for pool in array(&dump, "pools")? {
            map.insert_pool(pool_from_json(pool)?);
        }
        for osd in array(&dump, "osds")? {
            let id = osd_id(field(osd, "osd")?)?;
            if id < 0 || id >= max_osd {
                return Err(err(format!("osd.{id} outside max_osd {max_osd}")));
            }
            let mut state = 0;
            for name in array(osd, "state")? {
                let name = name.as_str().unwrap_or_default();
                if let Some((bit, _)) = OSD_STATE_NAMES.iter().find(|(_, n)| *n == name) {
                    state |= bit;
                }
            }
            // Only existing OSDs are dumped; an empty state list still means "exists".
            map.set_osd_state(id, state | crate::map::OSD_EXISTS);
            map.set_osd_weight(id, fixed_16_16(osd, "weight")?);
            let affinity = fixed_16_16(osd, "primary_affinity")?;
            if affinity != crate::map::DEFAULT_PRIMARY_AFFINITY {
                map.set_primary_affinity(id, affinity);
            }
        }
        if let Some(upmaps) = dump.get("pg_upmap").and_then(Value::as_array) {
            for entry in upmaps {
                let osds = array(entry, "osds")?
                    .iter()
                    .map(osd_id)
                    .collect::<Result<Vec<_>>>()?;
                map.set_pg_upmap(pgid(field(entry, "pgid")?)?, Some(osds));
            }
        }
        if let Some(upmaps) = dump.get("pg_upmap_items").and_then(Value::as_array) {
            for entry in upmaps {
                let items = array(entry, "mappings")?
                    .iter()
                    .map(|m| Ok((osd_id(field(m, "from")?)?, osd_id(field(m, "to")?)?)))
                    .collect::<Result<Vec<_>>>()?;
                map.set_pg_upmap_items(pgid(field(entry, "pgid")?)?, Some(items));
            }
        }
        if let Some(temps) = dump.get("pg_temp").and_then(Value::as_array) {
            for entry in temps {
                let osds = array(entry, "osds")?
                    .iter()
                    .map(osd_id)
                    .collect::<Result<Vec<_>>>()?;
                map.set_pg_temp(pgid(field(entry, "pgid")?)?, osds);
            }
        }
        if let Some(temps) = dump.get("primary_temp").and_then(Value::as_array) {
            read_primary_temp(&mut map, temps)?;
        }
        if let Some(profiles) = dump.get("erasure_code_profiles").and_then(Value::as_object) {
            map.erasure_code_profiles = profiles
                .iter()
                .map(|(k, v)| (k.clone(), string_map(v)))
                .collect();
        }
        Ok(map)
    }
}

/// Ceph dumps primary_temp inside an array section as alternating bare values
/// (`["1.0", 3, ...]`); accept that and the object form `{"pgid": .., "osd": ..}`.
fn read_primary_temp(map: &mut OsdMap, entries: &[Value]) -> Result<()> {
    let mut pending: Option<PgId> = None;
    for entry in entries {
        if entry.is_object() {
            map.set_primary_temp(
                pgid(field(entry, "pgid")?)?,
                Some(osd_id(field(entry, "osd")?)?),
            );
        } else if entry.is_string() {
            pending = Some(pgid(entry)?);
        } else if let Some(pg) = pending.take() {
            map.set_primary_temp(pg, Some(osd_id(entry)?));
        } else {
            return Err(err(format!("primary_temp: osd {entry} without a pgid")));
        }
    }
    Ok(())
}
