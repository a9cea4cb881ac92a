//! `strata nbd serve` end to end: the binary serves a memory device to nbdinfo and to the
//! crate's own client.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn wait_for(path: &Path, child: &mut Child) {
    let started = Instant::now();
    while !path.exists() {
        assert!(child.try_wait().unwrap().is_none(), "server exited early");
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no socket at {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn serves_a_memory_device_over_a_unix_socket() {
    let directory = tempfile::tempdir().unwrap();
    let socket = directory.path().join("nbd.sock");
    let mut server = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args([
            "nbd", "serve", "--device", "mem:64M", "--export", "disk", "--socket",
        ])
        .arg(&socket)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&socket, &mut server);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut client = nbd::NbdClient::connect_unix(&socket, "disk").await.unwrap();
        assert_eq!(client.info().size_bytes, 64 << 20);
        client.write(4096, &[5u8; 8192], true).await.unwrap();
        let mut back = [0u8; 8192];
        client.read(4096, &mut back).await.unwrap();
        assert_eq!(back, [5u8; 8192]);
        client.disconnect().await.unwrap();
    });
    let nbdinfo = Command::new("nbdinfo")
        .arg(format!("nbd+unix:///disk?socket={}", socket.display()))
        .output();
    match nbdinfo {
        Ok(output) => {
            let text = String::from_utf8_lossy(&output.stdout);
            assert!(
                output.status.success() && text.contains("67108864"),
                "{text}"
            );
        }
        Err(_) => eprintln!("note: nbdinfo not installed; skipped"),
    }
    server.kill().unwrap();
    server.wait().unwrap();
}
