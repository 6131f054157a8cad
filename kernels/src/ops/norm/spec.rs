//! Specs of the normalisation family.

use kernelc_ir::{Scalar, ScalarType};
use serde::{Deserialize, Serialize};

use super::{cases, condition, lower, reference};
use crate::conformance::inputs::Domain;
use crate::error::SpecError;
use crate::lower::math::compute_type;
use crate::lower::Uniform;
use crate::lower::{LowerError, Plan, TargetCaps};
use crate::op::Op;
use crate::ops::elementwise::{
    check_epilogue, epilogue_after, epilogue_inputs, epilogue_uniforms, Epilogue,
};
use crate::ops::FusedSpec;
use crate::shape::{check_shape, numel};
use crate::spec::{check_dtype, check_non_negative, Alias, TensorSig, FLOATS};
use crate::tolerance::Tolerance;

fn rows_cols(shape: &[usize]) -> (usize, usize) {
    let cols = shape.last().copied().unwrap_or(0);
    let rows = crate::shape::numel(&shape[..shape.len().saturating_sub(1)]);
    (rows, cols)
}

/// Layer norm (or RMS norm) over the last axis of `x`, per row of `cols` elements:
///
/// ```text
/// layer norm: μ = mean(x), σ² = mean((x − μ)²) (biased), r = 1/√(σ² + eps), x̂ = (x − μ)·r
/// RMS norm:   μ = 0,       r = 1/√(mean(x²) + eps),                       x̂ = x·r
/// y = x̂ ⊙ weight + bias        (weight, bias optional; missing = 1, 0)
/// ```
///
/// With `residual`, the normalised tensor is `sum = x + residual`, rounded to the
/// dtype and written out (ferrum `rms_norm_residual`): y normalises that output. With `save_stats`, `stats[row] = [μ, r]` (rumus
/// `save_mean_invstd` layout; μ = 0 for RMS). Inputs: `x`, then `residual`, `weight`
/// (`[cols]`), `bias` (`[cols]`) as enabled. Outputs: `y`, then `sum`, `stats`
/// (`[rows, 2]`) as enabled.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerNormSpec {
    pub dtype: ScalarType,
    pub shape: Vec<usize>,
    #[serde(with = "crate::spec::exact_f64")]
    pub eps: f64,
    #[serde(default)]
    pub rms: bool,
    #[serde(default)]
    pub weight: bool,
    #[serde(default)]
    pub bias: bool,
    #[serde(default)]
    pub residual: bool,
    #[serde(default)]
    pub save_stats: bool,
    /// Applied to each `y` (its input 0, `y` rounded to the dtype as a stored one
    /// would be) before it is stored: a graph's `layer_norm(x)·(1 + s) + t`. Its
    /// other inputs follow the layer norm's (`e1`, ...), its per-call values `eps`
    /// (`epilogue_…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epilogue: Option<FusedSpec>,
}

impl LayerNormSpec {
    /// A plain layer norm over the last axis of `shape` with `eps`: no RMS, weight,
    /// bias, residual or saved statistics.
    pub fn new(dtype: ScalarType, shape: &[usize], eps: f64) -> LayerNormSpec {
        LayerNormSpec {
            dtype,
            shape: shape.to_vec(),
            eps,
            rms: false,
            weight: false,
            bias: false,
            residual: false,
            save_stats: false,
            epilogue: None,
        }
    }

    /// `(rows, cols)`: rows = product of all but the last dim.
    pub fn rows_cols(&self) -> (usize, usize) {
        rows_cols(&self.shape)
    }

    /// The layer norm's own inputs (`x`, then `residual`, `weight`, `bias` as
    /// enabled), before the epilogue's.
    fn own_inputs(&self) -> usize {
        1 + usize::from(self.residual) + usize::from(self.weight) + usize::from(self.bias)
    }

    /// The epilogue as the lowering sees it: its operands after the layer norm's
    /// inputs, its per-call values after `eps`.
    pub(super) fn lowered_epilogue(&self) -> Option<Epilogue<'_>> {
        self.epilogue.as_ref().map(|spec| Epilogue {
            spec,
            first_input: self.own_inputs(),
            first_uniform: 1,
        })
    }
}

/// [`LayerNormSpec`]'s allowance in ulps of its condition (its [`Op::tolerance`]).
const LAYER_NORM_ULPS: f64 = 2.0;

fn validate_rows(op: &str, dtype: ScalarType, shape: &[usize]) -> Result<(), SpecError> {
    check_dtype(op, dtype, FLOATS)?;
    if shape.is_empty() {
        return Err(SpecError::BadAxis { axis: -1, rank: 0 });
    }
    check_shape("x", shape)
}

impl Op for LayerNormSpec {
    fn validate(&self) -> Result<(), SpecError> {
        validate_rows("layer_norm", self.dtype, &self.shape)?;
        check_shape("stats", &[self.rows_cols().0, 2])?;
        check_non_negative("eps", self.eps)?;
        match &self.epilogue {
            Some(epilogue) => check_epilogue(epilogue, self.dtype, &self.shape),
            None => Ok(()),
        }
    }
    /// `x`, then `residual`, `weight`, `bias` as enabled, then the epilogue's
    /// operands after its first (`e1`, ...).
    fn inputs(&self) -> Vec<TensorSig> {
        let (_, cols) = self.rows_cols();
        let mut v = vec![TensorSig::new("x", self.dtype, self.shape.clone())];
        if self.residual {
            v.push(TensorSig::new("residual", self.dtype, self.shape.clone()));
        }
        if self.weight {
            v.push(TensorSig::new("weight", self.dtype, vec![cols]));
        }
        if self.bias {
            v.push(TensorSig::new("bias", self.dtype, vec![cols]));
        }
        v.extend(
            self.epilogue
                .as_ref()
                .map(epilogue_inputs)
                .unwrap_or_default(),
        );
        v
    }
    fn outputs(&self) -> Vec<TensorSig> {
        let (rows, _) = self.rows_cols();
        let mut v = vec![TensorSig::new("y", self.dtype, self.shape.clone())];
        if self.residual {
            v.push(TensorSig::new("sum", self.dtype, self.shape.clone()));
        }
        if self.save_stats {
            v.push(TensorSig::new("stats", self.dtype, vec![rows, 2]));
        }
        v
    }
    fn detail(&self) -> Option<String> {
        Some(if self.rms { "rms_norm" } else { "layer_norm" }.to_string())
    }
    /// `eps`, then the epilogue's (named `epilogue_…`).
    fn uniforms(&self) -> Vec<Uniform> {
        let mut uniforms = vec![Uniform::new("eps", compute_type(self.dtype), self.eps)];
        uniforms.extend(
            self.epilogue
                .as_ref()
                .map(epilogue_uniforms)
                .unwrap_or_default(),
        );
        uniforms
    }
    fn structural(&self) -> Self {
        LayerNormSpec {
            eps: 0.0,
            epilogue: self.epilogue.as_ref().map(FusedSpec::structural),
            ..self.clone()
        }
    }
    /// Rows of no features: `y` (and `sum`) are empty; the statistics of nothing
    /// are NaN (`0/0`).
    fn lower_empty(&self, _caps: &TargetCaps) -> Result<Plan, LowerError> {
        let stats = 1 + self.residual as usize;
        Ok(Plan::filled(stats, Scalar::from_f64(self.dtype, f64::NAN)))
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        let mut out = reference::layer_norm(self, i);
        if let Some(epilogue) = self.lowered_epilogue() {
            out[0] = epilogue.reference(i, &out[0]);
        }
        out
    }
    /// With an epilogue, `y`'s allowance (the tolerance times its condition) carried
    /// through the epilogue's slope (docs/semantics.md, "Graph fusion"), in units of
    /// that tolerance; the other outputs' as without one.
    fn condition(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        let mut condition = condition::layer_norm(self, i);
        if let Some(epilogue) = self.lowered_epilogue() {
            let error: Vec<f64> = condition[0].iter().map(|c| LAYER_NORM_ULPS * c).collect();
            let y = reference::layer_norm(self, i).swap_remove(0);
            let carried = epilogue.condition(i, &y, &error);
            condition[0] = carried.into_iter().map(|c| c / LAYER_NORM_ULPS).collect();
        }
        condition
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        lower::layer_norm(self, caps)
    }

    /// Pieces of rows; weight and bias whole. With an epilogue, `y` goes through a
    /// temporary that the epilogue then reads (one more pass at this size).
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        if let Some(epilogue) = self.lowered_epilogue() {
            let plain = LayerNormSpec {
                epilogue: None,
                ..self.clone()
            };
            return Some(epilogue_after(caps, plain.into(), epilogue));
        }
        let (rows, cols) = self.rows_cols();
        if cols as u64 > caps.kernel_limit() {
            return Some(super::long_rows::layer_norm_long_rows(self, caps));
        }
        Some(crate::lower::split::split_rows_of(
            self,
            "layer_norm",
            caps,
            rows,
            &["weight", "bias"],
            |r| {
                LayerNormSpec {
                    shape: vec![r, cols],
                    ..self.clone()
                }
                .into()
            },
        ))
    }
    fn cases() -> Vec<Self> {
        cases::layer_norm()
    }
    fn tolerance(&self) -> Tolerance {
        Tolerance::conditioned(LAYER_NORM_ULPS)
    }
    fn example() -> Self {
        LayerNormSpec {
            dtype: ScalarType::F32,
            shape: vec![3, 8],
            eps: 1e-5,
            rms: false,
            weight: true,
            bias: true,
            residual: false,
            save_stats: true,
            epilogue: None,
        }
    }
}

/// Backward of [`LayerNormSpec`] from the saved `stats` (`[μ, r]` per row), with
/// `g = dy ⊙ weight` (or `dy`) and `N = cols`:
///
/// ```text
/// layer norm: dx = r · (g − mean(g) − x̂ · mean(g ⊙ x̂)),  x̂ = (x − μ)·r
/// RMS norm:   dx = r · g − x · r³ · mean(g ⊙ x)
/// dweight = Σ_rows dy ⊙ x̂,   dbias = Σ_rows dy
/// ```
///
/// Inputs: `dy`, `x`, then `weight` if `weight`, then `stats`. Outputs: `dx`, then with
/// `param_grads` `dweight` (if `weight`) and `dbias` (if `bias`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerNormBackwardSpec {
    pub dtype: ScalarType,
    pub shape: Vec<usize>,
    #[serde(default)]
    pub rms: bool,
    #[serde(default)]
    pub weight: bool,
    #[serde(default)]
    pub bias: bool,
    #[serde(default)]
    pub param_grads: bool,
}

impl LayerNormBackwardSpec {
    pub fn rows_cols(&self) -> (usize, usize) {
        rows_cols(&self.shape)
    }
}

impl Op for LayerNormBackwardSpec {
    fn validate(&self) -> Result<(), SpecError> {
        validate_rows("layer_norm_backward", self.dtype, &self.shape)?;
        check_shape("stats", &[self.rows_cols().0, 2])?;
        if self.param_grads && !self.weight && !self.bias {
            return Err(SpecError::bad_attr(
                "param_grads",
                true,
                "needs `weight` or `bias` (there is no parameter to differentiate)",
            ));
        }
        Ok(())
    }
    fn inputs(&self) -> Vec<TensorSig> {
        let (rows, cols) = self.rows_cols();
        let mut v = vec![
            TensorSig::new("dy", self.dtype, self.shape.clone()),
            TensorSig::new("x", self.dtype, self.shape.clone()),
        ];
        if self.weight {
            v.push(TensorSig::new("weight", self.dtype, vec![cols]));
        }
        v.push(TensorSig::new("stats", self.dtype, vec![rows, 2]));
        v
    }
    fn outputs(&self) -> Vec<TensorSig> {
        let (_, cols) = self.rows_cols();
        let mut v = vec![TensorSig::new("dx", self.dtype, self.shape.clone())];
        if self.param_grads && self.weight {
            v.push(TensorSig::new("dweight", self.dtype, vec![cols]));
        }
        if self.param_grads && self.bias {
            v.push(TensorSig::new("dbias", self.dtype, vec![cols]));
        }
        v
    }
    fn detail(&self) -> Option<String> {
        Some(
            if self.rms {
                "rms_norm_backward"
            } else {
                "layer_norm_backward"
            }
            .to_string(),
        )
    }
    /// No rows: `dx` is empty; the parameter gradients are sums of nothing (zeros).
    fn lower_empty(&self, _caps: &TargetCaps) -> Result<Plan, LowerError> {
        let grads: Vec<usize> = (1..self.outputs().len()).collect();
        Ok(Plan::filled_all(&grads, Scalar::zero(self.dtype)))
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        reference::layer_norm_backward(self, i)
    }
    fn condition(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        condition::layer_norm_backward(self, i)
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        lower::layer_norm_backward(self, caps)
    }

    /// Pieces of rows for `dx`; the parameter gradients sum the pieces' partials.
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        let (rows, cols) = self.rows_cols();
        if cols as u64 > caps.kernel_limit() {
            return Some(super::long_rows::layer_norm_backward_long_rows(self, caps));
        }
        Some(crate::lower::split::split_rows_summing(
            self,
            "layer_norm_backward",
            caps,
            rows,
            &["weight"],
            &["dweight", "dbias"],
            |_, r| {
                LayerNormBackwardSpec {
                    shape: vec![r, cols],
                    ..self.clone()
                }
                .into()
            },
        ))
    }
    fn cases() -> Vec<Self> {
        cases::layer_norm_backward()
    }
    /// Conditioned on the centred gradient's terms (module `condition`).
    fn tolerance(&self) -> Tolerance {
        Tolerance::conditioned(2.0)
    }
    /// `stats` (the last input) as the forward computes it from this case's `x`.
    fn special_input(&self, k: usize, seed: u64) -> Option<Vec<f64>> {
        (k + 1 == self.inputs().len()).then(|| cases::layer_norm_stats(self, seed))
    }
    fn example() -> Self {
        LayerNormBackwardSpec {
            dtype: ScalarType::F32,
            shape: vec![3, 8],
            rms: false,
            weight: true,
            bias: true,
            param_grads: true,
        }
    }
}

fn validate_nc(op: &str, dtype: ScalarType, shape: &[usize]) -> Result<(), SpecError> {
    check_dtype(op, dtype, FLOATS)?;
    if shape.len() < 2 {
        return Err(SpecError::BadAxis {
            axis: 1,
            rank: shape.len(),
        });
    }
    check_shape("x", shape)
}

/// Batch norm over `x: [N, C, ...]` per channel `c`, over the `M = N·Π spatial`
/// elements of that channel (rumus `batch_norm_forward`):
///
/// ```text
/// training:  μ_c = mean(x_c), σ²_c = mean((x_c − μ_c)²) (biased), r_c = 1/√(σ²_c + eps)
///            y = (x − μ_c)·r_c·weight_c + bias_c,   save[c] = [μ_c, r_c]
///            running_mean ← (1 − momentum)·running_mean + momentum·μ_c
///            running_var  ← (1 − momentum)·running_var  + momentum·σ²_c   (biased, as rumus)
/// inference: y = (x − running_mean_c)/√(running_var_c + eps)·weight_c + bias_c
/// ```
///
/// Inputs: `x`, `weight`, `bias`, `running_mean`, `running_var` (all `[C]` but x).
/// Outputs: `y`; in training also `save` (`[C, 2]`), `running_mean`, `running_var`
/// (updated in place).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BatchNormSpec {
    pub dtype: ScalarType,
    pub shape: Vec<usize>,
    #[serde(with = "crate::spec::exact_f64")]
    pub eps: f64,
    #[serde(with = "crate::spec::exact_f64")]
    pub momentum: f64,
    pub training: bool,
}

impl BatchNormSpec {
    pub fn channels(&self) -> usize {
        self.shape.get(1).copied().unwrap_or(0)
    }
}

impl Op for BatchNormSpec {
    fn validate(&self) -> Result<(), SpecError> {
        validate_nc("batch_norm", self.dtype, &self.shape)?;
        check_shape("save", &[self.channels(), 2])?;
        if self.training && self.channels() > 0 && numel(&self.shape) == 0 {
            return Err(SpecError::bad_attr(
                "training",
                true,
                &format!(
                    "batch statistics need at least one value per channel (x has shape {:?})",
                    self.shape
                ),
            ));
        }
        check_non_negative("eps", self.eps)?;
        if !(0.0..=1.0).contains(&self.momentum) {
            return Err(SpecError::bad_attr(
                "momentum",
                self.momentum,
                "must be in [0, 1]",
            ));
        }
        Ok(())
    }
    fn inputs(&self) -> Vec<TensorSig> {
        let c = vec![self.channels()];
        vec![
            TensorSig::new("x", self.dtype, self.shape.clone()),
            TensorSig::new("weight", self.dtype, c.clone()),
            TensorSig::new("bias", self.dtype, c.clone()),
            TensorSig::new("running_mean", self.dtype, c.clone()),
            TensorSig::new("running_var", self.dtype, c),
        ]
    }
    fn outputs(&self) -> Vec<TensorSig> {
        let c = self.channels();
        let mut v = vec![TensorSig::new("y", self.dtype, self.shape.clone())];
        if self.training {
            v.push(TensorSig::new("save", self.dtype, vec![c, 2]));
            v.push(TensorSig::new("running_mean", self.dtype, vec![c]));
            v.push(TensorSig::new("running_var", self.dtype, vec![c]));
        }
        v
    }
    fn aliases(&self) -> Vec<Alias> {
        if self.training {
            vec![
                Alias {
                    input: 3,
                    output: 2,
                },
                Alias {
                    input: 4,
                    output: 3,
                },
            ]
        } else {
            Vec::new()
        }
    }
    fn detail(&self) -> Option<String> {
        Some(
            if self.training {
                "batch_norm_train"
            } else {
                "batch_norm_infer"
            }
            .to_string(),
        )
    }
    fn uniforms(&self) -> Vec<Uniform> {
        let ty = compute_type(self.dtype);
        vec![
            Uniform::new("eps", ty, self.eps),
            Uniform::new("momentum", ty, self.momentum),
        ]
    }
    fn structural(&self) -> Self {
        BatchNormSpec {
            eps: 0.0,
            momentum: 0.0,
            ..self.clone()
        }
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        reference::batch_norm(self, i)
    }
    fn condition(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        condition::batch_norm(self, i)
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        lower::batch_norm(self, caps)
    }

    /// Pieces of the batch, parameters whole; in training, the pieces' statistics
    /// combined first (module `large`).
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        Some(super::large::batch_norm(self, caps))
    }
    fn cases() -> Vec<Self> {
        cases::batch_norm()
    }
    /// Conditioned on the operands after the shift (module `condition`).
    fn tolerance(&self) -> Tolerance {
        Tolerance::conditioned(2.0)
    }
    fn domain(&self, input: &TensorSig) -> Domain {
        if input.dtype.is_float() && input.name == "running_var" {
            Domain::Real(0.5, 2.0)
        } else {
            Domain::of_dtype(input.dtype)
        }
    }
    fn example() -> Self {
        BatchNormSpec {
            dtype: ScalarType::F32,
            shape: vec![2, 3, 4, 4],
            eps: 1e-5,
            momentum: 0.1,
            training: true,
        }
    }
}

/// Backward of training-mode batch norm from `save[c] = [μ_c, r_c]`, per channel over
/// its `M` elements:
///
/// ```text
/// x̂ = (x − μ_c)·r_c,  dbias_c = Σ dy,  dweight_c = Σ dy ⊙ x̂
/// dx = weight_c · r_c / M · (M·dy − dbias_c − x̂ · dweight_c)
/// ```
///
/// Inputs: `dy`, `x`, `weight` (`[C]`), `save` (`[C, 2]`). Outputs: `dx`, then
/// `dweight`, `dbias` with `param_grads`.
///
/// With `given_grads: Some(M)`, `dbias_c` and `dweight_c` are not summed here but
/// given, as inputs `dweight`, `dbias` (`[C]`, before `save`), for a whole batch of
/// `M` values per channel, and only `dx` is computed: a piece of a larger batch (a
/// split op, or a data-parallel batch norm whose sums were all-reduced, as torch's
/// `batch_norm_backward_elemt`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BatchNormBackwardSpec {
    pub dtype: ScalarType,
    pub shape: Vec<usize>,
    #[serde(default)]
    pub param_grads: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub given_grads: Option<usize>,
}

impl BatchNormBackwardSpec {
    pub fn channels(&self) -> usize {
        self.shape.get(1).copied().unwrap_or(0)
    }
}

impl Op for BatchNormBackwardSpec {
    fn validate(&self) -> Result<(), SpecError> {
        validate_nc("batch_norm_backward", self.dtype, &self.shape)?;
        match self.given_grads {
            Some(0) => Err(SpecError::bad_attr(
                "given_grads",
                0,
                "the batch of the given gradients has at least one value per channel",
            )),
            Some(m) if self.param_grads => Err(SpecError::bad_attr(
                "given_grads",
                m,
                "gradients given as inputs are not also outputs (param_grads)",
            )),
            _ => Ok(()),
        }
    }
    fn inputs(&self) -> Vec<TensorSig> {
        let c = self.channels();
        let mut v = vec![
            TensorSig::new("dy", self.dtype, self.shape.clone()),
            TensorSig::new("x", self.dtype, self.shape.clone()),
            TensorSig::new("weight", self.dtype, vec![c]),
        ];
        if self.given_grads.is_some() {
            v.push(TensorSig::new("dweight", self.dtype, vec![c]));
            v.push(TensorSig::new("dbias", self.dtype, vec![c]));
        }
        v.push(TensorSig::new("save", self.dtype, vec![c, 2]));
        v
    }
    fn outputs(&self) -> Vec<TensorSig> {
        let c = self.channels();
        let mut v = vec![TensorSig::new("dx", self.dtype, self.shape.clone())];
        if self.param_grads {
            v.push(TensorSig::new("dweight", self.dtype, vec![c]));
            v.push(TensorSig::new("dbias", self.dtype, vec![c]));
        }
        v
    }
    /// No values per channel: `dx` is empty; the parameter gradients are sums of
    /// nothing (zeros).
    fn lower_empty(&self, _caps: &TargetCaps) -> Result<Plan, LowerError> {
        let grads: Vec<usize> = (1..self.outputs().len()).collect();
        Ok(Plan::filled_all(&grads, Scalar::zero(self.dtype)))
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        reference::batch_norm_backward(self, i)
    }
    fn condition(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        condition::batch_norm_backward(self, i)
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        lower::batch_norm_backward(self, caps)
    }
    /// Pieces of the batch: each sums its partial parameter gradients, their sum
    /// gives every piece's `dx` (`given_grads`).
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        Some(super::large::batch_norm_backward(self, caps))
    }
    fn cases() -> Vec<Self> {
        cases::batch_norm_backward()
    }
    // dx = (dy − Σdy/M − x̂·Σdy·x̂/M)·r·w cancels products of up to four inputs, as
    // layer norm's backward does: 32 ulps there, 8 forward.
    /// Conditioned on the operands after the shift (module `condition`).
    fn tolerance(&self) -> Tolerance {
        Tolerance::conditioned(2.0)
    }
    /// `save` (the last input) as the training forward computes it from this case's
    /// `x`.
    fn special_input(&self, k: usize, seed: u64) -> Option<Vec<f64>> {
        (k + 1 == self.inputs().len()).then(|| cases::batch_norm_save(self, seed))
    }
    fn example() -> Self {
        BatchNormBackwardSpec {
            dtype: ScalarType::F32,
            shape: vec![2, 3, 4, 4],
            param_grads: true,
            given_grads: None,
        }
    }
}
