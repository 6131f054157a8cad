//! [`fuse_attention`]: `softmax(scale·Q·Kᵀ + mask)·V` as one attention node, the
//! score matrix never stored.

use std::collections::HashMap;

use super::epilogue::c_is_row_major;
use super::splice::{read_once, rewrite_all, Found, Replacement};
use super::{Graph, GraphError, Node, ValueId};
use crate::op::Op;
use crate::ops::{
    AttentionLayout, AttentionSpec, BinaryFn, CausalAlign, GemmSpec, Layout, MatrixPlacement,
};
use crate::shape::row_major_strides;
use crate::spec::OpSpec;

/// `graph` with every `softmax(α·Q·Kᵀ (+ mask))·V` (two batched GEMMs over
/// `[batch, heads]` or one batch dim, a softmax over the keys, the mask an addition,
/// or the scores GEMM's bias or `C`, as [`super::fuse_epilogues`] leaves it) whose
/// intermediates nothing else reads, as one attention node with `scale = α`. Q, K
/// and V must be placed alike as `[batch, heads, seq, head_dim]` or
/// `[batch, seq, heads, head_dim]` (the strides [`super::fold_permutes`] gives a
/// GEMM reading heads split out of a projection); the output is the second GEMM's
/// `[batch, heads, seq_q, head_dim]`, or the `[batch, seq_q, heads, head_dim]` of a
/// permute after it.
///
/// Equal to the node-by-node graph under the tolerance table (the scores stay in
/// the compute type instead of rounding to the dtype), with one documented
/// difference: a query whose every score is `−∞` outputs zeros even where V holds
/// NaN or `∞` (kernelc's softmax gives that row zeros; its product with such a V is
/// NaN). docs/semantics.md ("Graph fusion") states it. [`super::fuse`] runs it on
/// parallel targets only.
pub fn fuse_attention(graph: &Graph) -> Result<Graph, GraphError> {
    rewrite_all(graph, attention_at)
}

/// The attention a GEMM at node `k` (the product with V) ends, if it ends one.
fn attention_at(graph: &Graph, readers: &HashMap<ValueId, usize>, k: usize) -> Option<Found> {
    let once = |v: ValueId| read_once(graph, readers, v);
    let node = &graph.nodes[k];
    let OpSpec::Gemm(pv) = &node.spec else {
        return None;
    };
    // P = softmax(scores), read by this GEMM alone as A.
    let (probs, softmax) = producer(graph, node.inputs[0], |s| match s {
        OpSpec::Softmax(s) => Some(s.clone()),
        _ => None,
    })?;
    if !once(node.inputs[0])
        || softmax.log
        || softmax.axis + 1 != softmax.shape.len()
        || softmax.dtype != pv.dtype
    {
        return None;
    }
    let mut removed = vec![probs, k];
    // The scores: the first GEMM's value, or it plus a mask.
    let mut scores = graph.nodes[probs].inputs[0];
    let mut added_mask = None;
    if let Some((add, shapes)) = producer(graph, scores, addition_shapes) {
        if !once(scores) {
            return None;
        }
        // The scores are the operand a GEMM gives; the mask the other.
        let inputs = &graph.nodes[add].inputs;
        let side = (0..2).find(|&s| {
            producer(graph, inputs[s], |spec| {
                matches!(spec, OpSpec::Gemm(_)).then_some(())
            })
            .is_some()
        })?;
        added_mask = Some((inputs[1 - side], shapes, side));
        removed.push(add);
        scores = inputs[side];
    }
    let (qk_node, qk) = producer(graph, scores, |s| match s {
        OpSpec::Gemm(g) => Some(g.clone()),
        _ => None,
    })?;
    if !once(scores) {
        return None;
    }
    removed.push(qk_node);
    let dims = Dims::of(&qk, pv)?;
    if softmax.shape.last() != Some(&dims.seq_k) {
        return None;
    }
    let score_shape = [qk.batch.as_slice(), &[dims.seq_q, dims.seq_k]].concat();
    // A mask from the addition (it must add to the scores as they are), or one the
    // scores GEMM took as its bias or its C; not two.
    let qk_inputs = &graph.nodes[qk_node].inputs;
    let folded_mask = match (qk.bias, qk.beta != 0.0) {
        (false, false) => None,
        (true, false) => Some((qk_inputs[2], vec![dims.seq_k])),
        (false, true) if qk.beta == 1.0 && c_is_row_major(&qk) => {
            Some((qk_inputs[2], score_shape.clone()))
        }
        _ => return None,
    };
    let mask = match (added_mask, folded_mask) {
        (Some((value, shapes, side)), None) => {
            if shapes[side] != score_shape {
                return None;
            }
            Some((value, shapes[1 - side].clone()))
        }
        (None, folded) => folded,
        (Some(_), Some(_)) => return None,
    };
    // The output: the GEMM's `[b, h, s, d]`, or a permute of it to `[b, s, h, d]`.
    let mut out_layout = AttentionLayout::Bhsd;
    let mut last = k;
    let pv_value = ValueId::Node { node: k, output: 0 };
    if let Some(p) = sole_reader(graph, pv_value).filter(|_| once(pv_value)) {
        if let OpSpec::Permute(perm) = &graph.nodes[p].spec {
            let bhsd = [dims.batch, dims.heads, dims.seq_q, dims.head_dim];
            if qk.batch.len() == 2 && perm.perm == [0, 2, 1, 3] && perm.shape == bhsd {
                out_layout = AttentionLayout::Bshd;
                removed.push(p);
                last = p;
            }
        }
    }
    if !c_is_row_major(pv) {
        return None;
    }
    let (q, kk, v) = (qk_inputs[0], qk_inputs[1], node.inputs[1]);
    for (placement, value) in [(qk.a(), q), (qk.b(), kk), (pv.b(), v)] {
        let whole = graph.sig(value)?.numel() == placement.extent(&qk.batch);
        if dims.layout_of(&placement) != Some(out_layout) || !whole {
            return None;
        }
    }
    let spec = AttentionSpec {
        dtype: pv.dtype,
        layout: out_layout,
        batch: dims.batch,
        heads: dims.heads,
        kv_heads: dims.heads,
        seq_q: dims.seq_q,
        seq_k: dims.seq_k,
        head_dim: dims.head_dim,
        scale: qk.alpha,
        causal: false,
        causal_align: CausalAlign::BottomRight,
        mask: mask.as_ref().map(|(_, shape)| shape.clone()),
        lse: false,
    };
    spec.validate().ok()?;
    let mut inputs = vec![q, kk, v];
    inputs.extend(mask.map(|(value, _)| value));
    Some((
        removed,
        Replacement {
            at: last,
            node: Node {
                spec: OpSpec::Attention(spec),
                inputs,
            },
            gives: vec![(
                ValueId::Node {
                    node: last,
                    output: 0,
                },
                0,
            )],
        },
    ))
}

/// The node giving `value` as its only output, with what `pick` takes of its spec.
fn producer<T>(
    graph: &Graph,
    value: ValueId,
    pick: impl Fn(&OpSpec) -> Option<T>,
) -> Option<(usize, T)> {
    let ValueId::Node { node, output: 0 } = value else {
        return None;
    };
    Some((node, pick(&graph.nodes[node].spec)?))
}

/// The operand shapes of a same-dtype addition.
fn addition_shapes(spec: &OpSpec) -> Option<[Vec<usize>; 2]> {
    match spec {
        OpSpec::Binary(b)
            if b.func == BinaryFn::Add && b.out_dtype.is_none_or(|d| d == b.dtype) =>
        {
            Some([b.lhs.clone(), b.rhs.clone()])
        }
        _ => None,
    }
}

/// The one node reading `value`, if exactly one does.
fn sole_reader(graph: &Graph, value: ValueId) -> Option<usize> {
    let mut readers = graph
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.inputs.contains(&value));
    let (first, _) = readers.next()?;
    readers.next().is_none().then_some(first)
}

/// The attention's sizes, read off its two GEMMs.
struct Dims {
    batch: usize,
    heads: usize,
    seq_q: usize,
    seq_k: usize,
    head_dim: usize,
}

impl Dims {
    /// `qk` = `α·Q·Kᵀ` (`[batch…, seq_q, seq_k]`, K stored `[seq_k, d]`) and `pv` =
    /// `P·V` over the same batch reading P packed: their sizes, or `None`.
    fn of(qk: &GemmSpec, pv: &GemmSpec) -> Option<Dims> {
        let plain = |g: &GemmSpec| {
            g.layout == Layout::RowMajor
                && !g.trans_a
                && g.activation.is_none()
                && g.input_rounding.is_none()
        };
        let packed_p = pv.a().ld == qk.n
            && pv.stride_a.as_ref().is_none_or(|s| {
                let packed = row_major_strides(&pv.batch);
                (0..s.len()).all(|d| pv.batch[d] <= 1 || s[d] == packed[d] * qk.m * qk.n)
            });
        let fits = plain(qk)
            && plain(pv)
            && qk.trans_b
            && !pv.trans_b
            && pv.alpha == 1.0
            && pv.beta == 0.0
            && !pv.bias
            && pv.batch == qk.batch
            && pv.dtype == qk.dtype
            && (pv.m, pv.k, pv.n) == (qk.m, qk.n, qk.k)
            && packed_p
            && c_is_row_major(qk);
        let (batch, heads) = match qk.batch.as_slice() {
            [] => (1, 1),
            [h] => (1, *h),
            [b, h] => (*b, *h),
            _ => return None,
        };
        fits.then_some(Dims {
            batch,
            heads,
            seq_q: qk.m,
            seq_k: qk.n,
            head_dim: qk.k,
        })
    }

    /// The layout a `[seq, head_dim]` matrix per (batch, head) is read in, if either.
    /// Strides of a batch dim of one do not matter (nothing steps over it).
    fn layout_of(&self, p: &MatrixPlacement) -> Option<AttentionLayout> {
        let (s, d, h) = (p.rows, p.cols, self.heads);
        let strides: [usize; 2] = match p.batch_strides.as_slice() {
            [] => [0, 0],
            [sh] => [0, *sh],
            [sb, sh] => [*sb, *sh],
            _ => return None,
        };
        let reads = |ld: usize, sb: usize, sh: usize| {
            p.layout == Layout::RowMajor
                && d == self.head_dim
                && p.ld == ld
                && (self.batch <= 1 || strides[0] == sb)
                && (h <= 1 || strides[1] == sh)
        };
        if reads(d, h * s * d, s * d) {
            Some(AttentionLayout::Bhsd)
        } else if reads(h * d, s * h * d, d) {
            Some(AttentionLayout::Bshd)
        } else {
            None
        }
    }
}
