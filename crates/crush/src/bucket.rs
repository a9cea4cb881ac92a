//! Bucket choice: given input `x` and replica rank `r`, pick one item of a bucket, per algorithm
//! (Ceph's `crush_bucket_choose` and the `bucket_*_choose` functions of src/crush/mapper.c).
//!
//! Pure functions of (bucket, x, r, choose_arg, position), except the uniform permutation cache
//! ([`PermWork`]), which only memoises a permutation that is itself a pure function of
//! (bucket, x). Callers guarantee `bucket.items` is non-empty; everything else tolerates maps
//! whose per-algorithm data is inconsistent (missing entries read as weight 0) so that a
//! malformed map can never make the mapper panic.

use crate::hash::{
    crush_hash32_2, crush_hash32_3, crush_hash32_3_lanes, crush_hash32_4, CRUSH_HASH_RJENKINS1,
};
use crate::ln::crush_ln;
use crate::map::{Bucket, BucketData, ChooseArg, ITEM_NONE};

/// Ceph's per-type hash dispatch: rjenkins1 is the only hash; any other code hashes to 0.
#[inline(always)]
fn hash3(hash: u8, a: u32, b: u32, c: u32) -> u32 {
    if hash == CRUSH_HASH_RJENKINS1 {
        crush_hash32_3(a, b, c)
    } else {
        0
    }
}

#[inline(always)]
fn hash4(hash: u8, a: u32, b: u32, c: u32, d: u32) -> u32 {
    if hash == CRUSH_HASH_RJENKINS1 {
        crush_hash32_4(a, b, c, d)
    } else {
        0
    }
}

/// Is device `item` rejected by its reweight (Ceph's `is_out`)? `weights` is 16.16 per device;
/// devices past its end are out; weights in (0, 1) keep a hash-chosen fraction of inputs.
#[inline]
pub fn is_out(weights: &[u32], item: i32, x: u32) -> bool {
    let Some(&weight) = usize::try_from(item).ok().and_then(|i| weights.get(i)) else {
        return true;
    };
    if weight >= 0x10000 {
        return false;
    }
    if weight == 0 {
        return true;
    }
    (crush_hash32_2(x, item as u32) & 0xffff) >= weight
}

/// Scratch of one bucket's uniform permutation (Ceph's `crush_work_bucket`). Valid only while
/// its `generation` equals the mapper's current one; a new generation plays the role of Ceph
/// re-initialising the workspace at each `crush_do_rule`.
#[derive(Debug, Clone, Default)]
pub struct PermWork {
    generation: u64,
    perm_x: u32,
    /// How many leading entries of `perm` are final; `ONLY_FIRST` after the r = 0 shortcut.
    perm_n: u32,
    perm: Vec<u32>,
}

/// Ceph's magic `perm_n` after the r = 0 shortcut: only `perm[0]` is known.
const ONLY_FIRST: u32 = 0xffff;

impl PermWork {
    /// Scratch for a bucket of `size` items.
    pub fn new(size: usize) -> Self {
        Self {
            generation: 0,
            perm_x: 0,
            perm_n: 0,
            perm: vec![0; size],
        }
    }
}

/// Pick from a random permutation of the bucket's items (Ceph's `bucket_perm_choose`): the
/// uniform algorithm, and the "local fallback" exhaustive search of firstn.
pub fn perm_choose(bucket: &Bucket, work: &mut PermWork, generation: u64, x: u32, r: u32) -> i32 {
    let size = bucket.items.len() as u32;
    if size == 0 {
        return ITEM_NONE;
    }
    if work.perm.len() != size as usize {
        work.perm.resize(size as usize, 0);
    }
    let pr = r % size;
    let bucket_id = bucket.id as u32;
    let fresh = work.generation != generation || work.perm_n == 0;
    if fresh || work.perm_x != x {
        work.generation = generation;
        work.perm_x = x;
        if pr == 0 {
            // The common r = 0 case needs only the first swap's outcome.
            let s = hash3(bucket.hash, x, bucket_id, 0) % size;
            work.perm[0] = s;
            work.perm_n = ONLY_FIRST;
            return item_at(bucket, s);
        }
        for (i, slot) in work.perm.iter_mut().enumerate() {
            *slot = i as u32;
        }
        work.perm_n = 0;
    } else if work.perm_n == ONLY_FIRST {
        // Expand the r = 0 shortcut into the real first swap.
        let first = work.perm[0];
        for (i, slot) in work.perm.iter_mut().enumerate().skip(1) {
            *slot = i as u32;
        }
        if let Some(slot) = work.perm.get_mut(first as usize) {
            *slot = 0;
        }
        work.perm_n = 1;
    }
    while work.perm_n <= pr {
        let p = work.perm_n;
        // No point in swapping the final entry.
        if p < size - 1 {
            let i = hash3(bucket.hash, x, bucket_id, p) % (size - p);
            if i != 0 {
                work.perm.swap(p as usize, (p + i) as usize);
            }
        }
        work.perm_n += 1;
    }
    let s = work.perm[pr as usize];
    item_at(bucket, s)
}

#[inline(always)]
fn item_at(bucket: &Bucket, index: u32) -> i32 {
    bucket
        .items
        .get(index as usize)
        .copied()
        .unwrap_or(bucket.items[0])
}

/// List: walk from the tail; keep item i with probability weight_i / sum_weights_i.
fn list_choose(bucket: &Bucket, item_weights: &[u32], sum_weights: &[u32], x: u32, r: u32) -> i32 {
    for (i, &item) in bucket.items.iter().enumerate().rev() {
        let draw = u64::from(hash4(bucket.hash, x, item as u32, r, bucket.id as u32) & 0xffff);
        let sum = u64::from(sum_weights.get(i).copied().unwrap_or(0));
        let scaled = (draw * sum) >> 16;
        if scaled < u64::from(item_weights.get(i).copied().unwrap_or(0)) {
            return item;
        }
    }
    bucket.items[0]
}

/// Tree: descend a binary tree of node weights; leaves sit at odd node indices.
fn tree_choose(bucket: &Bucket, num_nodes: u8, node_weights: &[u32], x: u32, r: u32) -> i32 {
    let weight_of = |n: u32| u64::from(node_weights.get(n as usize).copied().unwrap_or(0));
    let mut n = u32::from(num_nodes) >> 1;
    if n == 0 {
        return bucket.items[0];
    }
    while n & 1 == 0 {
        let half = 1_u32 << (n.trailing_zeros() - 1);
        let draw = u64::from(hash4(bucket.hash, x, n, r, bucket.id as u32));
        let t = (draw * weight_of(n)) >> 32;
        let left = n - half;
        n = if t < weight_of(left) { left } else { n + half };
    }
    item_at(bucket, n >> 1)
}

/// Straw (v1): longest straw wins; straws were scaled at build time.
fn straw_choose(bucket: &Bucket, straws: &[u32], x: u32, r: u32) -> i32 {
    let mut high = 0;
    let mut high_draw = 0_u64;
    for (i, &item) in bucket.items.iter().enumerate() {
        let draw = u64::from(hash3(bucket.hash, x, item as u32, r) & 0xffff)
            * u64::from(straws.get(i).copied().unwrap_or(0));
        if i == 0 || draw > high_draw {
            high = i;
            high_draw = draw;
        }
    }
    bucket.items[high]
}

/// Straw2's draw for one item: ln(u / 2^16) / weight, an exponential variable scaled by the
/// weight (Ceph's `generate_exponential_distribution`), truncated toward zero like C's `/`.
#[inline(always)]
fn straw2_draw(hash: u32, weight: u32) -> i64 {
    // ln(u / 2^16) in 2^44 fixed point: always <= 0.
    let ln = crush_ln(hash & 0xffff) as i64 - 0x1_0000_0000_0000;
    // Ceph divides by the weight as a C `int`: weights >= 2^31 turn negative.
    let divisor = weight as i32;
    if divisor <= 0 {
        return ln / i64::from(divisor);
    }
    // -ln < 2^49 and the divisor < 2^31 are exact in f64, so the correctly rounded quotient is
    // the true one or one above it; one integer check makes it exact, at a fraction of the cost
    // of a 64-bit integer division.
    // Signed conversions: one instruction each, unlike u64 <-> f64 without AVX-512.
    let numerator = -ln;
    let divisor = i64::from(divisor);
    let mut quotient = (numerator as f64 / divisor as f64) as i64;
    if quotient * divisor > numerator {
        quotient -= 1;
    }
    -quotient
}

/// Items hashed side by side in [`straw2_choose`].
const LANES: usize = 8;

/// Straw2: each item draws ln(u)/weight (an exponential variable); the largest draw wins, the
/// first on ties. `arg` may replace the weights (a weight set, by `position`, clamped to its
/// last entry) and the ids that are hashed; the returned item is always the bucket's own.
fn straw2_choose(
    bucket: &Bucket,
    item_weights: &[u32],
    x: u32,
    r: u32,
    arg: Option<&ChooseArg>,
    position: usize,
) -> i32 {
    let weights = match arg {
        Some(arg) if !arg.weight_set.is_empty() => {
            let position = position.min(arg.weight_set.len() - 1);
            &arg.weight_set[position][..]
        }
        _ => item_weights,
    };
    let ids = match arg {
        Some(arg) if !arg.ids.is_empty() => &arg.ids[..],
        _ => &bucket.items[..],
    };
    let size = bucket.items.len();
    let mut high = 0;
    let mut high_draw = 0_i64;
    let mut base = 0;
    while base < size {
        let lanes = (size - base).min(LANES);
        let mut lane_ids = [0_u32; LANES];
        for (k, slot) in lane_ids.iter_mut().enumerate().take(lanes) {
            *slot = ids.get(base + k).copied().unwrap_or(bucket.items[base + k]) as u32;
        }
        let mut hashes = [0_u32; LANES];
        if bucket.hash == CRUSH_HASH_RJENKINS1 {
            if lanes <= 2 {
                // Too few items to pay for the lanes.
                for (hash, &id) in hashes.iter_mut().zip(&lane_ids).take(lanes) {
                    *hash = crush_hash32_3(x, id, r);
                }
            } else {
                hashes = crush_hash32_3_lanes(x, &lane_ids, r);
            }
        }
        for (k, &hash) in hashes.iter().enumerate().take(lanes) {
            let i = base + k;
            let weight = weights.get(i).copied().unwrap_or(0);
            let draw = if weight != 0 {
                straw2_draw(hash, weight)
            } else {
                i64::MIN
            };
            if i == 0 || draw > high_draw {
                high = i;
                high_draw = draw;
            }
        }
        base += LANES;
    }
    bucket.items[high]
}

/// Pick one item of `bucket` for input `x`, rank `r` (Ceph's `crush_bucket_choose`).
/// `arg`/`position` only matter for straw2. The bucket must not be empty.
#[inline]
pub fn choose(
    bucket: &Bucket,
    work: &mut PermWork,
    generation: u64,
    x: u32,
    r: u32,
    arg: Option<&ChooseArg>,
    position: usize,
) -> i32 {
    if bucket.items.is_empty() {
        // Ceph BUG()s here; the mapper never asks. An item no map holds keeps us total.
        return ITEM_NONE;
    }
    if bucket.items.len() == 1 {
        // Every algorithm picks the only item whatever it draws (single-child roots and racks
        // are common), so skip the hashing.
        return bucket.items[0];
    }
    match &bucket.data {
        BucketData::Uniform { .. } => perm_choose(bucket, work, generation, x, r),
        BucketData::List {
            item_weights,
            sum_weights,
        } => list_choose(bucket, item_weights, sum_weights, x, r),
        BucketData::Tree {
            num_nodes,
            node_weights,
        } => tree_choose(bucket, *num_nodes, node_weights, x, r),
        BucketData::Straw { straws, .. } => straw_choose(bucket, straws, x, r),
        BucketData::Straw2 { item_weights } => {
            straw2_choose(bucket, item_weights, x, r, arg, position)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::map::BucketAlgorithm;

    fn uniform(id: i32, size: i32) -> Bucket {
        Bucket {
            id,
            type_id: 1,
            algorithm: BucketAlgorithm::Uniform,
            hash: 0,
            weight: 0x10000 * size as u32,
            items: (0..size).collect(),
            data: BucketData::Uniform {
                item_weight: 0x10000,
            },
        }
    }

    /// The permutation must not depend on the order ranks are asked for (the cache is only a
    /// memo): compare against a fresh workspace per query.
    #[test]
    fn perm_choose_is_order_independent() {
        let bucket = uniform(-3, 7);
        for x in 0..200 {
            let mut shared = PermWork::new(7);
            let mut seen = Vec::new();
            for r in [0_u32, 3, 1, 6, 2, 5, 4, 9] {
                let mut fresh = PermWork::new(7);
                let expected = perm_choose(&bucket, &mut fresh, 1, x, r);
                assert_eq!(perm_choose(&bucket, &mut shared, 1, x, r), expected);
                if r < 7 {
                    seen.push(expected);
                }
            }
            seen.sort_unstable();
            assert_eq!(seen, (0..7).collect::<Vec<_>>(), "a permutation for x={x}");
        }
    }

    /// First pick of a uniform bucket is h3(x, id, 0) % size (see the fixture README).
    #[test]
    fn uniform_first_pick() {
        let bucket = uniform(-2, 16);
        let mut work = PermWork::new(16);
        for x in 0..100 {
            let expected = (crush_hash32_3(x, (-2_i32) as u32, 0) % 16) as i32;
            assert_eq!(choose(&bucket, &mut work, 1, x, 0, None, 0), expected);
        }
    }

    /// The f64 shortcut of [`straw2_draw`] equals C's truncating `int64 / int`, for every hash
    /// and a spread of weights (small, odd, near powers of two, the int limits).
    #[test]
    fn straw2_draw_divides_exactly() {
        let mut weights: Vec<u32> = vec![1, 2, 3, 7, 0x10000, 0xffff, 0x10001, 0x7fff_ffff];
        weights.extend([0x8000_0000, 0xffff_ffff, 0x1_5555, 12 * 0x10000, 0x2a_aaab]);
        let mut state = 0x9e37_79b9_u32;
        for _ in 0..64 {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            weights.push(state >> (state % 24));
        }
        for &weight in &weights {
            for u in 0..=0xffff_u32 {
                let ln = crush_ln(u) as i64 - 0x1_0000_0000_0000;
                let expected = ln / i64::from(weight as i32);
                assert_eq!(straw2_draw(u, weight), expected, "u={u} weight={weight:#x}");
            }
        }
    }

    #[test]
    fn is_out_semantics() {
        let weights = [0x10000, 0, 0x8000];
        assert!(!is_out(&weights, 0, 7));
        assert!(is_out(&weights, 1, 7));
        assert!(is_out(&weights, 3, 7));
        let kept = (0..10_000).filter(|&x| !is_out(&weights, 2, x)).count();
        assert!((4_000..6_000).contains(&kept), "half kept, got {kept}");
    }
}
