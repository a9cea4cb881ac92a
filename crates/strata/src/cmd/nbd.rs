//! `strata nbd serve`: exports one device (any DeviceSpec) over NBD, in the foreground.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use blockcache::LayeredSpec;
use nbd::hosting::{stop_signal, Hosting, HostingConfig};
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
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// TCP port to listen on (with --socket too: both serve the same exports).
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
    /// probability per operation; spike=P/DURATION; seed=N), or a cache of one device over
    /// another, `cache:OPTIONS:FAST|SLOW` (options mode=wt|wb|wa|wi|wo|pt,
    /// line=4K..64K, cleaning=alru|acp|nop, promotion=always|nhit,
    /// cutoff=full|always|never), e.g. `cache:mode=wb:nvme@file:c.img:1G|hdd-10k@file:d.img:10G`.
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
        let spec = LayeredSpec::parse(&args.device)?;
        let (device, cache) = spec.open_cached("nbd-export").await?;
        // A cache presents its core: rotational when the core is.
        let rotational = spec
            .core()
            .profile
            .as_deref()
            .is_some_and(|p| p.starts_with("hdd"));
        let server = NbdServer::new(device, export_config(&args.listen, rotational));
        let served = listen(server, &args.listen).await;
        if let Some(cache) = cache {
            // Warm at the next start; a kill leaves it dirty, and the next start recovers.
            cache.stop().await?;
        }
        served
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

/// Where the listen flags say to listen.
pub fn hosting_config(listen: &ListenArgs) -> HostingConfig {
    HostingConfig {
        socket: listen.socket.clone(),
        tcp: listen.port.map(|port| format!("{}:{port}", listen.bind)),
    }
}

/// Serves until SIGTERM or SIGINT (then returns `Ok`) or until a listener fails; prints
/// where it listens (lines scripts wait for). A unix socket is removed on the way out.
pub async fn listen(server: Arc<NbdServer>, listen: &ListenArgs) -> Result<()> {
    if listen.socket.is_none() && listen.port.is_none() {
        bail!("give --socket PATH, --port N or both");
    }
    let stop = stop_signal().context("catching SIGTERM and SIGINT")?;
    let hosting = Hosting::bind(&hosting_config(listen)).await?;
    for uri in hosting.uris(&listen.export) {
        println!("nbd: serving {uri}");
    }
    hosting.serve(server, stop).await?;
    Ok(())
}
