//! [`MapBuilder`]: a CRUSH map built from code, for the embedded cluster and tests.
//!
//! The builder describes the common shape (devices with a class and a weight, hosts holding
//! devices, one root holding the hosts, replicated rules `take ROOT [class C]; chooseleaf firstn
//! 0 type host; emit`) and hands it to the very compiler [`super::compile`] uses, so the map is
//! the one `crushtool -c` would build from [`MapBuilder::to_text`]: same automatic ids, shadow
//! trees and straw2 weights.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::compiler::{adjust_bucket_order, Compiler};
use super::parse::{
    BucketDecl, BucketIdDecl, DeviceDecl, ItemDecl, RuleDecl, Statement, StepDecl, StepKind,
    TunableDecl, TypeDecl,
};
use crate::error::Result;
use crate::map::{BucketAlgorithm, CrushMap, Tunables, RULE_TYPE_ERASURE, RULE_TYPE_REPLICATED};

/// Type ids the builder declares: 0 osd, 1 host, 2 root.
const TYPE_NAMES: [&str; 3] = ["osd", "host", "root"];

/// A device of the map: `osd.<id>`, its class and its CRUSH weight (16.16).
#[derive(Debug, Clone, PartialEq, Eq)]
struct DeviceSpec {
    class: Option<String>,
    weight: u32,
}

/// A rule over the root, optionally restricted to one device class.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RuleSpec {
    name: String,
    class: Option<String>,
    /// Erasure (`indep`) rather than replicated (`firstn`).
    erasure: bool,
}

/// Builds a host/root CRUSH map; see the module docs.
///
/// ```
/// use crush::text::MapBuilder;
/// let mut builder = MapBuilder::new();
/// builder.add_device(0, Some("ssd"), 0x10000).add_device(1, Some("hdd"), 0x40000);
/// builder.add_host("node0", &[0, 1]);
/// builder.add_replicated_rule("rep_ssd", Some("ssd"));
/// let map = builder.build().unwrap();
/// assert_eq!(map.item_names.get(&-1).map(String::as_str), Some("node0"));
/// ```
#[derive(Debug, Clone)]
pub struct MapBuilder {
    tunables: Tunables,
    algorithm: BucketAlgorithm,
    root: String,
    devices: BTreeMap<i32, DeviceSpec>,
    hosts: Vec<(String, Vec<i32>)>,
    rules: Vec<RuleSpec>,
    /// Explicit bucket ids by bucket name (the others are assigned as crushtool does).
    bucket_ids: BTreeMap<String, i32>,
}

impl Default for MapBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl MapBuilder {
    /// Jewel ("optimal") tunables with `straw_calc_version` 1 (what a new Pacific cluster has),
    /// straw2 buckets, a root called `default`, nothing else.
    pub fn new() -> Self {
        let jewel = Tunables::profile("jewel").unwrap_or_default();
        Self {
            tunables: Tunables {
                straw_calc_version: 1,
                ..jewel
            },
            algorithm: BucketAlgorithm::Straw2,
            root: "default".to_string(),
            devices: BTreeMap::new(),
            hosts: Vec::new(),
            rules: Vec::new(),
            bucket_ids: BTreeMap::new(),
        }
    }

    /// Use these tunables instead of jewel's.
    pub fn tunables(&mut self, tunables: Tunables) -> &mut Self {
        self.tunables = tunables;
        self
    }

    /// The algorithm of every host and of the root (default straw2).
    pub fn algorithm(&mut self, algorithm: BucketAlgorithm) -> &mut Self {
        self.algorithm = algorithm;
        self
    }

    /// Name the root bucket (default `default`).
    pub fn root(&mut self, name: &str) -> &mut Self {
        self.root = name.to_string();
        self
    }

    /// Declare device `osd.<id>` with an optional class and a CRUSH weight in 16.16
    /// (0x10000 = 1.0). Declaring an id again replaces it.
    pub fn add_device(&mut self, id: i32, class: Option<&str>, weight: u32) -> &mut Self {
        self.devices.insert(
            id,
            DeviceSpec {
                class: class.map(str::to_string),
                weight,
            },
        );
        self
    }

    /// Add a host holding these devices (in this order) under the root; hosts get ids -1, -2,
    /// ... in the order they are added, the root the next one.
    pub fn add_host(&mut self, name: &str, devices: &[i32]) -> &mut Self {
        self.hosts.push((name.to_string(), devices.to_vec()));
        self
    }

    /// Give the host or root called `name` this (negative) bucket id instead of the next free
    /// one, like an `id` line in the source.
    pub fn bucket_id(&mut self, name: &str, id: i32) -> &mut Self {
        self.bucket_ids.insert(name.to_string(), id);
        self
    }

    /// Add rule `take ROOT [class C]; chooseleaf firstn 0 type host; emit` (min_size 1,
    /// max_size 10) with the next id, as `ceph osd crush rule create-replicated` makes it.
    pub fn add_replicated_rule(&mut self, name: &str, class: Option<&str>) -> &mut Self {
        self.rules.push(RuleSpec {
            name: name.to_string(),
            class: class.map(str::to_string),
            erasure: false,
        });
        self
    }

    /// Add an erasure rule as Ceph's `add_simple_rule(.., "indep")` makes it for an EC pool:
    /// `set_chooseleaf_tries 5; set_choose_tries 100; take ROOT [class C]; chooseleaf indep 0
    /// type host; emit` (min_size 3, max_size 20), with the next id.
    pub fn add_erasure_rule(&mut self, name: &str, class: Option<&str>) -> &mut Self {
        self.rules.push(RuleSpec {
            name: name.to_string(),
            class: class.map(str::to_string),
            erasure: true,
        });
        self
    }

    /// The map, as `compile(&self.to_text())` would build it. Errors (an undeclared device, a
    /// weight over 100, a duplicate name) are `Parse` errors with line 0.
    pub fn build(&self) -> Result<CrushMap> {
        let mut statements = self.statements();
        adjust_bucket_order(&mut statements)?;
        Compiler::new().run(&statements)
    }

    fn statements(&self) -> Vec<Statement> {
        let mut statements = Vec::new();
        for (name, value) in tunable_values(&self.tunables) {
            statements.push(Statement::Tunable(TunableDecl {
                line: 0,
                name: name.to_string(),
                value: value as i32,
            }));
        }
        for (&id, device) in &self.devices {
            statements.push(Statement::Device(DeviceDecl {
                line: 0,
                id,
                name: format!("osd.{id}"),
                class: device.class.clone(),
            }));
        }
        for (id, name) in TYPE_NAMES.iter().enumerate() {
            statements.push(Statement::Type(TypeDecl {
                id: id as i32,
                name: (*name).to_string(),
            }));
        }
        for (host, devices) in &self.hosts {
            let items = devices
                .iter()
                .map(|id| ItemDecl {
                    line: 0,
                    name: format!("osd.{id}"),
                    weight: Some(self.devices.get(id).map_or(0x10000, |d| d.weight)),
                    position: None,
                })
                .collect();
            statements.push(Statement::Bucket(self.bucket("host", host, items)));
        }
        let root_items = self
            .hosts
            .iter()
            .map(|(host, _)| ItemDecl {
                line: 0,
                name: host.clone(),
                weight: None,
                position: None,
            })
            .collect();
        statements.push(Statement::Bucket(
            self.bucket("root", &self.root, root_items),
        ));
        for (id, rule) in self.rules.iter().enumerate() {
            statements.push(Statement::Rule(self.rule(id as i32, rule)));
        }
        statements
    }

    fn bucket(&self, type_name: &str, name: &str, items: Vec<ItemDecl>) -> BucketDecl {
        BucketDecl {
            line: 0,
            type_name: type_name.to_string(),
            name: name.to_string(),
            ids: self
                .bucket_ids
                .get(name)
                .map(|&id| BucketIdDecl {
                    line: 0,
                    id,
                    class: None,
                })
                .into_iter()
                .collect(),
            alg_line: 0,
            alg: self.algorithm.name().to_string(),
            hashes: vec![0],
            items,
        }
    }

    fn rule(&self, id: i32, rule: &RuleSpec) -> RuleDecl {
        let step = |kind| StepDecl { line: 0, kind };
        let mut steps = Vec::new();
        if rule.erasure {
            steps.push(step(StepKind::SetChooseLeafTries(5)));
            steps.push(step(StepKind::SetChooseTries(100)));
        }
        steps.push(step(StepKind::Take {
            item: self.root.clone(),
            class: rule.class.clone(),
        }));
        steps.push(step(StepKind::Choose {
            leaf: true,
            indep: rule.erasure,
            count: 0,
            type_name: "host".to_string(),
        }));
        steps.push(step(StepKind::Emit));
        RuleDecl {
            line: 0,
            name: Some(rule.name.clone()),
            id,
            rule_type: if rule.erasure {
                RULE_TYPE_ERASURE
            } else {
                RULE_TYPE_REPLICATED
            },
            min_size: if rule.erasure { 3 } else { 1 },
            max_size: if rule.erasure { 20 } else { 10 },
            steps,
        }
    }

    fn write_id(&self, name: &str, out: &mut String) {
        if let Some(id) = self.bucket_ids.get(name) {
            let _ = writeln!(out, "\tid {id}");
        }
    }

    /// The crushtool source this builder stands for (weights written exactly).
    pub fn to_text(&self) -> String {
        let mut out = String::from("# begin crush map\n");
        for (name, value) in tunable_values(&self.tunables) {
            let _ = writeln!(out, "tunable {name} {value}");
        }
        out.push_str("\n# devices\n");
        for (id, device) in &self.devices {
            let _ = write!(out, "device {id} osd.{id}");
            if let Some(class) = &device.class {
                let _ = write!(out, " class {class}");
            }
            out.push('\n');
        }
        out.push_str("\n# types\n");
        for (id, name) in TYPE_NAMES.iter().enumerate() {
            let _ = writeln!(out, "type {id} {name}");
        }
        out.push_str("\n# buckets\n");
        let alg = self.algorithm.name();
        for (host, devices) in &self.hosts {
            let _ = writeln!(out, "host {host} {{");
            self.write_id(host, &mut out);
            let _ = writeln!(out, "\talg {alg}\n\thash 0\t# rjenkins1");
            for id in devices {
                let weight = self.devices.get(id).map_or(0x10000, |d| d.weight);
                let _ = writeln!(
                    out,
                    "\titem osd.{id} weight {}",
                    f64::from(weight) / 65536.0
                );
            }
            out.push_str("}\n");
        }
        let _ = writeln!(
            out,
            "root {} {{\n\talg {alg}\n\thash 0\t# rjenkins1",
            self.root
        );
        for (host, _) in &self.hosts {
            let _ = writeln!(out, "\titem {host}");
        }
        out.push_str("}\n\n# rules\n");
        for (id, rule) in self.rules.iter().enumerate() {
            let (kind, min, max, mode) = if rule.erasure {
                ("erasure", 3, 20, "indep")
            } else {
                ("replicated", 1, 10, "firstn")
            };
            let _ = writeln!(
                out,
                "rule {} {{\n\tid {id}\n\ttype {kind}\n\tmin_size {min}\n\tmax_size {max}",
                rule.name
            );
            if rule.erasure {
                out.push_str("\tstep set_chooseleaf_tries 5\n\tstep set_choose_tries 100\n");
            }
            let _ = write!(out, "\tstep take {}", self.root);
            if let Some(class) = &rule.class {
                let _ = write!(out, " class {class}");
            }
            let _ = write!(
                out,
                "\n\tstep chooseleaf {mode} 0 type host\n\tstep emit\n}}\n"
            );
        }
        out.push_str("\n# end crush map\n");
        out
    }
}

/// The eight tunables in crushtool's order.
fn tunable_values(t: &Tunables) -> [(&'static str, u32); 8] {
    [
        ("choose_local_tries", t.choose_local_tries),
        ("choose_local_fallback_tries", t.choose_local_fallback_tries),
        ("choose_total_tries", t.choose_total_tries),
        ("chooseleaf_descend_once", t.chooseleaf_descend_once),
        ("chooseleaf_vary_r", t.chooseleaf_vary_r.into()),
        ("chooseleaf_stable", t.chooseleaf_stable.into()),
        ("straw_calc_version", t.straw_calc_version.into()),
        ("allowed_bucket_algs", t.allowed_bucket_algs),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::compile;

    /// Four hosts of three hdd (4.0) and one ssd (0.5), like the classes_ssd_hdd fixture.
    fn classes_builder() -> MapBuilder {
        let mut builder = MapBuilder::new();
        for host in 0..4 {
            let first = host * 4;
            for id in first..first + 3 {
                builder.add_device(id, Some("hdd"), 4 * 0x10000);
            }
            builder.add_device(first + 3, Some("ssd"), 0x8000);
            builder.add_host(
                &format!("node{host}"),
                &[first, first + 1, first + 2, first + 3],
            );
        }
        builder
            .add_replicated_rule("rep_any", None)
            .add_replicated_rule("rep_ssd", Some("ssd"))
            .add_replicated_rule("rep_hdd", Some("hdd"));
        builder
    }

    #[test]
    fn builder_map_equals_compiled_hand_written_text() {
        let mut text = String::from(
            "tunable choose_local_tries 0\ntunable choose_local_fallback_tries 0\n\
             tunable choose_total_tries 50\ntunable chooseleaf_descend_once 1\n\
             tunable chooseleaf_vary_r 1\ntunable chooseleaf_stable 1\n\
             tunable straw_calc_version 1\ntunable allowed_bucket_algs 54\n",
        );
        for host in 0..4 {
            for id in host * 4..host * 4 + 3 {
                text += &format!("device {id} osd.{id} class hdd\n");
            }
            text += &format!("device {0} osd.{0} class ssd\n", host * 4 + 3);
        }
        text += "type 0 osd\ntype 1 host\ntype 2 root\n";
        for host in 0..4 {
            text += &format!("host node{host} {{\n alg straw2\n hash 0\n");
            for id in host * 4..host * 4 + 3 {
                text += &format!(" item osd.{id} weight 4.0\n");
            }
            text += &format!(" item osd.{} weight 0.5\n}}\n", host * 4 + 3);
        }
        text += "root default {\n alg straw2\n hash 0\n item node0\n item node1\n item node2\n item node3\n}\n";
        for (id, (name, class)) in [
            ("rep_any", ""),
            ("rep_ssd", " class ssd"),
            ("rep_hdd", " class hdd"),
        ]
        .iter()
        .enumerate()
        {
            text += &format!(
                "rule {name} {{\n id {id}\n type replicated\n min_size 1\n max_size 10\n \
                 step take default{class}\n step chooseleaf firstn 0 type host\n step emit\n}}\n"
            );
        }
        let builder = classes_builder();
        let built = builder.build().expect("builder map");
        assert_eq!(built, compile(&text).expect("hand-written text compiles"));
        assert_eq!(
            built,
            compile(&builder.to_text()).expect("to_text compiles")
        );
        // The shadow tree is there: rep_ssd takes default~ssd.
        let ssd_root = built
            .class_buckets
            .get(&-5)
            .and_then(|c| c.get(&1))
            .copied();
        assert_eq!(
            ssd_root
                .and_then(|id| built.item_names.get(&id))
                .map(String::as_str),
            Some("default~ssd")
        );
    }

    #[test]
    fn builder_reproduces_the_classes_fixture_rules() {
        // fixtures/crush-vectors/src_classes_ssd_hdd.txt: same devices and hosts; its rules
        // rep_any, rep_ssd and ec_hdd are what the builder's rule helpers write.
        let mut builder = classes_builder();
        builder.rules.clear();
        builder
            .add_replicated_rule("rep_any", None)
            .add_replicated_rule("rep_ssd", Some("ssd"))
            .add_erasure_rule("ec_hdd", Some("hdd"))
            .bucket_id("default", -1);
        for host in 0..4 {
            builder.bucket_id(&format!("node{host}"), -2 - host);
        }
        let built = builder.build().expect("builder map");
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/crush-vectors/src_classes_ssd_hdd.txt"
        );
        let source = std::fs::read_to_string(path).expect("fixture source");
        let fixture = compile(&source).expect("fixture compiles");
        // The fixture has a fourth rule and its hosts and root are declared in the same order.
        assert_eq!(built.buckets, fixture.buckets);
        assert_eq!(built.class_buckets, fixture.class_buckets);
        for id in 0..3 {
            assert_eq!(built.rule(id), fixture.rule(id), "rule {id}");
        }
        assert_eq!(
            built,
            compile(&builder.to_text()).expect("to_text compiles")
        );
    }

    #[test]
    fn builder_reports_undeclared_devices() {
        let mut builder = MapBuilder::new();
        builder.add_host("h", &[7]);
        assert!(builder.build().is_err());
    }
}
