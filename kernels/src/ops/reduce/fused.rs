//! `fused_reduce`: a reduction of an elementwise prologue's value, in one kernel (a
//! graph compiler's `Σ x·x`, `mean |a − b|`, `max relu(x + r)`): the reduction reads
//! the prologue's inputs, `x` is never stored. See [`crate::ops::elementwise`]'s
//! prologues for what the fused op equals.
//!
//! Everything of the op is in this file: spec, validation, f64 reference, lowering,
//! tolerance and conformance cases.

use kernelc_ir::ScalarType::{self, *};
use serde::{Deserialize, Serialize};

use super::{lower, ReduceFn, ReduceSpec};
use crate::conformance::inputs::Domain;
use crate::error::SpecError;
use crate::lower::{LowerError, Plan, TargetCaps, Uniform};
use crate::op::Op;
use crate::ops::elementwise::{check_prologue, materialized, prologue_error, XSource};
use crate::ops::{BinaryFn, FusedNode, FusedSpec, UnaryFn};
use crate::spec::{OpSpec, TensorSig};
use crate::tolerance::Tolerance;

/// `reduce` of `prologue`'s value. Inputs: the prologue's (`x0`, `x1`, ...), of the
/// reduction's dtype, broadcast to its shape. Outputs: `y`. Arg reductions (whose index a
/// rounding can move between near ties) and `accumulate` are not fused.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FusedReduceSpec {
    pub prologue: FusedSpec,
    pub reduce: ReduceSpec,
}

impl FusedReduceSpec {
    /// Elements each output reduces.
    fn reduced(&self) -> usize {
        self.reduce
            .axes
            .iter()
            .filter_map(|&a| self.reduce.shape.get(a))
            .product()
    }

    /// The prologue's value on `inputs` (the reduction's `x`).
    fn x(&self, inputs: &[&[f64]]) -> Vec<f64> {
        self.prologue.reference(inputs).swap_remove(0)
    }
}

impl Op for FusedReduceSpec {
    fn validate(&self) -> Result<(), SpecError> {
        self.reduce.validate()?;
        check_prologue(&self.prologue, self.reduce.dtype, &self.reduce.shape)?;
        if self.reduce.func.is_arg() {
            return Err(SpecError::bad_attr(
                "reduce.func",
                self.reduce.func.name(),
                "an arg reduction is not fused (a prologue's rounding can move its index between near ties)",
            ));
        }
        if self.reduce.accumulate {
            return Err(SpecError::bad_attr(
                "reduce.accumulate",
                true,
                "a fused reduction writes a fresh output",
            ));
        }
        Ok(())
    }
    fn inputs(&self) -> Vec<TensorSig> {
        self.prologue.inputs()
    }
    fn outputs(&self) -> Vec<TensorSig> {
        self.reduce.outputs()
    }
    fn detail(&self) -> Option<String> {
        Some(format!("fused_reduce_{}", self.reduce.func.name()))
    }
    fn uniforms(&self) -> Vec<Uniform> {
        self.prologue.uniforms()
    }
    fn structural(&self) -> Self {
        FusedReduceSpec {
            prologue: self.prologue.structural(),
            reduce: self.reduce.clone(),
        }
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        self.reduce.reference(&[&self.x(i)])
    }
    /// Sums: `Σ|tᵢ|·(n + 1 + e)` over the output's terms `tᵢ` (the prologue's values),
    /// `n + 1` for the sum's (and a mean's division's) roundings and `e` for each
    /// term's own error ([`prologue_error`]); a mean's divided by `n`.
    fn condition(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        let magnitudes: Vec<f64> = self.x(i).iter().map(|t| t.abs()).collect();
        let sum = ReduceSpec {
            func: ReduceFn::Sum,
            keepdim: true,
            ..self.reduce.clone()
        };
        let n = self.reduced() as f64;
        let per_term = n + 1.0 + prologue_error(&self.prologue);
        let divide = if self.reduce.func == ReduceFn::Mean {
            n.max(1.0)
        } else {
            1.0
        };
        sum.reference(&[&magnitudes])
            .into_iter()
            .map(|o| o.into_iter().map(|s| s * per_term / divide).collect())
            .collect()
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        let op = OpSpec::FusedReduce(self.clone());
        lower::reduce_of(&op, &self.reduce, XSource::fused(&self.prologue), caps)
    }
    fn lower_empty(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        self.reduce.lower_empty(caps)
    }
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        Some(materialized(
            caps,
            &self.prologue,
            OpSpec::Reduce(self.reduce.clone()),
        ))
    }
    /// A sum's error is conditioned on its terms' magnitudes ([`Op::condition`]); an
    /// extremum is one of the terms, off by the prologue's own error.
    fn tolerance(&self) -> Tolerance {
        match self.reduce.func {
            ReduceFn::Sum | ReduceFn::Mean => Tolerance::conditioned(1.0),
            ReduceFn::Max
            | ReduceFn::Min
            | ReduceFn::MaxNan
            | ReduceFn::MinNan
            | ReduceFn::ArgMax
            | ReduceFn::ArgMin => self.prologue.tolerance(),
        }
    }
    fn domain(&self, input: &TensorSig) -> Domain {
        self.prologue.domain(input)
    }
    fn cases() -> Vec<Self> {
        use FusedNode::*;
        let case = |func, dtype: ScalarType, shape: Vec<usize>, axes, inputs, nodes| {
            FusedReduceSpec {
                prologue: FusedSpec {
                    dtype,
                    inputs: vec![shape.clone(); inputs],
                    nodes,
                },
                reduce: ReduceSpec {
                    func,
                    dtype,
                    shape,
                    axes,
                    keepdim: false,
                    index_dtype: None,
                    accumulate: false,
                },
            }
        };
        let bin = |func, a, b| Binary { func, a, b };
        let sc = |func, x, scalar| Scalar {
            func,
            x,
            scalar,
            reversed: false,
        };
        vec![
            // Σ x² along rows.
            case(
                ReduceFn::Sum,
                F32,
                vec![7, 300],
                vec![1],
                1,
                vec![Input(0), bin(BinaryFn::Mul, 0, 0)],
            ),
            // mean |a − b| over a middle axis, f16 (each |a − b| rounded to f16).
            case(
                ReduceFn::Mean,
                F16,
                vec![4, 9, 5],
                vec![1],
                2,
                vec![
                    Input(0),
                    Input(1),
                    bin(BinaryFn::Sub, 0, 1),
                    Unary {
                        func: UnaryFn::Abs,
                        x: 2,
                    },
                ],
            ),
            // max_nan of relu(x + r) over everything, bf16.
            case(
                ReduceFn::MaxNan,
                Bf16,
                vec![3, 33],
                vec![0, 1],
                2,
                vec![
                    Input(0),
                    Input(1),
                    bin(BinaryFn::Add, 0, 1),
                    Unary {
                        func: UnaryFn::Relu,
                        x: 2,
                    },
                ],
            ),
            // Dot products of i32 rows: wrapping, exact.
            case(
                ReduceFn::Sum,
                I32,
                vec![5, 64],
                vec![1],
                2,
                vec![Input(0), Input(1), bin(BinaryFn::Mul, 0, 1)],
            ),
            // A whole-tensor sum (split into parts on GPUs) with a per-call scalar:
            // Σ (2.5·x − y).
            case(
                ReduceFn::Sum,
                F32,
                vec![20000],
                vec![0],
                2,
                vec![
                    Input(0),
                    Input(1),
                    sc(BinaryFn::Mul, 0, 2.5),
                    bin(BinaryFn::Sub, 2, 1),
                ],
            ),
            // A variance's sum: Σ (x − m)² with the mean m broadcast along rows.
            FusedReduceSpec {
                prologue: FusedSpec {
                    dtype: F32,
                    inputs: vec![vec![6, 40], vec![6, 1]],
                    nodes: vec![
                        Input(0),
                        Input(1),
                        bin(BinaryFn::Sub, 0, 1),
                        bin(BinaryFn::Mul, 2, 2),
                    ],
                },
                reduce: ReduceSpec {
                    func: ReduceFn::Sum,
                    dtype: F32,
                    shape: vec![6, 40],
                    axes: vec![1],
                    keepdim: false,
                    index_dtype: None,
                    accumulate: false,
                },
            },
            // Rows of 2·2 merged into runs of 4, an operand broadcast along the
            // last axis of 2: a load per lane. max of x·w.
            FusedReduceSpec {
                prologue: FusedSpec {
                    dtype: F32,
                    inputs: vec![vec![8, 2, 2], vec![2, 1]],
                    nodes: vec![Input(0), Input(1), bin(BinaryFn::Mul, 0, 1)],
                },
                reduce: ReduceSpec {
                    func: ReduceFn::Max,
                    dtype: F32,
                    shape: vec![8, 2, 2],
                    axes: vec![1, 2],
                    keepdim: true,
                    index_dtype: None,
                    accumulate: false,
                },
            },
            // min of e^{x/2} over a middle axis (kept axis innermost), f64.
            case(
                ReduceFn::Min,
                F64,
                vec![6, 40, 3],
                vec![1],
                1,
                vec![
                    Input(0),
                    sc(BinaryFn::Mul, 0, 0.5),
                    Unary {
                        func: UnaryFn::Exp,
                        x: 1,
                    },
                ],
            ),
        ]
    }
    fn example() -> Self {
        FusedReduceSpec {
            prologue: FusedSpec {
                dtype: F32,
                inputs: vec![vec![4, 8]],
                nodes: vec![
                    FusedNode::Input(0),
                    FusedNode::Binary {
                        func: BinaryFn::Mul,
                        a: 0,
                        b: 0,
                    },
                ],
            },
            reduce: ReduceSpec {
                func: ReduceFn::Sum,
                dtype: F32,
                shape: vec![4, 8],
                axes: vec![1],
                keepdim: false,
                index_dtype: None,
                accumulate: false,
            },
        }
    }
}
