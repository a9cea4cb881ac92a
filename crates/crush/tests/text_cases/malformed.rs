//! Broken crushmap sources and the line each error must name. Every source starts with the
//! same four lines (two devices, types osd and host), so case text begins on line 5.

const PREFIX: &str = "device 0 osd.0\ndevice 1 osd.1 class ssd\ntype 0 osd\ntype 1 host\n";

const RULE_ON_H: &str = "rule r {\n id 0\n type replicated\n min_size 1\n max_size 10\n";

/// (source, line of the error).
pub static CASES: std::sync::LazyLock<Vec<(String, usize)>> = std::sync::LazyLock::new(|| {
    let host = "host h { alg straw2 item osd.0 item osd.1 }\n";
    let cases: Vec<(String, usize)> = vec![
        // unknown bucket type
        ("rack r { alg straw2 }\n".into(), 5),
        // unknown item
        ("host h {\n alg straw2\n item osd.9\n}\n".into(), 7),
        // duplicate bucket id
        ("host a { id -1 alg straw2 }\nhost b { id -1 alg straw2 }\n".into(), 6),
        // weight that is not a number
        ("host h {\n alg straw2\n item osd.0 weight abc\n}\n".into(), 7),
        // device weight over 100
        ("host h {\n alg straw2\n item osd.0 weight 101\n}\n".into(), 7),
        // unknown algorithm
        ("host h {\n alg fancy\n}\n".into(), 6),
        // a bucket named like a device
        ("host osd.0 { alg straw2 }\n".into(), 5),
        // unknown tunable
        ("tunable fastest 1\n".into(), 5),
        // unknown type in a step
        (format!("{host}{RULE_ON_H} step take h\n step chooseleaf firstn 0 type rack\n step emit\n}}\n"), 12),
        // unknown item in a take
        (format!("{host}{RULE_ON_H} step take nowhere\n step emit\n}}\n"), 11),
        // unknown class in a take
        (format!("{host}{RULE_ON_H} step take h class hdd\n step emit\n}}\n"), 11),
        // a take of a bucket that has no shadow tree (uniform buckets cannot be cloned)
        (format!("host u {{ alg uniform item osd.1 }}\n{RULE_ON_H} step take u class ssd\n step emit\n}}\n"), 11),
        // duplicate rule id
        (format!("{host}{RULE_ON_H} step take h\n step emit\n}}\nrule s {{ id 0 type replicated min_size 1 max_size 10 step take h step emit }}\n"), 14),
        // duplicate rule name
        (format!("{host}{RULE_ON_H} step take h\n step emit\n}}\nrule r {{ id 1 type replicated min_size 1 max_size 10 step take h step emit }}\n"), 14),
        // a bucket after a rule
        (format!("{host}{RULE_ON_H} step take h\n step emit\n}}\nhost late {{ alg straw2 }}\n"), 14),
        // a device after a bucket
        (format!("{host}device 2 osd.2\n"), 6),
        // missing closing brace
        ("host h {\n alg straw2\n item osd.0\n".into(), 7),
        // uniform items of different weights
        ("host h {\n alg uniform\n item osd.0 weight 1\n item osd.1 weight 2\n}\n".into(), 8),
        // a position used twice
        ("host h {\n alg straw2\n item osd.0 pos 0\n item osd.1 pos 0\n}\n".into(), 8),
        // a weight set of the wrong size
        (format!("{host}{RULE_ON_H} step take h\n step emit\n}}\nchoose_args 0 {{\n {{ bucket_id -1 weight_set [ [ 1 2 3 ] ] }}\n}}\n"), 15),
        // choose_args for a bucket that does not exist
        (format!("{host}{RULE_ON_H} step take h\n step emit\n}}\nchoose_args 0 {{\n\n {{ bucket_id -4 ids [ 1 ] }}\n}}\n"), 16),
        // two buckets holding each other
        ("host a { alg straw2 item b }\nhost b { alg straw2 item a }\n".into(), 5),
        // the same class twice in one bucket
        ("host h {\n id -1 class ssd\n id -2 class ssd\n alg straw2\n}\n".into(), 7),
        // an unknown rule type
        (format!("{host}rule r {{\n id 0\n type fast\n min_size 1\n max_size 10\n step emit\n}}\n"), 8),
        // a bucket weight over 65535
        (format!("{host}host g {{\n alg straw2\n item h weight 65535.5\n}}\n"), 8),
        // a device name declared twice
        ("device 2 osd.0\n".into(), 5),
        // a rule with no steps
        (format!("{host}rule r {{ id 0 type replicated min_size 1 max_size 10 }}\n"), 6),
    ];
    cases
        .into_iter()
        .map(|(text, line)| (format!("{PREFIX}{text}"), line))
        .collect()
});
