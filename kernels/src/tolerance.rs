//! The one tolerance table: how far any target's result may be from the f64
//! reference, per op and dtype. `docs/semantics.md` states the same table in prose;
//! the conformance harness enforces exactly this and nothing looser.
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

use crate::spec::*;
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
    const EXACT: Tolerance = Tolerance {
        ulps: 0.0,
        scale: Scale::Exact,
    };
    fn elementwise(ulps: f64) -> Tolerance {
        Tolerance {
            ulps,
            scale: Scale::Inputs,
        }
    }
    fn accumulated(ulps: f64, len: usize) -> Tolerance {
        Tolerance {
            ulps,
            scale: Scale::Accumulated { len: len.max(1) },
        }
    }
    fn normalised(ulps: f64, len: usize) -> Tolerance {
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
        _ => 0.0,
    }
}

/// ULPs allowed for an elementwise function (in the compute precision).
fn unary_ulps(func: UnaryFn) -> f64 {
    match func {
        UnaryFn::Neg
        | UnaryFn::Abs
        | UnaryFn::Floor
        | UnaryFn::Ceil
        | UnaryFn::Round
        | UnaryFn::Relu => 0.0,
        UnaryFn::Sqrt | UnaryFn::LeakyRelu { .. } => 1.0,
        UnaryFn::Rsqrt | UnaryFn::Exp | UnaryFn::Log => 4.0,
        UnaryFn::Sin | UnaryFn::Cos | UnaryFn::Tanh | UnaryFn::Sigmoid => 8.0,
        UnaryFn::Tan | UnaryFn::GeluErf | UnaryFn::GeluTanh | UnaryFn::Silu => 16.0,
    }
}

/// The allowance for `spec`'s outputs.
pub fn tolerance(spec: &OpSpec) -> Tolerance {
    let dtype = spec.outputs().first().map_or(ScalarType::F32, |s| s.dtype);
    if !dtype.is_float() {
        return Tolerance::EXACT;
    }
    match spec {
        OpSpec::Unary(s) => {
            let u = unary_ulps(s.func);
            if u == 0.0 {
                Tolerance::EXACT
            } else {
                Tolerance::elementwise(u)
            }
        }
        OpSpec::ActivationBackward(_) => Tolerance::elementwise(32.0),
        OpSpec::Binary(BinarySpec { func, .. }) | OpSpec::Scalar(ScalarSpec { func, .. }) => {
            binary_tolerance(*func)
        }
        OpSpec::Where(_)
        | OpSpec::Cast(_)
        | OpSpec::Permute(_)
        | OpSpec::Slice(_)
        | OpSpec::Concat(_)
        | OpSpec::Gather(_)
        | OpSpec::Im2col(_) => Tolerance::EXACT,
        OpSpec::Fill(s) => match s.value {
            FillValue::Constant { .. } => Tolerance::EXACT,
            // The attributes set the scale: |low|, |high|, or |mean| + 6 std.
            FillValue::Uniform { low, high, .. } => Tolerance {
                ulps: 4.0,
                scale: Scale::Fixed(low.abs().max(high.abs())),
            },
            FillValue::Normal { mean, std, .. } => Tolerance {
                ulps: 16.0,
                scale: Scale::Fixed(mean.abs() + 6.0 * std.abs()),
            },
        },
        OpSpec::Scatter(s) => match s.combine {
            ScatterCombine::Last => Tolerance::EXACT,
            ScatterCombine::Sum => Tolerance::accumulated(2.0, s.indices.iter().product()),
        },
        OpSpec::Reduce(s) => match s.func {
            ReduceFn::Sum | ReduceFn::Mean => {
                let len = s.axes.iter().filter_map(|&a| s.shape.get(a)).product();
                Tolerance::accumulated(2.0, len)
            }
            _ => Tolerance::EXACT,
        },
        OpSpec::Gemm(s) => Tolerance::accumulated(2.0, s.k + 2),
        OpSpec::Softmax(SoftmaxSpec { shape, axis, .. })
        | OpSpec::SoftmaxBackward(SoftmaxBackwardSpec { shape, axis, .. }) => {
            Tolerance::normalised(8.0, shape.get(*axis).copied().unwrap_or(1))
        }
        OpSpec::LayerNorm(LayerNormSpec { shape, .. }) => {
            Tolerance::normalised(8.0, shape.last().copied().unwrap_or(1))
        }
        // dx = r·(g − mean(g) − x̂·mean(g·x̂)) cancels terms built from products of up
        // to four inputs (dy·w·x̂·x̂, x̂ = (x − μ)·r), which exceed `cols·max|input|` on
        // short rows: 32 ulps rather than the forward's 8 (a wrong formula is off by
        // O(1), not by ulps). dweight and dbias are sums over the `rows` rows, so
        // their rounding grows with `rows` as well.
        OpSpec::LayerNormBackward(s) => {
            let (rows, cols) = s.rows_cols();
            Tolerance::normalised(32.0, if s.param_grads { cols + rows } else { cols })
        }
        OpSpec::BatchNorm(BatchNormSpec { shape, .. })
        | OpSpec::BatchNormBackward(BatchNormBackwardSpec { shape, .. }) => {
            let per_channel = shape
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != 1)
                .map(|(_, d)| *d)
                .product();
            // The backward's dx = w·r/M·(M·dy − Σdy − x̂·Σdy·x̂) cancels products of up
            // to four inputs, as layer norm's does: 32 ulps there, 8 forward.
            let ulps = if matches!(spec, OpSpec::BatchNormBackward(_)) {
                32.0
            } else {
                8.0
            };
            Tolerance::normalised(ulps, per_channel)
        }
        OpSpec::Attention(s) => Tolerance::normalised(16.0, s.seq_k * s.head_dim),
        OpSpec::Rope(_) => Tolerance::elementwise(8.0),
        OpSpec::Conv2d(s) => {
            let [kh, kw] = s.window.kernel;
            let len = match s.pass {
                ConvPass::Forward => s.in_channels * kh * kw + 1,
                ConvPass::BackwardData => s.out_channels * kh * kw,
                ConvPass::BackwardFilter => s.batch * s.height * s.width,
            };
            Tolerance::accumulated(2.0, len)
        }
        OpSpec::Col2im(s) => {
            Tolerance::accumulated(2.0, s.window.kernel[0] * s.window.kernel[1] + 1)
        }
        OpSpec::Pool2d(s) => match s.kind {
            PoolKind::Max => Tolerance::EXACT,
            PoolKind::Avg => Tolerance::accumulated(2.0, s.window.kernel[0] * s.window.kernel[1]),
        },
        OpSpec::Pool2dBackward(s) => {
            let taps = s
                .window
                .map_or(s.height * s.width, |w| w.kernel[0] * w.kernel[1]);
            Tolerance::accumulated(2.0, taps + 1)
        }
        OpSpec::AdaptivePool2d(s) => match s.kind {
            PoolKind::Max if s.pass == PoolPass::Forward => Tolerance::EXACT,
            _ => {
                // Terms per element: a forward window spans at most ⌈in/out⌉ + 1 inputs
                // per axis; a backward pixel lies in at most ⌈out/in⌉ + 1 windows per
                // axis (more than the forward count when upsampling).
                let per_axis = |d: usize| {
                    let (i, o) = (s.in_size[d].max(1), s.out_size[d].max(1));
                    match s.pass {
                        PoolPass::Forward => i.div_ceil(o) + 1,
                        PoolPass::Backward => o.div_ceil(i) + 1,
                    }
                };
                Tolerance::accumulated(2.0, per_axis(0) * per_axis(1))
            }
        },
        OpSpec::CrossEntropy(s) => Tolerance::normalised(8.0, s.classes),
        OpSpec::Dropout(_) => Tolerance::elementwise(1.0),
        OpSpec::Adam(_) => Tolerance::elementwise(16.0),
        OpSpec::ImageFilter(s) => match s.filter {
            ImageFilter::GaussianBlur { radius, .. } => {
                Tolerance::normalised(4.0, (2 * radius + 1) * (2 * radius + 1))
            }
            ImageFilter::Sobel { .. } | ImageFilter::Sharpen => Tolerance::normalised(8.0, 9),
            ImageFilter::Threshold { .. } | ImageFilter::Invert => Tolerance::EXACT,
            ImageFilter::Grayscale
            | ImageFilter::Brightness { .. }
            | ImageFilter::Contrast { .. } => Tolerance::elementwise(4.0),
        },
    }
}

fn binary_tolerance(func: BinaryFn) -> Tolerance {
    match func {
        BinaryFn::Add | BinaryFn::Sub | BinaryFn::Mul | BinaryFn::Div => {
            Tolerance::elementwise(1.0)
        }
        BinaryFn::Mod | BinaryFn::Max | BinaryFn::Min => Tolerance::EXACT,
        BinaryFn::Eq | BinaryFn::Ne | BinaryFn::Lt | BinaryFn::Le | BinaryFn::Gt | BinaryFn::Ge => {
            Tolerance::EXACT
        }
        BinaryFn::Pow => Tolerance::elementwise(16.0),
        BinaryFn::SiluMul => Tolerance::elementwise(16.0),
    }
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
