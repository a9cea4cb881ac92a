//! Frequency sketches and membership filters shared by W-TinyLFU, the admission filters and
//! Ceph's bloom hit sets, and the slot storage ([`Slots`]) they and `strata`'s gate share.
//!
//! Sketches are sized from the cache's capacity. A capacity far above the keys a trace can
//! request (a 4-billion-object cache over 2,000 objects) would make them allocate per requested
//! object, not per object seen; [`Slots`] then keeps only the slots written, so the sketch
//! behaves exactly as the full-size one (same length, same hashes, same counts) in memory
//! proportional to the keys.

use crate::mix64;
use std::collections::BTreeMap;

/// Dense storage beyond this many bytes is considered for sparse storage.
const DENSE_BYTES_MAX: usize = 1 << 20;
/// Sparse storage when the array is this many times longer than the slots the expected keys
/// can write: a sparse slot costs about 5 x a dense one (key, value, tree overhead).
const SPARSE_FACTOR: usize = 8;

/// A fixed-length array of `T` slots, all `zero` until written. Dense (a `Vec`) unless it is
/// both large and far longer than the slots its keys can write; then sparse (a `BTreeMap` of
/// the written slots: deterministic, no hasher seed). Either way it reads and writes the same
/// values at the same indices.
#[derive(Clone, Debug)]
pub(crate) enum Slots<T> {
    Dense(Vec<T>),
    Sparse {
        len: usize,
        zero: T,
        written: BTreeMap<usize, T>,
    },
}

impl<T: Copy + PartialEq> Slots<T> {
    /// `len` slots holding `zero`, of which the expected keys can write at most `writable`.
    pub(crate) fn new(len: usize, zero: T, writable: usize) -> Self {
        let bytes = len.saturating_mul(std::mem::size_of::<T>());
        if bytes > DENSE_BYTES_MAX && len / SPARSE_FACTOR > writable {
            Slots::Sparse {
                len,
                zero,
                written: BTreeMap::new(),
            }
        } else {
            Slots::Dense(vec![zero; len])
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            Slots::Dense(slots) => slots.len(),
            Slots::Sparse { len, .. } => *len,
        }
    }

    #[inline]
    pub(crate) fn get(&self, index: usize) -> T {
        match self {
            Slots::Dense(slots) => slots[index],
            Slots::Sparse { written, zero, .. } => written.get(&index).copied().unwrap_or(*zero),
        }
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, index: usize) -> &mut T {
        match self {
            Slots::Dense(slots) => &mut slots[index],
            Slots::Sparse { len, zero, written } => {
                assert!(index < *len, "slot {index} of {len}");
                written.entry(index).or_insert(*zero)
            }
        }
    }

    /// Applies `update` to every slot. `update` must map `zero` to `zero` (the unwritten slots
    /// of a sparse array are not visited); written slots back at `zero` are forgotten.
    pub(crate) fn update_all(&mut self, mut update: impl FnMut(&mut T)) {
        match self {
            Slots::Dense(slots) => slots.iter_mut().for_each(update),
            Slots::Sparse { written, zero, .. } => {
                written.values_mut().for_each(&mut update);
                written.retain(|_, slot| slot != zero);
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn is_sparse(&self) -> bool {
        matches!(self, Slots::Sparse { .. })
    }
}

/// Counting bloom filter sized for `entries` at false-positive rate `error`
/// (counters = entries * -ln(error)/ln(2)^2, hashes = ceil(ln 2 * counters per entry)),
/// with double hashing and halving decay: the frequency estimator of W-TinyLFU.
#[derive(Clone, Debug)]
pub(crate) struct CountingBloom {
    counters: Slots<u32>,
    hashes: u32,
    /// The counters' count as a [`FastRemainder`] divisor.
    remainder: FastRemainder,
}

/// `x % divisor` for 32-bit `x` by two multiplications instead of a division (Lemire, Kaser and
/// Kurz, "Faster Remainder by Direct Computation", 2019): exact for every 32-bit `x` and
/// non-zero divisor, so a sketch indexes the same slots as with `%`, about ten times faster (a
/// W-TinyLFU request makes up to forty of them).
#[derive(Clone, Copy, Debug)]
pub(crate) struct FastRemainder {
    divisor: u32,
    magic: u64,
}

impl FastRemainder {
    /// For a non-zero `divisor`.
    pub(crate) fn new(divisor: u32) -> Self {
        assert!(divisor > 0, "remainder by zero");
        FastRemainder {
            divisor,
            magic: (u64::MAX / u64::from(divisor)).wrapping_add(1),
        }
    }

    /// `x % divisor`.
    #[inline]
    pub(crate) fn of(self, x: u32) -> u32 {
        let low = self.magic.wrapping_mul(u64::from(x));
        ((u128::from(low) * u128::from(self.divisor)) >> 64) as u32
    }
}

impl CountingBloom {
    /// Sized for `entries`; `key_space` keys are expected (more still work, in more memory
    /// when the filter is sparse).
    pub(crate) fn new(entries: usize, error: f64, key_space: usize) -> Self {
        let per_entry = -error.ln() / (std::f64::consts::LN_2 * std::f64::consts::LN_2);
        let hashes = (std::f64::consts::LN_2 * per_entry).ceil() as u32;
        let count = ((per_entry * entries as f64).ceil() as usize).max(2 * hashes as usize);
        let counters = Slots::new(count, 0, key_space.saturating_mul(hashes as usize));
        CountingBloom {
            remainder: FastRemainder::new(counters.len() as u32),
            counters,
            hashes,
        }
    }

    #[inline]
    fn slots(&self, key: u64) -> impl Iterator<Item = usize> + '_ {
        let a = mix64(key ^ 0x5151_5151) as u32;
        let b = mix64(key ^ 0xA3A3_0000_A3A3) as u32;
        let remainder = self.remainder;
        (0..self.hashes).map(move |i| remainder.of(a.wrapping_add(i.wrapping_mul(b))) as usize)
    }

    pub(crate) fn estimate(&self, key: u64) -> u32 {
        self.slots(key)
            .map(|slot| self.counters.get(slot))
            .min()
            .unwrap_or(0)
    }

    pub(crate) fn add(&mut self, key: u64) {
        let slots: [usize; 32] = {
            let mut slots = [0usize; 32];
            for (i, slot) in self.slots(key).take(32).enumerate() {
                slots[i] = slot;
            }
            slots
        };
        for &slot in &slots[..(self.hashes as usize).min(32)] {
            let counter = self.counters.get_mut(slot);
            *counter = counter.saturating_add(1);
        }
    }

    pub(crate) fn decay(&mut self) {
        self.counters.update_all(|counter| *counter >>= 1);
    }
}

/// Plain bloom filter with `bits` sized for `entries` at `fpp`.
#[derive(Clone, Debug)]
pub(crate) struct Bloom {
    words: Slots<u64>,
    hashes: u32,
    inserted: u64,
    seed: u64,
}

impl Bloom {
    /// Sized for `entries` at `fpp`; `key_space` keys are expected (as for [`CountingBloom`]).
    pub(crate) fn new(entries: usize, fpp: f64, seed: u64, key_space: usize) -> Self {
        let fpp = fpp.clamp(1e-9, 0.5);
        let bits_per = -fpp.ln() / (std::f64::consts::LN_2 * std::f64::consts::LN_2);
        let bits = ((bits_per * entries.max(1) as f64).ceil() as usize).max(64);
        let hashes = ((std::f64::consts::LN_2 * bits_per).round() as u32).max(1);
        Bloom {
            words: Slots::new(
                bits.div_ceil(64),
                0,
                key_space.saturating_mul(hashes as usize),
            ),
            hashes,
            inserted: 0,
            seed,
        }
    }

    #[inline]
    fn bit_positions(&self, key: u64) -> impl Iterator<Item = usize> + '_ {
        let h = mix64(key ^ self.seed);
        let (a, b) = (h as u32 as u64, (h >> 32) | 1);
        let n = (self.words.len() * 64) as u64;
        (0..self.hashes as u64).map(move |i| (a.wrapping_add(i.wrapping_mul(b)) % n) as usize)
    }

    pub(crate) fn contains(&self, key: u64) -> bool {
        self.bit_positions(key)
            .all(|bit| self.words.get(bit / 64) & (1 << (bit % 64)) != 0)
    }

    /// Inserts; returns whether the key was (probably) new.
    pub(crate) fn insert(&mut self, key: u64) -> bool {
        let h = mix64(key ^ self.seed);
        let (a, b) = (h as u32 as u64, (h >> 32) | 1);
        let n = (self.words.len() * 64) as u64;
        let mut new = false;
        for i in 0..self.hashes as u64 {
            let bit = (a.wrapping_add(i.wrapping_mul(b)) % n) as usize;
            let mask = 1u64 << (bit % 64);
            let word = self.words.get_mut(bit / 64);
            new |= *word & mask == 0;
            *word |= mask;
        }
        if new {
            self.inserted += 1;
        }
        new
    }

    /// Approximate number of distinct keys inserted.
    pub(crate) fn unique_inserts(&self) -> u64 {
        self.inserted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counting_bloom_counts_and_decays() {
        let mut sketch = CountingBloom::new(100, 0.001, 100);
        for _ in 0..6 {
            sketch.add(7);
        }
        assert!(sketch.estimate(7) >= 6);
        sketch.decay();
        assert!(sketch.estimate(7) >= 3);
        assert_eq!(sketch.estimate(8).min(1), sketch.estimate(8).min(1));
    }

    /// A sketch sized far beyond its keys stores only what is written, and answers exactly as
    /// the full-size array would (the same length, so the same hashes land in the same slots).
    #[test]
    fn sparse_sketches_answer_as_dense_ones() {
        let mut sparse = CountingBloom::new(1 << 20, 0.001, 100);
        assert!(sparse.counters.is_sparse());
        let mut dense = CountingBloom {
            counters: Slots::Dense(vec![0; sparse.counters.len()]),
            hashes: sparse.hashes,
            remainder: sparse.remainder,
        };
        let mut sparse_bloom = Bloom::new(1 << 24, 0.01, 5, 100);
        assert!(sparse_bloom.words.is_sparse());
        let mut dense_bloom = Bloom {
            words: Slots::Dense(vec![0; sparse_bloom.words.len()]),
            ..sparse_bloom.clone()
        };
        for i in 0..5_000u64 {
            let key = mix64(i) % 100;
            sparse.add(key);
            dense.add(key);
            assert_eq!(sparse_bloom.insert(key), dense_bloom.insert(key));
            if i % 1_000 == 999 {
                sparse.decay();
                dense.decay();
            }
        }
        for key in 0..200 {
            assert_eq!(sparse.estimate(key), dense.estimate(key), "{key}");
            assert_eq!(
                sparse_bloom.contains(key),
                dense_bloom.contains(key),
                "{key}"
            );
        }
        if let Slots::Sparse { written, .. } = &sparse.counters {
            assert!(written.len() <= 100 * sparse.hashes as usize);
        }
    }

    /// The fast remainder is the remainder, for every divisor shape (1, powers of two, primes,
    /// the largest) and numerators across the 32-bit range.
    #[test]
    fn fast_remainder_equals_the_remainder() {
        let mut divisors = vec![
            1u32,
            2,
            3,
            7,
            10,
            64,
            1000,
            69_941,
            1 << 31,
            u32::MAX - 1,
            u32::MAX,
        ];
        divisors.extend((0..200).map(|i| (mix64(i) as u32).max(1)));
        divisors.extend((0..200).map(|i| (mix64(i + 1_000) % 100_000) as u32 + 1));
        for divisor in divisors {
            let fast = FastRemainder::new(divisor);
            let edges = [
                0u32,
                1,
                divisor - 1,
                divisor,
                divisor.wrapping_add(1),
                u32::MAX,
            ];
            let spread = (0..500).map(|i| mix64(i ^ u64::from(divisor)) as u32);
            for x in edges.into_iter().chain(spread) {
                assert_eq!(fast.of(x), x % divisor, "{x} % {divisor}");
            }
        }
    }

    #[test]
    fn bloom_has_no_false_negatives_and_few_false_positives() {
        let mut bloom = Bloom::new(1000, 0.01, 3, 1000);
        for key in 0..1000 {
            bloom.insert(key);
        }
        assert!((0..1000).all(|key| bloom.contains(key)));
        let false_positives = (1000..11000).filter(|&key| bloom.contains(key)).count();
        assert!(false_positives < 300, "{false_positives}");
    }
}
