//! The server against the crate's own client (every command, handshake options, errors) and
//! against real clients: nbdinfo, qemu-img, qemu-io, nbdcopy and fio's nbd engine (each
//! skipped with a note when absent).

mod common;

use common::{have, run};

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use device::{Device, MemoryDevice};
use nbd::{proto, ExportConfig, NbdClient, NbdError, NbdServer};

/// A server on a unix socket in a temporary directory, running on its own runtime.
struct Running {
    _directory: tempfile::TempDir,
    socket: PathBuf,
    runtime: tokio::runtime::Runtime,
    device: Arc<dyn Device>,
}

fn start(size_bytes: u64, config: ExportConfig) -> Running {
    let directory = tempfile::tempdir().unwrap();
    let socket = directory.path().join("nbd.sock");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let device: Arc<dyn Device> =
        Arc::new(MemoryDevice::with_block_size("m", size_bytes, 512).unwrap());
    let server = NbdServer::new(Arc::clone(&device), config);
    let listener = {
        let _guard = runtime.enter();
        NbdServer::bind_unix(&socket).unwrap()
    };
    runtime.spawn(server.serve_unix(listener));
    Running {
        _directory: directory,
        socket,
        runtime,
        device,
    }
}

fn uri(socket: &Path) -> String {
    format!("nbd+unix:///?socket={}", socket.display())
}

#[test]
fn every_command_through_the_rust_client() {
    let running = start(8 << 20, ExportConfig::default());
    running.runtime.block_on(async {
        let mut client = NbdClient::connect_unix(&running.socket, "").await.unwrap();
        let info = client.info();
        assert_eq!(info.size_bytes, 8 << 20);
        assert_eq!(info.block_sizes, Some((512, 4096, 32 << 20)));
        for flag in [
            proto::TFLAG_HAS_FLAGS,
            proto::TFLAG_SEND_FLUSH,
            proto::TFLAG_SEND_FUA,
            proto::TFLAG_SEND_TRIM,
            proto::TFLAG_SEND_WRITE_ZEROES,
            proto::TFLAG_CAN_MULTI_CONN,
        ] {
            assert_ne!(info.flags & flag, 0, "flag {flag:#x}");
        }
        let data: Vec<u8> = (0..65536u32).map(|i| (i * 7 % 251) as u8).collect();
        client.write(4096, &data, false).await.unwrap();
        client.write(1 << 20, &data, true).await.unwrap();
        let mut back = vec![0u8; data.len()];
        client.read(4096, &mut back).await.unwrap();
        assert_eq!(back, data);
        client.flush().await.unwrap();
        client.write_zeroes(4096, 8192).await.unwrap();
        client.read(4096, &mut back).await.unwrap();
        assert!(back[..8192].iter().all(|&b| b == 0));
        assert_eq!(&back[8192..], &data[8192..]);
        client.trim(1 << 20, 65536).await.unwrap();
        // Errors: misaligned, past the end (read EINVAL, write ENOSPC).
        let mut small = [0u8; 100];
        assert!(matches!(
            client.read(1, &mut small).await,
            Err(NbdError::Server {
                errno: proto::EINVAL
            })
        ));
        assert!(matches!(
            client.read(8 << 20, &mut back).await,
            Err(NbdError::Server {
                errno: proto::EINVAL
            })
        ));
        assert!(matches!(
            client.write(8 << 20, &data, false).await,
            Err(NbdError::Server {
                errno: proto::ENOSPC
            })
        ));
        // The connection survives errors.
        client.read(1 << 20, &mut back).await.unwrap();
        assert!(back.iter().all(|&b| b == 0), "trimmed range reads zeros");
        client.disconnect().await.unwrap();
        assert!(
            running.device.stats().flush.ops >= 2,
            "FUA and FLUSH reach the device"
        );
    });
}

#[test]
fn handshake_refuses_unknown_exports_and_bad_options() {
    let config = ExportConfig {
        name: "disk".into(),
        ..ExportConfig::default()
    };
    let running = start(1 << 20, config);
    running.runtime.block_on(async {
        assert!(NbdClient::connect_unix(&running.socket, "disk")
            .await
            .is_ok());
        assert!(NbdClient::connect_unix(&running.socket, "").await.is_ok());
        assert!(matches!(
            NbdClient::connect_unix(&running.socket, "other").await,
            Err(NbdError::Refused {
                reply: proto::REP_ERR_UNKNOWN,
                ..
            })
        ));
        // Structured replies are taken; meta contexts without them (and without data) are
        // invalid; extended headers (11) are not supported.
        for (option, expected) in [
            (proto::OPT_STRUCTURED_REPLY, proto::REP_ACK),
            (proto::OPT_LIST_META_CONTEXT, proto::REP_ERR_INVALID),
            (proto::OPT_SET_META_CONTEXT, proto::REP_ERR_INVALID),
            (11, proto::REP_ERR_UNSUP),
        ] {
            let stream = tokio::net::UnixStream::connect(&running.socket)
                .await
                .unwrap();
            let reply = NbdClient::probe_option(stream, option).await.unwrap();
            assert_eq!(reply, expected, "option {option}");
        }
        let stream = tokio::net::UnixStream::connect(&running.socket)
            .await
            .unwrap();
        let reply = NbdClient::probe_option_with(stream, proto::OPT_STRUCTURED_REPLY, b"x")
            .await
            .unwrap();
        assert_eq!(
            reply,
            proto::REP_ERR_INVALID,
            "STRUCTURED_REPLY takes no data"
        );
        let stream = tokio::net::UnixStream::connect(&running.socket)
            .await
            .unwrap();
        let reply = NbdClient::probe_option(stream, proto::OPT_LIST)
            .await
            .unwrap();
        assert_eq!(reply, proto::REP_SERVER);
        // LIST takes no data.
        let stream = tokio::net::UnixStream::connect(&running.socket)
            .await
            .unwrap();
        let reply = NbdClient::probe_option_with(stream, proto::OPT_LIST, b"x")
            .await
            .unwrap();
        assert_eq!(reply, proto::REP_ERR_INVALID);
    });
}

#[test]
fn read_only_export_refuses_writes_with_eperm() {
    let config = ExportConfig {
        read_only: true,
        ..ExportConfig::default()
    };
    let running = start(1 << 20, config);
    running.runtime.block_on(async {
        let mut client = NbdClient::connect_unix(&running.socket, "").await.unwrap();
        assert_ne!(client.info().flags & proto::TFLAG_READ_ONLY, 0);
        for result in [
            client.write(0, &[1u8; 512], false).await,
            client.trim(0, 512).await,
            client.write_zeroes(0, 512).await,
        ] {
            assert!(matches!(
                result,
                Err(NbdError::Server {
                    errno: proto::EPERM
                })
            ));
        }
        let mut back = [9u8; 512];
        client.read(0, &mut back).await.unwrap();
        assert_eq!(back, [0u8; 512]);
        assert_eq!(running.device.stats().write.ops, 0);
    });
}

#[test]
fn tcp_and_several_connections() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let device: Arc<dyn Device> = Arc::new(MemoryDevice::new("m", 1 << 20).unwrap());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        tokio::spawn(NbdServer::new(device, ExportConfig::default()).serve_tcp(listener));
        let mut tasks = Vec::new();
        for index in 0..4u8 {
            let address = address.clone();
            tasks.push(tokio::spawn(async move {
                let mut client = NbdClient::connect_tcp(&address, "").await.unwrap();
                let offset = u64::from(index) * 65536;
                for round in 0..50u8 {
                    let data = vec![index ^ round; 4096];
                    client.write(offset, &data, false).await.unwrap();
                    let mut back = vec![0u8; 4096];
                    client.read(offset, &mut back).await.unwrap();
                    assert_eq!(back, data);
                }
                client.disconnect().await.unwrap();
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
    });
}

#[test]
fn nbdinfo_and_nbdcopy() {
    if !have("nbdinfo") {
        return;
    }
    let running = start(16 << 20, ExportConfig::default());
    let text = run(Command::new("nbdinfo").arg(uri(&running.socket)));
    assert!(text.contains("16777216"), "{text}");
    assert!(text.contains("can_flush: true"), "{text}");
    assert!(text.contains("can_multi_conn: true"), "{text}");
    if !have("nbdcopy") {
        return;
    }
    let directory = tempfile::tempdir().unwrap();
    let source = directory.path().join("in.img");
    let data: Vec<u8> = (0..16u32 << 20).map(|i| (i % 253) as u8).collect();
    std::fs::write(&source, &data).unwrap();
    run(Command::new("nbdcopy")
        .arg(&source)
        .arg(uri(&running.socket)));
    let target = directory.path().join("out.img");
    run(Command::new("nbdcopy")
        .arg(uri(&running.socket))
        .arg(&target));
    assert!(
        std::fs::read(&target).unwrap() == data,
        "nbdcopy round trip"
    );
}

#[test]
fn qemu_img_and_qemu_io() {
    if !have("qemu-io") || !have("qemu-img") {
        return;
    }
    let running = start(16 << 20, ExportConfig::default());
    let target = uri(&running.socket);
    let text = run(Command::new("qemu-img").args(["info", "--output=json", &target]));
    assert!(text.contains("\"virtual-size\": 16777216"), "{text}");
    let text = run(Command::new("qemu-io").args([
        "-f",
        "raw",
        "-c",
        "write -P 0xab 0 1M",
        "-c",
        "read -P 0xab 0 1M",
        "-c",
        "write -z 1M 64k",
        "-c",
        "read -P 0 1M 64k",
        "-c",
        "flush",
        &target,
    ]));
    assert!(!text.contains("Pattern verification failed"), "{text}");
    let directory = tempfile::tempdir().unwrap();
    let copy = directory.path().join("copy.qcow2");
    run(Command::new("qemu-img")
        .args(["convert", "-f", "raw", "-O", "qcow2", &target])
        .arg(&copy));
    run(Command::new("qemu-img")
        .args(["compare", "-f", "raw", "-F", "qcow2", &target])
        .arg(&copy));
}

#[test]
fn fio_nbd_engine_verifies_crc32c() {
    if !have("fio") {
        return;
    }
    let running = start(64 << 20, ExportConfig::default());
    // fio writes its verify state file into the working directory.
    let scratch = tempfile::tempdir().unwrap();
    let text = run(Command::new("fio").current_dir(scratch.path()).args([
        "--name=verify",
        "--ioengine=nbd",
        &format!("--uri={}", uri(&running.socket)),
        "--rw=randwrite",
        "--bs=4k",
        "--iodepth=32",
        "--size=16m",
        "--verify=crc32c",
        "--verify_fatal=1",
        "--do_verify=1",
    ]));
    assert!(!text.contains("verify: bad"), "{text}");
    assert!(running.device.stats().write.ops >= 4096);
}

/// Several exports by name: each name reaches its own device, the empty name the first,
/// an unknown name is refused, and nbdinfo --list shows them all.
#[test]
fn several_named_exports() {
    let directory = tempfile::tempdir().unwrap();
    let socket = directory.path().join("nbd.sock");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let first: Arc<dyn Device> =
        Arc::new(MemoryDevice::with_block_size("a", 1 << 20, 512).unwrap());
    let second: Arc<dyn Device> =
        Arc::new(MemoryDevice::with_block_size("b", 2 << 20, 512).unwrap());
    let named = |name: &str| ExportConfig {
        name: name.into(),
        ..ExportConfig::default()
    };
    let server = NbdServer::with_exports(vec![
        (Arc::clone(&first), named("core1")),
        (Arc::clone(&second), named("core2")),
    ]);
    let listener = {
        let _guard = runtime.enter();
        NbdServer::bind_unix(&socket).unwrap()
    };
    runtime.spawn(server.serve_unix(listener));
    runtime.block_on(async {
        for (name, size_bytes, value) in [
            ("core1", 1 << 20, 1u8),
            ("core2", 2 << 20, 2),
            ("", 1 << 20, 3),
        ] {
            let mut client = NbdClient::connect_unix(&socket, name).await.unwrap();
            assert_eq!(client.info().size_bytes, size_bytes, "export {name:?}");
            client.write(0, &[value; 4096], false).await.unwrap();
            client.disconnect().await.unwrap();
        }
        assert!(NbdClient::connect_unix(&socket, "core3").await.is_err());
        let mut back = [0u8; 4096];
        first.read_at(0, &mut back).await.unwrap();
        assert_eq!(back, [3u8; 4096], "the default export is the first");
        second.read_at(0, &mut back).await.unwrap();
        assert_eq!(back, [2u8; 4096]);
    });
    if have("nbdinfo") {
        let text = run(Command::new("nbdinfo").arg("--list").arg(uri(&socket)));
        assert!(text.contains("core1") && text.contains("core2"), "{text}");
    }
}

#[test]
fn write_zeroes_past_the_end_changes_nothing() {
    let running = start(1 << 20, ExportConfig::default());
    running.runtime.block_on(async {
        let mut client = NbdClient::connect_unix(&running.socket, "").await.unwrap();
        // 2 MiB from 0 on a 1 MiB export: the first 1 MiB chunk alone would fit.
        let tail = 0;
        client.write(tail, &[7u8; 4096], false).await.unwrap();
        let result = client.write_zeroes(tail, 2 << 20).await;
        assert!(
            matches!(
                result,
                Err(NbdError::Server {
                    errno: proto::ENOSPC
                })
            ),
            "{result:?}"
        );
        let mut back = [0u8; 4096];
        client.read(tail, &mut back).await.unwrap();
        assert_eq!(back, [7u8; 4096], "the part inside the export was zeroed");
    });
}

/// A raw client: the fixed-newstyle handshake with `client_flags`, then EXPORT_NAME "".
/// `None` when the server closed the connection during the handshake.
async fn raw_handshake(socket: &Path, client_flags: u32) -> Option<tokio::net::UnixStream> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::UnixStream::connect(socket).await.unwrap();
    let mut greeting = [0u8; 18];
    stream.read_exact(&mut greeting).await.unwrap();
    stream.write_u32(client_flags).await.unwrap();
    stream.write_u64(proto::IHAVEOPT).await.ok()?;
    stream.write_u32(proto::OPT_EXPORT_NAME).await.ok()?;
    stream.write_u32(0).await.ok()?;
    let mut export = [0u8; 10];
    stream.read_exact(&mut export).await.ok()?;
    Some(stream)
}

/// Regression (issue 43): a request with command flags the server does not know was served
/// as if they were absent; the protocol asks for EINVAL. Unknown client flags in the
/// handshake close the connection (the client was left waiting before).
#[test]
fn unknown_flags_are_refused() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const LIMIT: std::time::Duration = std::time::Duration::from_secs(10);
    let running = start(1 << 20, ExportConfig::default());
    let fixed = u32::from(proto::FLAG_FIXED_NEWSTYLE | proto::FLAG_NO_ZEROES);
    running.runtime.block_on(async {
        let mut stream = tokio::time::timeout(LIMIT, raw_handshake(&running.socket, fixed))
            .await
            .expect("handshake")
            .expect("accepted");
        for (cookie, flags, command) in [
            (1u64, 1u16 << 7, proto::CMD_READ),
            (2, 1 << 2, proto::CMD_READ),
            (3, proto::CMD_FLAG_NO_HOLE, proto::CMD_FLUSH),
        ] {
            let request = proto::Request {
                flags,
                command,
                cookie,
                offset_bytes: 0,
                length_bytes: if command == proto::CMD_READ { 4096 } else { 0 },
            };
            stream.write_all(&request.encode()).await.unwrap();
            let mut reply = [0u8; proto::REPLY_BYTES];
            tokio::time::timeout(LIMIT, stream.read_exact(&mut reply))
                .await
                .expect("a reply, not a hang")
                .unwrap();
            let error = u32::from_be_bytes(reply[4..8].try_into().unwrap());
            let echoed = u64::from_be_bytes(reply[8..16].try_into().unwrap());
            assert_eq!((error, echoed), (proto::EINVAL, cookie), "flags {flags:#x}");
        }
        // The connection still serves requests with known flags.
        let request = proto::Request {
            flags: proto::CMD_FLAG_FUA,
            command: proto::CMD_FLUSH,
            cookie: 9,
            offset_bytes: 0,
            length_bytes: 0,
        };
        stream.write_all(&request.encode()).await.unwrap();
        let mut reply = [0u8; proto::REPLY_BYTES];
        tokio::time::timeout(LIMIT, stream.read_exact(&mut reply))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(u32::from_be_bytes(reply[4..8].try_into().unwrap()), 0);

        let refused = tokio::time::timeout(LIMIT, raw_handshake(&running.socket, fixed | 1 << 9))
            .await
            .expect("the server closes, the client does not hang");
        assert!(
            refused.is_none(),
            "unknown client flags must close the connection"
        );
    });
}
