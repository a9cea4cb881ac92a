//! Heap buffers whose start is aligned for O_DIRECT, without `unsafe`.
//!
//! The buffer over-allocates by `alignment` bytes and exposes the aligned window inside;
//! moving the `Vec` does not move its heap block, so the window stays aligned.

/// A byte buffer whose first byte sits at a multiple of `alignment` in memory.
#[derive(Debug)]
pub(crate) struct AlignedBuffer {
    storage: Vec<u8>,
    start: usize,
    length: usize,
}

impl AlignedBuffer {
    /// A zeroed buffer of `length` bytes aligned to `alignment` (a power of two).
    pub(crate) fn zeroed(length: usize, alignment: usize) -> Self {
        debug_assert!(alignment.is_power_of_two());
        let storage = vec![0u8; length + alignment];
        let start = storage.as_ptr().align_offset(alignment);
        assert!(
            start < alignment,
            "align_offset on a u8 pointer is always computable"
        );
        Self {
            storage,
            start,
            length,
        }
    }

    /// The aligned bytes.
    pub(crate) fn as_slice(&self) -> &[u8] {
        &self.storage[self.start..self.start + self.length]
    }

    /// The aligned bytes, writable.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.storage[self.start..self.start + self.length]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_is_aligned_and_sized() {
        for alignment in [512usize, 4096] {
            for length in [0usize, 512, 4096, 65536] {
                let mut buffer = AlignedBuffer::zeroed(length, alignment);
                assert_eq!(buffer.as_slice().as_ptr() as usize % alignment, 0);
                assert_eq!(buffer.as_mut_slice().len(), length);
                let moved = buffer;
                assert_eq!(moved.as_slice().as_ptr() as usize % alignment, 0);
            }
        }
    }
}
