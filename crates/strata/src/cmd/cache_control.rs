//! Where the control sockets of running caches live (issue 44: one global path, so a second
//! cache on the machine took the first one's socket). Each cache has its own,
//! `<directory>/<name>.ctl`: the name is `--name`, by default the cache device file's name
//! without its extension. The commands that talk to a cache find it by `--name`, by
//! `--control PATH`, or, when only one cache runs, by itself; `strata cache ls` lists them.
//! Also the client's side of the control protocol ([`call`]), the printing of settings, and
//! the counters' reset (`strata cache stats --reset`).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

/// The directory holding the sockets: `$XDG_RUNTIME_DIR/strata-caches` when set, else
/// `/tmp/strata-caches-<uid>`.
pub fn directory() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(runtime) if !runtime.is_empty() => PathBuf::from(runtime).join("strata-caches"),
        _ => PathBuf::from(format!(
            "/tmp/strata-caches-{}",
            rustix::process::getuid().as_raw()
        )),
    }
}

/// The socket of the cache called `name`.
pub fn socket_for(name: &str) -> PathBuf {
    directory().join(format!("{name}.ctl"))
}

/// A cache's default name from its device spec (`nvme@file:/tmp/cache.img:4G` -> `cache`).
pub fn default_name(cache_spec: &str) -> String {
    let path = cache_spec
        .split(':')
        .find(|part| part.contains('/') || part.ends_with(".img"))
        .unwrap_or("cache");
    let name = Path::new(path)
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_default();
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if cleaned.is_empty() {
        "cache".to_string()
    } else {
        cleaned
    }
}

/// Creates the socket directory (mode 0700) for a starting cache.
pub fn prepare() -> Result<()> {
    let dir = directory();
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
        .with_context(|| format!("making {} private", dir.display()))
}

/// The caches whose sockets are in the directory, by name, with whether each answers.
pub fn list() -> Vec<(String, PathBuf, bool)> {
    let Ok(entries) = std::fs::read_dir(directory()) else {
        return Vec::new();
    };
    let mut caches: Vec<(String, PathBuf, bool)> = entries
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "ctl"))
        .map(|path| {
            let name = path
                .file_stem()
                .map(|stem| stem.to_string_lossy().into_owned())
                .unwrap_or_default();
            let live = std::os::unix::net::UnixStream::connect(&path).is_ok();
            (name, path, live)
        })
        .collect();
    caches.sort();
    caches
}

/// The socket a command talks to: `control` when given, else the cache called `name`, else
/// the only running cache.
pub fn resolve(control: Option<&Path>, name: Option<&str>) -> Result<PathBuf> {
    if let Some(path) = control {
        return Ok(path.to_path_buf());
    }
    if let Some(name) = name {
        return Ok(socket_for(name));
    }
    let live: Vec<(String, PathBuf, bool)> =
        list().into_iter().filter(|(_, _, live)| *live).collect();
    match live.as_slice() {
        [(_, path, _)] => Ok(path.clone()),
        [] => bail!(
            "no cache is running (none answers in {}): start one with `strata cache start`, \
             or give --control PATH",
            directory().display()
        ),
        several => bail!(
            "{} caches run ({}): say which with --name NAME",
            several.len(),
            several
                .iter()
                .map(|(name, _, _)| name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The cache's counters when `strata cache stats --reset` last ran (as casadm
/// `--reset-counters`): `stats` reports the counters since then.
pub(crate) static COUNTERS_BASELINE: std::sync::Mutex<Option<blockcache::CacheStats>> =
    std::sync::Mutex::new(None);

/// `now` with its counters taken since the last reset (the state, mode and lines, as now).
pub(crate) fn since_reset(now: blockcache::CacheStats) -> blockcache::CacheStats {
    match &*COUNTERS_BASELINE.lock().unwrap_or_else(|e| e.into_inner()) {
        Some(baseline) => counters_since(now, baseline),
        None => now,
    }
}

/// The counters of `now` since `baseline`.
fn counters_since(
    mut now: blockcache::CacheStats,
    baseline: &blockcache::CacheStats,
) -> blockcache::CacheStats {
    let requests = |now: &mut blockcache::RequestStats, then: &blockcache::RequestStats| {
        now.hits = now.hits.saturating_sub(then.hits);
        now.partial_misses = now.partial_misses.saturating_sub(then.partial_misses);
        now.full_misses = now.full_misses.saturating_sub(then.full_misses);
        now.pass_through = now.pass_through.saturating_sub(then.pass_through);
    };
    requests(&mut now.reads, &baseline.reads);
    requests(&mut now.writes, &baseline.writes);
    for (value, then) in [
        (&mut now.core_read_bytes, baseline.core_read_bytes),
        (&mut now.core_write_bytes, baseline.core_write_bytes),
        (&mut now.cache_read_bytes, baseline.cache_read_bytes),
        (&mut now.cache_write_bytes, baseline.cache_write_bytes),
        (&mut now.exported_read_bytes, baseline.exported_read_bytes),
        (&mut now.exported_write_bytes, baseline.exported_write_bytes),
        (&mut now.core_errors, baseline.core_errors),
        (&mut now.cache_errors, baseline.cache_errors),
        (&mut now.cleaned_lines, baseline.cleaned_lines),
    ] {
        *value = value.saturating_sub(then);
    }
    now
}

/// `strata cache ls`: every cache with a socket in the directory, asked for its state.
pub(crate) fn list_caches() {
    let caches = list();
    if caches.is_empty() {
        println!(
            "no caches (control sockets live in {})",
            directory().display()
        );
        return;
    }
    println!(
        "{:<16} {:<6} {:>10} {:>10} {:>10}  SOCKET",
        "NAME", "MODE", "LINES", "OCCUPIED", "DIRTY"
    );
    for (name, path, live) in caches {
        let stats = live
            .then(|| call(&path, json!({"op": "stats"})).ok())
            .flatten();
        match stats {
            Some(reply) => {
                let stats = &reply["stats"];
                println!(
                    "{:<16} {:<6} {:>10} {:>10} {:>10}  {}",
                    name,
                    stats["mode"].as_str().unwrap_or("?"),
                    stats["lines"].to_string(),
                    stats["occupied_lines"].to_string(),
                    stats["dirty_lines"].to_string(),
                    path.display()
                );
            }
            None => println!(
                "{name:<16} (not answering: stopped without cleaning up)  {}",
                path.display()
            ),
        }
    }
}

/// A cache's settings as `name  value` lines, nested settings named by their path
/// (`cleaning.alru.wake_up_ms`), instead of the JSON (or a Rust debug string) they travel as.
pub(crate) fn settings_text(config: &Value) -> String {
    fn walk(prefix: &str, value: &Value, rows: &mut Vec<(String, String)>) {
        match value {
            Value::Object(fields) => {
                for (name, field) in fields {
                    let path = if prefix.is_empty() {
                        name.clone()
                    } else {
                        format!("{prefix}.{name}")
                    };
                    walk(&path, field, rows);
                }
            }
            Value::String(text) => rows.push((prefix.to_string(), text.clone())),
            other => rows.push((prefix.to_string(), other.to_string())),
        }
    }
    let mut rows = Vec::new();
    walk("", config, &mut rows);
    let width = rows.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    rows.iter()
        .map(|(name, value)| format!("{name:<width$}  {value}\n"))
        .collect()
}

/// Sends one request to a running cache and returns its reply (an error if it failed).
pub(crate) fn call(control: &Path, request: Value) -> Result<Value> {
    use std::io::{BufRead, Write};
    let mut stream = std::os::unix::net::UnixStream::connect(control)
        .with_context(|| format!("connecting to the cache at {}", control.display()))?;
    stream.write_all(format!("{request}\n").as_bytes())?;
    let mut line = String::new();
    std::io::BufReader::new(stream).read_line(&mut line)?;
    let reply: Value = serde_json::from_str(&line).context("reading the cache's reply")?;
    if reply["ok"] != true {
        bail!("{}", reply["error"].as_str().unwrap_or("cache refused"));
    }
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_count_from_the_reset() {
        let mut baseline = blockcache::CacheStats::default();
        baseline.reads.hits = 10;
        baseline.core_read_bytes = 4096;
        baseline.occupied_lines = 7;
        let mut now = baseline.clone();
        now.reads.hits = 15;
        now.core_read_bytes = 8192;
        now.occupied_lines = 9;
        let since = counters_since(now, &baseline);
        assert_eq!(since.reads.hits, 5);
        assert_eq!(since.core_read_bytes, 4096);
        assert_eq!(since.occupied_lines, 9, "state is not a counter");
    }

    #[test]
    fn settings_print_as_settings() {
        let config = blockcache::CacheConfig::default();
        let text = settings_text(&serde_json::to_value(&config).unwrap());
        assert!(text.lines().any(|line| line.starts_with("mode ")), "{text}");
        assert!(text.contains("line_size_bytes"), "{text}");
        assert!(
            !text.contains('{') && !text.contains("CacheConfig"),
            "{text}"
        );
    }

    #[test]
    fn names_come_from_the_cache_file() {
        assert_eq!(
            default_name("nvme@file:/tmp/fast cache.img:4G"),
            "fast_cache"
        );
        assert_eq!(default_name("file:/var/lib/c1.img:1G"), "c1");
        assert_eq!(default_name("memory:1G"), "cache");
        assert!(socket_for("c1").ends_with("c1.ctl"));
    }
}
