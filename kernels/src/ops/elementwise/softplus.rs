//! `softplus`: `y = log(1 + e^{βx}) / β`, and its backward, as PyTorch defines them:
//!
//! ```text
//! forward:   y  = βx > threshold ? x  : (max(βx, 0) + log1p(e^{−|βx|})) / β
//! backward:  dx = βx > threshold ? dy : dy · σ(βx)
//! ```
//!
//! Above the threshold the function is the identity to within rounding (the default
//! 20 leaves `log1p(e^{−20}) ≈ 2·10⁻⁹` relative), which keeps `e^{βx}` from
//! overflowing. The forward is written as `max(z, 0) + log1p(e^{−|z|})`, which neither
//! overflows nor loses the tiny values of very negative `x` (`log(1 + e^z)` would round
//! them to 0). `β` and `threshold` are uniforms.
//!
//! Everything of the op is in this file: spec, validation, f64 reference, lowering,
//! tolerance and conformance cases.

use kernelc_ir::ScalarType::{self, *};
use serde::{Deserialize, Serialize};

use crate::conformance::inputs::Domain;
use crate::error::SpecError;
use crate::lower::map::{arg, map_op};
use crate::lower::math::{bind, compute_type};
use crate::lower::{LowerError, Plan, TargetCaps, Uniform};
use crate::op::Op;
use crate::reference::{attribute, round_to};
use crate::shape::check_shape;
use crate::spec::{check_dtype, check_finite, OpSpec, TensorSig, FLOATS};
use crate::tolerance::Tolerance;

/// Softplus (or its backward with `backward`) of `x`, elementwise. Inputs: `x`, then
/// `dy` for the backward. Outputs: `y`, or `dx` for the backward.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SoftplusSpec {
    pub dtype: ScalarType,
    pub shape: Vec<usize>,
    /// `β > 0` (PyTorch's default 1).
    #[serde(default = "one", with = "crate::spec::exact_f64")]
    pub beta: f64,
    /// Where `βx` switches to the identity (PyTorch's default 20).
    #[serde(default = "twenty", with = "crate::spec::exact_f64")]
    pub threshold: f64,
    /// The backward: `dx` from `x` and `dy`.
    #[serde(default)]
    pub backward: bool,
}

fn one() -> f64 {
    1.0
}

fn twenty() -> f64 {
    20.0
}

impl Op for SoftplusSpec {
    fn validate(&self) -> Result<(), SpecError> {
        check_dtype("softplus", self.dtype, FLOATS)?;
        check_shape("x", &self.shape)?;
        if !(self.beta.is_finite() && self.beta > 0.0) {
            return Err(SpecError::bad_attr(
                "beta",
                self.beta,
                "must be finite and > 0",
            ));
        }
        check_finite("threshold", self.threshold)
    }
    fn inputs(&self) -> Vec<TensorSig> {
        let x = TensorSig::new("x", self.dtype, self.shape.clone());
        if self.backward {
            vec![x, TensorSig::new("dy", self.dtype, self.shape.clone())]
        } else {
            vec![x]
        }
    }
    fn outputs(&self) -> Vec<TensorSig> {
        let name = if self.backward { "dx" } else { "y" };
        vec![TensorSig::new(name, self.dtype, self.shape.clone())]
    }
    fn detail(&self) -> Option<String> {
        Some(
            if self.backward {
                "softplus_backward"
            } else {
                "softplus"
            }
            .to_string(),
        )
    }
    fn uniforms(&self) -> Vec<Uniform> {
        let ty = compute_type(self.dtype);
        vec![
            Uniform::new("beta", ty, self.beta),
            Uniform::new("threshold", ty, self.threshold),
        ]
    }
    fn structural(&self) -> Self {
        SoftplusSpec {
            beta: 1.0,
            threshold: 0.0,
            ..self.clone()
        }
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        // As the kernel receives them: which side of the threshold an element falls
        // on depends on the last bit of both, and of `βx`, which every implementation
        // forms in the compute type (a `βx` that underflows there is 0, not above a
        // threshold of −0).
        let ct = compute_type(self.dtype);
        let (beta, threshold) = (
            attribute(self.dtype, self.beta),
            attribute(self.dtype, self.threshold),
        );
        let out = if self.backward {
            i[0].iter()
                .zip(i[1])
                .map(|(&x, &dy)| {
                    let z = round_to(ct, beta * x);
                    if z > threshold {
                        dy
                    } else {
                        dy * crate::ops::elementwise::reference::sigmoid(z)
                    }
                })
                .collect()
        } else {
            i[0].iter()
                .map(|&x| {
                    let z = round_to(ct, beta * x);
                    if z > threshold {
                        x
                    } else {
                        (z.max(0.0) + (-z.abs()).exp().ln_1p()) / beta
                    }
                })
                .collect()
        };
        vec![out]
    }
    /// Pieces of elements (every tensor has the one shape).
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        let shapes = vec![self.shape.as_slice(); self.inputs().len()];
        Some(crate::lower::split::split_map(
            "softplus",
            caps,
            &self.shape,
            &shapes,
            1,
            |_, out| {
                OpSpec::from(SoftplusSpec {
                    shape: out.to_vec(),
                    ..self.clone()
                })
            },
        ))
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        let backward = self.backward;
        map_op(
            OpSpec::Softplus(self.clone()),
            caps,
            compute_type(self.dtype),
            |f, n, v, p| {
                let (beta, threshold) = (n.splat(arg(p, 0, n)), n.splat(arg(p, 1, n)));
                let x = bind(f, "x", arg(v, 0, n));
                let z = f.let_("z", beta.clone() * x.clone());
                let linear = f.let_("linear", z.clone().gt(threshold));
                if backward {
                    let dy = arg(v, 1, n);
                    linear.select(dy.clone(), dy * n.sigmoid(z))
                } else {
                    let tail = (-z.clone().abs()).exp();
                    let soft = (z.max(n.lit(0.0)) + n.log1p_unit(f, tail)) / beta;
                    linear.select(x, soft)
                }
            },
        )
    }
    /// `βx` rounds before σ or the log sees it: the result moves by `σ(βx)·u·|βx|`
    /// relative (backward) or `σ(βx)·u·|x|` absolute (forward), beside the ULPs of the
    /// result.
    fn tolerance(&self) -> Tolerance {
        Tolerance::conditioned(8.0)
    }
    fn condition(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        let beta = attribute(self.dtype, self.beta);
        let ct = compute_type(self.dtype);
        let y = self.reference(i).remove(0);
        let s = i[0]
            .iter()
            .zip(&y)
            .map(|(&x, &y)| {
                let z = round_to(ct, beta * x);
                let sg = crate::ops::elementwise::reference::sigmoid(z);
                if self.backward {
                    y.abs() * (z.abs() * (1.0 - sg) + 1.0)
                } else {
                    sg * x.abs() + y.abs()
                }
            })
            .collect();
        vec![s]
    }
    /// Both sides of the threshold for every case's `β` and threshold.
    fn domain(&self, input: &TensorSig) -> Domain {
        if input.name == "x" {
            Domain::Real(-12.0, 12.0)
        } else {
            Domain::of_dtype(input.dtype)
        }
    }
    fn cases() -> Vec<Self> {
        let mut v = Vec::new();
        let params = [(1.0, 20.0), (2.0, 5.0), (0.5, 3.0)];
        let shapes = [vec![1], vec![7, 13], vec![1000], vec![257], vec![0]];
        for (i, shape) in shapes.into_iter().enumerate() {
            for backward in [false, true] {
                let (beta, threshold) = params[(i + backward as usize) % 3];
                v.push(SoftplusSpec {
                    dtype: [F32, F64, F16, Bf16][(i + 2 * backward as usize) % 4],
                    shape: shape.clone(),
                    beta,
                    threshold,
                    backward,
                });
            }
        }
        v
    }
    fn example() -> Self {
        SoftplusSpec {
            dtype: F32,
            shape: vec![4, 8],
            beta: 1.0,
            threshold: 20.0,
            backward: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_matches_the_definition_and_its_derivative() {
        // f64, where forming `βx` in the compute type rounds nothing.
        let spec = SoftplusSpec {
            dtype: F64,
            ..SoftplusSpec::example()
        };
        for x in [-40.0, -5.0, -1e-3, 0.0, 0.7, 3.0, 19.9, 20.1, 50.0] {
            let y = spec.reference(&[&[x]])[0][0];
            let want = if x > 20.0 { x } else { f64::exp(x).ln_1p() };
            assert!(
                (y - want).abs() <= 1e-15 * want.abs().max(1e-300) + 1e-300,
                "{x}: {y} vs {want}"
            );
            // Very negative x keeps its tiny value (log(1 + e^x) ≈ e^x).
            if x == -40.0 {
                assert!((y / f64::exp(-40.0) - 1.0).abs() < 1e-12);
            }
        }
        let back = SoftplusSpec {
            backward: true,
            ..spec.clone()
        };
        for x in [-3.0f64, 0.0, 2.5, 25.0] {
            let h = 1e-6;
            let numeric =
                (spec.reference(&[&[x + h]])[0][0] - spec.reference(&[&[x - h]])[0][0]) / (2.0 * h);
            let dx = back.reference(&[&[x], &[1.0]])[0][0];
            assert!((dx - numeric).abs() < 1e-6, "{x}: {dx} vs {numeric}");
        }
    }
}
