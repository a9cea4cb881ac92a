//! Omap keys as stored in Ceph: an order-preserving escape that keeps NUL out of them.
//!
//! librados' C API takes `start_after` and the filter prefix of `omap_get_vals2` as C strings,
//! so a key holding a NUL byte (the gateway's index keys do) cannot be paged after. Keys are
//! therefore stored escaped: `0x00` becomes `0x01 0x01`, `0x01` becomes `0x01 0x02`, every other
//! byte stays. The escape keeps byte order (`a < b` iff `escape(a) < escape(b)`) and prefixes
//! (`p` prefixes `k` iff `escape(p)` prefixes `escape(k)`), so paging and prefix filters work on
//! the escaped keys unchanged. Keys without `0x00`/`0x01` are stored as they are.

/// The escape byte.
const ESCAPE: u8 = 0x01;

/// `key` as stored: without NUL bytes, in the same order.
pub fn escape(key: &[u8]) -> Vec<u8> {
    if !key.iter().any(|&byte| byte <= ESCAPE) {
        return key.to_vec();
    }
    let mut stored = Vec::with_capacity(key.len() + 4);
    for &byte in key {
        match byte {
            0x00 => stored.extend_from_slice(&[ESCAPE, 0x01]),
            ESCAPE => stored.extend_from_slice(&[ESCAPE, 0x02]),
            other => stored.push(other),
        }
    }
    stored
}

/// The key a stored key stands for. A stored key that is not a valid escape (written by
/// another client) is returned as it is.
pub fn unescape(stored: &[u8]) -> Vec<u8> {
    if !stored.contains(&ESCAPE) {
        return stored.to_vec();
    }
    let mut key = Vec::with_capacity(stored.len());
    let mut bytes = stored.iter();
    while let Some(&byte) = bytes.next() {
        if byte != ESCAPE {
            key.push(byte);
            continue;
        }
        match bytes.next() {
            Some(0x01) => key.push(0x00),
            Some(0x02) => key.push(ESCAPE),
            _ => return stored.to_vec(),
        }
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_keys_hold_no_nul_and_round_trip() {
        for key in [
            &b""[..],
            b"plain",
            b"a\0b",
            b"\0",
            b"\x01",
            b"\x01\x00\x02",
            b"x\xff\0",
        ] {
            let stored = escape(key);
            assert!(!stored.contains(&0), "{key:?} -> {stored:?}");
            assert_eq!(unescape(&stored), key);
        }
        assert_eq!(escape(b"plain"), b"plain");
    }

    #[test]
    fn escape_keeps_order_and_prefixes() {
        let bytes = [0x00u8, 0x01, 0x02, b'a', 0xff];
        let mut keys = vec![Vec::new()];
        for first in bytes {
            keys.push(vec![first]);
            for second in bytes {
                keys.push(vec![first, second]);
                for third in bytes {
                    keys.push(vec![first, second, third]);
                }
            }
        }
        for a in &keys {
            for b in &keys {
                assert_eq!(a.cmp(b), escape(a).cmp(&escape(b)), "{a:?} {b:?}");
                assert_eq!(
                    b.starts_with(a),
                    escape(b).starts_with(&escape(a)),
                    "{a:?} {b:?}"
                );
            }
        }
    }
}
