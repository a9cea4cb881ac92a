//! [`Device`] for [`FileDevice`].

use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use async_trait::async_trait;

use super::syscalls::{allocation, execute, Job};
use super::FileDevice;
use crate::aligned::AlignedBuffer;
use crate::{
    check_request, AllocationExtent, Device, DeviceError, DeviceKind, DeviceStats, OpKind,
};

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

    /// A regular file's holes from `SEEK_DATA`/`SEEK_HOLE` (on an I/O thread of tokio's
    /// blocking pool: the filesystem may take its time); a block device is all data.
    async fn allocation(
        &self,
        offset_bytes: u64,
        length_bytes: u64,
    ) -> Result<Vec<AllocationExtent>, DeviceError> {
        check_request(
            offset_bytes,
            length_bytes,
            self.size_bytes,
            self.block_size_bytes,
        )?;
        if self.is_block_device || length_bytes == 0 {
            return Ok(vec![AllocationExtent {
                length_bytes,
                state: crate::ExtentState::Data,
            }]
            .into_iter()
            .filter(|extent| extent.length_bytes > 0)
            .collect());
        }
        let file = Arc::clone(&self.file);
        let block_size_bytes = self.block_size_bytes;
        tokio::task::spawn_blocking(move || {
            allocation(&file, offset_bytes, length_bytes, block_size_bytes)
        })
        .await
        .map_err(|e| DeviceError::io("spawn_blocking", std::io::Error::other(e)))?
    }

    /// Two `lseek`s per extent (a block device answers at once).
    fn allocation_is_cheap(&self) -> bool {
        true
    }

    /// A regular file's discard punches a hole (or writes zeros where the filesystem has no
    /// holes): it reads back as zeros. A block device may drop the hint.
    fn discard_zeroes(&self) -> bool {
        !self.is_block_device
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
