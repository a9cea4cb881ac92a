//! Self-checking object contents shared by the crash writer (`src/bin`) and the kill test.
//! Not part of the library.
//!
//! Object `id` has `blocks(id)` blocks of `BLOCK_BYTES` (deliberately not a divisor of the
//! allocation unit, so updates are partial-unit read-modify-writes). Generation 0 writes every
//! block; generation `g >= 1` rewrites blocks `range(id, g)` with generation `g` and sets the
//! xattr `gen` and omap key `gen` to `g`, in one transaction. The content of an object at
//! generation `G` is therefore fully determined by `(id, G)`.

#![allow(dead_code)]

/// Bytes of one self-describing block.
pub const BLOCK_BYTES: usize = 1000;

/// Blocks of object `id`.
pub fn blocks(id: u64) -> usize {
    3 + (id % 10) as usize
}

fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// Blocks `[start, end)` rewritten by generation `generation` (all of them for 0).
pub fn range(id: u64, generation: u64) -> (usize, usize) {
    let count = blocks(id);
    if generation == 0 {
        return (0, count);
    }
    let h = mix(id.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ generation);
    let start = (h % count as u64) as usize;
    let end = start + 1 + ((h >> 32) % (count - start) as u64) as usize;
    (start, end)
}

/// Block `index` of object `id` written by `generation`.
pub fn block(id: u64, index: usize, generation: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(BLOCK_BYTES);
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(&(index as u32).to_le_bytes());
    out.extend_from_slice(&(generation as u32).to_le_bytes());
    let mut state = mix(id ^ ((index as u64) << 40) ^ (generation << 20));
    while out.len() < BLOCK_BYTES - 4 {
        state = mix(state);
        out.push(state as u8);
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The whole object at generation `generation`.
pub fn content(id: u64, generation: u64) -> Vec<u8> {
    let count = blocks(id);
    let mut latest = vec![0u64; count];
    for g in 1..=generation {
        let (start, end) = range(id, g);
        latest[start..end].fill(g);
    }
    latest
        .iter()
        .enumerate()
        .flat_map(|(index, &g)| block(id, index, g))
        .collect()
}

/// The bytes generation `generation` writes, and where.
pub fn update(id: u64, generation: u64) -> (u64, Vec<u8>) {
    let (start, end) = range(id, generation);
    let data = (start..end)
        .flat_map(|index| block(id, index, generation))
        .collect();
    ((start * BLOCK_BYTES) as u64, data)
}

/// Object name of `id`.
pub fn name(id: u64) -> String {
    format!("obj{id:012}")
}

/// Collection of `id`.
pub fn collection(id: u64) -> String {
    format!("1.{:x}", id % 8)
}
