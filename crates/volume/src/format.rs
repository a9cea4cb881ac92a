//! RBD format 2 as plain RADOS objects: object names, the header's omap encodings (Ceph's
//! `encode()` of each type: integers little-endian, a string as a u32 length and its bytes),
//! and the checks on what a header may hold for strata to open it.

use std::collections::BTreeMap;

use crate::error::{Result, VolumeError};

/// The pool's image directory (`rbd ls` reads it).
pub const DIRECTORY_OBJECT: &str = "rbd_directory";
/// Feature bit: layering (clones may be made of the image's snapshots). The one strata sets.
pub const FEATURE_LAYERING: u64 = 1;
/// Feature bit: the data objects live in another pool (`rbd create --data-pool`), named by
/// the header's `data_pool_id`; strata sets it for volumes of a catalogue with a data pool.
pub const FEATURE_DATA_POOL: u64 = 128;
/// The feature bits and their rbd names, for errors.
pub const FEATURE_NAMES: [(u64, &str); 9] = [
    (1, "layering"),
    (2, "striping"),
    (4, "exclusive-lock"),
    (8, "object-map"),
    (16, "fast-diff"),
    (32, "deep-flatten"),
    (64, "journaling"),
    (128, "data-pool"),
    (256, "operations"),
];
/// The feature bits strata implements (a volume with others is refused).
pub const FEATURES_SUPPORTED: u64 = FEATURE_LAYERING | FEATURE_DATA_POOL;

/// The omap keys of a header strata writes and reads.
pub mod keys {
    /// u64: the size in bytes.
    pub const SIZE: &str = "size";
    /// u8: log2 of the object size.
    pub const ORDER: &str = "order";
    /// u64: feature bits.
    pub const FEATURES: &str = "features";
    /// string: `rbd_data.<id>`.
    pub const OBJECT_PREFIX: &str = "object_prefix";
    /// u64: the last snapshot id.
    pub const SNAP_SEQ: &str = "snap_seq";
    /// i64: the id of the pool holding the data objects (with the `data-pool` feature).
    pub const DATA_POOL_ID: &str = "data_pool_id";
    /// utime: when the image was made.
    pub const CREATE_TIMESTAMP: &str = "create_timestamp";
    /// utime: last opened.
    pub const ACCESS_TIMESTAMP: &str = "access_timestamp";
    /// utime: last changed.
    pub const MODIFY_TIMESTAMP: &str = "modify_timestamp";
    /// Present on clones.
    pub const PARENT: &str = "parent";
    /// Prefix of one key per snapshot.
    pub const SNAPSHOT_PREFIX: &str = "snapshot_";
}

/// `rbd_id.<name>`: holds the image id.
pub fn id_object(name: &str) -> String {
    format!("rbd_id.{name}")
}

/// `rbd_header.<id>`: the image's metadata in omap.
pub fn header_object(id: &str) -> String {
    format!("rbd_header.{id}")
}

/// `rbd_data.<id>`: the data objects' prefix.
pub fn data_prefix(id: &str) -> String {
    format!("rbd_data.{id}")
}

/// The data object holding object number `number`: `<prefix>.%016x`.
pub fn data_object(prefix: &str, number: u64) -> String {
    format!("{prefix}.{number:016x}")
}

/// The directory key mapping a name to its id.
pub fn directory_name_key(name: &str) -> Vec<u8> {
    format!("name_{name}").into_bytes()
}

/// The directory key mapping an id to its name.
pub fn directory_id_key(id: &str) -> Vec<u8> {
    format!("id_{id}").into_bytes()
}

/// Ceph's encoding of a string: u32 LE length, then the bytes.
pub fn encode_string(value: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + value.len());
    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
    out.extend_from_slice(value.as_bytes());
    out
}

/// Ceph's encoding of a `utime_t`: u32 seconds, u32 nanoseconds.
pub fn encode_time(time_ns: u64) -> Vec<u8> {
    let seconds = (time_ns / 1_000_000_000) as u32;
    let nanoseconds = (time_ns % 1_000_000_000) as u32;
    let mut out = Vec::with_capacity(8);
    out.extend_from_slice(&seconds.to_le_bytes());
    out.extend_from_slice(&nanoseconds.to_le_bytes());
    out
}

/// Decodes a Ceph string exactly filling `bytes`; `Err` says what is wrong.
pub fn decode_string(bytes: &[u8]) -> std::result::Result<String, String> {
    let Some((length, rest)) = bytes.split_first_chunk::<4>() else {
        return Err(format!("{} bytes, a string needs at least 4", bytes.len()));
    };
    let length = u32::from_le_bytes(*length) as usize;
    if rest.len() != length {
        return Err(format!(
            "string length {length} but {} bytes follow",
            rest.len()
        ));
    }
    String::from_utf8(rest.to_vec()).map_err(|_| "string is not UTF-8".to_string())
}

/// Decodes a Ceph `utime_t` into ns since the epoch.
pub fn decode_time(bytes: &[u8]) -> std::result::Result<u64, String> {
    let array: [u8; 8] = bytes
        .try_into()
        .map_err(|_| format!("{} bytes, a timestamp is 8", bytes.len()))?;
    let (seconds, nanoseconds) = array.split_at(4);
    let seconds = u32::from_le_bytes(seconds.try_into().unwrap_or_default()) as u64;
    let nanoseconds = u32::from_le_bytes(nanoseconds.try_into().unwrap_or_default()) as u64;
    Ok(seconds * 1_000_000_000 + nanoseconds)
}

/// What a header says, decoded and checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// Size in bytes.
    pub size_bytes: u64,
    /// log2 of the object size.
    pub order: u8,
    /// Feature bits.
    pub features: u64,
    /// `rbd_data.<id>`.
    pub object_prefix: String,
    /// Last snapshot id.
    pub snap_seq: u64,
    /// The pool of the data objects when it is not the header's (`data-pool` feature).
    pub data_pool_id: Option<i64>,
    /// When the image was made (ns since the epoch), when the header says.
    pub create_timestamp_ns: Option<u64>,
    /// Last modified (ns since the epoch), when the header says.
    pub modify_timestamp_ns: Option<u64>,
    /// The raw `size` value, for guarded updates.
    pub size_raw: Vec<u8>,
    /// Whether the header has snapshots (`snapshot_*` keys or a nonzero `snap_seq` with them).
    pub has_snapshots: bool,
    /// Whether the header names a parent (a clone).
    pub has_parent: bool,
}

impl Header {
    /// The header of a new image; `data_pool` (the header's pool id, the data pool's id)
    /// puts its data objects in another pool, as `rbd create --data-pool` does: the
    /// `data-pool` feature, `data_pool_id`, and an object prefix `rbd_data.<header pool
    /// id>.<id>`, so images of several pools sharing one data pool never share names.
    pub fn encode_new(
        size_bytes: u64,
        order: u8,
        id: &str,
        now_ns: u64,
        data_pool: Option<(i64, i64)>,
    ) -> Vec<(Vec<u8>, Vec<u8>)> {
        let time = encode_time(now_ns);
        let (features, prefix) = match data_pool {
            None => (FEATURE_LAYERING, data_prefix(id)),
            Some((header_pool_id, _)) => (
                FEATURE_LAYERING | FEATURE_DATA_POOL,
                data_prefix(&format!("{header_pool_id}.{id}")),
            ),
        };
        let mut omap = vec![
            (keys::SIZE.into(), size_bytes.to_le_bytes().to_vec()),
            (keys::ORDER.into(), vec![order]),
            (keys::FEATURES.into(), features.to_le_bytes().to_vec()),
            (keys::OBJECT_PREFIX.into(), encode_string(&prefix)),
            (keys::SNAP_SEQ.into(), 0u64.to_le_bytes().to_vec()),
            (keys::CREATE_TIMESTAMP.into(), time.clone()),
            (keys::ACCESS_TIMESTAMP.into(), time.clone()),
            (keys::MODIFY_TIMESTAMP.into(), time),
        ];
        if let Some((_, data_pool_id)) = data_pool {
            omap.push((
                keys::DATA_POOL_ID.into(),
                data_pool_id.to_le_bytes().to_vec(),
            ));
        }
        omap
    }

    /// Decodes a header's omap; every problem names its key (`object` names the header).
    pub fn decode(object: &str, omap: &BTreeMap<Vec<u8>, Vec<u8>>) -> Result<Header> {
        let malformed = |key: &str, reason: String| VolumeError::Malformed {
            object: object.to_string(),
            key: key.to_string(),
            reason,
        };
        let get = |key: &str| {
            omap.get(key.as_bytes())
                .ok_or_else(|| malformed(key, "missing".into()))
        };
        let u64_of = |key: &str| -> Result<(u64, Vec<u8>)> {
            let raw = get(key)?;
            let array: [u8; 8] = raw
                .as_slice()
                .try_into()
                .map_err(|_| malformed(key, format!("{} bytes, a u64 is 8", raw.len())))?;
            Ok((u64::from_le_bytes(array), raw.clone()))
        };
        let (size_bytes, size_raw) = u64_of(keys::SIZE)?;
        let order_raw = get(keys::ORDER)?;
        let order = match order_raw.as_slice() {
            [order] => *order,
            other => {
                return Err(malformed(
                    keys::ORDER,
                    format!("{} bytes, a u8 is 1", other.len()),
                ))
            }
        };
        if !(crate::ORDER_MIN..=crate::ORDER_MAX).contains(&order) {
            return Err(malformed(
                keys::ORDER,
                format!(
                    "{order} is outside {}..={}",
                    crate::ORDER_MIN,
                    crate::ORDER_MAX
                ),
            ));
        }
        let (features, _) = u64_of(keys::FEATURES)?;
        let object_prefix = decode_string(get(keys::OBJECT_PREFIX)?)
            .map_err(|reason| malformed(keys::OBJECT_PREFIX, reason))?;
        if object_prefix.is_empty() || object_prefix.contains('\0') {
            return Err(malformed(keys::OBJECT_PREFIX, "empty or with NUL".into()));
        }
        let (snap_seq, _) = u64_of(keys::SNAP_SEQ)?;
        let data_pool_id = if features & FEATURE_DATA_POOL == 0 {
            None
        } else {
            let (raw_id, _) = u64_of(keys::DATA_POOL_ID)?;
            Some(raw_id as i64)
        };
        let time_of = |key: &str| -> Result<Option<u64>> {
            match omap.get(key.as_bytes()) {
                None => Ok(None),
                Some(raw) => decode_time(raw)
                    .map(Some)
                    .map_err(|reason| malformed(key, reason)),
            }
        };
        let create_timestamp_ns = time_of(keys::CREATE_TIMESTAMP)?;
        let modify_timestamp_ns = time_of(keys::MODIFY_TIMESTAMP)?;
        let has_snapshots = omap
            .keys()
            .any(|key| key.starts_with(keys::SNAPSHOT_PREFIX.as_bytes()));
        let has_parent = omap.contains_key(keys::PARENT.as_bytes());
        Ok(Header {
            size_bytes,
            order,
            features,
            object_prefix,
            snap_seq,
            data_pool_id,
            create_timestamp_ns,
            modify_timestamp_ns,
            size_raw,
            has_snapshots,
            has_parent,
        })
    }

    /// Refuses what strata cannot serve: unknown features, snapshots, a parent.
    pub fn check_supported(&self, name: &str) -> Result<()> {
        let unsupported = self.features & !FEATURES_SUPPORTED;
        if unsupported != 0 {
            let mut names: Vec<String> = FEATURE_NAMES
                .iter()
                .filter(|(bit, _)| unsupported & bit != 0)
                .map(|(bit, feature)| format!("feature {feature} ({bit})"))
                .collect();
            let known: u64 = FEATURE_NAMES.iter().map(|(bit, _)| bit).sum();
            if unsupported & !known != 0 {
                names.push(format!("unknown feature bits {:#x}", unsupported & !known));
            }
            return Err(VolumeError::Unsupported {
                name: name.to_string(),
                what: names.join(", "),
            });
        }
        if self.has_parent {
            return Err(VolumeError::Unsupported {
                name: name.to_string(),
                what: "a parent image (it is a clone)".into(),
            });
        }
        if self.has_snapshots {
            return Err(VolumeError::Unsupported {
                name: name.to_string(),
                what: "snapshots".into(),
            });
        }
        Ok(())
    }

    /// Bytes per data object.
    pub fn object_size_bytes(&self) -> u64 {
        1 << self.order
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_are_cephs() {
        assert_eq!(encode_string("ab"), vec![2, 0, 0, 0, b'a', b'b']);
        assert_eq!(
            decode_string(&encode_string("rbd_data.x")).as_deref(),
            Ok("rbd_data.x")
        );
        assert!(decode_string(&[5, 0, 0, 0, b'a']).is_err());
        assert!(decode_string(&[1, 0]).is_err());
        let time = encode_time(3_000_000_007);
        assert_eq!(time, vec![3, 0, 0, 0, 7, 0, 0, 0]);
        assert_eq!(decode_time(&time), Ok(3_000_000_007));
        assert_eq!(
            data_object("rbd_data.abc", 0x1f),
            "rbd_data.abc.000000000000001f"
        );
    }

    #[test]
    fn new_headers_decode_and_bad_ones_name_their_key() {
        let omap: BTreeMap<_, _> = Header::encode_new(1 << 30, 22, "0123456789ab", 5, None)
            .into_iter()
            .collect();
        let header = Header::decode("h", &omap).expect("decodes");
        assert_eq!(header.size_bytes, 1 << 30);
        assert_eq!(header.object_prefix, "rbd_data.0123456789ab");
        assert!(header.check_supported("v").is_ok());
        for key in [
            keys::SIZE,
            keys::ORDER,
            keys::FEATURES,
            keys::OBJECT_PREFIX,
            keys::SNAP_SEQ,
        ] {
            let mut missing = omap.clone();
            missing.remove(key.as_bytes());
            let error = Header::decode("h", &missing).expect_err("missing key");
            assert!(error.to_string().contains(key), "{error}");
            let mut short = omap.clone();
            short.insert(key.as_bytes().to_vec(), vec![]);
            let error = Header::decode("h", &short).expect_err("short key");
            assert!(error.to_string().contains(key), "{error}");
        }
        let mut striped = omap.clone();
        striped.insert(keys::FEATURES.into(), 0x3du64.to_le_bytes().to_vec());
        let error = Header::decode("h", &striped)
            .unwrap()
            .check_supported("v")
            .expect_err("features");
        assert!(error.to_string().contains("object-map"), "{error}");
        assert!(error.to_string().contains("exclusive-lock"), "{error}");
    }

    #[test]
    fn a_data_pool_header_names_its_pool_and_prefixes_by_the_header_pool() {
        let omap: BTreeMap<_, _> = Header::encode_new(1 << 30, 22, "0123456789ab", 5, Some((3, 7)))
            .into_iter()
            .collect();
        let header = Header::decode("h", &omap).expect("decodes");
        assert_eq!(header.data_pool_id, Some(7));
        assert_eq!(header.features, FEATURE_LAYERING | FEATURE_DATA_POOL);
        assert_eq!(header.object_prefix, "rbd_data.3.0123456789ab");
        assert!(header.check_supported("v").is_ok());
        let mut missing = omap.clone();
        missing.remove(keys::DATA_POOL_ID.as_bytes());
        let error = Header::decode("h", &missing).expect_err("no data_pool_id");
        assert!(error.to_string().contains(keys::DATA_POOL_ID), "{error}");
    }
}
