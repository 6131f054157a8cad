//! Specs of the training family: dropout and Adam.

use kernelc_ir::ScalarType;
use serde::{Deserialize, Serialize};

use super::{cases, lower, reference};
use crate::conformance::inputs::Domain;
use crate::error::SpecError;
use crate::lower::{LowerError, Plan, TargetCaps};
use crate::op::Op;
use crate::rng::RngScheme;
use crate::shape::{check_dim, check_shape};
use crate::spec::{check_dtype, check_non_negative, Alias, TensorSig, FLOATS};
use crate::tolerance::Tolerance;

/// Dropout with drop probability `p ∈ [0, 1)`: element `i` (flat index) is kept iff
/// [`rng::dropout_keep`](crate::rng::dropout_keep)`(rng, seed, step, p, i)`, and
///
/// ```text
/// y_i = keep_i ? x_i / (1 − p) : 0,     mask_i = keep_i ? 1 / (1 − p) : 0
/// ```
///
/// so `dx = dy ⊙ mask` is the backward (a `binary mul`). `rng = rumus` reproduces
/// rumus' masks exactly (see [`crate::rng`]). Inputs: `x`. Outputs: `y`, then `mask`
/// if set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DropoutSpec {
    pub dtype: ScalarType,
    pub shape: Vec<usize>,
    pub p: f64,
    pub seed: u64,
    pub step: u64,
    #[serde(default)]
    pub mask: bool,
    #[serde(default)]
    pub rng: RngScheme,
}

impl Op for DropoutSpec {
    fn validate(&self) -> Result<(), SpecError> {
        check_dtype("dropout", self.dtype, FLOATS)?;
        check_shape("x", &self.shape)?;
        if !(0.0..1.0).contains(&self.p) {
            return Err(SpecError::bad_attr("p", self.p, "must be in [0, 1)"));
        }
        Ok(())
    }
    fn inputs(&self) -> Vec<TensorSig> {
        vec![TensorSig::new("x", self.dtype, self.shape.clone())]
    }
    fn outputs(&self) -> Vec<TensorSig> {
        let mut v = vec![TensorSig::new("y", self.dtype, self.shape.clone())];
        if self.mask {
            v.push(TensorSig::new("mask", self.dtype, self.shape.clone()));
        }
        v
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        reference::dropout(self, i)
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        lower::dropout(self, caps)
    }
    fn cases() -> Vec<Self> {
        cases::dropout()
    }
    fn tolerance(&self) -> Tolerance {
        Tolerance::elementwise(1.0)
    }
    fn example() -> Self {
        DropoutSpec {
            dtype: ScalarType::F32,
            shape: vec![64],
            p: 0.1,
            seed: 42,
            step: 1,
            mask: true,
            rng: RngScheme::Counter,
        }
    }
}

/// One Adam step (`t = step ≥ 1`) on flat `param`, `grad`, `m`, `v` of `len` elements:
///
/// ```text
/// g  = grad + weight_decay · param          (L2, unless decoupled)
/// m ← β1·m + (1 − β1)·g,   v ← β2·v + (1 − β2)·g²
/// m̂ = m / (1 − β1ᵗ),       v̂ = v / (1 − β2ᵗ)
/// param ← param − lr · (m̂ / (√v̂ + eps) + [decoupled] weight_decay · param)   (AdamW)
/// ```
///
/// rustd `adam_update` is `weight_decay = 0`. Inputs: `param`, `grad`, `m`, `v`.
/// Outputs: `param`, `m`, `v`, each updated in place.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AdamSpec {
    pub dtype: ScalarType,
    pub len: usize,
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    #[serde(default)]
    pub weight_decay: f64,
    #[serde(default)]
    pub decoupled: bool,
    pub step: u64,
}

impl Op for AdamSpec {
    fn validate(&self) -> Result<(), SpecError> {
        check_dtype("adam", self.dtype, FLOATS)?;
        check_dim("adam len", self.len)?;
        check_shape("param", &[self.len])?;
        check_non_negative("lr", self.lr)?;
        check_non_negative("eps", self.eps)?;
        check_non_negative("weight_decay", self.weight_decay)?;
        for (name, b) in [("beta1", self.beta1), ("beta2", self.beta2)] {
            if !(0.0..1.0).contains(&b) {
                return Err(SpecError::bad_attr(name, b, "must be in [0, 1)"));
            }
        }
        if self.step == 0 {
            return Err(SpecError::bad_attr(
                "step",
                0,
                "steps count from 1 (bias correction divides by 1 − β^step)",
            ));
        }
        Ok(())
    }
    fn inputs(&self) -> Vec<TensorSig> {
        ["param", "grad", "m", "v"]
            .iter()
            .map(|n| TensorSig::new(n, self.dtype, vec![self.len]))
            .collect()
    }
    fn outputs(&self) -> Vec<TensorSig> {
        ["param", "m", "v"]
            .iter()
            .map(|n| TensorSig::new(n, self.dtype, vec![self.len]))
            .collect()
    }
    fn aliases(&self) -> Vec<Alias> {
        vec![
            Alias {
                input: 0,
                output: 0,
            },
            Alias {
                input: 2,
                output: 1,
            },
            Alias {
                input: 3,
                output: 2,
            },
        ]
    }
    fn detail(&self) -> Option<String> {
        Some(if self.decoupled { "adamw" } else { "adam" }.to_string())
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        reference::adam(self, i)
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        lower::adam(self, caps)
    }
    fn cases() -> Vec<Self> {
        cases::adam()
    }
    fn tolerance(&self) -> Tolerance {
        Tolerance::elementwise(16.0)
    }
    fn domain(&self, input: &TensorSig) -> Domain {
        if input.dtype.is_float() && input.name == "v" {
            Domain::Real(0.0, 1.0)
        } else {
            Domain::of_dtype(input.dtype)
        }
    }
    fn example() -> Self {
        AdamSpec {
            dtype: ScalarType::F32,
            len: 16,
            lr: 1e-3,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
            decoupled: false,
            step: 1,
        }
    }
}
