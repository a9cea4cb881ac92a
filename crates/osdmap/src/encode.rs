//! Binary osdmap encoding, as Ceph 16.2's `OSDMap::encode` writes it for `ceph osd getmap`:
//! wrapper struct_v 8 (compat 7) around the client-usable section (v9), the osd-only section
//! (v9) and the crc32c, so `osdmaptool FILE --print` and `--test-map-pgs` read it. Pools are
//! written as `pg_pool_t` v28 (every field [`crate::decode`] reads; v29's last merge
//! metadata stays at Ceph's default), `osd_xinfo_t` as v3.
//!
//! What the map does not model is written empty (snapshots, blocklist, heartbeat addresses,
//! crush node flags). [`crate::decode`] reads back what this writes (checked in the tests).

use crate::addr::{AddrVec, EntityAddr};
use crate::map::{OsdMap, UTime};
use crate::pg::PgId;
use crate::pool::Pool;

/// A little-endian byte writer with Ceph's versioned sections.
struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn i32(&mut self, v: i32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn f32(&mut self, v: f32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn count(&mut self, n: usize) {
        self.u32(u32::try_from(n).expect("count fits u32"));
    }
    fn string(&mut self, s: &str) {
        self.count(s.len());
        self.0.extend_from_slice(s.as_bytes());
    }
    fn utime(&mut self, t: UTime) {
        self.u32(t.seconds);
        self.u32(t.nanoseconds);
    }
    fn string_map<'a>(&mut self, map: impl ExactSizeIterator<Item = (&'a String, &'a String)>) {
        self.count(map.len());
        for (key, value) in map {
            self.string(key);
            self.string(value);
        }
    }
    /// `ENCODE_START(version, compat)` ... `ENCODE_FINISH`: the length is filled in after.
    fn section(&mut self, version: u8, compat: u8, body: impl FnOnce(&mut Self)) {
        self.u8(version);
        self.u8(compat);
        let at = self.0.len();
        self.u32(0);
        body(self);
        let length = u32::try_from(self.0.len() - at - 4).expect("section fits u32");
        self.0[at..at + 4].copy_from_slice(&length.to_le_bytes());
    }
    fn pg_id(&mut self, pg: PgId) {
        self.u8(1);
        self.u64(pg.pool as u64);
        self.u32(pg.seed);
        self.i32(-1);
    }
    fn i32_vec(&mut self, values: &[i32]) {
        self.count(values.len());
        for &v in values {
            self.i32(v);
        }
    }
    fn u32_vec(&mut self, values: &[u32]) {
        self.count(values.len());
        for &v in values {
            self.u32(v);
        }
    }
    fn addr(&mut self, addr: &EntityAddr) {
        self.u8(1);
        self.section(1, 1, |w| {
            w.u32(addr.kind);
            w.u32(addr.nonce);
            if addr.family == 0 && addr.data.is_empty() {
                w.u32(0);
            } else {
                w.count(addr.data.len() + 2);
                w.0.extend_from_slice(&addr.family.to_le_bytes());
                w.0.extend_from_slice(&addr.data);
            }
        });
    }
    fn addrvecs(&mut self, addrs: &[AddrVec]) {
        self.count(addrs.len());
        for vec in addrs {
            self.u8(2);
            self.count(vec.0.len());
            for addr in &vec.0 {
                self.addr(addr);
            }
        }
    }
}

/// Encode `map` as Ceph 16.2 does (see the module header).
pub fn encode(map: &OsdMap) -> Vec<u8> {
    let mut w = Writer(Vec::new());
    w.section(8, 7, |w| {
        w.section(9, 1, |w| encode_client(w, map));
        w.section(9, 1, |w| encode_osd_only(w, map));
        w.u32(0); // the crc, filled in below
    });
    // The crc covers everything from the wrapper's start (its final length included) up to
    // its own field.
    let crc_at = w.0.len() - 4;
    let crc = ceph_crc32c(u32::MAX, &w.0[..crc_at]);
    w.0[crc_at..].copy_from_slice(&crc.to_le_bytes());
    w.0
}

/// Ceph's `ceph_crc32c(seed, data)`: CRC-32C without the final inversion.
fn ceph_crc32c(seed: u32, data: &[u8]) -> u32 {
    !crc32c::crc32c_append(!seed, data)
}

fn encode_client(w: &mut Writer, map: &OsdMap) {
    let info = &map.info;
    w.0.extend_from_slice(&info.fsid);
    w.u32(map.epoch);
    w.utime(info.created);
    w.utime(info.modified);
    w.count(map.pools.len());
    for (&id, pool) in &map.pools {
        w.i64(id);
        encode_pool(w, pool);
    }
    w.count(map.pools.len());
    for (&id, pool) in &map.pools {
        w.i64(id);
        w.string(&pool.name);
    }
    w.i32(info.pool_max);
    w.u32(info.flags);
    w.i32(map.max_osd);
    w.u32_vec(&map.osd_state);
    w.u32_vec(&map.osd_weight);
    w.addrvecs(&map.osd_public_addrs);
    w.count(map.pg_temp.len());
    for (&pg, osds) in &map.pg_temp {
        w.pg_id(pg);
        w.i32_vec(osds);
    }
    w.count(map.primary_temp.len());
    for (&pg, &osd) in &map.primary_temp {
        w.pg_id(pg);
        w.i32(osd);
    }
    w.u32_vec(map.osd_primary_affinity.as_deref().unwrap_or(&[]));
    let crush = crush::codec::encode(&map.crush);
    w.count(crush.len());
    w.0.extend_from_slice(&crush);
    w.count(map.erasure_code_profiles.len());
    for (name, profile) in &map.erasure_code_profiles {
        w.string(name);
        w.string_map(profile.iter());
    }
    w.count(map.pg_upmap.len());
    for (&pg, osds) in &map.pg_upmap {
        w.pg_id(pg);
        w.i32_vec(osds);
    }
    w.count(map.pg_upmap_items.len());
    for (&pg, items) in &map.pg_upmap_items {
        w.pg_id(pg);
        w.count(items.len());
        for &(from, to) in items {
            w.i32(from);
            w.i32(to);
        }
    }
    w.i32(info.crush_version);
    w.count(0); // new_removed_snaps
    w.count(0); // new_purged_snaps
    w.utime(info.last_up_change);
    w.utime(info.last_in_change);
}

fn encode_osd_only(w: &mut Writer, map: &OsdMap) {
    let slots = map.osd_state.len();
    w.addrvecs(&vec![AddrVec::default(); slots]); // hb_back_addrs
    w.count(map.osd_info.len());
    for info in &map.osd_info {
        w.u8(1);
        for v in [
            info.last_clean_begin,
            info.last_clean_end,
            info.up_from,
            info.up_thru,
            info.down_at,
            info.lost_at,
        ] {
            w.u32(v);
        }
    }
    w.count(0); // blocklist
    w.addrvecs(&map.osd_cluster_addrs);
    w.u32(0); // cluster_snapshot_epoch
    w.string(&map.info.cluster_snapshot);
    w.count(map.osd_uuid.len());
    for uuid in &map.osd_uuid {
        w.0.extend_from_slice(uuid);
    }
    w.count(slots); // osd_xinfo, v3: down_stamp, laggy probability and interval, features, old_weight
    for _ in 0..slots {
        w.section(3, 1, |w| {
            w.utime(UTime::default());
            w.u32(0);
            w.u32(0);
            w.u64(0);
            w.u32(0);
        });
    }
    w.addrvecs(&vec![AddrVec::default(); slots]); // hb_front_addrs
    w.f32(map.info.nearfull_ratio);
    w.f32(map.info.full_ratio);
    w.f32(map.info.backfillfull_ratio);
    w.u8(map.info.require_min_compat_client);
    w.u8(map.info.require_osd_release);
    w.count(0); // removed_snaps_queue
    w.count(0); // crush_node_flags
    w.count(0); // device_class_flags
}

/// `pg_pool_t` v28, compat 5.
fn encode_pool(w: &mut Writer, pool: &Pool) {
    let extra = &pool.extra;
    w.section(28, 5, |w| {
        w.u8(pool.pool_type.code());
        w.u8(u8::try_from(pool.size).expect("pool size fits u8"));
        w.u8(u8::try_from(pool.crush_rule).expect("crush rule fits u8"));
        w.u8(pool.object_hash.code());
        w.u32(pool.pg_num);
        w.u32(pool.pgp_num);
        w.u32(0); // lpg_num
        w.u32(0); // lpgp_num
        w.u32(pool.last_change);
        w.u64(0); // snap_seq
        w.u32(0); // snap_epoch
        w.count(0); // snaps
        w.count(0); // removed_snaps
        w.u64(extra.auid);
        w.u64(pool.flags);
        w.u32(0); // crash_replay_interval
        w.u8(u8::try_from(pool.min_size).expect("min_size fits u8"));
        w.u64(extra.quota_max_bytes);
        w.u64(extra.quota_max_objects);
        w.count(extra.tiers.len());
        for &tier in &extra.tiers {
            w.u64(tier);
        }
        w.i64(extra.tier_of);
        w.u8(extra.cache_mode);
        w.i64(extra.read_tier);
        w.i64(extra.write_tier);
        w.count(0); // properties
        w.section(1, 1, |w| w.u8(0)); // hit_set_params: none
        w.u32(0); // hit_set_period
        w.u32(0); // hit_set_count
        w.u32(pool.stripe_width);
        w.u64(extra.target_max_bytes);
        w.u64(extra.target_max_objects);
        w.u32(0); // cache_target_dirty_ratio_micro
        w.u32(0); // cache_target_full_ratio_micro
        w.u32(0); // cache_min_flush_age
        w.u32(0); // cache_min_evict_age
        w.string(&pool.erasure_code_profile);
        w.u32(extra.last_force_op_resend_preluminous);
        w.i32(extra.min_read_recency_for_promote);
        w.u64(extra.expected_num_objects);
        w.u32(0); // cache_target_dirty_high_ratio_micro
        w.i32(extra.min_write_recency_for_promote);
        w.u8(0); // use_gmt_hitset
        w.u8(u8::from(extra.fast_read));
        w.u32(0); // hit_set_grade_decay_rate
        w.u32(0); // hit_set_search_last_n
        w.section(1, 1, |w| w.count(0)); // opts
        w.u32(extra.last_force_op_resend_prenautilus);
        w.count(pool.application_metadata.len());
        for (name, values) in &pool.application_metadata {
            w.string(name);
            w.string_map(values.iter());
        }
        w.utime(UTime::default()); // create_time
        w.u32(pool.pg_num_target);
        w.u32(pool.pgp_num_target);
        w.u32(pool.pg_num_pending);
        w.u32(0); // pg_num_dec_last_epoch_started
        w.u32(0); // pg_num_dec_last_epoch_clean
        w.u32(extra.last_force_op_resend);
        w.u8(pool.pg_autoscale_mode);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAP: &[u8] = include_bytes!(
        "../../../fixtures/crush-vectors/osdmap/om_c5x12_pool1_pg2048_upmap_dev1.bin"
    );

    #[test]
    fn a_decoded_map_encodes_to_one_that_decodes_the_same() {
        let map = OsdMap::decode(MAP).unwrap();
        let bytes = encode(&map);
        let again = OsdMap::decode(&bytes).unwrap();
        assert_eq!(again.epoch(), map.epoch());
        assert_eq!(again.max_osd(), map.max_osd());
        assert_eq!(again.pg_upmap_items(), map.pg_upmap_items());
        assert_eq!(again.pools().len(), map.pools().len());
        for (id, pool) in map.pools() {
            let other = again.pool(*id).unwrap();
            assert_eq!(
                (
                    &other.name,
                    other.size,
                    other.pg_num,
                    other.flags,
                    other.crush_rule
                ),
                (
                    &pool.name,
                    pool.size,
                    pool.pg_num,
                    pool.flags,
                    pool.crush_rule
                )
            );
            for pg in pool.pgs() {
                assert_eq!(again.pg_to_up_acting(pg), map.pg_to_up_acting(pg));
            }
        }
        assert_eq!(encode(&again), bytes, "encoding is stable");
    }
}
