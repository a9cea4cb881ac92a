//! One shape for the server's background loops ([`Worker`]: a step each period, given the
//! time by an injected [`Clock`]) and one runner ([`spawn`]) that stops them on shutdown.
//! The balancer runs on it; other periodic work (the cache-tier agent, statistics periods)
//! can too, so each loop is a step function a test calls with the time it chooses.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

/// The time a worker sees, ms since the Unix epoch.
pub trait Clock: Send + Sync {
    /// Now, ms.
    fn now_ms(&self) -> u64;
}

/// The wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_millis() as u64)
    }
}

/// A periodic piece of background work.
#[async_trait]
pub trait Worker: Send + Sync + 'static {
    /// Its name, in logs.
    fn name(&self) -> &'static str;

    /// How long to wait before the next step (asked after every step, so a worker's period
    /// may change while it runs).
    fn period(&self) -> Duration;

    /// One step at `now_ms`. An error is logged; the worker runs again next period.
    async fn step(&self, now_ms: u64) -> Result<(), String>;
}

/// A running worker; [`WorkerHandle::shutdown`] stops it between steps.
pub struct WorkerHandle {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl WorkerHandle {
    /// Stops the worker: a step under way finishes first.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// Runs `worker` every period (the first step one period after the start) until shut down.
pub fn spawn(worker: Arc<dyn Worker>, clock: Arc<dyn Clock>) -> WorkerHandle {
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(worker.period()) => {}
                _ = stopped.changed() => return,
            }
            if *stopped.borrow() {
                return;
            }
            if let Err(error) = worker.step(clock.now_ms()).await {
                tracing::warn!(worker = worker.name(), %error, "background step failed");
            }
        }
    });
    WorkerHandle { stop, task }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;

    struct Counter {
        steps: AtomicU64,
        last_ms: AtomicU64,
    }

    #[async_trait]
    impl Worker for Counter {
        fn name(&self) -> &'static str {
            "counter"
        }
        fn period(&self) -> Duration {
            Duration::from_millis(5)
        }
        async fn step(&self, now_ms: u64) -> Result<(), String> {
            self.steps.fetch_add(1, Ordering::SeqCst);
            self.last_ms.store(now_ms, Ordering::SeqCst);
            Ok(())
        }
    }

    struct Fixed(u64);
    impl Clock for Fixed {
        fn now_ms(&self) -> u64 {
            self.0
        }
    }

    #[tokio::test]
    async fn steps_with_the_injected_time_until_shut_down() {
        let counter = Arc::new(Counter {
            steps: AtomicU64::new(0),
            last_ms: AtomicU64::new(0),
        });
        let handle = spawn(counter.clone(), Arc::new(Fixed(42)));
        while counter.steps.load(Ordering::SeqCst) < 3 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        handle.shutdown().await;
        let steps = counter.steps.load(Ordering::SeqCst);
        assert_eq!(counter.last_ms.load(Ordering::SeqCst), 42);
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert_eq!(
            counter.steps.load(Ordering::SeqCst),
            steps,
            "stepped after shutdown"
        );
    }
}
