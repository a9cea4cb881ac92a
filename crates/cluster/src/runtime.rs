//! The async runtime for a process that serves a cluster, optionally laid out for small
//! operations: workers kept off the CPU that runs the stores' commit threads, one of them
//! polling while client operations are in flight.
//!
//! Why: the stores pin their commit threads to the CPU that takes the data device's
//! interrupts when that is a single CPU (`StoreConfig::pin_to_interrupt_cpu`). Runtime workers
//! on that CPU compete with them, and a parked worker costs every answer a wake-up
//! ([`crate::poll`]). Asked for (`strata serve --poll-while-busy`), and where that is the
//! case, the workers run on the other CPUs, as many as there are, and one of them polls while
//! client operations are in flight. With workers on every CPU polling measured no gain: a
//! parked second worker is still woken for every answer.
//!
//! Measured on this project's 2-vCPU VM, where it means one worker on CPU 0 and the pipeline
//! on CPU 1, alternating with tokio's default runtime (`examples/bench_cluster.rs
//! --concurrency 16 --objects 300000 --device-size 4G --no-fio`): replica-1 4 KiB writes 52.0k,
//! 51.6k, 50.2k writes/s against 37.1k, 47.3k, 44.3k, reads 92.1k, 100.7k, 70.1k against 68.6k,
//! 71.2k, 58.9k; replica 3 writes 20.3k, 19.6k against 17.4k, 16.2k; at 64 in flight writes
//! 102.9k, 100.6k against 88.4k, 83.0k. The polling worker's CPU shows in CPU per operation
//! (about 29 µs per write against 21-23). Without polling the same layout measured the same as
//! the default (42.8k, 43.8k). But one worker is then all the CPU the runtime has, and large
//! objects need more: `strata bench s3 --sizes 4M` PUT 59-61 against 116-126 objects/s, GET 189
//! against 321; 4 KiB reads at 64 in flight 73.7k, 74.4k against 90.7k, 83.2k. So it is off
//! by default.
//!
//! Every thread the runtime starts is kept off that CPU: its workers and tokio's blocking pool.
//! A thread or process they start inherits the mask, so programs meant to use the whole
//! machine (the benchmarks' peers) are started with `device::affinity::run_on_every_allowed_cpu`.
//!
//! Not asked for, or anywhere else (several interrupt CPUs, one CPU in all, an unknown device),
//! the runtime is tokio's default and nothing polls.

use std::path::Path;

/// A runtime and whether the cluster it serves should poll while busy.
pub struct ServingRuntime {
    pub runtime: tokio::runtime::Runtime,
    /// The CPUs the workers are restricted to, if the runtime is laid out for small
    /// operations.
    pub worker_cpus: Option<Vec<usize>>,
}

impl ServingRuntime {
    /// What to set `ClusterOptions::poll_while_busy` to: whether the layout applied.
    pub fn poll_while_busy(&self) -> bool {
        self.worker_cpus.is_some()
    }
}

/// Builds the runtime for a cluster whose devices are under `data_dir` (it need not exist
/// yet: its nearest existing ancestor tells the device); laid out for small operations if
/// `poll_while_busy` and the device allows it.
pub fn serving_runtime(data_dir: &Path, poll_while_busy: bool) -> std::io::Result<ServingRuntime> {
    let worker_cpus = poll_while_busy.then(|| worker_cpus(data_dir)).flatten();
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    if let Some(cpus) = &worker_cpus {
        let pinned = cpus.clone();
        builder.worker_threads(cpus.len()).on_thread_start(move || {
            if let Err(error) = device::affinity::pin_current_thread_to(&pinned) {
                tracing::warn!(%error, "could not keep a runtime thread off the commit CPU");
            }
        });
    }
    Ok(ServingRuntime {
        runtime: builder.build()?,
        worker_cpus,
    })
}

/// The CPUs other than the data device's one interrupt CPU, if it has exactly one and others
/// are allowed.
fn worker_cpus(data_dir: &Path) -> Option<Vec<usize>> {
    let existing = data_dir
        .ancestors()
        .map(|path| {
            if path.as_os_str().is_empty() {
                Path::new(".")
            } else {
                path
            }
        })
        .find(|path| path.exists())?;
    let interrupt = match device::affinity::interrupt_cpus_of_path(existing)?.as_slice() {
        [cpu] => *cpu,
        _ => return None,
    };
    others(&device::affinity::process_allowed_cpus().ok()?, interrupt)
}

/// `allowed` without `interrupt`, if `interrupt` is one of them and others remain.
fn others(allowed: &[usize], interrupt: usize) -> Option<Vec<usize>> {
    if !allowed.contains(&interrupt) {
        return None;
    }
    let rest: Vec<usize> = allowed
        .iter()
        .copied()
        .filter(|&cpu| cpu != interrupt)
        .collect();
    (!rest.is_empty()).then_some(rest)
}

#[cfg(test)]
mod tests {
    use super::others;

    #[test]
    fn workers_go_to_the_cpus_the_commit_threads_leave() {
        assert_eq!(others(&[0, 1], 1), Some(vec![0]));
        assert_eq!(others(&[0, 1, 2, 3], 2), Some(vec![0, 1, 3]));
        // One CPU in all: nowhere else to go.
        assert_eq!(others(&[1], 1), None);
        // The interrupt CPU is not ours: the store does not pin there either.
        assert_eq!(others(&[0, 1], 5), None);
    }
}
