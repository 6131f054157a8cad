//! `fused_softmax`: softmax (or log-softmax) of an elementwise prologue's value, in
//! one kernel (a graph compiler's `softmax(x·s + b)`): the softmax reads the
//! prologue's inputs, the logits are never stored. See
//! [`crate::ops::elementwise`]'s prologues for what the fused op equals.
//!
//! Everything of the op is in this file: spec, validation, f64 reference, lowering,
//! tolerance and conformance cases.

use kernelc_ir::ScalarType::{self, *};
use serde::{Deserialize, Serialize};

use super::reference::slices;
use super::{lower, SoftmaxSpec};
use crate::conformance::inputs::Domain;
use crate::error::SpecError;
use crate::lower::{LowerError, Plan, TargetCaps, Uniform};
use crate::op::Op;
use crate::ops::elementwise::{check_prologue, materialized, prologue_error, XSource};
use crate::ops::{BinaryFn, FusedNode, FusedSpec, UnaryFn};
use crate::spec::{OpSpec, TensorSig};
use crate::tolerance::Tolerance;

/// `softmax` of `prologue`'s value. Inputs: the prologue's (`x0`, `x1`, ...), of the
/// softmax's dtype, broadcast to its shape. Outputs: `y`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FusedSoftmaxSpec {
    pub prologue: FusedSpec,
    pub softmax: SoftmaxSpec,
}

impl FusedSoftmaxSpec {
    /// The prologue's value on `inputs` (the softmax's logits).
    fn x(&self, inputs: &[&[f64]]) -> Vec<f64> {
        self.prologue.reference(inputs).swap_remove(0)
    }
}

impl Op for FusedSoftmaxSpec {
    fn validate(&self) -> Result<(), SpecError> {
        self.softmax.validate()?;
        check_prologue(&self.prologue, self.softmax.dtype, &self.softmax.shape)
    }
    fn inputs(&self) -> Vec<TensorSig> {
        self.prologue.inputs()
    }
    fn outputs(&self) -> Vec<TensorSig> {
        self.softmax.outputs()
    }
    fn detail(&self) -> Option<String> {
        Some(
            if self.softmax.log {
                "fused_log_softmax"
            } else {
                "fused_softmax"
            }
            .to_string(),
        )
    }
    fn uniforms(&self) -> Vec<Uniform> {
        self.prologue.uniforms()
    }
    fn structural(&self) -> Self {
        FusedSoftmaxSpec {
            prologue: self.prologue.structural(),
            softmax: self.softmax.clone(),
        }
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        self.softmax.reference(&[&self.x(i)])
    }
    /// The softmax's own condition on the logits, plus what the logits' errors
    /// `|δxⱼ| ≤ e·u·|xⱼ|` (`e` the prologue's) move an output by:
    /// `yᵢ(δxᵢ − Σ yⱼδxⱼ)`, at most `|yᵢ|·e·(|xᵢ| + maxⱼ|xⱼ|)` (log-softmax: without
    /// the `|yᵢ|`).
    fn condition(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        let x = self.x(i);
        let mut out = self.softmax.condition(&[&x]);
        let y = self.softmax.reference(&[&x]).swap_remove(0);
        let e = prologue_error(&self.prologue);
        let s = &self.softmax;
        // An exact prologue adds nothing; a masked logit (−∞) gives exactly 0 and
        // moves nothing (0·∞ must not make a bound NaN).
        if let (Some(cond), true) = (out.first_mut(), e > 0.0) {
            slices(&s.shape, s.axis, |at| {
                let finite = at.iter().map(|&k| x[k]).filter(|v| v.is_finite());
                let widest = finite.map(f64::abs).fold(0.0, f64::max);
                for &k in at.iter().filter(|&&k| x[k].is_finite()) {
                    let moved = e * (x[k].abs() + widest);
                    cond[k] += if s.log { moved } else { y[k].abs() * moved };
                }
            });
        }
        out
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        let op = OpSpec::FusedSoftmax(self.clone());
        lower::softmax_of(&op, &self.softmax, XSource::fused(&self.prologue), caps)
    }
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        Some(materialized(
            caps,
            &self.prologue,
            OpSpec::Softmax(self.softmax.clone()),
        ))
    }
    fn tolerance(&self) -> Tolerance {
        self.softmax.tolerance()
    }
    fn domain(&self, input: &TensorSig) -> Domain {
        self.prologue.domain(input)
    }
    fn cases() -> Vec<Self> {
        use FusedNode::*;
        let case =
            |dtype: ScalarType, shape: Vec<usize>, axis, log, inputs, nodes| FusedSoftmaxSpec {
                prologue: FusedSpec {
                    dtype,
                    inputs: vec![shape.clone(); inputs],
                    nodes,
                },
                softmax: SoftmaxSpec {
                    dtype,
                    shape,
                    axis,
                    log,
                },
            };
        let bin = |func, a, b| Binary { func, a, b };
        let sc = |func, x, scalar| Scalar {
            func,
            x,
            scalar,
            reversed: false,
        };
        vec![
            // Attention-like scores: x·s + b along long rows (a per-call scale).
            case(
                F32,
                vec![7, 255],
                1,
                false,
                2,
                vec![
                    Input(0),
                    Input(1),
                    sc(BinaryFn::Mul, 0, 3.0),
                    bin(BinaryFn::Add, 2, 1),
                ],
            ),
            // Short rows (kept in registers): x + b.
            case(
                F32,
                vec![5, 8],
                1,
                false,
                2,
                vec![Input(0), Input(1), bin(BinaryFn::Add, 0, 1)],
            ),
            // A middle axis, f16: x − y rounded to f16.
            case(
                F16,
                vec![4, 7, 5],
                1,
                false,
                2,
                vec![Input(0), Input(1), bin(BinaryFn::Sub, 0, 1)],
            ),
            // Log-softmax over the first axis of bf16 tanh(x)·3.
            case(
                Bf16,
                vec![2, 13, 3],
                0,
                true,
                1,
                vec![
                    Input(0),
                    Unary {
                        func: UnaryFn::Tanh,
                        x: 0,
                    },
                    sc(BinaryFn::Mul, 1, 3.0),
                ],
            ),
            // Attention scores with a mask broadcast over batch and heads:
            // x·s + mask[16, 16].
            FusedSoftmaxSpec {
                prologue: FusedSpec {
                    dtype: F32,
                    inputs: vec![vec![2, 3, 16, 16], vec![16, 16]],
                    nodes: vec![
                        Input(0),
                        Input(1),
                        sc(BinaryFn::Mul, 0, 0.25),
                        bin(BinaryFn::Add, 2, 1),
                    ],
                },
                softmax: SoftmaxSpec {
                    dtype: F32,
                    shape: vec![2, 3, 16, 16],
                    axis: 3,
                    log: false,
                },
            },
            // A bias per column over a middle axis (lanes across columns), f16.
            FusedSoftmaxSpec {
                prologue: FusedSpec {
                    dtype: F16,
                    inputs: vec![vec![3, 9, 8], vec![8]],
                    nodes: vec![Input(0), Input(1), bin(BinaryFn::Add, 0, 1)],
                },
                softmax: SoftmaxSpec {
                    dtype: F16,
                    shape: vec![3, 9, 8],
                    axis: 1,
                    log: false,
                },
            },
            // Log-softmax of x·y, f64 rows of 1000.
            case(
                F64,
                vec![3, 1000],
                1,
                true,
                2,
                vec![Input(0), Input(1), bin(BinaryFn::Mul, 0, 1)],
            ),
        ]
    }
    fn example() -> Self {
        FusedSoftmaxSpec {
            prologue: FusedSpec {
                dtype: F32,
                inputs: vec![vec![2, 5], vec![2, 5]],
                nodes: vec![
                    FusedNode::Input(0),
                    FusedNode::Input(1),
                    FusedNode::Binary {
                        func: BinaryFn::Add,
                        a: 0,
                        b: 1,
                    },
                ],
            },
            softmax: SoftmaxSpec {
                dtype: F32,
                shape: vec![2, 5],
                axis: 1,
                log: false,
            },
        }
    }
}
