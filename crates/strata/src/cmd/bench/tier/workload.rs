//! The clients' access pattern, pure: which object of a volume each op touches (Zipf-skewed
//! over the volume's objects, with the hot set redrawn every shift period, or uniform), where
//! in it, and whether it reads. Randomness is a seeded generator per client.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// How a client picks objects.
#[derive(Clone, Debug, PartialEq)]
pub enum Skew {
    /// Zipf with this exponent over the objects, the ranks mapped to objects by a permutation
    /// redrawn every `shift_ms` (0: never).
    Zipf { exponent: f64, shift_ms: u64 },
    /// Every object equally likely.
    Uniform,
}

/// One client's op generator over one volume of `objects` objects of `object_bytes`.
pub struct Workload {
    objects: u64,
    object_bytes: u64,
    block_bytes: u64,
    read_percent: u32,
    skew: Skew,
    /// Cumulative Zipf weights over ranks, ending at 1.
    cumulative: Vec<f64>,
    /// Rank to object, for the current shift epoch.
    permutation: Vec<u64>,
    epoch: u64,
    seed: u64,
    rng: ChaCha8Rng,
}

/// One op of a client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Op {
    /// Byte offset in the volume.
    pub offset_bytes: u64,
    /// Whether it reads (else it writes).
    pub read: bool,
}

impl Workload {
    /// A generator for `objects` objects (at least 1) of `object_bytes`, ops of `block_bytes`.
    pub fn new(
        objects: u64,
        object_bytes: u64,
        block_bytes: u64,
        read_percent: u32,
        skew: Skew,
        seed: u64,
    ) -> Self {
        let objects = objects.max(1);
        let cumulative = match &skew {
            Skew::Zipf { exponent, .. } => {
                let weights: Vec<f64> = (1..=objects)
                    .map(|rank| 1.0 / (rank as f64).powf(*exponent))
                    .collect();
                let total: f64 = weights.iter().sum();
                let mut sum = 0.0;
                weights
                    .iter()
                    .map(|w| {
                        sum += w / total;
                        sum
                    })
                    .collect()
            }
            Skew::Uniform => Vec::new(),
        };
        let mut workload = Self {
            objects,
            object_bytes,
            block_bytes,
            read_percent,
            skew,
            cumulative,
            permutation: Vec::new(),
            epoch: u64::MAX,
            seed,
            rng: ChaCha8Rng::seed_from_u64(seed),
        };
        workload.set_epoch(0);
        workload
    }

    fn set_epoch(&mut self, epoch: u64) {
        if epoch == self.epoch {
            return;
        }
        self.epoch = epoch;
        let mut permutation: Vec<u64> = (0..self.objects).collect();
        let mut shuffle = ChaCha8Rng::seed_from_u64(self.seed ^ epoch.wrapping_mul(0x9E37_79B9));
        for i in (1..permutation.len()).rev() {
            let j = shuffle.gen_range(0..=i);
            permutation.swap(i, j);
        }
        self.permutation = permutation;
    }

    /// Draws the hot set's permutations from `seed` (generators with the same one share a hot
    /// set; their draws stay their own).
    pub fn share_permutation_seed(&mut self, seed: u64) {
        self.seed = seed;
        let epoch = self.epoch;
        self.epoch = u64::MAX;
        self.set_epoch(epoch);
    }

    /// The object an op at `now_ms` (since the scenario began) touches.
    pub fn object(&mut self, now_ms: u64) -> u64 {
        match self.skew {
            Skew::Uniform => self.rng.gen_range(0..self.objects),
            Skew::Zipf { shift_ms, .. } => {
                self.set_epoch(now_ms.checked_div(shift_ms).unwrap_or(0));
                let draw: f64 = self.rng.gen();
                let rank = self
                    .cumulative
                    .partition_point(|c| *c < draw)
                    .min(self.cumulative.len() - 1);
                self.permutation[rank]
            }
        }
    }

    /// The next op at `now_ms`.
    pub fn next(&mut self, now_ms: u64) -> Op {
        let object = self.object(now_ms);
        let blocks = (self.object_bytes / self.block_bytes).max(1);
        let block = self.rng.gen_range(0..blocks);
        Op {
            offset_bytes: object * self.object_bytes + block * self.block_bytes,
            read: self.rng.gen_range(0..100) < self.read_percent,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_concentrates_and_its_hot_set_moves_each_epoch() {
        let skew = Skew::Zipf {
            exponent: 0.9,
            shift_ms: 1000,
        };
        let mut workload = Workload::new(64, 4 << 20, 4096, 70, skew, 7);
        let mut counts = vec![0u64; 64];
        for _ in 0..20_000 {
            counts[workload.object(0) as usize] += 1;
        }
        let hottest_at_0 = (0..64).max_by_key(|o| counts[*o]).expect("some object");
        let mut sorted = counts.clone();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        let top_quarter: u64 = sorted[..16].iter().sum();
        assert!(
            top_quarter > 20_000 / 2,
            "top quarter {top_quarter} of 20000"
        );
        assert!(sorted[63] < sorted[0] / 10, "{sorted:?}");
        let mut later = vec![0u64; 64];
        for _ in 0..20_000 {
            later[workload.object(5_000) as usize] += 1;
        }
        let hottest_later = (0..64).max_by_key(|o| later[*o]).expect("some object");
        assert_ne!(hottest_at_0, hottest_later, "the hot set moved");
    }

    #[test]
    fn ops_stay_in_the_volume_aligned_with_the_read_share_asked() {
        let mut workload = Workload::new(8, 1 << 20, 4096, 70, Skew::Uniform, 1);
        let mut reads = 0;
        for step in 0..10_000 {
            let op = workload.next(step);
            assert!(op.offset_bytes < 8 << 20);
            assert_eq!(op.offset_bytes % 4096, 0);
            reads += u32::from(op.read);
        }
        assert!((6_500..7_500).contains(&reads), "{reads} reads of 10000");
    }
}
