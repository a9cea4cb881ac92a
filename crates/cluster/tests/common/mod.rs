//! Helpers shared by the cluster's integration tests.
#![allow(dead_code)]

use std::path::Path;

use cluster::{ClusterConfig, HostConfig, OsdConfig, PoolConfig};

/// `hosts` hosts with `per_host` OSDs each, on `backing` devices ("mem" or "file") of
/// `size`, and one pool "data" of `size` replicas over every OSD.
pub fn small_config(hosts: usize, per_host: usize, backing: &str, replicas: u32) -> ClusterConfig {
    let mut config = ClusterConfig::empty();
    config.scrub_interval_s = 0;
    for host in 0..hosts {
        let name = format!("host{host}");
        config.hosts.push(HostConfig { name: name.clone() });
        for slot in 0..per_host {
            let id = (host * per_host + slot) as i32;
            let device = match backing {
                "mem" => "mem:64M".to_string(),
                _ => format!("file:osd.{id}.img:64M"),
            };
            config.osds.push(OsdConfig {
                id,
                host: name.clone(),
                device,
                size: None,
                class: if slot == 0 { "ssd" } else { "hdd" }.to_string(),
                weight: Some(1.0),
                min_alloc_size: 4096,
                emulation: None,
                data_cache_size: None,
            });
        }
    }
    config.pools.push(PoolConfig {
        name: "data".to_string(),
        size: replicas,
        min_size: None,
        pg_num: 16,
        device_class: None,
        crush_rule: None,
    });
    config
}

/// Deterministic object content.
pub fn content(seed: u64, length: usize) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..length)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

/// Whether `dir` holds a cluster.
pub fn exists(dir: &Path) -> bool {
    dir.join("state.json").exists()
}
