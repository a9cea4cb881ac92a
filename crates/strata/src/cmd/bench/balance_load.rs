//! `strata bench balance-load`: seed 000's Figure 9, live. A replicated pool on 6 OSDs on 6
//! hosts, 3 emulated NVMe of CRUSH weight 1 and 3 emulated SATA SSD of weight 2 (capacities
//! 1:2); for each placement (CRUSH only, the `upmap` balancer's plan applied, the `load`
//! balancer's periods run on measured per-PG load until settled) open-loop clients at stepped
//! rates (Zipf-skewed objects, a share of reads, whole-object reads and rewrites) and, per
//! step, each OSD's busy fraction (the emulated device's busy time over the step), their
//! variance across OSDs, the throughput served and p99 latency. Each rebalance's shards and
//! bytes moved and primaries changed are counted from the PG sets before and after.
//!
//! The placements run in turn from a cleared map (every upmap removed and recovered), in
//! alternating order over the rounds; the table gives the medians over rounds. The balancer
//! is the server's own ([`server::balancer::BalancerService`]) on the in-process cluster.
//!
//! ```text
//! strata bench balance-load [--rates 200,400,800,1600] [--step-s 20] [--rounds 2]
//!                           [--objects 512] [--object-size 16K] [--svg FILE]
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use cluster::{Cluster, ClusterConfig, ClusterOptions, HostConfig, OsdConfig, PoolConfig};
use rados::{IoCtx, Rados, WriteOp};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use server::balancer::{BalancerMode, BalancerService};

use super::load;

const POOL: &str = "cache";
const HOSTS: usize = 6;
/// The placements, in the first round's order.
const PLACEMENTS: [&str; 3] = ["crush", "upmap", "load"];

#[derive(clap::Args, Clone)]
pub struct Args {
    /// Offered request rates, ops/s, one step each (from low to saturation).
    #[arg(long, value_delimiter = ',', default_value = "200,400,800,1600,3200")]
    pub rates: Vec<u64>,
    /// Seconds per step.
    #[arg(long, default_value_t = 20)]
    pub step_s: u64,
    /// Rounds (the placements alternate their order); the table gives medians.
    #[arg(long, default_value_t = 2)]
    pub rounds: usize,
    /// Objects in the pool.
    #[arg(long, default_value_t = 512)]
    pub objects: u64,
    /// Bytes per object (reads and writes are whole objects).
    #[arg(long, default_value = "16K")]
    pub object_size: String,
    /// PGs of the pool.
    #[arg(long, default_value_t = 64)]
    pub pg_num: u32,
    /// Zipf exponent over the objects.
    #[arg(long, default_value_t = 0.9)]
    pub zipf: f64,
    /// Share of reads.
    #[arg(long, default_value_t = 0.7)]
    pub read_share: f64,
    /// Operations in flight at most (the open loop waits past this: saturation).
    #[arg(long, default_value_t = 64)]
    pub in_flight_max: usize,
    /// Seconds of load (at the highest rate) per statistics period of the load mode.
    #[arg(long, default_value_t = 5)]
    pub period_s: u64,
    /// The load mode's read and write thresholds (share of an OSD's measured capability;
    /// the server's default is 0.8: below saturation it leaves the OSDs alone).
    #[arg(long, default_value_t = 0.5)]
    pub threshold: f64,
    /// The load mode's hysteresis (targets receive up to (1 - it) x the threshold).
    #[arg(long, default_value_t = 0.2)]
    pub hysteresis: f64,
    /// The load mode's periods at most.
    #[arg(long, default_value_t = 8)]
    pub load_periods_max: usize,
    /// Emulated NVMe OSD size (the SATA SSD OSDs get twice it).
    #[arg(long, default_value = "256M")]
    pub nvme_size: String,
    /// Directory for the cluster's files.
    #[arg(long, default_value = "/tmp")]
    pub dir: PathBuf,
    /// Write the variance against the rate to this SVG file (and the throughput beside it).
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Seed of the clients' generators.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// One step's measurements.
#[derive(Clone, Debug)]
struct Step {
    placement: &'static str,
    rate_ops_per_s: u64,
    served_ops_per_s: f64,
    latency_ms_p99: f64,
    /// Busy fraction per OSD.
    busy: BTreeMap<i32, f64>,
    variance: f64,
}

/// One rebalance (a balancer period that changed the map).
#[derive(Clone, Debug, Default)]
struct Rebalance {
    shards_moved: usize,
    bytes_moved: u64,
    primaries_changed: usize,
}

fn cluster_config(args: &Args) -> Result<ClusterConfig> {
    let nvme_bytes = load::parse_size(&args.nvme_size)?;
    let mut config = ClusterConfig::empty();
    config.scrub_interval_s = 0;
    config.stats_period_s = 0;
    for host in 0..HOSTS {
        let name = format!("host{host}");
        config.hosts.push(HostConfig { name: name.clone() });
        let nvme = host < HOSTS / 2;
        let (profile, bytes, weight) = if nvme {
            ("nvme", nvme_bytes, 1.0)
        } else {
            ("ssd-sata", nvme_bytes * 2, 2.0)
        };
        config.osds.push(OsdConfig {
            id: host as i32,
            host: name,
            device: format!("{profile}@mem:{}M", bytes.div_ceil(1 << 20)),
            size: None,
            class: "ssd".into(),
            weight: Some(weight),
            min_alloc_size: 4096,
            emulation: None,
            // Reads reach the devices: their busy time is the figure.
            data_cache_size: Some("4K".into()),
        });
    }
    config.pools.push(PoolConfig {
        name: POOL.into(),
        size: 3,
        min_size: None,
        pg_num: args.pg_num,
        device_class: None,
        crush_rule: None,
        erasure: None,
    });
    Ok(config)
}

/// Zipf over ranks, ranks scattered over the objects by a seeded permutation.
struct Objects {
    cumulative: Vec<f64>,
    permutation: Vec<u64>,
}

impl Objects {
    fn new(objects: u64, exponent: f64, seed: u64) -> Self {
        let weights: Vec<f64> = (1..=objects)
            .map(|rank| 1.0 / (rank as f64).powf(exponent))
            .collect();
        let total: f64 = weights.iter().sum();
        let mut sum = 0.0;
        let cumulative = weights
            .iter()
            .map(|w| {
                sum += w / total;
                sum
            })
            .collect();
        let mut permutation: Vec<u64> = (0..objects).collect();
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x9e37_79b9);
        for i in (1..permutation.len()).rev() {
            let j = rng.gen_range(0..=i);
            permutation.swap(i, j);
        }
        Self {
            cumulative,
            permutation,
        }
    }

    fn pick(&self, rng: &mut ChaCha8Rng) -> u64 {
        let u: f64 = rng.gen();
        let rank = self.cumulative.partition_point(|&c| c < u);
        self.permutation[rank.min(self.permutation.len() - 1)]
    }
}

fn object_name(object: u64) -> String {
    format!("object-{object}")
}

/// Population variance.
fn variance(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / values.len() as f64
}

fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// Open-loop clients at `rate` ops/s for `duration`: op k is due at k/rate; at most
/// `in_flight_max` in flight (past it the loop waits: the offered rate is not met). Returns
/// the ops served per second and the p99 latency from each op's due time, ms.
async fn drive(
    io: &Arc<dyn IoCtx>,
    objects: &Arc<Objects>,
    body: &Bytes,
    rate: u64,
    duration: Duration,
    args: &Args,
    seed: u64,
) -> Result<(f64, f64)> {
    let semaphore = Arc::new(tokio::sync::Semaphore::new(args.in_flight_max));
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let errors = Arc::new(AtomicU64::new(0));
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let start = tokio::time::Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    let interval = Duration::from_secs_f64(1.0 / rate.max(1) as f64);
    for k in 0u64.. {
        let due = start + interval.mul_f64(k as f64);
        if due - start >= duration {
            break;
        }
        tokio::time::sleep_until(due).await;
        let permit = semaphore.clone().acquire_owned().await?;
        let object = object_name(objects.pick(&mut rng));
        let read = rng.gen::<f64>() < args.read_share;
        let (io, body, latencies, errors) =
            (io.clone(), body.clone(), latencies.clone(), errors.clone());
        tasks.spawn(async move {
            let result = if read {
                io.read_full(&object).await.map(|_| ())
            } else {
                io.operate(&object, WriteOp::new().write_full(body)).await
            };
            match result {
                Ok(()) => latencies
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(due.elapsed().as_secs_f64() * 1e3),
                Err(_) => {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            drop(permit);
        });
    }
    while tasks.join_next().await.is_some() {}
    let elapsed_s = start.elapsed().as_secs_f64();
    let errors = errors.load(Ordering::Relaxed);
    anyhow::ensure!(errors == 0, "{errors} operations failed");
    let mut latencies = std::mem::take(&mut *latencies.lock().unwrap_or_else(|e| e.into_inner()));
    latencies.sort_by(f64::total_cmp);
    let p99 = latencies
        .get((latencies.len() * 99 / 100).min(latencies.len().saturating_sub(1)))
        .copied()
        .unwrap_or(f64::NAN);
    Ok((latencies.len() as f64 / elapsed_s, p99))
}

/// Every PG's up set, by name.
fn up_sets(cluster: &Cluster) -> BTreeMap<String, Vec<i32>> {
    cluster
        .pg_list()
        .into_iter()
        .map(|pg| (pg.pg, pg.up))
        .collect()
}

/// What changed between two PG listings; `pg_bytes` per PG name (one copy).
fn rebalance_between(
    before: &BTreeMap<String, Vec<i32>>,
    after: &BTreeMap<String, Vec<i32>>,
    pg_bytes: &BTreeMap<String, u64>,
) -> Rebalance {
    let mut rebalance = Rebalance::default();
    for (pg, old) in before {
        let Some(new) = after.get(pg) else { continue };
        let arrived = new.iter().filter(|o| !old.contains(o)).count();
        rebalance.shards_moved += arrived;
        rebalance.bytes_moved += arrived as u64 * pg_bytes.get(pg).copied().unwrap_or(0);
        rebalance.primaries_changed += usize::from(old.first() != new.first());
    }
    rebalance
}

/// Removes every upmap of the pool and recovers: CRUSH's own placement.
async fn clear_upmaps(cluster: &Cluster, pool: i64) -> Result<()> {
    let map = cluster.osd_map();
    let pgs: Vec<_> = map.pool(pool).context("the pool")?.pgs().collect();
    cluster.set_pg_upmap_items_many(pgs.iter().map(|&pg| (pg, None)).collect())?;
    cluster.set_pg_upmap_many(pgs.iter().map(|&pg| (pg, None)).collect())?;
    anyhow::ensure!(cluster.recover(200).await?, "recovery did not finish");
    Ok(())
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// One balancer period and the recovery it starts; the rebalance, if it changed anything.
async fn period(
    cluster: &Cluster,
    balancer: &BalancerService,
    pg_bytes: &BTreeMap<String, u64>,
) -> Result<Option<Rebalance>> {
    let before = up_sets(cluster);
    let last = balancer.run_period(now_ms())?;
    anyhow::ensure!(
        last.outcome != "failed",
        "balancer period failed: {}",
        last.detail
    );
    anyhow::ensure!(cluster.recover(200).await?, "recovery did not finish");
    if last.outcome != "applied" {
        return Ok(None);
    }
    Ok(Some(rebalance_between(
        &before,
        &up_sets(cluster),
        pg_bytes,
    )))
}

struct Bench {
    cluster: Arc<Cluster>,
    io: Arc<dyn IoCtx>,
    balancer: BalancerService,
    objects: Arc<Objects>,
    body: Bytes,
    pool: i64,
    pg_bytes: BTreeMap<String, u64>,
    stored_bytes: u64,
    runs: AtomicU64,
}

impl Bench {
    async fn build(dir: &Path, args: &Args) -> Result<Self> {
        let cluster = Arc::new(
            Cluster::create(dir, cluster_config(args)?, ClusterOptions::default())
                .await
                .context("creating the cluster")?,
        );
        let io = cluster.io_ctx(POOL).await?;
        let object_bytes = load::parse_size(&args.object_size)?;
        let body = Bytes::from(vec![0x5a; object_bytes as usize]);
        let next = Arc::new(AtomicU64::new(0));
        let mut writers = tokio::task::JoinSet::new();
        for _ in 0..8 {
            let (io, next, body, objects) = (io.clone(), next.clone(), body.clone(), args.objects);
            writers.spawn(async move {
                loop {
                    let object = next.fetch_add(1, Ordering::SeqCst);
                    if object >= objects {
                        return Ok::<_, anyhow::Error>(());
                    }
                    io.operate(
                        &object_name(object),
                        WriteOp::new().write_full(body.clone()),
                    )
                    .await?;
                }
            });
        }
        while let Some(result) = writers.join_next().await {
            result??;
        }
        let map = cluster.osd_map();
        let pool = map.pool_by_name(POOL).context("the pool")?.id;
        let mut pg_bytes: BTreeMap<String, u64> = BTreeMap::new();
        for object in 0..args.objects {
            let pg = map.object_to_pg(pool, &object_name(object))?;
            *pg_bytes
                .entry(format!("{}.{:x}", pg.pool, pg.seed))
                .or_default() += object_bytes;
        }
        let balancer = BalancerService::open(&cluster)?;
        Ok(Self {
            cluster,
            io,
            balancer,
            objects: Arc::new(Objects::new(args.objects, args.zipf, args.seed)),
            body,
            pool,
            pg_bytes,
            stored_bytes: object_bytes * args.objects * 3,
            runs: AtomicU64::new(0),
        })
    }

    async fn drive(&self, rate: u64, duration: Duration, args: &Args) -> Result<(f64, f64)> {
        let run = self.runs.fetch_add(1, Ordering::SeqCst);
        drive(
            &self.io,
            &self.objects,
            &self.body,
            rate,
            duration,
            args,
            args.seed.wrapping_mul(1_000_003).wrapping_add(run),
        )
        .await
    }

    fn set_mode(&self, mode: BalancerMode) -> Result<()> {
        self.balancer.configure(|settings| {
            settings.mode = mode;
            Ok(())
        })?;
        Ok(())
    }

    /// Brings the cluster to `placement`; its rebalances.
    async fn place(&self, placement: &str, args: &Args) -> Result<Vec<Rebalance>> {
        clear_upmaps(&self.cluster, self.pool).await?;
        let mut rebalances = Vec::new();
        match placement {
            "crush" => {}
            "upmap" => {
                self.set_mode(BalancerMode::Upmap)?;
                for _ in 0..50 {
                    match period(&self.cluster, &self.balancer, &self.pg_bytes).await? {
                        Some(rebalance) => rebalances.push(rebalance),
                        None => break,
                    }
                }
            }
            "load" => {
                self.balancer.configure(|settings| {
                    settings.mode = BalancerMode::Load;
                    settings.load.read_threshold = args.threshold;
                    settings.load.write_threshold = args.threshold;
                    settings.load.hysteresis = args.hysteresis;
                    Ok(())
                })?;
                let top = *args.rates.iter().max().context("no rates")?;
                for _ in 0..args.load_periods_max {
                    self.cluster.take_stats_period();
                    self.drive(top, Duration::from_secs(args.period_s), args)
                        .await?;
                    self.cluster.take_stats_period();
                    match period(&self.cluster, &self.balancer, &self.pg_bytes).await? {
                        Some(rebalance) => rebalances.push(rebalance),
                        None => break,
                    }
                }
            }
            other => anyhow::bail!("unknown placement {other:?}"),
        }
        Ok(rebalances)
    }

    async fn step(&self, placement: &'static str, rate: u64, args: &Args) -> Result<Step> {
        let before = self.cluster.osd_stats();
        let (served_ops_per_s, latency_ms_p99) = self
            .drive(rate, Duration::from_secs(args.step_s), args)
            .await?;
        let after = self.cluster.osd_stats();
        let busy: BTreeMap<i32, f64> = after
            .iter()
            .filter_map(|a| {
                let b = before.iter().find(|b| b.id == a.id)?;
                Some((a.id, a.since(b).busy_fraction()))
            })
            .collect();
        let values: Vec<f64> = busy.values().copied().collect();
        Ok(Step {
            placement,
            rate_ops_per_s: rate,
            served_ops_per_s,
            latency_ms_p99,
            variance: variance(&values),
            busy,
        })
    }
}

fn round_order(round: usize) -> Vec<&'static str> {
    let mut order = PLACEMENTS.to_vec();
    if round % 2 == 1 {
        order.reverse();
    }
    order
}

/// The medians over rounds of each (placement, rate).
struct Summary {
    placement: &'static str,
    rate_ops_per_s: u64,
    served_ops_per_s: f64,
    latency_ms_p99: f64,
    busy_nvme: f64,
    busy_sata: f64,
    variance: f64,
}

fn summarise(steps: &[Step], args: &Args) -> Vec<Summary> {
    let mut rows = Vec::new();
    for placement in PLACEMENTS {
        for &rate in &args.rates {
            let of: Vec<&Step> = steps
                .iter()
                .filter(|s| s.placement == placement && s.rate_ops_per_s == rate)
                .collect();
            let pick =
                |f: &dyn Fn(&Step) -> f64| median(&mut of.iter().map(|s| f(s)).collect::<Vec<_>>());
            let class_mean = |s: &Step, nvme: bool| {
                let values: Vec<f64> = s
                    .busy
                    .iter()
                    .filter(|(&id, _)| (id < HOSTS as i32 / 2) == nvme)
                    .map(|(_, &b)| b)
                    .collect();
                values.iter().sum::<f64>() / values.len().max(1) as f64
            };
            rows.push(Summary {
                placement,
                rate_ops_per_s: rate,
                served_ops_per_s: pick(&|s| s.served_ops_per_s),
                latency_ms_p99: pick(&|s| s.latency_ms_p99),
                busy_nvme: pick(&|s| class_mean(s, true)),
                busy_sata: pick(&|s| class_mean(s, false)),
                variance: pick(&|s| s.variance),
            });
        }
    }
    rows
}

pub fn run(args: Args) -> Result<ExitCode> {
    anyhow::ensure!(!args.rates.is_empty(), "--rates needs at least one rate");
    anyhow::ensure!(
        args.rounds > 0 && args.step_s > 0,
        "--rounds and --step-s at least 1"
    );
    anyhow::ensure!(
        (0.0..=1.0).contains(&args.read_share),
        "--read-share lies in [0, 1]"
    );
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("creating {}", args.dir.display()))?;
    let temp = tempfile::Builder::new()
        .prefix("strata-bench-balance-load-")
        .tempdir_in(&args.dir)?;
    let load_at_start = load::load_average();
    eprintln!(
        "strata bench balance-load: 3 NVMe (weight 1) + 3 SATA SSD (weight 2), pool of {} PGs x 3, {} objects of {}, rates {:?} ops/s, {} s steps, {} rounds; load {load_at_start}",
        args.pg_num, args.objects, args.object_size, args.rates, args.step_s, args.rounds
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let (steps, rebalances) = runtime.block_on(async {
        let cluster_dir = temp.path().join("cluster");
        let bench = Bench::build(&cluster_dir, &args).await?;
        let mut steps = Vec::new();
        let mut rebalances: BTreeMap<&'static str, Vec<Vec<Rebalance>>> = BTreeMap::new();
        for round in 0..args.rounds {
            for placement in round_order(round) {
                let placed = bench.place(placement, &args).await?;
                eprintln!(
                    "   round {round} {placement:<6} {} rebalances, {} shards, {} primaries",
                    placed.len(),
                    placed.iter().map(|r| r.shards_moved).sum::<usize>(),
                    placed.iter().map(|r| r.primaries_changed).sum::<usize>()
                );
                rebalances.entry(placement).or_default().push(placed);
                for &rate in &args.rates {
                    let step = bench.step(placement, rate, &args).await?;
                    eprintln!(
                        "   round {round} {placement:<6} {rate:>6} ops/s offered: {:>7.0} served, p99 {:>7.1} ms, variance {:.4}",
                        step.served_ops_per_s, step.latency_ms_p99, step.variance
                    );
                    steps.push(step);
                }
            }
        }
        let Bench {
            cluster,
            io,
            balancer,
            stored_bytes,
            ..
        } = bench;
        drop((io, balancer));
        super::cluster::shutdown(cluster, &cluster_dir).await?;
        Ok::<_, anyhow::Error>((steps, (rebalances, stored_bytes)))
    })?;
    let (rebalances, stored_bytes) = rebalances;
    let rows = summarise(&steps, &args);
    print(&rows, &rebalances, stored_bytes, &args, &load_at_start);
    if let Some(path) = &args.svg {
        write_svg(&rows, path)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn print(
    rows: &[Summary],
    rebalances: &BTreeMap<&'static str, Vec<Vec<Rebalance>>>,
    stored_bytes: u64,
    args: &Args,
    load_at_start: &str,
) {
    println!(
        "Seed 000 Figure 9 live: per-OSD busy fraction, medians of {} rounds, {} s steps (load at start {load_at_start}, at end {})",
        args.rounds,
        args.step_s,
        load::load_average()
    );
    println!(
        "{:<9} {:>8} {:>9} {:>9} {:>10} {:>10} {:>9}",
        "placement", "offered", "served", "p99 ms", "busy NVMe", "busy SATA", "variance"
    );
    for row in rows {
        println!(
            "{:<9} {:>8} {:>9.0} {:>9.1} {:>10.3} {:>10.3} {:>9.4}",
            row.placement,
            row.rate_ops_per_s,
            row.served_ops_per_s,
            row.latency_ms_p99,
            row.busy_nvme,
            row.busy_sata,
            row.variance
        );
    }
    println!();
    println!(
        "{:<9} {:>11} {:>12} {:>12} {:>16} {:>18}",
        "placement", "rebalances", "shards", "primaries", "max bytes/reb.", "primary-only bytes"
    );
    for placement in PLACEMENTS {
        let runs = rebalances.get(placement).map_or(&[][..], Vec::as_slice);
        let all: Vec<&Rebalance> = runs.iter().flatten().collect();
        let max_bytes = all.iter().map(|r| r.bytes_moved).max().unwrap_or(0);
        let primary_only: u64 = all
            .iter()
            .filter(|r| r.primaries_changed > 0 && r.shards_moved == 0)
            .map(|r| r.bytes_moved)
            .sum();
        let per_round = |f: &dyn Fn(&Rebalance) -> usize| {
            median(
                &mut runs
                    .iter()
                    .map(|run| run.iter().map(f).sum::<usize>() as f64)
                    .collect::<Vec<_>>(),
            )
        };
        println!(
            "{:<9} {:>11.1} {:>12.1} {:>12.1} {:>9} ({:>4.1}%) {:>18}",
            placement,
            median(&mut runs.iter().map(|r| r.len() as f64).collect::<Vec<_>>()),
            per_round(&|r| r.shards_moved),
            per_round(&|r| r.primaries_changed),
            max_bytes,
            max_bytes as f64 * 100.0 / stored_bytes.max(1) as f64,
            primary_only
        );
    }
    let top = args.rates.iter().max().copied().unwrap_or(0);
    let at = |placement: &str| {
        rows.iter()
            .find(|r| r.placement == placement && r.rate_ops_per_s == top)
    };
    if let (Some(crush), Some(upmap), Some(balanced)) = (at("crush"), at("upmap"), at("load")) {
        println!();
        println!(
            "at {top} ops/s offered: variance load/crush {:.3} (goal <= 0.25), upmap/crush {:.3}; served load/crush {:.2}x (goal >= 1.2), upmap/crush {:.2}x",
            balanced.variance / crush.variance.max(1e-12),
            upmap.variance / crush.variance.max(1e-12),
            balanced.served_ops_per_s / crush.served_ops_per_s.max(1e-12),
            upmap.served_ops_per_s / crush.served_ops_per_s.max(1e-12),
        );
    }
    println!("(rebalance bytes: shards arriving on a new OSD x their PG's bytes; % of the pool's {stored_bytes} bytes stored, all copies)");
}

fn write_svg(rows: &[Summary], path: &Path) -> Result<()> {
    let series = |f: &dyn Fn(&Summary) -> f64| -> Vec<(String, Vec<(f64, f64)>)> {
        PLACEMENTS
            .iter()
            .map(|&placement| {
                (
                    placement.to_string(),
                    rows.iter()
                        .filter(|r| r.placement == placement)
                        .map(|r| (r.rate_ops_per_s as f64, f(r)))
                        .collect(),
                )
            })
            .collect()
    };
    let figures = [
        (
            path.to_path_buf(),
            sim::report::svg_lines(
                &series(&|r| r.variance),
                "seed 000 Figure 9 live: variance of per-OSD busy fraction",
                "offered ops/s",
                "variance",
            ),
        ),
        (
            path.with_file_name(format!(
                "{}-served.svg",
                path.file_stem()
                    .map_or("balance-load".into(), |s| s.to_string_lossy())
            )),
            sim::report::svg_lines(
                &series(&|r| r.served_ops_per_s),
                "seed 000 Figure 9 live: ops/s served",
                "offered ops/s",
                "served ops/s",
            ),
        ),
    ];
    for (file, svg) in figures {
        std::fs::write(&file, svg).with_context(|| format!("writing {}", file.display()))?;
        eprintln!("wrote {}", file.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variance_and_median() {
        assert_eq!(variance(&[0.5, 0.5, 0.5]), 0.0);
        assert!((variance(&[0.0, 1.0]) - 0.25).abs() < 1e-12);
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn rebalance_counts_arrivals_and_primaries() {
        let before: BTreeMap<String, Vec<i32>> =
            [("1.0".into(), vec![0, 1, 2]), ("1.1".into(), vec![3, 4, 5])].into();
        let after: BTreeMap<String, Vec<i32>> =
            [("1.0".into(), vec![1, 0, 2]), ("1.1".into(), vec![3, 4, 0])].into();
        let bytes: BTreeMap<String, u64> = [("1.0".into(), 10), ("1.1".into(), 7)].into();
        let r = rebalance_between(&before, &after, &bytes);
        assert_eq!(r.shards_moved, 1);
        assert_eq!(r.bytes_moved, 7);
        assert_eq!(r.primaries_changed, 1);
    }

    #[test]
    fn zipf_prefers_its_first_ranks() {
        let objects = Objects::new(100, 1.0, 3);
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut counts = vec![0u32; 100];
        for _ in 0..10_000 {
            counts[objects.pick(&mut rng) as usize] += 1;
        }
        let hottest = objects.permutation[0] as usize;
        let coldest = objects.permutation[99] as usize;
        assert!(counts[hottest] > 10 * counts[coldest].max(1));
    }
}
