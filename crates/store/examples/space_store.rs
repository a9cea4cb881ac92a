//! Seed 002's space figures for unmerged objects: data-hole rate (1 - stored / allocated) and
//! metadata per object, for the paper's object sizes (5, 66, 210 KiB) and two allocation units
//! (4 KiB, BlueStore's default since Pacific; 64 KiB, its old HDD default).
//!
//! `cargo run -p store --release --example space_store [-- OBJECTS]` (default 2000 objects per
//! point, on a memory device; the metadata file lives in a temporary directory).

use std::sync::Arc;

use device::{Device, MemoryDevice};
use store::{ObjectId, Store, StoreConfig, Transaction};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let objects: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(2000);
    println!(
        "{:>10} {:>10} {:>8} {:>14} {:>14} {:>10} {:>14} {:>16}",
        "object",
        "min_alloc",
        "objects",
        "stored B",
        "allocated B",
        "hole %",
        "kv B/object",
        "file B/object"
    );
    for unit in [4096u64, 65536] {
        for size in [5 * 1024usize, 66 * 1024, 210 * 1024] {
            let dir = tempfile::tempdir()?;
            let device_bytes = (objects * (size as u64 + unit))
                .next_power_of_two()
                .max(1 << 26);
            let device: Arc<dyn Device> = Arc::new(MemoryDevice::new("mem", device_bytes)?);
            let config = StoreConfig {
                min_alloc_size_bytes: unit,
                ..StoreConfig::default()
            };
            let store = Store::create(device, dir.path().join("meta"), config).await?;
            let mut batch = Transaction::new(0);
            for id in 0..objects {
                let object =
                    ObjectId::new(format!("1.{:x}", id % 32), format!("small-object-{id:08}"));
                batch.write_full(&object, vec![(id % 251) as u8; size]);
                if batch.ops.len() == 64 {
                    store
                        .apply(std::mem::replace(&mut batch, Transaction::new(0)))
                        .await?;
                }
            }
            store.apply(batch).await?;
            let statfs = store.statfs();
            println!(
                "{:>9}K {:>9}K {:>8} {:>14} {:>14} {:>10.1} {:>14.0} {:>16.0}",
                size / 1024,
                unit / 1024,
                statfs.objects,
                statfs.stored_bytes,
                statfs.allocated_bytes,
                statfs.data_hole_ratio() * 100.0,
                statfs.metadata_bytes_per_object(),
                statfs.metadata_file_bytes_per_object()
            );
            store.shutdown().await?;
        }
    }
    Ok(())
}
