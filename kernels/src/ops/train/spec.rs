//! Specs of the training family: dropout and Adam.

use kernelc_ir::ScalarType;
use serde::{Deserialize, Serialize};

use super::{cases, condition, lower, reference};
use crate::conformance::inputs::Domain;
use crate::error::SpecError;
use crate::lower::math::compute_type;
use crate::lower::Uniform;
use crate::lower::{LowerError, Plan, TargetCaps};
use crate::op::Op;
use crate::rng;
use crate::rng::RngScheme;
use crate::shape::check_shape;
use crate::spec::{check_dtype, check_non_negative, Alias, TensorSig, FLOATS};
use crate::tolerance::Tolerance;

/// Dropout with drop probability `p ∈ [0, 1)`: element `i` (flat index) is kept iff
/// [`rng::dropout_keep`](crate::rng::dropout_keep)`(rng, seed, step, p, i)`, and
///
/// ```text
/// mask_i = keep_i ? 1 / (1 − p) : 0,     y_i = x_i · mask_i
/// ```
///
/// (a dropped NaN or ±∞ is NaN, as in PyTorch), so `dx = dy ⊙ mask` is the backward
/// (a `binary mul`). `rng = rumus` reproduces
/// rumus' masks exactly (see [`crate::rng`]). Inputs: `x`. Outputs: `y`, then `mask`
/// if set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DropoutSpec {
    pub dtype: ScalarType,
    pub shape: Vec<usize>,
    #[serde(with = "crate::spec::exact_f64")]
    pub p: f64,
    pub seed: u64,
    pub step: u64,
    #[serde(default)]
    pub mask: bool,
    #[serde(default)]
    pub rng: RngScheme,
    /// The random-stream index of `x[0]` (element `i` draws the bits of `offset + i`,
    /// wrapping at 2^32 as the index does): 0 but in the pieces of a dropout split
    /// past one kernel's indices, which so draw the whole op's bits.
    #[serde(default, skip_serializing_if = "crate::spec::is_zero")]
    pub offset: u64,
}

/// The structural classes of dropout's `p` (each lowers to a different kernel).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropoutClass {
    /// `p = 0`: a copy, no random bits.
    KeepAll,
    /// `p` so close to 1 that the threshold is `2^24`: every element dropped.
    DropAll,
    /// Everything else: the random mask.
    Random,
}

impl DropoutSpec {
    /// Which kernel `p` selects.
    pub fn class(&self) -> DropoutClass {
        match rng::dropout_threshold(self.p) {
            0 => DropoutClass::KeepAll,
            t if t >= 1 << 24 => DropoutClass::DropAll,
            _ => DropoutClass::Random,
        }
    }
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
    /// The stream word of `seed` and `step`, the integer threshold of `p`, and the
    /// scale `1/(1 − p)` in the compute type.
    fn uniforms(&self) -> Vec<Uniform> {
        vec![
            Uniform::u32("stream", rng::stream(self.rng, self.seed, self.step)),
            Uniform::u32("threshold", rng::dropout_threshold(self.p)),
            Uniform::new("scale", compute_type(self.dtype), 1.0 / (1.0 - self.p)),
        ]
    }
    /// `seed` and `step` at 0, `p` at a representative of its [`DropoutClass`].
    fn structural(&self) -> Self {
        let p = match self.class() {
            DropoutClass::KeepAll => 0.0,
            // The largest f64 below 1: its threshold is 2^24.
            DropoutClass::DropAll => 1.0 - f64::EPSILON / 2.0,
            DropoutClass::Random => 0.5,
        };
        DropoutSpec {
            p,
            seed: 0,
            step: 0,
            ..self.clone()
        }
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
        Tolerance::result(1.0)
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
            offset: 0,
        }
    }
    /// Pieces of elements, each drawing the whole op's bits (`offset`).
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        let len = crate::shape::numel(&self.shape);
        Some(crate::lower::split::split_rows_at(
            self,
            "dropout",
            caps,
            len,
            &[],
            |start, r| {
                DropoutSpec {
                    shape: vec![r],
                    offset: self.offset.wrapping_add(start as u64),
                    ..self.clone()
                }
                .into()
            },
        ))
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
/// `weight_decay = 0` has no decay term (as PyTorch: `0·param` is never added, so an
/// infinite param stays infinite). rustd `adam_update` is `weight_decay = 0`. Inputs:
/// `param`, `grad`, `m`, `v`.
/// Outputs: `param`, `m`, `v`, each updated in place.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AdamSpec {
    pub dtype: ScalarType,
    pub len: usize,
    #[serde(with = "crate::spec::exact_f64")]
    pub lr: f64,
    #[serde(with = "crate::spec::exact_f64")]
    pub beta1: f64,
    #[serde(with = "crate::spec::exact_f64")]
    pub beta2: f64,
    #[serde(with = "crate::spec::exact_f64")]
    pub eps: f64,
    #[serde(default, with = "crate::spec::exact_f64")]
    pub weight_decay: f64,
    #[serde(default)]
    pub decoupled: bool,
    pub step: u64,
}

/// The values one Adam step computes with, before their rounding to the compute type:
/// the attributes, and the values derived from them on the host in f64 (`1 − β`, the
/// bias corrections `1/(1 − βᵗ)`), as PyTorch derives them in Python floats. Each
/// reaches the kernel as a uniform rounded once to the compute type, and the reference
/// computes with the same rounded values, so both take one source.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamCoefficients {
    pub lr: f64,
    pub beta1: f64,
    pub one_minus_beta1: f64,
    pub beta2: f64,
    pub one_minus_beta2: f64,
    pub inv_correction1: f64,
    pub inv_correction2: f64,
    pub eps: f64,
    pub weight_decay: f64,
}

impl AdamCoefficients {
    /// Each value with the name of its uniform, in the order the lowering binds them.
    pub fn named(&self) -> [(&'static str, f64); 9] {
        [
            ("lr", self.lr),
            ("beta1", self.beta1),
            ("one_minus_beta1", self.one_minus_beta1),
            ("beta2", self.beta2),
            ("one_minus_beta2", self.one_minus_beta2),
            ("inv_correction1", self.inv_correction1),
            ("inv_correction2", self.inv_correction2),
            ("eps", self.eps),
            ("weight_decay", self.weight_decay),
        ]
    }

    /// Every value through `f` (the rounding to the compute type).
    pub fn map(self, f: impl Fn(f64) -> f64) -> AdamCoefficients {
        AdamCoefficients {
            lr: f(self.lr),
            beta1: f(self.beta1),
            one_minus_beta1: f(self.one_minus_beta1),
            beta2: f(self.beta2),
            one_minus_beta2: f(self.one_minus_beta2),
            inv_correction1: f(self.inv_correction1),
            inv_correction2: f(self.inv_correction2),
            eps: f(self.eps),
            weight_decay: f(self.weight_decay),
        }
    }
}

impl AdamSpec {
    /// This step's coefficients (see [`AdamCoefficients`]).
    pub fn coefficients(&self) -> AdamCoefficients {
        let t = self.step.min(i32::MAX as u64) as i32;
        AdamCoefficients {
            lr: self.lr,
            beta1: self.beta1,
            one_minus_beta1: 1.0 - self.beta1,
            beta2: self.beta2,
            one_minus_beta2: 1.0 - self.beta2,
            inv_correction1: 1.0 / (1.0 - self.beta1.powi(t)),
            inv_correction2: 1.0 / (1.0 - self.beta2.powi(t)),
            eps: self.eps,
            weight_decay: self.weight_decay,
        }
    }
}

impl Op for AdamSpec {
    fn validate(&self) -> Result<(), SpecError> {
        check_dtype("adam", self.dtype, FLOATS)?;
        check_shape("param", &[self.len])?;
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
    /// [`AdamSpec::coefficients`] in the compute type, in their order.
    fn uniforms(&self) -> Vec<Uniform> {
        let ty = compute_type(self.dtype);
        self.coefficients()
            .named()
            .iter()
            .map(|&(name, v)| Uniform::new(name, ty, v))
            .collect()
    }
    /// Every attribute at a canonical value; whether there is weight decay shapes the
    /// kernel, so `weight_decay` keeps its class (0, or 1 for any other value).
    fn structural(&self) -> Self {
        AdamSpec {
            lr: 0.0,
            beta1: 0.0,
            beta2: 0.0,
            eps: 0.0,
            weight_decay: if self.weight_decay == 0.0 { 0.0 } else { 1.0 },
            step: 1,
            ..self.clone()
        }
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        reference::adam(self, i)
    }
    fn condition(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        condition::adam(self, i)
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        lower::adam(self, caps)
    }

    /// Pieces of elements (every tensor is flat and read where it is written).
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        Some(crate::lower::split::split_rows_of(
            self,
            "adam",
            caps,
            self.len,
            &[],
            |r| {
                AdamSpec {
                    len: r,
                    ..self.clone()
                }
                .into()
            },
        ))
    }
    fn cases() -> Vec<Self> {
        cases::adam()
    }
    fn tolerance(&self) -> Tolerance {
        Tolerance::conditioned(2.0)
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
