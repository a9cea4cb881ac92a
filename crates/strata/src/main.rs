//! `strata`: the command-line front end. Each subcommand lives in its own module under `cmd/`,
//! parses its own arguments (clap) and calls into the library crates; nothing here holds logic
//! a library should own.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod cmd;

/// strata: storage for clusters that mix fast (NVMe/SSD) and slow (HDD) devices.
///
/// An embedded cluster of local devices served over S3, with Ceph-compatible CRUSH placement and
/// balancing, an Open-CAS-style block cache served over NBD, and trace-driven cache-policy
/// simulation. Start with `strata serve` (a small cluster in ./strata-data, S3 on :9000), then
/// `strata status` from another shell.
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
    /// Serve the embedded cluster: admin API (/status, /metrics), S3 and every volume over NBD,
    /// until SIGINT/SIGTERM.
    Serve(cmd::serve::Args),
    /// Cluster health, OSDs, pools, PG states and space of a running server (like `ceph -s`).
    Status(cmd::admin::status::Args),
    /// OSDs of a running server: tree, df, down/up/out/in, getmap, pg-upmap-items.
    Osd(cmd::admin::osd::Args),
    /// The running server's balancer: on, off, status, mode, eval, optimize, show, execute
    /// (like `ceph balancer`).
    Balancer(cmd::admin::balancer::Args),
    /// Pools of a running server: create, ls, rm.
    Pool(cmd::admin::pool::Args),
    /// Block volumes of a running server (RBD format 2 images): create, ls, info, resize, rm,
    /// import, export (like rbd); `strata serve` exports each over NBD as POOL/VOLUME.
    Volume(cmd::volume::Args),
    /// S3 users of a running server and their keys: create, ls, info, rm (like radosgw-admin).
    User(cmd::admin::user::Args),
    /// Space of a running server: stored, allocated, data-hole %, metadata.
    Df(cmd::admin::df::Args),
    /// Store a file (or stdin) as an object: `strata put POOL OBJECT FILE|-`.
    Put(cmd::admin::object::PutArgs),
    /// Read an object into a file or stdout: `strata get POOL OBJECT [FILE|-]`.
    Get(cmd::admin::object::GetArgs),
    /// Remove an object: `strata rm POOL OBJECT`.
    Rm(cmd::admin::object::ObjectArgs),
    /// List the objects of a pool: `strata ls POOL` (one per line; control characters and
    /// backslashes escaped, so a name holding a newline stays one line).
    Ls(cmd::admin::object::LsArgs),
    /// Size, mtime, version and placement of an object: `strata stat POOL OBJECT`.
    Stat(cmd::admin::object::ObjectArgs),
    /// The last statistics period: per-OSD load and the most accessed objects.
    Stats(cmd::admin::stats::Args),
    /// Deep-scrub every pool (or one), comparing replicas; `--repair` fixes bad copies.
    Scrub(cmd::admin::scrub::Args),
    /// PGs of a running server: ls, query PGID, mark-unfound-lost revert|delete PGID.
    Pg(cmd::admin::pg::Args),
    /// Find and remove S3 data objects nothing refers to (left by a gateway that died
    /// mid-upload), older than a grace period.
    Gc(cmd::admin::gc::Args),
    /// Test helpers.
    #[command(hide = true)]
    Debug(cmd::debug::Args),
}

/// mimalloc instead of glibc's malloc, as Ceph links tcmalloc: the store's write path allocates
/// and frees small buffers on several threads, and glibc's free lists (`_int_free`,
/// `malloc_consolidate`) held about a fifth of its CPU. Measured with
/// `crates/cluster/examples/bench_cluster.rs --replicas 1 --concurrency 16 --no-durable`,
/// alternating builds: 17.8-22.3 µs of CPU per 4 KiB write against 23.5-34.2 with glibc.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A command that prints and ends (not a server) stops quietly when its reader goes away,
    // as `crushtool ... | head` does, instead of failing on every later write.
    if !matches!(
        cli.command,
        Command::Serve(_) | Command::Nbd(_) | Command::Cache(_)
    ) {
        end_on_closed_pipe();
    } else {
        private_files();
    }
    let result = match cli.command {
        Command::Crush(args) => cmd::crush::run(args),
        Command::Osdmap(args) => cmd::osdmap::run(args),
        Command::Balance(args) => cmd::balance::run(args),
        Command::Analyze(args) => cmd::analyze::run(args),
        Command::Sim(args) => cmd::sim::run(args),
        Command::Bench(args) => cmd::bench::run(args),
        Command::Nbd(args) => cmd::nbd::run(args),
        Command::Cache(args) => cmd::cache::run(args),
        Command::Serve(args) => cmd::serve::run(args),
        Command::Status(args) => cmd::admin::status::run(args),
        Command::Osd(args) => cmd::admin::osd::run(args),
        Command::Balancer(args) => cmd::admin::balancer::run(args),
        Command::Pool(args) => cmd::admin::pool::run(args),
        Command::User(args) => cmd::admin::user::run(args),
        Command::Volume(args) => cmd::volume::run(args),
        Command::Df(args) => cmd::admin::df::run(args),
        Command::Put(args) => cmd::admin::object::put(args),
        Command::Get(args) => cmd::admin::object::get(args),
        Command::Rm(args) => cmd::admin::object::rm(args),
        Command::Ls(args) => cmd::admin::object::ls(args),
        Command::Stat(args) => cmd::admin::object::stat(args),
        Command::Scrub(args) => cmd::admin::scrub::run(args),
        Command::Pg(args) => cmd::admin::pg::run(args),
        Command::Stats(args) => cmd::admin::stats::run(args),
        Command::Gc(args) => cmd::admin::gc::run(args),
        Command::Debug(args) => cmd::debug::run(args),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("strata: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Restores SIGPIPE's default action (the Rust runtime ignores it, so a write to a closed pipe
/// returns an error, which `println!` turns into a panic).
#[allow(unsafe_code)]
fn end_on_closed_pipe() {
    // SAFETY: setting a signal's disposition to its default has no preconditions; this runs
    // before any other thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// The servers create their files (the LSM's files under the data directory, sockets, the
/// admin token, S3 keys) readable by the user running them only, whatever the shell's umask:
/// they hold every object and every S3 user's key (issue 43). Files strata creates by name
/// are `0600` anyway; the umask covers those the libraries it uses create.
fn private_files() {
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
}
