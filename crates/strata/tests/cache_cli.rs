//! `strata cache` end to end: start over file-backed devices, drive the export with fio
//! (crc32c verify) and the crate's NBD client, casadm-like commands over the control socket,
//! --load/--force rules, warm load after a clean stop, and write-back crash recovery after a
//! real SIGKILL of the serving process.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};

fn strata(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .output()
        .unwrap()
}

/// Runs `strata args` that must exit (e.g. a refused start); fails, not hangs, if it serves.
fn exits_within_10_s(args: &[&str]) -> Output {
    let mut child = Served(
        Command::new(env!("CARGO_BIN_EXE_strata"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "strata {args:?} is still running: it should have refused"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let stdout = child.0.stdout.take().map(std::io::read_to_string);
    let stderr = child.0.stderr.take().map(std::io::read_to_string);
    Output {
        status: child.try_wait().unwrap().expect("exited"),
        stdout: stdout.and_then(Result::ok).unwrap_or_default().into_bytes(),
        stderr: stderr.and_then(Result::ok).unwrap_or_default().into_bytes(),
    }
}

struct Paths {
    _directory: tempfile::TempDir,
    root: PathBuf,
}

impl Paths {
    fn new() -> Self {
        let directory = tempfile::tempdir().unwrap();
        Self {
            root: directory.path().to_path_buf(),
            _directory: directory,
        }
    }
    fn path(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }
    fn text(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }
}

/// A served cache process, killed when dropped, so a failing test leaves no server behind.
struct Served(Child);

impl std::ops::Deref for Served {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Served {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        // Both are no-ops once the process has been waited for.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(paths: &Paths, extra: &[&str]) -> Served {
    let _ = std::fs::remove_file(paths.path("nbd.sock"));
    let mut args = vec![
        "cache".to_string(),
        "start".into(),
        "--cache".into(),
        format!("file:{}:32M", paths.text("cache.img")),
        "--core".into(),
        format!("file:{}:128M", paths.text("core.img")),
        "--socket".into(),
        paths.text("nbd.sock"),
        "--control".into(),
        paths.text("ctl"),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !paths.path("nbd.sock").exists() {
        if let Some(status) = child.try_wait().unwrap() {
            let output = child.wait_with_output().unwrap();
            panic!(
                "cache exited ({status}): {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "cache did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    Served(child)
}

/// `strata cache start` run to its end (for starts that must be refused): `cache` and `core`
/// are device specs, the sockets are `<tag>.sock` and `<tag>.ctl`.
fn start_refused(paths: &Paths, cache: &str, core: &str, tag: &str, extra: &[&str]) -> String {
    let socket = paths.text(&format!("{tag}.sock"));
    let ctl = paths.text(&format!("{tag}.ctl"));
    let mut args = vec![
        "cache",
        "start",
        "--cache",
        cache,
        "--core",
        core,
        "--socket",
        &socket,
        "--control",
        &ctl,
    ];
    args.extend_from_slice(extra);
    let output = strata(&args);
    assert!(!output.status.success(), "{args:?} started");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn control(paths: &Paths, args: &[&str]) -> String {
    let mut all = vec!["cache"];
    all.extend_from_slice(args);
    let ctl = paths.text("ctl");
    all.extend_from_slice(&["--control", &ctl]);
    let output = strata(&all);
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(
        output.status.success(),
        "{args:?}: {text} {}",
        String::from_utf8_lossy(&output.stderr)
    );
    text
}

fn json_field(text: &str, field: &str) -> u64 {
    let value: serde_json::Value = serde_json::from_str(text).unwrap();
    value[field]
        .as_u64()
        .unwrap_or_else(|| panic!("no {field} in {text}"))
}

#[test]
fn casadm_like_lifecycle_with_fio_verify() {
    let paths = Paths::new();
    let mut cache = start(&paths, &["--mode", "wb", "--line-size", "4k"]);
    let have_fio = Command::new("fio").arg("--version").output().is_ok();
    if have_fio {
        let output = Command::new("fio")
            .current_dir(&paths.root)
            .args([
                "--name=verify",
                "--ioengine=nbd",
                &format!("--uri=nbd+unix:///?socket={}", paths.text("nbd.sock")),
                "--rw=randwrite",
                "--bs=4k",
                "--iodepth=16",
                "--size=8m",
                "--verify=crc32c",
                "--verify_fatal=1",
            ])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&output.stdout).to_string();
        assert!(
            output.status.success() && !text.contains("verify: bad"),
            "{text}"
        );
    } else {
        eprintln!("note: fio not installed; skipping the fio part");
    }
    let stats = control(&paths, &["stats", "--json"]);
    if have_fio {
        assert_eq!(json_field(&stats, "dirty_lines"), 2048);
    }
    assert!(control(&paths, &["stats"]).contains("Dirty"));
    control(
        &paths,
        &[
            "set",
            "--seq-cutoff",
            "always",
            "--seq-cutoff-threshold",
            "16k",
            "--cleaning",
            "acp",
        ],
    );
    let classes = paths.path("classes.csv");
    std::fs::write(&classes, "IO class id,IO class name,Eviction priority,Allocation\n0,unclassified,22,0\n1,request_size:le:131072&done,1,1\n").unwrap();
    control(
        &paths,
        &[
            "set",
            "--io-class",
            &classes.display().to_string(),
            "--mode",
            "wt",
            "--flush",
        ],
    );
    control(&paths, &["flush"]);
    let stats = control(&paths, &["stats", "--json"]);
    assert_eq!(json_field(&stats, "dirty_lines"), 0);
    let occupied = json_field(&stats, "occupied_lines");
    control(&paths, &["stop"]);
    assert!(cache.wait().unwrap().success());

    // An existing cache needs --load or --force.
    let cache_spec = format!("file:{}", paths.text("cache.img"));
    let core_spec = format!("file:{}", paths.text("core.img"));
    let refused = start_refused(&paths, &cache_spec, &core_spec, "refused", &[]);
    assert!(refused.contains("--load"), "{refused}");
    let mut cache = start(&paths, &["--load"]);
    let stats = control(&paths, &["stats", "--json"]);
    assert_eq!(
        json_field(&stats, "occupied_lines"),
        occupied,
        "warm after a clean stop"
    );
    // A device in use by a running cache is refused, even with --force.
    let other_core = format!("file:{}", paths.text("core2.img:128M"));
    let busy = start_refused(&paths, &cache_spec, &other_core, "busy", &["--force"]);
    assert!(busy.contains("in use"), "{busy}");
    // A request that fails changes nothing; a loaded cache resumes in its mode.
    let refused = strata(&[
        "cache",
        "set",
        "--cleaning",
        "nop",
        "--mode",
        "bogus",
        "--control",
        &paths.text("ctl"),
    ]);
    assert!(!refused.status.success());
    let stats = control(&paths, &["stats", "--json"]);
    assert_ne!(
        serde_json::from_str::<serde_json::Value>(&stats).unwrap()["cleaning"],
        "nop",
        "{stats}"
    );
    control(&paths, &["set", "--mode", "wb"]);
    control(&paths, &["stop"]);
    cache.wait().unwrap();
    let mut cache = start(&paths, &["--load"]);
    let stats: serde_json::Value =
        serde_json::from_str(&control(&paths, &["stats", "--json"])).unwrap();
    assert_eq!(stats["mode"], "wb", "{stats}");
    control(&paths, &["stop"]);
    cache.wait().unwrap();
    // A size smaller than the existing file is refused, not a truncation.
    let smaller = format!("{cache_spec}:8M");
    let shrink = start_refused(&paths, &smaller, &core_spec, "shrink", &["--load"]);
    assert!(shrink.contains("shrinking it"), "{shrink}");
    assert_eq!(
        std::fs::metadata(paths.path("cache.img")).unwrap().len(),
        32 << 20
    );
    let mut cache = start(&paths, &["--force"]);
    assert_eq!(
        json_field(&control(&paths, &["stats", "--json"]), "occupied_lines"),
        0
    );
    control(&paths, &["stop"]);
    cache.wait().unwrap();
}

/// What the client knows when the server dies: the last acknowledged value of each block,
/// and the write that was in flight (block, value). That one may or may not have landed: the
/// server can die after writing it and before answering.
#[derive(Default)]
struct Written {
    acknowledged: HashMap<u64, u8>,
    in_flight: Option<(u64, u8)>,
}

/// Writes random 4 KiB blocks until the server dies.
async fn write_until_killed(socket: &Path, seed: u64, blocks: u64) -> Written {
    let mut client = nbd::NbdClient::connect_unix(socket, "").await.unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut written = Written::default();
    for round in 0..200_000u32 {
        let block = rng.gen_range(0..blocks);
        let value = (round % 251) as u8 + 1;
        match client.write(block * 4096, &[value; 4096], false).await {
            Ok(()) => {
                written.acknowledged.insert(block, value);
            }
            Err(_) => {
                written.in_flight = Some((block, value));
                break;
            }
        }
    }
    written
}

/// kill -9 during random write-back writes, three times, each restart with `--load`: every
/// acknowledged write is read back (the write in flight at the kill may read either way).
#[test]
fn write_back_survives_kill_9() {
    let paths = Paths::new();
    let blocks = 4096u64; // 16 MiB of the core, half the cache: evictions and cleaning too
    let mut acknowledged: HashMap<u64, u8> = HashMap::new();
    let mut in_flight: Option<(u64, u8)> = None;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for round in 0..3u64 {
        let load: &[&str] = if round == 0 {
            &["--force"]
        } else {
            &["--load"]
        };
        let mut args = vec!["--mode", "wb", "--cleaning", "acp", "--no-flush-on-stop"];
        args.extend_from_slice(load);
        let mut cache = start(&paths, &args);
        let socket = paths.path("nbd.sock");
        // Everything acknowledged before the previous kill must be there.
        runtime.block_on(async {
            let mut client = nbd::NbdClient::connect_unix(&socket, "").await.unwrap();
            let mut back = vec![0u8; 4096];
            for (&block, value) in acknowledged.iter_mut() {
                client.read(block * 4096, &mut back).await.unwrap();
                match in_flight {
                    // The write in flight at the kill landed: that is now the block's value.
                    Some((pending, landed))
                        if pending == block && back.iter().all(|&b| b == landed) =>
                    {
                        *value = landed
                    }
                    _ => assert!(
                        back.iter().all(|&b| b == *value),
                        "round {round}: block {block} lost its acknowledged write {value} (read {})",
                        back[0]
                    ),
                }
            }
            client.disconnect().await.unwrap();
        });
        let pid = cache.id();
        let killer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(700));
            Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status()
                .unwrap();
        });
        let written = runtime.block_on(write_until_killed(&socket, round, blocks));
        killer.join().unwrap();
        cache.wait().unwrap();
        assert!(
            written.acknowledged.len() > 10,
            "only {} writes before the kill",
            written.acknowledged.len()
        );
        acknowledged.extend(written.acknowledged);
        in_flight = written.in_flight;
    }
    // A last clean load flushes everything; the core alone must then hold every write.
    let mut cache = start(&paths, &["--load"]);
    control(&paths, &["stop"]);
    cache.wait().unwrap();
    let core = std::fs::read(paths.path("core.img")).unwrap();
    for (&block, &value) in &acknowledged {
        let at = (block * 4096) as usize;
        let landed = in_flight.is_some_and(|(pending, landed)| {
            pending == block && core[at..at + 4096].iter().all(|&b| b == landed)
        });
        assert!(
            landed || core[at..at + 4096].iter().all(|&b| b == value),
            "core block {block}"
        );
    }
}

/// Two cores behind one cache (casadm --add-core twice): each exported under its own name,
/// each core file holding only its own writes after a flushing stop.
#[test]
fn two_cores_are_exported_separately() {
    let paths = Paths::new();
    let _ = std::fs::remove_file(paths.path("nbd.sock"));
    let mut child = Served(
        Command::new(env!("CARGO_BIN_EXE_strata"))
            .args([
                "cache",
                "start",
                "--mode",
                "wb",
                "--cache",
                &format!("file:{}:16M", paths.text("cache.img")),
                "--core",
                &format!("file:{}:12M", paths.text("core1.img")),
                "--core",
                &format!("file:{}:8M", paths.text("core2.img")),
                "--socket",
                &paths.text("nbd.sock"),
                "--control",
                &paths.text("ctl"),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let started = Instant::now();
    while !paths.path("nbd.sock").exists() {
        assert!(child.try_wait().unwrap().is_none(), "cache exited");
        assert!(started.elapsed() < Duration::from_secs(30), "no socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let socket = paths.path("nbd.sock");
    runtime.block_on(async {
        for (name, size_bytes, value) in [("core1", 12u64 << 20, 1u8), ("core2", 8 << 20, 2)] {
            let mut client = nbd::NbdClient::connect_unix(&socket, name).await.unwrap();
            assert_eq!(client.info().size_bytes, size_bytes, "{name}");
            client.write(0, &[value; 8192], false).await.unwrap();
            client
                .write(size_bytes - 4096, &[value + 10; 4096], false)
                .await
                .unwrap();
            client.disconnect().await.unwrap();
        }
    });
    // Statistics per core: each export counts what its own client wrote (12 KiB to each).
    let stats: serde_json::Value =
        serde_json::from_str(&control(&paths, &["stats", "--json"])).unwrap();
    let cores = stats["cores"].as_array().expect("cores in the stats");
    assert_eq!(cores.len(), 2, "{stats}");
    for (index, core) in cores.iter().enumerate() {
        assert_eq!(core["id"], index + 1, "{core}");
        assert_eq!(core["exported_write_bytes"], 12288, "{core}");
        assert_eq!(core["exported_write_requests"], 2, "{core}");
        assert_eq!(core["exported_read_bytes"], 0, "{core}");
    }
    assert!(cores[1]["core"].as_str().unwrap().contains("core2.img"));
    let text = control(&paths, &["stats"]);
    assert!(text.contains("Per core"), "{text}");
    control(&paths, &["stop"]);
    assert!(child.wait().unwrap().success());
    let core1 = std::fs::read(paths.path("core1.img")).unwrap();
    let core2 = std::fs::read(paths.path("core2.img")).unwrap();
    assert_eq!((core1.len(), core2.len()), (12 << 20, 8 << 20));
    assert!(core1[..8192].iter().all(|&b| b == 1));
    assert!(core1[(12 << 20) - 4096..].iter().all(|&b| b == 11));
    assert!(core2[..8192].iter().all(|&b| b == 2));
    assert!(core2[(8 << 20) - 4096..].iter().all(|&b| b == 12));
    assert!(core1[8192..(12 << 20) - 4096].iter().all(|&b| b == 0));
    assert!(core2[8192..(8 << 20) - 4096].iter().all(|&b| b == 0));

    // The superblock names the cores in order: the same total size in another order (which
    // would hand core1's lines to core2) is refused; the same order loads.
    let load = |first: &str, second: &str| {
        exits_within_10_s(&[
            "cache",
            "start",
            "--load",
            "--cache",
            &format!("file:{}", paths.text("cache.img")),
            "--core",
            &format!("file:{}", paths.text(first)),
            "--core",
            &format!("file:{}", paths.text(second)),
            "--socket",
            &paths.text("nbd.sock"),
            "--control",
            &paths.text("ctl"),
        ])
    };
    let swapped = load("core2.img", "core1.img");
    let stderr = String::from_utf8_lossy(&swapped.stderr);
    assert!(!swapped.status.success(), "swapped cores loaded");
    assert!(stderr.contains("in that order"), "{stderr}");
}

/// Regression (issue 43): SIGTERM killed `cache start` without stopping the cache and left
/// both sockets behind; now it stops cleanly (as Ctrl-C does) and removes them. The files
/// it creates are private.
#[test]
fn sigterm_stops_the_cache_and_removes_its_sockets() {
    use std::os::unix::fs::PermissionsExt;
    let paths = Paths::new();
    let mut served = start(&paths, &[]);
    for name in ["cache.img", "core.img", "nbd.sock", "ctl"] {
        let mode = std::fs::symlink_metadata(paths.path(name))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{name}");
    }
    let sent = Command::new("kill")
        .args(["-TERM", &served.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let started = Instant::now();
    let status = loop {
        if let Some(status) = served.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
    for name in ["nbd.sock", "ctl"] {
        assert!(!paths.path(name).exists(), "{name} left behind");
    }
}
