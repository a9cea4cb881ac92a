//! `strata put|get|rm|ls|stat`: objects of a pool, as `rados -p POOL put|get|rm|ls|stat`.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args as ClapArgs;

use super::client::segment;
use super::AdminArgs;

/// Arguments of `strata put`.
#[derive(ClapArgs, Debug)]
pub struct PutArgs {
    #[command(flatten)]
    pub admin: AdminArgs,
    /// Pool.
    pub pool: String,
    /// Object name.
    pub object: String,
    /// File to store, or `-` for standard input.
    pub file: PathBuf,
}

/// Arguments of `strata get`.
#[derive(ClapArgs, Debug)]
pub struct GetArgs {
    #[command(flatten)]
    pub admin: AdminArgs,
    /// Pool.
    pub pool: String,
    /// Object name.
    pub object: String,
    /// File to write, or `-` (the default) for standard output.
    pub file: Option<PathBuf>,
}

/// Arguments of `strata rm` and `strata stat`.
#[derive(ClapArgs, Debug)]
pub struct ObjectArgs {
    #[command(flatten)]
    pub admin: AdminArgs,
    /// Pool.
    pub pool: String,
    /// Object name.
    pub object: String,
}

/// Arguments of `strata ls`.
#[derive(ClapArgs, Debug)]
pub struct LsArgs {
    #[command(flatten)]
    pub admin: AdminArgs,
    /// Pool.
    pub pool: String,
}

/// The API path of an object; a name the cluster would refuse is refused here, with its
/// reason (a name too long for a request line otherwise gets only an HTTP 414).
fn object_path(pool: &str, object: &str) -> Result<String> {
    rados::validate_object_name(object)?;
    Ok(format!(
        "/api/objects/{}/{}",
        segment(pool),
        segment(object)
    ))
}

/// Stores a file as an object (replacing it).
pub fn put(args: PutArgs) -> Result<ExitCode> {
    // Read at most one byte more than the server takes, so an endless input (a device, a
    // pipe) or a huge file ends with a clear error instead of filling memory.
    let limit = server::OBJECT_BYTES_MAX;
    let mut data = Vec::new();
    let read = if args.file.as_os_str() == "-" {
        std::io::stdin()
            .take(limit as u64 + 1)
            .read_to_end(&mut data)
            .context("reading standard input")
    } else {
        std::fs::File::open(&args.file)
            .and_then(|file| file.take(limit as u64 + 1).read_to_end(&mut data))
            .with_context(|| format!("reading {}", args.file.display()))
    };
    read?;
    if data.len() > limit {
        anyhow::bail!(
            "{} holds more than {} MiB, the most `strata put` stores in one object (use S3 \
             for larger objects)",
            args.file.display(),
            limit >> 20
        );
    }
    let client = args.admin.client();
    client.call("PUT", &object_path(&args.pool, &args.object)?, &data)?;
    Ok(ExitCode::SUCCESS)
}

/// Reads an object into a file or standard output.
pub fn get(args: GetArgs) -> Result<ExitCode> {
    let client = args.admin.client();
    let data = client.call("GET", &object_path(&args.pool, &args.object)?, b"")?;
    match args.file {
        Some(file) if file.as_os_str() != "-" => {
            std::fs::write(&file, &data).with_context(|| format!("writing {}", file.display()))?
        }
        _ => {
            let mut out = std::io::stdout().lock();
            out.write_all(&data)?;
            out.flush()?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Removes an object.
pub fn rm(args: ObjectArgs) -> Result<ExitCode> {
    let client = args.admin.client();
    client.call("DELETE", &object_path(&args.pool, &args.object)?, b"")?;
    Ok(ExitCode::SUCCESS)
}

/// Lists the objects of a pool, one per line, sorted.
pub fn ls(args: LsArgs) -> Result<ExitCode> {
    let client = args.admin.client();
    let reply: serde_json::Value =
        client.json("GET", &format!("/api/objects/{}", segment(&args.pool)), b"")?;
    let mut out = std::io::stdout().lock();
    for name in reply["objects"].as_array().into_iter().flatten() {
        writeln!(out, "{}", name.as_str().unwrap_or_default())?;
    }
    Ok(ExitCode::SUCCESS)
}

/// An object's mtime as `rados stat` prints it: UTC, microseconds, `+0000`.
fn format_mtime(mtime_ns: u64) -> String {
    let format = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]+0000"
    );
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(mtime_ns))
        .ok()
        .and_then(|at| at.format(format).ok())
        .unwrap_or_else(|| format!("{mtime_ns} ns"))
}

/// Prints size, mtime, version and placement of an object.
pub fn stat(args: ObjectArgs) -> Result<ExitCode> {
    let client = args.admin.client();
    rados::validate_object_name(&args.object)?;
    let path = format!(
        "/api/stat/{}/{}",
        segment(&args.pool),
        segment(&args.object)
    );
    let reply: serde_json::Value = client.json("GET", &path, b"")?;
    let mtime_ns = reply["mtime_ns"].as_u64().unwrap_or(0);
    println!(
        "{}/{} mtime {}, size {}, version {}, pg {}, up {}, acting {}",
        args.pool,
        args.object,
        format_mtime(mtime_ns),
        reply["size_bytes"],
        reply["version"],
        reply["pg"].as_str().unwrap_or("?"),
        reply["up"],
        reply["acting"]
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::format_mtime;

    #[test]
    fn mtime_prints_as_rados_stat_does() {
        assert_eq!(
            format_mtime(1_795_689_820_500_124_241),
            "2026-11-26T10:43:40.500124+0000"
        );
        assert_eq!(format_mtime(0), "1970-01-01T00:00:00.000000+0000");
    }
}
