//! `strata`: the command-line front end. Each subcommand lives in its own module under `cmd/`,
//! parses its own arguments (clap) and calls into the library crates; nothing here holds logic
//! a library should own.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod cmd;

/// strata: storage for clusters that mix fast (NVMe/SSD) and slow (HDD) devices.
///
/// Ceph-compatible CRUSH placement and balancing, cache-policy simulation, and (as they land)
/// an embedded cluster served over S3 and NBD.
#[derive(Parser)]
#[command(name = "strata", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Compile, decompile and test CRUSH maps (a drop-in for Ceph's crushtool).
    Crush(cmd::crush::Args),
    /// Map pools, PGs and objects to OSDs from an osdmap (a drop-in for osdmaptool's tests).
    Osdmap(cmd::osdmap::Args),
    /// Compute pg-upmap-items that balance PGs over OSDs with the least data movement.
    Balance(cmd::balance::Args),
    /// Per-OSD PG distribution of an osdmap against weight-proportional targets.
    Analyze(cmd::analyze::Args),
    /// Trace-driven simulators (cache policies).
    Sim(cmd::sim::Args),
    /// Benchmarks that print a table with the peer measured in the same run.
    Bench(cmd::bench::Args),
    /// Export a device over NBD.
    Nbd(cmd::nbd::Args),
    /// A cached device (fast cache over slow core) in the manner of casadm, served over NBD.
    Cache(cmd::cache::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Crush(args) => cmd::crush::run(args),
        Command::Osdmap(args) => cmd::osdmap::run(args),
        Command::Balance(args) => cmd::balance::run(args),
        Command::Analyze(args) => cmd::analyze::run(args),
        Command::Sim(args) => cmd::sim::run(args),
        Command::Bench(args) => cmd::bench::run(args),
        Command::Nbd(args) => cmd::nbd::run(args),
        Command::Cache(args) => cmd::cache::run(args),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("strata: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
