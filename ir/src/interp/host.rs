//! Host-side arguments of a run: buffers of typed elements and scalars.

use crate::eval;
use crate::scalar::Scalar;
use crate::types::ScalarType;
use half::{bf16, f16};

/// Host-side storage for one buffer parameter: `data[i]` is element `i`, and every
/// element is a scalar of type `elem.value_type()` (a narrow integer element, `u8`,
/// `i8`, `u16` or `i16`, is held as its `u32` or `i32` value and read as its low bits).
#[derive(Clone, Debug, PartialEq)]
pub struct HostBuffer {
    pub elem: ScalarType,
    pub data: Vec<Scalar>,
}

impl HostBuffer {
    pub fn new(elem: ScalarType, data: Vec<Scalar>) -> Self {
        HostBuffer { elem, data }
    }

    pub fn from_f32(v: &[f32]) -> Self {
        Self::new(ScalarType::F32, v.iter().map(|&x| Scalar::f32(x)).collect())
    }
    pub fn from_f64(v: &[f64]) -> Self {
        Self::new(ScalarType::F64, v.iter().map(|&x| Scalar::f64(x)).collect())
    }
    pub fn from_f16(v: &[f16]) -> Self {
        Self::new(ScalarType::F16, v.iter().map(|&x| Scalar::f16(x)).collect())
    }
    pub fn from_bf16(v: &[bf16]) -> Self {
        Self::new(
            ScalarType::Bf16,
            v.iter().map(|&x| Scalar::bf16(x)).collect(),
        )
    }
    pub fn from_u32(v: &[u32]) -> Self {
        Self::new(ScalarType::U32, v.iter().map(|&x| Scalar::U32(x)).collect())
    }
    pub fn from_i32(v: &[i32]) -> Self {
        Self::new(ScalarType::I32, v.iter().map(|&x| Scalar::I32(x)).collect())
    }
    pub fn from_i64(v: &[i64]) -> Self {
        Self::new(ScalarType::I64, v.iter().map(|&x| Scalar::I64(x)).collect())
    }
    /// A narrow integer buffer (`elem` one of `u8`, `i8`, `u16`, `i16`) from values
    /// that are wrapped to its width.
    pub fn from_narrow(elem: ScalarType, v: &[i64]) -> Self {
        let data = v
            .iter()
            .map(|&x| Scalar::int_wrapping(elem, x).unwrap_or(Scalar::zero(elem)))
            .collect();
        Self::new(elem, data)
    }
    pub fn from_bool(v: &[bool]) -> Self {
        Self::new(
            ScalarType::Bool,
            v.iter().map(|&x| Scalar::Bool(x)).collect(),
        )
    }

    /// `len` copies of `value` (e.g. a poison NaN for an output). A `value` of another
    /// type than `elem` is converted with `Cast` semantics.
    pub fn filled(elem: ScalarType, len: usize, value: Scalar) -> Self {
        let value = if value.ty() == elem {
            value
        } else {
            eval::cast_scalar(elem, value)
        };
        Self::new(elem, vec![value; len])
    }

    /// `len` zeros of `elem`.
    pub fn zeros(elem: ScalarType, len: usize) -> Self {
        Self::filled(elem, len, Scalar::zero(elem))
    }

    pub fn len(&self) -> usize {
        self.data.len()
    }
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    pub fn get(&self, i: usize) -> Option<Scalar> {
        self.data.get(i).copied()
    }

    /// The elements as a device buffer of `elem` holds them: each element's
    /// [`Scalar::to_bits`], little-endian, in `elem.size_bytes()` bytes (bool one byte
    /// 0/1, a narrow integer its low bytes). An element of another type than
    /// `elem.value_type()` is converted with `Cast` semantics first.
    pub fn to_bytes(&self) -> Vec<u8> {
        let size = self.elem.size_bytes() as usize;
        let mut out = Vec::with_capacity(self.data.len() * size);
        for &s in &self.data {
            let s = if s.ty() == self.elem.value_type() {
                Scalar::stored(self.elem, s)
            } else {
                eval::cast_scalar(self.elem, s)
            };
            out.extend_from_slice(&s.to_bits().to_le_bytes()[..size]);
        }
        out
    }

    /// Elements of `elem` from a device buffer's bytes (a trailing partial element
    /// is ignored): [`Scalar::from_bits`] of each.
    pub fn from_bytes(elem: ScalarType, bytes: &[u8]) -> Self {
        let size = elem.size_bytes() as usize;
        let data = bytes
            .chunks_exact(size)
            .map(|c| {
                let mut le = [0u8; 8];
                le[..size].copy_from_slice(c);
                Scalar::from_bits(elem, u64::from_le_bytes(le))
            })
            .collect();
        Self::new(elem, data)
    }

    /// Every element as f64 (exact for every type but i64 beyond 2^53).
    pub fn to_f64(&self) -> Vec<f64> {
        self.data.iter().map(|s| s.to_f64()).collect()
    }
    /// Every element as f32 (exact for f32, f16 and bf16; rounded otherwise).
    pub fn to_f32(&self) -> Vec<f32> {
        self.data
            .iter()
            .map(|s| match *s {
                Scalar::F32(b) => f32::from_bits(b),
                other => other.to_f64() as f32,
            })
            .collect()
    }
    /// Every element converted to u32 with `Cast` semantics (exact for u32 buffers).
    pub fn to_u32(&self) -> Vec<u32> {
        self.data
            .iter()
            .map(|s| match eval::cast_scalar(ScalarType::U32, *s) {
                Scalar::U32(v) => v,
                _ => 0,
            })
            .collect()
    }
    /// Every element converted to i32 with `Cast` semantics (exact for i32 buffers).
    pub fn to_i32(&self) -> Vec<i32> {
        self.data
            .iter()
            .map(|s| match eval::cast_scalar(ScalarType::I32, *s) {
                Scalar::I32(v) => v,
                _ => 0,
            })
            .collect()
    }
    /// The raw bits of every f16 element (`None` unless `elem` is f16).
    pub fn to_f16(&self) -> Option<Vec<f16>> {
        self.data
            .iter()
            .map(|s| match *s {
                Scalar::F16(b) => Some(f16::from_bits(b)),
                _ => None,
            })
            .collect()
    }
    /// The bf16 elements (`None` unless `elem` is bf16).
    pub fn to_bf16(&self) -> Option<Vec<bf16>> {
        self.data
            .iter()
            .map(|s| match *s {
                Scalar::Bf16(b) => Some(bf16::from_bits(b)),
                _ => None,
            })
            .collect()
    }
}

/// One kernel argument; `args[i]` binds `kernel.params[i]`.
#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    Buffer(HostBuffer),
    Scalar(Scalar),
}

impl Arg {
    pub fn as_buffer(&self) -> Option<&HostBuffer> {
        match self {
            Arg::Buffer(b) => Some(b),
            Arg::Scalar(_) => None,
        }
    }
    pub fn as_buffer_mut(&mut self) -> Option<&mut HostBuffer> {
        match self {
            Arg::Buffer(b) => Some(b),
            Arg::Scalar(_) => None,
        }
    }
    pub fn into_buffer(self) -> Option<HostBuffer> {
        match self {
            Arg::Buffer(b) => Some(b),
            Arg::Scalar(_) => None,
        }
    }
    pub fn as_scalar(&self) -> Option<Scalar> {
        match self {
            Arg::Scalar(s) => Some(*s),
            Arg::Buffer(_) => None,
        }
    }
}

impl From<HostBuffer> for Arg {
    fn from(b: HostBuffer) -> Arg {
        Arg::Buffer(b)
    }
}

impl From<Scalar> for Arg {
    fn from(s: Scalar) -> Arg {
        Arg::Scalar(s)
    }
}
