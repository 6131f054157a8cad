//! The tolerance table: how far any target's result may be from the f64 reference.
//! Each op states its row through [`Op::tolerance`](crate::op::Op::tolerance) (in its
//! family folder) using only the bound kinds defined here; `docs/semantics.md` states
//! the same table in prose with each row's measured worst error; the conformance
//! harness and the op fuzzer enforce exactly this and nothing looser.
//!
//! Every float element is held to
//!
//! ```text
//! |got − want| ≤ k · (unit + λ) + ulp_out(want)
//! ```
//!
//! where `want` is the reference rounded to the output dtype, `ulp_out(want)` the
//! spacing of that dtype at `want` (the two roundings to the output type may fall on
//! either side), `λ` the smallest normal of the compute type (the absolute error an
//! operation may make in the gradual-underflow range, [`underflow`]) and `k` the row's
//! constant. `u` below is the unit roundoff of the type the op computes in (f32 for
//! f16, bf16 and f32; f64 for f64), and the unit is one of ([`Scale`]):
//!
//! * **exact** (data movement, casts, comparisons, max/min, integer arithmetic): 0;
//!   the result matches bit for bit;
//! * **result** (elementwise math): `k · ulp(want)` in the compute type: ULPs of the
//!   result, nothing from the inputs' magnitude;
//! * **accumulated** (sums and dot products: GEMM, convolutions, reductions, pooling,
//!   scatter-add, stencils): `γₙ · Σ|terms|` with `γₙ = n·u / (1 − n·u)`, `n` the number
//!   of rounded operations on the way to the element (terms, plus scalings) and
//!   `Σ|terms|` the reference evaluated on absolute values: the classic bound of any
//!   summation order;
//! * **conditioned** (shift-invariant and normalising ops: softmax, log-softmax,
//!   cross-entropy, the norms, attention, their backward passes; and elementwise
//!   formulas with several roundings): `k · u · Sᵢ`, where the op computes `Sᵢ` from
//!   its inputs ([`Op::condition`](crate::op::Op::condition)): the magnitudes of the
//!   operands after the shift (`|xᵢ − max|`, `|ln Σ|`, `|xᵢ − μ|/σ`, ...) and the sums
//!   of magnitudes of the sums involved, never the raw input magnitude;
//! * **fixed** (random fills): `k · u · m`, `m` the magnitude the attributes give.
//!
//! An op's condition may accept any result for an element: [`OVERFLOWS`] where its
//! definition overflows the compute type on the way (extreme attributes do that),
//! [`UNDECIDED`] where a threshold test's operand is within its own rounding of the
//! threshold (Sobel), [`UNSPECIFIED`] where an input is outside the range the op's
//! accuracy is documented for (sin, cos and tan past their exact argument reduction).
//!
//! NaN must come out as NaN and infinities as the same infinity; signed zeros compare
//! equal.

use crate::lower::math::compute_type;
use crate::spec::OpSpec;
use kernelc_ir::ScalarType;

/// The kind of bound, and what it is proportional to.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scale {
    /// Bit-exact after rounding to the dtype.
    Exact,
    /// `ulps` ULPs of the result, in the compute type.
    Result,
    /// `γₙ · Σ|terms|` (`ulps` is 1): `n` rounded operations, `Σ|terms|` per element
    /// from the reference on absolute values.
    Accumulated { terms: usize },
    /// `ulps · u · Sᵢ`, `Sᵢ` per element from [`Op::condition`](crate::op::Op::condition).
    Conditioned,
    /// `ulps · u · m` for a magnitude `m` the attributes give (random fills).
    Fixed(f64),
}

/// The allowance of one op at one dtype.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    pub ulps: f64,
    pub scale: Scale,
}

impl Tolerance {
    /// Bit-exact after rounding to the dtype.
    pub const EXACT: Tolerance = Tolerance {
        ulps: 0.0,
        scale: Scale::Exact,
    };

    /// `ulps` ULPs of the result.
    pub fn result(ulps: f64) -> Tolerance {
        Tolerance {
            ulps,
            scale: Scale::Result,
        }
    }

    /// `γₙ · Σ|terms|` for `terms` rounded operations.
    pub fn accumulated(terms: usize) -> Tolerance {
        Tolerance {
            ulps: 1.0,
            scale: Scale::Accumulated {
                terms: terms.max(1),
            },
        }
    }

    /// `ulps · u · Sᵢ` with the op's per-element condition magnitudes.
    pub fn conditioned(ulps: f64) -> Tolerance {
        Tolerance {
            ulps,
            scale: Scale::Conditioned,
        }
    }

    /// `ulps · u · magnitude`.
    pub fn fixed(ulps: f64, magnitude: f64) -> Tolerance {
        Tolerance {
            ulps,
            scale: Scale::Fixed(magnitude),
        }
    }

    /// Whether the bound needs per-element magnitudes, and which: the reference on
    /// absolute values (accumulated) or the op's condition (conditioned).
    pub fn needs(&self) -> Needs {
        match self.scale {
            Scale::Accumulated { .. } => Needs::Magnitudes,
            Scale::Conditioned => Needs::Condition,
            Scale::Exact | Scale::Result | Scale::Fixed(_) => Needs::Nothing,
        }
    }
}

/// The per-element magnitudes a [`Tolerance`] needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    Nothing,
    /// `Σ|terms|`: the reference on absolute inputs and attributes.
    Magnitudes,
    /// The op's [`Op::condition`](crate::op::Op::condition).
    Condition,
}

/// Unit roundoff of a float type; integers and bool are exact (0).
pub fn unit_roundoff(dtype: ScalarType) -> f64 {
    match dtype {
        ScalarType::F16 => 2f64.powi(-11),
        ScalarType::Bf16 => 2f64.powi(-8),
        ScalarType::F32 => 2f64.powi(-24),
        ScalarType::F64 => 2f64.powi(-53),
        ScalarType::I32
        | ScalarType::U32
        | ScalarType::I64
        | ScalarType::Bool
        | ScalarType::U8
        | ScalarType::I8
        | ScalarType::U16
        | ScalarType::I16 => 0.0,
    }
}

/// The spacing of `dtype`'s values at `v` (a value of that type): `2^(e − p)` for the
/// exponent `e` of `v` (at least the smallest normal's) and `p` explicit significand
/// bits; the smallest subnormal at 0. 0 for integers and bool.
pub fn ulp(dtype: ScalarType, v: f64) -> f64 {
    let (mantissa, min_exponent) = match dtype {
        ScalarType::F16 => (10, -14),
        ScalarType::Bf16 => (7, -126),
        ScalarType::F32 => (23, -126),
        ScalarType::F64 => (52, -1022),
        ScalarType::I32
        | ScalarType::U32
        | ScalarType::I64
        | ScalarType::Bool
        | ScalarType::U8
        | ScalarType::I8
        | ScalarType::U16
        | ScalarType::I16 => return 0.0,
    };
    let exponent = if v == 0.0 || !v.is_finite() {
        min_exponent
    } else {
        (((v.abs().to_bits() >> 52) & 0x7ff) as i32 - 1023).max(min_exponent)
    };
    2f64.powi(exponent - mantissa)
}

/// `γₙ = n·u / (1 − n·u)`: the relative error bound of `n` rounded operations
/// (infinite once `n·u ≥ 1`).
pub fn gamma(n: usize, u: f64) -> f64 {
    let nu = n as f64 * u;
    if nu >= 1.0 {
        f64::INFINITY
    } else {
        nu / (1.0 - nu)
    }
}

/// The allowance for `spec`'s outputs: exact for integer and bool outputs, else the
/// op's own row ([`Op::tolerance`](crate::op::Op::tolerance)).
pub fn tolerance(spec: &OpSpec) -> Tolerance {
    let dtype = spec.outputs().first().map_or(ScalarType::F32, |s| s.dtype);
    if !dtype.is_float() {
        return Tolerance::EXACT;
    }
    spec.float_tolerance()
}

/// One element outside its allowance.
#[derive(Clone, Debug, PartialEq)]
pub struct Mismatch {
    pub output: String,
    pub index: usize,
    pub got: f64,
    pub want: f64,
    pub allowed: f64,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}[{}]: got {:e}, want {:e} (|diff| {:e} > allowed {:e})",
            self.output,
            self.index,
            self.got,
            self.want,
            (self.got - self.want).abs(),
            self.allowed
        )
    }
}

/// The condition an op gives an element whose definition overflows the compute type
/// on the way (Adam's `g²` for a gradient past `√max`): no bound holds, any result is
/// accepted (IEEE leaves the order, and so the overflow, to the implementation).
pub const OVERFLOWS: f64 = f64::INFINITY;

/// The condition an op gives a decision (a comparison with a threshold) whose operand
/// lies within its own rounding error of the threshold: either answer is right. The
/// same allowance as [`OVERFLOWS`]: any result is accepted.
pub const UNDECIDED: f64 = OVERFLOWS;

/// The condition an op gives an element whose input lies outside the range where the
/// op's accuracy is specified (f32 sin, cos and tan past `|x| = 102 000`:
/// docs/semantics.md): any result is accepted.
pub const UNSPECIFIED: f64 = OVERFLOWS;

/// The unit the row's `ulps` counts for one element (the bound is `ulps` of it, plus
/// the output rounding): an ULP of the result, `γₙ · Σ|terms|`, `u · Sᵢ` or `u · m`.
/// `s` is the element's `Σ|terms|` or `Sᵢ` (ignored by the other kinds).
pub fn unit(tol: &Tolerance, dtype: ScalarType, want: f64, s: f64) -> f64 {
    let compute = compute_type(dtype);
    let u = unit_roundoff(compute);
    match tol.scale {
        Scale::Exact => 0.0,
        Scale::Result => ulp(compute, want),
        Scale::Accumulated { terms } => gamma(terms, u) * s.abs(),
        Scale::Conditioned => u * s.abs(),
        Scale::Fixed(m) => u * m.abs(),
    }
}

/// The allowance for one element (see the module documentation).
pub fn allowed(tol: &Tolerance, dtype: ScalarType, want: f64, s: f64) -> f64 {
    if tol.scale == Scale::Exact {
        return 0.0;
    }
    tol.ulps * (unit(tol, dtype, want, s) + underflow(dtype)) + ulp(dtype, want)
}

/// The absolute error one operation may make in the gradual-underflow range of the
/// compute type: its smallest normal (`2⁻¹²⁶` for f32, `2⁻¹⁰²²` for f64). A product
/// of subnormal intermediates keeps only the bits above it, whatever the result's
/// magnitude, so no relative bound holds there.
pub fn underflow(dtype: ScalarType) -> f64 {
    match compute_type(dtype) {
        ScalarType::F64 => f64::MIN_POSITIVE,
        ScalarType::F16 | ScalarType::Bf16 | ScalarType::F32 => f32::MIN_POSITIVE as f64,
        ScalarType::I32
        | ScalarType::U32
        | ScalarType::I64
        | ScalarType::Bool
        | ScalarType::U8
        | ScalarType::I8
        | ScalarType::U16
        | ScalarType::I16 => 0.0,
    }
}

/// How much of its unit an element's error uses, past the output rounding: the
/// measure the row's `ulps` bounds (0 when within one output ULP; infinite for a
/// wrong NaN or infinity, or an error where the unit is 0).
pub fn error_units(tol: &Tolerance, dtype: ScalarType, got: f64, want: f64, s: f64) -> f64 {
    if s == OVERFLOWS {
        return 0.0;
    }
    if want.is_nan() || got.is_nan() || want.is_infinite() || got.is_infinite() {
        let same = (want.is_nan() && got.is_nan()) || got == want;
        return if same { 0.0 } else { f64::INFINITY };
    }
    let excess = ((got - want).abs() - ulp(dtype, want)).max(0.0);
    if excess == 0.0 {
        return 0.0;
    }
    match unit(tol, dtype, want, s) + underflow(dtype) {
        u if u > 0.0 => excess / u,
        // 0, or NaN: a condition over inputs with NaN or ∞ allows nothing.
        _ => f64::INFINITY,
    }
}

/// Compares one output against the reference. `want` is the reference already rounded
/// to the output dtype; `scales` the per-element `Σ|terms|` or `Sᵢ` the tolerance
/// [`needs`](Tolerance::needs) (`None` when it needs nothing).
pub fn compare(
    name: &str,
    tol: &Tolerance,
    dtype: ScalarType,
    got: &[f64],
    want: &[f64],
    scales: Option<&[f64]>,
) -> Result<(), Mismatch> {
    for (index, (&g, &w)) in got.iter().zip(want).enumerate() {
        let s = scales.and_then(|m| m.get(index)).copied().unwrap_or(0.0);
        let ok = if s == OVERFLOWS {
            true
        } else if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() || tol.scale == Scale::Exact {
            g == w
        } else {
            // An allowance that is NaN (a condition over inputs with NaN or ∞) allows
            // nothing: `f64::max` takes the 0.
            g == w || (g - w).abs() <= allowed(tol, dtype, w, s).max(0.0)
        };
        if !ok {
            return Err(Mismatch {
                output: name.to_string(),
                index,
                got: g,
                want: w,
                allowed: allowed(tol, dtype, w, s),
            });
        }
    }
    Ok(())
}
