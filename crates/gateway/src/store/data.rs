//! Data pieces: a body written as a new version's pieces (the head last), and extents of
//! them read back. An [`Extent`] (object, offset, length) is what a read of an object's byte
//! range needs from one data object.
//!
//! ## Pipelining and memory per request
//! A PUT's pieces after the head are written (each as a task of its own) while the body
//! streams in, at most
//! [`PIECE_WRITES_IN_FLIGHT`] at once; the body is not read further while that many are in
//! flight, so a PUT holds at most `PIECE_WRITES_IN_FLIGHT + 2` chunks (`chunk_size_bytes`,
//! 4 MiB by default: the pieces in flight, the piece filling and the head, written last once
//! every other piece is durable). A GET reads up to [`PIECE_READS_AHEAD`] pieces ahead of
//! the one being sent (each read runs as its own task, so it progresses while the client
//! receives the current piece): at most `PIECE_READS_AHEAD + 1` chunks per GET.
//!
//! Each piece is gathered from the body straight into memory aligned for O_DIRECT
//! ([`PieceBuffer`]) and handed to the object API as it is (`Bytes`, shared by the
//! replicas), so the body's bytes are copied once on their way to the devices.

use std::sync::Arc;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use md5::{Digest, Md5};
use rados::{IoCtx, RadosError, WriteOp};

use super::{Intent, Store};
use crate::error::{GatewayError, Result};
use crate::layout::{self, Piece};

/// Piece writes of one PUT in flight at once (see the module docs for the memory it bounds).
pub const PIECE_WRITES_IN_FLIGHT: usize = 4;

/// Pieces a GET reads ahead of the one it is sending.
pub const PIECE_READS_AHEAD: usize = 2;

/// Alignment of a piece's buffer in memory: a multiple of every device's block size, so a
/// store writing the piece with O_DIRECT needs no copy of its own.
const PIECE_ALIGNMENT_BYTES: usize = 4096;

/// A piece being gathered from a body, in memory that starts at a multiple of
/// [`PIECE_ALIGNMENT_BYTES`] (the storage over-allocates by that much and skips its first
/// bytes), never reallocated while it fills up to the capacity it was made with.
struct PieceBuffer {
    storage: Vec<u8>,
    start: usize,
}

impl PieceBuffer {
    /// An empty buffer with room for `capacity_bytes` (none allocated for 0).
    fn with_capacity(capacity_bytes: usize) -> Self {
        if capacity_bytes == 0 {
            return Self::empty();
        }
        let mut storage: Vec<u8> = Vec::with_capacity(capacity_bytes + PIECE_ALIGNMENT_BYTES);
        let start = storage.as_ptr().align_offset(PIECE_ALIGNMENT_BYTES);
        // Within the capacity: the heap block, and with it the alignment, stays.
        storage.resize(start.min(PIECE_ALIGNMENT_BYTES), 0);
        Self { storage, start }
    }

    fn empty() -> Self {
        Self {
            storage: Vec::new(),
            start: 0,
        }
    }

    fn len(&self) -> usize {
        self.storage.len() - self.start
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn capacity(&self) -> usize {
        self.storage.capacity().saturating_sub(self.start)
    }

    fn extend_from_slice(&mut self, bytes: &[u8]) {
        self.storage.extend_from_slice(bytes);
    }

    /// The gathered bytes (no copy), leaving this buffer empty.
    fn take(&mut self) -> Bytes {
        let taken = std::mem::replace(self, Self::empty());
        Bytes::from(taken.storage).slice(taken.start..)
    }
}

/// A body to store and the length it announced (Content-Length, a copy's source size), if
/// any. The length sizes each piece's buffer once, so a piece is not copied again as its
/// buffer grows; a body of another length is still stored whole.
pub struct Body<S> {
    pub stream: S,
    pub size_hint_bytes: Option<u64>,
}

impl<S> Body<S> {
    pub fn new(stream: S, size_hint_bytes: Option<u64>) -> Self {
        Body {
            stream,
            size_hint_bytes,
        }
    }
}

impl Store {
    /// [`Store::write_body`] for a write announced by `intent`, then `check` on the body's md5
    /// (Content-MD5, `x-amz-checksum-*`); returns the pieces, size, md5 and what `check`
    /// returned. A body that fails to stream in, or that `check` refuses, ends the write
    /// ([`Store::abandon_write`]: its data and intent removed) and its error is returned.
    pub(crate) async fn write_checked<S, T>(
        &self,
        intent: &Intent,
        bucket_id: &str,
        tag: &str,
        key: &str,
        body: Body<S>,
        check: impl FnOnce(&[u8; 16]) -> Result<T>,
    ) -> Result<(Vec<Piece>, u64, [u8; 16], T)>
    where
        S: Stream<Item = Result<Bytes>> + Unpin,
    {
        let counters = &self.counters;
        let write = self.write_body(bucket_id, tag, key, body);
        let written = super::timed(&counters.data_writes, &counters.data_write_ns, write).await;
        let (pieces, size, md5) = match written {
            Ok(written) => written,
            Err(error) => {
                self.abandon_write(intent, Vec::new()).await;
                return Err(error);
            }
        };
        match check(&md5) {
            Ok(checked) => Ok((pieces, size, md5, checked)),
            Err(error) => {
                self.abandon_write(intent, pieces).await;
                Err(error)
            }
        }
    }

    /// Stores a body as pieces of a new version; returns the pieces, size and hex md5.
    /// The head (piece 0) is written last, with `head_meta` in an xattr.
    pub async fn write_body<S>(
        &self,
        bucket_id: &str,
        tag: &str,
        key: &str,
        body: Body<S>,
    ) -> Result<(Vec<Piece>, u64, [u8; 16])>
    where
        S: Stream<Item = Result<Bytes>> + Unpin,
    {
        let Body {
            stream: mut body,
            size_hint_bytes,
        } = body;
        let chunk = self.config.chunk_size_bytes;
        // The buffer of the piece that starts after `size` bytes: the piece's expected length.
        // Without a hint, a whole chunk: the buffer never grows (a growing buffer would copy
        // and lose its alignment).
        let buffer_at = |size: u64| {
            PieceBuffer::with_capacity(match size_hint_bytes {
                Some(hint) => hint.saturating_sub(size).min(chunk as u64) as usize,
                None => chunk,
            })
        };
        let mut md5 = Md5::new();
        let mut head = buffer_at(0);
        let mut current = PieceBuffer::empty();
        let mut pieces: Vec<Piece> = Vec::new();
        let mut size: u64 = 0;
        // Every piece whose write was started (removed again if the body fails).
        let mut written: Vec<String> = Vec::new();
        let mut in_flight = futures::stream::FuturesUnordered::new();
        // Each piece write is a task of its own, so it goes on while the body streams in.
        let write_piece = |oid: String, bytes: Bytes| {
            let data = Arc::clone(&self.data);
            let task =
                tokio::spawn(
                    async move { data.operate(&oid, WriteOp::new().write_full(bytes)).await },
                );
            async move {
                match task.await {
                    Ok(written) => written,
                    Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
                    Err(error) => Err(RadosError::Io(format!("piece write: {error}"))),
                }
            }
        };
        let result: Result<()> = async {
            while let Some(item) = body.next().await {
                let bytes = item?;
                md5.update(&bytes);
                size += bytes.len() as u64;
                let mut rest: &[u8] = &bytes;
                while !rest.is_empty() {
                    let target = if pieces.is_empty() && head.len() < chunk {
                        &mut head
                    } else {
                        &mut current
                    };
                    if target.capacity() == 0 {
                        *target = buffer_at(size - rest.len() as u64);
                    }
                    if target.capacity() == target.len() {
                        // A body longer than its hint: a chunk's room, so that the piece
                        // is copied once, as any other.
                        let mut grown = PieceBuffer::with_capacity(chunk);
                        grown.extend_from_slice(&target.take());
                        *target = grown;
                    }
                    let take = (chunk - target.len()).min(rest.len());
                    target.extend_from_slice(&rest[..take]);
                    rest = &rest[take..];
                    if head.len() == chunk && pieces.is_empty() {
                        pieces.push(Piece::whole(
                            layout::piece_object(bucket_id, tag, key, 0),
                            chunk as u64,
                        ));
                    }
                    if current.len() == chunk {
                        let oid = layout::piece_object(bucket_id, tag, key, pieces.len());
                        // The chunk moves into the op (no copy); the next one gets its buffer
                        // when its first byte arrives. At most PIECE_WRITES_IN_FLIGHT run:
                        // the body waits for one of them first.
                        if in_flight.len() >= PIECE_WRITES_IN_FLIGHT {
                            if let Some(done) = in_flight.next().await {
                                done?;
                            }
                        }
                        written.push(oid.clone());
                        in_flight.push(write_piece(oid.clone(), current.take()));
                        pieces.push(Piece::whole(oid, chunk as u64));
                    }
                }
            }
            if !current.is_empty() {
                let oid = layout::piece_object(bucket_id, tag, key, pieces.len());
                let size = current.len() as u64;
                written.push(oid.clone());
                in_flight.push(write_piece(oid.clone(), current.take()));
                pieces.push(Piece::whole(oid, size));
            }
            // Every piece durable before the head, which makes the version readable.
            while let Some(done) = in_flight.next().await {
                done?;
            }
            if !head.is_empty() {
                if pieces.is_empty() {
                    pieces.push(Piece::whole(
                        layout::piece_object(bucket_id, tag, key, 0),
                        head.len() as u64,
                    ));
                }
                let op = WriteOp::new()
                    .write_full(head.take())
                    .set_xattr(layout::HEAD_META_XATTR, tag.as_bytes().to_vec());
                self.data.operate(&pieces[0].oid, op).await?;
            }
            Ok(())
        }
        .await;
        if let Err(error) = result {
            // The writes still running finish (or fail) before their pieces are removed.
            while in_flight.next().await.is_some() {}
            let orphans = written
                .into_iter()
                .map(|oid| Piece::whole(oid, 0))
                .collect();
            self.remove_pieces(orphans).await;
            return Err(error);
        }
        debug_assert_eq!(pieces.iter().map(|p| p.size).sum::<u64>(), size);
        Ok((pieces, size, md5.finalize().into()))
    }

    /// The bytes `[start, end)` of an object made of `pieces`, as a stream of piece reads.
    pub fn read_range(
        &self,
        pieces: &[Piece],
        start: u64,
        end: u64,
    ) -> impl Stream<Item = Result<Bytes>> + Send + 'static {
        read_ahead(self.data.clone(), extents(pieces, start, end))
    }

    /// [`Self::read_range`] for an answer whose status is not sent yet (GET): the first
    /// piece's bytes are read, and every later piece the range needs is checked to be there
    /// and long enough, before it returns. A lost or short piece is then an error status
    /// (500) instead of a `200` whose body stops short, which a client only notices as a
    /// broken connection. An object of one piece costs nothing more than before (its read
    /// just happens first); the checks of the others run at once, each a `stat`.
    pub async fn read_range_checked(
        &self,
        pieces: &[Piece],
        start: u64,
        end: u64,
    ) -> Result<impl Stream<Item = Result<Bytes>> + Send + 'static> {
        let mut extents = extents(pieces, start, end).into_iter();
        let first = extents.next();
        let rest: Vec<Extent> = extents.collect();
        let checks = futures::future::join_all(rest.iter().map(|extent| async move {
            let size_bytes = self
                .data
                .stat(&extent.object)
                .await
                .map_err(|error| piece_error(&extent.object, error))?
                .size_bytes;
            if size_bytes < extent.offset + extent.length {
                return Err(GatewayError::Corrupt(format!(
                    "data piece {} holds {size_bytes} bytes, the object needs {}",
                    extent.object,
                    extent.offset + extent.length
                )));
            }
            Ok(())
        }));
        let read_first = async {
            match first {
                Some(extent) => read_extent(self.data.clone(), extent).await.map(Some),
                None => Ok(None),
            }
        };
        let (first_bytes, checked) = futures::join!(read_first, checks);
        checked.into_iter().collect::<Result<Vec<()>>>()?;
        let first_bytes = futures::stream::iter(first_bytes?.map(Ok));
        Ok(first_bytes.chain(read_ahead(self.data.clone(), rest)))
    }
}

/// The extents' bytes in order, each read as its own task up to [`PIECE_READS_AHEAD`] ahead
/// of the one the caller is sending (a task runs whether or not the stream is polled, so the
/// next piece is read while the current one goes to the client). Nothing starts before the
/// stream is first polled.
fn read_ahead(
    data: Arc<dyn IoCtx>,
    extents: Vec<Extent>,
) -> impl Stream<Item = Result<Bytes>> + Send + 'static {
    futures::stream::iter(extents)
        .map(move |extent| {
            let task = tokio::spawn(read_extent(data.clone(), extent));
            async move {
                match task.await {
                    Ok(read) => read,
                    Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
                    Err(error) => Err(RadosError::Io(format!("piece read: {error}")).into()),
                }
            }
        })
        .buffered(PIECE_READS_AHEAD + 1)
}

/// The bytes `[offset, offset + length)` of data object `object`: what a read of an
/// object's byte range needs from one of its data objects.
pub(crate) struct Extent {
    pub object: String,
    pub offset: u64,
    pub length: u64,
}

/// The extents of `pieces` (in order) that cover `[start, end)` of the object.
fn extents(pieces: &[Piece], start: u64, end: u64) -> Vec<Extent> {
    let mut extents = Vec::new();
    let mut offset = 0u64;
    for piece in pieces {
        let piece_end = offset + piece.size;
        if piece_end > start && offset < end {
            let from = start.max(offset) - offset;
            let to = end.min(piece_end) - offset;
            extents.push(Extent {
                object: piece.oid.clone(),
                offset: piece.start() + from,
                length: to - from,
            });
        }
        offset = piece_end;
    }
    extents
}

/// Reads one extent; fewer bytes than it needs (or none: the piece is gone) is corruption.
async fn read_extent(data: Arc<dyn IoCtx>, extent: Extent) -> Result<Bytes> {
    let Extent {
        object: oid,
        offset: from,
        length,
    } = extent;
    let bytes = data
        .read(&oid, from, length)
        .await
        .map_err(|error| piece_error(&oid, error))?;
    if bytes.len() as u64 != length {
        return Err(GatewayError::Corrupt(format!(
            "{oid}: read {} of {length} bytes",
            bytes.len()
        )));
    }
    Ok(Bytes::from(bytes))
}

/// A data piece an object's index entry names but the data pool does not have is corruption
/// (the index and the data disagree), not a missing key.
fn piece_error(oid: &str, error: RadosError) -> GatewayError {
    match error {
        RadosError::NotFound(_) => {
            GatewayError::Corrupt(format!("data piece {oid} of the object is missing"))
        }
        error => error.into(),
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use futures::{stream, StreamExt};
    use md5::{Digest, Md5};
    use rados::memory::MemoryRados;
    use rados::Rados;

    use super::super::{system_clock, Store};
    use super::{Body, PieceBuffer, PIECE_ALIGNMENT_BYTES};
    use crate::GatewayConfig;

    /// A piece buffer starts aligned, fills to its capacity without moving (so a piece is
    /// copied once, from the body), and hands its bytes over without a copy.
    #[test]
    fn a_piece_buffer_is_aligned_and_never_moves() {
        for capacity in [1usize, 4096, 5000, 1 << 20] {
            let mut buffer = PieceBuffer::with_capacity(capacity);
            let start = buffer.storage.as_ptr() as usize + buffer.start;
            assert!(
                start.is_multiple_of(PIECE_ALIGNMENT_BYTES),
                "capacity {capacity}"
            );
            let data: Vec<u8> = (0..capacity).map(|i| (i % 251) as u8).collect();
            for part in data.chunks(777) {
                buffer.extend_from_slice(part);
            }
            assert_eq!(buffer.len(), capacity);
            assert_eq!(buffer.storage.as_ptr() as usize + buffer.start, start);
            let bytes = buffer.take();
            assert_eq!(
                bytes.as_ptr() as usize,
                start,
                "capacity {capacity}: copied"
            );
            assert_eq!(&bytes[..], &data[..]);
            assert!(buffer.is_empty() && buffer.capacity() == 0);
        }
    }

    /// A body split at uneven places, stored with every kind of size hint (none, exact, too
    /// small, too large, zero): the same pieces, the same md5, the same bytes read back.
    #[tokio::test]
    async fn a_size_hint_changes_buffers_only_never_what_is_stored() {
        let rados = MemoryRados::new();
        let config = GatewayConfig {
            chunk_size_bytes: 1000,
            ..GatewayConfig::default()
        };
        let store = Store::open(&rados as &dyn Rados, config, system_clock())
            .await
            .expect("store");
        let data: Vec<u8> = (0..2500u32).map(|i| (i * 7 % 251) as u8).collect();
        let cuts = [0, 7, 1000, 1001, 2400, 2500];
        for (round, hint) in [None, Some(2500), Some(10), Some(1 << 20), Some(0)]
            .into_iter()
            .enumerate()
        {
            let parts: Vec<crate::error::Result<Bytes>> = cuts
                .windows(2)
                .map(|w| Ok(Bytes::copy_from_slice(&data[w[0]..w[1]])))
                .collect();
            let tag = format!("tag{round}");
            let (pieces, size, md5) = store
                .write_body("bucket", &tag, "key", Body::new(stream::iter(parts), hint))
                .await
                .expect("write");
            let sizes: Vec<u64> = pieces.iter().map(|p| p.size).collect();
            assert_eq!(sizes, vec![1000, 1000, 500], "hint {hint:?}");
            assert_eq!(size, 2500, "hint {hint:?}");
            assert_eq!(md5, <[u8; 16]>::from(Md5::digest(&data)), "hint {hint:?}");
            let mut read = Vec::new();
            let mut stream = std::pin::pin!(store.read_range(&pieces, 0, size));
            while let Some(bytes) = stream.next().await {
                read.extend_from_slice(&bytes.expect("read"));
            }
            assert!(read == data, "hint {hint:?}: the bytes read back differ");
        }
    }
}
