//! The cache against a model: random concurrent I/O in every mode (and with modes switched
//! while running), compared read by read with a plain byte array; then the core alone must
//! equal the model once the cache is flushed. Crash (abandon without stop) and clean stop
//! followed by load.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use blockcache::{
    BlockCache, CacheConfig, CacheMode, CleaningConfig, IoClasses, PromotionConfig,
    SeqCutoffConfig, SeqCutoffPolicy, StartMode,
};
use device::{Device, DeviceError, DeviceKind, DeviceStats, MemoryDevice};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const BLOCK: u64 = 4096;
const CORE_BYTES: u64 = 16 << 20;
const TASKS: u64 = 4;

fn devices(cache_bytes: u64) -> (Arc<dyn Device>, Arc<dyn Device>) {
    let cache: Arc<dyn Device> =
        Arc::new(MemoryDevice::with_block_size("cache", cache_bytes, 4096).unwrap());
    let core: Arc<dyn Device> =
        Arc::new(MemoryDevice::with_block_size("core", CORE_BYTES, 4096).unwrap());
    (cache, core)
}

fn config(mode: CacheMode, line_size_bytes: u64) -> CacheConfig {
    CacheConfig {
        line_size_bytes,
        mode,
        seq_cutoff: SeqCutoffConfig {
            policy: SeqCutoffPolicy::Always,
            threshold_bytes: 64 << 10,
            promotion_count: 2,
            streams_max: 16,
        },
        cleaning: CleaningConfig::Acp {
            wake_up_ms: 5,
            flush_max_buffers: 32,
        },
        ..CacheConfig::default()
    }
}

/// Each task owns a disjoint slice of the core and keeps its own model of it.
async fn random_io(cache: Arc<BlockCache>, seed: u64, task: u64, ops: usize) -> Vec<u8> {
    let region = CORE_BYTES / TASKS;
    let base = task * region;
    let mut model = vec![0u8; region as usize];
    let mut rng = ChaCha8Rng::seed_from_u64(seed * 100 + task);
    let mut sequential_at = 0u64;
    for _ in 0..ops {
        let blocks = if rng.gen_bool(0.7) {
            1
        } else {
            rng.gen_range(1..=40u64)
        };
        let mut offset = rng.gen_range(0..region / BLOCK - blocks) * BLOCK;
        if rng.gen_bool(0.2) {
            // Sequential runs exercise the cut-off.
            if sequential_at + blocks * BLOCK > region {
                sequential_at = 0;
            }
            offset = sequential_at;
            sequential_at += blocks * BLOCK;
        }
        let length = (blocks * BLOCK) as usize;
        let at = offset as usize;
        if rng.gen_bool(0.5) {
            let mut data = vec![0u8; length];
            rng.fill(&mut data[..]);
            cache.write_at(base + offset, &data).await.unwrap();
            model[at..at + length].copy_from_slice(&data);
        } else {
            let mut back = vec![0u8; length];
            cache.read_at(base + offset, &mut back).await.unwrap();
            assert!(
                back == model[at..at + length],
                "task {task} read at {offset} differs"
            );
        }
        if rng.gen_bool(0.01) {
            cache.flush().await.unwrap();
        }
    }
    model
}

async fn run_mixed(
    seed: u64,
    modes: &[CacheMode],
    line_size_bytes: u64,
    promotion: PromotionConfig,
) {
    let (cache_device, core) = devices(2 << 20); // far smaller than the core: constant eviction
    let mut config = config(modes[0], line_size_bytes);
    config.promotion = promotion;
    let cache = BlockCache::start(
        cache_device,
        Arc::clone(&core),
        config,
        IoClasses::default(),
        StartMode::Create,
    )
    .await
    .unwrap();
    let switcher = {
        let cache = Arc::clone(&cache);
        let modes = modes.to_vec();
        tokio::spawn(async move {
            for round in 0..20 {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                cache
                    .set_mode(modes[round % modes.len()], round % 3 == 0)
                    .await
                    .unwrap();
            }
        })
    };
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        tasks.push(tokio::spawn(random_io(Arc::clone(&cache), seed, task, 600)));
    }
    let mut model = Vec::new();
    for task in tasks {
        model.extend(task.await.unwrap());
    }
    switcher.await.unwrap();
    cache.check_invariants();
    cache.flush_dirty().await.unwrap();
    assert_eq!(cache.cache_stats().dirty_lines, 0);
    let mut core_bytes = vec![0u8; CORE_BYTES as usize];
    core.read_at(0, &mut core_bytes).await.unwrap();
    assert!(
        core_bytes == model,
        "core differs from the model after flushing (modes {modes:?})"
    );
    cache.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_mode_keeps_data_intact() {
    use CacheMode::*;
    for (seed, mode) in [Wt, Wb, Wa, Wi, Wo, Pt].into_iter().enumerate() {
        run_mixed(seed as u64, &[mode], 4096, PromotionConfig::Always).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switching_modes_while_running_keeps_data_intact() {
    use CacheMode::*;
    run_mixed(
        11,
        &[Wb, Wt, Wo, Pt, Wa, Wb, Wi],
        4096,
        PromotionConfig::Always,
    )
    .await;
    let nhit = PromotionConfig::Nhit {
        threshold: 2,
        trigger_percent: 0,
    };
    run_mixed(12, &[Wb, Wi, Wo, Wt], 16384, nhit).await;
    run_mixed(13, &[Wb, Pt, Wb], 65536, PromotionConfig::Always).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_refuses_an_existing_cache_and_load_needs_one() {
    let (cache_device, core) = devices(4 << 20);
    let config = config(CacheMode::Wb, 4096);
    assert!(BlockCache::start(
        Arc::clone(&cache_device),
        Arc::clone(&core),
        config.clone(),
        IoClasses::default(),
        StartMode::Load
    )
    .await
    .is_err());
    let cache = BlockCache::start(
        Arc::clone(&cache_device),
        Arc::clone(&core),
        config.clone(),
        IoClasses::default(),
        StartMode::Create,
    )
    .await
    .unwrap();
    cache.stop().await.unwrap();
    assert!(matches!(
        BlockCache::start(
            Arc::clone(&cache_device),
            Arc::clone(&core),
            config.clone(),
            IoClasses::default(),
            StartMode::Create
        )
        .await,
        Err(blockcache::CacheError::Exists)
    ));
    let forced = BlockCache::start(
        cache_device,
        core,
        config,
        IoClasses::default(),
        StartMode::Force,
    )
    .await
    .unwrap();
    assert_eq!(forced.cache_stats().occupied_lines, 0);
    forced.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clean_stop_loads_warm_and_crash_recovers_dirty_lines() {
    let (cache_device, core) = devices(8 << 20);
    let mut config = config(CacheMode::Wb, 4096);
    config.cleaning = CleaningConfig::Nop;
    config.flush_on_stop = false;
    let start = |mode| {
        BlockCache::start(
            Arc::clone(&cache_device),
            Arc::clone(&core),
            config.clone(),
            IoClasses::default(),
            mode,
        )
    };
    let cache = start(StartMode::Create).await.unwrap();
    for block in 0..200u64 {
        cache
            .write_at(block * 3 * BLOCK, &vec![block as u8 + 1; BLOCK as usize])
            .await
            .unwrap();
    }
    let mut back = vec![0u8; BLOCK as usize];
    for block in 200..300u64 {
        cache.read_at(block * 3 * BLOCK, &mut back).await.unwrap(); // clean lines
    }
    let before = cache.cache_stats();
    assert_eq!(before.dirty_lines, 200);
    cache.stop().await.unwrap();

    // Clean stop: everything comes back, dirty and clean.
    let cache = start(StartMode::Load).await.unwrap();
    let warm = cache.cache_stats();
    assert_eq!((warm.dirty_lines, warm.occupied_lines), (200, 300));
    for block in 200..300u64 {
        cache.read_at(block * 3 * BLOCK, &mut back).await.unwrap();
    }
    assert_eq!(cache.cache_stats().reads.hits, 100, "warm: every read hits");
    // More writes, then a crash (no stop).
    for block in 0..100u64 {
        cache
            .write_at(block * 3 * BLOCK, &vec![block as u8 + 101; BLOCK as usize])
            .await
            .unwrap();
    }
    cache.abandon();
    drop(cache);

    let cache = start(StartMode::Load).await.unwrap();
    let recovered = cache.cache_stats();
    assert_eq!(
        recovered.dirty_lines, 0,
        "recovered dirty lines are flushed at load"
    );
    assert_eq!(
        recovered.occupied_lines, 200,
        "after a crash only dirty lines are trusted"
    );
    for block in 0..200u64 {
        let expected = if block < 100 {
            block as u8 + 101
        } else {
            block as u8 + 1
        };
        core.read_at(block * 3 * BLOCK, &mut back).await.unwrap();
        assert!(back.iter().all(|&b| b == expected), "core block {block}");
    }
    cache.check_invariants();
    cache.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_001_classes_and_cutoff_send_large_and_sequential_io_to_the_core() {
    let (cache_device, core) = devices(8 << 20);
    let mut config = config(CacheMode::Wb, 4096);
    config.seq_cutoff = SeqCutoffConfig {
        policy: SeqCutoffPolicy::Always,
        threshold_bytes: 16 << 10,
        ..SeqCutoffConfig::default()
    };
    let classes = IoClasses::parse_csv(
        "IO class id,IO class name,Eviction priority,Allocation\n0,unclassified,22,0\n1,request_size:le:131072&done,1,1\n",
    )
    .unwrap();
    let cache = BlockCache::start(cache_device, core, config, classes, StartMode::Create)
        .await
        .unwrap();
    let big = vec![7u8; 512 << 10];
    cache.write_at(0, &big).await.unwrap();
    let small = vec![9u8; 4096];
    for index in 0..16u64 {
        cache
            .write_at((8 << 20) + index * 65536, &small)
            .await
            .unwrap();
    }
    let stats = cache.cache_stats();
    assert_eq!(stats.writes.pass_through, 1, "512 KiB is not cached");
    assert_eq!(stats.dirty_lines, 16);
    assert_eq!(stats.cache_write_bytes, 16 * 4096);
    println!("{}", stats.render_text());
    cache.stop().await.unwrap();
}

/// A device that can be frozen like a killed process: once frozen, no call completes any more
/// (a call already inside the inner device may or may not have taken effect, as with a
/// `pwrite` in flight at `kill -9`), so the inner device keeps exactly what reached it.
struct Freezable {
    inner: Arc<dyn Device>,
    frozen: Arc<AtomicBool>,
}

impl Freezable {
    fn wrap(inner: &Arc<dyn Device>, frozen: &Arc<AtomicBool>) -> Arc<dyn Device> {
        Arc::new(Freezable {
            inner: Arc::clone(inner),
            frozen: Arc::clone(frozen),
        })
    }

    async fn gate(&self) {
        if self.frozen.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
    }
}

#[async_trait::async_trait]
impl Device for Freezable {
    async fn read_at(&self, offset_bytes: u64, buffer: &mut [u8]) -> Result<(), DeviceError> {
        self.gate().await;
        let result = self.inner.read_at(offset_bytes, buffer).await;
        self.gate().await;
        result
    }
    async fn write_at(&self, offset_bytes: u64, data: &[u8]) -> Result<(), DeviceError> {
        self.gate().await;
        let result = self.inner.write_at(offset_bytes, data).await;
        self.gate().await;
        result
    }
    async fn flush(&self) -> Result<(), DeviceError> {
        self.gate().await;
        let result = self.inner.flush().await;
        self.gate().await;
        result
    }
    async fn discard(&self, offset_bytes: u64, length_bytes: u64) -> Result<(), DeviceError> {
        self.gate().await;
        let result = self.inner.discard(offset_bytes, length_bytes).await;
        self.gate().await;
        result
    }
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }
    fn block_size_bytes(&self) -> u64 {
        self.inner.block_size_bytes()
    }
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn kind(&self) -> DeviceKind {
        self.inner.kind()
    }
    fn stats(&self) -> DeviceStats {
        self.inner.stats()
    }
}

/// What one writer knows after a crash: the last acknowledged value of each block it wrote,
/// and the request in flight when the devices froze (which may or may not have landed,
/// wholly or per block: a block device does not promise atomic multi-block writes).
#[derive(Default)]
struct WriterLog {
    acknowledged: HashMap<u64, u8>,
    in_flight: Option<(u64, u64, u8)>,
}

/// Write-back crash recovery at a random instant: concurrent writers of 1..4 blocks (so
/// cleaning, eviction of clean lines and in-place rewrites of dirty lines all happen) while
/// acp cleans; the devices freeze at a random moment as a `kill -9` would leave them; a load
/// must then give every block its last acknowledged value, or the value of the write that was
/// in flight over it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_back_crash_at_a_random_instant_keeps_every_acknowledged_write() {
    const SEEDS: u64 = 24;
    const WRITERS: u64 = 3;
    let blocks_per_writer = 3000u64; // 9,000 blocks over a cache of about 8,000 lines
    for seed in 0..SEEDS {
        let cache_device: Arc<dyn Device> =
            Arc::new(MemoryDevice::with_block_size("cache", 32 << 20, 4096).unwrap());
        let core: Arc<dyn Device> =
            Arc::new(MemoryDevice::with_block_size("core", 128 << 20, 4096).unwrap());
        let frozen = Arc::new(AtomicBool::new(false));
        let mut config = config(CacheMode::Wb, 4096);
        config.flush_on_stop = false;
        config.cleaning = CleaningConfig::Acp {
            wake_up_ms: 2,
            flush_max_buffers: 64,
        };
        let cache = BlockCache::start(
            Freezable::wrap(&cache_device, &frozen),
            Freezable::wrap(&core, &frozen),
            config.clone(),
            IoClasses::default(),
            StartMode::Force,
        )
        .await
        .unwrap();
        let logs: Vec<Arc<Mutex<WriterLog>>> = (0..WRITERS).map(|_| Arc::default()).collect();
        let mut writers = Vec::new();
        for (writer, log) in logs.iter().enumerate() {
            let (cache, log) = (Arc::clone(&cache), Arc::clone(log));
            writers.push(tokio::spawn(async move {
                let mut rng = ChaCha8Rng::seed_from_u64(seed * 100 + writer as u64);
                let base = writer as u64 * blocks_per_writer;
                for round in 0u32.. {
                    let count = rng.gen_range(1..=4u64);
                    let first = base + rng.gen_range(0..blocks_per_writer - count);
                    let value = (round % 251) as u8 + 1;
                    log.lock().unwrap().in_flight = Some((first, count, value));
                    let data = vec![value; (count * BLOCK) as usize];
                    cache.write_at(first * BLOCK, &data).await.unwrap();
                    let mut log = log.lock().unwrap();
                    log.in_flight = None;
                    for block in first..first + count {
                        log.acknowledged.insert(block, value);
                    }
                }
            }));
        }
        // Some writes first (a loaded CI machine may start the writers late), then a random
        // moment.
        let started = std::time::Instant::now();
        while logs
            .iter()
            .map(|log| log.lock().unwrap().acknowledged.len())
            .sum::<usize>()
            < 200
        {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "writers stalled"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed + 1_000);
        tokio::time::sleep(Duration::from_millis(rng.gen_range(0..300))).await;
        frozen.store(true, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(20)).await;
        cache.abandon();
        for writer in &writers {
            writer.abort();
        }

        let cache = BlockCache::start(
            Arc::clone(&cache_device),
            Arc::clone(&core),
            config.clone(),
            IoClasses::default(),
            StartMode::Load,
        )
        .await
        .unwrap();
        let mut back = vec![0u8; BLOCK as usize];
        let mut checked = 0;
        for log in &logs {
            let log = std::mem::take(&mut *log.lock().unwrap());
            for (&block, &value) in &log.acknowledged {
                cache.read_at(block * BLOCK, &mut back).await.unwrap();
                let landed = log.in_flight.is_some_and(|(first, count, pending)| {
                    (first..first + count).contains(&block) && back.iter().all(|&b| b == pending)
                });
                assert!(
                    landed || back.iter().all(|&b| b == value),
                    "seed {seed}: block {block} acknowledged {value}, read {}",
                    back[0]
                );
                checked += 1;
            }
        }
        assert!(checked > 100, "seed {seed}: only {checked} blocks written");
        cache.check_invariants();
        cache.stop().await.unwrap();
    }
}

/// Flush on demand walks dirty lines in core address order and merges neighbours, so a core
/// region written at random goes back as a few long writes, not one write per line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flush_writes_neighbouring_dirty_lines_as_long_core_writes() {
    let cache_device: Arc<dyn Device> =
        Arc::new(MemoryDevice::with_block_size("cache", 64 << 20, 4096).unwrap());
    let core: Arc<dyn Device> =
        Arc::new(MemoryDevice::with_block_size("core", 64 << 20, 4096).unwrap());
    let mut config = config(CacheMode::Wb, 4096);
    config.cleaning = CleaningConfig::Nop;
    let cache = BlockCache::start(
        Arc::clone(&cache_device),
        Arc::clone(&core),
        config,
        IoClasses::default(),
        StartMode::Create,
    )
    .await
    .unwrap();
    let lines = 12_000u64; // several flush rounds
    let mut order: Vec<u64> = (0..lines).collect();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for index in (1..order.len()).rev() {
        order.swap(index, rng.gen_range(0..=index));
    }
    for &block in &order {
        let data = vec![(block % 250) as u8 + 1; BLOCK as usize];
        cache.write_at(block * BLOCK, &data).await.unwrap();
    }
    let before = core.stats().write.ops;
    cache.flush_dirty().await.unwrap();
    let writes = core.stats().write.ops - before;
    assert_eq!(cache.cache_stats().dirty_lines, 0);
    assert!(
        writes <= 8,
        "{lines} neighbouring dirty lines took {writes} core writes"
    );
    let mut back = vec![0u8; (lines * BLOCK) as usize];
    core.read_at(0, &mut back).await.unwrap();
    for (block, chunk) in back.chunks_exact(BLOCK as usize).enumerate() {
        let expected = (block as u64 % 250) as u8 + 1;
        assert!(chunk.iter().all(|&b| b == expected), "core block {block}");
    }
    cache.check_invariants();
    cache.stop().await.unwrap();
}

/// One cache over two cores (one of an odd size, so a gap follows it), each seen through its
/// own view: random writes through both views read back, the cores hold them after a flush,
/// and neither core ever sees the other's data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_cores_behind_one_cache_keep_their_own_data() {
    use blockcache::{CoreSet, CoreView};
    let cores: Vec<Arc<dyn Device>> = vec![
        Arc::new(MemoryDevice::with_block_size("core1", 1000 * BLOCK, 4096).unwrap()),
        Arc::new(MemoryDevice::with_block_size("core2", 600 * BLOCK, 4096).unwrap()),
    ];
    let set = Arc::new(CoreSet::new(cores.clone()).unwrap());
    let cache_device: Arc<dyn Device> =
        Arc::new(MemoryDevice::with_block_size("cache", 4 << 20, 4096).unwrap());
    let mut config = config(CacheMode::Wb, 16384);
    config.cleaning = CleaningConfig::Acp {
        wake_up_ms: 1,
        flush_max_buffers: 16,
    };
    let cache = BlockCache::start(
        cache_device,
        Arc::clone(&set) as Arc<dyn Device>,
        config,
        IoClasses::default(),
        StartMode::Create,
    )
    .await
    .unwrap();
    let views: Vec<CoreView> = (0..2)
        .map(|index| {
            let (start, size) = set.window(index);
            CoreView::new(format!("view{index}"), cache.clone(), start, size).unwrap()
        })
        .collect();
    let mut models: Vec<Vec<u8>> = cores
        .iter()
        .map(|core| vec![0u8; core.size_bytes() as usize])
        .collect();
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut back = vec![0u8; 8 * BLOCK as usize];
    for round in 0..4_000u32 {
        let index = rng.gen_range(0..2);
        let blocks = models[index].len() as u64 / BLOCK;
        let count = rng.gen_range(1..=8u64);
        let first = rng.gen_range(0..=blocks - count);
        let range = (first * BLOCK) as usize..((first + count) * BLOCK) as usize;
        if rng.gen_bool(0.6) {
            let data: Vec<u8> = (0..range.len())
                .map(|at| (round as usize * 7 + at / 512 + index) as u8)
                .collect();
            views[index].write_at(first * BLOCK, &data).await.unwrap();
            models[index][range].copy_from_slice(&data);
        } else {
            let part = &mut back[..range.len()];
            views[index].read_at(first * BLOCK, part).await.unwrap();
            assert!(part == &models[index][range], "round {round} core {index}");
        }
    }
    assert!(views[1]
        .read_at(600 * BLOCK, &mut back[..4096])
        .await
        .is_err());
    cache.flush_dirty().await.unwrap();
    for (core, model) in cores.iter().zip(&models) {
        let mut all = vec![0u8; model.len()];
        core.read_at(0, &mut all).await.unwrap();
        assert!(&all == model, "{} after the flush", core.name());
    }
    cache.check_invariants();
    cache.stop().await.unwrap();
}
