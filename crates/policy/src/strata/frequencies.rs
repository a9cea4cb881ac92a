//! Long-term request counts for `strata`'s frequency gate, laid out so that one request touches
//! one cache line of each filter: the gate counts every request of the live cache, and with
//! filters of several megabytes (a cache of 300,000 objects) a probe per hash cost more than the
//! rest of the policy (W-TinyLFU's `CountingBloom`: 10 cache misses per request).

use crate::{mix64, Key};

/// Probes per key in a block (as Caffeine's count-min sketch: 4 counters in one 64-byte line).
const PROBES: u32 = 4;
/// Counters (`u8`) per block: one cache line.
const COUNTERS_PER_BLOCK: usize = 64;
/// Doorkeeper bits per block: one cache line.
const BITS_PER_BLOCK: usize = 512;

/// TinyLFU's counts: a doorkeeper bloom filter takes each key's first request of a period, so
/// that the one-hit wonders of a scan do not saturate the counters, and a counting filter takes
/// the later ones; [`Frequencies::decay`] halves the counts and empties the doorkeeper.
#[derive(Clone, Debug)]
pub(super) struct Frequencies {
    /// Doorkeeper: `BITS_PER_BLOCK`-bit blocks as `u64` words.
    doorkeeper: Vec<u64>,
    /// Saturating 8-bit counters in `COUNTERS_PER_BLOCK` blocks.
    counts: Vec<u8>,
}

impl Frequencies {
    /// Sized for `period` requests between halvings: about 10 doorkeeper bits per request of a
    /// period (1% false positives), and 16 counters per tenth of them (the capacity, unless the
    /// period is its floor).
    pub(super) fn new(period: u64) -> Self {
        let period = period.max(1) as usize;
        let doorkeeper_blocks = (period * 10).div_ceil(BITS_PER_BLOCK).max(1);
        let count_blocks = (period.div_ceil(10) * 16)
            .div_ceil(COUNTERS_PER_BLOCK)
            .max(1);
        Frequencies {
            doorkeeper: vec![0; doorkeeper_blocks * BITS_PER_BLOCK / 64],
            counts: vec![0; count_blocks * COUNTERS_PER_BLOCK],
        }
    }

    /// The block and the in-block offsets of `key` in a filter of `blocks` blocks of `width`.
    #[inline]
    fn probes(key: Key, seed: u64, blocks: usize, width: usize) -> (usize, [usize; 4]) {
        let hash = mix64(u64::from(key) ^ seed);
        let block = ((hash >> 32) % blocks as u64) as usize;
        let mut offsets = [0usize; PROBES as usize];
        for (i, offset) in offsets.iter_mut().enumerate() {
            *offset = ((hash >> (8 * i)) as usize) % width;
        }
        (block * width, offsets)
    }

    /// Marks `key` in the doorkeeper; returns whether it was there already.
    fn admit_to_doorkeeper(&mut self, key: Key) -> bool {
        let blocks = self.doorkeeper.len() * 64 / BITS_PER_BLOCK;
        let (base, offsets) = Self::probes(key, 0xD00E, blocks, BITS_PER_BLOCK);
        let mut present = true;
        for offset in offsets {
            let bit = base + offset;
            let mask = 1u64 << (bit % 64);
            present &= self.doorkeeper[bit / 64] & mask != 0;
            self.doorkeeper[bit / 64] |= mask;
        }
        present
    }

    fn in_doorkeeper(&self, key: Key) -> bool {
        let blocks = self.doorkeeper.len() * 64 / BITS_PER_BLOCK;
        let (base, offsets) = Self::probes(key, 0xD00E, blocks, BITS_PER_BLOCK);
        offsets.iter().all(|&offset| {
            let bit = base + offset;
            self.doorkeeper[bit / 64] & (1u64 << (bit % 64)) != 0
        })
    }

    fn counters(&self, key: Key) -> (usize, [usize; 4]) {
        let blocks = self.counts.len() / COUNTERS_PER_BLOCK;
        Self::probes(key, 0xC0DE, blocks, COUNTERS_PER_BLOCK)
    }

    /// Counts one request of `key`.
    pub(super) fn add(&mut self, key: Key) {
        if !self.admit_to_doorkeeper(key) {
            return;
        }
        let (base, offsets) = self.counters(key);
        // Conservative update: raise only the smallest counters, as a count-min sketch may.
        let least = offsets
            .iter()
            .map(|&o| self.counts[base + o])
            .min()
            .unwrap_or(0);
        for offset in offsets {
            let counter = &mut self.counts[base + offset];
            if *counter == least {
                *counter = counter.saturating_add(1);
            }
        }
    }

    /// Requests of `key` seen this period and (halved) before.
    pub(super) fn estimate(&self, key: Key) -> u32 {
        let (base, offsets) = self.counters(key);
        let count = offsets
            .iter()
            .map(|&o| self.counts[base + o])
            .min()
            .unwrap_or(0);
        u32::from(count) + u32::from(self.in_doorkeeper(key))
    }

    /// Halves every count and empties the doorkeeper: old popularity fades.
    pub(super) fn decay(&mut self) {
        for counter in &mut self.counts {
            *counter >>= 1;
        }
        self.doorkeeper.fill(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_repeats_not_first_requests_and_halves() {
        let mut frequencies = Frequencies::new(10_000);
        frequencies.add(7);
        assert_eq!(
            frequencies.estimate(7),
            1,
            "the doorkeeper holds the first request"
        );
        for _ in 0..6 {
            frequencies.add(7);
        }
        assert!(frequencies.estimate(7) >= 7);
        // Few false positives among 1,000 keys never added.
        let strangers = (1_000..2_000)
            .filter(|&k| frequencies.estimate(k) > 0)
            .count();
        assert!(strangers < 50, "{strangers}");
        frequencies.decay();
        let halved = frequencies.estimate(7);
        assert!((3..=4).contains(&halved), "{halved}");
    }
}
