//! `strata bench ...`: whole-system benchmarks. Each prints a table with the peer it is compared
//! against, measured in the same run. One module per benchmark.

use std::process::ExitCode;

pub mod balance;
pub mod balance_load;
pub mod balance_pools;
pub mod cache;
pub mod ceph;
pub mod cluster;
pub mod crush;
pub mod load;
pub mod pack;
pub mod recovery;
pub mod rss;
pub mod s3;
pub mod s3_client;
pub mod serve_process;
pub mod sim;
pub mod soak;
pub mod soak_writers;
pub mod tier;
pub mod volume;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub which: Which,
}

#[derive(clap::Subcommand)]
pub enum Which {
    /// CRUSH mapping throughput against crushtool on the same map.
    Crush(crush::Args),
    /// Balancer result and time against osdmaptool --upmap on the same osdmap.
    Balance(balance::Args),
    /// Seed 000's Figure 9 live: per-OSD busy fraction on NVMe and SATA SSD OSDs (capacities
    /// 1:2) for CRUSH only, the upmap balancer and the load balancer, at stepped rates.
    BalanceLoad(balance_load::Args),
    /// Cache simulator throughput (requests/s per policy).
    Sim(sim::Args),
    /// Seed 001: the block cache against the HDD alone, the fast device and nbdkit, via fio.
    Cache(cache::Args),
    /// Object write/read ops/s and latency against rados bench on real Ceph and fio.
    Cluster(cluster::Args),
    /// S3 PUT/GET ops/s and latency against radosgw on real Ceph.
    S3(s3::Args),
    /// Seed 002's space figures: data holes, metadata and GC reclaim of small S3 objects with
    /// packing on, against packing off in the same run.
    Pack(pack::Args),
    /// Block volume IOPS, latency and MB/s through fio against RBD on real Ceph, and seed 001
    /// at cluster level (HDD OSDs, HDDs behind block caches, NVMe OSDs).
    Volume(volume::Args),
    /// Seeds 003 and 000 live: block volumes on HDD OSDs through a cache tier on NVMe
    /// (predictive and Ceph's admission) against no tier and an all-NVMe pool.
    Tier(tier::Args),
    /// kill -9 of a real `strata serve` under S3 and object writers, with a small and a
    /// faulty OSD; every acknowledged write read back and a deep scrub after each restart.
    Soak(soak::Args),
    /// Resident memory of a real `strata serve` under a many-client S3 load, against the
    /// bound its configured caches and in-flight requests give.
    Rss(rss::Args),
    /// Erasure-coded pools: time to rebuild one OSD's shards against the disk's bandwidth
    /// (fio on the same disk).
    Recovery(recovery::Args),
}

/// A command for a peer program (fio, Ceph, radosgw, crushtool...) or a helper process: it
/// runs on every CPU the benchmark may use, even when started from a runtime thread kept off
/// the commit CPU (`--poll-while-busy`), so the peer is measured with the whole machine.
pub fn peer_command(program: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
    let mut command = std::process::Command::new(program);
    if let Err(error) = device::affinity::run_on_every_allowed_cpu(&mut command) {
        eprintln!("warning: a peer may inherit this thread's CPUs: {error}");
    }
    command
}

/// Runs a prepared fio `command` (it must ask for `--output-format=json`) and returns its
/// report; a failed run is an error carrying fio's output.
pub fn fio_report(command: &mut std::process::Command) -> anyhow::Result<serde_json::Value> {
    use anyhow::Context;
    let output = command
        .output()
        .context("running fio (apt-get install fio)")?;
    let text = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        anyhow::bail!(
            "fio failed: {text}{}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let start = text.find('{').context("no JSON from fio")?;
    Ok(serde_json::from_str(&text[start..])?)
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.which {
        Which::Crush(a) => crush::run(a),
        Which::Balance(a) => balance::run(a),
        Which::BalanceLoad(a) => balance_load::run(a),
        Which::Sim(a) => sim::run(a),
        Which::Cache(a) => cache::run(a),
        Which::Cluster(a) => cluster::run(a),
        Which::S3(a) => s3::run(a),
        Which::Pack(a) => pack::run(a),
        Which::Volume(a) => volume::run(a),
        Which::Tier(a) => tier::run(a),
        Which::Soak(a) => soak::run(a),
        Which::Rss(a) => rss::run(a),
        Which::Recovery(a) => recovery::run(a),
    }
}
