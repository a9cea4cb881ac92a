//! Which candidate `strata` follows over a trace, with the miss ratio of each 1/40 of it:
//! `cargo run --release -p sim --example leaders -- TRACE PERCENT`.

use policy::strata::{Strata, StrataConfig};
use policy::{Cache, Effects, Request};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [path, percent, ..] = args.as_slice() else {
        anyhow::bail!("usage: leaders TRACE PERCENT");
    };
    let trace = sim::load(std::path::Path::new(path), None, None, None)?;
    let capacity = ((trace.unique as f64 * percent.parse::<f64>()? / 100.0) as usize).max(1);
    let mut cache = Strata::new(StrataConfig::new(capacity), trace.unique);
    let mut effects = Effects::default();
    let (mut misses, mut window_misses, mut leader) = (0u64, 0u64, None);
    let window = (trace.requests.len() / 40).max(1);
    for (seq, r) in trace.requests.iter().enumerate() {
        effects.clear();
        let request = Request {
            key: r.key,
            size_bytes: r.size_bytes,
            object_bytes: 0,
            now_ms: r.time_ms,
            seq: seq as u64,
            write: r.write,
            next_seq: u64::MAX,
        };
        let missed = !cache.on_request(&request, &mut effects).is_hit();
        misses += u64::from(missed);
        window_misses += u64::from(missed);
        if cache.leader() != leader {
            leader = cache.leader();
            println!("{seq:>9} leader {leader:?}");
        }
        if (seq + 1) % window == 0 {
            println!("{seq:>9} miss {:.4}", window_misses as f64 / window as f64);
            window_misses = 0;
        }
    }
    println!("miss {:.4}", misses as f64 / trace.requests.len() as f64);
    Ok(())
}
