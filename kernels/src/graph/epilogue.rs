//! [`fuse_epilogues`]: additions and activations folded into the GEMM before them,
//! additions into the layer norm after them.

use std::collections::HashMap;

use super::splice::{pair_replaced, producer_read_once, rewrite_all, Found, Replacement};
use super::{Graph, GraphError, Node, ValueId};
use crate::op::Op;
use crate::ops::{BinaryFn, GemmSpec, LayerNormSpec, Layout};
use crate::shape::{numel, row_major_strides};
use crate::spec::OpSpec;

/// `graph` with, until none is left:
///
/// * `gemm(A, B) + b`, `b` a row of `n` broadcast over C's rows, as the GEMM's bias;
/// * `gemm(A, B) + R`, `R` of C's shape, as the GEMM's `C` with `beta = 1` (a
///   residual connection);
/// * `act(gemm(A, B))`, `act` an activation (ReLU, GELU, SiLU, …), as the GEMM's
///   activation, applied after its bias and `C`;
/// * `gemm(A, B)·s` and `gemm(A, B)/s`, `s` a constant, as the GEMM's `alpha`
///   (attention's `1/√d` on its scores), where nothing else is added first;
/// * `layer_norm(x + r)` as the norm with `r` its residual input, the norm's `sum`
///   output taking the addition's place for its other readers,
///
/// where the GEMM's or the addition's value has no other reader before the fused node.
/// The fused node rounds once where the pair rounded twice (the addition's operand
/// was stored in the dtype first): equal under the same tolerances.
pub fn fuse_epilogues(graph: &Graph) -> Result<Graph, GraphError> {
    rewrite_all(graph, |graph, readers, k| {
        gemm_epilogue(graph, readers, k)
            .or_else(|| gemm_activation(graph, readers, k))
            .or_else(|| gemm_scale(graph, readers, k))
            .or_else(|| norm_prologue(graph, k))
    })
}

/// A same-dtype addition: its operands as read, and its output shape.
fn addition(spec: &OpSpec) -> Option<(&[usize], &[usize], Vec<usize>)> {
    match spec {
        OpSpec::Binary(b)
            if b.func == BinaryFn::Add && b.out_dtype.is_none_or(|d| d == b.dtype) =>
        {
            let out = spec.outputs().first()?.shape.clone();
            Some((&b.lhs, &b.rhs, out))
        }
        _ => None,
    }
}

/// Whether C is dense and row-major: `[batch…, m, n]` in that order.
pub(super) fn c_is_row_major(g: &GemmSpec) -> bool {
    let c = g.c();
    let packed: Vec<usize> = row_major_strides(&g.batch)
        .iter()
        .map(|s| s * g.m * g.n)
        .collect();
    c.layout == Layout::RowMajor
        && c.ld == g.n
        && (g.batch_count() <= 1 || c.batch_strides == packed)
}

/// Node `k`, an addition of a GEMM's value read by it alone, as that GEMM with a bias
/// or a `C`: the nodes it removes and the fused node.
fn gemm_epilogue(graph: &Graph, readers: &HashMap<ValueId, usize>, k: usize) -> Option<Found> {
    let node = &graph.nodes[k];
    let (lhs, rhs, out) = addition(&node.spec)?;
    for side in 0..2 {
        let (ours, other) = if side == 0 { (lhs, rhs) } else { (rhs, lhs) };
        let Some((p, gemm)) = dense_gemm_read_once(graph, readers, node.inputs[side]) else {
            continue;
        };
        if gemm.beta != 0.0 || gemm.activation.is_some() || ours != out.as_slice() {
            continue;
        }
        let is_row = numel(other) == gemm.n
            && out.last() == Some(&gemm.n)
            && other.iter().rev().skip(1).all(|&d| d == 1);
        let fused = if !gemm.bias && is_row {
            GemmSpec {
                bias: true,
                ..gemm.clone()
            }
        } else if other == out.as_slice() {
            GemmSpec {
                beta: 1.0,
                ..gemm.clone()
            }
        } else {
            continue;
        };
        let mut inputs = graph.nodes[p].inputs.clone();
        inputs.push(node.inputs[1 - side]);
        return Some(gemm_in_place_of(p, k, fused, inputs));
    }
    None
}

/// The GEMM giving `value` (its node and spec), where C is dense and row-major (an
/// op after it would also map the gaps a GEMM leaves) and `value` has one reader and
/// is not an output of the graph.
fn dense_gemm_read_once<'g>(
    graph: &'g Graph,
    readers: &HashMap<ValueId, usize>,
    value: ValueId,
) -> Option<(usize, &'g GemmSpec)> {
    let p = producer_read_once(graph, readers, value)?;
    let OpSpec::Gemm(gemm) = &graph.nodes[p].spec else {
        return None;
    };
    c_is_row_major(gemm).then_some((p, gemm))
}

/// The rewrite removing GEMM node `p` and node `k` after it, `spec` reading `inputs`
/// taking `k`'s place and giving its value.
fn gemm_in_place_of(p: usize, k: usize, spec: GemmSpec, inputs: Vec<ValueId>) -> Found {
    pair_replaced(p, k, OpSpec::Gemm(spec), inputs)
}

/// Node `k`, an activation of a GEMM's value read by it alone, as that GEMM with the
/// activation: the nodes it removes and the fused node. C must be dense (the unary
/// op would also map the gaps a GEMM leaves), the dtypes equal.
fn gemm_activation(graph: &Graph, readers: &HashMap<ValueId, usize>, k: usize) -> Option<Found> {
    let node = &graph.nodes[k];
    let OpSpec::Unary(unary) = &node.spec else {
        return None;
    };
    let act = unary.func.activation()?;
    let (p, gemm) = dense_gemm_read_once(graph, readers, *node.inputs.first()?)?;
    if gemm.activation.is_some() || gemm.dtype != unary.dtype {
        return None;
    }
    let fused = GemmSpec {
        activation: Some(act),
        ..gemm.clone()
    };
    Some(gemm_in_place_of(p, k, fused, graph.nodes[p].inputs.clone()))
}

/// Node `k`, a product or quotient by a constant of a GEMM's value read by it alone
/// (`beta = 0`, no bias or activation: nothing but the product is scaled), as that
/// GEMM with `alpha` scaled: the nodes it removes and the fused node.
fn gemm_scale(graph: &Graph, readers: &HashMap<ValueId, usize>, k: usize) -> Option<Found> {
    let node = &graph.nodes[k];
    let OpSpec::Scalar(scalar) = &node.spec else {
        return None;
    };
    let alpha_times = match (scalar.func, scalar.reversed) {
        (BinaryFn::Mul, _) => scalar.scalar,
        (BinaryFn::Div, false) => 1.0 / scalar.scalar,
        _ => return None,
    };
    let (p, gemm) = dense_gemm_read_once(graph, readers, *node.inputs.first()?)?;
    let plain = gemm.beta == 0.0 && !gemm.bias && gemm.activation.is_none();
    if !plain || scalar.out_dtype.is_some_and(|d| d != gemm.dtype) || scalar.dtype != gemm.dtype {
        return None;
    }
    let scaled = GemmSpec {
        alpha: gemm.alpha * alpha_times,
        ..gemm.clone()
    };
    scaled.validate().ok()?;
    Some(gemm_in_place_of(
        p,
        k,
        scaled,
        graph.nodes[p].inputs.clone(),
    ))
}

/// Node `k`, a layer norm of an addition's value, as the norm with a residual input:
/// the nodes it removes and the fused node.
fn norm_prologue(graph: &Graph, k: usize) -> Option<Found> {
    let node = &graph.nodes[k];
    let OpSpec::LayerNorm(norm) = &node.spec else {
        return None;
    };
    let sum = *node.inputs.first()?;
    let ValueId::Node { node: p, output: 0 } = sum else {
        return None;
    };
    let (lhs, rhs, _) = addition(&graph.nodes[p].spec)?;
    if norm.residual || lhs != rhs || numel(lhs) != numel(&norm.shape) {
        return None;
    }
    // The sum's readers before the norm would read a node placed after them.
    let read_between = graph.nodes[p + 1..k]
        .iter()
        .any(|n| n.inputs.contains(&sum));
    if read_between {
        return None;
    }
    let add = &graph.nodes[p];
    let mut inputs = vec![add.inputs[0], add.inputs[1]];
    inputs.extend(&node.inputs[1..]);
    let mut gives = vec![(ValueId::Node { node: k, output: 0 }, 0), (sum, 1)];
    if norm.save_stats {
        gives.push((ValueId::Node { node: k, output: 1 }, 2));
    }
    Some((
        vec![p, k],
        Replacement {
            at: k,
            node: Node {
                spec: OpSpec::LayerNorm(LayerNormSpec {
                    residual: true,
                    ..norm.clone()
                }),
                inputs,
            },
            gives,
        },
    ))
}
