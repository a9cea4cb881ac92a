//! I/O classes in Open-CAS's CSV format: which requests are cached, with what eviction
//! priority and what share of the cache.
//!
//! ```text
//! IO class id,IO class name,Eviction priority,Allocation
//! 0,unclassified,22,1.00
//! 1,request_size:le:131072&done,1,1.00
//! 2,request_size:gt:131072&done,1,0.00
//! ```
//! The name is the rule: conditions joined by `&` (and) or `|` (or, lower precedence), one of
//! `unclassified`, `request_size:OP:BYTES` (OP: eq, ne, lt, le, gt, ge), `metadata` (never true
//! here: a block device sees no filesystem metadata), and `done`. Classes are tried in id
//! order; the last one that matches wins, and a matching class with `done` stops the search.
//! Class 0 takes what nothing else matches. Allocation 0 means "not cached" (pass-through).

use crate::error::CacheError;

/// Most classes Open-CAS allows.
pub const CLASSES_MAX: usize = 34;

/// One condition of a rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Condition {
    Unclassified,
    Metadata,
    RequestSize(Compare, u64),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Compare {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// One I/O class.
#[derive(Clone, Debug, PartialEq)]
pub struct IoClass {
    /// Class id (0..34).
    pub id: u8,
    /// The name as written (the rule).
    pub name: String,
    /// 0 (kept longest) ..= 255 (evicted first).
    pub eviction_priority: u8,
    /// Share of the cache the class may hold, 0.0 ..= 1.0; 0 = not cached.
    pub allocation: f64,
    /// Alternatives (joined by `|`), each a conjunction (joined by `&`).
    rule: Vec<Vec<Condition>>,
    done: bool,
}

impl IoClass {
    fn matches(&self, request_bytes: u64) -> bool {
        self.rule.iter().any(|all| {
            all.iter().all(|condition| match *condition {
                Condition::Unclassified => true,
                Condition::Metadata => false,
                Condition::RequestSize(compare, value) => match compare {
                    Compare::Eq => request_bytes == value,
                    Compare::Ne => request_bytes != value,
                    Compare::Lt => request_bytes < value,
                    Compare::Le => request_bytes <= value,
                    Compare::Gt => request_bytes > value,
                    Compare::Ge => request_bytes >= value,
                },
            })
        })
    }
}

/// The classes of a cache, sorted by id; index 0 is class 0.
#[derive(Clone, Debug, PartialEq)]
pub struct IoClasses {
    classes: Vec<IoClass>,
}

impl Default for IoClasses {
    /// One class, `unclassified`, priority 255, allocation 1: everything is cached alike.
    fn default() -> Self {
        Self {
            classes: vec![IoClass {
                id: 0,
                name: "unclassified".into(),
                eviction_priority: 255,
                allocation: 1.0,
                rule: vec![vec![Condition::Unclassified]],
                done: false,
            }],
        }
    }
}

impl IoClasses {
    /// Parses the CSV text (header line required, as casadm writes it).
    pub fn parse_csv(text: &str) -> Result<Self, CacheError> {
        let invalid = |line: usize, why: String| {
            Err(CacheError::InvalidConfig(format!(
                "io class line {line}: {why}"
            )))
        };
        let mut lines = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty());
        match lines.next() {
            Some((_, header))
                if header
                    .trim()
                    .to_ascii_lowercase()
                    .starts_with("io class id") => {}
            _ => {
                return invalid(
                    1,
                    "missing header `IO class id,IO class name,Eviction priority,Allocation`"
                        .into(),
                )
            }
        }
        let mut classes: Vec<IoClass> = Vec::new();
        for (index, line) in lines {
            let number = index + 1;
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            let [id, name, priority, allocation] = fields[..] else {
                return invalid(number, format!("expected 4 fields, got {}", fields.len()));
            };
            let Ok(id) = id.parse::<u8>() else {
                return invalid(number, format!("bad id {id:?}"));
            };
            if usize::from(id) >= CLASSES_MAX || classes.iter().any(|c| c.id == id) {
                return invalid(number, format!("id {id} out of range or repeated"));
            }
            let Ok(eviction_priority) = priority.parse::<u8>() else {
                return invalid(
                    number,
                    format!("bad eviction priority {priority:?} (0..=255)"),
                );
            };
            let allocation: f64 = match allocation.parse() {
                Ok(value) if (0.0..=1.0).contains(&value) => value,
                _ => {
                    return invalid(
                        number,
                        format!("bad allocation {allocation:?} (0.00..=1.00)"),
                    )
                }
            };
            let (rule, done) = match parse_rule(name) {
                Ok(parsed) => parsed,
                Err(why) => return invalid(number, why),
            };
            classes.push(IoClass {
                id,
                name: name.to_string(),
                eviction_priority,
                allocation,
                rule,
                done,
            });
        }
        classes.sort_by_key(|c| c.id);
        if classes.first().map(|c| c.id) != Some(0) {
            return invalid(0, "class 0 (unclassified) is required".into());
        }
        Ok(Self { classes })
    }

    /// The classes, by id.
    pub fn classes(&self) -> &[IoClass] {
        &self.classes
    }

    /// Index (into [`IoClasses::classes`]) of the class of a request of `request_bytes`.
    pub fn classify(&self, request_bytes: u64) -> usize {
        let mut chosen = 0;
        for (index, class) in self.classes.iter().enumerate().skip(1) {
            if class.matches(request_bytes) {
                chosen = index;
                if class.done {
                    break;
                }
            }
        }
        chosen
    }
}

type Rule = (Vec<Vec<Condition>>, bool);

fn parse_rule(text: &str) -> Result<Rule, String> {
    let mut done = false;
    let mut alternatives = Vec::new();
    for alternative in text.split('|') {
        let mut all = Vec::new();
        for term in alternative.split('&').map(str::trim) {
            let parts: Vec<&str> = term.split(':').collect();
            match parts[..] {
                ["done"] => done = true,
                ["unclassified"] => all.push(Condition::Unclassified),
                ["metadata"] => all.push(Condition::Metadata),
                ["request_size", op, value] => {
                    let compare = match op {
                        "eq" => Compare::Eq,
                        "ne" => Compare::Ne,
                        "lt" => Compare::Lt,
                        "le" => Compare::Le,
                        "gt" => Compare::Gt,
                        "ge" => Compare::Ge,
                        _ => return Err(format!("unknown operator {op:?}")),
                    };
                    let value = value.parse().map_err(|_| format!("bad size {value:?}"))?;
                    all.push(Condition::RequestSize(compare, value));
                }
                _ => return Err(format!("unsupported condition {term:?}")),
            }
        }
        if !all.is_empty() {
            alternatives.push(all);
        }
    }
    if alternatives.is_empty() {
        return Err(format!("rule {text:?} has no condition"));
    }
    Ok((alternatives, done))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEED_001: &str = "IO class id,IO class name,Eviction priority,Allocation
0,unclassified,22,0.00
1,request_size:le:131072&done,1,1.00
";

    #[test]
    fn seed_001_caches_only_requests_up_to_128k() {
        let classes = IoClasses::parse_csv(SEED_001).unwrap();
        assert_eq!(classes.classify(4096), 1);
        assert_eq!(classes.classify(131072), 1);
        assert_eq!(classes.classify(524288), 0);
        assert_eq!(classes.classes()[0].allocation, 0.0);
        assert_eq!(classes.classes()[1].eviction_priority, 1);
    }

    #[test]
    fn last_match_wins_unless_done_and_or_binds_loosest() {
        let text = "IO class id,IO class name,Eviction priority,Allocation
0,unclassified,22,1
1,request_size:le:65536,5,1
2,request_size:le:8192&done,3,0.5
3,request_size:le:4096,2,1
4,request_size:eq:1|request_size:ge:1048576&request_size:le:2097152,9,1
";
        let classes = IoClasses::parse_csv(text).unwrap();
        assert_eq!(classes.classify(4096), 2, "done stops before class 3");
        assert_eq!(classes.classify(32768), 1);
        assert_eq!(classes.classify(1 << 20), 4);
        assert_eq!(classes.classify(4 << 20), 0);
    }

    #[test]
    fn rejects_malformed_files() {
        for text in [
            "0,unclassified,22,1",
            "IO class id,IO class name,Eviction priority,Allocation\n1,request_size:le:1,1,1",
            "IO class id,IO class name,Eviction priority,Allocation\n0,unclassified,300,1",
            "IO class id,IO class name,Eviction priority,Allocation\n0,unclassified,2,1.5",
            "IO class id,IO class name,Eviction priority,Allocation\n0,file_size:le:4,2,1",
            "IO class id,IO class name,Eviction priority,Allocation\n0,unclassified,2",
        ] {
            assert!(IoClasses::parse_csv(text).is_err(), "{text}");
        }
    }
}
