use proptest::prelude::*;

use super::*;

const DAY_NS: u64 = 10_000_000_000;

fn tag(key: &str, value: &str) -> Tag {
    Tag {
        key: key.into(),
        value: value.into(),
    }
}

fn version(mtime_ns: u64) -> VersionView {
    VersionView {
        size_bytes: 100,
        mtime_ns,
        tags: Vec::new(),
        delete_marker: false,
    }
}

fn marker(mtime_ns: u64) -> VersionView {
    VersionView {
        delete_marker: true,
        size_bytes: 0,
        ..version(mtime_ns)
    }
}

fn expire_after(prefix: &str, days: u32) -> Rule {
    Rule {
        id: "r".into(),
        enabled: true,
        prefix: Some(prefix.into()),
        expiration_days: Some(days),
        ..Rule::default()
    }
}

#[test]
fn current_version_expires_after_its_days_under_its_prefix_only() {
    let rules = [expire_after("logs/", 2)];
    let versions = [version(0)];
    assert!(decide_key(&rules, "logs/a", &versions, 2 * DAY_NS - 1, DAY_NS).is_empty());
    assert_eq!(
        decide_key(&rules, "logs/a", &versions, 2 * DAY_NS, DAY_NS),
        vec![(0, Action::ExpireCurrent)]
    );
    assert!(decide_key(&rules, "keep/a", &versions, 100 * DAY_NS, DAY_NS).is_empty());
}

#[test]
fn disabled_rules_do_nothing() {
    let mut rule = expire_after("", 1);
    rule.enabled = false;
    assert!(decide_key(&[rule], "a", &[version(0)], 100 * DAY_NS, DAY_NS).is_empty());
}

#[test]
fn date_expires_from_that_date() {
    let rule = Rule {
        id: "d".into(),
        enabled: true,
        expiration_date_s: Some(86_400),
        ..Rule::default()
    };
    let second = 1_000_000_000;
    assert!(decide_key(
        std::slice::from_ref(&rule),
        "a",
        &[version(0)],
        86_399 * second,
        DAY_NS
    )
    .is_empty());
    assert_eq!(
        decide_key(&[rule], "a", &[version(0)], 86_400 * second, DAY_NS),
        vec![(0, Action::ExpireCurrent)]
    );
}

#[test]
fn tag_and_size_filters_are_anded() {
    let rule = Rule {
        id: "t".into(),
        enabled: true,
        filter: Some(RuleFilter {
            and: Some(AndFilter {
                prefix: Some("p/".into()),
                tags: vec![tag("k", "v")],
                size_greater_than_bytes: Some(10),
                size_less_than_bytes: Some(1000),
            }),
            ..RuleFilter::default()
        }),
        expiration_days: Some(1),
        ..Rule::default()
    };
    assert!(rule.matches("p/a", &[tag("k", "v"), tag("x", "y")], 100));
    assert!(!rule.matches("p/a", &[tag("k", "w")], 100));
    assert!(!rule.matches("q/a", &[tag("k", "v")], 100));
    assert!(!rule.matches("p/a", &[tag("k", "v")], 10));
    assert!(!rule.matches("p/a", &[tag("k", "v")], 1000));
}

#[test]
fn noncurrent_versions_expire_days_after_they_became_noncurrent() {
    let rule = Rule {
        id: "n".into(),
        enabled: true,
        noncurrent_days: Some(1),
        ..Rule::default()
    };
    // Newest first: written at 5, 3 and 0 days.
    let versions = [version(5 * DAY_NS), version(3 * DAY_NS), version(0)];
    // At day 4: the oldest became noncurrent at day 3, the middle one at day 5.
    assert_eq!(
        decide_key(
            std::slice::from_ref(&rule),
            "a",
            &versions,
            4 * DAY_NS,
            DAY_NS
        ),
        vec![(2, Action::RemoveVersion)]
    );
    assert_eq!(
        decide_key(&[rule], "a", &versions, 6 * DAY_NS, DAY_NS),
        vec![(1, Action::RemoveVersion), (2, Action::RemoveVersion)]
    );
}

#[test]
fn newer_noncurrent_versions_are_kept() {
    let rule = Rule {
        id: "n".into(),
        enabled: true,
        noncurrent_days: Some(1),
        newer_noncurrent_versions: Some(1),
        ..Rule::default()
    };
    let versions = [version(2 * DAY_NS), version(DAY_NS), version(0)];
    assert_eq!(
        decide_key(&[rule], "a", &versions, 10 * DAY_NS, DAY_NS),
        vec![(2, Action::RemoveVersion)]
    );
}

#[test]
fn a_delete_marker_goes_once_it_is_alone() {
    let rule = Rule {
        id: "m".into(),
        enabled: true,
        expired_object_delete_marker: Some(true),
        noncurrent_days: Some(1),
        ..Rule::default()
    };
    let versions = [marker(DAY_NS), version(0)];
    // Before the version under it expires, the marker stays.
    assert!(decide_key(
        std::slice::from_ref(&rule),
        "a",
        &versions,
        DAY_NS + 1,
        DAY_NS
    )
    .is_empty());
    // The version expires in the same pass: the marker is then alone and goes too.
    assert_eq!(
        decide_key(&[rule], "a", &versions, 2 * DAY_NS, DAY_NS),
        vec![(1, Action::RemoveVersion), (0, Action::RemoveVersion)]
    );
}

#[test]
fn uploads_abort_after_their_days_and_not_by_tag_rules() {
    let rule = Rule {
        id: "u".into(),
        enabled: true,
        prefix: Some("tmp/".into()),
        abort_multipart_days: Some(2),
        ..Rule::default()
    };
    let rules = [rule];
    assert!(!upload_expires(&rules, "tmp/a", 0, 2 * DAY_NS - 1, DAY_NS));
    assert!(upload_expires(&rules, "tmp/a", 0, 2 * DAY_NS, DAY_NS));
    assert!(!upload_expires(&rules, "keep/a", 0, 9 * DAY_NS, DAY_NS));
}

#[test]
fn validation_answers_as_s3() {
    let mut counter = 0;
    let mut new_id = || {
        counter += 1;
        format!("id{counter}")
    };
    let code = |rules: &mut [Rule], new_id: &mut dyn FnMut() -> String| {
        validate(rules, new_id).map_err(|error| error.code().as_str().to_string())
    };
    let mut long_id = [Rule {
        id: "a".repeat(256),
        ..expire_after("", 1)
    }];
    assert_eq!(
        code(&mut long_id, &mut new_id),
        Err("InvalidArgument".into())
    );
    let mut same = [expire_after("a", 1), expire_after("b", 1)];
    assert_eq!(code(&mut same, &mut new_id), Err("InvalidArgument".into()));
    let mut zero = [expire_after("", 0)];
    assert_eq!(code(&mut zero, &mut new_id), Err("InvalidArgument".into()));
    let mut no_action = [Rule {
        id: "x".into(),
        enabled: true,
        ..Rule::default()
    }];
    assert_eq!(
        code(&mut no_action, &mut new_id),
        Err("InvalidRequest".into())
    );
    let mut unnamed = [
        Rule {
            id: String::new(),
            ..expire_after("a", 1)
        },
        Rule {
            id: String::new(),
            ..expire_after("b", 1)
        },
    ];
    assert_eq!(code(&mut unnamed, &mut new_id), Ok(()));
    assert_ne!(unnamed[0].id, unnamed[1].id);
}

proptest! {
    /// A pass never touches a key no enabled rule matches, and expires the current version
    /// exactly when a matching rule's days have passed.
    #[test]
    fn expiry_follows_days_and_prefix(
        days in 1u32..30,
        written_days in 0u64..30,
        now_days in 0u64..90,
        under in any::<bool>(),
    ) {
        let rules = [expire_after("p/", days)];
        let key = if under { "p/k" } else { "q/k" };
        let actions = decide_key(
            &rules, key, &[version(written_days * DAY_NS)], now_days * DAY_NS, DAY_NS,
        );
        let due = under && now_days >= written_days + u64::from(days);
        prop_assert_eq!(actions.is_empty(), !due);
    }

    /// Noncurrent versions are removed oldest-first: whatever is removed, every older
    /// version is removed too (one rule without NewerNoncurrentVersions).
    #[test]
    fn noncurrent_removal_is_a_suffix(
        gaps in proptest::collection::vec(0u64..5, 1..8),
        days in 1u32..5,
        now_days in 0u64..40,
    ) {
        let rule = Rule {
            id: "n".into(),
            enabled: true,
            noncurrent_days: Some(days),
            ..Rule::default()
        };
        // Newest first, each written some days before the newer one.
        let mut mtime = 40 * DAY_NS;
        let mut versions = vec![version(mtime)];
        for gap in gaps {
            mtime -= gap * DAY_NS;
            versions.push(version(mtime));
        }
        let removed: Vec<usize> = decide_key(&[rule], "k", &versions, now_days * DAY_NS, DAY_NS)
            .into_iter()
            .map(|(index, action)| {
                assert_eq!(action, Action::RemoveVersion);
                index
            })
            .collect();
        prop_assert!(!removed.contains(&0));
        if let Some(first) = removed.first() {
            let expected: Vec<usize> = (*first..versions.len()).collect();
            prop_assert_eq!(removed, expected);
        }
    }
}
