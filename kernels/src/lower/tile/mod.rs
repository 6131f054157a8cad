//! The tiled matrix-multiply engine: an op that reduces to batched matrix products
//! describes one as a [`GemmCore`], and [`emit_gemm`] appends its launches to a plan.
//!
//! # The problem the engine solves
//!
//! For every batch index `z` and `0 ≤ i < M`, `0 ≤ j < N`:
//! `C_z[i, j] = alpha · Σ_p A_z(i, p) · B_z(p, j) + beta · C_z[i, j] (+ bias)`, where
//! `A(i, p)` and `B(p, j)` are *gathers* ([`Gather`]): a strided matrix (any transpose,
//! any leading dimension), a two-level index (a reduction that runs over two axes), or an
//! address the op computes ([`OperandGather`]: implicit im2col reads image patches this
//! way, never materialising the column matrix). `C` always has unit column stride: a
//! column-major GEMM is lowered as the row-major problem `Cᵀ = op(B)ᵀ · op(A)ᵀ`
//! (swapped operands).
//!
//! # Schedule (one definition, parameterised by [`Tile`](schedule::Tile))
//!
//! A workgroup computes a `BM × BN` tile of one `C_z`. A loop over `BK`-slabs of the
//! reduction cooperatively stages `A (BM × BK)` and `B (BK × BN)` into shared memory,
//! both stored reduction-major (`[BK][BM]`, `[BK][BN]`) so that the inner loop reads
//! one contiguous row of each per step. Global loads are coalesced (neighbouring
//! invocations load neighbouring addresses along the operand's contiguous axis), use
//! `caps.vector_width`-lane loads when the leading dimension and alignment allow, zero
//! fill what lies outside the matrix (or where a custom gather has no element), and
//! convert f16/bf16 (and `input_rounding`) once per element, not once per use. After a
//! barrier, each invocation accumulates a `TM × TN` micro-tile in separate locals
//! (vector locals along N) with one `fma` per element per step, the step loop unrolled
//! at build time.
//!
//! * **GPU caps**: 256 invocations as 16 × 16; `64 × 64 × 16` tiles with `4 × 4`
//!   micro-tiles, or `128 × 128 × 8` with `8 × 8` when there are enough tiles to fill the
//!   device, or flat `16 × 256` / `256 × 16` tiles (4 × 64 invocations) for GEMV-like
//!   problems; the micro-tile's rows and column vectors are interleaved across
//!   invocations (`chunk · 16 · lanes + t · lanes`), so shared reads are conflict-free
//!   broadcasts and the epilogue's stores are coalesced vector stores. Transposing
//!   shared stores get a padded row (fewer bank conflicts). The slab loop prefetches
//!   the next slab's global loads into registers before the current slab's
//!   multiply-adds, hiding their latency. Few output tiles and a long reduction split
//!   the reduction (split-K) over more workgroups, each writing a partial tile to a
//!   temporary that one more launch sums (no racing writes). Tiles shrink their slab
//!   until they fit `caps.shared_memory_bytes`.
//! * **CPU caps** (one invocation per workgroup): a `32 × 32` tile, `BK` up to 128, the
//!   shared staging acting as BLIS-style packing (any transpose becomes the same inner
//!   loop); the invocation loops over `4 × 8` micro-tiles (two 4-lane accumulators per
//!   row, 8 vector registers), keeping the tile's accumulators in shared memory between
//!   slabs (one load and store per micro-tile per slab, amortised over `BK` steps).
//!
//! # Absent elements
//!
//! A gather may have elements that do not exist (a convolution's padding): the slab
//! loads read them as zero, so the tiled sum has `0·b` terms the definition does not
//! have. Such a term adds ±0 unless `b` is ±∞ or NaN, when it turns the sum into NaN.
//! So where an operand has absent elements ([`OperandGather::has_absent`]), a NaN
//! result is summed again, term by term over the existing terms only (`exact.rs`):
//! after the slab loop, one NaN test of the sum of a micro-tile's accumulators (NaN if
//! any is; a false alarm, a `+∞` meeting a `−∞` or a NaN in an accumulator past the
//! matrix's edge, only costs a recomputation), and in a split-K sum one test per
//! element. Nothing changes in the reduction loop, and the recomputation runs
//! only where a NaN appeared.
//!
//! Workgroups are launched in groups of `GROUP_M` tile rows walked column by column, so
//! that consecutive workgroups share panels of A and B in cache; batches (multi-dim,
//! per-operand strides, 0 broadcasts) are part of the linear workgroup index.
//!
//! The epilogue computes `alpha · acc + beta · C_in (+ bias)` in the compute type
//! (f32 for f16/bf16 storage) and rounds once on store; `beta = 0` never reads C. Alpha
//! and beta are uniform parameters, so changing them does not change the kernel. The
//! same invocation reads `C_in[e]` and then writes `C[e]`, so C may be updated in place.
//! Elements of C's buffer that belong to no matrix (`ldc` or batch-stride gaps) are
//! written by a separate map launch: the prior C when `beta ≠ 0`, else 0 (the output is
//! the whole buffer, as the reference defines it).

mod choices;
mod exact;
mod kernel;
mod launches;
mod mma;
mod pack;
mod schedule;
mod stage;

pub(crate) use launches::emit_gemm;
// For the tests that force tile configurations the heuristics pick for no small shape.
#[cfg(test)]
pub(crate) use {
    launches::emit_gemm_with,
    schedule::{vector_lanes, Tile},
};

use super::math::{bind, compute_type, Num};
use super::{Binding, LowerError};
use crate::ops::elementwise::{activation_value, Activation};
use kernelc_ir::builder::*;
use kernelc_ir::{Scalar, ScalarType};
use std::sync::Arc;

// ---------------------------------------------------------------------------------------
// Problem description
// ---------------------------------------------------------------------------------------

/// The index of an operand element that is not reduced (`i` of A, `j` of B), or the
/// reduction index `p`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Axis {
    Outer,
    Reduction,
}

/// A gather the engine cannot express as strides: the op that builds the problem
/// computes where each element lives (implicit im2col reads image patches this way).
pub(crate) trait OperandGather: std::fmt::Debug {
    /// The axis along which neighbouring elements are neighbours in memory: the one
    /// neighbouring invocations walk when they stage a slab.
    fn contiguous(&self) -> Axis;
    /// The element offset of `(r, p)`, relative to the operand's batch offset, and the
    /// condition under which the element exists (`None`: always); an element that does
    /// not exist reads as zero. Its offset is used only where `r` and `p` lie inside
    /// the matrix (an asynchronous copy may compute it for one outside, and copies
    /// nothing then).
    fn address(&self, f: &mut Body, r: &E, p: &E) -> (E, Option<E>);
    /// Whether some element inside the matrix does not exist (its condition can be
    /// false): the engine then keeps the `0·∞` of a read-as-zero element out of the sums
    /// (see the module docs).
    fn has_absent(&self) -> bool;
    /// Elements along the contiguous axis come in runs of this many: where the index
    /// along that axis is a multiple of `run`, the element's offset is a multiple of
    /// it and the next `run − 1` elements lie at the next offsets and exist where it
    /// does. The engine then stages the operand by vectors of a divisor of `run` (1:
    /// element by element).
    fn run(&self) -> u32;
}

/// Where element `(r, p)` of an operand lives, relative to its batch offset.
#[derive(Clone, Debug)]
pub(crate) enum Gather {
    /// `r·outer + p·reduction`.
    Strided { outer: u32, reduction: u32 },
    /// `r·outer + (p / inner)·block + p % inner`: a reduction over two nested axes.
    Split { outer: u32, inner: u32, block: u32 },
    /// An address the op computes (see [`OperandGather`]).
    Custom(Arc<dyn OperandGather>),
}

impl Gather {
    /// The axis along which neighbouring elements are neighbours in memory: the one
    /// neighbouring invocations should walk (`outer_len` and `k` are the extents).
    fn contiguous(&self, outer_len: u32, k: u32) -> Axis {
        match self {
            Gather::Strided { outer, reduction } => {
                // The unit stride of an axis of extent 1 (a vector stored as a
                // matrix) is no walk at all: prefer the other axis then.
                let unit_outer = *outer == 1 && outer_len > 1;
                let unit_reduction = *reduction == 1 && k > 1;
                if unit_outer || !unit_reduction && outer <= reduction {
                    Axis::Outer
                } else {
                    Axis::Reduction
                }
            }
            Gather::Split { outer, inner, .. } => {
                if *inner > 1 || *outer != 1 {
                    Axis::Reduction
                } else {
                    Axis::Outer
                }
            }
            Gather::Custom(g) => g.contiguous(),
        }
    }

    /// Whether some element inside the matrix does not exist.
    fn has_absent(&self) -> bool {
        match self {
            Gather::Strided { .. } | Gather::Split { .. } => false,
            Gather::Custom(g) => g.has_absent(),
        }
    }

    /// The element offset of `(r, p)` and whether the element exists (`None`: always).
    /// The caller checks `r` and `p` against the matrix; offsets are only used under
    /// that check, so they never wrap for a valid spec.
    fn address(&self, f: &mut Body, r: &E, p: &E) -> (E, Option<E>) {
        match self {
            Gather::Strided { outer, reduction } => (
                add(scale(r.clone(), *outer), scale(p.clone(), *reduction)),
                None,
            ),
            Gather::Split {
                outer,
                inner,
                block,
            } => {
                let two_level = if *inner == 1 {
                    scale(p.clone(), *block)
                } else {
                    add(
                        scale(div(p.clone(), *inner), *block),
                        rem(p.clone(), *inner),
                    )
                };
                (add(scale(r.clone(), *outer), two_level), None)
            }
            Gather::Custom(g) => g.address(f, r, p),
        }
    }
}

/// One input matrix of the engine.
#[derive(Clone, Debug)]
pub(crate) struct GemmOperand {
    pub name: String,
    pub binding: Binding,
    pub dtype: ScalarType,
    /// Elements of the bound buffer.
    pub len: u64,
    /// Element offset of batch 0.
    pub base: u32,
    /// Per batch dimension of the problem, the element distance between batches (0
    /// broadcasts).
    pub batch_strides: Vec<u32>,
    pub gather: Gather,
}

/// The output matrix: `C[i, j]` at `base + batch offset + i·ld + j`.
#[derive(Clone, Debug)]
pub(crate) struct GemmOutput {
    pub name: String,
    pub binding: Binding,
    pub dtype: ScalarType,
    pub len: u64,
    pub base: u32,
    pub ld: u32,
    pub batch_strides: Vec<u32>,
}

/// Which index of C a bias vector follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BiasAxis {
    /// `C[i, j] += bias[i]` (a per-output-row bias, such as a per-channel one).
    Rows,
    /// `C[i, j] += bias[j]` (GEMM's bias, row-major).
    Cols,
}

/// A bias vector added to C.
#[derive(Clone, Debug)]
pub(crate) struct GemmBias {
    pub binding: Binding,
    pub dtype: ScalarType,
    pub along: BiasAxis,
}

/// A batched GEMM for the engine (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct GemmCore {
    pub name: String,
    pub m: u32,
    pub n: u32,
    pub k: u32,
    /// Batch dimensions, row-major (`[]` for one GEMM).
    pub batch: Vec<u32>,
    /// `A(i, p)`: `r = i`.
    pub a: GemmOperand,
    /// `B(p, j)`: `r = j`.
    pub b: GemmOperand,
    pub c: GemmOutput,
    /// What `alpha` binds to (a uniform, or a constant 1).
    pub alpha: Binding,
    /// The prior C (same placement as `c`) and what `beta` binds to, when `beta != 0`
    /// (a structural class of the spec: with `beta = 0`, C is not read at all).
    pub prior: Option<Prior>,
    pub bias: Option<GemmBias>,
    /// Round A and B before multiplying (f32 GEMMs only).
    pub input_rounding: Option<crate::ops::InputRounding>,
    /// A and B (f32) hold TF32 values, rounded by TF32 mode's pack launches
    /// (`pack.rs`): they may multiply on TF32 fragments.
    pub tf32_operands: bool,
    /// The op's own operands where `a` and `b` are packed copies of them (`pack.rs`)
    /// and some of their elements are absent: the sums are defined over their
    /// existing terms, which a NaN's recomputation reads.
    pub packed_from: Option<Box<[GemmOperand; 2]>>,
    /// Write the elements of C's buffer that belong to no matrix (0, or the prior C).
    pub fill_gaps: bool,
    /// Applied to the epilogue's value before it is rounded to C's type.
    pub activation: Option<Activation>,
}

impl GemmCore {
    /// The type the products accumulate in (f32 for f16/bf16 storage).
    pub(crate) fn compute(&self) -> ScalarType {
        compute_type(self.c.dtype)
    }
    /// The epilogue's value `v` (compute type) as stored: through the activation,
    /// then rounded to C's type. Every path that writes C's matrix elements ends here.
    pub(crate) fn stored_value(&self, f: &mut Body, num: &Num, v: E) -> E {
        let v = match self.activation {
            Some(act) => activation_value(f, num, act, v),
            None => v,
        };
        num.narrow(v, self.c.dtype)
    }

    /// Multiply-adds of the whole problem.
    pub(crate) fn multiply_adds(&self) -> u64 {
        self.m as u64 * self.n as u64 * self.k as u64 * self.batch_count() as u64
    }

    /// Matrices in the batch.
    fn batch_count(&self) -> u32 {
        self.batch.iter().product()
    }

    /// Where batch `z` of a matrix placed at `base` with `strides` (one per batch
    /// dimension) starts: `Σ_d (z / inner_d % count_d) · stride_d + base`.
    fn batch_offset(&self, f: &mut Body, name: &str, z: &E, strides: &[u32], base: u32) -> E {
        let batch = &self.batch;
        let mut offset = E::from(base);
        let mut inner = 1u32;
        for d in (0..batch.len()).rev() {
            let count = batch[d];
            let stride = strides.get(d).copied().unwrap_or(0);
            if count > 1 && stride != 0 {
                let mut index = div(z.clone(), inner);
                if d != 0 {
                    index = rem(index, count);
                }
                offset = add(offset, scale(index, stride));
            }
            inner = inner.saturating_mul(count);
        }
        bind(f, name, offset)
    }
}

/// `beta · C` of a GEMM that reads its prior C.
#[derive(Clone, Debug)]
pub(crate) struct Prior {
    pub c_in: Binding,
    pub beta: Binding,
}

// ---------------------------------------------------------------------------------------
// Index arithmetic that folds the trivial cases
// ---------------------------------------------------------------------------------------

/// Runs `body` where `index < bound`: unguarded when `index` is a constant below it,
/// not at all when it is a constant at or past it (a micro-tile column or row past a
/// small matrix: the guard would be dead, and its constant index out of bounds of a
/// bias or C would not validate), under an `if` otherwise.
pub(crate) fn when_below(f: &mut Body, index: &E, bound: u32, body: impl FnOnce(&mut Body)) {
    match lit_u32(index) {
        Some(i) if i < bound => body(f),
        Some(_) => {}
        None => f.if_(index.clone().lt(bound), body),
    }
}

fn lit_u32(e: &E) -> Option<u32> {
    match e.expr().as_lit() {
        Some(Scalar::U32(v)) => Some(v),
        _ => None,
    }
}

/// `e · c`.
pub(crate) fn scale(e: E, c: u32) -> E {
    match (c, lit_u32(&e)) {
        (0, _) | (_, Some(0)) => E::from(0u32),
        (1, _) => e,
        (_, Some(v)) => v.checked_mul(c).map_or_else(|| e * c, E::from),
        _ => e * c,
    }
}

/// `a + b`.
pub(crate) fn add(a: E, b: E) -> E {
    match (lit_u32(&a), lit_u32(&b)) {
        (Some(0), _) => b,
        (_, Some(0)) => a,
        (Some(x), Some(y)) => x.checked_add(y).map_or_else(|| a + b, E::from),
        _ => a + b,
    }
}

/// `e / c`.
pub(crate) fn div(e: E, c: u32) -> E {
    match (c, lit_u32(&e)) {
        (1, _) => e,
        (_, Some(v)) if c != 0 => E::from(v / c),
        _ => e / c,
    }
}

/// `e % c`.
pub(crate) fn rem(e: E, c: u32) -> E {
    match (c, lit_u32(&e)) {
        (1, _) => E::from(0u32),
        (_, Some(v)) if c != 0 => E::from(v % c),
        _ => e % c,
    }
}

/// `v` as a `u32` index, refused past `i32::MAX` (`TooLarge` naming `what`).
pub(crate) fn to_u32(what: &str, v: usize) -> Result<u32, LowerError> {
    u32::try_from(v)
        .ok()
        .filter(|&x| x <= i32::MAX as u32)
        .ok_or_else(|| LowerError::TooLarge {
            what: what.to_string(),
            value: v as u64,
            limit: i32::MAX as u64,
        })
}

/// `a && b` of two optional conditions, `None` meaning always true.
pub(crate) fn and_opt(a: Option<E>, b: Option<E>) -> Option<E> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a & b),
        (a, None) => a,
        (None, b) => b,
    }
}
