//! Values for random kernels and their arguments: interesting constants of every type,
//! values drawn from random words, and the poison an output starts with.

use crate::scalar::Scalar;
use crate::types::ScalarType;

/// Values interesting in both f32 and f64 (each exact in f32 or rounded once to it):
/// signed zeros and ones, NaN of either sign, infinities, values past i32 and f16,
/// ordinary magnitudes.
const FLOAT_VALUES: [f64; 20] = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    -2.5,
    3.5,
    f64::NAN,
    -f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    -3e9,
    2147483648.0,
    65520.0,
    1e-7,
    100.0,
    0.1,
    std::f64::consts::PI,
    2.5,
    -3.75,
];

/// The interesting values of a type: identities and their neighbours first (0, 1, -1,
/// ...: what `simplify` looks for), then the edges (NaN with either sign and a
/// signalling payload, infinities, subnormals, extremes, values just past what a
/// narrower type or an integer conversion holds).
pub fn special_values(ty: ScalarType) -> Vec<Scalar> {
    match ty {
        ScalarType::Bool => vec![Scalar::Bool(false), Scalar::Bool(true)],
        ScalarType::I32 => [
            0,
            1,
            -1,
            2,
            -2,
            7,
            31,
            32,
            33,
            i32::MIN,
            i32::MAX,
            i32::MIN + 1,
            100000,
            3,
            -8,
            16,
        ]
        .map(Scalar::I32)
        .to_vec(),
        ScalarType::U32 => [
            0,
            1,
            2,
            7,
            31,
            32,
            33,
            0x8000_0000,
            u32::MAX,
            u32::MAX - 1,
            65535,
            3,
            8,
            255,
            4,
        ]
        .map(Scalar::U32)
        .to_vec(),
        ScalarType::I64 => [
            0,
            1,
            -1,
            63,
            64,
            i64::MIN,
            i64::MAX,
            1 << 40,
            -(1 << 53) - 1,
            (1 << 53) + 1,
            i32::MIN as i64,
            u32::MAX as i64 + 1,
            2,
            -7,
            3,
        ]
        .map(Scalar::I64)
        .to_vec(),
        ScalarType::F32 => {
            let edges = [
                f32::MIN_POSITIVE,
                1e-45,
                -1e-40,
                f32::MAX,
                f32::MIN,
                1e10,
                4294967296.0,
                65504.0,
            ];
            let common = FLOAT_VALUES.map(|v| v as f32);
            common.into_iter().chain(edges).map(Scalar::f32).collect()
        }
        ScalarType::F64 => {
            let edges = [
                f64::MIN_POSITIVE,
                5e-324,
                -1e-310,
                f64::MAX,
                f64::MIN,
                1e300,
                9.3e18,
                -9.3e18,
            ];
            FLOAT_VALUES
                .into_iter()
                .chain(edges)
                .map(Scalar::f64)
                .collect()
        }
        // Bit patterns: 0, -0, 1, -1, 0.5, quiet NaN of either sign, a signalling NaN,
        // infinities, the smallest subnormal, the largest subnormal, the smallest normal,
        // the extremes, 5, -10 and 1/3.
        ScalarType::F16 => [
            0x0000u16, 0x8000, 0x3C00, 0xBC00, 0x3800, 0x7E00, 0xFE00, 0x7C01, 0x7C00, 0xFC00,
            0x0001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x4500, 0xC900, 0x3555,
        ]
        .map(Scalar::F16)
        .to_vec(),
        ScalarType::Bf16 => [
            0x0000u16, 0x8000, 0x3F80, 0xBF80, 0x3F00, 0x7FC0, 0xFFC0, 0x7F81, 0x7F80, 0xFF80,
            0x0001, 0x007F, 0x0080, 0x7F7F, 0xFF7F, 0x40A0, 0xC120, 0x3EAB,
        ]
        .map(Scalar::Bf16)
        .to_vec(),
        // Held as their u32/i32 values: zero, one, the extremes and one past them
        // (which a store wraps), a sign flip.
        ScalarType::U8 | ScalarType::I8 | ScalarType::U16 | ScalarType::I16 => {
            let bits = ty.bits();
            let (lo, hi) = narrow_range(ty);
            [0, 1, -1, lo, hi, hi + 1, lo - 1, 1 << (bits - 1), 100, 3]
                .into_iter()
                .filter_map(|v| Scalar::int_wrapping(ty, v))
                .collect()
        }
    }
}

/// The smallest and largest value of a narrow integer type (`0..=0` otherwise).
fn narrow_range(ty: ScalarType) -> (i64, i64) {
    match ty {
        ScalarType::U8 => (0, u8::MAX as i64),
        ScalarType::I8 => (i8::MIN as i64, i8::MAX as i64),
        ScalarType::U16 => (0, u16::MAX as i64),
        ScalarType::I16 => (i16::MIN as i64, i16::MAX as i64),
        ScalarType::Bool
        | ScalarType::I32
        | ScalarType::U32
        | ScalarType::I64
        | ScalarType::F16
        | ScalarType::Bf16
        | ScalarType::F32
        | ScalarType::F64 => (0, 0),
    }
}

/// A value of type `ty` from two random words: a special value half of the time, an
/// ordinary magnitude (floats in ±1, ±10, ±10⁴ or ±10⁻³; small integers) a quarter of
/// the time, any bit pattern otherwise. `(0, 0)` gives the all-zero bit pattern, so a
/// shrunk word stream gives zeros.
pub fn value_from_words(ty: ScalarType, a: u32, b: u32) -> Scalar {
    match a % 4 {
        1 | 2 => {
            let special = special_values(ty);
            special[b as usize % special.len()]
        }
        3 => ordinary(ty, a >> 2, b),
        _ => {
            let wide = ((a as u64) << 32) | b as u64;
            match ty {
                ScalarType::Bool => Scalar::Bool(b & 1 == 1),
                ScalarType::I32 => Scalar::I32(b as i32),
                ScalarType::U32 => Scalar::U32(b),
                ScalarType::I64 => Scalar::I64(wide as i64),
                ScalarType::F16 => Scalar::F16(b as u16),
                ScalarType::Bf16 => Scalar::Bf16(b as u16),
                ScalarType::F32 => Scalar::F32(b),
                ScalarType::F64 => Scalar::F64(wide),
                ScalarType::U8 | ScalarType::I8 | ScalarType::U16 | ScalarType::I16 => {
                    Scalar::int_wrapping(ty, b as i64).unwrap_or(Scalar::zero(ty))
                }
            }
        }
    }
}

/// A value of an everyday magnitude: what real kernels mostly compute with, where
/// rounding differences show (special values and random bits are mostly NaNs,
/// infinities and extremes).
fn ordinary(ty: ScalarType, scale: u32, b: u32) -> Scalar {
    let unit = b as f64 / (1u64 << 31) as f64 - 1.0;
    let magnitude = [1.0, 10.0, 1e4, 1e-3][scale as usize % 4];
    match ty {
        ScalarType::Bool => Scalar::Bool(b & 1 == 1),
        ScalarType::I32 | ScalarType::I64 => Scalar::from_f64(ty, (b % 64) as f64 - 32.0),
        ScalarType::U32 => Scalar::U32(b % 64),
        ScalarType::U8 | ScalarType::I8 | ScalarType::U16 | ScalarType::I16 => {
            Scalar::int_wrapping(ty, (b % 64) as i64 - 32).unwrap_or(Scalar::zero(ty))
        }
        // Rounded to f32 first, as a kernel's inputs mostly are.
        ScalarType::F16 | ScalarType::Bf16 | ScalarType::F32 | ScalarType::F64 => {
            Scalar::from_f64(ty, (unit as f32 * magnitude as f32) as f64)
        }
    }
}

/// What an output buffer holds before a run: never zero and, for floats, a NaN with an
/// unusual payload, so that an element a run should have written but did not shows.
pub fn poison(ty: ScalarType) -> Scalar {
    match ty {
        ScalarType::Bool => Scalar::Bool(true),
        ScalarType::I32 => Scalar::I32(-7),
        ScalarType::U32 => Scalar::U32(0xDEAD_BEEF),
        ScalarType::I64 => Scalar::I64(-77),
        ScalarType::F16 => Scalar::F16(0x7E01),
        ScalarType::Bf16 => Scalar::Bf16(0x7FC1),
        ScalarType::F32 => Scalar::F32(0x7FC0_BEEF),
        ScalarType::F64 => Scalar::F64(0x7FF8_0000_DEAD_BEEF),
        ScalarType::U8 => Scalar::U32(0xBE),
        ScalarType::I8 => Scalar::I32(-66),
        ScalarType::U16 => Scalar::U32(0xBEEF),
        ScalarType::I16 => Scalar::I32(-16657),
    }
}

/// Whether a value is a NaN (of any payload).
pub(super) fn is_nan(s: Scalar) -> bool {
    match s {
        Scalar::F16(b) => half::f16::from_bits(b).is_nan(),
        Scalar::Bf16(b) => half::bf16::from_bits(b).is_nan(),
        Scalar::F32(b) => f32::from_bits(b).is_nan(),
        Scalar::F64(b) => f64::from_bits(b).is_nan(),
        Scalar::Bool(_) | Scalar::I32(_) | Scalar::U32(_) | Scalar::I64(_) => false,
    }
}
