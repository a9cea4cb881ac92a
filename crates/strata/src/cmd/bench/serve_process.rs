//! A real `strata serve` child process for `strata bench soak` and `strata bench rss`: started
//! from this binary on free loopback ports, its addresses read from its first lines, its
//! warnings kept in a log file (and the ones that matter counted), killed with SIGKILL or
//! stopped with SIGTERM.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::cmd::admin::client::Client;

/// The warning the cluster prints once per write acknowledged on fewer replicas than its
/// pool's size (`cluster::io`).
pub const BELOW_SIZE_WARNING: &str = "write acknowledged on fewer replicas than the pool's size";

/// A running `strata serve`.
pub struct ServeProcess {
    child: Child,
    /// Admin endpoint, `127.0.0.1:PORT`.
    pub admin: String,
    /// S3 endpoint.
    pub s3: std::net::SocketAddr,
    /// Data directory.
    pub data: PathBuf,
}

/// Counts kept over every server a run starts.
#[derive(Default)]
pub struct LogCounts {
    /// [`BELOW_SIZE_WARNING`] lines.
    pub below_size: AtomicU64,
    /// Warning and error lines.
    pub warnings: AtomicU64,
}

impl ServeProcess {
    /// Starts `strata serve --data DATA` (with `--config CONFIG` when given: the first start)
    /// and waits until it says it is ready. Its stderr is appended to `log`.
    pub fn start(
        data: &Path,
        config: Option<&Path>,
        log: &Path,
        counts: &Arc<LogCounts>,
    ) -> Result<Self> {
        let exe = std::env::current_exe().context("finding the strata binary")?;
        let mut command = Command::new(exe);
        command
            .arg("serve")
            .arg("--data")
            .arg(data)
            .args(["--admin", "127.0.0.1:0", "--s3", "127.0.0.1:0"])
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(config) = config {
            command.arg("--config").arg(config);
        }
        let mut child = command.spawn().context("starting strata serve")?;
        let stdout = child.stdout.take().context("serve's stdout")?;
        let stderr = child.stderr.take().context("serve's stderr")?;
        let mut log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("opening {}", log.display()))?;
        let counts = Arc::clone(counts);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if line.contains(BELOW_SIZE_WARNING) {
                    counts.below_size.fetch_add(1, Ordering::Relaxed);
                }
                if line.contains(" WARN ") || line.contains(" ERROR ") {
                    counts.warnings.fetch_add(1, Ordering::Relaxed);
                }
                let _ = writeln!(log_file, "{line}");
            }
        });
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            // Read to the end even once nobody listens: serve must never write to a closed
            // pipe (its last lines, at SIGTERM).
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let _ = sender.send(line);
            }
        });
        let mut admin = None;
        let mut s3 = None;
        loop {
            let line = match lines.recv_timeout(Duration::from_secs(120)) {
                Ok(line) => line,
                Err(_) => {
                    let _ = child.kill();
                    let status = child.wait();
                    bail!(
                        "strata serve did not become ready ({status:?}); its log is {}",
                        log.display()
                    );
                }
            };
            if let Some(rest) = line.strip_prefix("strata: admin  http://") {
                admin = rest.split_whitespace().next().map(str::to_string);
            }
            if let Some(rest) = line.strip_prefix("strata: s3     http://") {
                s3 = rest.trim().parse().ok();
            }
            if line.contains("ready") {
                break;
            }
        }
        Ok(Self {
            child,
            admin: admin.context("serve printed no admin address")?,
            s3: s3.context("serve printed no S3 address")?,
            data: data.to_path_buf(),
        })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// An admin client with the data directory's token.
    pub fn admin_client(&self) -> Result<Client> {
        let mut client = Client::new(&self.admin);
        let token_path = server::token::token_path(&self.data);
        client.token = Some(
            std::fs::read_to_string(&token_path)
                .with_context(|| format!("reading {}", token_path.display()))?
                .trim()
                .to_string(),
        );
        Ok(client)
    }

    /// SIGKILL, then waits for the process to be gone.
    pub fn kill(mut self) -> Result<()> {
        self.child.kill().context("kill -9 of strata serve")?;
        self.child.wait()?;
        Ok(())
    }

    /// SIGTERM and waits for a clean exit.
    pub fn stop(mut self) -> Result<()> {
        let pid =
            rustix::process::Pid::from_raw(self.child.id() as i32).context("serve's process id")?;
        rustix::process::kill_process(pid, rustix::process::Signal::TERM)
            .context("SIGTERM to strata serve")?;
        let status = self.child.wait()?;
        if !status.success() {
            bail!("strata serve exited with {status} after SIGTERM");
        }
        Ok(())
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        // Only a process not stopped or killed above is still running here.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
