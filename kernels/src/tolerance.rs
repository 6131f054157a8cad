//! The tolerance machinery: how far any target's result may be from the f64
//! reference. Each op states its row through [`Op::tolerance`](crate::op::Op::tolerance)
//! (in its family folder) using only the bound kinds defined here;
//! `docs/semantics.md` states the same table in prose; the conformance harness
//! enforces exactly this and nothing looser.
//!
//! Every bound has the form
//!
//! ```text
//! |got − want| ≤ ulps · u(dtype) · (|want| + scale)
//! ```
//!
//! where `u` is the unit roundoff of the op's dtype (2⁻¹¹ f16, 2⁻⁸ bf16, 2⁻²⁴ f32,
//! 2⁻⁵³ f64) and `scale` depends on the op's class ([`Scale`]):
//!
//! * **exact** ops (data movement, casts, comparisons, max/min, integer arithmetic) must
//!   match bit for bit after rounding the reference to the dtype;
//! * **elementwise** math: `scale` is the largest input magnitude of the case, which
//!   absorbs the cancellation of formulas like GELU near its zero crossing;
//! * **accumulations** (sums, dot products, convolutions): `scale = len · m` where
//!   `m` is the sum of magnitudes of the terms of that output element (the reference
//!   evaluated on absolute values) and `len` the number of terms — the classic
//!   worst-case bound of floating-point summation;
//! * **normalisations** (softmax, norms, attention, cross-entropy): `scale = len ·
//!   max|input|`, with `len` the normalised length;
//! * **random fills**: `scale` is the magnitude the attributes give (`max(|low|, |high|)`,
//!   or `|mean| + 6·std`).
//!
//! NaN must come out as NaN and infinities as the same infinity; signed zeros compare
//! equal.

use crate::spec::OpSpec;
use kernelc_ir::ScalarType;

/// What the error allowance is proportional to, beyond `|want|`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scale {
    /// Bit-exact after rounding to the dtype.
    Exact,
    /// The largest input magnitude of the case.
    Inputs,
    /// `len` times the element's sum of term magnitudes (the reference on |inputs|).
    Accumulated { len: usize },
    /// `len` times the largest input magnitude.
    InputsTimesLen { len: usize },
    /// A fixed magnitude given by the op's attributes (random fills).
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
    /// `ulps` of the result plus the largest input magnitude.
    pub fn elementwise(ulps: f64) -> Tolerance {
        Tolerance {
            ulps,
            scale: Scale::Inputs,
        }
    }
    /// `ulps` times `len` sums of term magnitudes (sums and dot products of `len` terms).
    pub fn accumulated(ulps: f64, len: usize) -> Tolerance {
        Tolerance {
            ulps,
            scale: Scale::Accumulated { len: len.max(1) },
        }
    }
    /// `ulps` times `len` times the largest input magnitude (normalisations over `len`).
    pub fn normalised(ulps: f64, len: usize) -> Tolerance {
        Tolerance {
            ulps,
            scale: Scale::InputsTimesLen { len: len.max(1) },
        }
    }
}

/// Unit roundoff of a float type; integers and bool are exact (0).
pub fn unit_roundoff(dtype: ScalarType) -> f64 {
    match dtype {
        ScalarType::F16 => 2f64.powi(-11),
        ScalarType::Bf16 => 2f64.powi(-8),
        ScalarType::F32 => 2f64.powi(-24),
        ScalarType::F64 => 2f64.powi(-53),
        ScalarType::I32 | ScalarType::U32 | ScalarType::I64 | ScalarType::Bool => 0.0,
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

/// The allowance for one element.
pub fn allowed(
    tol: &Tolerance,
    dtype: ScalarType,
    want: f64,
    magnitude: f64,
    max_input: f64,
) -> f64 {
    let u = unit_roundoff(dtype);
    let scale = match tol.scale {
        Scale::Exact => return 0.0,
        Scale::Inputs => max_input,
        Scale::Accumulated { len } => len as f64 * magnitude,
        Scale::InputsTimesLen { len } => len as f64 * max_input,
        Scale::Fixed(m) => m,
    };
    // One rounding of the result to the storage type is always allowed.
    tol.ulps * u * (want.abs() + scale) + u * want.abs()
}

/// Compares one output against the reference. `want` is the reference already rounded
/// to the output dtype; `magnitude` the reference on absolute values (accumulations).
pub fn compare(
    name: &str,
    tol: &Tolerance,
    dtype: ScalarType,
    got: &[f64],
    want: &[f64],
    magnitude: Option<&[f64]>,
    max_input: f64,
) -> Result<(), Mismatch> {
    for (index, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() || tol.scale == Scale::Exact {
            g == w
        } else {
            let m = magnitude
                .and_then(|m| m.get(index))
                .copied()
                .unwrap_or(w.abs());
            let bound = allowed(tol, dtype, w, m, max_input);
            (g - w).abs() <= bound
        };
        if !ok {
            let m = magnitude
                .and_then(|m| m.get(index))
                .copied()
                .unwrap_or(w.abs());
            return Err(Mismatch {
                output: name.to_string(),
                index,
                got: g,
                want: w,
                allowed: allowed(tol, dtype, w, m, max_input),
            });
        }
    }
    Ok(())
}
