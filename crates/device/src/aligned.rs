//! Heap buffers whose start is aligned for O_DIRECT, without `unsafe`.
//!
//! The buffer over-allocates by `alignment` bytes and exposes the aligned window inside;
//! moving the `Vec` does not move its heap block, so the window stays aligned.

/// A byte buffer whose first byte sits at a multiple of `alignment` in memory. A caller that
/// gathers its data into one (see [`AlignedBuffer::gathered`]) and hands `as_slice()` to
/// [`crate::Device::write_blocking`] of a file device spares the device its bounce copy.
#[derive(Debug)]
pub struct AlignedBuffer {
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

    /// The concatenation of `pieces` in a buffer aligned to `alignment` (a power of two),
    /// without zeroing it first: the pieces are the only bytes written after the padding.
    pub fn gathered(pieces: &[&[u8]], alignment: usize) -> Self {
        assert!(alignment.is_power_of_two(), "alignment {alignment}");
        let length: usize = pieces.iter().map(|piece| piece.len()).sum();
        let mut storage: Vec<u8> = Vec::with_capacity(length + alignment);
        let start = storage.as_ptr().align_offset(alignment);
        assert!(
            start < alignment,
            "align_offset on a u8 pointer is always computable"
        );
        // Within the capacity, so the heap block (and the alignment) never moves.
        storage.resize(start, 0);
        for piece in pieces {
            storage.extend_from_slice(piece);
        }
        debug_assert_eq!(storage[start..].as_ptr() as usize % alignment, 0);
        Self {
            storage,
            start,
            length,
        }
    }

    /// The aligned bytes.
    pub fn as_slice(&self) -> &[u8] {
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

    #[test]
    fn gathered_is_aligned_and_holds_the_pieces_in_order() {
        for alignment in [512usize, 4096] {
            let pieces: [&[u8]; 3] = [&[1u8; 700], &[], &[2u8; 5000]];
            let buffer = AlignedBuffer::gathered(&pieces, alignment);
            assert_eq!(buffer.as_slice().as_ptr() as usize % alignment, 0);
            assert_eq!(buffer.as_slice(), [&[1u8; 700][..], &[2u8; 5000]].concat());
            let empty = AlignedBuffer::gathered(&[], alignment);
            assert!(empty.as_slice().is_empty());
        }
    }
}
