//! A file or block device, through O_DIRECT where the filesystem allows it.
//!
//! Requests are copied into aligned bounce buffers (so callers may pass any memory) and served
//! by positional syscalls (`pread`, `pwrite`, `fdatasync`, `fallocate`) on a pool of I/O
//! threads: by default a dedicated pool fed by one queue (`workqueue`: idle threads sleep at
//! once instead of spinning), or tokio's blocking pool
//! ([`IoEngine`]). A semaphore bounds the operations admitted at once, so a burst waits in
//! async land instead of piling up threads.

use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::{oneshot, Semaphore};

use crate::aligned::AlignedBuffer;
use crate::initialize::Initializer;
use crate::stats::StatsRecorder;
use crate::workqueue::WorkQueue;
use crate::{
    check_block_size, check_request, Device, DeviceError, DeviceKind, DeviceStats, OpKind,
};

const EINVAL: i32 = 22;
const EOPNOTSUPP: i32 = 95;

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

/// One blocking operation, owning its buffer so it can cross threads.
enum Job {
    Read {
        offset_bytes: u64,
        buffer: AlignedBuffer,
    },
    Write {
        offset_bytes: u64,
        buffer: AlignedBuffer,
        /// Fills the holes of the chunks written first (regular files).
        initializer: Option<Arc<Initializer>>,
    },
    Sync,
    Discard {
        offset_bytes: u64,
        length_bytes: u64,
        punch: bool,
    },
}

type JobResult = Result<Option<AlignedBuffer>, DeviceError>;

struct Work {
    job: Job,
    reply: oneshot::Sender<JobResult>,
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

/// How long [`lock_exclusively`] waits for a lock held elsewhere.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Takes the file's exclusive `flock`: one user at a time, since a second server (a cache
/// started again with --force or --load, a second `serve` on one data directory) would write
/// under the first one's feet. A process killed a moment ago may still hold it for a while
/// (the kernel tears its io_uring down after the process is gone), so a held lock is waited
/// for up to [`LOCK_WAIT`] before the open is refused.
fn lock_exclusively(file: &File, path: &Path) -> Result<(), DeviceError> {
    use rustix::fs::{flock, FlockOperation};
    let started = std::time::Instant::now();
    loop {
        match flock(file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(()),
            Err(rustix::io::Errno::WOULDBLOCK) if started.elapsed() < LOCK_WAIT => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(rustix::io::Errno::WOULDBLOCK) => {
                return Err(DeviceError::InvalidConfig(format!(
                    "{} is in use by another device (a running server holds its lock)",
                    path.display()
                )))
            }
            Err(error) => {
                return Err(DeviceError::io(
                    format!("flock {}", path.display()),
                    error.into(),
                ))
            }
        }
    }
}

fn open_file(path: &Path, direct: bool, create: bool) -> Result<(File, bool), DeviceError> {
    let open = |flags: i32| {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            .mode(crate::PRIVATE_FILE_MODE)
            .custom_flags(flags)
            .open(path)
    };
    if direct {
        match open(rustix::fs::OFlags::DIRECT.bits() as i32) {
            Ok(file) => return Ok((file, true)),
            Err(error) if error.raw_os_error() == Some(EINVAL) => {
                tracing::warn!(
                    path = %path.display(),
                    "O_DIRECT refused by the filesystem (EINVAL); using buffered I/O"
                );
            }
            Err(error) => return Err(DeviceError::io(format!("open {}", path.display()), error)),
        }
    }
    open(0)
        .map(|file| (file, false))
        .map_err(|e| DeviceError::io(format!("open {}", path.display()), e))
}

/// O_DIRECT's (offset, memory) alignment for `file` as the kernel reports it (statx
/// `STATX_DIOALIGN`, Linux 6.1+), if it does.
fn dio_alignment(file: &File) -> Option<(u64, u64)> {
    use rustix::fs::{statx, AtFlags, StatxFlags};
    let info = statx(file, "", AtFlags::EMPTY_PATH, StatxFlags::DIOALIGN).ok()?;
    let reported = info.stx_mask & StatxFlags::DIOALIGN.bits() != 0;
    (reported && info.stx_dio_offset_align > 0).then(|| {
        (
            u64::from(info.stx_dio_offset_align),
            u64::from(info.stx_dio_mem_align),
        )
    })
}

/// Runs one job on the calling (blocking) thread.
fn execute(file: &File, job: Job) -> JobResult {
    match job {
        Job::Read {
            offset_bytes,
            mut buffer,
        } => file
            .read_exact_at(buffer.as_mut_slice(), offset_bytes)
            .map(|()| Some(buffer))
            .map_err(|e| DeviceError::io("pread", e)),
        Job::Write {
            offset_bytes,
            buffer,
            initializer,
        } => {
            let write = || file.write_all_at(buffer.as_slice(), offset_bytes);
            match initializer {
                Some(initializer) => {
                    initializer.write(offset_bytes, buffer.as_slice().len() as u64, write)
                }
                None => write(),
            }
            .map(|()| None)
            .map_err(|e| DeviceError::io("pwrite", e))
        }
        Job::Sync => file
            .sync_data()
            .map(|()| None)
            .map_err(|e| DeviceError::io("fdatasync", e)),
        Job::Discard {
            offset_bytes,
            length_bytes,
            punch,
        } => discard(file, offset_bytes, length_bytes, punch).map(|()| None),
    }
}

fn discard(
    file: &File,
    offset_bytes: u64,
    length_bytes: u64,
    punch: bool,
) -> Result<(), DeviceError> {
    use rustix::fs::FallocateFlags;
    let flags = FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE;
    match rustix::fs::fallocate(file, flags, offset_bytes, length_bytes) {
        Ok(()) => Ok(()),
        Err(errno) if errno.raw_os_error() == EOPNOTSUPP => {
            if punch {
                // A regular file on a filesystem without holes: keep the "reads as zeros"
                // promise by writing zeros.
                zero_fill(file, offset_bytes, length_bytes)
            } else {
                Ok(()) // A block device without discard: the hint is dropped.
            }
        }
        Err(errno) => Err(DeviceError::io("fallocate(PUNCH_HOLE)", errno.into())),
    }
}

fn zero_fill(file: &File, offset_bytes: u64, length_bytes: u64) -> Result<(), DeviceError> {
    const STEP: u64 = 1 << 20;
    let zeros = AlignedBuffer::zeroed(STEP as usize, 4096);
    let mut done = 0;
    while done < length_bytes {
        let take = (length_bytes - done).min(STEP) as usize;
        file.write_all_at(&zeros.as_slice()[..take], offset_bytes + done)
            .map_err(|e| DeviceError::io("pwrite zeros", e))?;
        done += take as u64;
    }
    Ok(())
}

#[async_trait]
impl Device for FileDevice {
    async fn read_at(&self, offset_bytes: u64, buffer: &mut [u8]) -> Result<(), DeviceError> {
        let guard = self.stats.begin(OpKind::Read);
        let length_bytes = buffer.len() as u64;
        let result = async {
            check_request(
                offset_bytes,
                length_bytes,
                self.size_bytes,
                self.block_size_bytes,
            )?;
            if buffer.is_empty() {
                return Ok(());
            }
            let bounce = AlignedBuffer::zeroed(buffer.len(), self.alignment());
            let filled = self
                .run(Job::Read {
                    offset_bytes,
                    buffer: bounce,
                })
                .await?;
            if let Some(filled) = filled {
                buffer.copy_from_slice(filled.as_slice());
            }
            Ok(())
        }
        .await;
        guard.finish(length_bytes, result)
    }

    async fn write_at(&self, offset_bytes: u64, data: &[u8]) -> Result<(), DeviceError> {
        let guard = self.stats.begin(OpKind::Write);
        let length_bytes = data.len() as u64;
        let result = async {
            self.check_write(offset_bytes, length_bytes)?;
            if data.is_empty() {
                return Ok(());
            }
            self.run(Job::Write {
                offset_bytes,
                buffer: AlignedBuffer::gathered(&[data], self.alignment()),
                initializer: self.initializer.clone(),
            })
            .await
            .map(|_| ())
        }
        .await;
        guard.finish(length_bytes, result)
    }

    async fn flush(&self) -> Result<(), DeviceError> {
        let guard = self.stats.begin(OpKind::Flush);
        let result = async {
            if self.poisoned.load(Ordering::Acquire) {
                return Err(DeviceError::Poisoned);
            }
            let result = self.run(Job::Sync).await.map(|_| ());
            self.poison_on_error(&result);
            result
        }
        .await;
        guard.finish(0, result)
    }

    /// `pwrite` on the calling thread.
    fn write_blocking(
        &self,
        offset_bytes: u64,
        data: &[u8],
        _runtime: &tokio::runtime::Handle,
    ) -> Result<(), DeviceError> {
        let guard = self.stats.begin(OpKind::Write);
        let length_bytes = data.len() as u64;
        let result = self.check_write(offset_bytes, length_bytes).and_then(|()| {
            // Memory the caller already aligned (an `AlignedBuffer`) goes to O_DIRECT as it
            // is; anything else through one bounce copy.
            let bounce = (!(data.as_ptr() as usize).is_multiple_of(self.alignment()))
                .then(|| AlignedBuffer::gathered(&[data], self.alignment()));
            let aligned = bounce.as_ref().map_or(data, AlignedBuffer::as_slice);
            let write = || self.file.write_all_at(aligned, offset_bytes);
            match &self.initializer {
                Some(initializer) => initializer.write(offset_bytes, length_bytes, write),
                None => write(),
            }
            .map_err(|e| DeviceError::io("pwrite", e))
        });
        guard.finish(length_bytes, result)
    }

    /// Submitted together through the calling thread's io_uring (`ring.rs`), which sleeps
    /// once for all of them; `pwrite` one after the other where a ring cannot be made.
    fn write_many_blocking(
        &self,
        writes: &[(u64, &[u8])],
        runtime: &tokio::runtime::Handle,
    ) -> Vec<Result<(), DeviceError>> {
        // A write the contract refuses fails alone (and counts as a failed write).
        let mut results: Vec<Option<Result<(), DeviceError>>> = writes
            .iter()
            .map(|(offset_bytes, data)| {
                self.check_write(*offset_bytes, data.len() as u64)
                    .err()
                    .map(|error| self.stats.begin(OpKind::Write).finish(0, Err(error)))
            })
            .collect();
        // Memory the caller aligned goes as it is, anything else through one bounce copy.
        let bounces: Vec<Option<AlignedBuffer>> = writes
            .iter()
            .map(|(_, data)| {
                (!(data.as_ptr() as usize).is_multiple_of(self.alignment()))
                    .then(|| AlignedBuffer::gathered(&[data], self.alignment()))
            })
            .collect();
        let submitted: Vec<(usize, (u64, &[u8]))> = writes
            .iter()
            .zip(&bounces)
            .enumerate()
            .filter(|(index, _)| results[*index].is_none())
            .map(|(index, ((offset_bytes, data), bounce))| {
                (
                    index,
                    (
                        *offset_bytes,
                        bounce.as_ref().map_or(*data, AlignedBuffer::as_slice),
                    ),
                )
            })
            .collect();
        let guards: Vec<_> = submitted
            .iter()
            .map(|_| self.stats.begin(OpKind::Write))
            .collect();
        let ranges: Vec<(u64, &[u8])> = submitted.iter().map(|(_, range)| *range).collect();
        let lengths: Vec<(u64, u64)> = ranges
            .iter()
            .map(|(offset_bytes, data)| (*offset_bytes, data.len() as u64))
            .collect();
        let outcome = match &self.initializer {
            Some(initializer) => initializer.write_many(&lengths, || {
                crate::ring::write_all_at(self.file.as_raw_fd(), &ranges)
            }),
            None => crate::ring::write_all_at(self.file.as_raw_fd(), &ranges),
        };
        match outcome {
            Ok(written) => {
                for (((index, (offset_bytes, data)), bytes), guard) in
                    submitted.iter().zip(written).zip(guards)
                {
                    let result = bytes
                        .and_then(|bytes| {
                            // A short write: the rest with `pwrite`.
                            if bytes < data.len() {
                                self.file
                                    .write_all_at(&data[bytes..], offset_bytes + bytes as u64)
                            } else {
                                Ok(())
                            }
                        })
                        .map_err(|e| DeviceError::io("io_uring write", e));
                    results[*index] = Some(guard.finish(data.len() as u64, result));
                }
            }
            Err(_refused) => {
                // Logged once per thread by `ring.rs`.
                drop(guards);
                for (index, (offset_bytes, data)) in &submitted {
                    results[*index] = Some(self.write_blocking(*offset_bytes, data, runtime));
                }
            }
        }
        results
            .into_iter()
            .map(|result| result.unwrap_or(Ok(())))
            .collect()
    }

    /// `fdatasync` on the calling thread.
    fn flush_blocking(&self, _runtime: &tokio::runtime::Handle) -> Result<(), DeviceError> {
        let guard = self.stats.begin(OpKind::Flush);
        let result = if self.poisoned.load(Ordering::Acquire) {
            Err(DeviceError::Poisoned)
        } else {
            let result = execute(&self.file, Job::Sync).map(|_| ());
            self.poison_on_error(&result);
            result
        };
        guard.finish(0, result)
    }

    async fn discard(&self, offset_bytes: u64, length_bytes: u64) -> Result<(), DeviceError> {
        let guard = self.stats.begin(OpKind::Discard);
        let result = async {
            check_request(
                offset_bytes,
                length_bytes,
                self.size_bytes,
                self.block_size_bytes,
            )?;
            if length_bytes == 0 {
                return Ok(());
            }
            let punch = !self.is_block_device;
            let result = self
                .run(Job::Discard {
                    offset_bytes,
                    length_bytes,
                    punch,
                })
                .await
                .map(|_| ());
            if let Some(initializer) = &self.initializer {
                initializer.forget(offset_bytes, length_bytes);
            }
            result
        }
        .await;
        guard.finish(length_bytes, result)
    }

    fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    fn block_size_bytes(&self) -> u64 {
        self.block_size_bytes
    }

    fn name(&self) -> &str {
        self.stats.name()
    }

    fn kind(&self) -> DeviceKind {
        if self.is_block_device {
            DeviceKind::BlockDevice
        } else {
            DeviceKind::File
        }
    }

    fn interrupt_cpus(&self) -> Option<Vec<usize>> {
        self.interrupt_cpus.clone()
    }

    fn stats(&self) -> DeviceStats {
        self.stats.snapshot()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn roundtrip(engine: IoEngine) {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("disk");
        let config = FileDeviceConfig {
            engine,
            ..FileDeviceConfig::default()
        };
        let device = FileDevice::create(&path, 1 << 20, config.clone()).unwrap();
        assert_eq!(device.size_bytes(), 1 << 20);
        // Sparse: nothing allocated yet.
        let allocated = std::fs::metadata(&path).unwrap();
        assert!(std::os::unix::fs::MetadataExt::blocks(&allocated) * 512 < 1 << 20);

        // An unaligned caller buffer (offset by one byte in memory) is fine.
        let mut storage = vec![0u8; 8192 + 1];
        for (index, byte) in storage.iter_mut().enumerate() {
            *byte = (index % 253) as u8;
        }
        let data = &storage[1..];
        device.write_at(4096, data).await.unwrap();
        device.flush().await.unwrap();
        // The blocking flush (a dedicated thread's) is counted as a flush like the async one.
        let flushes = device.stats().flush.ops;
        let runtime = tokio::runtime::Handle::current();
        std::thread::scope(|scope| {
            scope
                .spawn(|| device.flush_blocking(&runtime))
                .join()
                .unwrap()
        })
        .unwrap();
        // So is a blocking write, which lands where the async one would.
        let block = vec![0x3cu8; 4096];
        std::thread::scope(|scope| {
            scope
                .spawn(|| device.write_blocking(3 * 4096, &block, &runtime))
                .join()
                .unwrap()
        })
        .unwrap();
        let mut read_back = vec![0u8; 4096];
        device.read_at(3 * 4096, &mut read_back).await.unwrap();
        assert_eq!(read_back, block);
        assert!(matches!(
            device.write_blocking(100, &block, &runtime),
            Err(DeviceError::Misaligned { .. })
        ));
        // Memory aligned by the caller goes to the file as it is (no bounce), same contract.
        let aligned = AlignedBuffer::gathered(&[&[0x5au8; 4096], &[0xa5u8; 4096]], 4096);
        let writes_before = device.stats().write.ops;
        std::thread::scope(|scope| {
            scope
                .spawn(|| device.write_blocking(5 * 4096, aligned.as_slice(), &runtime))
                .join()
                .unwrap()
        })
        .unwrap();
        assert_eq!(device.stats().write.ops, writes_before + 1);
        let mut read_back = vec![0u8; 8192];
        device.read_at(5 * 4096, &mut read_back).await.unwrap();
        assert_eq!(read_back, aligned.as_slice());
        assert!(matches!(
            device.write_blocking(100, &aligned.as_slice()[..4096], &runtime),
            Err(DeviceError::Misaligned { .. })
        ));
        assert_eq!(device.stats().flush.ops, flushes + 1);
        let mut back = vec![0u8; 8192 + 1];
        device.read_at(4096, &mut back[1..]).await.unwrap();
        assert_eq!(&back[1..], data);

        device.discard(4096, 4096).await.unwrap();
        device.read_at(4096, &mut back[1..]).await.unwrap();
        assert!(back[1..4097].iter().all(|&b| b == 0));
        assert_eq!(&back[4097..], &data[4096..]);

        assert!(matches!(
            device.write_at(100, &data[..4096]).await,
            Err(DeviceError::Misaligned { .. })
        ));
        assert!(matches!(
            device.read_at(1 << 20, &mut back[..4096]).await,
            Err(DeviceError::OutOfRange { .. })
        ));
        drop(device);

        // Reopen: the data persisted and the size is the file's.
        let device = FileDevice::open(&path, config).unwrap();
        assert_eq!(device.size_bytes(), 1 << 20);
        device.read_at(8192, &mut back[1..4097]).await.unwrap();
        assert_eq!(&back[1..4097], &data[4096..]);
        let stats = device.stats();
        assert_eq!(stats.read.ops, 1);
        assert_eq!(stats.kind, DeviceKind::File);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn roundtrip_with_dedicated_threads() {
        roundtrip(IoEngine::Threads { threads: 4 }).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn roundtrip_with_tokio_blocking_pool() {
        roundtrip(IoEngine::TokioBlocking).await;
    }

    #[tokio::test]
    async fn buffered_fallback_on_tmpfs_or_when_asked() {
        let directory = tempfile::tempdir_in("/dev/shm")
            .or_else(|_| tempfile::tempdir())
            .unwrap();
        let path = directory.path().join("disk");
        let device = FileDevice::create(
            &path,
            64 * 1024,
            FileDeviceConfig {
                direct_io: false,
                ..FileDeviceConfig::default()
            },
        )
        .unwrap();
        assert!(!device.is_direct());
        device.write_at(0, &[7u8; 4096]).await.unwrap();
        let mut back = [0u8; 4096];
        device.read_at(0, &mut back).await.unwrap();
        assert_eq!(back, [7u8; 4096]);
        drop(device);
        // O_DIRECT on tmpfs is refused with EINVAL and falls back; elsewhere it takes effect.
        let direct = FileDevice::open(&path, FileDeviceConfig::default()).unwrap();
        direct.read_at(0, &mut back).await.unwrap();
        assert_eq!(back, [7u8; 4096]);
    }

    #[tokio::test]
    async fn small_configured_blocks_work_with_o_direct() {
        // 512-byte blocks: honoured if the kernel allows O_DIRECT at 512, raised otherwise.
        let directory = tempfile::tempdir().unwrap();
        let config = FileDeviceConfig {
            block_size_bytes: 512,
            ..FileDeviceConfig::default()
        };
        let device = FileDevice::create(directory.path().join("disk"), 64 * 1024, config).unwrap();
        let block = device.block_size_bytes();
        assert!(block >= 512 && block.is_power_of_two());
        let data = vec![3u8; block as usize];
        device.write_at(block, &data).await.unwrap();
        let mut back = vec![0u8; block as usize];
        device.read_at(block, &mut back).await.unwrap();
        assert_eq!(back, data);
    }

    #[test]
    fn rejects_bad_configs() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("disk");
        assert!(FileDevice::create(&path, 1000, FileDeviceConfig::default()).is_err());
        let config = FileDeviceConfig {
            engine: IoEngine::Threads { threads: 0 },
            ..FileDeviceConfig::default()
        };
        assert!(FileDevice::create(&path, 4096, config).is_err());
        assert!(FileDevice::open(
            directory.path().join("missing"),
            FileDeviceConfig::default()
        )
        .is_err());
    }

    /// An existing file whose size is not whole blocks is refused, naming its size: it was
    /// exported cut to whole blocks without a word (6,000 bytes as 4,096; 100 bytes as an
    /// empty device). One of whole blocks opens at its size.
    #[test]
    fn an_existing_file_of_partial_blocks_is_refused() {
        let directory = tempfile::tempdir().unwrap();
        for (raw, wanted) in [(6000u64, "not a multiple"), (100, "less than one")] {
            let path = directory.path().join(format!("odd-{raw}"));
            std::fs::File::create(&path).unwrap().set_len(raw).unwrap();
            let error = FileDevice::open(&path, FileDeviceConfig::default())
                .err()
                .expect("refused");
            assert!(error.to_string().contains(wanted), "{error}");
            assert!(error.to_string().contains(&raw.to_string()), "{error}");
        }
        let path = directory.path().join("whole");
        std::fs::File::create(&path).unwrap().set_len(8192).unwrap();
        let device = FileDevice::open(&path, FileDeviceConfig::default()).unwrap();
        assert_eq!(device.size_bytes(), 8192);
    }

    /// An OS error is said once when the error's chain is printed whole.
    #[test]
    fn an_os_error_is_said_once() {
        let error = FileDevice::open("/nonexistent/strata-disk", FileDeviceConfig::default())
            .err()
            .expect("refused");
        let chain = format!("{:#}", anyhow::Error::from(error));
        assert_eq!(chain.matches("No such file").count(), 1, "{chain}");
    }
}
