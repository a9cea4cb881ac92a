//! Block I/O on an open volume: the [`device::Device`] implementation. Every call is split
//! into per-object pieces issued concurrently (at most `in_flight_max` at once).

use std::sync::atomic::Ordering;

use async_trait::async_trait;
use bytes::Bytes;
use device::{
    check_request, AllocationExtent, Device, DeviceError, DeviceKind, DeviceStats, ExtentState,
    OpKind,
};
use futures_util::future::join_all;
use rados::{RadosError, WriteOp};
use tokio::sync::Semaphore;

use crate::error::VolumeError;
use crate::format;
use crate::volume::{Inner, Volume};
use crate::BLOCK_SIZE_BYTES;

/// One object's part of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Piece {
    object_number: u64,
    offset_in_object_bytes: u64,
    length_bytes: u64,
}

/// Splits `[offset_bytes, offset_bytes + length_bytes)` at object boundaries.
fn pieces(offset_bytes: u64, length_bytes: u64, order: u8) -> Vec<Piece> {
    let object_bytes = 1u64 << order;
    let end = offset_bytes + length_bytes;
    let mut pieces = Vec::new();
    let mut at = offset_bytes;
    while at < end {
        let object_number = at >> order;
        let offset_in_object_bytes = at & (object_bytes - 1);
        let length_bytes = (object_bytes - offset_in_object_bytes).min(end - at);
        pieces.push(Piece {
            object_number,
            offset_in_object_bytes,
            length_bytes,
        });
        at += length_bytes;
    }
    pieces
}

fn device_error(operation: &str, error: VolumeError) -> DeviceError {
    DeviceError::Io {
        operation: operation.to_string(),
        errno: error.errno(),
        cause: std::io::Error::other(error.to_string()),
    }
}

/// Runs `futures` with at most `in_flight_max` of them started at once; results in order.
async fn bounded<F: std::future::Future>(
    futures: impl IntoIterator<Item = F>,
    in_flight_max: usize,
) -> Vec<F::Output> {
    let slots = Semaphore::new(in_flight_max);
    let slots = &slots;
    join_all(futures.into_iter().map(|future| async move {
        let _slot = slots.acquire().await;
        future.await
    }))
    .await
}

fn first_error(results: Vec<Result<(), DeviceError>>) -> Result<(), DeviceError> {
    results.into_iter().collect()
}

impl Inner {
    /// The bytes object `number` holds (0 when it does not exist).
    async fn stored_bytes(&self, number: u64) -> Result<u64, DeviceError> {
        let object = self.object(number);
        match self.data.stat(&object).await {
            Ok(stat) => Ok(stat.size_bytes),
            Err(RadosError::NotFound(_)) => Ok(0),
            Err(error) => Err(device_error(
                &format!("stat {object}"),
                VolumeError::rados("stat", error),
            )),
        }
    }

    fn object(&self, number: u64) -> String {
        format::data_object(&self.object_prefix, number)
    }

    fn check(&self, offset_bytes: u64, length_bytes: u64) -> Result<(), DeviceError> {
        check_request(
            offset_bytes,
            length_bytes,
            self.size_bytes.load(Ordering::Acquire),
            BLOCK_SIZE_BYTES,
        )
    }

    async fn read(&self, offset_bytes: u64, buffer: &mut [u8]) -> Result<(), DeviceError> {
        self.check(offset_bytes, buffer.len() as u64)?;
        let _shared = self.resizing.read().await;
        let mut slices = Vec::new();
        let mut rest = buffer;
        for piece in pieces(offset_bytes, rest.len() as u64, self.order) {
            let (slice, tail) = std::mem::take(&mut rest).split_at_mut(piece.length_bytes as usize);
            slices.push((piece, slice));
            rest = tail;
        }
        let reads = slices
            .into_iter()
            .map(|(piece, slice)| self.read_piece(piece, slice));
        first_error(bounded(reads, self.shared.config.in_flight_max).await)
    }

    async fn read_piece(&self, piece: Piece, slice: &mut [u8]) -> Result<(), DeviceError> {
        let object = self.object(piece.object_number);
        match self
            .data
            .read(&object, piece.offset_in_object_bytes, piece.length_bytes)
            .await
        {
            Ok(data) => {
                let stored = data.len().min(slice.len());
                slice[..stored].copy_from_slice(&data[..stored]);
                slice[stored..].fill(0);
                Ok(())
            }
            Err(RadosError::NotFound(_)) => {
                slice.fill(0);
                Ok(())
            }
            Err(error) => Err(device_error(
                &format!("read {object}"),
                VolumeError::rados("read", error),
            )),
        }
    }

    async fn write(&self, offset_bytes: u64, data: &[u8]) -> Result<(), DeviceError> {
        self.check(offset_bytes, data.len() as u64)?;
        self.check_writable()
            .await
            .map_err(|error| device_error("write", error))?;
        let _shared = self.resizing.read().await;
        // The size may have changed while this write waited for a resize.
        self.check(offset_bytes, data.len() as u64)?;
        let mut at = 0usize;
        let mut writes = Vec::new();
        for piece in pieces(offset_bytes, data.len() as u64, self.order) {
            let chunk = Bytes::copy_from_slice(&data[at..at + piece.length_bytes as usize]);
            at += piece.length_bytes as usize;
            writes.push(self.write_piece(piece, chunk));
        }
        first_error(bounded(writes, self.shared.config.in_flight_max).await)
    }

    async fn write_piece(&self, piece: Piece, chunk: Bytes) -> Result<(), DeviceError> {
        let object = self.object(piece.object_number);
        self.data
            .operate(
                &object,
                WriteOp::new().write(piece.offset_in_object_bytes, chunk),
            )
            .await
            .map_err(|error| {
                device_error(
                    &format!("write {object}"),
                    VolumeError::rados("write", error),
                )
            })
    }

    async fn discard(&self, offset_bytes: u64, length_bytes: u64) -> Result<(), DeviceError> {
        self.check(offset_bytes, length_bytes)?;
        self.check_writable()
            .await
            .map_err(|error| device_error("discard", error))?;
        let _shared = self.resizing.read().await;
        let size_bytes = self.size_bytes.load(Ordering::Acquire);
        self.check(offset_bytes, length_bytes)?;
        let discards = pieces(offset_bytes, length_bytes, self.order)
            .into_iter()
            .map(|piece| self.discard_piece(piece, size_bytes));
        first_error(bounded(discards, self.shared.config.in_flight_max).await)
    }

    async fn discard_piece(&self, piece: Piece, size_bytes: u64) -> Result<(), DeviceError> {
        let object_bytes = 1u64 << self.order;
        let object = self.object(piece.object_number);
        let object_start = piece.object_number * object_bytes;
        let object_length = object_bytes.min(size_bytes - object_start);
        let whole = piece.offset_in_object_bytes == 0 && piece.length_bytes >= object_length;
        let op = if whole {
            WriteOp::new().remove()
        } else {
            WriteOp::new().zero(piece.offset_in_object_bytes, piece.length_bytes)
        };
        match self.data.operate(&object, op).await {
            Ok(()) | Err(RadosError::NotFound(_)) => Ok(()),
            Err(error) => Err(device_error(
                &format!("discard {object}"),
                VolumeError::rados("discard", error),
            )),
        }
    }

    async fn allocation(
        &self,
        offset_bytes: u64,
        length_bytes: u64,
    ) -> Result<Vec<AllocationExtent>, DeviceError> {
        self.check(offset_bytes, length_bytes)?;
        let _shared = self.resizing.read().await;
        let all = pieces(offset_bytes, length_bytes, self.order);
        let stats = all
            .iter()
            .map(|piece| self.stored_bytes(piece.object_number));
        let stats = bounded(stats, self.shared.config.in_flight_max).await;
        let mut extents: Vec<AllocationExtent> = Vec::new();
        let mut push = |length_bytes: u64, state: ExtentState| {
            if length_bytes == 0 {
                return;
            }
            match extents.last_mut() {
                Some(last) if last.state == state => last.length_bytes += length_bytes,
                _ => extents.push(AllocationExtent {
                    length_bytes,
                    state,
                }),
            }
        };
        for (piece, stored) in all.into_iter().zip(stats) {
            let object_size_bytes = stored?;
            // Stored bytes are data; the part past the object's end is a hole. Block-aligned,
            // as clients expect (a stored partial block counts as data).
            let stored_end = object_size_bytes.next_multiple_of(BLOCK_SIZE_BYTES);
            let data_bytes = stored_end
                .saturating_sub(piece.offset_in_object_bytes)
                .min(piece.length_bytes);
            push(data_bytes, ExtentState::Data);
            push(piece.length_bytes - data_bytes, ExtentState::Hole);
        }
        Ok(extents)
    }
}

/// Reads see every acknowledged write; a write is acknowledged once RADOS acknowledged every
/// object write, which it does only once every replica committed durably, so `flush` has
/// nothing to wait for.
#[async_trait]
impl Device for Volume {
    async fn read_at(&self, offset_bytes: u64, buffer: &mut [u8]) -> Result<(), DeviceError> {
        let guard = self.inner.recorder.begin(OpKind::Read);
        let length_bytes = buffer.len() as u64;
        let result = self.inner.read(offset_bytes, buffer).await;
        guard.finish(length_bytes, result)
    }

    async fn write_at(&self, offset_bytes: u64, data: &[u8]) -> Result<(), DeviceError> {
        let guard = self.inner.recorder.begin(OpKind::Write);
        let result = self.inner.write(offset_bytes, data).await;
        guard.finish(data.len() as u64, result)
    }

    async fn flush(&self) -> Result<(), DeviceError> {
        // Every acknowledged write is already durable on every replica (see above).
        let guard = self.inner.recorder.begin(OpKind::Flush);
        guard.finish(0, Ok(()))
    }

    async fn discard(&self, offset_bytes: u64, length_bytes: u64) -> Result<(), DeviceError> {
        let guard = self.inner.recorder.begin(OpKind::Discard);
        let result = self.inner.discard(offset_bytes, length_bytes).await;
        guard.finish(length_bytes, result)
    }

    /// A discard removes the objects it covers whole and zeroes the rest (`Op::Zero`), and a
    /// missing object reads as zeros: every discarded range reads back as zeros, so NBD's
    /// WRITE_ZEROES becomes object removal.
    fn discard_zeroes(&self) -> bool {
        true
    }

    async fn allocation(
        &self,
        offset_bytes: u64,
        length_bytes: u64,
    ) -> Result<Vec<AllocationExtent>, DeviceError> {
        self.inner.allocation(offset_bytes, length_bytes).await
    }

    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes.load(Ordering::Acquire)
    }

    fn block_size_bytes(&self) -> u64 {
        BLOCK_SIZE_BYTES
    }

    fn name(&self) -> &str {
        &self.inner.device_name
    }

    fn kind(&self) -> DeviceKind {
        DeviceKind::Other("volume")
    }

    fn stats(&self) -> DeviceStats {
        self.inner.recorder.snapshot()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_split_at_object_boundaries() {
        assert_eq!(
            pieces(4096 - 512, 1024, 12),
            vec![
                Piece {
                    object_number: 0,
                    offset_in_object_bytes: 3584,
                    length_bytes: 512
                },
                Piece {
                    object_number: 1,
                    offset_in_object_bytes: 0,
                    length_bytes: 512
                },
            ]
        );
        assert_eq!(pieces(8192, 8192, 12).len(), 2);
        assert!(pieces(0, 0, 22).is_empty());
    }
}
