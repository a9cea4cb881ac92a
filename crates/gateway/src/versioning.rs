//! Bucket versioning: where a key's versions live in its index shard, and what each versioned
//! change does to them.
//!
//! Pure: the planners take the state of one key as read from its index shard ([`KeyState`])
//! and return a [`Plan`]: the omap entries to set and remove in one atomic write to that
//! shard, and the data pieces that became unreachable. [`crate::store::Store`] reads the
//! state, carries the plan out, and only then removes the pieces (so no index entry ever
//! points to removed data, and a crash in between leaves at worst unreferenced data).
//!
//! ## Layout (all entries of a key live in the key's shard, so one omap write is atomic)
//! - plain entry `key` -> the key's latest version, unless that is a delete marker (then no
//!   plain entry). GET, HEAD and ListObjects read only plain entries, as for an unversioned
//!   bucket, so versioning adds nothing to their round trips.
//! - version entry [`layout::version_key`] (`0xFF key 0x00 suffix`) -> one version or delete
//!   marker. The suffix puts a key's versions newest first and is the generated version id;
//!   null versions keep the suffix of their write time and carry the id `null`.
//! - A plain entry whose `version_id` is `None` was written while the bucket had no
//!   versioning: it is the key's null version and the key has no version entries. The first
//!   versioned change of the key turns it into a version entry (or removes it).
//!
//! ## Invariants (per key; [`KeyState::check`] asserts them)
//! - Either one legacy plain entry and no version entries, or only version entries and a
//!   plain entry equal to the newest version entry exactly when that one is no delete marker.
//! - At most one version has the id `null`.
//! - Every data piece belongs to exactly one version (the plain entry shares its version's).

use crate::layout::{self, ObjectEntry, Piece, Versioning};

/// The version id S3 gives versions written without versioning enabled.
pub const NULL_VERSION_ID: &str = "null";

/// The random part of the suffix given to a legacy null version when it becomes a version
/// entry (a key has at most one null version, so it never collides with itself).
const LEGACY_TAG: &str = "00000000";

/// One version entry of a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Version {
    /// The suffix of its omap key.
    pub suffix: String,
    /// The version (its `version_id` is always set).
    pub entry: ObjectEntry,
}

/// What one key's index shard holds for the key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyState {
    /// The plain entry.
    pub plain: Option<ObjectEntry>,
    /// Version entries, newest first. Complete, except where a caller documents that only
    /// the newest one was read.
    pub versions: Vec<Version>,
}

/// Where one version of a key is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    /// The legacy plain entry (the null version).
    Legacy,
    /// `versions[i]`.
    Entry(usize),
}

/// What one change writes to the key's shard (atomically) and frees afterwards.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Omap entries to set.
    pub set: Vec<(Vec<u8>, ObjectEntry)>,
    /// Omap keys to remove.
    pub remove: Vec<Vec<u8>>,
    /// Data pieces no version refers to once the write is done.
    pub freed: Vec<Piece>,
}

impl KeyState {
    /// The key's current object: the newest version unless it is a delete marker, else the
    /// legacy plain entry (only versions were read: callers read at least the newest).
    pub fn current(&self) -> Option<&ObjectEntry> {
        match self.versions.first() {
            Some(newest) if newest.entry.delete_marker => None,
            Some(newest) => Some(&newest.entry),
            None => self.legacy(),
        }
    }

    /// The legacy plain entry, if the key has one.
    pub fn legacy(&self) -> Option<&ObjectEntry> {
        self.plain.as_ref().filter(|p| p.version_id.is_none())
    }

    /// Where the version `version_id` is (`null` included).
    pub fn find(&self, version_id: &str) -> Option<Found> {
        if version_id == NULL_VERSION_ID && self.legacy().is_some() {
            return Some(Found::Legacy);
        }
        self.versions
            .iter()
            .position(|v| v.entry.version_id.as_deref() == Some(version_id))
            .map(Found::Entry)
    }

    /// The version stored at `found`.
    pub fn get(&self, found: Found) -> Option<&ObjectEntry> {
        match found {
            Found::Legacy => self.legacy(),
            Found::Entry(i) => self.versions.get(i).map(|v| &v.entry),
        }
    }

    /// The write time the next version must sort after.
    pub fn newest_mtime_ns(&self) -> u64 {
        let from_versions = self
            .versions
            .first()
            .and_then(|v| layout::suffix_mtime_ns(&v.suffix));
        let from_plain = self.plain.as_ref().map(|p| p.mtime_ns);
        from_versions.max(from_plain).unwrap_or(0)
    }

    /// Panics unless the module's invariants hold for this (complete) state.
    pub fn check(&self) {
        if let Some(legacy) = self.legacy() {
            assert!(self.versions.is_empty(), "legacy entry beside versions");
            assert!(!legacy.delete_marker, "legacy delete marker");
            return;
        }
        let nulls = self
            .versions
            .iter()
            .filter(|v| v.entry.version_id.as_deref() == Some(NULL_VERSION_ID))
            .count();
        assert!(nulls <= 1, "{nulls} null versions");
        assert!(
            self.versions.windows(2).all(|w| w[0].suffix < w[1].suffix),
            "versions out of order"
        );
        let expected = self
            .versions
            .first()
            .filter(|v| !v.entry.delete_marker)
            .map(|v| &v.entry);
        assert_eq!(
            self.plain.as_ref(),
            expected,
            "plain entry is not the latest"
        );
    }
}

/// A new version `entry` (an object or a delete marker) of `key` at `suffix`, which must sort
/// before every existing version. Enabled: its id is `suffix`. Suspended: its id is `null`
/// and it replaces the key's null version, whose data is freed (`state.versions` must then be
/// complete; Enabled needs only the newest). Returns the plan and the version as stored.
pub fn plan_write(
    key: &str,
    state: &KeyState,
    status: Versioning,
    mut entry: ObjectEntry,
    suffix: &str,
) -> (Plan, ObjectEntry) {
    let mut plan = Plan::default();
    entry.version_id = Some(match status {
        Versioning::Enabled => suffix.to_string(),
        Versioning::Suspended => NULL_VERSION_ID.to_string(),
    });
    if let Some(legacy) = state.legacy() {
        match status {
            Versioning::Enabled => {
                // The null version stays, now as a version entry of its own.
                let kept = ObjectEntry {
                    version_id: Some(NULL_VERSION_ID.to_string()),
                    ..legacy.clone()
                };
                let legacy_suffix = layout::version_suffix(legacy.mtime_ns, LEGACY_TAG);
                plan.set
                    .push((layout::version_key(key, &legacy_suffix), kept));
            }
            Versioning::Suspended => plan.freed.extend(legacy.pieces.iter().cloned()),
        }
    } else if status == Versioning::Suspended {
        if let Some(Found::Entry(i)) = state.find(NULL_VERSION_ID) {
            let old = &state.versions[i];
            plan.remove.push(layout::version_key(key, &old.suffix));
            plan.freed.extend(old.entry.pieces.iter().cloned());
        }
    }
    plan.set
        .push((layout::version_key(key, suffix), entry.clone()));
    if entry.delete_marker {
        plan.remove.push(key.as_bytes().to_vec());
    } else {
        plan.set.push((key.as_bytes().to_vec(), entry.clone()));
    }
    (plan, entry)
}

/// Removes the version at `found` for good and frees its data; when it was the newest, the
/// next one becomes the latest (`state.versions` must hold at least the two newest and the
/// one found).
pub fn plan_remove(key: &str, state: &KeyState, found: Found) -> Plan {
    let mut plan = Plan::default();
    match found {
        Found::Legacy => {
            let legacy = state.legacy().expect("found a legacy entry");
            plan.remove.push(key.as_bytes().to_vec());
            plan.freed.extend(legacy.pieces.iter().cloned());
        }
        Found::Entry(i) => {
            let gone = &state.versions[i];
            plan.remove.push(layout::version_key(key, &gone.suffix));
            plan.freed.extend(gone.entry.pieces.iter().cloned());
            if i == 0 {
                match state.versions.get(1).filter(|v| !v.entry.delete_marker) {
                    Some(next) => plan.set.push((key.as_bytes().to_vec(), next.entry.clone())),
                    None => plan.remove.push(key.as_bytes().to_vec()),
                }
            }
        }
    }
    plan
}

/// Replaces the version at `found` by `entry` (the same version with new metadata, e.g. an
/// ACL), and the plain entry too when that is the same version.
pub fn plan_update(key: &str, state: &KeyState, found: Found, entry: ObjectEntry) -> Plan {
    let mut plan = Plan::default();
    match found {
        Found::Legacy => plan.set.push((key.as_bytes().to_vec(), entry)),
        Found::Entry(i) => {
            let version = &state.versions[i];
            debug_assert_eq!(version.entry.version_id, entry.version_id);
            if i == 0 && !entry.delete_marker {
                plan.set.push((key.as_bytes().to_vec(), entry.clone()));
            }
            plan.set
                .push((layout::version_key(key, &version.suffix), entry));
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use rand::{Rng, SeedableRng};

    use super::*;

    /// One key's shard as an omap: applies plans and reads the state back.
    #[derive(Default)]
    struct Shard {
        omap: BTreeMap<Vec<u8>, ObjectEntry>,
    }

    impl Shard {
        fn state(&self, key: &str) -> KeyState {
            let prefix = layout::versions_prefix(key);
            KeyState {
                plain: self.omap.get(key.as_bytes()).cloned(),
                versions: self
                    .omap
                    .range(prefix.clone()..)
                    .take_while(|(k, _)| k.starts_with(&prefix))
                    .map(|(k, e)| Version {
                        suffix: layout::parse_version_key(k).expect("version key").1,
                        entry: e.clone(),
                    })
                    .collect(),
            }
        }

        fn apply(&mut self, plan: Plan) -> Vec<Piece> {
            for key in plan.remove {
                self.omap.remove(&key);
            }
            for (key, entry) in plan.set {
                self.omap.insert(key, entry);
            }
            plan.freed
        }
    }

    /// What S3 says a key holds: its versions newest first as (id, data tag or None for a
    /// delete marker).
    type Model = Vec<(String, Option<String>)>;

    #[derive(Clone, Debug)]
    enum Step {
        Configure(Versioning),
        Put,
        Delete,
        RemoveVersion(usize),
        RemoveNull,
    }

    fn step(rng: &mut rand::rngs::StdRng) -> Step {
        match rng.gen_range(0..10) {
            0 if rng.gen_bool(0.5) => Step::Configure(Versioning::Enabled),
            0 => Step::Configure(Versioning::Suspended),
            1..=4 => Step::Put,
            5 | 6 => Step::Delete,
            7 | 8 => Step::RemoveVersion(rng.gen_range(0..8)),
            _ => Step::RemoveNull,
        }
    }

    fn piece(tag: &str) -> Vec<Piece> {
        vec![Piece::whole(format!("data-{tag}"), 1)]
    }

    /// Random writes, deletes and version removals on one key, starting from a legacy object
    /// in a bucket without versioning: the shard always matches the model, the invariants
    /// hold, and every piece written is live or freed exactly once. A failing seed is printed.
    #[test]
    fn planners_match_the_s3_model() {
        for seed in 0..500u64 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let steps: Vec<Step> = (0..rng.gen_range(1..40)).map(|_| step(&mut rng)).collect();
            let outcome = std::panic::catch_unwind(|| run_model(&steps));
            assert!(outcome.is_ok(), "seed {seed} fails: {steps:?}");
        }
    }

    fn run_model(steps: &[Step]) {
        let key = "k";
        let mut shard = Shard::default();
        shard.omap.insert(
            key.as_bytes().to_vec(),
            ObjectEntry {
                mtime_ns: 1,
                pieces: piece("legacy"),
                ..ObjectEntry::default()
            },
        );
        let mut model: Model = vec![("null".into(), Some("legacy".into()))];
        let mut status: Option<Versioning> = None;
        let mut freed: Vec<String> = Vec::new();
        let mut written = vec!["data-legacy".to_string()];
        for (n, step) in steps.iter().cloned().enumerate() {
            let now = 100 + n as u64;
            let tag = format!("{n:08x}");
            let state = shard.state(key);
            match step {
                Step::Configure(s) => status = Some(s),
                Step::Put | Step::Delete => {
                    let Some(s) = status else { continue };
                    let delete = matches!(step, Step::Delete);
                    let entry = ObjectEntry {
                        mtime_ns: now,
                        delete_marker: delete,
                        pieces: if delete { Vec::new() } else { piece(&tag) },
                        ..ObjectEntry::default()
                    };
                    if !delete {
                        written.push(format!("data-{tag}"));
                    }
                    let suffix = layout::version_suffix(now, &tag);
                    let (plan, stored) = plan_write(key, &state, s, entry, &suffix);
                    freed.extend(shard.apply(plan).into_iter().map(|p| p.oid));
                    let id = stored.version_id.clone().expect("an id");
                    if s == Versioning::Suspended {
                        model.retain(|(v, _)| v != "null");
                    }
                    model.insert(0, (id, (!delete).then(|| tag.clone())));
                }
                Step::RemoveVersion(_) | Step::RemoveNull => {
                    let id = match step {
                        Step::RemoveVersion(i) => match model.get(i) {
                            Some((id, _)) => id.clone(),
                            None => continue,
                        },
                        _ => "null".to_string(),
                    };
                    let Some(found) = state.find(&id) else {
                        assert!(model.iter().all(|(v, _)| *v != id));
                        continue;
                    };
                    freed.extend(
                        shard
                            .apply(plan_remove(key, &state, found))
                            .into_iter()
                            .map(|p| p.oid),
                    );
                    model.retain(|(v, _)| *v != id);
                }
            }
            let state = shard.state(key);
            state.check();
            let seen: Model = match state.legacy() {
                Some(legacy) => vec![(
                    "null".into(),
                    Some(legacy.pieces[0].oid["data-".len()..].to_string()),
                )],
                None => state
                    .versions
                    .iter()
                    .map(|v| {
                        (
                            v.entry.version_id.clone().expect("an id"),
                            v.entry
                                .pieces
                                .first()
                                .map(|p| p.oid["data-".len()..].to_string()),
                        )
                    })
                    .collect(),
            };
            assert_eq!(&seen, &model);
        }
        let state = shard.state(key);
        let mut live: Vec<String> = state
            .legacy()
            .into_iter()
            .chain(state.versions.iter().map(|v| &v.entry))
            .flat_map(|e| e.pieces.iter().map(|p| p.oid.clone()))
            .collect();
        live.extend(freed.iter().cloned());
        live.sort();
        written.sort();
        assert_eq!(live, written, "every piece is live or freed exactly once");
    }

    #[test]
    fn enabling_keeps_the_legacy_object_as_the_null_version() {
        let legacy = ObjectEntry {
            mtime_ns: 5,
            pieces: piece("old"),
            ..ObjectEntry::default()
        };
        let state = KeyState {
            plain: Some(legacy),
            versions: Vec::new(),
        };
        let suffix = layout::version_suffix(6, "0000abcd");
        let (plan, stored) = plan_write(
            "k",
            &state,
            Versioning::Enabled,
            ObjectEntry::default(),
            &suffix,
        );
        assert_eq!(stored.version_id.as_deref(), Some(suffix.as_str()));
        assert!(plan.freed.is_empty());
        assert_eq!(plan.set.len(), 3, "null version, new version, plain");
        assert_eq!(plan.set[0].1.version_id.as_deref(), Some("null"));
    }
}
