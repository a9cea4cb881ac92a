//! `strata sim ...`: trace-driven cache simulation. A thin layer over the `sim` crate.

use anyhow::{bail, Context, Result};
use policy::hottable::Period;
use sim::generator::ClientWorkload;
use sim::{report, sweep, CacheSize, Format, Mapping, RunOptions, SweepPlan, Timing};
use std::path::PathBuf;
use std::process::ExitCode;

/// Trace-driven simulators.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub which: Which,
}

/// Simulations.
#[derive(clap::Subcommand)]
pub enum Which {
    /// Replay a trace through cache policies (sweeps policies x sizes x H x a).
    Cache(CacheArgs),
    /// Seed 000: hot table hit ratio and throughput against H for four cache sizes, against
    /// Ceph's native tier, on a timed trace (cloudPhysicsIO by default).
    Seed000(Seed000Args),
    /// Seed 003: a ramp of 1..N clients of RBD-like 4 KiB random I/O over 40 MB files.
    Seed003(Seed003Args),
    /// Issue 5's scorecard: `strata` (and any variants) against the best of lru, fifo, arc, 2q,
    /// s3fifo, wtinylfu, sieve and lirs on every trace and cache size, with cache writes / LRU's.
    Compare(CompareArgs),
    /// Convert any supported trace (or seed 003's generator) to strata's own text format
    /// (`# strata-trace v2`, then `time_ms,key,size_bytes,op,object_bytes` lines; version 1
    /// files, without `object_bytes`, still read).
    Convert(ConvertArgs),
}

/// `strata sim convert`.
#[derive(clap::Args)]
pub struct ConvertArgs {
    /// Input trace (omit to write seed 003's generator output with --clients).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Input format (default: guessed from the file name).
    #[arg(long, value_name = "F")]
    pub format: Option<String>,
    /// Block-to-object mapping (see `strata sim cache --help`).
    #[arg(long, value_name = "M")]
    pub mapping: Option<String>,
    /// Clients of seed 003's generator when no --trace is given.
    #[arg(long, default_value_t = 4)]
    pub clients: u32,
    /// Output file (`.zst` compresses).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
}

/// `strata sim compare`.
#[derive(clap::Args)]
#[command(
    after_help = "Example (from the workspace root): strata sim compare --traces ../shared/data/traces --synthetic\n\
With --traces DIR the nine traces of issue 5's table are read from DIR; --trace FILE adds any\n\
other trace. Traces named cloudPhysicsIO and OLTP are marked as tuning traces, the rest are\n\
hold-outs."
)]
pub struct CompareArgs {
    /// Directory holding the shared traces (`cloudphysics/`, `arc/`, `snia/`, `objects/`).
    #[arg(long, value_name = "DIR")]
    pub traces: Option<PathBuf>,
    /// Extra trace files (hold-outs), comma-separated.
    #[arg(long, value_delimiter = ',', value_name = "FILE")]
    pub trace: Vec<PathBuf>,
    /// Also score the synthetic hold-outs from seed 003's generator.
    #[arg(long)]
    pub synthetic: bool,
    /// Also score the late synthetic hold-outs (popularity shifting every 20-300 s; seeds
    /// 41 and 42 were never used to tune; see crates/sim/RESULTS.md).
    #[arg(long)]
    pub late: bool,
    /// Our variants, comma-separated (e.g. `strata,strata:follow=1`).
    #[arg(long, value_delimiter = ',', default_value = "strata")]
    pub policy: Vec<String>,
    /// Cache sizes, comma-separated.
    #[arg(
        long = "cache-size",
        value_delimiter = ',',
        default_value = "1%,5%,10%"
    )]
    pub cache_size: Vec<String>,
    /// Worker threads.
    #[arg(long, default_value_t = 2)]
    pub jobs: usize,
}

/// Output choices shared by the subcommands.
#[derive(clap::Args, Clone)]
pub struct OutputArgs {
    /// Print JSON (one record per run) instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Print CSV instead of a table.
    #[arg(long, conflicts_with = "json")]
    pub csv: bool,
    /// Also write an SVG plot to this file (a name ending in .svg): miss ratio against cache
    /// size; for seed003, estimated requests/s against clients. The file is created before
    /// the runs, so an unwritable path fails at once.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Worker threads for sweeps.
    #[arg(long, default_value_t = 1)]
    pub jobs: usize,
}

/// `strata sim cache`.
#[derive(clap::Args)]
#[command(
    after_help = "Policies: lru fifo arc 2q s3fifo wtinylfu sieve lirs belady ceph (= ceph-seed003) ceph-corrected ceph-fast hottable strata.\n\
Eviction policies accept an admission filter: NAME+second-hit, NAME+bloom, NAME+tinylfu, NAME+prob0.25 (P in [0, 1]).\n\
Only strata takes knobs: strata:small=0.1/threshold=2/adapt=1/epoch=2/decay=0.5/ghost=0.9/budget=0.33\n\
(each within its range; an unknown knob or a value out of range is refused with the range);\n\
Ceph's tier (ceph, ceph-corrected, ceph-fast) takes its cache pool's PG count: ceph:pg_num=128 (default 32).\n\
Cache sizes: 4897 (a whole number of objects), 10% (of unique objects), 64M / 4GiB / 512B (bytes /\n\
mean object size); a decimal without % or a unit, or a size below one object, is refused.\n\
A cache larger than the trace's distinct objects is simulated as given, in memory proportional\n\
to the trace (admission windows, Ceph's target ratios and strata's epochs depend on it).\n\
Formats: cloudphysics-csv vscsi arc msr systor tencent-block tencent-photo object strata\n\
(guessed from the file name; .zst .gz .bz2 .xz are decompressed).\n\
Example: strata sim cache --trace cloudPhysicsIO.csv --policy lru,s3fifo,strata --cache-size 1%,5%,10%"
)]
pub struct CacheArgs {
    /// Trace file.
    #[arg(long, value_name = "FILE")]
    pub trace: PathBuf,
    /// Trace format (default: guessed from the file name).
    #[arg(long, value_name = "F")]
    pub format: Option<String>,
    /// Block-to-object mapping: record, block[:BYTES] (1 block = 1 object) or object[:BYTES]
    /// (RBD-like, default 4M). Default: per format (record for cloudPhysics, block:512 for ARC).
    #[arg(long, value_name = "M")]
    pub mapping: Option<String>,
    /// Policies, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        required = true,
        value_name = "NAME[,NAME...]"
    )]
    pub policy: Vec<String>,
    /// Cache sizes, comma-separated.
    #[arg(
        long = "cache-size",
        value_delimiter = ',',
        required = true,
        value_name = "S[,S...]"
    )]
    pub cache_size: Vec<String>,
    /// Hot table thresholds H (requests per period, finite, >= 0), comma-separated.
    #[arg(
        long = "threshold",
        short = 'H',
        value_delimiter = ',',
        default_value = "0.5"
    )]
    pub threshold: Vec<f64>,
    /// Hot table smoothing constants a (in (0, 1]), comma-separated.
    #[arg(
        long = "smoothing",
        short = 'a',
        value_delimiter = ',',
        default_value = "0.5"
    )]
    pub smoothing: Vec<f64>,
    /// Period: `60s` (virtual time, at least 1 ms) or `10000r` (requests, at least 1). Used by
    /// the hot table and per-period reports.
    #[arg(long, default_value = "60s")]
    pub period: String,
    /// Print per-period metrics, counted from the first request: a table per run after the
    /// table; with --csv, one CSV of a row per run and period instead of a row per run (so the
    /// output stays one CSV); JSON includes them.
    #[arg(long)]
    pub per_period: bool,
    /// Read at most this many requests.
    #[arg(long)]
    pub limit: Option<usize>,
    /// Seed for randomised policies.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// SSD latency per op, microseconds (finite, >= 0).
    #[arg(long, default_value_t = 100.0)]
    pub ssd_op_us: f64,
    /// HDD latency per op, microseconds (finite, >= 0).
    #[arg(long, default_value_t = 8000.0)]
    pub hdd_op_us: f64,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `strata sim seed000`.
#[derive(clap::Args)]
pub struct Seed000Args {
    /// Timed trace (default: the shared cloudPhysicsIO.csv beside the project, else the
    /// project's fixture; looked up from the current directory, then from the project root).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Thresholds H.
    #[arg(
        long,
        short = 'H',
        value_delimiter = ',',
        default_value = "0,0.1,0.2,0.5,1,2,4,8,18"
    )]
    pub threshold: Vec<f64>,
    /// Smoothing constants a.
    #[arg(long, short = 'a', value_delimiter = ',', default_value = "0.5")]
    pub smoothing: Vec<f64>,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `strata sim seed003`.
#[derive(clap::Args)]
pub struct Seed003Args {
    /// Largest number of clients (at least 1).
    #[arg(long, default_value_t = 14)]
    pub max_clients: u32,
    /// Requests per client (at least 1).
    #[arg(long, default_value_t = 20_000)]
    pub requests_per_client: u64,
    /// Cache pool size in 4 MiB objects, at least 1 (default: a quarter of 14 clients' data).
    #[arg(long)]
    pub cache_objects: Option<u64>,
    /// Policies (`hdd-only` = no cache).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "hdd-only,ceph,ceph-fast,hottable,strata,lru"
    )]
    pub policy: Vec<String>,
    /// Generator seed.
    #[arg(long, default_value_t = 3)]
    pub seed: u64,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(args: Args) -> Result<ExitCode> {
    match args.which {
        Which::Cache(a) => run_cache(a),
        Which::Seed000(a) => run_seed000(a),
        Which::Seed003(a) => run_seed003(a),
        Which::Compare(a) => run_compare(a),
        Which::Convert(a) => run_convert(a),
    }
}

/// `60s` or `10000r`. A period must be finite and at least 1 ms, or at least 1 request: `0s`,
/// `0r`, `NaNs` and `-5s` used to become 1 ms or 1 request silently.
fn parse_period(text: &str) -> Result<Period> {
    let text = text.trim();
    if let Some(s) = text.strip_suffix('s') {
        let seconds: f64 = s.parse().with_context(|| format!("bad period `{text}`"))?;
        let ms = seconds * 1000.0;
        if !(ms.is_finite() && ms >= 1.0 && ms < u64::MAX as f64) {
            bail!("period `{text}`: a time period must be a finite number of seconds >= 0.001");
        }
        return Ok(Period::Millis(ms as u64));
    }
    if let Some(r) = text.strip_suffix('r') {
        let requests = r
            .parse::<u64>()
            .with_context(|| format!("bad period `{text}`: a whole number of requests"))?;
        if requests == 0 {
            bail!("period `{text}`: a period of requests must be at least 1r");
        }
        return Ok(Period::Requests(requests));
    }
    bail!("period `{text}` must end in s (seconds) or r (requests)")
}

/// The `--plot` file, created before any run so that a bad path fails at once (it used to fail
/// after the whole sweep); only `.svg` names are accepted (a `.png` got SVG text).
fn plot_file(output: &OutputArgs) -> Result<Option<(PathBuf, std::fs::File)>> {
    let Some(path) = &output.plot else {
        return Ok(None);
    };
    if !path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("svg"))
    {
        bail!(
            "--plot writes SVG: give a file name ending in .svg (got {})",
            path.display()
        );
    }
    let file = std::fs::File::create(path)
        .with_context(|| format!("cannot write the plot to {}", path.display()))?;
    Ok(Some((path.clone(), file)))
}

fn write_plot(plot: Option<(PathBuf, std::fs::File)>, svg: impl FnOnce() -> String) -> Result<()> {
    if let Some((path, mut file)) = plot {
        use std::io::Write as _;
        file.write_all(svg().as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

fn emit(
    results: &[sim::RunResult],
    output: &OutputArgs,
    plot: Option<(PathBuf, std::fs::File)>,
    title: &str,
    per_period: bool,
) -> Result<()> {
    if output.json {
        println!("{}", report::json(results)?);
    } else if output.csv && per_period {
        print!("{}", report::periods_csv(results));
    } else if output.csv {
        print!("{}", report::csv(results));
    } else {
        print!("{}", report::table(results));
    }
    write_plot(plot, || {
        report::svg(results, title, "miss ratio", |r| r.miss_ratio)
    })
}

fn run_cache(args: CacheArgs) -> Result<ExitCode> {
    let format = args.format.as_deref().map(Format::parse).transpose()?;
    let mapping = args.mapping.as_deref().map(Mapping::parse).transpose()?;
    let sizes = args
        .cache_size
        .iter()
        .map(|s| CacheSize::parse(s))
        .collect::<Result<Vec<_>>>()?;
    let period = parse_period(&args.period)?;
    let timing = Timing {
        ssd_op_us: args.ssd_op_us,
        hdd_op_us: args.hdd_op_us,
        ..Timing::default()
    };
    timing.check()?;
    let plot = plot_file(&args.output)?;
    let trace = sim::load(&args.trace, format, mapping, args.limit)?;
    if trace.requests.is_empty() {
        bail!("{}: no requests", args.trace.display());
    }
    let plan = SweepPlan {
        policies: args.policy.clone(),
        sizes,
        thresholds: args.threshold.clone(),
        smoothings: args.smoothing.clone(),
        period,
        options: RunOptions {
            timing,
            period: args.per_period.then_some(period),
        },
        seed: args.seed,
        jobs: args.output.jobs,
        progress: true,
    };
    let results = sweep::run(&trace, &plan)?;
    emit(
        &results,
        &args.output,
        plot,
        &format!("{}: miss ratio", trace.name),
        args.per_period,
    )?;
    if args.per_period && !args.output.json && !args.output.csv {
        for r in &results {
            println!(
                "\n{} @ {} objects: period requests miss_ratio cache_writes hdd_ops rps",
                r.policy, r.cache_size_objects
            );
            for p in &r.periods {
                println!(
                    "{:>6} {:>8} {:>10.4} {:>12} {:>7} {:>8.0}",
                    p.period, p.requests, p.miss_ratio, p.cache_writes, p.hdd_ops, p.throughput_rps
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The first of `relative` paths that exists, looked up from the current directory, then from
/// the project root (the workspace this binary was built from), so that the defaults work
/// from anywhere on the machine that built it; otherwise an error naming where it looked.
pub(crate) fn default_trace(relative: &[&str]) -> Result<PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let candidates: Vec<PathBuf> = relative
        .iter()
        .flat_map(|r| [PathBuf::from(r), root.join(r)])
        .collect();
    match candidates.iter().find(|p| p.exists()) {
        Some(path) => Ok(path.clone()),
        None => bail!(
            "no default trace found (looked for {}); pass --trace FILE",
            candidates
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn run_seed000(args: Seed000Args) -> Result<ExitCode> {
    let path = match args.trace {
        Some(path) => path,
        None => default_trace(&[
            "../shared/data/traces/cloudphysics/cloudPhysicsIO.csv",
            "fixtures/traces/cloudPhysicsIO.csv.zst",
        ])?,
    };
    let plot = plot_file(&args.output)?;
    let trace = sim::load(&path, None, None, None)?;
    if !trace.timed {
        bail!(
            "seed 000 needs timestamps (one-minute periods); {} has none",
            path.display()
        );
    }
    let plan = sim::experiments::seed000_plan(args.threshold, args.smoothing, args.output.jobs);
    let results = sweep::run(&trace, &plan)?;
    emit(
        &results,
        &args.output,
        plot,
        &format!("seed 000 on {}", trace.name),
        false,
    )?;
    Ok(ExitCode::SUCCESS)
}

fn run_seed003(args: Seed003Args) -> Result<ExitCode> {
    let base = ClientWorkload {
        requests_per_client: args.requests_per_client,
        seed: args.seed,
        ..ClientWorkload::default()
    };
    let cache_objects = args
        .cache_objects
        .unwrap_or(base.objects_per_client() * 14 / 4);
    let plot = plot_file(&args.output)?;
    let points = sim::experiments::seed003_ramp(
        &base,
        args.max_clients,
        cache_objects,
        &args.policy,
        args.output.jobs,
    )?;
    write_plot(plot, || {
        sim::experiments::ramp_svg(
            &points,
            &format!("seed 003: {cache_objects} cache objects of 4 MiB"),
        )
    })?;
    if args.output.json {
        println!("{}", serde_json_string(&points)?);
        return Ok(ExitCode::SUCCESS);
    }
    if args.output.csv {
        print!("{}", sim::experiments::ramp_csv(&points));
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "cache pool: {cache_objects} objects of 4 MiB; {} requests per client",
        args.requests_per_client
    );
    println!(
        "{:>7}  {:>10}  {:>8}  {:>12}  {:>10}  {:>10}",
        "clients", "policy", "miss", "cache_writes", "hdd_busy_s", "est_iops"
    );
    for p in &points {
        println!(
            "{:>7}  {:>10}  {:>8.4}  {:>12}  {:>10.1}  {:>10.0}",
            p.clients,
            p.run.policy,
            p.run.miss_ratio,
            p.run.cache_writes,
            p.run.hdd_busy_s,
            p.run.throughput_rps
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn serde_json_string(points: &[sim::experiments::RampPoint]) -> Result<String> {
    sim::report::json_value(points)
}

fn run_compare(args: CompareArgs) -> Result<ExitCode> {
    let mut paths = Vec::new();
    if let Some(dir) = &args.traces {
        for (path, _) in sim::compare::SHARED_TRACES {
            let full = dir.join(path);
            if !full.exists() {
                bail!(
                    "{} not found (is --traces the shared traces directory?)",
                    full.display()
                );
            }
            paths.push(full);
        }
    }
    paths.extend(args.trace.iter().cloned());
    if paths.is_empty() && !args.synthetic && !args.late {
        bail!("nothing to compare: give --traces DIR, --trace FILE, --synthetic or --late");
    }
    let sizes = args
        .cache_size
        .iter()
        .map(|s| CacheSize::parse(s))
        .collect::<Result<Vec<_>>>()?;
    let mut cells = sim::compare::run_all(&paths, args.synthetic, &sizes, &args.policy, args.jobs)?;
    if args.late {
        for trace in sim::compare::late_synthetic_traces() {
            cells.extend(sim::compare::cells(
                &trace,
                &sizes,
                &args.policy,
                false,
                args.jobs,
            )?);
        }
    }
    print!("{}", sim::compare::report(&cells));
    Ok(ExitCode::SUCCESS)
}

fn run_convert(args: ConvertArgs) -> Result<ExitCode> {
    let trace = match &args.trace {
        Some(path) => {
            let format = args.format.as_deref().map(Format::parse).transpose()?;
            let mapping = args.mapping.as_deref().map(Mapping::parse).transpose()?;
            sim::load(path, format, mapping, None)?
        }
        None => ClientWorkload {
            clients: args.clients,
            ..ClientWorkload::default()
        }
        .generate(),
    };
    let file = std::fs::File::create(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    if args.out.extension().is_some_and(|e| e == "zst") {
        let mut encoder = zstd_writer(file)?;
        sim::trace::write_strata(&trace, &mut encoder)?;
        encoder.finish()?;
    } else {
        sim::trace::write_strata(&trace, std::io::BufWriter::new(file))?;
    }
    eprintln!(
        "wrote {} requests, {} objects to {}",
        trace.requests.len(),
        trace.unique,
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn zstd_writer(file: std::fs::File) -> Result<sim::trace::ZstdWriter> {
    sim::trace::zstd_writer(file)
}
