//! A [`WriteOp`] as a librados write operation: the plan (pure) and its translation.
//!
//! The plan is where strata's contract and librados meet:
//! - **Guards first.** librados checks `omap_cmp` against the state before the whole
//!   operation but `cmpxattr` in sequence; strata checks every guard before any step. The
//!   plan puts `AssertExists`, then the guards, then the mutations, in their given order.
//! - **A create step before the guards** (non-exclusive, or exclusive when the op asked for an
//!   exclusive create): `cmpxattr` and `omap_cmp` fail with ENOENT on a missing object, where
//!   strata compares a missing object as one without xattrs or keys. The create only takes
//!   effect if every guard passes (librados applies all or nothing).
//! - **Absent omap keys.** `omap_cmp` reads a missing key as an empty value; omap values are
//!   never empty (an empty `OmapSet` value is refused), so `CompareOmap { value: None }` is
//!   `omap_cmp(key, "", EQ)`.
//! - **Mirrored cmpxattr.** librados evaluates `given <op> stored`; strata's
//!   [`Comparison`] is `stored <op> given`, so the operator is mirrored.
//! - **cmpxattr on a missing object** fails with ENOENT even after the create step (it reads
//!   the state before the operation): the guards are then decided against an empty object and,
//!   if they hold, the mutations are applied after an exclusive create (tried again if the
//!   object appeared meanwhile).
//! - **Guard-only operations** (no mutation) add no create step, so they never create the
//!   object: on a missing object (ENOENT) they are decided here against an empty object.
//! - Omap keys are stored escaped ([`crate::omap_key`]).

use std::ffi::{c_char, c_int, CString};

use rados::{Comparison, Op, RadosError, Result, WriteOp};

use crate::completion::OpHandle;
use crate::ffi::{cmp, Api, WriteOpT};
use crate::omap_key;

/// One step of the planned librados operation.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step<'a> {
    /// `rados_write_op_create`, added before guards.
    Create {
        /// Fail if the object exists.
        exclusive: bool,
    },
    /// `rados_write_op_assert_exists`, added before the guards of an op that removes the
    /// object (a create step there would make removing a missing object succeed).
    AssertExists,
    /// A step of the caller's operation, translated as it is.
    Given(&'a Op),
}

/// What an ENOENT from librados means for a plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OnMissing {
    /// The error it is (`NotFound`).
    Fail,
    /// Only guards: they are decided against an empty object ([`guards_hold_on_missing`]);
    /// nothing is created.
    DecideGuards,
    /// The op removes the object: `CompareFailed` if its guards fail on an empty object, else
    /// `NotFound`, as a removal of a missing object.
    DecideGuardsThenFail,
    /// A create step was added and the op compares xattrs: librados' cmpxattr fails with
    /// ENOENT on an object missing before the operation even so. If the guards hold on an
    /// empty object, the op is replayed with [`plan_on_missing`].
    Replay,
}

/// The librados steps for `op`, in order, and whether it changes nothing.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Plan<'a> {
    /// The steps.
    pub steps: Vec<Step<'a>>,
    /// What ENOENT means.
    pub on_missing: OnMissing,
}

/// Orders and completes the steps of `op` for librados (see the module docs); refuses what
/// Ceph cannot store faithfully (empty omap values, bad xattr names).
pub(crate) fn plan(op: &WriteOp) -> Result<Plan<'_>> {
    let ops = op.ops();
    for step in ops {
        validate(step)?;
    }
    let compares = |step: &Op| matches!(step, Op::CompareXattr { .. } | Op::CompareOmap { .. });
    let guard_only = ops.iter().all(Op::is_guard);
    let asserts = ops.iter().any(|step| matches!(step, Op::AssertExists));
    if !ops.iter().any(compares) {
        // Guards test the object as it was before the op (the contract), wherever they stand.
        return Ok(Plan {
            steps: ops
                .iter()
                .filter(|step| step.is_guard())
                .chain(ops.iter().filter(|step| !step.is_guard()))
                .map(Step::Given)
                .collect(),
            on_missing: if guard_only && !asserts {
                OnMissing::DecideGuards
            } else {
                OnMissing::Fail
            },
        });
    }
    let removes = ops.iter().any(|step| matches!(step, Op::Remove));
    let mut steps: Vec<Step<'_>> = ops
        .iter()
        .filter(|step| matches!(step, Op::AssertExists))
        .map(Step::Given)
        .collect();
    let add_create = !asserts && !guard_only && !removes;
    let add_assert = !asserts && removes;
    if add_assert {
        steps.push(Step::AssertExists);
    }
    if add_create {
        let exclusive = ops
            .iter()
            .any(|step| matches!(step, Op::Create { exclusive: true }));
        steps.push(Step::Create { exclusive });
    }
    steps.extend(ops.iter().filter(|step| compares(step)).map(Step::Given));
    steps.extend(
        ops.iter()
            .filter(|step| !step.is_guard())
            .filter(|step| !(add_create && matches!(step, Op::Create { .. })))
            .map(Step::Given),
    );
    let compares_xattrs = ops
        .iter()
        .any(|step| matches!(step, Op::CompareXattr { .. }));
    let on_missing = if asserts {
        OnMissing::Fail
    } else if guard_only {
        OnMissing::DecideGuards
    } else if add_assert {
        OnMissing::DecideGuardsThenFail
    } else if compares_xattrs {
        OnMissing::Replay
    } else {
        OnMissing::Fail
    };
    Ok(Plan { steps, on_missing })
}

/// The steps of `op` for an object known to be missing whose guards hold on a missing object
/// ([`guards_hold_on_missing`]): an exclusive create (so the object must still be missing:
/// `Exists` means it appeared meanwhile, and the op is tried again from the start), then the
/// mutations.
pub(crate) fn plan_on_missing(op: &WriteOp) -> Plan<'_> {
    let mut steps = vec![Step::Create { exclusive: true }];
    steps.extend(
        op.ops()
            .iter()
            .filter(|step| !step.is_guard() && !matches!(step, Op::Create { .. }))
            .map(Step::Given),
    );
    Plan {
        steps,
        on_missing: OnMissing::Fail,
    }
}

fn validate(step: &Op) -> Result<()> {
    match step {
        Op::SetXattr { name, .. } | Op::RemoveXattr { name } | Op::CompareXattr { name, .. } => {
            rados::validate_xattr_name(name)
        }
        Op::OmapSet(entries) => {
            if let Some((key, _)) = entries.iter().find(|(_, value)| value.is_empty()) {
                return Err(RadosError::InvalidArgument(format!(
                    "omap value of key {key:?} is empty: omap values are never empty (librados' \
                     omap_cmp cannot tell an empty value from a missing key)"
                )));
            }
            Ok(())
        }
        Op::CompareOmap {
            key,
            value: Some(value),
        } if value.is_empty() => Err(RadosError::InvalidArgument(format!(
            "CompareOmap of key {key:?} with an empty value: omap values are never empty"
        ))),
        _ => Ok(()),
    }
}

/// Whether the guards of a guard-only operation hold on a missing object (no xattrs, no keys).
pub(crate) fn guards_hold_on_missing(op: &WriteOp) -> Result<()> {
    for step in op.ops() {
        let holds = match step {
            // The contract (Ceph's cmpxattr): a missing object is NotFound, not an object
            // without xattrs.
            Op::AssertExists | Op::CompareXattr { .. } => {
                return Err(RadosError::NotFound("object".into()))
            }
            Op::CompareOmap { value, .. } => value.is_none(),
            _ => true,
        };
        if !holds {
            return Err(RadosError::CompareFailed(format!(
                "{step:?} does not hold on a missing object"
            )));
        }
    }
    Ok(())
}

/// librados' cmpxattr operator for strata's `stored <op> given` (librados: `given <op> stored`).
pub(crate) fn mirrored_operator(comparison: Comparison) -> u8 {
    match comparison {
        Comparison::Equal => cmp::EQ,
        Comparison::NotEqual => cmp::NE,
        Comparison::Greater => cmp::LT,
        Comparison::GreaterOrEqual => cmp::LTE,
        Comparison::Less => cmp::GT,
        Comparison::LessOrEqual => cmp::GTE,
    }
}

/// Output slots of a write operation librados fills at completion.
pub(crate) struct WriteSlots {
    /// One per `omap_cmp`.
    _compare_results: Vec<c_int>,
}

fn c_string(text: &str) -> Result<CString> {
    CString::new(text)
        .map_err(|_| RadosError::InvalidArgument(format!("{text:?} holds a NUL byte")))
}

/// Builds the librados write operation for `plan`. librados copies every payload into the
/// operation while it is built; only the `omap_cmp` result slots outlive this call (in the
/// returned [`WriteSlots`], which must stay where they are until completion: box them).
pub(crate) fn build(api: &Api, plan: &Plan<'_>) -> Result<(OpHandle, WriteOpT, Box<WriteSlots>)> {
    let compares = plan
        .steps
        .iter()
        .filter(|step| matches!(step, Step::Given(Op::CompareOmap { .. })))
        .count();
    let mut slots = Box::new(WriteSlots {
        _compare_results: vec![0; compares],
    });
    // SAFETY: creates a fresh, empty operation; released by OpHandle's Drop.
    let raw = unsafe { (api.rados_create_write_op)() };
    if raw.is_null() {
        return Err(RadosError::Io("rados_create_write_op returned NULL".into()));
    }
    let handle = OpHandle::Write(raw);
    let mut next_slot = slots._compare_results.as_mut_ptr();
    for step in &plan.steps {
        let op = match step {
            Step::AssertExists => {
                // SAFETY: `raw` is a live write op.
                unsafe { (api.rados_write_op_assert_exists)(raw) };
                continue;
            }
            Step::Create { exclusive } => {
                // SAFETY: `raw` is a live write op; a NULL category is allowed.
                unsafe {
                    (api.rados_write_op_create)(raw, c_int::from(*exclusive), std::ptr::null())
                };
                continue;
            }
            Step::Given(op) => op,
        };
        // SAFETY (every call below): `raw` is a live write op being built; every pointer passed
        // points into a buffer alive for the call with the length given, and librados copies
        // it before returning. The omap_cmp result slot lives in `slots`, which the caller
        // keeps until completion.
        unsafe {
            match op {
                Op::AssertExists => (api.rados_write_op_assert_exists)(raw),
                Op::Create { exclusive } => {
                    (api.rados_write_op_create)(raw, c_int::from(*exclusive), std::ptr::null())
                }
                Op::CompareXattr {
                    name,
                    comparison,
                    value,
                } => {
                    let name = c_string(name)?;
                    (api.rados_write_op_cmpxattr)(
                        raw,
                        name.as_ptr(),
                        mirrored_operator(*comparison),
                        value.as_ptr().cast::<c_char>(),
                        value.len(),
                    )
                }
                Op::CompareOmap { key, value } => {
                    let key = omap_key::escape(&key[..]);
                    let value: &[u8] = value.as_ref().map_or(&[], |value| &value[..]);
                    (api.rados_write_op_omap_cmp2)(
                        raw,
                        key.as_ptr().cast::<c_char>(),
                        cmp::EQ,
                        value.as_ptr().cast::<c_char>(),
                        key.len(),
                        value.len(),
                        next_slot,
                    );
                    next_slot = next_slot.add(1);
                }
                Op::WriteFull(data) => {
                    (api.rados_write_op_write_full)(raw, data.as_ptr().cast::<c_char>(), data.len())
                }
                Op::Write { offset_bytes, data } => (api.rados_write_op_write)(
                    raw,
                    data.as_ptr().cast::<c_char>(),
                    data.len(),
                    *offset_bytes,
                ),
                Op::Append(data) => {
                    (api.rados_write_op_append)(raw, data.as_ptr().cast::<c_char>(), data.len())
                }
                Op::Truncate { size_bytes } => (api.rados_write_op_truncate)(raw, *size_bytes),
                Op::Zero {
                    offset_bytes,
                    length_bytes,
                } => (api.rados_write_op_zero)(raw, *offset_bytes, *length_bytes),
                Op::Remove => (api.rados_write_op_remove)(raw),
                Op::SetXattr { name, value } => {
                    let name = c_string(name)?;
                    (api.rados_write_op_setxattr)(
                        raw,
                        name.as_ptr(),
                        value.as_ptr().cast::<c_char>(),
                        value.len(),
                    )
                }
                Op::RemoveXattr { name } => {
                    let name = c_string(name)?;
                    (api.rados_write_op_rmxattr)(raw, name.as_ptr())
                }
                Op::OmapSet(entries) => {
                    let keys: Vec<Vec<u8>> = entries
                        .iter()
                        .map(|(key, _)| omap_key::escape(&key[..]))
                        .collect();
                    let key_pointers: Vec<*const c_char> =
                        keys.iter().map(|key| key.as_ptr().cast()).collect();
                    let key_lengths: Vec<usize> = keys.iter().map(Vec::len).collect();
                    let value_pointers: Vec<*const c_char> = entries
                        .iter()
                        .map(|(_, value)| value.as_ptr().cast())
                        .collect();
                    let value_lengths: Vec<usize> =
                        entries.iter().map(|(_, value)| value.len()).collect();
                    (api.rados_write_op_omap_set2)(
                        raw,
                        key_pointers.as_ptr(),
                        value_pointers.as_ptr(),
                        key_lengths.as_ptr(),
                        value_lengths.as_ptr(),
                        entries.len(),
                    )
                }
                Op::OmapRemoveKeys(keys) => {
                    let keys: Vec<Vec<u8>> =
                        keys.iter().map(|key| omap_key::escape(&key[..])).collect();
                    let key_pointers: Vec<*const c_char> =
                        keys.iter().map(|key| key.as_ptr().cast()).collect();
                    let key_lengths: Vec<usize> = keys.iter().map(Vec::len).collect();
                    (api.rados_write_op_omap_rm_keys2)(
                        raw,
                        key_pointers.as_ptr(),
                        key_lengths.as_ptr(),
                        keys.len(),
                    )
                }
                Op::OmapClear => (api.rados_write_op_omap_clear)(raw),
                other => {
                    return Err(RadosError::NotSupported(format!(
                        "{other:?} is not supported by the Ceph backend"
                    )))
                }
            }
        }
    }
    Ok((handle, raw, slots))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn given(plan: &Plan<'_>) -> Vec<String> {
        plan.steps
            .iter()
            .map(|step| match step {
                Step::Create { exclusive } => format!("create({exclusive})"),
                Step::AssertExists => "assert_exists".to_string(),
                Step::Given(op) => format!("{op:?}")
                    .split([' ', '('])
                    .next()
                    .unwrap_or("")
                    .to_string(),
            })
            .collect()
    }

    #[test]
    fn guards_go_first_after_a_create_step() {
        let op = WriteOp::new()
            .write_full(b"x".to_vec())
            .compare_omap(b"k".to_vec(), None)
            .omap_set(vec![(b"k".to_vec(), b"v".to_vec())]);
        let plan = plan(&op).expect("valid");
        assert_eq!(
            given(&plan),
            ["create(false)", "CompareOmap", "WriteFull", "OmapSet"]
        );
        assert_eq!(plan.on_missing, OnMissing::Fail);
    }

    #[test]
    fn an_exclusive_create_is_the_create_step() {
        let op = WriteOp::new()
            .create(true)
            .compare_xattr("a", Comparison::Equal, b"".to_vec());
        let plan = plan(&op).expect("valid");
        assert_eq!(given(&plan), ["create(true)", "CompareXattr"]);
    }

    #[test]
    fn assert_exists_replaces_the_create_step_and_guard_only_ops_create_nothing() {
        let op = WriteOp::new()
            .compare_xattr("a", Comparison::Equal, b"1".to_vec())
            .assert_exists()
            .remove();
        assert_eq!(
            given(&plan(&op).expect("valid")),
            ["AssertExists", "CompareXattr", "Remove"]
        );
        let op = WriteOp::new().compare_omap(b"k".to_vec(), None);
        let plan = plan(&op).expect("valid");
        assert_eq!(given(&plan), ["CompareOmap"]);
        assert_eq!(plan.on_missing, OnMissing::DecideGuards);
        assert!(guards_hold_on_missing(&op).is_ok());
        let op = WriteOp::new().compare_omap(b"k".to_vec(), Some(b"v".to_vec()));
        assert!(matches!(
            guards_hold_on_missing(&op),
            Err(RadosError::CompareFailed(_))
        ));
    }

    #[test]
    fn a_removal_asserts_existence_instead_of_creating() {
        let op = WriteOp::new()
            .compare_omap(b"k".to_vec(), Some(b"v".to_vec()))
            .remove();
        let plan = plan(&op).expect("valid");
        assert_eq!(given(&plan), ["assert_exists", "CompareOmap", "Remove"]);
        assert_eq!(plan.on_missing, OnMissing::DecideGuardsThenFail);
        let op = WriteOp::new()
            .compare_xattr("a", Comparison::Equal, b"".to_vec())
            .write_full(b"x".to_vec());
        assert_eq!(
            super::plan(&op).expect("valid").on_missing,
            OnMissing::Replay
        );
    }

    #[test]
    fn empty_omap_values_are_refused() {
        let op = WriteOp::new().omap_set(vec![(b"k".to_vec(), Vec::new())]);
        assert!(matches!(plan(&op), Err(RadosError::InvalidArgument(_))));
        let op = WriteOp::new().compare_omap(b"k".to_vec(), Some(Vec::new()));
        assert!(matches!(plan(&op), Err(RadosError::InvalidArgument(_))));
    }

    #[test]
    fn cmpxattr_operators_are_mirrored() {
        assert_eq!(mirrored_operator(Comparison::Greater), cmp::LT);
        assert_eq!(mirrored_operator(Comparison::LessOrEqual), cmp::GTE);
        assert_eq!(mirrored_operator(Comparison::Equal), cmp::EQ);
    }
}
