//! Host element types that tensors upload from and download to.

use half::{bf16, f16};
use kernelc_ir::interp::HostBuffer;
use kernelc_ir::{Scalar, ScalarType};

/// A Rust type with an IR dtype and a little-endian byte encoding. Sealed: only the
/// types below implement it, each plain data without padding (`f32`, `f64`, `f16`,
/// `bf16`, `i64`, `i32`, `u32`, `i16`, `u16`, `i8`, `u8`, and `bool` as one byte 0/1).
/// Decoding never trusts the bytes: a bool byte other than 0 reads as `true`.
pub trait Element: sealed::Sealed + Copy + Send + Sync + 'static {
    const DTYPE: ScalarType;
    fn write_le(self, out: &mut Vec<u8>);
    /// From exactly `size_bytes(DTYPE)` bytes.
    fn read_le(bytes: &[u8]) -> Self;
    fn to_f64(self) -> f64;
}

/// An [`Element`] every bit pattern of whose bytes is a value (every element type
/// but `bool`): what lets a kernel write a caller's `&mut [T]` directly
/// ([`crate::HostSliceMut`]).
pub trait AnyBitsElement: Element {}

mod sealed {
    pub trait Sealed {}
}

macro_rules! element {
    ($($t:ty => $dtype:ident, $n:literal, |$v:ident| $to_f64:expr);* $(;)?) => {$(
        impl sealed::Sealed for $t {}
        impl AnyBitsElement for $t {}
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
    u8 => U8, 1, |v| v as f64;
    i8 => I8, 1, |v| v as f64;
    u16 => U16, 2, |v| v as f64;
    i16 => I16, 2, |v| v as f64;
}

impl sealed::Sealed for bool {}
impl Element for bool {
    const DTYPE: ScalarType = ScalarType::Bool;
    fn write_le(self, out: &mut Vec<u8>) {
        out.push(self as u8);
    }
    fn read_le(bytes: &[u8]) -> Self {
        bytes.first().is_some_and(|&b| b != 0)
    }
    fn to_f64(self) -> f64 {
        self as u8 as f64
    }
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

/// A device byte image of `dtype` as f64 values (exact but for i64 past 2^53).
pub fn bytes_to_f64(dtype: ScalarType, bytes: &[u8]) -> Vec<f64> {
    HostBuffer::from_bytes(dtype, bytes).to_f64()
}

/// f64 values converted to a device byte image of `dtype` as the IR's `cast`
/// converts ([`Scalar::from_f64`]: rounded to nearest, integers saturating, narrow
/// integers through i32 and wrapped).
pub fn f64_to_bytes(dtype: ScalarType, values: &[f64]) -> Vec<u8> {
    let data = values.iter().map(|&v| Scalar::from_f64(dtype, v)).collect();
    HostBuffer::new(dtype, data).to_bytes()
}
