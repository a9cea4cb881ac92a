//! Reed-Solomon over stripes, with the `reed-solomon-simd` crate (GF(2^16), SIMD where the
//! CPU has it). Logical bytes are cut in stripes of `k` chunks of `stripe_unit` bytes; chunk
//! `j` of every stripe goes to data shard `j`, one after another, and the `m` coding shards
//! hold the parity of the data shards' chunks at the same offset. The codec works on 64-byte
//! blocks position by position, so the parity of a whole shard is the parity of its stripes
//! laid end to end: a partial overwrite re-encodes only the stripes it touches.

use std::collections::BTreeMap;

use crate::ec::ErasureProfile;

/// Encodes and decodes the stripes of one profile.
#[derive(Clone, Debug)]
pub struct Codec {
    k: usize,
    m: usize,
    unit: usize,
}

impl Codec {
    /// The codec of `profile` (already validated).
    pub fn new(profile: &ErasureProfile) -> Self {
        Self {
            k: profile.k as usize,
            m: profile.m as usize,
            unit: profile.stripe_unit_bytes as usize,
        }
    }

    /// Data shards.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Coding shards.
    pub fn m(&self) -> usize {
        self.m
    }

    /// Bytes of a stripe.
    pub fn stripe_width(&self) -> usize {
        self.k * self.unit
    }

    /// Bytes of one shard's chunk of a stripe.
    pub fn unit(&self) -> usize {
        self.unit
    }

    /// The `k + m` shards of `data`, a whole number of stripes (the last one zero-padded
    /// by the caller): each `rows * unit` bytes.
    pub fn encode(&self, data: &[u8]) -> Vec<Vec<u8>> {
        debug_assert!(data.len().is_multiple_of(self.stripe_width()));
        let rows = data.len() / self.stripe_width();
        let mut shards: Vec<Vec<u8>> = (0..self.k)
            .map(|_| Vec::with_capacity(rows * self.unit))
            .collect();
        for row in data.chunks_exact(self.stripe_width()) {
            for (shard, chunk) in shards.iter_mut().zip(row.chunks_exact(self.unit)) {
                shard.extend_from_slice(chunk);
            }
        }
        if rows == 0 {
            shards.extend((0..self.m).map(|_| Vec::new()));
            return shards;
        }
        let parity = reed_solomon_simd::encode(self.k, self.m, &shards)
            .expect("a validated profile and whole stripes encode");
        shards.extend(parity);
        shards
    }

    /// The logical bytes of the stripes `shards` hold (`k + m` entries, `None` where a shard
    /// is missing; the present ones of equal length, a whole number of chunks). Needs any `k`.
    pub fn decode(&self, shards: &[Option<Vec<u8>>]) -> Result<Vec<u8>, String> {
        let data = self.data_shards(shards)?;
        let rows = data.first().map_or(0, |shard| shard.len() / self.unit);
        let mut out = Vec::with_capacity(rows * self.stripe_width());
        for row in 0..rows {
            for shard in &data {
                out.extend_from_slice(&shard[row * self.unit..(row + 1) * self.unit]);
            }
        }
        Ok(out)
    }

    /// Every one of the `k + m` shards, the missing ones rebuilt from any `k` present.
    pub fn reconstruct(&self, shards: &[Option<Vec<u8>>]) -> Result<Vec<Vec<u8>>, String> {
        if shards.iter().all(Option::is_some) {
            return Ok(shards.iter().flatten().cloned().collect());
        }
        let data = self.data_shards(shards)?;
        let mut whole = data;
        let rows_bytes = whole.first().map_or(0, Vec::len);
        if rows_bytes == 0 {
            whole.extend((0..self.m).map(|_| Vec::new()));
            return Ok(whole);
        }
        let parity = reed_solomon_simd::encode(self.k, self.m, &whole)
            .map_err(|error| format!("re-encoding parity: {error}"))?;
        whole.extend(parity);
        Ok(whole)
    }

    /// The `k` data shards, decoded where missing.
    fn data_shards(&self, shards: &[Option<Vec<u8>>]) -> Result<Vec<Vec<u8>>, String> {
        if shards.len() != self.k + self.m {
            return Err(format!(
                "{} shards given, the profile has {}",
                shards.len(),
                self.k + self.m
            ));
        }
        let present = shards.iter().filter(|shard| shard.is_some()).count();
        if present < self.k {
            return Err(format!(
                "{present} shards present, decoding needs {}",
                self.k
            ));
        }
        let length = shards.iter().flatten().map(Vec::len).next().unwrap_or(0);
        if shards.iter().flatten().any(|shard| shard.len() != length) {
            return Err("shards of different lengths".into());
        }
        if shards[..self.k].iter().all(Option::is_some) || length == 0 {
            return Ok(shards[..self.k]
                .iter()
                .map(|shard| shard.clone().unwrap_or_default())
                .collect());
        }
        let originals = shards[..self.k]
            .iter()
            .enumerate()
            .filter_map(|(index, shard)| shard.as_ref().map(|shard| (index, shard)));
        let recovery = shards[self.k..]
            .iter()
            .enumerate()
            .filter_map(|(index, shard)| shard.as_ref().map(|shard| (index, shard)));
        let mut restored: BTreeMap<usize, Vec<u8>> =
            reed_solomon_simd::decode(self.k, self.m, originals, recovery)
                .map_err(|error| format!("decoding: {error}"))?;
        Ok((0..self.k)
            .map(|index| match &shards[index] {
                Some(shard) => shard.clone(),
                None => restored.remove(&index).unwrap_or_default(),
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(count: usize, seed: u64) -> Vec<u8> {
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..count)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect()
    }

    /// Every subset of `count` positions with `size` members, as bit masks.
    fn subsets(count: usize, size: usize) -> Vec<u32> {
        (0u32..1 << count)
            .filter(|mask| mask.count_ones() as usize == size)
            .collect()
    }

    #[test]
    fn decodes_from_every_k_subset() {
        for (k, m, unit) in [(4, 2, 4096), (2, 1, 64), (3, 3, 128), (6, 3, 256)] {
            let codec = Codec::new(&ErasureProfile {
                stripe_unit_bytes: unit,
                ..ErasureProfile::new(k, m)
            });
            let data = bytes(codec.stripe_width() * 3, u64::from(k * 10 + m));
            let shards = codec.encode(&data);
            assert_eq!(shards.len(), (k + m) as usize);
            let total = (k + m) as usize;
            let mut tried = 0;
            for mask in subsets(total, k as usize) {
                let given: Vec<Option<Vec<u8>>> = (0..total)
                    .map(|i| (mask & (1 << i) != 0).then(|| shards[i].clone()))
                    .collect();
                assert_eq!(codec.decode(&given).unwrap(), data, "{k}+{m} from {mask:b}");
                assert_eq!(
                    codec.reconstruct(&given).unwrap(),
                    shards,
                    "{k}+{m} {mask:b}"
                );
                tried += 1;
            }
            assert!(tried >= total);
            for mask in subsets(total, k as usize - 1) {
                let given: Vec<Option<Vec<u8>>> = (0..total)
                    .map(|i| (mask & (1 << i) != 0).then(|| shards[i].clone()))
                    .collect();
                assert!(codec.decode(&given).is_err(), "decoded from k-1 shards");
            }
        }
    }

    #[test]
    fn a_stripe_encodes_alone_as_within_its_shard() {
        let codec = Codec::new(&ErasureProfile::new(4, 2));
        let data = bytes(codec.stripe_width() * 5, 7);
        let whole = codec.encode(&data);
        let unit = codec.unit();
        for row in 0..5 {
            let alone = codec.encode(&data[row * codec.stripe_width()..][..codec.stripe_width()]);
            for (shard, chunk) in whole.iter().zip(&alone) {
                assert_eq!(&shard[row * unit..(row + 1) * unit], &chunk[..]);
            }
        }
    }

    #[test]
    fn a_damaged_shard_decodes_to_other_bytes() {
        // Decoding trusts its inputs: scrub must find a bad shard by its checksum or by
        // re-encoding, which this shows is needed.
        let codec = Codec::new(&ErasureProfile::new(4, 2));
        let data = bytes(codec.stripe_width(), 9);
        let mut shards: Vec<Option<Vec<u8>>> = codec.encode(&data).into_iter().map(Some).collect();
        shards[0] = None;
        if let Some(parity) = shards[4].as_mut() {
            parity[10] ^= 1;
        }
        assert_ne!(codec.decode(&shards).unwrap(), data);
    }
}
