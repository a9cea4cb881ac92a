//! The `faulty:OPTIONS:` prefix of a device spec: random faults of a [`FaultyDevice`]
//! (crate::FaultyDevice) as comma-separated `KEY=VALUE` options.
//!
//! | option | meaning |
//! |---|---|
//! | `eio=P` | a read or write fails with EIO with probability P (`read-eio=P`, `write-eio=P`: one side) |
//! | `torn=P` | a write stores a prefix of its blocks, then fails with EIO |
//! | `flip=P` | a read returns, or a write stores, one flipped bit (`read-flip=P`, `write-flip=P`) |
//! | `spike=P/DURATION` | an operation is delayed by DURATION (`250us`, `50ms`, `1s`) |
//! | `seed=N` | seed of the fault generator (default 0): a seed replays the same faults |
//!
//! Probabilities are per operation, in `0..=1`. Options contain no `:`, so the options end
//! at the first `:` and the inner device spec follows.

use crate::FaultConfig;

/// The spec prefix of a faulty device.
pub(super) const PREFIX: &str = "faulty:";

/// The option keys, for error messages.
const KEYS: &str = "eio, read-eio, write-eio, torn, flip, read-flip, write-flip, spike, seed";

/// Parses the options between `faulty:` and the inner spec (may be empty: no faults).
pub(super) fn parse_options(text: &str) -> Result<FaultConfig, String> {
    let mut config = FaultConfig::default();
    for option in text.split(',').filter(|option| !option.is_empty()) {
        let Some((key, value)) = option.split_once('=') else {
            return Err(format!(
                "faulty option {option:?} is not KEY=VALUE (keys: {KEYS})"
            ));
        };
        let probability = || parse_probability(key, value);
        match key {
            "eio" => {
                let p = probability()?;
                config.read_error_probability = p;
                config.write_error_probability = p;
            }
            "read-eio" => config.read_error_probability = probability()?,
            "write-eio" => config.write_error_probability = probability()?,
            "torn" => config.torn_write_probability = probability()?,
            "flip" => {
                let p = probability()?;
                config.read_bit_flip_probability = p;
                config.write_bit_flip_probability = p;
            }
            "read-flip" => config.read_bit_flip_probability = probability()?,
            "write-flip" => config.write_bit_flip_probability = probability()?,
            "spike" => {
                let Some((p, duration)) = value.split_once('/') else {
                    return Err(format!(
                        "faulty option spike={value}: write spike=PROBABILITY/DURATION, \
                         e.g. spike=0.01/50ms"
                    ));
                };
                config.latency_spike_probability = parse_probability(key, p)?;
                config.latency_spike_us = parse_duration_us(duration).ok_or_else(|| {
                    format!(
                        "faulty option spike={value}: {duration:?} is not a duration like \
                         250us, 50ms or 1s"
                    )
                })?;
            }
            "seed" => {
                config.seed = value.parse().map_err(|_| {
                    format!("faulty option seed={value}: a seed is a whole number 0..2^64")
                })?;
            }
            _ => return Err(format!("unknown faulty option {key:?} (known: {KEYS})")),
        }
    }
    Ok(config)
}

/// The options of `config` in the form [`parse_options`] reads (scripted rules and crash
/// losses have no spec form and are left out). Zero probabilities are left out.
pub(super) fn format_options(config: &FaultConfig) -> String {
    let mut options = Vec::new();
    let mut pair = |both: &str, read: &str, write: &str, (r, w): (f64, f64)| {
        if r == w {
            if r > 0.0 {
                options.push(format!("{both}={r}"));
            }
        } else {
            if r > 0.0 {
                options.push(format!("{read}={r}"));
            }
            if w > 0.0 {
                options.push(format!("{write}={w}"));
            }
        }
    };
    pair(
        "eio",
        "read-eio",
        "write-eio",
        (
            config.read_error_probability,
            config.write_error_probability,
        ),
    );
    pair(
        "flip",
        "read-flip",
        "write-flip",
        (
            config.read_bit_flip_probability,
            config.write_bit_flip_probability,
        ),
    );
    if config.torn_write_probability > 0.0 {
        options.push(format!("torn={}", config.torn_write_probability));
    }
    if config.latency_spike_probability > 0.0 {
        options.push(format!(
            "spike={}/{}",
            config.latency_spike_probability,
            format_duration_us(config.latency_spike_us)
        ));
    }
    if config.seed != 0 {
        options.push(format!("seed={}", config.seed));
    }
    options.join(",")
}

fn parse_probability(key: &str, value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
        _ => Err(format!(
            "faulty option {key}={value}: a probability is a number in 0..=1"
        )),
    }
}

/// `250us`, `50ms`, `1s` (whole numbers) in µs.
fn parse_duration_us(text: &str) -> Option<u64> {
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().ok()?;
    let scale = match unit {
        "us" => 1,
        "ms" => 1_000,
        "s" => 1_000_000,
        _ => return None,
    };
    number.checked_mul(scale)
}

fn format_duration_us(duration_us: u64) -> String {
    if duration_us > 0 && duration_us.is_multiple_of(1_000_000) {
        format!("{}s", duration_us / 1_000_000)
    } else if duration_us > 0 && duration_us.is_multiple_of(1_000) {
        format!("{}ms", duration_us / 1_000)
    } else {
        format!("{duration_us}us")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_option() {
        let config =
            parse_options("eio=0.001,write-flip=0.5,torn=0.25,spike=0.01/50ms,seed=7").unwrap();
        assert_eq!(config.read_error_probability, 0.001);
        assert_eq!(config.write_error_probability, 0.001);
        assert_eq!(config.write_bit_flip_probability, 0.5);
        assert_eq!(config.read_bit_flip_probability, 0.0);
        assert_eq!(config.torn_write_probability, 0.25);
        assert_eq!(config.latency_spike_probability, 0.01);
        assert_eq!(config.latency_spike_us, 50_000);
        assert_eq!(config.seed, 7);
        assert_eq!(
            format_options(&config),
            "eio=0.001,write-flip=0.5,torn=0.25,spike=0.01/50ms,seed=7"
        );
        assert_eq!(parse_options("").unwrap(), FaultConfig::default());
    }

    #[test]
    fn names_what_is_wrong() {
        for (text, expected) in [
            ("eio=2", "eio=2: a probability is a number in 0..=1"),
            ("eio=-0.1", "a probability"),
            ("eio=NaN", "a probability"),
            ("bogus=1", "unknown faulty option \"bogus\""),
            ("eio", "is not KEY=VALUE"),
            ("spike=0.1", "spike=PROBABILITY/DURATION"),
            ("spike=0.1/50", "not a duration"),
            ("spike=0.1/5m", "not a duration"),
            ("seed=-1", "a seed is a whole number"),
        ] {
            let error = parse_options(text).unwrap_err();
            assert!(error.contains(expected), "{text}: {error}");
        }
    }
}
