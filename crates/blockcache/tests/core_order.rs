//! Pass-through requests reach the core in the order they reached the cache.
//!
//! Why it matters: an HDD core skips seek and rotation only for the request that starts where
//! the previous one ended (see `device::model`), so a sequential stream that the cache
//! reorders on its way to the core pays a positioning for every overtaken request, and under
//! an NCQ-like scheduler each out-of-order request leaves a hole that waits behind the stream.
//! The regression this pins: a 512 KiB request takes 128 stripe locks, and tokio's
//! cooperative budget (128 per task poll) made an uncontended lock yield mid-request, so on
//! the NBD server's one task (all requests of a connection are futures of one task) the
//! requests decoded after it reached the core first. And a second one: stripes repeated every
//! 16 MiB, so a pass-through write held in the core's queue held up the write 16 MiB further
//! on in the same stream (it waited for the same exclusive stripes).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use blockcache::{
    BlockCache, CacheConfig, CacheMode, CleaningConfig, IoClasses, SeqCutoffConfig,
    SeqCutoffPolicy, StartMode,
};
use device::{Device, DeviceError, DeviceKind, DeviceStats, MemoryDevice};
use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::FutureExt;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::sync::Semaphore;

const CORE_BYTES: u64 = 64 << 20;
/// The random work's region; the sequential stream runs in the other half.
const RANDOM_BYTES: u64 = CORE_BYTES / 2;
const SEQUENTIAL_REQUEST_BYTES: usize = 512 << 10;
/// As seed 001's sequential fio jobs.
const SEQUENTIAL_IN_FLIGHT: usize = 8;

/// A core that records the reads and writes it is asked for, in the order they arrive; it
/// can hold the write at one offset until released (as a disk queue holds a request).
struct Recording {
    inner: Arc<dyn Device>,
    arrivals: Mutex<Vec<(bool, u64, u64)>>,
    /// Offset of the write to hold, if any.
    hold_write_at: Mutex<Option<u64>>,
    /// Gives the held write its permit.
    release: Semaphore,
    /// The held write was released (arrivals after this prove nothing).
    released: AtomicBool,
}

impl Recording {
    fn take(&self) -> Vec<(bool, u64, u64)> {
        std::mem::take(&mut *self.arrivals.lock().unwrap())
    }

    fn seen(&self, offset_bytes: u64) -> bool {
        let arrivals = self.arrivals.lock().unwrap();
        arrivals
            .iter()
            .any(|&(_, offset, _)| offset == offset_bytes)
    }

    fn let_go(&self) {
        self.released.store(true, Ordering::SeqCst);
        self.release.add_permits(1);
    }
}

#[async_trait::async_trait]
impl Device for Recording {
    async fn read_at(&self, offset_bytes: u64, buffer: &mut [u8]) -> Result<(), DeviceError> {
        let arrival = (false, offset_bytes, buffer.len() as u64);
        self.arrivals.lock().unwrap().push(arrival);
        self.inner.read_at(offset_bytes, buffer).await
    }
    async fn write_at(&self, offset_bytes: u64, data: &[u8]) -> Result<(), DeviceError> {
        let arrival = (true, offset_bytes, data.len() as u64);
        self.arrivals.lock().unwrap().push(arrival);
        if *self.hold_write_at.lock().unwrap() == Some(offset_bytes) {
            self.release.acquire().await.unwrap().forget();
        }
        self.inner.write_at(offset_bytes, data).await
    }
    async fn flush(&self) -> Result<(), DeviceError> {
        self.inner.flush().await
    }
    async fn discard(&self, offset_bytes: u64, length_bytes: u64) -> Result<(), DeviceError> {
        self.inner.discard(offset_bytes, length_bytes).await
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

/// Seed 001's cache: wb, 4 KiB lines, cut-off always at 16 KiB, requests up to 128 KiB
/// cached, alru.
async fn seed_cache() -> (Arc<BlockCache>, Arc<Recording>) {
    let cache_device: Arc<dyn Device> =
        Arc::new(MemoryDevice::with_block_size("cache", 128 << 20, 4096).unwrap());
    let core = Arc::new(Recording {
        inner: Arc::new(MemoryDevice::with_block_size("core", CORE_BYTES, 4096).unwrap()),
        arrivals: Mutex::new(Vec::new()),
        hold_write_at: Mutex::new(None),
        release: Semaphore::new(0),
        released: AtomicBool::new(false),
    });
    let config = CacheConfig {
        line_size_bytes: 4096,
        mode: CacheMode::Wb,
        seq_cutoff: SeqCutoffConfig {
            policy: SeqCutoffPolicy::Always,
            threshold_bytes: 16 << 10,
            ..SeqCutoffConfig::default()
        },
        cleaning: CleaningConfig::Alru {
            wake_up_ms: 1000,
            staleness_ms: 5000,
            flush_max_buffers: 100,
            activity_threshold_ms: 1000,
        },
        ..CacheConfig::default()
    };
    let classes = IoClasses::parse_csv(
        "IO class id,IO class name,Eviction priority,Allocation\n\
         0,unclassified,22,0.00\n\
         1,request_size:le:131072&done,1,1.00\n",
    )
    .unwrap();
    let cache = BlockCache::start(
        cache_device,
        Arc::clone(&core) as Arc<dyn Device>,
        config,
        classes,
        StartMode::Create,
    )
    .await
    .unwrap();
    (cache, core)
}

/// Random 4 KiB writes and reads over the random region, 32 at a time, then a flush of the
/// dirty lines: the work seed 001 runs before its sequential jobs.
async fn random_cached_work(cache: &BlockCache) {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let blocks = RANDOM_BYTES / 4096;
    let mut in_flight = FuturesUnordered::new();
    for index in 0..4096u64 {
        let offset = rng.gen_range(0..blocks) * 4096;
        let write = index % 2 == 0;
        in_flight.push(async move {
            let mut buffer = vec![index as u8; 4096];
            if write {
                cache.write_at(offset, &buffer).await
            } else {
                cache.read_at(offset, &mut buffer).await
            }
        });
        if in_flight.len() >= 32 {
            in_flight.next().await.unwrap().unwrap();
        }
    }
    while let Some(result) = in_flight.next().await {
        result.unwrap();
    }
    cache.flush_dirty().await.unwrap();
}

/// A sequential stream of 512 KiB requests over the sequential region, `SEQUENTIAL_IN_FLIGHT`
/// at a time as futures of this one task (as the NBD server runs a connection's requests):
/// each is polled once before the next is added, and a new one is added when one completes.
async fn sequential_stream(cache: &BlockCache, write: bool) {
    let mut in_flight = FuturesUnordered::new();
    let requests = (CORE_BYTES - RANDOM_BYTES) / SEQUENTIAL_REQUEST_BYTES as u64;
    for index in 0..requests {
        let offset = RANDOM_BYTES + index * SEQUENTIAL_REQUEST_BYTES as u64;
        in_flight.push(async move {
            let mut buffer = vec![7u8; SEQUENTIAL_REQUEST_BYTES];
            if write {
                cache.write_at(offset, &buffer).await
            } else {
                cache.read_at(offset, &mut buffer).await
            }
        });
        // Poll the new request once before taking the next, as the server's loop does.
        if let Some(Some(result)) = in_flight.next().now_or_never() {
            result.unwrap();
        }
        if in_flight.len() >= SEQUENTIAL_IN_FLIGHT {
            in_flight.next().await.unwrap().unwrap();
        }
    }
    while let Some(result) = in_flight.next().await {
        result.unwrap();
    }
}

/// Checks that the core saw one contiguous ascending stream of whole requests.
fn assert_contiguous(arrivals: &[(bool, u64, u64)], write: bool) {
    let requests = ((CORE_BYTES - RANDOM_BYTES) / SEQUENTIAL_REQUEST_BYTES as u64) as usize;
    assert_eq!(arrivals.len(), requests, "one core request per request");
    let mut expected = RANDOM_BYTES;
    for (index, &(is_write, offset, length)) in arrivals.iter().enumerate() {
        assert_eq!(
            is_write, write,
            "core request {index} has the wrong direction"
        );
        assert_eq!(
            (offset, length),
            (expected, SEQUENTIAL_REQUEST_BYTES as u64),
            "core request {index} does not continue the stream (the cache reordered or split it)"
        );
        expected += length;
    }
}

async fn check_pass_through_order(write: bool) {
    let (cache, core) = seed_cache().await;
    random_cached_work(&cache).await;
    core.take();
    sequential_stream(&cache, write).await;
    assert_contiguous(&core.take(), write);
    let stats = cache.cache_stats();
    let pass_through = if write {
        stats.writes.pass_through
    } else {
        stats.reads.pass_through
    };
    assert!(pass_through >= 64, "the stream went around the cache");
    cache.stop().await.unwrap();
}

#[tokio::test]
async fn sequential_reads_reach_the_core_in_order_after_random_work() {
    check_pass_through_order(false).await;
}

#[tokio::test]
async fn sequential_writes_reach_the_core_in_order_after_random_work() {
    check_pass_through_order(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequential_stream_stays_in_order_on_a_multi_thread_runtime() {
    check_pass_through_order(false).await;
    check_pass_through_order(true).await;
}

/// The first write of a pass-through stream stays in the core's queue (as an HDD's NCQ-like
/// scheduler holds an out-of-order request) while the stream goes on: every later write must
/// reach the core meanwhile. It is let go when the stream's last write has reached the core,
/// or, when something holds the stream up behind it, after a while (so the test fails
/// instead of hanging; how long does not decide the outcome).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_pass_through_write_does_not_hold_up_the_writes_after_it() {
    let (cache, core) = seed_cache().await;
    random_cached_work(&cache).await;
    core.take();
    *core.hold_write_at.lock().unwrap() = Some(RANDOM_BYTES);
    let last = CORE_BYTES - SEQUENTIAL_REQUEST_BYTES as u64;
    let releaser = {
        let core = Arc::clone(&core);
        tokio::spawn(async move {
            let started = Instant::now();
            while !core.seen(last) && started.elapsed() < Duration::from_secs(5) {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            let held_up = !core.seen(last);
            core.let_go();
            held_up
        })
    };
    sequential_stream(&cache, true).await;
    let held_up = releaser.await.unwrap();
    assert!(
        !held_up,
        "the stream stopped behind the held write (it waited for a stripe the held write holds)"
    );
    assert_contiguous(&core.take(), true);
    cache.stop().await.unwrap();
}
