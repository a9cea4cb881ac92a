//! The crate's io_uring use: several writes to one file submitted together and waited for in
//! one system call, on the calling thread.
//!
//! Why: the store's writer thread writes a batch's data and its log record at the same time.
//! Done with `pwrite`, one of the two went to another thread and came back (two thread
//! wake-ups and four context switches per batch on a machine where those dominate); through a
//! ring, the thread submits both and sleeps once until both are done.
//!
//! Each thread that calls it gets a ring of its own (made on first use, single issuer, with
//! completions run when the thread waits), so no lock is shared and the kernel does no work on
//! other threads' behalf.
#![allow(unsafe_code)]

use std::cell::RefCell;
use std::io;
use std::os::fd::RawFd;

use io_uring::{opcode, types, IoUring};

/// Submission queue entries of a ring; more writes are submitted in rounds of this many.
const RING_ENTRIES: u32 = 32;

/// Times a busy wait for completions (EAGAIN, EBUSY) is retried before giving up on a ring;
/// an interrupted one (EINTR) is always retried.
const WAIT_ATTEMPTS_MAX: u32 = 1000;

/// The calling thread's ring.
enum Ring {
    /// Not made yet, or the last one failed.
    Unmade,
    Ready(Box<IoUring>),
    /// The kernel refused to make one (io_uring disabled, or filtered by a sandbox): writes
    /// go one by one for the rest of the thread's life.
    Refused,
}

thread_local! {
    static RING: RefCell<Ring> = const { RefCell::new(Ring::Unmade) };
}

/// Writes every `(offset, data)` of `writes` to `fd` at once. Returns, per write, the bytes
/// the kernel wrote (possibly short) or its error; `Err` when no ring could be made for this
/// thread, before any write was submitted (the caller then writes them another way).
///
/// Every buffer is borrowed until this returns, and this returns only once the kernel has
/// completed every write it submitted. If waiting fails in a way no retry mends (a kernel bug
/// or a broken ring) while writes are in flight, the process aborts: returning would free
/// buffers the kernel may still read, so it could write other memory's bytes to the disk
/// later, over a place the caller has moved on from. A crash loses nothing acknowledged (the
/// store is crash-consistent), which is also BlueStore's answer to an I/O it cannot account
/// for. With nothing in flight the writes are reported failed and the next call makes a new
/// ring.
pub(crate) fn write_all_at(
    fd: RawFd,
    writes: &[(u64, &[u8])],
) -> io::Result<Vec<io::Result<usize>>> {
    RING.with(|cell| {
        let mut slot = cell.borrow_mut();
        if matches!(*slot, Ring::Unmade) {
            *slot = match IoUring::builder()
                .setup_single_issuer()
                .setup_defer_taskrun()
                .build(RING_ENTRIES)
            {
                Ok(ring) => Ring::Ready(Box::new(ring)),
                Err(error) => {
                    tracing::warn!(%error, "no io_uring for this thread; its writes go one by one");
                    Ring::Refused
                }
            };
        }
        let Ring::Ready(ring) = &mut *slot else {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "io_uring refused",
            ));
        };
        let mut results: Vec<io::Result<usize>> = Vec::with_capacity(writes.len());
        for round in writes.chunks(RING_ENTRIES as usize) {
            match submit_round(ring, fd, round, results.len()) {
                Ok(round_results) => results.extend(round_results),
                Err(error) => {
                    // The ring is in an unknown state: the next call makes a new one.
                    *slot = Ring::Unmade;
                    let failed = writes.len() - results.len();
                    results.extend(
                        (0..failed).map(|_| Err(io::Error::new(error.kind(), error.to_string()))),
                    );
                    return Ok(results);
                }
            }
        }
        Ok(results)
    })
}

/// Submits one round (at most `RING_ENTRIES` writes) and waits for all of its completions.
fn submit_round(
    ring: &mut IoUring,
    fd: RawFd,
    round: &[(u64, &[u8])],
    first_index: usize,
) -> io::Result<Vec<io::Result<usize>>> {
    // Checked before anything is queued, so an error leaves nothing queued behind.
    if round
        .iter()
        .any(|(_, data)| u32::try_from(data.len()).is_err())
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "an io_uring write of 4 GiB or more",
        ));
    }
    for (index, (offset_bytes, data)) in round.iter().enumerate() {
        let length = data.len() as u32;
        let entry = opcode::Write::new(types::Fd(fd), data.as_ptr(), length)
            .offset(*offset_bytes)
            .build()
            .user_data((first_index + index) as u64);
        // SAFETY: the entry points into `data`, borrowed for the whole call, and the call
        // returns only after every submitted entry completed (below). The queue has room:
        // a round is at most the ring's size and each round is drained before the next.
        unsafe { ring.submission().push(&entry) }
            .map_err(|_| io::Error::other("io_uring submission queue full"))?;
    }
    let mut results: Vec<Option<io::Result<usize>>> = round.iter().map(|_| None).collect();
    let mut completed = 0;
    let mut attempts = 0;
    while completed < round.len() {
        match ring.submit_and_wait(round.len() - completed) {
            Ok(_) => {}
            Err(error) if error.raw_os_error() == Some(libc::EINTR) => {}
            Err(error)
                if matches!(error.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EBUSY))
                    && attempts < WAIT_ATTEMPTS_MAX =>
            {
                attempts += 1;
            }
            Err(error) => {
                // Entries the kernel has not taken are still in the queue; they go with the
                // ring. Taken and not completed ones are in flight.
                let queued = ring.submission().len();
                let in_flight = in_flight(round.len(), completed, queued);
                if in_flight > 0 {
                    abort_in_flight(in_flight, &error);
                }
                return Err(error);
            }
        }
        for entry in ring.completion() {
            let Some(index) = (entry.user_data() as usize).checked_sub(first_index) else {
                continue;
            };
            let Some(result) = results.get_mut(index) else {
                continue;
            };
            if result.is_none() {
                completed += 1;
            }
            *result = Some(match entry.result() {
                bytes if bytes >= 0 => Ok(bytes as usize),
                errno => Err(io::Error::from_raw_os_error(-errno)),
            });
        }
    }
    Ok(results
        .into_iter()
        .map(|result| result.unwrap_or_else(|| Err(io::Error::other("no completion"))))
        .collect())
}

/// Writes the kernel took and has not completed: of a round of `submitted`, `completed` came
/// back and `queued` are still in the submission queue (not taken).
fn in_flight(submitted: usize, completed: usize, queued: usize) -> usize {
    submitted.saturating_sub(completed + queued)
}

/// Ends the process: `in_flight` writes may still read their buffers, which cannot be kept.
fn abort_in_flight(in_flight: usize, error: &io::Error) -> ! {
    tracing::error!(
        in_flight,
        %error,
        "waiting for io_uring writes failed with writes in flight; aborting so their buffers \
         cannot be reused under them"
    );
    eprintln!(
        "strata: waiting for io_uring writes failed with {in_flight} in flight ({error}); \
         aborting so their buffers cannot be reused under them"
    );
    std::process::abort()
}

#[cfg(test)]
mod tests {
    use super::in_flight;

    #[test]
    fn writes_taken_and_not_completed_are_in_flight() {
        // Nothing taken, or everything back: safe to return.
        assert_eq!(in_flight(4, 0, 4), 0);
        assert_eq!(in_flight(4, 4, 0), 0);
        // Taken and not back: the process must not free their buffers.
        assert_eq!(in_flight(4, 1, 0), 3);
        assert_eq!(in_flight(4, 1, 2), 1);
    }
}
