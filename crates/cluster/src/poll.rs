//! Keeps one runtime worker polling while client operations are in flight.
//!
//! Why: a client operation waits for answers that come from threads outside the runtime (the
//! stores' commit threads, the devices' I/O threads). When every task is waiting, the
//! runtime's workers park, and each answer must wake one: a futex wake and, on a VM whose idle
//! vCPUs halt, an interrupt to a halted vCPU. `perf sched` measured 60 µs on average from such
//! a wake-up to the worker running, on a write's round trip of about 350 µs. A task that
//! yields in a loop while anything is in flight keeps its worker awake, so an answer is only a
//! push onto the runtime's queue, which the worker finds within a few polls. The loop stops
//! when the last operation ends, so an idle cluster costs nothing; a busy one spends one
//! worker's CPU on it, as SPDK and Seastar poll instead of sleeping. It helps when the workers
//! are kept off the CPU the commit threads run on ([`crate::runtime`]); with the workers on
//! every CPU it measured no gain, so it is off unless the process asks for it
//! (`ClusterOptions::poll_while_busy`, which `crate::runtime` sets with its layout).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

/// Counts operations in flight and wakes the polling task when the first begins.
#[derive(Default)]
pub(crate) struct Poller {
    in_flight: AtomicUsize,
    started: Notify,
}

/// One operation in flight; it ends when this is dropped.
pub(crate) struct Busy(Option<Arc<Poller>>);

impl Drop for Busy {
    fn drop(&mut self) {
        if let Some(poller) = &self.0 {
            poller.in_flight.fetch_sub(1, Ordering::Release);
        }
    }
}

impl Poller {
    /// Marks an operation in flight until the result is dropped. `poller` is `None` when
    /// polling is off.
    pub(crate) fn busy(poller: &Option<Arc<Poller>>) -> Busy {
        let Some(poller) = poller else {
            return Busy(None);
        };
        if poller.in_flight.fetch_add(1, Ordering::AcqRel) == 0 {
            // Stored as a permit if the task is not waiting yet, so no start is missed.
            poller.started.notify_one();
        }
        Busy(Some(Arc::clone(poller)))
    }

    /// Operations in flight now.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// The polling task: yields while anything is in flight, sleeps otherwise.
    pub(crate) async fn run(self: Arc<Self>) {
        loop {
            while self.in_flight() > 0 {
                tokio::task::yield_now().await;
            }
            self.started.notified().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn polls_while_busy_and_sleeps_when_idle() {
        let poller = Some(Arc::new(Poller::default()));
        let task = tokio::spawn(Arc::clone(poller.as_ref().unwrap()).run());
        let first = Poller::busy(&poller);
        let second = Poller::busy(&poller);
        assert_eq!(poller.as_ref().unwrap().in_flight(), 2);
        drop(first);
        drop(second);
        assert_eq!(poller.as_ref().unwrap().in_flight(), 0);
        // The task goes back to sleep, and wakes for the next operation.
        tokio::task::yield_now().await;
        let third = Poller::busy(&poller);
        assert_eq!(poller.as_ref().unwrap().in_flight(), 1);
        drop(third);
        assert!(!task.is_finished());
        task.abort();
        // Off: nothing is counted.
        let off = Poller::busy(&None);
        drop(off);
    }
}
