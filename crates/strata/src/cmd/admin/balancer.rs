//! `strata balancer on|off|status|mode MODE|config|eval [PLAN]|optimize PLAN|show PLAN|execute
//! PLAN|rm PLAN`: the running server's balancer, named as Ceph's mgr balancer names it. The
//! server decides and applies (`server::balancer`); this module sends the request and prints
//! the reply.

use std::process::ExitCode;

use anyhow::Result;
use clap::{Args as ClapArgs, Subcommand};
use serde_json::Value;

use super::client::segment;
use super::AdminArgs;

/// Arguments of `strata balancer`.
#[derive(ClapArgs, Debug)]
pub struct Args {
    #[command(flatten)]
    pub admin: AdminArgs,
    #[command(subcommand)]
    pub command: BalancerCommand,
    /// Print the server's JSON.
    #[arg(long, global = true)]
    pub json: bool,
}

/// What to ask the balancer.
#[derive(Subcommand, Debug)]
pub enum BalancerCommand {
    /// Whether it runs, its mode, period, budget and what the last period did.
    Status,
    /// Run a period every `period_s` (persisted across restarts).
    On,
    /// Stop running periods.
    Off,
    /// Set the mode: upmap (PG counts per pool and in total), bytes (stored bytes per OSD's
    /// share), read (primaries per OSD's share, no data moved), load (seed 000's I/O load:
    /// overloaded OSDs relieved by primaries, then by moving the hottest PGs).
    Mode {
        /// upmap, bytes, read or load.
        mode: String,
    },
    /// Set the period and the movement budget per period.
    Config {
        /// Seconds between periods (Ceph's sleep_interval; default 60).
        #[arg(long)]
        period_s: Option<u64>,
        /// At most this share of all shards moves per period (default 0.05).
        #[arg(long)]
        target_max_misplaced_ratio: Option<f64>,
        /// Load mode: read overload above this share of an OSD's capability (default 0.8).
        #[arg(long)]
        read_threshold: Option<f64>,
        /// Load mode: write overload above this share of an OSD's capability (default 0.8).
        #[arg(long)]
        write_threshold: Option<f64>,
        /// Load mode: relieve down to, and fill up to, (1 - this) of a threshold (default 0.1).
        #[arg(long)]
        hysteresis: Option<f64>,
        /// Load mode: composite weight of performance (default 0.4; the three sum to 1).
        #[arg(long)]
        weight_performance: Option<f64>,
        /// Load mode: composite weight of load, inverted (default 0.4).
        #[arg(long)]
        weight_load: Option<f64>,
        /// Load mode: composite weight of free capacity (default 0.2).
        #[arg(long)]
        weight_capacity: Option<f64>,
    },
    /// Score per pool and in total (share of shards away from a perfect balance; 0 is
    /// perfect), now or after PLAN.
    Eval {
        /// A plan made by `optimize`.
        plan: Option<String>,
    },
    /// Plan one period's worth of changes under a name, without applying them.
    Optimize {
        /// Plan name.
        plan: String,
    },
    /// A plan's changes as `ceph osd pg-upmap-items` commands.
    Show {
        /// Plan name.
        plan: String,
    },
    /// Apply a plan (refused if the map changed since it was made).
    Execute {
        /// Plan name.
        plan: String,
    },
    /// Forget a plan.
    Rm {
        /// Plan name.
        plan: String,
    },
}

/// Runs `strata balancer`.
pub fn run(args: Args) -> Result<ExitCode> {
    let client = args.admin.client();
    let (method, path) = match &args.command {
        BalancerCommand::Status => ("GET", "/api/balancer".to_string()),
        BalancerCommand::On => ("POST", "/api/balancer/on".to_string()),
        BalancerCommand::Off => ("POST", "/api/balancer/off".to_string()),
        BalancerCommand::Mode { mode } => ("POST", format!("/api/balancer/mode/{}", segment(mode))),
        BalancerCommand::Config {
            period_s,
            target_max_misplaced_ratio,
            read_threshold,
            write_threshold,
            hysteresis,
            weight_performance,
            weight_load,
            weight_capacity,
        } => {
            let mut query = Vec::new();
            for (name, value) in [
                ("read_threshold", read_threshold),
                ("write_threshold", write_threshold),
                ("hysteresis", hysteresis),
                ("weight_performance", weight_performance),
                ("weight_load", weight_load),
                ("weight_capacity", weight_capacity),
            ] {
                if let Some(value) = value {
                    query.push(format!("{name}={value}"));
                }
            }
            if let Some(period_s) = period_s {
                query.push(format!("period_s={period_s}"));
            }
            if let Some(ratio) = target_max_misplaced_ratio {
                query.push(format!("target_max_misplaced_ratio={ratio}"));
            }
            ("POST", format!("/api/balancer/config?{}", query.join("&")))
        }
        BalancerCommand::Eval { plan: None } => ("GET", "/api/balancer/eval".to_string()),
        BalancerCommand::Eval { plan: Some(plan) } => {
            ("GET", format!("/api/balancer/eval/{}", segment(plan)))
        }
        BalancerCommand::Optimize { plan } => {
            ("POST", format!("/api/balancer/optimize/{}", segment(plan)))
        }
        BalancerCommand::Show { plan } => ("GET", format!("/api/balancer/plans/{}", segment(plan))),
        BalancerCommand::Execute { plan } => {
            ("POST", format!("/api/balancer/execute/{}", segment(plan)))
        }
        BalancerCommand::Rm { plan } => {
            ("DELETE", format!("/api/balancer/plans/{}", segment(plan)))
        }
    };
    let reply: Value = client.json(method, &path, b"")?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&reply)?);
        return Ok(ExitCode::SUCCESS);
    }
    match &args.command {
        BalancerCommand::Eval { .. } => print_scores(&reply),
        BalancerCommand::Optimize { .. } | BalancerCommand::Show { .. } => print_plan(&reply),
        BalancerCommand::Execute { plan } => println!(
            "executed plan {plan}: {} PGs changed, {} shards moved, epoch {}",
            reply["changes"], reply["shards_changed"], reply["epoch"]
        ),
        BalancerCommand::Rm { plan } => println!("removed plan {plan}"),
        _ => print_status(&reply),
    }
    Ok(ExitCode::SUCCESS)
}

/// One status line per setting, then the last period.
pub fn print_status(status: &Value) {
    println!(
        "active: {}\nmode: {}\nperiod_s: {}\ntarget_max_misplaced_ratio: {}\nshards moved since start: {}",
        status["active"],
        status["mode"].as_str().unwrap_or("?"),
        status["period_s"],
        status["target_max_misplaced_ratio"],
        status["shards_moved"]
    );
    if let Some(last) = status["last_period"].as_object() {
        println!(
            "last period: {} ({})",
            last["outcome"].as_str().unwrap_or("?"),
            last["detail"].as_str().unwrap_or("")
        );
    }
    let plans: Vec<&str> = status["plans"]
        .as_array()
        .map(|p| p.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if !plans.is_empty() {
        println!("plans: {}", plans.join(" "));
    }
}

fn print_scores(reply: &Value) {
    println!("epoch {}", reply["epoch"]);
    println!(
        "{:<10} {:>8} {:>8} {:>8}",
        "scope", "score", "max dev", "outside"
    );
    for score in reply["scores"].as_array().into_iter().flatten() {
        let scope = score["scope"].as_str().unwrap_or("?");
        let scope = if scope == "total" {
            scope.to_string()
        } else {
            format!("pool {scope}")
        };
        println!(
            "{scope:<10} {:>8.4} {:>8.2} {:>8}",
            score["score"].as_f64().unwrap_or(0.0),
            score["max_deviation"].as_f64().unwrap_or(0.0),
            score["outside_bounds"]
        );
    }
    if let Some(primaries) = reply["primaries"].as_array() {
        println!("primaries (read mode):");
        for score in primaries {
            println!(
                "{:<10} {:>8} {:>8.2} {:>8}",
                score["scope"].as_str().unwrap_or("?"),
                "",
                score["max_deviation"].as_f64().unwrap_or(0.0),
                score["outside_bounds"]
            );
        }
    }
    if reply["bytes"].is_object() {
        println!(
            "bytes (bytes mode): fullest OSD at {:.1}% of its share, emptiest at {:.1}%, {} bytes stored",
            reply["bytes"]["fill_max"].as_f64().unwrap_or(0.0) * 100.0,
            reply["bytes"]["fill_min"].as_f64().unwrap_or(0.0) * 100.0,
            reply["bytes"]["stored_bytes"]
        );
    }
}

fn print_plan(reply: &Value) {
    println!(
        "# plan {} (epoch {}, mode {}): {} PGs changed, {} shards moved",
        reply["plan"].as_str().unwrap_or("?"),
        reply["epoch"],
        reply["mode"].as_str().unwrap_or("?"),
        reply["changes"],
        reply["shards_changed"]
    );
    for command in reply["commands"].as_array().into_iter().flatten() {
        println!("{}", command.as_str().unwrap_or(""));
    }
}
