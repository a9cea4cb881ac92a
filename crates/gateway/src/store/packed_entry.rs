//! The short index entry of a packed object (issue 39): the JSON [`ObjectEntry`] of a small
//! object repeats field names, its piece's size (the object's), its ETag in hex and an ACL
//! that follows from its canned name; in a pack that JSON is most of what the object costs in
//! metadata. A packed object's entry is stored instead as a binary record:
//!
//! `0x01` (JSON always starts with `{`), then size, ETag (16 bytes), mtime, owner, canned
//! ACL, grants (0: none recorded, 1: the canned ACL's with the owner as bucket owner),
//! headers, user metadata, pack object, offset. Integers are LEB128, strings are a length
//! and their bytes.
//!
//! It is used only for an entry that decodes back to itself exactly: one packed piece, a
//! plain MD5 ETag, and nothing this record has no room for (versions, parts, checksums,
//! tags, an upload, explicit grants, or any field added later). Anything else stays JSON,
//! and [`decode`] reads both, so entries written before this still decode.

use std::collections::BTreeMap;

use crate::layout::{ObjectEntry, Piece};

/// First byte of a short entry.
pub const MAGIC: u8 = 0x01;

/// Whether `bytes` hold a short entry.
pub fn is_short(bytes: &[u8]) -> bool {
    bytes.first() == Some(&MAGIC)
}

/// The short record of `entry`, or `None` when it has no short form.
pub fn encode(entry: &ObjectEntry) -> Option<Vec<u8>> {
    let [piece] = entry.pieces.as_slice() else {
        return None;
    };
    let offset = piece.pack_offset?;
    if piece.size != entry.size || entry.etag.len() != 32 {
        return None;
    }
    let etag = hex::decode(&entry.etag).ok()?;
    let grants = match &entry.grants {
        None => 0u8,
        Some(grants)
            if *grants == crate::acl::canned_grants(&entry.acl, &entry.owner, &entry.owner) =>
        {
            1
        }
        Some(_) => return None,
    };
    let mut out = Vec::with_capacity(96);
    out.push(MAGIC);
    put_number(&mut out, entry.size);
    out.extend_from_slice(&etag);
    put_number(&mut out, entry.mtime_ns);
    put_text(&mut out, &entry.owner);
    put_text(&mut out, &entry.acl);
    out.push(grants);
    put_map(&mut out, &entry.headers);
    put_map(&mut out, &entry.metadata);
    put_text(&mut out, &piece.oid);
    put_number(&mut out, offset);
    // Only what decodes back to the same entry (lower-case hex, no field left out).
    (decode(&out).as_ref() == Some(entry)).then_some(out)
}

/// The entry a short record holds; `None` when it is not one or is cut short.
pub fn decode(bytes: &[u8]) -> Option<ObjectEntry> {
    let mut reader = Reader(bytes.strip_prefix(&[MAGIC])?);
    let size = reader.number()?;
    let etag = hex::encode(reader.take(16)?);
    let mtime_ns = reader.number()?;
    let owner = reader.text()?;
    let acl = reader.text()?;
    let grants = match reader.take(1)?[0] {
        0 => None,
        1 => Some(crate::acl::canned_grants(&acl, &owner, &owner)),
        _ => return None,
    };
    let headers = reader.map()?;
    let metadata = reader.map()?;
    let oid = reader.text()?;
    let offset = reader.number()?;
    if !reader.0.is_empty() {
        return None;
    }
    Some(ObjectEntry {
        size,
        etag,
        mtime_ns,
        owner,
        acl,
        headers,
        metadata,
        pieces: vec![Piece {
            oid,
            size,
            pack_offset: Some(offset),
        }],
        grants,
        ..ObjectEntry::default()
    })
}

fn put_number(out: &mut Vec<u8>, mut value: u64) {
    loop {
        let low = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(low);
            return;
        }
        out.push(low | 0x80);
    }
}

fn put_text(out: &mut Vec<u8>, text: &str) {
    put_number(out, text.len() as u64);
    out.extend_from_slice(text.as_bytes());
}

fn put_map(out: &mut Vec<u8>, map: &BTreeMap<String, String>) {
    put_number(out, map.len() as u64);
    for (key, value) in map {
        put_text(out, key);
        put_text(out, value);
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, count: usize) -> Option<&'a [u8]> {
        if self.0.len() < count {
            return None;
        }
        let (head, rest) = self.0.split_at(count);
        self.0 = rest;
        Some(head)
    }

    fn number(&mut self) -> Option<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.take(1)?[0];
            value |= u64::from(byte & 0x7f).checked_shl(shift)?;
            if byte & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }

    fn text(&mut self) -> Option<String> {
        let length = usize::try_from(self.number()?).ok()?;
        String::from_utf8(self.take(length)?.to_vec()).ok()
    }

    fn map(&mut self) -> Option<BTreeMap<String, String>> {
        let count = self.number()?;
        let mut map = BTreeMap::new();
        for _ in 0..count {
            let key = self.text()?;
            map.insert(key, self.text()?);
        }
        Some(map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout;

    fn packed() -> ObjectEntry {
        ObjectEntry {
            size: 4096,
            etag: "0123456789abcdef0123456789abcdef".into(),
            mtime_ns: 1_796_000_000_123_456_789,
            owner: "tester".into(),
            acl: "private".into(),
            grants: Some(crate::acl::canned_grants("private", "tester", "tester")),
            headers: [(
                "content-type".to_string(),
                "binary/octet-stream".to_string(),
            )]
            .into(),
            pieces: vec![Piece {
                oid: "3f9a0c11d2e4b5a6_7c8d9e0f1a2b3c4d_pack.0".into(),
                size: 4096,
                pack_offset: Some(81_920),
            }],
            ..ObjectEntry::default()
        }
    }

    #[test]
    fn a_packed_entry_is_short_and_decodes_to_itself() {
        let entry = packed();
        let json = serde_json::to_vec(&entry).unwrap();
        let short = layout::encode(&entry);
        assert!(is_short(&short));
        assert!(
            short.len() * 2 < json.len(),
            "{} bytes against {} in JSON",
            short.len(),
            json.len()
        );
        assert_eq!(layout::decode::<ObjectEntry>(&short).unwrap(), entry);
        // A JSON entry written before (or by another gateway) still decodes.
        assert_eq!(layout::decode::<ObjectEntry>(&json).unwrap(), entry);
    }

    #[test]
    fn the_format_is_fixed() {
        // Byte for byte, so a change of the format shows here (stored entries must decode).
        let entry = ObjectEntry {
            size: 300,
            etag: "00112233445566778899aabbccddeeff".into(),
            mtime_ns: 5,
            owner: "o".into(),
            acl: "private".into(),
            grants: None,
            pieces: vec![Piece {
                oid: "p".into(),
                size: 300,
                pack_offset: Some(128),
            }],
            ..ObjectEntry::default()
        };
        let mut expected = vec![MAGIC, 0xac, 0x02];
        expected.extend(hex::decode("00112233445566778899aabbccddeeff").unwrap());
        expected.extend([5, 1, b'o', 7]);
        expected.extend(b"private");
        expected.extend([0, 0, 0, 1, b'p', 0x80, 0x01]);
        assert_eq!(encode(&entry).unwrap(), expected);
        assert_eq!(decode(&expected).unwrap(), entry);
    }

    #[test]
    fn entries_it_cannot_hold_stay_json() {
        let mut cases = Vec::new();
        let mut unpacked = packed();
        unpacked.pieces[0].pack_offset = None;
        cases.push(unpacked);
        let mut multipart = packed();
        multipart.etag = "0123456789abcdef0123456789abcdef-2".into();
        cases.push(multipart);
        let mut upper = packed();
        upper.etag = upper.etag.to_uppercase();
        cases.push(upper);
        let mut versioned = packed();
        versioned.version_id = Some("v1".into());
        cases.push(versioned);
        let mut checksum = packed();
        checksum.checksum_sha256 = Some("abc=".into());
        cases.push(checksum);
        let mut grants = packed();
        grants.grants = Some(Vec::new());
        cases.push(grants);
        for entry in cases {
            let bytes = layout::encode(&entry);
            assert_eq!(bytes.first(), Some(&b'{'), "{entry:?}");
            assert_eq!(layout::decode::<ObjectEntry>(&bytes).unwrap(), entry);
        }
    }

    #[test]
    fn a_cut_record_does_not_decode() {
        let short = encode(&packed()).unwrap();
        for length in 1..short.len() {
            assert!(decode(&short[..length]).is_none(), "cut at {length}");
        }
        assert!(layout::decode::<ObjectEntry>(&short[..short.len() - 1]).is_err());
    }
}
