//! Scalar constants: IR literals and the interpreter's values are the same type.
//!
//! Floats are held as their bit patterns so that `Eq` and `Hash` are exact (a literal
//! `-0.0` differs from `0.0`, a NaN equals itself), which the stable hash and the
//! passes rely on.

use crate::types::ScalarType;
use half::{bf16, f16};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// One scalar value of any IR type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scalar {
    Bool(bool),
    I32(i32),
    U32(u32),
    I64(i64),
    F16(#[serde(with = "f16_bits")] u16),
    Bf16(#[serde(with = "bf16_bits")] u16),
    F32(#[serde(with = "f32_bits")] u32),
    F64(#[serde(with = "f64_bits")] u64),
}

impl Scalar {
    pub fn f32(v: f32) -> Scalar {
        Scalar::F32(v.to_bits())
    }
    pub fn f64(v: f64) -> Scalar {
        Scalar::F64(v.to_bits())
    }
    pub fn f16(v: f16) -> Scalar {
        Scalar::F16(v.to_bits())
    }
    pub fn bf16(v: bf16) -> Scalar {
        Scalar::Bf16(v.to_bits())
    }

    pub fn ty(self) -> ScalarType {
        match self {
            Scalar::Bool(_) => ScalarType::Bool,
            Scalar::I32(_) => ScalarType::I32,
            Scalar::U32(_) => ScalarType::U32,
            Scalar::I64(_) => ScalarType::I64,
            Scalar::F16(_) => ScalarType::F16,
            Scalar::Bf16(_) => ScalarType::Bf16,
            Scalar::F32(_) => ScalarType::F32,
            Scalar::F64(_) => ScalarType::F64,
        }
    }

    /// The zero (or `false`) of a type.
    pub fn zero(ty: ScalarType) -> Scalar {
        Scalar::from_f64(ty, 0.0)
    }

    /// The one (or `true`) of a type.
    pub fn one(ty: ScalarType) -> Scalar {
        Scalar::from_f64(ty, 1.0)
    }

    /// Converts an f64 to the nearest value of `ty` (saturating for integers, NaN -> 0;
    /// nonzero -> true for bool). This is the conversion `Cast` uses from f64.
    ///
    /// A narrow storage type (`u8`, `i8`, `u16`, `i16`) gives the value an element of
    /// it holds, widened to its value type: truncated toward zero, saturated to i32
    /// (NaN -> 0), then wrapped to the narrow width, which is what a cast to `i32`
    /// followed by a store does (and what C's conversion through `int` does on x86).
    pub fn from_f64(ty: ScalarType, v: f64) -> Scalar {
        match ty {
            ScalarType::U8 | ScalarType::I8 | ScalarType::U16 | ScalarType::I16 => {
                Scalar::stored(ty, Scalar::I32(v as i32))
            }
            ScalarType::Bool => Scalar::Bool(v != 0.0),
            ScalarType::I32 => Scalar::I32(v as i32),
            ScalarType::U32 => Scalar::U32(v as u32),
            ScalarType::I64 => Scalar::I64(v as i64),
            ScalarType::F16 => Scalar::F16(f64_to_f16_bits(v)),
            ScalarType::Bf16 => Scalar::Bf16(f64_to_bf16_bits(v)),
            ScalarType::F32 => Scalar::f32(v as f32),
            ScalarType::F64 => Scalar::f64(v),
        }
    }

    /// The value as f64 (exact for every type but i64 beyond 2^53).
    pub fn to_f64(self) -> f64 {
        match self {
            Scalar::Bool(b) => b as u8 as f64,
            Scalar::I32(v) => v as f64,
            Scalar::U32(v) => v as f64,
            Scalar::I64(v) => v as f64,
            Scalar::F16(b) => f16::from_bits(b).to_f64(),
            Scalar::Bf16(b) => bf16::from_bits(b).to_f64(),
            Scalar::F32(b) => f32::from_bits(b) as f64,
            Scalar::F64(b) => f64::from_bits(b),
        }
    }

    /// The value as i64 for integer and bool scalars; `None` for floats.
    pub fn as_i64(self) -> Option<i64> {
        match self {
            Scalar::Bool(b) => Some(b as i64),
            Scalar::I32(v) => Some(v as i64),
            Scalar::U32(v) => Some(v as i64),
            Scalar::I64(v) => Some(v),
            _ => None,
        }
    }

    /// An integer of type `ty` from an i64, wrapping (two's complement) as the IR's
    /// integer arithmetic does. `None` when `ty` is not an integer type. A narrow
    /// storage type gives the element's value widened to its value type.
    pub fn int_wrapping(ty: ScalarType, v: i64) -> Option<Scalar> {
        match ty {
            ScalarType::I32 => Some(Scalar::I32(v as i32)),
            ScalarType::U32 => Some(Scalar::U32(v as u32)),
            ScalarType::I64 => Some(Scalar::I64(v)),
            ScalarType::U8 => Some(Scalar::U32(v as u8 as u32)),
            ScalarType::I8 => Some(Scalar::I32(v as i8 as i32)),
            ScalarType::U16 => Some(Scalar::U32(v as u16 as u32)),
            ScalarType::I16 => Some(Scalar::I32(v as i16 as i32)),
            ScalarType::Bool
            | ScalarType::F16
            | ScalarType::Bf16
            | ScalarType::F32
            | ScalarType::F64 => None,
        }
    }

    /// The value an element of type `elem` holds once `value` is stored into it: a
    /// narrow integer keeps the low bits of its `u32`/`i32` value (wraps), held widened
    /// again; every other type holds the value as it is. `value` must have
    /// `elem.value_type()` (the validator makes every store so).
    pub fn stored(elem: ScalarType, value: Scalar) -> Scalar {
        if !elem.is_storage_only() {
            return value;
        }
        value
            .as_i64()
            .and_then(|v| Scalar::int_wrapping(elem, v))
            .unwrap_or(value)
    }

    /// The value's bits, zero-extended to 64: bool as 0/1, integers in two's
    /// complement, floats (f16 and bf16 included) as their bits. The low
    /// `elem.size_bytes()` bytes, little-endian, are what a buffer of `elem` holds for
    /// it (a narrow element's value keeps its low bits).
    pub fn to_bits(self) -> u64 {
        match self {
            Scalar::Bool(b) => b as u64,
            Scalar::I32(v) => v as u32 as u64,
            Scalar::U32(v) => v as u64,
            Scalar::I64(v) => v as u64,
            Scalar::F16(b) | Scalar::Bf16(b) => b as u64,
            Scalar::F32(b) => b as u64,
            Scalar::F64(b) => b,
        }
    }

    /// The value of type `ty` whose element bits are the low bits of `bits` (bool:
    /// nonzero is true; a narrow integer: its value widened to `u32`/`i32`, as a load
    /// yields it). The inverse of [`Scalar::to_bits`] on a buffer's bytes.
    pub fn from_bits(ty: ScalarType, bits: u64) -> Scalar {
        match ty {
            ScalarType::Bool => Scalar::Bool(bits as u8 != 0),
            ScalarType::I32 => Scalar::I32(bits as u32 as i32),
            ScalarType::U32 => Scalar::U32(bits as u32),
            ScalarType::I64 => Scalar::I64(bits as i64),
            ScalarType::F16 => Scalar::F16(bits as u16),
            ScalarType::Bf16 => Scalar::Bf16(bits as u16),
            ScalarType::F32 => Scalar::F32(bits as u32),
            ScalarType::F64 => Scalar::F64(bits),
            ScalarType::U8 => Scalar::U32(bits as u8 as u32),
            ScalarType::I8 => Scalar::I32(bits as u8 as i8 as i32),
            ScalarType::U16 => Scalar::U32(bits as u16 as u32),
            ScalarType::I16 => Scalar::I32(bits as u16 as i16 as i32),
        }
    }

    pub fn as_bool(self) -> Option<bool> {
        match self {
            Scalar::Bool(b) => Some(b),
            _ => None,
        }
    }

    pub fn is_zero(self) -> bool {
        match self {
            Scalar::Bool(b) => !b,
            Scalar::I32(v) => v == 0,
            Scalar::U32(v) => v == 0,
            Scalar::I64(v) => v == 0,
            _ => false,
        }
    }

    pub fn is_one(self) -> bool {
        self.as_i64() == Some(1) && self.ty().is_int()
    }
}

impl fmt::Display for Scalar {
    /// The printer's literal syntax: a suffix names the type (`3u`, `-1i`, `2i64`,
    /// `1.5f`, `0.25f64`, `1h`, `1bf`), so printed IR is unambiguous.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Scalar::Bool(b) => write!(f, "{b}"),
            Scalar::I32(v) => write!(f, "{v}i"),
            Scalar::U32(v) => write!(f, "{v}u"),
            Scalar::I64(v) => write!(f, "{v}i64"),
            Scalar::F16(b) => write!(f, "{:?}h", f16::from_bits(b).to_f32()),
            Scalar::Bf16(b) => write!(f, "{:?}bf", bf16::from_bits(b).to_f32()),
            Scalar::F32(b) => write!(f, "{:?}f", f32::from_bits(b)),
            Scalar::F64(b) => write!(f, "{:?}f64", f64::from_bits(b)),
        }
    }
}

/// JSON has no NaN or infinities: finite floats are written as numbers, the others as
/// the strings "nan", "inf" and "-inf". NaN payloads are not preserved (one canonical
/// quiet NaN), which every target also does not promise.
mod float_repr {
    use super::*;
    use serde::de::Error;

    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    enum Repr<'a> {
        Number(f64),
        Special(&'a str),
    }

    pub fn serialize<S: Serializer>(v: f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_finite() {
            Repr::Number(v).serialize(s)
        } else if v.is_nan() {
            Repr::Special("nan").serialize(s)
        } else if v > 0.0 {
            Repr::Special("inf").serialize(s)
        } else {
            Repr::Special("-inf").serialize(s)
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        match Repr::deserialize(d)? {
            Repr::Number(v) => Ok(v),
            Repr::Special("nan") => Ok(f64::NAN),
            Repr::Special("inf") => Ok(f64::INFINITY),
            Repr::Special("-inf") => Ok(f64::NEG_INFINITY),
            Repr::Special(other) => Err(D::Error::custom(format!(
                "expected a number, \"nan\", \"inf\" or \"-inf\", found \"{other}\""
            ))),
        }
    }
}

macro_rules! float_bits_serde {
    ($module:ident, $bits:ty, $to_f64:expr, $from_f64:expr) => {
        mod $module {
            use super::*;
            pub fn serialize<S: Serializer>(bits: &$bits, s: S) -> Result<S::Ok, S::Error> {
                let to_f64: fn($bits) -> f64 = $to_f64;
                float_repr::serialize(to_f64(*bits), s)
            }
            pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<$bits, D::Error> {
                let from_f64: fn(f64) -> $bits = $from_f64;
                float_repr::deserialize(d).map(from_f64)
            }
        }
    };
}

float_bits_serde!(
    f16_bits,
    u16,
    |b| f16::from_bits(b).to_f64(),
    f64_to_f16_bits
);
float_bits_serde!(
    bf16_bits,
    u16,
    |b| bf16::from_bits(b).to_f64(),
    f64_to_bf16_bits
);
float_bits_serde!(f32_bits, u32, |b| f32::from_bits(b) as f64, |v| (v as f32)
    .to_bits());
float_bits_serde!(f64_bits, u64, f64::from_bits, f64::to_bits);

/// `v` rounded once (to nearest, ties to even) to f16, as bits.
///
/// `half`'s own `from_f64` drops the low 32 mantissa bits before rounding, which
/// rounds a value just above a tie down. Rounding to f32 *to odd* first keeps the
/// sticky information (f32 has more than two bits beyond f16's and bf16's
/// precision), so the second, nearest-even rounding is the only one that counts.
pub fn f64_to_f16_bits(v: f64) -> u16 {
    f16::from_f32(f64_to_f32_round_to_odd(v)).to_bits()
}

/// `v` rounded once (to nearest, ties to even) to bf16, as bits (see
/// [`f64_to_f16_bits`]).
pub fn f64_to_bf16_bits(v: f64) -> u16 {
    bf16::from_f32(f64_to_f32_round_to_odd(v)).to_bits()
}

/// `v` rounded to f32 toward zero, with the last bit set if that was inexact.
fn f64_to_f32_round_to_odd(v: f64) -> f32 {
    let nearest = v as f32;
    if nearest as f64 == v || v.is_nan() {
        return nearest;
    }
    let mut bits = nearest.to_bits();
    // Step back toward zero if rounding went away from it (or overflowed to inf).
    if (nearest as f64).abs() > v.abs() {
        bits -= 1;
    }
    f32::from_bits(bits | 1)
}

#[cfg(test)]
mod rounding_tests {
    use super::*;

    #[test]
    fn a_value_just_above_a_bf16_tie_rounds_up() {
        // 899678337 = 0x35A00081: the bf16 neighbours are 0x4e56 and 0x4e57, and the
        // value is just above their midpoint (half's from_f64 gives 0x4e56).
        assert_eq!(f64_to_bf16_bits(899_678_337.0), 0x4e57);
    }

    #[test]
    fn a_value_just_above_a_tie_after_the_low_32_bits_rounds_up() {
        // f32 0x3F808001 = 1 + 2^-8 + 2^-23, just above the midpoint of the bf16
        // values 1 and 1 + 2^-7; its deciding bit lies in the f64's low 32 bits.
        let v = f32::from_bits(0x3F80_8001) as f64;
        assert_eq!(bf16::from_bits(f64_to_bf16_bits(v)).to_f64(), 1.0078125);
        // 1 + 2^-11 + 2^-40: just above the midpoint of the f16 values 1 and 1 + 2^-10.
        let v = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
        assert_eq!(
            f16::from_bits(f64_to_f16_bits(v)).to_f64(),
            1.0 + 2f64.powi(-10)
        );
    }

    /// Exhaustive over every pair of neighbouring finite values of both formats (2^15
    /// magnitudes each, both signs, subnormals and zero included): the midpoint
    /// rounds to the even one, the f64 values just beside it to the nearer neighbour,
    /// and the midpoint above the largest finite value (the overflow threshold) to ∞.
    /// With monotonicity (checked by the random test below), this is every case.
    #[test]
    fn every_tie_and_its_neighbours_round_to_nearest_even() {
        type Conv = (&'static str, fn(f64) -> u16, fn(u16) -> f64);
        let formats: [Conv; 2] = [
            ("f16", f64_to_f16_bits, |b| f16::from_bits(b).to_f64()),
            ("bf16", f64_to_bf16_bits, |b| bf16::from_bits(b).to_f64()),
        ];
        let next_up = |x: f64| f64::from_bits(x.to_bits() + 1);
        let next_down = |x: f64| f64::from_bits(x.to_bits() - 1);
        for (name, round, value) in formats {
            for lo_bits in 0..0x7fffu16 {
                let lo = value(lo_bits);
                if !lo.is_finite() {
                    break;
                }
                let hi = value(lo_bits + 1);
                // Past the largest finite value the "next" value is ∞; the threshold
                // is half an ulp above it, the ulp being that of the largest value.
                let mid = if hi.is_finite() {
                    (lo + hi) / 2.0
                } else {
                    lo + (lo - value(lo_bits - 1)) / 2.0
                };
                let even = lo_bits + (lo_bits & 1);
                for (sign, s) in [(0u16, 1.0), (0x8000, -1.0)] {
                    let at = |x: f64| round(s * x);
                    assert_eq!(at(lo), sign | lo_bits, "{name} {lo}");
                    assert_eq!(at(mid), sign | even, "{name} tie {mid}");
                    assert_eq!(at(next_up(mid)), sign | (lo_bits + 1), "{name} above {mid}");
                    if mid > 0.0 {
                        assert_eq!(at(next_down(mid)), sign | lo_bits, "{name} below {mid}");
                    }
                }
            }
        }
    }

    #[test]
    fn agrees_with_exact_rounding_on_many_values() {
        // Reference: exact rational comparison through f64 (every f16/bf16 and every
        // midpoint between neighbours is an f64).
        let mut x = 0x1234_5678_9abc_def0u64;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = f64::from_bits(x);
            let v = if v.is_finite() { v % 70_000.0 } else { 1.5 };
            for (bits, to_f64) in [
                (
                    f64_to_f16_bits(v),
                    (|b| f16::from_bits(b).to_f64()) as fn(u16) -> f64,
                ),
                (f64_to_bf16_bits(v), |b| bf16::from_bits(b).to_f64()),
            ] {
                let got = to_f64(bits);
                let (lo, hi) = (to_f64(bits.wrapping_sub(1)), to_f64(bits.wrapping_add(1)));
                // No representable neighbour is strictly closer.
                if got.is_finite() && lo.is_finite() && hi.is_finite() {
                    assert!((got - v).abs() <= (lo - v).abs(), "{v}: {got} vs {lo}");
                    assert!((got - v).abs() <= (hi - v).abs(), "{v}: {got} vs {hi}");
                }
            }
        }
    }

    #[test]
    fn specials_are_kept() {
        assert!(f16::from_bits(f64_to_f16_bits(f64::NAN)).is_nan());
        assert!(bf16::from_bits(f64_to_bf16_bits(-f64::NAN)).is_nan());
        assert_eq!(
            f64_to_f16_bits(f64::NEG_INFINITY),
            f16::NEG_INFINITY.to_bits()
        );
        assert_eq!(f64_to_f16_bits(-0.0), f16::NEG_ZERO.to_bits());
        assert_eq!(f64_to_f16_bits(-1e300), f16::NEG_INFINITY.to_bits());
        assert_eq!(f64_to_f16_bits(1e-300), 0);
        assert_eq!(f64_to_bf16_bits(-1e-300), bf16::NEG_ZERO.to_bits());
        assert_eq!(f64_to_bf16_bits(f64::MIN_POSITIVE), 0);
        assert_eq!(f64_to_bf16_bits(f64::INFINITY), bf16::INFINITY.to_bits());
        assert_eq!(f64_to_f16_bits(1e10), f16::INFINITY.to_bits());
        assert_eq!(f64_to_bf16_bits(-0.0), bf16::NEG_ZERO.to_bits());
        assert_eq!(f64_to_bf16_bits(f64::MAX), bf16::INFINITY.to_bits());
    }
}
