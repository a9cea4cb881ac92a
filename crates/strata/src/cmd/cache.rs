//! `strata cache ...`: a cached device in the manner of casadm. `start` runs the cache in the
//! foreground, exported over NBD, with a unix control socket; `set`, `stats`, `flush` and
//! `stop` talk to it through that socket (one JSON line each way).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use blockcache::{
    BlockCache, CacheConfig, CacheMode, CleaningConfig, CoreSet, CoreView, IoClasses,
    PromotionConfig, SeqCutoffPolicy, StartMode,
};
use clap::Parser;
use device::{parse_size_bytes, Device, DeviceSpec};
use nbd::{ExportConfig, NbdServer};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

use crate::cmd::nbd::{export_config, listen, runtime, ListenArgs};
use nbd::hosting::{remove_socket_file, SocketFile};

use crate::cmd::cache_control::{self, call, settings_text, since_reset, COUNTERS_BASELINE};

/// Cached devices (Open-CAS style).
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub which: Which,
}

/// Cache commands.
#[derive(clap::Subcommand)]
pub enum Which {
    /// Start (or load) a cache and serve it over NBD in the foreground.
    Start(StartArgs),
    /// Change the running cache's mode and policies.
    Set(SetArgs),
    /// Print the running cache's statistics (casadm -P).
    Stats(StatsArgs),
    /// Flush every dirty line to the core.
    Flush(ControlArgs),
    /// Stop the running cache cleanly (flush, write metadata, exit).
    Stop(ControlArgs),
    /// The running caches: name, control socket, mode and occupancy.
    Ls,
}

/// Which running cache: each has its own control socket (`cache_sockets`).
#[derive(clap::Args, Clone)]
pub struct ControlArgs {
    /// Control socket of the cache (default: the socket of the cache --name names).
    #[arg(long, value_name = "PATH")]
    pub control: Option<PathBuf>,
    /// Name of the cache (`strata cache ls`); default for `start`: the cache device file's
    /// name without its extension; for the other commands: the only running cache.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
}

impl ControlArgs {
    /// The socket of the running cache these arguments name.
    fn socket(&self) -> Result<PathBuf> {
        cache_control::resolve(self.control.as_deref(), self.name.as_deref())
    }
}

/// Run-time parameters, shared by `start` and `set` (unset ones are left as they are).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct Tuning {
    /// Cache mode: wt, wb, wa, wi, wo, pt. Default for a new cache wt; a loaded cache
    /// resumes in the mode it was in.
    #[arg(long)]
    pub mode: Option<String>,
    /// When leaving wb/wo: flush dirty data first (otherwise it stays and is cleaned later).
    #[arg(long)]
    pub flush: bool,
    /// Sequential cut-off policy: always, full, never.
    #[arg(long, value_name = "POLICY")]
    pub seq_cutoff: Option<String>,
    /// Sequential cut-off threshold (e.g. 16K, 1M).
    #[arg(long, value_name = "SIZE")]
    pub seq_cutoff_threshold: Option<String>,
    /// Sequential requests before a stream is promoted to the main stream table.
    #[arg(long, value_name = "N")]
    pub seq_cutoff_promotion_count: Option<u32>,
    /// Cleaning policy: alru, acp, nop (resets its parameters to Open-CAS defaults).
    #[arg(long, value_name = "POLICY")]
    pub cleaning: Option<String>,
    /// Cleaning wake-up interval, ms (alru, acp).
    #[arg(long, value_name = "MS")]
    pub wake_up_ms: Option<u64>,
    /// alru staleness time, ms.
    #[arg(long, value_name = "MS")]
    pub staleness_ms: Option<u64>,
    /// Lines flushed per cleaning round (alru, acp).
    #[arg(long, value_name = "N")]
    pub flush_max_buffers: Option<u32>,
    /// alru activity threshold, ms.
    #[arg(long, value_name = "MS")]
    pub activity_threshold_ms: Option<u64>,
    /// Promotion policy: always, nhit.
    #[arg(long, value_name = "POLICY")]
    pub promotion: Option<String>,
    /// nhit threshold (2..=1000).
    #[arg(long, value_name = "N")]
    pub nhit_threshold: Option<u32>,
    /// nhit trigger occupancy, percent.
    #[arg(long, value_name = "PERCENT")]
    pub nhit_trigger: Option<u32>,
    /// I/O classes, Open-CAS CSV (`IO class id,IO class name,Eviction priority,Allocation`).
    #[arg(long, value_name = "FILE")]
    pub io_class: Option<PathBuf>,
}

/// Tuning flags as the control protocol carries them.
#[derive(clap::Parser)]
#[command(no_binary_name = true)]
struct TuningLine {
    #[command(flatten)]
    tuning: Tuning,
}

/// `strata cache start`.
#[derive(clap::Args)]
pub struct StartArgs {
    /// Cache device: `[faulty:OPTIONS:][PROFILE@]BACKING`, e.g. `nvme@file:/tmp/cache.img:4G`
    /// (see `strata nbd serve --help` for the faulty options).
    #[arg(long, value_name = "SPEC")]
    pub cache: String,
    /// Core device, e.g. `hdd-10k@file:/tmp/core.img:100G`. Repeat it to put several cores
    /// behind one cache (as casadm --add-core): each is exported on its own, as `core1`,
    /// `core2`, ... (the first is also the default export). Load with the same cores in the
    /// same order.
    #[arg(long, value_name = "SPEC", required = true)]
    pub core: Vec<String>,
    /// Cache line size: 4k, 8k, 16k, 32k, 64k (fixed at creation).
    #[arg(long, default_value = "4k")]
    pub line_size: String,
    /// Load the cache found on the cache device.
    #[arg(long, conflicts_with = "force")]
    pub load: bool,
    /// Discard whatever is on the cache device and create a new cache.
    #[arg(long)]
    pub force: bool,
    /// Stop without flushing dirty data (it stays in the cache, loaded next time).
    #[arg(long)]
    pub no_flush_on_stop: bool,
    #[command(flatten)]
    pub tuning: Tuning,
    #[command(flatten)]
    pub listen: ListenArgs,
    #[command(flatten)]
    pub control: ControlArgs,
}

/// `strata cache set`.
#[derive(clap::Args)]
pub struct SetArgs {
    #[command(flatten)]
    pub tuning: Tuning,
    #[command(flatten)]
    pub control: ControlArgs,
}

/// `strata cache stats`.
#[derive(clap::Args)]
pub struct StatsArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Then reset the request, byte and error counters (casadm --reset-counters): later
    /// `stats` count from now (the cache's core statistics table is not reset).
    #[arg(long)]
    pub reset: bool,
    #[command(flatten)]
    pub control: ControlArgs,
}

pub fn run(args: Args) -> Result<ExitCode> {
    match args.which {
        Which::Start(args) => start(args),
        Which::Set(args) => {
            let raw = tuning_to_args(&args.tuning);
            let reply = call(&args.control.socket()?, json!({"op": "set", "args": raw}))?;
            print!("{}", settings_text(&reply["config"]));
            Ok(ExitCode::SUCCESS)
        }
        Which::Stats(args) => {
            let socket = args.control.socket()?;
            let reply = call(&socket, json!({"op": "stats"}))?;
            if args.json {
                println!("{}", serde_json::to_string_pretty(&reply["stats"])?);
            } else {
                print!("{}", reply["text"].as_str().unwrap_or_default());
            }
            if args.reset {
                call(&socket, json!({"op": "reset"}))?;
                eprintln!("cache: counters reset");
            }
            Ok(ExitCode::SUCCESS)
        }
        Which::Flush(args) => {
            call(&args.socket()?, json!({"op": "flush"}))?;
            println!("cache: flushed");
            Ok(ExitCode::SUCCESS)
        }
        Which::Stop(args) => {
            call(&args.socket()?, json!({"op": "stop"}))?;
            println!("cache: stopped");
            Ok(ExitCode::SUCCESS)
        }
        Which::Ls => {
            cache_control::list_caches();
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Turns parsed tuning flags back into arguments (the control protocol carries arguments).
fn tuning_to_args(tuning: &Tuning) -> Vec<String> {
    let mut out = Vec::new();
    let mut push = |flag: &str, value: Option<String>| {
        if let Some(value) = value {
            out.push(format!("--{flag}"));
            out.push(value);
        }
    };
    push("mode", tuning.mode.clone());
    push("seq-cutoff", tuning.seq_cutoff.clone());
    push("seq-cutoff-threshold", tuning.seq_cutoff_threshold.clone());
    push(
        "seq-cutoff-promotion-count",
        tuning.seq_cutoff_promotion_count.map(|v| v.to_string()),
    );
    push("cleaning", tuning.cleaning.clone());
    push("wake-up-ms", tuning.wake_up_ms.map(|v| v.to_string()));
    push("staleness-ms", tuning.staleness_ms.map(|v| v.to_string()));
    push(
        "flush-max-buffers",
        tuning.flush_max_buffers.map(|v| v.to_string()),
    );
    push(
        "activity-threshold-ms",
        tuning.activity_threshold_ms.map(|v| v.to_string()),
    );
    push("promotion", tuning.promotion.clone());
    push(
        "nhit-threshold",
        tuning.nhit_threshold.map(|v| v.to_string()),
    );
    push("nhit-trigger", tuning.nhit_trigger.map(|v| v.to_string()));
    let io_class = tuning.io_class.as_ref().map(|p| {
        std::fs::canonicalize(p)
            .unwrap_or_else(|_| p.clone())
            .display()
            .to_string()
    });
    push("io-class", io_class);
    if tuning.flush {
        out.push("--flush".into());
    }
    out
}

/// Applies tuning to a configuration (pure; the mode is applied by the caller).
fn tune_config(config: &mut CacheConfig, tuning: &Tuning) -> Result<()> {
    if let Some(policy) = &tuning.seq_cutoff {
        config.seq_cutoff.policy = match policy.as_str() {
            "always" => SeqCutoffPolicy::Always,
            "full" => SeqCutoffPolicy::Full,
            "never" => SeqCutoffPolicy::Never,
            other => bail!("unknown seq-cutoff policy {other:?} (always, full, never)"),
        };
    }
    if let Some(size) = &tuning.seq_cutoff_threshold {
        config.seq_cutoff.threshold_bytes =
            parse_size_bytes(size).ok_or_else(|| anyhow!("bad size {size:?}"))?;
    }
    if let Some(count) = tuning.seq_cutoff_promotion_count {
        config.seq_cutoff.promotion_count = count;
    }
    if let Some(policy) = &tuning.cleaning {
        config.cleaning = match policy.as_str() {
            "alru" => CleaningConfig::alru(),
            "acp" => CleaningConfig::acp(),
            "nop" => CleaningConfig::Nop,
            other => bail!("unknown cleaning policy {other:?} (alru, acp, nop)"),
        };
    }
    match &mut config.cleaning {
        CleaningConfig::Alru {
            wake_up_ms,
            staleness_ms,
            flush_max_buffers,
            activity_threshold_ms,
        } => {
            *wake_up_ms = tuning.wake_up_ms.unwrap_or(*wake_up_ms);
            *staleness_ms = tuning.staleness_ms.unwrap_or(*staleness_ms);
            *flush_max_buffers = tuning.flush_max_buffers.unwrap_or(*flush_max_buffers);
            *activity_threshold_ms = tuning
                .activity_threshold_ms
                .unwrap_or(*activity_threshold_ms);
        }
        CleaningConfig::Acp {
            wake_up_ms,
            flush_max_buffers,
        } => {
            *wake_up_ms = tuning.wake_up_ms.unwrap_or(*wake_up_ms);
            *flush_max_buffers = tuning.flush_max_buffers.unwrap_or(*flush_max_buffers);
        }
        CleaningConfig::Nop => {}
    }
    match tuning.promotion.as_deref() {
        Some("always") => config.promotion = PromotionConfig::Always,
        Some("nhit") => {
            config.promotion = PromotionConfig::Nhit {
                threshold: 3,
                trigger_percent: 80,
            }
        }
        Some(other) => bail!("unknown promotion policy {other:?} (always, nhit)"),
        None => {}
    }
    if let PromotionConfig::Nhit {
        threshold,
        trigger_percent,
    } = &mut config.promotion
    {
        *threshold = tuning.nhit_threshold.unwrap_or(*threshold);
        *trigger_percent = tuning.nhit_trigger.unwrap_or(*trigger_percent);
    }
    Ok(())
}

/// Applies a `set` request: everything in it is checked before anything changes, so a
/// request that fails changes nothing.
async fn apply(cache: &BlockCache, tuning: &Tuning) -> Result<()> {
    let mut config = cache.config();
    tune_config(&mut config, tuning)?;
    let new_mode = tuning.mode.as_deref().map(CacheMode::parse).transpose()?;
    let io_classes = match &tuning.io_class {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            Some(IoClasses::parse_csv(&text)?)
        }
        None => None,
    };
    let mode = config.mode;
    cache.set_config(|current| *current = CacheConfig { mode, ..config })?;
    if let Some(classes) = io_classes {
        cache.set_io_classes(classes);
    }
    if let Some(mode) = new_mode {
        cache.set_mode(mode, tuning.flush).await?;
    }
    Ok(())
}

fn start(args: StartArgs) -> Result<ExitCode> {
    let runtime = runtime()?;
    runtime.block_on(async move {
        let cache_spec = DeviceSpec::parse(&args.cache)?;
        let cache_device = cache_spec.open("cache")?;
        let several = args.core.len() > 1;
        if several && !args.listen.export.is_empty() {
            bail!("--export names a single core's export; several cores are exported as core1, core2, ...");
        }
        let mut core_specs = Vec::new();
        let mut core_devices = Vec::new();
        for (index, text) in args.core.iter().enumerate() {
            let spec = DeviceSpec::parse(text)?;
            let name = if several {
                format!("core{}", index + 1)
            } else {
                "core".to_string()
            };
            core_devices.push(spec.open(&name)?);
            core_specs.push(spec);
        }
        let core_set = several
            .then(|| CoreSet::new(core_devices.clone()))
            .transpose()?
            .map(Arc::new);
        let core_device: Arc<dyn Device> = match &core_set {
            Some(set) => Arc::clone(set) as Arc<dyn Device>,
            None => Arc::clone(&core_devices[0]),
        };
        let mut config = CacheConfig {
            line_size_bytes: parse_size_bytes(&args.line_size)
                .ok_or_else(|| anyhow!("bad line size {:?}", args.line_size))?,
            flush_on_stop: !args.no_flush_on_stop,
            ..CacheConfig::default()
        };
        if let Some(mode) = &args.tuning.mode {
            config.mode = CacheMode::parse(mode)?;
        }
        tune_config(&mut config, &args.tuning)?;
        let classes = match &args.tuning.io_class {
            Some(path) => IoClasses::parse_csv(
                &std::fs::read_to_string(path)
                    .with_context(|| format!("reading {}", path.display()))?,
            )?,
            None => IoClasses::default(),
        };
        let start_mode = match (args.load, args.force) {
            (true, _) => StartMode::Load,
            (_, true) => StartMode::Force,
            _ => StartMode::Create,
        };
        // What the superblock records of the cores: their absolute paths (not the emulation
        // profile, which only changes timing), so a load can refuse cores in another order.
        let core_labels = core_specs
            .iter()
            .map(|spec| match &spec.backing {
                device::Backing::File { path, .. } => std::fs::canonicalize(path)
                    .unwrap_or_else(|_| path.clone())
                    .display()
                    .to_string(),
                device::Backing::Memory { size_bytes } => format!("memory:{size_bytes}"),
            })
            .collect();
        let cache = BlockCache::start_labelled(
            cache_device,
            core_device,
            config,
            classes,
            start_mode,
            core_labels,
        )
        .await?;
        if args.tuning.mode.is_none() {
            if let Some(recorded) = cache.recorded_mode() {
                cache.set_mode(recorded, false).await?;
            }
        }
        let stats = cache.cache_stats();
        println!(
            "cache: started mode {} line {} KiB, {} lines ({} occupied, {} dirty)",
            stats.mode,
            stats.line_size_bytes / 1024,
            stats.lines,
            stats.occupied_lines,
            stats.dirty_lines
        );
        let rotational = |spec: &DeviceSpec| {
            spec.profile
                .as_deref()
                .is_some_and(|p| p.starts_with("hdd"))
        };
        let exported: Arc<dyn Device> = cache.clone();
        // Per-core statistics (`strata cache stats`): each core device's own I/O and what
        // its export served; with one core the export is the cache itself.
        let mut cores: Vec<CoreEntry> = core_devices
            .iter()
            .zip(&args.core)
            .map(|(device, label)| CoreEntry {
                label: label.clone(),
                device: Arc::clone(device),
                export: Arc::clone(&exported),
            })
            .collect();
        let server = match &core_set {
            None => NbdServer::new(
                exported,
                export_config(&args.listen, rotational(&core_specs[0])),
            ),
            Some(set) => {
                let mut exports = Vec::new();
                for (index, spec) in core_specs.iter().enumerate() {
                    let name = format!("core{}", index + 1);
                    let (start_bytes, size_bytes) = set.window(index);
                    let view: Arc<dyn Device> = Arc::new(CoreView::new(
                        &name,
                        Arc::clone(&exported),
                        start_bytes,
                        size_bytes,
                    )?);
                    cores[index].export = Arc::clone(&view);
                    println!(
                        "cache: core {} ({}) exported as {name:?}",
                        index + 1,
                        args.core[index]
                    );
                    let config = ExportConfig {
                        name,
                        ..export_config(&args.listen, rotational(spec))
                    };
                    exports.push((view, config));
                }
                NbdServer::with_exports(exports)
            }
        };
        let control_path = match (&args.control.control, &args.control.name) {
            (Some(path), _) => path.clone(),
            (None, name) => {
                cache_control::prepare()?;
                let name = name
                    .clone()
                    .unwrap_or_else(|| cache_control::default_name(&args.cache));
                cache_control::socket_for(&name)
            }
        };
        let (control, _control) = SocketFile::bind(&control_path)?;
        println!("cache: control socket {}", control_path.display());
        let sockets: Vec<PathBuf> = std::iter::once(control_path.clone())
            .chain(args.listen.socket.clone())
            .collect();
        tokio::spawn(control_loop(
            Arc::clone(&cache),
            Arc::new(cores),
            control,
            Arc::new(sockets),
        ));
        // Until SIGTERM or SIGINT (or the listener fails): the cache stops either way.
        let served = listen(server, &args.listen).await;
        cache.stop().await?;
        println!("cache: stopped");
        served
    })?;
    Ok(ExitCode::SUCCESS)
}

/// One core of a running cache, for its statistics.
struct CoreEntry {
    /// The core as given on the command line.
    label: String,
    /// The core device (its own reads and writes: what the cache sent it).
    device: Arc<dyn Device>,
    /// What clients of this core see: its export (a window of the cache), or the cache.
    export: Arc<dyn Device>,
}

/// Per-core statistics: JSON rows and a casadm-like table in 4 KiB blocks.
fn core_stats(cores: &[CoreEntry]) -> (Value, String) {
    use std::fmt::Write as _;
    let mut rows = Vec::new();
    let mut text = String::from(
        "\n Per core | Exported reads | Exported writes | Core reads | Core writes | Units\n",
    );
    for (index, core) in cores.iter().enumerate() {
        let export = core.export.stats();
        let device = core.device.stats();
        rows.push(json!({
            "id": index + 1,
            "core": core.label,
            "exported_read_requests": export.read.ops,
            "exported_read_bytes": export.read.bytes,
            "exported_write_requests": export.write.ops,
            "exported_write_bytes": export.write.bytes,
            "core_read_requests": device.read.ops,
            "core_read_bytes": device.read.bytes,
            "core_write_requests": device.write.ops,
            "core_write_bytes": device.write.bytes,
            "core_errors": device.read.errors + device.write.errors,
        }));
        let _ = writeln!(
            text,
            " core{:<4} | {:>14} | {:>15} | {:>10} | {:>11} | 4KiB blocks ({})",
            index + 1,
            export.read.bytes / 4096,
            export.write.bytes / 4096,
            device.read.bytes / 4096,
            device.write.bytes / 4096,
            core.label
        );
    }
    (Value::Array(rows), text)
}

/// Serves the control socket. `sockets`: the files to remove when a `stop` ends the process.
async fn control_loop(
    cache: Arc<BlockCache>,
    cores: Arc<Vec<CoreEntry>>,
    listener: UnixListener,
    sockets: Arc<Vec<PathBuf>>,
) {
    while let Ok((stream, _)) = listener.accept().await {
        let cache = Arc::clone(&cache);
        let cores = Arc::clone(&cores);
        let sockets = Arc::clone(&sockets);
        tokio::spawn(async move {
            if let Err(error) = control_connection(cache, &cores, stream, &sockets).await {
                eprintln!("cache: control connection: {error:#}");
            }
        });
    }
}

async fn control_connection(
    cache: Arc<BlockCache>,
    cores: &[CoreEntry],
    stream: UnixStream,
    sockets: &[PathBuf],
) -> Result<()> {
    let (reader, mut writer) = stream.into_split();
    let mut lines = BufReader::new(reader).lines();
    while let Some(line) = lines.next_line().await? {
        let request: Value = serde_json::from_str(&line)?;
        let stop = request["op"] == "stop";
        let reply = match control_request(&cache, cores, &request).await {
            Ok(mut reply) => {
                reply["ok"] = json!(true);
                reply
            }
            Err(error) => json!({"ok": false, "error": format!("{error:#}")}),
        };
        let sent = match writer.write_all(format!("{reply}\n").as_bytes()).await {
            Ok(()) => writer.flush().await,
            Err(error) => Err(error),
        };
        if stop && reply["ok"] == true {
            // Stopped is stopped, whether or not the caller is still there to hear it: the
            // superblock says clean, so nothing may be served after it.
            if let Err(error) = &sent {
                eprintln!("cache: the stop request's caller is gone ({error})");
            }
            println!("cache: stopped");
            for socket in sockets {
                remove_socket_file(socket);
            }
            std::process::exit(0);
        }
        sent?;
    }
    Ok(())
}

async fn control_request(
    cache: &BlockCache,
    cores: &[CoreEntry],
    request: &Value,
) -> Result<Value> {
    match request["op"].as_str() {
        Some("stats") => {
            let stats = since_reset(cache.cache_stats());
            let mut json_stats = serde_json::to_value(&stats)?;
            let (rows, table) = core_stats(cores);
            json_stats["cores"] = rows;
            Ok(json!({"stats": json_stats, "text": stats.render_text() + &table}))
        }
        Some("reset") => {
            *COUNTERS_BASELINE.lock().unwrap_or_else(|e| e.into_inner()) =
                Some(cache.cache_stats());
            Ok(json!({}))
        }
        Some("flush") => {
            cache.flush_dirty().await?;
            Ok(json!({}))
        }
        Some("stop") => {
            cache.stop().await?;
            Ok(json!({}))
        }
        Some("set") => {
            let args: Vec<String> = serde_json::from_value(request["args"].clone())?;
            let line = TuningLine::try_parse_from(args)?;
            apply(cache, &line.tuning).await?;
            Ok(json!({"config": serde_json::to_value(cache.config())?}))
        }
        other => bail!("unknown control operation {other:?}"),
    }
}
