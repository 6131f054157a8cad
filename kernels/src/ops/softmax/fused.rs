//! `fused_softmax`: softmax (or log-softmax) of an elementwise prologue's value,
//! optionally with an elementwise epilogue on the probabilities, in one kernel (a
//! graph compiler's `softmax(x·s + b)`, `softmax(x)·keep`, `cast(log_softmax(x))`):
//! the softmax reads the prologue's inputs, the logits are never stored, nor are the
//! probabilities before the epilogue. See [`crate::ops::elementwise`]'s prologues
//! for what the fused op equals.
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
use crate::ops::elementwise::{
    check_epilogue, check_prologue, materialized, materialized_with_epilogue, prologue_error,
    row_op_inputs, row_op_uniforms, Epilogue, XSource,
};
use crate::ops::{BinaryFn, FusedNode, FusedSpec, UnaryFn};
use crate::spec::{OpSpec, TensorSig};
use crate::tolerance::Tolerance;

/// `epilogue(softmax(prologue(x0, x1, …)), e1, e2, …)`. Inputs: the prologue's
/// (`x0`, `x1`, ...), of the softmax's dtype, broadcast to its shape; then the
/// epilogue's after its first (`e1`, ...), broadcast to that shape too. Outputs: `y`.
/// The identity prologue (`[{"input":0}]`) reads `x` as it is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FusedSoftmaxSpec {
    pub prologue: FusedSpec,
    pub softmax: SoftmaxSpec,
    /// Applied to each probability (its input 0, rounded to the dtype as a stored
    /// one would be) before it is stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epilogue: Option<FusedSpec>,
}

impl FusedSoftmaxSpec {
    /// The prologue's value on `inputs` (the softmax's logits).
    fn x(&self, inputs: &[&[f64]]) -> Vec<f64> {
        self.prologue
            .reference(&inputs[..self.prologue.inputs.len()])
            .swap_remove(0)
    }

    /// The softmax's value on `inputs` before any epilogue.
    fn probabilities(&self, inputs: &[&[f64]]) -> Vec<f64> {
        self.softmax.reference(&[&self.x(inputs)]).swap_remove(0)
    }

    /// The epilogue as the lowering sees it.
    fn lowered_epilogue(&self) -> Option<Epilogue<'_>> {
        let prologue = &self.prologue;
        self.epilogue
            .as_ref()
            .map(|spec| Epilogue::after(prologue, spec))
    }

    /// The softmax's own condition on the logits, plus what the logits' errors
    /// `|δxⱼ| ≤ e·u·|xⱼ|` (`e` the prologue's) move an output by:
    /// `yᵢ(δxᵢ − Σ yⱼδxⱼ)`, at most `|yᵢ|·e·(|xᵢ| + maxⱼ|xⱼ|)` (log-softmax: without
    /// the `|yᵢ|`).
    fn softmax_condition(&self, i: &[&[f64]]) -> Vec<f64> {
        let x = self.x(i);
        let mut out = self.softmax.condition(&[&x]).swap_remove(0);
        let y = self.softmax.reference(&[&x]).swap_remove(0);
        let e = prologue_error(&self.prologue);
        let s = &self.softmax;
        // An exact prologue adds nothing; a masked logit (−∞) gives exactly 0 and
        // moves nothing (0·∞ must not make a bound NaN).
        if e > 0.0 {
            slices(&s.shape, s.axis, |at| {
                let finite = at.iter().map(|&k| x[k]).filter(|v| v.is_finite());
                let widest = finite.map(f64::abs).fold(0.0, f64::max);
                for &k in at.iter().filter(|&&k| x[k].is_finite()) {
                    let moved = e * (x[k].abs() + widest);
                    out[k] += if s.log { moved } else { y[k].abs() * moved };
                }
            });
        }
        out
    }
}

impl Op for FusedSoftmaxSpec {
    fn validate(&self) -> Result<(), SpecError> {
        self.softmax.validate()?;
        check_prologue(&self.prologue, self.softmax.dtype, &self.softmax.shape)?;
        match &self.epilogue {
            Some(epilogue) => check_epilogue(epilogue, self.softmax.dtype, &self.softmax.shape),
            None => Ok(()),
        }
    }
    /// The prologue's, then the epilogue's after its first (named `e1`, ...).
    fn inputs(&self) -> Vec<TensorSig> {
        row_op_inputs(&self.prologue, self.epilogue.as_ref())
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
    /// The prologue's, then the epilogue's (named `epilogue_…`).
    fn uniforms(&self) -> Vec<Uniform> {
        row_op_uniforms(&self.prologue, self.epilogue.as_ref())
    }
    fn structural(&self) -> Self {
        FusedSoftmaxSpec {
            prologue: self.prologue.structural(),
            softmax: self.softmax.clone(),
            epilogue: self.epilogue.as_ref().map(FusedSpec::structural),
        }
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        let y = self.probabilities(i);
        match self.lowered_epilogue() {
            Some(epilogue) => vec![epilogue.reference(i, &y)],
            None => vec![y],
        }
    }
    /// Without an epilogue, the softmax's condition with the prologue's error added;
    /// with one, the softmax's allowance (its tolerance times that condition) carried
    /// through the epilogue's slope (docs/semantics.md, "Graph fusion").
    fn condition(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        let condition = self.softmax_condition(i);
        let Some(epilogue) = self.lowered_epilogue() else {
            return vec![condition];
        };
        let ulps = self.softmax.tolerance().ulps;
        let error: Vec<f64> = condition.iter().map(|c| ulps * c).collect();
        vec![epilogue.condition(i, &self.probabilities(i), &error)]
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        let op = OpSpec::FusedSoftmax(self.clone());
        let source = XSource::fused(&self.prologue);
        lower::softmax_of(&op, &self.softmax, source, self.lowered_epilogue(), caps)
    }
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        let softmax = OpSpec::Softmax(self.softmax.clone());
        Some(match self.lowered_epilogue() {
            None => materialized(caps, &self.prologue, softmax),
            Some(epilogue) => materialized_with_epilogue(caps, &self.prologue, softmax, epilogue),
        })
    }
    /// The softmax's own with no epilogue; with one, carried through it
    /// ([`Op::condition`]).
    fn tolerance(&self) -> Tolerance {
        match self.epilogue {
            Some(_) => Tolerance::conditioned(1.0),
            None => self.softmax.tolerance(),
        }
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
                epilogue: None,
            };
        let bin = |func, a, b| Binary { func, a, b };
        let sc = |func, x, scalar| Scalar {
            func,
            x,
            scalar,
            reversed: false,
        };
        let with_epilogue = |fused: FusedSoftmaxSpec, inputs, nodes| FusedSoftmaxSpec {
            epilogue: Some(FusedSpec {
                dtype: fused.softmax.dtype,
                inputs,
                nodes,
            }),
            ..fused
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
                epilogue: None,
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
                epilogue: None,
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
            // Epilogues: attention probabilities times a dropout keep-mask and its
            // 1/(1−p) (long rows, the two-pass form; the stashed one on a CPU).
            with_epilogue(
                case(F32, vec![6, 300], 1, false, 1, vec![Input(0)]),
                vec![vec![6, 300], vec![6, 300]],
                vec![
                    Input(0),
                    Input(1),
                    bin(BinaryFn::Mul, 0, 1),
                    sc(BinaryFn::Mul, 2, 1.25),
                ],
            ),
            // Short rows kept in registers, a masked prologue, a per-column weight
            // broadcast over rows as the epilogue (ragged: 7 columns).
            with_epilogue(
                case(
                    F32,
                    vec![5, 7],
                    1,
                    false,
                    2,
                    vec![Input(0), Input(1), bin(BinaryFn::Add, 0, 1)],
                ),
                vec![vec![5, 7], vec![7]],
                vec![Input(0), Input(1), bin(BinaryFn::Mul, 0, 1)],
            ),
            // Log-softmax over a middle axis, f16, then −y (a loss's negation) plus
            // a per-column offset.
            with_epilogue(
                case(F16, vec![3, 11, 4], 1, true, 1, vec![Input(0)]),
                vec![vec![3, 11, 4], vec![4]],
                vec![
                    Input(0),
                    Input(1),
                    Unary {
                        func: UnaryFn::Neg,
                        x: 0,
                    },
                    bin(BinaryFn::Add, 2, 1),
                ],
            ),
            // bf16 probabilities squared (an exact prologue, a rounding epilogue).
            with_epilogue(
                case(Bf16, vec![4, 40], 1, false, 1, vec![Input(0)]),
                vec![vec![4, 40]],
                vec![Input(0), bin(BinaryFn::Mul, 0, 0)],
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
            epilogue: None,
        }
    }
}
