//! f64 reference implementations of every op, written from each op's mathematical
//! definition (never from its IR). Plain loops, clear rather than fast.
//!
//! [`reference()`] is the one entry point: it validates the spec, checks the input
//! buffers against [`OpSpec::inputs`] (count and lengths), and returns the outputs in
//! the order of [`OpSpec::outputs`], each flattened row-major (GEMM: in its `layout`).
//! Values are f64 whatever the spec's dtype: the references compute the exact math and
//! ignore storage rounding (except where rounding is the op, as in `cast`); integer
//! dtypes follow their integer rules (wrapping, truncating division: `wrap`). Index
//! inputs are f64 values holding integers (truncated toward zero).
//!
//! Each family's reference lives in its folder (`ops/<family>/reference.rs`), with the
//! formulas in the family's module doc.

use kernelc_ir::{Scalar, ScalarType};

use crate::error::SpecError;
use crate::lower::math::compute_type;
use crate::spec::OpSpec;

/// Runs the f64 reference of `spec` on `inputs` (in the order of [`OpSpec::inputs`]).
pub fn reference(spec: &OpSpec, inputs: &[&[f64]]) -> Result<Vec<Vec<f64>>, SpecError> {
    spec.validate()?;
    let sigs = spec.inputs();
    if inputs.len() != sigs.len() {
        return Err(SpecError::InputCount {
            op: spec.name(),
            expected: sigs.len(),
            found: inputs.len(),
        });
    }
    for (sig, data) in sigs.iter().zip(inputs) {
        if data.len() != sig.numel() {
            return Err(SpecError::InputLength {
                name: sig.name.clone(),
                expected: sig.numel(),
                found: data.len(),
            });
        }
    }
    Ok(spec.reference_unchecked(inputs))
}

/// An index value as an integer: truncated toward zero; `None` for NaN/±∞.
pub(crate) fn index_of(v: f64) -> Option<i64> {
    if v.is_finite() {
        Some(v.trunc() as i64)
    } else {
        None
    }
}

/// An index into `0..len`: `None` when out of range. With `from_end`, a negative
/// index counts from the end first (NumPy/ONNX).
pub(crate) fn resolve_index(v: f64, len: usize, from_end: bool) -> Option<usize> {
    let mut i = index_of(v)?;
    if from_end && i < 0 {
        i += len as i64;
    }
    if i >= 0 && (i as u64) < len as u64 {
        Some(i as usize)
    } else {
        None
    }
}

/// `v` converted to `dtype` as a stored value of that type: floats rounded once to
/// nearest, ties to even (f16 and bf16 too, subnormals included, ±∞ past the largest
/// finite value, NaN kept), integers truncated toward zero and saturated (NaN → 0),
/// bool `v ≠ 0`.
///
/// This is [`Scalar::from_f64`], the IR's one conversion from f64, which the
/// interpreter, constant folding and the conformance harness (rounding expected
/// values to the output dtype) use as well: every reference that rounds to a dtype
/// (`cast`, `fill`, GEMM's `input_rounding`) goes through it, so no two places round
/// differently. (The `half` crate's `from_f64` drops the low 32 bits of the f64 before
/// rounding, which turns a value just above a tie into a tie.)
pub fn round_to(dtype: ScalarType, v: f64) -> f64 {
    Scalar::from_f64(dtype, v).to_f64()
}

/// A float attribute (a scalar operand, a slope, `alpha`, `eps`, ...) as the kernels
/// of a `dtype` op receive and compute with it: rounded once to the op's compute type
/// (f32 for f16, bf16 and f32; f64 for f64; integers exact), the value `Uniform::new`
/// puts in [`Op::uniforms`](crate::op::Op::uniforms). An attribute that enters the
/// arithmetic is that value, not the f64 the spec holds, as PyTorch converts a Python
/// scalar to an f32 tensor's type: `scalar mod f32 0.1` is `x mod 0.1f32`.
pub(crate) fn attribute(dtype: ScalarType, v: f64) -> f64 {
    round_to(compute_type(dtype), v)
}

/// An integer result `v` (exact in f64) wrapped to `dtype`'s range, two's complement:
/// what the kernels' integer arithmetic does (the IR's `+ − ×` wrap, and a store into a
/// narrow integer keeps the low bits), and what NumPy's `add.at` and C do. Every
/// reference that adds or converts integers goes through it, so none saturates where a
/// device wraps. (i64 results are exact in f64 only below 2^53: the references are
/// exact for i64 there.) Floats and bool are not wrapped.
pub(crate) fn wrap(dtype: ScalarType, v: f64) -> f64 {
    if dtype.is_int() {
        wrap_int(dtype, v as i128)
    } else {
        v
    }
}

/// An exact integer result wrapped to `dtype`'s width (two's complement), as f64.
pub(crate) fn wrap_int(dtype: ScalarType, v: i128) -> f64 {
    match dtype {
        ScalarType::I32 => v as i32 as f64,
        ScalarType::U32 => v as u32 as f64,
        ScalarType::I64 => v as i64 as f64,
        ScalarType::U8 => v as u8 as f64,
        ScalarType::I8 => v as i8 as f64,
        ScalarType::U16 => v as u16 as f64,
        ScalarType::I16 => v as i16 as f64,
        ScalarType::Bool
        | ScalarType::F16
        | ScalarType::Bf16
        | ScalarType::F32
        | ScalarType::F64 => v as f64,
    }
}

/// The sum of `values`, compensated (Neumaier): the rounding error of every addition is
/// carried and added back, so the result is as if summed in twice the precision, then
/// rounded. For references whose sums cancel (normalisation statistics), where a plain
/// f64 sum could be less accurate than the f32 kernel under test.
///
/// With a NaN or infinite term (or a sum past f64's range) the result is the plain
/// IEEE sum: ±∞, or NaN for a NaN term or a `+∞ + −∞` (the carry, `∞ − ∞`, is NaN and
/// means nothing then).
pub(crate) fn compensated_sum(values: impl IntoIterator<Item = f64>) -> f64 {
    let (mut sum, mut carry) = (0.0f64, 0.0f64);
    for v in values {
        let t = sum + v;
        // The low-order part lost by `sum + v`, exact (TwoSum of Fast2Sum's order).
        carry += if sum.abs() >= v.abs() {
            (sum - t) + v
        } else {
            (v - t) + sum
        };
        sum = t;
    }
    if sum.is_finite() {
        sum + carry
    } else {
        sum
    }
}
