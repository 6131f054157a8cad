//! Convenience functions over [`Runtime::run`]: build the spec from the tensors' shapes
//! and run it. Each is one line of spec-building; the op semantics are the catalogue's.

use crate::error::{Result, RuntimeError};
use crate::runtime::Runtime;
use crate::tensor::Tensor;
use kernelc_kernels::shape::normalize_axis;
use kernelc_kernels::spec::*;

fn single(mut outputs: Vec<Tensor>) -> Result<Tensor> {
    if outputs.is_empty() {
        return Err(RuntimeError::BadArgument(
            "the op produced no output".into(),
        ));
    }
    Ok(outputs.swap_remove(0))
}

impl Runtime {
    /// `y = f(x)` elementwise.
    pub fn unary(&self, func: UnaryFn, x: &Tensor) -> Result<Tensor> {
        let spec = OpSpec::Unary(UnarySpec {
            func,
            dtype: x.dtype(),
            shape: x.shape().to_vec(),
        });
        single(self.run(&spec, &[x])?)
    }

    /// `f(a, b)` elementwise with NumPy broadcasting.
    pub fn binary(&self, func: BinaryFn, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        let spec = OpSpec::Binary(BinarySpec {
            func,
            dtype: a.dtype(),
            lhs: a.shape().to_vec(),
            rhs: b.shape().to_vec(),
            out_dtype: None,
        });
        single(self.run(&spec, &[a, b])?)
    }

    pub fn add(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.binary(BinaryFn::Add, a, b)
    }

    pub fn mul(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.binary(BinaryFn::Mul, a, b)
    }

    pub fn relu(&self, x: &Tensor) -> Result<Tensor> {
        self.unary(UnaryFn::Relu, x)
    }

    /// Exact (erf) GELU.
    pub fn gelu(&self, x: &Tensor) -> Result<Tensor> {
        self.unary(UnaryFn::GeluErf, x)
    }

    /// Matrix product of `a` `[.., m, k]` and `b` `[.., k, n]` (batch dims must agree).
    pub fn matmul(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        let (ra, rb) = (a.shape().len(), b.shape().len());
        if ra < 2 || rb < 2 || a.shape()[..ra - 2] != b.shape()[..rb - 2] {
            return Err(RuntimeError::BadArgument(format!(
                "matmul needs [.., m, k] x [.., k, n] with equal batch dims, got {:?} x {:?}",
                a.shape(),
                b.shape()
            )));
        }
        let (m, k, n) = (a.shape()[ra - 2], a.shape()[ra - 1], b.shape()[rb - 1]);
        let spec = OpSpec::Gemm(GemmSpec {
            batch: a.shape()[..ra - 2].to_vec(),
            ..GemmSpec::new(a.dtype(), m, n, k)
        });
        single(self.run(&spec, &[a, b])?)
    }

    /// Softmax along `dim` (negative counts from the end).
    pub fn softmax(&self, x: &Tensor, dim: i64) -> Result<Tensor> {
        let axis = normalize_axis(dim, x.shape().len())?;
        let spec = OpSpec::Softmax(SoftmaxSpec {
            dtype: x.dtype(),
            shape: x.shape().to_vec(),
            axis,
            log: false,
        });
        single(self.run(&spec, &[x])?)
    }

    /// Layer norm over the last axis with weight and bias.
    pub fn layer_norm(
        &self,
        x: &Tensor,
        weight: &Tensor,
        bias: &Tensor,
        eps: f64,
    ) -> Result<Tensor> {
        let spec = OpSpec::LayerNorm(LayerNormSpec {
            dtype: x.dtype(),
            shape: x.shape().to_vec(),
            eps,
            rms: false,
            weight: true,
            bias: true,
            residual: false,
            save_stats: false,
            epilogue: None,
        });
        single(self.run(&spec, &[x, weight, bias])?)
    }

    /// Sum over `axes` (dropped from the shape).
    pub fn sum(&self, x: &Tensor, axes: &[usize]) -> Result<Tensor> {
        let spec = OpSpec::Reduce(ReduceSpec {
            func: ReduceFn::Sum,
            dtype: x.dtype(),
            shape: x.shape().to_vec(),
            axes: axes.to_vec(),
            keepdim: false,
            index_dtype: None,
            accumulate: false,
        });
        single(self.run(&spec, &[x])?)
    }
}
