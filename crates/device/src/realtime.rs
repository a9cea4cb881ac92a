//! The crate's only `unsafe`: asking Linux to run the calling thread under SCHED_FIFO.
//!
//! Why: under CPU contention the fair scheduler lets a running thread finish its slice before
//! a woken one preempts it (EEVDF's run-to-parity), so the timer thread wakes milliseconds late
//! at the 99th percentile whatever its nice value. Measured on the 2-core development machine
//! at load average 9-11 (5 ms sleeps): p99 lateness 2.7-4.5 ms at nice 0 or -10, 8 µs under
//! SCHED_FIFO. The timer thread sleeps between deadlines and spins at most 10 µs before each,
//! and the kernel's RT throttling (95% of each second by default) bounds it in any case.
#![allow(unsafe_code)]

use std::io;

/// Puts the calling thread under SCHED_FIFO at `priority` (1..=99). Needs CAP_SYS_NICE or an
/// RLIMIT_RTPRIO allowance; fails with EPERM otherwise.
pub(crate) fn set_current_thread_fifo(priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `param` is an initialised sched_param on our stack, which the kernel only reads
    // during the call; pid 0 names the calling thread; no memory is shared or retained.
    let result = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if result == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
