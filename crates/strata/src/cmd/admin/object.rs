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

/// Stores a file as an object (replacing it). Up to one piece (the S3 gateway's chunk,
/// 4 MiB) is one object; a larger input is striped as the gateway stripes
/// (`server::striped`): the pieces after the first are written as they are read, then the
/// head with the manifest, so any size streams through a bounded buffer.
pub fn put(args: PutArgs) -> Result<ExitCode> {
    let piece_bytes = gateway::GatewayConfig::default().chunk_size_bytes;
    let client = args.admin.client();
    let path = object_path(&args.pool, &args.object)?;
    let mut input = open_input(&args.file)?;
    let head = read_piece(&mut input, piece_bytes, &args.file)?;
    let mut piece = read_piece(&mut input, piece_bytes, &args.file)?;
    if piece.is_empty() {
        client.call("PUT", &path, &head)?;
        return Ok(ExitCode::SUCCESS);
    }
    let tag = piece_tag();
    let mut size_bytes = head.len() as u64;
    let mut pieces = 0u64;
    while !piece.is_empty() {
        pieces += 1;
        size_bytes += piece.len() as u64;
        let name = server::striped::piece_name(&args.object, &tag, pieces);
        client
            .call("PUT", &object_path(&args.pool, &name)?, &piece)
            .with_context(|| {
                format!(
                    "writing piece {pieces} of {} ({name}); pieces written so far stay until \
                     `strata rm` of each",
                    args.object
                )
            })?;
        piece = read_piece(&mut input, piece_bytes, &args.file)?;
    }
    let query =
        format!("?tag={tag}&size_bytes={size_bytes}&piece_bytes={piece_bytes}&pieces={pieces}");
    client.call("PUT", &format!("{path}{query}"), &head)?;
    Ok(ExitCode::SUCCESS)
}

/// The input: a file, or standard input for `-`.
fn open_input(file: &std::path::Path) -> Result<Box<dyn Read>> {
    if file.as_os_str() == "-" {
        return Ok(Box::new(std::io::stdin().lock()));
    }
    let opened =
        std::fs::File::open(file).with_context(|| format!("reading {}", file.display()))?;
    Ok(Box::new(opened))
}

/// The next `piece_bytes` of the input (fewer at its end, none past it).
fn read_piece(input: &mut dyn Read, piece_bytes: usize, file: &std::path::Path) -> Result<Vec<u8>> {
    let mut piece = Vec::with_capacity(piece_bytes);
    input
        .take(piece_bytes as u64)
        .read_to_end(&mut piece)
        .with_context(|| format!("reading {}", file.display()))?;
    Ok(piece)
}

/// A new version's tag: letters and digits from the clock and the process id, unique per
/// put of this machine (a reader of the old version keeps reading the old tag's pieces).
fn piece_tag() -> String {
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos());
    format!("{now_ns:x}{:x}", std::process::id())
}

/// Reads an object into a file or standard output; a striped one piece by piece.
pub fn get(args: GetArgs) -> Result<ExitCode> {
    let client = args.admin.client();
    let path = object_path(&args.pool, &args.object)?;
    let stat: serde_json::Value = client.json(
        "GET",
        &format!(
            "/api/stat/{}/{}",
            segment(&args.pool),
            segment(&args.object)
        ),
        b"",
    )?;
    let manifest: Option<server::striped::Manifest> =
        serde_json::from_value(stat["striped"].clone()).unwrap_or(None);
    let mut out: Box<dyn Write> = match &args.file {
        Some(file) if file.as_os_str() != "-" => Box::new(std::io::BufWriter::new(
            std::fs::File::create(file).with_context(|| format!("writing {}", file.display()))?,
        )),
        _ => Box::new(std::io::stdout().lock()),
    };
    let head = client.call("GET", &path, b"")?;
    out.write_all(&head)?;
    if let Some(manifest) = manifest {
        let mut written = head.len() as u64;
        for number in 1..=manifest.pieces {
            let name = server::striped::piece_name(&args.object, &manifest.tag, number);
            let piece = client
                .call("GET", &object_path(&args.pool, &name)?, b"")
                .with_context(|| {
                    format!(
                        "reading piece {number} of {} (replaced meanwhile?)",
                        args.object
                    )
                })?;
            out.write_all(&piece)?;
            written += piece.len() as u64;
        }
        if written != manifest.size_bytes {
            anyhow::bail!(
                "{}: read {written} bytes of the {} its manifest names (replaced meanwhile?)",
                args.object,
                manifest.size_bytes
            );
        }
    }
    out.flush()?;
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
    // A striped object's size is its manifest's (the head holds the first piece).
    let size = match reply["striped"].as_object() {
        Some(manifest) => format!(
            "{} (striped: the head and {} pieces)",
            manifest["size_bytes"], manifest["pieces"]
        ),
        None => reply["size_bytes"].to_string(),
    };
    println!(
        "{}/{} mtime {}, size {size}, version {}, pg {}, up {}, acting {}",
        args.pool,
        args.object,
        format_mtime(mtime_ns),
        reply["version"],
        reply["pg"].as_str().unwrap_or("?"),
        reply["up"],
        reply["acting"]
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::{escape_name, format_mtime, piece_tag, read_piece};

    #[test]
    fn ls_escapes_control_characters_and_backslashes() {
        assert_eq!(escape_name("plain/name é"), "plain/name é");
        assert_eq!(escape_name("two\nlines"), "two\\nlines");
        assert_eq!(escape_name("tab\there\u{1b}[31m"), "tab\\there\\u{1b}[31m");
        assert_eq!(escape_name("back\\slash"), "back\\\\slash");
    }

    /// Pieces are read whole up to the end of the input, whatever its size (`put` used to
    /// refuse more than 64 MiB).
    #[test]
    fn put_reads_its_input_piece_by_piece() {
        let data: Vec<u8> = (0..10u8).collect();
        let mut input: &[u8] = &data;
        let path = std::path::Path::new("-");
        assert_eq!(read_piece(&mut input, 4, path).unwrap(), [0, 1, 2, 3]);
        assert_eq!(read_piece(&mut input, 4, path).unwrap(), [4, 5, 6, 7]);
        assert_eq!(read_piece(&mut input, 4, path).unwrap(), [8, 9]);
        assert!(read_piece(&mut input, 4, path).unwrap().is_empty());
        assert!(piece_tag().bytes().all(|b| b.is_ascii_alphanumeric()));
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
