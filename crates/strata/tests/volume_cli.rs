//! `strata volume` and the NBD export of `strata serve`, end to end with real clients:
//! volumes on a replica-3 pool of the embedded cluster, listed by `nbdinfo --list`,
//! described by `qemu-img info`, written and verified by `qemu-io` and fio's nbd engine
//! (crc32c), imported and exported as sparse raw images; then `strata serve` killed with
//! SIGKILL during writes and every acknowledged write read back after the restart.

mod serve_common;

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serve_common::{strata, Server};

/// Runs an external client; it must succeed. Its stdout and stderr.
fn run(program: &str, arguments: &[&str]) -> String {
    let output = Command::new(program)
        .args(arguments)
        .output()
        .unwrap_or_else(|error| {
            panic!("{program}: {error} (scripts/test.sh installs fio, libnbd-bin and qemu-utils)")
        });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "{program} {arguments:?} failed:\n{text}"
    );
    text
}

fn socket_uri(server: &Server, export: &str) -> String {
    format!("nbd+unix:///{export}?socket={}/nbd.sock", server.data)
}

/// Deterministic bytes.
fn pattern(seed: u64, length: usize) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..length)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

#[test]
fn volumes_are_managed_and_served_over_nbd_to_real_clients() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--no-s3", "--nbd-port", "0"]);
    server.ok(&["pool", "create", "rbd", "--size", "3"]);
    let created = server.ok(&["volume", "create", "vm1", "--size", "64M"]);
    assert!(
        created.contains("rbd/vm1 created: 64.0 MiB (16 objects"),
        "{created}"
    );

    // Bad input: a name that exists, sizes off the limits, a pool that does not exist.
    for (arguments, message) in [
        (
            vec!["volume", "create", "vm1", "--size", "1G"],
            "already exists",
        ),
        (
            vec!["volume", "create", "odd", "--size", "1000"],
            "multiple of 512",
        ),
        (
            vec!["volume", "create", "huge", "--size", "2048T"],
            "at most",
        ),
        (
            vec!["volume", "create", "nopool/v", "--size", "1M"],
            "strata pool create nopool",
        ),
        (vec!["volume", "info", "missing"], "no volume"),
    ] {
        let out = strata(&server.args(&arguments));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains(message),
            "{arguments:?}: {stderr}"
        );
    }
    let info = server.ok(&["volume", "info", "rbd/vm1"]);
    assert!(
        info.contains("size 64.0 MiB (67108864 bytes) in 16 objects")
            && info.contains("features: layering"),
        "{info}"
    );

    // Real clients on the unix socket: listing, size, writes and verified reads.
    let listed = run(
        "nbdinfo",
        &[
            "--list",
            &format!("nbd+unix:///?socket={}/nbd.sock", server.data),
        ],
    );
    assert!(listed.contains("export=\"rbd/vm1\""), "{listed}");
    let uri = socket_uri(&server, "rbd/vm1");
    let qemu_info = run("qemu-img", &["info", &uri]);
    assert!(qemu_info.contains("67108864 bytes"), "{qemu_info}");
    let io = run(
        "qemu-io",
        &[
            "-f",
            "raw",
            "-c",
            "write -P 0xab 3M 2M",
            "-c",
            "read -P 0xab 3M 2M",
            "-c",
            "write -z 3M 512k",
            "-c",
            "read -P 0 3M 512k",
            &uri,
        ],
    );
    assert!(!io.contains("Pattern verification failed"), "{io}");
    let fio = run(
        "fio",
        &[
            "--name=verify",
            "--ioengine=nbd",
            &format!("--uri={uri}"),
            "--rw=randwrite",
            "--bs=4k",
            "--offset=16M",
            "--size=16M",
            "--iodepth=16",
            "--verify=crc32c",
            "--do_verify=1",
            "--verify_fatal=1",
            "--verify_state_save=0",
        ],
    );
    assert!(fio.contains("err= 0"), "{fio}");

    // TCP, as printed by serve.
    let tcp = server
        .banner
        .iter()
        .find_map(|line| line.strip_prefix("strata: nbd    nbd://"))
        .and_then(|rest| rest.split('/').next())
        .expect("serve prints its NBD TCP address")
        .to_string();
    let (host, port) = tcp.rsplit_once(':').unwrap();
    let over_tcp = run("nbdinfo", &[&format!("nbd://{host}:{port}/rbd/vm1")]);
    assert!(over_tcp.contains("export-size: 67108864"), "{over_tcp}");

    // Import a sparse image and export it again, byte-exact and sparse.
    let image_path = dir.path().join("image.raw");
    let mut image = vec![0u8; (12 << 20) + 700];
    image[(1 << 20)..(1 << 20) + 300_000].copy_from_slice(&pattern(1, 300_000));
    let tail = image.len() - 600;
    image[tail..].copy_from_slice(&pattern(2, 600));
    std::fs::write(&image_path, &image).unwrap();
    let path = image_path.to_str().unwrap();
    let imported = server.ok(&["volume", "import", path, "rbd/imported"]);
    assert!(imported.contains("imported"), "{imported}");
    let export_path = dir.path().join("export.raw");
    let exported = server.ok(&[
        "volume",
        "export",
        "rbd/imported",
        export_path.to_str().unwrap(),
    ]);
    assert!(exported.contains("exported"), "{exported}");
    let back = std::fs::read(&export_path).unwrap();
    assert_eq!(back.len(), image.len().next_multiple_of(512));
    assert!(
        back[..image.len()] == image[..] && back[image.len()..].iter().all(|&b| b == 0),
        "export differs from the import"
    );
    let allocated_bytes = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(&export_path).unwrap().blocks() * 512
    };
    assert!(
        allocated_bytes < 2 << 20,
        "the export is sparse: {allocated_bytes} bytes allocated"
    );
    // qemu-img reads the same bytes over NBD.
    let converted = dir.path().join("converted.raw");
    run(
        "qemu-img",
        &[
            "convert",
            "-O",
            "raw",
            &socket_uri(&server, "rbd/imported"),
            converted.to_str().unwrap(),
        ],
    );
    assert!(
        std::fs::read(&converted).unwrap() == back,
        "qemu-img convert reads what export wrote"
    );

    // Resize: grow is seen by new connections; shrink needs --allow-shrink.
    server.ok(&["volume", "resize", "vm1", "--size", "128M"]);
    assert!(run("qemu-img", &["info", &uri]).contains("134217728 bytes"));
    let refused = strata(&server.args(&["volume", "resize", "vm1", "--size", "32M"]));
    assert!(!refused.status.success());
    server.ok(&["volume", "resize", "vm1", "--size", "32M", "--allow-shrink"]);
    assert!(run("qemu-img", &["info", &uri]).contains("33554432 bytes"));
    let io = run(
        "qemu-io",
        &["-f", "raw", "-c", "read -P 0xab 3584k 1536k", &uri],
    );
    assert!(
        !io.contains("Pattern verification failed"),
        "data below the new end stays: {io}"
    );

    let listed = server.ok(&["volume", "ls"]);
    assert!(
        listed.contains("vm1") && listed.contains("imported"),
        "{listed}"
    );
    server.ok(&["volume", "rm", "imported"]);
    server.ok(&["volume", "rm", "rbd/vm1"]);
    let listed = server.ok(&["volume", "ls", "--pool", "rbd"]);
    assert!(
        !listed.contains("vm1") && !listed.contains("imported"),
        "{listed}"
    );
    let objects = server.ok(&["ls", "rbd"]);
    assert!(
        !objects.contains("rbd_data.") && !objects.contains("rbd_header."),
        "{objects}"
    );
    server.stop();
    assert!(
        !dir.path().join("nbd.sock").exists(),
        "the socket is removed on shutdown"
    );
}

/// A volume whose data objects live on an erasure-coded pool (rbd's `--data-pool`): header
/// and directory on the replicated pool, data on the EC one; written, partly overwritten
/// (read-modify-write of EC stripes) and read back over NBD by qemu-io, through a restart of
/// the server; removed with its data objects.
#[test]
fn a_volume_keeps_its_data_on_an_erasure_coded_data_pool() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--no-s3", "--nbd-port", "0"]);
    server.ok(&["pool", "create", "rbd", "--size", "3"]);
    server.ok(&["pool", "create", "ecdata", "--erasure", "k=2,m=1"]);
    let refused = strata(&server.args(&[
        "volume",
        "create",
        "v0",
        "--size",
        "8M",
        "--data-pool",
        "nosuch",
    ]));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && stderr.contains("nosuch"),
        "a data pool that does not exist is named: {stderr}"
    );
    let created = server.ok(&[
        "volume",
        "create",
        "vm1",
        "--size",
        "16M",
        "--data-pool",
        "ecdata",
    ]);
    assert!(created.contains("data in pool ecdata"), "{created}");
    let info = server.ok(&["volume", "info", "rbd/vm1"]);
    assert!(
        info.contains("data_pool: ecdata") && info.contains("data-pool"),
        "{info}"
    );
    let uri = socket_uri(&server, "rbd/vm1");
    let commands = [
        "write -P 0xcd 1M 6M",
        "write -P 0x11 5M 4k",
        "write -P 0x22 6146k 3k",
    ];
    let verify = [
        "read -P 0xcd 1M 4M",
        "read -P 0x11 5M 4k",
        "read -P 0xcd 5124k 1022k",
        "read -P 0x22 6146k 3k",
        "read -P 0xcd 6149k 1019k",
        "read -P 0 7M 9M",
    ];
    let mut arguments = vec!["-f", "raw"];
    for command in commands.iter().chain(&verify) {
        arguments.extend(["-c", command]);
    }
    arguments.push(&uri);
    let io = run("qemu-io", &arguments);
    assert!(!io.contains("Pattern verification failed"), "{io}");
    let data_objects = server.ok(&["ls", "ecdata"]);
    assert!(
        data_objects.contains("rbd_data.") && !server.ok(&["ls", "rbd"]).contains("rbd_data."),
        "the data objects are in the data pool only: {data_objects}"
    );

    server.stop();
    let server = Server::start(dir.path(), &["--no-s3", "--nbd-port", "0"]);
    let uri = socket_uri(&server, "rbd/vm1");
    let mut arguments = vec!["-f", "raw"];
    for command in &verify {
        arguments.extend(["-c", command]);
    }
    arguments.push(&uri);
    let io = run("qemu-io", &arguments);
    assert!(
        !io.contains("Pattern verification failed"),
        "after a restart: {io}"
    );

    server.ok(&["volume", "rm", "vm1"]);
    let left = server.ok(&["ls", "ecdata"]);
    assert!(!left.contains("rbd_data."), "removed with its data: {left}");
    server.stop();
}

#[test]
fn acknowledged_volume_writes_survive_kill_9_of_serve() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--no-s3"]);
    server.ok(&["pool", "create", "rbd", "--size", "3"]);
    server.ok(&[
        "volume", "create", "crash", "--size", "64M", "--order", "20",
    ]);
    const BLOCK_BYTES: usize = 64 << 10;
    const BLOCKS: u64 = 1024;
    let socket = dir.path().join("nbd.sock");
    let acked = Arc::new(AtomicU64::new(0));
    let started = Arc::new(AtomicBool::new(false));
    let writer = {
        let (acked, started, socket) = (acked.clone(), started.clone(), socket.clone());
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let mut client = nbd::NbdClient::connect_unix(&socket, "rbd/crash")
                    .await
                    .expect("connect");
                started.store(true, Ordering::SeqCst);
                for block in 0..BLOCKS {
                    let data = pattern(block, BLOCK_BYTES);
                    if client
                        .write(block * BLOCK_BYTES as u64, &data, false)
                        .await
                        .is_err()
                    {
                        return;
                    }
                    acked.store(block + 1, Ordering::SeqCst);
                }
            });
        })
    };
    while !started.load(Ordering::SeqCst) || acked.load(Ordering::SeqCst) < 40 {
        assert!(!writer.is_finished(), "the writer stopped early");
        std::thread::sleep(Duration::from_millis(5));
    }
    server.kill();
    writer.join().unwrap();
    let acked = acked.load(Ordering::SeqCst);
    assert!(
        acked < BLOCKS,
        "the kill came during the writes ({acked} acknowledged)"
    );

    // The restarted server takes its own lease over at once and serves every acked write.
    let server = Server::start(dir.path(), &["--no-s3"]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut client = nbd::NbdClient::connect_unix(&socket, "rbd/crash")
            .await
            .expect("reconnect");
        let mut buffer = vec![0u8; BLOCK_BYTES];
        for block in 0..acked {
            client
                .read(block * BLOCK_BYTES as u64, &mut buffer)
                .await
                .expect("read");
            assert!(
                buffer == pattern(block, BLOCK_BYTES),
                "acknowledged block {block} of {acked} lost"
            );
        }
        client.disconnect().await.expect("disconnect");
    });
    let info = server.ok(&["volume", "info", "crash"]);
    let data_dir = std::fs::canonicalize(dir.path()).unwrap();
    assert!(
        info.contains("writer lease: strata-serve:") && info.contains(data_dir.to_str().unwrap()),
        "the restarted server took its own lease over: {info}"
    );
    server.stop();
}

#[test]
fn fio_verifies_a_replica_3_volume_while_an_osd_is_marked_out_and_back_in() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--no-s3"]);
    server.ok(&["pool", "create", "rbd", "--size", "3"]);
    server.ok(&["volume", "create", "moving", "--size", "64M"]);
    let uri = socket_uri(&server, "rbd/moving");
    // Writes then verifies while placement changes under it.
    let fio = {
        let uri = uri.clone();
        std::thread::spawn(move || {
            run(
                "fio",
                &[
                    "--name=moving",
                    "--ioengine=nbd",
                    &format!("--uri={uri}"),
                    "--rw=randwrite",
                    "--bs=16k",
                    "--size=48M",
                    "--iodepth=8",
                    // Paced (48 MiB at 8 MiB/s: about 6 s of writes) so the OSD goes out
                    // and comes back while fio writes, on a fast idle machine too.
                    "--rate=8m",
                    "--verify=crc32c",
                    "--do_verify=1",
                    "--verify_fatal=1",
                    "--verify_state_save=0",
                ],
            )
        })
    };
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!fio.is_finished(), "fio still runs when the OSD goes out");
    assert!(server.ok(&["osd", "out", "1"]).contains("marked osd.1 out"));
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!fio.is_finished(), "fio still runs when the OSD comes back");
    assert!(server.ok(&["osd", "in", "1"]).contains("marked osd.1 in"));
    let output = fio.join().unwrap();
    assert!(output.contains("err= 0"), "{output}");
    // And once more after recovery settled, reading everything back through qemu-img.
    let copy = dir.path().join("copy.raw");
    run(
        "qemu-img",
        &["convert", "-O", "raw", &uri, copy.to_str().unwrap()],
    );
    assert_eq!(std::fs::metadata(&copy).unwrap().len(), 64 << 20);
    server.stop();
}
