//! Long-term request counts for `strata`'s frequency gate, laid out so that one request touches
//! one cache line: the gate counts every request of the live cache, and with filters of several
//! megabytes (a cache of 300,000 objects) a probe per hash cost more than the rest of the policy
//! (W-TinyLFU's `CountingBloom`: 10 cache misses per request; then one line per filter: 2).

use crate::sketch::Slots;
use crate::{mix64, Key};

/// Bytes per block: one cache line, 32 counters then 256 doorkeeper bits.
const BLOCK_BYTES: usize = 64;
/// Saturating 8-bit counters per block.
const COUNTERS: usize = 32;
/// Doorkeeper bits per block.
const DOORKEEPER_BITS: usize = 256;

/// TinyLFU's counts: a doorkeeper bloom filter takes each key's first request of a period, so
/// that the one-hit wonders of a scan do not saturate the counters, and a count-min sketch
/// (4 counters per key, conservative update) takes the later ones; [`Frequencies::decay`] halves
/// the counts and empties the doorkeeper. A key's counters and doorkeeper bits share one block.
#[derive(Clone, Debug)]
pub(super) struct Frequencies {
    /// Sparse when the period asks for far more blocks than the key space can touch (a cache
    /// far larger than its trace, or a long `epoch_min`): see [`Slots`].
    blocks: Slots<[u8; BLOCK_BYTES]>,
}

impl Frequencies {
    /// Sized for `period` requests between halvings: about 10 doorkeeper bits per request of a
    /// period (1% false positives) and 16 counters per tenth of them (the capacity, unless the
    /// period is its floor), whichever needs more blocks. About `key_space` keys are expected
    /// (each touches one block); it sizes memory only.
    pub(super) fn new(period: u64, key_space: usize) -> Self {
        let period = usize::try_from(period.max(1)).unwrap_or(usize::MAX);
        let for_doorkeeper = period.saturating_mul(10).div_ceil(DOORKEEPER_BITS);
        let for_counters = period.div_ceil(10).saturating_mul(16).div_ceil(COUNTERS);
        Frequencies {
            blocks: Slots::new(
                for_doorkeeper.max(for_counters).max(1),
                [0; BLOCK_BYTES],
                key_space,
            ),
        }
    }

    /// The block of `key`, its 4 counter offsets and its 4 doorkeeper bit offsets.
    #[inline]
    fn probes(&self, key: Key) -> (usize, [usize; 4], [usize; 4]) {
        let hash = mix64(u64::from(key) ^ 0xF2E0);
        let block = (mix64(hash) % self.blocks.len() as u64) as usize;
        let counters = [0, 1, 2, 3].map(|i| ((hash >> (5 * i)) as usize) % COUNTERS);
        let bits = [0, 1, 2, 3].map(|i| ((hash >> (20 + 8 * i)) as usize) % DOORKEEPER_BITS);
        (block, counters, bits)
    }

    /// Counts one request of `key`.
    pub(super) fn add(&mut self, key: Key) {
        let (block, counters, bits) = self.probes(key);
        let block = self.blocks.get_mut(block);
        let mut seen = true;
        for bit in bits {
            let (byte, mask) = (COUNTERS + bit / 8, 1u8 << (bit % 8));
            seen &= block[byte] & mask != 0;
            block[byte] |= mask;
        }
        if !seen {
            return;
        }
        // Conservative update: raise only the smallest counters, as a count-min sketch may.
        let least = counters.iter().map(|&c| block[c]).min().unwrap_or(0);
        for c in counters {
            if block[c] == least {
                block[c] = block[c].saturating_add(1);
            }
        }
    }

    /// Requests of `key` seen this period and (halved) before.
    pub(super) fn estimate(&self, key: Key) -> u32 {
        let (block, counters, bits) = self.probes(key);
        let block = self.blocks.get(block);
        let count = counters.iter().map(|&c| block[c]).min().unwrap_or(0);
        let seen = bits
            .iter()
            .all(|&bit| block[COUNTERS + bit / 8] & (1u8 << (bit % 8)) != 0);
        u32::from(count) + u32::from(seen)
    }

    /// Halves every count and empties the doorkeeper: old popularity fades.
    pub(super) fn decay(&mut self) {
        self.blocks.update_all(|block| {
            for counter in &mut block[..COUNTERS] {
                *counter >>= 1;
            }
            block[COUNTERS..].fill(0);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_repeats_not_first_requests_and_halves() {
        let mut frequencies = Frequencies::new(10_000, 2_000);
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
