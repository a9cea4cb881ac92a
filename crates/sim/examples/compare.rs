//! Issue 5's scorecard without the CLI (builds only `policy` and `sim`, for quick iterations):
//! `cargo run --release -p sim --example compare -- SHARED_TRACES_DIR [VARIANT,...] [--synthetic]
//! [--only=NAME,...] [--late]` (`--only` keeps the shared traces whose path contains a NAME;
//! `--only=none` keeps none). `--late` scores only the late synthetic hold-outs
//! (`compare::SYNTHETIC_LATE`), apart from the rest.
//! `strata sim compare` prints the same table.

use sim::compare::{self, SHARED_TRACES};
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
    let tuned: Vec<String> = SHARED_TRACES
        .iter()
        .filter(|(_, t)| *t)
        .map(|(p, _)| p.to_string())
        .collect();
    let sizes = [1.0, 5.0, 10.0].map(CacheSize::Percent);
    if args.iter().any(|a| a == "--late") {
        let mut cells = Vec::new();
        for trace in compare::late_synthetic_traces() {
            cells.extend(compare::cells(&trace, &sizes, &variants, false, 2)?);
        }
        print!("{}", compare::report(&cells));
        return Ok(());
    }
    let cells = compare::run_all(&paths, &tuned, synthetic, &sizes, &variants, 2)?;
    print!("{}", compare::report(&cells));
    Ok(())
}
