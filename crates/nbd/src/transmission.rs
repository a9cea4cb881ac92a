//! Transmission: requests until DISC or EOF, pipelined, answered in simple replies or, for a
//! client that asked for them, structured replies (READ in data and hole chunks, BLOCK_STATUS
//! from [`Device::allocation`], errors in ERROR/ERROR_OFFSET chunks).
//!
//! One task per connection does everything: it decodes requests, runs up to `in_flight_max`
//! device calls at once as futures in a `FuturesUnordered`, and writes each reply as its call
//! completes, all replies ready at that moment into one buffer and one socket write.
//!
//! Why not a task per request (as before): spawning, a channel to a writer task and the
//! cross-thread wake-ups cost more CPU than a 4 KiB cache hit itself on the 2-core machine.
//! Buffers for READ data and WRITE payloads come from a small per-connection pool, so a
//! request in the steady state allocates nothing.

use device::{AllocationExtent, Device, ExtentState};
use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::FutureExt;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};

use crate::error::{errno_of, Direction, NbdError};
use crate::exports::Export;
use crate::handshake::Session;
use crate::proto::{self, Request};
use crate::requests::{Incoming, RequestReader};

/// Largest chunk of zeros written at once by WRITE_ZEROES.
const ZERO_CHUNK_BYTES: u64 = 1 << 20;
/// Buffers kept per connection for reuse; larger ones are freed after use.
const POOLED_BUFFER_BYTES_MAX: usize = 1 << 20;
/// A structured READ at least this long, of a device whose allocation is cheap
/// ([`Device::allocation_is_cheap`]), asks the device for its holes first and sends them as
/// hole chunks without reading them; shorter ones are read whole (a query costs about what
/// a small read does).
const HOLE_QUERY_BYTES_MIN: u64 = 64 * 1024;
/// A READ whose range the device reports in more pieces than this is read whole: a chunk
/// header per few blocks costs more than the zeros it saves.
const READ_PIECES_MAX: usize = 64;
/// The most of an export one BLOCK_STATUS asks the device about (clients ask again from
/// where the answer ended), so one request costs a bounded amount of device work.
const BLOCK_STATUS_BYTES_MAX: u64 = 1 << 30;
/// The most descriptors in one BLOCK_STATUS reply (32 KiB of them), as qemu and nbdkit cap
/// theirs.
const DESCRIPTORS_MAX: usize = 4096;

/// A completed request: its reply, and the buffer it borrowed from the pool.
struct Reply {
    cookie: u64,
    body: Body,
    buffer: Vec<u8>,
}

/// What goes on the wire for one request.
#[derive(Debug, PartialEq, Eq)]
enum Body {
    /// A simple reply; READ data (the first `data_bytes` of the buffer) follows on success.
    Simple { error: u32, data_bytes: usize },
    /// A structured READ that succeeded: its pieces in order, data from the buffer.
    Read { offset: u64, pieces: Vec<Piece> },
    /// A structured BLOCK_STATUS answer: (length, flags) descriptors.
    BlockStatus {
        context: u32,
        descriptors: Vec<(u32, u32)>,
    },
    /// A structured error chunk (ERROR_OFFSET when `offset` is given).
    Error {
        errno: u32,
        offset: Option<u64>,
        message: String,
    },
}

/// A piece of a structured READ: `length` bytes from `start` of the request (and buffer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Piece {
    start: usize,
    length: usize,
    hole: bool,
}

/// Serves requests on `export` until DISC or EOF.
pub(crate) async fn transmission<R, W>(
    export: &Export,
    session: Session,
    reader: BufReader<R>,
    mut writer: BufWriter<W>,
) -> Result<(), NbdError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let mut requests = RequestReader::new(reader, export.config.request_bytes_max);
    let mut in_flight = FuturesUnordered::new();
    let mut pool: Vec<Vec<u8>> = Vec::new();
    let mut reading = true;
    let mut replying = true;
    let mut outcome = Ok(());
    while reading || !in_flight.is_empty() {
        tokio::select! {
            biased;
            Some(reply) = in_flight.next(), if !in_flight.is_empty() => {
                if !replying {
                    continue; // the client is gone: the device call has finished, that is all
                }
                // Every reply ready now goes out in one write.
                let mut next = Some(reply);
                let mut sent = Ok(());
                while let Some(reply) = next {
                    sent = write_reply(&mut writer, &reply).await;
                    recycle(&mut pool, reply.buffer, export.config.in_flight_max);
                    if sent.is_err() {
                        break;
                    }
                    next = in_flight.next().now_or_never().flatten();
                }
                if let Err(error) = sent.and(writer.flush().await.map_err(NbdError::from)) {
                    // The requests in flight still run to their end: a device call dropped
                    // half-way (a block cache's line pinned, a write half-planned) would
                    // leave the device's state behind.
                    replying = false;
                    reading = false;
                    outcome = Err(error);
                }
            }
            incoming = requests.next(&mut pool),
                if reading && in_flight.len() < export.config.in_flight_max =>
            {
                match incoming {
                    Ok(Some(Incoming { request, payload })) => {
                        in_flight.push(run_request(export, session, request, payload));
                    }
                    Ok(None) => reading = false,
                    Err(error) => {
                        // Answer what is in flight, then report the error.
                        reading = false;
                        outcome = outcome.and(Err(error));
                    }
                }
            }
        }
    }
    if replying {
        writer.flush().await?;
    }
    outcome
}

/// Runs one request; `buffer` (from the pool) holds a WRITE's payload and receives READ data.
async fn run_request(
    export: &Export,
    session: Session,
    request: Request,
    buffer: Vec<u8>,
) -> Reply {
    let (body, buffer) = execute(export, session, request, buffer).await;
    Reply {
        cookie: request.cookie,
        body,
        buffer,
    }
}

/// Puts a reply into the writer's buffer.
async fn write_reply<W: AsyncWrite + Unpin>(
    writer: &mut BufWriter<W>,
    reply: &Reply,
) -> Result<(), NbdError> {
    let cookie = reply.cookie;
    match &reply.body {
        Body::Simple { error, data_bytes } => {
            writer
                .write_all(&proto::encode_reply(*error, cookie))
                .await?;
            if let Some(data) = reply.buffer.get(..*data_bytes) {
                writer.write_all(data).await?;
            }
        }
        Body::Read { pieces, .. } if pieces.is_empty() => {
            let header =
                proto::encode_chunk(proto::REPLY_FLAG_DONE, proto::REPLY_TYPE_NONE, cookie, 0);
            writer.write_all(&header).await?;
        }
        Body::Read { offset, pieces } => {
            for (index, piece) in pieces.iter().enumerate() {
                let flags = if index + 1 == pieces.len() {
                    proto::REPLY_FLAG_DONE
                } else {
                    0
                };
                let at = offset + piece.start as u64;
                if piece.hole {
                    let header =
                        proto::encode_chunk(flags, proto::REPLY_TYPE_OFFSET_HOLE, cookie, 12);
                    writer.write_all(&header).await?;
                    writer.write_all(&at.to_be_bytes()).await?;
                    writer
                        .write_all(&(piece.length as u32).to_be_bytes())
                        .await?;
                } else {
                    let payload_bytes = 8 + piece.length as u32;
                    let header = proto::encode_chunk(
                        flags,
                        proto::REPLY_TYPE_OFFSET_DATA,
                        cookie,
                        payload_bytes,
                    );
                    writer.write_all(&header).await?;
                    writer.write_all(&at.to_be_bytes()).await?;
                    let data = reply
                        .buffer
                        .get(piece.start..piece.start + piece.length)
                        .ok_or_else(|| {
                            NbdError::Protocol("read piece outside its buffer".into())
                        })?;
                    writer.write_all(data).await?;
                }
            }
        }
        Body::BlockStatus {
            context,
            descriptors,
        } => {
            let payload_bytes = 4 + 8 * descriptors.len() as u32;
            let header = proto::encode_chunk(
                proto::REPLY_FLAG_DONE,
                proto::REPLY_TYPE_BLOCK_STATUS,
                cookie,
                payload_bytes,
            );
            writer.write_all(&header).await?;
            writer.write_all(&context.to_be_bytes()).await?;
            for (length, flags) in descriptors {
                writer.write_all(&length.to_be_bytes()).await?;
                writer.write_all(&flags.to_be_bytes()).await?;
            }
        }
        Body::Error {
            errno,
            offset,
            message,
        } => {
            let kind = if offset.is_some() {
                proto::REPLY_TYPE_ERROR_OFFSET
            } else {
                proto::REPLY_TYPE_ERROR
            };
            let payload_bytes = 6 + message.len() as u32 + if offset.is_some() { 8 } else { 0 };
            let header = proto::encode_chunk(proto::REPLY_FLAG_DONE, kind, cookie, payload_bytes);
            writer.write_all(&header).await?;
            writer.write_all(&errno.to_be_bytes()).await?;
            writer
                .write_all(&(message.len() as u16).to_be_bytes())
                .await?;
            writer.write_all(message.as_bytes()).await?;
            if let Some(offset) = offset {
                writer.write_all(&offset.to_be_bytes()).await?;
            }
        }
    }
    Ok(())
}

/// Returns a buffer to the pool (bounded in count and in size per buffer).
fn recycle(pool: &mut Vec<Vec<u8>>, buffer: Vec<u8>, count_max: usize) {
    if pool.len() < count_max && buffer.capacity() <= POOLED_BUFFER_BYTES_MAX {
        pool.push(buffer);
    }
}

/// The command flags a request of `command` may carry on this session; others are EINVAL,
/// as the protocol asks, rather than acted on as if they were not there.
fn known_flags(command: u16, session: Session) -> u16 {
    match command {
        proto::CMD_WRITE_ZEROES => proto::CMD_FLAG_FUA | proto::CMD_FLAG_NO_HOLE,
        proto::CMD_READ if session.structured => proto::CMD_FLAG_FUA | proto::CMD_FLAG_DF,
        proto::CMD_BLOCK_STATUS => proto::CMD_FLAG_REQ_ONE,
        _ => proto::CMD_FLAG_FUA,
    }
}

/// An error message for a structured error chunk (the protocol caps strings at 4096 bytes;
/// these stay far shorter).
fn message_of(error: &device::DeviceError) -> String {
    let mut text = error.to_string();
    if text.len() > 200 {
        let mut cut = 200;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    text
}

/// Runs one request against the export's device: its reply body and the buffer.
async fn execute(
    export: &Export,
    session: Session,
    request: Request,
    buffer: Vec<u8>,
) -> (Body, Vec<u8>) {
    let device = &*export.device;
    let structured_reply =
        session.structured && matches!(request.command, proto::CMD_READ | proto::CMD_BLOCK_STATUS);
    let fail = |errno: u32, message: &str| {
        if structured_reply {
            Body::Error {
                errno,
                offset: None,
                message: message.to_string(),
            }
        } else {
            Body::Simple {
                error: errno,
                data_bytes: 0,
            }
        }
    };
    if request.flags & !known_flags(request.command, session) != 0 {
        return (
            fail(proto::EINVAL, "unknown or inapplicable command flags"),
            buffer,
        );
    }
    let writes = matches!(
        request.command,
        proto::CMD_WRITE | proto::CMD_WRITE_ZEROES | proto::CMD_TRIM
    );
    if writes && export.config.read_only {
        return (fail(proto::EPERM, "read-only export"), buffer);
    }
    let offset = request.offset_bytes;
    let length = u64::from(request.length_bytes);
    match request.command {
        proto::CMD_READ => {
            if request.length_bytes > export.config.request_bytes_max {
                return (
                    fail(proto::EOVERFLOW, "read longer than the maximum block size"),
                    buffer,
                );
            }
            if session.structured {
                let whole = request.flags & proto::CMD_FLAG_DF != 0;
                return structured_read(device, offset, length, whole, buffer).await;
            }
            simple_read(device, offset, length, buffer).await
        }
        proto::CMD_BLOCK_STATUS => {
            let Some(context) = session.allocation_context else {
                return (fail(proto::EINVAL, "no meta context selected"), buffer);
            };
            let one = request.flags & proto::CMD_FLAG_REQ_ONE != 0;
            let body = match block_status(device, offset, length, one).await {
                Ok(descriptors) => Body::BlockStatus {
                    context,
                    descriptors,
                },
                Err((errno, message)) => fail(errno, &message),
            };
            (body, buffer)
        }
        _ => {
            let fua = request.flags & proto::CMD_FLAG_FUA != 0;
            let no_hole = request.flags & proto::CMD_FLAG_NO_HOLE != 0;
            let outcome = match request.command {
                proto::CMD_WRITE => device
                    .write_at(offset, &buffer)
                    .await
                    .map_err(|e| errno_of(&e, Direction::Write)),
                proto::CMD_WRITE_ZEROES => write_zeroes(device, offset, length, no_hole).await,
                proto::CMD_TRIM => trim(device, offset, length).await,
                proto::CMD_FLUSH => device
                    .flush()
                    .await
                    .map_err(|e| errno_of(&e, Direction::Flush)),
                _ => Err(proto::EINVAL),
            };
            let outcome = match outcome {
                Ok(()) if fua && writes => device
                    .flush()
                    .await
                    .map_err(|e| errno_of(&e, Direction::Flush)),
                other => other,
            };
            let body = Body::Simple {
                error: outcome.err().unwrap_or(0),
                data_bytes: 0,
            };
            (body, buffer)
        }
    }
}

/// A READ answered in a simple reply: the data follows the header.
async fn simple_read(
    device: &dyn Device,
    offset: u64,
    length: u64,
    mut buffer: Vec<u8>,
) -> (Body, Vec<u8>) {
    // Reused buffers keep their old bytes; the device overwrites all of them.
    buffer.resize(length as usize, 0);
    let body = match device.read_at(offset, &mut buffer).await {
        Ok(()) => Body::Simple {
            error: 0,
            data_bytes: length as usize,
        },
        Err(e) => Body::Simple {
            error: errno_of(&e, Direction::Read),
            data_bytes: 0,
        },
    };
    (body, buffer)
}

/// A READ answered in structured chunks: the holes the device reports (for a long enough
/// read from a device that answers cheaply, unless `whole`) go out as hole chunks without being read, the rest is read (its
/// pieces concurrently) and sent as data chunks. A failed piece fails the request with an
/// ERROR_OFFSET chunk naming where.
async fn structured_read(
    device: &dyn Device,
    offset: u64,
    length: u64,
    whole: bool,
    mut buffer: Vec<u8>,
) -> (Body, Vec<u8>) {
    let whole_piece = vec![Piece {
        start: 0,
        length: length as usize,
        hole: false,
    }];
    let pieces = if length == 0 {
        Vec::new()
    } else if whole || length < HOLE_QUERY_BYTES_MIN || !device.allocation_is_cheap() {
        whole_piece
    } else {
        match device.allocation(offset, length).await {
            Ok(extents) => pieces_of(&extents, length).unwrap_or(whole_piece),
            // Misaligned or out of range: the read says so below.
            Err(_) => whole_piece,
        }
    };
    buffer.resize(length as usize, 0);
    let mut reads = Vec::new();
    let mut rest: &mut [u8] = &mut buffer;
    let mut consumed = 0;
    for piece in pieces.iter().filter(|piece| !piece.hole) {
        let (_, tail) = rest.split_at_mut(piece.start - consumed);
        let (target, tail) = tail.split_at_mut(piece.length);
        rest = tail;
        consumed = piece.start + piece.length;
        let at = offset + piece.start as u64;
        reads.push(async move { device.read_at(at, target).await.map_err(|e| (at, e)) });
    }
    let failed = futures_util::future::join_all(reads)
        .await
        .into_iter()
        .find_map(Result::err);
    let body = match failed {
        None => Body::Read { offset, pieces },
        Some((at, error)) => Body::Error {
            errno: errno_of(&error, Direction::Read),
            offset: Some(at),
            message: message_of(&error),
        },
    };
    (body, buffer)
}

/// The pieces of a read of `length` bytes from the device's extents: holes and zeros as
/// holes. `None` when the extents do not cover the read exactly (a device breaking its
/// contract is read whole) or are too many.
fn pieces_of(extents: &[AllocationExtent], length: u64) -> Option<Vec<Piece>> {
    let mut pieces: Vec<Piece> = Vec::new();
    let mut start = 0u64;
    for extent in extents {
        let hole = extent.state != ExtentState::Data;
        let end = start.checked_add(extent.length_bytes)?;
        if end > length || extent.length_bytes == 0 {
            return None;
        }
        match pieces.last_mut() {
            Some(last) if last.hole == hole => last.length += extent.length_bytes as usize,
            _ => pieces.push(Piece {
                start: start as usize,
                length: extent.length_bytes as usize,
                hole,
            }),
        }
        start = end;
    }
    (start == length && pieces.len() <= READ_PIECES_MAX).then_some(pieces)
}

/// BLOCK_STATUS for `base:allocation`: descriptors from the request's offset, covering at
/// most its length (and at most [`BLOCK_STATUS_BYTES_MAX`], [`DESCRIPTORS_MAX`]
/// descriptors, one with `one`). The range asked of the device is the request's widened to
/// whole blocks; the answer is cut back to the request.
async fn block_status(
    device: &dyn Device,
    offset: u64,
    length: u64,
    one: bool,
) -> Result<Vec<(u32, u32)>, (u32, String)> {
    let size = device.size_bytes();
    let end = offset
        .checked_add(length)
        .filter(|end| length > 0 && *end <= size)
        .ok_or((
            proto::EINVAL,
            "block status range empty or past the end".to_string(),
        ))?;
    let end = end.min(offset + BLOCK_STATUS_BYTES_MAX);
    let block = device.block_size_bytes();
    let first = offset / block * block;
    let last = end.div_ceil(block).saturating_mul(block).min(size);
    let extents = device
        .allocation(first, last - first)
        .await
        .map_err(|e| (errno_of(&e, Direction::Read), message_of(&e)))?;
    let descriptors = descriptors_of(&extents, offset - first, end - offset, one);
    if descriptors.is_empty() {
        return Err((proto::EIO, "the device reported no allocation".to_string()));
    }
    Ok(descriptors)
}

/// Descriptors for the `length` bytes that start `skip` bytes into `extents`, merged by
/// state, at most [`DESCRIPTORS_MAX`] (one with `one`).
fn descriptors_of(
    extents: &[AllocationExtent],
    skip: u64,
    length: u64,
    one: bool,
) -> Vec<(u32, u32)> {
    let limit = if one { 1 } else { DESCRIPTORS_MAX };
    let mut descriptors: Vec<(u32, u32)> = Vec::new();
    let mut position = 0u64; // within the extents
    let mut covered = 0u64; // of the request
    for extent in extents {
        let start = position.max(skip);
        let end = position
            .saturating_add(extent.length_bytes)
            .min(skip + length);
        position = position.saturating_add(extent.length_bytes);
        if end <= start {
            continue;
        }
        let flags = match extent.state {
            ExtentState::Data => 0,
            ExtentState::Zero => proto::STATE_ZERO,
            ExtentState::Hole => proto::STATE_HOLE | proto::STATE_ZERO,
        };
        let length_bytes = (end - start) as u32; // at most BLOCK_STATUS_BYTES_MAX
        let full = descriptors.len() == limit;
        match descriptors.last_mut() {
            Some(last) if last.1 == flags => last.0 += length_bytes,
            _ if full => break,
            _ => descriptors.push((length_bytes, flags)),
        }
        covered += end - start;
        if covered >= length {
            break;
        }
    }
    descriptors
}

/// WRITE_ZEROES: a discard where the device promises it reads back as zeros and the client
/// allows holes (no NO_HOLE), else zeros written. Checked whole first: a request running
/// past the end fails with nothing written (it is sent as several device writes).
async fn write_zeroes(
    device: &dyn Device,
    offset: u64,
    length: u64,
    no_hole: bool,
) -> Result<(), u32> {
    let end = offset.checked_add(length).ok_or(proto::EINVAL)?;
    if end > device.size_bytes() {
        return Err(proto::ENOSPC);
    }
    if !no_hole && device.discard_zeroes() {
        return device
            .discard(offset, length)
            .await
            .map_err(|e| errno_of(&e, Direction::Write));
    }
    let zeros = vec![0u8; length.min(ZERO_CHUNK_BYTES) as usize];
    let mut done = 0;
    while done < length {
        let take = (length - done).min(ZERO_CHUNK_BYTES);
        device
            .write_at(offset + done, &zeros[..take as usize])
            .await
            .map_err(|e| errno_of(&e, Direction::Write))?;
        done += take;
    }
    Ok(())
}

/// TRIM is a hint: only the whole blocks inside the range are discarded.
async fn trim(device: &dyn Device, offset: u64, length: u64) -> Result<(), u32> {
    let block = device.block_size_bytes();
    let end = offset.checked_add(length).ok_or(proto::EINVAL)?;
    if end > device.size_bytes() {
        return Err(proto::ENOSPC);
    }
    let first = offset.div_ceil(block) * block;
    let last = end / block * block;
    if last <= first {
        return Ok(());
    }
    device
        .discard(first, last - first)
        .await
        .map_err(|e| errno_of(&e, Direction::Write))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn extent(length_bytes: u64, state: ExtentState) -> AllocationExtent {
        AllocationExtent {
            length_bytes,
            state,
        }
    }

    #[test]
    fn descriptors_are_cut_to_the_request_merged_and_bounded() {
        use ExtentState::{Data, Hole, Zero};
        let extents = [
            extent(4096, Data),
            extent(4096, Hole),
            extent(8192, Zero),
            extent(4096, Zero),
        ];
        let both = proto::STATE_HOLE | proto::STATE_ZERO;
        // The request starts 512 bytes into the first block and ends inside the third extent.
        assert_eq!(
            descriptors_of(&extents, 512, 3584 + 4096 + 1024, false),
            vec![(3584, 0), (4096, both), (1024, proto::STATE_ZERO)]
        );
        assert_eq!(descriptors_of(&extents, 0, 20480, true), vec![(4096, 0)]);
        // Adjacent zero extents merge.
        assert_eq!(
            descriptors_of(&extents, 8192, 12288, false),
            vec![(12288, proto::STATE_ZERO)]
        );
    }

    #[test]
    fn read_pieces_follow_holes_and_refuse_bad_extents() {
        use ExtentState::{Data, Hole, Zero};
        let pieces = pieces_of(
            &[extent(4096, Hole), extent(4096, Zero), extent(8192, Data)],
            16384,
        )
        .unwrap();
        assert_eq!(
            pieces,
            vec![
                Piece {
                    start: 0,
                    length: 8192,
                    hole: true
                },
                Piece {
                    start: 8192,
                    length: 8192,
                    hole: false
                }
            ]
        );
        assert!(pieces_of(&[extent(4096, Hole)], 8192).is_none(), "short");
        assert!(pieces_of(&[extent(16384, Hole)], 8192).is_none(), "long");
        let many: Vec<_> = (0..200)
            .map(|i| extent(4096, if i % 2 == 0 { Hole } else { Data }))
            .collect();
        assert!(pieces_of(&many, 200 * 4096).is_none(), "too many pieces");
    }

    /// A memory device that says its allocation is not cheap (as a volume would).
    struct Costly(device::MemoryDevice);

    #[async_trait::async_trait]
    impl Device for Costly {
        async fn read_at(&self, offset: u64, buffer: &mut [u8]) -> Result<(), device::DeviceError> {
            self.0.read_at(offset, buffer).await
        }
        async fn write_at(&self, offset: u64, data: &[u8]) -> Result<(), device::DeviceError> {
            self.0.write_at(offset, data).await
        }
        async fn flush(&self) -> Result<(), device::DeviceError> {
            self.0.flush().await
        }
        async fn discard(&self, offset: u64, length: u64) -> Result<(), device::DeviceError> {
            self.0.discard(offset, length).await
        }
        async fn allocation(
            &self,
            offset: u64,
            length: u64,
        ) -> Result<Vec<AllocationExtent>, device::DeviceError> {
            self.0.allocation(offset, length).await
        }
        fn size_bytes(&self) -> u64 {
            self.0.size_bytes()
        }
        fn block_size_bytes(&self) -> u64 {
            self.0.block_size_bytes()
        }
        fn name(&self) -> &str {
            self.0.name()
        }
        fn kind(&self) -> device::DeviceKind {
            self.0.kind()
        }
        fn stats(&self) -> device::DeviceStats {
            self.0.stats()
        }
    }

    #[tokio::test]
    async fn reads_ask_for_holes_only_where_it_is_cheap() {
        let memory = device::MemoryDevice::new("m", 1 << 20).unwrap();
        memory.write_at(65536, &[7u8; 4096]).await.unwrap();
        let (body, _) = structured_read(&memory, 0, 131072, false, Vec::new()).await;
        let Body::Read { pieces, .. } = body else {
            panic!("{body:?}");
        };
        assert_eq!(pieces.len(), 2, "a hole, then data: {pieces:?}");
        assert!(pieces[0].hole);
        let costly = Costly(memory);
        let (body, buffer) = structured_read(&costly, 0, 131072, false, Vec::new()).await;
        let Body::Read { pieces, .. } = body else {
            panic!("{body:?}");
        };
        assert_eq!(pieces.len(), 1, "read whole: {pieces:?}");
        assert!(!pieces[0].hole);
        assert_eq!(&buffer[65536..65536 + 4096], &[7u8; 4096][..]);
        // BLOCK_STATUS asks even so.
        let descriptors = block_status(&costly, 0, 131072, false).await.unwrap();
        assert_eq!(
            descriptors[0],
            (65536, proto::STATE_HOLE | proto::STATE_ZERO)
        );
    }
}
