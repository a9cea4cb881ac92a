//! Helpers shared by the cluster's integration tests.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use cluster::{ClusterConfig, ClusterOptions, HostConfig, OsdConfig, PoolConfig};
use device::{Device, FaultConfig, FaultyDevice};

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
        erasure: None,
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

/// Every OSD's [`FaultyDevice`], by OSD id, as [`faulty_options`] wrapped them.
pub type Faulty = Arc<Mutex<BTreeMap<i32, Arc<FaultyDevice>>>>;

/// Options (no background work) wrapping every OSD's device in a [`FaultyDevice`] with no
/// faults yet, kept in the returned registry so a test can inject faults per OSD.
pub fn faulty_options() -> (ClusterOptions, Faulty) {
    let devices: Faulty = Arc::default();
    let registry = Arc::clone(&devices);
    let options = ClusterOptions {
        background: false,
        device_wrapper: Some(Arc::new(move |id, inner: Arc<dyn Device>| {
            let faulty = Arc::new(FaultyDevice::new(
                format!("faulty.{id}"),
                inner,
                FaultConfig::default(),
            ));
            registry.lock().unwrap().insert(id, Arc::clone(&faulty));
            faulty as Arc<dyn Device>
        })),
        ..ClusterOptions::default()
    };
    (options, devices)
}
