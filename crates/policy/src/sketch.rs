//! Frequency sketches and membership filters shared by W-TinyLFU, the admission filters and
//! Ceph's bloom hit sets.

use crate::mix64;

/// Counting bloom filter sized for `entries` at false-positive rate `error`
/// (counters = entries * -ln(error)/ln(2)^2, hashes = ceil(ln 2 * counters per entry)),
/// with double hashing and halving decay: the frequency estimator of W-TinyLFU.
#[derive(Clone, Debug)]
pub(crate) struct CountingBloom {
    counters: Vec<u32>,
    hashes: u32,
}

impl CountingBloom {
    pub(crate) fn new(entries: usize, error: f64) -> Self {
        let per_entry = -error.ln() / (std::f64::consts::LN_2 * std::f64::consts::LN_2);
        let hashes = (std::f64::consts::LN_2 * per_entry).ceil() as u32;
        let count = ((per_entry * entries as f64).ceil() as usize).max(2 * hashes as usize);
        CountingBloom {
            counters: vec![0; count],
            hashes,
        }
    }

    #[inline]
    fn slots(&self, key: u64) -> impl Iterator<Item = usize> + '_ {
        let a = mix64(key ^ 0x5151_5151) as u32;
        let b = mix64(key ^ 0xA3A3_0000_A3A3) as u32;
        let n = self.counters.len() as u32;
        (0..self.hashes).map(move |i| (a.wrapping_add(i.wrapping_mul(b)) % n) as usize)
    }

    pub(crate) fn estimate(&self, key: u64) -> u32 {
        self.slots(key)
            .map(|slot| self.counters[slot])
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
            self.counters[slot] = self.counters[slot].saturating_add(1);
        }
    }

    pub(crate) fn decay(&mut self) {
        for counter in &mut self.counters {
            *counter >>= 1;
        }
    }
}

/// Plain bloom filter with `bits` sized for `entries` at `fpp`.
#[derive(Clone, Debug)]
pub(crate) struct Bloom {
    words: Vec<u64>,
    hashes: u32,
    inserted: u64,
    seed: u64,
}

impl Bloom {
    pub(crate) fn new(entries: usize, fpp: f64, seed: u64) -> Self {
        let fpp = fpp.clamp(1e-9, 0.5);
        let bits_per = -fpp.ln() / (std::f64::consts::LN_2 * std::f64::consts::LN_2);
        let bits = ((bits_per * entries.max(1) as f64).ceil() as usize).max(64);
        let hashes = ((std::f64::consts::LN_2 * bits_per).round() as u32).max(1);
        Bloom {
            words: vec![0; bits.div_ceil(64)],
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
            .all(|bit| self.words[bit / 64] & (1 << (bit % 64)) != 0)
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
            new |= self.words[bit / 64] & mask == 0;
            self.words[bit / 64] |= mask;
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
        let mut sketch = CountingBloom::new(100, 0.001);
        for _ in 0..6 {
            sketch.add(7);
        }
        assert!(sketch.estimate(7) >= 6);
        sketch.decay();
        assert!(sketch.estimate(7) >= 3);
        assert_eq!(sketch.estimate(8).min(1), sketch.estimate(8).min(1));
    }

    #[test]
    fn bloom_has_no_false_negatives_and_few_false_positives() {
        let mut bloom = Bloom::new(1000, 0.01, 3);
        for key in 0..1000 {
            bloom.insert(key);
        }
        assert!((0..1000).all(|key| bloom.contains(key)));
        let false_positives = (1000..11000).filter(|&key| bloom.contains(key)).count();
        assert!(false_positives < 300, "{false_positives}");
    }
}
