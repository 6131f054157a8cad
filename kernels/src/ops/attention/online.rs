//! The online softmax of the fragment kernels, on accumulators in registers
//! (`map`, `reduce_rows`): scores scaled and masked in the log₂ domain, the running
//! max, the rescale `α` and `P = 2^{S − shift}`. The scores carry the factor log₂e
//! (`scale·log₂e` is one multiply), so each weight is one `exp2`, as FlashAttention
//! does; the rounding of `s·log₂e` moves a weight by `|s|·u`.

use super::lower::{finish, Block, Buffers, Shape};
use crate::lower::math::Num;
use kernelc_ir::builder::*;
use kernelc_ir::fragment::{FragmentLayout, RowReduction};
use kernelc_ir::{FragmentId, ScalarType};

/// Where a group's block of scores lies.
pub(super) struct ScoreBlock<'a> {
    pub io: &'a Buffers,
    pub blk: &'a Block,
    /// The block's first key.
    pub k0: &'a E,
    /// The fragments' first row within the workgroup's rows.
    pub first_row: &'a E,
    /// Keys per block.
    pub bk: u32,
}

/// The statistics of a group's rows, each an accumulator holding a row's value in
/// every column.
pub(super) struct RowStatistics {
    /// The running max (log₂ domain, may be −∞).
    pub max: FragmentId,
    /// This block's max, then scratch.
    pub block: FragmentId,
    /// The rescale `2^{max_old − shift}` of what was accumulated.
    pub alpha: FragmentId,
}

fn f32s() -> Num {
    Num::scalar(ScalarType::F32)
}

/// The max, or 0 while it is −∞ (so that `2^{−∞ − shift}` is 0, never NaN).
pub(super) fn finite_shift(max: E) -> E {
    let n = f32s();
    max.clone()
        .eq(n.lit(f64::NEG_INFINITY))
        .select(n.lit(0.0), max)
}

/// With `causal`: whether some row of the workgroup sees the block's keys only in
/// part (uniform); `None` without `causal`. Every row sees every key of the block iff
/// its first row does: `k0 + bk − 1 + seq_q ≤ q0 + causal_keys`.
pub(super) fn partly_visible(sh: &Shape, bk: u32, blk: &Block, k0: &E) -> Option<E> {
    sh.causal.then(|| {
        (k0.clone() + (bk + sh.seq_q))
            .le(blk.q0.clone() + (sh.causal_keys + 1))
            .eq(false)
    })
}

/// Whether every key of the block from `k0` (`bk` of them) lies inside the sequence
/// and (causal) every row of the workgroup sees it: its scores need only the scale.
fn whole_block(sh: &Shape, bk: u32, blk: &Block, k0: &E) -> E {
    let inside = (k0.clone() + bk).le(sh.seq_k);
    match partly_visible(sh, bk, blk, k0) {
        Some(partial) => inside & partial.eq(false),
        None => inside,
    }
}

/// Runs `scaled` where the block from `k0` needs only the scale (no mask, every key
/// inside the sequence and seen by every row: [`whole_block`]), else `masked`.
pub(super) fn scaled_or_masked(
    f: &mut Body,
    sh: &Shape,
    (bk, blk, k0): (u32, &Block, &E),
    scaled: impl FnOnce(&mut Body),
    masked: impl Fn(&mut Body),
) {
    if sh.mask.is_some() {
        masked(f);
    } else {
        f.if_else(whole_block(sh, bk, blk, k0), scaled, |f| masked(f));
    }
}

/// Score `dot` of query `i` and key `kj` as `(scale·dot + mask)·log₂e`, or `−∞` where
/// the key is hidden from the query or either lies past its sequence.
pub(super) fn masked_score(
    f: &mut Body,
    sh: &Shape,
    (io, blk): (&Buffers, &Block),
    dot: E,
    (i, kj): (&E, &E),
) -> E {
    let n = f32s();
    let score = f.var("score", n.lit(f64::NEG_INFINITY));
    // A branch, not a select: a hidden pair's mask element may lie past the mask.
    f.if_(sh.sees(i, kj), |f| {
        let s = sh.score(io, blk, dot, (i.clone(), kj.clone()));
        f.assign(score, s * n.lit(std::f64::consts::LOG2_E));
    });
    score.get()
}

/// Each score `(fragment, its first column in the block)` becomes
/// `(scale·dot + mask)·log₂e`, or `−∞` where the key is hidden or past the sequences;
/// a block every row sees whole, without a mask, is only scaled.
pub(super) fn scale_and_mask(
    f: &mut Body,
    sh: &Shape,
    at: &ScoreBlock,
    scores: &[(FragmentId, u32)],
    scale_log2: &E,
) {
    let masked = |f: &mut Body| {
        for &(s, first_col) in scores {
            f.map_fragment(s, &[s], |f, row, col, x| {
                let i = f.let_("i", at.blk.q0.clone() + at.first_row.clone() + row);
                let kj = f.let_("kj", at.k0.clone() + first_col + col);
                masked_score(f, sh, (at.io, at.blk), x[0].clone(), (&i, &kj))
            });
        }
    };
    let scaled = |f: &mut Body| {
        for &(s, _) in scores {
            f.map_fragment(s, &[s], |_, _, _, x| x[0].clone() * scale_log2.clone());
        }
    };
    scaled_or_masked(f, sh, (at.bk, at.blk, at.k0), scaled, masked);
}

/// The running max over the block's `scores`, the rescale `α`, and `P = 2^{S − shift}`
/// in place of the scores. `st.block` is left holding the new max.
pub(super) fn exponentiate(f: &mut Body, st: &RowStatistics, scores: &[FragmentId]) {
    f.reduce_rows(st.block, scores, RowReduction::Max);
    f.map_fragment(st.block, &[st.max, st.block], |_, _, _, x| {
        x[0].clone().max(x[1].clone())
    });
    f.map_fragment(st.alpha, &[st.max, st.block], |_, _, _, x| {
        (x[0].clone() - finite_shift(x[1].clone())).exp2()
    });
    f.map_fragment(st.max, &[st.block], |_, _, _, x| x[0].clone());
    for &s in scores {
        f.map_fragment(s, &[s, st.max], |_, _, _, x| {
            (x[0].clone() - finite_shift(x[1].clone())).exp2()
        });
    }
}

/// `O = α·O` for each accumulator of `out`.
pub(super) fn rescale(f: &mut Body, st: &RowStatistics, out: &[FragmentId]) {
    for &o in out {
        f.map_fragment(o, &[o, st.alpha], |_, _, _, x| x[0].clone() * x[1].clone());
    }
}

/// The running max in natural-log units (for `lse = shift + ln l`): its finite
/// shift times ln 2, in place.
pub(super) fn natural_shift(f: &mut Body, st: &RowStatistics) {
    f.map_fragment(st.max, &[st.max], |_, _, _, x| {
        finite_shift(x[0].clone()) * f32s().lit(std::f64::consts::LN_2)
    });
}

/// Where a fragment kernel leaves its rows at the end: `O`'s accumulators (each at its
/// index of `acc`, rows `stride` apart), and `l` and the shift of its rows (column 0
/// of each at the row's index of `sum` and `shift`: the accumulators stored
/// column-major, `rows` apart, from `first_row`).
pub(super) struct Leftovers<'a> {
    pub out: Vec<(FragmentId, E)>,
    pub acc: (Mem, u32),
    pub sum: (FragmentId, Mem),
    pub shift: (FragmentId, Mem),
    pub first_row: &'a E,
    pub rows: u32,
}

/// Stores the rows' `O`, `l` and shift, then [`finish`]es from shared memory.
pub(super) fn store_and_finish(f: &mut Body, sh: &Shape, io: &Buffers, blk: &Block, at: Leftovers) {
    let (acc, stride) = at.acc;
    for (o, index) in at.out {
        f.store_fragment(o, acc, index, stride, FragmentLayout::RowMajor);
    }
    for (frag, mem) in [at.sum, at.shift] {
        let first = at.first_row.clone();
        f.store_fragment(frag, mem, first, at.rows, FragmentLayout::ColMajor);
    }
    f.barrier();
    finish(f, sh, io, at.acc, (at.sum.1, at.shift.1), blk);
}
