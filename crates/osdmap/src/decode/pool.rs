//! `pg_pool_t::decode` (Ceph 16.2 writes struct_v 29; older and newer versions decode as far
//! as their version says, the rest of the section is skipped by its length).

use std::collections::BTreeMap;

use super::reader::Reader;
use crate::error::Result;
use crate::pg::ObjectHash;
use crate::pool::{Pool, PoolExtra, PoolType};

/// Newest compat version this decoder understands (Ceph writes compat 5).
const POOL_COMPAT_MAX: u8 = 5;

/// Decode one `pg_pool_t`. The id and name live elsewhere in the map; the caller sets them.
pub(crate) fn decode_pool(r: &mut Reader<'_>, id: i64) -> Result<Pool> {
    r.section("pg_pool_t", POOL_COMPAT_MAX, |r, section| {
        let v = section.version;
        if v < 5 {
            return Err(r.error(
                "pg_pool_t",
                format!("struct_v {v} predates the versioned pool encoding"),
            ));
        }
        let pool_type = PoolType::from_code(r.u8("pool.type")?);
        let size = u32::from(r.u8("pool.size")?);
        let crush_rule = i32::from(r.u8("pool.crush_rule")?);
        let object_hash = ObjectHash::from_code(r.u8("pool.object_hash")?);
        let pg_num = r.u32("pool.pg_num")?;
        let pgp_num = r.u32("pool.pgp_num")?;
        let _lpg_num = r.u32("pool.lpg_num")?;
        let _lpgp_num = r.u32("pool.lpgp_num")?;
        let last_change = r.u32("pool.last_change")?;
        let _snap_seq = r.u64("pool.snap_seq")?;
        let _snap_epoch = r.u32("pool.snap_epoch")?;
        skip_snaps(r, v)?;
        // removed_snaps: interval_set<snapid_t> = count + (start, len) u64 pairs.
        r.skip_vec("pool.removed_snaps", 16, |r| {
            r.take(16, "pool.removed_snaps").map(drop)
        })?;
        let mut extra = PoolExtra {
            auid: r.u64("pool.auid")?,
            ..PoolExtra::default()
        };
        let flags = if v >= 27 {
            r.u64("pool.flags")?
        } else {
            u64::from(r.u32("pool.flags")?)
        };
        let _crash_replay_interval = r.u32("pool.crash_replay_interval")?;
        let min_size = if v >= 7 {
            u32::from(r.u8("pool.min_size")?)
        } else {
            size - size / 2
        };
        if v >= 8 {
            extra.quota_max_bytes = r.u64("pool.quota_max_bytes")?;
            extra.quota_max_objects = r.u64("pool.quota_max_objects")?;
        }
        if v >= 9 {
            extra.tiers = r.vec("pool.tiers", 8, |r| r.u64("pool.tiers"))?;
            extra.tier_of = r.i64("pool.tier_of")?;
            extra.cache_mode = r.u8("pool.cache_mode")?;
            extra.read_tier = r.i64("pool.read_tier")?;
            extra.write_tier = r.i64("pool.write_tier")?;
        } else {
            extra.tier_of = -1;
            extra.read_tier = -1;
            extra.write_tier = -1;
        }
        if v >= 10 {
            let _properties = r.string_map("pool.properties")?;
        }
        if v >= 11 {
            extra.hit_set_type = r.section("pool.hit_set_params", 1, |r, _| {
                r.u8("pool.hit_set_params.type")
            })?;
            let _hit_set_period = r.u32("pool.hit_set_period")?;
            let _hit_set_count = r.u32("pool.hit_set_count")?;
        }
        let stripe_width = if v >= 12 {
            r.u32("pool.stripe_width")?
        } else {
            0
        };
        if v >= 13 {
            extra.target_max_bytes = r.u64("pool.target_max_bytes")?;
            extra.target_max_objects = r.u64("pool.target_max_objects")?;
            let _dirty_ratio = r.u32("pool.cache_target_dirty_ratio_micro")?;
            let _full_ratio = r.u32("pool.cache_target_full_ratio_micro")?;
            let _flush_age = r.u32("pool.cache_min_flush_age")?;
            let _evict_age = r.u32("pool.cache_min_evict_age")?;
        }
        let erasure_code_profile = if v >= 14 {
            r.string("pool.erasure_code_profile")?
        } else {
            String::new()
        };
        if v >= 15 {
            extra.last_force_op_resend_preluminous =
                r.u32("pool.last_force_op_resend_preluminous")?;
        }
        if v >= 16 {
            extra.min_read_recency_for_promote = r.i32("pool.min_read_recency_for_promote")?;
        }
        if v >= 17 {
            extra.expected_num_objects = r.u64("pool.expected_num_objects")?;
        }
        if v >= 19 {
            let _dirty_high = r.u32("pool.cache_target_dirty_high_ratio_micro")?;
        }
        if v >= 20 {
            extra.min_write_recency_for_promote = r.i32("pool.min_write_recency_for_promote")?;
        }
        if v >= 21 {
            let _use_gmt_hitset = r.bool("pool.use_gmt_hitset")?;
        }
        if v >= 22 {
            extra.fast_read = r.bool("pool.fast_read")?;
        }
        if v >= 23 {
            let _decay = r.u32("pool.hit_set_grade_decay_rate")?;
            let _search = r.u32("pool.hit_set_search_last_n")?;
        }
        if v >= 24 {
            r.skip_section("pool.opts")?;
        }
        if v >= 25 {
            extra.last_force_op_resend_prenautilus =
                r.u32("pool.last_force_op_resend_prenautilus")?;
        } else {
            extra.last_force_op_resend_prenautilus = extra.last_force_op_resend_preluminous;
        }
        let mut application_metadata = BTreeMap::new();
        if v >= 26 {
            let apps = r.vec("pool.application_metadata", 8, |r| {
                Ok((
                    r.string("pool.application_metadata")?,
                    r.string_map("pool.application_metadata")?,
                ))
            })?;
            application_metadata = apps.into_iter().collect();
        }
        if v >= 27 {
            let _create_time = (r.u32("pool.create_time")?, r.u32("pool.create_time")?);
        }
        let (mut pg_num_target, mut pgp_num_target, mut pg_num_pending) = (pg_num, pgp_num, pg_num);
        let mut pg_autoscale_mode = crate::pool::AUTOSCALE_MODE_UNKNOWN;
        if v >= 28 {
            pg_num_target = r.u32("pool.pg_num_target")?;
            pgp_num_target = r.u32("pool.pgp_num_target")?;
            pg_num_pending = r.u32("pool.pg_num_pending")?;
            let _dec_last_epoch_started = r.u32("pool.pg_num_dec_last_epoch_started")?;
            let _dec_last_epoch_clean = r.u32("pool.pg_num_dec_last_epoch_clean")?;
            extra.last_force_op_resend = r.u32("pool.last_force_op_resend")?;
            pg_autoscale_mode = r.u8("pool.pg_autoscale_mode")?;
        } else {
            extra.last_force_op_resend = extra.last_force_op_resend_prenautilus;
        }
        // v29 last_pg_merge_meta and v30+ stretch fields do not affect placement: skipped by
        // the section length.
        Ok(Pool {
            id,
            name: String::new(),
            pool_type,
            size,
            min_size,
            crush_rule,
            object_hash,
            pg_num,
            pgp_num,
            flags,
            last_change,
            stripe_width,
            erasure_code_profile,
            application_metadata,
            pg_num_target,
            pgp_num_target,
            pg_num_pending,
            pg_autoscale_mode,
            extra,
        })
    })
}

/// `snaps`: map<snapid_t, pool_snap_info_t>; the info is a versioned section since v2 of it.
fn skip_snaps(r: &mut Reader<'_>, _pool_version: u8) -> Result<()> {
    r.skip_vec("pool.snaps", 14, |r| {
        let _snapid = r.u64("pool.snaps.key")?;
        r.skip_section("pool.snaps.info")
    })
}
