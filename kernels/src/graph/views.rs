//! [`fold_permutes`]: a permute whose only reader is a GEMM, as that GEMM's operand
//! strides; [`fold_output_permutes`]: a permute that is a GEMM's only reader, as the
//! strides the GEMM writes C with.

use std::collections::HashMap;

use super::splice::{pair_replaced, producer_read_once, rewrite_all, Found};
use super::{Graph, GraphError, ValueId};
use crate::op::Op;
use crate::ops::{GemmSpec, Layout};
use crate::shape::row_major_strides;
use crate::spec::OpSpec;

/// `graph` with every permute whose value only a GEMM reads, as one of its operands
/// read packed (`[batch…, rows, cols]` of the permute's output), folded into that
/// operand's batch strides and leading dimension (transposing the operand where the
/// permute moved the unit-stride dim to the rows): the GEMM reads the permute's
/// input in place, and the copy is gone. Equal bit for bit: the same products in the
/// same order.
pub fn fold_permutes(graph: &Graph) -> Result<Graph, GraphError> {
    rewrite_all(graph, fold_at)
}

/// Node `k`, a GEMM one of whose operands is a permute it alone reads, with that
/// permute folded in: the nodes it removes and the GEMM replacing them.
fn fold_at(graph: &Graph, readers: &HashMap<ValueId, usize>, k: usize) -> Option<Found> {
    let node = &graph.nodes[k];
    let OpSpec::Gemm(gemm) = &node.spec else {
        return None;
    };
    (0..2).find_map(|operand| {
        let p = producer_read_once(graph, readers, node.inputs[operand])?;
        let OpSpec::Permute(permute) = &graph.nodes[p].spec else {
            return None;
        };
        let folded = folded(gemm, operand, &permute.shape, &permute.perm)?;
        let mut inputs = node.inputs.clone();
        inputs[operand] = graph.nodes[p].inputs[0];
        Some(pair_replaced(p, k, OpSpec::Gemm(folded), inputs))
    })
}

/// `gemm` reading operand `operand` (0: A, 1: B) from the input of a permute of
/// `shape` by `perm`, or `None` where the GEMM does not read the permute's output
/// packed or no leading dimension describes the permuted matrix.
fn folded(gemm: &GemmSpec, operand: usize, shape: &[usize], perm: &[usize]) -> Option<GemmSpec> {
    let (placement, ld, strides, trans) = match operand {
        0 => (gemm.a(), gemm.lda, &gemm.stride_a, gemm.trans_a),
        _ => (gemm.b(), gemm.ldb, &gemm.stride_b, gemm.trans_b),
    };
    let out: Vec<usize> = perm.iter().map(|&d| shape[d]).collect();
    let rank = out.len();
    // The GEMM reads the permute's output as packed `[batch…, rows, cols]`.
    if !packed_as(gemm, &out, placement.rows, placement.cols, ld, strides) {
        return None;
    }
    let source = row_major_strides(shape);
    let stride = |d: usize| source[perm[d]];
    let batch_strides: Vec<usize> = (0..rank - 2).map(stride).collect();
    let (row_stride, col_stride) = (stride(rank - 2), stride(rank - 1));
    // Stored row-major with unit columns, or (transposed) with unit rows.
    let (new_trans, new_ld) = if col_stride == 1 {
        (trans, row_stride)
    } else if row_stride == 1 {
        (!trans, col_stride)
    } else {
        return None;
    };
    let mut g = gemm.clone();
    match operand {
        0 => {
            (g.trans_a, g.lda, g.stride_a) = (new_trans, Some(new_ld), Some(batch_strides));
        }
        _ => {
            (g.trans_b, g.ldb, g.stride_b) = (new_trans, Some(new_ld), Some(batch_strides));
        }
    }
    // What the GEMM now reads must be exactly the permute's input.
    let placement = if operand == 0 { g.a() } else { g.b() };
    (g.validate().is_ok() && placement.extent(&g.batch) == crate::shape::numel(shape)).then_some(g)
}

/// `graph` with every permute that alone reads a GEMM's result (C written packed,
/// `beta = 0`) folded into the strides the GEMM writes C with: the GEMM stores each
/// element where the permute would have put it, and the copy is gone (attention's
/// `[b, h, s, d] → [b, s, h, d]` after `P·V`, a head split after a projection). Only
/// where C's columns stay contiguous (the permute keeps the last dim last). Equal bit
/// for bit: the same values, stored elsewhere.
pub fn fold_output_permutes(graph: &Graph) -> Result<Graph, GraphError> {
    rewrite_all(graph, fold_output_at)
}

/// Node `k`, a permute reading only a GEMM's result that nothing else reads, with the
/// GEMM writing the permuted layout in its place.
fn fold_output_at(graph: &Graph, readers: &HashMap<ValueId, usize>, k: usize) -> Option<Found> {
    let node = &graph.nodes[k];
    let OpSpec::Permute(permute) = &node.spec else {
        return None;
    };
    let p = producer_read_once(graph, readers, *node.inputs.first()?)?;
    let OpSpec::Gemm(gemm) = &graph.nodes[p].spec else {
        return None;
    };
    let folded = written_permuted(gemm, &permute.shape, &permute.perm)?;
    let inputs = graph.nodes[p].inputs.clone();
    Some(pair_replaced(p, k, OpSpec::Gemm(folded), inputs))
}

/// `gemm` storing C as the permute of `shape` by `perm` lays its input out, or `None`
/// where C is read (`beta ≠ 0`), not written packed `[batch…, m, n]` row-major, or the
/// permute moves C's columns off unit stride.
fn written_permuted(gemm: &GemmSpec, shape: &[usize], perm: &[usize]) -> Option<GemmSpec> {
    let rank = shape.len();
    let writes_packed =
        gemm.beta == 0.0 && packed_as(gemm, shape, gemm.m, gemm.n, gemm.ldc, &gemm.stride_c);
    if !writes_packed {
        return None;
    }
    // Source dim `d` lands at output position `q` with `perm[q] = d`.
    let out: Vec<usize> = perm.iter().map(|&d| shape[d]).collect();
    let out_strides = row_major_strides(&out);
    let mut stride_of = vec![0usize; rank];
    for (q, &d) in perm.iter().enumerate() {
        stride_of[d] = out_strides[q];
    }
    if stride_of[rank - 1] != 1 {
        return None;
    }
    let mut g = gemm.clone();
    g.ldc = Some(stride_of[rank - 2]);
    g.stride_c = Some(stride_of[..rank - 2].to_vec());
    // What the GEMM now writes must be exactly the permute's output.
    (g.validate().is_ok() && g.c().extent(&g.batch) == crate::shape::numel(shape)).then_some(g)
}

/// Whether `gemm` places one of its `rows × cols` matrices (leading dimension `ld`,
/// batch strides `strides`) as the packed row-major tensor `dims = [batch…, rows,
/// cols]`. A batch dim of extent 1 may have any stride.
fn packed_as(
    gemm: &GemmSpec,
    dims: &[usize],
    rows: usize,
    cols: usize,
    ld: Option<usize>,
    strides: &Option<Vec<usize>>,
) -> bool {
    let rank = dims.len();
    let packed_batch: Vec<usize> = row_major_strides(&gemm.batch)
        .iter()
        .map(|s| s * rows * cols)
        .collect();
    gemm.layout == Layout::RowMajor
        && rank == gemm.batch.len() + 2
        && dims[..rank - 2] == gemm.batch[..]
        && dims[rank - 2..] == [rows, cols]
        && ld.is_none_or(|ld| ld == cols)
        && strides.as_ref().is_none_or(|s| {
            s.len() == packed_batch.len()
                && (0..s.len()).all(|d| gemm.batch[d] <= 1 || s[d] == packed_batch[d])
        })
}
