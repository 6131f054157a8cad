//! GEMMs past one kernel's 32-bit indices (`lower::split`). A batch splits along its
//! first dimension while one row of it fits (any strides; a broadcast operand bound
//! from its start), else one piece per item of that dimension, each split further.
//! One matrix splits in blocks of C's rows, C's columns and `k`: each operand's
//! block is a window of its whole matrix (same leading dimension) that fits, bound
//! where it lies. Blocks after the first along `k` add into C (`beta = 1`, the bias
//! only in the first, the activation only in the last), so f16/bf16 C rounds to its
//! storage type between them.

use super::{lower, GemmSpec, Layout, MatrixPlacement};
use crate::lower::split::{
    append_lowered, assemble_into, copy_step, gcd, step, Piece, PieceUniforms, Place,
    PIECE_ALIGNMENT,
};
use crate::lower::{LowerError, Plan, TargetCaps, Whole};
use crate::op::Op;
use crate::ops::{FillSpec, FillValue};
use crate::spec::OpSpec;

/// Launches one split GEMM may take (beyond, a matrix is too thin for the limit).
const MAX_PIECES: u64 = 1 << 16;

/// Indices of the GEMM dimensions in a block's sizes and starts.
const M: usize = 0;
const N: usize = 1;
const K: usize = 2;

pub(super) fn gemm(spec: &GemmSpec, caps: &TargetCaps) -> Result<Plan, LowerError> {
    let limit = caps.kernel_limit();
    let mut plan = Plan::default();
    // C's gaps (elements of no matrix: zero, or the prior C) first, whole: the pieces
    // write matrix elements only, and their windows leave gaps between them.
    let c = spec.c();
    let covered = spec.batch_count() as u64 * spec.m as u64 * spec.n as u64;
    let extent = c.extent(&spec.batch);
    if covered < extent as u64 {
        assemble_into(&mut plan, caps, vec![gaps_step(spec, extent)])?;
    }
    if spec.batch.is_empty() {
        for piece in blocks(spec, limit)? {
            let OpSpec::Gemm(block) = &piece.spec else {
                return Err(LowerError::Internal("a GEMM block that is not a GEMM"));
            };
            block.validate()?;
            let sub = lower::gemm_leaving_gaps(block, &piece.caps(caps))?;
            append_lowered(&mut plan, &piece, sub)?;
        }
    } else {
        assemble_into(&mut plan, caps, batch_pieces(spec, limit)?)?;
    }
    Ok(plan)
}

/// The step giving C's gaps their value: every element of C zero (`beta = 0`) or the
/// prior C's, before the pieces write the matrices.
fn gaps_step(spec: &GemmSpec, extent: usize) -> Piece {
    let output = Place::whole(Whole::Output(0));
    match Inputs::of(spec).prior_c {
        Some(prior) => copy_step(
            spec.dtype,
            extent,
            Place::whole(Whole::Input(prior)),
            output,
        ),
        None => step(
            OpSpec::Fill(FillSpec {
                dtype: spec.dtype,
                shape: vec![extent],
                value: FillValue::Constant { value: 0.0 },
                offset: 0,
            }),
            Vec::new(),
            output,
        ),
    }
}

/// Where the whole op's inputs are: `a`, `b`, then the bias and the prior C if any.
struct Inputs {
    bias: Option<usize>,
    prior_c: Option<usize>,
}

impl Inputs {
    fn of(spec: &GemmSpec) -> Inputs {
        let bias = spec.bias.then_some(2);
        let prior_c = (spec.beta != 0.0).then_some(2 + usize::from(spec.bias));
        Inputs { bias, prior_c }
    }
}

/// Pieces along the first batch dimension: as many of its rows as fit, or, when one
/// row does not, one piece per row over the remaining batch dimensions (lowered, and
/// so split, again).
fn batch_pieces(spec: &GemmSpec, limit: u64) -> Result<Vec<Piece>, LowerError> {
    let (first, rest) = spec.batch.split_first().ok_or(LowerError::Internal(
        "a batch split of a GEMM without batch",
    ))?;
    let placements = [spec.a(), spec.b(), spec.c()];
    // Per operand: the stride of the first batch dimension and the elements the
    // remaining ones span.
    let per_row: Vec<(u64, u64)> = placements
        .iter()
        .map(|p| {
            let rest_strides = MatrixPlacement {
                batch_strides: p.batch_strides[1..].to_vec(),
                ..p.clone()
            };
            (p.batch_strides[0] as u64, rest_strides.extent(rest) as u64)
        })
        .collect();
    let step = per_row
        .iter()
        .map(|&(stride, _)| row_step(stride))
        .max()
        .unwrap_or(1);
    let fit = per_row
        .iter()
        .map(
            |&(stride, extent)| match (limit.checked_sub(extent), stride) {
                (None, _) => 0,
                (Some(_), 0) => *first as u64,
                (Some(room), stride) => room / stride + 1,
            },
        )
        .min()
        .unwrap_or(0);
    let bias_fits = !spec.bias || spec.n as u64 <= limit;
    let rows = fit.min(*first as u64) / step * step;
    // Pieces keep the first batch dimension (of `rows` rows), or drop it (one row each).
    // Aligned pieces where a step of rows fits, else pieces at any row (bound below
    // their start: `lower::rebase`).
    let rows = if rows > 0 {
        rows
    } else {
        fit.min(*first as u64)
    };
    let (rows, keep_first) = if rows > 0 && bias_fits {
        (rows, true)
    } else {
        (1, false)
    };
    let count = (*first as u64).div_ceil(rows);
    if count > MAX_PIECES {
        return Err(too_many(count));
    }
    let inputs = Inputs::of(spec);
    let dropped = usize::from(!keep_first);
    let strides = |p: &MatrixPlacement| Some(p.batch_strides[dropped..].to_vec());
    let mut pieces = Vec::new();
    for start in (0..*first).step_by(rows as usize) {
        let r = (rows as usize).min(first - start);
        let batch = if keep_first {
            [&[r][..], rest].concat()
        } else {
            rest.to_vec()
        };
        let at = |o: usize| start as u64 * per_row[o].0;
        let piece = GemmSpec {
            batch,
            lda: Some(placements[0].ld),
            ldb: Some(placements[1].ld),
            ldc: Some(placements[2].ld),
            stride_a: strides(&placements[0]),
            stride_b: strides(&placements[1]),
            stride_c: strides(&placements[2]),
            ..spec.clone()
        };
        let mut places = vec![
            Place::at(Whole::Input(0), at(0)),
            Place::at(Whole::Input(1), at(1)),
        ];
        places.extend(inputs.bias.map(|i| Place::whole(Whole::Input(i))));
        places.extend(inputs.prior_c.map(|i| Place::at(Whole::Input(i), at(2))));
        pieces.push(Piece {
            spec: OpSpec::Gemm(piece),
            inputs: places,
            outputs: vec![Place::at(Whole::Output(0), at(2))],
            uniforms: PieceUniforms::Shared,
        });
    }
    Ok(pieces)
}

/// Rows of a batch dimension of `stride` elements per piece: a multiple of this keeps
/// every piece's start aligned.
fn row_step(stride: u64) -> u64 {
    match stride {
        0 => 1,
        s => PIECE_ALIGNMENT / gcd(s, PIECE_ALIGNMENT),
    }
}

fn too_many(count: u64) -> LowerError {
    LowerError::TooLarge {
        what: "gemm: pieces of a matrix too thin for one kernel's indices".into(),
        value: count,
        limit: MAX_PIECES,
    }
}

/// One stored matrix in terms of the GEMM dimensions: its outer dimension (rows of a
/// row-major matrix) steps by `ld`, its inner one by 1.
#[derive(Clone, Copy, Debug)]
struct Operand {
    outer: usize,
    inner: usize,
    ld: u64,
}

impl Operand {
    /// A matrix stored `rows × cols` (as GEMM dimensions) with leading dimension `ld`.
    fn stored(layout: Layout, rows: usize, cols: usize, ld: usize) -> Operand {
        let ld = ld as u64;
        match layout {
            Layout::RowMajor => Operand {
                outer: rows,
                inner: cols,
                ld,
            },
            Layout::ColMajor => Operand {
                outer: cols,
                inner: rows,
                ld,
            },
        }
    }

    /// Elements a block of `size` spans (every size at least 1).
    fn span(&self, size: &[usize; 3]) -> u64 {
        (size[self.outer] as u64 - 1)
            .saturating_mul(self.ld)
            .saturating_add(size[self.inner] as u64)
    }

    /// The leading dimension of a block of `size`: the matrix's, or for a block of
    /// one outer row (which never steps by it) its own width, so that a leading
    /// dimension past one kernel's indices does not reach the kernel.
    fn block_ld(&self, size: &[usize; 3]) -> usize {
        if size[self.outer] == 1 {
            size[self.inner]
        } else {
            self.ld as usize
        }
    }

    /// Element where the block starting at `start` begins.
    fn offset(&self, start: &[usize; 3]) -> u64 {
        start[self.outer] as u64 * self.ld + start[self.inner] as u64
    }
}

/// A, B and C of one matrix product.
fn operands(spec: &GemmSpec) -> [Operand; 3] {
    let (a_rows, a_cols) = if spec.trans_a { (K, M) } else { (M, K) };
    let (b_rows, b_cols) = if spec.trans_b { (N, K) } else { (K, N) };
    [
        Operand::stored(spec.layout, a_rows, a_cols, spec.a().ld),
        Operand::stored(spec.layout, b_rows, b_cols, spec.b().ld),
        Operand::stored(spec.layout, M, N, spec.c().ld),
    ]
}

/// Sizes of the blocks along m, n and k such that each operand's block fits `limit`,
/// every size that splits its dimension a multiple of what keeps the blocks' starts
/// aligned in every operand (and the bias, split with n) where that is possible.
fn block_sizes(
    dims: [usize; 3],
    ops: &[Operand; 3],
    bias: bool,
    limit: u64,
) -> Result<[usize; 3], LowerError> {
    // Aligned blocks where they fit, else blocks starting anywhere (bound below their
    // start: `lower::rebase`).
    block_sizes_by(dims, ops, bias, limit, true)
        .or_else(|_| block_sizes_by(dims, ops, bias, limit, false))
}

/// [`block_sizes`] with every size that splits a dimension a multiple of what keeps
/// the blocks' starts aligned (`aligned`), or of 1.
fn block_sizes_by(
    dims: [usize; 3],
    ops: &[Operand; 3],
    bias: bool,
    limit: u64,
    aligned: bool,
) -> Result<[usize; 3], LowerError> {
    let mut step = [1u64; 3];
    for op in ops.iter().filter(|_| aligned) {
        step[op.outer] = step[op.outer].max(row_step(op.ld));
        step[op.inner] = PIECE_ALIGNMENT;
    }
    if bias && aligned {
        step[N] = PIECE_ALIGNMENT;
    }
    let floor = |x: u64, d: usize| x / step[d] * step[d];
    let mut size = dims;
    // Each round shrinks a size (at most a few dozen rounds: halving or better).
    for _ in 0..256 {
        let Some(op) = ops.iter().find(|op| op.span(&size) > limit) else {
            return Ok(size);
        };
        let inner = size[op.inner] as u64;
        let outer_fit = limit
            .checked_sub(inner)
            .map_or(0, |room| floor(room / op.ld.max(1) + 1, op.outer));
        if outer_fit >= 1 && outer_fit < size[op.outer] as u64 {
            size[op.outer] = outer_fit as usize;
            continue;
        }
        // Even one aligned step of outer rows is too long at this inner size: the
        // fewest outer rows a split allows, and as many inner elements as then fit.
        let outer = step[op.outer].min(size[op.outer] as u64);
        let inner_fit = limit
            .checked_sub((outer - 1).saturating_mul(op.ld))
            .map_or(0, |room| floor(room, op.inner).min(inner));
        if inner_fit == 0 {
            return Err(LowerError::TooLarge {
                what: format!(
                    "gemm: elements of {outer} rows of a stored matrix (leading dimension {}), the fewest its pieces can take",
                    op.ld
                ),
                value: (outer - 1).saturating_mul(op.ld).saturating_add(step[op.inner].min(inner)),
                limit,
            });
        }
        size[op.outer] = outer as usize;
        size[op.inner] = inner_fit as usize;
    }
    Err(LowerError::Internal("gemm blocks did not converge"))
}

/// One matrix (no batch) in blocks of C and of `k`.
fn blocks(spec: &GemmSpec, limit: u64) -> Result<Vec<Piece>, LowerError> {
    let dims = [spec.m, spec.n, spec.k];
    let ops = operands(spec);
    let size = block_sizes(dims, &ops, spec.bias, limit)?;
    let count: u64 = (0..3)
        .map(|d| (dims[d] as u64).div_ceil(size[d] as u64))
        .product();
    if count > MAX_PIECES {
        return Err(too_many(count));
    }
    let inputs = Inputs::of(spec);
    let [a, b, c] = ops;
    let starts = |d: usize| (0..dims[d]).step_by(size[d]);
    let mut pieces = Vec::new();
    for m0 in starts(M) {
        for n0 in starts(N) {
            for k0 in starts(K) {
                let start = [m0, n0, k0];
                let first = k0 == 0;
                let dims = [
                    size[M].min(spec.m - m0),
                    size[N].min(spec.n - n0),
                    size[K].min(spec.k - k0),
                ];
                let piece = GemmSpec {
                    m: dims[M],
                    n: dims[N],
                    k: dims[K],
                    lda: Some(a.block_ld(&dims)),
                    ldb: Some(b.block_ld(&dims)),
                    ldc: Some(c.block_ld(&dims)),
                    bias: spec.bias && first,
                    beta: if first { spec.beta } else { 1.0 },
                    // The activation applies to the whole sum: on the last block.
                    activation: if k0 + dims[K] == spec.k {
                        spec.activation
                    } else {
                        None
                    },
                    ..spec.clone()
                };
                let mut places = vec![
                    Place::at(Whole::Input(0), a.offset(&start)),
                    Place::at(Whole::Input(1), b.offset(&start)),
                ];
                let c_at = c.offset(&start);
                if first {
                    places.extend(inputs.bias.map(|i| Place::at(Whole::Input(i), n0 as u64)));
                    places.extend(inputs.prior_c.map(|i| Place::at(Whole::Input(i), c_at)));
                } else {
                    // C so far, from the blocks before along k.
                    places.push(Place::at(Whole::Output(0), c_at));
                }
                pieces.push(Piece {
                    spec: OpSpec::Gemm(piece),
                    inputs: places,
                    outputs: vec![Place::at(Whole::Output(0), c_at)],
                    uniforms: if first {
                        PieceUniforms::Shared
                    } else {
                        // `beta` (uniform 1) is the piece's own 1: add to C.
                        PieceUniforms::SharedExcept(vec![1])
                    },
                });
            }
        }
    }
    Ok(pieces)
}
