//! Owned, 16-byte aligned byte buffers in the layout compiled kernels read, with
//! conversions from and to the interpreter's [`HostBuffer`].

use kernelc_ir::{HostBuffer, ScalarType};

/// A byte buffer aligned to 16 bytes (enough for every element type and for SIMD).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlignedBytes {
    words: Vec<u128>,
    len: usize,
}

impl AlignedBytes {
    /// `len` zero bytes.
    pub fn zeroed(len: usize) -> Self {
        AlignedBytes {
            words: vec![0; len.div_ceil(16)],
            len,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: `words` owns at least `len` initialised bytes (16 per word), u8 has
        // alignment 1 and no invalid bit patterns, and the shared borrow of `self`
        // keeps the memory alive and unaliased by writers for the slice's lifetime.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast::<u8>(), self.len) }
    }

    pub fn as_mut_bytes(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_bytes`; the exclusive borrow of `self` makes the slice the
        // only access path, and any bytes written are valid `u128` bits.
        unsafe { std::slice::from_raw_parts_mut(self.words.as_mut_ptr().cast::<u8>(), self.len) }
    }

    /// The buffer's elements encoded as a kernel reads them ([`HostBuffer::to_bytes`]:
    /// little-endian; bool as one byte 0/1; f16/bf16 as their bits; a narrow integer
    /// as its low bytes).
    pub fn from_host(buf: &HostBuffer) -> Self {
        let bytes = buf.to_bytes();
        let mut out = AlignedBytes::zeroed(bytes.len());
        out.as_mut_bytes().copy_from_slice(&bytes);
        out
    }

    /// Decodes the bytes as elements of `elem` (a trailing partial element is ignored).
    pub fn to_host(&self, elem: ScalarType) -> HostBuffer {
        HostBuffer::from_bytes(elem, self.as_bytes())
    }
}
