//! A real Ceph cluster for the peers of `strata bench cluster` and `strata bench s3`: the
//! project's `scripts/ceph-minicluster.sh` (1 mon, 1 mgr, N BlueStore OSDs on sparse files,
//! loopback only) started under the benchmark's data directory, so Ceph writes to the same
//! disk as strata and fio.
//!
//! The script is compiled into the binary and written next to the cluster at run time, so a
//! built `strata` runs the peer without a source tree. [`CephCluster`] stops and purges the
//! cluster when dropped: on success, on error, and when the benchmark is interrupted (the
//! benches drop it when Ctrl-C wins their `select!`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

/// `scripts/ceph-minicluster.sh`, as built into this binary.
const MINICLUSTER_SCRIPT: &str = include_str!("../../../../../scripts/ceph-minicluster.sh");

/// Programs the peers need, with their Debian package.
const PROGRAMS: [(&str, &str); 7] = [
    ("ceph-mon", "ceph-mon"),
    ("ceph-mgr", "ceph-mgr"),
    ("ceph-osd", "ceph-osd"),
    ("ceph", "ceph-common"),
    ("rados", "ceph-common"),
    ("radosgw", "radosgw"),
    ("radosgw-admin", "radosgw"),
];

/// Whether `program` is an executable file on `PATH`.
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| {
            let candidate = dir.join(program);
            candidate.is_file()
                && std::fs::metadata(&candidate)
                    .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0)
                    .unwrap_or(false)
        })
    })
}

/// `None` when every program in `programs` (names from the table above) is installed; else
/// the `apt-get install` line that brings the missing ones.
pub fn missing(programs: &[&str]) -> Option<String> {
    let mut packages: Vec<&str> = PROGRAMS
        .iter()
        .filter(|(program, _)| programs.contains(program) && !on_path(program))
        .map(|(_, package)| *package)
        .collect();
    packages.dedup();
    (!packages.is_empty()).then(|| format!("apt-get install -y {}", packages.join(" ")))
}

/// A running minicluster; stopped and removed on drop.
pub struct CephCluster {
    dir: PathBuf,
    script: PathBuf,
    /// Its `ceph.conf`, for `-c` of every client.
    pub conf: PathBuf,
}

impl CephCluster {
    /// Bootstraps a cluster of `osds` BlueStore OSDs of `osd_size` (sparse) in `dir` (must not
    /// exist yet); pools created without an explicit size get `pool_size` replicas.
    pub fn start(dir: &Path, osds: u32, osd_size: &str, pool_size: u32) -> Result<Self> {
        if dir.exists() {
            bail!(
                "{} exists; the Ceph peer needs a fresh directory",
                dir.display()
            );
        }
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let script = dir.join("minicluster.sh");
        std::fs::write(&script, MINICLUSTER_SCRIPT)
            .with_context(|| format!("writing {}", script.display()))?;
        let cluster_dir = dir.join("cluster");
        let cluster = Self {
            dir: cluster_dir.clone(),
            script,
            conf: cluster_dir.join("ceph.conf"),
        };
        cluster.script_command("start", &[], |command| {
            command
                .env("NUM_OSDS", osds.to_string())
                .env("OSD_SIZE", osd_size)
                .env("POOL_SIZE", pool_size.to_string());
        })?;
        Ok(cluster)
    }

    /// Creates replicated pool `name` of `size` replicas and `pg_num` PGs and waits until its
    /// PGs are active.
    pub fn create_pool(&self, name: &str, size: u32, pg_num: u32) -> Result<()> {
        self.script_command(
            "pool",
            &[name, "any", &size.to_string(), &pg_num.to_string()],
            |_| {},
        )
    }

    /// Creates erasure-coded pool `name` (`k + m`, one shard per OSD, overwrites allowed)
    /// of `pg_num` PGs and waits until its PGs are active.
    pub fn create_erasure_pool(&self, name: &str, k: u32, m: u32, pg_num: u32) -> Result<()> {
        self.script_command(
            "ecpool",
            &[name, &k.to_string(), &m.to_string(), &pg_num.to_string()],
            |_| {},
        )
    }

    /// Sets a monitor option at run time (highest precedence: above `ceph.conf`).
    pub fn set_monitor_option(&self, name: &str, value: &str) -> Result<()> {
        self.ceph(&["tell", "mon.a", "injectargs", &format!("--{name}={value}")])
            .map(|_| ())
    }

    /// Starts radosgw (beast) on the port the script chose and returns it. Started here
    /// rather than by the script's `rgw` so beast gets `tcp_nodelay=1`: without it, replies
    /// written in two pieces wait for the client's delayed ACK (~40 ms per small GET), which
    /// would measure Nagle's algorithm, not radosgw. The daemon writes its pid file where
    /// the script's `stop`/`purge` find it.
    pub fn start_radosgw(&self) -> Result<u16> {
        let conf = std::fs::read_to_string(&self.conf)
            .with_context(|| format!("reading {}", self.conf.display()))?;
        let port: u16 = conf
            .lines()
            .find_map(|line| {
                line.strip_prefix("rgw_frontends = beast endpoint=127.0.0.1:")
                    .and_then(|port| port.trim().parse().ok())
            })
            .context("no rgw_frontends port in ceph.conf")?;
        let rgw_dir = self.dir.join("rgw.a");
        std::fs::create_dir_all(&rgw_dir)
            .with_context(|| format!("creating {}", rgw_dir.display()))?;
        let keyring = self.ceph(&[
            "auth",
            "get-or-create",
            "client.rgw.a",
            "mon",
            "allow rw",
            "osd",
            "allow rwx",
            "mgr",
            "allow rw",
        ])?;
        std::fs::write(rgw_dir.join("keyring"), keyring)
            .with_context(|| format!("writing {}", rgw_dir.join("keyring").display()))?;
        let status = super::peer_command("radosgw")
            .arg("-c")
            .arg(&self.conf)
            .args(["-n", "client.rgw.a", "--rgw_frontends"])
            .arg(format!("beast endpoint=127.0.0.1:{port} tcp_nodelay=1"))
            .stdin(Stdio::null())
            .status()
            .context("starting radosgw")?;
        if !status.success() {
            bail!(
                "radosgw failed to start ({status}); see {}",
                self.dir.join("log").display()
            );
        }
        let started = std::time::Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if started.elapsed() > std::time::Duration::from_secs(120) {
                bail!("radosgw did not listen on port {port} within 120 s");
            }
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
        eprintln!("  radosgw on 127.0.0.1:{port} (beast, tcp_nodelay=1)");
        Ok(port)
    }

    /// Prints every pool with its replicas and PG count on stderr (what the peer ran on).
    pub fn print_pools(&self) {
        let Ok(pools) = self.ceph(&["osd", "pool", "ls", "detail"]) else {
            return;
        };
        for line in pools.lines().filter(|l| l.starts_with("pool ")) {
            let words: Vec<&str> = line.split_whitespace().collect();
            let field = |name: &str| {
                words
                    .iter()
                    .position(|w| *w == name)
                    .and_then(|i| words.get(i + 1))
                    .copied()
                    .unwrap_or("?")
            };
            eprintln!(
                "  ceph pool {}: size {}, pg_num {}",
                words.get(2).copied().unwrap_or("?"),
                field("size"),
                field("pg_num")
            );
        }
    }

    /// Runs `ceph -c CONF ARGS...` and returns its stdout.
    pub fn ceph(&self, args: &[&str]) -> Result<String> {
        self.client("ceph", args)
    }

    /// Runs a client program (`ceph`, `rados`, `radosgw-admin`) with `-c CONF` and returns
    /// its stdout; a failure carries its stderr.
    pub fn client(&self, program: &str, args: &[&str]) -> Result<String> {
        let output = super::peer_command(program)
            .arg("-c")
            .arg(&self.conf)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("running {program}"))?;
        if !output.status.success() {
            bail!(
                "{program} {} failed ({}): {}",
                args.join(" "),
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// Runs `minicluster.sh ACTION DIR ARGS...`; its output goes to our stderr.
    fn script_command(
        &self,
        action: &str,
        args: &[&str],
        configure: impl FnOnce(&mut Command),
    ) -> Result<()> {
        let mut command = super::peer_command("bash");
        command
            .arg(&self.script)
            .arg(action)
            .arg(&self.dir)
            .args(args)
            .stdin(Stdio::null())
            // Its "[minicluster 3.2s] ..." lines are the progress of a 10-20 s start.
            .stdout(std::io::stderr());
        configure(&mut command);
        let status = command
            .status()
            .with_context(|| format!("running {} {action}", self.script.display()))?;
        if !status.success() {
            bail!(
                "ceph-minicluster.sh {action} failed ({status}); logs in {}",
                self.dir.join("log").display()
            );
        }
        Ok(())
    }
}

impl Drop for CephCluster {
    fn drop(&mut self) {
        eprintln!(
            "  stopping and purging the Ceph cluster in {}",
            self.dir.display()
        );
        let purged = super::peer_command("bash")
            .arg(&self.script)
            .arg("purge")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        // An interrupted bootstrap can leave processes without pid files (an OSD's --mkfs
        // waiting for a monitor that is gone): end every process started with our conf.
        for pid in processes_mentioning(&self.conf) {
            let _ = super::peer_command("kill")
                .args(["-KILL", &pid.to_string()])
                .stderr(Stdio::null())
                .status();
        }
        if !purged.is_ok_and(|s| s.success()) {
            eprintln!(
                "warning: purging {} failed; stop it with: bash {} purge {}",
                self.dir.display(),
                self.script.display(),
                self.dir.display()
            );
        }
    }
}

/// Ids of the processes whose command line contains `path` (our cluster's conf: only
/// processes this benchmark started).
fn processes_mentioning(path: &Path) -> Vec<u32> {
    let needle = path.to_string_lossy().into_owned();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != std::process::id())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|raw| {
                    String::from_utf8_lossy(&raw)
                        .replace('\0', " ")
                        .contains(&needle)
                })
                .unwrap_or(false)
        })
        .collect()
}

/// Figures `rados bench` prints at the end of a phase.
#[derive(Debug, Default, PartialEq)]
pub struct RadosBenchSummary {
    pub elapsed_s: f64,
    pub ops: u64,
    pub latency_s_mean: f64,
}

/// Parses `Total time run:`, `Total writes made:` / `Total reads made:` and
/// `Average Latency(s):` from `rados bench` output.
pub fn parse_rados_bench(output: &str) -> Result<RadosBenchSummary> {
    let mut summary = RadosBenchSummary::default();
    let mut found = 0;
    for line in output.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key.trim() {
            "Total time run" => {
                summary.elapsed_s = value.parse().context("Total time run")?;
                found += 1;
            }
            "Total writes made" | "Total reads made" => {
                summary.ops = value.parse().context("Total ops made")?;
                found += 1;
            }
            "Average Latency(s)" => {
                summary.latency_s_mean = value.parse().context("Average Latency(s)")?;
                found += 1;
            }
            _ => {}
        }
    }
    if found != 3 {
        bail!("unexpected rados bench output:\n{output}");
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rados_bench_summary_parses() {
        let text = "hints = 1\nsec Cur ops   started  finished  avg MB/s\n\
            Total time run:         10.0031\nTotal writes made:      43512\n\
            Write size:             4096\nBandwidth (MB/sec):     16.99\n\
            Average IOPS:           4349\nAverage Latency(s):     0.00367\n\
            Max latency(s):         0.05\n";
        let summary = parse_rados_bench(text).unwrap();
        assert_eq!(summary.ops, 43512);
        assert!((summary.elapsed_s - 10.0031).abs() < 1e-9);
        assert!((summary.latency_s_mean - 0.00367).abs() < 1e-12);
        assert!(parse_rados_bench("error opening pool").is_err());
        assert!(
            parse_rados_bench("Total time run: x\nTotal reads made: 1\nAverage Latency(s): 1")
                .is_err()
        );
    }

    #[test]
    fn missing_programs_name_their_packages() {
        assert_eq!(missing(&[]), None);
        assert!(on_path("sh"));
        assert!(!on_path("strata-no-such-program"));
    }
}
