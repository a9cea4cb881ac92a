//! Minimal sweep driver without the CLI: `cargo run --release -p sim --example sweep -- TRACE
//! POLICY[,POLICY...] SIZE[,SIZE...]`. Prints the table `strata sim cache` prints.

use sim::{report, sweep, CacheSize, RunOptions, SweepPlan};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [trace, policies, sizes] = args.as_slice() else {
        anyhow::bail!("usage: sweep TRACE POLICY[,POLICY...] SIZE[,SIZE...]");
    };
    let trace = sim::load(std::path::Path::new(trace), None, None, None)?;
    let plan = SweepPlan {
        policies: policies.split(',').map(str::to_string).collect(),
        sizes: sizes
            .split(',')
            .map(CacheSize::parse)
            .collect::<anyhow::Result<_>>()?,
        thresholds: vec![1.0],
        smoothings: vec![0.5],
        period: policy::hottable::Period::Millis(60_000),
        options: RunOptions::default(),
        seed: 42,
        jobs: 2,
        progress: false,
    };
    print!("{}", report::table(&sweep::run(&trace, &plan)?));
    Ok(())
}
