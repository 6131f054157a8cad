//! [`fuse_prologues`] and [`fuse_reduce_epilogues`]: an elementwise node, or a fused
//! chain, folded into the reduction or softmax that reads it as its prologue, or into
//! the reduction, softmax or layer norm it reads as its epilogue.

use std::collections::HashMap;

use super::elementwise::{as_fused, fusable};
use super::splice::{pair_replaced, producer_read_once, rewrite_all, Found};
use super::{Graph, GraphError, Node, ValueId};
use crate::ops::{
    FusedNode, FusedReduceSpec, FusedSoftmaxSpec, FusedSpec, LayerNormSpec, ReduceSpec, SoftmaxSpec,
};
use crate::shape::numel;
use crate::spec::OpSpec;

/// `graph` with, until none is left, `reduce(e(x₀, x₁, …))` and
/// `softmax(e(x₀, x₁, …))` as one [`FusedReduceSpec`] or [`FusedSoftmaxSpec`] node,
/// where `e` is a `unary`, `binary`, `scalar` or `fused` node of the row op's dtype
/// whose value nothing else reads (its operands may be broadcast, as an attention
/// mask is). Arg reductions and accumulating ones are left alone.
/// The fused node rounds `e`'s value to the dtype as storing it would: equal under
/// the row op's tolerance and `e`'s own.
pub fn fuse_prologues(graph: &Graph) -> Result<Graph, GraphError> {
    rewrite_all(graph, prologue_into)
}

/// Node `k`, a reduction or softmax of a prologue's value read by it alone, as the
/// fused op: the nodes it removes and the fused node.
fn prologue_into(graph: &Graph, readers: &HashMap<ValueId, usize>, k: usize) -> Option<Found> {
    let node = &graph.nodes[k];
    let (dtype, shape) = match &node.spec {
        OpSpec::Reduce(r) if !r.func.is_arg() && !r.accumulate => (r.dtype, &r.shape),
        OpSpec::Softmax(s) => (s.dtype, &s.shape),
        _ => return None,
    };
    let p = producer_read_once(graph, readers, *node.inputs.first()?)?;
    let producer = &graph.nodes[p];
    let (nodes, reads, wants) = prologue_nodes(producer)?;
    if elementwise_dtype(&producer.spec) != Some(dtype) {
        return None;
    }
    // Inputs none of which is broadcast are read as `x`'s shape (the same elements
    // in the same order, whatever reshape lies between); broadcast ones keep their
    // shapes, which must then broadcast to `x`'s (the fused spec's validation).
    let unbroadcast = wants.iter().all(|w| numel(w) == numel(shape));
    let inputs = if unbroadcast {
        vec![shape.clone(); reads.len()]
    } else {
        wants
    };
    let prologue = FusedSpec {
        dtype,
        inputs,
        nodes,
    };
    let spec = match &node.spec {
        OpSpec::Reduce(r) => OpSpec::FusedReduce(FusedReduceSpec {
            prologue,
            reduce: r.clone(),
            epilogue: None,
        }),
        OpSpec::Softmax(s) => OpSpec::FusedSoftmax(FusedSoftmaxSpec {
            prologue,
            softmax: s.clone(),
            epilogue: None,
        }),
        _ => return None,
    };
    spec.validate().ok()?;
    Some(pair_replaced(p, k, spec, reads))
}

/// The dtype of an elementwise node a prologue or epilogue can take: a `fused` one,
/// or one [`fusable`] makes a single fused node of.
fn elementwise_dtype(spec: &OpSpec) -> Option<kernelc_ir::ScalarType> {
    match spec {
        OpSpec::Fused(f) => Some(f.dtype),
        other => fusable(other),
    }
}

/// The producer as prologue nodes, the values they read and the shape each is read
/// under (a value read twice under one shape, as in `x·x`, is one input).
type Prologue = (Vec<FusedNode>, Vec<ValueId>, Vec<Vec<usize>>);

fn prologue_nodes(producer: &Node) -> Option<Prologue> {
    if let OpSpec::Fused(f) = &producer.spec {
        return Some((f.nodes.clone(), producer.inputs.clone(), f.inputs.clone()));
    }
    let mut reads: Vec<(ValueId, Vec<usize>)> = Vec::new();
    let mut nodes = Vec::new();
    let mut at = Vec::new();
    for (&v, want) in producer.inputs.iter().zip(producer.spec.inputs()) {
        let read = (v, want.shape);
        let i = match reads.iter().position(|r| *r == read) {
            Some(i) => i,
            None => {
                reads.push(read);
                reads.len() - 1
            }
        };
        nodes.push(FusedNode::Input(i));
        at.push(nodes.len() - 1);
    }
    nodes.push(as_fused(&producer.spec, &at)?);
    let (values, shapes) = reads.into_iter().unzip();
    Some((nodes, values, shapes))
}

/// `graph` with, until none is left, `e(reduce(x), y₁, …)`, `e(softmax(x), y₁, …)`
/// and `e(layer_norm(x), y₁, …)` as the row op with the epilogue `e` (a
/// [`FusedReduceSpec`], a [`FusedSoftmaxSpec`] or a [`LayerNormSpec`] with its
/// `epilogue`), where `e` is a `unary`, `binary`, `scalar` or `fused` node
/// of the row op's dtype, the row op's result has no other reader and `e` reads it
/// unbroadcast as its value's shape (the other operands may be broadcast). A
/// reduction whose result `e` reads with or without its kept axes of extent 1 takes
/// `e`'s shape (its `keepdim` set to match).
pub fn fuse_reduce_epilogues(graph: &Graph) -> Result<Graph, GraphError> {
    rewrite_all(graph, epilogue_onto)
}

/// Node `k`, an elementwise node reading a row op's result read by it alone, as that
/// row op with `k` its epilogue: the nodes it removes and the fused node.
fn epilogue_onto(graph: &Graph, readers: &HashMap<ValueId, usize>, k: usize) -> Option<Found> {
    let node = &graph.nodes[k];
    let (nodes, reads, wants) = prologue_nodes(node)?;
    let dtype = elementwise_dtype(&node.spec)?;
    let out = node.spec.outputs().first()?.shape.clone();
    let (slot, p, row) = reads.iter().enumerate().find_map(|(slot, &v)| {
        let p = producer_read_once(graph, readers, v)?;
        Some((slot, p, RowOp::of(&graph.nodes[p].spec)?))
    })?;
    if row.dtype() != dtype || wants[slot] != out {
        return None;
    }
    // The result becomes the epilogue's input 0, the others follow in order.
    let place = |i: usize| match i {
        i if i == slot => 0,
        i if i < slot => i + 1,
        i => i,
    };
    let nodes = nodes
        .into_iter()
        .map(|n| match n {
            FusedNode::Input(i) => FusedNode::Input(place(i)),
            other => other,
        })
        .collect();
    let mut inputs = vec![out.clone()];
    let mut operands = Vec::new();
    for (i, (v, want)) in reads.iter().zip(&wants).enumerate() {
        if i != slot {
            inputs.push(want.clone());
            operands.push(*v);
        }
    }
    let epilogue = FusedSpec {
        dtype,
        inputs,
        nodes,
    };
    let spec = row.with_epilogue(&out, epilogue)?;
    spec.validate().ok()?;
    // The row op's other outputs (a layer norm's `sum`, `stats`) come from the fused
    // node, placed at `k`: neither the epilogue nor a node before `k` may read them.
    let others: Vec<ValueId> = (1..spec.outputs().len())
        .map(|output| ValueId::Node { node: p, output })
        .collect();
    let read_early = graph.nodes[p + 1..=k]
        .iter()
        .any(|n| n.inputs.iter().any(|v| others.contains(v)));
    if read_early {
        return None;
    }
    let mut all = graph.nodes[p].inputs.clone();
    all.extend(operands);
    let (removed, mut replacement) = pair_replaced(p, k, spec, all);
    replacement.gives.extend(others.into_iter().zip(1..));
    Some((removed, replacement))
}

/// A row op an epilogue can join, with its prologue (the identity for a plain one):
/// a reduction, a softmax or a layer norm without an epilogue yet; a reduction that
/// is not an arg reduction, does not accumulate and reduces something.
enum RowOp<'a> {
    Reduce(FusedSpec, &'a ReduceSpec),
    Softmax(FusedSpec, &'a SoftmaxSpec),
    LayerNorm(&'a LayerNormSpec),
}

impl<'a> RowOp<'a> {
    fn of(spec: &'a OpSpec) -> Option<RowOp<'a>> {
        let identity = |dtype, shape: &[usize]| FusedSpec {
            dtype,
            inputs: vec![shape.to_vec()],
            nodes: vec![FusedNode::Input(0)],
        };
        let row = match spec {
            OpSpec::Reduce(r) => RowOp::Reduce(identity(r.dtype, &r.shape), r),
            OpSpec::FusedReduce(f) if f.epilogue.is_none() => {
                RowOp::Reduce(f.prologue.clone(), &f.reduce)
            }
            OpSpec::Softmax(s) => RowOp::Softmax(identity(s.dtype, &s.shape), s),
            OpSpec::FusedSoftmax(f) if f.epilogue.is_none() => {
                RowOp::Softmax(f.prologue.clone(), &f.softmax)
            }
            OpSpec::LayerNorm(n) if n.epilogue.is_none() => RowOp::LayerNorm(n),
            _ => return None,
        };
        match row {
            RowOp::Reduce(_, r) if r.func.is_arg() || r.accumulate || r.reduces_nothing() => None,
            RowOp::Reduce(..) | RowOp::Softmax(..) | RowOp::LayerNorm(_) => Some(row),
        }
    }

    fn dtype(&self) -> kernelc_ir::ScalarType {
        match self {
            RowOp::Reduce(_, r) => r.dtype,
            RowOp::Softmax(_, s) => s.dtype,
            RowOp::LayerNorm(n) => n.dtype,
        }
    }

    /// The fused op with `epilogue`, its result of shape `out` (a reduction's
    /// `keepdim` set to give it), if it can give that shape.
    fn with_epilogue(self, out: &[usize], epilogue: FusedSpec) -> Option<OpSpec> {
        match self {
            RowOp::Reduce(prologue, reduce) => {
                let reduce = [false, true]
                    .into_iter()
                    .map(|flip| ReduceSpec {
                        keepdim: reduce.keepdim != flip,
                        ..reduce.clone()
                    })
                    .find(|r| r.out_shape() == out)?;
                Some(OpSpec::FusedReduce(FusedReduceSpec {
                    prologue,
                    reduce,
                    epilogue: Some(epilogue),
                }))
            }
            RowOp::Softmax(prologue, softmax) => (softmax.shape == out).then(|| {
                OpSpec::FusedSoftmax(FusedSoftmaxSpec {
                    prologue,
                    softmax: softmax.clone(),
                    epilogue: Some(epilogue),
                })
            }),
            RowOp::LayerNorm(norm) => (norm.shape == out).then(|| {
                OpSpec::LayerNorm(LayerNormSpec {
                    epilogue: Some(epilogue),
                    ..norm.clone()
                })
            }),
        }
    }
}
