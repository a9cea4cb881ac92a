//! A volume whose data objects live on an erasure-coded 4+2 pool, its header, id and
//! directory entries on a replicated one (`rbd create --data-pool`): random writes (partial
//! overwrites of stripes), reads and discards compared with a byte array, first with every
//! OSD in, then with one down and out (reads decode the missing shards), then after recovery.

#[path = "../../cluster/tests/common/mod.rs"]
mod cluster_common;

use std::sync::Arc;

use cluster::ec::ErasureProfile;
use cluster::{Cluster, ClusterOptions};
use device::Device;
use rados::Rados;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use volume::{OpenMode, Volume, Volumes, VolumesConfig};

const ORDER: u8 = 16; // 64 KiB objects: many objects, each a few 4 KiB-unit stripes

fn aligned(random: &mut ChaCha8Rng, below: u64) -> u64 {
    random.gen_range(0..below / 512) * 512
}

async fn check_all(volume: &Volume, model: &[u8], context: &str) {
    let mut buffer = vec![0xa5u8; model.len()];
    volume.read_at(0, &mut buffer).await.expect("read all");
    if let Some(at) = buffer.iter().zip(model).position(|(got, want)| got != want) {
        panic!("{context}: byte {at} is {} not {}", buffer[at], model[at]);
    }
}

/// `steps` random writes, reads and discards on `volume`, checked against `model`.
async fn random_steps(volume: &Volume, model: &mut [u8], random: &mut ChaCha8Rng, steps: usize) {
    let size = model.len() as u64;
    for step in 0..steps {
        let offset = aligned(random, size);
        match random.gen_range(0..100) {
            0..=49 => {
                let length = aligned(random, (size - offset).min(100 << 10)) + 512;
                let length = length.min(size - offset);
                let data: Vec<u8> = (0..length).map(|_| random.gen_range(1..=255)).collect();
                volume.write_at(offset, &data).await.expect("write");
                model[offset as usize..(offset + length) as usize].copy_from_slice(&data);
            }
            50..=84 => {
                let length =
                    (aligned(random, (size - offset).min(200 << 10)) + 512).min(size - offset);
                let mut buffer = vec![0x5au8; length as usize];
                volume.read_at(offset, &mut buffer).await.expect("read");
                assert!(
                    buffer == model[offset as usize..(offset + length) as usize],
                    "step {step}: read {offset}+{length}"
                );
            }
            _ => {
                let length =
                    (aligned(random, (size - offset).min(150 << 10)) + 512).min(size - offset);
                volume.discard(offset, length).await.expect("discard");
                model[offset as usize..(offset + length) as usize].fill(0);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volume_on_an_erasure_coded_data_pool_matches_a_byte_array_with_an_osd_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Six hosts of one OSD; "data" is replicated 3x (headers), "ecdata" 4+2.
    let config = cluster_common::small_config(6, 1, "file", 3);
    let cluster = Arc::new(
        Cluster::create(
            dir.path(),
            config,
            ClusterOptions {
                background: false,
                ..ClusterOptions::default()
            },
        )
        .await
        .expect("create cluster"),
    );
    cluster
        .create_erasure_pool("ecdata", &ErasureProfile::new(4, 2), 16)
        .expect("erasure-coded pool");
    let headers = cluster.io_ctx("data").await.expect("pool data");
    let data = cluster.io_ctx("ecdata").await.expect("pool ecdata");
    let volumes = Volumes::with_data_pool(
        headers.clone(),
        Some(data.clone()),
        VolumesConfig::default(),
        volume::system_clock(),
        11,
    );
    assert_eq!(volumes.data_pool(), Some("ecdata"));
    let mut model = vec![0u8; (1 << 20) + 1536];
    let info = volumes
        .create("ec", model.len() as u64, ORDER)
        .await
        .expect("create");
    assert_eq!(info.features, 1 | 128, "layering and data-pool");
    let prefix = format!("rbd_data.{}.{}", headers.pool().id, info.id);
    assert_eq!(info.object_prefix, prefix);
    let volume = volumes.open("ec", OpenMode::ReadWrite).await.expect("open");
    let mut random = ChaCha8Rng::seed_from_u64(45);

    random_steps(&volume, &mut model, &mut random, 120).await;
    check_all(&volume, &model, "every OSD in").await;
    // The data objects are in the erasure-coded pool, none in the header pool.
    let in_data = data.list_all().await.expect("list ecdata");
    assert!(!in_data.is_empty() && in_data.iter().all(|name| name.starts_with(&prefix)));
    let in_headers = headers.list_all().await.expect("list data");
    assert!(
        in_headers.iter().all(|name| !name.starts_with("rbd_data.")),
        "{in_headers:?}"
    );

    // One OSD down and out: 5 of 6 shards, still k + 1, so writes go on; reads of the
    // objects with a shard on it decode from the others.
    cluster.mark_down(4).expect("down");
    cluster.mark_out(4).expect("out");
    check_all(&volume, &model, "osd.4 out, before writes").await;
    random_steps(&volume, &mut model, &mut random, 120).await;
    check_all(&volume, &model, "osd.4 out").await;

    // Back in: recovery rebuilds what osd.4's positions miss; everything reads the same.
    cluster.mark_up(4).expect("up");
    cluster.mark_in(4).expect("in");
    cluster.recover_erasure().await.expect("recovery");
    check_all(&volume, &model, "osd.4 back").await;
    random_steps(&volume, &mut model, &mut random, 40).await;
    volume.close().await.expect("close");

    // Reopened by a catalogue without the data pool: refused, naming the pool id.
    let plain = Volumes::with(
        headers.clone(),
        VolumesConfig::default(),
        volume::system_clock(),
        12,
    );
    let error = plain
        .open("ec", OpenMode::ReadOnly)
        .await
        .err()
        .expect("refused without the data pool");
    assert!(
        error
            .to_string()
            .contains(&format!("pool id {}", data.pool().id)),
        "{error}"
    );
    let volume = volumes
        .open("ec", OpenMode::ReadOnly)
        .await
        .expect("reopen");
    check_all(&volume, &model, "reopened").await;
    volume.close().await.expect("close");

    volumes.remove("ec").await.expect("remove");
    assert!(data.list_all().await.expect("list").is_empty(), "data left");
    assert_eq!(
        headers.list_all().await.expect("list"),
        vec!["rbd_directory".to_string()]
    );
}
