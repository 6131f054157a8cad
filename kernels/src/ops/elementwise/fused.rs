//! `fused`: a chain of elementwise ops (`unary`, `binary`, `scalar`) run as one
//! kernel, what a graph compiler makes of an elementwise subgraph: one read of each
//! input, one write of the result, the intermediate values in registers.
//!
//! The nodes form a DAG in order: node `k` reads inputs (`input` nodes) and nodes
//! before it, and the last node is the output. Every node's value is rounded to the
//! dtype, as storing it between node-by-node kernels would (a no-op for f32, f64 and
//! 32/64-bit integers), so the fused op equals the chain it replaces under the same
//! per-node tolerances.
//!
//! Everything of the op is in this file: spec, validation, f64 reference, lowering,
//! tolerance and conformance cases.

use kernelc_ir::builder::{Body, E};
use kernelc_ir::ScalarType::{self, *};
use serde::{Deserialize, Serialize};

use super::lower::{binary_value, unary_value};
use super::reference::{apply_binary, apply_unary, broadcast_map};
use super::spec::binary_tolerance;
use super::{BinaryFn, UnaryFn};
use crate::conformance::inputs::Domain;
use crate::error::SpecError;
use crate::lower::map::map_op;
use crate::lower::math::{bind, compute_type, Num};
use crate::lower::{LowerError, Plan, TargetCaps, Uniform};
use crate::op::Op;
use crate::reference::{attribute, round_to};
use crate::shape::{broadcast_shapes, check_shape};
use crate::spec::{check_dtype, OpSpec, TensorSig, NUMERIC};
use crate::tolerance::Tolerance;

/// One node of a [`FusedSpec`]. Operands are earlier nodes, by index.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FusedNode {
    /// Input tensor `i` of the op.
    Input(usize),
    Unary {
        func: UnaryFn,
        x: usize,
    },
    Binary {
        func: BinaryFn,
        a: usize,
        b: usize,
    },
    /// `f(x, scalar)`, or `f(scalar, x)` when `reversed`.
    Scalar {
        func: BinaryFn,
        x: usize,
        #[serde(with = "crate::spec::exact_f64")]
        scalar: f64,
        #[serde(default)]
        reversed: bool,
    },
}

impl FusedNode {
    /// `func(x₀, x₁)` of inputs 0 and 1: the start of a DAG a split op builds.
    pub(crate) fn of_two_inputs(func: BinaryFn) -> Vec<FusedNode> {
        vec![
            FusedNode::Input(0),
            FusedNode::Input(1),
            FusedNode::Binary { func, a: 0, b: 1 },
        ]
    }

    /// The earlier nodes this one reads.
    fn operands(&self) -> Vec<usize> {
        match *self {
            FusedNode::Input(_) => Vec::new(),
            FusedNode::Unary { x, .. } | FusedNode::Scalar { x, .. } => vec![x],
            FusedNode::Binary { a, b, .. } => vec![a, b],
        }
    }
}

/// Elementwise `nodes` over `inputs` (NumPy-broadcast to their common shape) in one
/// kernel; the last node is the output. Inputs: `x0`, `x1`, ... Outputs: `out`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FusedSpec {
    pub dtype: ScalarType,
    pub inputs: Vec<Vec<usize>>,
    pub nodes: Vec<FusedNode>,
}

impl FusedSpec {
    /// The broadcast shape of the inputs (empty when they do not broadcast).
    pub fn out_shape(&self) -> Vec<usize> {
        self.broadcast().unwrap_or_default()
    }

    fn broadcast(&self) -> Result<Vec<usize>, SpecError> {
        let mut out: Vec<usize> = Vec::new();
        for shape in &self.inputs {
            out = broadcast_shapes(&out, shape)?;
        }
        Ok(out)
    }

    /// Each node's per-call value (a scalar, a leaky-ReLU slope) as a uniform, named
    /// after its node.
    fn node_uniforms(&self, k: usize) -> Vec<Uniform> {
        let ty = compute_type(self.dtype);
        match &self.nodes[k] {
            FusedNode::Scalar { scalar, .. } => {
                vec![Uniform::new(&format!("scalar{k}"), ty, *scalar)]
            }
            FusedNode::Unary { func, .. } => func
                .uniforms(self.dtype)
                .into_iter()
                .map(|u| Uniform::new(&format!("{}{k}", u.name), u.value.ty(), u.value.to_f64()))
                .collect(),
            FusedNode::Input(_) | FusedNode::Binary { .. } => Vec::new(),
        }
    }

    /// Whether values of the dtype are exact in its compute type (nothing to round
    /// between nodes).
    fn rounds_between_nodes(&self) -> bool {
        compute_type(self.dtype) != self.dtype
    }
}

impl FusedSpec {
    /// The output node's value from the inputs' values (`n`'s compute type and
    /// lanes) and the per-call values (in [`Op::uniforms`] order). Each node but the
    /// last is rounded to the dtype as a stored intermediate would be; the last too
    /// when `round_last` (a prologue's value, stored before the op after it reads it).
    pub(crate) fn value(
        &self,
        f: &mut Body,
        n: &Num,
        inputs: Vec<E>,
        params: &[E],
        round_last: bool,
    ) -> E {
        let mut next_param = 0;
        let rounds = self.rounds_between_nodes();
        let mut v: Vec<E> = Vec::with_capacity(self.nodes.len());
        for (k, node) in self.nodes.iter().enumerate() {
            let own = self.node_uniforms(k).len();
            let node_params = params.get(next_param..next_param + own).unwrap_or(&[]);
            next_param += own;
            let value = match *node {
                FusedNode::Input(i) => inputs[i].clone(),
                FusedNode::Unary { func, x } => unary_value(f, n, func, v[x].clone(), node_params),
                FusedNode::Binary { func, a, b } => {
                    binary_value(f, n, func, v[a].clone(), v[b].clone())
                }
                FusedNode::Scalar {
                    func, x, reversed, ..
                } => {
                    let s = n.splat(node_params[0].clone());
                    match reversed {
                        true => binary_value(f, n, func, s, v[x].clone()),
                        false => binary_value(f, n, func, v[x].clone(), s),
                    }
                }
            };
            let last = k + 1 == self.nodes.len();
            let value = if rounds && (!last || round_last) {
                n.round_trip(value, self.dtype)
            } else {
                value
            };
            v.push(bind(f, &format!("v{k}"), value));
        }
        v.pop().unwrap_or_else(|| n.lit(0.0))
    }

    /// The nodes' own allowance, in ULPs of the compute type (see [`Op::tolerance`]).
    pub(crate) fn ulps(&self) -> f64 {
        let ulps = self
            .nodes
            .iter()
            .map(|n| match n {
                FusedNode::Input(_) => 0.0,
                FusedNode::Unary { func, .. } => func.traits().ulps,
                FusedNode::Binary { func, .. } | FusedNode::Scalar { func, .. } => {
                    binary_tolerance(*func).ulps
                }
            })
            .sum::<f64>();
        if ulps == 0.0 {
            0.0
        } else {
            ulps + self.nodes.len() as f64
        }
    }
}

impl Op for FusedSpec {
    fn validate(&self) -> Result<(), SpecError> {
        check_dtype("fused", self.dtype, NUMERIC)?;
        if self.inputs.is_empty() || self.nodes.is_empty() {
            return Err(SpecError::bad_attr(
                "nodes",
                self.nodes.len(),
                "a fused op reads at least one input and has at least one node",
            ));
        }
        for shape in &self.inputs {
            check_shape("x", shape)?;
        }
        self.broadcast()?;
        for (k, node) in self.nodes.iter().enumerate() {
            let bad = |why: String| Err(SpecError::bad_attr("nodes", k, &why));
            if let Some(&late) = node.operands().iter().find(|&&o| o >= k) {
                return bad(format!("node {k} reads node {late}, not an earlier one"));
            }
            match node {
                FusedNode::Input(i) if *i >= self.inputs.len() => {
                    return bad(format!("node {k} reads input {i} of {}", self.inputs.len()))
                }
                FusedNode::Input(_) => {}
                FusedNode::Unary { func, .. } => {
                    check_dtype(
                        &format!("fused unary {}", func.name()),
                        self.dtype,
                        func.allowed_dtypes(),
                    )?;
                    func.check_params()?;
                }
                FusedNode::Binary { func, .. } | FusedNode::Scalar { func, .. } => check_dtype(
                    &format!("fused {}", func.name()),
                    self.dtype,
                    func.allowed_dtypes(),
                )?,
            }
        }
        Ok(())
    }
    fn inputs(&self) -> Vec<TensorSig> {
        self.inputs
            .iter()
            .enumerate()
            .map(|(i, s)| TensorSig::new(&format!("x{i}"), self.dtype, s.clone()))
            .collect()
    }
    fn outputs(&self) -> Vec<TensorSig> {
        vec![TensorSig::new("out", self.dtype, self.out_shape())]
    }
    fn uniforms(&self) -> Vec<Uniform> {
        (0..self.nodes.len())
            .flat_map(|k| self.node_uniforms(k))
            .collect()
    }
    fn structural(&self) -> Self {
        let nodes = self
            .nodes
            .iter()
            .map(|n| match n {
                FusedNode::Scalar {
                    func, x, reversed, ..
                } => FusedNode::Scalar {
                    func: *func,
                    x: *x,
                    scalar: 0.0,
                    reversed: *reversed,
                },
                FusedNode::Unary { func, x } => FusedNode::Unary {
                    func: func.structural(),
                    x: *x,
                },
                other @ (FusedNode::Input(_) | FusedNode::Binary { .. }) => other.clone(),
            })
            .collect();
        FusedSpec {
            nodes,
            ..self.clone()
        }
    }
    fn reference(&self, i: &[&[f64]]) -> Vec<Vec<f64>> {
        let shapes: Vec<&[usize]> = self.inputs.iter().map(Vec::as_slice).collect();
        let dtype = self.dtype;
        let out = broadcast_map(&shapes, i, &self.out_shape(), |x| {
            let mut v: Vec<f64> = Vec::with_capacity(self.nodes.len());
            for node in &self.nodes {
                let value = match *node {
                    FusedNode::Input(k) => x[k],
                    FusedNode::Unary { func, x } => {
                        apply_unary(func.as_received(dtype), dtype, v[x])
                    }
                    FusedNode::Binary { func, a, b } => apply_binary(func, dtype, v[a], v[b]),
                    FusedNode::Scalar {
                        func,
                        x,
                        scalar,
                        reversed,
                    } => {
                        let s = attribute(dtype, scalar);
                        match reversed {
                            true => apply_binary(func, dtype, s, v[x]),
                            false => apply_binary(func, dtype, v[x], s),
                        }
                    }
                };
                // Stored between node-by-node kernels: rounded to the dtype.
                v.push(round_to(dtype, value));
            }
            v.last().copied().unwrap_or(f64::NAN)
        });
        vec![out]
    }
    fn lower(&self, caps: &TargetCaps) -> Result<Plan, LowerError> {
        map_op(
            OpSpec::Fused(self.clone()),
            caps,
            compute_type(self.dtype),
            |f, n, inputs, params| self.value(f, n, inputs.to_vec(), params, false),
        )
    }
    /// Pieces of the output's rows, each input split with them or, broadcast along
    /// them, bound whole.
    fn lower_large(&self, caps: &TargetCaps) -> Option<Result<Plan, LowerError>> {
        let out = self.out_shape();
        let shapes: Vec<&[usize]> = self.inputs.iter().map(Vec::as_slice).collect();
        Some(crate::lower::split::split_map(
            "fused",
            caps,
            &out,
            &shapes,
            1,
            |inputs, _| {
                OpSpec::Fused(FusedSpec {
                    inputs: inputs.to_vec(),
                    ..self.clone()
                })
            },
        ))
    }
    /// Each node's own allowance, added: every node rounds once more than the one
    /// before it saw, and the cases chain well-conditioned functions.
    fn tolerance(&self) -> Tolerance {
        let ulps = self.ulps();
        if ulps == 0.0 {
            Tolerance::EXACT
        } else {
            Tolerance::result(ulps)
        }
    }
    /// Inputs in `[−2, 2]`: away from where a chain of the cases' functions loses its
    /// relative accuracy.
    fn domain(&self, input: &TensorSig) -> Domain {
        if input.dtype.is_float() {
            Domain::Real(0.25, 2.0)
        } else {
            Domain::of_dtype(input.dtype)
        }
    }
    fn cases() -> Vec<Self> {
        use FusedNode::*;
        let bin = |func, a, b| Binary { func, a, b };
        let un = |func, x| Unary { func, x };
        let sc = |func, x, scalar| Scalar {
            func,
            x,
            scalar,
            reversed: false,
        };
        vec![
            // A bias, a scale and a sigmoid gate: (x + b)·σ(0.5·(x + b)), b broadcast.
            FusedSpec {
                dtype: F32,
                inputs: vec![vec![7, 13], vec![13]],
                nodes: vec![
                    Input(0),
                    Input(1),
                    bin(BinaryFn::Add, 0, 1),
                    sc(BinaryFn::Mul, 2, 0.5),
                    un(UnaryFn::Sigmoid, 3),
                    bin(BinaryFn::Mul, 2, 4),
                ],
            },
            // f16: every intermediate rounded, a reversed scalar, relu and max_nan.
            FusedSpec {
                dtype: F16,
                inputs: vec![vec![1000], vec![1000]],
                nodes: vec![
                    Input(0),
                    Input(1),
                    bin(BinaryFn::Mul, 0, 1),
                    Scalar {
                        func: BinaryFn::Sub,
                        x: 2,
                        scalar: 1.5,
                        reversed: true,
                    },
                    un(UnaryFn::Relu, 3),
                    bin(BinaryFn::MaxNan, 4, 0),
                ],
            },
            // Integers wrap as each node's kernel would: i8 intermediates.
            FusedSpec {
                dtype: I8,
                inputs: vec![vec![3, 1], vec![1, 5]],
                nodes: vec![
                    Input(0),
                    Input(1),
                    bin(BinaryFn::Mul, 0, 1),
                    sc(BinaryFn::Add, 2, 100.0),
                    bin(BinaryFn::FloorMod, 3, 1),
                ],
            },
            // bf16 broadcast over three dims, a leaky ReLU slope per call, then tanh.
            FusedSpec {
                dtype: Bf16,
                inputs: vec![vec![2, 3, 5], vec![3, 1]],
                nodes: vec![
                    Input(0),
                    Input(1),
                    bin(BinaryFn::Sub, 0, 1),
                    un(UnaryFn::LeakyRelu { slope: 0.125 }, 2),
                    un(UnaryFn::Tanh, 3),
                ],
            },
            // One input, one node: a copy. f64.
            FusedSpec {
                dtype: F64,
                inputs: vec![vec![257]],
                nodes: vec![Input(0)],
            },
        ]
    }
    fn example() -> Self {
        use FusedNode::*;
        FusedSpec {
            dtype: F32,
            inputs: vec![vec![4, 8], vec![8]],
            nodes: vec![
                Input(0),
                Input(1),
                Binary {
                    func: BinaryFn::Add,
                    a: 0,
                    b: 1,
                },
                Unary {
                    func: UnaryFn::Relu,
                    x: 2,
                },
            ],
        }
    }
}
