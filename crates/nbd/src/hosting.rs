//! Hosting a server: listen on a unix socket and/or TCP from one [`HostingConfig`], serve
//! until a shutdown future resolves, and remove the unix socket file on the way out.
//!
//! What every program exporting devices does the same way (`strata nbd serve`, `strata cache
//! start`, `strata serve`'s volumes): bind where the configuration says (a stale socket file
//! is replaced, a live one or any other file refused: [`NbdServer::bind_unix`]), log the
//! addresses, serve every listener at once, and stop when told (a signal, a test's trigger)
//! or when a listener fails. Connections already accepted run on their own tasks and are not
//! waited for: a device call runs to its end anyway (`transmission.rs`).

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::net::{TcpListener, UnixListener};

use crate::error::NbdError;
use crate::server::NbdServer;

/// Where a hosted server listens. At least one of `socket` and `tcp` must be given.
#[derive(Clone, Debug, Default)]
pub struct HostingConfig {
    /// Unix socket to listen on, made `0600`. Default: none.
    pub socket: Option<PathBuf>,
    /// TCP address to listen on, `HOST:PORT` (port 0: any free port). Default: none.
    pub tcp: Option<String>,
}

/// A unix socket file this process bound, removed when the guard goes (a clean stop, an
/// error): a file left behind looks like a server to the next bind until it is probed.
#[derive(Debug)]
pub struct SocketFile(PathBuf);

impl SocketFile {
    /// Binds `path` ([`NbdServer::bind_unix`]: stale sockets replaced, anything else
    /// refused) and guards the file.
    pub fn bind(path: &Path) -> Result<(UnixListener, SocketFile), NbdError> {
        let listener = NbdServer::bind_unix(path).map_err(|source| NbdError::Bind {
            address: path.display().to_string(),
            source,
        })?;
        Ok((listener, SocketFile(path.to_path_buf())))
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        remove_socket_file(&self.0);
    }
}

/// Removes a socket file this process bound (a process leaving through `exit`, which runs no
/// destructors, calls it itself); a file already gone is fine, another failure is logged.
pub fn remove_socket_file(path: &Path) {
    if let Err(error) = std::fs::remove_file(path) {
        if error.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(path = %path.display(), %error, "cannot remove the socket file");
        }
    }
}

/// Bound listeners, ready to serve.
#[derive(Debug)]
pub struct Hosting {
    unix: Option<(UnixListener, SocketFile)>,
    tcp: Option<TcpListener>,
}

impl Hosting {
    /// Binds every listener `config` names; an error names the address that failed (and
    /// removes a socket file already bound).
    pub async fn bind(config: &HostingConfig) -> Result<Hosting, NbdError> {
        if config.socket.is_none() && config.tcp.is_none() {
            return Err(NbdError::Bind {
                address: "nowhere".into(),
                source: std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "give a unix socket, a TCP address or both",
                ),
            });
        }
        let unix = config.socket.as_deref().map(SocketFile::bind).transpose()?;
        let tcp =
            match &config.tcp {
                None => None,
                Some(address) => Some(TcpListener::bind(address.as_str()).await.map_err(
                    |source| NbdError::Bind {
                        address: address.clone(),
                        source,
                    },
                )?),
            };
        Ok(Hosting { unix, tcp })
    }

    /// The unix socket's path, when there is one.
    pub fn socket_path(&self) -> Option<&Path> {
        self.unix.as_ref().map(|(_, file)| file.path())
    }

    /// The TCP address actually bound (its port when 0 was asked), when there is one.
    pub fn tcp_address(&self) -> Option<SocketAddr> {
        self.tcp.as_ref().and_then(|tcp| tcp.local_addr().ok())
    }

    /// The NBD URIs clients open `export` with, unix socket first.
    pub fn uris(&self, export: &str) -> Vec<String> {
        let mut uris = Vec::new();
        if let Some(path) = self.socket_path() {
            uris.push(format!("nbd+unix:///{export}?socket={}", path.display()));
        }
        if let Some(address) = self.tcp_address() {
            uris.push(format!("nbd://{address}/{export}"));
        }
        uris
    }

    /// Serves `server` on every listener until `shutdown` resolves (then `Ok`) or a listener
    /// fails (its error); the unix socket file is removed either way.
    pub async fn serve<F>(self, server: Arc<NbdServer>, shutdown: F) -> Result<(), NbdError>
    where
        F: Future<Output = ()>,
    {
        let Hosting { unix, tcp } = self;
        let (unix_listener, socket_file) = match unix {
            Some((listener, file)) => (Some(listener), Some(file)),
            None => (None, None),
        };
        if let Some(file) = &socket_file {
            tracing::info!(socket = %file.path().display(), "nbd: listening");
        }
        if let Some(address) = tcp.as_ref().and_then(|tcp| tcp.local_addr().ok()) {
            tracing::info!(%address, "nbd: listening");
        }
        let on_unix = async {
            match unix_listener {
                Some(listener) => Arc::clone(&server).serve_unix(listener).await,
                None => std::future::pending().await,
            }
        };
        let on_tcp = async {
            match tcp {
                Some(listener) => Arc::clone(&server).serve_tcp(listener).await,
                None => std::future::pending().await,
            }
        };
        let outcome = tokio::select! {
            served = on_unix => served.map_err(NbdError::from),
            served = on_tcp => served.map_err(NbdError::from),
            () = shutdown => Ok(()),
        };
        drop(socket_file);
        outcome
    }
}

/// Resolves at the first SIGTERM or SIGINT (as `kill` and Ctrl-C send them): the shutdown
/// future of a server run from a terminal or a service manager. Fails only when the
/// handlers cannot be installed.
pub fn stop_signal() -> std::io::Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ExportConfig, NbdClient};

    #[tokio::test]
    async fn serves_unix_and_tcp_until_shutdown_then_removes_the_socket() {
        let directory = tempfile::tempdir().unwrap();
        let socket = directory.path().join("nbd.sock");
        let device: Arc<dyn device::Device> =
            Arc::new(device::MemoryDevice::new("m", 1 << 20).unwrap());
        let server = NbdServer::new(device, ExportConfig::default());
        let config = HostingConfig {
            socket: Some(socket.clone()),
            tcp: Some("127.0.0.1:0".into()),
        };
        let hosting = Hosting::bind(&config).await.unwrap();
        let address = hosting.tcp_address().unwrap();
        assert_ne!(address.port(), 0);
        assert_eq!(
            hosting.uris("disk"),
            vec![
                format!("nbd+unix:///disk?socket={}", socket.display()),
                format!("nbd://{address}/disk")
            ]
        );
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let serving = tokio::spawn(hosting.serve(server, async {
            let _ = stopped.await;
        }));
        let mut unix = NbdClient::connect_unix(&socket, "").await.unwrap();
        unix.write(0, &[3u8; 512], false).await.unwrap();
        let mut tcp = NbdClient::connect_tcp(&address.to_string(), "")
            .await
            .unwrap();
        let mut back = [0u8; 512];
        tcp.read(0, &mut back).await.unwrap();
        assert_eq!(back, [3u8; 512]);
        stop.send(()).unwrap();
        serving.await.unwrap().unwrap();
        assert!(
            !socket.exists(),
            "the socket file is removed on the way out"
        );
        assert!(NbdClient::connect_tcp(&address.to_string(), "")
            .await
            .is_err());
    }

    #[tokio::test]
    async fn refuses_no_listener_and_names_a_failed_address() {
        let error = Hosting::bind(&HostingConfig::default()).await.unwrap_err();
        assert!(error.to_string().contains("unix socket"), "{error}");
        let directory = tempfile::tempdir().unwrap();
        let file = directory.path().join("disk.img");
        std::fs::write(&file, b"data").unwrap();
        let config = HostingConfig {
            socket: Some(file.clone()),
            tcp: None,
        };
        let error = Hosting::bind(&config).await.unwrap_err();
        assert!(error.to_string().contains("disk.img"), "{error}");
        assert_eq!(std::fs::read(&file).unwrap(), b"data", "not replaced");
        // A TCP address that cannot be bound, after a socket that could: the socket goes.
        let socket = directory.path().join("nbd.sock");
        let config = HostingConfig {
            socket: Some(socket.clone()),
            tcp: Some("256.0.0.1:1".into()),
        };
        assert!(Hosting::bind(&config).await.is_err());
        assert!(!socket.exists());
    }
}
