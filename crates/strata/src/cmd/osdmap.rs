//! `strata osdmap`: osdmaptool's mapping tests on a binary osdmap or on `ceph osd dump` JSON.
//! All logic lives in the `osdmap` crate ([`osdmap::tool`]); this module parses arguments,
//! reads files and writes the text.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use osdmap::tool::{self, PgListing};
use osdmap::OsdMap;

/// Map pools, PGs and objects to OSDs exactly as Ceph 16.2 does; the output matches
/// `osdmaptool` byte for byte for the same flags.
///
/// Input is either a binary osdmap (`ceph osd getmap -o MAP`, `osdmaptool --createsimple`) or,
/// with `--dump-json`, the output of `ceph osd dump --format json` plus the binary crushmap
/// (`ceph osd getcrushmap -o BIN`), since the JSON dump has no CRUSH map.
#[derive(clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    /// Binary osdmap file.
    #[arg(
        value_name = "MAP",
        required_unless_present = "dump_json",
        conflicts_with = "dump_json"
    )]
    map: Option<PathBuf>,

    /// Read `ceph osd dump --format json` output instead of a binary osdmap (needs --crush).
    #[arg(long, value_name = "FILE", requires = "crush")]
    dump_json: Option<PathBuf>,

    /// Binary crushmap to go with --dump-json.
    #[arg(long, value_name = "BIN")]
    crush: Option<PathBuf>,

    /// Print the map summary (epoch, flags, pools, OSDs, upmaps), as `osdmaptool --print`.
    #[arg(long)]
    print: bool,

    /// Map every PG; print per-OSD counts and statistics.
    #[arg(long)]
    test_map_pgs: bool,

    /// Like --test-map-pgs, with one `pgid [acting] primary` line per PG first.
    #[arg(long)]
    test_map_pgs_dump: bool,

    /// Like --test-map-pgs, with a `raw (...) up (...) acting (...)` line per PG first.
    #[arg(long)]
    test_map_pgs_dump_all: bool,

    /// Map one PG (`<pool>.<hex seed>`) and print raw, up and acting sets.
    #[arg(long, value_name = "PGID")]
    test_map_pg: Option<String>,

    /// Map one object name to its PG and acting OSDs (pool 1 unless --pool).
    #[arg(long, value_name = "NAME")]
    test_map_object: Option<String>,

    /// With --test-map-pgs*: first set pg_num of the tested pool(s) to N (pgp_num unchanged),
    /// as osdmaptool's --pg_num does (the change stays for --print).
    #[arg(long = "pg-num", alias = "pg_num", value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pg_num: Option<u32>,

    /// Before anything else, mark this OSD up and out (reweight 0), in memory only.
    #[arg(long, value_name = "OSD")]
    mark_out: Option<i32>,

    /// Before anything else, mark this OSD up, in memory only.
    #[arg(long, value_name = "OSD")]
    mark_up: Option<i32>,

    /// Restrict --test-map-pgs* to this pool id; the pool of --test-map-object.
    #[arg(long, value_name = "ID")]
    pool: Option<i64>,
}

const EXAMPLES: &str = "Examples:
  strata osdmap om.bin --test-map-pgs-dump --pool 1
  strata osdmap om.bin --test-map-object rbd_data.1 --pool 1
  strata osdmap om.bin --test-map-pg 1.1f
  strata osdmap om.bin --mark-out 5 --test-map-pgs --pool 1
  strata osdmap --dump-json dump.json --crush crush.bin --print";

fn load(args: &Args) -> anyhow::Result<OsdMap> {
    match (&args.map, &args.dump_json, &args.crush) {
        (_, Some(json_path), Some(crush_path)) => {
            let json = std::fs::read_to_string(json_path)
                .with_context(|| format!("reading {}", json_path.display()))?;
            let crush = std::fs::read(crush_path)
                .with_context(|| format!("reading {}", crush_path.display()))?;
            OsdMap::from_dump_json(&json, &crush)
                .with_context(|| format!("decoding {}", json_path.display()))
        }
        (Some(path), _, _) => {
            let bytes =
                std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            OsdMap::decode(&bytes).with_context(|| format!("decoding {}", path.display()))
        }
        _ => anyhow::bail!("give an osdmap file, or --dump-json FILE --crush BIN"),
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let listing = if args.test_map_pgs_dump_all {
        Some(PgListing::All)
    } else if args.test_map_pgs_dump {
        Some(PgListing::Acting)
    } else if args.test_map_pgs {
        Some(PgListing::None)
    } else {
        None
    };
    if !args.print
        && listing.is_none()
        && args.test_map_pg.is_none()
        && args.test_map_object.is_none()
    {
        anyhow::bail!("no action given: use --print, --test-map-pgs[-dump[-all]], --test-map-pg or --test-map-object (see --help)");
    }
    let mut map = load(&args)?;
    let mut out = String::new();
    // osdmaptool applies its in-memory edits first, announcing each on stdout.
    let slots = 0..map.max_osd();
    let in_range = |osd: i32| slots.contains(&osd);
    if let Some(osd) = args.mark_out.filter(|&osd| in_range(osd)) {
        out.push_str(&format!("marking OSD@{osd} as out\n"));
        map.set_osd_state(osd, map.osd_state(osd) | osdmap::map::OSD_UP);
        map.set_osd_weight(osd, osdmap::map::WEIGHT_OUT);
    }
    if let Some(osd) = args.mark_up.filter(|&osd| in_range(osd)) {
        out.push_str(&format!("marking OSD@{osd} as up\n"));
        map.set_osd_state(osd, map.osd_state(osd) | osdmap::map::OSD_UP);
    }
    // The order osdmaptool prints in.
    if let Some(name) = &args.test_map_object {
        out.push_str(&tool::test_map_object(&map, name, args.pool)?);
    }
    if let Some(pg) = &args.test_map_pg {
        out.push_str(&tool::test_map_pg(&map, pg)?);
    }
    if let Some(listing) = listing {
        if let Some(pg_num) = args.pg_num {
            let tested: Vec<_> = map
                .pools()
                .values()
                .filter(|pool| args.pool.is_none_or(|id| id == pool.id))
                .cloned()
                .collect();
            for mut pool in tested {
                // Ceph's set_pg_num: pg_num_pending follows pg_num.
                pool.pg_num = pg_num;
                pool.pg_num_pending = pg_num;
                map.insert_pool(pool);
            }
        }
        out.push_str(&tool::test_map_pgs(&map, args.pool, listing)?);
    }
    if args.print {
        out.push_str(&tool::print(&map));
    }
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(out.as_bytes())?;
    stdout.flush()?;
    Ok(ExitCode::SUCCESS)
}
