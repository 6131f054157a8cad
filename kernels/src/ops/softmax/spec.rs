//! Specs of the softmax family.

use kernelc_ir::{Scalar, ScalarType};
use serde::{Deserialize, Serialize};

use super::{cases, condition, large, lower, reference};
use crate::conformance::inputs::Domain;
use crate::error::SpecError;
use crate::lower::math::compute_type;
use crate::lower::{LowerError, Plan, TargetCaps, Uniform};
use crate::op::Op;
use crate::shape::check_shape;
use crate::spec::{check_dtype, TensorSig, FLOATS, INDEX};
use crate::tolerance::Tolerance;

/// Softmax along `axis`: `y_i = e^{x_i − m} / Σ_j e^{x_j − m}` with `m = max_j x_j`;
/// with `log`, `y_i = x_i − m − ln Σ_j e^{x_j − m}`. A slice whose maximum is `−∞`
/// (everything masked) gives zeros (`−∞` for log-softmax). Inputs: `x`. Outputs: `y`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SoftmaxSpec {
    pub dtype: ScalarType,
    pub shape: Vec<usize>,
    pub axis: usize,
    #[serde(default)]
    pub log: bool,
}

fn validate_softmax(dtype: ScalarType, shape: &[usize], axis: usize) -> Result<(), SpecError> {
    check_dtype("softmax", dtype, FLOATS)?;
    check_shape("x", shape)?;
    if axis >= shape.len() {
        return Err(SpecError::BadAxis {
            axis: axis as i64,
            rank: shape.len(),
        });
    }
    Ok(())
}

impl Op for SoftmaxSpec {
    fn validate(&self) -> Result<(), SpecError> {
        validate_softmax(self.dtype, &self.shape, self.axis)
    }
    fn inputs(&self) -> Vec<TensorSig> {
        vec![TensorSig::new("x", self.dtype, self.shape.clone())]
    }
    fn outputs(&self) -> Vec<TensorSig> {
        vec![TensorSig::new("y", self.dtype, self.shape.clone())]
    }
    fn detail(&self) -> Option<String> {
        Some(if self.log { "log_softmax" } else { "softmax" }.to_string())
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        reference::softmax(self, i)
    }
    fn condition(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        condition::softmax(self, i)
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        lower::softmax(self, caps)
    }

    /// Rows before the axis are independent: pieces of them; a row past the limit by
    /// catalogue ops (`large`).
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        Some(large::softmax_large(self, caps))
    }
    fn cases() -> Vec<Self> {
        cases::softmax()
    }
    fn tolerance(&self) -> Tolerance {
        Tolerance::conditioned(2.0)
    }
    fn example() -> Self {
        SoftmaxSpec {
            dtype: ScalarType::F32,
            shape: vec![2, 5],
            axis: 1,
            log: false,
        }
    }
}

/// Backward of softmax along `axis`, from the forward output `y`:
/// `dx_i = y_i (dy_i − Σ_j dy_j y_j)`; with `log` (y = log-softmax),
/// `dx_i = dy_i − e^{y_i} Σ_j dy_j`. Inputs: `y`, `dy`. Outputs: `dx`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SoftmaxBackwardSpec {
    pub dtype: ScalarType,
    pub shape: Vec<usize>,
    pub axis: usize,
    #[serde(default)]
    pub log: bool,
}

impl Op for SoftmaxBackwardSpec {
    fn validate(&self) -> Result<(), SpecError> {
        validate_softmax(self.dtype, &self.shape, self.axis)
    }
    fn inputs(&self) -> Vec<TensorSig> {
        vec![
            TensorSig::new("y", self.dtype, self.shape.clone()),
            TensorSig::new("dy", self.dtype, self.shape.clone()),
        ]
    }
    fn outputs(&self) -> Vec<TensorSig> {
        vec![TensorSig::new("dx", self.dtype, self.shape.clone())]
    }
    fn detail(&self) -> Option<String> {
        Some(
            if self.log {
                "log_softmax_backward"
            } else {
                "softmax_backward"
            }
            .to_string(),
        )
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        reference::softmax_backward(self, i)
    }
    fn condition(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        condition::softmax_backward(self, i)
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        lower::softmax_backward(self, caps)
    }

    /// Rows before the axis are independent: pieces of them; a row past the limit by
    /// catalogue ops (`large`).
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        Some(large::softmax_backward_large(self, caps))
    }
    fn cases() -> Vec<Self> {
        cases::softmax_backward()
    }
    fn tolerance(&self) -> Tolerance {
        Tolerance::conditioned(2.0)
    }
    fn example() -> Self {
        SoftmaxBackwardSpec {
            dtype: ScalarType::F32,
            shape: vec![2, 5],
            axis: 1,
            log: false,
        }
    }
}

/// Cross-entropy of `logits [batch, classes]` against class ids `targets [batch]`, per
/// row via log-sum-exp:
///
/// ```text
/// lse = m + ln Σ_j e^{x_j − m},  m = max_j x_j
/// loss = (lse − x_t) · s,   probs = e^{x − lse},   grad = (probs − onehot(t)) · s
/// s = 1/batch if divide_by_batch else 1
/// ```
///
/// rumus `cross_entropy_forward` is `divide_by_batch, grad` (summing `loss` gives the
/// mean); rustd `cross_entropy` is `probs` with per-row, undivided loss. A target
/// outside `0..classes` gives loss NaN and no one-hot term. Inputs: `logits`,
/// `targets`. Outputs: `loss [batch]`, then `grad` and `probs` (`[batch, classes]`)
/// as enabled.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CrossEntropySpec {
    pub dtype: ScalarType,
    pub index_dtype: ScalarType,
    pub batch: usize,
    pub classes: usize,
    #[serde(default)]
    pub divide_by_batch: bool,
    #[serde(default)]
    pub grad: bool,
    #[serde(default)]
    pub probs: bool,
}

impl Op for CrossEntropySpec {
    fn validate(&self) -> Result<(), SpecError> {
        check_dtype("cross_entropy", self.dtype, FLOATS)?;
        check_dtype("cross_entropy targets", self.index_dtype, INDEX)?;
        check_shape("logits", &[self.batch, self.classes])
    }
    fn inputs(&self) -> Vec<TensorSig> {
        vec![
            TensorSig::new("logits", self.dtype, vec![self.batch, self.classes]),
            TensorSig::new("targets", self.index_dtype, vec![self.batch]),
        ]
    }
    fn outputs(&self) -> Vec<TensorSig> {
        let mut v = vec![TensorSig::new("loss", self.dtype, vec![self.batch])];
        if self.grad {
            v.push(TensorSig::new(
                "grad",
                self.dtype,
                vec![self.batch, self.classes],
            ));
        }
        if self.probs {
            v.push(TensorSig::new(
                "probs",
                self.dtype,
                vec![self.batch, self.classes],
            ));
        }
        v
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        reference::cross_entropy(self, i)
    }
    fn condition(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        condition::cross_entropy(self, i)
    }
    /// No classes: no target is in range, so every loss is NaN (the gradient and
    /// probabilities are empty).
    fn lower_empty(&self, _caps: &TargetCaps) -> Result<Plan, LowerError> {
        Ok(Plan::filled(0, Scalar::from_f64(self.dtype, f64::NAN)))
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        lower::cross_entropy(self, caps)
    }

    /// `scale` = 1/batch with `divide_by_batch`: a per-call value, so that the pieces
    /// of a split op divide by the whole batch.
    fn uniforms(&self) -> Vec<Uniform> {
        match self.divide_by_batch {
            true => vec![Uniform::new(
                "scale",
                compute_type(self.dtype),
                1.0 / self.batch as f64,
            )],
            false => Vec::new(),
        }
    }

    /// Pieces of rows (dividing by the whole batch: `scale` is the whole op's).
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        Some(crate::lower::split::split_rows_of(
            self,
            "cross_entropy",
            caps,
            self.batch,
            &[],
            |r| {
                CrossEntropySpec {
                    batch: r,
                    ..self.clone()
                }
                .into()
            },
        ))
    }
    fn cases() -> Vec<Self> {
        cases::cross_entropy()
    }
    fn tolerance(&self) -> Tolerance {
        Tolerance::conditioned(2.0)
    }
    /// Targets include one id past each end (-1 where the dtype has it): out-of-range
    /// targets give NaN loss and no one-hot term.
    fn domain(&self, input: &TensorSig) -> Domain {
        if input.name == "targets" {
            let lo = if self.index_dtype == ScalarType::U32 {
                0
            } else {
                -1
            };
            return Domain::Int(lo, self.classes as i64);
        }
        Domain::of_dtype(input.dtype)
    }
    fn example() -> Self {
        CrossEntropySpec {
            dtype: ScalarType::F32,
            index_dtype: ScalarType::U32,
            batch: 4,
            classes: 10,
            divide_by_batch: true,
            grad: true,
            probs: false,
        }
    }
}
