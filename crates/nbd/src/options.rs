//! Pure parsers of handshake option data. They take any bytes a client sends and never panic
//! (property-tested below): a malformed option is `None`, answered with NBD_REP_ERR_INVALID.

/// Largest string (export name, context query) the protocol allows.
pub(crate) const STRING_BYTES_MAX: usize = 4096;

/// Splits NBD_OPT_INFO/GO data into (export name, information requests).
pub(crate) fn parse_info_request(data: &[u8]) -> Option<(&[u8], Vec<u16>)> {
    let (name, rest) = string(data)?;
    let count = u16::from_be_bytes(rest.get(0..2)?.try_into().ok()?) as usize;
    let list = rest.get(2..2 + 2 * count)?;
    if rest.len() != 2 + 2 * count {
        return None;
    }
    let requests = list
        .chunks_exact(2)
        .map(|pair| u16::from_be_bytes([pair[0], pair[1]]))
        .collect();
    Some((name, requests))
}

/// Splits NBD_OPT_LIST/SET_META_CONTEXT data into (export name, queries).
pub(crate) fn parse_meta_context_request(data: &[u8]) -> Option<(&[u8], Vec<&[u8]>)> {
    let (name, rest) = string(data)?;
    let count = u32::from_be_bytes(rest.get(0..4)?.try_into().ok()?) as usize;
    let mut rest = rest.get(4..)?;
    // Each query takes at least its 4-byte length: a count beyond that is a lie.
    if count > rest.len() / 4 {
        return None;
    }
    let mut queries = Vec::with_capacity(count);
    for _ in 0..count {
        let (query, after) = string(rest)?;
        queries.push(query);
        rest = after;
    }
    rest.is_empty().then_some((name, queries))
}

/// A length-prefixed (u32) string at the start of `data`, and what follows it.
fn string(data: &[u8]) -> Option<(&[u8], &[u8])> {
    let length = u32::from_be_bytes(data.get(0..4)?.try_into().ok()?) as usize;
    if length > STRING_BYTES_MAX {
        return None;
    }
    let text = data.get(4..4usize.checked_add(length)?)?;
    Some((text, &data[4 + length..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto;
    use proptest::prelude::*;

    fn encode_string(out: &mut Vec<u8>, text: &[u8]) {
        out.extend_from_slice(&(text.len() as u32).to_be_bytes());
        out.extend_from_slice(text);
    }

    #[test]
    fn parses_info_requests_and_rejects_truncated() {
        let mut data = Vec::new();
        encode_string(&mut data, b"abc");
        data.extend_from_slice(&2u16.to_be_bytes());
        data.extend_from_slice(&proto::INFO_NAME.to_be_bytes());
        data.extend_from_slice(&proto::INFO_BLOCK_SIZE.to_be_bytes());
        let (name, requests) = parse_info_request(&data).unwrap();
        assert_eq!(name, b"abc");
        assert_eq!(requests, vec![proto::INFO_NAME, proto::INFO_BLOCK_SIZE]);
        assert!(parse_info_request(&data[..data.len() - 1]).is_none());
        assert!(parse_info_request(&[0, 0, 0, 9]).is_none());
        data.push(0);
        assert!(parse_info_request(&data).is_none(), "trailing bytes");
    }

    #[test]
    fn parses_meta_context_requests() {
        let mut data = Vec::new();
        encode_string(&mut data, b"disk");
        data.extend_from_slice(&2u32.to_be_bytes());
        encode_string(&mut data, b"base:allocation");
        encode_string(&mut data, b"qemu:dirty-bitmap:x");
        let (name, queries) = parse_meta_context_request(&data).unwrap();
        assert_eq!(name, b"disk");
        assert_eq!(
            queries,
            vec![&b"base:allocation"[..], &b"qemu:dirty-bitmap:x"[..]]
        );
        assert!(parse_meta_context_request(&data[..data.len() - 1]).is_none());
        let mut lying = Vec::new();
        encode_string(&mut lying, b"");
        lying.extend_from_slice(&u32::MAX.to_be_bytes());
        assert!(parse_meta_context_request(&lying).is_none());
    }

    proptest! {
        /// Any bytes: an answer or `None`, never a panic.
        #[test]
        fn option_parsers_never_panic(data in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = parse_info_request(&data);
            let _ = parse_meta_context_request(&data);
        }

        /// Well-formed requests with arbitrary names and queries parse back to themselves.
        #[test]
        fn meta_context_requests_round_trip(
            name in proptest::collection::vec(any::<u8>(), 0..64),
            queries in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..8),
        ) {
            let mut data = Vec::new();
            encode_string(&mut data, &name);
            data.extend_from_slice(&(queries.len() as u32).to_be_bytes());
            for query in &queries {
                encode_string(&mut data, query);
            }
            let (parsed_name, parsed) = parse_meta_context_request(&data).unwrap();
            prop_assert_eq!(parsed_name, &name[..]);
            let expected: Vec<&[u8]> = queries.iter().map(Vec::as_slice).collect();
            prop_assert_eq!(parsed, expected);
        }
    }
}
