//! A throwaway Ceph cluster on this machine for tests and benchmarks: started with the
//! project's `scripts/ceph-minicluster.sh` (one monitor, one manager, N OSDs), reached through
//! its `ceph.conf` and admin keyring, purged when dropped.
//!
//! [`MiniCluster::start`] owns a cluster in a directory of the caller's choice; [`shared`] is
//! the one cluster of a test binary, started on first use and purged by a watcher process when
//! the binary ends, however it ends. Both need `ceph-mon` and `ceph-osd` on `PATH`; [`shared`]
//! answers `None` (and says so) when they are missing and `STRATA_SKIP_CEPH=1` asks to skip.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use crate::{CephConfig, CephError, CephRados};

/// How to lay the cluster out (the script's environment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MiniClusterSpec {
    /// `memstore` (fast, in memory) or `bluestore` (sparse files).
    pub store: String,
    /// Each OSD's size, as the script reads it (`4G`).
    pub osd_size: String,
    /// How many OSDs.
    pub osds: u32,
    /// The replica count of the pools the script creates.
    pub pool_size: u32,
}

impl Default for MiniClusterSpec {
    /// Memstore, 3 OSDs of 4 GiB, pools of 3.
    fn default() -> Self {
        MiniClusterSpec {
            store: "memstore".into(),
            osd_size: "4G".into(),
            osds: 3,
            pool_size: 3,
        }
    }
}

/// A running minicluster; dropping it stops and removes it.
#[derive(Debug)]
pub struct MiniCluster {
    dir: PathBuf,
}

/// The script: `$STRATA_CEPH_MINICLUSTER`, else the one in this source tree.
pub fn script() -> PathBuf {
    match std::env::var_os("STRATA_CEPH_MINICLUSTER") {
        Some(path) => PathBuf::from(path),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/ceph-minicluster.sh"),
    }
}

/// Whether `ceph-mon` and `ceph-osd` are on `PATH`.
pub fn installed() -> bool {
    let on_path = |name: &str| {
        std::env::var_os("PATH").is_some_and(|path| {
            std::env::split_paths(&path).any(|directory| directory.join(name).is_file())
        })
    };
    on_path("ceph-mon") && on_path("ceph-osd")
}

/// `false` after printing why when Ceph is missing and `STRATA_SKIP_CEPH=1` asks to skip;
/// `true` when Ceph is installed. Without Ceph and without that setting, panics saying how to
/// install it: a test that needs Ceph must not pass silently.
pub fn available_or_skip() -> bool {
    if installed() {
        return true;
    }
    if std::env::var("STRATA_SKIP_CEPH").as_deref() == Ok("1") {
        println!(
            "skipping the Ceph tests: ceph-mon/ceph-osd are not installed (STRATA_SKIP_CEPH=1)"
        );
        return false;
    }
    panic!(
        "ceph-mon/ceph-osd not found: this test needs a real Ceph. Run scripts/test.sh (it \
         installs ceph-mon ceph-osd ceph-mgr ceph-base ceph-common uuid-runtime librados2), or \
         set STRATA_SKIP_CEPH=1 to skip it"
    );
}

impl MiniCluster {
    /// Starts a fresh cluster in `dir` (created; a leftover there is purged by the script).
    pub fn start(dir: &Path, spec: &MiniClusterSpec) -> Result<MiniCluster, CephError> {
        let output = Command::new(script())
            .arg("start")
            .arg(dir)
            .env("STORE", &spec.store)
            .env("OSD_SIZE", &spec.osd_size)
            .env("NUM_OSDS", spec.osds.to_string())
            .env("POOL_SIZE", spec.pool_size.to_string())
            .output()
            .map_err(|error| {
                CephError::Config(format!("running {}: {error}", script().display()))
            })?;
        // From here on the directory is ours to purge, whether or not the start succeeded.
        let cluster = MiniCluster {
            dir: dir.to_path_buf(),
        };
        if !output.status.success() {
            return Err(CephError::Config(format!(
                "scripts/ceph-minicluster.sh start {} failed:\n{}\n{}",
                dir.display(),
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )));
        }
        Ok(cluster)
    }

    /// Its directory (`ceph.conf`, `keyring`, `run/*.pid`, logs).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Its `ceph.conf`.
    pub fn conf(&self) -> PathBuf {
        self.dir.join("ceph.conf")
    }

    /// Its admin keyring (`client.admin`, the default identity; `ceph.conf` names it too).
    pub fn keyring(&self) -> PathBuf {
        self.dir.join("keyring")
    }

    /// Client settings for it with `op_timeout_s`.
    pub fn config(&self, op_timeout_s: u64) -> CephConfig {
        CephConfig {
            conf_path: Some(self.conf()),
            op_timeout_s,
            ..CephConfig::default()
        }
    }

    /// A connection with `op_timeout_s`.
    pub async fn connect_with(&self, op_timeout_s: u64) -> Result<CephRados, CephError> {
        CephRados::connect(self.config(op_timeout_s)).await
    }

    /// A connection with a 30 s op timeout.
    pub async fn connect(&self) -> Result<CephRados, CephError> {
        self.connect_with(30).await
    }

    /// The pid of daemon `name` (`osd.1`, `mon.a`), from its pid file.
    pub fn pid(&self, name: &str) -> Result<u32, CephError> {
        let path = self.dir.join("run").join(format!("{name}.pid"));
        let text = std::fs::read_to_string(&path)
            .map_err(|error| CephError::Config(format!("{}: {error}", path.display())))?;
        text.trim()
            .parse()
            .map_err(|_| CephError::Config(format!("{}: not a pid: {text:?}", path.display())))
    }

    /// Runs `ceph ARGS...` against it and returns its standard output.
    pub fn ceph(&self, args: &[&str]) -> Result<String, CephError> {
        let output = Command::new("ceph")
            .arg("-c")
            .arg(self.conf())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|error| CephError::Config(format!("running ceph: {error}")))?;
        if !output.status.success() {
            return Err(CephError::Config(format!(
                "ceph {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&output.stderr).trim()
            )));
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// Stops and removes it now (dropping it does the same).
    pub fn stop(self) {}
}

impl Drop for MiniCluster {
    fn drop(&mut self) {
        let _ = Command::new(script())
            .arg("purge")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// The process's own cluster ([`MiniClusterSpec::default`]), started on first use in the
/// temporary directory under the binary's name and pid, and purged when the process ends (a
/// `static` is never dropped: a watcher in its own session purges it). `None` when Ceph is
/// missing and `STRATA_SKIP_CEPH=1` says to skip (see [`available_or_skip`]); panics when it
/// cannot start.
pub fn shared() -> Option<&'static MiniCluster> {
    static CLUSTER: OnceLock<Option<MiniCluster>> = OnceLock::new();
    CLUSTER.get_or_init(start_shared).as_ref()
}

fn start_shared() -> Option<MiniCluster> {
    if !available_or_skip() {
        return None;
    }
    let binary = std::env::args()
        .next()
        .and_then(|path| {
            Path::new(&path)
                .file_name()
                .map(|name| name.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "ceph".into());
    let dir = std::env::temp_dir().join(format!("strata-{binary}-{}", std::process::id()));
    purge_when_process_ends(&dir, std::process::id()).unwrap_or_else(|error| panic!("{error}"));
    Some(
        MiniCluster::start(&dir, &MiniClusterSpec::default())
            .unwrap_or_else(|error| panic!("{error}")),
    )
}

/// Purges `dir` when process `pid` ends, from a watcher in its own session.
fn purge_when_process_ends(dir: &Path, pid: u32) -> Result<(), CephError> {
    let watcher = format!(
        "while kill -0 {pid} 2>/dev/null; do sleep 0.5; done; exec {script} purge {dir} >/dev/null 2>&1",
        script = script().display(),
        dir = dir.display()
    );
    // `setsid -f` forks the watcher into its own session and returns at once.
    let status = Command::new("setsid")
        .args(["-f", "sh", "-c", &watcher])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|error| CephError::Config(format!("setsid -f sh (purge watcher): {error}")))?;
    if !status.success() {
        return Err(CephError::Config(
            "setsid -f sh (purge watcher) failed".into(),
        ));
    }
    Ok(())
}
