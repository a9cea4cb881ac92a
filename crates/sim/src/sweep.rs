//! Sweeps: every combination of policies x cache sizes x thresholds `H` x smoothing constants `a`
//! (the last two apply to the hot table only) over one trace, with a progress bar on stderr
//! (hidden when stderr is not a terminal).

use crate::run::{simulate_reporting, RunOptions, RunResult};
use crate::trace::Trace;
use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use policy::hottable::Period;
use policy::PolicySpec;
use std::io::IsTerminal;
use std::sync::Mutex;

/// A cache size as given on the command line.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CacheSize {
    /// A count of objects (`4897`).
    Objects(u64),
    /// A percentage of the trace's unique objects (`10%`), rounded down as libCacheSim does.
    Percent(f64),
    /// Bytes (`64M`, `4GiB`), divided by the mean object size.
    Bytes(u64),
}

impl CacheSize {
    /// Parses `N` (a whole number of objects), `P%` or bytes with a unit (`64M`, `4GiB`,
    /// `512B`). A number with neither (`4897.0`) is refused: it used to be read as bytes, so
    /// `4897.0` was one object where `4897` was 4,897.
    pub fn parse(text: &str) -> Result<CacheSize> {
        let text = text.trim();
        if let Some(percent) = text.strip_suffix('%') {
            let value: f64 = percent
                .parse()
                .with_context(|| format!("bad percentage `{text}`"))?;
            if !(value > 0.0 && value <= 100.0) {
                bail!("percentage out of range: `{text}` (0% < size <= 100%)");
            }
            return Ok(CacheSize::Percent(value));
        }
        if let Ok(objects) = text.parse::<u64>() {
            if objects == 0 {
                bail!("a cache of 0 objects holds nothing: `{text}`");
            }
            return Ok(CacheSize::Objects(objects));
        }
        if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
            bail!("cache size `{text}` objects does not fit 64 bits");
        }
        if text.parse::<f64>().is_ok() {
            bail!(
                "cache size `{text}`: a bare number is a whole number of objects (4897); give a \
                 percentage (10%) or bytes with a unit (64M, 4GiB)"
            );
        }
        let bytes = crate::parse_bytes(text).with_context(|| {
            format!(
                "cache size `{text}`: expected objects (4897), a percentage (10%) or bytes (64M)"
            )
        })?;
        if bytes == 0 {
            bail!("a cache of 0 bytes holds nothing: `{text}`");
        }
        Ok(CacheSize::Bytes(bytes))
    }

    /// Capacity in objects for `trace`; a size that rounds down to no object is refused (it
    /// used to become 1 object silently: `100B` or `1e-9%`).
    pub fn objects(self, trace: &Trace) -> Result<usize> {
        let objects = match self {
            CacheSize::Objects(n) => n as f64,
            CacheSize::Percent(p) => (trace.unique as f64 * p / 100.0).floor(),
            CacheSize::Bytes(bytes) => {
                let mean = trace.unique_bytes() as f64 / trace.unique.max(1) as f64;
                (bytes as f64 / mean.max(1.0)).floor()
            }
        };
        if objects < 1.0 {
            let why = match self {
                CacheSize::Bytes(_) => format!(
                    "its mean object is {:.0} bytes",
                    trace.unique_bytes() as f64 / trace.unique.max(1) as f64
                ),
                _ => format!("it has {} distinct objects", trace.unique),
            };
            bail!(
                "cache size {} is less than one object of {} ({why})",
                self.label(),
                trace.name
            );
        }
        Ok(objects as usize)
    }

    /// Label as given (bytes in the largest binary unit that divides them).
    pub fn label(self) -> String {
        match self {
            CacheSize::Objects(n) => n.to_string(),
            CacheSize::Percent(p) => format!("{p}%"),
            CacheSize::Bytes(b) => {
                let unit = ["TiB", "GiB", "MiB", "KiB"]
                    .into_iter()
                    .zip([40, 30, 20, 10])
                    .find(|&(_, shift)| b >= 1 << shift && b % (1 << shift) == 0);
                match unit {
                    Some((unit, shift)) => format!("{}{unit}", b >> shift),
                    None => format!("{b}B"),
                }
            }
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct SweepPlan {
    /// Policy names (`NAME[+ADMISSION]`).
    pub policies: Vec<String>,
    /// Cache sizes.
    pub sizes: Vec<CacheSize>,
    /// Hot table thresholds `H`.
    pub thresholds: Vec<f64>,
    /// Hot table smoothing constants `a`.
    pub smoothings: Vec<f64>,
    /// Hot table period.
    pub period: Period,
    /// Per-run options (timing, per-period metrics).
    pub options: RunOptions,
    /// Seed for randomised policies.
    pub seed: u64,
    /// Worker threads. Default 1.
    pub jobs: usize,
    /// Show a progress bar (still hidden when stderr is not a terminal).
    pub progress: bool,
}

struct Job {
    index: usize,
    spec: PolicySpec,
    hot: bool,
}

/// Runs every combination; results come back in plan order (policy, size, H, a).
pub fn run(trace: &Trace, plan: &SweepPlan) -> Result<Vec<RunResult>> {
    plan.options.timing.check()?;
    let needs_next = plan
        .policies
        .iter()
        .any(|p| p.to_ascii_lowercase().starts_with("belady"));
    let next_seq = needs_next.then(|| trace.next_seq());
    let mut jobs = Vec::new();
    for policy_name in &plan.policies {
        let hot = policy_name.eq_ignore_ascii_case("hottable");
        for &size in &plan.sizes {
            let capacity = size.objects(trace)?;
            let pairs: Vec<(f64, f64)> = if hot {
                plan.thresholds
                    .iter()
                    .flat_map(|&h| plan.smoothings.iter().map(move |&a| (h, a)))
                    .collect()
            } else {
                vec![(f64::NAN, f64::NAN)]
            };
            for (threshold, smoothing) in pairs {
                let mut spec = PolicySpec::new(policy_name, capacity, trace.unique);
                if let CacheSize::Bytes(bytes) = size {
                    spec.capacity_bytes = Some(bytes);
                }
                spec.period = plan.period;
                spec.seed = plan.seed;
                if hot {
                    spec.threshold = threshold;
                    spec.smoothing = smoothing;
                }
                policy::build(&spec).with_context(|| format!("policy `{policy_name}`"))?;
                jobs.push(Job {
                    index: jobs.len(),
                    spec,
                    hot,
                });
            }
        }
    }
    // The bar counts requests replayed over every run, so it moves during a long run (a
    // strata run of a 10-million-request trace takes about a minute); the message says
    // which run each worker started last and how many have ended.
    let requests = trace.requests.len() as u64;
    let bar = if plan.progress && std::io::stderr().is_terminal() {
        ProgressBar::with_draw_target(
            Some(requests * jobs.len() as u64),
            ProgressDrawTarget::stderr(),
        )
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {percent}% of {human_len} requests, eta {eta} {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let ended = std::sync::atomic::AtomicUsize::new(0);
    let total = jobs.len();
    let queue = Mutex::new(jobs.into_iter());
    let results: Mutex<Vec<Option<RunResult>>> = Mutex::new(vec![None; total]);
    let failure: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..plan.jobs.clamp(1, 64) {
            scope.spawn(|| loop {
                let job = match queue.lock() {
                    Ok(mut queue) => queue.next(),
                    Err(_) => None,
                };
                let Some(job) = job else { break };
                let started = |ended: usize| {
                    format!(
                        "({ended}/{total} runs ended; started {} @ {})",
                        job.spec.name, job.spec.capacity
                    )
                };
                bar.set_message(started(ended.load(std::sync::atomic::Ordering::Relaxed)));
                let mut cache = match policy::build(&job.spec) {
                    Ok(cache) => cache,
                    Err(e) => {
                        if let Ok(mut slot) = failure.lock() {
                            *slot = Some(e.into());
                        }
                        break;
                    }
                };
                let (metrics, periods) = simulate_reporting(
                    trace,
                    next_seq.as_deref(),
                    cache.as_mut(),
                    &plan.options,
                    &mut |replayed| bar.inc(replayed),
                );
                let mut result =
                    RunResult::new(trace, &job.spec.name, cache.as_ref(), &metrics, &periods);
                if job.hot {
                    result.threshold = Some(job.spec.threshold);
                    result.smoothing = Some(job.spec.smoothing);
                }
                if let Ok(mut results) = results.lock() {
                    results[job.index] = Some(result);
                }
                let now_ended = ended.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                bar.set_message(started(now_ended));
            });
        }
    });
    bar.finish_and_clear();
    if let Some(error) = failure.into_inner().ok().flatten() {
        return Err(error);
    }
    Ok(results
        .into_inner()
        .map_err(|_| anyhow::anyhow!("worker panicked"))?
        .into_iter()
        .flatten()
        .collect())
}

#[cfg(test)]
mod tests {
    use super::CacheSize;

    #[test]
    fn cache_sizes_parse_and_an_empty_cache_is_refused() {
        assert_eq!(CacheSize::parse("4897").unwrap(), CacheSize::Objects(4897));
        assert_eq!(CacheSize::parse("10%").unwrap(), CacheSize::Percent(10.0));
        assert_eq!(CacheSize::parse("1K").unwrap(), CacheSize::Bytes(1024));
        for empty in ["0", "0K", "0%"] {
            assert!(CacheSize::parse(empty).is_err(), "{empty}");
        }
    }

    /// A bare number is a whole number of objects; a decimal without a unit is refused (it
    /// was bytes: `4897,4897.0` gave 4,897 objects, then 1), and so is a size below one
    /// object (`100B`, `1K`, `1e-9%` became 1 object).
    #[test]
    fn bare_decimals_and_sizes_below_one_object_are_refused() {
        for ambiguous in [
            "4897.0",
            "1.5",
            "1e3",
            "NaN",
            "-1",
            "4897 objects",
            "99999999999999999999",
        ] {
            assert!(CacheSize::parse(ambiguous).is_err(), "{ambiguous}");
        }
        assert_eq!(CacheSize::parse("100B").unwrap(), CacheSize::Bytes(100));
        assert_eq!(CacheSize::parse("64M").unwrap().label(), "64MiB");
        let parts = (0..1_000u64).map(|i| (i % 100, 4096, i, false));
        let trace = crate::Trace::from_parts("t", parts, true);
        for small in ["100B", "1K", "1e-9%", "0.5%"] {
            let size = CacheSize::parse(small).unwrap();
            let error = size.objects(&trace).map_err(|e| e.to_string());
            assert!(
                error.is_err_and(|e| e.contains("less than one object")),
                "{small}"
            );
        }
        assert_eq!(
            CacheSize::parse("8K").unwrap().objects(&trace).ok(),
            Some(2)
        );
        assert_eq!(
            CacheSize::parse("1%").unwrap().objects(&trace).ok(),
            Some(1)
        );
    }
}
