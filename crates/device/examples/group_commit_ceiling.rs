//! The disk's ceiling for the store's group commit, with no software in the way: how many
//! durable 4 KiB writes per second the disk takes when a batch's writers wait a fixed time
//! between their batch's flush and their next writes.
//!
//! Why: `strata bench cluster` compares replica-1 object writes with fio's random writes
//! (issue 3 asks for half of them). Each store batch is a joined data write plus a log record,
//! both submitted at once, then a device flush; the next batch's writes go out while the
//! previous flush runs (`store::commit`). This program runs exactly that device pattern from
//! one thread through io_uring and leaves out everything else: no allocator, no metadata, no
//! thread handoffs, no runtime. With no wait, every writer is in every batch, which is the
//! most group commit can do. The wait stands in for the store's software time per round trip
//! (apply, answer, the client's next request, prepare). The table shows how fast throughput
//! falls as that time grows, beside fio on the same file in the same run.
//!
//! Writers rejoin together after the wait, so batches stay whole: an upper bound for a store
//! whose writers come back spread out. During a wait the thread polls the ring without
//! sleeping.
//!
//! `cargo run -p device --release --example group_commit_ceiling [path] [writers] [seconds]`
//! (defaults: ./group-commit-ceiling.img (2 GiB, written once, removed at the end), 16
//! writers, 4 s per row).
#![allow(unsafe_code)]

use std::collections::VecDeque;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use device::AlignedBuffer;
use io_uring::{cqueue, opcode, types, IoUring};

const BLOCK_BYTES: usize = 4096;
const FILE_BYTES: u64 = 2 << 30;
/// The log's region at the end of the file, as the store puts it at the end of its device.
const LOG_BYTES: u64 = 64 << 20;
/// Software time per round trip, the table's rows.
const WAITS_MICROS: [u64; 6] = [0, 50, 100, 150, 200, 250];

/// A completion's `user_data`: the batch number shifted left by one, the low bit set for a
/// flush.
const FLUSH_BIT: u64 = 1;

struct Measured {
    writes_per_second: f64,
    writes_per_batch: f64,
}

/// The batches in flight on one file.
struct InFlight {
    fd: types::Fd,
    /// The batch whose two writes are in flight: (number, writers, writes not completed).
    writing: Option<(u64, usize, u32)>,
    /// Batches written whose flush is in flight: (number, writers).
    flushing: Vec<(u64, usize)>,
}

impl InFlight {
    fn is_empty(&self) -> bool {
        self.writing.is_none() && self.flushing.is_empty()
    }

    /// Takes one completion; returns the writers it made durable.
    fn complete(&mut self, ring: &mut IoUring, user_data: u64, result: i32) -> Result<usize> {
        if result < 0 {
            bail!("{}", std::io::Error::from_raw_os_error(-result));
        }
        let batch = user_data >> 1;
        if user_data & FLUSH_BIT != 0 {
            // This flush started after the writes of every batch up to its own completed.
            let mut durable = 0;
            self.flushing.retain(|&(number, count)| {
                if number > batch {
                    return true;
                }
                durable += count;
                false
            });
            return Ok(durable);
        }
        let Some((number, count, left)) = self.writing.take() else {
            bail!("a write completed with no batch in flight");
        };
        if number != batch {
            bail!("batch {batch}'s write completed during batch {number}'s");
        }
        if left > 1 {
            self.writing = Some((number, count, left - 1));
            return Ok(0);
        }
        // Both writes are done: the flush that covers them may start.
        let flush = opcode::Fsync::new(self.fd)
            .flags(types::FsyncFlags::DATASYNC)
            .build()
            .user_data(user_data | FLUSH_BIT);
        // SAFETY: a flush borrows no memory.
        unsafe { ring.submission().push(&flush) }
            .map_err(|_| anyhow::anyhow!("submission queue full"))?;
        self.flushing.push((number, count));
        Ok(0)
    }
}

/// The completions waiting in the ring, as (`user_data`, result).
fn completions(ring: &mut IoUring) -> Vec<(u64, i32)> {
    ring.completion()
        .map(|entry: cqueue::Entry| (entry.user_data(), entry.result()))
        .collect()
}

/// Runs the batch pattern for `run_for` with `writers` writers that wait `wait` after their
/// batch is durable.
fn run(
    file: &std::fs::File,
    writers: usize,
    wait: Duration,
    run_for: Duration,
) -> Result<Measured> {
    let fd = types::Fd(file.as_raw_fd());
    let data = AlignedBuffer::gathered(&[&vec![0x5Au8; writers * BLOCK_BYTES]], BLOCK_BYTES);
    let record = AlignedBuffer::gathered(&[&[0xA5u8; BLOCK_BYTES]], BLOCK_BYTES);
    // Made after the buffers, so dropped before them.
    let mut ring = IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .build(64)
        .context("making an io_uring")?;
    let log_start = FILE_BYTES - LOG_BYTES;
    let mut data_cursor = 0u64;
    let mut log_cursor = log_start;
    // Writers ready for their next write, and writers waiting to become ready.
    let mut ready = writers;
    let mut returning: VecDeque<(Instant, usize)> = VecDeque::new();
    let mut in_flight = InFlight {
        fd,
        writing: None,
        flushing: Vec::new(),
    };
    let mut batches = 0u64;
    let mut durable_writes = 0u64;
    let start = Instant::now();
    let mut go = || -> Result<()> {
        while start.elapsed() < run_for {
            let now = Instant::now();
            while let Some(&(_, count)) = returning.front().filter(|(at, _)| *at <= now) {
                ready += count;
                returning.pop_front();
            }
            if in_flight.writing.is_none() && ready > 0 {
                let length_bytes = ready * BLOCK_BYTES;
                if data_cursor + length_bytes as u64 > log_start {
                    data_cursor = 0;
                }
                if log_cursor + BLOCK_BYTES as u64 > FILE_BYTES {
                    log_cursor = log_start;
                }
                let user_data = batches << 1;
                let entries = [
                    opcode::Write::new(fd, data.as_slice().as_ptr(), length_bytes as u32)
                        .offset(data_cursor)
                        .build()
                        .user_data(user_data),
                    opcode::Write::new(fd, record.as_slice().as_ptr(), BLOCK_BYTES as u32)
                        .offset(log_cursor)
                        .build()
                        .user_data(user_data),
                ];
                for entry in &entries {
                    // SAFETY: the buffers outlive the ring (made after them, so dropped
                    // first), and on success every submission has completed before it goes.
                    if unsafe { ring.submission().push(entry) }.is_err() {
                        bail!("submission queue full");
                    }
                }
                data_cursor += length_bytes as u64;
                log_cursor += BLOCK_BYTES as u64;
                in_flight.writing = Some((batches, ready, 2));
                batches += 1;
                ready = 0;
            }
            if returning.is_empty() {
                ring.submit_and_wait(1)?;
            } else {
                ring.submit()?;
            }
            let completed = completions(&mut ring);
            let until = Instant::now() + wait;
            for (user_data, result) in completed {
                let durable = in_flight.complete(&mut ring, user_data, result)?;
                if durable > 0 {
                    durable_writes += durable as u64;
                    returning.push_back((until, durable));
                }
            }
        }
        Ok(())
    };
    let result = go();
    let seconds = start.elapsed().as_secs_f64();
    // Everything in flight completes before the next row starts.
    while result.is_ok() && !in_flight.is_empty() {
        ring.submit_and_wait(1)?;
        let completed = completions(&mut ring);
        for (user_data, result) in completed {
            in_flight.complete(&mut ring, user_data, result)?;
        }
    }
    result?;
    Ok(Measured {
        writes_per_second: durable_writes as f64 / seconds,
        writes_per_batch: durable_writes as f64 / batches.max(1) as f64,
    })
}

/// fio's 4 KiB random writes at `writers` in flight on the same file, with an fdatasync
/// after every `fdatasync` writes (0: none); `None` if fio is not installed.
fn fio(path: &str, writers: usize, fdatasync: usize, seconds: f64) -> Option<f64> {
    let output = Command::new("fio")
        .args([
            "--name=ceiling",
            "--rw=randwrite",
            "--bs=4k",
            "--direct=1",
            "--ioengine=libaio",
            "--time_based=1",
            "--output-format=json",
        ])
        .arg(format!("--filename={path}"))
        .arg(format!("--size={FILE_BYTES}"))
        .arg(format!("--iodepth={writers}"))
        .arg(format!("--fdatasync={fdatasync}"))
        .arg(format!("--runtime={}", seconds.ceil() as u64))
        .output()
        .ok()?;
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).ok()?;
    json["jobs"][0]["write"]["iops"].as_f64()
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .unwrap_or_else(|| "group-commit-ceiling.img".into());
    let writers: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(16);
    let seconds: f64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(4.0);
    if writers == 0 || writers > 256 {
        bail!("writers must be 1 to 256, not {writers}");
    }
    if !(seconds > 0.0 && seconds.is_finite()) {
        bail!("seconds must be a positive number, not {seconds}");
    }
    // The 2 GiB file goes away however this ends.
    let _remove = RemoveOnDrop(std::path::PathBuf::from(&path));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
        .with_context(|| format!("creating {path} with O_DIRECT"))?;
    // Written once, as fio lays out its file: with data, through O_DIRECT. On this VM fio's
    // random writes ran at about 60-70k writes/s on a file laid out with zeros and 90k on one
    // laid out with data through the page cache, against 110-120k (alternating runs). The
    // host presumably keeps zeroed ranges unallocated.
    let chunk = AlignedBuffer::gathered(&[&vec![0x5Au8; 4 << 20]], BLOCK_BYTES);
    let mut offset_bytes = 0;
    while offset_bytes < FILE_BYTES {
        file.write_all_at(chunk.as_slice(), offset_bytes)?;
        offset_bytes += chunk.as_slice().len() as u64;
    }
    file.sync_all()?;
    let run_for = Duration::from_secs_f64(seconds);
    println!(
        "{writers} writers, each batch one joined data write + one 4 KiB record, then a flush \
         (the next batch's writes overlap it); {path}"
    );
    println!(
        "{:>30} {:>16} {:>12}",
        "software µs per round trip", "durable writes/s", "per batch"
    );
    for wait_micros in WAITS_MICROS {
        let measured = run(&file, writers, Duration::from_micros(wait_micros), run_for)?;
        println!(
            "{:>30} {:>16.0} {:>12.1}",
            wait_micros, measured.writes_per_second, measured.writes_per_batch
        );
    }
    for (label, fdatasync) in [
        ("fio randwrite", 0),
        ("fio randwrite, fdatasync/batch", writers),
    ] {
        match fio(&path, writers, fdatasync, seconds) {
            Some(iops) => println!("{label:>30} {iops:>16.0}"),
            None => println!("{label:>30} {:>16}", "(no fio)"),
        }
    }
    Ok(())
}

/// Removes its file when dropped.
struct RemoveOnDrop(std::path::PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
