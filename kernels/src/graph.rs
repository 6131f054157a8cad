//! Graphs of catalogue ops: what a model is before it runs, and the layer whole-graph
//! compilation works on (the ONNX import of issue #16 builds one; a lazy tensor API
//! would too).
//!
//! A [`Graph`] lists its inputs, its nodes in an order where every node reads only
//! graph inputs and earlier nodes' outputs (so a cycle cannot be written down: a read
//! of a later node is the error that names it), and the values it returns.
//! [`Graph::validate`] checks every node's spec and that every value it reads has the
//! dtype and shape its spec expects. [`Graph::reference`] runs the f64 references
//! node by node, each value rounded to its dtype as storing it would.
//!
//! [`fuse_elementwise`] rewrites chains of `unary`, `binary` and `scalar` nodes whose
//! intermediate values nothing else reads into single [`FusedSpec`] nodes: one kernel,
//! one read of each input and one write, equal to the chain under the same
//! tolerances (the fused op rounds every intermediate as a stored one would be).
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

use kernelc_ir::ScalarType;
use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::ops::{FusedNode, FusedSpec};
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
        "node {node} ({op}) input `{}` expects {} {:?}, but {value:?} is {} {:?}",
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
    /// dtype and shape the reader expects, every output a value of the graph.
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
                if have.dtype != sig.dtype || have.shape != sig.shape {
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

/// The dtype of a node `fused` takes: `unary`, `binary` or `scalar` with a result of
/// its own dtype.
fn fusable(spec: &OpSpec) -> Option<ScalarType> {
    match spec {
        OpSpec::Unary(u) => Some(u.dtype),
        OpSpec::Binary(b) if b.out_dtype.is_none_or(|d| d == b.dtype) => Some(b.dtype),
        OpSpec::Scalar(s) if s.out_dtype.is_none_or(|d| d == s.dtype) => Some(s.dtype),
        _ => None,
    }
}

/// A [`fusable`] node as a [`FusedNode`] over its operands' places `at` in the fused
/// node list.
fn as_fused(spec: &OpSpec, at: &[usize]) -> Option<FusedNode> {
    match spec {
        OpSpec::Unary(u) => Some(FusedNode::Unary {
            func: u.func,
            x: at[0],
        }),
        OpSpec::Binary(b) => Some(FusedNode::Binary {
            func: b.func,
            a: at[0],
            b: at[1],
        }),
        OpSpec::Scalar(s) => Some(FusedNode::Scalar {
            func: s.func,
            x: at[0],
            scalar: s.scalar,
            reversed: s.reversed,
        }),
        _ => None,
    }
}

/// One group of fused nodes: the graph nodes it replaces, in order.
#[derive(Default)]
struct Group {
    members: Vec<usize>,
}

/// `graph` with every chain of elementwise nodes (`unary`, `binary`, `scalar` of one
/// dtype) whose intermediate values have no other reader and are not returned merged
/// into one [`FusedSpec`] node. The result computes the same values (see the module
/// doc); it has as many outputs, in the same order.
pub fn fuse_elementwise(graph: &Graph) -> Result<Graph, GraphError> {
    graph.validate()?;
    let mut readers: HashMap<ValueId, usize> = HashMap::new();
    for &v in graph.nodes.iter().flat_map(|n| &n.inputs) {
        *readers.entry(v).or_default() += 1;
    }
    let dtypes: Vec<Option<ScalarType>> = graph.nodes.iter().map(|n| fusable(&n.spec)).collect();
    // Union-find over nodes: `parent[k]` leads to the root naming k's group.
    let mut parent: Vec<usize> = (0..graph.nodes.len()).collect();
    fn root(parent: &mut [usize], mut k: usize) -> usize {
        while parent[k] != k {
            parent[k] = parent[parent[k]];
            k = parent[k];
        }
        k
    }
    for (k, node) in graph.nodes.iter().enumerate() {
        let Some(dtype) = dtypes[k] else {
            continue;
        };
        let shape = node.spec.outputs().first().map(|s| s.shape.clone());
        for &value in &node.inputs {
            let ValueId::Node { node: p, output: 0 } = value else {
                continue;
            };
            // The producer's value lives only in registers: one reader (once), not
            // returned, same dtype, and its output the shape this node computes.
            let private = readers.get(&value) == Some(&1) && !graph.outputs.contains(&value);
            let same_shape = graph.sig(value).map(|s| s.shape) == shape;
            if private && dtypes[p] == Some(dtype) && same_shape {
                let (from, to) = (root(&mut parent, p), root(&mut parent, k));
                parent[from] = to;
            }
        }
    }
    let group_of: Vec<usize> = (0..parent.len()).map(|k| root(&mut parent, k)).collect();
    rebuild(graph, &group_of)
}

/// The graph with each group of more than one node as one fused node (at the place
/// of its last member).
fn rebuild(graph: &Graph, group_of: &[usize]) -> Result<Graph, GraphError> {
    let mut groups: Vec<Group> = (0..graph.nodes.len()).map(|_| Group::default()).collect();
    for (k, &g) in group_of.iter().enumerate() {
        groups[g].members.push(k);
    }
    // New node index of each old node's output 0 (a fused group's: its last member).
    let mut new_index: Vec<Option<usize>> = vec![None; graph.nodes.len()];
    let mut nodes: Vec<Node> = Vec::new();
    let remap = |v: ValueId, new_index: &[Option<usize>]| match v {
        ValueId::Input(_) => Some(v),
        ValueId::Node { node, output } => {
            new_index[node].map(|n| ValueId::Node { node: n, output })
        }
    };
    for (k, node) in graph.nodes.iter().enumerate() {
        let group = &groups[group_of[k]];
        if group.members.len() == 1 {
            let inputs = node
                .inputs
                .iter()
                .map(|&v| remap(v, &new_index))
                .collect::<Option<Vec<_>>>()
                .ok_or(GraphError::Internal("a node reads a value not yet placed"))?;
            new_index[k] = Some(nodes.len());
            nodes.push(Node {
                spec: node.spec.clone(),
                inputs,
            });
            continue;
        }
        if group.members.last() != Some(&k) {
            continue;
        }
        let (spec, reads) = fused_group(graph, group)?;
        let inputs = reads
            .iter()
            .map(|&v| remap(v, &new_index))
            .collect::<Option<Vec<_>>>()
            .ok_or(GraphError::Internal(
                "a fused group reads a value not yet placed",
            ))?;
        for &m in &group.members {
            new_index[m] = Some(nodes.len());
        }
        nodes.push(Node {
            spec: OpSpec::Fused(spec),
            inputs,
        });
    }
    let outputs = graph
        .outputs
        .iter()
        .map(|&v| remap(v, &new_index).ok_or(GraphError::UnknownOutput { value: v }))
        .collect::<Result<Vec<_>, _>>()?;
    let fused = Graph {
        inputs: graph.inputs.clone(),
        nodes,
        outputs,
    };
    fused.validate()?;
    Ok(fused)
}

/// The fused spec of a group and the outside values it reads, in input order.
fn fused_group(graph: &Graph, group: &Group) -> Result<(FusedSpec, Vec<ValueId>), GraphError> {
    let mut reads: Vec<ValueId> = Vec::new();
    let mut fnodes: Vec<FusedNode> = Vec::new();
    // Place in `fnodes` of each member's value.
    let mut place: Vec<(usize, usize)> = Vec::new();
    let mut dtype = ScalarType::F32;
    for &m in &group.members {
        let node = &graph.nodes[m];
        let mut at = Vec::new();
        for &v in &node.inputs {
            let inner = match v {
                ValueId::Node { node: p, output: 0 } => {
                    place.iter().find(|e| e.0 == p).map(|e| e.1)
                }
                _ => None,
            };
            at.push(match inner {
                Some(i) => i,
                None => {
                    let i = match reads.iter().position(|&r| r == v) {
                        Some(i) => i,
                        None => {
                            reads.push(v);
                            reads.len() - 1
                        }
                    };
                    fnodes.push(FusedNode::Input(i));
                    fnodes.len() - 1
                }
            });
        }
        let (d, fnode) =
            fusable(&node.spec)
                .zip(as_fused(&node.spec, &at))
                .ok_or(GraphError::Internal(
                    "a fused group holds a node fused cannot take",
                ))?;
        dtype = d;
        fnodes.push(fnode);
        place.push((m, fnodes.len() - 1));
    }
    let shapes = reads
        .iter()
        .map(|&v| graph.sig(v).map(|s| s.shape))
        .collect::<Option<Vec<_>>>()
        .ok_or(GraphError::Internal(
            "a fused group reads a value without a signature",
        ))?;
    Ok((
        FusedSpec {
            dtype,
            inputs: shapes,
            nodes: fnodes,
        },
        reads,
    ))
}
