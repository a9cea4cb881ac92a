//! `strata osd tree|df|down|up|out|in|getmap|pg-upmap-items|rm-pg-upmap-items|tier|pool`: OSD
//! states and usage, marking OSDs, the OSD map in Ceph's binary encoding, a PG's upmap items
//! by hand, and cache tiers (`tier`).

use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::{Args as ClapArgs, Subcommand};
use server::report::{OsdEntry, OsdUsage};

use super::{human_bytes, AdminArgs};

/// Arguments of `strata osd`.
#[derive(ClapArgs, Debug)]
pub struct Args {
    #[command(flatten)]
    pub admin: AdminArgs,
    #[command(subcommand)]
    pub command: OsdCommand,
}

/// What to do with OSDs.
#[derive(Subcommand, Debug)]
pub enum OsdCommand {
    /// OSDs by host with class, weight, up/down and in/out.
    Tree,
    /// Per-OSD space, objects, PGs and load.
    Df,
    /// Mark an OSD down: it serves nothing; its PGs continue degraded on the other replicas.
    Down {
        /// OSD id (`3` or `osd.3`).
        id: String,
    },
    /// Mark an OSD up again: recovery brings its copies up to date.
    Up {
        /// OSD id.
        id: String,
    },
    /// Mark an OSD out: CRUSH moves its PGs elsewhere and recovery copies the data.
    Out {
        /// OSD id.
        id: String,
    },
    /// Mark an OSD in: CRUSH places PGs on it again.
    In {
        /// OSD id.
        id: String,
    },
    /// Cache tiers: a cache pool serving a base pool (`strata osd tier --help`).
    Tier {
        #[command(subcommand)]
        command: super::tier::TierCommand,
    },
    /// Cache pool settings and statistics (`strata osd pool --help`).
    Pool {
        #[command(subcommand)]
        command: super::tier::PoolCommand,
    },
    /// Write the OSD map in Ceph's binary encoding (`ceph osd getmap -o FILE`).
    Getmap {
        /// Output file.
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: std::path::PathBuf,
    },
    /// Set a PG's pg_upmap_items: each FROM OSD of its CRUSH set is replaced by TO
    /// (`ceph osd pg-upmap-items PGID FROM TO [FROM TO ...]`); the data moves by recovery.
    #[command(name = "pg-upmap-items")]
    PgUpmapItems {
        /// PG id (`1.2a`).
        pgid: String,
        /// Pairs of OSD ids: FROM TO [FROM TO ...].
        #[arg(value_name = "FROM TO", required = true, num_args = 2..)]
        osds: Vec<String>,
    },
    /// Remove a PG's pg_upmap_items: it goes back to its CRUSH set.
    #[command(name = "rm-pg-upmap-items")]
    RmPgUpmapItems {
        /// PG id (`1.2a`).
        pgid: String,
    },
}

/// Runs `strata osd`.
pub fn run(args: Args) -> Result<ExitCode> {
    let client = args.admin.client();
    match args.command {
        OsdCommand::Tree => {
            let osds: Vec<OsdEntry> = client.json("GET", "/api/osd/tree", b"")?;
            print_tree(&osds);
        }
        OsdCommand::Df => {
            let osds: Vec<OsdUsage> = client.json("GET", "/api/osd/df", b"")?;
            print_df(&osds);
        }
        OsdCommand::Down { id } => mark(&client, &id, "down")?,
        OsdCommand::Up { id } => mark(&client, &id, "up")?,
        OsdCommand::Out { id } => mark(&client, &id, "out")?,
        OsdCommand::In { id } => mark(&client, &id, "in")?,
        OsdCommand::Tier { command } => super::tier::run_tier(&client, command)?,
        OsdCommand::Pool { command } => super::tier::run_pool(&client, command)?,
        OsdCommand::Getmap { output } => {
            let map = client.call("GET", "/api/osd/map", b"")?;
            std::fs::write(&output, &map)
                .with_context(|| format!("writing {}", output.display()))?;
            eprintln!("wrote osdmap ({} bytes) to {}", map.len(), output.display());
        }
        OsdCommand::PgUpmapItems { pgid, osds } => {
            anyhow::ensure!(
                osds.len() % 2 == 0,
                "give OSD ids in pairs: FROM TO [FROM TO ...]"
            );
            let ids = osds
                .iter()
                .map(|id| {
                    id.strip_prefix("osd.")
                        .unwrap_or(id)
                        .parse::<i32>()
                        .with_context(|| format!("OSD id {id:?} is not a number"))
                })
                .collect::<Result<Vec<i32>>>()?;
            let items: Vec<[i32; 2]> = ids.chunks(2).map(|p| [p[0], p[1]]).collect();
            let body = serde_json::to_vec(&serde_json::json!({ "items": items }))?;
            let path = format!("/api/pg/{}/upmap-items", super::client::segment(&pgid));
            let reply: serde_json::Value = client.json("PUT", &path, &body)?;
            println!(
                "set {pgid} pg_upmap_items mapping to {items:?} (epoch {})",
                reply["epoch"]
            );
        }
        OsdCommand::RmPgUpmapItems { pgid } => {
            let path = format!("/api/pg/{}/upmap-items", super::client::segment(&pgid));
            let reply: serde_json::Value = client.json("DELETE", &path, b"")?;
            println!(
                "clear {pgid} pg_upmap_items mapping (epoch {})",
                reply["epoch"]
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn mark(client: &super::client::Client, id: &str, action: &str) -> Result<()> {
    let path = format!("/api/osd/{}/{action}", super::client::segment(id));
    let reply: serde_json::Value = client.json("POST", &path, b"")?;
    let id = id.strip_prefix("osd.").unwrap_or(id);
    println!("marked osd.{id} {action} (epoch {})", reply["epoch"]);
    Ok(())
}

fn print_tree(osds: &[OsdEntry]) {
    println!(
        "{:<6} {:<8} {:>9}  {:<16} {:<6} {:>8}",
        "ID", "CLASS", "WEIGHT", "NAME", "STATUS", "REWEIGHT"
    );
    let mut hosts: Vec<&str> = osds.iter().map(|o| o.host.as_str()).collect();
    hosts.dedup();
    let total: f64 = osds.iter().map(|o| o.weight).sum();
    println!("{:<6} {:<8} {total:>9.5}  root default", "-1", "");
    for host in hosts {
        let members: Vec<&OsdEntry> = osds.iter().filter(|o| o.host == host).collect();
        let weight: f64 = members.iter().map(|o| o.weight).sum();
        println!("{:<6} {:<8} {weight:>9.5}      host {host}", "", "");
        for osd in members {
            println!(
                "{:<6} {:<8} {:>9.5}          {:<8} {:<6} {:>8}",
                osd.id,
                osd.class,
                osd.weight,
                format!("osd.{}", osd.id),
                if osd.up { "up" } else { "down" },
                if osd.is_in { "1.00000" } else { "0" }
            );
        }
    }
}

fn print_df(osds: &[OsdUsage]) {
    println!(
        "{:<4} {:<6} {:<8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>6} {:>8} {:>5} {:>6}",
        "ID",
        "CLASS",
        "HOST",
        "SIZE",
        "ALLOC",
        "STORED",
        "AVAIL",
        "META",
        "%USE",
        "OBJECTS",
        "PGS",
        "BUSY%"
    );
    for osd in osds {
        let used = if osd.total_bytes == 0 {
            0.0
        } else {
            100.0 * (osd.total_bytes - osd.free_bytes) as f64 / osd.total_bytes as f64
        };
        println!(
            "{:<4} {:<6} {:<8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>6.2} {:>8} {:>5} {:>6.1}",
            osd.id,
            osd.class,
            osd.host,
            human_bytes(osd.total_bytes),
            human_bytes(osd.allocated_bytes),
            human_bytes(osd.stored_bytes),
            human_bytes(osd.free_bytes),
            human_bytes(osd.metadata_bytes),
            used,
            osd.objects,
            osd.pgs,
            100.0 * osd.busy_fraction
        );
    }
}
