//! `strata bench soak` (issue 43): acknowledged writes survive kill -9 of a real `strata
//! serve`, on a cluster with a small OSD that fills up and a faulty one.
//!
//! The cluster (its `cluster.toml` written by the soak): 4 hosts of one OSD each on sparse
//! files, osd.0 smaller than its peers (it reaches nearfull and full during the run), osd.1
//! on a `faulty:` device (read EIO, read bit flips, latency spikes, seeded), a pool `soak` of
//! size 3 for the object writers, and the S3 gateway's pools (size 3).
//!
//! Each round: start `strata serve` (this binary), wait until every PG is `active+clean`,
//! read back every key the writers ever wrote (the last acknowledged state, or the state of
//! a write in flight at the last kill), deep-scrub every pool, check that every PG has
//! `size` acting replicas; then run the S3 and object writers (PUT, overwrite, DELETE, read
//! back) for a random time and kill -9 the server. Writes acknowledged on fewer replicas than
//! the pool's size are counted from the server's own warning
//! ([`super::serve_process::BELOW_SIZE_WARNING`]), which it prints before acknowledging.
//!
//! Why the faulty OSD has read faults only by default: a write EIO poisons a store, which
//! then leaves the cluster (as a Ceph OSD whose BlueStore fails a write dies), and its PGs
//! then acknowledge writes at `min_size` by design; `--faults` can add them.
//!
//! ```text
//! strata bench soak [--kills 100] [--duration-s S] [--seed N] [--dir /tmp]
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rand::{Rng, SeedableRng};

use super::s3_client::{Credentials, S3Connection};
use super::serve_process::{LogCounts, ServeProcess};
use super::soak_writers::{self, Kind, Ledger, Shared, State, Target, WriterPlan};
use crate::cmd::admin::client::Client;

/// Kill -9 rounds against a real `strata serve` with S3 and object writers.
#[derive(clap::Args, Clone)]
pub struct Args {
    /// Kills of the server (rounds).
    #[arg(long, default_value_t = 100)]
    pub kills: u64,
    /// Stop starting rounds after this many seconds (whatever --kills says).
    #[arg(long)]
    pub duration_s: Option<f64>,
    /// Seed of the writers, the kill times and the faulty device.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// S3 writers (one connection each).
    #[arg(long, default_value_t = 4)]
    pub s3_writers: usize,
    /// Object writers (admin API).
    #[arg(long, default_value_t = 2)]
    pub object_writers: usize,
    /// Keys each writer owns.
    #[arg(long, default_value_t = 48)]
    pub keys: usize,
    /// Largest object written (K, M suffixes).
    #[arg(long, default_value = "64K")]
    pub size_max: String,
    /// Size of the OSDs' files.
    #[arg(long, default_value = "256M")]
    pub osd_size: String,
    /// Size of osd.0's file (smaller, so it fills up).
    #[arg(long, default_value = "20M")]
    pub small_osd_size: String,
    /// Faults of osd.1's device (`faulty:` options).
    #[arg(
        long,
        default_value = "read-eio=0.001,read-flip=0.0005,spike=0.005/50ms"
    )]
    pub faults: String,
    /// Shortest time the writers run before a kill, ms.
    #[arg(long, default_value_t = 300)]
    pub run_ms_min: u64,
    /// Longest time the writers run before a kill, ms.
    #[arg(long, default_value_t = 2500)]
    pub run_ms_max: u64,
    /// Parent of the run's directory (removed at the end unless --keep).
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    /// Keep the run's directory (data, the servers' log) at the end.
    #[arg(long)]
    pub keep: bool,
}

const BUCKET: &str = "soak";
const POOL: &str = "soak";
const POOL_SIZE: usize = 3;
const ACCESS_KEY: &str = "SOAKACCESSKEY0000001";
const SECRET_KEY: &str = "soakSecretKey000000000000000000000000001";
/// How long peering and recovery may take after a start before the round fails.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(300);

/// What the run found.
#[derive(Default)]
struct Totals {
    kills: u64,
    rounds_verified: u64,
    keys_verified: u64,
    /// Acknowledged keys that read back absent.
    lost: Vec<String>,
    /// Keys that read back with content no acknowledged or in-flight write had.
    changed: Vec<String>,
    /// Inconsistencies of the scrubs after peering, by kind (and OSD for device faults).
    scrub_errors: BTreeMap<String, u64>,
    /// `unreadable` copies on the faulty OSD: its device's injected read faults.
    scrub_device_faults: u64,
    /// Objects a scrub reported lost.
    scrub_lost: u64,
    /// PGs seen with fewer acting replicas than `size` once settled.
    undersized_pgs: u64,
    /// Slowest settle after a start.
    settle_s_max: f64,
    /// Objects / bytes the last scrub compared.
    scrub_objects_last: u64,
    /// Rounds in which osd.0 was past nearfull when checked.
    small_osd_nearfull_rounds: u64,
    small_osd_used_ratio_max: f64,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let size_max_bytes =
        device::parse_size_bytes(&args.size_max).context("--size-max is not a size like 64K")?;
    if args.run_ms_min > args.run_ms_max || args.keys == 0 {
        bail!("need --run-ms-min <= --run-ms-max and --keys > 0");
    }
    std::fs::create_dir_all(&args.dir)?;
    let temp = tempfile::Builder::new()
        .prefix("strata-soak-")
        .tempdir_in(&args.dir)
        .context("creating the run's directory")?;
    let work = temp.path().to_path_buf();
    let data = work.join("data");
    let config = work.join("cluster.toml");
    std::fs::write(&config, cluster_toml(&args))?;
    let log = work.join("serve.log");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let outcome = soak(&args, size_max_bytes, &data, &config, &log, &runtime);
    if args.keep || outcome.is_err() {
        let kept = temp.keep();
        eprintln!(
            "the run's directory is kept: {} (servers' log: serve.log)",
            kept.display()
        );
    }
    let (totals, ledger, counts, elapsed) = outcome?;
    print_table(&args, &totals, &ledger, &counts, elapsed);
    let failed = !totals.lost.is_empty()
        || !totals.changed.is_empty()
        || !ledger.flipping_reads.is_empty()
        || totals.scrub_errors.values().sum::<u64>() > 0
        || totals.scrub_lost > 0
        || totals.undersized_pgs > 0
        || counts.below_size.load(Ordering::Relaxed) > 0;
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The soak's cluster: 4 hosts of one OSD, osd.0 small, osd.1 faulty. Equal CRUSH weights
/// (not Ceph's size-derived ones), so osd.0 gets as many PGs as its peers and fills first.
fn cluster_toml(args: &Args) -> String {
    let mut text = String::from("scrub_interval_s = 86400\n\n");
    for host in 0..4 {
        text.push_str(&format!("[[host]]\nname = \"host{host}\"\n\n"));
    }
    for osd in 0..4 {
        let size = if osd == 0 {
            &args.small_osd_size
        } else {
            &args.osd_size
        };
        let file = format!("file:osd.{osd}.img:{size}");
        let device = if osd == 1 {
            format!("faulty:{},seed={}:{file}", args.faults, args.seed)
        } else {
            file
        };
        text.push_str(&format!(
            "[[osd]]\nid = {osd}\nhost = \"host{osd}\"\ndevice = \"{device}\"\nweight = 1.0\n\n"
        ));
    }
    text.push_str(&format!(
        "[[pool]]\nname = \"{POOL}\"\nsize = {POOL_SIZE}\npg_num = 16\n"
    ));
    text
}

type Outcome = (Totals, Ledger, Arc<LogCounts>, Duration);

fn soak(
    args: &Args,
    size_max_bytes: u64,
    data: &Path,
    config: &Path,
    log: &Path,
    runtime: &tokio::runtime::Runtime,
) -> Result<Outcome> {
    let started = Instant::now();
    let counts = Arc::new(LogCounts::default());
    let mut rng = rand::rngs::StdRng::seed_from_u64(args.seed);
    let mut totals = Totals::default();
    let shared = Arc::new(Shared {
        ledger: Mutex::new(Ledger::default()),
        stop: AtomicBool::new(false),
    });
    let mut plans = Vec::new();
    {
        let mut ledger = shared.ledger.lock().unwrap_or_else(|e| e.into_inner());
        for (kind, writers) in [
            (Kind::S3, args.s3_writers),
            (Kind::Object, args.object_writers),
        ] {
            for writer in 0..writers {
                let keys = soak_writers::keys(kind, writer, args.keys);
                soak_writers::register(&mut ledger, kind, &keys);
                plans.push((kind, keys));
            }
        }
    }
    let credentials = Arc::new(Credentials {
        access_key: ACCESS_KEY.into(),
        secret_key: SECRET_KEY.into(),
        region: gateway::GatewayConfig::default().region,
    });
    let progress = indicatif::ProgressBar::new(args.kills);
    progress.set_style(
        indicatif::ProgressStyle::with_template(
            "soak {bar:30} {pos}/{len} kills {elapsed_precise} {msg}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let deadline = args
        .duration_s
        .map(|seconds| started + Duration::from_secs_f64(seconds));
    let mut first = true;
    loop {
        let server = ServeProcess::start(data, first.then_some(config), log, &counts)?;
        let admin = server.admin_client()?;
        if first {
            create_user_and_bucket(&admin, &server, &credentials, runtime)?;
            first = false;
        }
        let settle_s = settle(&admin)?;
        totals.settle_s_max = totals.settle_s_max.max(settle_s);
        verify(&server, &admin, &credentials, &shared, &mut totals, runtime)?;
        scrub(&admin, &mut totals)?;
        small_osd_usage(&admin, &mut totals)?;
        totals.rounds_verified += 1;
        let out_of_rounds = totals.kills >= args.kills
            || deadline.is_some_and(|deadline| Instant::now() >= deadline);
        if out_of_rounds {
            server.stop()?;
            break;
        }
        // The writers run for a random time, then the server is killed under them.
        shared.stop.store(false, Ordering::Relaxed);
        let mut tasks = Vec::new();
        for (kind, keys) in &plans {
            let plan = WriterPlan {
                keys: keys.clone(),
                seed: rng.gen(),
                size_max_bytes,
            };
            let target = match kind {
                Kind::S3 => {
                    runtime.block_on(Target::s3(server.s3, Arc::clone(&credentials), BUCKET))?
                }
                Kind::Object => Target::Object {
                    client: admin.clone(),
                    pool: POOL.to_string(),
                },
            };
            tasks.push(runtime.spawn(soak_writers::run_writer(target, plan, Arc::clone(&shared))));
        }
        std::thread::sleep(Duration::from_millis(
            rng.gen_range(args.run_ms_min..=args.run_ms_max),
        ));
        server.kill()?;
        totals.kills += 1;
        shared.stop.store(true, Ordering::Relaxed);
        for task in tasks {
            runtime.block_on(task)?;
        }
        let ledger = shared.ledger.lock().unwrap_or_else(|e| e.into_inner());
        let message = format!(
            "{} acknowledged, {} lost, {} changed, {} refused",
            ledger.acknowledged,
            totals.lost.len(),
            totals.changed.len(),
            ledger.refusals.values().sum::<u64>()
        );
        if progress.is_hidden() && totals.kills % 10 == 0 {
            // No terminal (a log file): a line every 10 kills instead of the bar.
            eprintln!(
                "soak: {} kills in {:.0} s, {message}",
                totals.kills,
                started.elapsed().as_secs_f64()
            );
        }
        progress.set_position(totals.kills);
        progress.set_message(message);
    }
    progress.finish_and_clear();
    let ledger = std::mem::take(&mut *shared.ledger.lock().unwrap_or_else(|e| e.into_inner()));
    Ok((totals, ledger, counts, started.elapsed()))
}

fn create_user_and_bucket(
    admin: &Client,
    server: &ServeProcess,
    credentials: &Arc<Credentials>,
    runtime: &tokio::runtime::Runtime,
) -> Result<()> {
    let body = serde_json::json!({ "uid": "soak", "access_key": credentials.access_key,
        "secret_key": credentials.secret_key });
    admin
        .call("POST", "/api/users", body.to_string().as_bytes())
        .context("creating the soak's S3 user")?;
    runtime.block_on(async {
        let mut connection = S3Connection::connect(server.s3, Arc::clone(credentials)).await?;
        connection.create_bucket(BUCKET).await
    })
}

/// Waits until every PG is `active+clean`; returns how long it took, s.
fn settle(admin: &Client) -> Result<f64> {
    let started = Instant::now();
    loop {
        let pgs: Vec<serde_json::Value> = admin.json("GET", "/api/pg", b"")?;
        let unsettled: Vec<String> = pgs
            .iter()
            .filter(|pg| pg["state"] != "active+clean")
            .map(|pg| format!("{} {}", pg["pg"], pg["state"]))
            .collect();
        if unsettled.is_empty() {
            return Ok(started.elapsed().as_secs_f64());
        }
        if started.elapsed() > SETTLE_TIMEOUT {
            bail!(
                "{} PGs not active+clean after {} s: {}",
                unsettled.len(),
                SETTLE_TIMEOUT.as_secs(),
                unsettled
                    .iter()
                    .take(10)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Reads back every key; what was read becomes the key's acknowledged state.
fn verify(
    server: &ServeProcess,
    admin: &Client,
    credentials: &Arc<Credentials>,
    shared: &Shared,
    totals: &mut Totals,
    runtime: &tokio::runtime::Runtime,
) -> Result<()> {
    let keys: Vec<(Kind, String)> = shared
        .ledger
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .records
        .keys()
        .cloned()
        .collect();
    let mut s3 = runtime.block_on(Target::s3(server.s3, Arc::clone(credentials), BUCKET))?;
    let mut objects = Target::Object {
        client: admin.clone(),
        pool: POOL.to_string(),
    };
    for (kind, key) in keys {
        let target = match kind {
            Kind::S3 => &mut s3,
            Kind::Object => &mut objects,
        };
        let read = match runtime.block_on(target.read(&key)) {
            Ok(state) => state,
            Err(refusal) => bail!(
                "reading back {kind:?} {key} after round {}: {}",
                totals.kills,
                refusal.unwrap_or("the server is gone")
            ),
        };
        let mut ledger = shared.ledger.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(difference) = ledger.check(kind, &key, &read) {
            let what = format!("after kill {}: {difference}", totals.kills);
            eprintln!("{what}");
            if read == State::Absent {
                totals.lost.push(what);
            } else {
                totals.changed.push(what);
            }
        }
        ledger.settle(kind, &key, read);
        totals.keys_verified += 1;
    }
    Ok(())
}

/// Deep scrub of every pool (no repair) and the acting sets; inconsistencies are then
/// repaired so that the next round starts clean.
fn scrub(admin: &Client, totals: &mut Totals) -> Result<()> {
    let report: serde_json::Value = admin.json("POST", "/api/scrub", b"")?;
    totals.scrub_objects_last = report["objects"].as_u64().unwrap_or(0);
    let inconsistencies = report["inconsistencies"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for inconsistency in &inconsistencies {
        let kind = inconsistency["kind"].as_str().unwrap_or("?");
        let osd = inconsistency["osd"].as_i64().unwrap_or(-1);
        if kind == "unreadable" && osd == 1 {
            totals.scrub_device_faults += 1;
        } else {
            eprintln!("after kill {}: scrub: {inconsistency}", totals.kills);
            *totals
                .scrub_errors
                .entry(format!("{kind} on osd.{osd}"))
                .or_default() += 1;
        }
    }
    let lost = report["lost"].as_array().map_or(0, Vec::len) as u64;
    if lost > 0 {
        eprintln!("after kill {}: scrub lost {}", totals.kills, report["lost"]);
    }
    totals.scrub_lost += lost;
    if !inconsistencies.is_empty() {
        admin.call("POST", "/api/scrub?repair=true", b"")?;
    }
    let pgs: Vec<serde_json::Value> = admin.json("GET", "/api/pg", b"")?;
    for pg in &pgs {
        if pg["acting"].as_array().map_or(0, Vec::len) < POOL_SIZE {
            eprintln!("after kill {}: undersized PG {pg}", totals.kills);
            totals.undersized_pgs += 1;
        }
    }
    Ok(())
}

/// Notes how full osd.0 (the small one) is.
fn small_osd_usage(admin: &Client, totals: &mut Totals) -> Result<()> {
    let osds: Vec<serde_json::Value> = admin.json("GET", "/api/osd/df", b"")?;
    for osd in osds {
        if osd["id"].as_i64() != Some(0) {
            continue;
        }
        let total = osd["total_bytes"].as_f64().unwrap_or(0.0);
        let used = total - osd["free_bytes"].as_f64().unwrap_or(total);
        if total > 0.0 {
            let ratio = used / total;
            totals.small_osd_used_ratio_max = totals.small_osd_used_ratio_max.max(ratio);
            if ratio >= 0.85 {
                totals.small_osd_nearfull_rounds += 1;
            }
        }
    }
    Ok(())
}

fn print_table(
    args: &Args,
    totals: &Totals,
    ledger: &Ledger,
    counts: &LogCounts,
    elapsed: Duration,
) {
    let refusals: Vec<String> = ledger
        .refusals
        .iter()
        .map(|(kind, count)| format!("{kind}: {count}"))
        .collect();
    let scrub_errors: u64 = totals.scrub_errors.values().sum();
    let rows: Vec<(&str, String, &str)> = vec![
        (
            "kills (kill -9 of strata serve)",
            totals.kills.to_string(),
            "",
        ),
        (
            "rounds verified (after each start)",
            totals.rounds_verified.to_string(),
            "",
        ),
        (
            "acknowledged writes (PUT, overwrite, DELETE)",
            ledger.acknowledged.to_string(),
            "",
        ),
        ("keys read back", totals.keys_verified.to_string(), ""),
        (
            "acknowledged writes lost",
            totals.lost.len().to_string(),
            "0",
        ),
        (
            "acknowledged writes changed",
            totals.changed.len().to_string(),
            "0",
        ),
        (
            "reads during writes neither acknowledged nor in flight",
            ledger.flipping_reads.len().to_string(),
            "0",
        ),
        ("scrub errors after peering", scrub_errors.to_string(), "0"),
        (
            "objects scrub reported lost",
            totals.scrub_lost.to_string(),
            "0",
        ),
        (
            "writes acknowledged on fewer than size replicas",
            counts.below_size.load(Ordering::Relaxed).to_string(),
            "0",
        ),
        (
            "PGs below size once settled",
            totals.undersized_pgs.to_string(),
            "0",
        ),
        (
            "refusals and failures by kind",
            if refusals.is_empty() {
                "none".to_string()
            } else {
                refusals.join(", ")
            },
            "",
        ),
        (
            "faulty osd.1: unreadable copies scrub found (injected)",
            totals.scrub_device_faults.to_string(),
            "",
        ),
        (
            "small osd.0: rounds past nearfull / highest use",
            format!(
                "{} / {:.0}%",
                totals.small_osd_nearfull_rounds,
                totals.small_osd_used_ratio_max * 100.0
            ),
            "",
        ),
        (
            "slowest settle after a start",
            format!("{:.1} s", totals.settle_s_max),
            "",
        ),
        (
            "objects compared by the last scrub",
            totals.scrub_objects_last.to_string(),
            "",
        ),
        (
            "warnings in the servers' log",
            counts.warnings.load(Ordering::Relaxed).to_string(),
            "",
        ),
        ("wall time", format!("{:.0} s", elapsed.as_secs_f64()), ""),
    ];
    println!(
        "\nsoak: seed {}, {} S3 + {} object writers x {} keys, objects up to {}, OSDs {} (osd.0 {}, osd.1 faulty:{}), pool size {POOL_SIZE}; load average at the end {}",
        args.seed,
        args.s3_writers,
        args.object_writers,
        args.keys,
        args.size_max,
        args.osd_size,
        args.small_osd_size,
        args.faults,
        super::load::load_average()
    );
    println!("| measure | value | must be |");
    println!("|---|---|---|");
    for (measure, value, must) in rows {
        println!("| {measure} | {value} | {must} |");
    }
    for what in totals
        .lost
        .iter()
        .chain(&totals.changed)
        .chain(&ledger.flipping_reads)
        .take(20)
    {
        println!("  {what}");
    }
}
