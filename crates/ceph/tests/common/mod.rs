//! A fresh Ceph minicluster per test binary (memstore, 3 OSDs, pools of 3), shared by its
//! tests, started with the project's `scripts/ceph-minicluster.sh` and purged when the test
//! process ends, however it ends (a watcher process waits for it).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use ceph_backend::{CephConfig, CephRados};

/// A running minicluster.
pub struct MiniCluster {
    /// Its directory (`run/*.pid`, `ceph.conf`, logs).
    pub dir: PathBuf,
    /// Its ceph.conf.
    pub conf: PathBuf,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/ceph-minicluster.sh")
}

fn command_exists(name: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|directory| directory.join(name).is_file())
    })
}

/// The test binary's cluster, started on first use; `None` (after printing why) when Ceph is
/// not installed and `STRATA_SKIP_CEPH=1` says to skip. Without Ceph and without that, fails.
pub fn cluster() -> Option<&'static MiniCluster> {
    static CLUSTER: OnceLock<Option<MiniCluster>> = OnceLock::new();
    CLUSTER.get_or_init(start).as_ref()
}

fn start() -> Option<MiniCluster> {
    if !command_exists("ceph-mon") || !command_exists("ceph-osd") {
        if std::env::var("STRATA_SKIP_CEPH").as_deref() == Ok("1") {
            println!(
                "skipping the Ceph tests: ceph-mon/ceph-osd are not installed (STRATA_SKIP_CEPH=1)"
            );
            return None;
        }
        panic!(
            "ceph-mon/ceph-osd not found: the Ceph backend's tests need a real Ceph. Run \
             scripts/test.sh (it installs ceph-mon ceph-osd ceph-mgr ceph-base ceph-common \
             uuid-runtime librados2), or set STRATA_SKIP_CEPH=1 to skip them"
        );
    }
    let test = std::env::args()
        .next()
        .and_then(|path| {
            Path::new(&path)
                .file_name()
                .map(|name| name.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "ceph".into());
    let dir = std::env::temp_dir().join(format!("strata-{test}-{}", std::process::id()));
    // Purge when this process ends, whatever way it ends.
    let watcher = format!(
        "while kill -0 {pid} 2>/dev/null; do sleep 0.5; done; exec {script} purge {dir} >/dev/null 2>&1",
        pid = std::process::id(),
        script = script().display(),
        dir = dir.display()
    );
    // `setsid -f` forks the watcher into its own session and returns at once.
    let watching = Command::new("setsid")
        .args(["-f", "sh", "-c", &watcher])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("spawn the minicluster's purge watcher");
    assert!(watching.success(), "setsid -f sh (the purge watcher)");
    let output = Command::new(script())
        .arg("start")
        .arg(&dir)
        .envs([
            ("STORE", "memstore"),
            ("OSD_SIZE", "4G"),
            ("NUM_OSDS", "3"),
            ("POOL_SIZE", "3"),
        ])
        .output()
        .expect("run scripts/ceph-minicluster.sh");
    assert!(
        output.status.success(),
        "scripts/ceph-minicluster.sh start failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Some(MiniCluster {
        conf: dir.join("ceph.conf"),
        dir,
    })
}

impl MiniCluster {
    /// A connection with `op_timeout_s`.
    pub async fn connect_with(&self, op_timeout_s: u64) -> CephRados {
        CephRados::connect(CephConfig {
            conf_path: Some(self.conf.clone()),
            op_timeout_s,
            ..CephConfig::default()
        })
        .await
        .expect("connect to the minicluster")
    }

    /// A connection with the default settings.
    pub async fn connect(&self) -> CephRados {
        self.connect_with(30).await
    }

    /// The pid of daemon `name` (`osd.1`).
    pub fn pid(&self, name: &str) -> u32 {
        let path = self.dir.join("run").join(format!("{name}.pid"));
        std::fs::read_to_string(&path)
            .unwrap_or_else(|error| panic!("{}: {error}", path.display()))
            .trim()
            .parse()
            .expect("a pid")
    }
}

/// A connection to the binary's cluster, or `None` to skip (see [`cluster`]).
pub async fn connect() -> Option<CephRados> {
    Some(cluster()?.connect().await)
}
