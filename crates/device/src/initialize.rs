//! Filling a sparse file's holes with zeros before the first write into each chunk.
//!
//! Why: a write into a hole (or a preallocated, "unwritten" extent) of a file changes the
//! filesystem's metadata (the block's allocation, or its conversion to written), so the next
//! `fdatasync` must commit the filesystem's journal besides flushing the disk's cache. A
//! store that writes every new object into fresh space pays that on every group commit.
//! Measured with `crates/cluster/examples/bench_cluster.rs --replicas 1 --concurrency 16`
//! (4 KiB objects), OSD files laid out with zeros first against the same files left sparse,
//! alternating: 80.7k and 74.7k durable writes/s against 45.5k and 41.4k. fio lays its file
//! out before a random-write job for the same reason.
//!
//! How: the file is cut into chunks (16 MiB). The first small write (under 1 MiB) into a
//! chunk not known to be written throughout first fills the chunk's holes with zeros (holes read as zeros, so the
//! fill changes no byte a read returns), then goes on; a background thread fills the next
//! chunks ahead, so a writer moving through the file rarely waits. Each chunk has a
//! reader-writer lock: a fill holds it exclusively, every write (small or large) shares it
//! for its duration, so a fill never writes zeros over data written meanwhile; writes to
//! other chunks never wait for a fill. A discard (hole punch) marks its chunks unfilled
//! again. Nothing here needs to be durable: zeros that a crash loses leave
//! holes, which read the same.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};

use crate::aligned::AlignedBuffer;

/// Creates (or truncates) the file at `path` and writes its first `length_bytes` with zeros,
/// durably, as fio lays out its file before a job (fio writes data, through O_DIRECT), so
/// that a benchmark's writes into it change no filesystem metadata (and the fill above never
/// runs there). The store's writes measured the same on files laid out either way
/// (ARCHITECTURE.md). A device opened on the file afterwards keeps these bytes and sets its
/// own size.
pub fn lay_out(path: &std::path::Path, length_bytes: u64) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(crate::PRIVATE_FILE_MODE)
        .open(path)?;
    let zeros = vec![0u8; 8 << 20];
    let mut left_bytes = length_bytes;
    while left_bytes > 0 {
        let piece = left_bytes.min(zeros.len() as u64) as usize;
        file.write_all(&zeros[..piece])?;
        left_bytes -= piece as u64;
    }
    file.sync_all()
}

/// Bytes of one chunk.
pub(crate) const CHUNK_BYTES: u64 = 16 << 20;
/// Chunks the background thread fills past the last one a write needed.
const CHUNKS_AHEAD: u64 = 2;
/// Writes of at least this many bytes neither wait for a fill nor ask for one.
const LARGE_WRITE_BYTES: u64 = 1 << 20;
/// Zeros written per `pwrite`: small, so a flush queued behind a fill waits for little (with
/// 1 MiB pieces the store's p99 write latency was 1.4-1.6 ms, with 128 KiB 0.7 ms, same
/// throughput; `bench_cluster --replicas 1 --device-size 32G`, sparse).
const ZEROS_BYTES: usize = 128 << 10;

pub(crate) struct Initializer {
    file: Arc<File>,
    size_bytes: u64,
    /// Per chunk: known to hold no hole.
    filled: Vec<AtomicBool>,
    /// Per chunk: handed to the background thread (once).
    requested: Vec<AtomicBool>,
    /// Per chunk: exclusive while filling or forgetting, shared by every write into it.
    locks: Vec<RwLock<()>>,
    zeros: AlignedBuffer,
    ahead: Mutex<Option<std::sync::mpsc::Sender<u64>>>,
}

impl Initializer {
    /// An initializer of `file` (`size_bytes` long); memory for O_DIRECT aligned to
    /// `alignment`. Starts its background thread.
    pub fn start(file: Arc<File>, size_bytes: u64, alignment: usize) -> io::Result<Arc<Self>> {
        let chunks = size_bytes.div_ceil(CHUNK_BYTES) as usize;
        let (ahead, requests) = std::sync::mpsc::channel::<u64>();
        let initializer = Arc::new(Self {
            file,
            size_bytes,
            filled: (0..chunks).map(|_| AtomicBool::new(false)).collect(),
            requested: (0..chunks).map(|_| AtomicBool::new(false)).collect(),
            locks: (0..chunks).map(|_| RwLock::new(())).collect(),
            zeros: AlignedBuffer::zeroed(ZEROS_BYTES, alignment.max(1)),
            ahead: Mutex::new(Some(ahead)),
        });
        let weak: Weak<Self> = Arc::downgrade(&initializer);
        std::thread::Builder::new()
            .name("device-fill".into())
            .spawn(move || {
                // Ends when the device goes (its sender with it).
                while let Ok(chunk) = requests.recv() {
                    let Some(initializer) = weak.upgrade() else {
                        return;
                    };
                    if let Err(error) = initializer.fill(chunk) {
                        tracing::warn!(%error, chunk, "filling a chunk ahead failed");
                    }
                }
            })?;
        Ok(initializer)
    }

    /// Makes sure every chunk `[offset_bytes, offset_bytes + length_bytes)` touches is filled,
    /// then runs `write`. A chunk is marked filled only once its fill is done, and is never
    /// filled again (unless a discard punched it), so no fill can run over the write.
    pub fn write<T>(
        &self,
        offset_bytes: u64,
        length_bytes: u64,
        write: impl FnOnce() -> io::Result<T>,
    ) -> io::Result<T> {
        self.write_many(&[(offset_bytes, length_bytes)], write)
    }

    /// [`Initializer::write`] for several `(offset, length)` ranges that `write` writes at once.
    pub fn write_many<T>(
        &self,
        ranges: &[(u64, u64)],
        write: impl FnOnce() -> io::Result<T>,
    ) -> io::Result<T> {
        let mut chunks: Vec<u64> = Vec::new();
        for &(offset_bytes, length_bytes) in ranges {
            if length_bytes == 0 {
                continue;
            }
            let first = offset_bytes / CHUNK_BYTES;
            let last = (offset_bytes + length_bytes - 1) / CHUNK_BYTES;
            // A large write pays its own metadata commit over many bytes; filling around it
            // would write the bytes twice (4 MiB object writes fell from 633 to 288/s).
            if length_bytes < LARGE_WRITE_BYTES {
                self.request_ahead(last);
                for chunk in first..=last {
                    if !self.is_filled(chunk) {
                        self.fill(chunk)?;
                    }
                }
            }
            chunks.extend(first..=last);
        }
        // Each chunk once (a thread must not take a read lock it holds: a fill waiting in
        // between would deadlock it), in ascending order; shared with other writes, exclusive
        // of a fill of these chunks (a fill holds one chunk's lock and waits for nothing else).
        chunks.sort_unstable();
        chunks.dedup();
        let _guards: Vec<_> = chunks
            .iter()
            .filter_map(|&chunk| self.locks.get(chunk as usize))
            .map(|lock| lock.read().unwrap_or_else(|e| e.into_inner()))
            .collect();
        write()
    }

    /// Marks the chunks a hole was punched into as not filled.
    pub fn forget(&self, offset_bytes: u64, length_bytes: u64) {
        if length_bytes == 0 {
            return;
        }
        let first = offset_bytes / CHUNK_BYTES;
        let last = (offset_bytes + length_bytes - 1) / CHUNK_BYTES;
        for chunk in first..=last {
            if let Some(filled) = self.filled.get(chunk as usize) {
                let _guard = self.locks[chunk as usize]
                    .write()
                    .unwrap_or_else(|e| e.into_inner());
                filled.store(false, Ordering::Release);
                self.requested[chunk as usize].store(false, Ordering::Release);
            }
        }
    }

    /// Stops the background thread (the device is closing).
    pub fn stop(&self) {
        self.ahead.lock().unwrap_or_else(|e| e.into_inner()).take();
    }

    fn is_filled(&self, chunk: u64) -> bool {
        self.filled
            .get(chunk as usize)
            .is_none_or(|filled| filled.load(Ordering::Acquire))
    }

    /// Asks the background thread to fill the chunks after `last` not filled or asked for
    /// yet: a writer moving through the file finds them filled.
    fn request_ahead(&self, last: u64) {
        for chunk in last + 1..=last + CHUNKS_AHEAD {
            let Some(requested) = self.requested.get(chunk as usize) else {
                return;
            };
            if self.is_filled(chunk) || requested.swap(true, Ordering::AcqRel) {
                continue;
            }
            let ahead = self.ahead.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(ahead) = ahead.as_ref() {
                let _ = ahead.send(chunk);
            }
        }
    }

    /// Fills the holes of `chunk` with zeros, unless it is known filled.
    fn fill(&self, chunk: u64) -> io::Result<()> {
        let Some(lock) = self.locks.get(chunk as usize) else {
            return Ok(());
        };
        let _guard = lock.write().unwrap_or_else(|e| e.into_inner());
        if self.is_filled(chunk) {
            return Ok(());
        }
        let start = chunk * CHUNK_BYTES;
        let end = (start + CHUNK_BYTES).min(self.size_bytes);
        let mut at = start;
        while at < end {
            let hole = match rustix::fs::seek(&*self.file, rustix::fs::SeekFrom::Hole(at)) {
                Ok(hole) => hole.min(end),
                Err(errno) => return Err(errno.into()),
            };
            if hole >= end {
                break;
            }
            let data = match rustix::fs::seek(&*self.file, rustix::fs::SeekFrom::Data(hole)) {
                Ok(data) => data.min(end),
                // No data after the hole: it runs to the end of the file.
                Err(rustix::io::Errno::NXIO) => end,
                Err(errno) => return Err(errno.into()),
            };
            let mut zero_at = hole;
            while zero_at < data {
                let length = (data - zero_at).min(ZEROS_BYTES as u64) as usize;
                self.file
                    .write_all_at(&self.zeros.as_slice()[..length], zero_at)?;
                zero_at += length as u64;
            }
            at = data;
        }
        self.filled[chunk as usize].store(true, Ordering::Release);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn lay_out_writes_zeros_without_holes_over_old_content() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("laid-out");
        std::fs::write(&path, vec![5u8; 4096]).unwrap();
        let length = (8 << 20) + 12288;
        lay_out(&path, length).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len() as u64, length);
        assert!(bytes.iter().all(|&b| b == 0), "old content is gone");
        let file = File::open(&path).unwrap();
        let hole = rustix::fs::seek(&file, rustix::fs::SeekFrom::Hole(0)).unwrap();
        assert_eq!(hole, length, "no hole before the end");
    }

    #[test]
    fn fills_holes_keeps_data_and_forgets_punched_chunks() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("sparse");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        let size = 2 * CHUNK_BYTES + 4096;
        file.set_len(size).unwrap();
        // Data already in the second chunk must survive its fill.
        file.write_all_at(&[7u8; 4096], CHUNK_BYTES + 8192).unwrap();
        let file = Arc::new(file);
        let initializer = Initializer::start(Arc::clone(&file), size, 4096).unwrap();
        initializer.stop();
        assert!(!initializer.is_filled(1));
        initializer
            .write(CHUNK_BYTES, 4096, || {
                file.write_all_at(&[9u8; 4096], CHUNK_BYTES)
            })
            .unwrap();
        assert!(initializer.is_filled(1));
        assert!(!initializer.is_filled(0), "only the chunks a write touches");
        let mut back = vec![0u8; 3 * 4096];
        file.read_exact_at(&mut back, CHUNK_BYTES).unwrap();
        assert!(back[..4096].iter().all(|&b| b == 9));
        assert!(back[4096..8192].iter().all(|&b| b == 0));
        assert!(back[8192..].iter().all(|&b| b == 7));
        // The whole chunk is allocated now, nothing else.
        let allocated = std::fs::metadata(&path).unwrap().blocks() * 512;
        assert!(allocated >= CHUNK_BYTES, "{allocated}");
        assert!(allocated < 2 * CHUNK_BYTES, "{allocated}");
        // The last, short chunk fills to the end of the file only.
        initializer.write(2 * CHUNK_BYTES, 4096, || Ok(())).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), size);
        // A large write neither fills nor waits.
        initializer.write(0, LARGE_WRITE_BYTES, || Ok(())).unwrap();
        assert!(!initializer.is_filled(0));
        initializer.forget(CHUNK_BYTES, 4096);
        assert!(!initializer.is_filled(1));
        assert!(initializer.is_filled(2));
    }

    /// Writers racing fills (small writes that fill, large ones that skip, the background
    /// thread ahead of them): no written block is ever zeroed by a fill. A stress test: with
    /// the writes' shared locks removed it still passed three runs out of three here (the
    /// window, between a fill finding a hole and zeroing it, is short), so it guards the
    /// outcome, not that lock.
    #[test]
    fn concurrent_writes_survive_fills() {
        use rand::{Rng, SeedableRng};
        for round in 0..4u64 {
            let directory = tempfile::tempdir().unwrap();
            let path = directory.path().join("sparse");
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)
                .unwrap();
            let size = 4 * CHUNK_BYTES;
            file.set_len(size).unwrap();
            let file = Arc::new(file);
            let initializer = Initializer::start(Arc::clone(&file), size, 4096).unwrap();
            // Small writes in chunks 0-2, each thread its own blocks; they ask for chunk 3
            // ahead, where large writes (which skip filling) land meanwhile.
            let small_blocks = 3 * CHUNK_BYTES / 4096;
            let threads = 4u64;
            let large_count = 8u64;
            let written: Vec<Vec<u64>> = std::thread::scope(|scope| {
                let large = {
                    let file = Arc::clone(&file);
                    let initializer = Arc::clone(&initializer);
                    scope.spawn(move || {
                        for index in 0..large_count {
                            let offset = 3 * CHUNK_BYTES + index * LARGE_WRITE_BYTES;
                            let data = vec![0xe0 + index as u8; LARGE_WRITE_BYTES as usize];
                            initializer
                                .write(offset, LARGE_WRITE_BYTES, || {
                                    file.write_all_at(&data, offset)
                                })
                                .unwrap();
                        }
                    })
                };
                let handles: Vec<_> = (0..threads)
                    .map(|thread| {
                        let file = Arc::clone(&file);
                        let initializer = Arc::clone(&initializer);
                        scope.spawn(move || {
                            let mut rng = rand::rngs::StdRng::seed_from_u64(round * 16 + thread);
                            let mut mine = Vec::new();
                            for _ in 0..200 {
                                let block =
                                    rng.gen_range(0..small_blocks / threads) * threads + thread;
                                let offset = block * 4096;
                                let pattern = [(block % 251) as u8 + 1; 4096];
                                initializer
                                    .write(offset, 4096, || file.write_all_at(&pattern, offset))
                                    .unwrap();
                                mine.push(block);
                            }
                            mine
                        })
                    })
                    .collect();
                large.join().unwrap();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            // Whatever the background thread was asked for, done.
            for chunk in 0..4 {
                initializer.fill(chunk).unwrap();
            }
            initializer.stop();
            let mut block = vec![0u8; 4096];
            for &b in written.iter().flatten() {
                file.read_exact_at(&mut block, b * 4096).unwrap();
                assert!(block.iter().all(|&x| x == (b % 251) as u8 + 1), "block {b}");
            }
            let mut back = vec![0u8; LARGE_WRITE_BYTES as usize];
            for index in 0..large_count {
                let offset = 3 * CHUNK_BYTES + index * LARGE_WRITE_BYTES;
                file.read_exact_at(&mut back, offset).unwrap();
                assert!(
                    back.iter().all(|&x| x == 0xe0 + index as u8),
                    "large write {index} of round {round} zeroed by a fill"
                );
            }
        }
    }
}
