//! Owned, 16-byte aligned byte buffers in the layout compiled kernels read, with
//! conversions from and to the interpreter's [`HostBuffer`].

use kernelc_ir::eval::cast_scalar;
use kernelc_ir::{HostBuffer, Scalar, ScalarType};

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

    /// The buffer's elements encoded as a kernel reads them (little-endian; bool as a
    /// `u32` 0/1; f16/bf16 as their bits). An element whose type is not `buf.elem` is
    /// converted with `Cast` semantics first.
    pub fn from_host(buf: &HostBuffer) -> Self {
        let size = buf.elem.size_bytes() as usize;
        let mut out = AlignedBytes::zeroed(buf.data.len() * size);
        let bytes = out.as_mut_bytes();
        for (i, &s) in buf.data.iter().enumerate() {
            let s = if s.ty() == buf.elem {
                s
            } else {
                cast_scalar(buf.elem, s)
            };
            let le = crate::cpu::encode_scalar(s).to_le_bytes();
            bytes[i * size..(i + 1) * size].copy_from_slice(&le[..size]);
        }
        out
    }

    /// Decodes the bytes as elements of `elem` (a trailing partial element is ignored).
    pub fn to_host(&self, elem: ScalarType) -> HostBuffer {
        let size = elem.size_bytes() as usize;
        let data = self
            .as_bytes()
            .chunks_exact(size)
            .map(|c| {
                let mut le = [0u8; 8];
                le[..size].copy_from_slice(c);
                decode_scalar(elem, u64::from_le_bytes(le))
            })
            .collect();
        HostBuffer::new(elem, data)
    }
}

/// A scalar of type `ty` from the low bits of `bits` (bool: nonzero is true).
pub(crate) fn decode_scalar(ty: ScalarType, bits: u64) -> Scalar {
    match ty {
        ScalarType::Bool => Scalar::Bool(bits as u32 != 0),
        ScalarType::I32 => Scalar::I32(bits as u32 as i32),
        ScalarType::U32 => Scalar::U32(bits as u32),
        ScalarType::I64 => Scalar::I64(bits as i64),
        ScalarType::F16 => Scalar::F16(bits as u16),
        ScalarType::Bf16 => Scalar::Bf16(bits as u16),
        ScalarType::F32 => Scalar::F32(bits as u32),
        ScalarType::F64 => Scalar::F64(bits),
    }
}
