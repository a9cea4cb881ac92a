//! The blocking calls a [`FileDevice`](super::FileDevice) runs on its I/O threads.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::Arc;

use tokio::sync::oneshot;

use crate::aligned::AlignedBuffer;
use crate::initialize::Initializer;
use crate::{AllocationExtent, DeviceError, ExtentState};

const EINVAL: i32 = 22;
const EOPNOTSUPP: i32 = 95;

/// One blocking operation, owning its buffer so it can cross threads.
pub(super) enum Job {
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

pub(super) type JobResult = Result<Option<AlignedBuffer>, DeviceError>;

pub(super) struct Work {
    pub(super) job: Job,
    pub(super) reply: oneshot::Sender<JobResult>,
}

/// How long [`lock_exclusively`] waits for a lock held elsewhere.
pub(super) const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Takes the file's exclusive `flock`: one user at a time, since a second server (a cache
/// started again with --force or --load, a second `serve` on one data directory) would write
/// under the first one's feet. A process killed a moment ago may still hold it for a while
/// (the kernel tears its io_uring down after the process is gone), so a held lock is waited
/// for up to [`LOCK_WAIT`] before the open is refused.
pub(super) fn lock_exclusively(file: &File, path: &Path) -> Result<(), DeviceError> {
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

pub(super) fn open_file(
    path: &Path,
    direct: bool,
    create: bool,
) -> Result<(File, bool), DeviceError> {
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
pub(super) fn dio_alignment(file: &File) -> Option<(u64, u64)> {
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
pub(super) fn execute(file: &File, job: Job) -> JobResult {
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

/// The holes and data of `[offset_bytes, offset_bytes + length_bytes)` of a regular file, from
/// `lseek(SEEK_DATA/SEEK_HOLE)`, in whole blocks of `block_size_bytes`: a block with any data
/// in it is data. A filesystem without hole support reports the whole file as data (the
/// kernel's generic answer). The data the fill-ahead (`initialize.rs`) wrote is data too:
/// zeros, but stored.
pub(super) fn allocation(
    file: &File,
    offset_bytes: u64,
    length_bytes: u64,
    block_size_bytes: u64,
) -> Result<Vec<AllocationExtent>, DeviceError> {
    use rustix::fs::{seek, SeekFrom};
    const ENXIO: i32 = 6;
    let end = offset_bytes + length_bytes;
    let mut extents: Vec<AllocationExtent> = Vec::new();
    let mut push = |length_bytes: u64, state: ExtentState| match extents.last_mut() {
        _ if length_bytes == 0 => {}
        Some(last) if last.state == state => last.length_bytes += length_bytes,
        _ => extents.push(AllocationExtent {
            length_bytes,
            state,
        }),
    };
    let mut position = offset_bytes;
    while position < end {
        let data_start = match seek(file, SeekFrom::Data(position)) {
            Ok(at) => (at / block_size_bytes * block_size_bytes).clamp(position, end),
            // No data at or after `position`.
            Err(errno) if errno.raw_os_error() == ENXIO => end,
            Err(errno) => return Err(DeviceError::io("lseek(SEEK_DATA)", errno.into())),
        };
        push(data_start - position, ExtentState::Hole);
        position = data_start;
        if position >= end {
            break;
        }
        let hole_start = match seek(file, SeekFrom::Hole(position)) {
            Ok(at) => at.div_ceil(block_size_bytes) * block_size_bytes,
            Err(errno) if errno.raw_os_error() == ENXIO => end,
            Err(errno) => return Err(DeviceError::io("lseek(SEEK_HOLE)", errno.into())),
        };
        // Always progress, whatever the filesystem says.
        let hole_start = hole_start.clamp(position + block_size_bytes, end);
        push(hole_start - position, ExtentState::Data);
        position = hole_start;
    }
    Ok(extents)
}
