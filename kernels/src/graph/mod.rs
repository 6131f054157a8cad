//! Graphs of catalogue ops: what a model is before it runs, and the layer whole-graph
//! compilation works on (the ONNX import of issue #16 builds one; a lazy tensor API
//! would too).
//!
//! A [`Graph`] lists its inputs, its nodes in an order where every node reads only
//! graph inputs and earlier nodes' outputs (so a cycle cannot be written down: a read
//! of a later node is the error that names it), and the values it returns.
//! [`Graph::validate`] checks every node's spec and that every value it reads has the
//! dtype and element count its spec expects. Values are dense and row-major, so a
//! node may read a value under another shape of the same element count: a reshape
//! is free, never a node or a copy. [`Graph::reference`] runs the f64 references
//! node by node, each value rounded to its dtype as storing it would.
//!
//! Six rewrites, each equal to the graph it rewrites under the same tolerances
//! (docs/semantics.md, "Graph fusion"), run in this order by [`fuse`]:
//! [`fold_permutes`] reads a permute's input in place as a GEMM operand (strides and
//! a leading dimension instead of a copy); [`fuse_epilogues`] folds an addition after
//! a GEMM into its bias or its `C` (`beta = 1`), an activation after it into its
//! activation, a constant factor into its `alpha`, and an addition before a layer norm
//! into the norm's residual input (whose `sum` output serves the addition's other
//! readers); [`fuse_attention`] turns `softmax(α·Q·Kᵀ + mask)·V` into one attention
//! node; [`fuse_elementwise`] merges chains of `unary`, `binary` and `scalar` nodes
//! whose intermediate values nothing else reads into single [`FusedSpec`] nodes (one
//! kernel, one read of each input and one write; the fused op rounds every
//! intermediate as a stored one would be); [`fuse_prologues`] folds such a node (or a
//! single elementwise one) into the reduction or softmax reading it (`Σ x·x`,
//! `softmax(x·s + b)`: one kernel, the row op's input never stored), and
//! [`fuse_reduce_epilogues`] one reading a reduction's, softmax's or layer norm's
//! result into that op (`√(mean x² + ε)`, `softmax(x)·keep`, `norm(x)·(1 + s) + t`).
//!
//! ```
//! use kernelc_kernels::graph::{fuse_elementwise, Graph, Node, ValueId};
//! use kernelc_kernels::spec::*;
//! use kernelc_ir::ScalarType::F32;
//!
//! // relu(x + b) · 2: three elementwise nodes, one kernel once fused.
//! let x = TensorSig::new("x", F32, vec![4, 8]);
//! let b = TensorSig::new("b", F32, vec![8]);
//! let add = OpSpec::Binary(BinarySpec {
//!     func: BinaryFn::Add,
//!     dtype: F32,
//!     lhs: vec![4, 8],
//!     rhs: vec![8],
//!     out_dtype: None,
//! });
//! let relu = OpSpec::Unary(UnarySpec { func: UnaryFn::Relu, dtype: F32, shape: vec![4, 8] });
//! let twice = OpSpec::Scalar(ScalarSpec {
//!     func: BinaryFn::Mul,
//!     dtype: F32,
//!     shape: vec![4, 8],
//!     scalar: 2.0,
//!     reversed: false,
//!     out_dtype: None,
//! });
//! let value = |node| ValueId::Node { node, output: 0 };
//! let graph = Graph {
//!     inputs: vec![x, b],
//!     nodes: vec![
//!         Node { spec: add, inputs: vec![ValueId::Input(0), ValueId::Input(1)] },
//!         Node { spec: relu, inputs: vec![value(0)] },
//!         Node { spec: twice, inputs: vec![value(1)] },
//!     ],
//!     outputs: vec![value(2)],
//! };
//! let fused = fuse_elementwise(&graph)?;
//! assert_eq!(fused.nodes.len(), 1);
//! assert!(matches!(fused.nodes[0].spec, OpSpec::Fused(_)));
//! # Ok::<(), kernelc_kernels::graph::GraphError>(())
//! ```

mod attention;
mod elementwise;
mod epilogue;
mod rows;
mod splice;
mod views;

pub use attention::fuse_attention;
pub use elementwise::fuse_elementwise;
pub use epilogue::fuse_epilogues;
pub use rows::{fuse_prologues, fuse_reduce_epilogues};
pub use views::{fold_output_permutes, fold_permutes};

/// The whole fusion pipeline for a target of `caps`: [`fold_permutes`],
/// [`fuse_epilogues`], [`fuse_attention`] (not on a serial target: there two GEMMs
/// on the CPU's GEMM schedule and a softmax beat the attention kernel; a transformer
/// block's plan with it ran at 0.87x of node by node on the H100 host's CPU), then
/// [`fold_output_permutes`], [`fuse_elementwise`], [`fuse_prologues`] and
/// [`fuse_reduce_epilogues`]. Each pattern
/// is matched on what the one before left: permutes folded first show an attention's
/// layout, and elementwise chains merge last so that the ops the other rewrites fold
/// are still single nodes.
pub fn fuse(graph: &Graph, caps: &TargetCaps) -> Result<Graph, GraphError> {
    let epilogues = fuse_epilogues(&fold_permutes(graph)?)?;
    let attention = if caps.is_serial() {
        epilogues
    } else {
        fuse_attention(&epilogues)?
    };
    let outputs = fold_output_permutes(&attention)?;
    fuse_reduce_epilogues(&fuse_prologues(&fuse_elementwise(&outputs)?)?)
}

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::lower::TargetCaps;
#[cfg(doc)]
use crate::ops::FusedSpec;
use crate::reference::round_to;
use crate::spec::{OpSpec, TensorSig};
use crate::SpecError;

/// A value of a graph: a graph input, or output `output` of node `node`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ValueId {
    Input(usize),
    Node { node: usize, output: usize },
}

/// One op of a graph and the values it reads, in its spec's input order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub spec: OpSpec,
    pub inputs: Vec<ValueId>,
}

/// See the module doc.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Graph {
    pub inputs: Vec<TensorSig>,
    pub nodes: Vec<Node>,
    pub outputs: Vec<ValueId>,
}

/// Why a graph is not valid; each names the node (by index) it is about.
#[derive(Debug, Error)]
pub enum GraphError {
    #[error("node {node} ({op}): {source}")]
    Spec {
        node: usize,
        op: String,
        source: SpecError,
    },
    #[error("node {node} ({op}) reads {value:?}, which is not a graph input or an earlier node's output (a cycle or a missing value)")]
    UnknownValue {
        node: usize,
        op: String,
        value: ValueId,
    },
    #[error("node {node} ({op}) takes {expected} inputs, {found} given")]
    InputCount {
        node: usize,
        op: String,
        expected: usize,
        found: usize,
    },
    #[error(
        "node {node} ({op}) input `{}` expects {} {:?}, but {value:?} is {} {:?} (the dtype and the element count must agree)",
        want.name, want.dtype, want.shape, have.dtype, have.shape
    )]
    Mismatch {
        node: usize,
        op: String,
        value: ValueId,
        /// The input as the node's spec declares it, and the value it was given.
        want: Box<TensorSig>,
        have: Box<TensorSig>,
    },
    #[error("graph output {value:?} is not a value of the graph")]
    UnknownOutput { value: ValueId },
    #[error("the graph takes {expected} inputs, {found} given")]
    InputData { expected: usize, found: usize },
    /// A state a validated graph cannot reach: a bug in kernelc, reported.
    #[error("internal error in the graph layer: {0}")]
    Internal(&'static str),
    #[error("graph input {input} has {found} values, its signature {expected}")]
    InputLength {
        input: usize,
        expected: usize,
        found: usize,
    },
}

impl Graph {
    /// The signature of `value` (after [`Graph::validate`]: every value exists).
    pub fn sig(&self, value: ValueId) -> Option<TensorSig> {
        match value {
            ValueId::Input(i) => self.inputs.get(i).cloned(),
            ValueId::Node { node, output } => {
                self.nodes.get(node)?.spec.outputs().get(output).cloned()
            }
        }
    }

    /// Every node's spec valid, every read of an existing earlier value with the
    /// dtype and element count the reader expects (see the module doc), every output
    /// a value of the graph.
    pub fn validate(&self) -> Result<(), GraphError> {
        for (k, node) in self.nodes.iter().enumerate() {
            let op = node.spec.name();
            node.spec.validate().map_err(|source| GraphError::Spec {
                node: k,
                op: op.clone(),
                source,
            })?;
            let want = node.spec.inputs();
            if want.len() != node.inputs.len() {
                return Err(GraphError::InputCount {
                    node: k,
                    op,
                    expected: want.len(),
                    found: node.inputs.len(),
                });
            }
            for (sig, &value) in want.iter().zip(&node.inputs) {
                let earlier = match value {
                    ValueId::Input(_) => true,
                    ValueId::Node { node, .. } => node < k,
                };
                let have = self.sig(value).filter(|_| earlier).ok_or_else(|| {
                    GraphError::UnknownValue {
                        node: k,
                        op: op.clone(),
                        value,
                    }
                })?;
                if have.dtype != sig.dtype || have.numel() != sig.numel() {
                    return Err(GraphError::Mismatch {
                        node: k,
                        op,
                        value,
                        want: Box::new(sig.clone()),
                        have: Box::new(have),
                    });
                }
            }
        }
        match self.outputs.iter().find(|&&v| self.sig(v).is_none()) {
            Some(&value) => Err(GraphError::UnknownOutput { value }),
            None => Ok(()),
        }
    }

    /// The f64 reference node by node, every value (the inputs too) rounded to its
    /// dtype as storing it would: the values of `outputs`.
    pub fn reference(&self, inputs: &[&[f64]]) -> Result<Vec<Vec<f64>>, GraphError> {
        self.validate()?;
        if inputs.len() != self.inputs.len() {
            return Err(GraphError::InputData {
                expected: self.inputs.len(),
                found: inputs.len(),
            });
        }
        for (i, (sig, data)) in self.inputs.iter().zip(inputs).enumerate() {
            if data.len() != sig.numel() {
                return Err(GraphError::InputLength {
                    input: i,
                    expected: sig.numel(),
                    found: data.len(),
                });
            }
        }
        // The inputs as tensors of their dtypes hold them.
        let inputs: Vec<Vec<f64>> = self
            .inputs
            .iter()
            .zip(inputs)
            .map(|(sig, data)| data.iter().map(|&x| round_to(sig.dtype, x)).collect())
            .collect();
        let mut values: Vec<Vec<Vec<f64>>> = Vec::with_capacity(self.nodes.len());
        for (k, node) in self.nodes.iter().enumerate() {
            let args: Vec<&[f64]> = node
                .inputs
                .iter()
                .map(|&v| match v {
                    ValueId::Input(i) => inputs[i].as_slice(),
                    ValueId::Node { node, output } => values[node][output].as_slice(),
                })
                .collect();
            let outs = crate::reference(&node.spec, &args).map_err(|source| GraphError::Spec {
                node: k,
                op: node.spec.name(),
                source,
            })?;
            let sigs = node.spec.outputs();
            let rounded = outs
                .into_iter()
                .zip(&sigs)
                .map(|(v, sig)| v.into_iter().map(|x| round_to(sig.dtype, x)).collect())
                .collect();
            values.push(rounded);
        }
        Ok(self
            .outputs
            .iter()
            .map(|&v| match v {
                ValueId::Input(i) => inputs[i].clone(),
                ValueId::Node { node, output } => values[node][output].clone(),
            })
            .collect())
    }
}
