//! A small NBD client (fixed newstyle, NBD_OPT_GO, one request at a time), for tests and
//! tools. Real clients (qemu, libnbd, fio) are what the server is measured against.
//!
//! By default it asks for simple replies only. [`NbdClient::connect_unix_with_status`] also
//! negotiates structured replies and the `base:allocation` meta context, so that
//! [`NbdClient::block_status`] works; its READs are then answered in chunks (data and
//! holes), which it reassembles.

use std::path::Path;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::{TcpStream, UnixStream};

use crate::error::NbdError;
use crate::proto::{self, Request};

/// What the server said about the export during NBD_OPT_GO.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExportInfo {
    /// Size in bytes.
    pub size_bytes: u64,
    /// Transmission flags.
    pub flags: u16,
    /// Minimum, preferred and maximum block size, when sent.
    pub block_sizes: Option<(u32, u32, u32)>,
}

/// One `base:allocation` descriptor of a BLOCK_STATUS answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatusExtent {
    /// Bytes it covers.
    pub length_bytes: u32,
    /// `proto::STATE_HOLE` (not allocated) and/or `proto::STATE_ZERO` (reads as zeros).
    pub flags: u32,
}

impl StatusExtent {
    /// Not allocated on the server.
    pub fn is_hole(&self) -> bool {
        self.flags & proto::STATE_HOLE != 0
    }

    /// Reads as zeros.
    pub fn is_zero(&self) -> bool {
        self.flags & proto::STATE_ZERO != 0
    }
}

/// A connected client in transmission phase.
pub struct NbdClient<S> {
    stream: BufReader<S>,
    info: ExportInfo,
    next_cookie: u64,
    /// The id the server gave `base:allocation`, when negotiated (structured replies on).
    allocation_context: Option<u32>,
}

/// Where a reply's data goes.
enum Sink<'a> {
    Nothing,
    Read(&'a mut [u8]),
    Status(&'a mut Vec<StatusExtent>),
}

impl NbdClient<UnixStream> {
    /// Connects to a unix socket and opens `export` with NBD_OPT_GO.
    pub async fn connect_unix(path: &Path, export: &str) -> Result<Self, NbdError> {
        Self::handshake(UnixStream::connect(path).await?, export).await
    }

    /// [`NbdClient::connect_unix`] with structured replies and `base:allocation`, for
    /// [`NbdClient::block_status`]; refused when the server offers neither.
    pub async fn connect_unix_with_status(path: &Path, export: &str) -> Result<Self, NbdError> {
        Self::handshake_with(UnixStream::connect(path).await?, export, true).await
    }
}

impl NbdClient<TcpStream> {
    /// Connects over TCP and opens `export` with NBD_OPT_GO.
    pub async fn connect_tcp(address: &str, export: &str) -> Result<Self, NbdError> {
        let stream = TcpStream::connect(address).await?;
        stream.set_nodelay(true)?;
        Self::handshake(stream, export).await
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> NbdClient<S> {
    /// Runs the handshake on `stream`.
    pub async fn handshake(stream: S, export: &str) -> Result<Self, NbdError> {
        Self::handshake_with(stream, export, false).await
    }

    /// Runs the handshake on `stream`, negotiating structured replies and `base:allocation`
    /// first with `block_status`.
    pub async fn handshake_with(
        stream: S,
        export: &str,
        block_status: bool,
    ) -> Result<Self, NbdError> {
        let mut stream = BufReader::new(stream);
        if stream.read_u64().await? != proto::NBD_MAGIC
            || stream.read_u64().await? != proto::IHAVEOPT
        {
            return Err(NbdError::Protocol("not a newstyle NBD server".into()));
        }
        let server_flags = stream.read_u16().await?;
        if server_flags & proto::FLAG_FIXED_NEWSTYLE == 0 {
            return Err(NbdError::Protocol("server is not fixed-newstyle".into()));
        }
        let client_flags = u32::from(proto::FLAG_FIXED_NEWSTYLE | proto::FLAG_NO_ZEROES);
        stream.get_mut().write_u32(client_flags).await?;
        let allocation_context = if block_status {
            Some(negotiate_status(&mut stream, export).await?)
        } else {
            None
        };
        let mut data = (export.len() as u32).to_be_bytes().to_vec();
        data.extend_from_slice(export.as_bytes());
        data.extend_from_slice(&1u16.to_be_bytes());
        data.extend_from_slice(&proto::INFO_BLOCK_SIZE.to_be_bytes());
        send_option(stream.get_mut(), proto::OPT_GO, &data).await?;
        let mut info = ExportInfo::default();
        loop {
            let (reply, payload) = read_option_reply(&mut stream, proto::OPT_GO).await?;
            match reply {
                proto::REP_ACK => break,
                proto::REP_INFO => parse_info(&payload, &mut info),
                error => return Err(refused(proto::OPT_GO, error, &payload)),
            }
        }
        Ok(Self {
            stream,
            info,
            next_cookie: 1,
            allocation_context,
        })
    }

    /// The export's size, flags and block sizes.
    pub fn info(&self) -> ExportInfo {
        self.info
    }

    /// Sends an option before GO is impossible here; this probes a refused option on a fresh
    /// connection instead (for tests): returns the reply type.
    pub async fn probe_option(stream: S, option: u32) -> Result<u32, NbdError> {
        Self::probe_option_with(stream, option, &[]).await
    }

    /// [`NbdClient::probe_option`] sending `data` with the option.
    pub async fn probe_option_with(stream: S, option: u32, data: &[u8]) -> Result<u32, NbdError> {
        let mut stream = BufReader::new(stream);
        let _ = stream.read_u64().await?;
        let _ = stream.read_u64().await?;
        let _ = stream.read_u16().await?;
        stream
            .get_mut()
            .write_u32(u32::from(proto::FLAG_FIXED_NEWSTYLE))
            .await?;
        send_option(stream.get_mut(), option, data).await?;
        let (reply, _) = read_option_reply(&mut stream, option).await?;
        send_option(stream.get_mut(), proto::OPT_ABORT, &[]).await?;
        Ok(reply)
    }

    async fn call(
        &mut self,
        command: u16,
        flags: u16,
        offset_bytes: u64,
        length_bytes: u32,
        payload: Option<&[u8]>,
        mut sink: Sink<'_>,
    ) -> Result<(), NbdError> {
        let cookie = self.next_cookie;
        self.next_cookie += 1;
        let request = Request {
            flags,
            command,
            cookie,
            offset_bytes,
            length_bytes,
        };
        let writer = self.stream.get_mut();
        writer.write_all(&request.encode()).await?;
        if let Some(payload) = payload {
            writer.write_all(payload).await?;
        }
        writer.flush().await?;
        let magic = self.stream.read_u32().await?;
        if magic == proto::SIMPLE_REPLY_MAGIC {
            let errno = self.stream.read_u32().await?;
            if self.stream.read_u64().await? != cookie {
                return Err(NbdError::Protocol("reply cookie mismatch".into()));
            }
            if errno != 0 {
                return Err(NbdError::Server { errno });
            }
            return match sink {
                Sink::Read(buffer) => Ok(self.stream.read_exact(buffer).await.map(|_| ())?),
                Sink::Nothing => Ok(()),
                Sink::Status(_) => Err(NbdError::Protocol("a simple reply to BLOCK_STATUS".into())),
            };
        }
        if magic != proto::STRUCTURED_REPLY_MAGIC || self.allocation_context.is_none() {
            return Err(NbdError::Protocol("bad reply magic".into()));
        }
        // Structured chunks until one flagged DONE; an error chunk fails the request once
        // the rest of the reply has been read (the connection stays usable).
        let mut failed = None;
        let mut first = true;
        loop {
            // Every chunk starts with the magic (the first one's was read above).
            if !std::mem::take(&mut first)
                && self.stream.read_u32().await? != proto::STRUCTURED_REPLY_MAGIC
            {
                return Err(NbdError::Protocol("bad chunk magic".into()));
            }
            let chunk_flags = self.stream.read_u16().await?;
            let chunk_type = self.stream.read_u16().await?;
            if self.stream.read_u64().await? != cookie {
                return Err(NbdError::Protocol("reply cookie mismatch".into()));
            }
            let length = self.stream.read_u32().await?;
            if u64::from(length) > u64::from(length_bytes) + 64 * 1024 {
                return Err(NbdError::Protocol(format!("a chunk of {length} bytes")));
            }
            let mut body = vec![0u8; length as usize];
            self.stream.read_exact(&mut body).await?;
            let u32_at = |at: usize| -> Result<u32, NbdError> {
                body.get(at..at + 4)
                    .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
                    .ok_or_else(|| NbdError::Protocol("short chunk".into()))
            };
            let u64_at = |at: usize| -> Result<u64, NbdError> {
                Ok((u64::from(u32_at(at)?) << 32) | u64::from(u32_at(at + 4)?))
            };
            // Where `[at, at + len)` of the export falls in the request, checked.
            let within = |at: u64, len: u64| -> Result<usize, NbdError> {
                at.checked_sub(offset_bytes)
                    .filter(|start| start + len <= u64::from(length_bytes))
                    .map(|start| start as usize)
                    .ok_or_else(|| NbdError::Protocol("a chunk outside the request".into()))
            };
            match (chunk_type, &mut sink) {
                (proto::REPLY_TYPE_NONE, _) => {}
                (proto::REPLY_TYPE_OFFSET_DATA, Sink::Read(buffer)) => {
                    let data = &body[8.min(body.len())..];
                    let start = within(u64_at(0)?, data.len() as u64)?;
                    buffer[start..start + data.len()].copy_from_slice(data);
                }
                (proto::REPLY_TYPE_OFFSET_HOLE, Sink::Read(buffer)) => {
                    let hole = u64::from(u32_at(8)?);
                    let start = within(u64_at(0)?, hole)?;
                    buffer[start..start + hole as usize].fill(0);
                }
                (proto::REPLY_TYPE_BLOCK_STATUS, Sink::Status(extents)) => {
                    if Some(u32_at(0)?) == self.allocation_context {
                        for at in (4..body.len().saturating_sub(7)).step_by(8) {
                            extents.push(StatusExtent {
                                length_bytes: u32_at(at)?,
                                flags: u32_at(at + 4)?,
                            });
                        }
                    }
                }
                (proto::REPLY_TYPE_ERROR | proto::REPLY_TYPE_ERROR_OFFSET, _) => {
                    failed.get_or_insert(NbdError::Server { errno: u32_at(0)? });
                }
                (other, _) => {
                    return Err(NbdError::Protocol(format!(
                        "an unexpected chunk type {other} for command {command}"
                    )))
                }
            }
            if chunk_flags & proto::REPLY_FLAG_DONE != 0 {
                break;
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// READ into `buffer`.
    pub async fn read(&mut self, offset_bytes: u64, buffer: &mut [u8]) -> Result<(), NbdError> {
        let length = buffer.len() as u32;
        self.call(
            proto::CMD_READ,
            0,
            offset_bytes,
            length,
            None,
            Sink::Read(buffer),
        )
        .await
    }

    /// WRITE `data`, with FUA when asked.
    pub async fn write(
        &mut self,
        offset_bytes: u64,
        data: &[u8],
        fua: bool,
    ) -> Result<(), NbdError> {
        let flags = if fua { proto::CMD_FLAG_FUA } else { 0 };
        let length = data.len() as u32;
        self.call(
            proto::CMD_WRITE,
            flags,
            offset_bytes,
            length,
            Some(data),
            Sink::Nothing,
        )
        .await
    }

    /// FLUSH.
    pub async fn flush(&mut self) -> Result<(), NbdError> {
        self.call(proto::CMD_FLUSH, 0, 0, 0, None, Sink::Nothing)
            .await
    }

    /// TRIM.
    pub async fn trim(&mut self, offset_bytes: u64, length_bytes: u32) -> Result<(), NbdError> {
        self.call(
            proto::CMD_TRIM,
            0,
            offset_bytes,
            length_bytes,
            None,
            Sink::Nothing,
        )
        .await
    }

    /// WRITE_ZEROES.
    pub async fn write_zeroes(
        &mut self,
        offset_bytes: u64,
        length_bytes: u32,
    ) -> Result<(), NbdError> {
        self.call(
            proto::CMD_WRITE_ZEROES,
            0,
            offset_bytes,
            length_bytes,
            None,
            Sink::Nothing,
        )
        .await
    }

    /// BLOCK_STATUS of `base:allocation` from `offset_bytes` for at most `length_bytes`: the
    /// server's descriptors in order (they may cover less than asked, never more). Needs a
    /// client from [`NbdClient::connect_unix_with_status`].
    pub async fn block_status(
        &mut self,
        offset_bytes: u64,
        length_bytes: u32,
    ) -> Result<Vec<StatusExtent>, NbdError> {
        if self.allocation_context.is_none() {
            return Err(NbdError::Protocol(
                "BLOCK_STATUS needs a client connected with structured replies".into(),
            ));
        }
        let mut extents = Vec::new();
        self.call(
            proto::CMD_BLOCK_STATUS,
            0,
            offset_bytes,
            length_bytes,
            None,
            Sink::Status(&mut extents),
        )
        .await?;
        Ok(extents)
    }

    /// DISC, then closes the socket.
    pub async fn disconnect(mut self) -> Result<(), NbdError> {
        let request = Request {
            flags: 0,
            command: proto::CMD_DISC,
            cookie: 0,
            offset_bytes: 0,
            length_bytes: 0,
        };
        let writer = self.stream.get_mut();
        writer.write_all(&request.encode()).await?;
        writer.flush().await?;
        writer.shutdown().await?;
        Ok(())
    }
}

/// NBD_OPT_STRUCTURED_REPLY, then NBD_OPT_SET_META_CONTEXT for `base:allocation` on
/// `export`: the context's id.
async fn negotiate_status<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut BufReader<S>,
    export: &str,
) -> Result<u32, NbdError> {
    send_option(stream.get_mut(), proto::OPT_STRUCTURED_REPLY, &[]).await?;
    let (reply, payload) = read_option_reply(stream, proto::OPT_STRUCTURED_REPLY).await?;
    if reply != proto::REP_ACK {
        return Err(refused(proto::OPT_STRUCTURED_REPLY, reply, &payload));
    }
    let query = proto::CONTEXT_BASE_ALLOCATION.as_bytes();
    let mut data = (export.len() as u32).to_be_bytes().to_vec();
    data.extend_from_slice(export.as_bytes());
    data.extend_from_slice(&1u32.to_be_bytes());
    data.extend_from_slice(&(query.len() as u32).to_be_bytes());
    data.extend_from_slice(query);
    send_option(stream.get_mut(), proto::OPT_SET_META_CONTEXT, &data).await?;
    let mut context = None;
    loop {
        let (reply, payload) = read_option_reply(stream, proto::OPT_SET_META_CONTEXT).await?;
        match reply {
            proto::REP_ACK => break,
            proto::REP_META_CONTEXT if payload.len() >= 4 && &payload[4..] == query => {
                context = Some(u32::from_be_bytes([
                    payload[0], payload[1], payload[2], payload[3],
                ]));
            }
            proto::REP_META_CONTEXT => {}
            error => return Err(refused(proto::OPT_SET_META_CONTEXT, error, &payload)),
        }
    }
    context.ok_or_else(|| NbdError::Protocol("the server offers no base:allocation".into()))
}

/// The error for an option the server refused, with its message.
fn refused(option: u32, reply: u32, payload: &[u8]) -> NbdError {
    NbdError::Refused {
        option,
        reply,
        message: String::from_utf8_lossy(payload).into_owned(),
    }
}

async fn send_option<W: AsyncWrite + Unpin>(
    writer: &mut W,
    option: u32,
    data: &[u8],
) -> Result<(), NbdError> {
    writer.write_u64(proto::IHAVEOPT).await?;
    writer.write_u32(option).await?;
    writer.write_u32(data.len() as u32).await?;
    writer.write_all(data).await?;
    writer.flush().await?;
    Ok(())
}

async fn read_option_reply<R: AsyncRead + Unpin>(
    reader: &mut R,
    option: u32,
) -> Result<(u32, Vec<u8>), NbdError> {
    if reader.read_u64().await? != proto::OPTION_REPLY_MAGIC {
        return Err(NbdError::Protocol("bad option reply magic".into()));
    }
    if reader.read_u32().await? != option {
        return Err(NbdError::Protocol("reply to another option".into()));
    }
    let reply = reader.read_u32().await?;
    let length = reader.read_u32().await?;
    if length > 64 * 1024 {
        return Err(NbdError::Protocol("oversized option reply".into()));
    }
    let mut payload = vec![0u8; length as usize];
    reader.read_exact(&mut payload).await?;
    Ok((reply, payload))
}

fn parse_info(payload: &[u8], info: &mut ExportInfo) {
    let u16_at = |at: usize| {
        payload
            .get(at..at + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
    };
    let u32_at = |at: usize| {
        payload
            .get(at..at + 4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    match u16_at(0) {
        Some(proto::INFO_EXPORT) => {
            if let Some(size) = payload.get(2..10) {
                let mut bytes = [0u8; 8];
                bytes.copy_from_slice(size);
                info.size_bytes = u64::from_be_bytes(bytes);
            }
            info.flags = u16_at(10).unwrap_or(0);
        }
        Some(proto::INFO_BLOCK_SIZE) => {
            if let (Some(min), Some(preferred), Some(max)) = (u32_at(2), u32_at(6), u32_at(10)) {
                info.block_sizes = Some((min, preferred, max));
            }
        }
        _ => {}
    }
}
