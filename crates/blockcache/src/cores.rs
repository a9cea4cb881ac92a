//! Several core devices behind one cache, as Open-CAS attaches several cores to one cache
//! instance and exports each as its own device (`cas1-1`, `cas1-2`, ...).
//!
//! Why composition and not a core id in every cache line: the cache addresses one core line
//! space. [`CoreSet`] lays the cores end to end in that space, each starting on a
//! [`CORE_ALIGN_BYTES`] boundary so no cache line (at most 64 KiB) ever straddles two cores,
//! and the [`BlockCache`](crate::BlockCache) over it stays exactly as it is (mapping, eviction,
//! cleaning, cut-off, persistence). [`CoreView`] then presents each core's window of the cached
//! device as a device of the core's size, which is what gets exported. The bytes between one
//! core's end and the next boundary belong to no core: they read as zeros and writes to them
//! are dropped (a partial last line of a core is cached whole, gap included).

use std::sync::Arc;

use async_trait::async_trait;
use device::{check_request, Device, DeviceError, DeviceKind, DeviceStats, OpKind, StatsRecorder};

use crate::config::LINE_SIZES_BYTES;

/// Where each core starts in the combined space: a multiple of the largest line size.
pub const CORE_ALIGN_BYTES: u64 = LINE_SIZES_BYTES[LINE_SIZES_BYTES.len() - 1];

/// The cores laid end to end, each from a [`CORE_ALIGN_BYTES`] boundary: the cache's core.
pub struct CoreSet {
    cores: Vec<Arc<dyn Device>>,
    starts_bytes: Vec<u64>,
    size_bytes: u64,
    block_bytes: u64,
    recorder: StatsRecorder,
}

impl CoreSet {
    /// Lays out `cores` (at least one) in order.
    pub fn new(cores: Vec<Arc<dyn Device>>) -> Result<Self, DeviceError> {
        if cores.is_empty() {
            return Err(DeviceError::InvalidConfig("a cache needs a core".into()));
        }
        let mut starts_bytes = Vec::with_capacity(cores.len());
        let mut next = 0u64;
        for core in &cores {
            starts_bytes.push(next);
            next = (next + core.size_bytes()).next_multiple_of(CORE_ALIGN_BYTES);
        }
        let last = cores.len() - 1;
        let size_bytes = starts_bytes[last] + cores[last].size_bytes();
        let block_bytes = cores
            .iter()
            .map(|c| c.block_size_bytes())
            .max()
            .unwrap_or(512);
        let names: Vec<&str> = cores.iter().map(|c| c.name()).collect();
        Ok(Self {
            recorder: StatsRecorder::new(names.join("+"), DeviceKind::Other("cores")),
            cores,
            starts_bytes,
            size_bytes,
            block_bytes,
        })
    }

    /// Start and size of core `index` in the combined space.
    pub fn window(&self, index: usize) -> (u64, u64) {
        (self.starts_bytes[index], self.cores[index].size_bytes())
    }

    /// Number of cores.
    pub fn len(&self) -> usize {
        self.cores.len()
    }

    /// Always false: a set has at least one core.
    pub fn is_empty(&self) -> bool {
        self.cores.is_empty()
    }

    /// The pieces of `[offset, offset + length)`: (core index or `None` for a gap, offset in
    /// that core, offset in the request, length).
    fn pieces(
        &self,
        offset_bytes: u64,
        length_bytes: u64,
    ) -> Vec<(Option<usize>, u64, usize, usize)> {
        let mut pieces = Vec::new();
        let end = offset_bytes + length_bytes;
        let mut at = offset_bytes;
        while at < end {
            // The last core starting at or before `at`.
            let index = self.starts_bytes.partition_point(|&start| start <= at) - 1;
            let (start, size) = self.window(index);
            let core_end = start + size;
            let (target, stop) = if at < core_end {
                (Some(index), end.min(core_end))
            } else {
                let next = self
                    .starts_bytes
                    .get(index + 1)
                    .copied()
                    .unwrap_or(u64::MAX);
                (None, end.min(next))
            };
            pieces.push((
                target,
                at - start,
                (at - offset_bytes) as usize,
                (stop - at) as usize,
            ));
            at = stop;
        }
        pieces
    }

    fn check(&self, offset_bytes: u64, length_bytes: u64) -> Result<(), DeviceError> {
        check_request(
            offset_bytes,
            length_bytes,
            self.size_bytes,
            self.block_bytes,
        )
    }
}

#[async_trait]
impl Device for CoreSet {
    async fn read_at(&self, offset_bytes: u64, buffer: &mut [u8]) -> Result<(), DeviceError> {
        let guard = self.recorder.begin(OpKind::Read);
        let length = buffer.len() as u64;
        let result = async {
            self.check(offset_bytes, length)?;
            for (target, at, from, count) in self.pieces(offset_bytes, length) {
                let part = &mut buffer[from..from + count];
                match target {
                    Some(index) => self.cores[index].read_at(at, part).await?,
                    None => part.fill(0),
                }
            }
            Ok(())
        }
        .await;
        guard.finish(length, result)
    }

    async fn write_at(&self, offset_bytes: u64, data: &[u8]) -> Result<(), DeviceError> {
        let guard = self.recorder.begin(OpKind::Write);
        let length = data.len() as u64;
        let result = async {
            self.check(offset_bytes, length)?;
            for (target, at, from, count) in self.pieces(offset_bytes, length) {
                if let Some(index) = target {
                    self.cores[index]
                        .write_at(at, &data[from..from + count])
                        .await?;
                }
            }
            Ok(())
        }
        .await;
        guard.finish(length, result)
    }

    async fn flush(&self) -> Result<(), DeviceError> {
        let guard = self.recorder.begin(OpKind::Flush);
        let mut result = Ok(());
        for core in &self.cores {
            if let Err(error) = core.flush().await {
                result = Err(error);
            }
        }
        guard.finish(0, result)
    }

    async fn discard(&self, offset_bytes: u64, length_bytes: u64) -> Result<(), DeviceError> {
        let guard = self.recorder.begin(OpKind::Discard);
        let result = async {
            self.check(offset_bytes, length_bytes)?;
            for (target, at, _, count) in self.pieces(offset_bytes, length_bytes) {
                if let Some(index) = target {
                    self.cores[index].discard(at, count as u64).await?;
                }
            }
            Ok(())
        }
        .await;
        guard.finish(length_bytes, result)
    }

    fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    fn block_size_bytes(&self) -> u64 {
        self.block_bytes
    }

    fn name(&self) -> &str {
        self.recorder.name()
    }

    fn kind(&self) -> DeviceKind {
        DeviceKind::Other("cores")
    }

    fn stats(&self) -> DeviceStats {
        self.recorder.snapshot()
    }
}

/// A window `[start, start + size)` of a device, as a device of `size` bytes: one core of a
/// multi-core cache, seen through the cache.
pub struct CoreView {
    inner: Arc<dyn Device>,
    start_bytes: u64,
    size_bytes: u64,
    recorder: StatsRecorder,
}

impl CoreView {
    /// The window of `inner` from `start_bytes`, `size_bytes` long, named `name`.
    pub fn new(
        name: impl Into<String>,
        inner: Arc<dyn Device>,
        start_bytes: u64,
        size_bytes: u64,
    ) -> Result<Self, DeviceError> {
        let block = inner.block_size_bytes();
        if !start_bytes.is_multiple_of(block)
            || start_bytes
                .checked_add(size_bytes)
                .is_none_or(|end| end > inner.size_bytes())
        {
            return Err(DeviceError::InvalidConfig(format!(
                "window {start_bytes}+{size_bytes} does not fit the {}-byte device {}",
                inner.size_bytes(),
                inner.name()
            )));
        }
        Ok(Self {
            inner,
            start_bytes,
            size_bytes,
            recorder: StatsRecorder::new(name, DeviceKind::Other("core view")),
        })
    }

    fn check(&self, offset_bytes: u64, length_bytes: u64) -> Result<(), DeviceError> {
        check_request(
            offset_bytes,
            length_bytes,
            self.size_bytes,
            self.inner.block_size_bytes(),
        )
    }
}

#[async_trait]
impl Device for CoreView {
    async fn read_at(&self, offset_bytes: u64, buffer: &mut [u8]) -> Result<(), DeviceError> {
        let guard = self.recorder.begin(OpKind::Read);
        let length = buffer.len() as u64;
        let result = match self.check(offset_bytes, length) {
            Ok(()) => {
                self.inner
                    .read_at(self.start_bytes + offset_bytes, buffer)
                    .await
            }
            Err(error) => Err(error),
        };
        guard.finish(length, result)
    }

    async fn write_at(&self, offset_bytes: u64, data: &[u8]) -> Result<(), DeviceError> {
        let guard = self.recorder.begin(OpKind::Write);
        let length = data.len() as u64;
        let result = match self.check(offset_bytes, length) {
            Ok(()) => {
                self.inner
                    .write_at(self.start_bytes + offset_bytes, data)
                    .await
            }
            Err(error) => Err(error),
        };
        guard.finish(length, result)
    }

    async fn flush(&self) -> Result<(), DeviceError> {
        let guard = self.recorder.begin(OpKind::Flush);
        guard.finish(0, self.inner.flush().await)
    }

    async fn discard(&self, offset_bytes: u64, length_bytes: u64) -> Result<(), DeviceError> {
        let guard = self.recorder.begin(OpKind::Discard);
        let result = match self.check(offset_bytes, length_bytes) {
            Ok(()) => {
                self.inner
                    .discard(self.start_bytes + offset_bytes, length_bytes)
                    .await
            }
            Err(error) => Err(error),
        };
        guard.finish(length_bytes, result)
    }

    fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    fn block_size_bytes(&self) -> u64 {
        self.inner.block_size_bytes()
    }

    fn name(&self) -> &str {
        self.recorder.name()
    }

    fn kind(&self) -> DeviceKind {
        DeviceKind::Other("core view")
    }

    fn stats(&self) -> DeviceStats {
        self.recorder.snapshot()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use device::MemoryDevice;

    fn memory(name: &str, size_bytes: u64) -> Arc<dyn Device> {
        Arc::new(MemoryDevice::with_block_size(name, size_bytes, 4096).unwrap())
    }

    #[tokio::test]
    async fn cores_sit_on_aligned_windows_and_gaps_read_zero() {
        let a = memory("a", 100 * 4096); // not a multiple of 64 KiB: a gap follows
        let b = memory("b", 64 * 4096);
        let set = Arc::new(CoreSet::new(vec![Arc::clone(&a), Arc::clone(&b)]).unwrap());
        assert_eq!(set.window(0), (0, 100 * 4096));
        assert_eq!(set.window(1), (7 * CORE_ALIGN_BYTES, 64 * 4096));
        assert_eq!(set.size_bytes(), 7 * CORE_ALIGN_BYTES + 64 * 4096);
        // A write over a's end, the gap and b's start lands only in a and b.
        let span = 7 * CORE_ALIGN_BYTES - 99 * 4096 + 4096;
        set.write_at(99 * 4096, &vec![7u8; span as usize])
            .await
            .unwrap();
        let mut back = vec![1u8; span as usize];
        set.read_at(99 * 4096, &mut back).await.unwrap();
        assert!(back[..4096].iter().all(|&x| x == 7), "a's last block");
        assert!(
            back[4096..span as usize - 4096].iter().all(|&x| x == 0),
            "gap"
        );
        assert!(
            back[span as usize - 4096..].iter().all(|&x| x == 7),
            "b's first block"
        );
        let mut block = vec![0u8; 4096];
        b.read_at(0, &mut block).await.unwrap();
        assert!(block.iter().all(|&x| x == 7));
        a.read_at(99 * 4096, &mut block).await.unwrap();
        assert!(block.iter().all(|&x| x == 7));
        // A view sees b alone, bounded by its size.
        let (start, size) = set.window(1);
        let view = CoreView::new("b view", set.clone(), start, size).unwrap();
        assert_eq!(view.size_bytes(), 64 * 4096);
        view.read_at(0, &mut block).await.unwrap();
        assert!(block.iter().all(|&x| x == 7));
        assert!(view.read_at(64 * 4096, &mut block).await.is_err());
        assert!(CoreView::new("too far", set.clone(), start, size + 4096).is_err());
        assert!(CoreSet::new(Vec::new()).is_err());
    }
}
