//! The decoders never panic: fixture osdmaps with bytes overwritten, spliced or cut off must
//! decode or fail with an error (crc checking off, so the mutations reach the field parsers).

use osdmap::decode::{decode_with, CrcCheck};
use proptest::prelude::*;

const MAPS: &[&[u8]] = &[
    include_bytes!("../../../fixtures/crush-vectors/osdmap/om_c5x12_pool1_pg2048.bin"),
    include_bytes!("../../../fixtures/osdmap/om_states.bin"),
    include_bytes!("../../../fixtures/osdmap/om_ec.bin"),
    include_bytes!("../../../fixtures/osdmap/om_addrs.bin"),
    include_bytes!("../../../fixtures/osdmap/om_choose_args.bin"),
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn mutated_maps_never_panic(
        which in 0..MAPS.len(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let mut bytes = MAPS[which].to_vec();
        for (index, value) in edits {
            let i = index.index(bytes.len());
            bytes[i] = value;
        }
        let _ = decode_with(&bytes, CrcCheck::Skip);
        let _ = decode_with(&bytes, CrcCheck::Verify);
    }

    #[test]
    fn truncated_maps_never_panic(which in 0..MAPS.len(), cut in any::<prop::sample::Index>()) {
        let bytes = MAPS[which];
        let end = cut.index(bytes.len());
        prop_assert!(decode_with(&bytes[..end], CrcCheck::Skip).is_err());
    }

    #[test]
    fn spliced_maps_never_panic(
        which in 0..MAPS.len(),
        at in any::<prop::sample::Index>(),
        insert in proptest::collection::vec(any::<u8>(), 0..16),
        remove in 0_usize..16,
    ) {
        let mut bytes = MAPS[which].to_vec();
        let i = at.index(bytes.len());
        let j = (i + remove).min(bytes.len());
        bytes.splice(i..j, insert);
        let _ = decode_with(&bytes, CrcCheck::Skip);
    }

    #[test]
    fn arbitrary_json_never_panics(text in ".{0,200}") {
        let crush = include_bytes!("../../../fixtures/osdmap-json/om_states.crush.bin");
        let _ = osdmap::OsdMap::from_dump_json(&text, crush);
    }
}

#[test]
fn intact_maps_decode_and_bad_crc_is_reported() {
    for bytes in MAPS {
        assert!(decode_with(bytes, CrcCheck::Verify).is_ok());
    }
    let mut bytes = MAPS[0].to_vec();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    let error = decode_with(&bytes, CrcCheck::Verify)
        .err()
        .map(|e| e.to_string());
    assert!(error.is_some_and(|e| e.contains("crc")));
}

#[test]
fn errors_name_offset_and_field() {
    let bytes = &MAPS[0][..40];
    let error = decode_with(bytes, CrcCheck::Skip)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(error.contains("malformed osdmap at byte"), "{error}");
}
