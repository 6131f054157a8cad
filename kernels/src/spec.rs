//! [`OpSpec`]: one op of the catalogue as plain data (op kind, dtypes, shapes,
//! attributes), its validation, and the signature of its buffers.
//!
//! A spec is what a caller asks for and what lowering turns into kernels: every shape is
//! a constant, axes are already normalised (use [`normalize_axis`](crate::shape::normalize_axis)
//! for `dim: i32` style arguments), and every attribute the math needs is a field.
//!
//! **Buffers.** [`OpSpec::inputs`] and [`OpSpec::outputs`] list the buffers in a fixed
//! order with names, dtypes and shapes; data is row-major (C order) unless the spec says
//! otherwise (GEMM's `layout`). Outputs that update an input in place (Adam's moments,
//! batch-norm running stats, `accumulate`/`beta != 0` forms) are listed by
//! [`OpSpec::aliases`]: the output may share the input's buffer, and every element is
//! read before it is written by the same invocation.
//!
//! **f16 / bf16** are storage types: where a spec accepts them, kernels load, widen to
//! f32, compute and accumulate in f32, and round once on store. The f64 references
//! ignore storage precision (except where rounding is the op's meaning: `cast`, GEMM's
//! `input_rounding`).
//!
//! **Index tensors** (gather/scatter indices, cross-entropy targets, rope positions,
//! max-pool argmax) are `u32` or `i32`, or `f32` holding integral values (rumus keeps
//! ids in f32 buffers; exact below 2^24). An index outside its range reads as zero and
//! is skipped by scatters: no kernel ever reads or writes out of bounds.

use kernelc_ir::ScalarType;
use serde::{Deserialize, Serialize};

use crate::error::SpecError;

mod conv;
mod elementwise;
mod image;
mod linalg;
mod movement;
mod norm;
mod reduce;
mod train;

pub use conv::*;
pub use elementwise::*;
pub use image::*;
pub use linalg::*;
pub use movement::*;
pub use norm::*;
pub use reduce::*;
pub use train::*;

/// One buffer of an op: its name (`"a"`, `"x"`, `"weight"`, `"indices"`, ...), dtype
/// and shape (row-major; a flat `[len]` where the layout is strided).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TensorSig {
    pub name: String,
    pub dtype: ScalarType,
    pub shape: Vec<usize>,
}

impl TensorSig {
    pub fn new(name: &str, dtype: ScalarType, shape: Vec<usize>) -> TensorSig {
        TensorSig {
            name: name.to_string(),
            dtype,
            shape,
        }
    }

    /// Number of elements (1 for rank 0).
    pub fn numel(&self) -> usize {
        crate::shape::numel(&self.shape)
    }
}

/// Output `output` updates input `input` in place (indices into
/// [`OpSpec::inputs`] / [`OpSpec::outputs`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Alias {
    pub input: usize,
    pub output: usize,
}

/// What every family's attribute struct provides.
pub(crate) trait Family {
    fn validate(&self) -> Result<(), SpecError>;
    fn inputs(&self) -> Vec<TensorSig>;
    fn outputs(&self) -> Vec<TensorSig>;
    fn aliases(&self) -> Vec<Alias> {
        Vec::new()
    }
    /// Short name with the sub-function, e.g. `unary_exp`; defaults to the kind.
    fn detail(&self) -> Option<String> {
        None
    }
    fn runtime_attributes(&self) -> &'static [&'static str] {
        &[]
    }
}

macro_rules! catalogue {
    ($( $(#[$doc:meta])* $variant:ident($spec:ty) => $name:literal ),* $(,)?) => {
        /// One op of the catalogue. Serialised with the kind under `"op"`:
        /// `{"op": "gemm", "dtype": "f32", "m": 2, ...}`.
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "op", rename_all = "snake_case")]
        pub enum OpSpec {
            $( $(#[$doc])* $variant($spec), )*
        }

        /// The kind of an [`OpSpec`], without attributes.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum OpKind {
            $( $variant, )*
        }

        impl OpKind {
            /// Every kind, in catalogue order.
            pub const ALL: &'static [OpKind] = &[$(OpKind::$variant),*];
            /// Every kind's name (the `"op"` tag), in catalogue order.
            pub const NAMES: &'static [&'static str] = &[$($name),*];

            /// The kind's name, equal to its `"op"` tag in JSON.
            pub const fn name(self) -> &'static str {
                match self {
                    $( OpKind::$variant => $name, )*
                }
            }
        }

        impl OpSpec {
            /// This spec's kind.
            pub fn kind(&self) -> OpKind {
                match self {
                    $( OpSpec::$variant(_) => OpKind::$variant, )*
                }
            }

            fn family(&self) -> &dyn Family {
                match self {
                    $( OpSpec::$variant(s) => s, )*
                }
            }
        }
    };
}

catalogue! {
    /// Elementwise math and activation functions `y = f(x)`.
    Unary(UnarySpec) => "unary",
    /// Backward of an activation: `dx = f'(·) * dy` from the saved input or output.
    ActivationBackward(ActivationBackwardSpec) => "activation_backward",
    /// Elementwise binary op with NumPy broadcasting.
    Binary(BinarySpec) => "binary",
    /// Elementwise op between a tensor and a scalar attribute.
    Scalar(ScalarSpec) => "scalar",
    /// `out = cond != 0 ? a : b` with three-way broadcasting.
    Where(WhereSpec) => "where",
    /// Dtype conversion.
    Cast(CastSpec) => "cast",
    /// Fill with a constant or with counter-based random numbers.
    Fill(FillSpec) => "fill",
    /// Axis permutation (transpose).
    Permute(PermuteSpec) => "permute",
    /// Strided slice.
    Slice(SliceSpec) => "slice",
    /// Concatenation along an axis.
    Concat(ConcatSpec) => "concat",
    /// Gather along an axis (ONNX Gather; embedding forward).
    Gather(GatherSpec) => "gather",
    /// Scatter along an axis, the adjoint of gather (embedding backward).
    Scatter(ScatterSpec) => "scatter",
    /// Reductions (sum, mean, max, min, argmax, argmin) over axes.
    Reduce(ReduceSpec) => "reduce",
    /// General matrix multiply with transposes, alpha/beta, strided batching, bias.
    Gemm(GemmSpec) => "gemm",
    /// Softmax or log-softmax along an axis.
    Softmax(SoftmaxSpec) => "softmax",
    /// Backward of softmax / log-softmax.
    SoftmaxBackward(SoftmaxBackwardSpec) => "softmax_backward",
    /// Layer norm or RMS norm over the last axis.
    LayerNorm(LayerNormSpec) => "layer_norm",
    /// Backward of layer norm / RMS norm.
    LayerNormBackward(LayerNormBackwardSpec) => "layer_norm_backward",
    /// Batch norm over `[N, C, ...]` (training or inference).
    BatchNorm(BatchNormSpec) => "batch_norm",
    /// Backward of training-mode batch norm.
    BatchNormBackward(BatchNormBackwardSpec) => "batch_norm_backward",
    /// Scaled dot-product attention with optional additive mask and causal masking.
    Attention(AttentionSpec) => "attention",
    /// Rotary position embedding (NeoX half-split).
    Rope(RopeSpec) => "rope",
    /// 2-D convolution (NCHW), forward and both backward passes.
    Conv2d(Conv2dSpec) => "conv2d",
    /// Image to patch columns.
    Im2col(Im2colSpec) => "im2col",
    /// Patch columns back to image (adds overlaps).
    Col2im(Col2imSpec) => "col2im",
    /// Max or average pooling over a window.
    Pool2d(Pool2dSpec) => "pool2d",
    /// Backward of max or average pooling.
    Pool2dBackward(Pool2dBackwardSpec) => "pool2d_backward",
    /// Adaptive pooling to a fixed output size (and its backward for average).
    AdaptivePool2d(AdaptivePool2dSpec) => "adaptive_pool2d",
    /// Cross-entropy loss with gradient / probabilities, via log-sum-exp.
    CrossEntropy(CrossEntropySpec) => "cross_entropy",
    /// Dropout with a counter-based mask.
    Dropout(DropoutSpec) => "dropout",
    /// One Adam / AdamW update.
    Adam(AdamSpec) => "adam",
    /// Image filters on `[H, W, C]` images.
    ImageFilter(ImageFilterSpec) => "image_filter",
}

impl OpSpec {
    /// Checks that the spec is possible: shapes agree, nothing is zero-sized, dtypes are
    /// supported, attributes are in range.
    pub fn validate(&self) -> Result<(), SpecError> {
        self.family().validate()
    }

    /// The input buffers, in order. Meaningful for a valid spec; never panics.
    pub fn inputs(&self) -> Vec<TensorSig> {
        self.family().inputs()
    }

    /// The output buffers, in order. Meaningful for a valid spec; never panics.
    pub fn outputs(&self) -> Vec<TensorSig> {
        self.family().outputs()
    }

    /// Outputs that update an input in place.
    pub fn aliases(&self) -> Vec<Alias> {
        self.family().aliases()
    }

    /// The kind's name (`"gemm"`, `"unary"`, ...), equal to the `"op"` JSON tag.
    pub fn kind_name(&self) -> &'static str {
        self.kind().name()
    }

    /// A short descriptive name for kernels and logs: the kind plus the sub-function
    /// where there is one (`"unary_gelu_erf"`, `"reduce_sum"`, `"image_filter_sobel"`).
    /// Only `[a-z0-9_]`.
    pub fn name(&self) -> String {
        self.family()
            .detail()
            .unwrap_or_else(|| self.kind_name().to_string())
    }

    /// Attributes whose value typically changes from call to call (step counters,
    /// learning rates, scalars). Advisory: a lowering may pass them as uniform
    /// parameters so that the kernel cache is not keyed on them.
    pub fn runtime_attributes(&self) -> &'static [&'static str] {
        self.family().runtime_attributes()
    }

    /// Every kind name, in catalogue order.
    pub fn all_kind_names() -> &'static [&'static str] {
        OpKind::NAMES
    }
}

impl OpKind {
    /// The kind whose name is `name`.
    pub fn from_name(name: &str) -> Option<OpKind> {
        OpKind::ALL.iter().copied().find(|k| k.name() == name)
    }

    /// A small valid spec of this kind (for tests, docs and the CLI).
    pub fn example(self) -> OpSpec {
        use ScalarType::*;
        let w = |k: usize, s: usize, p: usize| Window2d {
            kernel: [k, k],
            stride: [s, s],
            padding: [p, p],
        };
        match self {
            OpKind::Unary => OpSpec::Unary(UnarySpec {
                func: UnaryFn::GeluErf,
                dtype: F32,
                shape: vec![4, 8],
            }),
            OpKind::ActivationBackward => OpSpec::ActivationBackward(ActivationBackwardSpec {
                func: UnaryFn::LeakyRelu { slope: 0.01 },
                dtype: F32,
                shape: vec![16],
            }),
            OpKind::Binary => OpSpec::Binary(BinarySpec {
                func: BinaryFn::Add,
                dtype: F32,
                lhs: vec![2, 1],
                rhs: vec![3],
            }),
            OpKind::Scalar => OpSpec::Scalar(ScalarSpec {
                func: BinaryFn::Mul,
                dtype: F32,
                shape: vec![10],
                scalar: 0.5,
                reversed: false,
            }),
            OpKind::Where => OpSpec::Where(WhereSpec {
                dtype: F32,
                cond_dtype: U32,
                cond: vec![2, 1],
                a: vec![2, 3],
                b: vec![3],
            }),
            OpKind::Cast => OpSpec::Cast(CastSpec {
                from: F32,
                to: F16,
                shape: vec![8],
            }),
            OpKind::Fill => OpSpec::Fill(FillSpec {
                dtype: F32,
                shape: vec![4, 4],
                value: FillValue::Normal {
                    mean: 0.0,
                    std: 1.0,
                    seed: 1,
                    step: 0,
                },
            }),
            OpKind::Permute => OpSpec::Permute(PermuteSpec {
                dtype: F32,
                shape: vec![2, 3, 4],
                perm: vec![2, 0, 1],
            }),
            OpKind::Slice => OpSpec::Slice(SliceSpec {
                dtype: F32,
                shape: vec![4, 6],
                starts: vec![1, 5],
                sizes: vec![2, 3],
                steps: vec![1, -2],
            }),
            OpKind::Concat => OpSpec::Concat(ConcatSpec {
                dtype: F32,
                shapes: vec![vec![2, 3], vec![2, 1]],
                axis: 1,
            }),
            OpKind::Gather => OpSpec::Gather(GatherSpec {
                dtype: F32,
                index_dtype: U32,
                data: vec![10, 4],
                indices: vec![3],
                axis: 0,
            }),
            OpKind::Scatter => OpSpec::Scatter(ScatterSpec {
                dtype: F32,
                index_dtype: U32,
                data: vec![10, 4],
                indices: vec![3],
                axis: 0,
                combine: ScatterCombine::Sum,
                init: ScatterInit::Zero,
            }),
            OpKind::Reduce => OpSpec::Reduce(ReduceSpec {
                func: ReduceFn::Sum,
                dtype: F32,
                shape: vec![2, 3, 4],
                axes: vec![1],
                keepdim: false,
                index_dtype: None,
                accumulate: false,
            }),
            OpKind::Gemm => OpSpec::Gemm(GemmSpec::new(F32, 4, 5, 3)),
            OpKind::Softmax => OpSpec::Softmax(SoftmaxSpec {
                dtype: F32,
                shape: vec![2, 5],
                axis: 1,
                log: false,
            }),
            OpKind::SoftmaxBackward => OpSpec::SoftmaxBackward(SoftmaxBackwardSpec {
                dtype: F32,
                shape: vec![2, 5],
                axis: 1,
                log: false,
            }),
            OpKind::LayerNorm => OpSpec::LayerNorm(LayerNormSpec {
                dtype: F32,
                shape: vec![3, 8],
                eps: 1e-5,
                rms: false,
                weight: true,
                bias: true,
                residual: false,
                save_stats: true,
            }),
            OpKind::LayerNormBackward => OpSpec::LayerNormBackward(LayerNormBackwardSpec {
                dtype: F32,
                shape: vec![3, 8],
                rms: false,
                weight: true,
                bias: true,
                param_grads: true,
            }),
            OpKind::BatchNorm => OpSpec::BatchNorm(BatchNormSpec {
                dtype: F32,
                shape: vec![2, 3, 4, 4],
                eps: 1e-5,
                momentum: 0.1,
                training: true,
            }),
            OpKind::BatchNormBackward => OpSpec::BatchNormBackward(BatchNormBackwardSpec {
                dtype: F32,
                shape: vec![2, 3, 4, 4],
                param_grads: true,
            }),
            OpKind::Attention => OpSpec::Attention(AttentionSpec {
                dtype: F32,
                layout: AttentionLayout::Bhsd,
                batch: 2,
                heads: 2,
                kv_heads: 1,
                seq_q: 3,
                seq_k: 4,
                head_dim: 8,
                scale: 1.0 / 8f64.sqrt(),
                causal: true,
                mask: Some(vec![3, 4]),
            }),
            OpKind::Rope => OpSpec::Rope(RopeSpec {
                dtype: F32,
                index_dtype: U32,
                batch: 1,
                seq: 2,
                heads: 2,
                head_dim: 8,
                max_positions: 16,
            }),
            OpKind::Conv2d => OpSpec::Conv2d(Conv2dSpec {
                dtype: F32,
                pass: ConvPass::Forward,
                batch: 1,
                in_channels: 2,
                out_channels: 3,
                height: 5,
                width: 5,
                window: w(3, 1, 1),
                bias: true,
            }),
            OpKind::Im2col => OpSpec::Im2col(Im2colSpec {
                dtype: F32,
                batch: 1,
                channels: 2,
                height: 4,
                width: 4,
                window: w(3, 1, 1),
            }),
            OpKind::Col2im => OpSpec::Col2im(Col2imSpec {
                dtype: F32,
                batch: 1,
                channels: 2,
                height: 4,
                width: 4,
                window: w(3, 1, 1),
                accumulate: false,
            }),
            OpKind::Pool2d => OpSpec::Pool2d(Pool2dSpec {
                kind: PoolKind::Max,
                dtype: F32,
                batch: 1,
                channels: 2,
                height: 4,
                width: 4,
                window: w(2, 2, 0),
                count_include_pad: false,
                indices: Some(U32),
            }),
            OpKind::Pool2dBackward => OpSpec::Pool2dBackward(Pool2dBackwardSpec {
                kind: PoolKind::Max,
                dtype: F32,
                batch: 1,
                channels: 2,
                height: 4,
                width: 4,
                out_height: 2,
                out_width: 2,
                window: None,
                count_include_pad: false,
                index_dtype: Some(U32),
                accumulate: false,
            }),
            OpKind::AdaptivePool2d => OpSpec::AdaptivePool2d(AdaptivePool2dSpec {
                kind: PoolKind::Avg,
                pass: PoolPass::Forward,
                dtype: F32,
                batch: 1,
                channels: 2,
                in_size: [5, 7],
                out_size: [2, 3],
            }),
            OpKind::CrossEntropy => OpSpec::CrossEntropy(CrossEntropySpec {
                dtype: F32,
                index_dtype: U32,
                batch: 4,
                classes: 10,
                divide_by_batch: true,
                grad: true,
                probs: false,
            }),
            OpKind::Dropout => OpSpec::Dropout(DropoutSpec {
                dtype: F32,
                shape: vec![64],
                p: 0.1,
                seed: 42,
                step: 1,
                mask: true,
                rng: crate::rng::RngScheme::Counter,
            }),
            OpKind::Adam => OpSpec::Adam(AdamSpec {
                dtype: F32,
                len: 16,
                lr: 1e-3,
                beta1: 0.9,
                beta2: 0.999,
                eps: 1e-8,
                weight_decay: 0.0,
                decoupled: false,
                step: 1,
            }),
            OpKind::ImageFilter => OpSpec::ImageFilter(ImageFilterSpec {
                filter: ImageFilter::Sobel { threshold: 0.5 },
                dtype: F32,
                height: 6,
                width: 5,
                channels: 3,
            }),
        }
    }
}

// ---- validation helpers shared by the families ----

/// f16, bf16, f32, f64.
pub(crate) const FLOATS: &[ScalarType] = &[
    ScalarType::F16,
    ScalarType::Bf16,
    ScalarType::F32,
    ScalarType::F64,
];

/// Floats plus i32 and u32.
pub(crate) const NUMERIC: &[ScalarType] = &[
    ScalarType::F16,
    ScalarType::Bf16,
    ScalarType::F32,
    ScalarType::F64,
    ScalarType::I32,
    ScalarType::U32,
];

/// Index tensor dtypes: u32, i32, or f32 holding integral values.
pub(crate) const INDEX: &[ScalarType] = &[ScalarType::U32, ScalarType::I32, ScalarType::F32];

pub(crate) fn check_dtype(
    op: &str,
    dtype: ScalarType,
    allowed: &[ScalarType],
) -> Result<(), SpecError> {
    if allowed.contains(&dtype) {
        Ok(())
    } else {
        Err(SpecError::UnsupportedDtype {
            op: op.to_string(),
            dtype,
            allowed: allowed.to_vec(),
        })
    }
}

pub(crate) fn check_finite(name: &str, v: f64) -> Result<(), SpecError> {
    if v.is_finite() {
        Ok(())
    } else {
        Err(SpecError::bad_attr(name, v, "must be finite"))
    }
}

pub(crate) fn check_non_negative(name: &str, v: f64) -> Result<(), SpecError> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(SpecError::bad_attr(name, v, "must be finite and >= 0"))
    }
}

/// `a * b` for shapes computed from attributes, saturating instead of overflowing.
pub(crate) fn mul(a: usize, b: usize) -> usize {
    a.saturating_mul(b)
}
