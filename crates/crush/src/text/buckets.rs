//! Bucket construction as Ceph's `src/crush/builder.c` does it: `crush_make_bucket` (all items
//! at once, what the compiler uses) and `crush_bucket_add_item` (one item at a time, what the
//! device-class shadow trees are grown with), including `crush_calc_straw` for both
//! `straw_calc_version`s and the tree-bucket node weights.
//!
//! Everything here is pure and returns the same numbers Ceph stores in the binary map. Where
//! Ceph would crash or write garbage we return a [`BuildError`] instead:
//! * a uniform bucket whose items weigh 0 (Ceph: `ceph_assert(b)` in `add_bucket`);
//! * a tree bucket of more than 64 items (Ceph's `num_nodes` is 8 bits and overflows);
//! * Ceph grows tree buckets with `realloc` and leaves the new node slots uninitialised, so the
//!   shadow copy of a tree bucket can hold heap garbage in Ceph; we zero them, which gives the
//!   node weights `crush_make_tree_bucket` would compute.

use super::lexer::double_to_u32;
use crate::map::{Bucket, BucketAlgorithm, BucketData};

/// Why a bucket could not be built or grown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildError {
    /// The 32-bit weight sum would overflow (Ceph: `-ERANGE`).
    WeightOverflow,
    /// A uniform bucket item whose weight differs from the bucket's (Ceph: `-EINVAL`).
    UniformWeightMismatch,
    /// A non-empty uniform bucket with weight 0 (Ceph asserts).
    UniformZeroWeight,
    /// A tree bucket with more than [`TREE_ITEMS_MAX`] items.
    TreeTooLarge,
}

/// The most items a tree bucket can hold before Ceph's 8-bit `num_nodes` overflows.
pub const TREE_ITEMS_MAX: usize = 64;

/// `crush_addition_is_unsafe`.
fn checked_add(a: u32, b: u32) -> Result<u32, BuildError> {
    a.checked_add(b).ok_or(BuildError::WeightOverflow)
}

/// `calc_depth`: the depth of the smallest tree with `size` leaves.
fn tree_depth(size: usize) -> u32 {
    if size == 0 {
        return 0;
    }
    let mut depth = 1;
    let mut rest = size - 1;
    while rest != 0 {
        rest >>= 1;
        depth += 1;
    }
    depth
}

/// The tree node label of leaf `index` (`crush_calc_tree_node`).
pub fn tree_leaf_node(index: usize) -> usize {
    2 * index + 1
}

/// `height`: trailing zero bits of a node label.
fn tree_height(node: usize) -> u32 {
    node.trailing_zeros()
}

/// `parent`: the label of a node's parent.
fn tree_parent(node: usize) -> usize {
    let height = tree_height(node);
    if node & (1 << (height + 1)) != 0 {
        node - (1 << height)
    } else {
        node + (1 << height)
    }
}

/// Add `weight` to every node on the path from `node` up to the root of a depth-`depth` tree.
fn tree_add_to_ancestors(
    node_weights: &mut [u32],
    mut node: usize,
    depth: u32,
    weight: u32,
) -> Result<(), BuildError> {
    for _ in 1..depth {
        node = tree_parent(node);
        let slot = node_weights.get_mut(node).ok_or(BuildError::TreeTooLarge)?;
        *slot = checked_add(*slot, weight)?;
    }
    Ok(())
}

/// `num_nodes` and the node weights of a tree bucket (`crush_make_tree_bucket`).
pub fn tree_node_weights(weights: &[u32]) -> Result<(u8, Vec<u32>), BuildError> {
    if weights.len() > TREE_ITEMS_MAX {
        return Err(BuildError::TreeTooLarge);
    }
    let depth = tree_depth(weights.len());
    if depth == 0 {
        return Ok((0, Vec::new()));
    }
    let num_nodes = 1_usize << depth;
    let mut node_weights = vec![0_u32; num_nodes];
    for (index, &weight) in weights.iter().enumerate() {
        let node = tree_leaf_node(index);
        if let Some(slot) = node_weights.get_mut(node) {
            *slot = weight;
        }
        tree_add_to_ancestors(&mut node_weights, node, depth, weight)?;
    }
    let num_nodes = u8::try_from(num_nodes).map_err(|_| BuildError::TreeTooLarge)?;
    Ok((num_nodes, node_weights))
}

/// `crush_calc_straw`: the straw lengths of a straw (v1) bucket for `straw_calc_version`
/// 0 (the original, buggy with repeated weights) or >= 1.
pub fn calc_straws(weights: &[u32], straw_calc_version: u8) -> Vec<u32> {
    let size = weights.len();
    let weight_at = |i: usize| weights.get(i).copied().unwrap_or(0);
    // Indices sorted by ascending weight, ties in insertion order (Ceph's insertion sort).
    let mut reverse: Vec<usize> = Vec::with_capacity(size);
    for i in 0..size {
        let at = reverse
            .iter()
            .position(|&j| weight_at(i) < weight_at(j))
            .unwrap_or(reverse.len());
        reverse.insert(at, i);
    }
    let sorted = |k: usize| weight_at(reverse.get(k).copied().unwrap_or(0));
    let mut straws = vec![0_u32; size];
    let mut set_straw = |k: usize, value: u32| {
        if let Some(slot) = reverse.get(k).and_then(|&i| straws.get_mut(i)) {
            *slot = value;
        }
    };
    let mut numleft = size as i64;
    let mut straw = 1.0_f64;
    let mut wbelow = 0.0_f64;
    let mut lastw = 0.0_f64;
    let mut i = 0;
    while i < size {
        if straw_calc_version == 0 {
            if sorted(i) == 0 {
                set_straw(i, 0);
                i += 1;
                continue;
            }
            set_straw(i, double_to_u32(straw * 65536.0));
            i += 1;
            if i == size {
                break;
            }
            if sorted(i) == sorted(i - 1) {
                continue;
            }
            wbelow += (f64::from(sorted(i - 1)) - lastw) * numleft as f64;
            for j in i..size {
                if sorted(j) == sorted(i) {
                    numleft -= 1;
                } else {
                    break;
                }
            }
        } else {
            if sorted(i) == 0 {
                set_straw(i, 0);
                i += 1;
                numleft -= 1;
                continue;
            }
            set_straw(i, double_to_u32(straw * 65536.0));
            i += 1;
            if i == size {
                break;
            }
            wbelow += (f64::from(sorted(i - 1)) - lastw) * numleft as f64;
            numleft -= 1;
        }
        // `numleft * (w[i] - w[i-1])` is an unsigned 32-bit product in C.
        let wnext = f64::from((numleft as u32).wrapping_mul(sorted(i).wrapping_sub(sorted(i - 1))));
        let pbelow = wbelow / (wbelow + wnext);
        straw *= (1.0 / pbelow).powf(1.0 / numleft as f64);
        lastw = f64::from(sorted(i - 1));
    }
    straws
}

/// `crush_make_bucket`: a bucket holding `items` with `weights` (same length), id 0 (the caller
/// assigns it).
pub fn make_bucket(
    algorithm: BucketAlgorithm,
    hash: u8,
    type_id: u16,
    items: &[i32],
    weights: &[u32],
    straw_calc_version: u8,
) -> Result<Bucket, BuildError> {
    let size = items.len();
    let (weight, data) = match algorithm {
        BucketAlgorithm::Uniform => {
            let item_weight = weights.first().copied().unwrap_or(0);
            if size > 0 && item_weight == 0 {
                return Err(BuildError::UniformZeroWeight);
            }
            let total = u32::try_from(size)
                .ok()
                .and_then(|n| n.checked_mul(item_weight))
                .ok_or(BuildError::WeightOverflow)?;
            (total, BucketData::Uniform { item_weight })
        }
        BucketAlgorithm::List => {
            let mut sum = 0_u32;
            let mut sum_weights = Vec::with_capacity(size);
            for &weight in weights {
                sum = checked_add(sum, weight)?;
                sum_weights.push(sum);
            }
            (
                sum,
                BucketData::List {
                    item_weights: weights.to_vec(),
                    sum_weights,
                },
            )
        }
        BucketAlgorithm::Tree => {
            let mut sum = 0_u32;
            for &weight in weights {
                sum = checked_add(sum, weight)?;
            }
            let (num_nodes, node_weights) = tree_node_weights(weights)?;
            (
                sum,
                BucketData::Tree {
                    num_nodes,
                    node_weights,
                },
            )
        }
        BucketAlgorithm::Straw => (
            weights.iter().fold(0_u32, |a, &w| a.wrapping_add(w)),
            BucketData::Straw {
                item_weights: weights.to_vec(),
                straws: calc_straws(weights, straw_calc_version),
            },
        ),
        BucketAlgorithm::Straw2 => (
            weights.iter().fold(0_u32, |a, &w| a.wrapping_add(w)),
            BucketData::Straw2 {
                item_weights: weights.to_vec(),
            },
        ),
    };
    Ok(Bucket {
        id: 0,
        type_id,
        algorithm,
        hash,
        weight,
        items: items.to_vec(),
        data,
    })
}

/// `crush_bucket_add_item`: append `item` with `weight`, keeping the algorithm's data in step.
pub fn add_item(
    bucket: &mut Bucket,
    item: i32,
    weight: u32,
    straw_calc_version: u8,
) -> Result<(), BuildError> {
    let new_size = bucket.items.len() + 1;
    match &mut bucket.data {
        BucketData::Uniform { item_weight } => {
            if *item_weight != weight {
                return Err(BuildError::UniformWeightMismatch);
            }
            bucket.weight = checked_add(bucket.weight, weight)?;
        }
        BucketData::List {
            item_weights,
            sum_weights,
        } => {
            let previous = sum_weights.last().copied().unwrap_or(0);
            let sum = checked_add(previous, weight)?;
            item_weights.push(weight);
            sum_weights.push(sum);
            bucket.weight = bucket.weight.wrapping_add(weight);
        }
        BucketData::Tree {
            num_nodes,
            node_weights,
        } => {
            if new_size > TREE_ITEMS_MAX {
                return Err(BuildError::TreeTooLarge);
            }
            let depth = tree_depth(new_size);
            let nodes = 1_usize << depth;
            node_weights.resize(nodes, 0);
            let node = tree_leaf_node(new_size - 1);
            if let Some(slot) = node_weights.get_mut(node) {
                *slot = weight;
            }
            let root = nodes / 2;
            if depth >= 2 && node - 1 == root {
                let left = node_weights.get(root / 2).copied().unwrap_or(0);
                if let Some(slot) = node_weights.get_mut(root) {
                    *slot = left;
                }
            }
            tree_add_to_ancestors(node_weights, node, depth, weight)?;
            *num_nodes = u8::try_from(nodes).map_err(|_| BuildError::TreeTooLarge)?;
            bucket.weight = checked_add(bucket.weight, weight)?;
        }
        BucketData::Straw {
            item_weights,
            straws,
        } => {
            bucket.weight = checked_add(bucket.weight, weight)?;
            item_weights.push(weight);
            *straws = calc_straws(item_weights, straw_calc_version);
        }
        BucketData::Straw2 { item_weights } => {
            bucket.weight = checked_add(bucket.weight, weight)?;
            item_weights.push(weight);
        }
    }
    bucket.items.push(item);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_weights_match_ceph() {
        // From fixtures/crush-vectors/algs_mixed_scv0.bin, bucket h_tree2 (-4).
        let weights = [98304, 131072, 196608, 32768, 65536];
        let (num_nodes, nodes) = tree_node_weights(&weights).expect("builds");
        assert_eq!(num_nodes, 16);
        assert_eq!(
            nodes,
            [
                0, 98304, 229376, 131072, 458752, 196608, 229376, 32768, 524288, 65536, 65536, 0,
                65536, 0, 0, 0
            ]
        );
        let mut grown = make_bucket(BucketAlgorithm::Tree, 0, 1, &[], &[], 0).expect("empty");
        for (item, &weight) in weights.iter().enumerate() {
            add_item(&mut grown, item as i32, weight, 0).expect("grows");
        }
        assert_eq!(
            grown.data,
            BucketData::Tree {
                num_nodes: 16,
                node_weights: nodes
            }
        );
        assert_eq!(grown.weight, 524288);
    }

    #[test]
    fn straws_match_ceph_for_both_versions() {
        // algs_mixed_scv0.bin h_straw3 (-5) and h_straw5 (-7) straws.
        let weights = [131072, 196608, 32768, 65536, 98304];
        assert_eq!(
            calc_straws(&weights, 0),
            [90243, 103135, 65536, 75909, 83549]
        );
        // The root: one 5.0 and five 8.0 items, where version 0 and 1 differ.
        let root = [327680, 524288, 524288, 524288, 524288, 524288];
        assert_eq!(
            calc_straws(&root, 0),
            [65536, 72089, 72089, 72089, 72089, 72089]
        );
    }

    #[test]
    fn uniform_rules_follow_ceph() {
        assert_eq!(
            make_bucket(BucketAlgorithm::Uniform, 0, 1, &[0], &[0], 0),
            Err(BuildError::UniformZeroWeight)
        );
        let mut empty = make_bucket(BucketAlgorithm::Uniform, 0, 1, &[], &[], 0).expect("empty");
        assert_eq!(
            add_item(&mut empty, 3, 0x10000, 0),
            Err(BuildError::UniformWeightMismatch)
        );
        assert_eq!(add_item(&mut empty, -3, 0, 0), Ok(()));
    }
}
