//! `strata volume create|ls|info|resize|rm|import|export`: block volumes on the running
//! server's cluster, in the spirit of `rbd`. A volume is named `NAME` in the pool `--pool`
//! (default `rbd`, as rbd's), or `POOL/NAME`. Create, ls, info, resize and rm go through the
//! admin API; import and export stream a raw image through the server's NBD socket
//! (`<data>/nbd.sock` unless `--nbd-socket` says otherwise), several connections at once.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args as ClapArgs, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::Value;

use super::admin::client::segment;
use super::admin::{human_bytes, AdminArgs};

/// Bytes moved per NBD request by import and export (one 4 MiB object by default).
const CHUNK_BYTES: u64 = 4 << 20;
/// The granularity at which import and export skip zeros (a chunk's all-zero blocks of this
/// size are not written: holes of the volume or the file).
const SPARSE_BYTES: usize = 64 << 10;
/// NBD connections import and export use at once.
const CONNECTIONS: u64 = 4;

/// Arguments of `strata volume`.
#[derive(ClapArgs, Debug)]
pub struct Args {
    #[command(flatten)]
    pub admin: AdminArgs,
    /// Pool of the volumes named without one. Default `rbd` (for `ls`: every pool).
    #[arg(long, global = true)]
    pub pool: Option<String>,
    /// The server's NBD socket (import, export). Default: `nbd.sock` in --data.
    #[arg(long, global = true, value_name = "PATH")]
    pub nbd_socket: Option<PathBuf>,
    #[command(subcommand)]
    pub command: VolumeCommand,
}

/// What to do with volumes.
#[derive(Subcommand, Debug)]
pub enum VolumeCommand {
    /// Create an empty (sparse) volume.
    Create {
        /// `NAME` or `POOL/NAME` (1..=95 bytes, no '/' or '@' in NAME).
        name: String,
        /// Size: bytes or with a binary unit (`10G`, `512M`); a multiple of 512.
        #[arg(long, short = 's')]
        size: String,
        /// Objects of 2^ORDER bytes (12..=25); 22 = 4 MiB, as rbd's default.
        #[arg(long, default_value_t = volume::ORDER_DEFAULT)]
        order: u8,
        /// Keep the data objects in this pool (an erasure-coded one, say), the header and
        /// directory in the volume's own pool, as `rbd create --data-pool`.
        #[arg(long, value_name = "POOL")]
        data_pool: Option<String>,
    },
    /// List volumes (of --pool, else of every pool).
    Ls,
    /// Describe a volume: size, objects, id, lease.
    Info {
        /// `NAME` or `POOL/NAME`.
        name: String,
    },
    /// Grow or shrink a volume (shrinking drops the data past the new end).
    Resize {
        /// `NAME` or `POOL/NAME`.
        name: String,
        /// New size (`20G`).
        #[arg(long, short = 's')]
        size: String,
        /// Confirms a shrink; without it a smaller size is refused.
        #[arg(long)]
        allow_shrink: bool,
    },
    /// Remove a volume and its data.
    Rm {
        /// `NAME` or `POOL/NAME`.
        name: String,
    },
    /// Create a volume from a raw image file (its size rounded up to 512 bytes); zero
    /// chunks are not written, so the volume stays sparse.
    Import {
        /// The raw image.
        file: PathBuf,
        /// `NAME` or `POOL/NAME` of the new volume.
        name: String,
        /// Objects of 2^ORDER bytes.
        #[arg(long, default_value_t = volume::ORDER_DEFAULT)]
        order: u8,
        /// Keep the data objects in this pool (see `create --data-pool`).
        #[arg(long, value_name = "POOL")]
        data_pool: Option<String>,
    },
    /// Write a volume to a raw image file; zero chunks (holes) become holes of the file.
    Export {
        /// `NAME` or `POOL/NAME`.
        name: String,
        /// The file to write (replaced).
        file: PathBuf,
    },
}

/// Runs `strata volume`.
pub fn run(args: Args) -> Result<ExitCode> {
    let client = args.admin.client();
    let resolve = |name: &str| -> (String, String) {
        match name.split_once('/') {
            Some((pool, name)) => (pool.to_string(), name.to_string()),
            None => (
                args.pool
                    .clone()
                    .unwrap_or_else(|| server::volumes::VOLUME_POOL_DEFAULT.into()),
                name.to_string(),
            ),
        }
    };
    let socket = args
        .nbd_socket
        .clone()
        .unwrap_or_else(|| args.admin.data.join(server::NBD_SOCKET_FILE));
    match &args.command {
        VolumeCommand::Create {
            name,
            size,
            order,
            data_pool,
        } => {
            let (pool, name) = resolve(name);
            let info = create(
                &client,
                &pool,
                &name,
                parse_size(size)?,
                *order,
                data_pool.as_deref(),
            )?;
            println!(
                "volume {pool}/{name} created: {} ({} objects of {}{})",
                human_bytes(info["size_bytes"].as_u64().unwrap_or(0)),
                info["object_count"],
                human_bytes(info["object_size_bytes"].as_u64().unwrap_or(0)),
                match info["data_pool"].as_str() {
                    Some(data_pool) => format!(", data in pool {data_pool}"),
                    None => String::new(),
                }
            );
        }
        VolumeCommand::Ls => {
            let path = match &args.pool {
                Some(pool) => format!("/api/volumes/{}", segment(pool)),
                None => "/api/volumes".to_string(),
            };
            let volumes: Vec<Value> = client.json("GET", &path, b"")?;
            println!(
                "{:<16} {:<32} {:>12} {:>6}  LEASE",
                "POOL", "NAME", "SIZE", "ORDER"
            );
            for volume in volumes {
                let lease = volume["lease"]["holder"].as_str().unwrap_or("-");
                println!(
                    "{:<16} {:<32} {:>12} {:>6}  {lease}",
                    volume["pool"].as_str().unwrap_or("?"),
                    volume["name"].as_str().unwrap_or("?"),
                    human_bytes(volume["size_bytes"].as_u64().unwrap_or(0)),
                    volume["order"].as_u64().unwrap_or(0),
                );
            }
        }
        VolumeCommand::Info { name } => {
            let (pool, name) = resolve(name);
            let info: Value = client.json("GET", &volume_path(&pool, &name), b"")?;
            print_info(&info);
        }
        VolumeCommand::Resize {
            name,
            size,
            allow_shrink,
        } => {
            let (pool, name) = resolve(name);
            let size_bytes = parse_size(size)?;
            let current: Value = client.json("GET", &volume_path(&pool, &name), b"")?;
            if size_bytes < current["size_bytes"].as_u64().unwrap_or(0) && !allow_shrink {
                bail!(
                    "{size} is smaller than {pool}/{name} ({}): shrinking drops the data past \
                     the new end; nothing was changed. Repeat with --allow-shrink to shrink",
                    human_bytes(current["size_bytes"].as_u64().unwrap_or(0))
                );
            }
            let request = serde_json::json!({ "size_bytes": size_bytes });
            let info: Value = client.json(
                "POST",
                &format!("{}/resize", volume_path(&pool, &name)),
                request.to_string().as_bytes(),
            )?;
            println!(
                "volume {pool}/{name} resized to {}",
                human_bytes(info["size_bytes"].as_u64().unwrap_or(0))
            );
        }
        VolumeCommand::Rm { name } => {
            let (pool, name) = resolve(name);
            client.call("DELETE", &volume_path(&pool, &name), b"")?;
            println!("volume {pool}/{name} removed");
        }
        VolumeCommand::Import {
            file,
            name,
            order,
            data_pool,
        } => {
            let (pool, name) = resolve(name);
            let length_bytes = std::fs::metadata(file)
                .with_context(|| format!("reading {}", file.display()))?
                .len();
            if length_bytes == 0 {
                bail!(
                    "{} is empty: a volume needs at least 512 bytes",
                    file.display()
                );
            }
            create(
                &client,
                &pool,
                &name,
                length_bytes.next_multiple_of(512),
                *order,
                data_pool.as_deref(),
            )?;
            let written = runtime()?.block_on(import(
                file,
                &socket,
                &format!("{pool}/{name}"),
                length_bytes,
            ))?;
            println!(
                "imported {} into {pool}/{name} ({} written, the rest left as holes)",
                file.display(),
                human_bytes(written)
            );
        }
        VolumeCommand::Export { name, file } => {
            let (pool, name) = resolve(name);
            let (size_bytes, stored) =
                runtime()?.block_on(export(&socket, &format!("{pool}/{name}"), file))?;
            println!(
                "exported {pool}/{name} ({}) to {} ({} of data, the rest holes)",
                human_bytes(size_bytes),
                file.display(),
                human_bytes(stored)
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The runs of `buffer` made of [`SPARSE_BYTES`] blocks that are not all zeros, as
/// `(start, end)` offsets; zero blocks between them are left out.
fn data_runs(buffer: &[u8]) -> Vec<(usize, usize)> {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for (index, block) in buffer.chunks(SPARSE_BYTES).enumerate() {
        if block.iter().all(|&byte| byte == 0) {
            continue;
        }
        let start = index * SPARSE_BYTES;
        let end = start + block.len();
        match runs.last_mut() {
            Some(last) if last.1 == start => last.1 = end,
            _ => runs.push((start, end)),
        }
    }
    runs
}

fn volume_path(pool: &str, name: &str) -> String {
    format!("/api/volumes/{}/{}", segment(pool), segment(name))
}

fn parse_size(text: &str) -> Result<u64> {
    device::parse_size_bytes(text)
        .ok_or_else(|| anyhow!("size {text:?}: give bytes or a number with K, M, G or T"))
}

fn create(
    client: &super::admin::client::Client,
    pool: &str,
    name: &str,
    size_bytes: u64,
    order: u8,
    data_pool: Option<&str>,
) -> Result<Value> {
    let request = serde_json::json!({
        "name": name, "size_bytes": size_bytes, "order": order, "data_pool": data_pool,
    });
    client
        .json(
            "POST",
            &format!("/api/volumes/{}", segment(pool)),
            request.to_string().as_bytes(),
        )
        .map_err(|error| {
            if error.to_string().contains("HTTP 404") {
                error.context(format!(
                    "pool {pool} not found: create it first (strata pool create {pool} --size 3)"
                ))
            } else {
                error
            }
        })
}

fn print_info(info: &Value) {
    let size_bytes = info["size_bytes"].as_u64().unwrap_or(0);
    println!(
        "volume '{}/{}':",
        info["pool"].as_str().unwrap_or("?"),
        info["name"].as_str().unwrap_or("?")
    );
    println!(
        "\tsize {} ({size_bytes} bytes) in {} objects",
        human_bytes(size_bytes),
        info["object_count"]
    );
    println!(
        "\torder {} ({} objects)",
        info["order"],
        human_bytes(info["object_size_bytes"].as_u64().unwrap_or(0))
    );
    println!("\tid: {}", info["id"].as_str().unwrap_or("?"));
    println!(
        "\tblock_name_prefix: {}",
        info["object_prefix"].as_str().unwrap_or("?")
    );
    if let Some(data_pool) = info["data_pool"].as_str() {
        println!("\tdata_pool: {data_pool}");
    }
    println!("\tformat: 2");
    println!(
        "\tfeatures: {}",
        features(info["features"].as_u64().unwrap_or(0))
    );
    match info["lease"]["holder"].as_str() {
        Some(holder) => println!(
            "\twriter lease: {holder} (until {} ns)",
            info["lease"]["expires_ns"]
        ),
        None => println!("\twriter lease: none"),
    }
}

fn features(bits: u64) -> String {
    let names: Vec<&str> = volume::format::FEATURE_NAMES
        .iter()
        .filter(|(bit, _)| bits & bit != 0)
        .map(|(_, name)| *name)
        .collect();
    names.join(", ")
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")
}

fn progress(length_bytes: u64, verb: &str) -> ProgressBar {
    let bar = ProgressBar::new(length_bytes);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{verb} [{{bar:40}}] {{bytes}}/{{total_bytes}} {{bytes_per_sec}} eta {{eta}}"
        ))
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar
}

async fn connect(socket: &Path, export: &str) -> Result<nbd::NbdClient<tokio::net::UnixStream>> {
    nbd::NbdClient::connect_unix(socket, export)
        .await
        .with_context(|| {
            format!(
                "connecting to export {export} on {} (is `strata serve` running with that data directory?)",
                socket.display()
            )
        })
}

/// Writes the non-zero chunks of `file` to the volume; bytes written.
async fn import(file: &Path, socket: &Path, export: &str, length_bytes: u64) -> Result<u64> {
    let source = Arc::new(File::open(file).with_context(|| format!("opening {}", file.display()))?);
    let bar = progress(length_bytes, "importing");
    let next = Arc::new(AtomicU64::new(0));
    let written = Arc::new(AtomicU64::new(0));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..CONNECTIONS {
        let mut client = connect(socket, export).await?;
        let (source, next, written, bar) =
            (source.clone(), next.clone(), written.clone(), bar.clone());
        workers.spawn(async move {
            loop {
                let offset = next.fetch_add(CHUNK_BYTES, Ordering::Relaxed);
                if offset >= length_bytes {
                    break;
                }
                let chunk = CHUNK_BYTES.min(length_bytes - offset);
                // The last chunk is padded with zeros to the volume's 512-byte blocks.
                let mut buffer = vec![0u8; chunk.next_multiple_of(512) as usize];
                source
                    .read_exact_at(&mut buffer[..chunk as usize], offset)
                    .with_context(|| format!("reading {chunk} bytes at {offset}"))?;
                for (start, end) in data_runs(&buffer) {
                    let at = offset + start as u64;
                    client
                        .write(at, &buffer[start..end], false)
                        .await
                        .with_context(|| format!("writing {} bytes at {at}", end - start))?;
                    written.fetch_add((end - start) as u64, Ordering::Relaxed);
                }
                bar.inc(chunk);
            }
            client.disconnect().await.context("disconnecting")?;
            anyhow::Ok(())
        });
    }
    while let Some(result) = workers.join_next().await {
        result.context("an import worker")??;
    }
    bar.finish();
    Ok(written.load(Ordering::Relaxed))
}

/// Reads the volume into `file`, leaving zero chunks as holes; (volume size, bytes stored).
async fn export(socket: &Path, export: &str, file: &Path) -> Result<(u64, u64)> {
    let first = connect(socket, export).await?;
    let size_bytes = first.info().size_bytes;
    let target = File::create(file).with_context(|| format!("creating {}", file.display()))?;
    target
        .set_len(size_bytes)
        .with_context(|| format!("sizing {}", file.display()))?;
    let target = Arc::new(target);
    let bar = progress(size_bytes, "exporting");
    let next = Arc::new(AtomicU64::new(0));
    let stored = Arc::new(AtomicU64::new(0));
    let mut workers = tokio::task::JoinSet::new();
    let mut clients = vec![first];
    for _ in 1..CONNECTIONS {
        clients.push(connect(socket, export).await?);
    }
    for mut client in clients {
        let (target, next, stored, bar) =
            (target.clone(), next.clone(), stored.clone(), bar.clone());
        workers.spawn(async move {
            let mut buffer = vec![0u8; CHUNK_BYTES as usize];
            loop {
                let offset = next.fetch_add(CHUNK_BYTES, Ordering::Relaxed);
                if offset >= size_bytes {
                    break;
                }
                let chunk = CHUNK_BYTES.min(size_bytes - offset) as usize;
                client
                    .read(offset, &mut buffer[..chunk])
                    .await
                    .with_context(|| format!("reading {chunk} bytes at {offset}"))?;
                for (start, end) in data_runs(&buffer[..chunk]) {
                    let at = offset + start as u64;
                    target
                        .write_all_at(&buffer[start..end], at)
                        .with_context(|| format!("writing {} bytes at {at}", end - start))?;
                    stored.fetch_add((end - start) as u64, Ordering::Relaxed);
                }
                bar.inc(chunk as u64);
            }
            client.disconnect().await.context("disconnecting")?;
            anyhow::Ok(())
        });
    }
    while let Some(result) = workers.join_next().await {
        result.context("an export worker")??;
    }
    target
        .sync_all()
        .with_context(|| format!("syncing {}", file.display()))?;
    bar.finish();
    Ok((size_bytes, stored.load(Ordering::Relaxed)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_blocks_are_left_out() {
        let mut buffer = vec![0u8; 4 * SPARSE_BYTES + 100];
        assert!(data_runs(&buffer).is_empty());
        buffer[SPARSE_BYTES + 5] = 1;
        buffer[2 * SPARSE_BYTES] = 1;
        buffer[4 * SPARSE_BYTES + 99] = 1;
        assert_eq!(
            data_runs(&buffer),
            vec![
                (SPARSE_BYTES, 3 * SPARSE_BYTES),
                (4 * SPARSE_BYTES, 4 * SPARSE_BYTES + 100)
            ]
        );
    }
}
