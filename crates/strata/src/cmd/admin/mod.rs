//! CLI commands that talk to a running `strata serve` over its admin HTTP API, in the spirit
//! of `ceph` and `rados`: one module per command group. [`client`] is the HTTP/1.1 client they
//! share; every command takes `--admin ADDR` ([`AdminArgs`]).

pub mod client;
pub mod df;
pub mod object;
pub mod osd;
pub mod pool;
pub mod scrub;
pub mod status;
pub mod user;

use clap::Args;

/// Where the server's admin endpoint is.
#[derive(Args, Clone, Debug)]
pub struct AdminArgs {
    /// Admin endpoint of the running `strata serve` (host:port).
    #[arg(long, global = true, default_value = server::ADMIN_ADDR_DEFAULT)]
    pub admin: String,
}

impl AdminArgs {
    /// A client for the endpoint.
    pub fn client(&self) -> client::Client {
        client::Client::new(&self.admin)
    }
}

/// Bytes as a short human figure (binary units).
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}
