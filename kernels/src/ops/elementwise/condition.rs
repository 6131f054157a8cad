//! What the elementwise family's conditioned tolerances are proportional to
//! ([`Op::condition`](crate::op::Op::condition)), per element and in units of `u`.
//!
//! Most elementwise functions are held to ULPs of their result. A few are, by their
//! standard definition (PyTorch's, JAX's), a sum whose terms cancel: GELU's
//! `½x(1 + erf(x/√2))` and `½x(1 + tanh(·))` for negative `x`, and the activation
//! derivatives at their interior zeros (`Φ(x) + xφ(x)` at `x ≈ −0.75`,
//! `σ(x)(1 + x(1 − σ(x)))` at `x ≈ −1.28`). Those are held to ULPs of the sum's terms,
//! the magnitudes of everything added, times the outer factors; where no term cancels
//! that is the result's magnitude again.

use super::reference::{apply_unary, derivative, sigmoid, GELU_TANH_COEFF, SQRT_2_OVER_PI};
use super::spec::{Activation, ActivationBackwardSpec, UnaryFn, UnarySpec};
use crate::lower::math::compute_type;
use crate::tolerance::{ulp, unit_roundoff, UNSPECIFIED};
use kernelc_ir::ScalarType;

/// The sum of magnitudes of the terms of `f(x)` (its magnitude where nothing cancels).
fn unary_terms(f: UnaryFn, y: f64, x: f64) -> f64 {
    match f {
        UnaryFn::GeluErf => 0.5 * x.abs() * (1.0 + libm::erf(x / std::f64::consts::SQRT_2).abs()),
        UnaryFn::GeluTanh => {
            let t = (SQRT_2_OVER_PI * (x + GELU_TANH_COEFF * x * x * x)).tanh();
            0.5 * x.abs() * (1.0 + t.abs())
        }
        UnaryFn::Neg
        | UnaryFn::Abs
        | UnaryFn::Sqrt
        | UnaryFn::Rsqrt
        | UnaryFn::Exp
        | UnaryFn::Log
        | UnaryFn::Sin
        | UnaryFn::Cos
        | UnaryFn::Tan
        | UnaryFn::Floor
        | UnaryFn::Ceil
        | UnaryFn::Round
        | UnaryFn::Relu
        | UnaryFn::LeakyRelu { .. }
        | UnaryFn::Sigmoid
        | UnaryFn::Tanh
        | UnaryFn::Silu => y.abs(),
    }
}

/// An activation's own error at `x`, in units of `u` of `dtype`'s compute type, for
/// an op that applies it to a value it computed (GEMM's epilogue): the function's
/// ULPs of its terms (the unary op's conditioned rows) or of its result (the others).
pub(crate) fn activation_terms(act: Activation, dtype: ScalarType, x: f64) -> f64 {
    let func = act.forward().as_received(dtype);
    let ct = compute_type(dtype);
    let y = apply_unary(func, dtype, x);
    func.traits().ulps * (unary_terms(func, y, x) + ulp(ct, y) / unit_roundoff(ct))
}

pub(super) fn unary(s: &UnarySpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let func = s.func.as_received(s.dtype);
    let ct = compute_type(s.dtype);
    let trig = matches!(func, UnaryFn::Sin | UnaryFn::Cos | UnaryFn::Tan);
    vec![i[0]
        .iter()
        .map(|&x| {
            let y = apply_unary(func, s.dtype, x);
            if trig && x.abs() > trig_range(ct) {
                UNSPECIFIED
            } else if trig {
                // ULPs of the result, as `Scale::Result` counts them.
                ulp(ct, y) / unit_roundoff(ct)
            } else {
                unary_terms(func, y, x) + y.abs()
            }
        })
        .collect()]
}

/// Where kernelc's sin, cos and tan are held to the table: their argument reduction
/// (Cody–Waite with a three-part `π/2`) is exact for `|x|` up to this bound in the
/// compute type (docs/semantics.md); beyond it the result is unspecified, as
/// Vulkan's and WGSL's are outside `[−π, π]`.
pub(crate) fn trig_range(compute: ScalarType) -> f64 {
    match compute {
        ScalarType::F64 => 1.6e6,
        _ => 102_000.0,
    }
}

/// The sum of magnitudes of the terms of `f'(s)`.
fn derivative_terms(f: Activation, s: f64) -> f64 {
    match f {
        Activation::GeluErf => {
            let pdf = (-0.5 * s * s).exp() / (2.0 * std::f64::consts::PI).sqrt();
            let erf = libm::erf(s / std::f64::consts::SQRT_2);
            0.5 * (1.0 + erf.abs()) + (s * pdf).abs()
        }
        Activation::GeluTanh => {
            let t = (SQRT_2_OVER_PI * (s + GELU_TANH_COEFF * s * s * s)).tanh();
            let slope = SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_TANH_COEFF * s * s);
            0.5 * (1.0 + t.abs()) + 0.5 * s.abs() * (1.0 + t * t) * slope
        }
        Activation::Silu => {
            let sg = sigmoid(s);
            sg * (1.0 + s.abs() * (1.0 + sg))
        }
        Activation::Relu
        | Activation::LeakyRelu { .. }
        | Activation::Sigmoid
        | Activation::Tanh => derivative(f, s).abs(),
    }
}

/// Activation backward: `dy·f'(s)`. A factor of `f'` that underflows the compute type
/// (`σ(s) = e^s/(1 + e^s)` of SiLU and sigmoid for `s < −87` in f32, tanh's `1 − t²`,
/// GELU's density) is good only to a few of its subnormal spacings, absolutely, and
/// `dy` and the rest of `f'` (up to `1 + |s|`) multiply that error: two spacings per
/// term, in units of `u` (`dy = 1.7·10⁶` at `s = −94` makes a `dx` of `−2·10⁻³³`
/// that no relative bound holds).
pub(super) fn activation_backward(s: &ActivationBackwardSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let (saved, dy) = (i[0], i[1]);
    let func = s.received_func();
    let ct = compute_type(s.dtype);
    let underflow = 2.0 * ulp(ct, 0.0) / unit_roundoff(ct);
    vec![saved
        .iter()
        .zip(dy)
        .map(|(&sv, &g)| {
            let terms = derivative_terms(func, sv) + derivative(func, sv).abs();
            g.abs() * (terms + underflow * (1.0 + sv.abs()))
        })
        .collect()]
}
