//! `strata bench rss` (issue 43): the memory of a real `strata serve` under S3 load. C
//! clients (one keep-alive connection each, the SigV4 client of `strata bench s3`) PUT,
//! overwrite, GET and DELETE objects of the given sizes over a bounded key space for
//! `--duration-s`, while the server's resident memory (`VmRSS` of /proc/PID/status) is
//! sampled every `--sample-s`. The run prints RSS over time (a table, and an SVG chart with
//! `--svg`) beside the bound derived from the server's configured caches and the in-flight
//! data of C requests (ARCHITECTURE.md, "Memory"), and says whether it stayed under.
//!
//! ```text
//! strata bench rss [--clients 64] [--duration-s 600] [--sizes 4K,64K,1M] [--svg rss.svg]
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use rand::{Rng, SeedableRng};

use super::s3_client::{sha256_hex, Credentials, S3Connection, EMPTY_SHA256_HEX};
use super::serve_process::{LogCounts, ServeProcess};

/// Resident memory of `strata serve` under a C-client S3 load.
#[derive(clap::Args, Clone)]
pub struct Args {
    /// Concurrent S3 clients (one connection each).
    #[arg(long, default_value_t = 64)]
    pub clients: usize,
    /// Seconds of load.
    #[arg(long, default_value_t = 600.0)]
    pub duration_s: f64,
    /// Seconds between RSS samples.
    #[arg(long, default_value_t = 5.0)]
    pub sample_s: f64,
    /// Object sizes (K, M suffixes), one picked at random per PUT.
    #[arg(long, value_delimiter = ',', default_value = "4K,64K,1M")]
    pub sizes: Vec<String>,
    /// Distinct keys per size (overwrites beyond them).
    #[arg(long, default_value_t = 1000)]
    pub keys: u64,
    /// OSDs (one per host; the S3 pools have min(OSDs, 3) replicas).
    #[arg(long, default_value_t = 3)]
    pub osds: u32,
    /// Size of each OSD's sparse file: it bounds the disk the run uses (past nearfull the
    /// gateway collects overwritten data early).
    #[arg(long, default_value = "2G")]
    pub osd_size: String,
    /// Seed of the operations and payloads.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Parent of the run's directory (removed at the end).
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    /// Also draw RSS over time as an SVG chart in this file.
    #[arg(long)]
    pub svg: Option<PathBuf>,
}

const BUCKET: &str = "rss";
const ACCESS_KEY: &str = "RSSACCESSKEY00000001";
const SECRET_KEY: &str = "rssSecretKey0000000000000000000000000001";
const MIB: f64 = 1024.0 * 1024.0;

/// The bound, in bytes, and how it is made up (ARCHITECTURE.md, "Memory").
pub struct Bound {
    pub bytes: u64,
    pub parts: Vec<(String, u64)>,
}

/// The memory `strata serve` may hold: per OSD its store's caches (metadata database page
/// cache, onode cache, data cache) and the database's memtables (the active and one sealed
/// one being flushed, per keyspace), plus the data of `clients` requests in flight (the
/// request body, one transaction copy per replica, the answer of a read), plus a fixed
/// base (code, runtime and thread stacks, the map, the gateway's tables).
pub fn bound(osds: u32, replicas: u32, clients: usize, object_bytes_max: u64) -> Bound {
    let store = store::StoreConfig::default();
    let memtables_bytes: u64 = 2 * ((1 << 20) + (16 << 20) + (16 << 20));
    let per_osd = store.metadata_cache_bytes as u64
        + store.onode_cache_bytes as u64
        + store.data_cache_bytes as u64
        + memtables_bytes;
    let in_flight = clients as u64 * object_bytes_max * (2 + u64::from(replicas));
    let base: u64 = 128 << 20;
    let parts = vec![
        (
            format!(
                "{osds} OSDs x (metadata cache {} + onode cache {} + data cache {} + memtables {}) MiB",
                store.metadata_cache_bytes >> 20,
                store.onode_cache_bytes >> 20,
                store.data_cache_bytes >> 20,
                memtables_bytes >> 20
            ),
            u64::from(osds) * per_osd,
        ),
        (
            format!(
                "{clients} requests in flight x {} MiB x (body + {replicas} replica copies + answer)",
                object_bytes_max as f64 / MIB
            ),
            in_flight,
        ),
        ("base (code, runtime, stacks, maps)".to_string(), base),
    ];
    Bound {
        bytes: parts.iter().map(|(_, bytes)| bytes).sum(),
        parts,
    }
}

/// `VmRSS` of a process, bytes.
fn rss_bytes(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|line| line.starts_with("VmRSS:"))
        .context("no VmRSS line")?;
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .context("no VmRSS value")?
        .parse()?;
    Ok(kib * 1024)
}

/// Operation counts of the run.
#[derive(Default)]
struct Counts {
    puts: AtomicU64,
    gets: AtomicU64,
    deletes: AtomicU64,
    /// Answers other than 2xx and 404, by status: 507 (full) is expected once the OSDs'
    /// files fill with overwritten data awaiting GC.
    errors_by_status: std::sync::Mutex<std::collections::BTreeMap<u16, u64>>,
    /// Failed connections.
    connection_errors: AtomicU64,
}

impl Counts {
    fn errors(&self) -> String {
        let by_status = self
            .errors_by_status
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let mut parts: Vec<String> = by_status
            .iter()
            .map(|(status, count)| format!("{count} x {status}"))
            .collect();
        parts.push(format!(
            "{} failed connections",
            self.connection_errors.load(Ordering::Relaxed)
        ));
        parts.join(", ")
    }
}

pub fn run(args: Args) -> Result<ExitCode> {
    let sizes: Vec<u64> = args
        .sizes
        .iter()
        .map(|text| {
            device::parse_size_bytes(text)
                .filter(|&bytes| bytes > 0)
                .with_context(|| format!("--sizes: {text:?} is not a size like 4K or 1M"))
        })
        .collect::<Result<_>>()?;
    if sizes.is_empty() || args.clients == 0 || args.osds == 0 {
        bail!("need --sizes, --clients > 0 and --osds > 0");
    }
    let object_bytes_max = sizes.iter().copied().max().unwrap_or(0);
    let replicas = args.osds.min(3);
    let bound = bound(args.osds, replicas, args.clients, object_bytes_max);
    std::fs::create_dir_all(&args.dir)?;
    let temp = tempfile::Builder::new()
        .prefix("strata-rss-")
        .tempdir_in(&args.dir)?;
    let config_path = temp.path().join("cluster.toml");
    std::fs::write(
        &config_path,
        super::cluster::cluster_config(args.osds, &args.osd_size, None, None).to_toml(),
    )?;
    let counts_log = Arc::new(LogCounts::default());
    let server = ServeProcess::start(
        &temp.path().join("data"),
        Some(&config_path),
        &temp.path().join("serve.log"),
        &counts_log,
    )?;
    let admin = server.admin_client()?;
    let body = serde_json::json!({ "uid": "rss", "access_key": ACCESS_KEY,
        "secret_key": SECRET_KEY });
    admin.call("POST", "/api/users", body.to_string().as_bytes())?;
    let credentials = Arc::new(Credentials {
        access_key: ACCESS_KEY.into(),
        secret_key: SECRET_KEY.into(),
        region: gateway::GatewayConfig::default().region,
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let pid = server.pid();
    let idle_bytes = rss_bytes(pid)?;
    let counts = Arc::new(Counts::default());
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    runtime.block_on(async {
        let mut first = S3Connection::connect(server.s3, Arc::clone(&credentials)).await?;
        first.create_bucket(BUCKET).await
    })?;
    for client in 0..args.clients {
        let connection =
            runtime.block_on(S3Connection::connect(server.s3, Arc::clone(&credentials)))?;
        let seed = args.seed ^ ((client as u64) << 32);
        tasks.push(runtime.spawn(client_loop(
            connection,
            seed,
            sizes.clone(),
            args.keys,
            Arc::clone(&counts),
            Arc::clone(&stop),
        )));
    }
    let started = Instant::now();
    let mut samples: Vec<(f64, u64)> = vec![(0.0, idle_bytes)];
    let progress = indicatif::ProgressBar::new(args.duration_s.ceil() as u64);
    progress.set_style(
        indicatif::ProgressStyle::with_template("rss {bar:30} {pos}/{len} s {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    while started.elapsed().as_secs_f64() < args.duration_s {
        std::thread::sleep(Duration::from_secs_f64(args.sample_s));
        let bytes = rss_bytes(pid).context("strata serve is gone")?;
        let at = started.elapsed().as_secs_f64();
        samples.push((at, bytes));
        progress.set_position(at as u64);
        progress.set_message(format!("RSS {:.0} MiB", bytes as f64 / MIB));
    }
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        runtime.block_on(task)?;
    }
    let elapsed_s = started.elapsed().as_secs_f64();
    samples.push((elapsed_s, rss_bytes(pid)?));
    progress.finish_and_clear();
    server.stop()?;
    let peak = samples.iter().map(|(_, bytes)| *bytes).max().unwrap_or(0);
    println!(
        "\nrss: strata serve, {} OSDs of {} (pools of {replicas}), {} S3 clients, sizes {}, {} keys per size, {:.0} s; load average at the end {}",
        args.osds,
        args.osd_size,
        args.clients,
        args.sizes.join(","),
        args.keys,
        elapsed_s,
        super::load::load_average()
    );
    println!(
        "operations: {} PUT, {} GET, {} DELETE ({:.0} ops/s); errors: {}",
        counts.puts.load(Ordering::Relaxed),
        counts.gets.load(Ordering::Relaxed),
        counts.deletes.load(Ordering::Relaxed),
        (counts.puts.load(Ordering::Relaxed)
            + counts.gets.load(Ordering::Relaxed)
            + counts.deletes.load(Ordering::Relaxed)) as f64
            / elapsed_s,
        counts.errors()
    );
    println!("| time (s) | RSS (MiB) |");
    println!("|---|---|");
    // At most about 40 rows: every k-th sample, and the last.
    let step = samples.len().div_ceil(40).max(1);
    for (index, (at, bytes)) in samples.iter().enumerate() {
        if index % step == 0 || index + 1 == samples.len() {
            println!("| {at:.0} | {:.0} |", *bytes as f64 / MIB);
        }
    }
    println!("bound: {:.0} MiB =", bound.bytes as f64 / MIB);
    for (what, bytes) in &bound.parts {
        println!("  {:.0} MiB: {what}", *bytes as f64 / MIB);
    }
    let under = peak <= bound.bytes;
    println!(
        "peak RSS {:.0} MiB ({:.0}% of the bound): {}",
        peak as f64 / MIB,
        peak as f64 * 100.0 / bound.bytes as f64,
        if under {
            "stayed under the bound"
        } else {
            "ABOVE THE BOUND"
        }
    );
    if let Some(path) = &args.svg {
        std::fs::write(path, chart(&samples, bound.bytes))
            .with_context(|| format!("writing {}", path.display()))?;
        println!("chart: {}", path.display());
    }
    Ok(if under {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// One client: PUT (45%), GET (45%) and DELETE (10%) of random keys until `stop`.
async fn client_loop(
    mut connection: S3Connection,
    seed: u64,
    sizes: Vec<u64>,
    keys: u64,
    counts: Arc<Counts>,
    stop: Arc<AtomicBool>,
) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    // One payload per size, shared by every PUT of it (the server still receives and stores
    // every byte; the client spends no CPU generating data).
    let payloads: Vec<(Bytes, String)> = sizes
        .iter()
        .map(|&size| {
            let mut bytes = vec![0u8; size as usize];
            rng.fill(&mut bytes[..]);
            let hash = sha256_hex(&bytes);
            (Bytes::from(bytes), hash)
        })
        .collect();
    while !stop.load(Ordering::Relaxed) {
        let which = rng.gen_range(0..sizes.len());
        let path = format!("/{BUCKET}/k{}-{}", sizes[which], rng.gen_range(0..keys));
        let roll: f64 = rng.gen();
        let (method, body, hash, counter) = if roll < 0.45 {
            let (body, hash) = &payloads[which];
            ("PUT", body.clone(), hash.as_str(), &counts.puts)
        } else if roll < 0.9 {
            ("GET", Bytes::new(), EMPTY_SHA256_HEX, &counts.gets)
        } else {
            ("DELETE", Bytes::new(), EMPTY_SHA256_HEX, &counts.deletes)
        };
        match connection.request(method, &path, body, hash).await {
            // A GET of a key not written yet (404) is an answer too.
            Ok((status, _)) if (200..300).contains(&status) || status == 404 => {
                counter.fetch_add(1, Ordering::Relaxed);
            }
            Ok((status, _)) => {
                *counts
                    .errors_by_status
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .entry(status)
                    .or_default() += 1;
            }
            Err(_) => {
                counts.connection_errors.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// RSS over time as an SVG line chart, with the bound as a dashed line.
fn chart(samples: &[(f64, u64)], bound_bytes: u64) -> String {
    let (width, height, margin) = (720.0, 360.0, 50.0);
    let t_max = samples.last().map_or(1.0, |(at, _)| at.max(1.0));
    let y_max = (bound_bytes as f64 / MIB) * 1.1;
    let x = |at: f64| margin + at / t_max * (width - 2.0 * margin);
    let y = |mib: f64| height - margin - mib / y_max * (height - 2.0 * margin);
    let points: Vec<String> = samples
        .iter()
        .map(|(at, bytes)| format!("{:.1},{:.1}", x(*at), y(*bytes as f64 / MIB)))
        .collect();
    let bound_mib = bound_bytes as f64 / MIB;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{margin}\" y=\"20\">strata serve RSS (MiB) over time (s)</text>\n\
         <line x1=\"{margin}\" y1=\"{b}\" x2=\"{x2}\" y2=\"{b}\" stroke=\"red\" stroke-dasharray=\"6,4\"/>\n\
         <text x=\"{x2}\" y=\"{bt}\" text-anchor=\"end\" fill=\"red\">bound {bound_mib:.0} MiB</text>\n\
         <line x1=\"{margin}\" y1=\"{y0}\" x2=\"{x2}\" y2=\"{y0}\" stroke=\"black\"/>\n\
         <line x1=\"{margin}\" y1=\"{y0}\" x2=\"{margin}\" y2=\"{margin}\" stroke=\"black\"/>\n",
        b = y(bound_mib),
        bt = y(bound_mib) - 4.0,
        x2 = width - margin,
        y0 = height - margin,
    );
    for tick in 0..=4 {
        let mib = y_max * f64::from(tick) / 4.0;
        let at = t_max * f64::from(tick) / 4.0;
        svg.push_str(&format!(
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{mib:.0}</text>\n\
             <text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{at:.0}</text>\n",
            margin - 4.0,
            y(mib) + 4.0,
            x(at),
            height - margin + 16.0
        ));
    }
    svg.push_str(&format!(
        "<polyline fill=\"none\" stroke=\"steelblue\" stroke-width=\"2\" points=\"{}\"/>\n</svg>\n",
        points.join(" ")
    ));
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_adds_its_parts() {
        let bound = bound(3, 3, 64, 1 << 20);
        assert_eq!(
            bound.bytes,
            bound.parts.iter().map(|(_, bytes)| bytes).sum::<u64>()
        );
        // 64 requests of 1 MiB: body, 3 replica copies and an answer each.
        assert_eq!(bound.parts[1].1, (64 * 5) << 20);
    }

    #[test]
    fn the_chart_draws_every_sample_and_the_bound() {
        let svg = chart(&[(0.0, 100 << 20), (5.0, 200 << 20)], 1 << 30);
        assert!(svg.contains("bound 1024 MiB"));
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert!(svg.trim_end().ends_with("</svg>"));
    }
}
