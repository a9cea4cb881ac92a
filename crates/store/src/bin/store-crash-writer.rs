//! Writes self-checking objects into a store as fast as it can and prints `ack ID GEN` for
//! every acknowledged transaction, until it is killed. Used by the SIGKILL crash test.
//!
//! `store-crash-writer DIR START_ID SEED [CONCURRENCY]`: opens (or creates) the store in DIR
//! (`data.img` + `meta`), prints `ready`, then runs CONCURRENCY (default 8) writers: each
//! creates objects `START_ID, START_ID+1, ...` (generation 0) or updates one it created
//! (partial overwrite + xattr + omap, next generation); after every fourth update of an
//! object, a defragmentation of it (content unchanged).

#[path = "../crash_format.rs"]
mod crash_format;

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use device::{Device, FileDevice, FileDeviceConfig};
use store::{ObjectId, Store, StoreConfig, Transaction};

const DEVICE_BYTES: u64 = 256 << 20;

type Error = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, start, seed, rest @ ..] = args.as_slice() else {
        return Err("usage: store-crash-writer DIR START_ID SEED [CONCURRENCY]".into());
    };
    let start: u64 = start.parse()?;
    let seed: u64 = seed.parse()?;
    let concurrency: u64 = rest.first().map(|c| c.parse()).transpose()?.unwrap_or(8);
    let dir = std::path::Path::new(dir);
    let meta = dir.join("meta");
    let device: Arc<dyn Device> = Arc::new(FileDevice::create(
        dir.join("data.img"),
        DEVICE_BYTES,
        FileDeviceConfig::default(),
    )?);
    let store = if meta.exists() {
        Store::open(device, &meta, StoreConfig::default()).await?
    } else {
        Store::create(device, &meta, StoreConfig::default()).await?
    };
    let store = Arc::new(store);
    println!("ready");
    std::io::stdout().flush()?;
    let next = Arc::new(AtomicU64::new(start));
    let mut tasks = Vec::new();
    for task in 0..concurrency {
        let store = Arc::clone(&store);
        let next = Arc::clone(&next);
        tasks.push(tokio::spawn(async move {
            let mut rng = seed ^ (task + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let mut owned: Vec<(u64, u64)> = Vec::new();
            loop {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let (id, generation, transaction) = if owned.is_empty() || rng & 1 == 0 {
                    let id = next.fetch_add(1, Ordering::Relaxed);
                    let object =
                        ObjectId::new(crash_format::collection(id), crash_format::name(id));
                    let mut t = Transaction::new(id);
                    t.write_full(&object, crash_format::content(id, 0))
                        .set_xattr(&object, "gen", 0u64.to_le_bytes().to_vec());
                    owned.push((id, 0));
                    (id, 0, t)
                } else {
                    let slot = (rng >> 8) as usize % owned.len();
                    let (id, generation) = owned[slot];
                    let generation = generation + 1;
                    owned[slot].1 = generation;
                    let object =
                        ObjectId::new(crash_format::collection(id), crash_format::name(id));
                    let (offset, data) = crash_format::update(id, generation);
                    let mut t = Transaction::new(id);
                    t.write(&object, offset, data)
                        .set_xattr(&object, "gen", generation.to_le_bytes().to_vec())
                        .omap_set(
                            &object,
                            vec![(b"gen".to_vec(), generation.to_le_bytes().to_vec())],
                        );
                    (id, generation, t)
                };
                store.apply(transaction).await?;
                {
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "ack {id} {generation}")?;
                    out.flush()?;
                }
                if generation % 4 == 3 {
                    // Updates scatter the object's units: rewrite them contiguously (the
                    // content does not change, so a kill during it must lose nothing).
                    let object =
                        ObjectId::new(crash_format::collection(id), crash_format::name(id));
                    let mut t = Transaction::new(id);
                    t.defragment(&object, 0, 1 << 20);
                    store.apply(t).await?;
                }
            }
            #[allow(unreachable_code)]
            Ok::<(), Error>(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(())
}
