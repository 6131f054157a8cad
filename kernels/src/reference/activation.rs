//! Activation functions and their backward (`activation_backward`).
//!
//! | function | `f(x)` | `f'` as used by the backward (`dx = f' · dy`) |
//! | --- | --- | --- |
//! | ReLU | `max(0, x)` | `x > 0 ? 1 : 0` (from `x`) |
//! | leaky ReLU | `x > 0 ? x : slope·x` | `x > 0 ? 1 : slope` (from `x`) |
//! | sigmoid | `σ(x) = 1/(1 + e^{−x})` | `y(1 − y)` (from `y`) |
//! | tanh | `tanh x` | `1 − y²` (from `y`) |
//! | GELU (erf) | `x·Φ(x) = ½x(1 + erf(x/√2))` | `Φ(x) + x·φ(x)`, `φ(x) = e^{−x²/2}/√(2π)` (from `x`) |
//! | GELU (tanh) | `½x(1 + tanh u)`, `u = √(2/π)(x + 0.044715x³)` | `½(1 + tanh u) + ½x(1 − tanh²u)·√(2/π)(1 + 3·0.044715x²)` (from `x`) |
//! | SiLU | `x·σ(x)` | `σ(x)(1 + x(1 − σ(x)))` (from `x`) |
//!
//! `gelu_erf(1) = 0.8413447460685429`, `gelu_tanh(1) = 0.8411919906082768`.

use crate::spec::{ActivationBackwardSpec, UnaryFn};

/// √(2/π), the tanh-GELU constant.
pub const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
/// The cubic coefficient of tanh-GELU.
pub const GELU_TANH_COEFF: f64 = 0.044_715;

pub fn relu(x: f64) -> f64 {
    // NaN propagates.
    if x > 0.0 || x.is_nan() {
        x
    } else {
        0.0
    }
}

pub fn leaky_relu(x: f64, slope: f64) -> f64 {
    if x > 0.0 {
        x
    } else {
        slope * x
    }
}

pub fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// Standard normal CDF `Φ(x) = ½(1 + erf(x/√2))`.
pub fn normal_cdf(x: f64) -> f64 {
    0.5 * (1.0 + libm::erf(x / std::f64::consts::SQRT_2))
}

pub fn gelu_erf(x: f64) -> f64 {
    x * normal_cdf(x)
}

pub fn gelu_tanh(x: f64) -> f64 {
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * (x + GELU_TANH_COEFF * x * x * x)).tanh())
}

pub fn silu(x: f64) -> f64 {
    x * sigmoid(x)
}

/// `f'` of an activation, from the saved tensor `s` (`x` or `y` per
/// [`UnaryFn::backward_saves`]). Plain math functions have no entry and give NaN.
pub fn derivative(f: UnaryFn, s: f64) -> f64 {
    match f {
        UnaryFn::Relu => {
            if s > 0.0 {
                1.0
            } else {
                0.0
            }
        }
        UnaryFn::LeakyRelu { slope } => {
            if s > 0.0 {
                1.0
            } else {
                slope
            }
        }
        UnaryFn::Sigmoid => s * (1.0 - s),
        UnaryFn::Tanh => 1.0 - s * s,
        UnaryFn::GeluErf => {
            let pdf = (-0.5 * s * s).exp() / (2.0 * std::f64::consts::PI).sqrt();
            normal_cdf(s) + s * pdf
        }
        UnaryFn::GeluTanh => {
            let u = SQRT_2_OVER_PI * (s + GELU_TANH_COEFF * s * s * s);
            let t = u.tanh();
            0.5 * (1.0 + t)
                + 0.5 * s * (1.0 - t * t) * SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_TANH_COEFF * s * s)
        }
        UnaryFn::Silu => {
            let sg = sigmoid(s);
            sg * (1.0 + s * (1.0 - sg))
        }
        // Not an activation; validation rejects such specs before we get here.
        _ => f64::NAN,
    }
}

pub(crate) fn backward_op(s: &ActivationBackwardSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let (saved, dy) = (i[0], i[1]);
    vec![saved
        .iter()
        .zip(dy)
        .map(|(&sv, &g)| derivative(s.func, sv) * g)
        .collect()]
}
