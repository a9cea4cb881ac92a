//! The process `tests/erasure_kill.rs` kills: opens (or creates) a cluster of six file OSDs
//! with an erasure-coded pool `ec` (4+2, stripe unit 4K) in DIR, prints `ready`, then makes
//! partial overwrites one at a time, printing `begin NAME GENERATION OFFSET LENGTH` before
//! each and `ack NAME GENERATION` once it is acknowledged, until it is killed.
//!
//! Usage: `ec-crash-writer DIR FIRST_GENERATION SEED`

use std::io::Write;

use cluster::ec::ErasureProfile;
use cluster::{Cluster, ClusterConfig, ClusterOptions, HostConfig, OsdConfig};
use rados::Rados;

/// Object names the writer overwrites.
pub const NAMES: [&str; 4] = ["o0", "o1", "o2", "o3"];

/// Deterministic bytes of a write of `generation`.
fn pattern(generation: u64, length: usize) -> Vec<u8> {
    let mut state = generation.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..length)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

fn config() -> ClusterConfig {
    let mut config = ClusterConfig::empty();
    config.scrub_interval_s = 0;
    for id in 0..6 {
        let host = format!("host{id}");
        config.hosts.push(HostConfig { name: host.clone() });
        config.osds.push(OsdConfig {
            id,
            host,
            device: format!("file:osd.{id}.img:64M"),
            size: None,
            class: "hdd".into(),
            weight: Some(1.0),
            min_alloc_size: 4096,
            emulation: None,
            data_cache_size: None,
        });
    }
    config
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, first, seed] = &args[..] else {
        eprintln!("usage: ec-crash-writer DIR FIRST_GENERATION SEED");
        std::process::exit(2);
    };
    let mut generation: u64 = first.parse().expect("FIRST_GENERATION");
    let mut state: u64 = seed.parse::<u64>().expect("SEED") | 1;
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async move {
        let options = ClusterOptions {
            background: false,
            ..ClusterOptions::default()
        };
        let cluster = Cluster::open_or_create(dir, config(), options)
            .await
            .expect("cluster");
        if cluster.erasure_profile("ec").is_none() {
            let profile = ErasureProfile::new(4, 2);
            cluster
                .create_erasure_pool("ec", &profile, 4)
                .expect("pool");
        }
        let io = cluster.io_ctx("ec").await.expect("io_ctx");
        let mut out = std::io::stdout();
        writeln!(out, "ready").expect("stdout");
        loop {
            let mut next = || {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state
            };
            let name = NAMES[(next() % NAMES.len() as u64) as usize];
            let offset = next() % 100_000;
            let length = 1 + (next() % 40_000) as usize;
            generation += 1;
            writeln!(out, "begin {name} {generation} {offset} {length}").expect("stdout");
            out.flush().expect("stdout");
            io.write(name, offset, &pattern(generation, length))
                .await
                .expect("write");
            writeln!(out, "ack {name} {generation}").expect("stdout");
            out.flush().expect("stdout");
        }
    });
}
