//! The tier against a model: random ops on random objects through the overlay and, the same
//! ops, on a plain pool of the in-memory backend (the model); every read, stat and listing
//! must agree. Between ops the test flushes, evicts everything, changes the cache mode and
//! restarts the tier (a new `TieredRados` over the same cluster: what a restart of `strata
//! serve` finds), so promotion, flush, eviction and recovery of dirty state are all crossed.

use std::collections::BTreeSet;
use std::sync::Arc;

use rados::memory::MemoryRados;
use rados::{Bytes, IoCtx, PoolSpec, Rados, WriteOp};
use tier::{CacheMode, TieredRados};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const BLOCK_BYTES: u64 = 4096;

async fn open(inner: &Arc<dyn Rados>) -> Arc<TieredRados> {
    TieredRados::open(
        inner.clone(),
        Arc::new(worker::SystemClock::new()),
        tier::system_wall_clock(),
    )
    .await
    .expect("open tiers")
}

fn random_op(rng: &mut Rng) -> WriteOp {
    let offset = rng.below(6 * BLOCK_BYTES);
    let length = 1 + rng.below(2 * BLOCK_BYTES);
    let byte = rng.below(250) as u8 + 1;
    let data = || Bytes::from(vec![byte; length as usize]);
    match rng.below(12) {
        0 => WriteOp::new().write_full(data()),
        1..=3 => WriteOp::new().write(offset, data()),
        4 => WriteOp::new().append(data()),
        5 => WriteOp::new().truncate(rng.below(6 * BLOCK_BYTES)),
        6 => WriteOp::new().zero(offset, length),
        7 => WriteOp::new().remove(),
        8 => WriteOp::new().set_xattr(format!("x{}", rng.below(3)), vec![byte]),
        9 => WriteOp::new().omap_set(vec![(vec![rng.below(4) as u8], vec![byte])]),
        10 => WriteOp::new().create(rng.below(2) == 0),
        _ => WriteOp::new()
            .compare_xattr("x0", rados::Comparison::Equal, vec![byte])
            .write(offset, data()),
    }
}

fn same<T: PartialEq + std::fmt::Debug>(
    what: &str,
    tiered: rados::Result<T>,
    model: rados::Result<T>,
) {
    let short = |value: &dyn std::fmt::Debug| {
        let text = format!("{value:?}");
        text.chars().take(300).collect::<String>()
    };
    match (&tiered, &model) {
        (Ok(a), Ok(b)) => assert!(a == b, "{what}: tiered {} vs model {}", short(a), short(b)),
        (Err(a), Err(b)) => assert_eq!(
            std::mem::discriminant(a),
            std::mem::discriminant(b),
            "{what}: tiered {a:?} vs model {b:?}"
        ),
        _ => panic!(
            "{what}: tiered {} vs model {}",
            short(&tiered),
            short(&model)
        ),
    }
}

async fn compare(tiered: &dyn IoCtx, model: &dyn IoCtx, objects: &[String], step: usize) {
    for name in objects {
        let what = format!("step {step} object {name}");
        same(
            &format!("{what} read"),
            tiered.read(name, 0, 1 << 20).await,
            model.read(name, 0, 1 << 20).await,
        );
        same(
            &format!("{what} size"),
            tiered.stat(name).await.map(|s| s.size_bytes),
            model.stat(name).await.map(|s| s.size_bytes),
        );
        same(
            &format!("{what} xattrs"),
            tiered.get_xattrs(name).await,
            model.get_xattrs(name).await,
        );
        same(
            &format!("{what} omap"),
            tiered
                .omap_get_vals(name, None, b"", 100)
                .await
                .map(|p| p.entries),
            model
                .omap_get_vals(name, None, b"", 100)
                .await
                .map(|p| p.entries),
        );
    }
    let listed: BTreeSet<String> = tiered.list_all().await.unwrap().into_iter().collect();
    let expected: BTreeSet<String> = model.list_all().await.unwrap().into_iter().collect();
    assert_eq!(listed, expected, "step {step}: listing");
}

async fn run(seed: u64, settings: &[(&str, &str)], steps: usize) {
    let inner: Arc<dyn Rados> = Arc::new(MemoryRados::new());
    for name in ["base", "cache", "model"] {
        inner
            .pool_create(PoolSpec::new(name).with_size(1).with_pg_num(8))
            .await
            .unwrap();
    }
    let mut tiered = open(&inner).await;
    tiered.tier_add("base", "cache", false).await.unwrap();
    tiered
        .pool_set("cache", "tier_block_bytes", "4096")
        .await
        .unwrap();
    for (key, value) in settings {
        tiered.pool_set("cache", key, value).await.unwrap();
    }
    tiered
        .cache_mode("cache", CacheMode::Writeback, false)
        .await
        .unwrap();
    tiered.set_overlay("base", "cache").await.unwrap();
    let model = inner.io_ctx("model").await.unwrap();
    let objects: Vec<String> = (0..6).map(|i| format!("object-{i}")).collect();
    let mut rng = Rng(seed);
    for step in 0..steps {
        let io = tiered.io_ctx("base").await.unwrap();
        let name = &objects[rng.below(objects.len() as u64) as usize];
        match rng.below(40) {
            0 => {
                // Restart: the process stops between ops and a new one opens the tiers.
                tiered.quiesce().await;
                tiered.shutdown().await;
                tiered = open(&inner).await;
            }
            1 => {
                tiered.flush_evict_all("cache").unwrap();
            }
            2 => {
                let tier = tiered.overlay_of("base").unwrap();
                let _ = tier.flush(name).await;
            }
            3 => {
                let mode = [CacheMode::Writeback, CacheMode::Proxy, CacheMode::Readproxy]
                    [rng.below(3) as usize];
                tiered.cache_mode("cache", mode, false).await.unwrap();
            }
            _ => {
                let op = random_op(&mut rng);
                let tiered_result = io.operate(name, op.clone()).await;
                let model_result = model.operate(name, op.clone()).await;
                same(
                    &format!("step {step} {op:?} on {name}"),
                    tiered_result,
                    model_result,
                );
            }
        }
        if step % 7 == 0 {
            compare(io.as_ref(), model.as_ref(), &objects, step).await;
        }
    }
    // Everything flushed, the base pool alone holds what the model holds.
    tiered
        .cache_mode("cache", CacheMode::Proxy, false)
        .await
        .unwrap();
    tiered.flush_evict_all("cache").unwrap();
    let mut detached = false;
    for _ in 0..2000 {
        match tiered.remove_overlay("base").await {
            Ok(()) => {
                detached = true;
                break;
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(5)).await,
        }
    }
    assert!(detached, "the cache did not empty: {:?}", tiered.stats());
    let base = inner.io_ctx("base").await.unwrap();
    for name in &objects {
        same(
            &format!("after flush {name} read"),
            base.read(name, 0, 1 << 20).await,
            model.read(name, 0, 1 << 20).await,
        );
        let mut xattrs = base.get_xattrs(name).await;
        if let Ok(xattrs) = xattrs.as_mut() {
            xattrs.retain(|k, _| !k.starts_with("strata.tier"));
        }
        same(
            &format!("after flush {name} xattrs"),
            xattrs,
            model.get_xattrs(name).await,
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writeback_promote_at_once_matches_the_model() {
    for seed in 1..=4 {
        run(seed, &[("hit_set_count", "0")], 600).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writeback_proxy_then_promote_matches_the_model() {
    for seed in 11..=14 {
        run(seed, &[], 600).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn predictive_matches_the_model() {
    for seed in 21..=24 {
        run(
            seed,
            &[
                ("tier_admission", "predictive"),
                ("predictive_threshold", "0"),
                ("target_max_objects", "3"),
            ],
            600,
        )
        .await;
    }
}
