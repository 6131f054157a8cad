//! The op catalogue: one folder per op family, each holding its specs (with their
//! [`Op`](crate::op::Op) implementations: validation, buffers, per-call values,
//! tolerance, example), its f64 reference, its lowering and its conformance cases,
//! with the family's formulas in its module doc.
//!
//! The list below is the catalogue: one line per op kind. Everything that iterates
//! over ops (the conformance harness, the emitters' tests, the CLI, the fuzzer) takes
//! them from here, so a new kind is a spec type in a family folder plus one line.

use crate::op::catalogue;

pub mod attention;
pub mod conv;
pub mod elementwise;
pub mod gemm;
pub mod image;
pub mod movement;
pub mod norm;
pub mod pool;
pub mod reduce;
pub mod softmax;
pub mod train;

pub use attention::*;
pub use conv::*;
pub use elementwise::*;
pub use gemm::*;
pub use image::*;
pub use movement::*;
pub use norm::*;
pub use pool::*;
pub use reduce::*;
pub use softmax::*;
pub use train::*;

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
    /// A strided view of a flat buffer made dense, or a dense tensor written into one.
    AsStrided(AsStridedSpec) => "as_strided",
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
    /// Softplus `log(1 + e^{βx})/β` with PyTorch's threshold, and its backward.
    Softplus(SoftplusSpec) => "softplus",
    /// Hardswish `x·relu6(x + 3)/6`, and its backward.
    Hardswish(HardswishSpec) => "hardswish",
    /// Elementwise ops fused into one kernel (a graph compiler's elementwise chains).
    Fused(FusedSpec) => "fused",
    /// A reduction of an elementwise prologue, in one kernel.
    FusedReduce(FusedReduceSpec) => "fused_reduce",
    /// Softmax of an elementwise prologue, in one kernel.
    FusedSoftmax(FusedSoftmaxSpec) => "fused_softmax",
}
