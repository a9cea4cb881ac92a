//! Data pieces: a body written as a new version's pieces (the head last), and extents of
//! them read back. An [`Extent`] (object, offset, length) is what a read of an object's byte
//! range needs from one data object.

use std::sync::Arc;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use md5::{Digest, Md5};
use rados::{IoCtx, RadosError, WriteOp};

use super::{Intent, Store};
use crate::error::{GatewayError, Result};
use crate::layout::{self, Piece};

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
        let buffer_at = |size: u64| match size_hint_bytes {
            Some(hint) => Vec::with_capacity(hint.saturating_sub(size).min(chunk as u64) as usize),
            None => Vec::new(),
        };
        let mut md5 = Md5::new();
        let mut head: Vec<u8> = buffer_at(0);
        let mut current: Vec<u8> = Vec::new();
        let mut pieces: Vec<Piece> = Vec::new();
        let mut size: u64 = 0;
        let mut written: Vec<String> = Vec::new();
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
                        // when its first byte arrives.
                        let full = std::mem::take(&mut current);
                        self.data
                            .operate(&oid, WriteOp::new().write_full(full))
                            .await?;
                        written.push(oid.clone());
                        pieces.push(Piece::whole(oid, chunk as u64));
                    }
                }
            }
            if !current.is_empty() {
                let oid = layout::piece_object(bucket_id, tag, key, pieces.len());
                let size = current.len() as u64;
                self.data
                    .operate(
                        &oid,
                        WriteOp::new().write_full(std::mem::take(&mut current)),
                    )
                    .await?;
                written.push(oid.clone());
                pieces.push(Piece::whole(oid, size));
            }
            if !head.is_empty() {
                if pieces.is_empty() {
                    pieces.push(Piece::whole(
                        layout::piece_object(bucket_id, tag, key, 0),
                        head.len() as u64,
                    ));
                }
                let op = WriteOp::new()
                    .write_full(std::mem::take(&mut head))
                    .set_xattr(layout::HEAD_META_XATTR, tag.as_bytes().to_vec());
                self.data.operate(&pieces[0].oid, op).await?;
            }
            Ok(())
        }
        .await;
        if let Err(error) = result {
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
        let data = self.data.clone();
        futures::stream::iter(extents(pieces, start, end))
            .then(move |extent| read_extent(data.clone(), extent))
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
        let data = self.data.clone();
        let first_bytes = futures::stream::iter(first_bytes?.map(Ok));
        Ok(first_bytes.chain(
            futures::stream::iter(rest).then(move |extent| read_extent(data.clone(), extent)),
        ))
    }
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
    use super::Body;
    use crate::GatewayConfig;

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
