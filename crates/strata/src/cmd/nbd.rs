//! `strata nbd serve`: exports one device (any DeviceSpec) over NBD, in the foreground.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use device::DeviceSpec;
use nbd::{ExportConfig, NbdServer};

/// NBD server.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub which: Which,
}

/// NBD commands.
#[derive(clap::Subcommand)]
pub enum Which {
    /// Export a device until interrupted.
    Serve(ServeArgs),
}

/// Where and how to listen, shared with `strata cache start`.
#[derive(clap::Args, Clone)]
pub struct ListenArgs {
    /// Unix socket to listen on (a stale socket left there is replaced; a live one, or any
    /// other file, is refused).
    #[arg(long, value_name = "PATH", conflicts_with = "port")]
    pub socket: Option<PathBuf>,
    /// TCP port to listen on.
    #[arg(long, value_name = "N")]
    pub port: Option<u16>,
    /// Address to bind the TCP port to.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: String,
    /// Export name (the empty default export is always accepted too).
    #[arg(long, default_value = "")]
    pub export: String,
    /// Refuse writes (EPERM).
    #[arg(long)]
    pub read_only: bool,
    /// Requests in flight per connection.
    #[arg(long, default_value_t = 128)]
    pub in_flight: usize,
}

/// `strata nbd serve`.
#[derive(clap::Args)]
pub struct ServeArgs {
    /// The device: `[faulty:OPTIONS:][PROFILE@]BACKING`, e.g. `mem:1G`,
    /// `hdd-10k@file:/tmp/hdd.img:10G`, `faulty:eio=0.001,spike=0.01/50ms,seed=7:mem:1G`
    /// (faulty options: eio, read-eio, write-eio, torn, flip, read-flip, write-flip =
    /// probability per operation; spike=P/DURATION; seed=N).
    #[arg(long, value_name = "SPEC")]
    pub device: String,
    #[command(flatten)]
    pub listen: ListenArgs,
}

pub fn run(args: Args) -> Result<ExitCode> {
    match args.which {
        Which::Serve(args) => serve(args),
    }
}

/// A multi-threaded runtime sized for this machine.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

fn serve(args: ServeArgs) -> Result<ExitCode> {
    let runtime = runtime()?;
    runtime.block_on(async {
        let spec = DeviceSpec::parse(&args.device)?;
        let device = spec.open("nbd-export")?;
        let rotational = spec
            .profile
            .as_deref()
            .is_some_and(|p| p.starts_with("hdd"));
        let server = NbdServer::new(device, export_config(&args.listen, rotational));
        listen(server, &args.listen).await
    })?;
    Ok(ExitCode::SUCCESS)
}

/// The export configuration the listen flags describe.
pub fn export_config(listen: &ListenArgs, rotational: bool) -> ExportConfig {
    ExportConfig {
        name: listen.export.clone(),
        read_only: listen.read_only,
        in_flight_max: listen.in_flight.max(1),
        rotational,
        ..ExportConfig::default()
    }
}

/// Serves until SIGTERM or SIGINT (then returns `Ok`) or until the listener fails; prints
/// where it listens (a line scripts wait for). A unix socket is removed on the way out.
pub async fn listen(server: Arc<NbdServer>, listen: &ListenArgs) -> Result<()> {
    if let Some(path) = &listen.socket {
        let listener =
            NbdServer::bind_unix(path).with_context(|| format!("binding {}", path.display()))?;
        let _socket = RemovedOnDrop(path.clone());
        println!(
            "nbd: serving nbd+unix:///{}?socket={}",
            listen.export,
            path.display()
        );
        tokio::select! {
            served = server.serve_unix(listener) => served?,
            stopped = stop_signal() => stopped?,
        }
    } else if let Some(port) = listen.port {
        let listener = tokio::net::TcpListener::bind((listen.bind.as_str(), port))
            .await
            .with_context(|| format!("binding {}:{port}", listen.bind))?;
        let address = listener.local_addr()?;
        println!("nbd: serving nbd://{address}/{}", listen.export);
        tokio::select! {
            served = server.serve_tcp(listener) => served?,
            stopped = stop_signal() => stopped?,
        }
    } else {
        bail!("give --socket PATH or --port N");
    }
    Ok(())
}

/// Returns at the first SIGTERM or SIGINT (as `kill` and Ctrl-C send them).
pub async fn stop_signal() -> Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut terminate = signal(SignalKind::terminate()).context("catching SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("catching SIGINT")?;
    tokio::select! {
        _ = terminate.recv() => {}
        _ = interrupt.recv() => {}
    }
    Ok(())
}

/// A socket file this process bound, removed when the guard goes (a clean stop, an error):
/// a file left behind looks like a server to the next `bind` until it is probed.
pub struct RemovedOnDrop(pub PathBuf);

impl Drop for RemovedOnDrop {
    fn drop(&mut self) {
        if let Err(error) = std::fs::remove_file(&self.0) {
            if error.kind() != std::io::ErrorKind::NotFound {
                eprintln!("note: cannot remove {}: {error}", self.0.display());
            }
        }
    }
}
