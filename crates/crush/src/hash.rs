//! rjenkins1: the only hash CRUSH defines (Ceph's src/crush/hash.c).
//!
//! Robert Jenkins' 96-bit mix, seeded as Ceph seeds it. Every function is pure and total: any
//! `u32` inputs give a `u32`. Bucket ids are negative `i32`; callers pass them as `id as u32`
//! (two's complement), as Ceph does.

/// Ceph's `crush_hash_seed`.
const SEED: u32 = 1_315_423_911;
/// The two constants Ceph mixes in alongside the inputs.
const X: u32 = 231_232;
const Y: u32 = 1232;

/// `CRUSH_HASH_RJENKINS1`, the hash id stored in buckets.
pub const CRUSH_HASH_RJENKINS1: u8 = 0;

/// Jenkins' mix of three words, in place (Ceph's `crush_hashmix`).
#[inline(always)]
fn mix(a: &mut u32, b: &mut u32, c: &mut u32) {
    // Three rounds; each round's shifts (right for a and c, left for b) differ.
    for (sa, sb, sc) in [(13, 8, 13), (12, 16, 5), (3, 10, 15)] {
        *a = a.wrapping_sub(*b).wrapping_sub(*c) ^ (*c >> sa);
        *b = b.wrapping_sub(*c).wrapping_sub(*a) ^ (*a << sb);
        *c = c.wrapping_sub(*a).wrapping_sub(*b) ^ (*b >> sc);
    }
}

/// Hash of one word.
#[inline]
pub fn crush_hash32(a: u32) -> u32 {
    let (mut a, mut b) = (a, a);
    let mut hash = SEED ^ a;
    let (mut x, mut y) = (X, Y);
    mix(&mut b, &mut x, &mut hash);
    mix(&mut y, &mut a, &mut hash);
    hash
}

/// Hash of two words.
#[inline]
pub fn crush_hash32_2(a: u32, b: u32) -> u32 {
    let (mut a, mut b) = (a, b);
    let mut hash = SEED ^ a ^ b;
    let (mut x, mut y) = (X, Y);
    mix(&mut a, &mut b, &mut hash);
    mix(&mut x, &mut a, &mut hash);
    mix(&mut b, &mut y, &mut hash);
    hash
}

/// Hash of three words.
#[inline]
pub fn crush_hash32_3(a: u32, b: u32, c: u32) -> u32 {
    let (mut a, mut b, mut c) = (a, b, c);
    let mut hash = SEED ^ a ^ b ^ c;
    let (mut x, mut y) = (X, Y);
    mix(&mut a, &mut b, &mut hash);
    mix(&mut c, &mut x, &mut hash);
    mix(&mut y, &mut a, &mut hash);
    mix(&mut b, &mut x, &mut hash);
    mix(&mut y, &mut c, &mut hash);
    hash
}

/// Hash of four words.
#[inline]
pub fn crush_hash32_4(a: u32, b: u32, c: u32, d: u32) -> u32 {
    let (mut a, mut b, mut c, mut d) = (a, b, c, d);
    let mut hash = SEED ^ a ^ b ^ c ^ d;
    let (mut x, mut y) = (X, Y);
    mix(&mut a, &mut b, &mut hash);
    mix(&mut c, &mut d, &mut hash);
    mix(&mut a, &mut x, &mut hash);
    mix(&mut y, &mut b, &mut hash);
    mix(&mut c, &mut x, &mut hash);
    mix(&mut y, &mut d, &mut hash);
    hash
}

/// Hash of five words.
#[inline]
pub fn crush_hash32_5(a: u32, b: u32, c: u32, d: u32, e: u32) -> u32 {
    let (mut a, mut b, mut c, mut d, mut e) = (a, b, c, d, e);
    let mut hash = SEED ^ a ^ b ^ c ^ d ^ e;
    let (mut x, mut y) = (X, Y);
    mix(&mut a, &mut b, &mut hash);
    mix(&mut c, &mut d, &mut hash);
    mix(&mut e, &mut x, &mut hash);
    mix(&mut y, &mut a, &mut hash);
    mix(&mut b, &mut x, &mut hash);
    mix(&mut y, &mut c, &mut hash);
    mix(&mut d, &mut x, &mut hash);
    mix(&mut y, &mut e, &mut hash);
    hash
}

/// [`mix`] on `N` independent lanes: the same arithmetic, written so the compiler vectorises it.
#[inline(always)]
fn mix_lanes<const N: usize>(a: &mut [u32; N], b: &mut [u32; N], c: &mut [u32; N]) {
    for (sa, sb, sc) in [(13, 8, 13), (12, 16, 5), (3, 10, 15)] {
        for i in 0..N {
            a[i] = a[i].wrapping_sub(b[i]).wrapping_sub(c[i]) ^ (c[i] >> sa);
        }
        for i in 0..N {
            b[i] = b[i].wrapping_sub(c[i]).wrapping_sub(a[i]) ^ (a[i] << sb);
        }
        for i in 0..N {
            c[i] = c[i].wrapping_sub(a[i]).wrapping_sub(b[i]) ^ (b[i] >> sc);
        }
    }
}

/// `crush_hash32_3(a, b[i], c)` for `N` values of `b` at once (straw2 hashes every item of a
/// bucket with the same input and rank; the lanes are independent, so this runs them side by
/// side instead of one long dependency chain after another).
#[inline]
pub fn crush_hash32_3_lanes<const N: usize>(a: u32, b: &[u32; N], c: u32) -> [u32; N] {
    let mut a = [a; N];
    let mut b = *b;
    let mut c = [c; N];
    let mut hash = [0_u32; N];
    for i in 0..N {
        hash[i] = SEED ^ a[i] ^ b[i] ^ c[i];
    }
    let mut x = [X; N];
    let mut y = [Y; N];
    mix_lanes(&mut a, &mut b, &mut hash);
    mix_lanes(&mut c, &mut x, &mut hash);
    mix_lanes(&mut y, &mut a, &mut hash);
    mix_lanes(&mut b, &mut x, &mut hash);
    mix_lanes(&mut y, &mut c, &mut hash);
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_fixture_row() {
        // Row `0 0 1390851128 4071050724` of fixtures/crush-vectors/hash_rjenkins1.tsv.
        assert_eq!(crush_hash32(0), 398_764_043);
        assert_eq!(crush_hash32_2(0, 0), 430_787_817);
        assert_eq!(crush_hash32_3(0, 0, 1_390_851_128), 3_135_690_386);
        assert_eq!(
            crush_hash32_4(0, 0, 1_390_851_128, 4_071_050_724),
            610_157_931
        );
    }

    #[test]
    fn lanes_equal_scalar() {
        let mut state = 0x1234_5678_u32;
        let mut next = || {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            state
        };
        for _ in 0..1000 {
            let (a, c) = (next(), next());
            let b: [u32; 8] = std::array::from_fn(|_| next());
            let lanes = crush_hash32_3_lanes(a, &b, c);
            for i in 0..8 {
                assert_eq!(lanes[i], crush_hash32_3(a, b[i], c));
            }
        }
    }
}
