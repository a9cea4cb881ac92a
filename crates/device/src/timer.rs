//! A timer thread that fires actions at their deadlines to within tens of µs.
//!
//! tokio's timer wheel has a 1 ms tick, too coarse for SSD service times of 20-100 µs. The
//! [`PreciseTimer`] thread sleeps on a condition variable until `spin` before the earliest
//! deadline, then spins to the deadline and runs the action. Actions run on the timer thread
//! and must be short: complete a channel, schedule the next deadline.
//!
//! Why the spin is short (10 µs by default): the thread sets its timer slack to 1 ns
//! (`PR_SET_TIMERSLACK`; Linux otherwise delays a sleeper's wake-up by up to 50 µs), after which
//! a futex sleep alone ends 5-7 µs late at the median. Measured on the 2-core development
//! machine at load average ~9 (300 µs sleeps): spin 0: p50 5-7 µs, p99 22-28 µs; spin 10 µs:
//! p50 0.1 µs, p99 7-26 µs; spin 20-100 µs: p50 0.1 µs but p99 2-5 ms, because a thread that
//! spins loses the scheduler's preference for sleepers and is preempted for whole time slices.
//! If the slack cannot be set, the spin is raised to 80 µs.
//!
//! Why the spin has a budget: at a high completion rate (tens of thousands of deadlines a
//! second, e.g. an emulated NVMe at QD 32 behind NBD) a 10 µs spin before every deadline kept
//! the timer thread busy ~40% of a core, 18% of the NBD server's CPU samples under `perf` on
//! the 2-core machine, and a 15% budget still left it at 20% of the samples. So the thread
//! spins at most `spin_percent_max` (default 5%) of the wall time (per 10 ms window); beyond
//! it, it sleeps to the deadline with the 1 ns slack (5-7 µs late at the median, which at
//! that rate costs latency, not throughput). At low rates every deadline is still spun for.
//!
//! Under CPU contention the scheduler, not the timer, decides the tail: the thread asks for
//! SCHED_FIFO (best effort, see `realtime.rs`), which took the p99 lateness of 5 ms sleeps at
//! load average ~10 from 2.7-4.5 ms to 8 µs.

use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::histogram::{AtomicHistogram, Histogram};

type Action = Box<dyn FnOnce() + Send>;

/// Longest single sleep while a deadline is pending. A thread waking from a long sleep starts
/// later than one waking from a short one (measured: median 13-35 µs late after 5-12 ms sleeps,
/// under 1 µs when the last nap is short), so long waits are taken in naps of at most this.
/// Nice value the timer thread asks for (lower is more favoured; default threads run at 0).
const TIMER_NICE: i32 = -10;

const MAX_NAP: Duration = Duration::from_micros(500);

struct Entry {
    deadline: Instant,
    sequence: u64,
    action: Action,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == CmpOrdering::Equal
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    /// Reversed, so the std max-heap pops the earliest deadline first.
    fn cmp(&self, other: &Self) -> CmpOrdering {
        (other.deadline, other.sequence).cmp(&(self.deadline, self.sequence))
    }
}

#[derive(Default)]
struct Queue {
    heap: BinaryHeap<Entry>,
    sequence: u64,
    shutdown: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    wake: Condvar,
    /// Set when an entry is added, so a spinning timer re-checks for an earlier deadline.
    added: AtomicBool,
    spin: Duration,
    spin_share_max: f64,
    lateness_ns: AtomicHistogram,
}

/// Length of the window the spin budget is counted over.
const SPIN_WINDOW: Duration = Duration::from_millis(10);

/// Time spent spinning in the current window, to keep it within the budget.
struct SpinBudget {
    window_start: Instant,
    spun: Duration,
    share_max: f64,
}

impl SpinBudget {
    fn new(share_max: f64) -> Self {
        Self {
            window_start: Instant::now(),
            spun: Duration::ZERO,
            share_max,
        }
    }

    /// Whether a spin of up to `spin` starting `now` stays within the budget.
    fn allows(&mut self, now: Instant, spin: Duration) -> bool {
        if now.saturating_duration_since(self.window_start) >= SPIN_WINDOW {
            self.window_start = now;
            self.spun = Duration::ZERO;
        }
        (self.spun + spin).as_secs_f64() <= self.share_max * SPIN_WINDOW.as_secs_f64()
    }

    fn spent(&mut self, spun: Duration) {
        self.spun += spun;
    }
}

/// How a [`PreciseTimer`] thread runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimerConfig {
    /// Final stretch before each deadline spent spinning. Default: 10 µs (see the module doc).
    pub spin: Duration,
    /// SCHED_FIFO priority (1..=99) asked for the timer thread, best effort: without the
    /// privilege the thread asks for nice -10, then runs as it is. `None`: neither.
    /// Default: `Some(10)`.
    pub realtime_priority: Option<i32>,
    /// Largest share of wall time spent spinning, in percent per 10 ms window; past it the
    /// thread sleeps to each deadline instead (see the module doc). Default: 5.
    pub spin_percent_max: u32,
}

impl Default for TimerConfig {
    fn default() -> Self {
        Self {
            spin: Duration::from_micros(10),
            realtime_priority: Some(10),
            spin_percent_max: 5,
        }
    }
}

/// How late the timer fired its actions.
#[derive(Clone, Debug)]
pub struct TimerStats {
    /// Delay between each deadline and the moment its action started, in ns.
    pub lateness_ns: Histogram,
}

/// A thread that runs actions at precise instants. Cloning shares the thread; the thread ends
/// when the last clone is dropped.
#[derive(Clone)]
pub struct PreciseTimer {
    shared: Arc<Shared>,
    _owner: Arc<Owner>,
}

/// Stops the thread when the last handle goes.
struct Owner {
    shared: Arc<Shared>,
}

impl Drop for Owner {
    fn drop(&mut self) {
        let mut queue = self.shared.queue.lock().unwrap_or_else(|e| e.into_inner());
        queue.shutdown = true;
        self.shared.wake.notify_all();
    }
}

impl PreciseTimer {
    /// Starts a timer thread configured by `config`.
    pub fn start(config: TimerConfig) -> Self {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::default()),
            wake: Condvar::new(),
            added: AtomicBool::new(false),
            spin: config.spin,
            spin_share_max: f64::from(config.spin_percent_max.min(100)) / 100.0,
            lateness_ns: AtomicHistogram::default(),
        });
        let worker = Arc::clone(&shared);
        let priority = config.realtime_priority;
        // If the thread cannot be spawned the process is out of resources; nothing to recover.
        std::thread::Builder::new()
            .name("device-timer".into())
            .spawn(move || {
                raise_priority(priority);
                run(&worker)
            })
            .expect("spawn the device timer thread");
        Self {
            _owner: Arc::new(Owner {
                shared: Arc::clone(&shared),
            }),
            shared,
        }
    }

    /// The process-wide timer (started on first use with [`TimerConfig::default`]). Sharing
    /// one thread means one spinner, whatever the number of emulated devices.
    pub fn global() -> PreciseTimer {
        static GLOBAL: OnceLock<PreciseTimer> = OnceLock::new();
        GLOBAL
            .get_or_init(|| PreciseTimer::start(TimerConfig::default()))
            .clone()
    }

    /// Runs `action` on the timer thread at `deadline` (at once if it has passed).
    pub fn schedule(&self, deadline: Instant, action: impl FnOnce() + Send + 'static) {
        let mut queue = self.shared.queue.lock().unwrap_or_else(|e| e.into_inner());
        let sequence = queue.sequence;
        queue.sequence += 1;
        let earliest = queue.heap.peek().is_none_or(|top| deadline < top.deadline);
        queue.heap.push(Entry {
            deadline,
            sequence,
            action: Box::new(action),
        });
        drop(queue);
        if earliest {
            self.shared.added.store(true, Ordering::Release);
            self.shared.wake.notify_one();
        }
    }

    /// Sleeps until `deadline` with the timer's precision.
    pub async fn sleep_until(&self, deadline: Instant) {
        let (done, wait) = tokio::sync::oneshot::channel::<()>();
        self.schedule(deadline, move || {
            let _ = done.send(());
        });
        let _ = wait.await;
    }

    /// How late actions have fired so far.
    pub fn stats(&self) -> TimerStats {
        TimerStats {
            lateness_ns: self.shared.lateness_ns.snapshot(),
        }
    }
}

/// Best effort (both need CAP_SYS_NICE): SCHED_FIFO, else nice -10 (see `realtime`).
fn raise_priority(realtime_priority: Option<i32>) {
    let Some(priority) = realtime_priority else {
        return;
    };
    if let Err(error) = crate::realtime::set_current_thread_fifo(priority) {
        let tid = rustix::thread::gettid();
        let niced = rustix::process::setpriority_process(Some(tid), TIMER_NICE).is_ok();
        tracing::debug!(%error, niced, "device timer runs without real-time priority");
    }
}

fn run(shared: &Shared) {
    // Linux delays a sleeping thread's wake-up by up to its timer slack (50 µs by default) to
    // batch wake-ups; the timer wants the opposite. Best effort: on failure, spin covers it.
    let spin = match rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1)) {
        Ok(()) => shared.spin,
        Err(_) => shared.spin.max(Duration::from_micros(80)),
    };
    let mut budget = SpinBudget::new(shared.spin_share_max);
    let mut queue = shared.queue.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if queue.shutdown {
            return;
        }
        let Some(deadline) = queue.heap.peek().map(|top| top.deadline) else {
            queue = shared.wake.wait(queue).unwrap_or_else(|e| e.into_inner());
            continue;
        };
        let now = Instant::now();
        if deadline <= now {
            if let Some(entry) = queue.heap.pop() {
                drop(queue);
                let started = Instant::now();
                shared
                    .lateness_ns
                    .record(started.saturating_duration_since(entry.deadline).as_nanos() as u64);
                (entry.action)();
                queue = shared.queue.lock().unwrap_or_else(|e| e.into_inner());
            }
            continue;
        }
        let remaining = deadline - now;
        if remaining > spin || !budget.allows(now, remaining) {
            shared.added.store(false, Ordering::Release);
            // Over the spin budget, sleep all the way to the deadline.
            let nap = remaining
                .checked_sub(spin)
                .unwrap_or(remaining)
                .min(MAX_NAP);
            queue = shared
                .wake
                .wait_timeout(queue, nap)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            continue;
        }
        // Final stretch: spin without the lock; stop early if an earlier entry arrives.
        shared.added.store(false, Ordering::Release);
        drop(queue);
        while Instant::now() < deadline && !shared.added.load(Ordering::Acquire) {
            std::hint::spin_loop();
        }
        budget.spent(Instant::now().saturating_duration_since(now));
        queue = shared.queue.lock().unwrap_or_else(|e| e.into_inner());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn fires_in_deadline_order_and_never_early() {
        let timer = PreciseTimer::start(TimerConfig {
            spin: Duration::from_micros(100),
            realtime_priority: None,
            ..TimerConfig::default()
        });
        let (sender, receiver) = mpsc::channel();
        let base = Instant::now() + Duration::from_millis(2);
        for (index, offset_us) in [900u64, 100, 500, 300].into_iter().enumerate() {
            let deadline = base + Duration::from_micros(offset_us);
            let sender = sender.clone();
            timer.schedule(deadline, move || {
                let _ = sender.send((index, deadline, Instant::now()));
            });
        }
        let fired: Vec<_> = (0..4).map(|_| receiver.recv().unwrap()).collect();
        let order: Vec<usize> = fired.iter().map(|f| f.0).collect();
        assert_eq!(order, vec![1, 3, 2, 0]);
        for (_, deadline, at) in fired {
            assert!(at >= deadline);
        }
        assert_eq!(timer.stats().lateness_ns.count(), 4);
    }

    #[test]
    fn spin_budget_refuses_spins_past_its_share() {
        let mut budget = SpinBudget::new(0.1);
        let start = Instant::now();
        // 10% of a 10 ms window is 1 ms: ten 100 µs spins fit, the eleventh does not.
        for _ in 0..10 {
            assert!(budget.allows(start, Duration::from_micros(100)));
            budget.spent(Duration::from_micros(100));
        }
        assert!(!budget.allows(start, Duration::from_micros(100)));
        // A new window starts afresh.
        assert!(budget.allows(start + SPIN_WINDOW, Duration::from_micros(100)));
    }

    #[test]
    fn without_spin_budget_deadlines_are_still_never_early() {
        let timer = PreciseTimer::start(TimerConfig {
            spin_percent_max: 0,
            realtime_priority: None,
            ..TimerConfig::default()
        });
        let (sender, receiver) = mpsc::channel();
        for offset_us in [50u64, 120, 130, 400] {
            let deadline = Instant::now() + Duration::from_micros(offset_us);
            let sender = sender.clone();
            timer.schedule(deadline, move || {
                let _ = sender.send((deadline, Instant::now()));
            });
        }
        for _ in 0..4 {
            let (deadline, at) = receiver.recv().unwrap();
            assert!(at >= deadline);
        }
    }

    #[tokio::test]
    async fn sleep_until_waits_for_the_deadline() {
        let timer = PreciseTimer::global();
        let deadline = Instant::now() + Duration::from_micros(300);
        timer.sleep_until(deadline).await;
        assert!(Instant::now() >= deadline);
        // A past deadline returns at once.
        timer
            .sleep_until(Instant::now() - Duration::from_millis(1))
            .await;
    }
}
