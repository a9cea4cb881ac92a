//! rjenkins1 against every row of fixtures/crush-vectors/hash_rjenkins1.tsv.

use crush::hash::{crush_hash32, crush_hash32_2, crush_hash32_3, crush_hash32_4};

#[test]
fn rjenkins1_matches_every_fixture_row() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/crush-vectors/hash_rjenkins1.tsv"
    );
    let text = std::fs::read_to_string(path).expect("read hash fixture");
    let mut rows = 0;
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let v: Vec<u32> = line
            .split('\t')
            .map(|f| f.trim().parse().expect("u32 field"))
            .collect();
        assert_eq!(v.len(), 8, "row {line}");
        let (a, b, c, d) = (v[0], v[1], v[2], v[3]);
        assert_eq!(crush_hash32(a), v[4], "h1 {line}");
        assert_eq!(crush_hash32_2(a, b), v[5], "h2 {line}");
        assert_eq!(crush_hash32_3(a, b, c), v[6], "h3 {line}");
        assert_eq!(crush_hash32_4(a, b, c, d), v[7], "h4 {line}");
        rows += 1;
    }
    assert_eq!(rows, 1000);
}
