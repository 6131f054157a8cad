//! f64 references of the elementwise family (formulas in the module doc of
//! [`super`]).

use kernelc_ir::ScalarType;

use super::spec::{
    Activation, ActivationBackwardSpec, BinaryFn, BinarySpec, CastSpec, FillSpec, FillValue,
    ScalarSpec, UnaryFn, UnarySpec, WhereSpec,
};
use crate::lower::math::compute_type;
use crate::reference::{attribute, round_to, wrap, wrap_int};
use crate::rng;
use crate::shape::{broadcast_strides, for_each_index, numel, offset};

/// The f64 definition of a unary function.
pub(super) fn unary(f: UnaryFn, x: f64) -> f64 {
    match f {
        UnaryFn::Neg => -x,
        UnaryFn::Abs => x.abs(),
        UnaryFn::Sqrt => x.sqrt(),
        UnaryFn::Rsqrt => 1.0 / x.sqrt(),
        UnaryFn::Exp => x.exp(),
        UnaryFn::Log => x.ln(),
        UnaryFn::Sin => x.sin(),
        UnaryFn::Cos => x.cos(),
        UnaryFn::Tan => x.tan(),
        UnaryFn::Floor => x.floor(),
        UnaryFn::Ceil => x.ceil(),
        UnaryFn::Round => x.round_ties_even(),
        UnaryFn::Relu => relu(x),
        UnaryFn::LeakyRelu { slope } => leaky_relu(x, slope),
        UnaryFn::Sigmoid => sigmoid(x),
        UnaryFn::Tanh => x.tanh(),
        UnaryFn::GeluErf => gelu_erf(x),
        UnaryFn::GeluTanh => gelu_tanh(x),
        UnaryFn::Silu => silu(x),
    }
}

/// IEEE 754 maxNum: a NaN operand is ignored unless both are NaN.
pub fn max_num(a: f64, b: f64) -> f64 {
    if a.is_nan() {
        b
    } else if b.is_nan() || a >= b {
        a
    } else {
        b
    }
}

/// IEEE 754 minNum: a NaN operand is ignored unless both are NaN.
pub fn min_num(a: f64, b: f64) -> f64 {
    if a.is_nan() {
        b
    } else if b.is_nan() || a <= b {
        a
    } else {
        b
    }
}

fn truth(b: bool) -> f64 {
    if b {
        1.0
    } else {
        0.0
    }
}

/// The f64 definition of a binary function on floats computed in `compute` (the op's
/// compute type): silu_mul's `silu(a)` is a value of it (see `silu_mul`).
pub fn binary(f: BinaryFn, compute: ScalarType, a: f64, b: f64) -> f64 {
    match f {
        BinaryFn::Add => a + b,
        BinaryFn::Sub => a - b,
        BinaryFn::Mul => a * b,
        BinaryFn::Div => a / b,
        BinaryFn::Mod => a % b,
        BinaryFn::FloorMod => floor_mod(a % b, b),
        BinaryFn::Pow => a.powf(b),
        BinaryFn::Max => max_num(a, b),
        BinaryFn::Min => min_num(a, b),
        BinaryFn::MaxNan | BinaryFn::MinNan if a.is_nan() || b.is_nan() => f64::NAN,
        BinaryFn::MaxNan => max_num(a, b),
        BinaryFn::MinNan => min_num(a, b),
        BinaryFn::Eq => truth(a == b),
        BinaryFn::Ne => truth(a != b),
        BinaryFn::Lt => truth(a < b),
        BinaryFn::Le => truth(a <= b),
        BinaryFn::Gt => truth(a > b),
        BinaryFn::Ge => truth(a >= b),
        BinaryFn::SiluMul => silu_mul(compute, a, b),
    }
}

/// Python's float `%`: the truncated remainder `r` moved to the divisor's sign
/// (`r + b` where `r ≠ 0` and the signs differ; NaN stays NaN).
fn floor_mod(r: f64, b: f64) -> f64 {
    if r != 0.0 && (r < 0.0) != (b < 0.0) {
        r + b
    } else {
        r
    }
}

/// `silu(a)·b` with `silu(a)` rounded to the compute type first, as the kernel holds it
/// (and PyTorch's `silu(a) * b`): a `silu(a)` that underflows there is ±0, and
/// `±0·∞ = NaN`, rather than the ±∞ of an f64 product.
fn silu_mul(compute: ScalarType, a: f64, b: f64) -> f64 {
    round_to(compute, silu(a)) * b
}

/// A binary function on integer values (given as f64, each exact) with the integer
/// rules: computed exactly, then wrapped to `dtype`'s width (two's complement);
/// division truncates toward zero, `%` takes the dividend's sign, and both give 0 for a
/// zero divisor.
pub fn binary_int(f: BinaryFn, dtype: ScalarType, a: f64, b: f64) -> f64 {
    let (x, y) = (a as i128, b as i128);
    let r = match f {
        BinaryFn::Add => x + y,
        BinaryFn::Sub => x - y,
        BinaryFn::Mul => x.wrapping_mul(y),
        BinaryFn::Div => x.checked_div(y).unwrap_or(0),
        BinaryFn::Mod => x.checked_rem(y).unwrap_or(0),
        BinaryFn::FloorMod => x.checked_rem(y).map_or(0, |r| {
            if r != 0 && (r < 0) != (y < 0) {
                r + y
            } else {
                r
            }
        }),
        BinaryFn::Max | BinaryFn::MaxNan => x.max(y),
        BinaryFn::Min | BinaryFn::MinNan => x.min(y),
        // Comparisons of integers are exact in f64; pow and silu_mul take floats only.
        BinaryFn::Eq
        | BinaryFn::Ne
        | BinaryFn::Lt
        | BinaryFn::Le
        | BinaryFn::Gt
        | BinaryFn::Ge
        | BinaryFn::Pow
        | BinaryFn::SiluMul => return binary(f, dtype, a, b),
    };
    wrap_int(dtype, r)
}

pub(super) fn apply_binary(f: BinaryFn, dtype: ScalarType, a: f64, b: f64) -> f64 {
    if dtype.is_int() {
        binary_int(f, dtype, a, b)
    } else {
        binary(f, compute_type(dtype), a, b)
    }
}

pub(super) fn apply_unary(f: UnaryFn, dtype: ScalarType, x: f64) -> f64 {
    if dtype.is_int() {
        let v = x as i128;
        wrap_int(
            dtype,
            match f {
                UnaryFn::Neg => -v,
                UnaryFn::Abs => v.abs(),
                UnaryFn::Relu => v.max(0),
                // The others take floats only (see `UnaryFn::allowed_dtypes`).
                UnaryFn::Sqrt
                | UnaryFn::Rsqrt
                | UnaryFn::Exp
                | UnaryFn::Log
                | UnaryFn::Sin
                | UnaryFn::Cos
                | UnaryFn::Tan
                | UnaryFn::Floor
                | UnaryFn::Ceil
                | UnaryFn::Round
                | UnaryFn::LeakyRelu { .. }
                | UnaryFn::Sigmoid
                | UnaryFn::Tanh
                | UnaryFn::GeluErf
                | UnaryFn::GeluTanh
                | UnaryFn::Silu => return unary(f, x),
            },
        )
    } else {
        unary(f, x)
    }
}

/// An activation applied to `x` as a `dtype` op's kernel applies it (leaky ReLU's
/// slope rounded to the compute type).
pub(crate) fn apply_activation(act: Activation, dtype: ScalarType, x: f64) -> f64 {
    apply_unary(act.forward().as_received(dtype), dtype, x)
}

pub(super) fn unary_op(s: &UnarySpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let func = s.func.as_received(s.dtype);
    vec![i[0]
        .iter()
        .map(|&x| apply_unary(func, s.dtype, x))
        .collect()]
}

/// Broadcasts `inputs` (with their shapes) to `out` and maps `f` over the elements.
pub(crate) fn broadcast_map(
    shapes: &[&[usize]],
    data: &[&[f64]],
    out: &[usize],
    f: impl Fn(&[f64]) -> f64,
) -> Vec<f64> {
    let strides: Vec<Vec<usize>> = shapes.iter().map(|s| broadcast_strides(s, out)).collect();
    let mut result = Vec::with_capacity(numel(out));
    let mut args = vec![0.0; shapes.len()];
    for_each_index(out, |idx| {
        for (k, st) in strides.iter().enumerate() {
            args[k] = data[k][offset(idx, st)];
        }
        result.push(f(&args));
    });
    result
}

pub(super) fn binary_op(s: &BinarySpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let out = s.out_shape();
    vec![broadcast_map(&[&s.lhs, &s.rhs], i, &out, |v| {
        apply_binary(s.func, s.dtype, v[0], v[1])
    })]
}

pub(super) fn scalar_op(s: &ScalarSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let scalar = attribute(s.dtype, s.scalar);
    vec![i[0]
        .iter()
        .map(|&x| {
            if s.reversed {
                apply_binary(s.func, s.dtype, scalar, x)
            } else {
                apply_binary(s.func, s.dtype, x, scalar)
            }
        })
        .collect()]
}

pub(super) fn where_op(s: &WhereSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let out = s.out_shape();
    vec![broadcast_map(&[&s.cond, &s.a, &s.b], i, &out, |v| {
        if v[0] != 0.0 {
            v[1]
        } else {
            v[2]
        }
    })]
}

/// The value `v` of type `from` converted to `to` (see the module doc), as f64.
/// Between integer types: two's complement truncation (i32 −1 → u32 4294967295), as C,
/// Rust `as`, NumPy `astype`, ONNX Cast and the IR's `cast` do. Float → integer:
/// truncation toward zero, saturating, NaN → 0. → float: one rounding to nearest even.
/// → bool: `v ≠ 0`.
pub fn cast(v: f64, from: ScalarType, to: ScalarType) -> f64 {
    if from.is_int() && to.is_int() {
        wrap(to, v)
    } else {
        round_to(to, v)
    }
}

pub(super) fn cast_op(s: &CastSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    vec![i[0].iter().map(|&x| cast(x, s.from, s.to)).collect()]
}

pub(super) fn fill_op(s: &FillSpec) -> Vec<Vec<f64>> {
    let n = numel(&s.shape);
    let scheme = FillSpec::RNG;
    // The stream index of element `i`, wrapping at 2^32 as the kernel's does.
    let at = |i: usize| s.offset.wrapping_add(i as u64) as u32;
    let out = match s.value {
        FillValue::Constant { value } => vec![round_to(s.dtype, value); n],
        // `low`, the range `high − low` (derived in f64) and `mean`, `std` as the kernel
        // receives them.
        FillValue::Uniform {
            low,
            high,
            seed,
            step,
        } => {
            let (low, range) = (attribute(s.dtype, low), attribute(s.dtype, high - low));
            let ct = compute_type(s.dtype);
            // The scaled draw is a value of the compute type: ±∞ past its range (then
            // `∞ + −∞` is NaN), as in the kernel and every implementation.
            (0..n)
                .map(|i| {
                    let draw = rng::uniform(rng::bits(scheme, seed, step, at(i)));
                    low + round_to(ct, range * draw)
                })
                .collect()
        }
        FillValue::Normal {
            mean,
            std,
            seed,
            step,
        } => {
            let (mean, std) = (attribute(s.dtype, mean), attribute(s.dtype, std));
            let ct = compute_type(s.dtype);
            (0..n)
                .map(|i| mean + round_to(ct, std * rng::normal(scheme, seed, step, at(i))))
                .collect()
        }
    };
    vec![out]
}

// ---- activations ----

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
/// [`Activation::saves`]).
pub fn derivative(f: Activation, s: f64) -> f64 {
    match f {
        Activation::Relu => {
            if s > 0.0 {
                1.0
            } else {
                0.0
            }
        }
        Activation::LeakyRelu { slope } => {
            if s > 0.0 {
                1.0
            } else {
                slope
            }
        }
        Activation::Sigmoid => s * (1.0 - s),
        Activation::Tanh => 1.0 - s * s,
        Activation::GeluErf => {
            let pdf = (-0.5 * s * s).exp() / (2.0 * std::f64::consts::PI).sqrt();
            normal_cdf(s) + s * pdf
        }
        Activation::GeluTanh => {
            let u = SQRT_2_OVER_PI * (s + GELU_TANH_COEFF * s * s * s);
            let t = u.tanh();
            0.5 * (1.0 + t)
                + 0.5 * s * (1.0 - t * t) * SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_TANH_COEFF * s * s)
        }
        Activation::Silu => {
            let sg = sigmoid(s);
            sg * (1.0 + s * (1.0 - sg))
        }
    }
}

pub(super) fn backward_op(s: &ActivationBackwardSpec, i: &[&[f64]]) -> Vec<Vec<f64>> {
    let (saved, dy) = (i[0], i[1]);
    let func = s.received_func();
    vec![saved
        .iter()
        .zip(dy)
        .map(|(&sv, &g)| derivative(func, sv) * g)
        .collect()]
}
