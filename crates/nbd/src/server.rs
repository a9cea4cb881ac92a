//! The server: handshake (fixed newstyle) then transmission with pipelined requests.
//!
//! One task per connection does everything: it decodes requests, runs up to `in_flight_max`
//! device calls at once as futures in a `FuturesUnordered`, and writes each reply as its call
//! completes, all replies ready at that moment into one buffer and one socket write.
//!
//! Why not a task per request (as before): spawning, a channel to a writer task and the
//! cross-thread wake-ups cost more CPU than a 4 KiB cache hit itself on the 2-core machine.
//! Buffers for READ data and WRITE payloads come from a small per-connection pool, so a
//! request in the steady state allocates nothing.

use std::path::Path;
use std::sync::Arc;

use device::Device;
use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::FutureExt;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::{TcpListener, UnixListener};

use crate::error::{errno_of, Direction, NbdError};
use crate::exports::{Export, ExportSource, StaticExports};
use crate::proto::{self, Request};
use crate::requests::{Incoming, RequestReader};

/// What a server exports and how. Every field has a default ([`ExportConfig::default`]).
#[derive(Clone, Debug)]
pub struct ExportConfig {
    /// Export name; the empty name (the default export) is accepted too. Default: "".
    pub name: String,
    /// Description sent to clients asking for it. Default: "strata".
    pub description: String,
    /// Refuse writes with EPERM and advertise READ_ONLY. Default: false.
    pub read_only: bool,
    /// Requests in flight per connection; the reader stops reading beyond it. Default: 128.
    pub in_flight_max: usize,
    /// Largest READ/WRITE payload accepted, bytes (advertised as the maximum block size).
    /// Default: 32 MiB.
    pub request_bytes_max: u32,
    /// Advertise the device as rotational. Default: false.
    pub rotational: bool,
}

impl Default for ExportConfig {
    fn default() -> Self {
        Self {
            name: String::new(),
            description: "strata".into(),
            read_only: false,
            in_flight_max: 128,
            request_bytes_max: 32 << 20,
            rotational: false,
        }
    }
}

/// Largest option payload accepted during the handshake.
const OPTION_BYTES_MAX: u32 = 64 * 1024;
/// Largest chunk of zeros written at once by WRITE_ZEROES.
const ZERO_CHUNK_BYTES: u64 = 1 << 20;

impl Export {
    fn transmission_flags(&self) -> u16 {
        let mut flags = proto::TFLAG_HAS_FLAGS
            | proto::TFLAG_SEND_FLUSH
            | proto::TFLAG_SEND_FUA
            | proto::TFLAG_CAN_MULTI_CONN;
        if self.config.read_only {
            flags |= proto::TFLAG_READ_ONLY;
        } else {
            flags |= proto::TFLAG_SEND_TRIM | proto::TFLAG_SEND_WRITE_ZEROES;
        }
        if self.config.rotational {
            flags |= proto::TFLAG_ROTATIONAL;
        }
        flags
    }
}

/// An NBD server exporting one device, or several by name, from an [`ExportSource`].
pub struct NbdServer {
    source: Arc<dyn ExportSource>,
    /// The first export's device when the exports are a fixed list.
    first_device: Option<Arc<dyn Device>>,
}

/// A completed request: its reply, and the buffer it borrowed from the pool.
struct Reply {
    cookie: u64,
    error: u32,
    /// READ data to send after the header: the first `data_bytes` of `buffer`.
    data_bytes: usize,
    buffer: Vec<u8>,
}

/// Buffers kept per connection for reuse; larger ones are freed after use.
const POOLED_BUFFER_BYTES_MAX: usize = 1 << 20;

impl NbdServer {
    /// A server exporting `device`.
    pub fn new(device: Arc<dyn Device>, config: ExportConfig) -> Arc<Self> {
        Self::with_exports(vec![(device, config)])
    }

    /// A server exporting several devices, each under its config's name (as one Open-CAS
    /// cache exports each of its cores). The first is also the default export (the empty
    /// name). Panics on no exports, a repeated name or a zero `in_flight_max`.
    pub fn with_exports(exports: Vec<(Arc<dyn Device>, ExportConfig)>) -> Arc<Self> {
        let exports = StaticExports::new(
            exports
                .into_iter()
                .map(|(device, config)| Export { device, config })
                .collect(),
        );
        let first_device = Some(Arc::clone(exports.first_device()));
        Arc::new(Self {
            source: Arc::new(exports),
            first_device,
        })
    }

    /// A server whose exports are looked up in `source` each time a client names one, so
    /// exports may come and go while it runs.
    pub fn with_source(source: Arc<dyn ExportSource>) -> Arc<Self> {
        Arc::new(Self {
            source,
            first_device: None,
        })
    }

    /// The first exported device, when the server was made with a fixed list.
    pub fn device(&self) -> Option<&Arc<dyn Device>> {
        self.first_device.as_ref()
    }

    /// Binds a unix socket at `path`. A socket file left there by a server that is gone (a
    /// connection to it is refused) is replaced. A socket a running server listens on, and
    /// any file that is not a socket, are refused with an error naming the path: a mistyped
    /// `--socket` must never delete a disk image or take another server's socket. The socket
    /// is made `0600`: only its owner may connect.
    pub fn bind_unix(path: &Path) -> std::io::Result<UnixListener> {
        use std::io::{Error, ErrorKind};
        use std::os::unix::fs::FileTypeExt;
        match std::fs::symlink_metadata(path) {
            Ok(metadata) if metadata.file_type().is_socket() => {
                if std::os::unix::net::UnixStream::connect(path).is_ok() {
                    return Err(Error::new(
                        ErrorKind::AddrInUse,
                        format!("{}: a running server listens on it", path.display()),
                    ));
                }
                std::fs::remove_file(path)?;
            }
            Ok(_) => {
                return Err(Error::new(
                    ErrorKind::AlreadyExists,
                    format!(
                        "{} exists and is not a socket; not replacing it",
                        path.display()
                    ),
                ))
            }
            Err(error) if error.kind() == ErrorKind::NotFound => {}
            Err(error) => return Err(error),
        }
        let listener = UnixListener::bind(path)?;
        // Whoever may connect may read and write the export: its owner only.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            path,
            std::fs::Permissions::from_mode(device::PRIVATE_FILE_MODE),
        )?;
        Ok(listener)
    }

    /// Accepts connections on `listener` forever, one task each.
    pub async fn serve_unix(self: Arc<Self>, listener: UnixListener) -> std::io::Result<()> {
        loop {
            let (stream, _) = listener.accept().await?;
            let server = Arc::clone(&self);
            tokio::spawn(async move { server.log_connection(stream).await });
        }
    }

    /// Accepts connections on `listener` forever, one task each.
    pub async fn serve_tcp(self: Arc<Self>, listener: TcpListener) -> std::io::Result<()> {
        loop {
            let (stream, _) = listener.accept().await?;
            stream.set_nodelay(true)?;
            let server = Arc::clone(&self);
            tokio::spawn(async move { server.log_connection(stream).await });
        }
    }

    async fn log_connection<S: AsyncRead + AsyncWrite + Send + 'static>(&self, stream: S) {
        if let Err(error) = self.serve_connection(stream).await {
            tracing::debug!(%error, "nbd connection ended");
        }
    }

    /// Serves one connection: handshake, then requests until DISC or EOF.
    pub async fn serve_connection<S>(&self, stream: S) -> Result<(), NbdError>
    where
        S: AsyncRead + AsyncWrite + Send + 'static,
    {
        let (reader, writer) = tokio::io::split(stream);
        let mut reader = BufReader::with_capacity(256 * 1024, reader);
        let mut writer = BufWriter::with_capacity(256 * 1024, writer);
        let Some(export) = self.handshake(&mut reader, &mut writer).await? else {
            return Ok(());
        };
        transmission(&export, reader, writer).await
    }

    /// Runs the handshake; the export chosen when the client entered transmission.
    async fn handshake<R, W>(
        &self,
        reader: &mut R,
        writer: &mut W,
    ) -> Result<Option<Export>, NbdError>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        writer.write_u64(proto::NBD_MAGIC).await?;
        writer.write_u64(proto::IHAVEOPT).await?;
        writer
            .write_u16(proto::FLAG_FIXED_NEWSTYLE | proto::FLAG_NO_ZEROES)
            .await?;
        writer.flush().await?;
        let client_flags = reader.read_u32().await?;
        if client_flags & u32::from(proto::FLAG_FIXED_NEWSTYLE) == 0 {
            return Err(NbdError::Protocol("client is not fixed-newstyle".into()));
        }
        // The protocol: a server that receives client flags it does not know closes the
        // connection (the client waits for nothing then; it sees the close).
        let known = u32::from(proto::FLAG_FIXED_NEWSTYLE | proto::FLAG_NO_ZEROES);
        if client_flags & !known != 0 {
            return Err(NbdError::Protocol(format!(
                "unknown client flags {:#x}",
                client_flags & !known
            )));
        }
        let no_zeroes = client_flags & u32::from(proto::FLAG_NO_ZEROES) != 0;
        loop {
            if reader.read_u64().await? != proto::IHAVEOPT {
                return Err(NbdError::Protocol("bad option magic".into()));
            }
            let option = reader.read_u32().await?;
            let length = reader.read_u32().await?;
            if length > OPTION_BYTES_MAX {
                return Err(NbdError::Protocol(format!("option of {length} bytes")));
            }
            let mut data = vec![0u8; length as usize];
            reader.read_exact(&mut data).await?;
            match option {
                proto::OPT_EXPORT_NAME => {
                    let Some(export) = self.source.find(&data).await? else {
                        return Err(NbdError::Protocol("unknown export".into()));
                    };
                    writer.write_u64(export.device.size_bytes()).await?;
                    writer.write_u16(export.transmission_flags()).await?;
                    if !no_zeroes {
                        writer.write_all(&[0u8; 124]).await?;
                    }
                    writer.flush().await?;
                    return Ok(Some(export));
                }
                proto::OPT_ABORT => {
                    option_reply(writer, option, proto::REP_ACK, &[]).await?;
                    writer.flush().await?;
                    return Ok(None);
                }
                proto::OPT_LIST if !data.is_empty() => {
                    // The protocol gives LIST no data.
                    option_reply(writer, option, proto::REP_ERR_INVALID, &[]).await?;
                }
                proto::OPT_LIST => {
                    for name in self.source.list().await? {
                        let name = name.as_bytes();
                        let mut payload = (name.len() as u32).to_be_bytes().to_vec();
                        payload.extend_from_slice(name);
                        option_reply(writer, option, proto::REP_SERVER, &payload).await?;
                    }
                    option_reply(writer, option, proto::REP_ACK, &[]).await?;
                }
                proto::OPT_INFO | proto::OPT_GO => {
                    let export = self.info(writer, option, &data).await?;
                    if let (Some(export), proto::OPT_GO) = (export, option) {
                        writer.flush().await?;
                        return Ok(Some(export));
                    }
                }
                proto::OPT_STARTTLS => {
                    option_reply(writer, option, proto::REP_ERR_POLICY, &[]).await?;
                }
                _ => {
                    // STRUCTURED_REPLY, meta contexts and anything newer: simple replies only.
                    option_reply(writer, option, proto::REP_ERR_UNSUP, &[]).await?;
                }
            }
            writer.flush().await?;
        }
    }

    /// Answers NBD_OPT_INFO / NBD_OPT_GO; the export when it was found.
    async fn info<W: AsyncWrite + Unpin>(
        &self,
        writer: &mut W,
        option: u32,
        data: &[u8],
    ) -> Result<Option<Export>, NbdError> {
        let Some((name, requests)) = parse_info_request(data) else {
            option_reply(writer, option, proto::REP_ERR_INVALID, &[]).await?;
            return Ok(None);
        };
        let Some(export) = self.source.find(name).await? else {
            option_reply(writer, option, proto::REP_ERR_UNKNOWN, &[]).await?;
            return Ok(None);
        };
        let mut about = proto::INFO_EXPORT.to_be_bytes().to_vec();
        about.extend_from_slice(&export.device.size_bytes().to_be_bytes());
        about.extend_from_slice(&export.transmission_flags().to_be_bytes());
        option_reply(writer, option, proto::REP_INFO, &about).await?;
        let block = export.device.block_size_bytes() as u32;
        let mut sizes = proto::INFO_BLOCK_SIZE.to_be_bytes().to_vec();
        sizes.extend_from_slice(&block.to_be_bytes());
        sizes.extend_from_slice(&block.max(4096).to_be_bytes());
        sizes.extend_from_slice(&export.config.request_bytes_max.to_be_bytes());
        option_reply(writer, option, proto::REP_INFO, &sizes).await?;
        for request in requests {
            let text = match request {
                proto::INFO_NAME => &export.config.name,
                proto::INFO_DESCRIPTION => &export.config.description,
                _ => continue,
            };
            let mut payload = request.to_be_bytes().to_vec();
            payload.extend_from_slice(text.as_bytes());
            option_reply(writer, option, proto::REP_INFO, &payload).await?;
        }
        option_reply(writer, option, proto::REP_ACK, &[]).await?;
        Ok(Some(export))
    }
}

/// Serves requests on `export` until DISC or EOF.
async fn transmission<R, W>(
    export: &Export,
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
                        in_flight.push(run_request(export, request, payload));
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
async fn run_request(export: &Export, request: Request, buffer: Vec<u8>) -> Reply {
    let config = (export.config.read_only, export.config.request_bytes_max);
    let (error, data_bytes, buffer) = execute(&*export.device, config, request, buffer).await;
    Reply {
        cookie: request.cookie,
        error,
        data_bytes,
        buffer,
    }
}

/// Puts a reply (header, then READ data on success) into the writer's buffer.
async fn write_reply<W: AsyncWrite + Unpin>(
    writer: &mut BufWriter<W>,
    reply: &Reply,
) -> Result<(), NbdError> {
    writer
        .write_all(&proto::encode_reply(reply.error, reply.cookie))
        .await?;
    if let Some(data) = reply.buffer.get(..reply.data_bytes) {
        writer.write_all(data).await?;
    }
    Ok(())
}

/// Returns a buffer to the pool (bounded in count and in size per buffer).
fn recycle(pool: &mut Vec<Vec<u8>>, buffer: Vec<u8>, count_max: usize) {
    if pool.len() < count_max && buffer.capacity() <= POOLED_BUFFER_BYTES_MAX {
        pool.push(buffer);
    }
}

/// Runs one request against the device: (errno, bytes of READ data in the buffer, buffer).
async fn execute(
    device: &dyn Device,
    (read_only, request_bytes_max): (bool, u32),
    request: Request,
    mut buffer: Vec<u8>,
) -> (u32, usize, Vec<u8>) {
    let offset = request.offset_bytes;
    let length = u64::from(request.length_bytes);
    let fua = request.flags & proto::CMD_FLAG_FUA != 0;
    let writes = matches!(
        request.command,
        proto::CMD_WRITE | proto::CMD_WRITE_ZEROES | proto::CMD_TRIM
    );
    // Flags this server does not know, or that do not apply to the command (NO_HOLE outside
    // WRITE_ZEROES, DF without structured replies...): EINVAL, as the protocol asks, rather
    // than acting as if they were not there.
    let known_flags = match request.command {
        proto::CMD_WRITE_ZEROES => proto::CMD_FLAG_FUA | proto::CMD_FLAG_NO_HOLE,
        _ => proto::CMD_FLAG_FUA,
    };
    if request.flags & !known_flags != 0 {
        return (proto::EINVAL, 0, buffer);
    }
    if writes && read_only {
        return (proto::EPERM, 0, buffer);
    }
    let outcome = match request.command {
        proto::CMD_READ => {
            if request.length_bytes > request_bytes_max {
                return (proto::EOVERFLOW, 0, buffer);
            }
            // Reused buffers keep their old bytes; the device overwrites all of them.
            buffer.resize(length as usize, 0);
            return match device.read_at(offset, &mut buffer).await {
                Ok(()) => (0, length as usize, buffer),
                Err(e) => (errno_of(&e, Direction::Read), 0, buffer),
            };
        }
        proto::CMD_WRITE => device
            .write_at(offset, &buffer)
            .await
            .map_err(|e| errno_of(&e, Direction::Write)),
        proto::CMD_WRITE_ZEROES => write_zeroes(device, offset, length).await,
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
    (outcome.err().unwrap_or(0), 0, buffer)
}

/// Writes zeros over the range, checked whole first: a request running past the end fails
/// with nothing written (it is sent as several device writes).
async fn write_zeroes(device: &dyn Device, offset: u64, length: u64) -> Result<(), u32> {
    let end = offset.checked_add(length).ok_or(proto::EINVAL)?;
    if end > device.size_bytes() {
        return Err(proto::ENOSPC);
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

async fn option_reply<W: AsyncWrite + Unpin>(
    writer: &mut W,
    option: u32,
    reply: u32,
    payload: &[u8],
) -> Result<(), NbdError> {
    writer.write_u64(proto::OPTION_REPLY_MAGIC).await?;
    writer.write_u32(option).await?;
    writer.write_u32(reply).await?;
    writer.write_u32(payload.len() as u32).await?;
    writer.write_all(payload).await?;
    Ok(())
}

/// Splits NBD_OPT_INFO/GO data into (export name, information requests).
fn parse_info_request(data: &[u8]) -> Option<(&[u8], Vec<u16>)> {
    let name_length = u32::from_be_bytes(data.get(0..4)?.try_into().ok()?) as usize;
    let name = data.get(4..4 + name_length)?;
    let rest = data.get(4 + name_length..)?;
    let count = u16::from_be_bytes(rest.get(0..2)?.try_into().ok()?) as usize;
    let list = rest.get(2..2 + 2 * count)?;
    let requests = list
        .chunks_exact(2)
        .map(|pair| u16::from_be_bytes([pair[0], pair[1]]))
        .collect();
    Some((name, requests))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn binding_replaces_only_a_stale_socket() {
        let dir = tempfile::tempdir().unwrap();
        // A regular file (a mistyped path): refused and kept.
        let file = dir.path().join("disk.img");
        std::fs::write(&file, b"data").unwrap();
        let error = NbdServer::bind_unix(&file).unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::AlreadyExists);
        assert!(error.to_string().contains("not a socket"), "{error}");
        assert_eq!(std::fs::read(&file).unwrap(), b"data");
        // A socket a live server listens on: refused, and that server keeps it.
        let socket = dir.path().join("nbd.sock");
        let live = NbdServer::bind_unix(&socket).unwrap();
        let error = NbdServer::bind_unix(&socket).unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::AddrInUse);
        assert!(std::os::unix::net::UnixStream::connect(&socket).is_ok());
        // The server is gone, its socket file stays: replaced.
        drop(live);
        assert!(socket.exists());
        let replaced = NbdServer::bind_unix(&socket).unwrap();
        assert!(std::os::unix::net::UnixStream::connect(&socket).is_ok());
        drop(replaced);
    }

    #[test]
    fn parses_info_requests_and_rejects_truncated() {
        let mut data = 3u32.to_be_bytes().to_vec();
        data.extend_from_slice(b"abc");
        data.extend_from_slice(&2u16.to_be_bytes());
        data.extend_from_slice(&proto::INFO_NAME.to_be_bytes());
        data.extend_from_slice(&proto::INFO_BLOCK_SIZE.to_be_bytes());
        let (name, requests) = parse_info_request(&data).unwrap();
        assert_eq!(name, b"abc");
        assert_eq!(requests, vec![proto::INFO_NAME, proto::INFO_BLOCK_SIZE]);
        assert!(parse_info_request(&data[..data.len() - 1]).is_none());
        assert!(parse_info_request(&[0, 0, 0, 9]).is_none());
    }
}
