//! `strata pool create|ls|rm`: replicated and erasure-coded pools.

use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::{Args as ClapArgs, Subcommand};
use server::report::PoolEntry;

use super::client::segment;
use super::AdminArgs;

/// Arguments of `strata pool`.
#[derive(ClapArgs, Debug)]
pub struct Args {
    #[command(flatten)]
    pub admin: AdminArgs,
    #[command(subcommand)]
    pub command: PoolCommand,
}

/// What to do with pools.
#[derive(Subcommand, Debug)]
pub enum PoolCommand {
    /// Create a replicated pool.
    Create {
        /// Pool name (1..=255 bytes, no '/').
        name: String,
        /// Replicas per object (at most the number of hosts with OSDs of the class).
        #[arg(long, default_value_t = 3)]
        size: u32,
        /// Replicas needed to accept a write. Default size - size/2.
        #[arg(long)]
        min_size: Option<u32>,
        /// Placement groups.
        #[arg(long, default_value_t = 32)]
        pg_num: u32,
        /// Place only on OSDs of this device class (ssd, hdd, ...). Default: any OSD.
        #[arg(long)]
        class: Option<String>,
        /// Make it erasure-coded with this profile instead of replicated:
        /// `k=4,m=2[,failure-domain=host][,device-class=hdd][,stripe-unit=4K]` (size k+m,
        /// min_size k+1, its own erasure CRUSH rule named after the pool; --size and
        /// --min-size do not apply).
        #[arg(long)]
        erasure: Option<String>,
    },
    /// List pools with their placement settings and objects.
    Ls,
    /// Remove a pool and every object in it (asks for --yes-i-really-really-mean-it, as
    /// `ceph osd pool rm` does).
    Rm {
        /// Pool name.
        name: String,
        /// Confirms that the pool's objects are to be deleted; without it nothing is removed.
        #[arg(long = "yes-i-really-really-mean-it")]
        confirmed: bool,
    },
}

/// Runs `strata pool`.
pub fn run(args: Args) -> Result<ExitCode> {
    let client = args.admin.client();
    match args.command {
        PoolCommand::Create {
            name,
            size,
            min_size,
            pg_num,
            class,
            erasure,
        } => {
            let erasure = match (erasure, &class) {
                (Some(profile), Some(class)) if !profile.contains("device-class") => {
                    Some(format!("{profile},device-class={class}"))
                }
                (erasure, _) => erasure,
            };
            let request = serde_json::json!({
                "name": name, "size": size, "min_size": min_size, "pg_num": pg_num,
                "device_class": class, "erasure": erasure,
            });
            let reply: serde_json::Value =
                client.json("POST", "/api/pools", request.to_string().as_bytes())?;
            println!(
                "pool '{}' created (id {}, size {}, min_size {}, pg_num {}, rule {})",
                name,
                reply["id"],
                reply["size"],
                reply["min_size"],
                reply["pg_num"],
                reply["crush_rule"].as_str().unwrap_or("?")
            );
        }
        PoolCommand::Ls => {
            let pools: Vec<PoolEntry> = client.json("GET", "/api/pools", b"")?;
            println!(
                "{:<4} {:<24} {:>4} {:>8} {:>6} {:<20} {:>9}",
                "ID", "NAME", "SIZE", "MIN_SIZE", "PGS", "RULE", "OBJECTS"
            );
            for pool in pools {
                println!(
                    "{:<4} {:<24} {:>4} {:>8} {:>6} {:<20} {:>9}{}",
                    pool.id,
                    pool.name,
                    pool.size,
                    pool.min_size,
                    pool.pg_num,
                    pool.crush_rule,
                    pool.objects,
                    pool.erasure
                        .map(|profile| format!("  erasure {profile}"))
                        .unwrap_or_default()
                );
            }
        }
        PoolCommand::Rm { name, confirmed } => {
            if !confirmed {
                // Say what would be lost (and name a pool that does not exist as such).
                let pools: Vec<PoolEntry> = client.json("GET", "/api/pools", b"")?;
                let Some(pool) = pools.iter().find(|pool| pool.name == name) else {
                    bail!("no pool '{name}' (strata pool ls lists them)");
                };
                bail!(
                    "removing pool '{name}' deletes its {} objects for good; nothing was \
                     removed. Repeat with --yes-i-really-really-mean-it to remove it",
                    pool.objects
                );
            }
            client.call("DELETE", &format!("/api/pools/{}", segment(&name)), b"")?;
            println!("pool '{name}' removed");
        }
    }
    Ok(ExitCode::SUCCESS)
}
