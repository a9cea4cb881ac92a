//! CLI commands that talk to a running `strata serve` over its admin HTTP API, in the spirit
//! of `ceph` and `rados`: one module per command group. [`client`] is the HTTP/1.1 client they
//! share; every command takes `--admin ADDR` and `--data DIR` ([`AdminArgs`]): the admin API
//! wants the token `strata serve` keeps in its data directory (`server::token`).

pub mod balancer;
pub mod client;
pub mod df;
pub mod gc;
pub mod object;
pub mod osd;
pub mod pg;
pub mod pool;
pub mod scrub;
pub mod stats;
pub mod status;
pub mod tier;
pub mod user;

use clap::Args;

/// Where the server's admin endpoint is, and how to prove we administer it.
#[derive(Args, Clone, Debug)]
pub struct AdminArgs {
    /// Admin endpoint of the running `strata serve` (host:port).
    #[arg(long, global = true, env = "STRATA_ADMIN", default_value = server::ADMIN_ADDR_DEFAULT)]
    pub admin: String,
    /// Data directory of that `strata serve`: the admin token is read from its
    /// `admin.token` (the environment variable STRATA_ADMIN_TOKEN, when set, wins).
    #[arg(
        long,
        global = true,
        env = "STRATA_DATA",
        default_value = "./strata-data"
    )]
    pub data: std::path::PathBuf,
}

impl AdminArgs {
    /// A client for the endpoint, carrying the admin token when one is found.
    pub fn client(&self) -> client::Client {
        let token = match std::env::var("STRATA_ADMIN_TOKEN") {
            Ok(token) if !token.trim().is_empty() => Some(token.trim().to_string()),
            _ => std::fs::read_to_string(server::token::token_path(&self.data))
                .ok()
                .map(|text| text.trim().to_string()),
        };
        let mut client = client::Client::new(&self.admin);
        client.token = token;
        client.token_hint = format!(
            "the token is read from {} (give --data DIR) or STRATA_ADMIN_TOKEN",
            server::token::token_path(&self.data).display()
        );
        client
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
