//! Host element types that tensors upload from and download to.

use half::{bf16, f16};
use kernelc_ir::ScalarType;

/// A Rust type with an IR dtype and a little-endian byte encoding. Sealed: only the
/// types below implement it, each plain data without padding whose every bit pattern
/// is a value, which is what lets host slices be viewed as bytes
/// ([`crate::HostSlice`]).
pub trait Element: sealed::Sealed + Copy + Send + Sync + 'static {
    const DTYPE: ScalarType;
    fn write_le(self, out: &mut Vec<u8>);
    /// From exactly `size_bytes(DTYPE)` bytes.
    fn read_le(bytes: &[u8]) -> Self;
    fn to_f64(self) -> f64;
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! element {
    ($($t:ty => $dtype:ident, $n:literal, |$v:ident| $to_f64:expr);* $(;)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: ScalarType = ScalarType::$dtype;
            fn write_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn read_le(bytes: &[u8]) -> Self {
                let mut b = [0u8; $n];
                b.copy_from_slice(&bytes[..$n]);
                <$t>::from_le_bytes(b)
            }
            fn to_f64(self) -> f64 {
                let $v = self;
                $to_f64
            }
        }
    )*};
}

element! {
    f32 => F32, 4, |v| v as f64;
    f64 => F64, 8, |v| v;
    i32 => I32, 4, |v| v as f64;
    u32 => U32, 4, |v| v as f64;
    i64 => I64, 8, |v| v as f64;
    f16 => F16, 2, |v| v.to_f64();
    bf16 => Bf16, 2, |v| v.to_f64();
}

/// Bytes of `data` as stored on a device.
pub fn to_bytes<T: Element>(data: &[T]) -> Vec<u8> {
    let mut out = Vec::with_capacity(std::mem::size_of_val(data));
    for &v in data {
        v.write_le(&mut out);
    }
    out
}

/// Elements of a device byte image of dtype `T::DTYPE`.
pub fn from_bytes<T: Element>(bytes: &[u8]) -> Vec<T> {
    let size = T::DTYPE.size_bytes() as usize;
    bytes.chunks_exact(size).map(T::read_le).collect()
}

/// A device byte image of `dtype` as f64 values (bool stored as a u32 word).
pub fn bytes_to_f64(dtype: ScalarType, bytes: &[u8]) -> Vec<f64> {
    match dtype {
        ScalarType::F32 => from_bytes::<f32>(bytes)
            .into_iter()
            .map(f64::from)
            .collect(),
        ScalarType::F64 => from_bytes::<f64>(bytes),
        ScalarType::I32 => from_bytes::<i32>(bytes)
            .into_iter()
            .map(f64::from)
            .collect(),
        ScalarType::U32 | ScalarType::Bool => from_bytes::<u32>(bytes)
            .into_iter()
            .map(f64::from)
            .collect(),
        ScalarType::I64 => from_bytes::<i64>(bytes)
            .into_iter()
            .map(|v| v as f64)
            .collect(),
        ScalarType::F16 => from_bytes::<f16>(bytes)
            .into_iter()
            .map(|v| v.to_f64())
            .collect(),
        ScalarType::Bf16 => from_bytes::<bf16>(bytes)
            .into_iter()
            .map(|v| v.to_f64())
            .collect(),
    }
}

/// f64 values converted to a device byte image of `dtype` (rounded to nearest, integers
/// saturating), as the IR's `cast` converts.
pub fn f64_to_bytes(dtype: ScalarType, values: &[f64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * dtype.size_bytes() as usize);
    for &v in values {
        match dtype {
            ScalarType::F32 => (v as f32).write_le(&mut out),
            ScalarType::F64 => v.write_le(&mut out),
            ScalarType::I32 => (v as i32).write_le(&mut out),
            ScalarType::U32 => (v as u32).write_le(&mut out),
            ScalarType::Bool => ((v != 0.0) as u32).write_le(&mut out),
            ScalarType::I64 => (v as i64).write_le(&mut out),
            ScalarType::F16 => {
                f16::from_bits(kernelc_ir::scalar::f64_to_f16_bits(v)).write_le(&mut out)
            }
            ScalarType::Bf16 => {
                bf16::from_bits(kernelc_ir::scalar::f64_to_bf16_bits(v)).write_le(&mut out)
            }
        }
    }
    out
}
