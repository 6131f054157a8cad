//! GEMM, and the tiled matrix-multiply engine that conv2d reuses (implicit GEMM).
//!
//! # The problem the engine solves
//!
//! For every batch index `z` and `0 ≤ i < M`, `0 ≤ j < N`:
//! `C_z[i, j] = alpha · Σ_p A_z(i, p) · B_z(p, j) + beta · C_z[i, j] (+ bias)`, where
//! `A(i, p)` and `B(p, j)` are *gathers* ([`Gather`]): a strided matrix (any transpose,
//! any leading dimension), a two-level index (a reduction that runs over two axes), or an
//! image patch (implicit im2col). `C` always has unit column stride: a column-major
//! GEMM is lowered as the row-major problem `Cᵀ = op(B)ᵀ · op(A)ᵀ` (swapped operands).
//!
//! # Schedule (one definition, parameterised by [`Tile`])
//!
//! A workgroup computes a `BM × BN` tile of one `C_z`. A loop over `BK`-slabs of the
//! reduction cooperatively stages `A (BM × BK)` and `B (BK × BN)` into shared memory,
//! both stored reduction-major (`[BK][BM]`, `[BK][BN]`) so that the inner loop reads
//! one contiguous row of each per step. Global loads are coalesced (neighbouring
//! invocations load neighbouring addresses along the operand's contiguous axis), use
//! `caps.vector_width`-lane loads when the leading dimension and alignment allow, zero
//! fill what lies outside the matrix (or in an image's padding), and convert f16/bf16
//! (and `input_rounding`) once per element, not once per use. After a barrier, each
//! invocation accumulates a `TM × TN` micro-tile in separate locals (vector locals along
//! N) with one `fma` per element per step, the step loop unrolled at build time.
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

use super::math::{bind, compute_type, Num};
use super::schedule::{fold_grid, linear_workgroup, plan_1d};
use super::{Binding, Launch, LowerError, PlanBuilder, TargetCaps};
use kernelc_ir::builder::*;
use kernelc_ir::{Access, Scalar, ScalarType};

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

/// Geometry of a 2-D convolution (NCHW), as the patch gathers need it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ConvGeometry {
    /// Input channels `C`.
    pub channels: u32,
    /// Output channels `K`.
    pub out_channels: u32,
    pub height: u32,
    pub width: u32,
    pub out_height: u32,
    pub out_width: u32,
    pub kernel: [u32; 2],
    pub stride: [u32; 2],
    pub padding: [u32; 2],
}

impl ConvGeometry {
    /// Window taps `kh·kw`.
    pub fn taps(&self) -> u32 {
        self.kernel[0] * self.kernel[1]
    }
    /// Pixels of one input plane `H·W`.
    pub fn image(&self) -> u32 {
        self.height * self.width
    }
    /// Pixels of one output plane `OH·OW`.
    pub fn out_pixels(&self) -> u32 {
        self.out_height * self.out_width
    }
    /// Patch rows `C·kh·kw`.
    pub fn patch_rows(&self) -> u32 {
        self.channels * self.taps()
    }
}

/// Which image element an implicit-GEMM operand element `(r, p)` is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PatchRole {
    /// `x` in the forward pass: `r` = output pixel `oy·OW + ox`, `p` = patch row
    /// `(c·kh + ky)·kw + kx`.
    PixelByTap,
    /// `x` in backward-filter: `r` = patch row, `p = n·OH·OW + pixel` (the reduction
    /// runs over the batch and the output pixels).
    TapByBatchPixel,
    /// `dy` in stride-1 backward-data: `r` = input pixel `iy·W + ix`, `p =
    /// (k·kh + ky)·kw + kx`; reads `dy[n, k, iy + ph − ky, ix + pw − kx]`.
    InputPixelByOutTap,
}

/// Where element `(r, p)` of an operand lives, relative to its batch offset.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Gather {
    /// `r·outer + p·reduction`.
    Strided { outer: u32, reduction: u32 },
    /// `r·outer + (p / inner)·block + p % inner`: a reduction over two nested axes.
    Split { outer: u32, inner: u32, block: u32 },
    /// An image element (implicit im2col); zero in the padding.
    Patches {
        geometry: ConvGeometry,
        role: PatchRole,
    },
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
            Gather::Patches { role, .. } => match role {
                PatchRole::PixelByTap | PatchRole::InputPixelByOutTap => Axis::Outer,
                PatchRole::TapByBatchPixel => Axis::Reduction,
            },
        }
    }

    /// The element offset of `(r, p)` and, for patches, whether it lies in the image.
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
            Gather::Patches { geometry, role } => patch_address(f, geometry, *role, r, p),
        }
    }
}

/// `(c, ky, kx)` of patch row `row`.
pub(crate) fn patch_row(f: &mut Body, g: &ConvGeometry, row: &E) -> (E, E, E) {
    let c = bind(f, "c", div(row.clone(), g.taps()));
    let tap = bind(f, "tap", rem(row.clone(), g.taps()));
    let ky = bind(f, "ky", div(tap.clone(), g.kernel[1]));
    let kx = bind(f, "kx", rem(tap, g.kernel[1]));
    (c, ky, kx)
}

/// The padded input coordinates `(oy·sh + ky, ox·sw + kx)` of output pixel `pixel`.
pub(crate) fn padded_coords(f: &mut Body, g: &ConvGeometry, pixel: &E, ky: E, kx: E) -> (E, E) {
    let oy = div(pixel.clone(), g.out_width);
    let ox = rem(pixel.clone(), g.out_width);
    let yy = bind(f, "yy", add(scale(oy, g.stride[0]), ky));
    let xx = bind(f, "xx", add(scale(ox, g.stride[1]), kx));
    (yy, xx)
}

/// Whether padded coordinate `v` is inside `[pad, pad + size)`; `None` when always.
pub(crate) fn in_image(v: &E, pad: u32, size: u32) -> Option<E> {
    if pad == 0 {
        // Without padding every window of a valid output pixel lies inside.
        None
    } else {
        Some(v.clone().ge(pad) & v.clone().lt(size + pad))
    }
}

pub(crate) fn and_opt(a: Option<E>, b: Option<E>) -> Option<E> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a & b),
        (a, None) => a,
        (None, b) => b,
    }
}

fn patch_address(f: &mut Body, g: &ConvGeometry, role: PatchRole, r: &E, p: &E) -> (E, Option<E>) {
    let [ph, pw] = g.padding;
    match role {
        PatchRole::PixelByTap | PatchRole::TapByBatchPixel => {
            let (row, pixel, image) = if role == PatchRole::PixelByTap {
                (p.clone(), r.clone(), None)
            } else {
                let n = div(p.clone(), g.out_pixels());
                let pixel = bind(f, "pix", rem(p.clone(), g.out_pixels()));
                (r.clone(), pixel, Some(n))
            };
            let (c, ky, kx) = patch_row(f, g, &row);
            let (yy, xx) = padded_coords(f, g, &pixel, ky, kx);
            let valid = and_opt(in_image(&yy, ph, g.height), in_image(&xx, pw, g.width));
            let mut offset = add(add(scale(c, g.image()), scale(yy, g.width)), xx);
            if let Some(n) = image {
                offset = add(scale(n, g.channels * g.image()), offset);
            }
            let shift = ph * g.width + pw;
            if shift != 0 {
                offset = offset - shift;
            }
            (offset, valid)
        }
        PatchRole::InputPixelByOutTap => {
            // Stride 1: output (oy, ox) = (iy + ph − ky, ix + pw − kx).
            let k = bind(f, "k", div(p.clone(), g.taps()));
            let tap = bind(f, "tap", rem(p.clone(), g.taps()));
            let ky = bind(f, "ky", div(tap.clone(), g.kernel[1]));
            let kx = bind(f, "kx", rem(tap, g.kernel[1]));
            let yy = bind(f, "yy", add(div(r.clone(), g.width), E::from(ph)));
            let xx = bind(f, "xx", add(rem(r.clone(), g.width), E::from(pw)));
            let valid = yy.clone().ge(ky.clone())
                & yy.clone().lt(ky.clone() + g.out_height)
                & xx.clone().ge(kx.clone())
                & xx.clone().lt(kx.clone() + g.out_width);
            // yy·OW + xx ≥ ky·OW + kx whenever the element is valid.
            let offset = add(
                scale(k, g.out_pixels()),
                add(scale(yy, g.out_width), xx) - add(scale(ky, g.out_width), kx),
            );
            (offset, Some(valid))
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
    /// `C[i, j] += bias[i]` (conv2d's per-channel bias).
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
    /// What `alpha` binds to (a uniform of GEMM, a constant 1 of convolutions).
    pub alpha: Binding,
    /// The prior C (same placement as `c`) and what `beta` binds to, when `beta != 0`
    /// (a structural class of the spec: with `beta = 0`, C is not read at all).
    pub prior: Option<Prior>,
    pub bias: Option<GemmBias>,
    /// Round A and B to this type before multiplying (f32 GEMMs only).
    pub input_rounding: Option<ScalarType>,
    /// Write the elements of C's buffer that belong to no matrix (0, or the prior C).
    pub fill_gaps: bool,
}

impl GemmCore {
    pub(crate) fn compute(&self) -> ScalarType {
        compute_type(self.c.dtype)
    }
    fn batch_count(&self) -> u32 {
        self.batch.iter().product()
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

/// `Σ_d (z / inner_d % count_d) · stride_d + base` for linear batch index `z`.
fn batch_offset(f: &mut Body, name: &str, z: &E, batch: &[u32], strides: &[u32], base: u32) -> E {
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

// ---------------------------------------------------------------------------------------
// Tile configuration
// ---------------------------------------------------------------------------------------

/// The tile shape of one GEMM kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tile {
    pub bm: u32,
    pub bn: u32,
    pub bk: u32,
    /// Invocations along M and N.
    pub ty: u32,
    pub tx: u32,
    /// Micro-tile of one invocation per step.
    pub tm: u32,
    pub tn: u32,
    /// Lanes of accumulators and B reads (along N), and of A reads (along M).
    pub vn: u8,
    pub vm: u8,
    /// Reduction steps unrolled at build time per loop iteration.
    pub unroll: u32,
}

/// Workgroups the GPU heuristics aim to have in flight (about one per SM of a large
/// device): below it, tiles shrink or the reduction splits.
const TARGET_WORKGROUPS: u32 = 128;
/// Tile rows grouped together in the launch order, so that consecutive workgroups
/// share panels of A and B in cache.
const GROUP_M: u32 = 8;
/// Padding of a shared row (elements) when staging stores transpose (fewer bank
/// conflicts); a multiple of every vector width.
const SHARED_PAD: u32 = 4;

impl Tile {
    pub fn invocations(&self) -> u32 {
        self.tx * self.ty
    }
    /// Micro-tiles per invocation along M and N.
    fn steps(&self) -> (u32, u32) {
        (self.bm / (self.tm * self.ty), self.bn / (self.tn * self.tx))
    }
    fn resident(&self) -> bool {
        self.steps() == (1, 1)
    }
}

/// Lanes of a 16-byte (`caps.vector_width` f32 lanes) vector of `ty`.
pub(crate) fn vector_lanes(ty: ScalarType, caps: &TargetCaps) -> u8 {
    let bytes = 4 * caps.vector_width.max(1) as u32;
    match bytes / ty.size_bytes().max(1) {
        0 | 1 => 1,
        2 | 3 => 2,
        _ => 4,
    }
}

fn round_up(v: u32, to: u32) -> u32 {
    v.div_ceil(to) * to
}

/// Picks the tile for `core` on `caps` (see the module docs).
pub(crate) fn choose_tile(core: &GemmCore, caps: &TargetCaps) -> Tile {
    let compute = core.compute();
    let v = vector_lanes(compute, caps) as u32;
    if caps.is_serial() {
        let tm = 4;
        let tn = (2 * v).max(4);
        return Tile {
            bm: round_up(core.m, tm).min(32),
            bn: round_up(core.n, tn).min(32),
            bk: round_up(core.k, 8).min(128),
            ty: 1,
            tx: 1,
            tm,
            tn,
            vn: v as u8,
            vm: v.min(tm) as u8,
            unroll: 8,
        };
    }
    let budget = caps.invocations_1d().min(256);
    let (mut ty, mut tx) = (1u32, 1u32);
    while ty * tx * 2 <= budget {
        if tx <= ty {
            tx *= 2;
        } else {
            ty *= 2;
        }
    }
    let big_tiles =
        core.m.div_ceil(128) as u64 * core.n.div_ceil(128) as u64 * core.batch_count() as u64;
    let (tm, tn, bk) = if ty * tx >= 256
        && compute != ScalarType::F64
        && big_tiles >= 2 * TARGET_WORKGROUPS as u64
    {
        (8, 8, 8)
    } else {
        (4, 4, 16)
    };
    // Skinny problems (GEMV-like: a handful of rows or columns) get a flat tile,
    // so that a 64-row tile does not multiply mostly zero rows.
    if ty == tx && ty >= 4 && tm == 4 {
        let flat = (ty * tx / 4, 4);
        if core.m <= 16 && core.n >= 256 {
            (ty, tx) = (flat.1, flat.0);
        } else if core.n <= 16 && core.m >= 256 {
            (ty, tx) = flat;
        }
    }
    let vn = v.min(tn);
    let vm = if tm % v == 0 { v } else { 1 };
    Tile {
        bm: ty * tm,
        bn: tx * tn,
        bk,
        ty,
        tx,
        tm,
        tn,
        vn: vn as u8,
        vm: vm as u8,
        unroll: bk,
    }
}

// ---------------------------------------------------------------------------------------
// Staging plans
// ---------------------------------------------------------------------------------------

/// How one operand's tile is loaded: along which axis neighbouring invocations walk,
/// and how many lanes each load has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stage {
    axis: Axis,
    lanes: u8,
}

fn stage_plan(
    op: &GemmOperand,
    batch: &[u32],
    outer_len: u32,
    k: u32,
    tile_outer: u32,
    bk: u32,
    v: u8,
) -> Stage {
    let axis = op.gather.contiguous(outer_len, k);
    let lanes = match op.gather {
        Gather::Strided { outer, reduction } if v > 1 => {
            let v32 = v as u32;
            let (unit, other, extent, other_extent, tile_extent) = match axis {
                Axis::Outer => (outer, reduction, outer_len, k, tile_outer),
                Axis::Reduction => (reduction, outer, k, outer_len, bk),
            };
            let batch_aligned = batch
                .iter()
                .zip(&op.batch_strides)
                .all(|(&count, &s)| count == 1 || s % v32 == 0);
            let ok = unit == 1
                && (other % v32 == 0 || other_extent == 1)
                && op.base % v32 == 0
                && batch_aligned
                && extent % v32 == 0
                && tile_extent % v32 == 0;
            if ok {
                v
            } else {
                1
            }
        }
        _ => 1,
    };
    Stage { axis, lanes }
}

// ---------------------------------------------------------------------------------------
// The tile kernel
// ---------------------------------------------------------------------------------------

/// Split-K: the reduction's slabs are divided among `splits` workgroups per tile, each
/// writing its partial tile to `partial` (`[splits][batch][M][ld]`, compute type).
#[derive(Clone, Copy, Debug)]
struct SplitK {
    splits: u32,
    slabs_per_split: u32,
    ld: u32,
}

/// Buffers and shared arrays of one tile kernel.
struct Mems {
    a: Mem,
    b: Mem,
    bias: Option<Mem>,
    c_in: Option<Mem>,
    out: Mem,
    alpha: Option<E>,
    beta: Option<E>,
    a_sh: Mem,
    b_sh: Mem,
    acc_sh: Option<Mem>,
}

/// Per-workgroup values of the tile kernel.
struct Place {
    tid: E,
    tx: E,
    ty: E,
    m0: E,
    n0: E,
    z: E,
    split: E,
    off_a: E,
    off_b: E,
    off_c: E,
}

/// One operand's side of a tile kernel: its staging plan, shared row length, extent
/// and this workgroup's tile origin and batch offset.
struct Side<'k> {
    op: &'k GemmOperand,
    plan: Stage,
    ld: u32,
    outer_len: u32,
    tile_outer: u32,
    mem: Mem,
    sh: Mem,
    r0: E,
    off: E,
}

/// Where one of an invocation's staging loads goes in the tile.
struct Coord {
    /// `e < items` when the last round of loads is partial.
    guard: Option<E>,
    o: E,
    p: E,
    r: E,
}

struct TileKernel<'a> {
    core: &'a GemmCore,
    tile: Tile,
    stage_a: Stage,
    stage_b: Stage,
    lda: u32,
    ldb: u32,
    split: Option<SplitK>,
    tiles_m: u32,
    tiles_n: u32,
    /// Whether C's placement allows `vn`-lane loads and stores.
    c_vector: bool,
}

impl<'a> TileKernel<'a> {
    fn new(core: &'a GemmCore, caps: &TargetCaps, tile: Tile) -> TileKernel<'a> {
        let v = vector_lanes(core.compute(), caps);
        let stage_a = stage_plan(&core.a, &core.batch, core.m, core.k, tile.bm, tile.bk, v);
        let stage_b = stage_plan(&core.b, &core.batch, core.n, core.k, tile.bn, tile.bk, v);
        // Transposing stores (neighbours along the reduction) get a padded row.
        let pad = |s: Stage| {
            if !caps.is_serial() && s.axis == Axis::Reduction {
                SHARED_PAD
            } else {
                0
            }
        };
        let vn = tile.vn as u32;
        let c = &core.c;
        let c_vector = vn > 1
            && c.ld % vn == 0
            && c.base % vn == 0
            && core.n % vn == 0
            && core
                .batch
                .iter()
                .zip(&c.batch_strides)
                .all(|(&count, &s)| count == 1 || s % vn == 0);
        TileKernel {
            core,
            tile,
            stage_a,
            stage_b,
            lda: tile.bm + pad(stage_a),
            ldb: tile.bn + pad(stage_b),
            split: None,
            tiles_m: core.m.div_ceil(tile.bm),
            tiles_n: core.n.div_ceil(tile.bn),
            c_vector,
        }
    }

    fn slabs(&self) -> u32 {
        self.core.k.div_ceil(self.tile.bk)
    }

    fn shared_bytes(&self) -> u64 {
        let t = &self.tile;
        let mut elems = t.bk as u64 * (self.lda + self.ldb) as u64;
        if !t.resident() {
            elems += t.bm as u64 * t.bn as u64;
        }
        elems * self.core.compute().size_bytes() as u64
    }

    fn workgroups(&self) -> u64 {
        self.tiles_m as u64
            * self.tiles_n as u64
            * self.core.batch_count() as u64
            * self.split.map_or(1, |s| s.splits) as u64
    }

    /// Splits the reduction when there are few tiles and many slabs (GPU only).
    fn choose_split(&mut self, caps: &TargetCaps) {
        if caps.is_serial() {
            return;
        }
        let wgs = self.workgroups();
        let slabs = self.slabs();
        if wgs >= TARGET_WORKGROUPS as u64 / 2 || slabs < 16 {
            return;
        }
        let ld = round_up(self.core.n, self.tile.vn as u32);
        let per_split = self.core.batch_count() as u64 * self.core.m as u64 * ld as u64;
        let by_memory = (i32::MAX as u64 / per_split.max(1)).min(u32::MAX as u64) as u32;
        let wanted = (TARGET_WORKGROUPS as u64).div_ceil(wgs) as u32;
        let splits = wanted.min(slabs / 8).min(32).min(by_memory);
        if splits < 2 {
            return;
        }
        let slabs_per_split = slabs.div_ceil(splits);
        self.split = Some(SplitK {
            splits: slabs.div_ceil(slabs_per_split),
            slabs_per_split,
            ld,
        });
    }

    fn build(&self, caps: &TargetCaps, partial: Option<&Binding>) -> Result<Launch, LowerError> {
        let core = self.core;
        let compute = core.compute();
        let grid = fold_grid(
            u32::try_from(self.workgroups()).map_err(|_| LowerError::TooLarge {
                what: format!("{} workgroup count", core.name),
                value: self.workgroups(),
                limit: u32::MAX as u64,
            })?,
            caps,
        )?;
        let mut k = KernelBuilder::new(
            format!("{}_tile", core.name),
            [self.tile.invocations(), 1, 1],
        );
        let mut bindings = Vec::new();
        let a = k.buffer(core.a.name.clone(), core.a.dtype, core.a.len, Access::Read);
        bindings.push(core.a.binding.clone());
        let b = k.buffer(core.b.name.clone(), core.b.dtype, core.b.len, Access::Read);
        bindings.push(core.b.binding.clone());
        let (mut bias, mut c_in, mut alpha, mut beta) = (None, None, None, None);
        let out = match (partial, self.split) {
            (Some(binding), Some(split)) => {
                let len = split.splits as u64
                    * core.batch_count() as u64
                    * core.m as u64
                    * split.ld as u64;
                bindings.push(binding.clone());
                k.buffer("partial", compute, len, Access::Write)
            }
            _ => {
                if let Some(bs) = &core.bias {
                    let len = match bs.along {
                        BiasAxis::Rows => core.m,
                        BiasAxis::Cols => core.n,
                    };
                    bias = Some(k.buffer("bias", bs.dtype, len as u64, Access::Read));
                    bindings.push(bs.binding.clone());
                }
                if let Some(prior) = &core.prior {
                    c_in = Some(k.buffer("c_in", core.c.dtype, core.c.len, Access::Read));
                    bindings.push(prior.c_in.clone());
                }
                bindings.push(core.c.binding.clone());
                let out = k.buffer(core.c.name.clone(), core.c.dtype, core.c.len, Access::Write);
                alpha = Some(k.scalar("alpha", compute));
                bindings.push(core.alpha.clone());
                if let Some(prior) = &core.prior {
                    beta = Some(k.scalar("beta", compute));
                    bindings.push(prior.beta.clone());
                }
                out
            }
        };
        let t = self.tile;
        let a_sh = k.shared("a_tile", compute, t.bk * self.lda);
        let b_sh = k.shared("b_tile", compute, t.bk * self.ldb);
        let acc_sh = (!t.resident()).then(|| k.shared("acc_tile", compute, t.bm * t.bn));
        let mems = Mems {
            a,
            b,
            bias,
            c_in,
            out,
            alpha,
            beta,
            a_sh,
            b_sh,
            acc_sh,
        };
        let kernel = k.build(|f| self.body(f, grid, &mems))?;
        Ok(Launch {
            kernel,
            grid,
            bindings,
        })
    }

    fn body(&self, f: &mut Body, grid: [u32; 3], m: &Mems) {
        let place = self.place(f, grid);
        let t = self.tile;
        let core = self.core;
        let (begin, end) = match self.split {
            Some(s) => {
                let begin = f.let_("slab_begin", scale(place.split.clone(), s.slabs_per_split));
                let end = f.let_(
                    "slab_end",
                    (begin.clone() + s.slabs_per_split).min(E::from(self.slabs())),
                );
                (begin, end)
            }
            None => (E::from(0u32), E::from(self.slabs())),
        };
        let num = Num {
            ty: core.compute(),
            lanes: t.vn,
        };
        let (steps_m, steps_n) = t.steps();
        let sides = self.sides(m, &place);
        let coords: Vec<Option<Vec<Coord>>> = sides
            .iter()
            .map(|side| self.stage_coords(f, side, &place.tid))
            .collect();
        let stage_slab = |f: &mut Body, slab: &E| {
            let p0 = bind(f, "p0", scale(slab.clone(), t.bk));
            for (side, coords) in sides.iter().zip(&coords) {
                self.stage(f, side, coords.as_deref(), &p0, &place.tid);
            }
        };
        if t.resident() {
            let (row0, col0) = self.micro_origin(&place, E::from(0u32), E::from(0u32));
            let row0 = bind(f, "row0", row0);
            let col0 = bind(f, "col0", col0);
            let acc = self.zero_acc(f, &num);
            let unrolled: Option<Vec<&Vec<Coord>>> = coords.iter().map(|c| c.as_ref()).collect();
            match unrolled {
                Some(unrolled) => {
                    self.pipelined_loop(f, m, &sides, &unrolled, &acc, (&row0, &col0), (begin, end))
                }
                None => f.for_("slab", begin, end, 1, |f, slab| {
                    stage_slab(f, &slab);
                    f.barrier();
                    self.multiply(f, m, &acc, &row0, &col0);
                    f.barrier();
                }),
            }
            let values: Vec<Vec<E>> = acc
                .iter()
                .map(|row| row.iter().map(|v| v.get()).collect())
                .collect();
            self.epilogue(f, m, &place, &row0, &col0, &values);
            return;
        }
        let Some(acc_sh) = m.acc_sh else {
            return;
        };
        // Accumulators live in shared memory between slabs; each invocation zeroes and
        // later reads only its own micro-tiles.
        self.for_micro_tiles(f, &place, steps_m, steps_n, |f, row0, col0| {
            for (_, _, index) in self.acc_slots(row0, col0) {
                f.store(acc_sh, index, num.lit(0.0));
            }
        });
        f.for_("slab", begin, end, 1, |f, slab| {
            stage_slab(f, &slab);
            f.barrier();
            self.for_micro_tiles(f, &place, steps_m, steps_n, |f, row0, col0| {
                let acc = self.load_acc(f, acc_sh, row0, col0);
                self.multiply(f, m, &acc, row0, col0);
                for (r, cb, index) in self.acc_slots(row0, col0) {
                    f.store(acc_sh, index, acc[r][cb].get());
                }
            });
            f.barrier();
        });
        self.for_micro_tiles(f, &place, steps_m, steps_n, |f, row0, col0| {
            let acc = self.load_acc(f, acc_sh, row0, col0);
            let values: Vec<Vec<E>> = acc
                .iter()
                .map(|row| row.iter().map(|v| v.get()).collect())
                .collect();
            self.epilogue(f, m, &place, row0, col0, &values);
        });
    }

    /// The slab loop with register prefetch: the next slab's global loads are issued
    /// before the current slab's multiply-adds, so their latency hides behind them.
    /// Each iteration stores the registers into shared memory, synchronises, fetches
    /// the next slab into the registers and multiplies (the range is never empty).
    #[allow(clippy::too_many_arguments)]
    fn pipelined_loop(
        &self,
        f: &mut Body,
        m: &Mems,
        sides: &[Side],
        coords: &[&Vec<Coord>],
        acc: &[Vec<Var>],
        (row0, col0): (&E, &E),
        (begin, end): (E, E),
    ) {
        let bk = self.tile.bk;
        let regs: Vec<Vec<Var>> = sides
            .iter()
            .zip(coords)
            .map(|(side, cs)| {
                cs.iter()
                    .map(|_| f.var("next", self.side_num(side).lit(0.0)))
                    .collect()
            })
            .collect();
        let fetch_all = |f: &mut Body, p0: &E| {
            for ((side, cs), rs) in sides.iter().zip(coords).zip(&regs) {
                for (c, &reg) in cs.iter().zip(rs) {
                    match &c.guard {
                        Some(g) => f.if_(g.clone(), |f| self.prefetch_item(f, side, c, p0, reg)),
                        None => self.prefetch_item(f, side, c, p0, reg),
                    }
                }
            }
        };
        let first = bind(f, "p_first", scale(begin.clone(), bk));
        fetch_all(f, &first);
        let end = bind(f, "slab_stop", end);
        f.for_("slab", begin, end.clone(), 1, |f, slab| {
            for ((side, cs), rs) in sides.iter().zip(coords).zip(&regs) {
                for (c, reg) in cs.iter().zip(rs) {
                    match &c.guard {
                        Some(g) => f.if_(g.clone(), |f| self.store_shared(f, side, c, reg.get())),
                        None => self.store_shared(f, side, c, reg.get()),
                    }
                }
            }
            f.barrier();
            let next = bind(f, "slab_next", slab + 1u32);
            // Uniform: every invocation agrees on the slab range.
            f.if_(next.clone().lt(end.clone()), |f| {
                let p0 = bind(f, "p_next", scale(next.clone(), bk));
                fetch_all(f, &p0);
            });
            self.multiply(f, m, acc, row0, col0);
            f.barrier();
        });
    }

    /// Workgroup placement: which tile, batch and split this workgroup computes.
    fn place(&self, f: &mut Body, grid: [u32; 3]) -> Place {
        let t = self.tile;
        let core = self.core;
        let nt = t.invocations();
        let (tid, tx, ty) = if nt == 1 {
            (E::from(0u32), E::from(0u32), E::from(0u32))
        } else {
            let tid = f.let_("tid", local_id(0));
            let tx = f.let_("tx", rem(tid.clone(), t.tx));
            let ty = f.let_("ty", div(tid.clone(), t.tx));
            (tid, tx, ty)
        };
        let total = self.workgroups() as u32;
        let wg = f.let_("wg", linear_workgroup(grid));
        if grid[0] as u64 * grid[1] as u64 != total as u64 {
            // A folded grid has a few workgroups past the end (uniform: no barrier issue).
            f.if_(wg.clone().ge(total), |f| f.ret());
        }
        let tiles = self.tiles_m * self.tiles_n;
        let (tile, rest) = if total > tiles {
            (
                f.let_("tile", rem(wg.clone(), tiles)),
                f.let_("rest", div(wg, tiles)),
            )
        } else {
            (wg, E::from(0u32))
        };
        let splits = self.split.map_or(1, |s| s.splits);
        let (split, z) = if splits > 1 {
            (
                f.let_("split", rem(rest.clone(), splits)),
                bind(f, "z", div(rest, splits)),
            )
        } else {
            (E::from(0u32), rest)
        };
        let (tm_i, tn_j) = self.tile_coords(f, &tile);
        let m0 = bind(f, "m0", scale(tm_i, t.bm));
        let n0 = bind(f, "n0", scale(tn_j, t.bn));
        let off_a = batch_offset(
            f,
            "off_a",
            &z,
            &core.batch,
            &core.a.batch_strides,
            core.a.base,
        );
        let off_b = batch_offset(
            f,
            "off_b",
            &z,
            &core.batch,
            &core.b.batch_strides,
            core.b.base,
        );
        let off_c = batch_offset(
            f,
            "off_c",
            &z,
            &core.batch,
            &core.c.batch_strides,
            core.c.base,
        );
        Place {
            tid,
            tx,
            ty,
            m0,
            n0,
            z,
            split,
            off_a,
            off_b,
            off_c,
        }
    }

    /// Grouped launch order: `GROUP_M` tile rows are walked column by column, so that
    /// consecutive workgroups reuse the same panels of A and B from cache.
    fn tile_coords(&self, f: &mut Body, tile: &E) -> (E, E) {
        let (tm, tn) = (self.tiles_m, self.tiles_n);
        if tn == 1 {
            return (tile.clone(), E::from(0u32));
        }
        if tm == 1 {
            return (E::from(0u32), tile.clone());
        }
        let g = GROUP_M.min(tm);
        let span = g * tn;
        let group = f.let_("group", div(tile.clone(), span));
        let within = f.let_("within", rem(tile.clone(), span));
        let first = bind(f, "first_m", scale(group, g));
        if tm % g == 0 {
            let tile_m = f.let_("tile_m", add(first, rem(within.clone(), g)));
            let tile_n = f.let_("tile_n", div(within, g));
            (tile_m, tile_n)
        } else {
            let size = f.let_("group_size", (E::from(tm) - first.clone()).min(E::from(g)));
            let tile_m = f.let_("tile_m", first + within.clone() % size.clone());
            let tile_n = f.let_("tile_n", within / size);
            (tile_m, tile_n)
        }
    }

    /// Shared coordinates of a micro-tile's first row and column vector.
    fn micro_origin(&self, place: &Place, mi: E, mj: E) -> (E, E) {
        let t = self.tile;
        let row0 = add(scale(mi, t.tm * t.ty), scale(place.ty.clone(), t.vm as u32));
        let col0 = add(scale(mj, t.tn * t.tx), scale(place.tx.clone(), t.vn as u32));
        (row0, col0)
    }

    /// Shared row of micro-tile row `r` relative to `row0`.
    fn row_offset(&self, r: u32) -> u32 {
        let t = self.tile;
        let vm = t.vm as u32;
        (r / vm) * t.ty * vm + r % vm
    }

    /// Shared column of accumulator vector `cb` relative to `col0`.
    fn col_offset(&self, cb: u32) -> u32 {
        let t = self.tile;
        cb * t.tx * t.vn as u32
    }

    /// `(row, vector, shared index)` of every accumulator of a micro-tile in `acc_tile`.
    fn acc_slots(&self, row0: &E, col0: &E) -> Vec<(usize, usize, E)> {
        let t = self.tile;
        let mut v = Vec::new();
        for r in 0..t.tm {
            for cb in 0..t.tn / t.vn as u32 {
                let row = add(row0.clone(), E::from(self.row_offset(r)));
                let col = add(col0.clone(), E::from(self.col_offset(cb)));
                v.push((r as usize, cb as usize, add(scale(row, t.bn), col)));
            }
        }
        v
    }

    fn for_micro_tiles(
        &self,
        f: &mut Body,
        place: &Place,
        steps_m: u32,
        steps_n: u32,
        body: impl Fn(&mut Body, &E, &E),
    ) {
        f.for_("mi", 0u32, steps_m, 1, |f, mi| {
            f.for_("mj", 0u32, steps_n, 1, |f, mj| {
                let (row0, col0) = self.micro_origin(place, mi, mj);
                let row0 = bind(f, "row0", row0);
                let col0 = bind(f, "col0", col0);
                body(f, &row0, &col0);
            });
        });
    }

    fn zero_acc(&self, f: &mut Body, num: &Num) -> Vec<Vec<Var>> {
        let t = self.tile;
        (0..t.tm)
            .map(|_| {
                (0..t.tn / t.vn as u32)
                    .map(|_| f.var("acc", num.lit(0.0)))
                    .collect()
            })
            .collect()
    }

    /// The accumulators of a micro-tile, loaded from `acc_tile` (slots are listed row by
    /// row, vector by vector).
    fn load_acc(&self, f: &mut Body, acc_sh: Mem, row0: &E, col0: &E) -> Vec<Vec<Var>> {
        let t = self.tile;
        let mut acc: Vec<Vec<Var>> = vec![Vec::new(); t.tm as usize];
        for (r, _, index) in self.acc_slots(row0, col0) {
            let var = f.var("acc", acc_sh.load(index, t.vn));
            acc[r].push(var);
        }
        acc
    }

    /// The A and B sides of the kernel, with this workgroup's tile origin and batch
    /// offset.
    fn sides<'s>(&'s self, m: &Mems, place: &Place) -> [Side<'s>; 2] {
        let core = self.core;
        [
            Side {
                op: &core.a,
                plan: self.stage_a,
                ld: self.lda,
                outer_len: core.m,
                tile_outer: self.tile.bm,
                mem: m.a,
                sh: m.a_sh,
                r0: place.m0.clone(),
                off: place.off_a.clone(),
            },
            Side {
                op: &core.b,
                plan: self.stage_b,
                ld: self.ldb,
                outer_len: core.n,
                tile_outer: self.tile.bn,
                mem: m.b,
                sh: m.b_sh,
                r0: place.n0.clone(),
                off: place.off_b.clone(),
            },
        ]
    }

    /// Loads per invocation per slab of one side.
    fn items(&self, side: &Side) -> (u32, u32) {
        let items = side.tile_outer * self.tile.bk / side.plan.lanes as u32;
        (items, items.div_ceil(self.tile.invocations()))
    }

    /// The slab-invariant coordinates of this invocation's loads, computed once before
    /// the slab loop; `None` when there are too many to unroll (then each slab loops).
    fn stage_coords(&self, f: &mut Body, side: &Side, tid: &E) -> Option<Vec<Coord>> {
        let (items, per_invocation) = self.items(side);
        if per_invocation > 8 {
            return None;
        }
        let nt = self.tile.invocations();
        let mut coords = Vec::new();
        for q in 0..per_invocation {
            let e = bind(f, "e", add(tid.clone(), E::from(q * nt)));
            let guard = ((q + 1) * nt > items).then(|| e.clone().lt(items));
            coords.push(self.coord(f, side, e, guard));
        }
        Some(coords)
    }

    /// Tile coordinates `(o, p)` of load `e` and the matrix row `r0 + o`: neighbouring
    /// invocations take neighbouring addresses along the operand's contiguous axis.
    fn coord(&self, f: &mut Body, side: &Side, e: E, guard: Option<E>) -> Coord {
        let lanes = side.plan.lanes as u32;
        let (o, p) = match side.plan.axis {
            Axis::Outer => {
                let w = side.tile_outer / lanes;
                (scale(rem(e.clone(), w), lanes), div(e, w))
            }
            Axis::Reduction => {
                let w = self.tile.bk / lanes;
                (div(e.clone(), w), scale(rem(e, w), lanes))
            }
        };
        let o = bind(f, "o", o);
        let p = bind(f, "p", p);
        let r = bind(f, "r", add(side.r0.clone(), o.clone()));
        Coord { guard, o, p, r }
    }

    /// Stages the slab starting at reduction index `p0` of one side into shared memory.
    fn stage(&self, f: &mut Body, side: &Side, coords: Option<&[Coord]>, p0: &E, tid: &E) {
        match coords {
            Some(coords) => {
                for c in coords {
                    match &c.guard {
                        Some(g) => f.if_(g.clone(), |f| self.stage_item(f, side, c, p0)),
                        None => self.stage_item(f, side, c, p0),
                    }
                }
            }
            None => {
                let (items, _) = self.items(side);
                f.for_("e", tid.clone(), items, self.tile.invocations(), |f, e| {
                    let c = self.coord(f, side, e, None);
                    self.stage_item(f, side, &c, p0);
                });
            }
        }
    }

    /// The global index of a slab element and whether it is inside the operand (`None`:
    /// always).
    fn locate(&self, f: &mut Body, side: &Side, c: &Coord, p0: &E) -> (E, Option<E>) {
        let t = self.tile;
        let core = self.core;
        let pk = bind(f, "pk", add(p0.clone(), c.p.clone()));
        let (offset, inside) = side.op.gather.address(f, &c.r, &pk);
        let mut valid = None;
        if side.outer_len % side.tile_outer != 0 {
            valid = Some(c.r.clone().lt(side.outer_len));
        }
        if core.k % t.bk != 0 {
            valid = and_opt(valid, Some(pk.clone().lt(core.k)));
        }
        (add(side.off.clone(), offset), and_opt(valid, inside))
    }

    /// The numeric context of one side's loads.
    fn side_num(&self, side: &Side) -> Num {
        Num {
            ty: self.core.compute(),
            lanes: side.plan.lanes,
        }
    }

    /// The element (or vector) at `index`, in the compute type, rounded first when the
    /// GEMM rounds its inputs.
    fn fetch(&self, side: &Side, index: E) -> E {
        let num = self.side_num(side);
        let v = num.load(side.mem, side.op.dtype, index);
        match self.core.input_rounding {
            Some(to) => v.cast(to).cast(num.ty),
            None => v,
        }
    }

    /// Loads one element (or vector) of a slab, zero outside the operand, and stores it
    /// into shared memory.
    fn stage_item(&self, f: &mut Body, side: &Side, c: &Coord, p0: &E) {
        let (index, valid) = self.locate(f, side, c, p0);
        let value = match valid {
            None => bind(f, "v", self.fetch(side, index)),
            Some(cond) => {
                let v = f.var("v", self.side_num(side).lit(0.0));
                f.if_(cond, |f| f.assign(v, self.fetch(side, index)));
                v.get()
            }
        };
        self.store_shared(f, side, c, value);
    }

    /// Loads one element (or vector) of a slab into the register `reg` (zero outside
    /// the operand), to be stored into shared memory one slab later.
    fn prefetch_item(&self, f: &mut Body, side: &Side, c: &Coord, p0: &E, reg: Var) {
        let (index, valid) = self.locate(f, side, c, p0);
        match valid {
            None => f.assign(reg, self.fetch(side, index)),
            Some(cond) => f.if_else(
                cond,
                |f| f.assign(reg, self.fetch(side, index.clone())),
                |f| f.assign(reg, self.side_num(side).lit(0.0)),
            ),
        }
    }

    /// Stores a staged value reduction-major into the side's shared tile.
    fn store_shared(&self, f: &mut Body, side: &Side, c: &Coord, value: E) {
        let (plan, ld) = (side.plan, side.ld);
        let lanes = plan.lanes as u32;
        let at = |lane: u32| {
            let (p, o) = match plan.axis {
                Axis::Outer => (c.p.clone(), add(c.o.clone(), E::from(lane))),
                Axis::Reduction => (add(c.p.clone(), E::from(lane)), c.o.clone()),
            };
            add(scale(p, ld), o)
        };
        if lanes == 1 || plan.axis == Axis::Outer && ld % lanes == 0 {
            f.store(side.sh, at(0), value);
        } else {
            for lane in 0..lanes {
                f.store(side.sh, at(lane), value.clone().lane(lane as u8));
            }
        }
    }

    /// Accumulates the staged slab into one micro-tile.
    fn multiply(&self, f: &mut Body, m: &Mems, acc: &[Vec<Var>], row0: &E, col0: &E) {
        let t = self.tile;
        if t.unroll >= t.bk {
            for kk in 0..t.bk {
                let a_at = add(row0.clone(), E::from(kk * self.lda));
                let b_at = add(col0.clone(), E::from(kk * self.ldb));
                self.step(f, m, acc, a_at, b_at);
            }
        } else {
            f.for_("kk", 0u32, t.bk, t.unroll, |f, kb| {
                let a_row = bind(f, "a_row", add(scale(kb.clone(), self.lda), row0.clone()));
                let b_row = bind(f, "b_row", add(scale(kb, self.ldb), col0.clone()));
                for u in 0..t.unroll {
                    let a_at = add(a_row.clone(), E::from(u * self.lda));
                    let b_at = add(b_row.clone(), E::from(u * self.ldb));
                    self.step(f, m, acc, a_at, b_at);
                }
            });
        }
    }

    /// One reduction step: `acc[r][c] += a[r] · b[c]` for the micro-tile, reading the
    /// staged row of A from `a_at` and of B from `b_at`.
    fn step(&self, f: &mut Body, m: &Mems, acc: &[Vec<Var>], a_at: E, b_at: E) {
        let t = self.tile;
        let (vm, vn) = (t.vm as u32, t.vn as u32);
        let a_base = bind(f, "a_at", a_at);
        let b_base = bind(f, "b_at", b_at);
        let mut a_vals = Vec::with_capacity(t.tm as usize);
        for ca in 0..t.tm / vm {
            let v = f.let_(
                "a",
                m.a_sh
                    .load(add(a_base.clone(), E::from(ca * t.ty * vm)), t.vm),
            );
            for l in 0..vm {
                let scalar = if vm == 1 {
                    v.clone()
                } else {
                    v.clone().lane(l as u8)
                };
                a_vals.push(if vn == 1 {
                    bind(f, "ar", scalar)
                } else {
                    f.let_("ar", scalar.splat(t.vn))
                });
            }
        }
        let b_vals: Vec<E> = (0..t.tn / vn)
            .map(|cb| {
                f.let_(
                    "b",
                    m.b_sh
                        .load(add(b_base.clone(), E::from(self.col_offset(cb))), t.vn),
                )
            })
            .collect();
        for (r, a) in a_vals.iter().enumerate() {
            for (cb, b) in b_vals.iter().enumerate() {
                let var = acc[r][cb];
                f.assign(var, a.clone().fma(b.clone(), var.get()));
            }
        }
    }

    /// Writes a finished micro-tile: the epilogue into C, or the raw partial sums.
    fn epilogue(&self, f: &mut Body, m: &Mems, place: &Place, row0: &E, col0: &E, acc: &[Vec<E>]) {
        let t = self.tile;
        let core = self.core;
        let first_col = add(place.n0.clone(), col0.clone());
        let cols: Vec<E> = (0..t.tn / t.vn as u32)
            .map(|cb| {
                bind(
                    f,
                    "col",
                    add(first_col.clone(), E::from(self.col_offset(cb))),
                )
            })
            .collect();
        let first_row = add(place.m0.clone(), row0.clone());
        for (r, acc_row) in acc.iter().enumerate() {
            let row = bind(
                f,
                "row",
                add(first_row.clone(), E::from(self.row_offset(r as u32))),
            );
            let body = |f: &mut Body| {
                let row_at = match self.split {
                    Some(s) => {
                        let slice = add(
                            scale(place.split.clone(), core.batch_count()),
                            place.z.clone(),
                        );
                        scale(add(scale(slice, core.m), row.clone()), s.ld)
                    }
                    None => add(place.off_c.clone(), scale(row.clone(), core.c.ld)),
                };
                let row_at = bind(f, "row_at", row_at);
                let row_bias = match (&core.bias, m.bias, self.split) {
                    (Some(bs), Some(mem), None) if bs.along == BiasAxis::Rows => Some(bind(
                        f,
                        "row_bias",
                        Num::scalar(core.compute()).load(mem, bs.dtype, row.clone()),
                    )),
                    _ => None,
                };
                for (col, value) in cols.iter().zip(acc_row) {
                    let index = add(row_at.clone(), col.clone());
                    if self.split.is_some() {
                        self.store_partial(f, m, index, col, value.clone());
                    } else {
                        self.store_result(f, m, index, col, row_bias.clone(), value.clone());
                    }
                }
            };
            if core.m % t.bm == 0 {
                body(f);
            } else {
                f.if_(row.clone().lt(core.m), body);
            }
        }
    }

    /// Stores raw sums into the split-K partial buffer. Its rows are padded to whole
    /// vectors, so a vector that starts inside a row ends inside it.
    fn store_partial(&self, f: &mut Body, m: &Mems, index: E, col: &E, value: E) {
        let core = self.core;
        if core.n % self.tile.bn == 0 {
            f.store(m.out, index, value);
        } else {
            f.if_(col.clone().lt(core.n), |f| f.store(m.out, index, value));
        }
    }

    /// Stores `vn` columns of C from `index`: one vector store when C's placement is
    /// vector-aligned, else one guarded scalar store per column.
    fn store_result(
        &self,
        f: &mut Body,
        m: &Mems,
        index: E,
        col: &E,
        row_bias: Option<E>,
        value: E,
    ) {
        let core = self.core;
        let t = self.tile;
        let vn = t.vn as u32;
        if vn == 1 || self.c_vector {
            let finish = |f: &mut Body| {
                let index = bind(f, "c_at", index);
                let v = self.finish_value(m, &index, col, row_bias.clone(), value.clone(), t.vn);
                f.store(m.out, index, v);
            };
            if core.n % t.bn == 0 {
                finish(f);
            } else {
                f.if_(col.clone().lt(core.n), finish);
            }
            return;
        }
        let index = bind(f, "c_at", index);
        for lane in 0..vn {
            let col_l = add(col.clone(), E::from(lane));
            let index_l = add(index.clone(), E::from(lane));
            let lane_value = value.clone().lane(lane as u8);
            f.if_(col_l.clone().lt(core.n), |f| {
                let v = self.finish_value(m, &index_l, &col_l, row_bias.clone(), lane_value, 1);
                f.store(m.out, index_l.clone(), v);
            });
        }
    }

    /// `alpha·acc + beta·C_in (+ bias)`, rounded to C's type, for `lanes` columns.
    fn finish_value(
        &self,
        m: &Mems,
        index: &E,
        col: &E,
        row_bias: Option<E>,
        acc: E,
        lanes: u8,
    ) -> E {
        let core = self.core;
        let num = Num {
            ty: core.compute(),
            lanes,
        };
        let splat = |e: E| if lanes == 1 { e } else { e.splat(lanes) };
        let mut v = match &m.alpha {
            Some(alpha) => splat(alpha.clone()) * acc,
            None => acc,
        };
        if let (Some(c_in), Some(beta)) = (m.c_in, &m.beta) {
            v = v + splat(beta.clone()) * num.load(c_in, core.c.dtype, index.clone());
        }
        if let (Some(bs), Some(mem)) = (&core.bias, m.bias) {
            v = match (bs.along, row_bias) {
                (BiasAxis::Rows, Some(rb)) => v + splat(rb),
                _ => v + num.load(mem, bs.dtype, col.clone()),
            };
        }
        num.narrow(v, core.c.dtype)
    }
}

// ---------------------------------------------------------------------------------------
// Split-K reduction and gap fill
// ---------------------------------------------------------------------------------------

/// Sums the split partials of every C element and applies the epilogue (a coalesced
/// 1-D map over `batch × M × N`).
fn reduce_launch(
    core: &GemmCore,
    caps: &TargetCaps,
    split: SplitK,
    partial: &Binding,
) -> Result<Launch, LowerError> {
    let compute = core.compute();
    let batch = core.batch_count();
    let items = batch as u64 * core.m as u64 * core.n as u64;
    let grid = plan_1d(items, caps, 1)?;
    let mut k = KernelBuilder::new(format!("{}_split_sum", core.name), grid.workgroup_size());
    let partial_len = split.splits as u64 * batch as u64 * core.m as u64 * split.ld as u64;
    let mut bindings = vec![partial.clone()];
    let part = k.buffer("partial", compute, partial_len, Access::Read);
    let bias = core.bias.as_ref().map(|bs| {
        bindings.push(bs.binding.clone());
        let len = if bs.along == BiasAxis::Rows {
            core.m
        } else {
            core.n
        };
        k.buffer("bias", bs.dtype, len as u64, Access::Read)
    });
    let c_in = core.prior.as_ref().map(|prior| {
        bindings.push(prior.c_in.clone());
        k.buffer("c_in", core.c.dtype, core.c.len, Access::Read)
    });
    bindings.push(core.c.binding.clone());
    let out = k.buffer(core.c.name.clone(), core.c.dtype, core.c.len, Access::Write);
    let alpha = k.scalar("alpha", compute);
    bindings.push(core.alpha.clone());
    let beta = core.prior.as_ref().map(|prior| {
        bindings.push(prior.beta.clone());
        k.scalar("beta", compute)
    });
    let num = Num::scalar(compute);
    let kernel = k.build(|f| {
        grid.for_each_item(f, |f, e| {
            let j = bind(f, "j", rem(e.clone(), core.n));
            let rows = bind(f, "rows", div(e, core.n));
            let i = bind(f, "i", rem(rows.clone(), core.m));
            let z = bind(f, "z", div(rows.clone(), core.m));
            let first = bind(f, "first", add(scale(rows, split.ld), j.clone()));
            let stride = batch * core.m * split.ld;
            let mut sum: Option<E> = None;
            for s in 0..split.splits {
                let v = part.at(add(first.clone(), E::from(s * stride)));
                sum = Some(match sum {
                    None => v,
                    Some(acc) => acc + v,
                });
            }
            let sum = sum.unwrap_or_else(|| num.lit(0.0));
            let off_c = batch_offset(
                f,
                "off_c",
                &z,
                &core.batch,
                &core.c.batch_strides,
                core.c.base,
            );
            let index = bind(
                f,
                "c_at",
                add(off_c, add(scale(i.clone(), core.c.ld), j.clone())),
            );
            let mut v = alpha.clone() * sum;
            if let (Some(c_in), Some(beta)) = (c_in, &beta) {
                v = v + beta.clone() * num.load(c_in, core.c.dtype, index.clone());
            }
            if let (Some(bs), Some(mem)) = (&core.bias, bias) {
                let at = if bs.along == BiasAxis::Rows { i } else { j };
                v = v + num.load(mem, bs.dtype, at);
            }
            f.store(out, index, num.narrow(v, core.c.dtype));
        });
    })?;
    Ok(Launch {
        kernel,
        grid: grid.grid,
        bindings,
    })
}

/// Writes the elements of C's buffer that belong to no matrix (gaps left by `ldc` or
/// batch strides): the prior C when `beta != 0`, else 0. The tile kernel writes the
/// rest, so every element has exactly one writer.
fn gap_launch(core: &GemmCore, caps: &TargetCaps) -> Result<Launch, LowerError> {
    let c = &core.c;
    let grid = plan_1d(c.len, caps, 1)?;
    let mut k = KernelBuilder::new(format!("{}_gaps", core.name), grid.workgroup_size());
    let mut bindings = Vec::new();
    let c_in = core.prior.as_ref().map(|prior| {
        bindings.push(prior.c_in.clone());
        k.buffer("c_in", c.dtype, c.len, Access::Read)
    });
    bindings.push(c.binding.clone());
    let out = k.buffer(c.name.clone(), c.dtype, c.len, Access::Write);
    // Batches nest without overlap (the spec checks it): peel them off from the
    // largest stride down.
    let mut dims: Vec<(u32, u32)> = core
        .batch
        .iter()
        .zip(&c.batch_strides)
        .filter(|(&count, _)| count > 1)
        .map(|(&count, &stride)| (stride, count))
        .collect();
    dims.sort_unstable_by(|x, y| y.cmp(x));
    let span = (core.m - 1) * c.ld + core.n;
    let kernel = k.build(|f| {
        grid.for_each_item(f, |f, e| {
            let mut rest = if c.base == 0 {
                e.clone()
            } else {
                bind(f, "rel", e.clone().max(E::from(c.base)) - c.base)
            };
            for (stride, count) in &dims {
                let b = bind(f, "b", div(rest.clone(), *stride).min(E::from(count - 1)));
                rest = bind(f, "rest", rest.clone() - scale(b, *stride));
            }
            let mut inside = rest.clone().lt(span) & rem(rest, c.ld).lt(core.n);
            if c.base != 0 {
                inside = inside & e.clone().ge(c.base);
            }
            let value = match c_in {
                Some(mem) => mem.at(e.clone()),
                None => lit(c.dtype, 0.0),
            };
            f.if_(!inside, |f| f.store(out, e, value));
        });
    })?;
    Ok(Launch {
        kernel,
        grid: grid.grid,
        bindings,
    })
}

/// Appends the launches of `core` to `plan`: the tile kernel, and the split-K sum and
/// the gap fill when they are needed.
pub(crate) fn emit_gemm(
    core: &GemmCore,
    caps: &TargetCaps,
    plan: &mut PlanBuilder,
) -> Result<(), LowerError> {
    emit_gemm_with(core, caps, choose_tile(core, caps), plan)
}

/// [`emit_gemm`] with a given starting tile (tests force the other configurations).
pub(crate) fn emit_gemm_with(
    core: &GemmCore,
    caps: &TargetCaps,
    mut tile: Tile,
    plan: &mut PlanBuilder,
) -> Result<(), LowerError> {
    let mut kernel = TileKernel::new(core, caps, tile);
    // Halve the slab until the tiles fit the device's shared memory.
    while kernel.shared_bytes() > caps.shared_memory_bytes as u64 && tile.bk > 4 {
        tile.bk /= 2;
        tile.unroll = tile.unroll.min(tile.bk);
        kernel = TileKernel::new(core, caps, tile);
    }
    if kernel.shared_bytes() > caps.shared_memory_bytes as u64 {
        return Err(LowerError::SharedMemory {
            op: core.name.clone(),
            needed: kernel.shared_bytes(),
            available: caps.shared_memory_bytes as u64,
        });
    }
    kernel.choose_split(caps);
    if core.fill_gaps {
        let covered = core.batch_count() as u64 * core.m as u64 * core.n as u64;
        if covered < core.c.len {
            plan.launches.push(gap_launch(core, caps)?);
        }
    }
    match kernel.split {
        Some(split) => {
            let len =
                split.splits as u64 * core.batch_count() as u64 * core.m as u64 * split.ld as u64;
            let partial = plan.temp(core.compute(), len);
            plan.launches.push(kernel.build(caps, Some(&partial))?);
            plan.launches
                .push(reduce_launch(core, caps, split, &partial)?);
        }
        None => plan.launches.push(kernel.build(caps, None)?),
    }
    Ok(())
}
