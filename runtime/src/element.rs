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
    /// Whether every bit pattern of its bytes is a value (all but `bool`).
    const ANY_BITS: bool;
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
            const ANY_BITS: bool = true;
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
    const ANY_BITS: bool = false;
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

/// `data`'s bytes as a device stores them: the slice itself on a little-endian host (no
/// copy), an encoded copy elsewhere.
pub(crate) fn device_bytes<T: Element>(data: &[T]) -> std::borrow::Cow<'_, [u8]> {
    if cfg!(target_endian = "little") {
        std::borrow::Cow::Borrowed(as_bytes(data))
    } else {
        std::borrow::Cow::Owned(to_bytes(data))
    }
}

/// `data`'s bytes in memory.
pub(crate) fn as_bytes<T: Element>(data: &[T]) -> &[u8] {
    // SAFETY: `Element` is sealed to plain numeric types and bool, none with padding,
    // so every byte of `data` is initialised; `u8` has alignment 1 and the length
    // covers exactly `data`'s bytes.
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data)) }
}

/// `data`'s bytes in memory, writable: any bytes written leave valid `T`s.
pub(crate) fn as_bytes_mut<T: AnyBitsElement>(data: &mut [T]) -> &mut [u8] {
    // SAFETY: as `as_bytes`; also every bit pattern written through the bytes is a
    // valid value of an `AnyBitsElement` type (bool is not one), so no invalid `T`
    // can result.
    unsafe {
        std::slice::from_raw_parts_mut(data.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(data))
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

/// `n` elements of `T` read by `fill` from a device: straight into the vector's memory
/// on a little-endian host when every bit pattern is a `T` (one copy), decoded from
/// the bytes otherwise.
pub(crate) fn read_elements<T: Element>(
    n: usize,
    fill: impl FnOnce(&mut [u8]) -> crate::Result<()>,
) -> crate::Result<Vec<T>> {
    if T::ANY_BITS && cfg!(target_endian = "little") {
        let zero = T::read_le(&[0u8; 8]);
        let mut out = vec![zero; n];
        // SAFETY: `T::ANY_BITS` holds only for the plain numeric `Element`s (sealed),
        // whose every byte pattern is a value and which have no padding; the slice
        // covers exactly `out`'s bytes, borrowed mutably for the fill.
        let bytes = unsafe {
            std::slice::from_raw_parts_mut(
                out.as_mut_ptr().cast::<u8>(),
                std::mem::size_of_val(&out[..]),
            )
        };
        fill(bytes)?;
        return Ok(out);
    }
    let mut bytes = vec![0u8; n * T::DTYPE.size_bytes() as usize];
    fill(&mut bytes)?;
    Ok(from_bytes(&bytes))
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
