//! `fused_reduce`: a reduction of an elementwise prologue's value, optionally with an
//! elementwise epilogue on its result, in one kernel (a graph compiler's `Σ x·x`,
//! `mean |a − b|`, `max relu(x + r)`, `√(mean x² + ε)`): the reduction reads the
//! prologue's inputs, `x` is never stored, nor is the result before the epilogue.
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
use crate::ops::elementwise::{
    check_epilogue, check_prologue, materialized, materialized_with_epilogue, prologue_error,
    row_op_inputs, row_op_uniforms, Epilogue, XSource,
};
use crate::ops::{BinaryFn, FusedNode, FusedSpec, UnaryFn};
use crate::spec::{OpSpec, TensorSig};
use crate::tolerance::Tolerance;

/// `epilogue(reduce(prologue(x0, x1, …)), e1, e2, …)`. Inputs: the prologue's (`x0`,
/// `x1`, ...), of the reduction's dtype, broadcast to its shape; then the epilogue's
/// after its first (`e1`, ...), broadcast to the result's shape. Outputs: `y`. Arg
/// reductions (whose index a rounding can move between near ties) and `accumulate`
/// are not fused. The identity prologue (`[{"input":0}]`) reads `x` as it is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FusedReduceSpec {
    pub prologue: FusedSpec,
    pub reduce: ReduceSpec,
    /// Applied to the result (its input 0, rounded to the dtype as a stored result
    /// would be) before it is stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epilogue: Option<FusedSpec>,
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
        self.prologue
            .reference(&inputs[..self.prologue.inputs.len()])
            .swap_remove(0)
    }

    /// The reduction's result on `inputs`, before any epilogue.
    fn result(&self, inputs: &[&[f64]]) -> Vec<f64> {
        self.reduce.reference(&[&self.x(inputs)]).swap_remove(0)
    }

    /// The epilogue as the lowering sees it.
    fn lowered_epilogue(&self) -> Option<Epilogue<'_>> {
        let prologue = &self.prologue;
        self.epilogue
            .as_ref()
            .map(|spec| Epilogue::after(prologue, spec))
    }

    /// Per result element, in units of `u`, what the reduction may be off by (the
    /// allowance of the unfused reduction of the prologue, as a magnitude).
    fn result_error(&self, inputs: &[&[f64]]) -> Vec<f64> {
        match self.reduce.func {
            ReduceFn::Sum | ReduceFn::Mean => self.sum_condition(inputs),
            ReduceFn::Max
            | ReduceFn::Min
            | ReduceFn::MaxNan
            | ReduceFn::MinNan
            | ReduceFn::ArgMax
            | ReduceFn::ArgMin => {
                // p ULPs of the compute type and one of the dtype, each at most
                // 2u·|y| of its type: within 2(e + 1)·|y| in units of u.
                let e = prologue_error(&self.prologue);
                self.result(inputs)
                    .into_iter()
                    .map(|y| 2.0 * (e + 1.0) * y.abs())
                    .collect()
            }
        }
    }

    /// A sum's `Σ|tᵢ|·(n + 1 + e)` (see [`Op::condition`]).
    fn sum_condition(&self, i: &[&[f64]]) -> Vec<f64> {
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
            .swap_remove(0)
            .into_iter()
            .map(|s| s * per_term / divide)
            .collect()
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
        if let Some(epilogue) = &self.epilogue {
            check_epilogue(epilogue, self.reduce.dtype, &self.reduce.out_shape())?;
            if self.reduce.reduces_nothing() {
                return Err(SpecError::bad_attr(
                    "epilogue",
                    "present",
                    "a reduction over an empty axis takes no epilogue (apply it to the identity as its own op)",
                ));
            }
        }
        Ok(())
    }
    fn inputs(&self) -> Vec<TensorSig> {
        row_op_inputs(&self.prologue, self.epilogue.as_ref())
    }
    fn outputs(&self) -> Vec<TensorSig> {
        self.reduce.outputs()
    }
    fn detail(&self) -> Option<String> {
        Some(format!("fused_reduce_{}", self.reduce.func.name()))
    }
    /// The prologue's, then the epilogue's (named `epilogue_…`).
    fn uniforms(&self) -> Vec<Uniform> {
        row_op_uniforms(&self.prologue, self.epilogue.as_ref())
    }
    fn structural(&self) -> Self {
        FusedReduceSpec {
            prologue: self.prologue.structural(),
            reduce: self.reduce.clone(),
            epilogue: self.epilogue.as_ref().map(FusedSpec::structural),
        }
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        let result = self.result(i);
        match self.lowered_epilogue() {
            Some(epilogue) => vec![epilogue.reference(i, &result)],
            None => vec![result],
        }
    }
    /// Sums without an epilogue: `Σ|tᵢ|·(n + 1 + e)` over the output's terms `tᵢ`
    /// (the prologue's values), `n + 1` for the sum's (and a mean's division's)
    /// roundings and `e` for each term's own error (the prologue's ULPs); a mean's
    /// divided by `n`. With an epilogue: the reduction's error carried through its
    /// slope (docs/semantics.md, "Graph fusion").
    fn condition(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        let Some(epilogue) = self.lowered_epilogue() else {
            return vec![self.sum_condition(i)];
        };
        vec![epilogue.condition(i, &self.result(i), &self.result_error(i))]
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        let op = OpSpec::FusedReduce(self.clone());
        let source = XSource::fused(&self.prologue);
        lower::reduce_of(&op, &self.reduce, source, self.lowered_epilogue(), caps)
    }
    fn lower_empty(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        match &self.epilogue {
            None => self.reduce.lower_empty(caps),
            Some(_) => Err(LowerError::Internal(
                "a fused reduction with an epilogue over an empty axis passed validation",
            )),
        }
    }
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        let reduce = OpSpec::Reduce(self.reduce.clone());
        Some(match self.lowered_epilogue() {
            None => materialized(caps, &self.prologue, reduce),
            Some(epilogue) => materialized_with_epilogue(caps, &self.prologue, reduce, epilogue),
        })
    }
    /// Without an epilogue, a sum's error is conditioned on its terms' magnitudes
    /// ([`Op::condition`]) and an extremum is one of the terms, off by the prologue's
    /// own error; with one, both are carried through it ([`Op::condition`]).
    fn tolerance(&self) -> Tolerance {
        if self.epilogue.is_some() {
            return Tolerance::conditioned(1.0);
        }
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
        let case =
            |func, dtype: ScalarType, shape: Vec<usize>, axes, inputs, nodes| FusedReduceSpec {
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
                epilogue: None,
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
                epilogue: None,
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
                epilogue: None,
            },
            // An RMS: √(mean x² + ε) along rows.
            FusedReduceSpec {
                epilogue: Some(FusedSpec {
                    dtype: F32,
                    inputs: vec![vec![6]],
                    nodes: vec![
                        Input(0),
                        sc(BinaryFn::Add, 0, 1e-5),
                        Unary {
                            func: UnaryFn::Sqrt,
                            x: 1,
                        },
                    ],
                }),
                ..case(
                    ReduceFn::Mean,
                    F32,
                    vec![6, 64],
                    vec![1],
                    1,
                    vec![Input(0), bin(BinaryFn::Mul, 0, 0)],
                )
            },
            // Per-call values in both (`scalar1`, `epilogue_scalar3`) and an epilogue
            // operand broadcast over the result: Σ (2x) over a middle axis, then
            // (y·w)·0.5, f16.
            FusedReduceSpec {
                epilogue: Some(FusedSpec {
                    dtype: F16,
                    inputs: vec![vec![4, 5], vec![5]],
                    nodes: vec![
                        Input(0),
                        Input(1),
                        bin(BinaryFn::Mul, 0, 1),
                        sc(BinaryFn::Mul, 2, 0.5),
                    ],
                }),
                ..case(
                    ReduceFn::Sum,
                    F16,
                    vec![4, 9, 5],
                    vec![1],
                    1,
                    vec![Input(0), sc(BinaryFn::Mul, 0, 2.0)],
                )
            },
            // A whole-tensor max (split into parts on GPUs: the epilogue runs in the
            // combining launch), then tanh(y − 0.5).
            FusedReduceSpec {
                epilogue: Some(FusedSpec {
                    dtype: F32,
                    inputs: vec![vec![]],
                    nodes: vec![
                        Input(0),
                        sc(BinaryFn::Sub, 0, 0.5),
                        Unary {
                            func: UnaryFn::Tanh,
                            x: 1,
                        },
                    ],
                }),
                ..case(
                    ReduceFn::MaxNan,
                    F32,
                    vec![20000],
                    vec![0],
                    1,
                    vec![Input(0)],
                )
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
            epilogue: None,
        }
    }
}
