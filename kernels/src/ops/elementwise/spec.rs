//! Elementwise specs: unary math and activations (and their backward), binary ops with
//! broadcasting, tensor–scalar ops, `where`, `cast` and `fill`.

use crate::OpSpec;
use kernelc_ir::ScalarType;
use serde::{Deserialize, Serialize};

use super::{cases, condition, lower, reference};
use crate::conformance::inputs::Domain;
use crate::error::SpecError;
use crate::lower::math::compute_type;
use crate::lower::split::split_map;
use crate::lower::{LowerError, Plan, TargetCaps, Uniform};
use crate::op::Op;
use crate::reference::{attribute, round_to};
use crate::rng;
use crate::rng::RngScheme;
use crate::shape::{broadcast_shapes, check_shape};
use crate::spec::{
    check_dtype, check_finite, check_non_negative, TensorSig, FLOATS, NUMERIC, SIGNED,
};
use crate::tolerance::Tolerance;

/// A unary function. The math is in module doc of [`crate::ops::elementwise`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnaryFn {
    /// `-x`
    Neg,
    /// `|x|`
    Abs,
    /// `√x`
    Sqrt,
    /// `1/√x`
    Rsqrt,
    /// `eˣ`
    Exp,
    /// `ln x`
    Log,
    Sin,
    Cos,
    Tan,
    Floor,
    Ceil,
    /// Round half to even (IEEE `roundTiesToEven`, ONNX `Round`).
    Round,
    /// `max(0, x)`
    Relu,
    /// `x > 0 ? x : slope·x`
    LeakyRelu {
        #[serde(with = "crate::spec::exact_f64")]
        slope: f64,
    },
    /// `1 / (1 + e^{-x})`
    Sigmoid,
    /// `tanh x`
    Tanh,
    /// Exact GELU: `x·Φ(x) = ½x(1 + erf(x/√2))`.
    GeluErf,
    /// Tanh-approximate GELU: `½x(1 + tanh(√(2/π)(x + 0.044715x³)))`.
    GeluTanh,
    /// SiLU / swish: `x·sigmoid(x)`.
    Silu,
}

/// An activation function that has a backward op (`activation_backward`): the
/// unary functions [`UnaryFn::activation`] maps, under the same JSON names.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Activation {
    Relu,
    LeakyRelu {
        #[serde(with = "crate::spec::exact_f64")]
        slope: f64,
    },
    Sigmoid,
    Tanh,
    GeluErf,
    GeluTanh,
    Silu,
}

impl Activation {
    /// The forward function.
    pub fn forward(&self) -> UnaryFn {
        match *self {
            Activation::Relu => UnaryFn::Relu,
            Activation::LeakyRelu { slope } => UnaryFn::LeakyRelu { slope },
            Activation::Sigmoid => UnaryFn::Sigmoid,
            Activation::Tanh => UnaryFn::Tanh,
            Activation::GeluErf => UnaryFn::GeluErf,
            Activation::GeluTanh => UnaryFn::GeluTanh,
            Activation::Silu => UnaryFn::Silu,
        }
    }

    /// The largest `|f'(x)|` over all `x`: how much an error in `x` can grow through
    /// the activation (GELU's `Φ(x) + xφ(x)` peaks at 1.1289 near `x = 2.4`, SiLU's
    /// at 1.0998 near `x = 2.4`; rounded up).
    pub fn max_slope(&self) -> f64 {
        match *self {
            Activation::Relu | Activation::Tanh => 1.0,
            Activation::LeakyRelu { slope } => slope.abs().max(1.0),
            Activation::Sigmoid => 0.25,
            Activation::GeluErf | Activation::GeluTanh => 1.13,
            Activation::Silu => 1.1,
        }
    }

    /// snake_case name (`"gelu_erf"`), as the forward function's.
    pub fn name(&self) -> &'static str {
        self.forward().name()
    }

    /// Which forward tensor the backward reads besides `dy`.
    pub fn saves(&self) -> Saved {
        match self {
            Activation::Relu
            | Activation::LeakyRelu { .. }
            | Activation::GeluErf
            | Activation::GeluTanh
            | Activation::Silu => Saved::Input,
            Activation::Sigmoid | Activation::Tanh => Saved::Output,
        }
    }
}

/// Which tensor an activation's backward reads besides `dy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Saved {
    /// The forward input `x` (ReLU, leaky ReLU, GELU, SiLU).
    Input,
    /// The forward output `y` (sigmoid, tanh), as rumus passes it.
    Output,
}

impl UnaryFn {
    /// snake_case name (`"gelu_erf"`).
    pub fn name(&self) -> &'static str {
        match self {
            UnaryFn::Neg => "neg",
            UnaryFn::Abs => "abs",
            UnaryFn::Sqrt => "sqrt",
            UnaryFn::Rsqrt => "rsqrt",
            UnaryFn::Exp => "exp",
            UnaryFn::Log => "log",
            UnaryFn::Sin => "sin",
            UnaryFn::Cos => "cos",
            UnaryFn::Tan => "tan",
            UnaryFn::Floor => "floor",
            UnaryFn::Ceil => "ceil",
            UnaryFn::Round => "round",
            UnaryFn::Relu => "relu",
            UnaryFn::LeakyRelu { .. } => "leaky_relu",
            UnaryFn::Sigmoid => "sigmoid",
            UnaryFn::Tanh => "tanh",
            UnaryFn::GeluErf => "gelu_erf",
            UnaryFn::GeluTanh => "gelu_tanh",
            UnaryFn::Silu => "silu",
        }
    }

    /// The activation this function is, if it has a backward op; `None` for plain
    /// math functions.
    pub fn activation(&self) -> Option<Activation> {
        match *self {
            UnaryFn::Relu => Some(Activation::Relu),
            UnaryFn::LeakyRelu { slope } => Some(Activation::LeakyRelu { slope }),
            UnaryFn::Sigmoid => Some(Activation::Sigmoid),
            UnaryFn::Tanh => Some(Activation::Tanh),
            UnaryFn::GeluErf => Some(Activation::GeluErf),
            UnaryFn::GeluTanh => Some(Activation::GeluTanh),
            UnaryFn::Silu => Some(Activation::Silu),
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
            | UnaryFn::Round => None,
        }
    }

    /// For activations with a backward op: which forward tensor the backward reads.
    /// `None` for plain math functions (no `activation_backward`).
    pub fn backward_saves(&self) -> Option<Saved> {
        self.activation().map(|a| a.saves())
    }

    /// The f64 definition `f(x)`.
    pub fn eval(&self, x: f64) -> f64 {
        reference::unary(*self, x)
    }

    /// What the catalogue says of each function besides its formula: one row each,
    /// so a new function states all of it in one place.
    pub(super) fn traits(&self) -> UnaryTraits {
        let t = |ints, ulps, domain| UnaryTraits { ints, ulps, domain };
        let (wide, positive) = ((-3.0, 3.0), (0.05, 4.0));
        match self {
            UnaryFn::Neg | UnaryFn::Abs | UnaryFn::Relu => t(true, 0.0, wide),
            UnaryFn::Floor | UnaryFn::Ceil | UnaryFn::Round => t(false, 0.0, wide),
            UnaryFn::Sqrt => t(false, 1.0, positive),
            UnaryFn::LeakyRelu { .. } => t(false, 1.0, wide),
            UnaryFn::Rsqrt | UnaryFn::Log => t(false, 4.0, positive),
            UnaryFn::Exp => t(false, 4.0, wide),
            UnaryFn::Sin | UnaryFn::Cos | UnaryFn::Tanh | UnaryFn::Sigmoid => t(false, 8.0, wide),
            UnaryFn::Tan => t(false, 16.0, (-1.2, 1.2)),
            UnaryFn::GeluErf | UnaryFn::GeluTanh | UnaryFn::Silu => t(false, 16.0, wide),
        }
    }

    pub(super) fn allowed_dtypes(&self) -> &'static [ScalarType] {
        if self.traits().ints {
            SIGNED
        } else {
            FLOATS
        }
    }

    /// The function's per-call parameter (leaky ReLU's slope), for writing.
    fn param_mut(&mut self) -> Option<&mut f64> {
        match self {
            UnaryFn::LeakyRelu { slope } => Some(slope),
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
            | UnaryFn::Sigmoid
            | UnaryFn::Tanh
            | UnaryFn::GeluErf
            | UnaryFn::GeluTanh
            | UnaryFn::Silu => None,
        }
    }

    /// The per-call parameter as a uniform named `slope`, in `dtype`'s compute type.
    pub(super) fn uniforms(mut self, dtype: ScalarType) -> Vec<Uniform> {
        self.param_mut()
            .map(|v| vec![Uniform::new("slope", compute_type(dtype), *v)])
            .unwrap_or_default()
    }

    /// The function with its parameter as the kernels of a `dtype` op receive it
    /// (rounded to the compute type, as [`UnaryFn::uniforms`]): what the reference
    /// computes with.
    pub(crate) fn as_received(mut self, dtype: ScalarType) -> UnaryFn {
        if let Some(v) = self.param_mut() {
            *v = attribute(dtype, *v);
        }
        self
    }

    /// The function with its parameter at the canonical 0.
    pub(super) fn structural(mut self) -> UnaryFn {
        if let Some(v) = self.param_mut() {
            *v = 0.0;
        }
        self
    }

    pub(crate) fn check_params(&self) -> Result<(), SpecError> {
        if let UnaryFn::LeakyRelu { slope } = self {
            check_finite("slope", *slope)?;
        }
        Ok(())
    }
}

/// `y = f(x)` elementwise. Inputs: `x`. Outputs: `y` (same shape and dtype).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UnarySpec {
    pub func: UnaryFn,
    pub dtype: ScalarType,
    pub shape: Vec<usize>,
}

impl Op for UnarySpec {
    fn validate(&self) -> Result<(), SpecError> {
        check_dtype(
            &format!("unary {}", self.func.name()),
            self.dtype,
            self.func.allowed_dtypes(),
        )?;
        self.func.check_params()?;
        check_shape("x", &self.shape)
    }
    fn inputs(&self) -> Vec<TensorSig> {
        vec![TensorSig::new("x", self.dtype, self.shape.clone())]
    }
    fn outputs(&self) -> Vec<TensorSig> {
        vec![TensorSig::new("y", self.dtype, self.shape.clone())]
    }
    fn detail(&self) -> Option<String> {
        Some(format!("unary_{}", self.func.name()))
    }
    fn uniforms(&self) -> Vec<Uniform> {
        self.func.uniforms(self.dtype)
    }
    fn structural(&self) -> Self {
        UnarySpec {
            func: self.func.structural(),
            ..self.clone()
        }
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        lower::unary(self, caps)
    }
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        Some(split_map(
            "unary",
            caps,
            &self.shape,
            &[&self.shape],
            1,
            |_, out| {
                OpSpec::Unary(UnarySpec {
                    shape: out.to_vec(),
                    ..self.clone()
                })
            },
        ))
    }
    fn cases() -> Vec<Self> {
        cases::unary()
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        reference::unary_op(self, i)
    }
    fn condition(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        condition::unary(self, i)
    }
    fn tolerance(&self) -> Tolerance {
        let u = self.func.traits().ulps;
        match self.func {
            _ if u == 0.0 => Tolerance::EXACT,
            // Sums that cancel by definition: in ULPs of their terms (module `condition`).
            UnaryFn::GeluErf | UnaryFn::GeluTanh => Tolerance::conditioned(u),
            // ULPs of the result within the range their reduction is exact for
            // (module `condition`), unspecified beyond.
            UnaryFn::Sin | UnaryFn::Cos | UnaryFn::Tan => Tolerance::conditioned(u),
            _ => Tolerance::result(u),
        }
    }
    fn domain(&self, input: &TensorSig) -> Domain {
        if !input.dtype.is_float() {
            return Domain::of_dtype(input.dtype);
        }
        let (lo, hi) = self.func.traits().domain;
        Domain::Real(lo, hi)
    }
    fn example() -> Self {
        UnarySpec {
            func: UnaryFn::GeluErf,
            dtype: ScalarType::F32,
            shape: vec![4, 8],
        }
    }
}

/// `dx = f'(·) ⊙ dy` for an activation `f`. Inputs: the saved tensor (`x` or `y`, per
/// [`Activation::saves`]), `dy`. Outputs: `dx`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ActivationBackwardSpec {
    pub func: Activation,
    pub dtype: ScalarType,
    pub shape: Vec<usize>,
}

impl ActivationBackwardSpec {
    /// The activation as the kernel receives it: its slope rounded to the dtype's
    /// compute type (references and conditions use this, not the JSON value).
    pub(super) fn received_func(&self) -> Activation {
        self.func
            .forward()
            .as_received(self.dtype)
            .activation()
            .unwrap_or(self.func)
    }
}

impl Op for ActivationBackwardSpec {
    fn validate(&self) -> Result<(), SpecError> {
        self.func.forward().check_params()?;
        check_dtype("activation_backward", self.dtype, FLOATS)?;
        check_shape("dy", &self.shape)
    }
    fn inputs(&self) -> Vec<TensorSig> {
        let saved = match self.func.saves() {
            Saved::Output => "y",
            Saved::Input => "x",
        };
        vec![
            TensorSig::new(saved, self.dtype, self.shape.clone()),
            TensorSig::new("dy", self.dtype, self.shape.clone()),
        ]
    }
    fn outputs(&self) -> Vec<TensorSig> {
        vec![TensorSig::new("dx", self.dtype, self.shape.clone())]
    }
    fn detail(&self) -> Option<String> {
        Some(format!("activation_backward_{}", self.func.name()))
    }
    fn uniforms(&self) -> Vec<Uniform> {
        self.func.forward().uniforms(self.dtype)
    }
    fn structural(&self) -> Self {
        let func = match self.func {
            Activation::LeakyRelu { .. } => Activation::LeakyRelu { slope: 0.0 },
            other @ (Activation::Relu
            | Activation::Sigmoid
            | Activation::Tanh
            | Activation::GeluErf
            | Activation::GeluTanh
            | Activation::Silu) => other,
        };
        ActivationBackwardSpec {
            func,
            ..self.clone()
        }
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        lower::activation_backward(self, caps)
    }
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        let shapes: [&[usize]; 2] = [&self.shape, &self.shape];
        Some(split_map(
            "activation_backward",
            caps,
            &self.shape,
            &shapes,
            1,
            |_, out| {
                OpSpec::ActivationBackward(ActivationBackwardSpec {
                    shape: out.to_vec(),
                    ..self.clone()
                })
            },
        ))
    }
    fn cases() -> Vec<Self> {
        cases::activation_backward()
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        reference::backward_op(self, i)
    }
    fn condition(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        condition::activation_backward(self, i)
    }
    fn tolerance(&self) -> Tolerance {
        // The derivatives cancel at their interior zeros: ULPs of their terms.
        Tolerance::conditioned(8.0)
    }
    fn example() -> Self {
        ActivationBackwardSpec {
            func: Activation::LeakyRelu { slope: 0.01 },
            dtype: ScalarType::F32,
            shape: vec![16],
        }
    }
}

/// A binary function `f(a, b)`.
///
/// On integers: `+ - *` wrap at the dtype's width, `/` truncates toward zero, `%`
/// takes the dividend's sign, and division or remainder by zero gives 0. On floats `%`
/// is `fmod` (sign of the dividend). `max`/`min` are IEEE maxNum/minNum (a NaN operand
/// is ignored unless both are NaN). Comparisons give 1 or 0 in the op's dtype, or
/// `true`/`false` with a bool `out_dtype` (NaN compares false except for `ne`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BinaryFn {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    /// `aᵇ` (floats only).
    Pow,
    Max,
    Min,
    /// `max(a, b)`, NaN if either is NaN (NumPy's `maximum`, torch's `maximum`,
    /// ONNX's `Max`); `max` ignores a NaN (IEEE maxNum, torch's `fmax`).
    MaxNan,
    /// `min(a, b)`, NaN if either is NaN (NumPy's `minimum`, ONNX's `Min`).
    MinNan,
    /// `a mod b` with the divisor's sign (Python's `%`, NumPy's `mod`, torch's
    /// `remainder`, ONNX's `Mod` with `fmod = 0`): `r = a % b`, plus `b` when `r ≠ 0`
    /// and its sign differs from `b`'s; 0 for an integer divisor 0. `mod` is the
    /// truncated remainder (C's `%`, `fmod`), with the dividend's sign.
    FloorMod,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// `silu(a) · b` (SwiGLU gate; floats only), `silu(a)` a value of the compute type
    /// (as PyTorch's `silu(a) * b`: where it underflows to ±0, `±0·∞ = NaN`).
    SiluMul,
}

impl BinaryFn {
    pub fn name(&self) -> &'static str {
        match self {
            BinaryFn::Add => "add",
            BinaryFn::Sub => "sub",
            BinaryFn::Mul => "mul",
            BinaryFn::Div => "div",
            BinaryFn::Mod => "mod",
            BinaryFn::Pow => "pow",
            BinaryFn::Max => "max",
            BinaryFn::Min => "min",
            BinaryFn::MaxNan => "max_nan",
            BinaryFn::MinNan => "min_nan",
            BinaryFn::FloorMod => "floor_mod",
            BinaryFn::Eq => "eq",
            BinaryFn::Ne => "ne",
            BinaryFn::Lt => "lt",
            BinaryFn::Le => "le",
            BinaryFn::Gt => "gt",
            BinaryFn::Ge => "ge",
            BinaryFn::SiluMul => "silu_mul",
        }
    }

    /// Whether the result is a 1/0 comparison.
    pub fn is_comparison(&self) -> bool {
        matches!(
            self,
            BinaryFn::Eq | BinaryFn::Ne | BinaryFn::Lt | BinaryFn::Le | BinaryFn::Gt | BinaryFn::Ge
        )
    }

    pub(super) fn allowed_dtypes(&self) -> &'static [ScalarType] {
        match self {
            BinaryFn::Pow | BinaryFn::SiluMul => FLOATS,
            BinaryFn::Add
            | BinaryFn::Sub
            | BinaryFn::Mul
            | BinaryFn::Div
            | BinaryFn::Mod
            | BinaryFn::FloorMod
            | BinaryFn::Max
            | BinaryFn::Min
            | BinaryFn::MaxNan
            | BinaryFn::MinNan
            | BinaryFn::Eq
            | BinaryFn::Ne
            | BinaryFn::Lt
            | BinaryFn::Le
            | BinaryFn::Gt
            | BinaryFn::Ge => NUMERIC,
        }
    }
}

/// `out = f(a, b)` with NumPy broadcasting of `lhs` and `rhs`. Inputs: `a` (`lhs`),
/// `b` (`rhs`). Outputs: `out` (broadcast shape, `out_dtype`: the dtype, or bool for a
/// comparison that asks for it, as ONNX's `Equal`/`Less`/`Greater` and PyTorch's
/// comparisons give).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BinarySpec {
    pub func: BinaryFn,
    pub dtype: ScalarType,
    pub lhs: Vec<usize>,
    pub rhs: Vec<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out_dtype: Option<ScalarType>,
}

impl BinarySpec {
    /// The broadcast output shape (empty if not broadcastable).
    pub fn out_shape(&self) -> Vec<usize> {
        broadcast_shapes(&self.lhs, &self.rhs).unwrap_or_default()
    }

    /// The output's dtype.
    pub fn result_dtype(&self) -> ScalarType {
        self.out_dtype.unwrap_or(self.dtype)
    }
}

/// Checks a binary function's output dtype: its input dtype, or bool for comparisons.
fn check_out_dtype(
    func: BinaryFn,
    dtype: ScalarType,
    out: Option<ScalarType>,
) -> Result<(), SpecError> {
    match out {
        None => Ok(()),
        Some(t) if t == dtype => Ok(()),
        Some(ScalarType::Bool) if func.is_comparison() => Ok(()),
        Some(t) => Err(SpecError::bad_attr(
            "out_dtype",
            t,
            &format!(
                "must be the input dtype {dtype}{}",
                if func.is_comparison() { " or bool" } else { "" }
            ),
        )),
    }
}

impl Op for BinarySpec {
    fn validate(&self) -> Result<(), SpecError> {
        check_dtype(
            &format!("binary {}", self.func.name()),
            self.dtype,
            self.func.allowed_dtypes(),
        )?;
        check_out_dtype(self.func, self.dtype, self.out_dtype)?;
        check_shape("a", &self.lhs)?;
        check_shape("b", &self.rhs)?;
        let out = broadcast_shapes(&self.lhs, &self.rhs)?;
        check_shape("out", &out)
    }
    fn inputs(&self) -> Vec<TensorSig> {
        vec![
            TensorSig::new("a", self.dtype, self.lhs.clone()),
            TensorSig::new("b", self.dtype, self.rhs.clone()),
        ]
    }
    fn outputs(&self) -> Vec<TensorSig> {
        vec![TensorSig::new("out", self.result_dtype(), self.out_shape())]
    }
    fn detail(&self) -> Option<String> {
        Some(format!("binary_{}", self.func.name()))
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        lower::binary(self, caps)
    }
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        let shapes: [&[usize]; 2] = [&self.lhs, &self.rhs];
        Some(split_map(
            "binary",
            caps,
            &self.out_shape(),
            &shapes,
            1,
            |ins, _| {
                OpSpec::Binary(BinarySpec {
                    lhs: ins[0].clone(),
                    rhs: ins[1].clone(),
                    ..self.clone()
                })
            },
        ))
    }
    fn cases() -> Vec<Self> {
        cases::binary()
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        reference::binary_op(self, i)
    }
    fn tolerance(&self) -> Tolerance {
        binary_tolerance(self.func)
    }
    fn domain(&self, input: &TensorSig) -> Domain {
        binary_domain(self.func, input)
    }
    fn example() -> Self {
        BinarySpec {
            func: BinaryFn::Add,
            dtype: ScalarType::F32,
            lhs: vec![2, 1],
            rhs: vec![3],
            out_dtype: None,
        }
    }
}

/// `y = f(x, scalar)`, or `f(scalar, x)` when `reversed`. Inputs: `x`. Outputs: `y`
/// (`out_dtype`: the dtype, or bool for a comparison, as for [`BinarySpec`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScalarSpec {
    pub func: BinaryFn,
    pub dtype: ScalarType,
    pub shape: Vec<usize>,
    #[serde(with = "crate::spec::exact_f64")]
    pub scalar: f64,
    #[serde(default)]
    pub reversed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out_dtype: Option<ScalarType>,
}

impl ScalarSpec {
    /// The output's dtype.
    pub fn result_dtype(&self) -> ScalarType {
        self.out_dtype.unwrap_or(self.dtype)
    }
}

impl Op for ScalarSpec {
    fn validate(&self) -> Result<(), SpecError> {
        check_dtype(
            &format!("scalar {}", self.func.name()),
            self.dtype,
            self.func.allowed_dtypes(),
        )?;
        check_out_dtype(self.func, self.dtype, self.out_dtype)?;
        if self.scalar.is_nan() {
            return Err(SpecError::bad_attr(
                "scalar",
                self.scalar,
                "must not be NaN",
            ));
        }
        if self.dtype.is_int() && !integral_in_range(self.scalar, self.dtype) {
            return Err(SpecError::bad_attr(
                "scalar",
                self.scalar,
                &format!("must be an integer representable in {}", self.dtype),
            ));
        }
        check_shape("x", &self.shape)
    }
    fn inputs(&self) -> Vec<TensorSig> {
        vec![TensorSig::new("x", self.dtype, self.shape.clone())]
    }
    fn outputs(&self) -> Vec<TensorSig> {
        vec![TensorSig::new("y", self.result_dtype(), self.shape.clone())]
    }
    fn detail(&self) -> Option<String> {
        Some(format!("scalar_{}", self.func.name()))
    }
    fn uniforms(&self) -> Vec<Uniform> {
        vec![Uniform::new(
            "scalar",
            compute_type(self.dtype),
            self.scalar,
        )]
    }
    fn structural(&self) -> Self {
        ScalarSpec {
            scalar: 0.0,
            ..self.clone()
        }
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        lower::scalar(self, caps)
    }
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        Some(split_map(
            "scalar",
            caps,
            &self.shape,
            &[&self.shape],
            1,
            |_, out| {
                OpSpec::Scalar(ScalarSpec {
                    shape: out.to_vec(),
                    ..self.clone()
                })
            },
        ))
    }
    fn cases() -> Vec<Self> {
        cases::scalar()
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        reference::scalar_op(self, i)
    }
    fn tolerance(&self) -> Tolerance {
        binary_tolerance(self.func)
    }
    fn domain(&self, input: &TensorSig) -> Domain {
        binary_domain(self.func, input)
    }
    fn example() -> Self {
        ScalarSpec {
            func: BinaryFn::Mul,
            dtype: ScalarType::F32,
            shape: vec![10],
            scalar: 0.5,
            reversed: false,
            out_dtype: None,
        }
    }
}

pub(crate) fn integral_in_range(v: f64, dtype: ScalarType) -> bool {
    if v.fract() != 0.0 || !v.is_finite() {
        return false;
    }
    match dtype {
        ScalarType::I32 => (i32::MIN as f64..=i32::MAX as f64).contains(&v),
        ScalarType::U32 => (0.0..=u32::MAX as f64).contains(&v),
        ScalarType::I64 => (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&v),
        ScalarType::Bool => v == 0.0 || v == 1.0,
        ScalarType::U8 => (0.0..=u8::MAX as f64).contains(&v),
        ScalarType::I8 => (i8::MIN as f64..=i8::MAX as f64).contains(&v),
        ScalarType::U16 => (0.0..=u16::MAX as f64).contains(&v),
        ScalarType::I16 => (i16::MIN as f64..=i16::MAX as f64).contains(&v),
        ScalarType::F16 | ScalarType::Bf16 | ScalarType::F32 | ScalarType::F64 => true,
    }
}

/// `out = cond != 0 ? a : b` with NumPy broadcasting of all three. Inputs: `cond`
/// (`cond_dtype`; NaN counts as true), `a`, `b`. Outputs: `out`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WhereSpec {
    pub dtype: ScalarType,
    pub cond_dtype: ScalarType,
    pub cond: Vec<usize>,
    pub a: Vec<usize>,
    pub b: Vec<usize>,
}

impl WhereSpec {
    pub fn out_shape(&self) -> Vec<usize> {
        broadcast_shapes(&self.cond, &self.a)
            .and_then(|s| broadcast_shapes(&s, &self.b))
            .unwrap_or_default()
    }
}

impl Op for WhereSpec {
    fn validate(&self) -> Result<(), SpecError> {
        check_shape("cond", &self.cond)?;
        check_shape("a", &self.a)?;
        check_shape("b", &self.b)?;
        let s = broadcast_shapes(&self.cond, &self.a)?;
        let out = broadcast_shapes(&s, &self.b)?;
        check_shape("out", &out)
    }
    fn inputs(&self) -> Vec<TensorSig> {
        vec![
            TensorSig::new("cond", self.cond_dtype, self.cond.clone()),
            TensorSig::new("a", self.dtype, self.a.clone()),
            TensorSig::new("b", self.dtype, self.b.clone()),
        ]
    }
    fn outputs(&self) -> Vec<TensorSig> {
        vec![TensorSig::new("out", self.dtype, self.out_shape())]
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        lower::where_(self, caps)
    }
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        let shapes: [&[usize]; 3] = [&self.cond, &self.a, &self.b];
        Some(split_map(
            "where",
            caps,
            &self.out_shape(),
            &shapes,
            1,
            |ins, _| {
                OpSpec::Where(WhereSpec {
                    cond: ins[0].clone(),
                    a: ins[1].clone(),
                    b: ins[2].clone(),
                    ..self.clone()
                })
            },
        ))
    }
    fn cases() -> Vec<Self> {
        cases::where_()
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        reference::where_op(self, i)
    }
    fn tolerance(&self) -> Tolerance {
        Tolerance::EXACT
    }
    fn domain(&self, input: &TensorSig) -> Domain {
        if input.dtype.is_float() && input.name == "cond" {
            Domain::Flag
        } else {
            Domain::of_dtype(input.dtype)
        }
    }
    fn example() -> Self {
        WhereSpec {
            dtype: ScalarType::F32,
            cond_dtype: ScalarType::U32,
            cond: vec![2, 1],
            a: vec![2, 3],
            b: vec![3],
        }
    }
}

/// Dtype conversion `y = cast(x)`: int → int wraps (two's complement truncation, as C,
/// Rust `as`, NumPy `astype` and ONNX Cast); float → int truncates toward zero and
/// saturates (NaN → 0); → float rounds once to nearest even; → bool is `x != 0` (NaN →
/// true). Inputs: `x` (`from`). Outputs: `y` (`to`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CastSpec {
    pub from: ScalarType,
    pub to: ScalarType,
    pub shape: Vec<usize>,
}

impl Op for CastSpec {
    fn validate(&self) -> Result<(), SpecError> {
        check_shape("x", &self.shape)
    }
    fn inputs(&self) -> Vec<TensorSig> {
        vec![TensorSig::new("x", self.from, self.shape.clone())]
    }
    fn outputs(&self) -> Vec<TensorSig> {
        vec![TensorSig::new("y", self.to, self.shape.clone())]
    }
    fn detail(&self) -> Option<String> {
        Some(format!("cast_{}_{}", self.from, self.to))
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        lower::cast(self, caps)
    }
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        Some(split_map(
            "cast",
            caps,
            &self.shape,
            &[&self.shape],
            1,
            |_, out| {
                OpSpec::Cast(CastSpec {
                    shape: out.to_vec(),
                    ..self.clone()
                })
            },
        ))
    }
    fn cases() -> Vec<Self> {
        cases::cast()
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        reference::cast_op(self, i)
    }
    fn tolerance(&self) -> Tolerance {
        Tolerance::EXACT
    }
    fn domain(&self, input: &TensorSig) -> Domain {
        if input.dtype.is_float() {
            Domain::Real(-100.0, 100.0)
        } else {
            Domain::of_dtype(input.dtype)
        }
    }
    fn example() -> Self {
        CastSpec {
            from: ScalarType::F32,
            to: ScalarType::F16,
            shape: vec![8],
        }
    }
}

/// What [`FillSpec`] writes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FillValue {
    /// Every element `value` (converted to the dtype as by `cast`).
    Constant {
        #[serde(with = "crate::spec::exact_f64")]
        value: f64,
    },
    /// `low + (high - low)·u(i)`, `u` uniform in `[0, 1)` from [`crate::rng`].
    Uniform {
        #[serde(with = "crate::spec::exact_f64")]
        low: f64,
        #[serde(with = "crate::spec::exact_f64")]
        high: f64,
        seed: u64,
        step: u64,
    },
    /// `mean + std·z(i)`, `z` standard normal (Box–Muller) from [`crate::rng`].
    Normal {
        #[serde(with = "crate::spec::exact_f64")]
        mean: f64,
        #[serde(with = "crate::spec::exact_f64")]
        std: f64,
        seed: u64,
        step: u64,
    },
}

/// Fill a new tensor. Inputs: none. Outputs: `out`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FillSpec {
    pub dtype: ScalarType,
    pub shape: Vec<usize>,
    pub value: FillValue,
    /// The random-stream index of `out[0]` of a random fill (element `i` draws the
    /// bits of `offset + i`, wrapping at 2^32): a fill of part of a larger tensor
    /// draws that tensor's values. Default 0.
    #[serde(default, skip_serializing_if = "crate::spec::is_zero")]
    pub offset: u64,
}

impl FillSpec {
    /// The random stream scheme of random fills (always [`RngScheme::Counter`]).
    pub const RNG: RngScheme = RngScheme::Counter;
}

impl Op for FillSpec {
    fn validate(&self) -> Result<(), SpecError> {
        check_shape("out", &self.shape)?;
        match &self.value {
            FillValue::Constant { value } => {
                if self.dtype.is_float() {
                    if value.is_nan() {
                        return Err(SpecError::bad_attr("value", value, "must not be NaN"));
                    }
                } else if !integral_in_range(*value, self.dtype) {
                    return Err(SpecError::bad_attr(
                        "value",
                        value,
                        &format!("must be representable in {}", self.dtype),
                    ));
                }
            }
            FillValue::Uniform { low, high, .. } => {
                check_dtype("fill uniform", self.dtype, FLOATS)?;
                check_finite("low", *low)?;
                check_finite("high", *high)?;
                if high < low {
                    return Err(SpecError::bad_attr("high", high, "must be >= low"));
                }
            }
            FillValue::Normal { mean, std, .. } => {
                check_dtype("fill normal", self.dtype, FLOATS)?;
                check_finite("mean", *mean)?;
                check_non_negative("std", *std)?;
            }
        }
        Ok(())
    }
    fn inputs(&self) -> Vec<TensorSig> {
        Vec::new()
    }
    fn outputs(&self) -> Vec<TensorSig> {
        vec![TensorSig::new("out", self.dtype, self.shape.clone())]
    }
    fn detail(&self) -> Option<String> {
        Some(
            match self.value {
                FillValue::Constant { .. } => "fill_constant",
                FillValue::Uniform { .. } => "fill_uniform",
                FillValue::Normal { .. } => "fill_normal",
            }
            .to_string(),
        )
    }
    fn uniforms(&self) -> Vec<Uniform> {
        let ty = compute_type(self.dtype);
        let stream = |seed, step| Uniform::u32("stream", rng::stream(Self::RNG, seed, step));
        match self.value {
            // Rounded to the dtype once, here, then carried exactly in the compute
            // type: rounding to f32 first and to f16/bf16 in the kernel would round
            // twice (1.0004882812509313 became 1.0 in f16, not 1.0009765625).
            FillValue::Constant { value } => {
                vec![Uniform::new("value", ty, round_to(self.dtype, value))]
            }
            FillValue::Uniform {
                low,
                high,
                seed,
                step,
            } => vec![
                Uniform::new("low", ty, low),
                Uniform::new("range", ty, high - low),
                stream(seed, step),
            ],
            FillValue::Normal {
                mean,
                std,
                seed,
                step,
            } => vec![
                Uniform::new("mean", ty, mean),
                Uniform::new("std", ty, std),
                stream(seed, step),
            ],
        }
    }
    fn structural(&self) -> Self {
        let value = match self.value {
            FillValue::Constant { .. } => FillValue::Constant { value: 0.0 },
            FillValue::Uniform { .. } => FillValue::Uniform {
                low: 0.0,
                high: 0.0,
                seed: 0,
                step: 0,
            },
            FillValue::Normal { .. } => FillValue::Normal {
                mean: 0.0,
                std: 0.0,
                seed: 0,
                step: 0,
            },
        };
        FillSpec {
            value,
            ..self.clone()
        }
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        lower::fill(self, caps)
    }
    /// Pieces of elements; a random fill's pieces draw the whole tensor's values
    /// (`offset`).
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        let len = crate::shape::numel(&self.shape);
        Some(crate::lower::split::split_rows_at(
            self,
            "fill",
            caps,
            len,
            &[],
            |start, r| {
                OpSpec::Fill(FillSpec {
                    shape: vec![r],
                    offset: self.offset.wrapping_add(start as u64),
                    ..self.clone()
                })
            },
        ))
    }
    fn cases() -> Vec<Self> {
        cases::fill()
    }
    fn reference(&self, _: &[&[f64]]) -> Vec<Vec<f64>> {
        reference::fill_op(self)
    }
    fn tolerance(&self) -> Tolerance {
        match self.value {
            FillValue::Constant { .. } => Tolerance::EXACT,
            // The attributes set the scale: |low|, |high|, or |mean| + 6 std.
            FillValue::Uniform { low, high, .. } => {
                Tolerance::fixed(4.0, low.abs().max(high.abs()))
            }
            FillValue::Normal { mean, std, .. } => {
                Tolerance::fixed(16.0, mean.abs() + 6.0 * std.abs())
            }
        }
    }
    fn example() -> Self {
        FillSpec {
            dtype: ScalarType::F32,
            shape: vec![4, 4],
            value: FillValue::Normal {
                mean: 0.0,
                std: 1.0,
                seed: 1,
                step: 0,
            },
            offset: 0,
        }
    }
}

/// Per-function facts of [`UnaryFn`] (see [`UnaryFn::traits`]).
pub(super) struct UnaryTraits {
    /// Whether the function also takes i32.
    ints: bool,
    /// ULPs allowed (in the compute precision); 0 is exact.
    pub(super) ulps: f64,
    /// Where conformance inputs are drawn from (float dtypes).
    domain: (f64, f64),
}

pub(super) fn binary_tolerance(func: BinaryFn) -> Tolerance {
    match func {
        BinaryFn::Add | BinaryFn::Sub | BinaryFn::Mul => Tolerance::result(1.0),
        // Vulkan allows division 2.5 ULP.
        BinaryFn::Div => Tolerance::result(3.0),
        BinaryFn::Mod | BinaryFn::Max | BinaryFn::Min | BinaryFn::MaxNan | BinaryFn::MinNan => {
            Tolerance::EXACT
        }
        // The exact remainder plus the divisor, rounded once (exact where they cancel).
        BinaryFn::FloorMod => Tolerance::result(1.0),
        BinaryFn::Eq | BinaryFn::Ne | BinaryFn::Lt | BinaryFn::Le | BinaryFn::Gt | BinaryFn::Ge => {
            Tolerance::EXACT
        }
        BinaryFn::Pow => Tolerance::result(16.0),
        BinaryFn::SiluMul => Tolerance::result(16.0),
    }
}

/// Inputs of binary and scalar ops: positive bases for `pow`, divisors away from zero.
fn binary_domain(func: BinaryFn, input: &TensorSig) -> Domain {
    if !input.dtype.is_float() {
        return Domain::of_dtype(input.dtype);
    }
    match (func, input.name.as_str()) {
        (BinaryFn::Pow, "a" | "x") => Domain::Real(0.1, 3.0),
        (BinaryFn::Div | BinaryFn::Mod | BinaryFn::FloorMod, "b") => Domain::AwayFromZero(0.5, 2.0),
        _ => Domain::Real(-2.0, 2.0),
    }
}
