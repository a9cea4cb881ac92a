//! Malformed configurations give clear errors naming the field; the default config is valid
//! and round-trips through TOML.

use cluster::{ClusterConfig, ClusterError};

const HOSTS: &str = r#"
[[host]]
name = "a"
[[host]]
name = "b"
"#;

fn osd(id: i32, host: &str, extra: &str) -> String {
    format!("[[osd]]\nid = {id}\nhost = \"{host}\"\ndevice = \"mem:64M\"\n{extra}\n")
}

#[test]
fn malformed_configs_name_the_field() {
    let two_osds = format!("{HOSTS}{}{}", osd(0, "a", ""), osd(1, "b", ""));
    let cases: Vec<(String, &str)> = vec![
        ("scrub_interval_s = \"daily\"".into(), "scrub_interval_s"),
        ("colour = 3".into(), "unknown field `colour`"),
        (
            format!("{HOSTS}[[host]]\nname = \"a\"\n"),
            "duplicate host \"a\"",
        ),
        (
            format!("{HOSTS}{}{}", osd(0, "a", ""), osd(0, "b", "")),
            "duplicate OSD id 0",
        ),
        (format!("{HOSTS}{}", osd(0, "c", "")), "unknown host \"c\""),
        (String::new(), "the cluster has no OSDs"),
        (
            format!("{two_osds}[[pool]]\nname = \"a\\tb\"\nsize = 1\n"),
            "control characters",
        ),
        (HOSTS.to_string(), "the cluster has no OSDs"),
        (
            format!(
                "{HOSTS}[[osd]]\nid = 0\nhost = \"a\"\ndevice = \"file:o.img:64M\"\n\
                 [[osd]]\nid = 1\nhost = \"b\"\ndevice = \"file:./o.img:64M\"\n"
            ),
            "o.img is also osd.0's device",
        ),
        (
            format!("{HOSTS}[[osd]]\nid = 0\nhost = \"a\"\n"),
            "missing field `device`",
        ),
        (
            format!("{HOSTS}[[osd]]\nid = 0\nhost = \"a\"\ndevice = \"floppy@mem:1M\"\n"),
            "osd[0] (id 0).device",
        ),
        (
            format!("{HOSTS}{}", osd(0, "a", "min_alloc_size = 1000")),
            "min_alloc_size",
        ),
        (format!("{HOSTS}{}", osd(0, "a", "weight = -1.0")), "weight"),
        (format!("{HOSTS}{}", osd(0, "a", "size = \"lots\"")), "size"),
        (
            format!("{HOSTS}{}", osd(0, "a", "data_cache_size = \"64 apples\"")),
            "osd[0] (id 0).data_cache_size: \"64 apples\" is not a size",
        ),
        (
            format!("{HOSTS}{}", osd(0, "a", "emulation = \"tape\"")),
            "emulation",
        ),
        (
            format!("{HOSTS}{}", osd(-1, "a", "")),
            "id: must be 0..=65535",
        ),
        (
            format!("{two_osds}[[pool]]\nname = \"p\"\nsize = 3\n"),
            "only 2 hosts",
        ),
        (
            format!("{two_osds}[[pool]]\nname = \"p\"\nsize = 2\ndevice_class = \"ssd\"\n"),
            "no OSD has class \"ssd\"",
        ),
        (
            format!("{two_osds}[[pool]]\nname = \"p\"\nsize = 2\nmin_size = 3\n"),
            "min_size",
        ),
        (
            format!("{two_osds}[[pool]]\nname = \"p\"\nsize = 2\npg_num = 0\n"),
            "pg_num",
        ),
        (
            format!("{two_osds}[[pool]]\nname = \"p\"\nsize = 1\ncrush_rule = \"fancy\"\n"),
            "unknown rule \"fancy\"",
        ),
        (
            format!(
                "{two_osds}[[pool]]\nname = \"p\"\nsize = 1\n[[pool]]\nname = \"p\"\nsize = 1\n"
            ),
            "duplicate pool",
        ),
        (
            format!("{two_osds}[[pool]]\nsize = 1\n"),
            "missing field `name`",
        ),
        (
            format!("{two_osds}[[pool]]\nname = \"p\"\nsize = 1\nreplicas = 2\n"),
            "unknown field `replicas`",
        ),
    ];
    for (text, expected) in cases {
        match ClusterConfig::from_toml(&text) {
            Ok(_) => panic!("accepted:\n{text}"),
            Err(ClusterError::Config(message)) => assert!(
                message.contains(expected),
                "error {message:?} should mention {expected:?} for:\n{text}"
            ),
            Err(other) => panic!("wrong error kind {other:?}"),
        }
    }
}

#[test]
fn default_config_is_valid_and_round_trips() {
    let config = ClusterConfig::default_cluster();
    config.validate().unwrap();
    assert_eq!(config.hosts.len(), 3);
    assert_eq!(config.osds.len(), 9);
    assert_eq!(config.osds.iter().filter(|o| o.class == "ssd").count(), 3);
    let text = config.to_toml();
    assert_eq!(ClusterConfig::from_toml(&text).unwrap(), config);
    let minimal = format!("{HOSTS}{}", osd(0, "a", ""));
    let parsed = ClusterConfig::from_toml(&minimal).unwrap();
    assert_eq!(parsed.osds[0].class, "hdd");
    assert_eq!(parsed.osds[0].min_alloc_size, 4096);
    assert_eq!(parsed.osds[0].data_cache_bytes(), 256 << 20);
    assert_eq!(parsed.scrub_interval_s, 86_400);
    let off = format!("{HOSTS}{}", osd(0, "a", "data_cache_size = \"0\""));
    let parsed = ClusterConfig::from_toml(&off).unwrap();
    assert_eq!(
        parsed.osds[0].data_cache_bytes(),
        0,
        "0 turns the cache off"
    );
}
