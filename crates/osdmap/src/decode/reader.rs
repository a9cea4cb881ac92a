//! A bounds-checked little-endian cursor over Ceph's `bufferlist` encoding.
//!
//! Every read names the field it is reading so a malformed map reports where and what. Versioned
//! sections (`ENCODE_START`: `u8 struct_v`, `u8 compat`, `u32 length`) narrow the readable end to
//! the section, and leaving a section skips whatever trailing fields a newer encoder added.
//! Nothing here panics on any input.

use crate::error::{OsdMapError, Result};

/// Cursor over `bytes[pos..end]`; offsets in errors are absolute.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    end: usize,
}

/// The header of one versioned section.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Section {
    pub version: u8,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self {
            bytes,
            pos: 0,
            end: bytes.len(),
        }
    }

    pub(crate) fn offset(&self) -> usize {
        self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.end.saturating_sub(self.pos)
    }

    pub(crate) fn error(&self, field: &'static str, reason: impl Into<String>) -> OsdMapError {
        OsdMapError::Decode {
            offset: self.pos,
            field,
            reason: reason.into(),
        }
    }

    /// The next `n` bytes.
    pub(crate) fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(self.error(field, format!("needs {n} bytes, {} left", self.remaining())));
        }
        let start = self.pos;
        self.pos += n;
        self.bytes
            .get(start..self.pos)
            .ok_or_else(|| self.error(field, "out of bounds"))
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N]> {
        let slice = self.take(N, field)?;
        let mut out = [0_u8; N];
        out.copy_from_slice(slice);
        Ok(out)
    }

    pub(crate) fn u8(&mut self, field: &'static str) -> Result<u8> {
        Ok(self.array::<1>(field)?[0])
    }
    pub(crate) fn bool(&mut self, field: &'static str) -> Result<bool> {
        Ok(self.u8(field)? != 0)
    }
    pub(crate) fn u32(&mut self, field: &'static str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(field)?))
    }
    pub(crate) fn i32(&mut self, field: &'static str) -> Result<i32> {
        Ok(i32::from_le_bytes(self.array(field)?))
    }
    pub(crate) fn u64(&mut self, field: &'static str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(field)?))
    }
    pub(crate) fn i64(&mut self, field: &'static str) -> Result<i64> {
        Ok(i64::from_le_bytes(self.array(field)?))
    }
    pub(crate) fn f32(&mut self, field: &'static str) -> Result<f32> {
        Ok(f32::from_le_bytes(self.array(field)?))
    }
    pub(crate) fn uuid(&mut self, field: &'static str) -> Result<[u8; 16]> {
        self.array(field)
    }

    /// A `u32` element count, checked against the bytes left (each element needs at least
    /// `min_element_bytes`), so a corrupt count cannot make us allocate without bound.
    pub(crate) fn count(&mut self, field: &'static str, min_element_bytes: usize) -> Result<usize> {
        let n = self.u32(field)? as usize;
        if n.saturating_mul(min_element_bytes.max(1)) > self.remaining() {
            return Err(self.error(
                field,
                format!(
                    "count {n} does not fit in the {} bytes left",
                    self.remaining()
                ),
            ));
        }
        Ok(n)
    }

    /// A `u32`-length-prefixed byte string.
    pub(crate) fn blob(&mut self, field: &'static str) -> Result<&'a [u8]> {
        let n = self.count(field, 1)?;
        self.take(n, field)
    }

    /// A `u32`-length-prefixed string (invalid UTF-8 is replaced, never rejected: Ceph does not
    /// check it either).
    pub(crate) fn string(&mut self, field: &'static str) -> Result<String> {
        Ok(String::from_utf8_lossy(self.blob(field)?).into_owned())
    }

    /// `vector<T>` / `list<T>`: a count then the elements.
    pub(crate) fn vec<T>(
        &mut self,
        field: &'static str,
        min_element_bytes: usize,
        mut element: impl FnMut(&mut Self) -> Result<T>,
    ) -> Result<Vec<T>> {
        let n = self.count(field, min_element_bytes)?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(element(self)?);
        }
        Ok(out)
    }

    /// Skip `n` elements of a container whose elements each `skip` reads.
    pub(crate) fn skip_vec(
        &mut self,
        field: &'static str,
        min_element_bytes: usize,
        mut skip: impl FnMut(&mut Self) -> Result<()>,
    ) -> Result<()> {
        let n = self.count(field, min_element_bytes)?;
        for _ in 0..n {
            skip(self)?;
        }
        Ok(())
    }

    /// `map<string,string>`.
    pub(crate) fn string_map(
        &mut self,
        field: &'static str,
    ) -> Result<std::collections::BTreeMap<String, String>> {
        let pairs = self.vec(field, 8, |r| Ok((r.string(field)?, r.string(field)?)))?;
        Ok(pairs.into_iter().collect())
    }

    /// A versioned section: reads the header, checks `compat <= max_compat`, runs `body` with
    /// the readable end narrowed to the section, then skips any bytes `body` did not read (fields
    /// added by newer encoders).
    pub(crate) fn section<T>(
        &mut self,
        field: &'static str,
        max_compat: u8,
        body: impl FnOnce(&mut Self, Section) -> Result<T>,
    ) -> Result<T> {
        let start = self.pos;
        let version = self.u8(field)?;
        let compat = self.u8(field)?;
        if compat > max_compat {
            return Err(OsdMapError::UnsupportedVersion {
                offset: start,
                field,
                version,
                compat,
            });
        }
        let length = self.u32(field)? as usize;
        if length > self.remaining() {
            return Err(self.error(
                field,
                format!(
                    "section length {length} exceeds the {} bytes left",
                    self.remaining()
                ),
            ));
        }
        let section_end = self.pos + length;
        let outer_end = self.end;
        self.end = section_end;
        let value = body(self, Section { version });
        self.end = outer_end;
        let value = value?;
        // `body` could not read past `section_end`: every read is bounded by `end`.
        self.pos = section_end;
        Ok(value)
    }

    /// Skip one versioned section whole.
    pub(crate) fn skip_section(&mut self, field: &'static str) -> Result<()> {
        self.section(field, u8::MAX, |_, _| Ok(()))
    }

    /// The bytes between two absolute offsets (for the crc).
    pub(crate) fn slice(&self, start: usize, end: usize) -> &'a [u8] {
        self.bytes.get(start..end).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_reads_name_the_field_and_offset() {
        let mut r = Reader::new(&[1, 2, 3]);
        assert_eq!(r.u8("a").ok(), Some(1));
        assert_eq!(r.u8("a").ok(), Some(2));
        let error = r.u32("b").err().map(|e| e.to_string());
        assert_eq!(
            error.as_deref(),
            Some("malformed osdmap at byte 2: b: needs 4 bytes, 1 left")
        );
    }

    #[test]
    fn section_skips_unknown_trailing_bytes() {
        // v2 compat 1, 6 bytes: a u32 we read plus 2 bytes a newer encoder added.
        let bytes = [2, 1, 6, 0, 0, 0, 7, 0, 0, 0, 0xaa, 0xbb, 9];
        let mut r = Reader::new(&bytes);
        let value = r.section("s", 1, |r, s| {
            assert_eq!(s.version, 2);
            r.u32("x")
        });
        assert_eq!(value.ok(), Some(7));
        assert_eq!(r.u8("after").ok(), Some(9));
    }

    #[test]
    fn section_cannot_read_past_its_end() {
        let bytes = [1, 1, 2, 0, 0, 0, 7, 0, 0, 0];
        let mut r = Reader::new(&bytes);
        assert!(r.section("s", 1, |r, _| r.u32("x")).is_err());
    }

    #[test]
    fn huge_counts_are_rejected_before_allocating() {
        let bytes = [0xff, 0xff, 0xff, 0xff];
        let mut r = Reader::new(&bytes);
        assert!(r.vec("v", 4, |r| r.u32("e")).is_err());
    }
}
