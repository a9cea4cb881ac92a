//! A small NBD client (fixed newstyle, NBD_OPT_GO, simple replies, one request at a time), for
//! tests and tools. Real clients (qemu, libnbd, fio) are what the server is measured against.

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

/// A connected client in transmission phase.
pub struct NbdClient<S> {
    stream: BufReader<S>,
    info: ExportInfo,
    next_cookie: u64,
}

impl NbdClient<UnixStream> {
    /// Connects to a unix socket and opens `export` with NBD_OPT_GO.
    pub async fn connect_unix(path: &Path, export: &str) -> Result<Self, NbdError> {
        Self::handshake(UnixStream::connect(path).await?, export).await
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
                error => {
                    return Err(NbdError::Refused {
                        option: proto::OPT_GO,
                        reply: error,
                    })
                }
            }
        }
        Ok(Self {
            stream,
            info,
            next_cookie: 1,
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
        into: Option<&mut [u8]>,
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
        let mut header = [0u8; proto::REPLY_BYTES];
        self.stream.read_exact(&mut header).await?;
        let (errno, echoed) = proto::decode_reply(&header)
            .ok_or_else(|| NbdError::Protocol("bad reply magic".into()))?;
        if echoed != cookie {
            return Err(NbdError::Protocol("reply cookie mismatch".into()));
        }
        if errno != 0 {
            return Err(NbdError::Server { errno });
        }
        if let Some(buffer) = into {
            self.stream.read_exact(buffer).await?;
        }
        Ok(())
    }

    /// READ into `buffer`.
    pub async fn read(&mut self, offset_bytes: u64, buffer: &mut [u8]) -> Result<(), NbdError> {
        let length = buffer.len() as u32;
        self.call(proto::CMD_READ, 0, offset_bytes, length, None, Some(buffer))
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
            None,
        )
        .await
    }

    /// FLUSH.
    pub async fn flush(&mut self) -> Result<(), NbdError> {
        self.call(proto::CMD_FLUSH, 0, 0, 0, None, None).await
    }

    /// TRIM.
    pub async fn trim(&mut self, offset_bytes: u64, length_bytes: u32) -> Result<(), NbdError> {
        self.call(proto::CMD_TRIM, 0, offset_bytes, length_bytes, None, None)
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
            None,
        )
        .await
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
