//! A file or block device, through O_DIRECT where the filesystem allows it.
//!
//! Requests are copied into aligned bounce buffers (so callers may pass any memory) and served
//! by positional syscalls (`pread`, `pwrite`, `fdatasync`, `fallocate`) on a pool of I/O
//! threads: by default a dedicated pool fed by one queue (`workqueue`: idle threads sleep at
//! once instead of spinning), or tokio's blocking pool
//! ([`IoEngine`]). A semaphore bounds the operations admitted at once, so a burst waits in
//! async land instead of piling up threads.
//!
//! By role: this file holds the device, its configuration and its I/O engine; `syscalls.rs`
//! the blocking calls the engine runs (open, lock, read, write, sync, discard, the holes of a
//! sparse file); `device_impl.rs` the [`Device`] implementation.

mod device_impl;
mod syscalls;
#[cfg(test)]
mod tests;

use syscalls::{dio_alignment, execute, lock_exclusively, open_file, Job, JobResult, Work};

use std::fs::File;
use std::io::{self, Seek, SeekFrom};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::{oneshot, Semaphore};

use crate::initialize::Initializer;
use crate::stats::StatsRecorder;
use crate::workqueue::WorkQueue;
use crate::{check_block_size, check_request, DeviceError, DeviceKind};

/// Who runs the blocking syscalls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoEngine {
    /// A pool of `threads` dedicated threads fed by one queue. Default: 16 threads. Measured
    /// with the `file_engines` example (4 KiB random, O_DIRECT, QD 32, 2 cores at load average
    /// 12-18): 8, 16 or 32 threads give 82-125k IOPS, within noise of each other and of fio's
    /// psync engine with 16 jobs (110k read, 138k write) and above fio's io_uring at QD 32
    /// (82k, 52k) on the same disk; tokio's blocking pool gives 50-76k, 4 threads 36-94k.
    Threads {
        /// Number of I/O threads; the most syscalls in flight at once.
        threads: usize,
    },
    /// `tokio::task::spawn_blocking` (needs a tokio runtime; threads are spawned on demand).
    TokioBlocking,
}

/// How to open a [`FileDevice`].
#[derive(Clone, Debug)]
pub struct FileDeviceConfig {
    /// Open with O_DIRECT (bypass the page cache). When the filesystem refuses it (EINVAL,
    /// e.g. tmpfs) the device falls back to buffered I/O and logs a warning. Default: true.
    pub direct_io: bool,
    /// Alignment of every offset and length, in bytes: a power of two; for a block device it
    /// is raised to the logical sector size. Default: 4096.
    pub block_size_bytes: u64,
    /// Who runs the syscalls. Default: `Threads { threads: 16 }`.
    pub engine: IoEngine,
    /// Operations admitted at once; more wait for a slot. Default: 256.
    pub queue_depth_max: usize,
    /// Name in statistics and logs. Default: the path.
    pub name: Option<String>,
}

impl Default for FileDeviceConfig {
    fn default() -> Self {
        Self {
            direct_io: true,
            block_size_bytes: 4096,
            engine: IoEngine::Threads { threads: 16 },
            queue_depth_max: 256,
            name: None,
        }
    }
}

/// A regular file or block device.
pub struct FileDevice {
    file: Arc<File>,
    path: PathBuf,
    size_bytes: u64,
    block_size_bytes: u64,
    direct: bool,
    /// Alignment of the bounce buffers in memory.
    memory_alignment_bytes: u64,
    is_block_device: bool,
    /// The CPUs of its completion interrupts, found at open (`affinity`).
    interrupt_cpus: Option<Vec<usize>>,
    /// Fills a regular file's holes ahead of writes (`initialize.rs`); `None` for a block
    /// device.
    initializer: Option<Arc<Initializer>>,
    poisoned: AtomicBool,
    admission: Semaphore,
    engine: Engine,
    stats: StatsRecorder,
}

enum Engine {
    Threads { queue: Arc<WorkQueue<Work>> },
    TokioBlocking,
}

impl FileDevice {
    /// Opens an existing file or block device for reading and writing.
    pub fn open(path: impl AsRef<Path>, config: FileDeviceConfig) -> Result<Self, DeviceError> {
        let path = path.as_ref();
        let (file, direct) = open_file(path, config.direct_io, false)?;
        Self::from_file(file, path, direct, config)
    }

    /// Creates (if missing) a sparse file of `size_bytes` and opens it. An existing smaller
    /// file grows to `size_bytes`, keeping its data; a larger one is refused, since cutting it
    /// would discard the data at its end (a mistyped size must not truncate a disk image).
    pub fn create(
        path: impl AsRef<Path>,
        size_bytes: u64,
        config: FileDeviceConfig,
    ) -> Result<Self, DeviceError> {
        let path = path.as_ref();
        if size_bytes == 0 || !size_bytes.is_multiple_of(config.block_size_bytes.max(1)) {
            return Err(DeviceError::InvalidConfig(format!(
                "size {size_bytes} must be a non-zero multiple of the block size {}",
                config.block_size_bytes
            )));
        }
        let (file, direct) = open_file(path, config.direct_io, true)?;
        let current = file
            .metadata()
            .map_err(|e| DeviceError::io(format!("stat {}", path.display()), e))?
            .len();
        if current > size_bytes {
            return Err(DeviceError::InvalidConfig(format!(
                "{} holds {current} bytes, more than the {size_bytes} asked for: shrinking it \
                 would discard its end; give its size or none, or remove the file first",
                path.display()
            )));
        }
        if current < size_bytes {
            file.set_len(size_bytes)
                .map_err(|e| DeviceError::io(format!("truncate {}", path.display()), e))?;
        }
        Self::from_file(file, path, direct, config)
    }

    fn from_file(
        mut file: File,
        path: &Path,
        direct: bool,
        config: FileDeviceConfig,
    ) -> Result<Self, DeviceError> {
        check_block_size(config.block_size_bytes)?;
        lock_exclusively(&file, path)?;
        if config.queue_depth_max == 0 {
            return Err(DeviceError::InvalidConfig("queue_depth_max is 0".into()));
        }
        let metadata = file
            .metadata()
            .map_err(|e| DeviceError::io(format!("stat {}", path.display()), e))?;
        let is_block_device = metadata.file_type().is_block_device();
        let mut block_size_bytes = config.block_size_bytes;
        if is_block_device {
            let sector = rustix::fs::ioctl_blksszget(&file)
                .map_err(|e| DeviceError::io("BLKSSZGET", e.into()))?;
            block_size_bytes = block_size_bytes.max(u64::from(sector));
        }
        let mut memory_alignment_bytes = block_size_bytes;
        if let Some((offset_align, memory_align)) = direct.then(|| dio_alignment(&file)).flatten() {
            // The kernel states what O_DIRECT needs here (Linux 6.1+); honour it if stricter.
            if offset_align > block_size_bytes {
                tracing::info!(
                    path = %path.display(),
                    offset_align,
                    "O_DIRECT needs a larger alignment than configured; raising the block size"
                );
                block_size_bytes = offset_align;
            }
            memory_alignment_bytes = block_size_bytes.max(memory_align);
        }
        let raw_size = file
            .seek(SeekFrom::End(0))
            .map_err(|e| DeviceError::io(format!("seek {}", path.display()), e))?;
        let size_bytes = raw_size - raw_size % block_size_bytes;
        if size_bytes == 0 {
            return Err(DeviceError::InvalidConfig(format!(
                "{} holds {raw_size} bytes, less than one {block_size_bytes}-byte block",
                path.display()
            )));
        }
        if size_bytes != raw_size {
            // A block device's last partial block cannot be addressed in whole blocks (a
            // partition sized in 512-byte sectors); a regular file would be cut without a
            // word, so it is refused.
            if !is_block_device {
                return Err(DeviceError::InvalidConfig(format!(
                    "{} holds {raw_size} bytes, not a multiple of the {block_size_bytes}-byte block: its last {} bytes could not be used (extend it, e.g. `truncate -s {} {}`)",
                    path.display(),
                    raw_size - size_bytes,
                    size_bytes + block_size_bytes,
                    path.display()
                )));
            }
            tracing::warn!(
                path = %path.display(),
                raw_size,
                size_bytes,
                "the device's last partial block is not used"
            );
        }
        let file = Arc::new(file);
        let engine = match config.engine {
            IoEngine::Threads { threads } => {
                if threads == 0 {
                    return Err(DeviceError::InvalidConfig("engine with 0 threads".into()));
                }
                let queue = Arc::new(WorkQueue::<Work>::new());
                for index in 0..threads {
                    let jobs = Arc::clone(&queue);
                    let file = Arc::clone(&file);
                    let spawned = std::thread::Builder::new()
                        .name(format!("device-io-{index}"))
                        .spawn(move || {
                            // Ends when the device closes the queue (on drop).
                            while let Some(work) = jobs.pop() {
                                let _ = work.reply.send(execute(&file, work.job));
                            }
                        });
                    if let Err(error) = spawned {
                        queue.close();
                        return Err(DeviceError::io("spawn I/O thread", error));
                    }
                }
                Engine::Threads { queue }
            }
            IoEngine::TokioBlocking => Engine::TokioBlocking,
        };
        let initializer = if is_block_device {
            None
        } else {
            let started = Initializer::start(
                Arc::clone(&file),
                size_bytes,
                memory_alignment_bytes as usize,
            );
            Some(started.map_err(|error| DeviceError::io("spawn the fill thread", error))?)
        };
        let name = config.name.unwrap_or_else(|| path.display().to_string());
        let kind = if is_block_device {
            DeviceKind::BlockDevice
        } else {
            DeviceKind::File
        };
        Ok(Self {
            file,
            path: path.to_path_buf(),
            size_bytes,
            block_size_bytes,
            direct,
            memory_alignment_bytes,
            is_block_device,
            interrupt_cpus: crate::affinity::interrupt_cpus_of_path(path),
            initializer,
            poisoned: AtomicBool::new(false),
            admission: Semaphore::new(config.queue_depth_max),
            engine,
            stats: StatsRecorder::new(name, kind),
        })
    }

    /// Whether the device bypasses the page cache (O_DIRECT took effect).
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    /// The path it was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    async fn run(&self, job: Job) -> JobResult {
        // The semaphore is never closed, so acquire only fails if it were; treat as EIO.
        let _permit = self
            .admission
            .acquire()
            .await
            .map_err(|_| DeviceError::io("admit", io::Error::other("admission closed")))?;
        match &self.engine {
            Engine::Threads { queue } => {
                let (reply, receive) = oneshot::channel();
                queue
                    .push(Work { job, reply })
                    .map_err(|_| DeviceError::io("submit", io::Error::other("I/O pool gone")))?;
                receive
                    .await
                    .map_err(|_| DeviceError::io("complete", io::Error::other("I/O thread died")))?
            }
            Engine::TokioBlocking => {
                let file = Arc::clone(&self.file);
                tokio::task::spawn_blocking(move || execute(&file, job))
                    .await
                    .map_err(|e| DeviceError::io("spawn_blocking", io::Error::other(e)))?
            }
        }
    }

    /// Checks a write against the device contract and a poisoned device.
    fn check_write(&self, offset_bytes: u64, length_bytes: u64) -> Result<(), DeviceError> {
        check_request(
            offset_bytes,
            length_bytes,
            self.size_bytes,
            self.block_size_bytes,
        )?;
        if self.poisoned.load(Ordering::Acquire) {
            return Err(DeviceError::Poisoned);
        }
        Ok(())
    }

    /// After a failed `fdatasync` what reached the medium is unknown: refuse further writes.
    fn poison_on_error(&self, result: &Result<(), DeviceError>) {
        if result.is_err() {
            self.poisoned.store(true, Ordering::Release);
            tracing::error!(
                device = self.stats.name(),
                "fdatasync failed; device poisoned"
            );
        }
    }

    fn alignment(&self) -> usize {
        self.memory_alignment_bytes as usize
    }
}

impl Drop for FileDevice {
    /// Lets the I/O threads end once the jobs already queued are done, and releases the
    /// file's lock now (the threads may hold the file a little longer).
    fn drop(&mut self) {
        if let Engine::Threads { queue } = &self.engine {
            queue.close();
        }
        let _ = rustix::fs::flock(&*self.file, rustix::fs::FlockOperation::Unlock);
        if let Some(initializer) = &self.initializer {
            initializer.stop();
        }
    }
}
