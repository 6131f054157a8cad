//! Sums over the existing terms only, for operands with absent elements (see "Absent
//! elements" in the engine's module docs): the definition's `Σ_p A(i, p)·B(p, j)`
//! element by element, which replaces a tiled sum that came out NaN.

use super::kernel::{Mems, Place};
use super::schedule::TileKernel;
use super::{add, and_opt, div, rem, scale, BiasAxis, GemmCore, GemmOperand};
use crate::lower::math::{bind, Num};
use kernelc_ir::builder::*;

impl GemmCore {
    /// Whether an operand has elements that do not exist (read as zero by the slab
    /// loads), so that a NaN sum may hold a `0·∞` term the definition does not have.
    pub(super) fn has_absent(&self) -> bool {
        self.a.gather.has_absent() || self.b.gather.has_absent()
    }

    /// Element `index` of operand `op` bound to `mem`, in the compute type (`num`'s
    /// lanes), rounded first when the GEMM rounds its inputs.
    pub(super) fn load_operand(
        &self,
        f: &mut Body,
        num: &Num,
        mem: Mem,
        op: &GemmOperand,
        index: E,
    ) -> E {
        let v = num.load(mem, op.dtype, index);
        match self.input_rounding.map(|r| (r, r.storage())) {
            Some((_, Some(to))) => v.cast(to).cast(num.ty),
            Some((_, None)) => num.round_to_tf32(bind(f, "unrounded", v)),
            None => v,
        }
    }

    /// `Σ_p A(i, p)·B(p, j)` over the `p` where both elements exist, in order of `p`
    /// with one `fma` per term as the tiled sum adds them; `a` and `b` are the operands'
    /// buffers, `off_a` and `off_b` their batch offsets. `i < m` and `j < n`.
    pub(super) fn exact_dot(
        &self,
        f: &mut Body,
        (a, b): (Mem, Mem),
        (off_a, off_b): (&E, &E),
        i: &E,
        j: &E,
    ) -> E {
        let num = Num::scalar(self.compute());
        let sum = f.var("exact", num.lit(0.0));
        f.for_("ep", 0u32, self.k, 1, |f, p| {
            let (at_a, in_a) = self.a.gather.address(f, i, &p);
            let (at_b, in_b) = self.b.gather.address(f, j, &p);
            // Loaded only where both exist: an absent element's offset may lie outside.
            let term = |f: &mut Body| {
                let x = self.load_operand(f, &num, a, &self.a, add(off_a.clone(), at_a));
                let y = self.load_operand(f, &num, b, &self.b, add(off_b.clone(), at_b));
                f.assign(sum, x.fma(y, sum.get()))
            };
            match and_opt(in_a, in_b) {
                Some(exists) => f.if_(exists, term),
                None => term(f),
            }
        });
        sum.get()
    }
}

impl<'a> TileKernel<'a> {
    /// After a micro-tile's epilogue (`first_row`, `first_col`: its first element in C):
    /// if its accumulators `acc` sum to NaN, every element of it is summed again over the
    /// existing terms ([`GemmCore::exact_dot`]) and stored again through the epilogue.
    pub(super) fn recompute_nan(
        &self,
        f: &mut Body,
        m: &Mems,
        place: &Place,
        (first_row, first_col): (&E, &E),
        acc: &[Vec<E>],
    ) {
        let t = self.tile;
        let core = self.core;
        let (vm, vn) = (t.vm as u32, t.vn as u32);
        let Some(total) = acc.iter().flatten().cloned().reduce(|x, y| x + y) else {
            return;
        };
        let total = bind(f, "tile_sum", total);
        let total = if vn == 1 {
            total
        } else {
            let lanes = (1..vn).map(|l| total.clone().lane(l as u8));
            bind(
                f,
                "tile_sum",
                lanes.fold(total.clone().lane(0), |s, x| s + x),
            )
        };
        f.if_(total.clone().ne(total), |f| {
            f.for_("er", 0u32, t.tm, 1, |f, r| {
                // Micro-tile row `r` is shared row `(r / vm)·ty·vm + r % vm` (see
                // `row_offset`), column `c` is `(c / vn)·tx·vn + c % vn`.
                let below = add(scale(div(r.clone(), vm), t.ty * vm), rem(r, vm));
                let row = bind(f, "e_row", add(first_row.clone(), below));
                f.if_(row.clone().lt(core.m), |f| {
                    let row_bias = self.row_bias(f, m, &row);
                    f.for_("ec", 0u32, t.tn, 1, |f, c| {
                        let right = add(scale(div(c.clone(), vn), t.tx * vn), rem(c, vn));
                        let col = bind(f, "e_col", add(first_col.clone(), right));
                        f.if_(col.clone().lt(core.n), |f| {
                            let sum = core.exact_dot(
                                f,
                                (m.a, m.b),
                                (&place.off_a, &place.off_b),
                                &row,
                                &col,
                            );
                            let at = add(scale(row.clone(), core.c.ld), col.clone());
                            let index = bind(f, "e_at", add(place.off_c.clone(), at));
                            let v = self.finish_value(f, m, &index, &col, row_bias.clone(), sum, 1);
                            f.store(m.out, index, v);
                        });
                    });
                });
            });
        });
    }

    /// The bias of C's row `row`, where the bias follows rows.
    pub(super) fn row_bias(&self, f: &mut Body, m: &Mems, row: &E) -> Option<E> {
        match (&self.core.bias, m.bias) {
            (Some(bs), Some(mem)) if bs.along == BiasAxis::Rows => Some(bind(
                f,
                "row_bias",
                Num::scalar(self.core.compute()).load(mem, bs.dtype, row.clone()),
            )),
            _ => None,
        }
    }
}
