//! The job queue between [`FileDevice`](crate::FileDevice) callers and its I/O threads.
//!
//! Why not a channel crate: an idle receiver of crossbeam's channel spins and calls
//! `sched_yield` several times before it sleeps. With 16 I/O threads going idle after every
//! job that was the largest CPU cost of a 4 KiB request on the 2-core development machine
//! (`sched_yield` alone took 8.6% of the NBD server's samples under `perf`, 4K random reads at
//! QD 32). Here an idle thread sleeps on a condition variable at once, and a submitter wakes
//! one only when a thread is waiting.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};

/// A multi-producer, multi-consumer FIFO whose consumers block without spinning.
pub(crate) struct WorkQueue<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
}

struct State<T> {
    items: VecDeque<T>,
    /// Consumers asleep in [`WorkQueue::pop`].
    waiting: usize,
    closed: bool,
}

impl<T> WorkQueue<T> {
    pub(crate) fn new() -> Self {
        Self {
            state: Mutex::new(State {
                items: VecDeque::new(),
                waiting: 0,
                closed: false,
            }),
            ready: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `item`; gives it back when the queue is closed.
    pub(crate) fn push(&self, item: T) -> Result<(), T> {
        let mut state = self.lock();
        if state.closed {
            return Err(item);
        }
        state.items.push_back(item);
        let wake = state.waiting > state.items.len().saturating_sub(1);
        drop(state);
        if wake {
            self.ready.notify_one();
        }
        Ok(())
    }

    /// The oldest item, waiting for one; `None` once the queue is closed and drained.
    pub(crate) fn pop(&self) -> Option<T> {
        let mut state = self.lock();
        loop {
            if let Some(item) = state.items.pop_front() {
                return Some(item);
            }
            if state.closed {
                return None;
            }
            state.waiting += 1;
            state = self.ready.wait(state).unwrap_or_else(|e| e.into_inner());
            state.waiting -= 1;
        }
    }

    /// Refuses further items and wakes every consumer; queued items are still handed out.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn hands_every_item_to_exactly_one_consumer() {
        let queue = Arc::new(WorkQueue::new());
        let consumers: Vec<_> = (0..4)
            .map(|_| {
                let queue = Arc::clone(&queue);
                std::thread::spawn(move || {
                    let mut taken = Vec::new();
                    while let Some(item) = queue.pop() {
                        taken.push(item);
                    }
                    taken
                })
            })
            .collect();
        for item in 0..10_000u32 {
            queue.push(item).unwrap();
        }
        queue.close();
        assert_eq!(queue.push(7), Err(7));
        let mut all: Vec<u32> = consumers
            .into_iter()
            .flat_map(|c| c.join().unwrap())
            .collect();
        all.sort_unstable();
        assert_eq!(all, (0..10_000).collect::<Vec<_>>());
    }
}
