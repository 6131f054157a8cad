//! Lowering: an [`OpSpec`] and a [`TargetCaps`] become a [`Plan`] of IR kernels.
//!
//! Every op is defined once here, one module per op family. Tile sizes, workgroup
//! shapes and vector widths are parameters taken from the caps, never copies of the
//! definition: the CPU (one invocation per workgroup) and a GPU (hundreds) run the
//! same kernels. A dtype the caps lack is a typed error, never emitted.

mod attention;
mod caps;
mod conv;
mod elementwise;
mod gemm;
mod image;
mod interp;
mod math;
mod movement;
mod norm;
mod plan;
mod pointwise;
mod pool;
mod reduce;
mod reduction;
mod rope;
pub mod schedule;
mod softmax;
mod train;

pub use caps::TargetCaps;
pub use interp::{poison, run_plan, PlanRunError};
pub use plan::{Binding, Launch, Plan, TempBuffer};

use crate::error::SpecError;
use crate::spec::OpSpec;
use kernelc_ir::{ScalarType, ValidationError};
use thiserror::Error;

/// Why an op could not be lowered for a target.
#[derive(Debug, Error)]
pub enum LowerError {
    #[error("invalid op spec: {0}")]
    Spec(#[from] SpecError),
    #[error("{op} needs {dtype}, which the target does not support")]
    UnsupportedDtype { op: String, dtype: ScalarType },
    #[error("{what} is {value}, over the limit of {limit}")]
    TooLarge {
        what: String,
        value: u64,
        limit: u64,
    },
    #[error("the target allows {available} bytes of shared memory; {op} needs at least {needed}")]
    SharedMemory {
        op: String,
        needed: u64,
        available: u64,
    },
    /// A state a validated spec cannot reach: a bug in kernelc, reported, not hidden.
    #[error("internal error while lowering: {0}")]
    Internal(&'static str),
    /// A lowering produced an invalid kernel: a bug in kernelc, reported, not hidden.
    #[error("internal error: lowering produced an invalid kernel: {0}")]
    InvalidKernel(#[from] ValidationError),
}

/// Lowers `spec` for a target with `caps`.
pub fn lower(spec: &OpSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    spec.validate()?;
    for sig in spec.inputs().iter().chain(spec.outputs().iter()) {
        if !caps.supports(sig.dtype) {
            return Err(LowerError::UnsupportedDtype {
                op: spec.name(),
                dtype: sig.dtype,
            });
        }
    }
    match spec {
        OpSpec::Unary(s) => elementwise::unary(s, caps),
        OpSpec::ActivationBackward(s) => elementwise::activation_backward(s, caps),
        OpSpec::Binary(s) => elementwise::binary(s, caps),
        OpSpec::Scalar(s) => elementwise::scalar(s, caps),
        OpSpec::Where(s) => elementwise::where_(s, caps),
        OpSpec::Cast(s) => elementwise::cast(s, caps),
        OpSpec::Fill(s) => elementwise::fill(s, caps),
        OpSpec::Attention(s) => attention::attention(s, caps),
        OpSpec::Pool2d(s) => pool::pool2d(s, caps),
        OpSpec::Pool2dBackward(s) => pool::pool2d_backward(s, caps),
        OpSpec::AdaptivePool2d(s) => pool::adaptive_pool2d(s, caps),
        OpSpec::Reduce(s) => reduce::reduce(s, caps),
        OpSpec::Softmax(s) => softmax::softmax(s, caps),
        OpSpec::SoftmaxBackward(s) => softmax::softmax_backward(s, caps),
        OpSpec::CrossEntropy(s) => softmax::cross_entropy(s, caps),
        OpSpec::LayerNorm(s) => norm::layer_norm(s, caps),
        OpSpec::LayerNormBackward(s) => norm::layer_norm_backward(s, caps),
        OpSpec::BatchNorm(s) => norm::batch_norm(s, caps),
        OpSpec::BatchNormBackward(s) => norm::batch_norm_backward(s, caps),
        OpSpec::Permute(s) => movement::permute(s, caps),
        OpSpec::Slice(s) => movement::slice(s, caps),
        OpSpec::Concat(s) => movement::concat(s, caps),
        OpSpec::Gather(s) => movement::gather(s, caps),
        OpSpec::Scatter(s) => movement::scatter(s, caps),
        OpSpec::Rope(s) => rope::rope(s, caps),
        OpSpec::Dropout(s) => train::dropout(s, caps),
        OpSpec::Adam(s) => train::adam(s, caps),
        OpSpec::ImageFilter(s) => image::image_filter(s, caps),
        OpSpec::Gemm(s) => gemm::gemm(s, caps),
        OpSpec::Conv2d(s) => conv::conv2d(s, caps),
        OpSpec::Im2col(s) => conv::im2col(s, caps),
        OpSpec::Col2im(s) => conv::col2im(s, caps),
    }
}
