//! `strata crush`: a drop-in for the parts of Ceph's `crushtool` that matter day to day:
//! compile (`-c`), decompile (`-d`), and test mappings (`-i MAP --test ...`), with crushtool's
//! flag names and byte-identical `--test` output.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use crush::tester::{self, TestConfig};
use crush::CrushMap;

/// Compile, decompile and test CRUSH maps, with crushtool's flags and output.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  strata crush -i map.bin --test --show-mappings --rule 0 --num-rep 3 --min-x 0 --max-x 9
  strata crush -i map.bin --test --show-utilization --rule 0 --num-rep 3 --weight 7 0.5
  strata crush -c map.txt -o map.bin
  strata crush -d map.bin -o map.txt")]
pub struct Args {
    /// Read a binary crushmap (as `ceph osd getcrushmap` or `crushtool -c` writes).
    #[arg(short = 'i', long = "infn", value_name = "BIN")]
    pub input: Option<PathBuf>,

    /// Compile crushmap source text (crushtool's text format) into a map.
    #[arg(short = 'c', long = "compile", value_name = "SRC")]
    pub compile: Option<PathBuf>,

    /// Decompile a binary crushmap to text (to stdout unless -o is given).
    #[arg(short = 'd', long = "decompile", value_name = "BIN")]
    pub decompile: Option<PathBuf>,

    /// Output file: the binary map for -c / -i, the text for -d.
    #[arg(short = 'o', long = "outfn", value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Map a range of inputs through the rules (crushtool --test); pick output with --show-*.
    #[arg(long)]
    pub test: bool,

    /// With --test: print each mapping as `CRUSH rule R x X [osd,...]`.
    #[arg(long = "show-mappings", alias = "show_mappings")]
    pub show_mappings: bool,

    /// With --test: per rule and replica count, how many results had each size.
    #[arg(long = "show-statistics", alias = "show_statistics")]
    pub show_statistics: bool,

    /// With --test: statistics plus, per device, how many replicas it stored vs expected
    /// (devices that stored none are omitted, as crushtool does).
    #[arg(long = "show-utilization", alias = "show_utilization")]
    pub show_utilization: bool,

    /// With --test: like --show-utilization but lists every device and the weight vector.
    #[arg(long = "show-utilization-all", alias = "show_utilization_all")]
    pub show_utilization_all: bool,

    /// With --test: print mappings with fewer OSDs than requested or with holes.
    #[arg(long = "show-bad-mappings", alias = "show_bad_mappings")]
    pub show_bad_mappings: bool,

    /// With --test: only this rule id (default: every rule).
    #[arg(long, value_name = "RULE")]
    pub rule: Option<i32>,

    /// With --test: number of replicas to ask for (default: each rule's min_size..max_size).
    #[arg(long = "num-rep", alias = "num_rep", value_name = "N")]
    pub num_rep: Option<i32>,

    /// With --test: first input value (default 0).
    #[arg(long = "min-x", alias = "min_x", value_name = "X")]
    pub min_x: Option<i32>,

    /// With --test: last input value, inclusive (default 1023).
    #[arg(long = "max-x", alias = "max_x", value_name = "X")]
    pub max_x: Option<i32>,

    /// With --test: a single input value (sets both --min-x and --max-x).
    #[arg(long = "x", value_name = "X")]
    pub x: Option<i32>,

    /// With --test: reweight a device, 0.0 (out) ..= 1.0 (in); repeatable. Stored as
    /// (int)(W * 0x10000) like crushtool, so 0.3 -> 19660.
    #[arg(long, num_args = 2, value_names = ["OSD", "WEIGHT"], action = clap::ArgAction::Append,
          allow_negative_numbers = true)]
    pub weight: Vec<String>,

    /// With --test: hash each input with this pool id (crush_hash32_2(x, pool)), which makes x
    /// the PG seed of PG pool.x when pg_num is a power of two.
    #[arg(long = "pool-id", alias = "pool_id", value_name = "POOL")]
    pub pool_id: Option<i32>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let sources = [&args.input, &args.compile, &args.decompile]
        .iter()
        .filter(|s| s.is_some())
        .count();
    if sources != 1 {
        bail!("give exactly one of -i BIN, -c SRC, -d BIN (see --help)");
    }
    if let Some(path) = &args.decompile {
        let map = read_binary(path)?;
        let text = crush::text::decompile(&map);
        match &args.output {
            Some(out) => {
                std::fs::write(out, text).with_context(|| format!("writing {}", out.display()))?
            }
            None => std::io::stdout().write_all(text.as_bytes())?,
        }
        return Ok(ExitCode::SUCCESS);
    }
    let map = if let Some(path) = &args.compile {
        let source =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        crush::text::compile(&source).with_context(|| format!("compiling {}", path.display()))?
    } else if let Some(path) = &args.input {
        read_binary(path)?
    } else {
        unreachable!("exactly one source was checked above")
    };
    if args.test {
        let config = test_config(&args)?;
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::new(stdout.lock());
        tester::run_split(&map, &config, &mut out, &mut std::io::stderr())?;
        out.flush()?;
    }
    if let Some(out) = &args.output {
        std::fs::write(out, crush::codec::encode(&map))
            .with_context(|| format!("writing {}", out.display()))?;
    } else if args.compile.is_some() && !args.test {
        eprintln!("strata crush: successfully built the map. Use '-o <file>' to write it out.");
    }
    Ok(ExitCode::SUCCESS)
}

fn read_binary(path: &PathBuf) -> anyhow::Result<CrushMap> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    crush::codec::decode(&bytes).with_context(|| format!("decoding {}", path.display()))
}

fn test_config(args: &Args) -> anyhow::Result<TestConfig> {
    let num_rep = args.num_rep.map(|n| (n, n));
    let x_range = match args.x {
        Some(x) => Some((x, x)),
        None => Some((args.min_x.unwrap_or(-1), args.max_x.unwrap_or(-1))),
    };
    let mut device_weights = BTreeMap::new();
    for pair in args.weight.chunks(2) {
        let [device, weight] = pair else {
            bail!("--weight takes an OSD id and a weight");
        };
        let device: i32 = device
            .parse()
            .with_context(|| format!("--weight OSD {device}"))?;
        // crushtool reads the weight with atof (a double) and narrows it to float.
        let weight: f64 = weight
            .parse()
            .with_context(|| format!("--weight W {weight}"))?;
        let weight = weight as f32;
        device_weights.insert(device, weight);
    }
    Ok(TestConfig {
        rule: args.rule,
        num_rep,
        x_range,
        device_weights,
        pool_id: args.pool_id,
        show_mappings: args.show_mappings,
        show_statistics: args.show_statistics,
        show_utilization: args.show_utilization,
        show_utilization_all: args.show_utilization_all,
        show_bad_mappings: args.show_bad_mappings,
    })
}
