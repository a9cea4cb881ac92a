//! The server: [`NbdServer`] accepts connections on unix sockets and TCP, and runs each one
//! as a handshake (`handshake.rs`) then transmission (`transmission.rs`) on one task.

use std::path::Path;
use std::sync::Arc;

use device::Device;
use tokio::io::{AsyncRead, AsyncWrite, BufReader, BufWriter};
use tokio::net::{TcpListener, UnixListener};

use crate::error::NbdError;
use crate::exports::{Export, ExportSource, StaticExports};
use crate::handshake::handshake;
use crate::transmission::transmission;

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

/// An NBD server exporting one device, or several by name, from an [`ExportSource`].
pub struct NbdServer {
    source: Arc<dyn ExportSource>,
    /// The first export's device when the exports are a fixed list.
    first_device: Option<Arc<dyn Device>>,
}

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
        let Some((export, session)) = handshake(&*self.source, &mut reader, &mut writer).await?
        else {
            return Ok(());
        };
        transmission(&export, session, reader, writer).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto;

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

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]
        /// Any bytes after the client's flags (options, then maybe requests) end the
        /// connection with an answer or an error, never a panic or a hang.
        #[test]
        fn a_connection_survives_any_bytes(
            options in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
            structured in proptest::prelude::any::<bool>(),
        ) {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async {
                let device: Arc<dyn Device> =
                    Arc::new(device::MemoryDevice::new("m", 1 << 20).unwrap());
                let server = NbdServer::new(device, ExportConfig::default());
                let (client, served) = tokio::io::duplex(1 << 20);
                let mut input = u32::from(proto::FLAG_FIXED_NEWSTYLE).to_be_bytes().to_vec();
                if structured {
                    // A valid STRUCTURED_REPLY and GO first, so the rest reaches transmission.
                    for (option, data) in [
                        (proto::OPT_STRUCTURED_REPLY, vec![]),
                        (proto::OPT_GO, vec![0, 0, 0, 0, 0, 0]),
                    ] {
                        input.extend_from_slice(&proto::IHAVEOPT.to_be_bytes());
                        input.extend_from_slice(&option.to_be_bytes());
                        input.extend_from_slice(&(data.len() as u32).to_be_bytes());
                        input.extend_from_slice(&data);
                    }
                }
                input.extend_from_slice(&options);
                let (mut read_half, mut write_half) = tokio::io::split(client);
                let drain = tokio::spawn(async move {
                    let mut sink = Vec::new();
                    let _ = read_half.read_to_end(&mut sink).await;
                });
                write_half.write_all(&input).await.unwrap();
                write_half.shutdown().await.unwrap();
                let outcome = tokio::time::timeout(
                    std::time::Duration::from_secs(10),
                    server.serve_connection(served),
                )
                .await;
                assert!(outcome.is_ok(), "the connection hung");
                drop(write_half);
                let _ = drain.await;
            });
        }
    }
}
