//! A sparse in-memory device: chunks are allocated on first write and freed by discard.

use std::sync::RwLock;

use async_trait::async_trait;

use crate::stats::StatsRecorder;
use crate::{
    check_block_size, check_request, AllocationExtent, Device, DeviceError, DeviceKind,
    DeviceStats, ExtentState, OpKind,
};

/// Size of one lazily allocated chunk. Small enough that random 4 KiB writes over a large
/// device do not allocate much more than they write; large enough to keep the table small.
const CHUNK_BYTES: u64 = 64 * 1024;

/// A device in memory. Unwritten and discarded ranges read as zeros.
pub struct MemoryDevice {
    chunks: Vec<RwLock<Option<Box<[u8]>>>>,
    size_bytes: u64,
    block_size_bytes: u64,
    stats: StatsRecorder,
}

impl MemoryDevice {
    /// A device of `size_bytes` with 512-byte blocks.
    pub fn new(name: impl Into<String>, size_bytes: u64) -> Result<Self, DeviceError> {
        Self::with_block_size(name, size_bytes, 512)
    }

    /// A device of `size_bytes` with the given block size (a power of two).
    pub fn with_block_size(
        name: impl Into<String>,
        size_bytes: u64,
        block_size_bytes: u64,
    ) -> Result<Self, DeviceError> {
        check_block_size(block_size_bytes)?;
        if !size_bytes.is_multiple_of(block_size_bytes) {
            return Err(DeviceError::InvalidConfig(format!(
                "size {size_bytes} is not a multiple of the block size {block_size_bytes}"
            )));
        }
        let chunk_count = size_bytes.div_ceil(CHUNK_BYTES);
        Ok(Self {
            chunks: (0..chunk_count).map(|_| RwLock::new(None)).collect(),
            size_bytes,
            block_size_bytes,
            stats: StatsRecorder::new(name, DeviceKind::Memory),
        })
    }

    /// Bytes of memory held by allocated chunks.
    pub fn allocated_bytes(&self) -> u64 {
        self.chunks
            .iter()
            .filter(|c| c.read().map(|c| c.is_some()).unwrap_or(true))
            .count() as u64
            * CHUNK_BYTES
    }

    /// Calls `visit(chunk_index, offset_in_chunk, range_in_request)` for each chunk a request
    /// touches.
    fn for_each_chunk(
        offset_bytes: u64,
        length_bytes: u64,
        mut visit: impl FnMut(usize, usize, std::ops::Range<usize>),
    ) {
        let mut done = 0u64;
        while done < length_bytes {
            let position = offset_bytes + done;
            let chunk = (position / CHUNK_BYTES) as usize;
            let within = position % CHUNK_BYTES;
            let take = (CHUNK_BYTES - within).min(length_bytes - done);
            visit(
                chunk,
                within as usize,
                done as usize..(done + take) as usize,
            );
            done += take;
        }
    }

    fn read_sync(&self, offset_bytes: u64, buffer: &mut [u8]) {
        Self::for_each_chunk(offset_bytes, buffer.len() as u64, |chunk, within, range| {
            let target = &mut buffer[range];
            let guard = self.chunks[chunk].read().unwrap_or_else(|e| e.into_inner());
            match guard.as_deref() {
                Some(bytes) => target.copy_from_slice(&bytes[within..within + target.len()]),
                None => target.fill(0),
            }
        });
    }

    fn write_sync(&self, offset_bytes: u64, data: &[u8]) {
        Self::for_each_chunk(offset_bytes, data.len() as u64, |chunk, within, range| {
            let source = &data[range];
            let mut guard = self.chunks[chunk]
                .write()
                .unwrap_or_else(|e| e.into_inner());
            let bytes = guard.get_or_insert_with(|| vec![0u8; CHUNK_BYTES as usize].into());
            bytes[within..within + source.len()].copy_from_slice(source);
        });
    }

    fn discard_sync(&self, offset_bytes: u64, length_bytes: u64) {
        Self::for_each_chunk(offset_bytes, length_bytes, |chunk, within, range| {
            let mut guard = self.chunks[chunk]
                .write()
                .unwrap_or_else(|e| e.into_inner());
            if range.len() as u64 == CHUNK_BYTES {
                *guard = None;
            } else if let Some(bytes) = guard.as_mut() {
                bytes[within..within + range.len()].fill(0);
            }
        });
    }
}

#[async_trait]
impl Device for MemoryDevice {
    async fn read_at(&self, offset_bytes: u64, buffer: &mut [u8]) -> Result<(), DeviceError> {
        let guard = self.stats.begin(OpKind::Read);
        let length_bytes = buffer.len() as u64;
        let result = check_request(
            offset_bytes,
            length_bytes,
            self.size_bytes,
            self.block_size_bytes,
        )
        .map(|()| self.read_sync(offset_bytes, buffer));
        guard.finish(length_bytes, result)
    }

    async fn write_at(&self, offset_bytes: u64, data: &[u8]) -> Result<(), DeviceError> {
        let guard = self.stats.begin(OpKind::Write);
        let length_bytes = data.len() as u64;
        let result = check_request(
            offset_bytes,
            length_bytes,
            self.size_bytes,
            self.block_size_bytes,
        )
        .map(|()| self.write_sync(offset_bytes, data));
        guard.finish(length_bytes, result)
    }

    async fn flush(&self) -> Result<(), DeviceError> {
        self.stats.begin(OpKind::Flush).finish(0, Ok(()))
    }

    async fn discard(&self, offset_bytes: u64, length_bytes: u64) -> Result<(), DeviceError> {
        let guard = self.stats.begin(OpKind::Discard);
        let result = check_request(
            offset_bytes,
            length_bytes,
            self.size_bytes,
            self.block_size_bytes,
        )
        .map(|()| self.discard_sync(offset_bytes, length_bytes));
        guard.finish(length_bytes, result)
    }

    /// Chunks never written (or discarded whole) are holes; allocated ones are data.
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
        let mut extents: Vec<AllocationExtent> = Vec::new();
        Self::for_each_chunk(offset_bytes, length_bytes, |chunk, _, range| {
            let allocated = self.chunks[chunk]
                .read()
                .map(|bytes| bytes.is_some())
                .unwrap_or(true);
            let state = if allocated {
                ExtentState::Data
            } else {
                ExtentState::Hole
            };
            let length_bytes = range.len() as u64;
            match extents.last_mut() {
                Some(last) if last.state == state => last.length_bytes += length_bytes,
                _ => extents.push(AllocationExtent {
                    length_bytes,
                    state,
                }),
            }
        });
        Ok(extents)
    }

    /// A look at the chunk table.
    fn allocation_is_cheap(&self) -> bool {
        true
    }

    /// Discard frees whole chunks and zeroes partial ones.
    fn discard_zeroes(&self) -> bool {
        true
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
        DeviceKind::Memory
    }

    fn stats(&self) -> DeviceStats {
        self.stats.snapshot()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reads_back_writes_across_chunks_and_discards_to_zero() {
        let device = MemoryDevice::new("m", 4 * CHUNK_BYTES).unwrap();
        let data: Vec<u8> = (0..3 * 4096u32).map(|i| (i % 251) as u8).collect();
        let offset = CHUNK_BYTES - 4096;
        device.write_at(offset, &data).await.unwrap();
        let mut back = vec![0u8; data.len()];
        device.read_at(offset, &mut back).await.unwrap();
        assert_eq!(back, data);
        assert_eq!(device.allocated_bytes(), 2 * CHUNK_BYTES);

        device.discard(0, 2 * CHUNK_BYTES).await.unwrap();
        device.read_at(offset, &mut back).await.unwrap();
        assert!(back.iter().all(|&b| b == 0));
        assert_eq!(device.allocated_bytes(), 0);

        let stats = device.stats();
        assert_eq!(stats.write.ops, 1);
        assert_eq!(stats.read.bytes, 2 * data.len() as u64);
        assert_eq!(stats.discard.bytes, 2 * CHUNK_BYTES);
    }

    #[tokio::test]
    async fn allocation_reports_unwritten_chunks_as_holes() {
        let device = MemoryDevice::with_block_size("m", 4 * CHUNK_BYTES, 4096).unwrap();
        device
            .write_at(CHUNK_BYTES + 4096, &[1u8; 4096])
            .await
            .unwrap();
        let extents = device.allocation(4096, 3 * CHUNK_BYTES).await.unwrap();
        let hole = |length_bytes| AllocationExtent {
            length_bytes,
            state: ExtentState::Hole,
        };
        let data = AllocationExtent {
            length_bytes: CHUNK_BYTES,
            state: ExtentState::Data,
        };
        assert_eq!(
            extents,
            vec![hole(CHUNK_BYTES - 4096), data, hole(CHUNK_BYTES + 4096)]
        );
        device.discard(CHUNK_BYTES, CHUNK_BYTES).await.unwrap();
        assert_eq!(
            device.allocation(0, 4 * CHUNK_BYTES).await.unwrap(),
            vec![hole(4 * CHUNK_BYTES)]
        );
        assert!(device.allocation(0, 8 * CHUNK_BYTES).await.is_err());
        assert!(device.discard_zeroes());
    }

    #[tokio::test]
    async fn rejects_misaligned_and_out_of_range() {
        let device = MemoryDevice::new("m", 8192).unwrap();
        let mut buffer = vec![0u8; 512];
        assert!(matches!(
            device.read_at(1, &mut buffer).await,
            Err(DeviceError::Misaligned { .. })
        ));
        assert!(matches!(
            device.write_at(8192, &buffer).await,
            Err(DeviceError::OutOfRange { .. })
        ));
        assert_eq!(device.stats().errors(), 2);
        assert!(MemoryDevice::with_block_size("m", 1000, 512).is_err());
        assert!(MemoryDevice::with_block_size("m", 1024, 3).is_err());
    }
}
