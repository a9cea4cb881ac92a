//! Shared by the `serve_*` tests: start the real `strata serve` on free ports and run the CLI.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Runs the CLI.
pub fn strata(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .output()
        .unwrap()
}

/// Runs the CLI with `input` on stdin.
pub fn strata_with_input(args: &[&str], input: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

/// Stdout of a CLI run that must succeed.
pub fn ok(args: &[&str]) -> String {
    let out = strata(args);
    assert!(
        out.status.success(),
        "strata {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A running `strata serve`; killed when dropped.
pub struct Server {
    pub child: Child,
    pub admin: String,
    /// The data directory (the CLI finds the admin token there).
    pub data: String,
    pub s3: Option<String>,
    /// What it printed up to "ready".
    pub banner: Vec<String>,
    pub lines: mpsc::Receiver<String>,
}

impl Server {
    /// Starts `strata serve --data DIR` on free ports and waits until it is ready.
    pub fn start(data: &Path, extra: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
            .args(["serve", "--data"])
            .arg(data)
            .args(["--admin", "127.0.0.1:0", "--s3", "127.0.0.1:0"])
            .args(extra)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let mut admin = None;
        let mut s3 = None;
        let mut banner = Vec::new();
        loop {
            let line = match lines.recv_timeout(Duration::from_secs(60)) {
                Ok(line) => line,
                Err(_) => {
                    let _ = child.kill();
                    panic!("strata serve did not become ready: {:?}", child.wait());
                }
            };
            if let Some(rest) = line.strip_prefix("strata: admin  http://") {
                admin = rest.split_whitespace().next().map(str::to_string);
            }
            if let Some(rest) = line.strip_prefix("strata: s3     http://") {
                s3 = Some(rest.trim().to_string());
            }
            let ready = line.contains("ready");
            banner.push(line);
            if ready {
                break;
            }
        }
        Server {
            child,
            admin: admin.expect("admin address printed"),
            data: data.display().to_string(),
            s3,
            banner,
            lines,
        }
    }

    /// CLI arguments pointing at this server.
    pub fn args<'a>(&'a self, args: &[&'a str]) -> Vec<&'a str> {
        let mut all = args.to_vec();
        all.extend(["--admin", self.admin.as_str(), "--data", self.data.as_str()]);
        all
    }

    /// Runs a CLI command against this server; it must succeed.
    pub fn ok(&self, args: &[&str]) -> String {
        ok(&self.args(args))
    }

    /// Stops with SIGTERM and waits; returns the remaining stdout lines.
    pub fn stop(mut self) -> Vec<String> {
        let pid = self.child.id().to_string();
        let status = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(status.success());
        let exit = self.child.wait().unwrap();
        assert!(exit.success(), "strata serve exited with {exit}");
        // The reader thread may not have passed on the last lines yet: take them until it
        // reaches the end of the output (it then drops its sender).
        let mut rest = Vec::new();
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(10)) {
            rest.push(line);
        }
        rest
    }

    /// SIGKILL.
    pub fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// The admin token `strata serve` keeps in the data directory.
    pub fn token(&self) -> String {
        std::fs::read_to_string(Path::new(&self.data).join("admin.token"))
            .unwrap()
            .trim()
            .to_string()
    }

    /// One raw HTTP request to the admin endpoint with the admin token: (status, body).
    pub fn http(&self, method: &str, path: &str, body: &[u8]) -> (u16, Vec<u8>) {
        let authorization = format!("Bearer {}", self.token());
        self.http_with(method, path, body, Some(&authorization))
    }

    /// One raw HTTP request with the given `Authorization` header (or none).
    pub fn http_with(
        &self,
        method: &str,
        path: &str,
        body: &[u8],
        authorization: Option<&str>,
    ) -> (u16, Vec<u8>) {
        let mut stream = std::net::TcpStream::connect(&self.admin).unwrap();
        let header = authorization
            .map(|value| format!("Authorization: {value}\r\n"))
            .unwrap_or_default();
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: x\r\n{header}Content-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .unwrap();
        stream.write_all(body).unwrap();
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).unwrap();
        let end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        let head = String::from_utf8_lossy(&raw[..end]).to_string();
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        (status, raw[end + 4..].to_vec())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
