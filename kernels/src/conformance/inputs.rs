//! Seeded random inputs that stay inside each op's domain and are never all zeros.
//!
//! Numbers come from the catalogue's own counter RNG ([`crate::rng`]), so a case is
//! the same on every machine: input `k` of a spec, element `i`, seed `s` is
//! `bits(Counter, s, k, i)`.

use crate::rng::{bits, uniform, RngScheme};
use crate::spec::*;
use kernelc_ir::ScalarType;

/// Where the values of one input are drawn from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Domain {
    /// Uniform reals in `[lo, hi)`.
    Real(f64, f64),
    /// Reals with magnitude in `[lo, hi)` and a random sign (divisors).
    AwayFromZero(f64, f64),
    /// Uniform integers in `[lo, hi]`.
    Int(i64, i64),
    /// 0 or 1.
    Flag,
}

/// Whether input `name` of `spec` holds indices rather than data: by convention, index
/// inputs are named `indices`, `targets` or `positions`.
pub fn is_index(_spec: &OpSpec, name: &str) -> bool {
    matches!(name, "indices" | "targets" | "positions")
}

impl Domain {
    /// The domain of an input with no special meaning: reals in `[-2, 2)`, integers in
    /// `[-30, 30]` (`[0, 60]` unsigned), 0 or 1 for bool.
    pub fn of_dtype(dtype: ScalarType) -> Domain {
        match dtype {
            ScalarType::Bool => Domain::Flag,
            ScalarType::U32 | ScalarType::U8 | ScalarType::U16 => Domain::Int(0, 60),
            ScalarType::I32 | ScalarType::I64 | ScalarType::I8 | ScalarType::I16 => {
                Domain::Int(-30, 30)
            }
            ScalarType::F16 | ScalarType::Bf16 | ScalarType::F32 | ScalarType::F64 => {
                Domain::Real(-2.0, 2.0)
            }
        }
    }

    /// Every value of an integer type of at most 32 bits (for sums that must
    /// overflow); [`Domain::of_dtype`] for the other types.
    pub fn whole_int_range(dtype: ScalarType) -> Domain {
        match dtype {
            ScalarType::I32 => Domain::Int(i32::MIN.into(), i32::MAX.into()),
            ScalarType::U32 => Domain::Int(0, u32::MAX.into()),
            ScalarType::U8 => Domain::Int(0, u8::MAX.into()),
            ScalarType::I8 => Domain::Int(i8::MIN.into(), i8::MAX.into()),
            ScalarType::U16 => Domain::Int(0, u16::MAX.into()),
            ScalarType::I16 => Domain::Int(i16::MIN.into(), i16::MAX.into()),
            ScalarType::I64
            | ScalarType::Bool
            | ScalarType::F16
            | ScalarType::Bf16
            | ScalarType::F32
            | ScalarType::F64 => Domain::of_dtype(dtype),
        }
    }

    /// Lookup indices into a dimension of `len`: reaching one past both ends (negative
    /// ones count from the end when `from_end`, and are out of range otherwise), and
    /// fractional for f32 (truncated toward zero).
    pub fn lookup_indices(dtype: ScalarType, len: usize, from_end: bool) -> Domain {
        let n = len as i64;
        let signed_lo = if from_end { -n - 2 } else { -2 };
        match dtype {
            ScalarType::U32 | ScalarType::U8 | ScalarType::U16 => Domain::Int(0, n + 1),
            ScalarType::F16 | ScalarType::Bf16 | ScalarType::F32 | ScalarType::F64 => {
                Domain::Real(signed_lo as f64, (n + 2) as f64)
            }
            ScalarType::I32
            | ScalarType::I64
            | ScalarType::Bool
            | ScalarType::I8
            | ScalarType::I16 => Domain::Int(signed_lo, n + 1),
        }
    }
}

/// Value `i` of input `k` drawn from `domain`.
pub(crate) fn draw(domain: Domain, seed: u64, k: usize, i: usize) -> f64 {
    let r = bits(RngScheme::Counter, seed, k as u64, i as u32);
    let u = uniform(r);
    match domain {
        Domain::Real(lo, hi) => lo + (hi - lo) * u,
        Domain::AwayFromZero(lo, hi) => {
            let m = lo + (hi - lo) * u;
            if r & 1 == 0 {
                m
            } else {
                -m
            }
        }
        Domain::Int(lo, hi) => (lo + ((u * (hi - lo + 1) as f64) as i64).min(hi - lo)) as f64,
        Domain::Flag => (r & 1) as f64,
    }
}

/// The `len` values of input `k` drawn from `domain` for `seed`, as [`generate`] makes
/// them (before rounding to the dtype): never all zeros, so that a kernel that ignores
/// an input cannot pass by luck. An op's [`special_input`](crate::op::Op::special_input)
/// that derives one input from another (saved statistics from `x`) redraws that other
/// input with this.
pub fn drawn(domain: Domain, seed: u64, k: usize, len: usize) -> Vec<f64> {
    let mut values: Vec<f64> = (0..len).map(|i| draw(domain, seed, k, i)).collect();
    if values.iter().all(|&v| v == 0.0) {
        if let (Some(first), Domain::Real(..) | Domain::AwayFromZero(..) | Domain::Flag) =
            (values.first_mut(), domain)
        {
            *first = 1.0;
        }
    }
    values
}

/// Inputs of `spec` (in `inputs()` order) for `seed`.
pub fn generate(spec: &OpSpec, seed: u64) -> Vec<Vec<f64>> {
    spec.inputs()
        .iter()
        .enumerate()
        .map(|(k, sig)| {
            spec.special_input(k, seed)
                .unwrap_or_else(|| drawn(spec.domain(sig), seed, k, sig.numel()))
        })
        .collect()
}
