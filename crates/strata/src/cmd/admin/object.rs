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
    let data = read_input(&args.file, server::OBJECT_BYTES_MAX)?;
    let client = args.admin.client();
    client.call("PUT", &object_path(&args.pool, &args.object)?, &data)?;
    Ok(ExitCode::SUCCESS)
}

/// The contents of `file` (`-`: standard input), refused when more than `limit` bytes. A
/// regular file's size is checked before anything is read (it used to be read up to the
/// limit first, 64 MiB in memory for nothing); other inputs (a pipe, a device) are read at
/// most one byte beyond the limit, so an endless one ends with the same error.
fn read_input(file: &std::path::Path, limit: usize) -> Result<Vec<u8>> {
    let too_large = |size: Option<u64>| {
        let size = size.map_or_else(String::new, |bytes| {
            format!(" ({})", super::human_bytes(bytes))
        });
        anyhow::anyhow!(
            "{}{size} holds more than {} MiB, the most `strata put` stores in one object (use \
             S3 for larger objects)",
            file.display(),
            limit >> 20
        )
    };
    let mut data = Vec::new();
    if file.as_os_str() == "-" {
        std::io::stdin()
            .take(limit as u64 + 1)
            .read_to_end(&mut data)
            .context("reading standard input")?;
    } else {
        let opened =
            std::fs::File::open(file).with_context(|| format!("reading {}", file.display()))?;
        let metadata = opened
            .metadata()
            .with_context(|| format!("reading {}", file.display()))?;
        if metadata.is_file() && metadata.len() > limit as u64 {
            return Err(too_large(Some(metadata.len())));
        }
        opened
            .take(limit as u64 + 1)
            .read_to_end(&mut data)
            .with_context(|| format!("reading {}", file.display()))?;
    }
    if data.len() > limit {
        return Err(too_large(None));
    }
    Ok(data)
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
        writeln!(out, "{}", escape_name(name.as_str().unwrap_or_default()))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A name as `strata ls` prints it: control characters escaped (`\n`, `\t`, `\u{1b}`) and
/// backslashes doubled, so every name is one line and a terminal shows it as it is. `rados
/// ls` prints names raw; a name holding a newline then reads as two objects.
fn escape_name(name: &str) -> String {
    let mut escaped = String::with_capacity(name.len());
    for c in name.chars() {
        if c == '\\' || c.is_control() {
            escaped.extend(c.escape_default());
        } else {
            escaped.push(c);
        }
    }
    escaped
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
    use super::{escape_name, format_mtime, read_input};

    #[test]
    fn ls_escapes_control_characters_and_backslashes() {
        assert_eq!(escape_name("plain/name é"), "plain/name é");
        assert_eq!(escape_name("two\nlines"), "two\\nlines");
        assert_eq!(escape_name("tab\there\u{1b}[31m"), "tab\\there\\u{1b}[31m");
        assert_eq!(escape_name("back\\slash"), "back\\\\slash");
    }

    /// A file over the limit is refused by its size, before it is read: the error gives the
    /// size, which only the file's metadata tells (the limit read first knew only "more").
    #[test]
    fn put_refuses_a_large_file_by_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big");
        std::fs::File::create(&path)
            .unwrap()
            .set_len(1 << 40)
            .unwrap();
        let error = read_input(&path, 64 << 20).unwrap_err().to_string();
        assert!(
            error.contains("(1.0 TiB) holds more than 64 MiB"),
            "{error}"
        );
        let small = dir.path().join("small");
        std::fs::write(&small, b"abc").unwrap();
        assert_eq!(read_input(&small, 64 << 20).unwrap(), b"abc");
    }

    #[test]
    fn mtime_prints_as_rados_stat_does() {
        assert_eq!(
            format_mtime(1_795_689_820_500_124_241),
            "2026-11-26T10:43:40.500124+0000"
        );
        assert_eq!(format_mtime(0), "1970-01-01T00:00:00.000000+0000");
    }
}
