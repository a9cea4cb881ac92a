//! Seed 003's multi-client workload: each client owns an RBD image made of 40 MB files and issues
//! 4 KiB random I/O (70% reads) inside files chosen by a Zipf law whose ranking shifts every
//! `shift_every_s` seconds (yesterday's hot files cool down, others heat up). Images are mapped to
//! 4 MiB RADOS objects as RBD does. Deterministic for a seed.

use crate::trace::Trace;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Parameters of the generator.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientWorkload {
    /// Number of clients (each with its own image). Default 1.
    pub clients: u32,
    /// Files per image. Default 25 (1 GB per client).
    pub files_per_client: u32,
    /// File size in bytes. Default 40 MB.
    pub file_bytes: u64,
    /// I/O size in bytes. Default 4 KiB.
    pub io_bytes: u64,
    /// RADOS object size in bytes. Default 4 MiB.
    pub object_bytes: u64,
    /// Requests per client. Default 20,000.
    pub requests_per_client: u64,
    /// Fraction of writes. Default 0.3.
    pub write_fraction: f64,
    /// Zipf exponent over files. Default 1.0.
    pub zipf_exponent: f64,
    /// Popularity shift interval in seconds. Default 60.
    pub shift_every_s: u64,
    /// Request rate per client (sets timestamps). Default 100 requests/s.
    pub iops_per_client: f64,
    /// Seed. Default 3.
    pub seed: u64,
}

impl Default for ClientWorkload {
    fn default() -> Self {
        ClientWorkload {
            clients: 1,
            files_per_client: 25,
            file_bytes: 40_000_000,
            io_bytes: 4096,
            object_bytes: 4 << 20,
            requests_per_client: 20_000,
            write_fraction: 0.3,
            zipf_exponent: 1.0,
            shift_every_s: 60,
            iops_per_client: 100.0,
            seed: 3,
        }
    }
}

impl ClientWorkload {
    /// Objects of one client's image.
    pub fn objects_per_client(&self) -> u64 {
        (self.files_per_client as u64 * self.file_bytes).div_ceil(self.object_bytes)
    }

    /// Generates the interleaved trace of all clients.
    pub fn generate(&self) -> Trace {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let files = self.files_per_client.max(1) as usize;
        let weights: Vec<f64> = (1..=files)
            .map(|r| 1.0 / (r as f64).powf(self.zipf_exponent))
            .collect();
        let sum: f64 = weights.iter().sum();
        let mut cdf = Vec::with_capacity(files);
        let mut acc = 0.0;
        for w in &weights {
            acc += w / sum;
            cdf.push(acc);
        }
        // Each client ranks its files in its own random order.
        let orders: Vec<Vec<usize>> = (0..self.clients)
            .map(|_| {
                let mut order: Vec<usize> = (0..files).collect();
                for i in (1..files).rev() {
                    order.swap(i, rng.gen_range(0..=i));
                }
                order
            })
            .collect();
        let total = self.requests_per_client * self.clients as u64;
        let rate = self.iops_per_client * self.clients as f64;
        let blocks_per_file = (self.file_bytes / self.io_bytes).max(1);
        let parts = (0..total).map(|i| {
            let client = (i % self.clients as u64) as usize;
            let time_ms = (i as f64 / rate * 1000.0) as u64;
            let shift = (time_ms / 1000 / self.shift_every_s.max(1)) as usize;
            let u: f64 = rng.gen();
            let rank = cdf.partition_point(|&c| c < u).min(files - 1);
            let file = orders[client][(rank + shift * 3) % files];
            let offset =
                file as u64 * self.file_bytes + rng.gen_range(0..blocks_per_file) * self.io_bytes;
            let object = offset / self.object_bytes;
            let key = ((client as u64) << 32) | object;
            (
                key,
                self.io_bytes as u32,
                time_ms,
                rng.gen_bool(self.write_fraction.clamp(0.0, 1.0)),
            )
        });
        let mut trace = Trace::from_parts(
            &format!("seed003-{}clients", self.clients),
            parts.collect::<Vec<_>>(),
            true,
        );
        trace
            .object_bytes
            .iter_mut()
            .for_each(|b| *b = self.object_bytes as u32);
        trace
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generator_is_deterministic_and_skewed() {
        let workload = ClientWorkload {
            clients: 2,
            requests_per_client: 5000,
            ..ClientWorkload::default()
        };
        let a = workload.generate();
        let b = workload.generate();
        assert_eq!(a.requests, b.requests);
        assert!(a.unique as u64 <= 2 * workload.objects_per_client());
        let mut counts = vec![0u32; a.unique];
        a.requests.iter().for_each(|r| counts[r.key as usize] += 1);
        counts.sort_unstable_by(|x, y| y.cmp(x));
        let top: u32 = counts.iter().take(a.unique / 10).sum();
        assert!(
            top as f64 > 0.3 * a.requests.len() as f64,
            "top 10% objects get {top}"
        );
    }
}
