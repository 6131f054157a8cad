//! f64 reference implementations of every op, written from each op's mathematical
//! definition (never from its IR). Plain loops, clear rather than fast.
//!
//! [`reference()`] is the one entry point: it validates the spec, checks the input
//! buffers against [`OpSpec::inputs`] (count and lengths), and returns the outputs in
//! the order of [`OpSpec::outputs`], each flattened row-major (GEMM: in its `layout`).
//! Values are f64 whatever the spec's dtype: the references compute the exact math and
//! ignore storage rounding (except where rounding is the op, as in `cast`); integer
//! dtypes follow their integer rules (wrapping, truncating division). Index inputs are
//! f64 values holding integers (truncated toward zero).
//!
//! One module per family; each module doc states what it computes.

pub mod activation;
pub mod attention;
pub mod conv;
pub mod dropout;
pub mod elementwise;
pub mod embedding;
pub mod gemm;
pub mod image;
pub mod loss;
pub mod movement;
pub mod norm;
pub mod optim;
pub mod reduce;
pub mod softmax;

use crate::error::SpecError;
use crate::spec::OpSpec;

/// Runs the f64 reference of `spec` on `inputs` (in the order of [`OpSpec::inputs`]).
pub fn reference(spec: &OpSpec, inputs: &[&[f64]]) -> Result<Vec<Vec<f64>>, SpecError> {
    spec.validate()?;
    let sigs = spec.inputs();
    if inputs.len() != sigs.len() {
        return Err(SpecError::InputCount {
            op: spec.name(),
            expected: sigs.len(),
            found: inputs.len(),
        });
    }
    for (sig, data) in sigs.iter().zip(inputs) {
        if data.len() != sig.numel() {
            return Err(SpecError::InputLength {
                name: sig.name.clone(),
                expected: sig.numel(),
                found: data.len(),
            });
        }
    }
    let i = inputs;
    Ok(match spec {
        OpSpec::Unary(s) => elementwise::unary_op(s, i),
        OpSpec::ActivationBackward(s) => activation::backward_op(s, i),
        OpSpec::Binary(s) => elementwise::binary_op(s, i),
        OpSpec::Scalar(s) => elementwise::scalar_op(s, i),
        OpSpec::Where(s) => elementwise::where_op(s, i),
        OpSpec::Cast(s) => elementwise::cast_op(s, i),
        OpSpec::Fill(s) => elementwise::fill_op(s),
        OpSpec::Permute(s) => movement::permute(s, i),
        OpSpec::Slice(s) => movement::slice(s, i),
        OpSpec::Concat(s) => movement::concat(s, i),
        OpSpec::Gather(s) => embedding::gather(s, i),
        OpSpec::Scatter(s) => embedding::scatter(s, i),
        OpSpec::Reduce(s) => reduce::reduce(s, i),
        OpSpec::Gemm(s) => gemm::gemm(s, i),
        OpSpec::Softmax(s) => softmax::softmax(s, i),
        OpSpec::SoftmaxBackward(s) => softmax::softmax_backward(s, i),
        OpSpec::LayerNorm(s) => norm::layer_norm(s, i),
        OpSpec::LayerNormBackward(s) => norm::layer_norm_backward(s, i),
        OpSpec::BatchNorm(s) => norm::batch_norm(s, i),
        OpSpec::BatchNormBackward(s) => norm::batch_norm_backward(s, i),
        OpSpec::Attention(s) => attention::attention(s, i),
        OpSpec::Rope(s) => attention::rope(s, i),
        OpSpec::Conv2d(s) => conv::conv2d(s, i),
        OpSpec::Im2col(s) => conv::im2col(s, i),
        OpSpec::Col2im(s) => conv::col2im(s, i),
        OpSpec::Pool2d(s) => conv::pool2d(s, i),
        OpSpec::Pool2dBackward(s) => conv::pool2d_backward(s, i),
        OpSpec::AdaptivePool2d(s) => conv::adaptive_pool2d(s, i),
        OpSpec::CrossEntropy(s) => loss::cross_entropy(s, i),
        OpSpec::Dropout(s) => dropout::dropout(s, i),
        OpSpec::Adam(s) => optim::adam(s, i),
        OpSpec::ImageFilter(s) => image::image_filter(s, i),
    })
}

/// An index value as an integer: truncated toward zero; `None` for NaN/±∞.
pub(crate) fn index_of(v: f64) -> Option<i64> {
    if v.is_finite() {
        Some(v.trunc() as i64)
    } else {
        None
    }
}

/// An index into `0..len`: `None` when out of range. With `from_end`, a negative
/// index counts from the end first (NumPy/ONNX).
pub(crate) fn resolve_index(v: f64, len: usize, from_end: bool) -> Option<usize> {
    let mut i = index_of(v)?;
    if from_end && i < 0 {
        i += len as i64;
    }
    if i >= 0 && (i as u64) < len as u64 {
        Some(i as usize)
    } else {
        None
    }
}
