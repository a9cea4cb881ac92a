//! `strata pg ls|query|mark-unfound-lost`: PG states and unfound objects, as `ceph pg ls`,
//! `ceph pg PGID query` and `ceph pg PGID mark_unfound_lost revert|delete`.

use std::process::ExitCode;

use anyhow::Result;
use clap::{Args as ClapArgs, Subcommand, ValueEnum};
use serde_json::Value;

use super::client::segment;
use super::AdminArgs;

/// Arguments of `strata pg`.
#[derive(ClapArgs, Debug)]
pub struct Args {
    #[command(flatten)]
    pub admin: AdminArgs,
    #[command(subcommand)]
    pub command: PgCommand,
}

/// What to do with PGs.
#[derive(Subcommand, Debug)]
pub enum PgCommand {
    /// Every PG: state, up and acting sets, unfound objects. `--unfound`: only PGs with some.
    Ls {
        /// Only PGs with unfound objects.
        #[arg(long)]
        unfound: bool,
    },
    /// One PG: state, sets and the names of its unfound objects.
    Query {
        /// PG id (`1.1f`).
        pgid: String,
    },
    /// Resolve a PG's unfound objects (no replica can provide them): `revert` rolls each back
    /// to the newest older copy an OSD still holds (deleted when none), `delete` forgets it.
    MarkUnfoundLost {
        /// How.
        how: Resolution,
        /// PG id (`1.1f`).
        pgid: String,
    },
}

/// How unfound objects are resolved.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum Resolution {
    /// Roll back to the newest older copy, else delete.
    Revert,
    /// Forget the object.
    Delete,
}

/// Runs `strata pg`; `ls` and `query` exit 1 when unfound objects are listed.
pub fn run(args: Args) -> Result<ExitCode> {
    let client = args.admin.client();
    let unfound = match args.command {
        PgCommand::Ls { unfound } => {
            let pgs: Vec<Value> = client.json("GET", "/api/pg", b"")?;
            println!(
                "{:<8} {:<26} {:<14} {:<14} UNFOUND",
                "PG", "STATE", "UP", "ACTING"
            );
            let mut any = false;
            for pg in pgs {
                let count = pg["unfound"].as_array().map_or(0, Vec::len);
                any |= count > 0;
                if unfound && count == 0 {
                    continue;
                }
                println!(
                    "{:<8} {:<26} {:<14} {:<14} {count}",
                    pg["pg"].as_str().unwrap_or("?"),
                    pg["state"].as_str().unwrap_or("?"),
                    pg["up"].to_string(),
                    pg["acting"].to_string(),
                );
            }
            any
        }
        PgCommand::Query { pgid } => {
            let pg: Value = client.json("GET", &format!("/api/pg/{}", segment(&pgid)), b"")?;
            println!("pg {}: {}", pg["pg"].as_str().unwrap_or("?"), pg["state"]);
            println!("  up {} acting {}", pg["up"], pg["acting"]);
            let objects = pg["unfound"].as_array().cloned().unwrap_or_default();
            for object in &objects {
                println!(
                    "  unfound: {} (version {})",
                    object["object"].as_str().unwrap_or("?"),
                    object["version"]
                );
            }
            !objects.is_empty()
        }
        PgCommand::MarkUnfoundLost { how, pgid } => {
            let how = match how {
                Resolution::Revert => "revert",
                Resolution::Delete => "delete",
            };
            let reply: Value = client.json(
                "POST",
                &format!("/api/pg/{}/mark-unfound-lost?how={how}", segment(&pgid)),
                b"",
            )?;
            println!(
                "pg {pgid}: {} unfound objects marked lost ({how})",
                reply["resolved"]
            );
            false
        }
    };
    Ok(if unfound {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
