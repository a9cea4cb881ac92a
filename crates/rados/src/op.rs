//! Compound write operations on one object ([`WriteOp`]), applied atomically.

use bytes::Bytes;

/// How a [`Op::CompareXattr`] guard compares the stored value with the given one
/// (bytewise, as Ceph's `CEPH_OSD_CMPXATTR_MODE_STRING`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Comparison {
    /// Stored == given.
    Equal,
    /// Stored != given.
    NotEqual,
    /// Stored > given.
    Greater,
    /// Stored >= given.
    GreaterOrEqual,
    /// Stored < given.
    Less,
    /// Stored <= given.
    LessOrEqual,
}

impl Comparison {
    /// Whether `stored <op> given` holds (bytewise lexicographic order).
    pub fn holds(self, stored: &[u8], given: &[u8]) -> bool {
        let order = stored.cmp(given);
        match self {
            Comparison::Equal => order.is_eq(),
            Comparison::NotEqual => order.is_ne(),
            Comparison::Greater => order.is_gt(),
            Comparison::GreaterOrEqual => order.is_ge(),
            Comparison::Less => order.is_lt(),
            Comparison::LessOrEqual => order.is_le(),
        }
    }
}

/// One step of a [`WriteOp`]. Guards (`AssertExists`, `CompareXattr`, `CompareOmap`) test the
/// object as it was before the operation, wherever they stand in it; the other steps apply in
/// order. If a guard or a step fails, nothing is applied. What each step does to a missing
/// object is Ceph's (see each variant and the crate docs).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Op {
    /// Guard: the object must exist before the op (else `NotFound`).
    AssertExists,
    /// Creates the object; with `exclusive`, fails with `Exists` if it is already there (also
    /// when an earlier step of the op created it).
    Create {
        /// Fail if the object exists.
        exclusive: bool,
    },
    /// Guard: the xattr `name` must compare to `value` as `comparison` says, in the direction
    /// `stored <comparison> value` (else `CompareFailed`). A missing xattr compares as empty;
    /// a missing object is `NotFound` (as librados' `cmpxattr`, whose operators read the
    /// other way round: the librados backend mirrors them).
    CompareXattr {
        /// Attribute name.
        name: String,
        /// How to compare.
        comparison: Comparison,
        /// The value compared with.
        value: Vec<u8>,
    },
    /// Guard: the omap `key` must hold exactly `value`, or be absent when `value` is `None`
    /// (else `CompareFailed`). `Some` of an empty value is `InvalidArgument` (omap values are
    /// never empty). A missing object has no keys, and an op holding this guard and a
    /// mutation that applies leaves a missing object created (the librados backend creates it
    /// first, since `omap_cmp` fails on a missing object and reads a missing key as an empty
    /// value); whether an op of guards alone creates it is left to the backend.
    /// What a read-modify-write of one index entry needs to detect a concurrent writer.
    CompareOmap {
        /// The omap key.
        key: Vec<u8>,
        /// The value it must hold, or `None` for "not set".
        value: Option<Vec<u8>>,
    },
    /// Replaces the whole data; the size becomes `data.len()`. Xattrs and omap stay.
    WriteFull(Bytes),
    /// Writes `data` at `offset_bytes`, extending the object if needed (a hole reads as zeros).
    Write {
        /// Where in the object.
        offset_bytes: u64,
        /// What.
        data: Bytes,
    },
    /// Appends `data` at the current end of the object.
    Append(Bytes),
    /// Sets the size: bytes beyond it are dropped; growing reads as zeros. Nothing happens to
    /// a missing object (it is not created).
    Truncate {
        /// The new size.
        size_bytes: u64,
    },
    /// Zeroes a range, Ceph's way: never creates or extends the object. A range ending before
    /// the end is zeroed; one reaching the end truncates the object to the range's start; one
    /// starting at or past the end, of length 0, or on a missing object does nothing.
    Zero {
        /// First byte.
        offset_bytes: u64,
        /// Bytes.
        length_bytes: u64,
    },
    /// Removes the object (data, xattrs, omap); `NotFound` if it is missing.
    Remove,
    /// Sets an xattr (creating the object).
    SetXattr {
        /// Attribute name.
        name: String,
        /// Attribute value.
        value: Vec<u8>,
    },
    /// Removes an xattr (no error if the xattr is missing; `NotFound` if the object is).
    RemoveXattr {
        /// Attribute name.
        name: String,
    },
    /// Sets omap entries (creating the object); an empty value is `InvalidArgument`.
    OmapSet(Vec<(Vec<u8>, Vec<u8>)>),
    /// Removes omap keys (missing keys are ignored; `NotFound` if the object is missing).
    OmapRemoveKeys(Vec<Vec<u8>>),
    /// Removes every omap entry (`NotFound` if the object is missing).
    OmapClear,
}

impl Op {
    /// Whether this step only checks state and changes nothing.
    pub fn is_guard(&self) -> bool {
        matches!(
            self,
            Op::AssertExists | Op::CompareXattr { .. } | Op::CompareOmap { .. }
        )
    }
}

/// Several operations on one object, applied atomically and in order: on every replica either
/// all of them take effect or none (librados' `ObjectWriteOperation`).
///
/// ```
/// use rados::{Comparison, WriteOp};
/// let op = WriteOp::new()
///     .compare_xattr("etag", Comparison::Equal, b"v1")
///     .write_full(b"new body".to_vec())
///     .set_xattr("etag", b"v2".to_vec())
///     .omap_set(vec![(b"k".to_vec(), b"v".to_vec())]);
/// assert_eq!(op.ops().len(), 4);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteOp {
    ops: Vec<Op>,
}

impl WriteOp {
    /// An empty operation (applying it changes nothing).
    pub fn new() -> Self {
        Self::default()
    }

    /// The steps, in order.
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// Consumes the operation into its steps.
    pub fn into_ops(self) -> Vec<Op> {
        self.ops
    }

    /// Whether there are no steps.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Appends any step.
    pub fn push(mut self, op: Op) -> Self {
        self.ops.push(op);
        self
    }

    /// Appends [`Op::AssertExists`].
    pub fn assert_exists(self) -> Self {
        self.push(Op::AssertExists)
    }

    /// Appends [`Op::Create`].
    pub fn create(self, exclusive: bool) -> Self {
        self.push(Op::Create { exclusive })
    }

    /// Appends [`Op::CompareXattr`].
    pub fn compare_xattr(
        self,
        name: impl Into<String>,
        comparison: Comparison,
        value: impl Into<Vec<u8>>,
    ) -> Self {
        self.push(Op::CompareXattr {
            name: name.into(),
            comparison,
            value: value.into(),
        })
    }

    /// Appends an [`Op::CompareOmap`] guard: `key` holds `value` (`None`: is not set).
    pub fn compare_omap(self, key: impl Into<Vec<u8>>, value: Option<Vec<u8>>) -> Self {
        self.push(Op::CompareOmap {
            key: key.into(),
            value,
        })
    }

    /// Appends [`Op::WriteFull`].
    pub fn write_full(self, data: impl Into<Bytes>) -> Self {
        self.push(Op::WriteFull(data.into()))
    }

    /// Appends [`Op::Write`].
    pub fn write(self, offset_bytes: u64, data: impl Into<Bytes>) -> Self {
        self.push(Op::Write {
            offset_bytes,
            data: data.into(),
        })
    }

    /// Appends [`Op::Append`].
    pub fn append(self, data: impl Into<Bytes>) -> Self {
        self.push(Op::Append(data.into()))
    }

    /// Appends [`Op::Truncate`].
    pub fn truncate(self, size_bytes: u64) -> Self {
        self.push(Op::Truncate { size_bytes })
    }

    /// Appends [`Op::Zero`].
    pub fn zero(self, offset_bytes: u64, length_bytes: u64) -> Self {
        self.push(Op::Zero {
            offset_bytes,
            length_bytes,
        })
    }

    /// Appends [`Op::Remove`].
    pub fn remove(self) -> Self {
        self.push(Op::Remove)
    }

    /// Appends [`Op::SetXattr`].
    pub fn set_xattr(self, name: impl Into<String>, value: impl Into<Vec<u8>>) -> Self {
        self.push(Op::SetXattr {
            name: name.into(),
            value: value.into(),
        })
    }

    /// Appends [`Op::RemoveXattr`].
    pub fn remove_xattr(self, name: impl Into<String>) -> Self {
        self.push(Op::RemoveXattr { name: name.into() })
    }

    /// Appends [`Op::OmapSet`].
    pub fn omap_set(self, entries: Vec<(Vec<u8>, Vec<u8>)>) -> Self {
        self.push(Op::OmapSet(entries))
    }

    /// Appends [`Op::OmapRemoveKeys`].
    pub fn omap_remove_keys(self, keys: Vec<Vec<u8>>) -> Self {
        self.push(Op::OmapRemoveKeys(keys))
    }

    /// Appends [`Op::OmapClear`].
    pub fn omap_clear(self) -> Self {
        self.push(Op::OmapClear)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparisons_are_bytewise() {
        assert!(Comparison::Equal.holds(b"a", b"a"));
        assert!(Comparison::Less.holds(b"a", b"b"));
        assert!(Comparison::Greater.holds(b"ab", b"a"));
        assert!(Comparison::LessOrEqual.holds(b"", b""));
        assert!(!Comparison::NotEqual.holds(b"x", b"x"));
        assert!(Comparison::GreaterOrEqual.holds(b"b", b"a"));
    }

    #[test]
    fn builder_keeps_order() {
        let op = WriteOp::new().create(true).append(vec![1]).remove();
        assert_eq!(
            op.into_ops(),
            vec![
                Op::Create { exclusive: true },
                Op::Append(Bytes::from_static(&[1])),
                Op::Remove
            ]
        );
    }
}
