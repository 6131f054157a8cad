//! Training specs: cross-entropy, dropout, Adam.

use kernelc_ir::ScalarType;
use serde::{Deserialize, Serialize};

use super::{check_dtype, check_non_negative, Alias, Family, TensorSig, FLOATS, INDEX};
use crate::error::SpecError;
use crate::rng::RngScheme;
use crate::shape::{check_dim, check_shape};

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

impl Family for CrossEntropySpec {
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
}

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

impl Family for DropoutSpec {
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
    fn runtime_attributes(&self) -> &'static [&'static str] {
        &["seed", "step"]
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

impl Family for AdamSpec {
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
    fn runtime_attributes(&self) -> &'static [&'static str] {
        &["lr", "beta1", "beta2", "eps", "weight_decay", "step"]
    }
}
