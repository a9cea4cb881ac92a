//! Binary osdmap decoding: what `ceph osd getmap` and `osdmaptool --save` write (Ceph 16.2:
//! wrapper struct_v 8, client-usable section v9, osd-only section v9, crc32c).
//!
//! Layout: `ENCODE_START(8, 7)` wrapping { client section, osd-only section, u32 crc }. The crc
//! covers every byte from the wrapper's start up to the crc field (and any bytes after it).
//! Fields newer than this decoder are skipped by section length; pre-luminous "classic"
//! encodings (wrapper struct_v < 7) are refused with [`OsdMapError::UnsupportedVersion`].

mod pool;
pub(crate) mod reader;

use std::collections::BTreeMap;

use crate::addr::{AddrVec, EntityAddr};
use crate::error::{OsdMapError, Result};
use crate::map::{ClusterInfo, OsdInfo, OsdMap, UTime};
use crate::pg::PgId;
use reader::Reader;

/// Whether [`decode_with`] checks the stored crc.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrcCheck {
    Verify,
    /// For tests and fuzzing that mutate bytes on purpose.
    Skip,
}

/// Decode a binary osdmap; verifies the crc.
pub fn decode(bytes: &[u8]) -> Result<OsdMap> {
    decode_with(bytes, CrcCheck::Verify)
}

/// Decode a binary osdmap, checking the crc or not.
pub fn decode_with(bytes: &[u8], crc_check: CrcCheck) -> Result<OsdMap> {
    let (mut map, crush_bytes) = decode_without_crush(bytes, crc_check)?;
    map.crush = crush::codec::decode(crush_bytes)?;
    Ok(map)
}

/// Everything but the crushmap, whose bytes are returned for the crush codec.
pub(crate) fn decode_without_crush(bytes: &[u8], crc_check: CrcCheck) -> Result<(OsdMap, &[u8])> {
    let mut r = Reader::new(bytes);
    let start = r.offset();
    let mut crush_bytes: &[u8] = &[];
    let map = r.section("osdmap", 7, |r, wrapper| {
        if wrapper.version < 7 {
            return Err(OsdMapError::UnsupportedVersion {
                offset: start,
                field: "osdmap (classic encoding)",
                version: wrapper.version,
                compat: 0,
            });
        }
        let mut map = OsdMap::new(crush::CrushMap::default(), 0);
        crush_bytes = r.section("osdmap.client", 1, |r, s| {
            decode_client(r, s.version, &mut map)
        })?;
        r.section("osdmap.osd_only", 1, |r, s| {
            decode_osd_only(r, s.version, &mut map)
        })?;
        if wrapper.version >= 8 {
            let crc_offset = r.offset();
            let stored = r.u32("osdmap.crc")?;
            if crc_check == CrcCheck::Verify {
                let front = r.slice(start, crc_offset);
                let tail_start = r.offset();
                let tail = r.slice(tail_start, tail_start + r.remaining());
                let computed = ceph_crc32c(ceph_crc32c(u32::MAX, front), tail);
                if computed != stored {
                    return Err(OsdMapError::Crc { stored, computed });
                }
            }
        }
        Ok(map)
    })?;
    Ok((map, crush_bytes))
}

/// Ceph's `ceph_crc32c(seed, data)`: CRC-32C without the final inversion.
fn ceph_crc32c(seed: u32, data: &[u8]) -> u32 {
    !crc32c::crc32c_append(!seed, data)
}

fn utime(r: &mut Reader<'_>, field: &'static str) -> Result<UTime> {
    Ok(UTime {
        seconds: r.u32(field)?,
        nanoseconds: r.u32(field)?,
    })
}

/// `pg_t` encoding: u8 version, u64 pool, u32 seed, i32 preferred (always -1).
fn pg_id(r: &mut Reader<'_>, field: &'static str) -> Result<PgId> {
    let _version = r.u8(field)?;
    let pool = r.u64(field)? as i64;
    let seed = r.u32(field)?;
    let _preferred = r.i32(field)?;
    Ok(PgId { pool, seed })
}

const PG_ID_BYTES: usize = 17;

/// An `entity_addr_t` after its marker byte: marker 0 = legacy (rest of a u32 type, u32
/// nonce, 128-byte sockaddr_storage with a big-endian family), marker 1 = versioned section
/// (type, nonce, sockaddr length, little-endian family, the rest of the sockaddr).
fn addr_after_marker(r: &mut Reader<'_>, marker: u8, field: &'static str) -> Result<EntityAddr> {
    match marker {
        0 => {
            let _rest = r.take(3, field)?;
            let nonce = r.u32(field)?;
            let storage = r.take(128, field)?;
            let family = u16::from_be_bytes([storage[0], storage[1]]);
            Ok(EntityAddr {
                kind: 1,
                nonce,
                family,
                data: storage[2..].to_vec(),
            })
        }
        1 => r.section(field, 1, |r, _| {
            let kind = r.u32(field)?;
            let nonce = r.u32(field)?;
            let length = r.count(field, 1)?;
            if length == 0 {
                return Ok(EntityAddr {
                    kind,
                    nonce,
                    family: 0,
                    data: Vec::new(),
                });
            }
            if length < 2 {
                return Err(r.error(field, format!("sockaddr length {length}")));
            }
            let family = u16::from_le_bytes([r.u8(field)?, r.u8(field)?]);
            let data = r.take(length - 2, field)?.to_vec();
            Ok(EntityAddr {
                kind,
                nonce,
                family,
                data,
            })
        }),
        marker => Err(r.error(field, format!("entity_addr_t marker {marker}"))),
    }
}

fn addr(r: &mut Reader<'_>, field: &'static str) -> Result<EntityAddr> {
    let marker = r.u8(field)?;
    addr_after_marker(r, marker, field)
}

/// An `entity_addrvec_t`: marker 0 or 1 = one `entity_addr_t` (pre-vector encodings),
/// marker 2 = a vector of them.
fn addrvec(r: &mut Reader<'_>, field: &'static str) -> Result<AddrVec> {
    match r.u8(field)? {
        2 => Ok(AddrVec(r.vec(field, 1, |r| addr(r, field))?)),
        marker @ (0 | 1) => Ok(AddrVec(vec![addr_after_marker(r, marker, field)?])),
        marker => Err(r.error(field, format!("entity_addrvec_t marker {marker}"))),
    }
}

fn addrvecs(r: &mut Reader<'_>, field: &'static str) -> Result<Vec<AddrVec>> {
    r.vec(field, 1, |r| addrvec(r, field))
}

/// `map<int64_t, interval_set<snapid_t>>`.
fn skip_snap_interval_map(r: &mut Reader<'_>, field: &'static str) -> Result<()> {
    r.skip_vec(field, 12, |r| {
        let _pool = r.i64(field)?;
        r.skip_vec(field, 16, |r| r.take(16, field).map(drop))
    })
}

fn i32_vec(r: &mut Reader<'_>, field: &'static str) -> Result<Vec<i32>> {
    r.vec(field, 4, |r| r.i32(field))
}

fn u32_vec(r: &mut Reader<'_>, field: &'static str) -> Result<Vec<u32>> {
    r.vec(field, 4, |r| r.u32(field))
}

/// The client-usable section; returns the crushmap bytes.
fn decode_client<'a>(r: &mut Reader<'a>, v: u8, map: &mut OsdMap) -> Result<&'a [u8]> {
    let info = &mut map.info;
    info.fsid = r.uuid("fsid")?;
    map.epoch = r.u32("epoch")?;
    info.created = utime(r, "created")?;
    info.modified = utime(r, "modified")?;
    let pools = r.vec("pools", 9, |r| {
        let id = r.i64("pools.key")?;
        pool::decode_pool(r, id)
    })?;
    let names: BTreeMap<i64, String> = r
        .vec("pool_name", 12, |r| {
            Ok((r.i64("pool_name.key")?, r.string("pool_name")?))
        })?
        .into_iter()
        .collect();
    map.pools = pools
        .into_iter()
        .map(|mut pool| {
            pool.name = names
                .get(&pool.id)
                .cloned()
                .unwrap_or_else(|| "<unknown>".to_string());
            (pool.id, pool)
        })
        .collect();
    info.pool_max = r.i32("pool_max")?;
    info.flags = r.u32("flags")?;
    let max_osd_offset = r.offset();
    let max_osd = r.i32("max_osd")?;
    if max_osd < 0 {
        return Err(r.error("max_osd", format!("negative max_osd {max_osd}")));
    }
    let osd_state = if v >= 5 {
        u32_vec(r, "osd_state")?
    } else {
        r.vec("osd_state", 1, |r| r.u8("osd_state").map(u32::from))?
    };
    let osd_weight = u32_vec(r, "osd_weight")?;
    let client_addrs = addrvecs(r, "client_addrs")?;
    let pg_temp = r.vec("pg_temp", PG_ID_BYTES + 4, |r| {
        Ok((pg_id(r, "pg_temp.key")?, i32_vec(r, "pg_temp")?))
    })?;
    let primary_temp = r.vec("primary_temp", PG_ID_BYTES + 4, |r| {
        Ok((pg_id(r, "primary_temp.key")?, r.i32("primary_temp")?))
    })?;
    let primary_affinity = if v >= 2 {
        u32_vec(r, "osd_primary_affinity")?
    } else {
        Vec::new()
    };
    let crush_bytes = r.blob("crush")?;
    if v >= 3 {
        let profiles = r.vec("erasure_code_profiles", 8, |r| {
            Ok((
                r.string("erasure_code_profiles")?,
                r.string_map("erasure_code_profiles")?,
            ))
        })?;
        map.erasure_code_profiles = profiles.into_iter().collect();
    }
    if v >= 4 {
        let upmap = r.vec("pg_upmap", PG_ID_BYTES + 4, |r| {
            Ok((pg_id(r, "pg_upmap.key")?, i32_vec(r, "pg_upmap")?))
        })?;
        let items = r.vec("pg_upmap_items", PG_ID_BYTES + 4, |r| {
            let pg = pg_id(r, "pg_upmap_items.key")?;
            let pairs = r.vec("pg_upmap_items", 8, |r| {
                Ok((r.i32("pg_upmap_items")?, r.i32("pg_upmap_items")?))
            })?;
            Ok((pg, pairs))
        })?;
        map.pg_upmap = upmap.into_iter().collect();
        map.pg_upmap_items = items.into_iter().collect();
    }
    if v >= 6 {
        map.info.crush_version = r.i32("crush_version")?;
    }
    if v >= 7 {
        skip_snap_interval_map(r, "new_removed_snaps")?;
        skip_snap_interval_map(r, "new_purged_snaps")?;
    }
    if v >= 9 {
        map.info.last_up_change = utime(r, "last_up_change")?;
        map.info.last_in_change = utime(r, "last_in_change")?;
    }

    // Ceph sizes osd_state to max_osd; a larger max_osd is corrupt (and must not make us
    // allocate for slots the input does not describe).
    let described = osd_state.len().max(osd_weight.len());
    if max_osd as usize > described || max_osd > crate::map::MAX_OSD_LIMIT {
        return Err(OsdMapError::Decode {
            offset: max_osd_offset,
            field: "max_osd",
            reason: format!("max_osd {max_osd} but {described} osd_state entries"),
        });
    }
    map.set_max_osd(max_osd);
    // Ceph sizes these vectors to max_osd; tolerate shorter ones (missing = absent / out).
    for (i, state) in osd_state.into_iter().enumerate().take(map.osd_state.len()) {
        map.osd_state[i] = state;
    }
    for (i, weight) in osd_weight
        .into_iter()
        .enumerate()
        .take(map.osd_weight.len())
    {
        map.osd_weight[i] = weight;
    }
    map.osd_primary_affinity = if primary_affinity.is_empty() {
        None
    } else {
        let mut table = primary_affinity;
        table.resize(map.osd_state.len(), crate::map::DEFAULT_PRIMARY_AFFINITY);
        Some(table)
    };
    for (i, addrs) in client_addrs
        .into_iter()
        .enumerate()
        .take(map.osd_public_addrs.len())
    {
        map.osd_public_addrs[i] = addrs;
    }
    map.pg_temp = pg_temp.into_iter().collect();
    map.primary_temp = primary_temp.into_iter().collect();
    Ok(crush_bytes)
}

fn osd_info(r: &mut Reader<'_>) -> Result<OsdInfo> {
    let _version = r.u8("osd_info")?;
    Ok(OsdInfo {
        last_clean_begin: r.u32("osd_info")?,
        last_clean_end: r.u32("osd_info")?,
        up_from: r.u32("osd_info")?,
        up_thru: r.u32("osd_info")?,
        down_at: r.u32("osd_info")?,
        lost_at: r.u32("osd_info")?,
    })
}

/// The osd-only section: history, uuids, ratios, release requirements.
fn decode_osd_only(r: &mut Reader<'_>, v: u8, map: &mut OsdMap) -> Result<()> {
    addrvecs(r, "hb_back_addrs")?;
    let infos = r.vec("osd_info", 25, osd_info)?;
    for (i, info) in infos.into_iter().enumerate().take(map.osd_info.len()) {
        map.osd_info[i] = info;
    }
    // blocklist: map<entity_addr_t, utime_t>
    r.skip_vec("blocklist", 9, |r| {
        addr(r, "blocklist")?;
        r.take(8, "blocklist").map(drop)
    })?;
    let cluster_addrs = addrvecs(r, "cluster_addrs")?;
    for (i, addrs) in cluster_addrs
        .into_iter()
        .enumerate()
        .take(map.osd_cluster_addrs.len())
    {
        map.osd_cluster_addrs[i] = addrs;
    }
    let _cluster_snapshot_epoch = r.u32("cluster_snapshot_epoch")?;
    map.info.cluster_snapshot = r.string("cluster_snapshot")?;
    let uuids = r.vec("osd_uuid", 16, |r| r.uuid("osd_uuid"))?;
    for (i, uuid) in uuids.into_iter().enumerate().take(map.osd_uuid.len()) {
        map.osd_uuid[i] = uuid;
    }
    r.skip_vec("osd_xinfo", 6, |r| r.skip_section("osd_xinfo"))?;
    addrvecs(r, "hb_front_addrs")?;
    let info: &mut ClusterInfo = &mut map.info;
    if v >= 2 {
        info.nearfull_ratio = r.f32("nearfull_ratio")?;
        info.full_ratio = r.f32("full_ratio")?;
    }
    if v >= 3 {
        info.backfillfull_ratio = r.f32("backfillfull_ratio")?;
    }
    if v == 4 {
        let _release_name = r.string("require_min_compat_client")?;
    }
    if v >= 5 {
        info.require_min_compat_client = r.u8("require_min_compat_client")?;
        info.require_osd_release = r.u8("require_osd_release")?;
    }
    if v >= 6 {
        skip_snap_interval_map(r, "removed_snaps_queue")?;
    }
    if v >= 8 {
        r.skip_vec("crush_node_flags", 8, |r| {
            r.take(8, "crush_node_flags").map(drop)
        })?;
    }
    if v >= 9 {
        r.skip_vec("device_class_flags", 8, |r| {
            r.take(8, "device_class_flags").map(drop)
        })?;
    }
    if v >= 10 {
        info.stretch_mode_enabled = r.bool("stretch_mode_enabled")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAP: &[u8] =
        include_bytes!("../../../../fixtures/crush-vectors/osdmap/om_c5x12_pool1_pg2048.bin");
    const UPMAP: &[u8] = include_bytes!(
        "../../../../fixtures/crush-vectors/osdmap/om_c5x12_pool1_pg2048_upmap_dev1.bin"
    );

    #[test]
    fn fixture_decodes_without_crush() {
        let (map, crush) = decode_without_crush(MAP, CrcCheck::Verify).expect("decodes");
        assert_eq!(map.epoch(), 5);
        assert_eq!(map.max_osd(), 64);
        assert_eq!(map.osds().count(), 64);
        let pool = map.pool(1).expect("pool 1");
        assert_eq!(pool.name, "rbd");
        assert_eq!(
            (pool.size, pool.min_size, pool.pg_num, pool.pgp_num),
            (3, 2, 2048, 2048)
        );
        assert!(pool.is_hashpspool());
        assert!(!crush.is_empty());
        assert!(map.pg_upmap_items().is_empty());
    }

    #[test]
    fn upmap_fixture_has_240_items() {
        let (map, _) = decode_without_crush(UPMAP, CrcCheck::Verify).expect("decodes");
        assert_eq!(map.pg_upmap_items().len(), 240);
        assert_eq!(
            map.pg_upmap_items().get(&PgId::new(1, 0)),
            Some(&vec![(52, 50)])
        );
    }

    #[test]
    fn a_flipped_byte_fails_the_crc() {
        let mut bytes = MAP.to_vec();
        bytes[100] ^= 0x40;
        assert!(matches!(
            decode_without_crush(&bytes, CrcCheck::Verify),
            Err(OsdMapError::Crc { .. })
        ));
    }
}

#[cfg(test)]
mod regression {
    use super::*;

    /// Found by the decode proptest: a corrupt max_osd of ~2^31 made us allocate slots for
    /// every id and abort; now it is an error naming the field.
    #[test]
    fn huge_max_osd_is_an_error_not_an_allocation() {
        let mut bytes = tests_support::map_bytes();
        // max_osd 64 is followed by the osd_state count 64.
        let at = bytes
            .windows(8)
            .position(|w| w == [64, 0, 0, 0, 64, 0, 0, 0])
            .expect("max_osd field");
        bytes[at..at + 4].copy_from_slice(&0x7fff_fff0_i32.to_le_bytes());
        let error = decode_without_crush(&bytes, CrcCheck::Skip)
            .err()
            .map(|e| e.to_string());
        assert!(error.is_some_and(|e| e.contains("max_osd")));
    }

    mod tests_support {
        pub(super) fn map_bytes() -> Vec<u8> {
            include_bytes!("../../../../fixtures/crush-vectors/osdmap/om_c5x12_pool1_pg2048.bin")
                .to_vec()
        }
    }
}
