//! Model test: random transactions against the store and against BTreeMap models of data,
//! xattrs and omap, compared after every few steps and across remounts.

use std::collections::BTreeMap;
use std::sync::Arc;

use device::{Device, MemoryDevice};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use store::{ObjectId, Op, Store, StoreConfig, StoreError, Transaction};

#[derive(Clone, Debug, Default, PartialEq)]
struct Object {
    data: Vec<u8>,
    xattrs: BTreeMap<String, Vec<u8>>,
    omap: BTreeMap<Vec<u8>, Vec<u8>>,
}

type Model = BTreeMap<ObjectId, Object>;

fn ids() -> Vec<ObjectId> {
    let mut ids = Vec::new();
    for collection in ["1.0", "1.1"] {
        for name in ["a", "b", "c\u{0}d", "long-object-name"] {
            ids.push(ObjectId::new(collection, name));
        }
    }
    ids
}

fn random_op(rng: &mut ChaCha8Rng) -> Op {
    let bytes = |rng: &mut ChaCha8Rng, max: usize| -> Vec<u8> {
        let length = rng.gen_range(0..max);
        let fill: u8 = rng.gen();
        (0..length).map(|i| fill.wrapping_add(i as u8)).collect()
    };
    match rng.gen_range(0..15) {
        0 => Op::Create {
            exclusive: rng.gen(),
        },
        1 | 2 => Op::WriteFull {
            data: bytes(rng, 20_000).into(),
        },
        3..=5 => Op::Write {
            offset_bytes: rng.gen_range(0..30_000),
            data: bytes(rng, 9_000).into(),
        },
        6 => Op::Truncate {
            size_bytes: rng.gen_range(0..30_000),
        },
        7 => Op::Zero {
            offset_bytes: rng.gen_range(0..30_000),
            length_bytes: rng.gen_range(0..20_000),
        },
        8 => Op::Remove,
        9 => Op::SetXattr {
            key: format!("x{}", rng.gen_range(0..4)),
            value: bytes(rng, 50),
        },
        10 => Op::RemoveXattr {
            key: format!("x{}", rng.gen_range(0..4)),
        },
        11 => Op::OmapSet {
            entries: (0..rng.gen_range(1..5))
                .map(|_| (vec![rng.gen_range(0..20u8)], bytes(rng, 30)))
                .collect(),
        },
        12 => Op::OmapRemove {
            keys: (0..rng.gen_range(1..4))
                .map(|_| vec![rng.gen_range(0..20u8)])
                .collect(),
        },
        13 => Op::OmapClear,
        _ => Op::Defragment {
            offset_bytes: rng.gen_range(0..30_000),
            length_bytes: rng.gen_range(0..30_000),
        },
    }
}

/// Applies an operation to the model; `Err(errno)` when the store must refuse it.
fn model_apply(model: &mut Model, id: &ObjectId, op: &Op) -> Result<(), i32> {
    if let Op::Defragment { .. } = op {
        // Changes nothing a client sees, and creates nothing.
        return Ok(());
    }
    if let Op::Remove = op {
        return model.remove(id).map(|_| ()).ok_or(2);
    }
    if let Op::Create { exclusive: true } = op {
        if model.contains_key(id) {
            return Err(17);
        }
    }
    let object = model.entry(id.clone()).or_default();
    match op {
        Op::WriteFull { data } => object.data = data.to_vec(),
        Op::Write { offset_bytes, data } => {
            let end = *offset_bytes as usize + data.len();
            if object.data.len() < end && !data.is_empty() {
                object.data.resize(end, 0);
            }
            object.data[*offset_bytes as usize..*offset_bytes as usize + data.len()]
                .copy_from_slice(data);
        }
        Op::Truncate { size_bytes } => object.data.resize(*size_bytes as usize, 0),
        Op::Zero {
            offset_bytes,
            length_bytes,
        } if *length_bytes > 0 => {
            let end = (offset_bytes + length_bytes) as usize;
            if object.data.len() < end {
                object.data.resize(end, 0);
            }
            object.data[*offset_bytes as usize..end].fill(0);
        }
        Op::SetXattr { key, value } => {
            object.xattrs.insert(key.clone(), value.clone());
        }
        Op::RemoveXattr { key } => {
            object.xattrs.remove(key);
        }
        Op::OmapSet { entries } => object.omap.extend(entries.iter().cloned()),
        Op::OmapRemove { keys } => keys.iter().for_each(|k| {
            object.omap.remove(k);
        }),
        Op::OmapClear => object.omap.clear(),
        _ => {}
    }
    Ok(())
}

async fn compare(store: &Store, model: &Model) {
    for id in ids() {
        let (collection, name) = (id.collection.as_str(), id.name.as_str());
        match model.get(&id) {
            None => assert!(matches!(
                store.stat(collection, name).await,
                Err(StoreError::NotFound { .. })
            )),
            Some(object) => {
                let stat = store.stat(collection, name).await.expect("stat");
                assert_eq!(stat.size_bytes, object.data.len() as u64, "{id:?} size");
                let data = store
                    .read(collection, name, 0, 1 << 30)
                    .await
                    .expect("read");
                assert!(data == object.data, "{id:?} data differs");
                let middle = store
                    .read(collection, name, 1234, 5000)
                    .await
                    .expect("read");
                let from = object.data.len().min(1234);
                let to = object.data.len().min(6234);
                assert_eq!(middle, object.data[from..to], "{id:?} partial read");
                assert_eq!(
                    store.get_xattrs(collection, name).await.expect("xattrs"),
                    object.xattrs
                );
                let mut omap = BTreeMap::new();
                let mut after: Option<Vec<u8>> = None;
                loop {
                    let page = store
                        .omap_get_range(collection, name, after.as_deref(), 3)
                        .await
                        .expect("omap");
                    if page.is_empty() {
                        break;
                    }
                    after = page.last().map(|(k, _)| k.clone());
                    omap.extend(page);
                }
                assert_eq!(omap, object.omap, "{id:?} omap");
            }
        }
    }
    for collection in ["1.0", "1.1"] {
        let listed = store.list(collection, None, 100).await.expect("list");
        let expected: Vec<String> = model
            .keys()
            .filter(|id| id.collection == collection)
            .map(|id| id.name.clone())
            .collect();
        assert_eq!(listed, expected);
    }
    // The reads above may have started background defragmentations.
    store.wait_for_defragmentation().await;
    let statfs = store.statfs();
    assert_eq!(statfs.objects, model.len() as u64);
    store
        .check_consistency()
        .expect("allocator and counters match metadata");
}

async fn run_model(seed: u64, config: StoreConfig, steps: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let meta = dir.path().join("meta");
    let device: Arc<dyn Device> = Arc::new(MemoryDevice::new("mem", 16 << 20).expect("device"));
    let mut store = Store::create(Arc::clone(&device), &meta, config.clone())
        .await
        .expect("create");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut model = Model::new();
    let ids = ids();
    for step in 0..steps {
        let mut transaction = Transaction::new(step as u64);
        let mut next = model.clone();
        let mut expected = Ok(());
        let primary = ids[rng.gen_range(0..ids.len())].clone();
        for _ in 0..rng.gen_range(1..4) {
            let id = if rng.gen_bool(0.2) {
                ids[rng.gen_range(0..ids.len())].clone()
            } else {
                primary.clone()
            };
            let op = random_op(&mut rng);
            if expected.is_ok() {
                expected = model_apply(&mut next, &id, &op);
            }
            transaction.push(&id, op);
        }
        let result = store.apply(transaction.clone()).await;
        match (&result, expected) {
            (Ok(()), Ok(())) => model = next,
            (Err(error), Err(errno)) => assert_eq!(error.errno(), errno, "step {step}"),
            _ => panic!(
                "seed {seed} step {step}: store {result:?}, model {expected:?} for {transaction:?}"
            ),
        }
        if step % 25 == 24 {
            compare(&store, &model).await;
        }
        if step % 100 == 99 {
            store.shutdown().await.expect("shutdown");
            store = Store::open(Arc::clone(&device), &meta, config.clone())
                .await
                .expect("remount");
            compare(&store, &model).await;
        }
    }
    compare(&store, &model).await;
    store.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_4k_units() {
    for seed in 0..4 {
        run_model(seed, StoreConfig::default(), 400).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_16k_units_4k_checksums() {
    let config = StoreConfig {
        min_alloc_size_bytes: 16384,
        ..StoreConfig::default()
    };
    for seed in 100..103 {
        run_model(seed, config.clone(), 400).await;
    }
}

/// An onode cache of about one entry per lock shard: objects leave it and come back from the
/// database all the time, and every read must still see the last committed state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_with_a_tiny_onode_cache() {
    let config = StoreConfig {
        onode_cache_bytes: 200 * 1024,
        ..StoreConfig::default()
    };
    for seed in 200..203 {
        run_model(seed, config.clone(), 400).await;
    }
}
