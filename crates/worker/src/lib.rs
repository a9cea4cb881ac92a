//! # worker: background loops with an injected clock
//!
//! Owns the one shape every background loop of strata takes (the cache tier's agent, and in
//! time recovery, scrub, GC and statistics periods): a [`Worker`] runs a step, then sleeps on a
//! [`Clock`] for the period the step asks for or until it is woken ([`WorkerHandle::wake`]), until
//! it is stopped ([`WorkerHandle::stop`], which waits for the running step to end).
//!
//! Time is injected: [`SystemClock`] in production, [`VirtualClock`] in tests, where
//! [`VirtualClock::advance`] moves time and wakes the sleepers whose deadline passed, so a loop's
//! behaviour over hours is tested in milliseconds and without races on the wall clock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio::sync::{watch, Notify};

/// A source of time the loops sleep on.
#[async_trait]
pub trait Clock: Send + Sync {
    /// Milliseconds since the clock's origin.
    fn now_ms(&self) -> u64;
    /// Returns once `now_ms()` has reached `deadline_ms`.
    async fn sleep_until(&self, deadline_ms: u64);
}

/// The wall clock (monotonic), counted from its creation.
#[derive(Debug)]
pub struct SystemClock {
    origin: Instant,
}

impl SystemClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        SystemClock {
            origin: Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }

    async fn sleep_until(&self, deadline_ms: u64) {
        let now_ms = self.now_ms();
        if deadline_ms > now_ms {
            tokio::time::sleep(Duration::from_millis(deadline_ms - now_ms)).await;
        }
    }
}

/// The wall clock: milliseconds since the Unix epoch (for loops whose steps report when they
/// ran, as the balancer's periods do).
#[derive(Debug, Default, Clone, Copy)]
pub struct UnixClock;

#[async_trait]
impl Clock for UnixClock {
    fn now_ms(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_millis() as u64)
    }

    async fn sleep_until(&self, deadline_ms: u64) {
        let now_ms = self.now_ms();
        if deadline_ms > now_ms {
            tokio::time::sleep(Duration::from_millis(deadline_ms - now_ms)).await;
        }
    }
}

/// Time that moves only when a test says so.
#[derive(Debug, Default)]
pub struct VirtualClock {
    now_ms: AtomicU64,
    moved: Notify,
}

impl VirtualClock {
    /// A clock at 0 ms.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves time forward by `milliseconds` and wakes the sleepers.
    pub fn advance(&self, milliseconds: u64) {
        self.now_ms.fetch_add(milliseconds, Ordering::SeqCst);
        self.moved.notify_waiters();
    }
}

#[async_trait]
impl Clock for VirtualClock {
    fn now_ms(&self) -> u64 {
        self.now_ms.load(Ordering::SeqCst)
    }

    async fn sleep_until(&self, deadline_ms: u64) {
        loop {
            let moved = self.moved.notified();
            tokio::pin!(moved);
            moved.as_mut().enable();
            if self.now_ms() >= deadline_ms {
                return;
            }
            moved.await;
        }
    }
}

/// What a step asks of its loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Run again after the worker's period (or sooner if woken).
    Sleep,
    /// Run again after this many milliseconds (or sooner if woken).
    SleepMs(u64),
    /// More work is waiting: run again at once.
    Again,
}

/// One step of a background loop.
#[async_trait]
pub trait Step: Send + 'static {
    /// Does one round of work.
    async fn step(&mut self, now_ms: u64) -> Next;
}

#[async_trait]
impl Step for Box<dyn Step> {
    async fn step(&mut self, now_ms: u64) -> Next {
        (**self).step(now_ms).await
    }
}

/// Counters of a running worker.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkerStats {
    /// Steps run.
    pub steps: u64,
    /// `now_ms` when the last step began.
    pub last_step_ms: u64,
}

/// A background loop: spawn it with [`Worker::spawn`].
pub struct Worker;

/// Controls a spawned worker.
pub struct WorkerHandle {
    name: String,
    wake: Arc<Notify>,
    stop: watch::Sender<bool>,
    stats: Arc<Mutex<WorkerStats>>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
    steps: Arc<AtomicU64>,
}

impl Worker {
    /// Spawns `step` on the current tokio runtime, running at once and then every `period_ms`
    /// of `clock` (or as each step asks).
    pub fn spawn(
        name: impl Into<String>,
        period_ms: u64,
        clock: Arc<dyn Clock>,
        step: impl Step,
    ) -> WorkerHandle {
        Self::spawn_with_wake(name, period_ms, clock, Arc::new(Notify::new()), step)
    }

    /// [`Worker::spawn`] with a wake-up signal the caller shares (its owner wakes the loop
    /// when work arrives, as [`WorkerHandle::wake`] does).
    pub fn spawn_with_wake(
        name: impl Into<String>,
        period_ms: u64,
        clock: Arc<dyn Clock>,
        wake: Arc<Notify>,
        mut step: impl Step,
    ) -> WorkerHandle {
        let name = name.into();
        let (stop, mut stopped) = watch::channel(false);
        let stats = Arc::new(Mutex::new(WorkerStats::default()));
        let steps = Arc::new(AtomicU64::new(0));
        let task = {
            let wake = wake.clone();
            let stats = stats.clone();
            let steps = steps.clone();
            let name = name.clone();
            tokio::spawn(async move {
                loop {
                    if *stopped.borrow() {
                        break;
                    }
                    let now_ms = clock.now_ms();
                    let next = step.step(now_ms).await;
                    {
                        let mut stats = stats.lock().unwrap_or_else(|e| e.into_inner());
                        stats.steps += 1;
                        stats.last_step_ms = now_ms;
                    }
                    steps.fetch_add(1, Ordering::SeqCst);
                    let delay_ms = match next {
                        Next::Again => {
                            tokio::task::yield_now().await;
                            continue;
                        }
                        Next::Sleep => period_ms,
                        Next::SleepMs(delay_ms) => delay_ms,
                    };
                    let deadline_ms = clock.now_ms().saturating_add(delay_ms);
                    tokio::select! {
                        _ = clock.sleep_until(deadline_ms) => {}
                        _ = wake.notified() => {}
                        _ = stopped.changed() => {}
                    }
                }
                tracing::debug!(worker = %name, "stopped");
            })
        };
        WorkerHandle {
            name,
            wake,
            stop,
            stats,
            task: Mutex::new(Some(task)),
            steps,
        }
    }
}

impl WorkerHandle {
    /// The worker's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs the next step now instead of at the end of the sleep.
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Steps run and when the last began.
    pub fn stats(&self) -> WorkerStats {
        *self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until at least `count` steps have completed in total (for tests driving a
    /// [`VirtualClock`]).
    pub async fn wait_for_steps(&self, count: u64) {
        while self.steps.load(Ordering::SeqCst) < count {
            tokio::task::yield_now().await;
        }
    }

    /// Stops the loop after its running step and waits for it.
    pub async fn stop(&self) {
        let _ = self.stop.send(true);
        let task = self.task.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }
}

impl Drop for WorkerHandle {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Count(Arc<AtomicU64>);

    #[async_trait]
    impl Step for Count {
        async fn step(&mut self, _now_ms: u64) -> Next {
            self.0.fetch_add(1, Ordering::SeqCst);
            Next::Sleep
        }
    }

    #[tokio::test]
    async fn virtual_time_drives_the_period() {
        let clock = Arc::new(VirtualClock::new());
        let count = Arc::new(AtomicU64::new(0));
        let handle = Worker::spawn("count", 1000, clock.clone(), Count(count.clone()));
        handle.wait_for_steps(1).await;
        // Without time moving, no second step runs.
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        assert_eq!(count.load(Ordering::SeqCst), 1);
        clock.advance(999);
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        assert_eq!(count.load(Ordering::SeqCst), 1, "not before the period");
        clock.advance(1);
        handle.wait_for_steps(2).await;
        assert_eq!(count.load(Ordering::SeqCst), 2);
        handle.wake();
        handle.wait_for_steps(3).await;
        assert_eq!(handle.stats().steps, 3);
        handle.stop().await;
        clock.advance(10_000);
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        assert_eq!(count.load(Ordering::SeqCst), 3, "stopped");
    }

    #[tokio::test]
    async fn system_clock_sleeps() {
        let clock = SystemClock::new();
        let start_ms = clock.now_ms();
        clock.sleep_until(start_ms + 20).await;
        assert!(clock.now_ms() >= start_ms + 20);
    }
}
