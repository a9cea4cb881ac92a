//! Model test: random operations on a few objects against the cluster and a `BTreeMap` model,
//! with OSDs going down and up and whole-cluster restarts (shutdown, reopen from the data
//! directory) in between. Any divergence fails with the seed and the step.

mod common;

use std::collections::BTreeMap;

use cluster::{Cluster, ClusterOptions};
use rados::{IoCtx, RadosError, WriteOp};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[derive(Clone, Debug, Default, PartialEq)]
struct Object {
    data: Vec<u8>,
    xattrs: BTreeMap<String, Vec<u8>>,
    omap: BTreeMap<Vec<u8>, Vec<u8>>,
}

const NAMES: [&str; 8] = ["a", "b", "c", "d", "e", "f", "g", "h"];

fn options() -> ClusterOptions {
    ClusterOptions {
        background: false,
        ..ClusterOptions::default()
    }
}

async fn verify(pool: &cluster::PoolHandle, model: &BTreeMap<String, Object>, context: &str) {
    for name in NAMES {
        match model.get(name) {
            None => {
                let read = pool.read_full(name).await;
                assert!(
                    matches!(read, Err(RadosError::NotFound(_))),
                    "{context}: {name} should be gone: {read:?}"
                );
            }
            Some(object) => {
                let data = pool
                    .read_full(name)
                    .await
                    .unwrap_or_else(|e| panic!("{context}: read {name}: {e}"));
                assert_eq!(data, object.data, "{context}: data of {name}");
                assert_eq!(
                    pool.stat(name).await.unwrap().size_bytes,
                    object.data.len() as u64
                );
                assert_eq!(
                    pool.get_xattrs(name).await.unwrap(),
                    object.xattrs,
                    "{context}: xattrs of {name}"
                );
                let omap = pool.omap_get_vals(name, None, b"", 1000).await.unwrap();
                let omap: BTreeMap<_, _> = omap.entries.into_iter().collect();
                assert_eq!(omap, object.omap, "{context}: omap of {name}");
            }
        }
    }
    let mut listed = pool.list_all().await.unwrap();
    listed.sort();
    let expected: Vec<String> = model.keys().cloned().collect();
    assert_eq!(listed, expected, "{context}: listing");
}

/// One random operation, applied to both; returns a description.
async fn step(
    pool: &cluster::PoolHandle,
    model: &mut BTreeMap<String, Object>,
    rng: &mut ChaCha8Rng,
) -> String {
    let name = NAMES[rng.gen_range(0..NAMES.len())];
    let exists = model.contains_key(name);
    let choice = rng.gen_range(0..10);
    let bytes = |rng: &mut ChaCha8Rng, max: usize| {
        let length = rng.gen_range(0..max);
        common::content(rng.gen(), length)
    };
    match choice {
        0 | 1 => {
            let data = bytes(rng, 20_000);
            pool.write_full(name, &data).await.unwrap();
            model.entry(name.into()).or_default().data = data;
            format!("write_full {name}")
        }
        2 => {
            let offset = rng.gen_range(0..30_000u64);
            let data = bytes(rng, 9000);
            pool.write(name, offset, &data).await.unwrap();
            let object = model.entry(name.into()).or_default();
            let end = offset as usize + data.len();
            if object.data.len() < end {
                object.data.resize(end, 0);
            }
            object.data[offset as usize..end].copy_from_slice(&data);
            format!("write {name} at {offset} len {}", data.len())
        }
        3 => {
            let data = bytes(rng, 5000);
            pool.append(name, &data).await.unwrap();
            model.entry(name.into()).or_default().data.extend(data);
            format!("append {name}")
        }
        4 => {
            let size = rng.gen_range(0..25_000u64);
            pool.truncate(name, size).await.unwrap();
            // Truncating a missing object creates nothing (Ceph's rule, the contract's).
            if let Some(object) = model.get_mut(name) {
                object.data.resize(size as usize, 0);
            }
            format!("truncate {name} to {size}")
        }
        5 => {
            let result = pool.remove(name).await;
            if exists {
                result.unwrap();
                model.remove(name);
            } else {
                assert!(matches!(result, Err(RadosError::NotFound(_))));
            }
            format!("remove {name}")
        }
        6 => {
            let key = format!("x{}", rng.gen_range(0..4));
            if rng.gen_bool(0.7) {
                let value = bytes(rng, 100);
                pool.set_xattr(name, &key, &value).await.unwrap();
                model
                    .entry(name.into())
                    .or_default()
                    .xattrs
                    .insert(key.clone(), value);
            } else {
                let result = pool.remove_xattr(name, &key).await;
                match model.get_mut(name) {
                    Some(object) => {
                        result.unwrap();
                        object.xattrs.remove(&key);
                    }
                    None => assert!(matches!(result, Err(RadosError::NotFound(_)))),
                }
            }
            format!("xattr {name} {key}")
        }
        7 => {
            let entries: Vec<(Vec<u8>, Vec<u8>)> = (0..rng.gen_range(1..6))
                .map(|_| {
                    (
                        format!("k{:03}", rng.gen_range(0..50)).into_bytes(),
                        // Omap values are never empty (the contract's rule).
                        [&b"v"[..], &bytes(rng, 50)].concat(),
                    )
                })
                .collect();
            pool.omap_set(name, entries.clone()).await.unwrap();
            model.entry(name.into()).or_default().omap.extend(entries);
            format!("omap_set {name}")
        }
        8 => {
            let keys: Vec<Vec<u8>> = (0..3)
                .map(|_| format!("k{:03}", rng.gen_range(0..50)).into_bytes())
                .collect();
            let result = pool.omap_remove_keys(name, keys.clone()).await;
            match model.get_mut(name) {
                Some(object) => {
                    result.unwrap();
                    for key in keys {
                        object.omap.remove(&key);
                    }
                }
                None => assert!(matches!(result, Err(RadosError::NotFound(_)))),
            }
            format!("omap_rm {name}")
        }
        _ => {
            // Exclusive create + data + xattr in one atomic operation.
            let data = bytes(rng, 3000);
            let op = WriteOp::new()
                .create(true)
                .write_full(data.clone())
                .set_xattr("tag", b"new".to_vec());
            let result = pool.operate(name, op).await;
            if exists {
                assert!(matches!(result, Err(RadosError::Exists(_))), "{result:?}");
            } else {
                result.unwrap();
                let object = model.entry(name.into()).or_default();
                object.data = data;
                object.xattrs.insert("tag".into(), b"new".to_vec());
            }
            format!("create_exclusive {name}")
        }
    }
}

async fn run(seed: u64, steps: usize) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = common::small_config(3, 2, "file", 2);
    config.pools[0].min_size = Some(1);
    let mut cluster = Some(
        Cluster::create(dir.path(), config, options())
            .await
            .unwrap(),
    );
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut model = BTreeMap::new();
    let mut down: Option<i32> = None;
    for index in 0..steps {
        let current = cluster.as_ref().unwrap();
        let pool = current.pool("data").unwrap();
        let what = step(&pool, &mut model, &mut rng).await;
        let context = format!("seed {seed} step {index} ({what})");
        match rng.gen_range(0..100) {
            0..=2 => {
                // An OSD fails or comes back (one at a time: 2 replicas, min_size 1).
                match down.take() {
                    Some(osd) => {
                        current.mark_up(osd).unwrap();
                        assert!(current.recover(5).await.unwrap(), "{context}: recovery");
                    }
                    None => {
                        let osd = rng.gen_range(0..6);
                        current.mark_down(osd).unwrap();
                        down = Some(osd);
                    }
                }
                verify(&pool, &model, &context).await;
            }
            3..=4 => {
                drop(pool);
                let epoch = current.epoch();
                cluster.take().unwrap().shutdown().await.unwrap();
                let reopened = Cluster::open(dir.path(), options()).await.unwrap();
                assert_eq!(
                    reopened.epoch(),
                    epoch,
                    "{context}: epoch survives a restart"
                );
                let pool = reopened.pool("data").unwrap();
                verify(&pool, &model, &format!("{context} after restart")).await;
                cluster = Some(reopened);
            }
            _ => {
                if index % 25 == 0 {
                    verify(&pool, &model, &context).await;
                }
            }
        }
    }
    let current = cluster.take().unwrap();
    if let Some(osd) = down {
        current.mark_up(osd).unwrap();
    }
    assert!(current.recover(5).await.unwrap());
    let pool = current.pool("data").unwrap();
    verify(&pool, &model, &format!("seed {seed} end")).await;
    let report = current.scrub(None, false).await.unwrap();
    assert!(report.is_clean(), "seed {seed}: {report:?}");
    drop(pool);
    current.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_operations_match_the_model_across_restarts_and_failures() {
    for seed in 1..=3 {
        run(seed, 300).await;
    }
}
