//! `strata osd tree|df|down|up|out|in|reweight|crush|getmap|pg-upmap-items|rm-pg-upmap-items|
//! tier|pool`: OSD states and usage, marking OSDs, override weights and device classes, the OSD
//! map in Ceph's binary encoding, a PG's upmap items by hand, and cache tiers (`tier`).

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
    /// Per-OSD space, objects, PGs and load, with each OSD's VAR (its %USE over the
    /// cluster's) and the STDDEV of %USE, as `ceph osd df`; `strata osd df tree` groups
    /// them by host.
    Df {
        /// `tree`: the OSDs under their hosts, with each host's totals.
        #[arg(value_parser = ["tree"])]
        layout: Option<String>,
    },
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
    /// Set an OSD's override weight, 0.0..=1.0 (`ceph osd reweight`): it keeps that share of
    /// the PGs CRUSH gives it; recovery moves the rest. `strata osd in` sets it back to 1.
    Reweight {
        /// OSD id.
        id: String,
        /// 0.0 (takes nothing, as out) ..= 1.0.
        weight: f64,
    },
    /// Device classes of OSDs (`strata osd crush --help`).
    Crush {
        #[command(subcommand)]
        command: CrushCommand,
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

/// `strata osd crush ...`.
#[derive(Subcommand, Debug)]
pub enum CrushCommand {
    /// Give OSDs a device class (`ceph osd crush set-device-class`); refused for an OSD
    /// bound to another class until `rm-device-class` removed it. Saved in cluster.toml;
    /// PGs of class rules move by recovery.
    #[command(name = "set-device-class")]
    SetDeviceClass {
        /// The class (`ssd`, `hdd`, `nvme`, ...).
        class: String,
        /// OSD ids.
        #[arg(required = true)]
        ids: Vec<String>,
    },
    /// Remove OSDs' device class (`ceph osd crush rm-device-class`): only rules taking any
    /// class place on them until one is set.
    #[command(name = "rm-device-class")]
    RmDeviceClass {
        /// OSD ids.
        #[arg(required = true)]
        ids: Vec<String>,
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
        OsdCommand::Df { layout } => {
            let osds: Vec<OsdUsage> = client.json("GET", "/api/osd/df", b"")?;
            if layout.is_some() {
                let tree: Vec<OsdEntry> = client.json("GET", "/api/osd/tree", b"")?;
                print!("{}", df_tree(&osds, &tree));
            } else {
                print!("{}", df(&osds));
            }
        }
        OsdCommand::Down { id } => mark(&client, &id, "down")?,
        OsdCommand::Up { id } => mark(&client, &id, "up")?,
        OsdCommand::Out { id } => mark(&client, &id, "out")?,
        OsdCommand::In { id } => mark(&client, &id, "in")?,
        OsdCommand::Reweight { id, weight } => {
            anyhow::ensure!(
                (0.0..=1.0).contains(&weight),
                "weight {weight} must be from 0.0 to 1.0"
            );
            let path = format!("/api/osd/{}/reweight", super::client::segment(&id));
            let body = serde_json::to_vec(&serde_json::json!({ "weight": weight }))?;
            let reply: serde_json::Value = client.json("POST", &path, &body)?;
            let id = id.strip_prefix("osd.").unwrap_or(&id);
            println!("reweighted osd.{id} to {weight} (epoch {})", reply["epoch"]);
        }
        OsdCommand::Crush { command } => crush(&client, command)?,
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
            let ids = parse_ids(&osds)?;
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

fn crush(client: &super::client::Client, command: CrushCommand) -> Result<()> {
    let (path, class, ids) = match command {
        CrushCommand::SetDeviceClass { class, ids } => ("set-device-class", Some(class), ids),
        CrushCommand::RmDeviceClass { ids } => ("rm-device-class", None, ids),
    };
    let ids = parse_ids(&ids)?;
    let body = serde_json::to_vec(&serde_json::json!({ "class": class, "ids": ids }))?;
    let reply: serde_json::Value = client.json("POST", &format!("/api/osd/crush/{path}"), &body)?;
    let names: Vec<String> = ids.iter().map(|id| format!("osd.{id}")).collect();
    match class {
        Some(class) => println!(
            "set {} to class {class} (epoch {})",
            names.join(", "),
            reply["epoch"]
        ),
        None => println!(
            "removed the class of {} (epoch {})",
            names.join(", "),
            reply["epoch"]
        ),
    }
    Ok(())
}

/// OSD ids given as `N` or `osd.N`.
fn parse_ids(ids: &[String]) -> Result<Vec<i32>> {
    ids.iter()
        .map(|id| {
            id.strip_prefix("osd.")
                .unwrap_or(id)
                .parse::<i32>()
                .with_context(|| format!("OSD id {id:?} is not a number"))
        })
        .collect()
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
                if osd.is_in {
                    format!("{:.5}", osd.reweight)
                } else {
                    "0".to_string()
                }
            );
        }
    }
}

/// Used share of an OSD's device, in percent.
fn used_percent(osd: &OsdUsage) -> f64 {
    if osd.total_bytes == 0 {
        0.0
    } else {
        100.0 * osd.total_bytes.saturating_sub(osd.free_bytes) as f64 / osd.total_bytes as f64
    }
}

/// The spread of %USE as Ceph reports it: the cluster's %USE (used over capacity, all OSDs),
/// each OSD's VAR (its %USE over that), and the standard deviation of the OSDs' %USE around
/// the cluster's, in percentage points.
struct Spread {
    average_percent: f64,
    stddev_percent: f64,
}

impl Spread {
    fn of(osds: &[OsdUsage]) -> Self {
        let total: u64 = osds.iter().map(|o| o.total_bytes).sum();
        let used: u64 = osds
            .iter()
            .map(|o| o.total_bytes.saturating_sub(o.free_bytes))
            .sum();
        let average_percent = if total == 0 {
            0.0
        } else {
            100.0 * used as f64 / total as f64
        };
        let stddev_percent = if osds.is_empty() {
            0.0
        } else {
            let squares: f64 = osds
                .iter()
                .map(|o| (used_percent(o) - average_percent).powi(2))
                .sum();
            (squares / osds.len() as f64).sqrt()
        };
        Self {
            average_percent,
            stddev_percent,
        }
    }

    fn var(&self, used_percent: f64) -> f64 {
        if self.average_percent == 0.0 {
            0.0
        } else {
            used_percent / self.average_percent
        }
    }

    /// `MIN/MAX VAR: a/b  STDDEV: s`.
    fn footer(&self, osds: &[OsdUsage]) -> String {
        let vars: Vec<f64> = osds.iter().map(|o| self.var(used_percent(o))).collect();
        let min = vars.iter().copied().fold(f64::INFINITY, f64::min);
        let max = vars.iter().copied().fold(0.0, f64::max);
        let min = if min.is_finite() { min } else { 0.0 };
        format!(
            "MIN/MAX VAR: {min:.2}/{max:.2}  STDDEV: {:.2}\n",
            self.stddev_percent
        )
    }
}

fn df(osds: &[OsdUsage]) -> String {
    use std::fmt::Write;
    let spread = Spread::of(osds);
    let mut out = format!(
        "{:<4} {:<6} {:<8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>6} {:>5} {:>8} {:>5} {:>6}\n",
        "ID",
        "CLASS",
        "HOST",
        "SIZE",
        "ALLOC",
        "STORED",
        "AVAIL",
        "META",
        "%USE",
        "VAR",
        "OBJECTS",
        "PGS",
        "BUSY%"
    );
    for osd in osds {
        let used = used_percent(osd);
        let _ = writeln!(
            out,
            "{:<4} {:<6} {:<8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>6.2} {:>5.2} {:>8} {:>5} {:>6.1}",
            osd.id,
            osd.class,
            osd.host,
            human_bytes(osd.total_bytes),
            human_bytes(osd.allocated_bytes),
            human_bytes(osd.stored_bytes),
            human_bytes(osd.free_bytes),
            human_bytes(osd.metadata_bytes),
            used,
            spread.var(used),
            osd.objects,
            osd.pgs,
            100.0 * osd.busy_fraction
        );
    }
    let _ = writeln!(out, "{}", total_line(osds, &spread, "TOTAL"));
    out.push_str(&spread.footer(osds));
    out
}

/// `TOTAL` (or a host's) line: summed space and the group's %USE.
fn total_line(osds: &[OsdUsage], spread: &Spread, name: &str) -> String {
    let total: u64 = osds.iter().map(|o| o.total_bytes).sum();
    let free: u64 = osds.iter().map(|o| o.free_bytes).sum();
    let used = if total == 0 {
        0.0
    } else {
        100.0 * total.saturating_sub(free) as f64 / total as f64
    };
    format!(
        "{:<19} {:>10} {:>10} {:>10} {:>10} {:>10} {:>6.2} {:>5.2} {:>8} {:>5}",
        name,
        human_bytes(total),
        human_bytes(osds.iter().map(|o| o.allocated_bytes).sum()),
        human_bytes(osds.iter().map(|o| o.stored_bytes).sum()),
        human_bytes(free),
        human_bytes(osds.iter().map(|o| o.metadata_bytes).sum()),
        used,
        spread.var(used),
        osds.iter().map(|o| o.objects).sum::<u64>(),
        osds.iter().map(|o| o.pgs).sum::<u64>(),
    )
}

/// `osd df tree`: the root, each host with its totals, its OSDs under it (weights and states
/// from the tree), then the totals and the spread.
fn df_tree(osds: &[OsdUsage], tree: &[OsdEntry]) -> String {
    use std::fmt::Write;
    let spread = Spread::of(osds);
    let mut out = format!(
        "{:<6} {:<6} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>6} {:>5} {:>5} {:<6} NAME\n",
        "ID",
        "CLASS",
        "WEIGHT",
        "SIZE",
        "ALLOC",
        "STORED",
        "AVAIL",
        "META",
        "%USE",
        "VAR",
        "PGS",
        "STATUS"
    );
    let group = |out: &mut String, id: &str, weight: f64, members: &[OsdUsage], name: &str| {
        let total: u64 = members.iter().map(|o| o.total_bytes).sum();
        let free: u64 = members.iter().map(|o| o.free_bytes).sum();
        let used = if total == 0 {
            0.0
        } else {
            100.0 * total.saturating_sub(free) as f64 / total as f64
        };
        let _ = writeln!(
            out,
            "{:<6} {:<6} {:>8.5} {:>10} {:>10} {:>10} {:>10} {:>10} {:>6.2} {:>5.2} {:>5} {:<6} {name}",
            id,
            "",
            weight,
            human_bytes(total),
            human_bytes(members.iter().map(|o| o.allocated_bytes).sum()),
            human_bytes(members.iter().map(|o| o.stored_bytes).sum()),
            human_bytes(free),
            human_bytes(members.iter().map(|o| o.metadata_bytes).sum()),
            used,
            spread.var(used),
            "",
            "",
        );
    };
    let weight_of = |id: i32| tree.iter().find(|e| e.id == id);
    let root_weight: f64 = tree.iter().map(|e| e.weight).sum();
    group(&mut out, "-1", root_weight, osds, "root default");
    let mut hosts: Vec<&str> = osds.iter().map(|o| o.host.as_str()).collect();
    hosts.dedup();
    let mut seen = std::collections::BTreeSet::new();
    hosts.retain(|host| seen.insert(*host));
    for host in hosts {
        let members: Vec<OsdUsage> = osds.iter().filter(|o| o.host == host).cloned().collect();
        let weight: f64 = members
            .iter()
            .filter_map(|o| weight_of(o.id))
            .map(|e| e.weight)
            .sum();
        group(&mut out, "", weight, &members, &format!("    host {host}"));
        for osd in &members {
            let entry = weight_of(osd.id);
            let used = used_percent(osd);
            let status = match entry {
                Some(e) if !e.up => "down",
                Some(e) if !e.is_in => "out",
                Some(_) => "up",
                None => "?",
            };
            let _ = writeln!(
                out,
                "{:<6} {:<6} {:>8.5} {:>10} {:>10} {:>10} {:>10} {:>10} {:>6.2} {:>5.2} {:>5} {:<6}         osd.{}",
                osd.id,
                osd.class,
                entry.map_or(0.0, |e| e.weight),
                human_bytes(osd.total_bytes),
                human_bytes(osd.allocated_bytes),
                human_bytes(osd.stored_bytes),
                human_bytes(osd.free_bytes),
                human_bytes(osd.metadata_bytes),
                used,
                spread.var(used),
                osd.pgs,
                status,
                osd.id,
            );
        }
    }
    group(&mut out, "TOTAL", root_weight, osds, "");
    out.push_str(&spread.footer(osds));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn osd(id: i32, host: &str, total_bytes: u64, free_bytes: u64) -> OsdUsage {
        OsdUsage {
            id,
            host: host.into(),
            class: "hdd".into(),
            total_bytes,
            allocated_bytes: total_bytes - free_bytes,
            stored_bytes: 0,
            free_bytes,
            metadata_bytes: 0,
            objects: 0,
            pgs: 8,
            device_ops: 0,
            busy_fraction: 0.0,
        }
    }

    #[test]
    fn var_and_stddev_are_cephs() {
        // 10% and 30% used of equal devices: the cluster is at 20%, VARs 0.5 and 1.5,
        // and both are 10 points from it.
        let osds = [osd(0, "a", 1000, 900), osd(1, "b", 1000, 700)];
        let spread = Spread::of(&osds);
        assert!((spread.average_percent - 20.0).abs() < 1e-9);
        assert!((spread.var(used_percent(&osds[0])) - 0.5).abs() < 1e-9);
        assert!((spread.stddev_percent - 10.0).abs() < 1e-9);
        assert_eq!(
            spread.footer(&osds),
            "MIN/MAX VAR: 0.50/1.50  STDDEV: 10.00\n"
        );
        let text = df(&osds);
        assert!(text.contains("MIN/MAX VAR"), "{text}");
        let tree = df_tree(&osds, &[]);
        assert!(tree.contains("host a") && tree.contains("osd.1"), "{tree}");
    }
}
