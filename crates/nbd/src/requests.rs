//! Reading requests off the socket without losing bytes when the read is abandoned.
//!
//! The connection task waits on "next request" and "next completion" at once (`select!`),
//! so a read may be dropped half way. [`RequestReader`] keeps every byte it has read in its
//! own buffer, so [`RequestReader::next`] is cancel safe: a dropped call loses nothing and the
//! next call resumes where it stopped.

use tokio::io::{AsyncRead, AsyncReadExt, BufReader};

use crate::error::NbdError;
use crate::proto::{self, Request};

/// Bytes asked of the socket per read.
const READ_CHUNK_BYTES: usize = 256 * 1024;

/// One decoded request, with its payload for a WRITE.
pub(crate) struct Incoming {
    pub request: Request,
    /// The WRITE payload (empty for other commands), in a buffer taken from the pool.
    pub payload: Vec<u8>,
}

/// Decodes requests from a byte stream.
pub(crate) struct RequestReader<R> {
    source: R,
    buffer: Vec<u8>,
    /// Unconsumed bytes are `buffer[start..end]`.
    start: usize,
    end: usize,
    request_bytes_max: u32,
}

impl<R: AsyncRead + Unpin> RequestReader<R> {
    /// Takes over `reader`, keeping whatever it has buffered already.
    pub(crate) fn new(reader: BufReader<R>, request_bytes_max: u32) -> Self {
        let mut buffer = reader.buffer().to_vec();
        let end = buffer.len();
        buffer.resize(end.max(READ_CHUNK_BYTES), 0);
        Self {
            source: reader.into_inner(),
            buffer,
            start: 0,
            end,
            request_bytes_max,
        }
    }

    /// The next request; `Ok(None)` at a clean end of stream (between requests) or DISC.
    /// Cancel safe (see the module doc). `pool` lends the payload buffer of a WRITE.
    pub(crate) async fn next(
        &mut self,
        pool: &mut Vec<Vec<u8>>,
    ) -> Result<Option<Incoming>, NbdError> {
        loop {
            if let Some(parsed) = self.try_decode(pool)? {
                return Ok(parsed);
            }
            if self.start > 0 && self.end == self.start {
                self.start = 0;
                self.end = 0;
            }
            let needed = self.bytes_needed();
            if self.start + needed > self.buffer.len() {
                // Move the partial request to the front (and grow for a large WRITE).
                self.buffer.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
                if needed > self.buffer.len() {
                    self.buffer.resize(needed, 0);
                }
            }
            let read = self.source.read(&mut self.buffer[self.end..]).await?;
            if read == 0 {
                return if self.end == self.start {
                    Ok(None)
                } else {
                    Err(NbdError::Protocol(
                        "connection closed inside a request".into(),
                    ))
                };
            }
            self.end += read;
        }
    }

    /// Bytes the request at the front needs in total (header, plus payload once known).
    fn bytes_needed(&self) -> usize {
        let available = &self.buffer[self.start..self.end];
        match header_of(available).and_then(Request::decode) {
            Some(request) if request.command == proto::CMD_WRITE => {
                proto::REQUEST_BYTES + request.length_bytes as usize
            }
            _ => proto::REQUEST_BYTES,
        }
    }

    /// A whole request from the buffer, if there is one: `Some(None)` for DISC.
    fn try_decode(
        &mut self,
        pool: &mut Vec<Vec<u8>>,
    ) -> Result<Option<Option<Incoming>>, NbdError> {
        let available = &self.buffer[self.start..self.end];
        let Some(header) = header_of(available) else {
            return Ok(None);
        };
        let Some(request) = Request::decode(header) else {
            return Err(NbdError::Protocol("bad request magic".into()));
        };
        if request.command == proto::CMD_DISC {
            self.start += proto::REQUEST_BYTES;
            return Ok(Some(None));
        }
        let mut payload = pool.pop().unwrap_or_default();
        payload.clear();
        if request.command == proto::CMD_WRITE {
            if request.length_bytes > self.request_bytes_max {
                return Err(NbdError::Protocol("oversized write".into()));
            }
            let total = proto::REQUEST_BYTES + request.length_bytes as usize;
            let Some(data) = available.get(proto::REQUEST_BYTES..total) else {
                pool.push(payload);
                return Ok(None);
            };
            payload.extend_from_slice(data);
            self.start += total;
        } else {
            self.start += proto::REQUEST_BYTES;
        }
        Ok(Some(Some(Incoming { request, payload })))
    }
}

/// The first request header in `bytes`, when all of it is there.
fn header_of(bytes: &[u8]) -> Option<&[u8; proto::REQUEST_BYTES]> {
    bytes.get(..proto::REQUEST_BYTES)?.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::Pin;
    use std::task::{Context, Poll};
    use tokio::io::ReadBuf;

    /// Hands out at most 5 bytes per read and is not ready every other poll.
    struct Trickle {
        bytes: Vec<u8>,
        at: usize,
        ready: bool,
    }

    impl AsyncRead for Trickle {
        fn poll_read(
            mut self: Pin<&mut Self>,
            context: &mut Context<'_>,
            buffer: &mut ReadBuf<'_>,
        ) -> Poll<std::io::Result<()>> {
            self.ready = !self.ready;
            if !self.ready {
                context.waker().wake_by_ref();
                return Poll::Pending;
            }
            let take = (self.bytes.len() - self.at).min(5).min(buffer.remaining());
            let at = self.at;
            buffer.put_slice(&self.bytes[at..at + take]);
            self.at += take;
            Poll::Ready(Ok(()))
        }
    }

    fn request(command: u16, cookie: u64, length_bytes: u32) -> Request {
        Request {
            flags: 0,
            command,
            cookie,
            offset_bytes: 4096 * cookie,
            length_bytes,
        }
    }

    #[tokio::test]
    async fn decodes_requests_across_dropped_partial_reads() {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&request(proto::CMD_READ, 1, 4096).encode());
        bytes.extend_from_slice(&request(proto::CMD_WRITE, 2, 8).encode());
        bytes.extend_from_slice(b"abcdefgh");
        bytes.extend_from_slice(&request(proto::CMD_FLUSH, 3, 0).encode());
        bytes.extend_from_slice(&request(proto::CMD_DISC, 4, 0).encode());
        let source = Trickle {
            bytes,
            at: 0,
            ready: false,
        };
        let mut reader = RequestReader::new(BufReader::new(source), 1 << 20);
        let mut pool = Vec::new();
        let mut decoded = Vec::new();
        loop {
            // A zero timeout polls once and drops the call when it is not ready: the
            // reader must lose nothing.
            let next = tokio::time::timeout(std::time::Duration::ZERO, reader.next(&mut pool));
            match next.await {
                Err(_) => continue,
                Ok(Ok(Some(incoming))) => decoded.push(incoming),
                Ok(Ok(None)) => break,
                Ok(Err(error)) => panic!("{error}"),
            }
        }
        let cookies: Vec<u64> = decoded.iter().map(|i| i.request.cookie).collect();
        assert_eq!(cookies, vec![1, 2, 3]);
        assert_eq!(decoded[1].payload, b"abcdefgh");
        assert!(decoded[0].payload.is_empty());
    }

    #[tokio::test]
    async fn refuses_bad_magic_oversized_writes_and_truncation() {
        let mut bad = request(proto::CMD_READ, 1, 4096).encode();
        bad[0] ^= 1;
        let mut pool = Vec::new();
        let mut reader = RequestReader::new(BufReader::new(&bad[..]), 1 << 20);
        assert!(reader.next(&mut pool).await.is_err());
        let big = request(proto::CMD_WRITE, 1, 2 << 20).encode();
        let mut reader = RequestReader::new(BufReader::new(&big[..]), 1 << 20);
        assert!(reader.next(&mut pool).await.is_err());
        let cut = request(proto::CMD_WRITE, 1, 4096).encode();
        let mut reader = RequestReader::new(BufReader::new(&cut[..]), 1 << 20);
        assert!(reader.next(&mut pool).await.is_err());
        let mut reader = RequestReader::new(BufReader::new(&[][..]), 1 << 20);
        assert!(reader.next(&mut pool).await.unwrap().is_none());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        /// Any bytes: requests, an error or the end, never a panic or an endless loop.
        #[test]
        fn never_panics_on_any_bytes(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512),
            valid_prefix in proptest::prelude::any::<bool>(),
        ) {
            let mut input = Vec::new();
            if valid_prefix {
                // Start with a real header so the payload and later bytes get parsed too.
                input.extend_from_slice(&request(proto::CMD_WRITE, 1, 16).encode());
            }
            input.extend_from_slice(&bytes);
            let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
            runtime.block_on(async {
                let mut reader = RequestReader::new(BufReader::new(&input[..]), 4096);
                let mut pool = Vec::new();
                for _ in 0..=input.len() {
                    match reader.next(&mut pool).await {
                        Ok(Some(_)) => continue,
                        Ok(None) | Err(_) => return,
                    }
                }
                panic!("more requests than bytes");
            });
        }
    }
}
