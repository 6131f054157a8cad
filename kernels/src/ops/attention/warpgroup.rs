//! Attention on warpgroup fragments (Hopper's `wgmma`) for f16 and bf16: a workgroup
//! is a warpgroup owning 64 query rows of one (batch, head) (two sharing the staged
//! keys and values, half the copies per row, ran 6-10% slower on an H200 at
//! 8×16×4096×128: the block's barrier keeps them in step, both multiplying, then
//! both exponentiating); both products are single `m64` multiplies per 16-deep step,
//! `Q·Kᵀ`'s operands read by the matrix units from shared memory, `P·V`'s `P` from
//! registers.
//!
//! Queries, keys and values are staged in the swizzled layout the multiplies read
//! (rows of 64 elements in bands of 8, [`super::staging::swizzled`]: a row written
//! whole hits every bank once; zeros past `head_dim` and past the sequences), copied
//! in by `cp.async`, keys and values two blocks deep.
//! Per block of `BK` keys:
//!
//! 1. `S = Q·Kᵀ` (`m64nBKk16`, `A` the queries by rows, `B` the keys by columns);
//! 2. the online softmax on `S` in registers ([`super::online`]), the row
//!    statistics in `m64n16` accumulators (the same rows, a few registers), the row
//!    sums of `P` by `reduce_rows`, `O = α·O`;
//! 3. `P` rounded to the storage type into `A` fragments held in registers
//!    (`convert`, 16 keys each: `wgmma` reads its `A` from registers);
//! 4. `O += P·V` (`m64nDk16`, `B` the values by rows: the transposed operand).
//!
//! One barrier per block: at its top, this block's values and the next block's keys
//! are in, and every warpgroup is done with the block before; the copies into the
//! stages it read start there. `S` of the next block is issued before this block's
//! softmax and runs while it does (two `S` accumulators; the next one becomes this
//! one before `O` is rescaled); `P·V` runs to the end of the block. The end is
//! [`super::lower`]'s: `O`, `l` and the shift stored to shared memory (`O` in the key
//! tile's bytes), `o = O / l`, and `lse`.
//!
//! With `causal`, the blocks no row sees are skipped and those every row sees whole
//! multiply as above; a block some row sees in part keeps a hidden key's value away
//! from its row as [`super::hidden_values`] describes (its non-finite values set to
//! 0 for the multiply, their products added where a row sees them).

use super::hidden_values::{add_nonfinite_products, keep_weights, sanitize_values, PartlySeen};
use super::lower::{
    block_coords, declare_buffers, each_workgroup, key_block_count, shape_of, single_launch, Shape,
    Tiles,
};
use super::online::{
    exponentiate, natural_shift, partly_visible, rescale, scale_and_mask, store_and_finish,
    Leftovers, RowStatistics, ScoreBlock,
};
use super::staging::{copy_rows, swizzled, Placement};
use super::AttentionSpec;
use crate::lower::math::Num;
use crate::lower::{LowerError, Plan, TargetCaps, Uniforms};
use crate::spec::OpSpec;
use kernelc_ir::builder::*;
use kernelc_ir::fragment::{
    FragmentLayout, FragmentRole, MmaShape, RowReduction, SWIZZLE_BYTES, TILE, WARPGROUP,
};
use kernelc_ir::{FragmentId, ScalarType};

/// Rows of the multiplies: a warpgroup's query rows.
const ROWS: u32 = 64;
/// Depth of one multiply.
const DEPTH: u32 = 16;

/// The sizes of one lowering.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct WarpgroupTiles {
    /// Keys per block: the width of `S`.
    bk: u32,
    /// `head_dim` rounded up to a swizzled row (64): the columns of Q and K.
    dk: u32,
    /// `head_dim` rounded up to a multiply width: the columns of `O` and V.
    dn: u32,
    /// Whether blocks some rows see in part keep what [`super::hidden_values`] needs.
    causal: bool,
}

impl WarpgroupTiles {
    fn scores(&self) -> MmaShape {
        width(self.bk)
    }
    fn out(&self) -> MmaShape {
        width(self.dn)
    }
    /// A row of `O` at the end: 8 words past a multiple of 32.
    fn acc_stride(&self) -> u32 {
        self.dn + 8
    }
    fn shared_bytes(&self, dtype: ScalarType) -> u64 {
        let elem = dtype.size_bytes() as u64;
        let (rows, bk) = (ROWS as u64, self.bk as u64);
        let (dk, dn) = (self.dk as u64, self.dn as u64);
        let keys_or_out = (2 * bk * dk * elem).max(4 * rows * self.acc_stride() as u64);
        let partly_seen = match self.causal {
            true => PartlySeen::shared_bytes(ROWS, self.bk, self.dn),
            false => 0,
        };
        (rows * dk + 2 * bk * dn) * elem + keys_or_out + 2 * 4 * rows * 16 + partly_seen
    }
}

/// Elements of a swizzled row: the kernel's operands are 16-bit.
const SWIZZLE_ROW: u32 = SWIZZLE_BYTES / 2;

/// The (unswizzled) index of column `c` of a swizzled tile: its block of 64
/// columns, and its place in the block's first row.
fn column(c: u32) -> u32 {
    c / SWIZZLE_ROW * (TILE * SWIZZLE_ROW) + c % SWIZZLE_ROW
}

/// The `m64` multiply `n` columns wide.
fn width(n: u32) -> MmaShape {
    MmaShape {
        m: ROWS,
        n,
        k: DEPTH,
    }
}

/// The widths the warpgroup multiplies come in (`MMA_KINDS`), narrowest first.
const WIDTHS: [u32; 3] = [64, 128, 256];

/// The tiles of the warpgroup kernel for `spec` on `caps`, or `None` where another
/// kernel serves: no warpgroup fragments, another dtype, empty sequences, a
/// head dim past 256, or too little shared memory.
pub(super) fn tiles(spec: &AttentionSpec, caps: &TargetCaps) -> Option<WarpgroupTiles> {
    let eligible = caps.warpgroup_fragments
        && caps.async_copies
        && matches!(spec.dtype, ScalarType::F16 | ScalarType::Bf16)
        && spec.head_dim % 8 == 0
        && caps.max_invocations_per_workgroup >= WARPGROUP
        && spec.seq_q > 0
        && spec.seq_k > 0;
    if !eligible {
        return None;
    }
    let d = u32::try_from(spec.head_dim).ok()?;
    let dn = WIDTHS.into_iter().find(|&w| w >= d)?;
    // Rows of the swizzled layout: 64 elements.
    let dk = d.next_multiple_of(SWIZZLE_ROW);
    // 64 keys a block: S takes 32 registers, O up to 128, the staged rows in flight
    // the rest.
    let bk = 64;
    let t = WarpgroupTiles {
        bk,
        dk,
        dn,
        causal: spec.causal,
    };
    (t.shared_bytes(spec.dtype) <= caps.opt_in_shared_memory_limit() as u64).then_some(t)
}

/// The shared arrays: tiles in the storage type, the end's f32 rows.
struct Staged {
    io: super::lower::Buffers,
    /// Queries `[64][dk]`, keys `[2][bk][dk]`, values `[2][bk][dn]`: swizzled.
    qs: Mem,
    ks: Mem,
    vs: Mem,
    /// `O` at the end, `[64][acc_stride]`, in the key tiles' bytes.
    acc: Mem,
    /// `l` and the shift of each row at the end, `[16][64]` (a row's at its index).
    sum: Mem,
    shift: Mem,
    /// With `causal`: the weights and flags of partly seen blocks.
    partly_seen: Option<PartlySeen>,
}

/// The warpgroup's fragments.
struct Fragments {
    a: FragmentId,
    b: FragmentId,
    /// `P` by 16 keys (`O`'s `A`, in registers) and `O`'s `B`.
    p: Vec<FragmentId>,
    v: FragmentId,
    scores: FragmentId,
    /// The next block's `S`, multiplying while this block's softmax runs.
    next_scores: FragmentId,
    out: FragmentId,
    stats: RowStatistics,
    /// `l` per row (in every column).
    sum: FragmentId,
}

pub(super) fn attention(
    spec: &AttentionSpec,
    caps: &TargetCaps,
    wt: WarpgroupTiles,
) -> Result<Plan, LowerError> {
    let tiles = Tiles {
        bq: ROWS,
        bk: wt.bk,
        rows: 1,
        k_stride: wt.dk,
    };
    let sh = shape_of(spec, caps, tiles, WARPGROUP)?;
    let op = OpSpec::Attention(spec.clone());
    let mut k = KernelBuilder::new(format!("{}_wgmma", op.name()), [WARPGROUP, 1, 1]);
    let uniforms = op.uniforms();
    let scale = Uniforms::new(&uniforms).param("scale")?;
    let io = declare_buffers(&mut k, &op, &scale)?;
    let (dt, f32) = (spec.dtype, ScalarType::F32);
    let ks = k.shared("k_tiles", dt, 2 * wt.bk * wt.dk);
    let m = Staged {
        io,
        qs: k.shared("q_tile", dt, ROWS * wt.dk),
        vs: k.shared("v_tiles", dt, 2 * wt.bk * wt.dn),
        acc: k.shared_reusing("acc", f32, ROWS * wt.acc_stride(), ks),
        ks,
        sum: k.shared("row_sum", f32, 16 * ROWS),
        shift: k.shared("row_shift", f32, 16 * ROWS),
        partly_seen: wt
            .causal
            .then(|| PartlySeen::declare(&mut k, ROWS, wt.bk, wt.dn)),
    };
    let kernel = k.build(|f| {
        let (s, o, stat) = (wt.scores(), wt.out(), width(16));
        let fr = Fragments {
            a: f.fragment("q", FragmentRole::A, s, dt),
            b: f.fragment("k", FragmentRole::B, s, dt),
            p: (0..wt.bk / DEPTH)
                .map(|_| f.fragment_in_registers("p", o, dt))
                .collect(),
            v: f.fragment("v", FragmentRole::B, o, dt),
            scores: f.fragment("s", FragmentRole::Accumulator, s, f32),
            next_scores: f.fragment("s_next", FragmentRole::Accumulator, s, f32),
            out: f.fragment("o", FragmentRole::Accumulator, o, f32),
            stats: RowStatistics {
                max: f.fragment("row_max", FragmentRole::Accumulator, stat, f32),
                block: f.fragment("block", FragmentRole::Accumulator, stat, f32),
                alpha: f.fragment("alpha", FragmentRole::Accumulator, stat, f32),
            },
            sum: f.fragment("row_sum", FragmentRole::Accumulator, stat, f32),
        };
        each_workgroup(f, &sh, |f, wg| body(f, &sh, wt, &m, &fr, wg))
    })?;
    Ok(single_launch(&op, kernel, sh.grid, scale))
}

fn body(f: &mut Body, sh: &Shape, wt: WarpgroupTiles, m: &Staged, fr: &Fragments, wg: E) {
    let blk = block_coords(f, sh, wg);
    let n = Num::scalar(ScalarType::F32);
    let q_at = (&blk.q_base, sh.q_layout.row_stride);
    let kv_at = (&blk.kv_base, sh.kv_layout.row_stride);
    let zero = E::from(0u32);
    let half = ScalarType::F16;
    let (q_tile, k_tile, v_tile) = (
        swizzled(wt.dk, half),
        swizzled(wt.dk, half),
        swizzled(wt.dn, half),
    );
    let (k_size, v_size) = (wt.bk * wt.dk, wt.bk * wt.dn);
    // Key or value block `kb` into stage `kb mod 2` of `dst` (not committed).
    let stage = |f: &mut Body, kb: &E, (src, dst, cols, tile): (Mem, Mem, u32, &Placement)| {
        let k0 = f.let_("k0", kb.clone() * wt.bk);
        let stage = f.let_("stage", (kb.clone() % 2u32) * (wt.bk * cols));
        let rows = (src, wt.bk, cols);
        copy_rows(f, sh, rows, (&k0, sh.seq_k), kv_at, (dst, &stage, tile));
    };
    let keys = |f: &mut Body, kb: &E| stage(f, kb, (m.io.k, m.ks, wt.dk, &k_tile));
    let values = |f: &mut Body, kb: &E| stage(f, kb, (m.io.v, m.vs, wt.dn, &v_tile));
    // `S = Q·Kᵀ` of block `kb` into `s`, issued (the multiplies run on while the
    // kernel goes on to statements that leave `s` alone).
    let scores = |f: &mut Body, kb: &E, s: FragmentId| {
        let k_stage = f.let_("k_stage", (kb.clone() % 2u32) * k_size);
        f.fill_fragment(s, n.lit(0.0));
        for kd in 0..wt.dk / DEPTH {
            let band = TILE * wt.dk;
            let at = column(kd * DEPTH);
            f.load_fragment(fr.a, m.qs, at, band, FragmentLayout::RowMajorSwizzled);
            let k_at = k_stage.clone() + at;
            f.load_fragment(fr.b, m.ks, k_at, band, FragmentLayout::ColMajorSwizzled);
            f.mma(s, fr.a, fr.b, s);
        }
    };
    let q_dst = (m.qs, &zero, &q_tile);
    let q_rows_in = (m.io.q, ROWS, wt.dk);
    copy_rows(f, sh, q_rows_in, (&blk.q0, sh.seq_q), q_at, q_dst);
    keys(f, &zero);
    values(f, &zero);
    f.copy_commit();
    let one = E::from(1u32);
    keys(f, &one);
    f.copy_commit();
    f.fill_fragment(fr.out, n.lit(0.0));
    f.fill_fragment(fr.stats.max, n.lit(f64::NEG_INFINITY));
    f.fill_fragment(fr.sum, n.lit(0.0));
    let scale_log2 = f.let_(
        "scale_log2",
        m.io.scale.clone() * n.lit(std::f64::consts::LOG2_E),
    );
    // The queries and the first block's keys and values are in.
    f.copy_wait(1);
    f.barrier();
    scores(f, &zero, fr.scores);
    // The first scores end before the loop (a barrier waits for them): LLVM sets the
    // registers of `O` to zero where the loop starts, and a register of a multiply
    // written while another multiply runs makes ptxas serialise them all.
    f.barrier();
    let key_blocks = key_block_count(f, sh, &blk);
    f.for_("kb", 0u32, key_blocks, 1, |f, kb| {
        // Block `kb`'s values and the next block's keys are in; every warpgroup is
        // done with the block before (its `S` and `P·V` ended with its iteration).
        f.copy_wait(0);
        f.barrier();
        let k0 = f.let_("k0", kb.clone() * wt.bk);
        let v_stage = f.let_("v_stage", (kb.clone() % 2u32) * v_size);
        // Into the stages the block before read: keys two blocks on, the next values.
        let next = f.let_("kb_next", kb.clone() + 1u32);
        keys(f, &(kb.clone() + 2u32));
        values(f, &next);
        f.copy_commit();
        // The next block's scores multiply while this block's softmax runs.
        scores(f, &next, fr.next_scores);
        let score_block = ScoreBlock {
            io: &m.io,
            blk: &blk,
            k0: &k0,
            first_row: &zero,
            bk: wt.bk,
        };
        scale_and_mask(f, sh, &score_block, &[(fr.scores, 0)], &scale_log2);
        exponentiate(f, &fr.stats, &[fr.scores]);
        f.reduce_rows(fr.stats.block, &[fr.scores], RowReduction::Sum);
        let args = [fr.sum, fr.stats.alpha, fr.stats.block];
        f.map_fragment(fr.sum, &args, |_, _, _, x| {
            x[0].clone() * x[1].clone() + x[2].clone()
        });
        for (kp, &p) in (0u32..).zip(&fr.p) {
            f.convert_fragments_from(p, &[fr.scores], kp * DEPTH);
        }
        let partly_seen = m.partly_seen.zip(partly_visible(sh, wt.bk, &blk, &k0));
        if let Some((at, partial)) = &partly_seen {
            f.if_(partial.clone(), |f| {
                keep_weights(f, at, fr.scores, &zero);
            });
        }
        // The next block's scores are this one's for the next iteration (they end
        // here: `O` is rescaled outside their multiplies, which ptxas would otherwise
        // serialise with `P·V`'s).
        f.map_fragment(fr.scores, &[fr.next_scores], |_, _, _, x| x[0].clone());
        rescale(f, &fr.stats, &[fr.out]);
        if let Some((at, partial)) = &partly_seen {
            f.if_(partial.clone(), |f| {
                let tile = (m.vs, &v_stage, &v_tile);
                sanitize_values(f, sh, tile, (wt.bk, wt.dn), at.flags);
                f.barrier();
            });
        }
        // O += P·V.
        for (kp, &p) in (0u32..).zip(&fr.p) {
            let v_band = TILE * wt.dn;
            // Rows `16·kp ..`: two bands.
            let v_at = v_stage.clone() + 2 * kp * v_band;
            f.load_fragment(fr.v, m.vs, v_at, v_band, FragmentLayout::RowMajorSwizzled);
            f.mma(fr.out, p, fr.v, fr.out);
        }
        if let Some((at, partial)) = &partly_seen {
            f.if_(partial.clone(), |f| {
                add_nonfinite_products(f, sh, &score_block, at, fr.out);
            });
        }
    });
    f.copy_wait(0);
    natural_shift(f, &fr.stats);
    f.barrier();
    let leftovers = Leftovers {
        out: vec![(fr.out, zero.clone())],
        acc: (m.acc, wt.acc_stride()),
        sum: (fr.sum, m.sum),
        shift: (fr.stats.max, m.shift),
        first_row: &zero,
        rows: ROWS,
    };
    store_and_finish(f, sh, &m.io, &blk, leftovers);
}

#[cfg(test)]
mod tests {
    use crate::lower::{lower, TargetCaps};
    use crate::op::Op;
    use crate::ops::attention::AttentionSpec;
    use crate::spec::OpSpec;
    use kernelc_ir::ScalarType;

    /// f16/bf16 attention on sm_90 is the warpgroup kernel (head dims of a multiple
    /// of 8 up to 256, `causal` or not); without warpgroup fragments, the warp
    /// kernel.
    #[test]
    fn the_warpgroup_kernel_serves_what_it_can() {
        let name = |spec: &AttentionSpec, caps: &TargetCaps| {
            let plan = lower(&OpSpec::Attention(spec.clone()), caps).unwrap();
            plan.launches[0].kernel.name.clone()
        };
        let sm90 = TargetCaps::cuda_sm90();
        let sm80 = TargetCaps {
            warpgroup_fragments: false,
            ..sm90.clone()
        };
        for head_dim in [8, 64, 128, 256] {
            let spec = AttentionSpec {
                dtype: ScalarType::Bf16,
                head_dim,
                causal: false,
                ..AttentionSpec::example()
            };
            assert!(name(&spec, &sm90).ends_with("_wgmma"), "{head_dim}");
            assert!(name(&spec, &sm80).ends_with("_mma"), "{head_dim}");
            let causal = AttentionSpec {
                causal: true,
                ..spec
            };
            assert!(name(&causal, &sm90).ends_with("_wgmma"), "{head_dim}");
            assert!(name(&causal, &sm80).ends_with("_mma"), "{head_dim}");
        }
        // Rows copied 16 bytes at a time: a head dim of a multiple of 8.
        let ragged = AttentionSpec {
            dtype: ScalarType::Bf16,
            head_dim: 100,
            ..AttentionSpec::example()
        };
        assert!(name(&ragged, &sm90).ends_with("_mma"));
        let wide = AttentionSpec {
            dtype: ScalarType::F16,
            head_dim: 320,
            ..AttentionSpec::example()
        };
        assert!(!name(&wide, &sm90).ends_with("_wgmma"));
    }
}
