//! `causal` on the warpgroup kernel: a key hidden from a row takes no part in it, so a
//! value that is ±∞ or NaN must not reach the row through its weight of 0 (`0·∞` is
//! NaN). A block every row of the workgroup sees whole, or sees not at all, is
//! multiplied as it is. In a block some row sees in part:
//!
//! 1. each non-finite value of the staged tile is replaced by 0 and its column
//!    flagged ([`sanitize_values`]); the weights (f32, before rounding) are kept in
//!    shared memory ([`keep_weights`]);
//! 2. `P·V` multiplies on the matrix units as in every block: with the non-finite
//!    values at 0, a hidden pair adds `0·0` and a seen pair its finite product;
//! 3. each element of `O` in a flagged column adds, over the keys its row sees, the
//!    products of the weights with the values that are not finite, read again from
//!    the tensor ([`add_nonfinite_products`]): an ∞ or NaN a row sees still makes its
//!    element ∞ or NaN, as IEEE sums make it, whatever the finite products were.
//!
//! The non-finite products are f32 weights times the values, where the matrix units
//! would have taken the weights rounded to the storage type: the sign of an ∞ and
//! whether it meets a 0 weight are the same either way, but for a weight that rounds
//! to 0 in f16 (below 2⁻²⁴). The warp kernel ([`super::fragments`]) multiplies such
//! blocks element by element in f32 too.
//!
//! A partly seen block costs a scan of the value tile, a store of the weights, a
//! barrier and a read of a flag per element of `O`: a block or two per row of blocks.

use super::lower::{strided, Shape};
use super::online::ScoreBlock;
use super::staging::Placement;
use crate::lower::math::Num;
use kernelc_ir::builder::*;
use kernelc_ir::fragment::FragmentLayout;
use kernelc_ir::{FragmentId, ScalarType};

/// The shared arrays of partly seen blocks.
#[derive(Clone, Copy)]
pub(super) struct PartlySeen {
    /// The f32 weights, `[bq][weights_stride]`.
    pub weights: Mem,
    /// Per column of `V`: whether the block's tile had a value that is not finite
    /// (u32, 0 or 1).
    pub flags: Mem,
    pub weights_stride: u32,
}

impl PartlySeen {
    /// A row of weights 4 words past a multiple of 32 (the rows a warp's quads
    /// store hit distinct banks).
    pub fn weights_stride(bk: u32) -> u32 {
        bk + 4
    }

    /// The bytes of the arrays for `bq` rows, `bk` keys and `dn` columns of `V`.
    pub fn shared_bytes(bq: u32, bk: u32, dn: u32) -> u64 {
        4 * (bq as u64 * Self::weights_stride(bk) as u64 + dn as u64)
    }

    pub fn declare(k: &mut KernelBuilder, bq: u32, bk: u32, dn: u32) -> PartlySeen {
        let weights_stride = Self::weights_stride(bk);
        PartlySeen {
            weights: k.shared("weights", ScalarType::F32, bq * weights_stride),
            flags: k.shared("nonfinite_columns", ScalarType::U32, dn),
            weights_stride,
        }
    }
}

/// The group's weights `p` (rows from `first_row`) into [`PartlySeen::weights`].
pub(super) fn keep_weights(f: &mut Body, at: &PartlySeen, p: FragmentId, first_row: &E) {
    let stride = at.weights_stride;
    let index = first_row.clone() * stride;
    f.store_fragment(p, at.weights, index, stride, FragmentLayout::RowMajor);
}

/// Every value of the staged tile (`rows` × `cols` at `stage + place(row, col)`)
/// that is not finite becomes 0, and each column's flag says whether it had one.
pub(super) fn sanitize_values(
    f: &mut Body,
    sh: &Shape,
    (tile, stage, place): (Mem, &E, &Placement),
    (rows, cols): (u32, u32),
    flags: Mem,
) {
    let n = sh.num;
    strided(f, sh, "col", cols, |f, col| {
        let found = f.var("found", 0u32);
        f.for_("row", 0u32, rows, 1, |f, row| {
            let at = f.let_("at", stage.clone() + place(row, col.clone()));
            let v = n.widen(tile.at(at.clone()), sh.dtype);
            f.if_(is_finite(n, v).eq(false), |f| {
                f.store(tile, at, Num::scalar(sh.dtype).lit(0.0));
                f.assign(found, 1u32);
            });
        });
        f.store(flags, col, found.get());
    });
}

/// `|v| < ∞`: false for ±∞ and NaN.
fn is_finite(n: Num, v: E) -> E {
    v.abs().lt(n.lit(f64::INFINITY))
}

/// For each element of `out` (`O`, its columns `V`'s) in a flagged column: the
/// products of the weights with the non-finite values of the keys its row sees.
pub(super) fn add_nonfinite_products(
    f: &mut Body,
    sh: &Shape,
    b: &ScoreBlock,
    at: &PartlySeen,
    out: FragmentId,
) {
    let n = sh.num;
    let from = f.let_("k_from", b.k0.clone() + sh.seq_q);
    // Keys past the sequence are no values at all.
    let in_sequence = f.let_("in_sequence", E::from(sh.seq_k) - b.k0.clone());
    f.map_fragment(out, &[out], |f, row, col, x| {
        let extra = f.var("nonfinite_pv", n.lit(0.0));
        f.if_(at.flags.at(col.clone()).ne(0u32), |f| {
            let r = f.let_("r", b.first_row.clone() + row);
            let i = b.blk.q0.clone() + r.clone();
            let seen = sh.keys_seen(&from, i, b.bk).min(in_sequence.clone());
            let w_row = f.let_("w_row", r * at.weights_stride);
            f.for_("key", 0u32, seen, 1, |f, key| {
                let kj = b.k0.clone() + key.clone();
                let src = b.blk.kv_base.clone() + kj * sh.kv_layout.row_stride + col.clone();
                let v = f.let_("v", n.load(b.io.v, sh.dtype, src));
                f.if_(is_finite(n, v.clone()).eq(false), |f| {
                    let p = at.weights.at(w_row.clone() + key);
                    f.assign(extra, extra.get() + p * v);
                });
            });
        });
        x[0].clone() + extra.get()
    });
}
