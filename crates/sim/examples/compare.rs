//! Issue 5's scorecard without the CLI (builds only `policy` and `sim`, for quick iterations):
//! `cargo run --release -p sim --example compare -- SHARED_TRACES_DIR [VARIANT,...] [--synthetic]
//! [--only=NAME,...] [--late] [--sizes=P,...] [--fresh=C/Z/SEED/SHIFT_S,...]` (`--only` keeps
//! the shared traces whose path contains a NAME; `--only=none` keeps none). `--late` scores only
//! the late synthetic hold-outs (`compare::SYNTHETIC_LATE`), apart from the rest. `--sizes`
//! replaces the scorecard's 1/5/10% by other percentages (the generalization check at sizes the
//! scorecard does not score, `--sizes=2,20`). `--fresh` scores only synthetic traces of seed
//! 003's generator with the given clients, Zipf exponent, seed and popularity shift (seconds),
//! for seeds picked before running.
//! `strata sim compare` prints the same table.

use anyhow::Context as _;
use sim::compare::{self, SHARED_TRACES};
use sim::generator::ClientWorkload;
use sim::CacheSize;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(dir) = args.first() else {
        anyhow::bail!("usage: compare SHARED_TRACES_DIR [VARIANT,...] [--synthetic]");
    };
    let variants: Vec<String> = args
        .get(1)
        .filter(|a| !a.starts_with("--"))
        .map_or("strata", String::as_str)
        .split(',')
        .map(str::to_string)
        .collect();
    let synthetic = args.iter().any(|a| a == "--synthetic");
    let only: Option<&str> = args.iter().find_map(|a| a.strip_prefix("--only="));
    let paths: Vec<std::path::PathBuf> = SHARED_TRACES
        .iter()
        .filter(|(p, _)| only.is_none_or(|o| o.split(',').any(|o| p.contains(o))))
        .map(|(p, _)| std::path::Path::new(dir).join(p))
        .collect();
    let sizes: Vec<CacheSize> = match args.iter().find_map(|a| a.strip_prefix("--sizes=")) {
        Some(list) => list
            .split(',')
            .map(|p| p.parse::<f64>().map(CacheSize::Percent))
            .collect::<Result<_, _>>()
            .context("--sizes takes percentages: --sizes=2,20")?,
        None => [1.0, 5.0, 10.0].map(CacheSize::Percent).to_vec(),
    };
    if let Some(list) = args.iter().find_map(|a| a.strip_prefix("--fresh=")) {
        let mut cells = Vec::new();
        for spec in list.split(',') {
            let fields: Vec<&str> = spec.split('/').collect();
            let [clients, zipf, seed, shift] = fields[..] else {
                anyhow::bail!("--fresh takes CLIENTS/ZIPF/SEED/SHIFT_S, got {spec}");
            };
            let workload = ClientWorkload {
                clients: clients.parse()?,
                zipf_exponent: zipf.parse()?,
                seed: seed.parse()?,
                shift_every_s: shift.parse()?,
                ..ClientWorkload::default()
            };
            let mut trace = workload.generate();
            trace.name = format!("fresh-{clients}c-zipf{zipf}-shift{shift}s-seed{seed}");
            cells.extend(compare::cells(&trace, &sizes, &variants, false, 2)?);
        }
        print!("{}", compare::report(&cells));
        return Ok(());
    }
    if args.iter().any(|a| a == "--late") {
        let mut cells = Vec::new();
        for trace in compare::late_synthetic_traces() {
            cells.extend(compare::cells(&trace, &sizes, &variants, false, 2)?);
        }
        print!("{}", compare::report(&cells));
        return Ok(());
    }
    let cells = compare::run_all(&paths, synthetic, &sizes, &variants, 2)?;
    print!("{}", compare::report(&cells));
    Ok(())
}
