//! librados aio completions bridged to futures.
//!
//! An operation's buffers and output slots travel with its completion: they are boxed with the
//! sender of a oneshot channel, handed to librados as the callback's argument, and given back
//! through the channel when librados calls the callback. If the awaiting future is dropped
//! first, the callback still owns them and frees them only after librados is done, so nothing
//! librados writes into is ever freed early. The object version is read from the operation's
//! own completion (`rados_aio_get_version`), never from the shared ioctx.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::oneshot;

use crate::ffi::{api, Api, CompletionT, ReadOpT, WriteOpT};
use crate::ioctx::IoctxHandle;

/// A librados operation handle, released when dropped (after its completion fired).
pub(crate) enum OpHandle {
    /// `rados_write_op_t`.
    Write(WriteOpT),
    /// `rados_read_op_t`.
    Read(ReadOpT),
}

// SAFETY: an op handle is a heap object librados does not tie to a thread; it is used by one
// owner at a time (built, submitted, then released by whoever holds it last).
unsafe impl Send for OpHandle {}

impl Drop for OpHandle {
    fn drop(&mut self) {
        let Ok(api) = api() else { return };
        match *self {
            // SAFETY: the handle came from rados_create_write_op and is released once, after
            // its operation completed or was never submitted.
            OpHandle::Write(op) => unsafe { (api.rados_release_write_op)(op) },
            // SAFETY: as above, for rados_create_read_op.
            OpHandle::Read(op) => unsafe { (api.rados_release_read_op)(op) },
        }
    }
}

/// What a completed operation gives back.
pub(crate) struct Completed<T> {
    /// librados' return value (negative errno on failure).
    pub return_value: i32,
    /// The object's version after (writes) or at (reads) the operation.
    pub version: u64,
    /// The buffers and output slots the operation wrote into.
    pub state: T,
}

/// Everything that must outlive the operation, owned by the callback until it fires.
struct InFlight<T> {
    api: &'static Api,
    sender: oneshot::Sender<Delivery<T>>,
    state: T,
    op: OpHandle,
    _ioctx: Arc<IoctxHandle>,
    /// When librados was handed the op (for [`op_times`]).
    submitted: Instant,
}

extern "C" fn on_complete<T: Send + 'static>(completion: CompletionT, argument: *mut c_void) {
    // SAFETY: `argument` is the Box::into_raw of an InFlight<T> given to exactly this
    // completion, whose callback librados calls exactly once.
    let in_flight = unsafe { Box::from_raw(argument.cast::<InFlight<T>>()) };
    let api = in_flight.api;
    // SAFETY: the completion is alive (we hold its only user reference) and complete.
    let (return_value, version) = unsafe {
        (
            (api.rados_aio_get_return_value)(completion),
            (api.rados_aio_get_version)(completion),
        )
    };
    // SAFETY: our reference to the completion is released once; librados keeps its own
    // reference for the duration of this callback.
    unsafe { (api.rados_aio_release)(completion) };
    OP_TIMES.record(&in_flight.op, in_flight.submitted);
    let InFlight {
        sender,
        state,
        op,
        _ioctx: ioctx,
        ..
    } = *in_flight;
    drop(op);
    let delivery = Delivery {
        completed: Completed {
            return_value,
            version,
            state,
        },
        _ioctx: ioctx,
    };
    // The awaiting task drops the ioctx (and maybe the cluster) handle. If it gave up, drop
    // them on a thread of our own: the last handle's rados_shutdown joins librados' threads,
    // and this callback runs on one of them.
    if let Err(orphan) = sender.send(delivery) {
        let _ = std::thread::Builder::new()
            .name("rados-release".into())
            .spawn(move || drop(orphan));
    }
}

/// What the callback hands to the awaiting task: the result, and the ioctx reference it
/// held, so that the task and not librados' thread lets go of it.
pub(crate) struct Delivery<T> {
    completed: Completed<T>,
    _ioctx: Arc<IoctxHandle>,
}

/// An operation submitted to librados, to await with [`finish`].
pub(crate) type Pending<T> = oneshot::Receiver<Delivery<T>>;

/// Submits an operation with `submit(completion)` (synchronous, so no raw pointer is held
/// across an await).
///
/// `state` holds whatever librados writes into (it must not move: keep it boxed) and `op` the
/// op handle. Returns the submission's error (negative errno) if it was refused at once.
pub(crate) fn start<T: Send + 'static>(
    api: &'static Api,
    ioctx: Arc<IoctxHandle>,
    op: OpHandle,
    state: T,
    submit: impl FnOnce(CompletionT) -> c_int,
) -> Result<Pending<T>, i32> {
    let (sender, receiver) = oneshot::channel();
    let in_flight = Box::into_raw(Box::new(InFlight {
        api,
        sender,
        state,
        op,
        _ioctx: ioctx,
        submitted: Instant::now(),
    }));
    let mut completion: CompletionT = std::ptr::null_mut();
    // SAFETY: the argument pointer stays valid until the callback reclaims it; `completion`
    // is a valid out slot.
    let created = unsafe {
        (api.rados_aio_create_completion2)(
            in_flight.cast(),
            Some(on_complete::<T>),
            &mut completion,
        )
    };
    if created < 0 {
        // SAFETY: no completion exists, so the callback never runs: the box is ours again.
        drop(unsafe { Box::from_raw(in_flight) });
        return Err(created);
    }
    let submitted = submit(completion);
    if submitted < 0 {
        // SAFETY: a refused submission never fires the completion: release it and take the
        // box back.
        unsafe { (api.rados_aio_release)(completion) };
        // SAFETY: as above, the callback will not run.
        drop(unsafe { Box::from_raw(in_flight) });
        return Err(submitted);
    }
    Ok(receiver)
}

/// Waits for a submitted operation's completion.
pub(crate) async fn finish<T>(pending: Pending<T>) -> Result<Completed<T>, i32> {
    // The callback always sends before dropping the sender.
    pending
        .await
        .map(|delivery| delivery.completed)
        .map_err(|_| -libc::EIO)
}

/// Operations librados completed in this process, and the time each spent from its aio submit
/// to its completion callback (the librados client, the network and the OSDs; not the await
/// that follows), summed, for the benchmark's split of a request's time. Process-wide: all
/// connections count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpTimes {
    /// Write operations (every `rados_write_op`) completed.
    pub writes: u64,
    /// Their submit-to-completion time, summed.
    pub write_us: u64,
    /// Read operations (every `rados_read_op`) completed.
    pub reads: u64,
    /// Their submit-to-completion time, summed.
    pub read_us: u64,
}

impl OpTimes {
    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &OpTimes) -> OpTimes {
        OpTimes {
            writes: self.writes.saturating_sub(earlier.writes),
            write_us: self.write_us.saturating_sub(earlier.write_us),
            reads: self.reads.saturating_sub(earlier.reads),
            read_us: self.read_us.saturating_sub(earlier.read_us),
        }
    }
}

struct OpTimeCounters {
    writes: AtomicU64,
    write_us: AtomicU64,
    reads: AtomicU64,
    read_us: AtomicU64,
}

impl OpTimeCounters {
    fn record(&self, op: &OpHandle, submitted: Instant) {
        let us = u64::try_from(submitted.elapsed().as_micros()).unwrap_or(u64::MAX);
        let (count, sum) = match op {
            OpHandle::Write(_) => (&self.writes, &self.write_us),
            OpHandle::Read(_) => (&self.reads, &self.read_us),
        };
        count.fetch_add(1, Ordering::Relaxed);
        sum.fetch_add(us, Ordering::Relaxed);
    }
}

static OP_TIMES: OpTimeCounters = OpTimeCounters {
    writes: AtomicU64::new(0),
    write_us: AtomicU64::new(0),
    reads: AtomicU64::new(0),
    read_us: AtomicU64::new(0),
};

/// The process's [`OpTimes`] so far.
pub fn op_times() -> OpTimes {
    OpTimes {
        writes: OP_TIMES.writes.load(Ordering::Relaxed),
        write_us: OP_TIMES.write_us.load(Ordering::Relaxed),
        reads: OP_TIMES.reads.load(Ordering::Relaxed),
        read_us: OP_TIMES.read_us.load(Ordering::Relaxed),
    }
}
