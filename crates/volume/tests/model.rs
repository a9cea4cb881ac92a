//! Model test: random writes, reads, discards and resizes on a volume, compared with a byte
//! array, with the volume closed and reopened in between, on the in-memory model and on the
//! embedded cluster (replica 3 on file devices), where the whole cluster is also shut down
//! and reopened from its data directory.

#[path = "../../cluster/tests/common/mod.rs"]
mod cluster_common;

use std::path::PathBuf;
use std::sync::Arc;

use cluster::{Cluster, ClusterOptions};
use device::{Device, ExtentState};
use rados::memory::MemoryRados;
use rados::Rados;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use volume::{OpenMode, Volume, Volumes, VolumesConfig};

const ORDER: u8 = 16; // 64 KiB objects: many objects in a small volume
const SIZE_BYTES_MAX: u64 = 2 << 20;

enum Backend {
    Memory(Arc<MemoryRados>),
    Embedded {
        dir: PathBuf,
        cluster: Option<Arc<Cluster>>,
    },
}

fn options() -> ClusterOptions {
    ClusterOptions {
        background: false,
        ..ClusterOptions::default()
    }
}

impl Backend {
    fn rados(&self) -> Arc<dyn Rados> {
        match self {
            Backend::Memory(rados) => rados.clone(),
            Backend::Embedded { cluster, .. } => {
                cluster.as_ref().expect("cluster is running").clone()
            }
        }
    }

    async fn volumes(&self, seed: u64) -> Volumes {
        let io_ctx = self.rados().io_ctx("data").await.expect("pool data");
        Volumes::with(
            io_ctx,
            VolumesConfig::default(),
            volume::system_clock(),
            seed,
        )
    }

    /// Shuts the embedded cluster down and opens it again from its directory.
    async fn restart(&mut self) {
        if let Backend::Embedded { dir, cluster } = self {
            shutdown(cluster.take().expect("running")).await;
            *cluster = Some(Arc::new(
                Cluster::open(&*dir, options())
                    .await
                    .expect("reopen the cluster"),
            ));
        }
    }
}

fn aligned(random: &mut ChaCha8Rng, below: u64) -> u64 {
    random.gen_range(0..below / 512) * 512
}

async fn check_all(volume: &Volume, model: &[u8], context: &str) {
    assert_eq!(volume.size_bytes(), model.len() as u64, "{context}: size");
    let mut buffer = vec![0xa5u8; model.len()];
    volume.read_at(0, &mut buffer).await.expect("read all");
    if let Some(at) = buffer.iter().zip(model).position(|(got, want)| got != want) {
        panic!("{context}: byte {at} is {} not {}", buffer[at], model[at]);
    }
    // Holes are where the model is zero, and the extents cover the volume exactly.
    let extents = volume
        .allocation(0, model.len() as u64)
        .await
        .expect("allocation");
    let mut at = 0usize;
    for extent in extents {
        let end = at + extent.length_bytes as usize;
        if extent.state == ExtentState::Hole {
            assert!(
                model[at..end].iter().all(|&byte| byte == 0),
                "{context}: a hole at {at} holds data"
            );
        }
        at = end;
    }
    assert_eq!(at, model.len(), "{context}: extents cover the volume");
}

async fn run(mut backend: Backend, seed: u64, steps: usize, restart_every: usize) {
    let mut random = ChaCha8Rng::seed_from_u64(seed);
    let volumes = backend.volumes(seed).await;
    let mut model = vec![0u8; (1 << 20) + 1536];
    volumes
        .create("model", model.len() as u64, ORDER)
        .await
        .expect("create");
    let mut volume = Some(
        volumes
            .open("model", OpenMode::ReadWrite)
            .await
            .expect("open"),
    );
    let mut volumes = Some(volumes);
    for step in 0..steps {
        let context = format!("seed {seed} step {step}");
        let open = volume.as_ref().expect("open");
        let size = model.len() as u64;
        match random.gen_range(0..100) {
            0..=39 => {
                let offset = aligned(&mut random, size);
                let length = aligned(&mut random, (size - offset).min(200 << 10) + 512);
                let data: Vec<u8> = (0..length).map(|_| random.gen_range(1..=255)).collect();
                open.write_at(offset, &data).await.expect("write");
                model[offset as usize..(offset + length) as usize].copy_from_slice(&data);
            }
            40..=64 => {
                let offset = aligned(&mut random, size);
                let length = aligned(&mut random, (size - offset).min(300 << 10) + 512);
                let mut buffer = vec![0x5au8; length as usize];
                open.read_at(offset, &mut buffer).await.expect("read");
                assert!(
                    buffer == model[offset as usize..(offset + length) as usize],
                    "{context}: read {offset}+{length}"
                );
            }
            65..=79 => {
                let offset = aligned(&mut random, size);
                let length = aligned(&mut random, (size - offset).min(400 << 10) + 512);
                open.discard(offset, length).await.expect("discard");
                model[offset as usize..(offset + length) as usize].fill(0);
            }
            80..=87 => {
                let new_size = aligned(&mut random, SIZE_BYTES_MAX) + 512;
                open.resize(new_size).await.expect("resize");
                model.resize(new_size as usize, 0);
            }
            88..=93 => {
                // Past the end is refused and changes nothing.
                let mut buffer = vec![0u8; 1024];
                assert!(matches!(
                    open.read_at(size - 512, &mut buffer).await,
                    Err(device::DeviceError::OutOfRange { .. })
                ));
                assert!(matches!(
                    open.write_at(size, &buffer).await,
                    Err(device::DeviceError::OutOfRange { .. })
                ));
            }
            _ => {
                volume.take().expect("open").close().await.expect("close");
                let catalogue = volumes.as_ref().expect("catalogue");
                let info = catalogue.info("model").await.expect("info");
                assert_eq!(info.size_bytes, model.len() as u64, "{context}: info size");
                assert!(
                    info.lease.is_none(),
                    "{context}: closed, the lease is released"
                );
                volume = Some(
                    catalogue
                        .open("model", OpenMode::ReadWrite)
                        .await
                        .expect("reopen"),
                );
            }
        }
        if restart_every > 0 && step % restart_every == restart_every - 1 {
            volume.take().expect("open").close().await.expect("close");
            drop(volumes.take());
            backend.restart().await;
            let catalogue = backend.volumes(seed + step as u64).await;
            volume = Some(
                catalogue
                    .open("model", OpenMode::ReadWrite)
                    .await
                    .expect("open after restart"),
            );
            volumes = Some(catalogue);
            check_all(
                volume.as_ref().expect("open"),
                &model,
                &format!("{context} after restart"),
            )
            .await;
        }
    }
    let open = volume.take().expect("open");
    check_all(&open, &model, &format!("seed {seed} end")).await;
    open.close().await.expect("close");
    let catalogue = volumes.expect("catalogue");
    assert_eq!(
        catalogue.list().await.expect("list"),
        vec!["model".to_string()]
    );
    catalogue.remove("model").await.expect("remove");
    assert!(catalogue.list().await.expect("list").is_empty());
    let leftovers = backend
        .rados()
        .io_ctx("data")
        .await
        .expect("pool")
        .list_all()
        .await
        .expect("list");
    assert_eq!(
        leftovers,
        vec!["rbd_directory".to_string()],
        "remove leaves only the directory"
    );
    if let Backend::Embedded { cluster, .. } = &mut backend {
        shutdown(cluster.take().expect("running")).await;
    }
}

async fn shutdown(cluster: Arc<Cluster>) {
    let cluster =
        Arc::try_unwrap(cluster).unwrap_or_else(|_| panic!("the cluster is still in use"));
    cluster.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn volume_matches_a_byte_array_in_memory() {
    for seed in 1..=3 {
        let rados = Arc::new(MemoryRados::new());
        rados
            .pool_create(rados::PoolSpec::new("data"))
            .await
            .expect("pool");
        run(Backend::Memory(rados), seed, 400, 0).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volume_matches_a_byte_array_on_the_embedded_cluster_across_restarts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = cluster_common::small_config(3, 1, "file", 3);
    let cluster = Cluster::create(dir.path(), config, options())
        .await
        .expect("create cluster");
    run(
        Backend::Embedded {
            dir: dir.path().to_path_buf(),
            cluster: Some(Arc::new(cluster)),
        },
        7,
        150,
        50,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writes_that_find_the_lease_expired_renew_it_once_and_keep_it() {
    use std::sync::atomic::{AtomicU64, Ordering};
    let dir = tempfile::tempdir().expect("tempdir");
    let config = cluster_common::small_config(3, 1, "file", 3);
    let cluster = Arc::new(
        Cluster::create(dir.path(), config, options())
            .await
            .expect("create cluster"),
    );
    let now_ns = Arc::new(AtomicU64::new(1_700_000_000_000_000_000));
    let clock_ns = now_ns.clone();
    let volumes = Volumes::with(
        cluster.io_ctx("data").await.expect("pool"),
        VolumesConfig {
            lease_duration_ms: 10_000,
            ..VolumesConfig::default()
        },
        Arc::new(move || clock_ns.load(Ordering::SeqCst)),
        3,
    );
    volumes.create("v", 1 << 20, 12).await.expect("create");
    let volume = Arc::new(volumes.open("v", OpenMode::ReadWrite).await.expect("open"));
    // Past the lease's end on the injected clock, nobody else took it: writes at once each
    // find it expired; one renews it, the others see the renewal (a second guarded renewal
    // with the old value would fail and look like a lost lease).
    now_ns.fetch_add(11_000_000_000, Ordering::SeqCst);
    let writes: Vec<_> = (0..32u64)
        .map(|block| {
            let volume = volume.clone();
            tokio::spawn(async move {
                volume
                    .write_at(block * 4096, &[block as u8 + 1; 4096])
                    .await
            })
        })
        .collect();
    for write in writes {
        write.await.expect("join").expect("write after the renewal");
    }
    let volume = Arc::try_unwrap(volume).ok().expect("one handle");
    volume
        .write_at(0, &[7u8; 512])
        .await
        .expect("still the writer");
    volume.close().await.expect("close");
    drop(volumes);
    shutdown(cluster).await;
}
