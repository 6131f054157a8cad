//! Attention on matrix fragments (tensor cores) for f16 and bf16, on devices whose caps
//! say `matrix_fragments`: the schedule of [`super::lower`] (a workgroup per block of
//! queries, an online softmax over blocks of keys), with both products on `m16n8k16`
//! fragments.
//!
//! Four warps own 16 query rows each (64 per workgroup). Queries, keys and values are
//! staged in shared memory in the storage type, in rows of `head_dim` rounded up to 16
//! (zeros past it) and padded to an odd multiple of 8 elements (16-byte aligned rows
//! for `ldmatrix`, 8 of them on distinct banks). The loads of a block are all issued
//! into registers before the first is stored ([`InFlight`]): the queries once, each
//! key block during the block before, each value block while its scores form. Per key
//! block, with a barrier between phases:
//!
//! 1. **scores**: each warp multiplies its queries by the block's keys (`Q·Kᵀ`, f32
//!    sums of exact products) and stores its `16 × BK` scores to shared memory, rows
//!    padded to an odd stride so that a column read is conflict-free;
//! 2. **row pass** (an invocation per row, four partial maxima): scale, mask and
//!    visibility (`−∞` for a hidden key), the new running max, its finite shift and
//!    the rescale `α`; the values' block is stored;
//! 3. `P = 2^{(S − shift)·log₂e}` (f32, kept for the row sums; `exp2` is one
//!    instruction on a GPU) and `P` rounded to the storage type for the second
//!    product; the rows of `O` (f32, shared) whose `α ≠ 1` rescaled, a warp per row;
//!    the next keys stored;
//! 4. `l = α·l + Σ P` per row, and `O += P·V`: each warp loads its rows of `O` as
//!    accumulator fragments, multiplies and stores them back, up to 64 columns at a
//!    time. With `causal`, a block that some row of the workgroup does not see whole
//!    takes the SIMT path instead (a key hidden from a row never multiplies into it,
//!    so a NaN or ∞ value there cannot leak: the family's rule), a block or two per
//!    row of blocks.
//!
//! The elementwise phases take four items per step, counted so that the value ranges
//! bound every index (no bounds checks). The rounding of `P` to f16/bf16 is in the
//! family's tolerance row (`condition::attention`); everything else is as
//! [`super::lower`] computes it, summed by the tensor cores in their own order
//! (docs/semantics.md, "Matrix fragments").
//!
//! Measured on an H200 (bench/gpu/results/2026-11-29-h200-issue19-attention.md): 74
//! TFLOP/s at bf16 8×16×4096×128, 11% of PyTorch's SDPA, against 30 for this kernel's
//! first build. What holds it there is the softmax between the products going through
//! shared memory (S, P and O make a round trip per block); keeping S and O in
//! registers (FlashAttention-2) needs the IR to express per-row operations on
//! accumulators, which it does not yet.

use super::lower::{
    block_coords, declare_buffers, each_workgroup, finish, init_rows, key_block_count, shape_of,
    single_launch, strided, Block, Buffers, RowStats, Shape, Tiles,
};
use super::AttentionSpec;
use crate::lower::math::Num;
use crate::lower::{LowerError, Plan, TargetCaps, Uniforms};
use crate::spec::OpSpec;
use kernelc_ir::builder::*;
use kernelc_ir::fragment::{FragmentLayout, FragmentRole, MmaShape, WARP};
use kernelc_ir::{FragmentId, ScalarType};

/// The multiply: f16/bf16 operands, f32 sums.
const SHAPE: MmaShape = MmaShape::M16N8K16;
/// Accumulator fragments of `O` a warp holds at once (64 columns).
const O_FRAGMENTS: u32 = 8;
/// Padding of a staged row of Q, K, V and P (16 bytes of 16-bit elements).
const PAD: u32 = 8;
/// Items an invocation takes per step of the elementwise phases, and independent
/// partial maxima and sums per row in the row phases.
const UNROLL: u32 = 4;

/// The sizes of one lowering.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct FragmentTiles {
    /// Warps of a workgroup, each owning `SHAPE.m` query rows.
    warps: u32,
    /// Keys per block.
    bk: u32,
    /// `head_dim` rounded up to the multiply's depth (16).
    dk: u32,
    /// `head_dim` rounded up to a fragment's width (8): the columns of `O`.
    dn: u32,
}

impl FragmentTiles {
    /// Query rows of a workgroup.
    fn bq(&self) -> u32 {
        self.warps * SHAPE.m
    }
    /// A staged row of Q, K or V.
    fn row(&self) -> u32 {
        self.dk + PAD
    }
    /// A row of the scores (odd: a column's reads hit 32 banks).
    fn s_stride(&self) -> u32 {
        self.bk + 1
    }
    /// A row of the rounded weights.
    fn p_stride(&self) -> u32 {
        self.bk + PAD
    }
    /// A row of `O`: 8 words past a multiple of 32, so that the fragments' pairs of
    /// a quarter-warp's rows hit distinct banks.
    fn acc_stride(&self) -> u32 {
        self.dn + 8
    }

    fn shared_bytes(&self, dtype: ScalarType) -> u64 {
        let elem = dtype.size_bytes() as u64;
        let bq = self.bq() as u64;
        let staged = (bq + 2 * self.bk as u64) * self.row() as u64 * elem;
        let weights = bq * self.p_stride() as u64 * elem;
        let f32s = bq * (self.s_stride() + self.acc_stride() + 4) as u64;
        staged + weights + 4 * f32s
    }
}

/// The tiles of the fragment kernel for `spec` on `caps`, or `None` where the SIMT
/// kernel serves: no matrix units, another dtype, empty sequences, or too little
/// shared memory even with 32-key blocks.
pub(super) fn tiles(spec: &AttentionSpec, caps: &TargetCaps) -> Option<FragmentTiles> {
    let eligible = caps.matrix_fragments
        && matches!(spec.dtype, ScalarType::F16 | ScalarType::Bf16)
        && caps.max_invocations_per_workgroup >= 4 * WARP
        && spec.seq_q > 0
        && spec.seq_k > 0;
    if !eligible {
        return None;
    }
    let d = u32::try_from(spec.head_dim).ok()?;
    let (dk, dn) = (
        d.checked_next_multiple_of(SHAPE.k)?,
        d.checked_next_multiple_of(SHAPE.n)?,
    );
    let budget = caps.opt_in_shared_memory_limit() as u64;
    // Four warps: eight (128 queries sharing each staged key block) measured no
    // faster on an H200 (61 against 62 TFLOP/s at bf16 8×16×4096×128, 34 against 41
    // at head_dim 64), and leave less room for large head dims.
    [(4, 64), (4, 32)]
        .into_iter()
        .map(|(warps, bk)| FragmentTiles { warps, bk, dk, dn })
        .find(|t| {
            t.shared_bytes(spec.dtype) <= budget
                && t.warps * WARP <= caps.max_invocations_per_workgroup
        })
}

/// The shared arrays.
struct Staged {
    io: Buffers,
    /// Queries, keys, values: `[rows][row()]` in the storage type.
    qs: Mem,
    ks: Mem,
    vs: Mem,
    /// Scores, then weights (f32), `[bq][s_stride]`.
    s: Mem,
    /// Weights rounded to the storage type, `[bq][p_stride]`.
    p: Mem,
    /// Unnormalised output (f32), `[bq][dn]`.
    acc: Mem,
    rows: RowStats,
}

/// The fragments: one `A` and one `B` (loaded before each multiply), the score
/// accumulators of a warp's rows (`BK / 8`) and `O`'s ([`O_FRAGMENTS`]).
struct Fragments {
    a: FragmentId,
    b: FragmentId,
    scores: Vec<FragmentId>,
    out: Vec<FragmentId>,
}

pub(super) fn attention(
    spec: &AttentionSpec,
    caps: &TargetCaps,
    ft: FragmentTiles,
) -> Result<Plan, LowerError> {
    let tiles = Tiles {
        bq: ft.bq(),
        bk: ft.bk,
        rows: 1,
        k_stride: ft.row(),
    };
    let sh = shape_of(spec, caps, tiles, ft.warps * WARP)?;
    let op = OpSpec::Attention(spec.clone());
    let mut k = KernelBuilder::new(format!("{}_mma", op.name()), [sh.invocations, 1, 1]);
    let uniforms = op.uniforms();
    let scale = Uniforms::new(&uniforms).param("scale")?;
    let io = declare_buffers(&mut k, &op, &scale)?;
    let (dt, f32) = (spec.dtype, ScalarType::F32);
    let m = Staged {
        io,
        qs: k.shared("q_tile", dt, ft.bq() * ft.row()),
        ks: k.shared("k_tile", dt, ft.bk * ft.row()),
        vs: k.shared("v_tile", dt, ft.bk * ft.row()),
        s: k.shared("scores", f32, ft.bq() * ft.s_stride()),
        p: k.shared("weights", dt, ft.bq() * ft.p_stride()),
        acc: k.shared("acc", f32, ft.bq() * ft.acc_stride()),
        rows: RowStats::declare(&mut k, f32, ft.bq()),
    };
    let kernel = k.build(|f| {
        let fr = Fragments {
            a: f.fragment("a", FragmentRole::A, SHAPE, dt),
            b: f.fragment("b", FragmentRole::B, SHAPE, dt),
            scores: (0..ft.bk / SHAPE.n)
                .map(|_| f.fragment("s", FragmentRole::Accumulator, SHAPE, f32))
                .collect(),
            out: (0..O_FRAGMENTS.min(ft.dn / SHAPE.n))
                .map(|_| f.fragment("o", FragmentRole::Accumulator, SHAPE, f32))
                .collect(),
        };
        each_workgroup(f, &sh, |f, wg| body(f, &sh, ft, &m, &fr, wg))
    })?;
    Ok(single_launch(&op, kernel, sh.grid, scale))
}

fn body(f: &mut Body, sh: &Shape, ft: FragmentTiles, m: &Staged, fr: &Fragments, wg: E) {
    let blk = block_coords(f, sh, wg);
    let n = sh.num;
    let q_at = (&blk.q_base, sh.q_layout.row_stride);
    let kv_at = (&blk.kv_base, sh.kv_layout.row_stride);
    let queries = load_rows(f, sh, ft, (m.io.q, ft.bq()), (&blk.q0, sh.seq_q), q_at);
    let keys = load_rows(
        f,
        sh,
        ft,
        (m.io.k, ft.bk),
        (&E::from(0u32), sh.seq_k),
        kv_at,
    );
    store_rows(f, sh, ft, &queries, m.qs);
    store_rows(f, sh, ft, &keys, m.ks);
    strided(f, sh, "t", ft.bq() * ft.acc_stride(), |f, t| {
        f.store(m.acc, t, n.lit(0.0))
    });
    init_rows(f, sh, &m.rows);
    f.barrier();
    // Warp `w` owns query rows `16·w ..`: its fragment accesses start there.
    let warp_row = f.let_("warp_row", (local_id(0) / WARP) * SHAPE.m);
    let key_blocks = key_block_count(f, sh, &blk);
    // Each block's keys are staged during the block before (`ks` is free once the
    // scores are formed), its values while its scores are (`vs` is free once the
    // last block's `P·V` is done): their loads run while other phases compute.
    f.for_("kb", 0u32, key_blocks, 1, |f, kb| {
        let k0 = f.let_("k0", kb * ft.bk);
        let values = load_rows(f, sh, ft, (m.io.v, ft.bk), (&k0, sh.seq_k), kv_at);
        scores(f, ft, m, fr, &warp_row);
        f.barrier();
        let next = f.let_("k_next", k0.clone() + ft.bk);
        let keys = load_rows(f, sh, ft, (m.io.k, ft.bk), (&next, sh.seq_k), kv_at);
        score_rows(f, sh, ft, m, &blk, &k0);
        store_rows(f, sh, ft, &values, m.vs);
        f.barrier();
        weights(f, sh, ft, m);
        store_rows(f, sh, ft, &keys, m.ks);
        f.barrier();
        row_sums(f, sh, ft, m);
        if sh.causal {
            // Every row of the workgroup sees every key of the block iff its first
            // row does: `k0 + bk − 1 + seq_q ≤ q0 + causal_keys`.
            let whole = (k0.clone() + (ft.bk + sh.seq_q)).le(blk.q0.clone() + (sh.causal_keys + 1));
            f.if_else(
                whole,
                |f| accumulate(f, ft, m, fr, &warp_row),
                |f| accumulate_seen(f, sh, ft, m, &blk, &k0),
            );
        } else {
            accumulate(f, ft, m, fr, &warp_row);
        }
        f.barrier();
    });
    finish(f, sh, &m.io, (m.acc, ft.acc_stride()), &m.rows, &blk);
}

/// A block of rows on its way to shared memory: each invocation's loads, in flight
/// in registers (all issued before the first is stored, so the block costs one
/// memory latency, and none where other work runs between the two halves).
struct InFlight {
    /// `rows` rows of `[row()]` elements, `lanes` per load.
    rows: u32,
    lanes: u32,
    /// An invocation's loads: the `q`-th covers item `thread + q · invocations`.
    regs: Vec<Var>,
}

impl InFlight {
    fn items(&self, ft: FragmentTiles) -> u32 {
        self.rows * ft.dk / self.lanes
    }

    /// Runs `body(f, q, row, column)` for each load `q` of this invocation whose item
    /// is inside the block.
    fn each(
        &self,
        f: &mut Body,
        sh: &Shape,
        ft: FragmentTiles,
        body: impl Fn(&mut Body, usize, E, E),
    ) {
        let per_row = ft.dk / self.lanes;
        let items = self.items(ft);
        for q in 0..self.regs.len() {
            let item = local_id(0) + q as u32 * sh.invocations;
            let run = |f: &mut Body| {
                let item = f.let_("item", item.clone());
                let r = f.let_("r", item.clone() / per_row);
                let e = f.let_("e", (item % per_row) * self.lanes);
                body(f, q, r, e);
            };
            if (q as u32 + 1) * sh.invocations <= items {
                run(f);
            } else {
                f.if_(item.clone().lt(items), run);
            }
        }
    }
}

/// Loads `rows` rows from `first` of a sequence (`limit` rows long) at `base`,
/// `stride` apart: columns past `head_dim` and rows past `limit` are zero. 4 elements
/// per load where `head_dim` allows (every row then starts at a multiple of 4).
fn load_rows(
    f: &mut Body,
    sh: &Shape,
    ft: FragmentTiles,
    (src, rows): (Mem, u32),
    (first, limit): (&E, u32),
    (base, stride): (&E, u32),
) -> InFlight {
    let lanes: u32 = if sh.d % 4 == 0 { 4 } else { 1 };
    let zero = Num {
        ty: sh.dtype,
        lanes: lanes as u8,
    }
    .lit(0.0);
    let count = (rows * ft.dk / lanes).div_ceil(sh.invocations);
    let block = InFlight {
        rows,
        lanes,
        regs: (0..count).map(|_| f.var("staged", zero.clone())).collect(),
    };
    block.each(f, sh, ft, |f, q, r, e| {
        let pos = f.let_("pos", first.clone() + r);
        let inside = pos.clone().lt(limit) & e.clone().lt(sh.d);
        let reg = block.regs[q];
        f.if_(inside, |f| {
            f.assign(reg, src.load(base.clone() + pos * stride + e, lanes as u8));
        });
    });
    block
}

/// Stores a block loaded by [`load_rows`] into `dst` (`[rows][row()]`).
fn store_rows(f: &mut Body, sh: &Shape, ft: FragmentTiles, block: &InFlight, dst: Mem) {
    block.each(f, sh, ft, |f, q, r, e| {
        f.store(dst, r * ft.row() + e, block.regs[q].get());
    });
}

/// `for t in thread..count step invocations`, `UNROLL` items per step written side by
/// side (independent chains the scheduler interleaves: with four warps a workgroup
/// has little else to hide latency behind); the tiles make `count` a multiple of
/// `UNROLL · invocations`, and any rest is taken one item per step.
fn unrolled(f: &mut Body, sh: &Shape, name: &str, count: u32, body: impl Fn(&mut Body, E)) {
    let step = UNROLL * sh.invocations;
    // Counted in steps, so that the value ranges bound every `t` below `count` (and
    // the accesses it indexes need no bounds check).
    f.for_(name, 0u32, count / step, 1, |f, s| {
        for u in 0..UNROLL {
            let t = f.let_("t", s.clone() * step + (local_id(0) + u * sh.invocations));
            body(f, t);
        }
    });
    let done = count - count % step;
    if done < count {
        f.for_(name, local_id(0) + done, count, sh.invocations, body);
    }
}

/// `S = Q·Kᵀ` for each warp's rows, stored to `m.s`.
fn scores(f: &mut Body, ft: FragmentTiles, m: &Staged, fr: &Fragments, warp_row: &E) {
    let row = ft.row();
    for &s in &fr.scores {
        f.fill_fragment(s, Num::scalar(ScalarType::F32).lit(0.0));
    }
    f.for_("kd", 0u32, ft.dk / SHAPE.k, 1, |f, kd| {
        let col = f.let_("col", kd * SHAPE.k);
        let q_at = warp_row.clone() * row + col.clone();
        f.load_fragment(fr.a, m.qs, q_at, row, FragmentLayout::RowMajor);
        for (j, &s) in (0u32..).zip(&fr.scores) {
            // Kᵀ: element (e, key) at key·row + e.
            let k_at = col.clone() + j * SHAPE.n * row;
            f.load_fragment(fr.b, m.ks, k_at, row, FragmentLayout::ColMajor);
            f.mma(s, fr.a, fr.b, s);
        }
    });
    let s_stride = ft.s_stride();
    for (j, &s) in (0u32..).zip(&fr.scores) {
        let at = warp_row.clone() * s_stride + j * SHAPE.n;
        f.store_fragment(s, m.s, at, s_stride, FragmentLayout::RowMajor);
    }
}

/// Per row: the scores scaled and masked (`−∞` where the key is hidden or past the
/// sequences), the new running max, its finite shift and the rescale `α`.
fn score_rows(f: &mut Body, sh: &Shape, ft: FragmentTiles, m: &Staged, blk: &Block, k0: &E) {
    let n = sh.num;
    let s_stride = ft.s_stride();
    strided(f, sh, "r", ft.bq(), |f, r| {
        let i = f.let_("i", blk.q0.clone() + r.clone());
        let row = f.let_("s_row", r.clone() * s_stride);
        let old = f.let_("m_old", m.rows.max.at(r.clone()));
        // Score `j`: scaled and masked, or `−∞` where hidden; stored back, into `max`.
        let score_at = |f: &mut Body, j: E, max: Var| {
            let kj = f.let_("kj", k0.clone() + j.clone());
            let at = f.let_("s_at", row.clone() + j);
            let score = f.var("score", n.lit(f64::NEG_INFINITY));
            f.if_(sh.sees(&i, &kj), |f| {
                let s = sh.score(&m.io, blk, m.s.at(at.clone()), (i.clone(), kj));
                f.assign(score, s);
            });
            f.store(m.s, at, score.get());
            f.assign(max, max.get().max(score.get()));
        };
        // Partial maxima over the block's quarters (max is exact in any order).
        let maxima: Vec<Var> = (0..UNROLL).map(|_| f.var("m_part", old.clone())).collect();
        let quarter = ft.bk / UNROLL;
        f.for_("j", 0u32, quarter, 1, |f, j| {
            for (u, &max) in (0u32..).zip(&maxima) {
                let j = f.let_("j_u", j.clone() + u * quarter);
                score_at(f, j, max);
            }
        });
        let max = maxima
            .iter()
            .map(|m| m.get())
            .reduce(|a, b| a.max(b))
            .unwrap_or_else(|| old.clone());
        let max = f.let_("m_new", max);
        m.rows.update(f, n, r, (old, max));
    });
}

/// `P = e^{S − shift}` (as `2^{(S − shift)·log₂e}`) in place and rounded into `m.p`;
/// `O` scaled by `α`.
fn weights(f: &mut Body, sh: &Shape, ft: FragmentTiles, m: &Staged) {
    let n = sh.num;
    let bk = ft.bk;
    unrolled(f, sh, "t", ft.bq() * bk, |f, t| {
        let r = f.let_("r", t.clone() / bk);
        let j = f.let_("j", t % bk);
        let at = f.let_("s_at", r.clone() * ft.s_stride() + j.clone());
        // e^x as 2^(x·log₂e): the rounding of the product moves the weight by
        // |x|·u (the tolerance's |sⱼ − m| term), and `exp2` is one instruction on a
        // GPU (f32 `exp2` within 2 ULP) where `exp` is some 30.
        let x = m.s.at(at.clone()) - m.rows.shift.at(r.clone());
        let p = f.let_("p", (x * n.lit(std::f64::consts::LOG2_E)).exp2());
        f.store(m.s, at, p.clone());
        f.store(m.p, r * ft.p_stride() + j, n.narrow(p, sh.dtype));
    });
    // A warp per row, `UNROLL` rows per step (their `α` read together); a row whose
    // max did not move (`α = 1`, most rows after the first blocks) is left as it is.
    let rows_per_step = UNROLL * ft.warps;
    f.for_("rs", 0u32, ft.bq() / rows_per_step, 1, |f, rs| {
        let rows: Vec<(E, E)> = (0..UNROLL)
            .map(|u| {
                let r = f.let_(
                    "r",
                    rs.clone() * rows_per_step + (local_id(0) / WARP + u * ft.warps),
                );
                let alpha = f.let_("alpha", m.rows.scale.at(r.clone()));
                (r, alpha)
            })
            .collect();
        for (r, alpha) in rows {
            f.if_(alpha.clone().ne(n.lit(1.0)), |f| {
                let row = f.let_("o_row", r * ft.acc_stride());
                f.for_("c", local_id(0) % WARP, ft.dn, WARP, |f, c| {
                    let at = f.let_("o_at", row.clone() + c);
                    f.store(m.acc, at.clone(), m.acc.at(at) * alpha.clone());
                });
            });
        }
    });
}

/// `l = α·l + Σ_j P` per row.
fn row_sums(f: &mut Body, sh: &Shape, ft: FragmentTiles, m: &Staged) {
    let n = sh.num;
    strided(f, sh, "r", ft.bq(), |f, r| {
        let row = f.let_("p_row", r.clone() * ft.s_stride());
        // Partial sums over the block's quarters, then their pairwise sum.
        let sums: Vec<Var> = (0..UNROLL).map(|_| f.var("p_sum", n.lit(0.0))).collect();
        let quarter = ft.bk / UNROLL;
        f.for_("j", 0u32, quarter, 1, |f, j| {
            for (u, &sum) in (0u32..).zip(&sums) {
                let at = row.clone() + (j.clone() + u * quarter);
                f.assign(sum, sum.get() + m.s.at(at));
            }
        });
        let sum = (sums[0].get() + sums[1].get()) + (sums[2].get() + sums[3].get());
        let alpha = m.rows.scale.at(r.clone());
        f.store(m.rows.sum, r.clone(), m.rows.sum.at(r) * alpha + sum);
    });
}

/// `O += P·V` on fragments: each warp its rows, [`O_FRAGMENTS`] columns of
/// fragments at a time.
fn accumulate(f: &mut Body, ft: FragmentTiles, m: &Staged, fr: &Fragments, warp_row: &E) {
    let (row, dn, stride) = (ft.row(), ft.dn, ft.acc_stride());
    let chunk = fr.out.len() as u32 * SHAPE.n;
    for c0 in (0..dn).step_by(chunk as usize) {
        let frags = &fr.out[..((dn - c0) / SHAPE.n).min(fr.out.len() as u32) as usize];
        let o_at = |j: u32| warp_row.clone() * stride + (c0 + j * SHAPE.n);
        for (j, &o) in (0u32..).zip(frags) {
            f.load_fragment(o, m.acc, o_at(j), stride, FragmentLayout::RowMajor);
        }
        f.for_("kp", 0u32, ft.bk / SHAPE.k, 1, |f, kp| {
            let key = f.let_("key", kp * SHAPE.k);
            let p_at = warp_row.clone() * ft.p_stride() + key.clone();
            f.load_fragment(fr.a, m.p, p_at, ft.p_stride(), FragmentLayout::RowMajor);
            for (j, &o) in (0u32..).zip(frags) {
                let v_at = key.clone() * row + (c0 + j * SHAPE.n);
                f.load_fragment(fr.b, m.vs, v_at, row, FragmentLayout::RowMajor);
                f.mma(o, fr.a, fr.b, o);
            }
        });
        for (j, &o) in (0u32..).zip(frags) {
            f.store_fragment(o, m.acc, o_at(j), stride, FragmentLayout::RowMajor);
        }
    }
}

/// `O += P·V` for a block some rows see only in part (causal): an invocation per
/// element of `O`, over the keys its row sees (the block's first
/// `clamp(i + causal_keys + 1 − seq_q − k0, 0, bk)`), with the weights in f32.
fn accumulate_seen(f: &mut Body, sh: &Shape, ft: FragmentTiles, m: &Staged, blk: &Block, k0: &E) {
    let (n, d, bk) = (sh.num, sh.d, ft.bk);
    let from = f.let_("k_from", k0.clone() + sh.seq_q);
    strided(f, sh, "t", ft.bq() * d, |f, t| {
        let r = f.let_("r", t.clone() / d);
        let e = f.let_("e", t % d);
        let i = blk.q0.clone() + r.clone();
        let seen = f.let_("seen", sh.keys_seen(&from, i, bk));
        let p_row = f.let_("p_row", r.clone() * ft.s_stride());
        let sum = f.var("pv", n.lit(0.0));
        f.for_("j", 0u32, seen, 1, |f, j| {
            let v = n.widen(m.vs.at(j.clone() * ft.row() + e.clone()), sh.dtype);
            f.assign(sum, sum.get() + m.s.at(p_row.clone() + j) * v);
        });
        let at = f.let_("o_at", r * ft.acc_stride() + e);
        f.store(m.acc, at.clone(), m.acc.at(at) + sum.get());
    });
}

#[cfg(test)]
mod tests {
    //! Every f16/bf16 attention case of the table through the fragment kernel, in the
    //! interpreter as written and as the expansion makes it for other targets.

    use super::tiles;
    use crate::conformance::{cases, check, Executor, OnFragments};
    use crate::lower::{lower, TargetCaps};
    use crate::op::Op;
    use crate::ops::attention::AttentionSpec;
    use crate::spec::{OpKind, OpSpec};
    use kernelc_ir::ScalarType;

    fn half_attention() -> Vec<AttentionSpec> {
        cases::for_kind(OpKind::Attention)
            .into_iter()
            .filter_map(|s| match s {
                OpSpec::Attention(a) if matches!(a.dtype, ScalarType::F16 | ScalarType::Bf16) => {
                    Some(a)
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn half_attention_conforms_on_fragments_and_expanded() {
        let specs = half_attention();
        assert!(specs.len() >= 8, "{} f16/bf16 attention cases", specs.len());
        for spec in &specs {
            let op = OpSpec::Attention(spec.clone());
            let fragments = tiles(spec, &TargetCaps::cuda_sm90()).is_some();
            for expanded in [false, true] {
                let exec = OnFragments { expanded };
                match check(&exec, &op, 11) {
                    Ok(()) => assert!(fragments, "{spec:?} ran without fragments"),
                    Err(e) if !fragments && e.to_string().contains("no fragment kernel") => {}
                    Err(e) => panic!("{}: {spec:?}: {e}", exec.name()),
                }
            }
        }
    }

    /// Head dims up to 256 fit the opt-in shared memory with 64-key blocks; the
    /// plain 48 KiB takes none of them.
    #[test]
    fn tiles_fit_the_shared_memory_they_may_use() {
        let spec = |head_dim| AttentionSpec {
            dtype: ScalarType::Bf16,
            head_dim,
            ..AttentionSpec::example()
        };
        let caps = TargetCaps::cuda_sm90();
        for d in [8, 40, 64, 128, 256] {
            let t = tiles(&spec(d), &caps).unwrap();
            assert_eq!(t.bk, 64, "head_dim {d}");
            assert_eq!(t.warps, 4, "head_dim {d}");
            assert!(t.shared_bytes(ScalarType::Bf16) <= caps.opt_in_shared_memory_bytes as u64);
            assert_eq!(t.dk % 16, 0);
        }
        assert!(tiles(&spec(1024), &caps).is_none());
        let plain = TargetCaps {
            opt_in_shared_memory_bytes: 0,
            ..caps
        };
        assert!(tiles(&spec(128), &plain).is_none());
        // The kernel it makes: 4 warps, 64 query rows per workgroup.
        let plan = lower(&OpSpec::Attention(spec(128)), &caps).unwrap();
        let kernel = &plan.launches[0].kernel;
        assert!(kernel.uses_fragments());
        assert_eq!(kernel.invocations_per_workgroup(), 128);
        assert_eq!(
            plan.launches[0].grid[0],
            AttentionSpec::example().seq_q.div_ceil(64) as u32
                * (AttentionSpec::example().batch * AttentionSpec::example().heads) as u32
        );
    }

    #[test]
    fn other_devices_and_dtypes_keep_the_simt_kernel() {
        for spec in cases::for_kind(OpKind::Attention) {
            let OpSpec::Attention(a) = &spec else {
                continue;
            };
            for caps in [
                TargetCaps::cpu(),
                TargetCaps::gpu_baseline(),
                TargetCaps::cuda_sm90(),
            ] {
                let fragments = caps.matrix_fragments
                    && matches!(a.dtype, ScalarType::F16 | ScalarType::Bf16)
                    && a.seq_q > 0
                    && a.seq_k > 0;
                let Ok(plan) = lower(&spec, &caps) else {
                    continue;
                };
                let used = plan.launches.iter().any(|l| l.kernel.uses_fragments());
                assert_eq!(used, fragments, "{spec:?}");
            }
        }
    }
}
